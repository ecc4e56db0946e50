#!/usr/bin/env bash
# Rolling upgrade wall time on 3 and 6 lab nodes, and the controller's own overhead per node:
# total minus the time the service itself spends restarting on the new version and passing its
# health check (the activate and verify_health steps). Needs root.
# Usage: bench/upgrade.sh [BUILD_DIR] (default build-bench, a release build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
. "$src/bench/lib.sh"

ms() { date +%s%3N; }
for n in 3 6; do
    bench_controller "$n" 500ms --trust-key "$build/bundles/dev.pub"
    hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --accept-new-host-keys
    hcctl -q software upload "$build/bundles/hcstor-1.0.tar.gz" >/dev/null
    hcctl -q software upload "$build/bundles/hcstor-1.1.tar.gz" >/dev/null
    hcctl -q upgrade --rolling --to 1.0 --yes >/dev/null
    t0=$(ms)
    hcctl -q upgrade --rolling --to 1.1 --yes >/dev/null
    t1=$(ms)
    id=$(hcctl upgrade status -o json | jq -r .operation_id)
    service_ms=$(hcctl operation show "$id" -o json | jq '[.steps[] | select(.step == "activate"
        or .step == "verify_health") | ((.finished_at | sub("\\.[0-9]+Z$"; "Z") | fromdate) * 1000
        + (.finished_at | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber)) - ((.started_at
        | sub("\\.[0-9]+Z$"; "Z") | fromdate) * 1000 + (.started_at
        | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber))] | add')
    total=$((t1 - t0))
    echo "upgrade_seconds_nodes_$n $(awk -v t=$total 'BEGIN {printf "%.2f", t / 1000}')"
    echo "upgrade_service_restart_and_health_seconds_nodes_$n $(awk -v t="$service_ms" 'BEGIN {printf "%.2f", t / 1000}')"
    echo "upgrade_controller_overhead_ms_per_node_nodes_$n $(( (total - service_ms) / n ))"
    bench_stop
done
