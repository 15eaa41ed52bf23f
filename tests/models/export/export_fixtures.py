"""Writes the real-export fixtures of tests/models and their manifest.

    python tests/models/export/export_fixtures.py [--only NAME_PREFIX ...]

Each fixture is a tiny configuration of the framework's own model classes with random weights
(fixed seed, no hub downloads), exported with torch.onnx.export and checked in ONNX Runtime against
torch before it is kept. Needs the packages of requirements.txt beside this file in a scratch venv;
CI and the README commands never run it.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import pathlib
import sys

import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
import decoders  # noqa: E402
import diffusion  # noqa: E402

MANIFEST = common.OUT_DIR / "manifest.json"


def not_exported() -> dict[str, str]:
    """Configurations whose export exists but cannot be kept, with why."""
    return {**getattr(diffusion, "UNLOADABLE", {}), **getattr(decoders, "UNLOADABLE", {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[],
                        help="export only fixtures whose name starts with one of these")
    parser.add_argument("--list", action="store_true", help="list the fixtures and exit")
    parser.add_argument("--chains", action="store_true",
                        help="only recompute the manifest's block chains from the files")
    args = parser.parse_args()
    if args.chains:
        manifest = json.loads(MANIFEST.read_text())
        for entry in manifest["fixtures"]:
            entry["chain"] = common.block_chain(onnx.load(str(common.OUT_DIR / entry["file"])))
        manifest["not_exported"] = not_exported()
        MANIFEST.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        return 0
    fixtures = {**diffusion.FIXTURES, **decoders.FIXTURES}
    if args.list:
        print("\n".join(fixtures))
        return 0
    chosen = [n for n in fixtures if not args.only or any(n.startswith(p) for p in args.only)]
    failed, done = [], {}
    for name in chosen:
        try:
            common.seeded()
            entry = fixtures[name](name)
        except Exception as e:  # one broken export must not lose the others
            failed.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            print(f"FAILED {failed[-1]}", flush=True)
            continue
        done[entry["file"]] = entry
        print(f"ok {entry['file']}: {entry['blocks']} blocks, {entry['bytes']} bytes", flush=True)
    # Several exports may run at once (one per family): merge under a lock.
    with open(MANIFEST.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = {}
        if MANIFEST.exists():
            entries = {e["file"]: e for e in json.loads(MANIFEST.read_text())["fixtures"]}
        entries.update(done)
        known = {f"{n}.onnx" for n in fixtures}
        manifest = {"versions": common.versions(), "not_exported": not_exported(),
                    "fixtures": sorted((e for f, e in entries.items() if f in known),
                                       key=lambda e: e["file"])}
        MANIFEST.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
