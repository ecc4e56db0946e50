#!/usr/bin/env bash
# Fuzzes one target, or all in turn, for SECONDS each (docs/fuzzing.md):
#   scripts/fuzz.sh TARGET|all SECONDS
# Targets: every tests/fuzz/fuzz_TARGET.c (controller_api agent_api backup_archive
# bundle_manifest bundle_tar cli probe_packet settings)
# Builds the clang/libFuzzer build in build-fuzz/ (HC_FUZZ_BUILD_DIR) first when needed. The
# corpus grows in BUILD/corpus/TARGET, seeded from tests/fuzz/corpus/TARGET (never written);
# reproducers of crashes land in BUILD/corpus/artifacts-fuzz_TARGET. Prints executions,
# executions per second, coverage and corpus size per target; exits non-zero on a crash.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_FUZZ_BUILD_DIR:-$src/build-fuzz}
if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh TARGET|all SECONDS" >&2
    exit 2
fi
all=$(cd "$src/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
if [ "$1" = all ]; then
    targets=$all
elif grep -qx "$1" <<<"$all"; then
    targets=$1
else
    echo "fuzz.sh: unknown target '$1' (one of: $(echo $all), all)" >&2
    exit 2
fi
# Two runs at once (two targets on two cores) share the build: one builds, the other waits,
# rather than one executing a binary the other is relinking.
mkdir -p "$build"
(
    flock 9
    if [ ! -f "$build/build.ninja" ]; then
        cmake -S "$src" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
            -DHC_FUZZ=ON -DHC_WERROR=ON >/dev/null
    fi
    ninja -C "$build" fuzz >/dev/null
) 9>"$build/.fuzz-build.lock"
mkdir -p "$build/corpus" "$build/test-tmp"
rc=0
for t in $targets; do
    TMPDIR=$build/test-tmp bash "$src/tests/fuzz/run.sh" "$build/bin/fuzz_$t" \
        "$src/tests/fuzz/corpus/$t" "$2" "$build/corpus/$t" || rc=1
done
exit $rc
