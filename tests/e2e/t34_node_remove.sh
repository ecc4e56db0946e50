#!/usr/bin/env bash
# node remove against real data: hcctld, three hcagents joined by hand on 127.0.0.41-43, each
# supervising the reference service hcstor (bundle 1.0, installed by a rolling upgrade; hcstor
# listens on IP:7480), and hcload writing through them.
# - bad usage: --force without --reason, --reason without --force (exit 2);
# - the availability budget: another node in maintenance, the removal is refused (exit 5) and
#   nothing changes;
# - ok-to-stop: with n2 draining, n1 holds the only in-sync serving copy of some blocks; the
#   removal is refused (exit 5) naming the block, as the service said it;
# - a safe removal under load: n3 goes, its service's data stays in DATA/kept/n3.OP (named by
#   the command, the operation and the event), and hcload reads every acknowledged write back;
# - --force --reason with --purge: the reason is recorded (events, operation show), the data
#   is deleted;
# - n3 joins again with the same data directory: it starts with no software and no service
#   data, and the kept copy stays where it was.
. "$(dirname "$0")/lib.sh"

need_bundles
ip() { echo "127.0.0.4$1"; }
svc() { echo "http://$(ip "$1"):7480"; }
NODES="$(ip 1):7480,$(ip 2):7480,$(ip 3):7480"
state() { curl -s --max-time 3 "$(svc "$1")/health" | jq -r .state; }
members() { curl -s --max-time 3 "$(svc "$1")/health" | jq -r .members; }
# Remembers every hcstor's pid so that the cleanup kills them whatever happens.
track_services() {
    local i pid
    for i in 1 2 3; do
        pid=$(curl -s --max-time 3 "$(svc "$i")/health" >/dev/null && pgrep -f "hcstor --listen $(ip "$i"):7480") &&
            for p in $pid; do echo "$p" >"$T/pids/hcstor-$p"; done
    done
    return 0
}
node_exists() { hcctl node list -o json | jq -e --arg n "$1" '[.nodes[].name] | index($n) != null'; }
last_op() { hcctl operation list -o json | jq -r '.operations[0].id'; }

test_expect_success 'three nodes run hcstor 1.0 with each other as peers' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" && agent_join n3 "$(ip 3)" &&
    wait_for 20 "[ \$(reachable_count) = 3 ]" &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl upgrade --rolling --to 1.0 --yes >up.out 2>&1 &&
    track_services &&
    wait_for 20 "[ \"\$(state 1)\$(state 2)\$(state 3)\" = servingservingserving ]" &&
    wait_for 20 "[ \"\$(members 1)\$(members 2)\$(members 3)\" = 333 ]" &&
    [ -d "$T/n3/service-data" ]
'

test_expect_success 'acknowledged data on every node (hcload, verified)' '
    hcload --nodes "$NODES" --duration 2 --workers 3 --keys 40 --prefix pre --json >pre.json \
        2>pre.err &&
    jq -e ".ok and .writes > 0 and .verify.lost == 0" pre.json &&
    for i in 1 2 3; do ls "$T/n$i/service-data/blocks" | grep -q "^pre-" || exit 1; done
'

test_expect_success 'bad usage: --force needs --reason, --reason needs --force (exit 2)' '
    expect_exit 2 hcctl node remove n1 --force --yes 2>err &&
    grep -q "force skips the availability budget and ok-to-stop: it needs --reason TEXT" err &&
    expect_exit 2 hcctl node remove n1 --reason "why not" --yes 2>err &&
    grep -q "reason goes with --force" err &&
    expect_exit 2 hcctl node remove n1 --force --reason "" --yes 2>err &&
    node_exists n1
'

test_expect_success 'over the availability budget (n2 in maintenance): refused, exit 5' '
    hcctl maintenance enter n2 --yes >/dev/null 2>&1 &&
    expect_exit 5 hcctl node remove n1 --yes 2>err && cat err &&
    grep -q "taking .n1. down would leave 2 node(s) down, more than max_unavailable 1" err &&
    grep -q "n2 (in maintenance)" err && grep -q "\-\-force --reason TEXT" err &&
    hcctl operation show "$(last_op)" -o json |
        jq -e ".operation.state == \"failed\" and .operation.error.code == \"unavailable_budget\"" &&
    node_exists n1 && [ "$(state 1)" = serving ] && [ -f "$T/n1/agent.pem" ] &&
    hcctl maintenance exit n2 >/dev/null 2>&1 &&
    wait_for 20 "[ \"\$(state 2)\" = serving ]"
'

test_expect_success 'n1 holds the only serving copy of some blocks (n2 draining): refused, naming the block' '
    curl -sf -X POST "$(svc 2)/drain" | jq -e ".drained" &&
    wait_for 5 "grep -q \"n2 is draining\" $T/n1/software/service.log" &&
    expect_exit 5 hcctl node remove n1 --yes 2>err && cat err &&
    grep -q "cannot take .n1. down: ok-to-stop refused: block .* has no other in-sync serving replica" err &&
    hcctl operation show "$(last_op)" -o json |
        jq -e ".operation.error.code == \"not_ok_to_stop\" and ([.steps[] | select(.step == \"leave\")] | length == 0)" &&
    node_exists n1 && [ "$(state 1)" = serving ] && [ -d "$T/n1/service-data/blocks" ] &&
    hcctl maintenance enter n2 --yes >/dev/null 2>&1 && hcctl maintenance exit n2 >/dev/null 2>&1 &&
    track_services &&
    wait_for 20 "[ \"\$(state 1)\$(state 2)\$(state 3)\" = servingservingserving ]"
'

test_expect_success 'a safe removal under load: n3 goes, its data stays, no acknowledged write is lost' '
    hcload --nodes "$NODES" --duration 0 --workers 3 --keys 40 --prefix load --json \
        --timeline tl.jsonl >load.json 2>load.err &
    echo $! >"$T/pids/load" &&
    wait_for 10 "grep -q \"\\\"ops\\\":[1-9]\" tl.jsonl" &&
    hcctl node remove n3 --yes >rm.out 2>rm.err && cat rm.err &&
    op=$(last_op) && kept="$T/n3/kept/n3.$op" &&
    grep -qF "the service'"'"'s data: kept on the node in $kept" rm.err &&
    hcctl operation show "$op" -o json >op.json &&
    jq -e --arg k "$kept" "[.steps[] | select(.step == \"service_data\") | .detail] == [\"kept on the node in \" + \$k]" op.json &&
    jq -e "[.steps[] | select(.step == \"ok_to_stop\") | .detail] == [\"ok-to-stop\"]" op.json &&
    jq -e "[.steps[] | select(.step == \"drain\") | .detail] == [\"drained\"]" op.json &&
    hcctl events --type node.removed -o json |
        jq -e --arg k "$kept" ".events[-1].details.service_data == \"kept on the node in \" + \$k and .events[-1].details.force == false" &&
    wait_for 10 "! alive $(pid_of n3)" &&
    [ -d "$kept/blocks" ] && ls "$kept/blocks" | grep -q "^pre-" &&
    [ ! -e "$T/n3/service-data" ] && [ ! -e "$T/n3/software" ] && [ ! -e "$T/n3/agent.key" ] &&
    ! curl -s --max-time 2 "$(svc 3)/health" &&
    wait_for 20 "[ \"\$(members 1)\$(members 2)\" = 22 ]" &&
    wait_for 20 "[ \"\$(state 1)\$(state 2)\" = servingserving ]" &&
    sleep 1 && kill -INT "$(pid_of load)" &&
    wait_for 60 "! alive $(pid_of load)" && cat load.json &&
    jq -e ".ok and .errors == 0 and .verify.ok and .verify.lost == 0 and .verify.checked == .verify.keys and .verify.keys > 0" load.json
'

test_expect_success 'forced with a reason and --purge: recorded, the data deleted' '
    hcctl node remove n2 --force --reason "e2e: decommissioned rack 7" --purge --yes >rm.out 2>rm.err &&
    cat rm.err && grep -q "the service.s data: deleted (--purge)" rm.err &&
    op=$(last_op) &&
    hcctl operation show "$op" -o json >op.json &&
    jq -e ".operation.params.force == true and .operation.params.reason == \"e2e: decommissioned rack 7\" and .operation.params.purge == true" op.json &&
    jq -e "[.steps[] | select(.step == \"budget\" or .step == \"ok_to_stop\") | .detail] == [\"skipped (--force): e2e: decommissioned rack 7\", \"skipped (--force): e2e: decommissioned rack 7\"]" op.json &&
    hcctl operation show "$op" | grep -q "e2e: decommissioned rack 7" &&
    hcctl events --type node.removed | grep -q "forced: e2e: decommissioned rack 7" &&
    wait_for 10 "! alive $(pid_of n2)" &&
    [ ! -e "$T/n2/service-data" ] && [ ! -e "$T/n2/kept" ] && [ ! -e "$T/n2/software" ] &&
    [ "$(state 1)" = serving ]
'

test_expect_success 'n3 joins again with the same data directory: no software, no data, the kept copy untouched' '
    before=$(ls "$T/n3/kept/"*/blocks | wc -l) &&
    agent_join n3 "$(ip 3)" &&
    wait_for 20 "[ \$(reachable_count) = 2 ]" && sleep 1 && track_services &&
    ! pgrep -f "hcstor --listen $(ip 3):7480" &&
    hcctl node show n3 -o json | jq -e ".node.software_version == null" &&
    [ ! -e "$T/n3/service-data" ] && [ ! -e "$T/n3/software/current" ] &&
    [ "$(ls "$T/n3/kept/"*/blocks | wc -l)" = "$before" ]
'

test_expect_success 'agents and controller stop cleanly, without sanitizer reports' '
    agent_kill n1 TERM && agent_kill n3 TERM && controller_stop TERM &&
    ! grep -n "Sanitizer\|runtime error" "$T"/*.log "$T"/n1/software/service.log
'

test_done
