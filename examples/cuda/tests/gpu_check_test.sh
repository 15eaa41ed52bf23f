#!/usr/bin/env bash
# What of gpu_check.sh runs without a GPU: its build of the GPU programs in BUILD_DIR, the shape
# list, the stop where a GPU is needed; and how the README's figure table is made from measured
# rows and copied from a results file.   Usage: gpu_check_test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: gpu_check_test.sh BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  fail "a GPU is present: run examples/cuda/gpu_check.sh itself"
fi
out=$(bash "$here/gpu_check.sh" --build-dir "$build" --results "$work/results.md" --dry-run 2>&1) ||
  fail "dry run exited non-zero: $out"
grep -q "^gpu_check: no GPU here" <<<"$out" || fail "dry run did not stop at the GPU steps: $out"
[[ ! -e $work/results.md ]] || fail "a results file was written without a GPU"
[[ $(head -1 "$build/gpu_check_logs/shapes.tsv") == $'shape\tbatch\theads\tseq\thead_dim\tscale\tk_bnhs' ]] ||
  fail "flash_bench --shapes wrote no header"
(($(wc -l <"$build/gpu_check_logs/shapes.tsv") == 10)) || fail "flash_bench --shapes: not 9 shapes"
# Without --dry-run the missing GPU is an error (exit 2); so is a bad option.
status=0
out=$(bash "$here/gpu_check.sh" --build-dir "$build" --no-build 2>&1) || status=$?
((status == 2)) && grep -q "^gpu_check: no GPU here" <<<"$out" || fail "no GPU, no --dry-run: exit $status: $out"
status=0
out=$(bash "$here/gpu_check.sh" --limit soon 2>&1) || status=$?
[[ $status == 2 && $out == "gpu_check: --limit takes seconds, not 'soon'" ]] || fail "bad --limit: exit $status: $out"

figures=$here/tools/figures.py
printf 'shape\tfused_ms\tfused_tflops\tunfused_ms\nF5-TTS B2 N16 S256 H64\t0.0214\t25.1\t0.0802\nFA2 H128 S8192\t4.5\t305.4\t31.25\n' \
  >"$work/bench.tsv"
printf 'shape\ttorch_flash_ms\ttorch_cudnn_ms\nF5-TTS B2 N16 S256 H64\t0.019\trefused: no kernel\n' \
  >"$work/torch.tsv"
python3 "$figures" table "Some GPU" "$work/bench.tsv" "$work/torch.tsv" >"$work/table.md"
expected='<!-- gpu-figures: begin (written by gpu_check.sh from its results file; do not edit) -->
| shape | GPU | fused (ms, TFLOP/s) | unfused cuBLAS (ms) | PyTorch SDPA flash (ms) | PyTorch SDPA cuDNN (ms) |
|---|---|---|---|---|---|
| F5-TTS B2 N16 S256 H64 | Some GPU | 0.021 (25) | 0.080 | 0.019 | refused: no kernel |
| FA2 H128 S8192 | Some GPU | 4.500 (305) | 31.250 | — | — |
<!-- gpu-figures: end -->'
[[ $(cat "$work/table.md") == "$expected" ]] || fail "table: $(cat "$work/table.md")"
# No PyTorch: the columns say so rather than stay empty.
python3 "$figures" table "Some GPU" "$work/bench.tsv" "$work/absent.tsv" | grep -q "| 0.080 | no PyTorch with CUDA | no PyTorch with CUDA |" ||
  fail "a missing PyTorch is not stated"

# fill replaces only the marked table of the README, and takes it from the results file.
{ echo "# Results"; cat "$work/table.md"; echo "## Logs"; } >"$work/results.md"
cp "$here/README.md" "$work/README.md"
python3 "$figures" fill "$work/results.md" "$work/README.md"
grep -q "| FA2 H128 S8192 | Some GPU | 4.500 (305) |" "$work/README.md" || fail "fill wrote no rows"
diff <(sed '/gpu-figures: begin/,/gpu-figures: end/d' "$here/README.md") \
  <(sed '/gpu-figures: begin/,/gpu-figures: end/d' "$work/README.md") || fail "fill changed more than the table"
echo "no table here" >"$work/plain.md"
if msg=$(python3 "$figures" fill "$work/plain.md" "$work/README.md" 2>&1); then fail "fill from a file without a table succeeded"; fi
[[ $msg == "figures.py: $work/plain.md: no figure table between the gpu-figures markers" ]] || fail "message: $msg"
echo "gpu_check dry run and figure table: ok"
