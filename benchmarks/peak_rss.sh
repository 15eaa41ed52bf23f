#!/usr/bin/env bash
# peak_rss.sh FUSEKIT MAKE_DIT_FILE DIR LAYERS...: the peak resident memory of one whole
# `fusekit fuse IN -o OUT` process (read, fuse, check, write) against the size of IN, per model.
set -euo pipefail
cli=$1 make=$2 dir=$3
shift 3
mkdir -p "$dir"
for layers in "$@"; do
  in=$dir/dit_$layers.onnx
  [ -f "$in" ] || "$make" "$in" "$layers"
  size=$(stat -c %s "$in")
  peak_kib=$(/usr/bin/time -f %M "$cli" fuse "$in" -o "$dir/dit_${layers}_fused.onnx" --quiet \
             2>&1 >/dev/null | tail -n 1)
  awk -v l="$layers" -v s="$size" -v p="$peak_kib" \
      'BEGIN { printf "%6d layers: %11d bytes, peak RSS %11d bytes, ratio %.2f\n", l, s, p * 1024, p * 1024 / s }'
done
