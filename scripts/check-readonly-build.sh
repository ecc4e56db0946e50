#!/usr/bin/env bash
# Proves that the build writes nothing into the source tree: configures and builds (everything,
# tests included, without running them) from a read-only bind mount of the checkout into a
# temporary build directory. Needs root (mount). Usage: scripts/check-readonly-build.sh
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/hc-robuild.XXXXXX)
ro=$tmp/src
mkdir -p "$ro"
cleanup() { umount "$ro" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
mount --bind "$src" "$ro"
mount -o remount,bind,ro "$ro"
if touch "$ro/.hc-write-probe" 2>/dev/null; then
    rm -f "$ro/.hc-write-probe"
    echo "check-readonly-build: the bind mount is writable; cannot prove anything" >&2
    exit 1
fi
cmake -S "$ro" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_WERROR=ON >/dev/null
ninja -C "$tmp/build" >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log" >&2; exit 1; }
echo "check-readonly-build: a read-only checkout builds ($(grep -c . "$tmp/build.log") build lines)"
