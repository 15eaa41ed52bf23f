"""The custom-rule example (examples/custom_rule): what fuse_gelu writes computes what it read.

The ctest fixture writes gelu_unfused.onnx (make_gelu_model) and fuses it into gelu_fused.onnx
(fuse_gelu) in FUSEKIT_MODEL_DIR before this runs.
"""
import os
import pathlib

import numpy as np
import onnx
import onnxruntime as ort

MODEL_DIR = pathlib.Path(os.environ.get("FUSEKIT_MODEL_DIR", "."))
UNFUSED = MODEL_DIR / "gelu_unfused.onnx"
FUSED = MODEL_DIR / "gelu_fused.onnx"
GELUS = 5  # my_rules::sample::gelu_count: four float32 forms and one float16


def session(path):
    # ONNX Runtime fuses Erf GELUs into Gelu itself; switched off, the reference is the plain graph.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(path, batch=3, seed=0):
    s = session(path)
    rng = np.random.default_rng(seed)
    feed = {}
    for info in s.get_inputs():
        dtype = np.float16 if info.type == "tensor(float16)" else np.float32
        feed[info.name] = (3 * rng.standard_normal((batch, 16))).astype(dtype)
    return [o.name for o in s.get_outputs()], s.run(None, feed)


def test_fused_model_has_only_gelu():
    model = onnx.load(str(FUSED))
    onnx.checker.check_model(model, full_check=True)
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    assert ops.count(("com.microsoft", "Gelu")) == GELUS
    assert ("", "Erf") not in ops
    assert len(ops) == GELUS
    assert any(o.domain == "com.microsoft" for o in model.opset_import)


def test_fused_model_computes_what_the_original_did():
    names, expected = run(UNFUSED)
    fused_names, actual = run(FUSED)
    assert fused_names == names
    assert len(names) == GELUS
    for name, want, got in zip(names, expected, actual):
        assert got.dtype == want.dtype, name
        # float16: the unfused graph rounds after every op, the fused kernel once
        tol = 1e-3 if want.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=tol, atol=tol, err_msg=name)
