"""Rotary embeddings fused by the fusekit CLI (FUSEKIT_CLI) compute what the model did.

Each case writes a small model rotating q (batch 2, 3 heads, 5 positions, head size 8) as
transformers' apply_rotary_pos_emb does (q·cos + rotate_half(q)·sin), fuses it with
`--rules rotary-embedding`, and runs both in ONNX Runtime on random inputs: angles with a row per
batch row or one row for all, positions that start past zero (a decode step's), a cache gathered
by position, and target onnx (RotaryEmbedding-23). The real exports are checked the same way by
test_conformance.py.
"""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

CLI = os.environ.get("FUSEKIT_CLI", "")
if not CLI:
    raise RuntimeError("FUSEKIT_CLI must name the fusekit tool (the suite runs through ctest)")

B, N, S, H = 2, 3, 5, 8


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def rotary_model(angle_batch, source, opset):
    """q rotated by angles θ[b, s, i] (i < H/2), from an input or a cache gathered by position."""
    inits = [ints("one", [1]), ints("zero", [0]), ints("half", [H // 2]), ints("end", [H]),
             ints("last", [-1])]
    nodes = []
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, N, "S", H])]
    if source == "computed":
        inputs.append(helper.make_tensor_value_info("theta", TensorProto.FLOAT,
                                                    [angle_batch, "S", H // 2]))
        nodes += [helper.make_node("Concat", ["theta", "theta"], ["emb"], axis=-1),
                  helper.make_node("Cos", ["emb"], ["cos3"]),
                  helper.make_node("Sin", ["emb"], ["sin3"])]
    else:  # a cache of 32 positions, gathered by position ids
        theta = np.random.default_rng(1).standard_normal((32, H // 2)).astype(np.float32)
        emb = np.concatenate([theta, theta], axis=-1)
        inits += [numpy_helper.from_array(np.cos(emb), "cos_cache"),
                  numpy_helper.from_array(np.sin(emb), "sin_cache")]
        inputs.append(helper.make_tensor_value_info("positions", TensorProto.INT64,
                                                    [angle_batch, "S"]))
        nodes += [helper.make_node("Gather", ["cos_cache", "positions"], ["cos3"]),
                  helper.make_node("Gather", ["sin_cache", "positions"], ["sin3"])]
    nodes += [
        helper.make_node("Unsqueeze", ["cos3", "one"], ["cos"]),
        helper.make_node("Unsqueeze", ["sin3", "one"], ["sin"]),
        helper.make_node("Slice", ["q", "zero", "half", "last"], ["lower"]),
        helper.make_node("Slice", ["q", "half", "end", "last"], ["upper"]),
        helper.make_node("Neg", ["upper"], ["negated"]),
        helper.make_node("Concat", ["negated", "lower"], ["rotated"], axis=-1),
        helper.make_node("Mul", ["q", "cos"], ["q_cos"]),
        helper.make_node("Mul", ["sin", "rotated"], ["rotated_sin"]),
        helper.make_node("Add", ["rotated_sin", "q_cos"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "rotary", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def feeds(model, angle_batch, first_position):
    rng = np.random.default_rng(0)
    out = {"q": rng.standard_normal((B, N, S, H)).astype(np.float32)}
    names = {i.name for i in model.graph.input}
    if "theta" in names:
        out["theta"] = rng.uniform(-4, 4, (angle_batch, S, H // 2)).astype(np.float32)
    else:
        rows = np.arange(first_position, first_position + S, dtype=np.int64)
        out["positions"] = np.stack([rows + 3 * b for b in range(angle_batch)])
    return out


def run(path, feed):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


@pytest.mark.parametrize(
    "angle_batch,source,first_position,target",
    [(2, "computed", 0, "ort"), (1, "computed", 0, "ort"), (2, "cached", 7, "ort"),
     (1, "cached", 20, "ort"), (2, "computed", 0, "onnx"), (1, "cached", 9, "onnx")],
    ids=["row-per-batch-row", "one-row", "cache-row-per-batch-row", "cache-one-row-decode",
         "onnx-row-per-batch-row", "onnx-cache-one-row"])
def test_fused_rotation_computes_the_models(tmp_path, angle_batch, source, first_position, target):
    opset = 23 if target == "onnx" else 17
    model = rotary_model(angle_batch, source, opset)
    original, fused = tmp_path / "original.onnx", tmp_path / "fused.onnx"
    onnx.save(model, str(original))
    subprocess.run([CLI, "fuse", str(original), "-o", str(fused), "--rules", "rotary-embedding",
                    "--target", target, "--quiet"], check=True)
    ops = [n.op_type for n in onnx.load(str(fused)).graph.node]
    assert "RotaryEmbedding" in ops and "Neg" not in ops, ops
    feed = feeds(model, angle_batch, first_position)
    np.testing.assert_allclose(run(fused, feed), run(original, feed), rtol=1e-5, atol=1e-5)
