#!/usr/bin/env bash
# Regenerates the committed completion scripts (completions/hcctl.{bash,zsh,fish}) from a built
# hcctl's command table. Run after changing a command, option or completer; tests/e2e/t41 fails
# until you do. Usage: scripts/gen-completions.sh [BUILD_DIR]   (default: build-test)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
hcctl=${1:-$src/build-test}/bin/hcctl
for sh in bash zsh fish; do
    "$hcctl" completion "$sh" >"$src/completions/hcctl.$sh.tmp"
    mv "$src/completions/hcctl.$sh.tmp" "$src/completions/hcctl.$sh"
done
