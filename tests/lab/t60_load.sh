#!/usr/bin/env bash
# Non-disruptive upgrades, proven by a workload: hcload writes and reads blocks on the replicated
# hcstor of a namespace lab during rolling upgrades of 3 and then 5 nodes, through a controller
# SIGKILL, through a node whose processes are all SIGKILLed, and beside a refused maintenance.
# Every run must end with zero failed operations, zero lost, stale or corrupt reads.
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (network namespaces, sshd)"; exit 0; fi
. "$(dirname "$0")/../e2e/lib.sh"
. "$HC_SRC/tests/lab/lab.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"
lab_trap_teardown 'e2e_cleanup'
# node_kill N: SIGKILL of every process of node N (agent, its supervisor, hcstor) but the
# lab's own (the namespace holder and sshd): the node's software dies, the "machine" stays.
node_kill() {
    local keep p
    keep=$(lab_info --json | jq -r ".nodes[] | select(.name == \"n$1\") | \"\(.pid) \(.sshd_pid)\"")
    for p in $(ip netns pids "hcw-n$1"); do
        case " $keep " in *" $p "*) ;; *) kill -KILL "$p" ;; esac
    done
}
node_start_agent() {
    lab_exec "n$1" /opt/hcctl/agent/current/hcagent join --config /etc/hcctl/agent/join.json \
        --daemon --pidfile /run/hcctl/hcagent.pid --log-file /var/lib/hcctl/agent.log
}
hcstor_pid() { lab_exec "n$1" cat /var/lib/hcctl/agent/software/service.pid | jq -r .pid; }

upgrade_lab_up load hcw 5 3

test_expect_success 'install 1.0 on 3 nodes; every member knows its 2 peers, on the storage network' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    hcctl software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
    hcctl upgrade --rolling --to 1.0 --yes >/dev/null &&
    for i in 1 2 3; do
        curl -s "$(stor_url $i /health)" | jq -e ".members == 3 and .replication == 2 and .state == \"serving\"" || exit 1
        ! curl -s --max-time 2 "http://198.18.0.1$i:7480/health" || exit 1
    done &&
    lab_exec n1 cat "$AGENT_DATA/service-data/peers.json" |
        jq -e "[.nodes[].host] | sort == [\"198.18.1.11\", \"198.18.1.12\", \"198.18.1.13\"]"
'

test_expect_success '3 nodes: rolling upgrade 1.0 -> 1.1 under load, nothing failed or lost' '
    load_start u1 && sleep 2 &&
    hcctl upgrade --rolling --to 1.1 --yes >/dev/null &&
    sleep 2 && load_stop u1 &&
    [ "$(versions)" = "1.1 1.1 1.1" ] && [ "$(max_down_from_events)" = 1 ]
'

test_expect_success '3 nodes: hcctld SIGKILLed mid-upgrade and restarted; the load never noticed' '
    load_start u2 &&
    hcctl upgrade --rolling --to 1.0 --yes --no-wait >/dev/null && id=$(up_id) &&
    wait_for 60 "hcctl operation show $id -o json | jq -e \".steps | map(select(.step == \\\"activate\\\")) | length > 0\"" &&
    controller_stop KILL && POLL=500ms controller_start &&
    hcctl operation wait "$id" --timeout 3m >/dev/null &&
    load_stop u2 &&
    [ "$(versions)" = "1.0 1.0 1.0" ] && [ "$(max_down_from_events)" = 1 ]
'

test_expect_success 'a node SIGKILLed mid-upgrade: the upgrade pauses, resumes when it is back, no data lost' '
    load_start u3 &&
    hcctl upgrade --rolling --to 1.1 --yes --no-wait >/dev/null && id=$(up_id) &&
    wait_for 60 "hcctl operation show $id -o json | jq -e \".steps | map(select(.node == \\\"hcw-n2\\\")) | length > 0\"" &&
    node_kill 3 &&
    wait_for 60 "[ \$(up_state) = paused ]" &&
    hcctl upgrade status -o json | jq -e ".waiting_on | test(\"hcw-n3\")" &&
    node_start_agent 3 &&
    hcctl operation wait "$id" --timeout 3m >/dev/null &&
    load_stop u3 &&
    [ "$(versions)" = "1.1 1.1 1.1" ]
'

test_expect_success 'maintenance enter on the only in-sync replica of some blocks is refused with the reason' '
    load_start m1 && sleep 1 &&
    p=$(hcstor_pid 1) && kill -STOP "$p" &&
    wait_for 10 "curl -s $(stor_url 2 /ok-to-stop) | jq -e \".ok_to_stop == false\"" &&
    hcctl maintenance enter hcw-n2 --yes 2>err; rc=$?
    kill -CONT "$p"; cat err; [ "$rc" = 5 ] &&
    grep -Eq "has no other in-sync serving replica \(hcw-n1 is (down|not answering)" err &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")" &&
    wait_for 20 "curl -s $(stor_url 1 /health) | jq -e \".state == \\\"serving\\\"\"" &&
    load_stop m1
'

test_expect_success 'node add makes 5 members; 5 nodes: rolling upgrade 1.1 -> 1.0 under load' '
    hcctl node add 198.18.0.14 198.18.0.15 --storage-interface eth1 --accept-new-host-keys >/dev/null &&
    hcctl upgrade --rolling --to 1.1 --yes >/dev/null &&
    wait_for 20 "for i in 1 2 3 4 5; do curl -s \$(stor_url \$i /health) | jq -e \".members == 5 and .state == \\\"serving\\\"\" || exit 1; done" &&
    load_start u5 && sleep 2 &&
    hcctl upgrade --rolling --to 1.0 --yes >/dev/null &&
    sleep 2 && load_stop u5 &&
    [ "$(versions)" = "1.0 1.0 1.0 1.0 1.0" ]
'

test_done
