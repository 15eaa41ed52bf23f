"""The classic passes of examples/passes: what run_passes writes computes what it read.

Each model is made here with onnx.helper, in every form a pass claims (and one it must leave), run
through run_passes (FUSEKIT_RUN_PASSES), and both are run in ONNX Runtime on random inputs.
"""
import os
import pathlib
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

RUN_PASSES = os.environ["FUSEKIT_RUN_PASSES"]
MODEL_DIR = pathlib.Path(os.environ["FUSEKIT_MODEL_DIR"])
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
RNG = np.random.default_rng(0)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "passes", inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=imports, ir_version=8 if opset >= 15 else 7)


def conv_bn(opset, bias, elem=F32):
    np_type = np.float16 if elem == F16 else np.float32
    c = lambda a: np.asarray(a, dtype=np_type)  # noqa: E731
    inits = [init("w", c(RNG.standard_normal((4, 3, 3, 3)))),
             init("gamma", c(RNG.uniform(0.5, 2, 4))), init("beta", c(RNG.standard_normal(4))),
             init("mean", c(RNG.standard_normal(4))), init("var", c(RNG.uniform(0.5, 2, 4)))]
    conv_in = ["x", "w"]
    if bias:
        inits.append(init("b", c(RNG.standard_normal(4))))
        conv_in.append("b")
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], strides=[2, 2], group=1),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["y"],
                              epsilon=1e-3)]
    return model(nodes, [helper.make_tensor_value_info("x", elem, [2, 3, 9, 9])],
                 [helper.make_tensor_value_info("y", elem, [2, 4, 5, 5])], inits, opset)


def transposes(first, second, rank=4):
    dims = [2, 3, 4, 5][:rank]
    inner = first or list(reversed(range(rank)))
    out = [dims[inner[i]] for i in second]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], **({"perm": first} if first else {})),
             helper.make_node("Transpose", ["t"], ["u"], perm=second),
             helper.make_node("Relu", ["u"], ["y"])]
    return model(nodes, [helper.make_tensor_value_info("x", F32, dims)],
                 [helper.make_tensor_value_info("y", F32, out)])


def linear(bias_shape, bias_first):
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p"]),
             helper.make_node("Add", ["bias", "p"] if bias_first else ["p", "bias"], ["y"])]
    return model(nodes, [helper.make_tensor_value_info("a", F32, [5, 4]),
                         helper.make_tensor_value_info("bias", F32, bias_shape)],
                 [helper.make_tensor_value_info("y", F32, [2, 5, 3] if len(bias_shape) == 3 else [5, 3])],
                 [init("w", RNG.standard_normal((4, 3)).astype(np.float32))])


def quick_gelu(elem):
    np_type = np.float16 if elem == F16 else np.float32
    nodes = [helper.make_node("Mul", ["x", "alpha"], ["s"]),
             helper.make_node("Sigmoid", ["s"], ["g"]), helper.make_node("Mul", ["g", "x"], ["y"])]
    return model(nodes, [helper.make_tensor_value_info("x", elem, [3, 16])],
                 [helper.make_tensor_value_info("y", elem, [3, 16])],
                 [init("alpha", np.array(1.702, dtype=np_type))])


# name: (model, the op histogram run_passes leaves)
CASES = {
    "conv_bn_opset9": (conv_bn(9, bias=True), {"Conv": 1}),
    "conv_bn_opset15_no_bias": (conv_bn(15, bias=False), {"Conv": 1}),
    "conv_bn_float16": (conv_bn(15, bias=True, elem=F16), {"Conv": 1}),
    "transposes_cancel": (transposes([0, 2, 3, 1], [0, 3, 1, 2]), {"Relu": 1}),
    "transposes_compose": (transposes([0, 2, 1, 3], [3, 1, 0, 2]), {"Transpose": 1, "Relu": 1}),
    "transposes_default_perm": (transposes(None, [2, 1, 0], rank=3), {"Relu": 1}),
    "gemm_vector_bias": (linear([3], False), {"Gemm": 1}),
    "gemm_row_bias_first": (linear([1, 3], True), {"Gemm": 1}),
    "gemm_column_bias": (linear([5, 1], False), {"Gemm": 1}),
    # a bias of three dims grows the product: no Gemm
    "no_gemm_3d_bias": (linear([2, 5, 3], False), {"MatMul": 1, "Add": 1}),
    "quick_gelu": (quick_gelu(F32), {"QuickGelu": 1}),
    "quick_gelu_float16": (quick_gelu(F16), {"QuickGelu": 1}),
}


def run(path, feed):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    s = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return s.run(None, feed)


def feed_for(m):
    feed = {}
    for i in m.graph.input:
        t = i.type.tensor_type
        dims = [d.dim_value for d in t.shape.dim]
        np_type = np.float16 if t.elem_type == F16 else np.float32
        feed[i.name] = RNG.standard_normal(dims).astype(np_type)
    return feed


@pytest.mark.parametrize("name", sorted(CASES))
def test_passes_keep_what_the_model_computes(name):
    original, expected_ops = CASES[name]
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    before, after = MODEL_DIR / f"{name}.onnx", MODEL_DIR / f"{name}_passed.onnx"
    onnx.save(original, str(before))
    subprocess.run([RUN_PASSES, str(before), str(after)], check=True, capture_output=True)
    passed = onnx.load(str(after))
    onnx.checker.check_model(passed, full_check=True)
    ops = {}
    for n in passed.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    assert ops == expected_ops
    feed = feed_for(original)
    want, got = run(before, feed), run(after, feed)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 2e-2 if w.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol)
