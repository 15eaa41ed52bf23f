"""What the peers make of the conformance fixtures: ONNX Runtime's transformers optimizer
(`--model_type bert` for the encoders, `gpt2` for the decoders and encoder-decoder steps, `mmdit`
for the diffusion models),
the onnxscript rewriter's ONNX Runtime fusions (`optimize_for_ort`) and onnxsim. Writes
tests/models/peers.json, which make_conformance_table.py puts beside fusekit's columns.

    python tests/models/peers.py --venv DIR     # installs the peers' latest releases from PyPI
                                                # into DIR, then runs them there
    python tests/models/peers.py --venv DIR --only transformers-4.57/bart_decode
                                                # re-measures some fixtures, keeps the rest

Run by a developer, never by CI. Each peer runs in its own process with a time limit, so a crash
is recorded, not fatal; a fused model counts only if ONNX Runtime loads it, and the table marks
one whose outputs differ from the original's.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PACKAGES = ["onnxruntime", "onnxscript", "onnx-ir", "onnxsim", "onnx", "numpy", "sympy",
            "packaging", "coloredlogs"]
ENCODERS = ("bert", "bart_encoder", "clip_text", "vit", "whisper_encoder", "t5_encoder")
DECODERS = ("gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "gpt_neox", "gpt_bigcode", "opt",
            "gemma2", "bloom", "bart", "whisper")
TIME_LIMIT = 600


def ort_model_type(family: str) -> str:
    """The ORT transformers optimizer's --model_type for a manifest family."""
    if family in ENCODERS:
        return "bert"
    if family in DECODERS:
        return "gpt2"
    return "mmdit"


def run_peer(peer: str, source: str, target: str, family: str) -> None:
    """In a child process: one peer on one file, the result written to `target`."""
    import onnx
    if peer == "ort_optimizer":
        from onnxruntime.transformers.optimizer import optimize_model
        optimize_model(source, model_type=ort_model_type(family), num_heads=0, hidden_size=0,
                       opt_level=0).save_model_to_file(target)
    elif peer == "onnxscript":
        import onnx_ir as ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort
        model, _ = optimize_for_ort(ir.load(source))
        ir.save(model, target)
    elif peer == "onnxsim":
        import onnxsim
        model, ok = onnxsim.simplify(onnx.load(source))
        if not ok:
            raise RuntimeError("onnxsim's own check failed")
        onnx.save(model, target)
    else:
        raise ValueError(peer)


def measure(fixture: dict, peer: str, work: pathlib.Path) -> dict:
    import onnx
    sys.path.insert(0, str(HERE.parent / "python"))
    import conformance
    source = conformance.MODELS / fixture["file"]
    target = work / f"{source.stem}.{peer}.onnx"
    try:
        done = subprocess.run([sys.executable, __file__, "--peer", peer, str(source), str(target),
                               fixture["family"]], capture_output=True, text=True,
                              timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {TIME_LIMIT} s", "error_kind": "timeout"}
    if done.returncode != 0 or not target.exists():
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        kind = "crash" if done.returncode < 0 else "error"
        return {"error": lines[-1][:300] if lines else f"exit {done.returncode}",
                "error_kind": kind}
    result = {"fused": conformance.fused_ops(onnx.load(str(target)))}
    try:
        conformance.compare(fixture, target)
        result["matches"] = True
    except AssertionError as e:
        result["matches"] = False
        result["mismatch"] = str(e).splitlines()[0][:300]
    except Exception as e:  # ONNX Runtime refuses the model
        return {"error": f"ONNX Runtime refuses the result: {str(e).splitlines()[0][:300]}",
                "error_kind": "invalid model"}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", help="install the peers into this venv and run there")
    parser.add_argument("--only", nargs="*", default=[], metavar="PREFIX",
                        help="measure only fixtures whose file starts with one of these, keeping "
                             "the others' results")
    parser.add_argument("--peer", nargs=4, metavar=("PEER", "IN", "OUT", "FAMILY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        run_peer(*args.peer)
        return 0
    if args.venv:
        venv = pathlib.Path(args.venv)
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", *PACKAGES],
                       check=True)
        return subprocess.run([str(python), __file__, "--only", *args.only],
                              env=os.environ).returncode
    import importlib.metadata
    sys.path.insert(0, str(HERE.parent / "python"))
    import conformance
    versions = {p: importlib.metadata.version(p) for p in ("onnxruntime", "onnxscript", "onnxsim")}
    results = {}
    if args.only:
        results = json.loads((HERE / "peers.json").read_text())["results"]
    with tempfile.TemporaryDirectory() as work:
        for fixture in conformance.fixtures():
            if args.only and not any(fixture["file"].startswith(p) for p in args.only):
                continue
            stem = fixture["file"].removesuffix(".onnx")
            results[stem] = {p: measure(fixture, p, pathlib.Path(work))
                             for p in ("ort_optimizer", "onnxscript", "onnxsim")}
            print(stem, json.dumps(results[stem]), flush=True)
    known = {f["file"].removesuffix(".onnx") for f in conformance.fixtures()}
    results = {stem: r for stem, r in sorted(results.items()) if stem in known}
    (HERE / "peers.json").write_text(
        json.dumps({"versions": versions, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
