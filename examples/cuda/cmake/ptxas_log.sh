#!/bin/sh
# CUDA compiler launcher: runs the compile command it is given and keeps ptxas's -v report in
# <object>.ptxas.log, where check_ptxas.cmake reads it; other diagnostics still reach the console.
object=""
previous=""
for argument in "$@"; do
  [ "$previous" = "-o" ] && object="$argument"
  previous="$argument"
done
log="${object:-ptxas}.ptxas.log"
"$@" 2>"$log"
status=$?
grep -v -e '^ptxas info' -e 'bytes stack frame' "$log" >&2
exit $status
