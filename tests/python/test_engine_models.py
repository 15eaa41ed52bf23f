"""The rewrite engine's decoder-style rule: replacing an interior value that is a graph output (a
key cache, present = Concat(past, new)) keeps every output's value, in ONNX Runtime.

The C++ side (rewrite_test, WrittenModels.*) writes both models into FUSEKIT_MODEL_DIR/engine.
"""
import os
import pathlib

import numpy as np
import onnx
import onnxruntime as ort

MODEL_DIR = pathlib.Path(os.environ.get("FUSEKIT_MODEL_DIR", ".")) / "engine"


def run(path, feed):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed)))


def test_decoder_rule_keeps_every_output():
    unfused, fused = MODEL_DIR / "decoder_unfused.onnx", MODEL_DIR / "decoder_fused.onnx"
    onnx.checker.check_model(str(fused), full_check=True)
    ops = [n.op_type for n in onnx.load(str(fused)).graph.node]
    assert ops == ["Concat", "Einsum", "Sqrt"]
    rng = np.random.default_rng(0)
    feed = {
        "q": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
        "past_key": rng.standard_normal((1, 2, 5, 4)).astype(np.float32),
        "key": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
    }
    before, after = run(unfused, feed), run(fused, feed)
    assert before.keys() == after.keys()
    assert "present" in before
    for name in before:
        np.testing.assert_allclose(after[name], before[name], rtol=1e-5, atol=1e-6, err_msg=name)
