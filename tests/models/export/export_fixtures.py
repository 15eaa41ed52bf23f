"""Writes the real-export fixtures of tests/models and their manifest, one version set at a time.

    python tests/models/export/export_fixtures.py [--only NAME_PREFIX ...] [--out DIR] [--list]
    python tests/models/export/export_fixtures.py --chains

A version set is the packages of one requirements file beside this script
(requirements-transformers-X.Y.txt), installed in a scratch venv of its own; the script runs in
that venv and exports every family the set's releases support into DIR/transformers-X.Y/ (DIR is
tests/models unless --out says otherwise), named for the transformers it finds. DIR/manifest.json
lists every set's fixtures ("file" relative to DIR, with the "set" and "versions" that made it)
and, per set, its versions and the fixtures it could not export with why. CI and the README
commands never run it.

Each fixture is a tiny configuration of the framework's own model classes with random weights
(fixed seed, no hub downloads), exported with torch.onnx.export and checked in ONNX Runtime
against torch, at the export's sizes and at others along its dynamic axes, before it is kept.
"""
from __future__ import annotations

import argparse
import fcntl
import importlib.metadata
import json
import pathlib
import sys

import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
import decoders  # noqa: E402
import diffusion  # noqa: E402
import encoder_decoders  # noqa: E402
import encoders  # noqa: E402
import more_decoders  # noqa: E402
import more_diffusion  # noqa: E402
import video_audio_diffusion  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def set_name() -> str:
    """The version set this venv holds, named for its transformers release: transformers-X.Y."""
    major, minor = importlib.metadata.version("transformers").split(".")[:2]
    return f"transformers-{major}.{minor}"


def all_fixtures() -> dict:
    """Every family: decoders.py and diffusion.py last, so that their GPT-2 fixtures (with their
    opset-23 and fp16 forms) are the ones of that name."""
    return {**encoders.FIXTURES, **more_decoders.FIXTURES, **encoder_decoders.FIXTURES,
            **diffusion.FIXTURES, **more_diffusion.FIXTURES,
            **video_audio_diffusion.FIXTURES, **decoders.FIXTURES}


def _one_line(message: str) -> str:
    """The first line of an error, or for torch.onnx's reports the line under their
    "## Exception summary" (their first line only says which step failed)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if "## Exception summary" in lines and lines.index("## Exception summary") + 1 < len(lines):
        return lines[lines.index("## Exception summary") + 1][:500]
    return lines[0][:500] if lines else ""


def unloadable() -> dict[str, str]:
    """Configurations whose export exists but cannot be kept, with why."""
    return {**getattr(diffusion, "UNLOADABLE", {}), **getattr(decoders, "UNLOADABLE", {}),
            **getattr(more_decoders, "UNLOADABLE", {})}


def recompute_chains(root: pathlib.Path) -> int:
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["fixtures"]:
        entry["chain"] = common.block_chain(common.inlined(onnx.load(str(root / entry["file"]))))
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[],
                        help="export only fixtures whose name starts with one of these")
    parser.add_argument("--list", action="store_true", help="list the fixtures and exit")
    parser.add_argument("--chains", action="store_true",
                        help="only recompute the manifest's block chains from the files")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT,
                        help="directory of the set folders and manifest.json (default: %(default)s)")
    args = parser.parse_args()
    root = args.out.resolve()
    if args.chains:
        return recompute_chains(root)
    fixtures = all_fixtures()
    if args.list:
        print("\n".join(fixtures))
        return 0
    version_set = set_name()
    common.OUT_DIR = root / version_set
    common.OUT_DIR.mkdir(parents=True, exist_ok=True)
    chosen = [n for n in fixtures if not args.only or any(n.startswith(p) for p in args.only)]
    failed, done = {}, {}
    for name in chosen:
        written = common.OUT_DIR / f"{name}.onnx"
        try:
            common.seeded()
            entry = fixtures[name](name)
        except Exception as e:  # one broken export must not lose the others
            # ONNX Runtime names the file it failed to load: the manifest is committed, so the
            # path is kept relative to it.
            failed[name] = f"{type(e).__name__}: {_one_line(str(e))}".replace(f"{root}/", "")
            if written.exists():  # written, then failed its check: not a fixture
                written.unlink()
            print(f"FAILED {name}: {failed[name]}", flush=True)
            continue
        entry = {**entry, "file": f"{version_set}/{entry['file']}", "set": version_set,
                 "versions": common.versions()}
        done[entry["file"]] = entry
        print(f"ok {entry['file']}: {entry['blocks']} blocks, {entry['bytes']} bytes", flush=True)
    # Several exports may run at once (one per family, or one per set): merge under a lock.
    manifest_path = root / "manifest.json"
    with open(root / "manifest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = (json.loads(manifest_path.read_text()) if manifest_path.exists()
                    else {"sets": {}, "fixtures": []})
        entries = {e["file"]: e for e in manifest["fixtures"]}
        entries.update(done)
        known = {f"{version_set}/{n}.onnx" for n in fixtures}
        entries = {f: e for f, e in entries.items() if e["set"] != version_set or f in known}
        own = manifest["sets"].get(version_set, {})
        # A configuration left out as unloadable is listed where this run chose it.
        left_out = {n: why for n, why in unloadable().items()
                    if not args.only or any(n.startswith(p) for p in args.only)}
        missing = {**own.get("not_exported", {}), **failed, **left_out}
        manifest["sets"][version_set] = {
            "requirements": f"export/requirements-{version_set}.txt",
            "versions": common.versions(),
            "not_exported": {n: why for n, why in sorted(missing.items())
                             if f"{version_set}/{n}.onnx" not in entries
                             and (n in fixtures or n in unloadable())},
        }
        manifest["sets"] = dict(sorted(manifest["sets"].items()))
        manifest["fixtures"] = sorted(entries.values(), key=lambda e: e["file"])
        manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    for name, why in failed.items():
        print(f"FAILED {name}: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
