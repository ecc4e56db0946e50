#!/usr/bin/env bash
# Rolling upgrades with --max-unavailable 2 on a 5-node namespace lab: nodes really go down two at
# a time, never three, as both the controller's event log and the agents' own service histories
# show; a node already down for other reasons takes one of the two slots; hcctld killed with
# SIGKILL mid-batch resumes without ever exceeding the budget; a bad version is rolled back on
# each node it reached.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"
NODES=5
all_on() { [ "$(versions)" = "$(printf "$1 %.0s" $(seq $NODES) | sed "s/ $//")" ]; }

# Which services were down together at the worst instant of [$1, $2] (for the log).
worst_instant() {
    histories | jq -s -r --argjson since "$1" --argjson until "$2" '
        sort_by(.ts_ms) | reduce .[] as $e ({down: {}, worst: []};
            (if $e.event == "adopted" then . else .down[$e.node] = ($e.event != "running") end)
            | [.down | to_entries[] | select(.value) | .key] as $d
            | if $e.ts_ms >= $since and $e.ts_ms <= $until and ($d | length) > (.worst | length)
              then .worst = $d + ["at " + $e.time] else . end)
        | .worst | join(" ")'
}

# check_down_window T0 T1 MIN MAX: the histories show between MIN and MAX services down at the
# worst instant of [T0, T1].
check_down_window() {
    local h
    h=$(max_down_from_histories "$1" "$2") || return 1
    echo "most services down at once (agents' histories): $h: $(worst_instant "$1" "$2")"
    [ "$h" -ge "$3" ] && [ "$h" -le "$4" ]
}

agent_api() { # NODE METHOD PATH
    agent_call "$(hcctl node show "$1" -o json | jq -r .node.agent_url)" "$2" "$3"
}

upgrade_lab_up upp hcp $NODES $NODES

test_expect_success 'bundles: 1.0, 1.1, 1.2-broken, and 1.3 and 1.4 that start in 2 s' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    hcctl software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
    hcctl software upload "$BUNDLES/hcstor-1.2-broken.tar.gz" >/dev/null &&
    slow_bundle 1.3 && slow_bundle 1.4 &&
    [ "$(hcctl software list -o json | jq "[.bundles[]] | length")" = 5 ]
'

test_expect_success 'first install with --max-unavailable 2: never more than two down' '
    hcctl upgrade --rolling --to 1.0 --max-unavailable 2 --yes --dry-run -o json |
        jq -e ".plan.max_unavailable == 2" &&
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.0 --max-unavailable 2 --yes && t1=$(now_ms) &&
    all_on 1.0 && check_down_window "$t0" "$t1" 1 2 && [ "$(max_down_from_events)" -le 2 ] &&
    hcctl upgrade status -o json | jq -e ".state == \"succeeded\" and .done == 5"
'

test_expect_success '1.0 -> 1.1 with --max-unavailable 2: two slots, never three' '
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.1 --max-unavailable 2 --yes && t1=$(now_ms) &&
    all_on 1.1 && check_down_window "$t0" "$t1" 1 2 && [ "$(max_down_from_events)" -le 2 ] &&
    hcctl upgrade status -o json | jq -e "[.nodes[].state] | all(. == \"done\")"
'

test_expect_success '1.1 -> 1.3 with --max-unavailable 2 really overlaps two nodes (both views), never three' '
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.3 --max-unavailable 2 --yes && t1=$(now_ms) &&
    all_on 1.3 && check_down_window "$t0" "$t1" 2 2 &&
    [ "$(max_down_from_events)" = 2 ] &&
    id=$(hcctl upgrade status -o json | jq -r .operation_id) &&
    hcctl operation show "$id" -o json >show.json &&
    for i in $(seq $NODES); do
        jq -e "[.steps[] | select(.node == \"hcp-n$i\") | .step] as \$s | [\"ok_to_stop\",\"drain\",\"stop\",\"activate\",\"verify_health\",\"start\",\"healthy\",\"resync\"] | all(. as \$x | \$s | index(\$x))" show.json || exit 1
    done
'

test_expect_success 'a node already down for other reasons takes one of the two slots' '
    agent_api hcp-n5 POST /v1/service/stop >/dev/null &&
    wait_for 20 "hcctl node show hcp-n5 -o json | jq -e \".node.service_state == \\\"stopped\\\"\"" &&
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.4 --max-unavailable 2 --yes && t1=$(now_ms) &&
    all_on 1.4 && check_down_window "$t0" "$t1" 2 2 &&
    hcctl node list -o json | jq -e "all(.nodes[]; .service_state == \"running\")"
'


test_expect_success 'hcctld killed with SIGKILL mid-batch resumes; never more than two down' '
    t0=$(now_ms) &&
    hcctl upgrade --rolling --to 1.3 --max-unavailable 2 --yes --no-wait >/dev/null &&
    id=$(hcctl upgrade status -o json | jq -r .operation_id) &&
    kill_when "$id" "$(step_seen hcp-n2 stop)" "$(step_seen hcp-n2 verify_health)" \
        "$(step_seen hcp-n3 ok_to_stop)" "$(step_seen hcp-n4 activate)" \
        "$(step_seen hcp-n5 drain)" "$(step_seen hcp-n5 resync)" &&
    hcctl operation wait "$id" --timeout 5m && t1=$(now_ms) &&
    all_on 1.3 && check_down_window "$t0" "$t1" 1 2 && [ "$(max_down_from_events)" -le 2 ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

test_expect_success 'a bad version is rolled back on each node of the batch; the others are untouched' '
    t0=$(now_ms)
    hcctl upgrade --rolling --to 1.2-broken --max-unavailable 2 --node-timeout 6s --yes 2>err; rc=$?
    t1=$(now_ms); cat err
    [ $rc = 1 ] && grep -q "rolled back" err && all_on 1.3 &&
    check_down_window "$t0" "$t1" 1 2 && [ "$(max_down_from_events)" -le 2 ] &&
    hcctl upgrade status -o json >st.json && cat st.json &&
    jq -e ".state == \"failed\" and .nodes[0].state == \"rolled_back\" and ([.nodes[2:][].state] | all(. == \"pending\"))" st.json &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")" &&
    wait_for 20 "hcctl node list -o json | jq -e \"all(.nodes[]; .service_state == \\\"running\\\")\""
'

test_expect_success 'over the whole test: never more than two services down at once' '
    h=$(max_down_from_histories) && echo "histories: $h" && [ "$h" = 2 ] &&
    [ "$(max_down_from_events)" = 2 ] &&
    for i in $(seq $NODES); do
        n=$(lab_exec n$i cat "$AGENT_DATA/software/service-history.jsonl" | wc -l) &&
        [ "$n" -ge 10 ] && [ "$n" -le 1250 ] || exit 1
    done
'

test_done
