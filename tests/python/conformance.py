"""The real-export fixtures of tests/models as fusekit sees them: what the conformance suite
(test_conformance.py) asserts and what the conformance table (tests/models/make_conformance_table.py)
prints come from these functions, so the two cannot disagree.

Needs only onnx, onnxruntime and numpy.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

MODELS = pathlib.Path(__file__).resolve().parents[1] / "models"
MANIFEST = MODELS / "manifest.json"

# The ops a block becomes once fused; ai.onnx Attention is also what the dynamo exporter writes
# itself at opset 23.
FUSED_OPS = {("", "Attention"), ("com.microsoft", "MultiHeadAttention"),
             ("com.microsoft", "Attention"), ("com.microsoft", "GroupQueryAttention")}
TARGETS = ("ort", "onnx")


def fixtures() -> list[dict]:
    return json.loads(MANIFEST.read_text())["fixtures"]


def targets_of(fixture: dict) -> list[str]:
    """The targets that can express the fixture: MultiHeadAttention always; ai.onnx Attention
    only at opset 23 or later, since fusekit never raises a model's opset."""
    return [t for t in TARGETS if t == "ort" or fixture["opset"] >= 23]


def fused_ops(model: onnx.ModelProto) -> int:
    return sum((n.domain, n.op_type) in FUSED_OPS for n in model.graph.node)


def attention_blocks(model: onnx.ModelProto) -> int:
    """Softmax nodes and attention ops already fused: one per attention block in these models,
    those inside a model-local function counted once per call."""
    functions = {(f.domain, f.name): f for f in model.functions}

    def count(nodes, depth=0) -> int:
        total = 0
        for n in nodes:
            total += (n.domain, n.op_type) in FUSED_OPS
            total += n.op_type == "Softmax" and n.domain in ("", "ai.onnx")
            if (n.domain, n.op_type) in functions and depth < 16:
                total += count(functions[(n.domain, n.op_type)].node, depth + 1)
        return total
    return count(model.graph.node)


@dataclass
class outcome:
    """What `fusekit fuse` made of one fixture for one target."""
    blocks: int
    fused: int  # fused attention ops in the result, those the exporter wrote included
    report: dict
    output: pathlib.Path
    reasons: list[str] = field(default_factory=list)  # distinct near-miss reasons, in order


def fuse(cli: str, source: pathlib.Path, target: str, work: pathlib.Path) -> outcome:
    """Runs `fusekit fuse SOURCE --target TARGET` into WORK."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / f"{source.stem}.{target}.onnx"
    report_path = work / f"{source.stem}.{target}.json"
    done = subprocess.run([cli, "fuse", str(source), "-o", str(out), "--target", target,
                           "--report", str(report_path), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"fusekit fuse {source.name} --target {target} exited "
                           f"{done.returncode}: {done.stderr.strip()}")
    report = json.loads(report_path.read_text())
    reasons = []
    for rule in report["rules"]:
        for miss in rule["near_misses"]:
            text = f"[{rule['name']}] {miss['reason']}"
            if text not in reasons:
                reasons.append(text)
    original = onnx.load(str(source), load_external_data=False)
    fused = onnx.load(str(out), load_external_data=False)
    return outcome(attention_blocks(original), fused_ops(fused), report, out, reasons)


# ---- running a model

def session(model, optimize: bool = True) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        # The graph as written: ONNX Runtime's own fusions would change what the reference is.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    else:
        model = str(model)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def random_feed(fixture: dict, seed: int) -> dict[str, np.ndarray]:
    """Inputs of the fixture's shapes, drawn as its manifest says (normal floats, integers in
    range, all-ones masks)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for spec in fixture["inputs"]:
        shape, dtype, fill = spec["shape"], np.dtype(spec["dtype"]), spec["fill"]
        if "normal" in fill:
            value = fill["normal"] * rng.standard_normal(shape)
        elif "int" in fill:
            low, high = fill["int"]
            value = rng.integers(low, high, size=shape)
        elif "ones" in fill:
            value = np.ones(shape)
        else:
            raise ValueError(f"{fixture['file']}: input {spec['name']}: unknown fill {fill}")
        feed[spec["name"]] = value.astype(dtype)
    return feed


def padded_feeds(fixture: dict, seed: int) -> list[dict[str, np.ndarray]]:
    """For a fixture with an attention_mask input, random feeds whose mask hides keys: the first
    row left-padded (its leading queries then see no key at all in a causal prefill: fully
    masked rows), and the last row's mask all zeros (every row of it fully masked)."""
    if not any(spec["name"] == "attention_mask" for spec in fixture["inputs"]):
        return []
    feed = random_feed(fixture, seed)
    mask = feed["attention_mask"]
    if mask.shape[0] < 2:
        raise ValueError(f"{fixture['file']}: padded feeds need a batch of at least 2")
    mask[0, : mask.shape[1] // 2] = 0
    mask[-1, :] = 0
    return [feed]


def _float32_tensor(t: onnx.TensorProto) -> None:
    if t.data_type == onnx.TensorProto.FLOAT16:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))


def _float32_graph(graph: onnx.GraphProto) -> None:
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.tensor_type.elem_type == f16:
            info.type.tensor_type.elem_type = f32
    for t in graph.initializer:
        _float32_tensor(t)
    for node in graph.node:
        for a in node.attribute:
            if node.op_type in ("Cast", "EyeLike", "RandomNormal", "RandomUniform") and \
                    a.name in ("to", "dtype") and a.i == f16:
                a.i = f32
            if a.type == onnx.AttributeProto.TENSOR:
                _float32_tensor(a.t)
            if a.type == onnx.AttributeProto.GRAPH:
                _float32_graph(a.g)
            for g in a.graphs:
                _float32_graph(g)


def float32_twin(path: pathlib.Path) -> onnx.ModelProto:
    """The same graph computed in float32: every float16 tensor, declaration and cast made
    float32, the same (float16-rounded) weights."""
    model = onnx.load(str(path))
    _float32_graph(model.graph)
    return model


# ---- comparing outputs

# float32: the fused kernel reorders the same float32 arithmetic (a max-subtracted exp, sums
# over a few dozen terms), through a few layers: a few hundred ulps of the output's magnitude.
FP32_RELATIVE = 1e-4
# float16: both models round at different places (the original rounds QKᵀ, the probabilities
# and every intermediate to float16; the fused op keeps softmax in float32), so each is compared
# with the float32 twin: the fused model may be no further from it than 1.5 times the original's
# distance plus one float16 ulp (2^-10) of the output's magnitude, since both round their
# outputs and layers amplify a rounding differently.
FP16_SLACK = 2.0**-10


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))


def compare(fixture: dict, fused_path: pathlib.Path, seeds=(0, 1)) -> None:
    """ONNX Runtime runs the fused model; its outputs match the original's on random inputs."""
    source = MODELS / fixture["file"]
    original, fused = session(source, optimize=False), session(fused_path)
    twin = session(float32_twin(source), optimize=False) if fixture["dtype"] == "float16" \
        else None
    names = [o.name for o in original.get_outputs()]
    assert names == [o.name for o in fused.get_outputs()], "the fused model's outputs differ"
    feeds = [(str(seed), random_feed(fixture, seed)) for seed in seeds]
    feeds += [(f"padded {seed}", feed) for seed in seeds for feed in padded_feeds(fixture, seed)]
    for seed, feed in feeds:
        expected, got = original.run(None, feed), fused.run(None, feed)
        reference = twin.run(None, {k: (v.astype(np.float32) if v.dtype == np.float16 else v)
                                    for k, v in feed.items()}) if twin else expected
        for name, x, y, ref in zip(names, expected, got, reference):
            where = f"{fixture['file']} output {name} (seed {seed})"
            assert y.shape == x.shape and y.dtype == x.dtype, f"{where}: shape or dtype"
            assert np.array_equal(np.isnan(x), np.isnan(y)), f"{where}: NaNs differ"
            assert np.array_equal(np.isfinite(x), np.isfinite(y)), f"{where}: non-finite values"
            if not np.issubdtype(x.dtype, np.floating):
                assert np.array_equal(x, y), where
                continue
            finite = np.isfinite(x)
            magnitude = float(np.max(np.abs(ref[finite]), initial=0.0))
            if x.dtype == np.float16:
                fused_error = max_abs(y[finite], ref[finite])
                original_error = max_abs(x[finite], ref[finite])
                bound = 1.5 * original_error + FP16_SLACK * magnitude
                assert fused_error <= bound, (f"{where}: fused is {fused_error:.3g} from the "
                                              f"float32 twin, the original {original_error:.3g}")
            else:
                error = max_abs(y[finite], x[finite])
                assert error <= FP32_RELATIVE * max(magnitude, 1.0), (
                    f"{where}: fused differs by {error:.3g} (magnitude {magnitude:.3g})")
