#!/usr/bin/env bash
# Installs the packages, builds hcctl with AddressSanitizer + UBSan and runs the whole test suite
# (unit, end-to-end, and the network-namespace lab tests, which need root), then the fuzz targets
# for a few seconds each (clang + libFuzzer, in build-fuzz/: docs/fuzzing.md).
#
# The two other builds, the read-only checkout's (scripts/check-readonly-build.sh) and the fuzz
# targets' (build-fuzz/), need no test result: they run beside ctest at the lowest CPU priority
# (nice 19), on the time the tests leave idle (the lab tests mostly wait on their nodes), instead
# of one after another before and after it. Their output is printed when they end; either failing
# fails the run, as before.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build-test}
fuzz_build=${HC_FUZZ_BUILD_DIR:-$src/build-fuzz}
bash "$src/scripts/install-deps.sh"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON -DHC_WERROR=ON >/dev/null
ninja -C "$build"

logs=$(mktemp -d /tmp/hc-test-logs.XXXXXX)
bg_pids=()
# The builds beside the tests end with the run, whatever way it ends.
cleanup() {
    local p
    for p in "${bg_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
    rm -rf "$logs"
}
trap cleanup EXIT
# beside NAME CMD...: CMD in the background at nice 19, in its own process group (so that the
# cleanup stops its compilers too), output in $logs/NAME.log.
beside() {
    local name=$1
    shift
    setsid nice -n 19 "$@" >"$logs/$name.log" 2>&1 &
    bg_pids+=($!)
}
# collect NAME PID: waits for it and prints its output; returns its status.
collect() {
    local rc=0
    wait "$2" || rc=$?
    cat "$logs/$1.log"
    [ "$rc" -eq 0 ] || echo "test.sh: $1 failed (exit $rc)" >&2
    return "$rc"
}
# The build writes nothing into the source tree: a read-only checkout builds.
beside readonly-build bash "$src/scripts/check-readonly-build.sh"
beside fuzz-build bash -c 'cmake -S "$1" -B "$2" -G Ninja -DCMAKE_C_COMPILER=clang \
    -DCMAKE_BUILD_TYPE=Debug -DHC_FUZZ=ON -DHC_WERROR=ON >/dev/null && ninja -C "$2" fuzz' \
    fuzz-build "$src" "$fuzz_build"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
rc=0
ctest --output-on-failure -j2 "$@" || rc=$?
collect readonly-build "${bg_pids[0]}" || rc=1
collect fuzz-build "${bg_pids[1]}" || exit 1
[ "$rc" -eq 0 ] || exit "$rc"
cd "$fuzz_build"
ctest --output-on-failure -j2 "$@"
