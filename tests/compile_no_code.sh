#!/usr/bin/env bash
# Compiler launcher of the tests that only the compiler checks (the static_assert files, the
# compile_fail files and their controls): what they prove is that a file compiles, or fails with
# the library's message, which the compiler's semantic analysis decides whole, every template the
# file uses instantiated (-fsyntax-only, gcc and clang alike). The code it would generate, about
# three quarters of such a file's compile time, nothing reads: the object file the build expects
# is left empty. A precompiled header is made as usual.
# Usage (CMake's CXX_COMPILER_LAUNCHER): compile_no_code.sh COMPILER ARGUMENTS...
set -euo pipefail
out=
prev=
for arg in "$@"; do
  [ "$prev" = -o ] && out=$arg
  prev=$arg
done
case $out in
  *.gch | *.pch | "") exec "$@" ;;
esac
"$@" -fsyntax-only
: >"$out"
