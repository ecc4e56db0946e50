#!/usr/bin/env bash
# Controller HA on etcd, measured (issue 17, docs/ha.md): three etcd members and three hcctld
# (release build) on loopback, NODES hollow agents (hchollow, docs/hollow.md), a rolling upgrade
# during which the leader is SIGKILLed KILLS times (default 12), each time once a step succeeded.
# Per kill: kill -> a new leader says so on GET /v1/ha; -> the op.resumed event of the operation;
# -> the operation's next step succeeded, both from the controllers' own records (the new
# leader's log line, the event's and the step's timestamps) and as this script's polling saw
# them (through hcctl and GET /v1/ha, a few hundred ms late).
# Printed: p50 and max of each over the kills. Then the
# write latency of a mutating API call (POST then DELETE /v1/tokens, 200 each) on the HA leader
# beside a single-mode hcctld on the same machine, and etcd's RSS and CPU over the run.
# Usage: bench/ha.sh [BUILD_DIR] (default build-bench). Needs root (unshare -n) and etcd.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
if [ -z "${HC_HA_NETNS:-}" ]; then
    exec env HC_HA_NETNS=1 unshare -n bash "$0" "$@"
fi
ip link set lo up
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hchollow bundles >/dev/null
export PATH=$build/bin:$PATH
NODES=${NODES:-6} KILLS=${KILLS:-12}
work=$(mktemp -d /tmp/hcctl-ha.XXXXXX)
export XDG_CONFIG_HOME=$work/config
BIN=$build/bin HA_DIR=$work HA_TTL=${HA_TTL:-2s} HA_POLL=500ms
HA_INIT_ARGS="--trust-key $build/bundles/dev.pub"
. "$src/tests/ha/ha_lib.sh"
hollow_pid= single_pid=
trap 'trap "" INT TERM; kill $hollow_pid $single_pid 2>/dev/null || true; ha_teardown; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

ms() { date +%s%3N; }
# until_ok SECONDS CONDITION: polls CONDITION every 20 ms; the bench fails after SECONDS.
until_ok() {
    local deadline=$(($(date +%s) + $1))
    until eval "$2" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || { echo "ha: timed out: $2" >&2; exit 1; }
        sleep 0.02
    done
}
pct() { sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR * p + 99) / 100); if (i < 1) i = 1; print v[i] }'; }
url() { echo "https://${HA_CTL_IPS[$(($1 - 1))]}:$HA_PORT"; }
hc() { HCCTL_CONTROLLER="$(url 1),$(url 2),$(url 3)" hcctl "$@"; }

ha_setup
token=$(cat "$work/c1/admin.token")
export HCCTL_CA_FILE=$work/c1/ca.pem HCCTL_TOKEN=$token
hc -q software upload "$build/bundles/hcstor-1.0.tar.gz" >/dev/null
hc -q software upload "$build/bundles/hcstor-1.1.tar.gz" >/dev/null
HCHOLLOW_TOKEN=$token hchollow --controller "$(url 1)" --ca "$work/c1/ca.pem" --count "$NODES" \
    --first-address 127.1.0.1 --data-dir "$work/hollow" --control "$work/hollow.sock" \
    --trust-key "$build/bundles/dev.pub" --activate-ms 400 >"$work/hollow.log" 2>&1 &
hollow_pid=$!
for _ in $(seq 300); do
    [ "$(hc -o json node list 2>/dev/null | jq '[.nodes[] | select(.health == "reachable")] | length')" = "$NODES" ] && break
    sleep 0.2
done
hc -q upgrade --rolling --to 1.0 --yes >/dev/null

succeeded() { hc -o json operation show "$1" | jq '[.steps[] | select(.state == "succeeded")] | length'; }
state() { hc -o json operation show "$1" | jq -r .operation.state; }
resumed_after() { # OP EVENT_ID: 1 when an op.resumed of OP came after EVENT_ID
    hc -o json events --type op.resumed --limit 50 | jq -e --arg op "$1" --argjson id "$2" \
        '[.events[] | select(.op_id == $op and .id > $id)] | length > 0' >/dev/null
}
: >"$work/elected.ms"; : >"$work/resumed_rec.ms"; : >"$work/step_rec.ms"
: >"$work/leader.ms"; : >"$work/resumed.ms"; : >"$work/step.ms"
# jq: an API time ("2026-12-04T03:51:14.818Z") as epoch ms
iso_ms='def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + ((.[20:23] // "0") | tonumber);'

version=1.1 kills=0
while [ "$kills" -lt "$KILLS" ]; do
    op=$(hc -o json upgrade --rolling --to "$version" --yes --no-wait | jq -r .operation.id)
    while [ "$kills" -lt "$KILLS" ]; do
        s0=$(succeeded "$op")
        until_ok 120 '[ "$(succeeded "$op")" -gt "$s0" ] || [ "$(state "$op")" = succeeded ]'
        [ "$(state "$op")" = succeeded ] && break
        l=$(ha_leader) acked=$(hc -o json events --limit 1 | jq '.events[0].id') s1=$(succeeded "$op")
        t0=$(ms)
        kill -KILL "$(ha_ctl_pid "$l")"
        until_ok 60 'nl=$(ha_leader) && [ "$nl" != "$l" ] || [ "$(ha_status "$l" | ha_json role)" = leader ]'
        t1=$(ms)
        # The kill may land after the last step finished: nothing is resumed then; not counted.
        until_ok 60 'resumed_after "$op" "$acked" || [ "$(state "$op")" = succeeded ]'
        resumed_after "$op" "$acked" || { echo "kill at the end of $op: not counted" >&2; break; }
        t2=$(ms)
        until_ok 120 '[ "$(succeeded "$op")" -gt "$s1" ] || [ "$(state "$op")" = succeeded ]'
        t3=$(ms)
        # The controllers' own records, free of this loop's polling (same machine, same clock):
        # the election in the new leader's log, the op.resumed event, the next step's finish.
        nl=$(ha_leader)
        elected=$(grep "ha: elected leader" "$work/c$nl.log" | tail -n 1 | cut -c1-23)
        te=$(date -d "${elected/T/ } UTC" +%s%3N)
        tr=$(hc -o json events --type op.resumed --limit 50 | jq --arg op "$op" --argjson id "$acked" \
            "$iso_ms"' [.events[] | select(.op_id == $op and .id > $id) | .ts | ms] | min')
        ts=$(hc -o json operation show "$op" | jq --argjson after "$tr" \
            "$iso_ms"' [.steps[] | select(.state == "succeeded" and .finished_at) | .finished_at | ms
                        | select(. > $after)] | min')
        echo $((te - t0)) >>"$work/elected.ms"
        echo $((tr - t0)) >>"$work/resumed_rec.ms"
        echo $((ts - t0)) >>"$work/step_rec.ms"
        kills=$((kills + 1))
        echo "kill $kills: recorded: elected $((te - t0)), op.resumed $((tr - t0)), next step $((ts - t0)) ms; seen: leader $((t1 - t0)) ms, op.resumed $((t2 - t0)) ms, next step $((t3 - t0)) ms" >&2
        echo $((t1 - t0)) >>"$work/leader.ms"; echo $((t2 - t0)) >>"$work/resumed.ms"; echo $((t3 - t0)) >>"$work/step.ms"
    done
    until_ok 300 '[ "$(state "$op")" != running ] && [ "$(state "$op")" != pending ]'
    [ "$(state "$op")" = succeeded ] || { echo "ha: operation $op ended $(state "$op")" >&2; exit 1; }
    version=$([ "$version" = 1.1 ] && echo 1.0 || echo 1.1)
done
echo "nodes $NODES, lease TTL $HA_TTL, kills $KILLS"
for f in elected resumed_rec step_rec leader resumed step; do
    echo "failover_to_${f}_ms p50 $(pct 50 "$work/$f.ms") max $(pct 100 "$work/$f.ms")"
done
echo "(elected, resumed_rec, step_rec: the controllers' own timestamps; leader, resumed, step:"
echo " when this script's polling saw them, a few hundred ms later)"

# Write latency: POST /v1/tokens then DELETE it, on the HA leader and on a single controller.
write_latency() { # URL CA TOKEN LABEL
    local i t0 t1
    : >"$work/w.$4"
    for i in $(seq 200); do
        t0=$(date +%s%N)
        curl -s -o /dev/null --cacert "$2" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
            -d "{\"name\":\"bench-$4-$i\"}" "$1/v1/tokens"
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000)) >>"$work/w.$4"
        curl -s -o /dev/null --cacert "$2" -H "Authorization: Bearer $3" -X DELETE "$1/v1/tokens/bench-$4-$i"
    done
    echo "write_latency_us_$4 p50 $(pct 50 "$work/w.$4") p99 $(pct 99 "$work/w.$4")"
}
write_latency "$(url "$(ha_wait_leader 30)")" "$work/c1/ca.pem" "$token" ha
hcctld init --data-dir "$work/single" --listen 127.0.0.31:7443 --cli-config "$work/single.json" >/dev/null 2>&1
hcctld run --data-dir "$work/single" >"$work/single.log" 2>&1 &
single_pid=$!
sleep 1
write_latency https://127.0.0.31:7443 "$work/single/ca.pem" "$(cat "$work/single/admin.token")" single

for i in 0 1 2; do
    p=$(ha_etcd_pid "$i")
    [ -d "/proc/$p" ] || continue
    ticks=$(awk '{ print $14 + $15 }' "/proc/$p/stat")
    start=$(awk '{ print $22 }' "/proc/$p/stat")
    up=$(awk -v s="$start" -v hz="$(getconf CLK_TCK)" '{ print $1 - s / hz }' /proc/uptime)
    echo "etcd$i rss_mb $(( $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status") / 1024 )) cpu_percent $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v u="$up" 'BEGIN { printf "%.1f", t * 100 / hz / u }')"
done
