#!/usr/bin/env bash
# Node add converges (issue 15 item 6): a running 3-node cluster on hcstor-1.3 under hcload; `hcctl
# node add` of a 4th node gives it 1.3 and makes it a storage member in the same operation: it is
# in every node's peers, resyncs what is placed on it, serves, and the copies the old nodes no
# longer own are dropped; hcload sees no failed operation, no stale read, no lost write. Then a 5th
# node, with hcctld SIGKILLed after the stage and before the peers: restarted, the add finishes.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

svc() { echo "http://198.18.0.1$1:7480"; }
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
step_of() { # OP NODE STEP: that step's record
    hcctl operation show "$1" -o json | jq -c --arg n "$2" --arg s "$3" \
        '[.steps[] | select((.node // "") == $n and .step == $s)][0]'
}

upgrade_lab_up nadd hcna 5 3

test_expect_success 'a 3-node cluster on hcstor-1.3' '
    hcctl software upload "$BUNDLES/hcstor-1.3.tar.gz" >/dev/null &&
    hcctl upgrade --rolling --to 1.3 --yes >/dev/null &&
    [ "$(versions)" = "1.3 1.3 1.3" ] && members_everywhere 3 3
'

test_expect_success 'node add of a 4th node under hcload: 1.3, a storage member, resynced, serving' '
    load_start a1 && sleep 3 &&
    hcctl node add 198.18.0.14 --storage-interface eth1 --accept-new-host-keys >add.out 2>&1 ||
        { cat add.out; exit 1; }
    cat add.out &&
    grep -q "step .storage_version. succeeded .*: 1.3: the version every other node runs" add.out &&
    grep -q "hcna-n4: step .stage. succeeded" add.out &&
    grep -q "hcna-n4: step .activate. succeeded .*1.3 active (was none)" add.out &&
    grep -q "step .storage_peers. succeeded .*4 members sent to every agent" add.out &&
    grep -q "hcna-n4: step .resync. succeeded .*a storage member" add.out &&
    [ "$(versions)" = "1.3 1.3 1.3 1.3" ] && members_everywhere 4 4 &&
    curl -s "$(svc 4)/resync" | jq -e ".pending == 0 and .fetched > 0 and .settled" &&
    wait_for 30 "[ \"\$(sum_of stale 4)\" = 0 ]" &&
    dropped=$(sum_of dropped 3) && held=$(curl -s "$(svc 4)/health" | jq .blocks) &&
    echo "stale copies dropped on the old nodes: $dropped; blocks on the new node: $held" &&
    [ "$dropped" -gt 0 ] && [ "$held" -gt 0 ] &&
    load_stop a1
'

test_expect_success 'the new node serves: a block placed on it reads from it, and hcload on all 4 is clean' '
    key=$(lab_exec n4 ls /var/lib/hcctl/agent/service-data/blocks | head -n 1) && [ -n "$key" ] &&
    curl -sf -o /dev/null -D hdr "$(svc 4)/blocks/$key" && grep -qi "^x-hcstor-version" hdr &&
    load_start a2 && sleep 5 && load_stop a2 &&
    load_start a3 "198.18.0.14:7480" && sleep 3 && load_stop a3
'

test_expect_success 'hcctld SIGKILLed after the stage, before the peers: restarted, the add finishes' '
    load_start a4 && sleep 2 &&
    hcctl node add 198.18.0.15 --storage-interface eth1 --accept-new-host-keys --no-wait >id.out &&
    id=$(tail -n 1 id.out) &&
    wait_for 120 "step_of $id hcna-n5 stage | jq -e \".state == \\\"succeeded\\\"\"" &&
    step_of "$id" "" storage_peers | jq -e ". == null" &&
    controller_stop KILL && echo "killed hcctld after: $(step_of "$id" hcna-n5 stage)" &&
    POLL=500ms controller_start &&
    hcctl operation wait "$id" --timeout 5m &&
    hcctl operation show "$id" -o json >op.json &&
    jq -e "[.steps[] | select(.node == \"hcna-n5\" and .step == \"stage\")][0].attempts == 1" op.json &&
    jq -e "[.steps[] | select(.node == \"hcna-n5\" and .step == \"resync\")][0].state == \"succeeded\"" op.json &&
    hcctl events --type op.resumed -o json | jq -e --arg id "$id" "[.events[] | select(.op_id == \$id)] | length >= 1" &&
    [ "$(versions)" = "1.3 1.3 1.3 1.3 1.3" ] && members_everywhere 5 5 &&
    wait_for 30 "[ \"\$(sum_of stale 5)\" = 0 ]" &&
    load_stop a4
'

test_done
