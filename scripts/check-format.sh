#!/usr/bin/env bash
# Fails when a tracked C file deviates from the repo's .clang-format (clang-format 14, Debian
# 12's). Prints each deviating file and the command that fixes it. Run by ctest (style/format).
# Usage: scripts/check-format.sh [--fix]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$fmt" ] || { echo "check-format: clang-format-14 is not installed (scripts/install-deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = --fix ]; then
    "$fmt" -i "${files[@]}"
    exit 0
fi
bad=0
for f in "${files[@]}"; do
    if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "check-format: $f deviates from .clang-format"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "check-format: $bad of ${#files[@]} files; fix with: scripts/check-format.sh --fix" >&2
    exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
