#!/usr/bin/env bash
# Configuration changes on a 3-node namespace lab (issue 15, docs/config.md), hcstor 1.3 serving
# on the storage network: a live change reaches every node with the services' pids unchanged; a
# restart change under hcload restarts them one at a time (the agents' own service histories: at
# most one down at any instant) with 0 failed operations and 0 lost writes; a 5-minute-old
# revision is what a node that was down (its agent stopped) gets as soon as it is back.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

upgrade_lab_up cfg hcc 3 3

# The hcstor pid of each node (one PID namespace: told apart by their listen address).
pids() {
    local i
    for i in 1 2 3; do pgrep -f "hcstor --listen 198.18.1.$((10 + i)):7480" | head -1; done | tr '\n' ' '
}
setting() { curl -s --max-time 3 "$(stor_url "$1" /settings)" | jq -r ".settings.$2"; }
in_sync_at() {
    hcctl config status -o json | jq -e --argjson r "$1" \
        '[.nodes[] | select(.state == "in_sync" and .applied_revision == $r)] | length == 3'
}

test_expect_success 'hcstor 1.3 on every node, at revision 0' '
    hcctl -q software upload "$BUNDLES/hcstor-1.3.tar.gz" &&
    hcctl upgrade --rolling --to 1.3 --yes >up.out 2>&1 &&
    wait_for 20 "in_sync_at 0"
'

test_expect_success 'a live change: every node runs it, no service restarted' '
    before=$(pids) &&
    hcctl config set log_level=debug resync_parallelism=16 --yes >live.out 2>&1 &&
    for i in 1 2 3; do
        [ "$(setting $i log_level)" = debug ] && [ "$(setting $i resync_parallelism)" = 16 ] || exit 1
    done &&
    [ "$(pids)" = "$before" ] && wait_for 10 "in_sync_at 1"
'

test_expect_success 'a restart change under hcload: one node at a time, 0 failed, 0 lost' '
    hcload --nodes "$(svc_nodes)" --workers 4 --duration 0 --json --quiet --prefix cfg \
        >load.json 2>load.err &
    echo $! >"$T/pids/load"
    sleep 2 && t0=$(now_ms) && hcctl config set fsync=batch --yes >restart.out 2>&1 &&
        t1=$(now_ms) && sleep 1
    rc=$?
    kill -INT "$(pid_of load)"; wait "$(pid_of load)"; rm -f "$T/pids/load"
    [ "$rc" = 0 ] && cat load.json && jq -e ".errors == 0 and .verify.lost == 0 and .corrupt_reads == 0 and .writes > 0" load.json &&
    for i in 1 2 3; do curl -s "$(stor_url $i /health)" | jq -e ".store.fsync == \"batch\"" || exit 1; done &&
    down=$(max_down_from_histories "$t0" "$t1") && echo "most services down at once: $down" &&
    [ "$down" = 1 ] && wait_for 10 "in_sync_at 2"
'

test_expect_success 'a node whose agent was away gets the revision when it is back (live repair)' '
    sup=$(lab_exec n3 cat /run/hcctl/hcagent.pid) && kill -STOP "$sup" $(pgrep -P "$sup") &&
    hcctl config set log_level=warn --skip-checks=node_unreachable >away.out 2>&1 &&
    [ "$(setting 1 log_level)" = warn ] && [ "$(setting 3 log_level)" = debug ] &&
    kill -CONT "$sup" $(pgrep -P "$sup") &&
    wait_for 30 "[ \"\$(setting 3 log_level)\" = warn ]" && wait_for 10 "in_sync_at 3" &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"config.repaired\")] | length >= 1"
'

# agent_url I: the agent of the cluster's I-th node (by name: lab node nI)
agent_url() { hcctl node list -o json | jq -r --argjson i "$1" '.nodes | sort_by(.name)[$i - 1].agent_url'; }
svc_json() { # I: the agent's GET /v1/software (the service, its limits and their usage)
    svc_at "$(agent_url "$1")"
}
svc_at() { # URL: GET URL/v1/software
    curl -sS --max-time 10 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" \
        --key "$CTL_DIR/client.key" "$1/v1/software"
}
# counter_rate I FIELD SECONDS DIVISOR: how fast the agent's counter FIELD (a jq path into GET
# /v1/software) grows over about SECONDS, per second and divided by DIVISOR. The rate is over the
# time really measured between the two readings (each taken just before its request): dividing
# by SECONDS counted the second reading's own lookups (an hcctl call, up to half a second on a
# loaded machine) as part of the interval, a 20% bound then measured 24%.
counter_rate() {
    local url a b ta tb
    url=$(agent_url "$1") || return 1
    ta=$(date +%s%N) && a=$(svc_at "$url" | jq "$2") && sleep "$3" &&
        tb=$(date +%s%N) && b=$(svc_at "$url" | jq "$2") &&
        awk -v a="$a" -v b="$b" -v ns="$((tb - ta))" -v d="$4" 'BEGIN {printf "%.1f", (b - a) / (ns / 1e9 * d)}'
}
# cpu_pct I SECONDS: the service's CPU in percent, from its cgroup's own accounting (cpuacct).
cpu_pct() { counter_rate "$1" .service.limits.usage.cpu_usec "$2" 10000; }
# net_mbit I SECONDS: what the service sent through its egress bound, in Mbit/s.
net_mbit() { counter_rate "$1" .service.limits.net.sent_bytes "$2" 125000; }

# The agent's cgroup must be its own to make the service's cgroups in: the packaged unit has
# Delegate=cpu memory (packaging/systemd/hcagent.service.in); here the lab's agents run in this
# machine's root cgroups (mode 555: root without CAP_DAC_OVERRIDE, as the agent is, cannot
# mkdir there), so node 1's agent is given cgroups of its own, as systemd would.
CG_HIER="cpu cpuacct memory"
delegate_n1() {
    local h sup
    sup=$(lab_exec n1 cat /run/hcctl/hcagent.pid) || return 1
    for h in $CG_HIER; do
        mkdir -p "/sys/fs/cgroup/$h/hcctl-t62" &&
            for p in $sup $(pgrep -P "$sup"); do echo "$p" >"/sys/fs/cgroup/$h/hcctl-t62/cgroup.procs" || return 1; done
    done
}
undelegate_n1() {
    local h d p
    for h in $CG_HIER; do
        for d in /sys/fs/cgroup/$h/hcctl-t62/*/ /sys/fs/cgroup/$h/hcctl-t62/; do
            [ -d "$d" ] || continue
            for p in $(cat "$d/cgroup.procs" 2>/dev/null); do echo "$p" >"/sys/fs/cgroup/$h/cgroup.procs"; done
        done
        rmdir /sys/fs/cgroup/$h/hcctl-t62/*/ /sys/fs/cgroup/$h/hcctl-t62 2>/dev/null
    done
    return 0
}

test_expect_success 'a CPU bound set live on cgroup v1 holds the service to it, measured by cpuacct' '
    pid=$(pids) && delegate_n1 || exit 1
    hcload --nodes "$(svc_nodes)" --workers 12 --block-size 1048576 --keys 40 --duration 0 \
        --json --quiet --prefix cpu >cpu.json 2>cpu.err &
    echo $! >"$T/pids/cpu"
    (
        hcctl config set limits.cpu_percent=20 >cpu.out 2>&1 && sleep 1 &&
        svc_json 1 | jq -c .service.limits &&
        svc_json 1 | jq -e ".service.limits.applied == true and .service.limits.cpu_percent == 20" &&
        used=$(cpu_pct 1 4) && echo "n1 service CPU under a 20% bound: $used%" &&
        awk -v u="$used" "BEGIN {exit !(u > 1 && u <= 23)}" &&
        hcctl config set limits.cpu_percent=0 >/dev/null 2>&1 && sleep 1 &&
        free=$(cpu_pct 1 4) && echo "n1 service CPU unbounded: $free%"
    )
    rc=$?
    kill -INT "$(pid_of cpu)"; wait "$(pid_of cpu)"; rm -f "$T/pids/cpu"
    undelegate_n1
    [ "$rc" = 0 ] && jq -e ".errors == 0 and .verify.lost == 0" cpu.json && [ "$(pids)" = "$pid" ] &&
    wait_for 10 "hcctl config status -o json | jq -e \"all(.nodes[]; .state == \\\"in_sync\\\")\""
'

test_expect_success 'a network bound set live holds the service storage egress to it' '
    hcload --nodes "$(svc_nodes)" --workers 8 --block-size 1048576 --keys 40 --duration 0 \
        --json --quiet --prefix net >net.json 2>net.err &
    echo $! >"$T/pids/net"
    (
        free=$(net_mbit 1 3 2>/dev/null) ; echo "n1 service egress before the bound: ${free:-?} Mbit/s (no class yet)"
        hcctl config set limits.net_mbit=50 >net.out 2>&1 && sleep 1 &&
        svc_json 1 | jq -c .service.limits.net &&
        svc_json 1 | jq -e ".service.limits.net.applied == true and .service.limits.net.mbit == 50" &&
        sent=$(net_mbit 1 4) && echo "n1 service egress under a 50 Mbit/s bound: $sent Mbit/s" &&
        awk -v s="$sent" "BEGIN {exit !(s > 5 && s <= 55)}" &&
        hcctl config set limits.net_mbit=0 >/dev/null 2>&1
    )
    rc=$?
    kill -INT "$(pid_of net)"; wait "$(pid_of net)"; rm -f "$T/pids/net"
    [ "$rc" = 0 ] && jq -e ".verify.lost == 0 and .corrupt_reads == 0" net.json
'

test_done
