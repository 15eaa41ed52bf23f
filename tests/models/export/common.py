"""What every fixture export shares: one export call for both torch exporters, the ONNX Runtime
check against torch, the input specification the conformance suite re-draws inputs from, and the
manifest entry (versions, exporter, opset, dtype, blocks, one block's op chain as written).

Run by a developer in the scratch venv of one version set (requirements-transformers-X.Y.txt
beside this file), never by CI.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import inspect
import io
import pathlib
import sys
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnx.inliner
import onnxruntime as ort
import torch

OUT_DIR = pathlib.Path(__file__).resolve().parent.parent  # export_fixtures.py sets the set's folder
SEED = 0

# Tolerances of the export check (ONNX Runtime against torch on the export's own inputs). fp16
# models run in torch on the CPU, whose fp16 kernels round at other places than ONNX Runtime's;
# bfloat16 (8 bits of mantissa, 2^-8 relative rounding) is checked in the ONNX reference
# evaluator, which rounds every intermediate to bfloat16 where torch's CPU kernels accumulate in
# float32.
TOLERANCE = {"float32": (1e-3, 1e-4), "float16": (3e-2, 3e-2), "bfloat16": (1e-1, 1e-1)}

# Block counting is the conformance suite's, so an export and the suite agree on what a block is.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from conformance import FUSED_OPS, attention_blocks, reference_runs  # noqa: E402


# The exporters every family of the held-out set is made with: tag → (exporter, opset).
HELDOUT_EXPORTERS = {"ts17": ("torchscript", 17), "dynamo18": ("dynamo", 18)}


def fp32_matrix(names, export, key: str, exporters=HELDOUT_EXPORTERS) -> dict:
    """NAME.TAG.fp32 → export(key=NAME, exporter=…, opset=…), for every name and exporter."""
    return {f"{name}.{tag}.fp32": functools.partial(export, **{key: name}, exporter=exporter,
                                                     opset=opset)
            for name in names for tag, (exporter, opset) in exporters.items()}


def versions() -> dict[str, str]:
    out = {}
    for package in ("torch", "transformers", "diffusers", "f5-tts", "onnx", "onnxscript",
                    "onnxruntime"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[package] = importlib.metadata.version(package)
    return out


def seeded(seed: int = SEED) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)


def redraw_zero_parameters(module: torch.nn.Module, std: float = 0.02) -> None:
    """Libraries zero-initialise adaLN modulations and output projections so that an untrained
    model is the identity; a fixture whose attention output is multiplied by zero tests nothing."""
    with torch.no_grad():
        for p in module.parameters():
            if p.numel() > 0 and torch.count_nonzero(p) == 0:
                p.normal_(0.0, std)


def _fill_of(name: str, t: torch.Tensor, fills: dict) -> dict:
    if name in fills:
        return fills[name]
    if t.dtype.is_floating_point:
        return {"normal": 1.0}
    if t.dtype == torch.bool:
        return {"ones": True}
    return {"int": [int(t.min()), int(t.max()) + 1]}


def _numpy(t: torch.Tensor) -> np.ndarray:
    """numpy has no bfloat16: a torch bfloat16 tensor becomes ml_dtypes' (the dtype onnx's
    reference evaluator and numpy_helper use), bit for bit."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _flatten(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _flatten(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _flatten(item)]
    raise TypeError(f"cannot flatten {type(x)}")


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in graph.node for o in n.output}


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            out.setdefault(i, []).append(n)
    return out


def _label(node: onnx.NodeProto, constants: dict[str, str]) -> str:
    attrs = []
    for a in node.attribute:
        if a.name in ("perm", "axes", "axis", "to", "allowzero", "is_causal", "scale",
                      "q_num_heads", "kv_num_heads", "softmax_precision"):
            value = onnx.helper.get_attribute_value(a)
            if a.name == "to":
                value = onnx.TensorProto.DataType.Name(value).lower()
            if isinstance(value, list):
                value = "(" + ",".join(map(str, value)) + ")"
            attrs.append(f"{a.name}={value}")
    args = [constants[i] for i in node.input if i in constants]
    inside = ", ".join(attrs + args)
    return f"{node.op_type}({inside})" if inside else node.op_type


def _constants(model: onnx.ModelProto) -> dict[str, str]:
    """Small constants by name, printed as the chain shows them (scales, fills, shapes)."""
    out = {}

    def show(t: onnx.TensorProto):
        a = onnx.numpy_helper.to_array(t)
        if a.size <= 4:
            # bfloat16 (ml_dtypes) is a float of kind "V"
            flat = [int(x) if a.dtype.kind in "biu" else float(x) for x in a.reshape(-1)]
            text = ",".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in flat)
            return text if a.ndim == 0 else f"[{text}]"
        return None

    for t in model.graph.initializer:
        if (s := show(t)) is not None:
            out[t.name] = s
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            if (s := show(n.attribute[0].t)) is not None:
                out[n.output[0]] = s
    return out


def _upstream(name: str, producers, constants, depth: int) -> str:
    """The op chain that writes `name`, following input 0, `depth` nodes deep."""
    steps = []
    while depth > 0 and name in producers:
        node = producers[name]
        if node.op_type == "Constant":
            break
        steps.append(_label(node, constants))
        data = [i for i in node.input if i and i not in constants]
        if not data:
            break
        name = data[0]
        depth -= 1
    if name not in producers:
        steps.append(f"'{name}'")  # a graph input or a larger initializer
    return " ← ".join(steps)


def block_chain(model: onnx.ModelProto) -> str:
    """One attention block as the file writes it: from the QKᵀ MatMul's operands through Softmax
    to the PV MatMul and what follows, with scale and mask operands named."""
    graph = model.graph
    producers, consumers, constants = _producers(graph), _consumers(graph), _constants(model)
    anchor = next((n for n in graph.node if n.op_type == "Softmax"), None)
    if anchor is None:
        fused = next((n for n in graph.node if (n.domain, n.op_type) in FUSED_OPS), None)
        if fused is None:
            return "no attention block"
        parts = [f"{i}: {_upstream(x, producers, constants, 4)}"
                 for i, x in zip(("q", "k", "v", "mask"), fused.input) if x]
        return f"{_label(fused, constants)} with " + "; ".join(parts)
    # Backwards from Softmax to the nearest MatMul (the QKᵀ product): the data path is the
    # shortest one; what joins it elsewhere (scales, masks) is shown beside each step.
    parent: dict[str, tuple[str, onnx.NodeProto] | None] = {anchor.input[0]: None}
    queue, found = [anchor.input[0]], None
    while queue and found is None:
        name = queue.pop(0)
        node = producers.get(name)
        if node is None:
            continue
        if node.op_type == "MatMul":
            found = name
            break
        for i in node.input:
            if i and i not in parent and i not in constants:
                parent[i] = (name, node)
                queue.append(i)
    back = []
    if found is not None:
        path = [found]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]][0])
        for name in path:
            node = producers[name]
            if node.op_type == "MatMul" and name == found:
                q = _upstream(node.input[0], producers, constants, 6)
                k = _upstream(node.input[1], producers, constants, 6)
                back.append(f"MatMul(q: {q} | kᵀ: {k})")
                continue
            on_path = set(path)
            side = [_upstream(o, producers, constants, 7) for o in node.input
                    if o and o not in constants and o not in on_path]
            back.append(_label(node, constants) + (" with " + "; ".join(side) if side else ""))
        back.reverse()
    forward = [_label(anchor, constants)]
    node = anchor
    for _ in range(8):
        readers = consumers.get(node.output[0], [])
        if not readers:
            break
        node = readers[0]
        forward.append(_label(node, constants))
        if node.op_type == "MatMul":
            # The head merge after the PV MatMul.
            for _ in range(3):
                readers = consumers.get(node.output[0], [])
                if not readers or readers[0].op_type not in ("Transpose", "Reshape"):
                    break
                node = readers[0]
                forward.append(_label(node, constants))
            break
    return " → ".join(list(reversed(back)) + forward)


def _session(path: pathlib.Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class _Reference:
    """ONNX Runtime's session calls (get_inputs, get_outputs, run) on the ONNX reference evaluator
    as the conformance suite runs bfloat16 models (conformance.reference_runs), for the bfloat16
    exports: ONNX Runtime's CPU provider has no bfloat16 MatMul, Softmax or most other kernels."""

    class _Named:
        def __init__(self, name: str):
            self.name = name

    def __init__(self, path: pathlib.Path):
        graph = onnx.load(str(path)).graph
        weights = {t.name for t in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in weights]
        self.output_names, self.run = reference_runs(path)

    def get_inputs(self):
        return [self._Named(n) for n in self.input_names]

    def get_outputs(self):
        return [self._Named(n) for n in self.output_names]


def inlined(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its local functions inlined (itself when it has none): what the block count
    and the chain read, since a function body's nodes are not in model.graph."""
    return onnx.inliner.inline_local_functions(model) if model.functions else model


def export(module: torch.nn.Module, args: tuple, name: str, *, family: str, exporter: str,
           opset: int, dtype: str, blocks: int, input_names: list[str],
           output_names: list[str], dynamic: dict | None = None, fills: dict | None = None,
           note: str = "", recheck: tuple | None = None,
           functions: set[type] | None = None) -> dict:
    """Exports `module(*args)` to OUT_DIR/NAME.onnx (the version set's folder of tests/models, or
    of export_fixtures.py's --out), checks it in ONNX Runtime against torch and returns its manifest entry.
    `dynamic` maps input names to {axis: name} (both exporters); `recheck`, inputs of other sizes
    along those axes, is checked against torch as well, so that an axis the exporter fixed shows.
    `functions` (TorchScript only): module classes written as ONNX local functions
    (export_modules_as_functions)."""
    path = OUT_DIR / f"{name}.onnx"
    module.eval()
    with torch.no_grad():
        expected = [_numpy(t) for t in _flatten(module(*args))]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "torchscript" and functions:
            with _function_attributes_only(functions):
                torch.onnx.export(module, args, str(path), dynamo=False, opset_version=opset,
                                  input_names=input_names, output_names=output_names,
                                  dynamic_axes=dynamic or None, do_constant_folding=True,
                                  export_modules_as_functions=functions)
        elif exporter == "torchscript":
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=opset,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic or None, do_constant_folding=True)
        elif exporter == "dynamo" and not functions:
            shapes = None
            if dynamic:
                shapes = {n: {a: torch.export.Dim.AUTO for a in axes}
                          for n, axes in dynamic.items()}
                shapes = tuple(shapes.get(n) for n in input_names[:len(args)])
                # A forward(self, a, b, *rest) (the decode steps' past key/values) is bound by
                # torch.export as (a, b, rest): its shapes are grouped the same way.
                params = inspect.signature(module.forward).parameters.values()
                if any(p.kind == p.VAR_POSITIONAL for p in params):
                    fixed = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                for p in params)
                    shapes = (*shapes[:fixed], shapes[fixed:])
            program = torch.onnx.export(module, args, dynamo=True, opset_version=opset,
                                        input_names=input_names, output_names=output_names,
                                        dynamic_shapes=shapes, optimize=True)
            program.save(str(path), external_data=False)
        else:
            raise ValueError(exporter)
    model = onnx.load(str(path))
    # The dynamo exporter annotates every node with its FX node, scope and Python stack trace
    # (paths of the exporting machine included): half of a tiny model's bytes, no semantics.
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(model, str(path))
    onnx.checker.check_model(model)
    session = _Reference(path) if dtype == "bfloat16" else _session(path)
    feed = {i.name: _numpy(a) for i, a in zip(session.get_inputs(), _flatten(args))}
    got = session.run(None, feed)
    rtol, atol = TOLERANCE[dtype]
    assert len(got) == len(expected), f"{name}: {len(got)} outputs, torch gives {len(expected)}"
    for g, e, o in zip(got, expected, session.get_outputs()):
        np.testing.assert_allclose(g.astype(np.float32), e.astype(np.float32), rtol=rtol,
                                   atol=atol, err_msg=f"{name}: output {o.name}")
        assert np.abs(e.astype(np.float32)).max() > 0, f"{name}: output {o.name} is all zeros"
    if recheck is not None:
        with torch.no_grad():
            expected = [_numpy(t) for t in _flatten(module(*recheck))]
        feed = {i.name: _numpy(a) for i, a in zip(session.get_inputs(), _flatten(recheck))}
        for g, e, o in zip(session.run(None, feed), expected, session.get_outputs()):
            np.testing.assert_allclose(g.astype(np.float32), e.astype(np.float32), rtol=rtol,
                                       atol=atol, err_msg=f"{name}: output {o.name} (recheck)")
    found = attention_blocks(inlined(model))
    assert found == blocks, f"{name}: {found} attention blocks in the file, expected {blocks}"
    fills = fills or {}
    inputs = []
    for info, a in zip(session.get_inputs(), _flatten(args)):
        inputs.append({"name": info.name, "shape": list(a.shape),
                       "dtype": str(_numpy(a).dtype), "fill": _fill_of(info.name, a, fills)})
    return {"file": path.name, "family": family, "exporter": exporter, "opset": opset,
            "dtype": dtype, "blocks": blocks, "inputs": inputs, "chain": block_chain(inlined(model)),
            "note": note, "bytes": path.stat().st_size}
