#!/usr/bin/env bash
# Figures for the spine: clean build time, `hcctl node list` latency against a controller with
# three real agents, hcagent and hcctld RSS at idle. Prints one line per figure.
# Usage: bench/spine.sh [BUILD_DIR]   (a release build is made in BUILD_DIR, default build-bench)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
rm -rf "$build"
t0=$(date +%s%N)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" >/dev/null
t1=$(date +%s%N)
echo "clean_build_seconds $(( (t1 - t0) / 1000000 ))e-3" | awk '{printf "%s %.1f\n", $1, $2}'

export HC_BIN=$build/bin HC_TEST_TMP=${HC_TEST_TMP:-/tmp}
. "$src/tests/e2e/lib.sh"
controller_init
controller_start
agent_join n1 127.0.0.2 && agent_join n2 127.0.0.3 && agent_join n3 127.0.0.4
wait_for 10 "[ \$(reachable_count) = 3 ]"
sleep 2

n=200
t0=$(date +%s%N)
for _ in $(seq $n); do hcctl node list -o json >/dev/null; done
t1=$(date +%s%N)
echo "node_list_latency_ms_mean $(( (t1 - t0) / n / 1000 ))e-3" | awk '{printf "%s %.2f\n", $1, $2}'
# Server side only: the same request with curl keeps process start-up out of the figure.
tok=$(cat "$CTL_DIR/admin.token")
curl -s -w '%{time_total}\n' --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $tok" \
    $(for _ in $(seq 200); do echo "$CTL_URL/v1/nodes -o /dev/null"; done) | sort -n |
    awk '{a[NR]=$1} END {printf "node_list_http_ms_p50 %.2f\nnode_list_http_ms_p99 %.2f\n", a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000}'
for name in n1 hcctld; do
    rss=$(awk '/VmRSS/ {print $2}' /proc/$(pid_of $name)/status)
    echo "${name/n1/hcagent}_rss_kib_idle $rss"
done
