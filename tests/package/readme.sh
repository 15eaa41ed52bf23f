#!/usr/bin/env bash
# Runs README.md's own command blocks as a newcomer pastes them: in a fresh copy of the source tree
# (the files git lists, committed or not, as a clone would have them), one bash session for all
# the blocks named, in the order named, so that a `. venv/bin/activate` holds for the lines after
# it. A block is named by the comment `<!-- tests/package/readme.sh runs this as NAME -->` on the
# line before its fence; a ```python block is fed to the `python` the lines before it put on
# PATH. Any failing line fails the run (set -e), and a name without its block fails at once.
# Usage: tests/package/readme.sh WORK_DIR NAME...
#   WORK_DIR/src: the copy (replaced), where the blocks run; WORK_DIR/readme-blocks.sh: the script
#   made of them. The environment passes through (tests set DESTDIR, TMPDIR or PIP_NO_CLEAN).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "$1")
shift
(($#)) || { echo "readme.sh: name at least one README block" >&2; exit 2; }

script=$work/readme-blocks.sh
mkdir -p "$work"
{
  echo "set -eo pipefail"
  for name in "$@"; do
    block=$(awk -v marker="<!-- tests/package/readme.sh runs this as $name -->" '
      $0 == marker { found = 1; next }
      found == 1 { if ($0 !~ /^```/) exit 1; lang = substr($0, 4); found = 2; next }
      found == 2 && $0 == "```" { done = 1; exit }
      found == 2 { lines = lines $0 "\n" }
      END {
        if (!done) exit 1
        printf "%s\n%s", lang, lines
      }' "$root/README.md") || {
      echo "readme.sh: README.md has no fenced block marked as '$name'" >&2
      exit 1
    }
    lang=${block%%$'\n'*}
    body=${block#*$'\n'}
    echo "echo '== README.md: $name'; SECONDS=0"
    case $lang in
      sh) printf 'echo %q\n%s\n' "$body" "$body" ;;
      python) printf 'echo %q\npython - <<'"'"'README_PYTHON'"'"'\n%s\nREADME_PYTHON\n' "$body" "$body" ;;
      *) echo "readme.sh: block '$name' is \`\`\`$lang, not sh or python" >&2; exit 1 ;;
    esac
    echo "echo \"== README.md: $name done in \$SECONDS s\""
  done
} >"$script"

# The copy: what git lists in the work tree, deleted files left out, ignored ones (build trees,
# virtual environments) never in.
rm -rf "$work/src"
mkdir -p "$work/src"
cd "$root"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -C "$work/src" -xf -

cd "$work/src"
bash "$script"
