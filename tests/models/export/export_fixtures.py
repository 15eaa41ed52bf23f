"""Writes the real-export fixtures of tests/models and their manifest.

    python tests/models/export/export_fixtures.py [--only NAME_PREFIX ...] [--out DIR]
    python tests/models/export/export_fixtures.py --set heldout --out /tmp/heldout/newest

Each fixture is a tiny configuration of the framework's own model classes with random weights
(fixed seed, no hub downloads), exported with torch.onnx.export and checked in ONNX Runtime against
torch before it is kept. Needs the packages of requirements.txt beside this file in a scratch venv;
CI and the README commands never run it.

--set heldout exports the held-out set instead (encoders.py, more_decoders.py and the fp32 ts17 /
dynamo18 diffusion families; made with requirements-newest.txt, dynamic batch and sequence where
the model allows), meant for another directory (--out): its manifest is written there. The
fixtures of tests/models made with those releases are files of such a run, copied with their
manifest entries, each given a "versions" field naming its set.
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


def heldout_fixtures() -> dict:
    import encoders
    import more_decoders
    diffusion_kept = {n: f for n, f in diffusion.FIXTURES.items()
                      if n.split(".")[0] in ("f5tts_dit", "sd3", "sd35_qknorm", "flux")
                      and n.split(".", 1)[1] in ("ts17.fp32", "dynamo18.fp32")}
    return {**encoders.FIXTURES, **more_decoders.FIXTURES, **diffusion_kept}


def _one_line(message: str) -> str:
    """The first line of an error, or for torch.onnx's reports the line under their
    "## Exception summary" (their first line only says which step failed)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if "## Exception summary" in lines and lines.index("## Exception summary") + 1 < len(lines):
        return lines[lines.index("## Exception summary") + 1][:500]
    return lines[0][:500] if lines else ""


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
    parser.add_argument("--out", type=pathlib.Path, default=common.OUT_DIR,
                        help="directory of the .onnx files and manifest.json (default: %(default)s)")
    parser.add_argument("--set", choices=("fixtures", "heldout"), default="fixtures",
                        help="the tests/models fixtures (default) or the held-out set")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    common.OUT_DIR = args.out.resolve()
    manifest_path = common.OUT_DIR / "manifest.json"
    if args.chains:
        manifest = json.loads(manifest_path.read_text())
        for entry in manifest["fixtures"]:
            entry["chain"] = common.block_chain(
                common.inlined(onnx.load(str(common.OUT_DIR / entry["file"]))))
        manifest["not_exported"] = not_exported()
        manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        return 0
    fixtures = {**diffusion.FIXTURES, **decoders.FIXTURES}
    if args.set == "heldout":
        fixtures = heldout_fixtures()
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
            failed.append(f"{name}: {type(e).__name__}: {_one_line(str(e))}")
            written = common.OUT_DIR / f"{name}.onnx"
            if args.set == "heldout" and written.exists():  # written, then failed its check
                (common.OUT_DIR / "failed").mkdir(exist_ok=True)
                written.replace(common.OUT_DIR / "failed" / written.name)
            print(f"FAILED {failed[-1]}", flush=True)
            continue
        done[entry["file"]] = entry
        print(f"ok {entry['file']}: {entry['blocks']} blocks, {entry['bytes']} bytes", flush=True)
    # Several exports may run at once (one per family): merge under a lock.
    with open(manifest_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = {}
        if manifest_path.exists():
            entries = {e["file"]: e for e in json.loads(manifest_path.read_text())["fixtures"]}
        entries.update(done)
        known = {f"{n}.onnx" for n in fixtures}
        manifest = {"versions": common.versions(), "not_exported": not_exported(),
                    "fixtures": sorted((e for f, e in entries.items() if f in known),
                                       key=lambda e: e["file"])}
        if args.set == "heldout":  # failed exports, with their one-line error, until they pass
            old = json.loads(manifest_path.read_text()).get("failed", {}) \
                if manifest_path.exists() else {}
            old.update({line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in failed})
            manifest["failed"] = {n: why for n, why in sorted(old.items())
                                  if f"{n}.onnx" not in entries and n in fixtures}
        manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
