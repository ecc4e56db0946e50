#!/usr/bin/env bash
# One controller and 1,000 nodes, measured (issue 16): a real hcctld (release build) and hchollow
# (tools/hollow, docs/hollow.md), one process serving N agent identities on loopback addresses,
# each enrolled through the real join flow. Runs in a private network namespace (loopback only).
# Figures, for N = 3 and then N = SIZES' last (default "3 1000"):
#   join time (hchollow start -> N nodes enrolled, -> N reachable);
#   poll cycle p50/p99 (hcctld's /metrics, over the steady-state minute);
#   hcctld CPU % and RSS in steady state (30 s, nothing running), hchollow's RSS;
#   GET /v1/nodes req/s beside nginx serving the same bytes over TLS (wrk, same connections);
#   hcctl node list p50/p99 with 10 concurrent clients (200 runs);
#   a first install (1.0) and a rolling upgrade (1.0 -> 1.3) over all N (the bundle staged to
#   every node first, then one node at a time): staging time, wall time, seconds per node after
#   staging, and that less the hollow service's own downtime (the controller's part);
#   a live configuration apply over all N (config set, until every node reports it in sync).
# Usage: bench/scale.sh [BUILD_DIR] (default build-bench). UPGRADE=0 skips the second rolling
# upgrade (1,000 nodes one at a time take ~5 min each). Needs root (unshare -n); nginx-light
# and wrk (scripts/install-deps.sh installs them).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
sizes=${SIZES:-3 1000}
if [ -z "${HC_SCALE_NETNS:-}" ]; then
    exec env HC_SCALE_NETNS=1 unshare -n bash "$0" "$@"
fi
ip link set lo up
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hchollow bundles >/dev/null
export PATH=$build/bin:$PATH
ulimit -n "$(ulimit -Hn)" # hcctld and hchollow also raise their own soft limit
work=$(mktemp -d /tmp/hcctl-scale.XXXXXX)
export XDG_CONFIG_HOME=$work/config
ctl_pid= hollow_pid= nginx_pid=
. "$src/bench/hollow_lib.sh"
stop_all() {
    stop_pids $hollow_pid $ctl_pid $nginx_pid
    ctl_pid= hollow_pid= nginx_pid=
}
trap 'trap "" INT TERM; stop_all; rm -rf "$work"' EXIT
metric() { # NAME{labels} -> value, from hcctld's /metrics
    curl -s --cacert "$work/c/ca.pem" -H "Authorization: Bearer $token" "$url/metrics" |
        awk -v m="$1" '$1 == m { print $2 }'
}
# op_span OP_ID STEP: seconds from the first start to the last finish of that step's rows
op_span() {
    hcctl -o json operation show "$1" | jq -r --arg s "$2" '
        def t: (.[0:19] + "Z" | fromdateiso8601) + ((.[20:23] // "0") | tonumber / 1000);
        [.steps[] | select(.step == $s and .started_at and .finished_at)] |
        if length == 0 then "0" else
        ((map(.finished_at | t) | max) - (map(.started_at | t) | min) | . * 100 | round / 100)
        end'
}

. "$src/bench/nginx.sh"
rps() { wrk_rps "$1" "$token" 8 1 10s; }

activate_ms=50 # hchollow --activate-ms: each node's service is down that long
# upgrade_to VERSION LABEL: a rolling upgrade of every node (one at a time), timed: the staging
# (every node fetches the bundle, 16 at once) and the seconds per node after it, with and without
# the hollow service's own activate_ms (what is left is the controller's overhead per node)
upgrade_to() {
    local t0 t1 op staged
    t0=$(ms)
    hcctl -q upgrade --rolling --to "$1" --yes >/dev/null
    t1=$(ms)
    op=$(hcctl -o json operation list | jq -r '[.operations[] | select(.kind == "upgrade.rolling")] | max_by(.created_at) | .id')
    staged=$(op_span "$op" stage)
    echo "${2}_staging_seconds$tag $staged"
    echo "${2}_seconds$tag $(secs "$t0" "$t1")"
    echo "${2}_seconds_per_node_after_staging$tag $(awk -v w=$((t1 - t0)) -v s="$staged" -v n="$n" 'BEGIN { printf "%.3f", (w / 1000 - s) / n }')"
    echo "${2}_controller_ms_per_node$tag $(awk -v w=$((t1 - t0)) -v s="$staged" -v n="$n" -v a="$activate_ms" 'BEGIN { printf "%.1f", ((w / 1000 - s) / n) * 1000 - a }')"
}

scale_run() {
    local t0 t1 t2 c0 c1
    n=$1 tag=_nodes_$1
    stop_all
    rm -rf "$work/c" "$work/config" "$work/hollow"
    hcctld init --data-dir "$work/c" --listen 127.0.0.1:7443 --trust-key "$build/bundles/dev.pub" \
        >/dev/null 2>&1
    token=$(cat "$work/c/admin.token")
    url=https://127.0.0.1:7443
    hcctld run --data-dir "$work/c" >"$work/hcctld.log" 2>&1 &
    ctl_pid=$!
    for _ in $(seq 100); do hcctl -o json version 2>/dev/null | jq -e .controller.version >/dev/null && break; sleep 0.1; done
    hcctl -q software upload "$build/bundles/hcstor-1.0.tar.gz" >/dev/null
    hcctl -q software upload "$build/bundles/hcstor-1.3.tar.gz" >/dev/null

    t0=$(ms)
    HCHOLLOW_TOKEN=$token hchollow --controller "$url" --ca "$work/c/ca.pem" --count "$n" \
        --first-address 127.1.0.1 --data-dir "$work/hollow" --control "$work/hollow.sock" \
        --trust-key "$build/bundles/dev.pub" --activate-ms "$activate_ms" >"$work/hollow.log" 2>&1 &
    hollow_pid=$!
    wait_nodes 'true' "$n" 600
    t1=$(ms)
    wait_nodes '.health == "reachable"' "$n" 120
    t2=$(ms)
    echo "join_seconds$tag $(secs "$t0" "$t1")"
    echo "join_to_reachable_seconds$tag $(secs "$t0" "$t2")"

    sleep 10 # settle, then a steady-state window with nothing running
    c0=$(cpu_ticks "$ctl_pid")
    sleep 30
    c1=$(cpu_ticks "$ctl_pid")
    echo "hcctld_cpu_percent_steady$tag $(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", d * 100 / hz / 30 }')"
    echo "hcctld_rss_mb_steady$tag $(( $(rss_kb "$ctl_pid") / 1024 ))"
    echo "hchollow_rss_mb$tag $(( $(rss_kb "$hollow_pid") / 1024 ))"
    echo "poll_cycle_p50_ms$tag $(metric 'hcctld_poll_cycle_seconds{quantile="0.5"}' | awk '{ print int($1 * 1000) }')"
    echo "poll_cycle_p99_ms$tag $(metric 'hcctld_poll_cycle_seconds{quantile="0.99"}' | awk '{ print int($1 * 1000) }')"

    curl -s --cacert "$work/c/ca.pem" -H "Authorization: Bearer $token" "$url/v1/nodes" >"$work/nodes.json"
    nginx_serve "$work" "$work/nodes.json" "$work/c/server.pem" "$work/c/server.key" 7543
    local ours theirs
    ours=$(rps "$url/v1/nodes") || ours=0
    theirs=$(rps "https://127.0.0.1:7543/v1/nodes") || theirs=0
    kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true; nginx_pid=
    echo "api_nodes_body_bytes$tag $(wc -c <"$work/nodes.json")"
    echo "api_nodes_rps_hcctld$tag $ours"
    echo "api_nodes_rps_nginx$tag $theirs"
    echo "api_nodes_ratio$tag $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", b ? a / b : 0 }')"

    local c
    for c in $(seq 10); do
        (for _ in $(seq 20); do
            s=$(date +%s%N); hcctl -o json node list >/dev/null; e=$(date +%s%N)
            echo $(((e - s) / 1000000))
        done >"$work/lat.$c") &
    done
    wait $(jobs -p | grep -v -e "^$ctl_pid$" -e "^$hollow_pid$") 2>/dev/null || true
    cat "$work"/lat.* >"$work/lat"
    echo "node_list_p50_ms_10_clients$tag $(pct 50 "$work/lat")"
    echo "node_list_p99_ms_10_clients$tag $(pct 99 "$work/lat")"

    if [ "${UPGRADE:-1}" = 1 ]; then
        upgrade_to 1.0 install
        upgrade_to 1.3 upgrade
    else # UPGRADE=0: one rolling install, of 1.3 (whose settings the configuration apply needs)
        upgrade_to 1.3 install
    fi
    [ "$(node_count '.software_version == "1.3"')" = "$n" ] || echo "scale: not every node is on 1.3" >&2

    t0=$(ms)
    hcctl -q config set log_level=debug -m "scale bench" --yes >/dev/null
    for _ in $(seq 600); do
        hcctl -o json config status | jq -e '[.nodes[] | select(.state != "in_sync")] | length == 0' >/dev/null && break
        sleep 0.2
    done
    t1=$(ms)
    echo "config_live_apply_seconds$tag $(secs "$t0" "$t1")"
    echo "config_live_apply_ms_per_node$tag $(awk -v w=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.2f", w / n }')"
    stop_all
}

for n in $sizes; do scale_run "$n"; done
