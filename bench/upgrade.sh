#!/usr/bin/env bash
# Rolling upgrade wall time on 3 and 6 lab nodes, and the controller's own overhead per node:
# total minus the time the service itself spends restarting on the new version and passing its
# health check (the activate and verify_health steps). Needs root.
# Usage: bench/upgrade.sh [BUILD_DIR] (default build-bench, a release build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hcagent hcstor bundles >/dev/null
export PATH=$build/bin:$PATH
work=$(mktemp -d /tmp/hcctl-bench.XXXXXX)
export XDG_CONFIG_HOME=$work/config HC_TEST_TMP=$work
. "$src/tests/lab/lab.sh"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    lab_down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

ms() { date +%s%3N; }
for n in 3 6; do
    rm -rf "$work/controller" "$work/config"
    hcctld init --data-dir "$work/controller" --listen 198.18.0.1:7443 \
        --trust-key "$build/bundles/dev.pub" >/dev/null 2>&1
    lab_up "$n" --prefix hcb --key "$work/controller/ssh/id_ed25519.pub" >/dev/null 2>&1
    hcctld run --data-dir "$work/controller" --poll-interval 500ms >"$work/hcctld.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do hcctl -q version >/dev/null 2>&1 && break; sleep 0.1; done
    args=()
    for i in $(seq "$n"); do args+=(--node "198.18.0.$((10 + i))"); done
    hcctl -q cluster create bench "${args[@]}" --storage-interface eth1 --accept-new-host-keys
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
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    lab_down >/dev/null 2>&1
done
