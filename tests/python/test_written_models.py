"""Models fusekit writes are valid for the ONNX checker and run in ONNX Runtime.

The C++ side (ctest fixture) writes the models into FUSEKIT_MODEL_DIR before this runs.
"""
import os
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

MODEL_DIR = pathlib.Path(os.environ.get("FUSEKIT_MODEL_DIR", "."))
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


def random_feed(session, seq_len=7, seed=0):
    rng = np.random.default_rng(seed)
    feed = {}
    for info in session.get_inputs():
        dims = [d if isinstance(d, int) else seq_len for d in info.shape]
        dtype = np.float16 if info.type == "tensor(float16)" else np.float32
        feed[info.name] = rng.standard_normal(dims).astype(dtype)
    return feed


def run(path):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, random_feed(session))


@pytest.mark.parametrize(
    "path",
    [SOURCE_DIR / "examples/models/dit_sample.onnx", MODEL_DIR / "dit_sample_external.onnx"],
    ids=["bundled", "external-data"],
)
def test_checker_accepts_and_runtime_runs(path):
    onnx.checker.check_model(str(path), full_check=True)
    (out,) = run(path)
    assert out.shape == (2, 7, 64)
    assert np.isfinite(out.astype(np.float32)).all()


def test_external_data_is_really_external():
    path = MODEL_DIR / "dit_sample_external.onnx"
    model = onnx.load(str(path), load_external_data=False)
    external = [t for t in model.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    assert len(external) == 8  # the 64x64 weight matrices; biases stay inline
    assert path.with_name(path.name + ".data").stat().st_size > 60_000


def test_external_and_inline_models_compute_the_same():
    (inline,) = run(SOURCE_DIR / "examples/models/dit_sample.onnx")
    (external,) = run(MODEL_DIR / "dit_sample_external.onnx")
    np.testing.assert_array_equal(inline, external)
