#!/usr/bin/env bash
# Node add converges (issue 15 item 6): a running 3-node cluster on hcstor-1.3 under hcload; `hcctl
# node add` of a 4th node gives it 1.3 and the configuration revision (written before its first
# start: a restart setting applies at once) and makes it a storage member in the same operation: it is
# in every node's peers, resyncs what is placed on it, serves, and the copies the old nodes no
# longer own are dropped; hcload sees no failed operation, no stale read, no lost write. Then a 5th
# node, with hcctld SIGKILLed after the stage and before the peers: restarted, the add finishes.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

# hcstor of lab node N at the host its peers file names it by: what the controller sent and
# hcstor listens on (whichever network that is).
peers_of() { lab_exec "n$1" cat "$AGENT_DATA/service-data/peers.json"; }
svc_addr() { peers_of "$1" | jq -r --arg n "hcna-n$1" '.nodes[] | select(.name == $n) | .host + ":7480"'; }
svc() { echo "http://$(svc_addr "$1")"; }
members() { peers_of 1 | jq -r '[.nodes[].host + ":7480"] | join(",")'; }
# members_everywhere N COUNT: nodes 1..N each list COUNT members and serve.
members_everywhere() {
    local i
    for i in $(seq "$1"); do
        curl -s --max-time 3 "$(svc "$i")/health" |
            jq -e ".members == $2 and .state == \"serving\" and .version == \"1.3\"" || return 1
    done
}
sum_of() { # FIELD N: the sum of /resync's FIELD over nodes 1..N
    local i t=0
    for i in $(seq "$2"); do t=$((t + $(curl -s --max-time 3 "$(svc "$i")/resync" | jq ".$1"))); done
    echo $t
}

upgrade_lab_up nadd hcna 5 3

test_expect_success 'a 3-node cluster on hcstor-1.3' '
    hcctl software upload "$BUNDLES/hcstor-1.3.tar.gz" >/dev/null &&
    hcctl upgrade --rolling --to 1.3 --yes >/dev/null &&
    [ "$(versions)" = "1.3 1.3 1.3" ] && members_everywhere 3 3 &&
    hcctl config set log_level=debug fsync=batch --yes >cfg.out 2>&1 &&
    hcctl config show -o json | jq -e ".revision == 1"
'

# The controller counts and logs its durable steps from here (docs/operations.md "Crash points"):
# the last test learns from this add where its stage ends.
test_expect_success 'node add of a 4th node under hcload: 1.3, a storage member, resynced, serving' '
    controller_stop && HCCTLD_TEST_CRASH_AFTER_STEP=0 POLL=500ms controller_start &&
    load_start a1 "$(members)" && sleep 3 &&
    hcctl node add 198.18.0.14 --storage-interface eth1 --accept-new-host-keys >add.out 2>&1 ||
        { cat add.out; exit 1; }
    cat add.out &&
    grep -q "step .storage_version. succeeded .*: 1.3: the version every other node runs" add.out &&
    grep -q "hcna-n4: step .stage. succeeded" add.out &&
    grep -q "hcna-n4: step .settings. succeeded .*configuration revision 1 written for 1.3" add.out &&
    grep -q "hcna-n4: step .activate. succeeded .*1.3 active (was none)" add.out &&
    grep -q "step .storage_peers. succeeded .*4 members sent to every agent" add.out &&
    grep -q "hcna-n4: step .resync. succeeded .*: a storage member, in sync after" add.out &&
    [ "$(versions)" = "1.3 1.3 1.3 1.3" ] && members_everywhere 4 4 &&
    curl -s "$(svc 4)/resync" | jq -e ".pending == 0 and .fetched > 0 and .settled" &&
    wait_for 30 "[ \"\$(sum_of stale 4)\" = 0 ]" &&
    dropped=$(sum_of dropped 3) && held=$(curl -s "$(svc 4)/health" | jq .blocks) &&
    echo "stale copies dropped on the old nodes: $dropped; blocks on the new node: $held" &&
    [ "$dropped" -gt 0 ] && [ "$held" -gt 0 ] &&
    curl -s "$(svc 4)/health" | jq -e ".settings.log_level == \"debug\" and .store.fsync == \"batch\"" &&
    wait_for 10 "hcctl config status -o json | jq -e \".nodes[] | select(.name == \\\"hcna-n4\\\") | .state == \\\"in_sync\\\" and .applied_revision == 1\"" &&
    load_stop a1
'

test_expect_success 'the new node serves: a block placed on it reads from it, and hcload on all 4 is clean' '
    key=$(lab_exec n4 ls /var/lib/hcctl/agent/service-data/blocks | head -n 1) && [ -n "$key" ] &&
    curl -sf -o /dev/null -D hdr "$(svc 4)/blocks/$key" && grep -qi "^x-hcstor-version" hdr &&
    load_start a2 "$(members)" && sleep 5 && load_stop a2 &&
    load_start a3 "$(svc_addr 4)" && sleep 3 && load_stop a3
'

# The add runs in under two seconds: the controller is killed by its crash hook right after the
# durable step that records the new node's stage succeeded (its number learnt from the 4th
# node's add, which has the same steps), before activate, healthy and the peers.
test_expect_success 'hcctld SIGKILLed after the stage, before the peers: restarted, the add finishes' '
    add4=$(hcctl operation list -o json | jq -r "[.operations[] | select(.kind == \"node.add\")][0].id") &&
    n=$(grep -o "test hook: durable step [0-9]*: $add4 .*" "$T/hcctld.log" |
        sed "s/^test hook: durable step [0-9]*: [^ ]* //" | grep -n "^hcna-n4/stage succeeded$" | cut -d: -f1) &&
    echo "the 4th node stage succeeded at durable step $n of its add" && [ -n "$n" ] &&
    controller_stop && HCCTLD_TEST_CRASH_AFTER_STEP=$n POLL=500ms controller_start &&
    load_start a4 "$(members)" && sleep 2 &&
    hcctl node add 198.18.0.15 --storage-interface eth1 --accept-new-host-keys --no-wait >id.out &&
    id=$(tail -n 1 id.out) && pid=$(pid_of hcctld) &&
    wait_for 120 "! alive $pid" &&
    grep "test hook: durable step $n: $id hcna-n5/stage succeeded" "$T/hcctld.log" &&
    grep -q "test hook: killing hcctld after durable step $n" "$T/hcctld.log" &&
    rm -f "$T/pids/hcctld" && POLL=500ms controller_start &&
    hcctl operation wait "$id" --timeout 5m &&
    hcctl operation show "$id" -o json >op.json &&
    jq -e "[.steps[] | select(.node == \"hcna-n5\" and .step == \"stage\")][0].attempts == 1" op.json &&
    jq -e "[.steps[] | select(.node == \"hcna-n5\" and .step == \"resync\")][0].state == \"succeeded\"" op.json &&
    hcctl events --type op.resumed -o json | jq -e --arg id "$id" "[.events[] | select(.op_id == \$id)] | length == 1" &&
    [ "$(versions)" = "1.3 1.3 1.3 1.3 1.3" ] && members_everywhere 5 5 &&
    wait_for 30 "[ \"\$(sum_of stale 5)\" = 0 ]" &&
    load_stop a4
'

test_done
