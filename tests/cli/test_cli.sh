#!/usr/bin/env bash
# The fusekit tool as a user meets it: exit codes, one-line errors, no output file on failure,
# reports, idempotence on files, explain with a Graphviz picture, help and version.
# Usage: test_cli.sh FUSEKIT SAMPLE.onnx PYTHON WORK_DIR ONNX_VERSION [SELFCHECKS]
#   ONNX_VERSION: the onnx release the tool is built with, which --version must name
#   SELFCHECKS: ON (default) where the tool has the bundled rules' selfchecks, OFF where its build
#   left them out (CMake's FUSEKIT_BUNDLED_SELFCHECK), which it must then say
set -uo pipefail
fusekit=$1 sample=$2 python=$3 work=$4 onnx_version=$5 selfchecks=${6:-ON}
version=$(sed -n 's/^project(fusekit VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
passed=0 failed=0

check() {  # check NAME COMMAND… : the command must succeed
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
exit_code() { "$@" >out.txt 2>err.txt; echo $?; }

check "help exits 0" test "$(exit_code "$fusekit" --help)" = 0
check "help: the overview" test "$(head -n 1 out.txt)" = "usage: fusekit COMMAND ARGS..."
check "help lists the commands" test "$(grep -c -e "^  fuse  " -e "^  inspect  " \
  -e "^  explain  " -e "^  demo  " -e "^  selfcheck " out.txt)" = 5
check "help lists exit codes" grep -qx \
  "exit codes: 0 done; 1 the model could not be read, fused or written (nothing is written), or" \
  out.txt
# Each command's own page: its usage first, its options, the exit codes.
page() {  # page COMMAND "FIRST LINE" "AN OPTION'S LINE"
  check "$1 --help exits 0" test "$(exit_code "$fusekit" "$1" --help)" = 0
  check "$1 --help: its usage" test "$(head -n 1 out.txt)" = "$2"
  check "$1 --help: its options" grep -qxF -- "$3" out.txt
  check "$1 --help: the exit codes" grep -q "^exit codes: 0 done" out.txt
  check "$1 --help: nothing on stderr" test ! -s err.txt
}
page fuse "usage: fusekit fuse IN.onnx -o OUT.onnx [--rules LIST|all] [--skip LIST]" \
  "  --dry-run              report only, write nothing"
page inspect \
  "usage: fusekit inspect IN.onnx [--rules LIST|all] [--target ort|onnx]" \
  "  --rules, --target, --provider, --num-heads   as for fuse"
page explain "usage: fusekit explain IN.onnx --node NAME [--dot FILE] [--rules LIST|all]" \
  "  --node NAME   the node, by its name"
page demo "usage: fusekit demo [--rules LIST|all] [--target ort|onnx] [--provider cpu|cuda]" \
  "  --rules, --target, --provider   as for fuse"
page selfcheck \
  "usage: fusekit selfcheck [--rules LIST|all] [--target ort|onnx] [--provider cpu|cuda]" \
  "  --target ort|onnx    check this target only"
check "-h is --help" test "$(exit_code "$fusekit" inspect model.onnx -h)" = 0
check "-h anywhere after the command gives its page" \
  test "$(head -n 1 out.txt)" = "usage: fusekit inspect IN.onnx [--rules LIST|all] [--target ort|onnx]"
check "a wrong command line exits 2" test "$(exit_code "$fusekit" explain x.onnx)" = 2
check "a wrong command line: the line, then the command's page" test "$(head -n 2 err.txt)" = \
  "fusekit: explain needs IN.onnx and --node NAME
usage: fusekit explain IN.onnx --node NAME [--dot FILE] [--rules LIST|all]"
check "unknown command exits 2" test "$(exit_code "$fusekit" frobnicate)" = 2
check "an unknown command: the line, then the overview" test "$(head -n 2 err.txt)" = \
  "fusekit: unknown command 'frobnicate'
usage: fusekit COMMAND ARGS..."

check "--version exits 0" test "$(exit_code "$fusekit" --version)" = 0
check "--version names fusekit's version and onnx's" \
  test "$(cat out.txt)" = "fusekit $version (onnx $onnx_version)"
check "--version: nothing on stderr" test ! -s err.txt
check "--version with an argument exits 2" test "$(exit_code "$fusekit" --version demo)" = 2
check "--version with an argument: the line" \
  test "$(head -n 1 err.txt)" = "fusekit: --version takes no arguments"
check "unknown rule exits 2" test "$(exit_code "$fusekit" fuse "$sample" -o x.onnx --rules nope)" = 2
check "--skip exits 0" \
  test "$(exit_code "$fusekit" fuse "$sample" --dry-run --skip constant-folding,dead-node-elimination)" = 0
check "--skip: the rules left out are not run" bash -c '! grep -q "^constant-folding:\|^dead-node-elimination:" out.txt'
check "--skip: the others are" grep -q "^constant-evaluation: " out.txt

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
check "dry run prints the report" grep -q "scaled-dot-product-attention-head-merge: 2 fused" out.txt
# The rules' names before the rename select the renamed rules for one release.
check "a rule's former name exits 0" test "$(exit_code "$fusekit" fuse "$sample" -o old.onnx \
  --dry-run --rules dit-attention-merged)" = 0
check "a rule's former name runs the renamed rule" \
  grep -q "^scaled-dot-product-attention-head-merge: 2 fused" out.txt
check "a rule's former name runs only that rule" \
  test "$(grep -c "^scaled-dot-product-attention:" out.txt)" = 0
check "a rule's former name: stderr names the new one" grep -q \
  "rule 'dit-attention-merged' is now 'scaled-dot-product-attention-head-merge'" err.txt
check "the other former name selects the rule without the head merge" test "$(exit_code \
  "$fusekit" fuse "$sample" -o old.onnx --dry-run --rules dit-attention)" = 0
check "the other former name: the report names the rule" \
  grep -q "^scaled-dot-product-attention: [0-9]* fused" out.txt

check "inspect exits 0" test "$(exit_code "$fusekit" inspect "$sample")" = 0
check "inspect counts the blocks" grep -q "attention-like blocks (Softmax nodes): 2" out.txt

# inspect --shapes: the facts oracle's view of every value, as text and as JSON.
check "inspect --shapes --json exits 0" \
  test "$(exit_code "$fusekit" inspect "$sample" --shapes --json)" = 0
cp out.txt sample_shapes.json
check "shapes JSON of the sample: exact entries, every value" "$python" - "$sample" <<'PY'
import json, sys, onnx
facts = json.load(open("sample_shapes.json"))
assert facts["x"] == {"dtype": "float16", "dims": [2, "S", 64]}, facts["x"]
assert facts["rope_cos"] == {"dtype": "float16", "dims": ["S", 16]}, facts["rope_cos"]
assert facts["init_0"] == {"dtype": "int64", "dims": [4], "value": [0, 0, 4, 16]}, facts["init_0"]
assert facts["init_6"] == {"dtype": "float32", "dims": [], "value": [100.0]}, facts["init_6"]
assert facts["init_7"] == {"dtype": "float16", "dims": [64, 64]}, facts["init_7"]
assert facts["MatMul_40"] == {"dtype": "float16", "dims": [2, 4, "S", "S"]}, facts["MatMul_40"]
assert facts["Cast_41"] == {"dtype": "float32", "dims": [2, 4, "S", "S"]}, facts["Cast_41"]
assert facts["y"] == {"dtype": "float16", "dims": [2, "S", 64]}, facts["y"]
g = onnx.load(sys.argv[1]).graph
names = {v.name for v in g.input} | {t.name for t in g.initializer} | \
        {o for n in g.node for o in n.output}
assert set(facts) == names, set(facts) ^ names
PY
check "inspect --shapes exits 0" test "$(exit_code "$fusekit" inspect "$sample" --shapes)" = 0
check "inspect --shapes: one line per value" \
  grep -qx "Transpose_33: float16 \[2, 4, 16, S\]" out.txt
check "inspect --shapes: folded contents" grep -qx "init_0: int64 \[4\] = \[0, 0, 4, 16\]" out.txt
check "--json without --shapes exits 2" test "$(exit_code "$fusekit" inspect "$sample" --json)" = 2

# Expressions, unknown dims and ranks, non-finite reals, subgraphs, a dim_param sympy cannot read.
"$python" - <<'PY'
import onnx
from onnx import TensorProto as T, helper
then_body = helper.make_graph([helper.make_node("Neg", ["x"], ["negated"], name="neg")],
                              "then_body", [],
                              [helper.make_tensor_value_info("negated", T.FLOAT, None)])
# The branches differ in rank, so the If's output has none that facts could learn.
else_body = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0)],
                              "", [], [helper.make_tensor_value_info("total", T.FLOAT, None)])
ints = lambda name, values: helper.make_node(  # noqa: E731
    "Constant", [], [name], value=helper.make_tensor(name, T.INT64, [len(values)], values))
nodes = [
    helper.make_node("Concat", ["x", "x"], ["cat"], axis=1),
    helper.make_node("Shape", ["cat"], ["cat_shape"]),
    ints("one", [1]),
    helper.make_node("Sub", ["cat_shape", "one"], ["less"]),
    ints("pairs", [-1, 2]),
    helper.make_node("Reshape", ["x", "pairs"], ["flat"]),
    helper.make_node("Split", ["x"], ["half0", "half1"], axis=1),
    # An op of a domain facts cannot know.
    helper.make_node("Mystery", ["x"], ["mystery"], domain="example.custom"),
    helper.make_node("Relu", ["z"], ["zz"]),
    helper.make_node("Shape", ["z"], ["z_shape"]),
    helper.make_node("Relu", ["w"], ["ww"]),
    helper.make_node("Constant", [], ["fill"],
                     value=helper.make_tensor("fill", T.FLOAT, [2], [float("-inf"), 0.5])),
    helper.make_node("If", ["c"], ["picked"], then_branch=then_body, else_branch=else_body,
                     name="pick"),
]
inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 8]),
          helper.make_tensor_value_info("z", T.FLOAT, [None, 3]),
          helper.make_tensor_value_info("w", T.FLOAT, ["seq len", 3]),
          helper.make_tensor_value_info("c", T.BOOL, [])]
outputs = [helper.make_tensor_value_info(n, T.FLOAT, None)
           for n in ("flat", "half0", "half1", "zz", "ww", "picked", "mystery")] + \
          [helper.make_tensor_value_info(n, T.INT64, None) for n in ("less", "z_shape")]
m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                      opset_imports=[helper.make_opsetid("", 17),
                                     helper.make_opsetid("example.custom", 1)])
m.ir_version = 8
onnx.save(m, "facts.onnx")
PY
check "shapes JSON of a small model exits 0" \
  test "$(exit_code "$fusekit" inspect facts.onnx --shapes --json)" = 0
check "shapes JSON: a dim_param sympy cannot read is named on stderr" \
  test "$(cat err.txt)" = \
  "fusekit: dim_param 'seq len' is not an identifier: sympy cannot read the dims that name it"
check "shapes JSON of a small model: exact, and sympy reads every expression" "$python" - <<'PY'
import json, sympy
facts = json.load(open("out.txt"))
expected = {
    "x": {"dtype": "float32", "dims": ["batch", "seq", 8]},
    "z": {"dtype": "float32", "dims": [None, 3]},  # a dim no dim_param names
    "w": {"dtype": "float32", "dims": ["seq len", 3]},
    "c": {"dtype": "bool", "dims": []},
    "cat": {"dtype": "float32", "dims": ["batch", "2*seq", 8]},
    "cat_shape": {"dtype": "int64", "dims": [3], "value": ["batch", "2*seq", 8]},
    "one": {"dtype": "int64", "dims": [1], "value": [1]},
    "less": {"dtype": "int64", "dims": [3], "value": ["-1 + batch", "-1 + 2*seq", 7]},
    "pairs": {"dtype": "int64", "dims": [2], "value": [-1, 2]},
    "flat": {"dtype": "float32", "dims": ["4*batch*seq", 2]},
    "half0": {"dtype": "float32", "dims": ["batch", "seq/2", 8]},
    "half1": {"dtype": "float32", "dims": ["batch", "seq/2", 8]},
    "mystery": {"dtype": "float32", "dims": None},  # rank unknown
    "zz": {"dtype": "float32", "dims": [None, 3]},
    "z_shape": {"dtype": "int64", "dims": [2], "value": [None, 3]},
    "ww": {"dtype": "float32", "dims": ["seq len", 3]},
    "fill": {"dtype": "float32", "dims": [2], "value": ["-inf", 0.5]},
    "picked": {"dtype": "float32", "dims": None},
    "then_body/negated": {"dtype": "float32", "dims": ["batch", "seq", 8]},
    "pick.else_branch/total": {"dtype": "float32", "dims": []},
}
assert facts == expected, {k: (facts.get(k), expected.get(k))
                           for k in facts.keys() | expected.keys()
                           if facts.get(k) != expected.get(k)}
names = {n: sympy.Symbol(n) for n in ("batch", "seq")}
assert sympy.parse_expr("-1 + 2*seq", local_dict=names) == 2 * names["seq"] - 1
assert sympy.parse_expr("seq/2", local_dict=names) == names["seq"] / 2
for entry in facts.values():
    for d in (entry["dims"] or []) + entry.get("value", []):
        if isinstance(d, str) and d not in ("seq len", "-inf"):
            assert sympy.parse_expr(d, local_dict=names).free_symbols <= set(names.values()), d
PY

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

# Every row of the bad-input table in examples/cli/README.md: the exit code, the exact first
# line on stderr, one line only for exit 1, and nothing written (no model, no report, no temporary file).
"$python" - <<'PY'
import onnx
from onnx import TensorProto as T, helper

def model(nodes, opset=17, ir=8, initializers=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])],
                              list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m

def save(m, name):
    open(name, "wb").write(m.SerializeToString())

relu = helper.make_node("Relu", ["x"], ["y"], name="r")
good = model([relu])
save(good, "good.onnx")
save(model([relu], opset=99, ir=12), "opset99.onnx")
save(model([relu], ir=99), "ir99.onnx")
no_graph = model([relu])
no_graph.ClearField("graph")
save(no_graph, "nograph.onnx")
save(model([helper.make_node("Relu", ["nothing"], ["y"], name="relu")]), "missing_input.onnx")
save(model([helper.make_node("Add", ["x", "b"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["b"], name="relu"),
            helper.make_node("Identity", ["a"], ["y"], name="id")]), "cycle.onnx")
save(model([helper.make_node("Relu", ["x"], ["y"], name="r1"),
            helper.make_node("Relu", ["x"], ["y"], name="r2")]), "twice.onnx")
w = helper.make_tensor("w", T.FLOAT, [2], [1, 2])
w.ClearField("float_data")
w.data_location = T.EXTERNAL
entry = w.external_data.add()
entry.key, entry.value = "location", "w.bin"
save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[w]),
     "external_missing.onnx")
short = helper.make_tensor("w", T.FLOAT, [3], [1, 2])
save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[short]),
     "short_initializer.onnx")
open("tensor.pb", "wb").write(helper.make_tensor("w", T.FLOAT, [2], [1, 2]).SerializeToString())

data = good.SerializeToString()
open("truncated_model.onnx", "wb").write(data[:-3])
corrupt = bytearray(data)
corrupt[data.find(b"Relu") - 2] = 7  # the op_type's tag: field 0, wire type 7
open("corrupt.onnx", "wb").write(bytes(corrupt))
node = good.graph.node[0].SerializeToString()
overrun = bytearray(data)
overrun[data.find(node) + 1] = 127  # the node's first input claims 127 bytes
open("overrun.onnx", "wb").write(bytes(overrun))
# If bodies in If bodies, 120 messages deep: protobuf's Python refuses to build it, so by hand.
def field(number, payload):  # a length-delimited field, payload under 128 bytes or not
    length, out = len(payload), bytearray()
    while True:
        out.append((length & 0x7f) | (0x80 if length > 0x7f else 0))
        length >>= 7
        if not length:
            break
    return bytes([number << 3 | 2]) + bytes(out) + payload

graph = field(2, b"leaf")
for level in range(40):
    attribute = field(1, b"then_branch") + b"\xa0\x01\x05" + field(6, graph)
    graph = field(1, field(4, b"If") + field(5, attribute))
open("deep.onnx", "wb").write(b"\x08\x08" + field(8, b"\x10\x11") + field(7, graph))
PY
: >empty.onnx
printf 'not a model\n' >text.onnx
mkdir -p adir
ln -sf good.onnx good_link.onnx

refused() {  # refused NAME CODE "FIRST LINE" ARGS… : exit CODE, that line, nothing written
  local name=$1 code=$2 line=$3
  shift 3
  rm -f bad_out.onnx bad_report.json
  check "$name: exit $code" test "$(exit_code "$fusekit" "$@")" = "$code"
  check "$name: the message" test "$(head -n 1 err.txt)" = "$line"
  if [ "$code" = 1 ]; then check "$name: one line" test "$(wc -l <err.txt)" = 1; fi
  check "$name: nothing written" test ! -e bad_out.onnx -a ! -e bad_report.json
  check "$name: no temporary file" test -z "$(ls | grep -e 'tmp')"
}
bad() {  # bad NAME FILE "FIRST LINE": fusing FILE exits 1 with that line
  refused "$1" 1 "$3" fuse "$2" -o bad_out.onnx --report bad_report.json
}
bad "no such file" missing.onnx "fusekit: missing.onnx: cannot open: No such file or directory"
bad "a directory as the model" adir "fusekit: adir: is a directory, not a model file"
bad "empty file" empty.onnx "fusekit: empty.onnx: empty file, not an ONNX model"
bad "text" text.onnx \
  "fusekit: text.onnx: not a protobuf: byte 0 is not a valid field tag (is this an ONNX model?)"
bad "truncated file" truncated_model.onnx \
  "fusekit: truncated_model.onnx: truncated: field 8 at byte 58 needs 4 bytes, 1 remain"
bad "corrupt bytes inside a message" corrupt.onnx \
  "fusekit: corrupt.onnx: corrupt: byte 15 is not a valid field tag (in graph.node[0])"
bad "a length past its message" overrun.onnx \
  "fusekit: overrun.onnx: corrupt: field 1 at byte 6 (in graph.node[0]) needs 127 bytes, 13 remain"
bad "nested too deep" deep.onnx \
  "fusekit: deep.onnx: corrupt: messages nested deeper than protobuf's limit of 100 at byte 969 (in graph.node[0].attribute[0].….attribute[0].g.node[0])"
bad "a TensorProto" tensor.pb \
  "fusekit: tensor.pb: corrupt: byte 16 is not a valid field tag (in opset_import[0])"
bad "no graph" nograph.onnx "fusekit: nograph.onnx: graph: not an ONNX model: it has no graph"
bad "IR version" ir99.onnx \
  "fusekit: ir99.onnx: ir_version: IR version 99 is not supported (fusekit reads 3 to 14)"
bad "missing input of a node" missing_input.onnx \
  "fusekit: missing_input.onnx: node Relu 'relu': input 0: input 'nothing' has no producer: no node, initializer or graph input defines it"
bad "a cycle" cycle.onnx \
  "fusekit: cycle.onnx: node Add 'add': the graph has a cycle through this node"
bad "a name defined twice" twice.onnx \
  "fusekit: twice.onnx: node Relu 'r2': output 0: value 'y' is already defined as output of Relu 'r1'"
bad "initializer data short of its shape" short_initializer.onnx \
  "fusekit: short_initializer.onnx: initializer 'w': shape holds 3 elements but its data holds 2 of float32"
bad "missing external data" external_missing.onnx \
  "fusekit: external_missing.onnx: initializer 'w': external data file 'w.bin' is missing"
check "an opset newer than onnx knows is read" \
  test "$(exit_code "$fusekit" fuse opset99.onnx -o opset99.fused.onnx --report opset99.json)" = 0
check "an opset newer than onnx knows: the report says how it was checked" \
  grep -q "ai.onnx opset 99 is newer than onnx $onnx_version knows (28): the ONNX checker read it with opset 28's schemas" opset99.json
check "--target onnx below opset 23 fuses nothing" \
  test "$(exit_code "$fusekit" fuse "$sample" -o below23.onnx --target onnx --report below23.json)" = 0
check "--target onnx below opset 23: the report says why" grep -q "target onnx needs ai.onnx opset 23" out.txt

refused "-o onto a symlink" 1 "fusekit: good_link.onnx: refusing to replace it: not a regular file" \
  fuse good.onnx -o good_link.onnx --report bad_report.json
refused "-o onto a directory" 1 "fusekit: adir: refusing to replace it: not a regular file" \
  fuse good.onnx -o adir --report bad_report.json
refused "-o onto a device" 1 "fusekit: /dev/null: refusing to replace it: not a regular file" \
  fuse good.onnx -o /dev/null --report bad_report.json
refused "-o into a missing directory" 1 "fusekit: nodir/out.onnx: cannot write: No such file or directory" \
  fuse good.onnx -o nodir/out.onnx --report bad_report.json
refused "--report onto a directory" 1 "fusekit: adir: refusing to replace it: not a regular file" \
  fuse good.onnx -o bad_out.onnx --report adir
for n in 0 -3 abc 2147483648 99999999999999999999; do
  refused "--num-heads $n" 2 "fusekit: --num-heads needs a positive integer below 2^31, not '$n'" \
    fuse good.onnx -o bad_out.onnx --report bad_report.json --num-heads "$n"
done
refused "unknown flag" 2 "fusekit: unexpected argument '--frob'" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --frob
refused "a second model" 2 "fusekit: unexpected argument 'good.onnx'" \
  fuse good.onnx good.onnx -o bad_out.onnx --report bad_report.json
refused "a flag without its value" 2 "fusekit: -o needs a value" fuse good.onnx -o
refused "no -o" 2 "fusekit: fuse needs -o OUT.onnx (or --dry-run)" \
  fuse good.onnx --report bad_report.json
refused "no model" 2 "fusekit: fuse needs IN.onnx" fuse -o bad_out.onnx --report bad_report.json
refused "unknown target" 2 "fusekit: --target is ort or onnx" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --target cuda
refused "unknown provider" 2 "fusekit: --provider is cpu or cuda" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --provider rocm
refused "a provider for target onnx" 2 \
  "fusekit: --provider names an ONNX Runtime execution provider: it needs --target ort" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --target onnx --provider cuda
refused "a provider for selfcheck's target onnx" 2 \
  "fusekit: --provider names an ONNX Runtime execution provider: it needs --target ort" \
  selfcheck --target onnx --provider cuda
refused "unknown rule" 2 "fusekit: unknown rule 'nope'" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --rules nope
refused "an unknown rule to skip" 2 "fusekit: unknown rule 'nope'" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --skip nope
refused "a skip of every rule run" 2 "fusekit: --skip leaves no rule to run" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --rules gelu --skip gelu
refused "--fold-limit 'x'" 2 "fusekit: --fold-limit needs an integer from 0 to 9223372036854775807, not 'x'" \
  fuse good.onnx -o bad_out.onnx --report bad_report.json --fold-limit x
refused "unknown command" 2 "fusekit: unknown command 'frob'" frob
refused "no command" 2 "fusekit: no command"
refused "demo with a model" 2 "fusekit: demo takes no model, it has its own" demo extra
refused "selfcheck with a model" 2 "fusekit: selfcheck takes no model, it writes its own" \
  selfcheck good.onnx
for n in -1 abc 100001 ''; do
  refused "--cases '$n'" 2 "fusekit: --cases needs an integer from 0 to 100000, not '$n'" \
    selfcheck --cases "$n"
done
refused "--failures 'x'" 2 "fusekit: --failures needs an integer from 0 to 1000000, not 'x'" \
  selfcheck --failures x
refused "a selfcheck flag elsewhere" 2 "fusekit: --cases, --failures, --seed, --python and --keep are selfcheck's" \
  fuse good.onnx -o bad_out.onnx --seed 3
if [ "$selfchecks" = OFF ]; then
  refused "selfcheck left out of this build" 1 \
    "fusekit: this build leaves out the bundled rules' selfchecks (CMake option FUSEKIT_BUNDLED_SELFCHECK=OFF)" \
    selfcheck --rules gelu --python "$python"
else
  refused "--python without ONNX Runtime" 1 \
    "fusekit: --python /bin/false cannot import onnxruntime and numpy" selfcheck --python /bin/false

  # selfcheck: one line per rule and target, the graphs kept where asked, the same seed the same run.
  check "selfcheck exits 0" test "$(exit_code "$fusekit" selfcheck --rules quick-gelu,gelu \
    --python "$python" --keep kept --seed 7)" = 0
  check "selfcheck: a line per rule and target" test "$(grep -c ": ok; " out.txt)" = 3
  check "selfcheck: target onnx has no QuickGelu" test "$(grep -c "^quick-gelu --target" out.txt)" = 1
  check "selfcheck: parity checked" grep -q "^gelu --target onnx: ok; .* parity with ONNX Runtime \([0-9]*\) of \1;" out.txt
  check "selfcheck: the graphs kept" test -s kept/gelu-onnx/instance_0.fused.onnx -a -s kept/gelu-onnx/parity.txt
  mv out.txt first.txt
  mkdir scratch
  TMPDIR=$PWD/scratch "$fusekit" selfcheck --rules quick-gelu,gelu --python "$python" --seed 7 \
    >out.txt 2>err.txt
  check "selfcheck: the same seed writes the same graphs" cmp -s first.txt out.txt
  check "selfcheck: its scratch folder removed" test -z "$(ls scratch)"
  # --provider cuda: the layer rules fuse float16 there, so their instances come in float16 too.
  check "selfcheck --provider cuda exits 0" test "$(exit_code "$fusekit" selfcheck --rules gelu \
    --target ort --provider cuda --python "$python" --keep kept_cuda)" = 0
  check "selfcheck --provider cuda: named in its line" \
    grep -q "^gelu --target ort --provider cuda: ok; .* parity with ONNX Runtime \([0-9]*\) of \1;" out.txt
  float16_instances() {
    "$python" -c "import glob, onnx, sys
types = {onnx.load(f).graph.input[0].type.tensor_type.elem_type for f in glob.glob(sys.argv[1] + '/instance_*[0-9].onnx')}
print(int(onnx.TensorProto.FLOAT16 in types))" "$1"
  }
  check "selfcheck --provider cuda: float16 instances" test "$(float16_instances kept_cuda/gelu-ort-cuda)" = 1
  check "selfcheck for the CPU provider: none" test "$(float16_instances kept/gelu-ort)" = 0
fi

check "demo exits 0" test "$(exit_code "$fusekit" demo)" = 0
check "demo fuses both blocks" grep -q "scaled-dot-product-attention-head-merge: 2 fused" out.txt

echo "$passed passed, $failed failed"
test "$failed" = 0
