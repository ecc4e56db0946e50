#!/usr/bin/env bash
# Wall time of `hcctl cluster create` on 1, 4 and 8 lab nodes (issue 3's figure: time(8)/time(1)
# below 2). Needs root. Usage: [RUNS=N] bench/create.sh [BUILD_DIR] (default build-bench, a
# release build). Prints "name value" lines; each figure is the median of RUNS runs (default 1).
# Lines starting with '#' say where the time went, per run: the operation's own duration as the
# controller recorded it (hcctl's wall time adds its start-up and its polling of the operation,
# 250 ms apart) and the slowest host of each step.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
runs=${RUNS:-1}
. "$src/bench/lib.sh"

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# The last operation: its duration and the slowest host of each step, in one comment line.
op_breakdown() {
    local id
    id=$(hcctl operation list -o json | jq -r '.operations[0].id')
    hcctl operation show "$id" -o json | jq -r '
        def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (.[20:23] | tonumber);
        def took: if .finished_at and .started_at then (.finished_at | ms) - (.started_at | ms)
                  else 0 end;
        "operation \((.operation | took) / 1000) s; slowest host per step: " +
        ([.steps | group_by(.step)[] | {step: .[0].step, seq: (map(.seq) | min),
                                        ms: (map(took) | max)}]
         | sort_by(.seq) | map("\(.step) \(.ms)") | join(", ")) + " ms"'
}

declare -A secs
for n in 1 4 8; do
    all=()
    for ((r = 1; r <= runs; r++)); do
        bench_controller "$n" 500ms
        t0=$(date +%s%N)
        hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 \
            --accept-new-host-keys >/dev/null
        t1=$(date +%s%N)
        all+=("$(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d / 1e9}')")
        echo "# nodes $n run $r: ${all[-1]} s; $(op_breakdown)"
        bench_stop
    done
    secs[$n]=$(printf '%s\n' "${all[@]}" | median)
    echo "cluster_create_seconds_nodes_$n ${secs[$n]}"
done
awk -v a="${secs[8]}" -v b="${secs[1]}" 'BEGIN {printf "cluster_create_ratio_8_over_1 %.2f\n", a / b}'
