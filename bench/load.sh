#!/usr/bin/env bash
# hcload's throughput and latency before, during and after a rolling upgrade of the replicated
# hcstor (1.0 -> 1.1) on 3 and 5 lab nodes, and the longest stall the workload saw during the
# upgrade (the aim: under 1 s per node switch). Three separate hcload runs per size, so every
# figure is exact: 8 s before, the whole upgrade, 8 s after. Needs root.
# Usage: bench/load.sh [BUILD_DIR] (default build-bench, a release build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
. "$src/bench/lib.sh"
ninja -C "$build" hcload >/dev/null

figures() { # PHASE NODES REPORT
    jq -r --arg p "$1" --arg n "$2" '
        "load_ops_per_sec_\($p)_nodes_\($n) \(.ops_per_sec | floor)",
        "load_p99_ms_\($p)_nodes_\($n) \(.latency_ms.p99)",
        "load_max_ms_\($p)_nodes_\($n) \(.latency_ms.max)",
        "load_failed_ops_\($p)_nodes_\($n) \(.errors)",
        "load_lost_writes_\($p)_nodes_\($n) \(.verify.lost)"' "$3"
}
for n in 3 5; do
    bench_hcstor_cluster "$n"
    nodes=$(hcctl net show -o json | jq -r '[.nodes[].address + ":7480"] | join(",")')
    load=(hcload --nodes "$nodes" --workers 4 --json --quiet)
    "${load[@]}" --duration 8 >"$work/before.json"
    "${load[@]}" --duration 0 >"$work/during.json" &
    pid=$!
    sleep 1
    t0=$(date +%s%3N)
    hcctl -q upgrade --rolling --to 1.1 --yes >/dev/null
    t1=$(date +%s%3N)
    sleep 1
    kill -INT "$pid"
    wait "$pid"
    "${load[@]}" --duration 8 >"$work/after.json"
    figures before "$n" "$work/before.json"
    figures during "$n" "$work/during.json"
    figures after "$n" "$work/after.json"
    echo "load_upgrade_seconds_nodes_$n $(awk -v t=$((t1 - t0)) 'BEGIN {printf "%.2f", t / 1000}')"
    echo "load_longest_stall_ms_during_nodes_$n $(jq .longest_stall_ms "$work/during.json")"
    bench_stop
done
