#!/usr/bin/env bash
# flash_driver on every model given (a folder: every .onnx below it), fused for both targets:
# each node the backend runs must match the fp64 reference; a model with no fused node, or none
# this backend takes, is listed, not failed. Ends with a summary: nodes checked, failed, and the
# backend's refusals by reason. Exit status 1 when a node failed, the driver broke off (an error
# or a crash), no model was found or no node ran at all.
#   Usage: drive_models.sh FLASH_DRIVER MODEL_OR_FOLDER...
set -uo pipefail
driver=${1:?usage: drive_models.sh FLASH_DRIVER MODEL_OR_FOLDER...}
shift
bad=0 all="" models=0 broke=0
while IFS= read -r model; do
  models=$((models + 1))
  for target in ort onnx; do
    out=$("$driver" "$model" --fuse "$target" 2>&1)
    status=$?
    printf '== %s --fuse %s (exit %d)\n%s\n' "$model" "$target" "$status" "$out"
    all+=$out$'\n'
    # 0: every node run matched; 2: no fused node; 1 with "…, 0 failed": none the backend takes.
    if grep -q "FAILED" <<<"$out"; then
      bad=1
    elif ! ((status == 0 || status == 2)) && ! { ((status == 1)) && grep -q " fused nodes run, 0 failed$" <<<"$out"; }; then
      bad=1 broke=$((broke + 1))
    fi
  done
done < <(find "$@" -name '*.onnx' | sort || echo "drive_models.sh: cannot list $*" >&2)
echo "== summary: $models models; $(grep -c ': ok$' <<<"$all") fused nodes matched the reference," \
  "$(grep -c ': FAILED$' <<<"$all") failed; $broke runs broke off; nodes this backend does not" \
  "take, by reason:"
grep -o 'not run: .*' <<<"$all" | sort | uniq -c | sort -rn
if ((models == 0)) || ! grep -q ': ok$' <<<"$all"; then
  echo "drive_models.sh: no model found, or no fused node ran, under $*" >&2
  bad=1
fi
exit $bad
