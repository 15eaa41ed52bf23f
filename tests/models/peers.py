"""What the peers make of the conformance fixtures: ONNX Runtime's transformers optimizer
(`--model_type bert` for the encoders, `gpt2` for the decoders and encoder-decoder steps, `mmdit`
for the diffusion models),
the onnxscript rewriter's ONNX Runtime fusions (`optimize_for_ort`) and onnxsim, on the manifest's
fixtures and on the mixed-precision ones converted from them (tests/python/converted.py) that
ONNX Runtime loads. Writes tests/models/peers.json, which make_conformance_table.py puts beside
fusekit's columns.

    python tests/models/peers.py --venv DIR     # installs the peers' latest releases from PyPI
                                                # into DIR, then runs them there
    python tests/models/peers.py --venv DIR --only transformers-4.57/bart_decode
                                                # re-measures some fixtures, keeps the rest
    python tests/models/peers.py --venv DIR --only ort-core-fp32/ occ-fp16/
                                                # the same for converted fixtures

The converted files are those the conformance suite judges: made (or found in their cache) by the
project's interpreter (--converter-python, .venv/bin/python by default), whose converter versions
are the cache's key, never by the peers' venv, whose newer ONNX Runtime would convert differently.

Run by a developer, never by CI. Each peer runs in its own process with a time limit, so a crash
is recorded, not fatal; a fused model counts only if ONNX Runtime loads it, and the table marks
one whose outputs differ from the original's (for a converted fixture also one less accurate than
the converted model against its float32 original, as conformance.compare judges fusekit's).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROJECT_PYTHON = HERE.parents[1] / ".venv" / "bin" / "python"
PACKAGES = ["onnxruntime", "onnxscript", "onnx-ir", "onnxsim", "onnx", "numpy", "sympy",
            "packaging", "coloredlogs"]
ENCODERS = ("bert", "bart_encoder", "clip_text", "vit", "whisper_encoder", "t5_encoder",
            "deberta_v2")
DECODERS = ("gpt2", "llama", "qwen2", "qwen3", "mistral", "phi3", "gpt_neox", "gpt_bigcode", "opt",
            "gemma2", "bloom", "bart", "whisper", "deepseek_v3", "falcon", "phi", "diffllama",
            "jetmoe")
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


def selected(fixture: dict, only: list[str]) -> bool:
    return not only or any(fixture["file"].startswith(p) for p in only)


def materialise(only: list[str], map_file: str) -> None:
    """In the project's interpreter: makes (or finds in the cache) the converted files ONNX
    Runtime loads that `only` selects, and writes {"paths": {file: path}, "converters": {...}}
    to `map_file`."""
    import onnxconverter_common
    import onnxruntime
    sys.path.insert(0, str(HERE.parent / "python"))
    import converted
    refused = converted.unloadable()
    paths = {f["file"]: str(converted.path_of(f)) for f in converted.fixtures()
             if f["file"] not in refused and selected(f, only)}
    converters = {"onnxruntime": onnxruntime.__version__,
                  "onnxconverter-common": onnxconverter_common.__version__}
    pathlib.Path(map_file).write_text(json.dumps({"paths": paths, "converters": converters}))


def converted_files(only: list[str], python: str) -> dict:
    """materialise() run by `python`, the project's interpreter: its map."""
    with tempfile.TemporaryDirectory() as work:
        map_file = pathlib.Path(work) / "converted.json"
        subprocess.run([python, __file__, "--materialise", str(map_file), "--only", *only],
                       check=True)
        return json.loads(map_file.read_text())


def last_error(stderr: str) -> str:
    """The exception a traceback ends with, its lines joined (onnxsim's run over several), or
    the last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if re.match(r"[\w.]+(Error|Exception|Fail)\b.*:",
                                                             line)]
    return " ".join(lines[starts[-1] if starts else -1:])[:300] if lines else ""


def measure(fixture: dict, peer: str, work: pathlib.Path,
            source: pathlib.Path | None = None) -> dict:
    """One peer on one fixture; `source` the converted file for a converted fixture."""
    import onnx
    sys.path.insert(0, str(HERE.parent / "python"))
    import conformance
    source = source or conformance.MODELS / fixture["file"]
    target = work / f"{source.stem}.{peer}.onnx"
    try:
        done = subprocess.run([sys.executable, __file__, "--peer", peer, str(source), str(target),
                               fixture["family"]], capture_output=True, text=True,
                              timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return {"error": f"no result in {TIME_LIMIT} s", "error_kind": "timeout"}
    if done.returncode != 0 or not target.exists():
        kind = "crash" if done.returncode < 0 else "error"
        return {"error": last_error(done.stderr) or f"exit {done.returncode}", "error_kind": kind}
    written = onnx.load(str(target))
    result = {"fused": conformance.fused_ops(written), "layer_ops": conformance.layer_ops(written)}
    try:
        conformance.compare(fixture, target, source=source)
        result["matches"] = True
    except AssertionError as e:
        result["matches"] = False
        result["mismatch"] = str(e).splitlines()[0][:300]
    except Exception as e:  # ONNX Runtime refuses the model
        if conformance.by_reference(fixture):  # bfloat16: the reference evaluator runs both
            return {"error": f"the ONNX reference evaluator cannot run the result: "
                             f"{str(e).splitlines()[0][:300]}", "error_kind": "not run"}
        return {"error": f"ONNX Runtime refuses the result: {str(e).splitlines()[0][:300]}",
                "error_kind": "invalid model"}
    if "converted_from" in fixture:
        try:  # the mean and max error ratios against the float32 original, as for fusekit
            result["accuracy"] = [round(r, 4) for r in conformance.accuracy(fixture, source,
                                                                              target)]
        except Exception as e:  # recorded, as a peer's other failures are
            result["accuracy_error"] = str(e).splitlines()[0][:300]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", help="install the peers into this venv and run there")
    parser.add_argument("--only", nargs="*", default=[], metavar="PREFIX",
                        help="measure only fixtures whose file starts with one of these, keeping "
                             "the others' results")
    parser.add_argument("--converter-python", default=str(PROJECT_PYTHON if
                                                          PROJECT_PYTHON.exists() else
                                                          sys.executable),
                        help="the interpreter that makes the converted fixtures, as the "
                             "conformance suite does (default: the project's .venv)")
    parser.add_argument("--peer", nargs=4, metavar=("PEER", "IN", "OUT", "FAMILY"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--materialise", metavar="MAP", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        run_peer(*args.peer)
        return 0
    if args.materialise:
        materialise(args.only, args.materialise)
        return 0
    if args.venv:
        venv = pathlib.Path(args.venv)
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", *PACKAGES],
                       check=True)
        return subprocess.run([str(python), __file__, "--converter-python",
                               args.converter_python, "--only", *args.only],
                              env=os.environ).returncode
    import importlib.metadata
    sys.path.insert(0, str(HERE.parent / "python"))
    import conformance
    import converted
    versions = {p: importlib.metadata.version(p) for p in ("onnxruntime", "onnxscript", "onnxsim")}
    previous = json.loads((HERE / "peers.json").read_text()) if args.only else {}
    results = previous.get("results", {})
    converted_with = previous.get("converted_with")
    # The converted fixtures ONNX Runtime loads, each with the file the suite judges.
    refused = converted.unloadable()
    loadable = [f for f in converted.fixtures() if f["file"] not in refused]
    fixtures = [(f, None) for f in conformance.fixtures() if selected(f, args.only)]
    if any(selected(f, args.only) for f in loadable):
        made = converted_files(args.only, args.converter_python)
        converted_with = made["converters"]
        fixtures += [(f, pathlib.Path(made["paths"][f["file"]])) for f in loadable
                     if selected(f, args.only)]
    with tempfile.TemporaryDirectory() as work:
        for fixture, source in fixtures:
            stem = fixture["file"].removesuffix(".onnx")
            results[stem] = {p: measure(fixture, p, pathlib.Path(work), source)
                             for p in ("ort_optimizer", "onnxscript", "onnxsim")}
            print(stem, json.dumps(results[stem]), flush=True)
    known = {f["file"].removesuffix(".onnx") for f in [*conformance.fixtures(), *loadable]}
    results = {stem: r for stem, r in sorted(results.items()) if stem in known}
    out = {"versions": versions, "converted_with": converted_with, "results": results}
    if converted_with is None:
        del out["converted_with"]
    (HERE / "peers.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
