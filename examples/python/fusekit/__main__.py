"""The fusekit command line: ``python -m fusekit`` and the ``fusekit`` console command."""

import importlib.util
import sys

from . import _core


def main() -> int:
    """Runs the fusekit command line on sys.argv; returns its exit code."""
    args = sys.argv[1:]
    # selfcheck runs ONNX Runtime in a Python of its own: this one, where it has onnxruntime.
    if (
        args[:1] == ["selfcheck"]
        and "--python" not in args
        and all(importlib.util.find_spec(m) for m in ("onnxruntime", "numpy"))
    ):
        args += ["--python", sys.executable]
    sys.stdout.flush()
    sys.stderr.flush()
    return _core.cli(["fusekit", *args])


if __name__ == "__main__":
    sys.exit(main())
