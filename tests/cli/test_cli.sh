#!/usr/bin/env bash
# The fusekit tool as a user meets it: exit codes, one-line errors, no output file on failure,
# reports, idempotence on files, explain with a Graphviz picture.
# Usage: test_cli.sh FUSEKIT SAMPLE.onnx PYTHON WORK_DIR
set -uo pipefail
fusekit=$1 sample=$2 python=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
passed=0 failed=0

check() {  # check NAME COMMAND… : the command must succeed
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
exit_code() { "$@" >out.txt 2>err.txt; echo $?; }

check "help exits 0" test "$(exit_code "$fusekit" --help)" = 0
check "help lists exit codes" grep -q "exit codes" out.txt
check "unknown command exits 2" test "$(exit_code "$fusekit" frobnicate)" = 2
check "unknown rule exits 2" test "$(exit_code "$fusekit" fuse "$sample" -o x.onnx --rules nope)" = 2

check "missing model exits 1" test "$(exit_code "$fusekit" fuse missing.onnx -o out.onnx)" = 1
check "missing model: one line naming the file" \
  test "$(cat err.txt)" = "fusekit: missing.onnx: cannot open: No such file or directory"
check "missing model: no output" test ! -e out.onnx

head -c 1000 "$sample" >truncated.onnx
check "truncated model exits 1" test "$(exit_code "$fusekit" fuse truncated.onnx -o out.onnx)" = 1
check "truncated model: one line" test "$(wc -l <err.txt)" = 1
check "truncated model: says truncated" grep -q "truncated.onnx: truncated" err.txt
check "truncated model: no output" test ! -e out.onnx

check "fuse exits 0" test "$(exit_code "$fusekit" fuse "$sample" -o fused.onnx --report r.json --quiet)" = 0
check "fuse writes the model" test -s fused.onnx
check "report has both blocks" "$python" -c "
import json; r = json.load(open('r.json'))
assert r['removed']['Cast'] == 4 and r['added']['MultiHeadAttention'] == 2, r"
check "fusing the fused model changes nothing" \
  test "$(exit_code "$fusekit" fuse fused.onnx -o twice.onnx --quiet)" = 0
check "byte-identical second run" cmp -s fused.onnx twice.onnx
check "dry run exits 0" test "$(exit_code "$fusekit" fuse "$sample" -o dry.onnx --dry-run)" = 0
check "dry run writes nothing" test ! -e dry.onnx
check "dry run prints the report" grep -q "dit-attention-merged: 2 fused" out.txt

check "inspect exits 0" test "$(exit_code "$fusekit" inspect "$sample")" = 0
check "inspect counts the blocks" grep -q "attention-like blocks (Softmax nodes): 2" out.txt

# A near miss: the first Softmax normalises over axis 1.
"$python" - "$sample" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
softmax = next(n for n in m.graph.node if n.op_type == "Softmax")
softmax.attribute[0].i = 1
onnx.save(m, "near_miss.onnx")
print(softmax.name, file=open("softmax_name.txt", "w"))
PY
softmax=$(cat softmax_name.txt)
check "near miss is reported" test "$(exit_code "$fusekit" fuse near_miss.onnx -o nm.onnx)" = 0
check "near miss names the axis" grep -q "axis = 1, expected the last axis" out.txt
check "explain exits 0" \
  test "$(exit_code "$fusekit" explain near_miss.onnx --node "$softmax" --dot block.dot)" = 0
check "explain gives the reason" grep -q "axis = 1, expected the last axis" out.txt
check "dot file is a graph" grep -q "digraph fusekit" block.dot
check "dot marks the failing node" grep -q "Softmax '$softmax'.*salmon" block.dot
check "dot marks matched nodes" grep -q "palegreen" block.dot
check "explain of an unknown node exits 1" \
  test "$(exit_code "$fusekit" explain near_miss.onnx --node nope)" = 1

# Bad input and bad destinations: exit 1 (or 2 for the command line), one line, nothing written.
check "help after a command exits 0" test "$(exit_code "$fusekit" fuse --help)" = 0
check "demo with a model exits 2" test "$(exit_code "$fusekit" demo extra.onnx)" = 2
check "a huge --num-heads exits 2" \
  test "$(exit_code "$fusekit" fuse "$sample" -o big.onnx --num-heads 99999999999999999999)" = 2
check "a huge --num-heads: nothing written" test ! -e big.onnx
ln -s fused.onnx link.onnx
check "-o onto a symlink exits 1" test "$(exit_code "$fusekit" fuse "$sample" -o link.onnx)" = 1
check "-o onto a symlink: one line" test "$(wc -l <err.txt)" = 1
check "-o onto a symlink: the link stays a link" test -L link.onnx
check "-o onto a device exits 1" test "$(exit_code "$fusekit" fuse "$sample" -o /dev/null)" = 1
mkdir -p report_dir
check "--report onto a directory exits 1" \
  test "$(exit_code "$fusekit" fuse "$sample" -o by_dir.onnx --report report_dir)" = 1
check "--report onto a directory: no model" test ! -e by_dir.onnx
check "--report onto a directory: no temp file" test -z "$(ls | grep -e '-tmp$' -e '\.tmp$')"
check "a failed write leaves no report" \
  test "$(exit_code "$fusekit" fuse "$sample" -o missing_dir/out.onnx --report lone.json)" = 1
check "a failed write: no report" test ! -e lone.json

check "demo exits 0" test "$(exit_code "$fusekit" demo)" = 0
check "demo fuses both blocks" grep -q "dit-attention-merged: 2 fused" out.txt

echo "$passed passed, $failed failed"
test "$failed" = 0
