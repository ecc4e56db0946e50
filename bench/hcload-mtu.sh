#!/usr/bin/env bash
# What jumbo frames buy the storage service: hcload's throughput with large blocks (64 KiB and
# 1 MiB) on a 3-node lab running hcstor-1.3 on the storage network, at storage MTU 9000 and then
# 1500 (hcctl net set-mtu), the same duration and workers each time, printed side by side: ops/s,
# MB/s (blocks moved, reads and writes), p50/p99 latency, failed operations. Needs root.
# Usage: bench/hcload-mtu.sh [BUILD_DIR] (default build-bench, a release build);
# HC_BENCH_DURATION seconds per run (default 10).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
. "$src/bench/lib.sh"
ninja -C "$build" hcload >/dev/null
duration=${HC_BENCH_DURATION:-10}
blocks=(65536 1048576)

serving() {
    local a
    for a in $(hcctl net show -o json | jq -r '.nodes[].address'); do
        curl -s --max-time 2 "http://$a:7480/health" | jq -e '.state == "serving"' >/dev/null || return 1
    done
}
wait_serving() { for _ in $(seq 100); do serving && return 0; sleep 0.2; done; echo "bench: hcstor not serving" >&2; return 1; }

bench_controller 3 500ms --trust-key "$build/bundles/dev.pub"
hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --mtu 9000 \
    --accept-new-host-keys --yes >/dev/null
hcctl -q software upload "$build/bundles/hcstor-1.3.tar.gz" >/dev/null
hcctl -q upgrade --rolling --to 1.3 --yes >/dev/null
nodes=$(hcctl net show -o json | jq -r '[.nodes[].address + ":7480"] | join(",")')
wait_serving

for mtu in 9000 1500; do
    if [ "$mtu" != 9000 ]; then
        hcctl -q net set-mtu "$mtu" --yes >/dev/null
        wait_serving
    fi
    # the nodes' storage interfaces as the poller last saw them: the MTU really in force
    for _ in $(seq 50); do
        [ "$(hcctl net show -o json | jq -c '[.nodes[].mtu] | unique')" = "[$mtu]" ] && break
        sleep 0.2
    done
    [ "$(hcctl net show -o json | jq -c '[.nodes[].mtu] | unique')" = "[$mtu]" ] ||
        { echo "bench: the storage interfaces are not at MTU $mtu" >&2; exit 1; }
    for b in "${blocks[@]}"; do
        hcload --nodes "$nodes" --duration "$duration" --workers 4 --keys 50 --block-size "$b" \
            --json --quiet >"$work/mtu$mtu-b$b.json" || true
    done
done

printf '%-8s %-6s %12s %12s %10s %10s %8s   %12s %12s %10s %10s %8s\n' block "" \
    "ops/s@9000" "MB/s@9000" "p50@9000" "p99@9000" "err" "ops/s@1500" "MB/s@1500" "p50@1500" \
    "p99@1500" "err"
for b in "${blocks[@]}"; do
    row() {
        jq -r --argjson b "$b" '"\(.ops_per_sec | . * 10 | floor / 10) \(.ops_per_sec * $b / 1e6 | . * 10 | floor / 10) \(.latency_ms.p50) \(.latency_ms.p99) \(.errors)"' "$1"
    }
    read -r o9 m9 p509 p999 e9 < <(row "$work/mtu9000-b$b.json")
    read -r o1 m1 p501 p991 e1 < <(row "$work/mtu1500-b$b.json")
    printf '%-8s %-6s %12s %12s %10s %10s %8s   %12s %12s %10s %10s %8s\n' "$((b / 1024))KiB" "" \
        "$o9" "$m9" "$p509" "$p999" "$e9" "$o1" "$m1" "$p501" "$p991" "$e1"
done
echo "(3 nodes, replication 2, 4 workers, ${duration} s per run; latencies in ms)"
