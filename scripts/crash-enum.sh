#!/usr/bin/env bash
# Crash after step N, for every N, in full (issue 12): runs tests/lab/t70_crash_every_step.sh with
# HC_FULL=1, which enumerates every durable step of a rolling upgrade of all three nodes (1.0 <->
# 1.1) besides the maintenance cycle and the MTU change that CI enumerates too. Needs root and the
# namespace lab; takes the shared lab lock (/tmp/hc-lab.lock), so it waits for another lab to go.
# Builds first (ASan + UBSan, as CI). HC_BUILD_DIR selects the build directory (build-test).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build-test}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON -DHC_WERROR=ON >/dev/null
ninja -C "$build"
mkdir -p "$build/test-tmp"
export HC_BIN=$build/bin HC_SRC=$src HC_TEST_TMP=$build/test-tmp HC_FULL=1
exec flock /tmp/hc-lab.lock bash "$src/tests/lab/t70_crash_every_step.sh"
