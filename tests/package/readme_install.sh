#!/usr/bin/env bash
# The README's build-and-install lines, verbatim, in a fresh copy of the source tree
# (tests/package/readme.sh), installing under DESTDIR instead of onto the machine; then what they
# installed: the license, a working fusekit tool, and the CMake package as a project of its own
# uses it (tests/package/consumer: find_package(fusekit), both targets linked and run).
# Usage: tests/package/readme_install.sh WORK_DIR ONNX_VERSION PYTHON
#   ONNX_VERSION: the onnx release the build finds (ctest passes it), which `fusekit --version`
#   must name; PYTHON: one with onnx and onnxruntime, for the rule test's selfcheck.
# Then the README's DSL-only install, and a rule author's project on it (tests/package/dsl_consumer:
# the example rule compiled against the engine alone, its test built as the package's CMake
# functions build one, and run).
# Time on a 2-core machine: about the README's build time and two minutes more. Nothing stays
# behind after a success.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "$1")
onnx_version=$2
python=${3:?"usage: readme_install.sh WORK_DIR ONNX_VERSION PYTHON"}
version=$(sed -n 's/^project(fusekit VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
rm -rf "$work"

DESTDIR=$work/destdir bash "$root/tests/package/readme.sh" "$work/readme" install
prefix=$work/destdir/usr/local
echo "the README's build tree holds $(du -sh "$work/readme/src/build" | cut -f1)"

echo "== the installed files"
cmp "$root/LICENSE" "$prefix/share/doc/fusekit/LICENSE"
echo "the license: $prefix/share/doc/fusekit/LICENSE"
said=$("$prefix/bin/fusekit" --version)
[ "$said" = "fusekit $version (onnx $onnx_version)" ] || {
  echo "readme_install.sh: the installed fusekit --version says '$said'" >&2
  exit 1
}
echo "the tool: $said"

echo "== a project of its own, with find_package(fusekit)"
cmake -S "$root/tests/package/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release --log-level=WARNING
cmake --build "$work/consumer"
"$work/consumer/consumer"

echo "== the DSL-only install, and a rule author's project on it"
DESTDIR=$work/dsl-destdir bash "$root/tests/package/readme.sh" "$work/readme-dsl" install-dsl
dsl_prefix=$work/dsl-destdir/usr/local
[ ! -e "$dsl_prefix/bin/fusekit" ] && [ -z "$(find "$dsl_prefix" -name 'libfusekit_rules*')" ] || {
  echo "readme_install.sh: the DSL-only install holds the tool or the rule library" >&2
  exit 1
}
echo "the DSL-only install: $(du -sh "$dsl_prefix" | cut -f1), its build tree" \
  "$(du -sh "$work/readme-dsl/src/build" | cut -f1)"
cmake -S "$root/tests/package/dsl_consumer" -B "$work/dsl_consumer" \
  -DCMAKE_PREFIX_PATH="$dsl_prefix" -DFUSEKIT_EXAMPLE_RULE_DIR="$root/examples/custom_rule" \
  -DFUSEKIT_PYTHON="$python" -DCMAKE_BUILD_TYPE=Release --log-level=WARNING
cmake --build "$work/dsl_consumer"
"$work/dsl_consumer/dsl_consumer"
# fusekit_rule_test() made each test and registered its specifications: ctest runs them all.
ctest --test-dir "$work/dsl_consumer" --output-on-failure
[ "$(ctest --test-dir "$work/dsl_consumer" -N | grep -c 'Test *#')" -ge 8 ] || {
  echo "readme_install.sh: fusekit_rule_test() registered too few specifications" >&2
  exit 1
}
# The reference texts beside the headers they describe.
for doc in include/fusekit/pattern/README.md include/fusekit/graph/README.md; do
  [ -f "$dsl_prefix/$doc" ] || { echo "readme_install.sh: $doc is not installed" >&2; exit 1; }
done

rm -rf "$work"
