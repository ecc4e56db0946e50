#!/usr/bin/env bash
# Agent certificate renewal and CA rotation at N hollow nodes on one hcctld (issue 18 part 1;
# docs/certificates.md "Figures"). A real hcctld (release build) and hchollow (tools/hollow),
# whose identities answer the certificate routes with hcagent's own code (agents/hcagent/cert.c),
# in a private network namespace (loopback only). Not run in CI. Prints, for N (default 1000):
#
# (a) renewal: every node asked at once (POST /v1/nodes/NAME/renew-cert, what `hcctl node
#     renew-cert` sends, without its wait): all N due together, the worst case and the load a
#     rotation's reissue phase puts. The time from the first ask until every node's certificate
#     was renewed once (a cert.renewed event per node; the controller only records one once the
#     node answered its install), renewals per second, the controller's time per renewal (within
#     one cycle's pass: CSR, signature, install, the transaction and the revocation list), the
#     poll cycle p50/p99 and the loop's period (a cycle plus its renewal pass, at least the
#     interval) before and during, hcctld's and hchollow's CPU during, nodes ever unreachable.
# (b) `hcctld ca rotate`: wall time, each phase's time (its events), nodes ever unreachable
#     (node.health events away from reachable: every transition, not samples), the poll cycle
#     p50/p99 and hcctld's CPU during.
#
# Usage: bench/certs.sh [BUILD_DIR] (default build-bench). N=1000, POLL=2s. Needs root
# (unshare -n).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
n=${N:-1000}
poll=${POLL:-2s}
if [ -z "${HC_CERTS_NETNS:-}" ]; then
    exec env HC_CERTS_NETNS=1 unshare -n bash "$0" "$@"
fi
ip link set lo up
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hchollow >/dev/null
export PATH=$build/bin:$PATH
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d /tmp/hcctl-certs.XXXXXX)
export XDG_CONFIG_HOME=$work/config
ctl_pid= hollow_pid= sampler_pid=
. "$src/bench/hollow_lib.sh"
stop_all() { stop_pids $sampler_pid $hollow_pid $ctl_pid; }
trap 'trap "" INT TERM; stop_all; rm -rf "$work"' EXIT
rss_mb() { echo $(($(rss_kb "$1") / 1024)); }
cpu_pct() { awk -v d="$1" -v w="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", d * 100 / hz / (w / 1000) }'; }
db="$work/c/hcctld.db"
q() { sqlite3 -readonly "$db" "$1"; }
# The poller's cycles, sampled from /metrics every 0.25 s into FILE: "ms cycles_total
# last_cycle_seconds". The loop's period is measured from the counter.
sample_start() {
    while :; do
        curl -s --cacert "$work/c/ca.pem" -H "Authorization: Bearer $token" "$url/metrics" |
            awk -v t="$(ms)" '$1 == "hcctld_poll_cycles_total" { c = $2 } $1 == "hcctld_poll_cycle_last_seconds" { l = $2 } END { if (c != "") print t, c, l }'
        sleep 0.25
    done >>"$work/cycles" &
    sampler_pid=$!
}
# cycles FROM_MS TO_MS LABEL: p50/p99 of the cycles completed in the window, and the period
cycles() {
    awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && !seen[$2]++ { print $3 * 1000 }' "$work/cycles" >"$work/cyc"
    # the period: between the first sightings of counter values (the first one in the window
    # began before it)
    local period
    period=$(awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && !seen[$2]++ { if (first == "") { first = $2; next } if (c0 == "") { c0 = $2; t0 = $1 } c1 = $2; t1 = $1 }
        END { printf "%.0f", (c1 > c0 ? (t1 - t0) / (c1 - c0) : 0) }' "$work/cycles")
    echo "poll_cycle_p50_ms_$3 $(pct 50 "$work/cyc" | cut -d. -f1)"
    echo "poll_cycle_p99_ms_$3 $(pct 99 "$work/cyc" | cut -d. -f1)"
    echo "poll_period_ms_$3 $period"
}
# unreachable FROM_MS: nodes that turned anything but reachable since then
unreachable() {
    q "SELECT count(DISTINCT node) FROM events WHERE type = 'node.health' AND ts >= $1 AND json_extract(details_json, '\$.to') <> 'reachable'"
}

hcctld init --data-dir "$work/c" --listen 127.0.0.1:7443 >/dev/null 2>&1
token=$(cat "$work/c/admin.token")
url=https://127.0.0.1:7443
hcctld run --data-dir "$work/c" --poll-interval "$poll" >"$work/hcctld.log" 2>&1 &
ctl_pid=$!
for _ in $(seq 100); do hcctl -o json version 2>/dev/null | jq -e .controller.version >/dev/null && break; sleep 0.1; done
HCHOLLOW_TOKEN=$token hchollow --controller "$url" --ca "$work/c/ca.pem" --count "$n" \
    --first-address 127.1.0.1 --data-dir "$work/hollow" --control "$work/hollow.sock" \
    >"$work/hollow.log" 2>&1 &
hollow_pid=$!
wait_nodes '.health == "reachable"' "$n" 600
echo "nodes $n poll_interval $poll"
sample_start
sleep "${SETTLE:-40}" # settle, then the steady state
t_settled=$(ms)
t0=$t_settled
sleep "${STEADY:-30}"
t1=$(ms)
cycles "$t0" "$t1" steady
echo "hcctld_rss_mb_steady $(rss_mb "$ctl_pid")"
echo "hchollow_rss_mb_steady $(rss_mb "$hollow_pid")"

# (a) renewal of every node, all asked at once
for i in $(seq 0 $((n - 1))); do
    printf 'url = "%s/v1/nodes/hollow-%04d/renew-cert"\noutput = "/dev/null"\n' "$url" "$i"
done >"$work/asks"
c0=$(cpu_ticks "$ctl_pid") h0=$(cpu_ticks "$hollow_pid")
t0=$(ms)
curl -s --cacert "$work/c/ca.pem" -H "Authorization: Bearer $token" -X POST \
    -w '%{http_code}\n' --config "$work/asks" | sort | uniq -c | awk '{ print "asks_http_" $2, $1 }'
t_ask=$(ms)
while [ "$(q "SELECT count(DISTINCT node) FROM events WHERE type = 'cert.renewed' AND ts >= $t0")" -lt "$n" ]; do
    sleep 0.5
    [ $(($(ms) - t0)) -lt 1800000 ] || { echo "certs: renewal not done after 30 min" >&2; break; }
done
t1=$(ms)
c1=$(cpu_ticks "$ctl_pid") h1=$(cpu_ticks "$hollow_pid")
echo "renew_asks_seconds $(secs "$t0" "$t_ask")"
echo "renew_all_seconds $(secs "$t0" "$t1")"
echo "renewals_per_second $(awk -v w=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.1f", n / (w / 1000) }')"
# the controller's time per renewal: inside each cycle's pass (renewals less than 0.5 s apart),
# the span over the renewals after the first
q "SELECT ts FROM events WHERE type = 'cert.renewed' AND ts >= $t0 ORDER BY ts" |
    awk 'NR > 1 && $1 - p < 500 { span += $1 - p; k++ } { p = $1 } END { printf "renew_ms_per_node_in_pass %.1f\n", k ? span / k : 0 }'
echo "renew_failed_events $(q "SELECT count(*) FROM events WHERE type = 'cert.renew_failed' AND ts >= $t0")"
echo "renew_abandoned $(grep -c "renewal to certificate .* abandoned" "$work/hcctld.log" || true)"
cycles "$t0" "$t1" renewing
echo "hcctld_cpu_percent_renewing $(cpu_pct $((c1 - c0)) $((t1 - t0)))"
echo "hchollow_cpu_percent_renewing $(cpu_pct $((h1 - h0)) $((t1 - t0)))"
echo "unreachable_nodes_renewing $(unreachable "$t0")"
echo "revoked_entries $(q "SELECT count(*) FROM revoked_certs")"
echo "crl_bytes $(wc -c <"$work/c/crl.pem")"

# (b) CA rotation
sleep 10
c0=$(cpu_ticks "$ctl_pid")
t0=$(ms)
hcctld ca rotate --data-dir "$work/c" --timeout 30m >"$work/rotate.out" 2>&1 || { cat "$work/rotate.out" >&2; exit 1; }
t1=$(ms)
c1=$(cpu_ticks "$ctl_pid")
echo "ca_rotate_seconds $(secs "$t0" "$t1")"
q "SELECT type, ts, json_extract(details_json, '\$.phase') FROM events WHERE ts >= $t0 AND type IN ('ca.rotation_started', 'ca.rotation_phase', 'ca.rotated') ORDER BY id" |
    awk -F'|' -v end="$t1" '{ name = $1 == "ca.rotation_started" ? "trust" : $3; if (prev != "") printf "ca_rotate_phase_%s_seconds %.1f\n", prev, ($2 - pt) / 1000; prev = $1 == "ca.rotated" ? "" : name; pt = $2 }'
cycles "$t0" "$t1" rotating
echo "hcctld_cpu_percent_rotating $(cpu_pct $((c1 - c0)) $((t1 - t0)))"
echo "unreachable_nodes_rotating $(unreachable "$t0")"
on_new=0
for i in $(seq 0 $((n - 1))); do
    d=$(printf "%s/hollow/hollow-%04d" "$work" "$i")
    cmp -s "$d/ca.pem" "$work/c/ca.pem" &&
        openssl verify -partial_chain -CAfile "$work/c/ca.pem" "$d/agent.pem" >/dev/null 2>&1 &&
        on_new=$((on_new + 1))
done
echo "nodes_trusting_and_on_the_new_ca $on_new"
echo "unreachable_nodes_since_settled $(unreachable "$t_settled")"
echo "hcctld_rss_mb_end $(rss_mb "$ctl_pid")"
echo "hchollow_rss_mb_end $(rss_mb "$hollow_pid")"
