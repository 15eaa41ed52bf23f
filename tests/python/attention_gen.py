"""Random attention blocks for differential testing (test_differential.py).

A case is one attention block, drawn fusible, then changed by its kind's perturbation; the kind
says which contract of the fused op, if any, the change breaks for each target:

    target ort   com.microsoft.MultiHeadAttention
    target onnx  ai.onnx Attention (opset 23)

    q ─────────────── MatMul ─ [Cast f32] ─ Mul|Div(scale) ─ [Add mask] ─ Softmax ─┐
    k ─ [Transpose] ──┘  (or q·√s and kᵀ·√s before the MatMul)                     │
        ┌─────────────────────────────────────────────────────────────────────────┘
        └─ [NaN guard] ─ [Cast back] ─ MatMul ─ [merge] ─ y
                                 v ──┘

A kind whose block breaks no contract must fuse; one that breaks a contract must be left as it
was. Either way the written model must load in ONNX Runtime and compute what the input computes.

Needs only numpy and onnx.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from types import FunctionType
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16,
             np.float64: TensorProto.DOUBLE}
# The IR version the ONNX release that introduced each opset wrote.
IR_VERSION = {11: 6, 13: 7, 17: 8, 18: 8, 23: 11}
TARGETS = ("ort", "onnx")


@dataclass
class Block:
    """One attention block, as drawn."""
    dtype: type = np.float32
    b: int = 2
    h: int = 2
    s: int = 3
    l: int = 3
    d: int = 4
    h_kv: int = 0  # 0: h
    d_v: int = 0  # 0: d
    kv_batch: int = 0  # 0: b; 1 broadcasts k and v over q's batch
    opset: int = 17
    scale: float = 0.5
    scale_form: str = "mul"  # mul | mul_left | div | pre | q | k | q_div | k_div | none
    scale_shape: tuple = ()
    scale_values: int = 1  # elements of the scale tensor (>1: not a scalar)
    divisor: float | None = None  # div: the constant written, when not 1/scale
    k_layout: str = "bnsh"  # bnsh | bsnh | bnhs | detour
    casts: str = "none"  # none | float32 | float64 (round trip around Softmax)
    # A shape of an additive input mask; "where" (a bool input selecting 0 or −inf, added);
    # "causal_trilu" (SDPA's is_causal as TorchScript writes it, added); "causal_select" or
    # "band_select" (a constant triangle, or band, selecting the scores or finfo.min); or None.
    mask: tuple | str | None = None
    nan_guard: bool = False
    # A Dropout between Softmax and ·V: "inference" (its ratio given, training_mode false),
    # "mode_input" (training_mode a graph input, fed false) or "none".
    dropout: str = "none"
    merge: bool = False
    softmax_axis: int | None = -1  # None: attribute left out (the opset's default)
    shapes: str = "static"  # static | symbolic (batch, sequences) | heads (heads too) | none
    extra_reader: bool = False  # an Identity reads the probabilities into a graph output
    interior_output: bool = False  # the scores are a graph output
    in_if_body: bool = False  # the block sits in an If's then branch, its scale in the outer graph
    q_chain: int = 0  # element-wise no-ops (Add 0, Mul 1) computing q from the input
    missing_input: bool = False  # v is read under a name nothing defines
    num_heads_flag: int | None = None  # --num-heads
    past: int = 0  # a decode step: k and v are Concat(past, new) along the sequence, graph outputs
    cache_read_early: bool = False  # a Shape of the key cache is computed before the attention
    # k and v have h_kv heads, each repeated h / h_kv times in a row as transformers' repeat_kv
    # does (Unsqueeze → Expand → Reshape), after the cache
    repeat_kv: bool = False
    softcap: float = 0.0  # > 0: Gemma 2's tanh(s / c) · c on the scaled scores, before the mask

    @property
    def total(self) -> int:
        """The key length attention sees: the past and the new keys."""
        return self.past + self.l

    @property
    def heads_kv(self) -> int:
        return self.h_kv or self.h

    @property
    def head_size_v(self) -> int:
        return self.d_v or self.d

    @property
    def batch_kv(self) -> int:
        return self.kv_batch or self.b

    @property
    def score_dtype(self) -> type:
        return {"none": self.dtype, "float32": np.float32, "float64": np.float64}[self.casts]


# ---- building the model

class _graph:
    def __init__(self, name: str):
        self.name, self.nodes, self.initializers = name, [], []
        self._count = 0

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{self.name}_{stem}_{self._count}"

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, array: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name


def _info(name: str, dtype, dims) -> onnx.ValueInfoProto:
    elem = dtype if isinstance(dtype, int) else ONNX_TYPE[dtype]
    return helper.make_tensor_value_info(name, elem, dims)


def input_shapes(blk: Block) -> dict[str, tuple[int, ...]]:
    b, kb, h, hk, s, l, d, dv = (blk.b, blk.batch_kv, blk.h, blk.heads_kv, blk.s, blk.l, blk.d,
                                 blk.head_size_v)
    k = {"bnsh": (kb, hk, l, d), "bsnh": (kb, l, hk, d), "bnhs": (kb, hk, d, l),
         "detour": (kb, hk, l, d)}[blk.k_layout]
    shapes = {"q": (b, h, s, d), "k": k, "v": (kb, hk, l, dv)}
    if blk.past:
        shapes["past_k"] = (kb, hk, blk.past, d)
        shapes["past_v"] = (kb, hk, blk.past, dv)
    if blk.dropout == "mode_input":
        shapes["training"] = ()
    if isinstance(blk.mask, tuple):
        shapes["mask"] = blk.mask
    elif blk.mask == "where":
        shapes["keep"] = (b, 1, s, blk.total)
    return shapes


def _declared(blk: Block, name: str, shape: tuple[int, ...]):
    """The dims the model declares for a graph input: all static, or the batch and sequence dims
    by name ("symbolic") and the heads too ("heads"); a dim of 1 where the block broadcasts stays
    1, and the head size is always static."""
    if blk.shapes == "none" or not shape:
        return [None] * len(shape)
    if blk.shapes == "static":
        return list(shape)
    kv_heads = "H" if blk.heads_kv == blk.h else "Hkv"
    roles = {"q": ("B", "H", "S", None), "v": ("B", kv_heads, "L", None),
             "k": {"bnsh": ("B", kv_heads, "L", None), "bsnh": ("B", "L", kv_heads, None),
                   "bnhs": ("B", kv_heads, None, "L"),
                   "detour": ("B", kv_heads, "L", None)}[blk.k_layout],
             "mask": ("B", "H", "S", "L"), "keep": ("B", None, "S", "L"),
             "past_k": ("B", kv_heads, "P", None), "past_v": ("B", kv_heads, "P", None)}[name]
    roles = roles[len(roles) - len(shape):]
    actual = {"B": blk.b, "H": blk.h, "Hkv": blk.heads_kv, "S": blk.s, "L": blk.l,
              "P": blk.past}
    out = []
    for size, role in zip(shape, roles):
        static = role is None or (role in ("H", "Hkv") and blk.shapes != "heads")
        out.append(size if static or size != actual[role] else role)
    return out


def build(blk: Block) -> onnx.ModelProto:
    """The model of one block: graph inputs q, k, v (and the mask), output y."""
    outer = _graph("m")
    g = _graph("body") if blk.in_if_body else outer
    dt, st = blk.dtype, blk.score_dtype
    shapes = input_shapes(blk)
    inputs = [_info(name, TensorProto.BOOL if name in ("keep", "training") else
                    (st if name == "mask" else dt), _declared(blk, name, shape))
              for name, shape in shapes.items()]

    q = "q"
    for i in range(blk.q_chain):
        q = g.op("Add" if i % 2 == 0 else "Mul",
                 [q, g.const(np.array(0 if i % 2 == 0 else 1, dtype=dt), "noop")])
    k, v = "k", "v_undefined" if blk.missing_input else "v"
    cache = []  # the present key and value, graph outputs
    if blk.past:  # the cache is BNSH: k_layout bnsh or detour
        k = g.op("Concat", ["past_k", k], axis=-2)
        if blk.cache_read_early:
            cache.append((g.op("Shape", [k]), TensorProto.INT64, 1))
        v = g.op("Concat", ["past_v", v], axis=2)
        cache = [(k, dt, 4), (v, dt, 4)] + cache
    if blk.repeat_kv:  # the cache is BNSH: k_layout bnsh
        def repeat(x: str, size: int) -> str:
            kb, hk, n = blk.batch_kv, blk.heads_kv, blk.total
            u = g.op("Unsqueeze", [x, g.const(np.array([2], np.int64))])
            e = g.op("Expand", [u, g.const(np.array([kb, hk, blk.h // hk, n, size], np.int64))])
            return g.op("Reshape", [e, g.const(np.array([kb, blk.h, n, size], np.int64))])
        k, v = repeat(k, blk.d), repeat(v, blk.head_size_v)
    if blk.k_layout == "bnsh":
        kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    elif blk.k_layout == "bsnh":
        kt = g.op("Transpose", [k], perm=[0, 2, 3, 1])
    elif blk.k_layout == "bnhs":
        kt = k
    else:  # the dynamo exporter's detour through 3-D
        kb, hk = blk.batch_kv, blk.heads_kv
        flat = g.op("Reshape", [k, g.const(np.array([kb * hk, blk.total, blk.d], np.int64))])
        turned = g.op("Transpose", [flat], perm=[0, 2, 1])
        kt = g.op("Reshape", [turned, g.const(np.array([kb, hk, blk.d, blk.total], np.int64))])

    # The scale lives in the outer graph: a block in a body reads it from outer scope.
    def scale_const(value: float, dtype) -> str:
        array = np.full(blk.scale_shape or (), value, dtype=dtype)
        if blk.scale_values > 1:
            array = np.full((blk.scale_values,), value, dtype=dtype)
        return outer.const(array, "scale")

    if blk.scale_form == "pre":
        root = math.sqrt(blk.scale)
        scores = g.op("MatMul", [g.op("Mul", [q, scale_const(root, dt)]),
                                 g.op("Mul", [kt, scale_const(root, dt)])])
        if blk.casts != "none":
            scores = g.op("Cast", [scores], to=ONNX_TYPE[st])
        scaled = scores
    elif blk.scale_form in ("q", "k", "q_div", "k_div", "none"):
        # A factor on one side (OPT, Whisper), a divisor on one side (DeBERTa), or none (T5): the
        # op scales by what is there.
        factor = scale_const(blk.scale, dt)
        if blk.scale_form == "q":
            q = g.op("Mul", [q, factor])
        elif blk.scale_form == "k":
            kt = g.op("Mul", [factor, kt])
        elif blk.scale_form == "q_div":
            q = g.op("Div", [q, scale_const(1.0 / blk.scale, dt)])
        elif blk.scale_form == "k_div":
            kt = g.op("Div", [kt, scale_const(1.0 / blk.scale, dt)])
        scores = g.op("MatMul", [q, kt])
        if blk.casts != "none":
            scores = g.op("Cast", [scores], to=ONNX_TYPE[st])
        scaled = scores
    else:
        scores = g.op("MatMul", [q, kt])
        if blk.casts != "none":
            scores = g.op("Cast", [scores], to=ONNX_TYPE[st])
        if blk.scale_form == "div":
            divisor = blk.divisor if blk.divisor is not None else 1.0 / blk.scale
            scaled = g.op("Div", [scores, scale_const(divisor, st)])
        elif blk.scale_form == "mul_left":
            scaled = g.op("Mul", [scale_const(blk.scale, st), scores])
        else:
            scaled = g.op("Mul", [scores, scale_const(blk.scale, st)])
    if blk.softcap:
        cap = g.const(np.array(blk.softcap, st), "cap")
        scaled = g.op("Mul", [g.op("Tanh", [g.op("Div", [scaled, cap])]), cap])
    if blk.mask == "where":
        bias = g.op("Where", ["keep", g.const(np.array(0, st)),
                              g.const(np.array(-np.inf, st))])
        scaled = g.op("Add", [scaled, bias])
    elif blk.mask == "causal_trilu":
        ones = g.op("Expand", [g.const(np.array([1.0], np.float32)),
                               g.const(np.array([blk.s, blk.total], np.int64))])
        hidden = g.op("Equal", [g.op("Trilu", [ones], upper=0),
                                g.const(np.array([0.0], np.float32))])
        bias = g.op("Where", [hidden, g.const(np.array([-np.inf], st)),
                              g.const(np.array([0.0], st))])
        scaled = g.op("Add", [scaled, bias])
    elif blk.mask in ("causal_select", "band_select"):
        i, j = np.arange(blk.s)[:, None], np.arange(blk.total)[None, :]
        keep = (j <= i) & ((j > i - 2) if blk.mask == "band_select" else True)
        fill = np.finfo(np.float32).min if st == np.float32 else -np.inf
        scaled = g.op("Where", [g.const(keep.reshape(1, 1, blk.s, blk.total)), scaled,
                                g.const(np.array(fill, st))])
    elif blk.mask is not None:
        scaled = g.op("Add", [scaled, "mask"])
    axis = {} if blk.softmax_axis is None else {"axis": blk.softmax_axis}
    p = g.op("Softmax", [scaled], **axis)
    probs = p
    if blk.nan_guard:
        p = g.op("Where", [g.op("IsNaN", [p]), g.const(np.array(0, st)), p])
    if blk.casts != "none":
        p = g.op("Cast", [p], to=ONNX_TYPE[dt])
    if blk.dropout != "none":
        mode = "training" if blk.dropout == "mode_input" else g.const(np.array(False))
        p = g.op("Dropout", [p, g.const(np.array(0.1, np.float32)), mode])
    y = g.op("MatMul", [p, v])
    if blk.merge:
        y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]),
                             g.const(np.array([0, 0, -1], np.int64))])
    # Outputs declare their rank only: the ONNX checker wants a shape, the dims are the block's.
    rank = 5 if len(blk.scale_shape) == 5 else 4
    outputs = [(y, dt, 3 if blk.merge else rank)]
    if blk.extra_reader:
        outputs.append((g.op("Identity", [probs]), st, rank))
    if blk.interior_output:
        outputs.append((scores, st, 4))
    outputs += cache

    opsets = [helper.make_opsetid("", blk.opset)]
    declared = [_info(name, t, [None] * r) for name, t, r in outputs]
    if not blk.in_if_body:
        graph = helper.make_graph(g.nodes, "attention", inputs, declared, g.initializers)
    else:
        body = helper.make_graph(g.nodes, "then_branch", [], declared, g.initializers)
        other = _graph("else")
        for _ in outputs:
            other.nodes.append(helper.make_node("Identity", ["q"], [other.fresh("out")]))
        else_outputs = [_info(n.output[0], dt, [None] * 4) for n in other.nodes]
        otherwise = helper.make_graph(other.nodes, "else_branch", [], else_outputs)
        names = [f"y{i}" for i in range(len(outputs))]
        node = helper.make_node("If", ["cond"], names, name="if", then_branch=body,
                                else_branch=otherwise)
        graph = helper.make_graph([node], "attention",
                                  inputs + [_info("cond", TensorProto.BOOL, [])],
                                  [_info(n, t, [None] * r) for n, (_, t, r) in zip(names, outputs)],
                                  outer.initializers)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="attention_gen")
    model.ir_version = IR_VERSION[blk.opset]
    return model


def feed(blk: Block, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for name, shape in input_shapes(blk).items():
        if name == "training":
            out[name] = np.array(False)
        elif name == "keep":
            keep = rng.random(shape) < 0.7
            keep[..., 0] = True  # no row masked entirely
            out[name] = keep
        elif name == "mask":
            out[name] = rng.standard_normal(shape).astype(blk.score_dtype)
        else:
            out[name] = rng.standard_normal(shape).astype(blk.dtype)
    if blk.in_if_body:
        out["cond"] = np.array(True)
    return out


# ---- the kinds

def _fusible(rng: np.random.Generator, target: str) -> Block:
    """A block that breaks no contract of either target's op."""
    dtype = [np.float32, np.float16][rng.integers(2)]
    h = int(rng.choice([1, 2, 3, 4]))
    s = int(rng.choice([1, 2, 5]))
    d = int(rng.choice([2, 4, 8, 16]))
    blk = Block(dtype=dtype, b=int(rng.choice([1, 2, 3])), h=h, s=s,
                l=int(rng.choice([s, 3, 7])), d=d,
                opset=23 if target == "onnx" else int(rng.choice([17, 18, 23])),
                scale=float(rng.choice([1 / math.sqrt(d), 0.125, rng.uniform(0.05, 1.0)])),
                scale_form=str(rng.choice(["mul", "mul_left", "div", "pre"])),
                scale_shape=[(), (1,)][rng.integers(2)],
                k_layout=str(rng.choice(["bnsh", "bsnh", "bnhs", "detour"])),
                softmax_axis=[-1, 3][rng.integers(2)],
                nan_guard=bool(rng.integers(2)), merge=bool(rng.integers(2)),
                shapes=["static", "symbolic"][rng.integers(2)])
    # The pre-scaled form with casts is a kind of its own (pre_scaled_cast_round_trip).
    if dtype == np.float16 and blk.scale_form != "pre" and rng.integers(2):
        blk.casts = "float32"
    return _consistent(blk)


def _consistent(blk: Block) -> Block:
    """The dynamo exporter's kᵀ detour reshapes to constant dims: only with static shapes."""
    if blk.k_layout == "detour" and blk.shapes in ("symbolic", "heads"):
        blk.k_layout = "bnsh"
    return blk


def _set(**fields) -> Callable[[Block, np.random.Generator], None]:
    def perturb(blk: Block, rng: np.random.Generator) -> None:
        for name, value in fields.items():
            setattr(blk, name, value(blk, rng) if isinstance(value, FunctionType) else value)
    return perturb


@dataclass(frozen=True)
class Kind:
    name: str
    perturb: Callable[[Block, np.random.Generator], None]
    # The contract the perturbed block breaks, per target; a target not listed breaks none.
    breaks: dict[str, str] = field(default_factory=dict)
    # Not a valid model: the CLI must refuse it (exit 1, nothing written).
    invalid: bool = False
    # What the fusion must report where it fuses: a note's value, or one per target.
    notes: dict = field(default_factory=dict)


def _mask_shape(blk: Block, rng: np.random.Generator) -> tuple:
    n = blk.total
    return [(blk.b, blk.h, blk.s, n), (1, 1, blk.s, n), (blk.b, 1, blk.s, n),
            (1, blk.h, blk.s, n)][rng.integers(4)]


def _decode_step(blk: Block, rng: np.random.Generator) -> None:
    """A decoder's step: new keys and values appended to a past cache of a few positions."""
    blk.past = int(rng.choice([1, 4, 7]))
    blk.k_layout = str(rng.choice(["bnsh", "detour"]))
    if rng.integers(2):
        # Static dims: no declared name says that the mask spans L + P keys.
        blk.mask, blk.casts, blk.shapes = _mask_shape(blk, rng), "none", "static"


def _no_casts(blk: Block, rng: np.random.Generator) -> str:
    return "none"  # the fused ops add the bias in q's type, a float32 mask would not fit


def _grouped(**fields) -> Callable[[Block, np.random.Generator], None]:
    """Four query heads on one or two key/value heads, repeated in-graph; head sizes ONNX
    Runtime's GroupQueryAttention takes (multiples of 8)."""
    return _set(repeat_kv=True, h=4, h_kv=lambda b, r: int(r.choice([1, 2])),
                d=lambda b, r: int(r.choice([8, 16])), d_v=0, k_layout="bnsh", shapes="static",
                casts=_no_casts, **fields)


GROUPED_TARGET = {"ort": "com.microsoft GroupQueryAttention", "onnx": "ai.onnx Attention"}
BOTH = ("ort", "onnx")
KINDS: list[Kind] = [
    # ---- fusible: each must fuse
    Kind("plain", _set()),
    Kind("div_by_sqrt", _set(scale_form="div", scale=lambda b, r: 1 / math.sqrt(b.d))),
    Kind("mul_by_constant", _set(scale_form=lambda b, r: ["mul", "mul_left"][r.integers(2)])),
    Kind("pre_scaled", _set(scale_form="pre", casts="none")),
    Kind("pre_scaled_cast_round_trip", _set(scale_form="pre", dtype=np.float16, casts="float32")),
    Kind("scale_on_one_side", _set(scale_form=lambda b, r: ["q", "k"][r.integers(2)])),
    Kind("scale_divides_one_side", _set(scale_form=lambda b, r: ["q_div", "k_div"][r.integers(2)])),
    Kind("no_scale", _set(scale_form="none")),
    Kind("k_bsnh", _set(k_layout="bsnh")),
    Kind("kt_given_bnhs", _set(k_layout="bnhs")),
    Kind("k_detour_3d", _set(k_layout="detour", shapes="static")),
    Kind("fp16_cast_round_trip", _set(dtype=np.float16, casts="float32",
                                      scale_form=lambda b, r: str(r.choice(["mul", "div"])))),
    Kind("float32_no_casts", _set(dtype=np.float32, casts="none")),
    Kind("mask_input", _set(mask=_mask_shape, casts=_no_casts)),
    # A mask of rank 2 or 3 broadcast from the right: the ops read it with ones in front.
    Kind("mask_2d", _set(mask=lambda b, r: (b.s, b.total), casts=_no_casts)),
    Kind("mask_3d", _set(mask=lambda b, r: ([1, b.h][r.integers(2)], b.s, b.total),
                         casts=_no_casts)),
    Kind("mask_where_bool", _set(mask="where", casts=_no_casts, nan_guard=True)),
    # One bias for every key: the fused op reads it expanded to the key length, as Add broadcast it.
    Kind("mask_broadcast_over_keys", _set(l=3, mask=lambda b, r: (b.b, b.h, b.s, 1),
                                          casts=_no_casts)),
    # Causality alone, proven, as many queries as keys: the op's own causal form, no bias.
    Kind("mask_causal_trilu", _set(mask="causal_trilu", casts=_no_casts, shapes="static",
                                   l=lambda b, r: b.s), notes={"mask": "causal, the op's own"}),
    Kind("select_causal_triangle", _set(mask="causal_select", casts=_no_casts, shapes="static",
                                        l=lambda b, r: b.s),
         notes={"mask": "causal, the op's own"}),
    # A band hides more than the future: it stays the bias.
    Kind("select_band", _set(mask="band_select", casts=_no_casts, shapes="static", s=5, l=5),
         notes={"mask": "select, as attention bias"}),
    # Grouped key/value heads (repeat_kv) and causality: GroupQueryAttention for target ort.
    Kind("grouped_causal", _grouped(mask=lambda b, r: str(r.choice(["causal_trilu",
                                                                     "causal_select"])),
                                    l=lambda b, r: b.s),
         notes={"mask": "causal, the op's own", "target": GROUPED_TARGET}),
    # A decode step of one query, which sees every key: no mask, the cache into the op (float32:
    # in float16 ONNX Runtime's CPU GroupQueryAttention with a past is less accurate, below).
    Kind("grouped_decode_step_one_query",
         _grouped(s=1, l=1, mask=None, past=lambda b, r: int(r.choice([1, 4, 7])),
                  dtype=np.float32),
         notes={"kv_cache": "past and present in the fused op", "target": GROUPED_TARGET}),
    # Its padding mask is the op's bias: causality hides nothing from one query. (A mask per
    # query head keeps the heads repeated for Attention: FusedOpContracts in the C++ tests.)
    Kind("grouped_decode_step_one_query_masked",
         _grouped(s=1, l=1, past=lambda b, r: int(r.choice([1, 4, 7])), dtype=np.float32,
                  mask=lambda b, r: [(b.b, 1, 1, b.total), (1, 1, 1, b.total)][r.integers(2)]),
         notes={"kv_cache": "past and present in the fused op", "target": GROUPED_TARGET}),
    # In float16, target ort keeps MultiHeadAttention on the repeated heads and the Concat.
    Kind("grouped_decode_step_one_query_float16",
         _grouped(s=1, l=1, mask=None, past=lambda b, r: int(r.choice([1, 4, 7])),
                  dtype=np.float16),
         notes={"target": {"ort": "com.microsoft MultiHeadAttention",
                           "onnx": "ai.onnx Attention"}}),
    # Soft-capped scores (Gemma 2), which only GroupQueryAttention caps: a decode step of one
    # query, its padding mask the op's bias; with a Shape of present read before the attention,
    # the op reads past and new apart and the Concat stays. Caps small enough to bite.
    Kind("soft_capped_decode_step",
         _grouped(s=1, l=1, past=lambda b, r: int(r.choice([1, 4, 7])), dtype=np.float32,
                  mask=lambda b, r: [None, (b.b, 1, 1, b.total), (1, 1, 1, b.total)][r.integers(3)],
                  softcap=lambda b, r: float(r.choice([0.5, 2.0, 50.0]))),
         notes={"target": {"ort": "com.microsoft GroupQueryAttention"}},
         breaks={"onnx": "Attention-23's softcap meets the mask in another order by runtime"}),
    Kind("soft_capped_decode_step_cache_read_early",
         _grouped(s=1, l=1, past=lambda b, r: int(r.choice([1, 4, 7])), dtype=np.float32,
                  mask=lambda b, r: (b.b, 1, 1, b.total), cache_read_early=True,
                  softcap=lambda b, r: float(r.choice([0.5, 2.0]))),
         notes={"target": {"ort": "com.microsoft GroupQueryAttention"}},
         breaks={"onnx": "Attention-23's softcap meets the mask in another order by runtime"}),
    Kind("nan_guard", _set(nan_guard=True)),
    # A Dropout not in training mode passes the probabilities on.
    Kind("dropout_at_inference", _set(dropout="inference")),
    Kind("head_merge", _set(merge=True)),
    Kind("symbolic_batch_and_sequence", _set(shapes="symbolic")),
    Kind("heads_from_flag", _set(shapes="heads", num_heads_flag=lambda b, r: b.h)),
    Kind("scale_in_outer_graph_of_if_body",
         _set(in_if_body=True, scale_form=lambda b, r: str(r.choice(["mul", "mul_left", "div"])))),
    Kind("pre_scale_in_outer_graph_of_if_body", _set(in_if_body=True, scale_form="pre",
                                                     casts="none")),
    Kind("long_elementwise_chain_before_q", _set(q_chain=20)),
    # The cache moves into the op's past inputs and present outputs.
    Kind("decode_step_cache", _decode_step),
    # The Concat stays (a Shape reads present before the op would compute it); attention fuses.
    Kind("decode_step_cache_read_early",
         lambda b, r: (_decode_step(b, r), setattr(b, "cache_read_early", True))),
    Kind("opset11_softmax_last_axis", _set(opset=11, softmax_axis=3),
         breaks={"onnx": "Attention needs opset 23; fusekit never raises the opset"}),
    # ---- fusible for one target only
    # Both ops take v's own head size (MultiHeadAttention with k and v 3-D), with a cache too.
    Kind("value_head_size_differs", _set(d_v=lambda b, r: [b.d * 2, max(b.d // 2, 1)][r.integers(2)])),
    Kind("value_head_size_differs_decode_step",
         lambda b, r: (_decode_step(b, r), setattr(b, "d_v", b.d * 2))),
    # Multi-query attention by broadcasting: MultiHeadAttention reads k and v expanded.
    Kind("one_kv_head_broadcast", _set(h=lambda b, r: int(r.choice([2, 4])), h_kv=1)),
    Kind("one_kv_head_broadcast_decode_step",
         lambda b, r: (setattr(b, "h", int(r.choice([2, 4]))), setattr(b, "h_kv", 1),
                       _decode_step(b, r))),
    Kind("target_onnx_below_opset_23", _set(opset=lambda b, r: int(r.choice([17, 18]))),
         breaks={"onnx": "Attention needs opset 23; fusekit never raises the opset"}),
    # ---- breaking a contract of both: each must stay as it is
    Kind("float64", _set(dtype=np.float64, casts="none"),
         breaks=dict.fromkeys(BOTH, "no float64 kernel: MultiHeadAttention has no float64, "
                                    "Attention would compute softmax in float32")),
    Kind("casts_through_float64", _set(dtype=np.float16, casts="float64"),
         breaks=dict.fromkeys(BOTH, "the fused ops keep softmax in float32, not float64")),
    Kind("softmax_wrong_axis", _set(softmax_axis=lambda b, r: int(r.choice([1, 2]))),
         breaks=dict.fromkeys(BOTH, "softmax not over the key axis")),
    Kind("softmax_opset11_default_axis", _set(opset=11, softmax_axis=None, h=2),
         breaks=dict.fromkeys(BOTH, "opset 11's default axis 1 normalises over heads, sequence "
                                    "and keys together")),
    # Softmax over axis -1: axis 3 of the 5-D scores is no longer the key axis.
    Kind("scale_rank5", _set(scale_shape=(1, 1, 1, 1, 1), scale_form="mul", merge=False,
                             softmax_axis=-1),
         breaks=dict.fromkeys(BOTH, "a rank-5 scale makes the scores, and the output, 5-D")),
    Kind("scale_two_elements", _set(l=2, scale_values=2, scale_form="mul"),
         breaks=dict.fromkeys(BOTH, "a scale of two elements is no scalar")),
    Kind("scale_overflows_float", _set(dtype=np.float32, casts="none", scale_form="div",
                                       divisor=1e-40),
         breaks=dict.fromkeys(BOTH, "the scale 1/1e-40 is not a finite float32")),
    Kind("scale_negative", _set(scale=lambda b, r: -float(r.uniform(0.1, 1.0)),
                                scale_form=lambda b, r: ["mul", "div"][r.integers(2)]),
         breaks=dict.fromkeys(BOTH, "the scale is not positive")),
    Kind("probabilities_read_outside", _set(extra_reader=True),
         breaks=dict.fromkeys(BOTH, "an interior value is read outside the block")),
    Kind("scores_are_a_graph_output", _set(interior_output=True),
         breaks=dict.fromkeys(BOTH, "an interior value is a graph output")),
    Kind("batch_broadcast", _set(b=lambda b, r: int(r.choice([2, 3])), kv_batch=1,
                                 shapes=lambda b, r: ["none", "static"][r.integers(2)]),
         breaks=dict.fromkeys(BOTH, "k and v broadcast over q's batch; the fused ops do not")),
    Kind("head_broadcast_undeclared", _set(h=lambda b, r: int(r.choice([2, 4])), h_kv=1,
                                           shapes="none"),
         breaks=dict.fromkeys(BOTH, "the heads are not declared, so not proven")),
    Kind("soft_capped_prefill_with_a_mask",
         _grouped(s=5, l=5, dtype=np.float32, mask=lambda b, r: (b.b, 1, b.s, b.total),
                  softcap=2.0),
         breaks=dict.fromkeys(BOTH, "GroupQueryAttention alone caps, and it is causal: a mask "
                                    "is more")),
    Kind("dropout_mode_read_at_run_time", _set(dropout="mode_input"),
         breaks=dict.fromkeys(BOTH, "training_mode is an input: nothing proves the Dropout "
                                    "passes the probabilities on")),
    Kind("num_heads_contradicts_model", _set(num_heads_flag=lambda b, r: b.h + 1),
         breaks=dict.fromkeys(BOTH, "--num-heads contradicts the declared heads")),
    # ---- not a model: refused whole
    Kind("missing_input", _set(missing_input=True), invalid=True),
]
KIND = {k.name: k for k in KINDS}


@dataclass
class Case:
    index: int
    kind: Kind
    target: str
    block: Block
    base: Block  # the block before the perturbation: fusible for the target

    @property
    def id(self) -> str:
        return f"{self.index:03d}-{self.kind.name}-{self.target}"

    @property
    def broken(self) -> str | None:
        return self.kind.breaks.get(self.target)


def cases(seed: int, count: int) -> list[Case]:
    """`count` cases, every (kind, target) pair in turn, parameters from `seed`."""
    rng = np.random.default_rng(seed)
    pairs = [(k, t) for k in KINDS for t in TARGETS]
    out = []
    for i in range(count):
        kind, target = pairs[i % len(pairs)]
        base = _fusible(rng, target)
        blk = copy.deepcopy(base)
        kind.perturb(blk, rng)
        _consistent(blk)
        out.append(Case(i, kind, target, blk, base))
    return out
