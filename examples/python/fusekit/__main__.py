"""The fusekit command line: ``python -m fusekit`` and the ``fusekit`` console command."""

import sys

from . import _core


def main() -> int:
    """Runs the fusekit command line on sys.argv; returns its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    return _core.cli(["fusekit", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
