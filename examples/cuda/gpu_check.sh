#!/usr/bin/env bash
# Everything the sample CUDA backend needs a GPU for, in one run, into one results file:
#   build for the GPU present → the kernels against the fp64 reference (flash_gpu_test) →
#   flash_driver on every test model and DiT variant, fused for both targets → flash_bench → PyTorch's
#   scaled_dot_product_attention (flash and cuDNN backends) on the same shapes → the small cases
#   under compute-sanitizer memcheck, racecheck and synccheck → the README's figure table.
#
# Usage: examples/cuda/gpu_check.sh [--build-dir DIR] [--no-build] [--results FILE]
#                                   [--quick] [--limit SECONDS] [--no-readme] [--dry-run]
#   --build-dir DIR  build tree (default build/gpu); configured here when it has no CMakeCache.txt
#   --no-build       run the programs already in DIR/examples/cuda (built elsewhere for this GPU);
#                    DIR/lib, when present, is put on the library path for them
#   --results FILE   default DIR/gpu_results.md; each step's full log goes to DIR/gpu_check_logs
#   --quick          flash_bench --quick (F5-TTS and SD3 shapes only)
#   --limit SECONDS  each GPU step is stopped, and counted failed, after this long (default 600)
#   --no-readme      leave examples/cuda/README.md alone
#   --dry-run        without a GPU, stop where one is needed and exit 0 (CI runs this)
# Exit status: 0 when every step passed, 1 when one failed, 2 on bad usage or no GPU.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$root/build/gpu
build_it=1 results="" bench_mode=() limit=600 readme=1 dry_run=0
while (($#)); do
  case $1 in
    --build-dir) build=$(realpath -m "${2:?--build-dir needs a directory}"); shift ;;
    --no-build) build_it=0 ;;
    --results) results=$(realpath -m "${2:?--results needs a file}"); shift ;;
    --quick) bench_mode=(--quick) ;;
    --limit) limit=${2:?--limit needs seconds}; shift
      [[ $limit =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check: --limit takes seconds, not '$limit'" >&2; exit 2; } ;;
    --no-readme) readme=0 ;;
    --dry-run) dry_run=1 ;;
    *) echo "gpu_check: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
  shift
done
results=${results:-$build/gpu_results.md}
logs=$build/gpu_check_logs
programs=$build/examples/cuda
tools=$root/examples/cuda/tools

# The GPU, if any: its name and compute capability decide what is built.
gpu="" arch="80-real;90"
if nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
  IFS=, read -r gpu capability driver < <(nvidia-smi --query-gpu=name,compute_cap,driver_version \
    --format=csv,noheader | head -1)
  capability=${capability// /} driver=${driver// /}
  arch=${capability/./}-real
fi

if ((build_it)); then
  # A fresh tree is configured; an existing one keeps its settings, but builds for the GPU here.
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFUSEKIT_BUILD_TESTS=ON \
      "-DFUSEKIT_CUDA_ARCHITECTURES=$arch" || { echo "gpu_check: configuring failed" >&2; exit 1; }
  elif [[ -n $gpu ]]; then
    cmake "$build" "-DFUSEKIT_CUDA_ARCHITECTURES=$arch" >/dev/null ||
      { echo "gpu_check: configuring failed" >&2; exit 1; }
  fi
  cmake --build "$build" -j"$(nproc)" --target flash_gpu_test flash_driver flash_bench \
    make_dit_variants ||
    { echo "gpu_check: building failed" >&2; exit 1; }
fi
for program in flash_gpu_test flash_driver flash_bench; do
  [[ -x $programs/$program ]] || { echo "gpu_check: $programs/$program is missing" >&2; exit 2; }
done
[[ -d $build/lib ]] && export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rm -rf "$logs"  # nothing of an earlier run may reach this one's results
mkdir -p "$logs" "$(dirname "$results")"
# The DiT variants the rule tests write include head size 64, which the test models lack: the
# tiled kernel's path through flash_driver.
models=("$root/tests/models")
variants="none (make_dit_variants is not built in $build)"
if [[ -x $build/tests/make_dit_variants ]]; then
  "$build/tests/make_dit_variants" "$logs/dit" >/dev/null ||
    { echo "gpu_check: make_dit_variants failed" >&2; exit 1; }
  models+=("$logs/dit")
  variants="$(find "$logs/dit" -name '*.onnx' | wc -l) written by make_dit_variants"
fi
"$programs/flash_bench" "${bench_mode[@]}" --shapes >"$logs/shapes.tsv" ||
  { echo "gpu_check: flash_bench --shapes failed" >&2; exit 1; }

if [[ -z $gpu ]]; then
  echo "gpu_check: no GPU here (nvidia-smi -L lists none): the programs are built and the" \
    "benchmark shapes listed; the GPU steps need one"
  ((dry_run)) && exit 0 || exit 2
fi

# step NAME COMMAND...: runs COMMAND, for at most $limit seconds, with its output in
# $logs/NAME.log, and records the outcome for the results file. Exit status 3 means "cannot run
# here" (its last line says why): recorded, not failed.
steps=() failed=0
step() {
  local name=$1 start=$SECONDS status rc
  shift
  echo "gpu_check: $name …"
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=passed ;;
    3) status="not run: $(tail -1 "$logs/$name.log")" ;;
    124 | 137) status="timed out after $limit s"; failed=1 ;;
    *) status="failed (exit $rc)"; failed=1 ;;
  esac
  steps+=("| $name | $status | $((SECONDS - start)) |")
  echo "gpu_check: $name: $status"
}

sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
step gpu_tests "$programs/flash_gpu_test"
step driver bash "$tools/drive_models.sh" "$programs/flash_driver" "${models[@]}"
step bench "$programs/flash_bench" "${bench_mode[@]}" --tsv "$logs/bench.tsv"
step pytorch_sdpa python3 "$tools/torch_sdpa.py" "$logs/shapes.tsv" "$logs/torch.tsv"
if [[ -x $sanitizer ]]; then
  for tool in memcheck racecheck synccheck; do
    step "$tool" "$sanitizer" --tool "$tool" --error-exitcode 1 \
      "$programs/flash_gpu_test" --gtest_filter='Small.*'
  done
else
  steps+=("| compute-sanitizer | not found (looked on PATH and in CUDA_HOME) | 0 |")
  failed=1
fi

{
  echo "# The flash-attention backend on a GPU"
  echo
  echo "Written by examples/cuda/gpu_check.sh on $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo
  echo "- GPU: $gpu (compute capability $capability, driver $driver)"
  echo "- kernel sources (sha256 of examples/cuda/flash and src): $(cat "$root"/examples/cuda/flash/* "$root"/examples/cuda/src/* | sha256sum | cut -c1-16)"
  echo "- $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | head -1) (the driver's)"
  echo "- models for flash_driver: tests/models and the DiT variants, $variants"
  echo
  echo "| step | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${steps[@]}"
  echo
  echo "## Figures"
  echo
  echo "float16, random inputs, ms per call (mean of 30 after 3 warm-ups, CUDA events; PyTorch's"
  echo "calls replayed from a CUDA graph, so that Python's launch cost is not timed); FLOP = 4·B·N·S²·H."
  echo "F5-TTS shapes give this kernel K as BNHS (Kᵀ, as the exported graph holds it); PyTorch gets BNSH."
  echo
  if [[ -s $logs/bench.tsv ]]; then
    python3 "$tools/figures.py" table "$gpu" "$logs/bench.tsv" "$logs/torch.tsv" ||
      echo "(the figure table could not be made)"
  else
    echo "(flash_bench wrote no figures)"
  fi
  for log in "$logs"/*.log; do
    echo
    echo "## $(basename "$log" .log) (last 60 lines)"
    echo
    echo '```'
    tail -60 "$log"
    echo '```'
  done
} >"$results"
echo "gpu_check: results in $results"

# The README shows a run whose every check passed.
if ((readme && !failed)) && [[ -s $logs/bench.tsv ]]; then
  python3 "$tools/figures.py" fill "$results" "$root/examples/cuda/README.md" &&
    echo "gpu_check: examples/cuda/README.md's figure table filled from it"
fi
exit $failed
