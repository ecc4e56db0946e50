#!/usr/bin/env bash
# Wall time of `hcctl cluster create` on 1, 4 and 8 lab nodes (issue 3's figure: time(8)/time(1)
# below 2). Needs root. Usage: bench/create.sh [BUILD_DIR] (default build-bench, a release build).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hcagent >/dev/null
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

declare -A secs
for n in 1 4 8; do
    rm -rf "$work/controller" "$work/config"
    hcctld init --data-dir "$work/controller" --listen 198.18.0.1:7443 >/dev/null 2>&1
    lab_up "$n" --prefix hcb --key "$work/controller/ssh/id_ed25519.pub" >/dev/null 2>&1
    hcctld run --data-dir "$work/controller" --poll-interval 500ms >"$work/hcctld.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do hcctl -q version >/dev/null 2>&1 && break; sleep 0.1; done
    args=()
    for i in $(seq "$n"); do args+=(--node "198.18.0.$((10 + i))"); done
    t0=$(date +%s%N)
    hcctl -q cluster create bench "${args[@]}" --storage-interface eth1 --accept-new-host-keys >/dev/null
    t1=$(date +%s%N)
    secs[$n]=$(awk -v d=$((t1 - t0)) 'BEGIN {printf "%.2f", d / 1e9}')
    echo "cluster_create_seconds_nodes_$n ${secs[$n]}"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    lab_down >/dev/null 2>&1
done
awk -v a="${secs[8]}" -v b="${secs[1]}" 'BEGIN {printf "cluster_create_ratio_8_over_1 %.2f\n", a / b}'
