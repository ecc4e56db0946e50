#!/usr/bin/env bash
# Wall time of `hcctl net check-jumbo` (every directed pair, DF probes of 9000 bytes) on 4 and 8
# lab nodes, beside what an admin does by hand: a shell loop of `ping -M do -s 8972` over SSH
# covering the same directed pairs (issue 4's figure: hcctl at least 10x faster).
# Needs root. Usage: bench/jumbo.sh [BUILD_DIR] (default build-bench, a release build).
# Prints "name value" lines; each figure is the median of RUNS runs (default 5).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
runs=${RUNS:-5}
. "$src/bench/lib.sh"

now_ns() { date +%s%N; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
secs() { awk -v d="$1" 'BEGIN {printf "%.3f", d / 1e9}'; }

# The manual way: one ssh per directed pair, each running one DF ping of 8972 bytes of payload.
ssh_loop() {
    local n=$1 a b key=$work/controller/ssh/id_ed25519 known
    known=$(lab_info --json | jq -r .known_hosts)
    for a in $(seq "$n"); do
        for b in $(seq "$n"); do
            [ "$a" = "$b" ] && continue
            ssh -i "$key" -o BatchMode=yes -o UserKnownHostsFile="$known" \
                -o StrictHostKeyChecking=yes "root@198.18.0.$((10 + a))" \
                ping -M do -s 8972 -c 1 -W 1 "198.18.1.$((10 + b))" >/dev/null
        done
    done
}

for n in 4 8; do
    bench_controller "$n" 2s
    hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --accept-new-host-keys \
        --mtu 9000 --yes >/dev/null
    hcctl -q net check-jumbo >/dev/null # warm: ARP entries, connections to the agents
    ssh_loop "$n"
    h=() s=()
    for _ in $(seq "$runs"); do
        t0=$(now_ns); hcctl -q net check-jumbo >/dev/null; t1=$(now_ns)
        h+=($((t1 - t0)))
        t0=$(now_ns); ssh_loop "$n"; t1=$(now_ns)
        s+=($((t1 - t0)))
    done
    hm=$(printf '%s\n' "${h[@]}" | median)
    sm=$(printf '%s\n' "${s[@]}" | median)
    pairs=$((n * (n - 1)))
    echo "check_jumbo_seconds_nodes_${n}_pairs_${pairs} $(secs "$hm")"
    echo "ssh_ping_loop_seconds_nodes_${n}_pairs_${pairs} $(secs "$sm")"
    awk -v a="$sm" -v b="$hm" -v n="$n" 'BEGIN {printf "speedup_nodes_%d %.1f\n", n, a / b}'
    bench_stop
done
