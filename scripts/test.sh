#!/usr/bin/env bash
# Installs the packages, builds hcctl with AddressSanitizer + UBSan and runs the whole test suite
# (unit, end-to-end, and the network-namespace lab tests, which need root), then the fuzz targets
# for a few seconds each (clang + libFuzzer, in build-fuzz/: docs/fuzzing.md).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build-test}
bash "$src/scripts/install-deps.sh"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON -DHC_WERROR=ON >/dev/null
ninja -C "$build"
# The build writes nothing into the source tree: a read-only checkout builds.
bash "$src/scripts/check-readonly-build.sh"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
ctest --output-on-failure -j2 "$@"
fuzz_build=${HC_FUZZ_BUILD_DIR:-$src/build-fuzz}
cmake -S "$src" -B "$fuzz_build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
    -DHC_FUZZ=ON -DHC_WERROR=ON >/dev/null
ninja -C "$fuzz_build" fuzz
cd "$fuzz_build"
ctest --output-on-failure -j2 "$@"
