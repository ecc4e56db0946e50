#!/usr/bin/env bash
# Crash after step N, for every N, in full (issue 12): tests/lab/t70_crash_every_step.sh with
#   steps   HC_FULL=1: every durable step of a rolling upgrade of all three nodes (1.0 <-> 1.1),
#           of the maintenance cycle and of the MTU change (CI upgrades one node only);
#   writes  T70_POINTS=writes: every write transaction of the operation workers, cut just before
#           it commits (HCCTLD_TEST_CRASH_AT_WRITE), for the one-node upgrade, the maintenance
#           cycle and the MTU change;
#   all     both (the default). Usage: scripts/crash-enum.sh [steps|writes|all]
# Needs root and the namespace lab; takes the shared lab lock (/tmp/hc-lab.lock) for each run, so
# it waits for another lab to go. Builds first (ASan + UBSan, as CI); HC_BUILD_DIR selects the
# build directory (default build-test).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build-test}
what=${1:-all}
case $what in steps | writes | all) ;; *) echo "usage: $0 [steps|writes|all]" >&2; exit 2 ;; esac
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON -DHC_WERROR=ON >/dev/null
ninja -C "$build"
mkdir -p "$build/test-tmp"
export HC_BIN=$build/bin HC_SRC=$src HC_TEST_TMP=$build/test-tmp
rc=0
if [ "$what" != writes ]; then
    HC_FULL=1 flock /tmp/hc-lab.lock bash "$src/tests/lab/t70_crash_every_step.sh" || rc=1
fi
if [ "$what" != steps ]; then
    T70_POINTS=writes flock /tmp/hc-lab.lock bash "$src/tests/lab/t70_crash_every_step.sh" || rc=1
fi
exit $rc
