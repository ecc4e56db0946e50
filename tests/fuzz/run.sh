#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time: run.sh BINARY SEED_DIR SECONDS [WORK_DIR]
#
# New inputs go to WORK_DIR (default: a temp directory removed afterwards); the seed corpus is
# read, never written. Crash, leak and timeout reproducers go to WORK_DIR/../artifacts-NAME (or
# $HC_FUZZ_ARTIFACTS). Prints the executions, executions per second, the final coverage
# (cov/ft) and the corpus size; exits non-zero when the target crashed, leaked or hung.
set -euo pipefail
bin=$1 seed=$2 seconds=$3 work=${4:-}
name=$(basename "$bin")
mkdir -p "${TMPDIR:-/tmp}"
tmp=
if [ -z "$work" ]; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    work=$tmp/corpus
fi
mkdir -p "$work"
artifacts=${HC_FUZZ_ARTIFACTS:-$(dirname "$work")/artifacts-$name}
mkdir -p "$artifacts"
log=$(mktemp "${TMPDIR:-/tmp}/$name.log.XXXXXX")
trap 'rm -f "$log"; [ -z "$tmp" ] || rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rc=0
# -timeout: one input taking that long is a hang; -rss_limit_mb: a memory blow-up is a crash.
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$work" "$seed" >"$log" 2>&1 || rc=$?
last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\) .*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\) .*/\1/p' <<<"$last")
crashes=$(find "$artifacts" -type f | wc -l)
echo "fuzz $name: ${seconds}s, ${execs:-0} execs, ${speed:-0} exec/s, cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}, artifacts $crashes, exit $rc"
if [ "$rc" -ne 0 ]; then
    # what libFuzzer and the sanitizers said about the crash
    grep -vE '^#[0-9]+|^INFO:|^stat::' "$log" | tail -60 >&2
    echo "fuzz $name: FAILED (reproducer in $artifacts)" >&2
    exit 1
fi
