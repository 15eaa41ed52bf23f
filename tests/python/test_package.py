"""The fusekit Python package as pip installs it (tests/python/package.sh builds the wheel, repairs
it and installs it into a fresh virtual environment to run this): fuse, fuse_file and inspect on
models, paths and bytes, fusekit.Error with the command line's words, the report equal to the one
the package's own `fusekit` command writes, ONNX Runtime parity of a fused fixture and an external
data round trip.

Needs the package installed: a missing one fails, it is never skipped.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import fusekit

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "models" / "dit_sample.onnx"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def cli() -> list[str]:
    """The package's own console command, beside the interpreter that runs the tests."""
    script = pathlib.Path(sys.executable).parent / "fusekit"
    assert script.exists(), f"{script}: the package's console command is missing"
    return [str(script)]


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*cli(), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def cmake_version() -> str:
    text = (ROOT / "CMakeLists.txt").read_text()
    return text.split("project(fusekit VERSION ", 1)[1].split()[0]


def test_version_is_the_cmake_project_version():
    assert fusekit.__version__ == cmake_version()


def test_error_is_an_exception_class_of_the_package():
    assert issubclass(fusekit.Error, Exception)
    assert fusekit.Error.__module__ == "fusekit"


def test_typed():
    package = pathlib.Path(fusekit.__file__).parent
    assert (package / "py.typed").exists() and (package / "_core.pyi").exists()
    assert fusekit.fuse.__doc__ and fusekit.fuse_file.__doc__ and fusekit.inspect.__doc__


def test_help():
    r = run_cli("--help")
    assert r.returncode == 0 and "exit codes" in r.stdout


def test_python_dash_m_runs_the_demo():
    r = subprocess.run([sys.executable, "-m", "fusekit", "demo"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "fusekit demo" in r.stdout and "2 fused" in r.stdout


def test_selfcheck_gets_the_packages_own_python(monkeypatch):
    # The wheel leaves the bundled rules' selfchecks out; one built with them
    # (FUSEKIT_BUNDLED_SELFCHECK=ON) judges parity in this interpreter, which has onnxruntime.
    import fusekit.__main__ as command

    told = []
    monkeypatch.setattr(command._core, "cli", lambda args: told.append(args) or 0)
    for args in (["selfcheck"], ["selfcheck", "--python", "/usr/bin/python3"], ["demo"]):
        monkeypatch.setattr(sys, "argv", ["fusekit", *args])
        assert command.main() == 0
    assert told == [["fusekit", "selfcheck", "--python", sys.executable],
                    ["fusekit", "selfcheck", "--python", "/usr/bin/python3"], ["fusekit", "demo"]]
    r = run_cli("selfcheck")
    assert (r.returncode, r.stderr) == (1, "fusekit: this build leaves out the bundled rules' "
                                        "selfchecks (CMake option FUSEKIT_BUNDLED_SELFCHECK=OFF)\n")


def test_command_line_exit_codes():
    assert run_cli("frobnicate").returncode == 2
    r = run_cli("fuse", "missing.onnx", "-o", "out.onnx")
    assert r.returncode == 1
    assert r.stderr == "fusekit: missing.onnx: cannot open: No such file or directory\n"


def test_fuse_model_proto():
    model = onnx.load(SAMPLE)
    before = model.SerializeToString()
    fused, report = fusekit.fuse(model)
    assert isinstance(fused, onnx.ModelProto)
    assert model.SerializeToString() == before, "the input was modified"
    assert report["added"].get("MultiHeadAttention") == 2
    assert sum(n.op_type == "MultiHeadAttention" for n in fused.graph.node) == 2
    onnx.checker.check_model(fused)


def test_fuse_path_and_bytes_agree():
    from_path, report_path = fusekit.fuse(SAMPLE)
    from_str, _ = fusekit.fuse(str(SAMPLE))
    from_bytes, report_bytes = fusekit.fuse(SAMPLE.read_bytes())
    assert isinstance(from_path, onnx.ModelProto) and isinstance(from_bytes, bytes)
    assert from_path.SerializeToString() == from_str.SerializeToString()
    assert onnx.load_from_string(from_bytes) == from_path
    assert report_path == report_bytes


def test_options():
    _, report = fusekit.fuse(SAMPLE, rules=["scaled-dot-product-attention"], explain=True)
    assert [r["name"] for r in report["rules"]] == ["scaled-dot-product-attention"]
    with pytest.raises(fusekit.Error, match="^--target is ort or onnx$"):
        fusekit.fuse(SAMPLE, target="cuda")
    with pytest.raises(fusekit.Error, match="^unknown rule 'nope'$"):
        fusekit.fuse(SAMPLE, rules=["nope"])
    with pytest.raises(fusekit.Error, match="num-heads"):
        fusekit.fuse(SAMPLE, num_heads=0)
    with pytest.raises(TypeError):
        fusekit.fuse(42)


def pre_norm_residual() -> bytes:
    """LayerNormalization(x + skip), the sum read on by the next layer."""
    h = onnx.helper
    f = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [h.make_node("Add", ["x", "skip"], ["sum"], name="sum"),
         h.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], name="y", axis=-1),
         h.make_node("Neg", ["sum"], ["next"], name="next")],
        "residual",
        [h.make_tensor_value_info("x", f, [2, 4, 8]), h.make_tensor_value_info("skip", f, [2, 4, 8])],
        [h.make_tensor_value_info("y", f, [2, 4, 8]), h.make_tensor_value_info("next", f, [2, 4, 8])],
        [h.make_tensor("gamma", f, [8], [1.0] * 8), h.make_tensor("beta", f, [8], [0.0] * 8)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_provider():
    def ops(data: bytes) -> list[str]:
        return [n.op_type for n in onnx.load_from_string(data).graph.node]

    cpu, report = fusekit.fuse(pre_norm_residual())
    assert "SkipLayerNormalization" not in ops(cpu)
    [near_miss] = [n for r in report["rules"] if r["name"] == "skip-layer-normalization"
                   for n in r["near_misses"]]
    assert near_miss["reason"].endswith("(--provider cuda fuses it)")
    cuda, _ = fusekit.fuse(pre_norm_residual(), provider="cuda")
    assert ops(cuda) == ["SkipLayerNormalization", "Neg"]
    with pytest.raises(fusekit.Error, match="^--provider is cpu or cuda$"):
        fusekit.fuse(SAMPLE, provider="rocm")
    with pytest.raises(fusekit.Error, match="it needs --target ort$"):
        fusekit.fuse(SAMPLE, target="onnx", provider="cuda")


def test_report_equals_the_command_lines(tmp_path):
    r = run_cli("fuse", SAMPLE, "-o", tmp_path / "out.onnx", "--report", tmp_path / "r.json",
                "--quiet")
    assert r.returncode == 0, r.stderr
    _, report = fusekit.fuse(onnx.load(SAMPLE))
    assert report == json.loads((tmp_path / "r.json").read_text())
    assert fusekit.fuse_file(SAMPLE, tmp_path / "api.onnx") == report
    # The same bytes as the command line writes.
    assert (tmp_path / "api.onnx").read_bytes() == (tmp_path / "out.onnx").read_bytes()


def test_errors_carry_the_command_lines_message(tmp_path):
    def message(*args) -> str:
        r = run_cli("fuse", *args, "-o", tmp_path / "never.onnx", cwd=tmp_path)
        assert r.returncode == 1
        assert r.stderr.startswith("fusekit: ") and r.stderr.count("\n") == 1, r.stderr
        return r.stderr[len("fusekit: "):-1]

    missing = tmp_path / "missing.onnx"
    with pytest.raises(fusekit.Error) as e:
        fusekit.fuse(missing)
    assert str(e.value) == message(missing)
    with pytest.raises(fusekit.Error) as e:
        fusekit.fuse_file(missing, tmp_path / "out.onnx")
    assert str(e.value) == message(missing)

    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"garbage")
    with pytest.raises(fusekit.Error) as e:
        fusekit.fuse_file(garbage, tmp_path / "out.onnx")
    assert str(e.value) == message(garbage)
    with pytest.raises(fusekit.Error) as e:
        fusekit.fuse(b"garbage")
    # In memory the model has no file name: the same words, named <memory>.
    assert str(e.value) == message(garbage).replace(str(garbage), "<memory>")
    with pytest.raises(fusekit.Error):
        fusekit.inspect(b"")
    assert not (tmp_path / "out.onnx").exists() and not (tmp_path / "never.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.onnx"], "something was written"


def test_inspect():
    found = fusekit.inspect(SAMPLE)
    assert found == fusekit.inspect(onnx.load(SAMPLE)) == fusekit.inspect(SAMPLE.read_bytes())
    assert found["opsets"]["ai.onnx"] >= 1
    assert found["ops"]["Softmax"] == 2 and len(found["attention_blocks"]) == 2
    assert found["value_dtypes"]["float16"] > 0
    assert "scaled-dot-product-attention" in found["rules"]
    assert found["report"]["added"]["MultiHeadAttention"] == 2
    # What the command line prints, as data.
    text = run_cli("inspect", SAMPLE).stdout
    assert f"attention-like blocks (Softmax nodes): {len(found['attention_blocks'])}" in text
    for op, n in found["ops"].items():
        assert f" {op} {n};" in text
    # The facts, as `inspect --shapes --json` gives them.
    assert found["shapes"] == json.loads(run_cli("inspect", SAMPLE, "--shapes", "--json").stdout)
    for given in onnx.load(SAMPLE).graph.input:
        expected = onnx.helper.tensor_dtype_to_np_dtype(given.type.tensor_type.elem_type).name
        assert found["shapes"][given.name]["dtype"] == expected


def test_runtime_parity_of_a_fused_fixture(tmp_path):
    import conformance

    fixtures = [f for f in conformance.fixtures() if f["dtype"] == "float32"
                and (conformance.MODELS / f["file"]).exists()]
    assert fixtures, "no float32 fixture in tests/models"
    fixture = next((f for f in fixtures if f["family"] == "bert"), fixtures[0])
    fused, report = fusekit.fuse(conformance.MODELS / fixture["file"])
    assert conformance.fused_ops(fused) >= 1, report
    onnx.save(fused, tmp_path / "fused.onnx")
    conformance.compare(fixture, tmp_path / "fused.onnx")


def weights(model: onnx.ModelProto) -> dict:
    # By value: a tensor onnx.load read from external data says data_location=DEFAULT explicitly.
    return {t.name: onnx.numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}


def test_external_data_round_trip(tmp_path):
    source_dir, out_dir = tmp_path / "in", tmp_path / "out"
    source_dir.mkdir()
    out_dir.mkdir()
    reference, _ = fusekit.fuse(onnx.load(SAMPLE))
    model = onnx.load(SAMPLE)  # save_model makes its tensors external in place
    onnx.save_model(model, source_dir / "model.onnx", save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=0)
    assert (source_dir / "model.onnx.data").exists()
    # A path comes back as onnx.load reads one: the weights loaded from beside the file.
    from_path, _ = fusekit.fuse(source_dir / "model.onnx")
    assert from_path.graph.node == reference.graph.node
    assert weights(from_path) == weights(reference)
    report = fusekit.fuse_file(source_dir / "model.onnx", out_dir / "fused.onnx")
    assert report["added"]["MultiHeadAttention"] == 2
    assert (out_dir / "fused.onnx.data").exists(), sorted(os.listdir(out_dir))
    # The copy reads its weights from its own directory: the source may go.
    shutil.rmtree(source_dir)
    fused = onnx.load(out_dir / "fused.onnx")  # loads the external data
    assert weights(fused) == weights(reference)
    # ONNX Runtime reads no external data before shape inference (a Reshape's shape among them,
    # size_threshold=0): it runs the model as onnx.load read it from the files fusekit wrote.
    session = ort.InferenceSession(fused.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = ort.InferenceSession(reference.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for i in session.get_inputs():
        dims = [d if isinstance(d, int) else 2 for d in i.shape]
        dtype = {"tensor(float16)": np.float16, "tensor(float)": np.float32,
                 "tensor(int64)": np.int64, "tensor(bool)": np.bool_}[i.type]
        feed[i.name] = (rng.standard_normal(dims) * 0.5).astype(dtype) if dtype in (
            np.float16, np.float32) else np.ones(dims, dtype)
    for got, want in zip(session.run(None, feed), expected.run(None, feed)):
        np.testing.assert_array_equal(got, want)
