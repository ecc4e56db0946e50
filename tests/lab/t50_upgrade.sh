#!/usr/bin/env bash
# Rolling upgrades and maintenance on a 3-node namespace lab with the reference service hcstor:
# install, 1.0 -> 1.1, dry run, bad bundles, automatic rollback, pause/resume, abort, SIGKILL of
# hcctld at every step, an agent killed mid-upgrade, an ok-to-stop refusal waited on, and the
# availability budget. The invariant (never more than max_unavailable down) is checked twice:
# from the controller's event log and from the agents' own service histories.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

# check_down_window T0 T1 MAX: the agents' histories show at most MAX services down at any instant
# of [T0, T1], and at least one (the window really took a node down).
check_down_window() {
    local h
    h=$(max_down_from_histories "$1" "$2") || return 1
    echo "most services down at once between $1 and $2 (agents' histories): $h"
    [ "$h" -ge 1 ] && [ "$h" -le "$3" ]
}

agent_url() { hcctl node show "$1" -o json | jq -r .node.agent_url; }
# agent_api NODE METHOD PATH: the agent's API with the controller's client certificate.
agent_api() { agent_call "$(agent_url "$1")" "$2" "$3"; }

upgrade_lab_up up hcu 3 3

test_expect_success 'bundles are uploaded after verification; bad ones are refused untouched' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl software upload "$BUNDLES/hcstor-1.1.tar.gz" &&
    hcctl software upload "$BUNDLES/hcstor-1.2-broken.tar.gz" &&
    cp "$BUNDLES/hcstor-1.1.tar.gz" bad.tar.gz && cp "$BUNDLES/hcstor-1.0.tar.gz.sig" bad.tar.gz.sig &&
    ! hcctl software upload bad.tar.gz 2>err && grep -qi "signature" err &&
    head -c 1000 "$BUNDLES/hcstor-1.1.tar.gz" >corrupt.tar.gz && cp "$BUNDLES/hcstor-1.1.tar.gz.sig" corrupt.tar.gz.sig &&
    ! hcctl software upload corrupt.tar.gz 2>err &&
    [ "$(hcctl software list -o json | jq "[.bundles[]] | length")" = 3 ]
'

test_expect_success 'first install: rolling upgrade from nothing to 1.0' '
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.0 --yes && t1=$(now_ms) &&
    [ "$(versions)" = "1.0 1.0 1.0" ] &&
    hcctl upgrade status -o json | jq -e ".state == \"succeeded\" and .done == 3 and .total == 3" &&
    check_down_window "$t0" "$t1" 1
'

test_expect_success 'each agent records its service history: file and GET /v1/service/history' '
    for i in 1 2 3; do
        lab_exec n$i cat "$AGENT_DATA/software/service-history.jsonl" >h$i.jsonl &&
        jq -se "map(.event) | index(\"started\") != null and index(\"running\") != null" h$i.jsonl &&
        jq -se "all(.[]; (.ts_ms | type) == \"number\" and .version == \"1.0\" and (.pid | type) == \"number\" and .node == \"hcu-n$i\")" h$i.jsonl &&
        agent_api hcu-n$i GET /v1/service/history >api$i.json &&
        jq -e ".node == \"hcu-n$i\"" api$i.json &&
        [ "$(jq ".events | length" api$i.json)" = "$(wc -l <h$i.jsonl)" ] || exit 1
    done &&
    last=$(jq -s ".[-1].ts_ms" h1.jsonl) &&
    agent_api hcu-n1 GET "/v1/service/history?since=$last" |
        jq -e --argjson last "$last" ".events | length >= 1 and all(.[]; .ts_ms >= \$last)" &&
    agent_api hcu-n1 GET "/v1/service/history?since=x" | jq -e ".error.code == \"invalid_argument\""
'

# status_of PID KEY: one line of /proc/PID/status (the lab's /proc is the host's), tabs as spaces.
status_of() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
test_expect_success 'nodes from cluster create: hcstor runs as the service user, the agent bounded' '
    for i in 1 2 3; do
        pid=$(lab_exec n$i cat "$AGENT_DATA/software/service.pid" | jq -r .pid) &&
        sup=$(lab_exec n$i cat /run/hcctl/hcagent.pid) &&
        agent=$(ps -o pid= --ppid "$sup" | tr -d " " | head -n 1) &&
        echo "n$i: hcstor $pid Uid $(status_of $pid Uid) CapEff $(status_of $pid CapEff); agent $agent CapBnd $(status_of $agent CapBnd)" &&
        [ "$(status_of $pid Uid)" = "60600 60600 60600 60600" ] &&
        [ "$(status_of $pid Gid)" = "60600 60600 60600 60600" ] &&
        [ "$(status_of $pid CapEff)" = 0000000000000000 ] &&
        [ "$(status_of $pid NoNewPrivs)" = 1 ] &&
        [ "$(lab_exec n$i stat -c "%u %a" "$AGENT_DATA/service-data")" = "60600 700" ] &&
        for p in $sup $agent; do
            [ "$(status_of $p CapBnd)" = 00000000000010e1 ] && [ "$(status_of $p NoNewPrivs)" = 1 ] || exit 1
        done || exit 1
    done
'

test_expect_success 'dry run prints the ordered steps and changes nothing' '
    ops=$(hcctl operation list -o json | jq ".operations | length") &&
    hcctl upgrade --rolling --to 1.1 --dry-run -o json >plan.json &&
    jq -e ".plan.nodes | length == 3" plan.json &&
    jq -e ".plan.nodes[0].steps | index(\"activate\")" plan.json &&
    [ "$(hcctl operation list -o json | jq ".operations | length")" = "$ops" ] &&
    [ "$(versions)" = "1.0 1.0 1.0" ]
'

test_expect_success 'rolling upgrade 1.0 -> 1.1, one node at a time' '
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.1 --yes && t1=$(now_ms) &&
    [ "$(versions)" = "1.1 1.1 1.1" ] && check_down_window "$t0" "$t1" 1 &&
    hcctl upgrade status -o json >st.json &&
    jq -e "[.nodes[].from_version] == [\"1.0\",\"1.0\",\"1.0\"] and [.nodes[].state] == [\"done\",\"done\",\"done\"]" st.json &&
    [ "$(max_down_from_events)" = 1 ] &&
    hcctl events --type software.activated -o json | jq -e "[.events[] | select(.details.to == \"1.1\")] | length == 3"
'

test_expect_success 'a second disruptive operation is refused with exit 5 while one runs' '
    hcctl upgrade --rolling --to 1.0 --yes --no-wait >/dev/null &&
    hcctl maintenance enter hcu-n3 --yes 2>err; rc=$?
    [ $rc = 5 ] && grep -q "op-" err &&
    hcctl operation wait "$(hcctl upgrade status -o json | jq -r .operation_id)" &&
    [ "$(versions)" = "1.0 1.0 1.0" ]
'

test_expect_success 'a version whose health fails is rolled back on the first node; the others are untouched' '
    t0=$(now_ms)
    hcctl upgrade --rolling --to 1.2-broken --yes --node-timeout 6s 2>err; rc=$?
    t1=$(now_ms)
    cat err; [ $rc = 1 ] && grep -q "rolled back" err && check_down_window "$t0" "$t1" 1 &&
    echo "versions: $(versions)" && [ "$(versions)" = "1.0 1.0 1.0" ] &&
    hcctl upgrade status -o json >st.json && cat st.json && jq -e ".state == \"failed\" and .nodes[0].state == \"rolled_back\" and .nodes[1].state == \"pending\"" st.json &&
    hcctl events --type software.rolled_back -o json | jq -e ".events | length == 1" &&
    [ "$(reachable_count)" = 3 ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

test_expect_success 'pause and resume' '
    t0=$(now_ms) &&
    hcctl upgrade --rolling --to 1.1 --yes --no-wait >/dev/null &&
    hcctl upgrade pause &&
    wait_for 30 "[ \$(up_state) = paused ]" &&
    done1=$(hcctl upgrade status -o json | jq .done) && sleep 2 &&
    [ "$(hcctl upgrade status -o json | jq .done)" = "$done1" ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")" &&
    hcctl node remove hcu-n3 --yes 2>err; rc=$?
    cat err; [ $rc = 5 ] && grep -q "op-" err && [ "$(reachable_count)" = 3 ] &&
    hcctl upgrade resume &&
    hcctl operation wait "$(hcctl upgrade status -o json | jq -r .operation_id)" &&
    [ "$(versions)" = "1.1 1.1 1.1" ] && check_down_window "$t0" "$(now_ms)" 1
'

test_expect_success 'abort half-way leaves every node on a working version' '
    sup=$(lab_exec n3 cat /run/hcctl/hcagent.pid) && t0=$(now_ms) &&
    hcctl upgrade --rolling --to 1.0 --yes --no-wait >/dev/null &&
    id=$(hcctl upgrade status -o json | jq -r .operation_id) &&
    wait_for 60 "hcctl upgrade status -o json | jq -e \".done >= 1\"" &&
    kill -STOP "$sup" $(pgrep -P "$sup") &&
    hcctl upgrade abort --yes &&
    wait_for 90 "[ \$(up_state) = aborted ]" &&
    kill -CONT "$sup" $(pgrep -P "$sup") &&
    wait_for 20 "[ \$(reachable_count) = 3 ]" &&
    hcctl upgrade status -o json | jq -e ".done >= 1 and .done < 3" &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")" &&
    for n in 1 2 3; do
        v=$(hcctl node show hcu-n$n -o json | jq -r .node.software_version) &&
        { [ "$v" = 1.0 ] || [ "$v" = 1.1 ]; } || exit 1
    done &&
    wait_for 10 "hcctl node list -o json | jq -e \"all(.nodes[]; .service_state == \\\"running\\\")\"" &&
    check_down_window "$t0" "$(now_ms)" 1
'

# SIGKILL of hcctld at each step in turn: one upgrade per group of steps, alternating versions.
kill_at_steps() { # TO STEP...
    local to=$1 id step
    shift
    hcctl upgrade --rolling --to "$to" --yes --no-wait >/dev/null || return 1
    id=$(hcctl upgrade status -o json | jq -r .operation_id)
    for step in "$@"; do
        wait_for 60 "hcctl operation show $id -o json | jq -e \".steps | map(select(.step == \\\"$step\\\")) | length > 0\"" || return 1
        echo "killing hcctld at step $step"
        controller_stop KILL && POLL=500ms controller_start || return 1
    done
    hcctl operation wait "$id" --timeout 5m
}

test_expect_success 'hcctld killed with SIGKILL at each step in turn completes the upgrade, invariant held' '
    hcctl upgrade --rolling --to 1.1 --yes >/dev/null && [ "$(versions)" = "1.1 1.1 1.1" ] &&
    t0=$(now_ms) &&
    kill_at_steps 1.0 stage ok_to_stop drain stop activate &&
    [ "$(versions)" = "1.0 1.0 1.0" ] &&
    kill_at_steps 1.1 verify_health start healthy resync &&
    [ "$(versions)" = "1.1 1.1 1.1" ] &&
    [ "$(max_down_from_events)" = 1 ] && check_down_window "$t0" "$(now_ms)" 1
'

test_expect_success 'an agent killed mid-upgrade pauses the upgrade with a reason; it resumes when back' '
    t0=$(now_ms) &&
    hcctl upgrade --rolling --to 1.0 --yes --no-wait >/dev/null &&
    id=$(hcctl upgrade status -o json | jq -r .operation_id) &&
    wait_for 60 "hcctl operation show $id -o json | jq -e \".steps | map(select(.node == \\\"hcu-n2\\\")) | length > 0\"" &&
    sup=$(lab_exec n2 cat /run/hcctl/hcagent.pid) && kill -STOP "$sup" $(pgrep -P "$sup") &&
    wait_for 60 "[ \$(up_state) = paused ]" &&
    hcctl upgrade status -o json | jq -e ".waiting_on | test(\"hcu-n2\")" &&
    hcctl maintenance status -o json | jq -e "[.nodes[] | select(.maintenance != \"none\")] | length <= 1" &&
    kill -CONT "$sup" $(pgrep -P "$sup") &&
    hcctl operation wait "$id" --timeout 3m &&
    [ "$(versions)" = "1.0 1.0 1.0" ] && [ "$(max_down_from_events)" = 1 ] &&
    check_down_window "$t0" "$(now_ms)" 1
'

# The service refuses ok-to-stop while DIR/service-data/pinned exists (its first line the reason).
pin() { lab_exec "$1" sh -c "echo \"$2\" >$AGENT_DATA/service-data/pinned"; }
unpin() { lab_exec "$1" rm -f "$AGENT_DATA/service-data/pinned"; }

test_expect_success 'an upgrade waits while the service refuses ok-to-stop, showing its reason, then goes on' '
    t0=$(now_ms) && pin n2 "peer hcu-n1 still resyncing" &&
    hcctl upgrade --rolling --to 1.1 --yes --no-wait >/dev/null &&
    id=$(hcctl upgrade status -o json | jq -r .operation_id) &&
    wait_for 60 "hcctl upgrade status -o json | jq -e \".waiting_on // \\\"\\\" | test(\\\"ok-to-stop.*hcu-n2.*peer hcu-n1 still resyncing\\\")\"" &&
    hcctl upgrade status -o json >st.json && cat st.json &&
    jq -e ".state == \"running\" and .nodes[0].state == \"done\" and .nodes[1].state != \"done\"" st.json &&
    hcctl node show hcu-n2 -o json | jq -e ".node.maintenance == \"none\" and .node.software_version == \"1.0\"" &&
    sleep 2 && [ "$(up_state)" = running ] &&
    unpin n2 &&
    hcctl operation wait "$id" --timeout 3m &&
    [ "$(versions)" = "1.1 1.1 1.1" ] &&
    hcctl operation show "$id" -o json | jq -e "[.steps[] | select(.node == \"hcu-n2\" and .step == \"ok_to_stop\")][0].detail | test(\"after\")" &&
    check_down_window "$t0" "$(now_ms)" 1
'

test_expect_success 'an ok-to-stop refusal that outlasts --node-timeout fails the upgrade (exit 5), nothing down' '
    pin n1 "only copy of b7" &&
    hcctl upgrade --rolling --to 1.0 --yes --node-timeout 3s 2>err; rc=$?
    unpin n1; cat err
    [ $rc = 5 ] && grep -q "only copy of b7" err && grep -q "still refused" err &&
    [ "$(versions)" = "1.1 1.1 1.1" ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

test_expect_success 'maintenance enter is refused at once (exit 5) with the reason when ok-to-stop is false' '
    pin n2 "only copy of b9" &&
    t0=$(date +%s) && hcctl maintenance enter hcu-n2 --yes 2>err; rc=$?
    t1=$(date +%s); unpin n2; cat err
    [ $rc = 5 ] && grep -q "only copy of b9" err && [ $((t1 - t0)) -lt 10 ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

test_expect_success 'maintenance enter and exit; refused (exit 5) while another node is down' '
    hcctl maintenance enter hcu-n1 --yes &&
    hcctl maintenance status -o json | jq -e ".nodes[0].maintenance == \"active\"" &&
    hcctl maintenance enter hcu-n2 --yes 2>err; rc=$?
    cat err; [ $rc = 5 ] && grep -q "hcu-n1" err &&
    hcctl upgrade --rolling --to 1.0 --yes 2>err; rc=$?
    cat err; [ $rc = 5 ] && grep -q "node .hcu-n1. is in maintenance" err &&
    hcctl upgrade --rolling --to 1.0 --dry-run 2>err; rc=$?
    [ $rc = 5 ] && grep -q "maintenance exit hcu-n1" err &&
    hcctl maintenance status -o json | jq -e ".nodes[0].maintenance == \"active\"" &&
    hcctl maintenance exit hcu-n1 &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

test_expect_success 'maintenance survives a controller restart and an agent restart' '
    hcctl maintenance enter hcu-n3 --yes &&
    controller_stop KILL && POLL=500ms controller_start &&
    sup=$(lab_exec n3 cat /run/hcctl/hcagent.pid) && kill -KILL $(pgrep -P "$sup") &&
    sleep 3 &&
    hcctl maintenance status -o json | jq -e ".nodes[2].maintenance == \"active\"" &&
    hcctl node show hcu-n3 -o json | jq -e ".node.service_state != \"running\"" &&
    hcctl maintenance exit hcu-n3 &&
    wait_for 10 "hcctl node show hcu-n3 -o json | jq -e \".node.service_state == \\\"running\\\"\""
'

test_expect_success 'maintenance events carry timestamps for every enter and exit' '
    hcctl events --type maintenance.entered -o json | jq -e "all(.events[]; .ts != null and .node != null)"
'

test_expect_success 'over the whole test, never more than one service down at once (agents histories)' '
    [ "$(max_down_from_histories)" = 1 ] && [ "$(max_down_from_events)" = 1 ]
'

test_done
