"""Rotary embeddings fused by the fusekit CLI (FUSEKIT_CLI) compute what the model did.

Each case writes a small model rotating q (batch 2, 3 heads, 5 positions, head size 8), fuses it
with the rotary rules and runs both in ONNX Runtime on random inputs. The halves form as
transformers' apply_rotary_pos_emb writes it (q·cos + rotate_half(q)·sin): angles with a row per
batch row or one row for all, positions that start past zero (a decode step's), a cache gathered
by position, q with the sequence before the heads. The interleaved form as diffusers'
apply_rotary_emb writes it (pairs (2i, 2i + 1) by Slice, Split or Gather, angles repeated element
by element), on q (batch, heads, S, head size) and on q (batch, S, heads, head size) as Flux
rotates it. Each for both targets (RotaryEmbedding-23 for onnx). A partial rotation (GPT-NeoX: the
first numbers of each head) fused whole. The real exports are checked the same way by
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


def model_of(nodes, inputs, inits, opset):
    graph = helper.make_graph(nodes, "rotary", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def rotary_model(angle_batch, source, opset, sequence_first=False):
    """q rotated by angles θ[b, s, i] (i < H/2), from an input or a cache gathered by position;
    q (batch, heads, S, H), or (batch, S, heads, H) with the angles unsqueezed at the heads."""
    inits = [ints("one", [1]), ints("zero", [0]), ints("half", [H // 2]), ints("end", [H]),
             ints("last", [-1]), ints("heads_axis", [2 if sequence_first else 1])]
    nodes = []
    dims = [B, "S", N, H] if sequence_first else [B, N, "S", H]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, dims)]
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
        helper.make_node("Unsqueeze", ["cos3", "heads_axis"], ["cos"]),
        helper.make_node("Unsqueeze", ["sin3", "heads_axis"], ["sin"]),
        helper.make_node("Slice", ["q", "zero", "half", "last"], ["lower"]),
        helper.make_node("Slice", ["q", "half", "end", "last"], ["upper"]),
        helper.make_node("Neg", ["upper"], ["negated"]),
        helper.make_node("Concat", ["negated", "lower"], ["rotated"], axis=-1),
        helper.make_node("Mul", ["q", "cos"], ["q_cos"]),
        helper.make_node("Mul", ["sin", "rotated"], ["rotated_sin"]),
        helper.make_node("Add", ["rotated_sin", "q_cos"], ["y"]),
    ]
    return model_of(nodes, inputs, inits, opset)


def interleaved_model(by, sequence_first, opset):
    """q rotated pair by pair, the angles θ [S, H/2] repeated element by element."""
    dims = [B, "S", N, H] if sequence_first else [B, N, "S", H]
    inits = [ints("last", [-1]), ints("one", [1]), ints("tile", [1, 1, 2]),
             ints("as_pairs", [0, 0, 0, -1, 2]), ints("merged", [0, 0, 0, -1]),
             ints("zero", [0]), ints("two", [2]), ints("sizes", [1, 1])]
    nodes = [
        helper.make_node("Unsqueeze", ["theta", "last"], ["theta_1"]),
        helper.make_node("Tile", ["theta_1", "tile"], ["theta_2"]),
        helper.make_node("Flatten", ["theta_2"], ["angles"], axis=1),
        helper.make_node("Cos", ["angles"], ["cos2"]),
        helper.make_node("Sin", ["angles"], ["sin2"]),
        helper.make_node("Reshape", ["q", "as_pairs"], ["pairs"]),
    ]
    if sequence_first:  # [S, 1, H] against (batch, S, heads, H)
        nodes += [helper.make_node("Unsqueeze", ["cos2", "one"], ["cos"]),
                  helper.make_node("Unsqueeze", ["sin2", "one"], ["sin"])]
    else:
        nodes += [helper.make_node("Identity", ["cos2"], ["cos"]),
                  helper.make_node("Identity", ["sin2"], ["sin"])]
    if by == "split":
        nodes.append(helper.make_node("Split", ["pairs", "sizes"], ["real_1", "imag_1"], axis=-1))
    elif by == "slice":
        nodes += [helper.make_node("Slice", ["pairs", "zero", "one", "last"], ["real_1"]),
                  helper.make_node("Slice", ["pairs", "one", "two", "last"], ["imag_1"])]
    if by == "gather":  # pairs[..., 0], pairs[..., 1]
        inits += [numpy_helper.from_array(np.array(k, np.int64), f"element_{k}") for k in (0, 1)]
        nodes += [helper.make_node("Gather", ["pairs", "element_0"], ["real"], axis=-1),
                  helper.make_node("Gather", ["pairs", "element_1"], ["imag"], axis=-1)]
    else:
        nodes += [helper.make_node("Squeeze", ["real_1", "last"], ["real"]),
                  helper.make_node("Squeeze", ["imag_1", "last"], ["imag"])]
    nodes += [
        helper.make_node("Neg", ["imag"], ["negated"]),
        helper.make_node("Unsqueeze", ["negated", "last"], ["first"]),
        helper.make_node("Unsqueeze", ["real", "last"], ["second"]),
        helper.make_node("Concat", ["first", "second"], ["stacked"], axis=-1),
        helper.make_node("Reshape", ["stacked", "merged"], ["rotated"]),
        helper.make_node("Mul", ["cos", "q"], ["q_cos"]),
        helper.make_node("Mul", ["rotated", "sin"], ["rotated_sin"]),
        helper.make_node("Add", ["q_cos", "rotated_sin"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, dims),
              helper.make_tensor_value_info("theta", TensorProto.FLOAT, ["S", H // 2])]
    return model_of(nodes, inputs, inits, opset)


def feeds(model, angle_batch, first_position):
    rng = np.random.default_rng(0)
    q = next(i for i in model.graph.input if i.name == "q").type.tensor_type.shape.dim
    out = {"q": rng.standard_normal([d.dim_value or S for d in q]).astype(np.float32)}
    names = {i.name for i in model.graph.input}
    if "theta" in names:
        shape = (S, H // 2) if angle_batch is None else (angle_batch, S, H // 2)
        out["theta"] = rng.uniform(-4, 4, shape).astype(np.float32)
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
    "angle_batch,source,first_position,target,sequence_first",
    [(2, "computed", 0, "ort", False), (1, "computed", 0, "ort", False),
     (2, "cached", 7, "ort", False), (1, "cached", 20, "ort", False),
     (2, "computed", 0, "onnx", False), (1, "cached", 9, "onnx", False),
     (1, "computed", 0, "ort", True), (2, "cached", 4, "onnx", True)],
    ids=["row-per-batch-row", "one-row", "cache-row-per-batch-row", "cache-one-row-decode",
         "onnx-row-per-batch-row", "onnx-cache-one-row", "bsnh-one-row",
         "onnx-bsnh-cache-row-per-batch-row"])
def test_fused_rotation_computes_the_models(tmp_path, angle_batch, source, first_position, target,
                                            sequence_first):
    model = rotary_model(angle_batch, source, 23 if target == "onnx" else 17, sequence_first)
    fuses_with_parity(tmp_path, model, "rotary-embedding", target,
                      feeds(model, angle_batch, first_position))


@pytest.mark.parametrize("by", ["slice", "split", "gather"])
@pytest.mark.parametrize("sequence_first", [False, True], ids=["bnsh", "bsnh"])
@pytest.mark.parametrize("target", ["ort", "onnx"])
def test_fused_interleaved_rotation_computes_the_models(tmp_path, by, sequence_first, target):
    model = interleaved_model(by, sequence_first, 23 if target == "onnx" else 18)
    fuses_with_parity(tmp_path, model, "rotary-embedding-interleaved", target,
                      feeds(model, None, 0))


def partial_model(angle_batch, opset):
    """GPT-NeoX's partial rotation: the first 4 of q's 8 numbers a head rotated, the rest passed."""
    inits = [ints("zero", [0]), ints("two", [2]), ints("four", [4]), ints("end", [H]),
             ints("last", [-1]), ints("one", [1])]
    nodes = [
        helper.make_node("Concat", ["theta", "theta"], ["emb"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos3"]),
        helper.make_node("Sin", ["emb"], ["sin3"]),
        helper.make_node("Unsqueeze", ["cos3", "one"], ["cos"]),
        helper.make_node("Unsqueeze", ["sin3", "one"], ["sin"]),
        helper.make_node("Slice", ["q", "zero", "four", "last"], ["part"]),
        helper.make_node("Slice", ["q", "four", "end", "last"], ["passed"]),
        helper.make_node("Slice", ["part", "zero", "two", "last"], ["lower"]),
        helper.make_node("Slice", ["part", "two", "four", "last"], ["upper"]),
        helper.make_node("Neg", ["upper"], ["negated"]),
        helper.make_node("Concat", ["negated", "lower"], ["rotated"], axis=-1),
        helper.make_node("Mul", ["part", "cos"], ["part_cos"]),
        helper.make_node("Mul", ["rotated", "sin"], ["rotated_sin"]),
        helper.make_node("Add", ["part_cos", "rotated_sin"], ["turned"]),
        helper.make_node("Concat", ["turned", "passed"], ["y"], axis=-1),
    ]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, N, "S", H]),
              helper.make_tensor_value_info("theta", TensorProto.FLOAT, [angle_batch, "S", 2])]
    return model_of(nodes, inputs, inits, opset)


@pytest.mark.parametrize("angle_batch", [1, 2])
@pytest.mark.parametrize("target", ["ort", "onnx"])
def test_fused_partial_rotation_computes_the_models(tmp_path, angle_batch, target):
    model = partial_model(angle_batch, 23 if target == "onnx" else 17)
    rng = np.random.default_rng(0)
    feed = {"q": rng.standard_normal((B, N, S, H)).astype(np.float32),
            "theta": rng.uniform(-4, 4, (angle_batch, S, 2)).astype(np.float32)}
    ops = fuses_with_parity(tmp_path, model, "rotary-embedding,partial-rotary-embedding",
                            target, feed)
    assert ops.count("RotaryEmbedding") == 1, ops
    # The op rotates q itself: neither part of q is left, nor what read its dims.
    read = {i for n in onnx.load(str(tmp_path / "fused.onnx")).graph.node for i in n.input}
    assert not read & {"part", "passed"}, read


def fuses_with_parity(tmp_path, model, rule, target, feed):
    original, fused = tmp_path / "original.onnx", tmp_path / "fused.onnx"
    onnx.save(model, str(original))
    subprocess.run([CLI, "fuse", str(original), "-o", str(fused), "--rules", rule, "--target",
                    target, "--quiet"], check=True)
    ops = [n.op_type for n in onnx.load(str(fused)).graph.node]
    assert "RotaryEmbedding" in ops and "Neg" not in ops, ops
    np.testing.assert_allclose(run(fused, feed), run(original, feed), rtol=1e-5, atol=1e-5)
    return ops
