#!/usr/bin/env bash
# Wall time of `hcctl cluster create` on 1, 4 and 8 lab nodes (issue 3's figure: time(8)/time(1)
# below 2). Needs root. Usage: bench/create.sh [BUILD_DIR] (default build-bench, a release build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
. "$src/bench/lib.sh"

declare -A secs
for n in 1 4 8; do
    bench_controller "$n" 500ms
    t0=$(date +%s%N)
    hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --accept-new-host-keys >/dev/null
    t1=$(date +%s%N)
    secs[$n]=$(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d / 1e9}')
    echo "cluster_create_seconds_nodes_$n ${secs[$n]}"
    bench_stop
done
awk -v a="${secs[8]}" -v b="${secs[1]}" 'BEGIN {printf "cluster_create_ratio_8_over_1 %.2f\n", a / b}'
