#!/usr/bin/env bash
# The configuration's figures (issue 15, docs/config.md) on 3 and 5 lab nodes running hcstor 1.3:
# - a live change (log_level, resync_parallelism): the operation's wall time, and the time until
#   every node reports the new revision in sync (the controller's view: its poller every 500 ms)
#   and every hcstor answers the new values (asked directly);
# - a restart change (fsync always <-> batch) under hcload: wall time, the longest stall hcload
#   saw, failed operations and lost writes (each must be 0: anything else stops the bench).
# Each figure is the median of RUNS runs (default 3). Needs root; one lab at a time:
#   flock /tmp/hc-lab.lock bash bench/config.sh [BUILD_DIR]   (default build-bench, release)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
runs=${RUNS:-3}
sizes=${SIZES:-3 5}
. "$src/bench/lib.sh"
ninja -C "$build" hcload >/dev/null

ms() { date +%s%3N; }
secs() { awk -v t="$1" 'BEGIN {printf "%.2f", t / 1000}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
fail() { echo "config.sh: $*" >&2; exit 1; }
# hcstor's client address of every node: its storage address (docs/hcstor.md).
svc_nodes() { hcctl net show -o json | jq -r '[.nodes[].address + ":7480"] | join(",")'; }
in_sync_at() { # REV N: every node reports revision REV in sync
    hcctl config status -o json | jq -e --argjson r "$1" --argjson n "$2" \
        '[.nodes[] | select(.state == "in_sync" and .applied_revision == $r)] | length == $n' >/dev/null
}
services_have() { # KEY VALUE: every hcstor says it runs with that value
    local hp
    for hp in $(svc_nodes | tr , ' '); do
        curl -sf --max-time 2 "http://$hp/settings" |
            jq -e --arg k "$1" --arg v "$2" '.settings[$k] | tostring == $v' >/dev/null || return 1
    done
}

for n in $sizes; do
    bench_controller "$n" 500ms --trust-key "$build/bundles/dev.pub"
    hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --accept-new-host-keys
    hcctl -q software upload "$build/bundles/hcstor-1.3.tar.gz" >/dev/null
    hcctl -q upgrade --rolling --to 1.3 --yes >/dev/null
    live_op=() live_all=() restart_wall=() stall=() failed=0 lost=0
    for r in $(seq "$runs"); do
        # live: alternate the values so that every run is a change
        level=$([ $((r % 2)) = 1 ] && echo debug || echo info)
        par=$((4 + r))
        t0=$(ms)
        hcctl -q config set log_level=$level resync_parallelism=$par >/dev/null
        t1=$(ms)
        rev=$(hcctl config show -o json | jq .revision)
        until in_sync_at "$rev" "$n" && services_have log_level "$level" &&
            services_have resync_parallelism "$par"; do
            [ $(($(ms) - t0)) -lt 30000 ] || fail "revision $rev not everywhere after 30 s"
            sleep 0.05
        done
        t2=$(ms)
        live_op+=($((t1 - t0)))
        live_all+=($((t2 - t0)))
        # restart, under load
        mode=$([ $((r % 2)) = 1 ] && echo batch || echo always)
        hcload --nodes "$(svc_nodes)" --workers 4 --duration 0 --json --quiet \
            --prefix "cfg$r" >"$work/load.json" &
        pid=$!
        sleep 1
        t0=$(ms)
        hcctl -q config set fsync=$mode --yes >/dev/null
        t1=$(ms)
        sleep 1
        kill -INT "$pid"
        wait "$pid" || true
        jq -e '.writes > 0 and .corrupt_reads == 0' "$work/load.json" >/dev/null ||
            fail "hcload wrote nothing or read corrupt data: $(cat "$work/load.json")"
        services_have fsync "$mode" || fail "not every hcstor runs fsync=$mode"
        failed=$((failed + $(jq .errors "$work/load.json")))
        lost=$((lost + $(jq .verify.lost "$work/load.json")))
        restart_wall+=($((t1 - t0)))
        stall+=("$(jq '.longest_stall_ms | floor' "$work/load.json")")
    done
    echo "config_live_operation_seconds_nodes_$n $(secs "$(printf '%s\n' "${live_op[@]}" | median)")"
    echo "config_live_until_every_node_reports_seconds_nodes_$n $(secs "$(printf '%s\n' "${live_all[@]}" | median)")"
    echo "config_restart_seconds_nodes_$n $(secs "$(printf '%s\n' "${restart_wall[@]}" | median)")"
    echo "config_restart_longest_stall_ms_nodes_$n $(printf '%s\n' "${stall[@]}" | median)"
    echo "config_restart_failed_ops_nodes_$n $failed"
    echo "config_restart_lost_writes_nodes_$n $lost"
    bench_stop
done
