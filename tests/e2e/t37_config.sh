#!/usr/bin/env bash
# The storage service's configuration end to end (issue 15, docs/config.md): hcctld, three
# hcagents joined by hand on 127.0.0.51-53, each supervising hcstor 1.3 (the bundle with
# settings; installed by a rolling upgrade; hcstor on IP:7480), hcload writing through them.
# - bad values of each kind: exit 2, one line naming the key, no revision recorded;
# - a live change: every node has it, hcstor's pid unchanged, status in_sync, history;
# - a restart change: refused without --yes; with it the nodes restart one at a time under
#   hcload (0 failed, 0 lost) and run the new value;
# - an upgrade to a version whose schema refuses a current value: refused before anything;
# - a restart change that fails its health (min_free_mb above the disk's free space): the first
#   node is put back on the previous revision, the operation fails, no other node restarts;
# - drift made by hand: a live value edited on a node is repaired by the poller (event), a
#   restart value waits for `config apply`; revert and diff; node list's config fields;
# - hcctld SIGKILLed in the middle of a rolling change resumes and finishes it;
# - bounds the agents cannot apply (no cgroup rights, no storage interface here): not_applied.
. "$(dirname "$0")/lib.sh"

need_bundles
ip() { echo "127.0.0.5$1"; }
svc() { echo "http://$(ip "$1"):7480"; }
NODES="$(ip 1):7480,$(ip 2):7480,$(ip 3):7480"
hcpid() { pgrep -f "hcstor --listen $(ip "$1"):7480" | head -1; }
pids() { echo "$(hcpid 1) $(hcpid 2) $(hcpid 3)"; }
setting() { curl -s --max-time 3 "$(svc "$1")/settings" | jq -r ".settings.$2"; }
state() { curl -s --max-time 3 "$(svc "$1")/health" | jq -r .state; }
revisions() { hcctl config history -o json | jq '.revisions | length'; }
in_sync() { hcctl config status -o json | jq -e '[.nodes[] | select(.state == "in_sync")] | length == 3'; }
node_state() { hcctl config status -o json | jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .state'; }
all_detail() { hcctl config status -o json | jq -e --arg p "$1" 'all(.nodes[]; (.detail // "") | test($p))'; }
last_op() { hcctl operation list -o json | jq -r '.operations[0].id'; }

test_expect_success 'three nodes run hcstor 1.3 (with settings), every node in sync at revision 0' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" && agent_join n3 "$(ip 3)" &&
    wait_for 20 "[ \$(reachable_count) = 3 ]" &&
    hcctl -q software upload "$BUNDLES/hcstor-1.3.tar.gz" &&
    hcctl upgrade --rolling --to 1.3 --yes >up.out 2>&1 && track_services &&
    wait_for 20 "[ \"\$(state 1)\$(state 2)\$(state 3)\" = servingservingserving ]" &&
    wait_for 10 in_sync &&
    hcctl config show -o json >show.json &&
    jq -e ".revision == 0 and .version == \"1.3\" and .values.log_level == \"info\" and
        .values.resync_parallelism == 8 and .values.fsync == \"always\" and
        (.settings | map(.name) | index(\"fsync\") != null) and
        (.settings[] | select(.name == \"fsync\") | .apply == \"restart\")" show.json &&
    hcctl config show >show.txt && grep -q "resync_parallelism" show.txt &&
    hcctl node list -o json | jq -e "[.nodes[] | select(.config_revision == 0 and .config_state == \"in_sync\")] | length == 3"
'

test_expect_success 'bad values: exit 2, one line naming the key and what it may be, nothing recorded' '
    for kv in "bogus=1:bogus: no such setting" \
        "resync_parallelism=abc:resync_parallelism: .abc. is not an integer" \
        "resync_parallelism=65:resync_parallelism: .65. is not an integer from 1 to 64" \
        "resync_parallelism=0:from 1 to 64" "fsync=sometimes:fsync: .sometimes. is not one of always, batch" \
        "log_level=:log_level" "min_free_mb=-1:min_free_mb"; do
        expect_exit 2 hcctl config set "${kv%%:*}" --yes 2>err || exit 1
        [ "$(wc -l <err)" -le 2 ] && grep -q "${kv#*:}" err || { cat err; exit 1; }
    done &&
    expect_exit 2 hcctl config set noequals 2>err && grep -q "is not KEY=VALUE" err &&
    expect_exit 2 hcctl config set log_level=debug log_level=info 2>err && grep -q "given twice" err &&
    expect_exit 2 hcctl config unset "Bad Name" 2>err &&
    expect_exit 2 hcctl config set bogus=1 -o json >err.json && jq -e ".error.code == \"invalid_setting\"" err.json &&
    [ "$(revisions)" = 0 ] && hcctl config show -o json | jq -e ".revision == 0"
'

# ctl_post PATH JSON: the controller API with the admin token; prints the HTTP status.
ctl_post() {
    curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" \
        -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" \
        -H "Content-Type: application/json" --data-binary "$2" "$CTL_URL$1"
}

test_expect_success 'hostile bodies to POST /v1/config: 400 or 404 with the error shape, nothing recorded' '
    many=$(jq -cn "{set: ([range(200)] | map({key: \"s\(.)\", value: 1}) | from_entries)}") &&
    long=$(head -c 2000 /dev/zero | tr "\0" x) &&
    for case in "400:{\"set\": 5}" "400:{\"set\": {\"log_level\": [1]}}" "400:{\"unset\": [1]}" \
        "400:{\"unset\": \"log_level\"}" "400:{}" "404:{\"revert\": 99}" "404:{\"revert\": -1}" \
        "400:{\"set\": {\"log_level\": \"debug\"}, \"max_unavailable\": 0}" \
        "400:{\"set\": {\"log_level\": \"debug\"}, \"message\": \"$long\"}" \
        "400:$many" "400:not json"; do
        code=$(ctl_post /v1/config "${case#*:}") &&
        [ "$code" = "${case%%:*}" ] && jq -e ".error.code and .error.message" body.json ||
            { echo "${case:0:80} -> $code $(cat body.json)"; exit 1; }
    done &&
    [ "$(revisions)" = 0 ]
'

test_expect_success 'hostile bodies to the agent PUT /v1/service/settings: 400, the files untouched' '
    AGENT=https://$(ip 1):$AGENT_PORT &&
    f="$T/n1/service-settings.json" s="$T/n1/service-settings.state.json" &&
    before=$(cat "$f" "$s" 2>/dev/null | sha256sum) &&
    for body in "{\"revision\": \"x\", \"values\": {}}" "{\"revision\": -1, \"values\": {}}" \
        "{\"revision\": 9, \"values\": []}" "{\"revision\": 9, \"values\": {\"bogus\": 1}}" \
        "{\"revision\": 9, \"values\": {\"resync_parallelism\": \"1e99\"}}" \
        "{\"revision\": 9, \"values\": {\"log_level\": {\"a\": 1}}}" "[1, 2]" "{\"values\": {}}"; do
        agent_api PUT /v1/service/settings "$body" >out.json &&
        jq -e ".error.code == \"invalid_argument\" or .error.code == \"invalid_setting\" or .error.code == \"invalid_json\"" out.json ||
            { echo "$body -> $(cat out.json)"; exit 1; }
    done &&
    [ "$(cat "$f" "$s" 2>/dev/null | sha256sum)" = "$before" ] &&
    agent_api GET /v1/service/settings | jq -e ".revision == 0 and .values.log_level == \"info\""
'

test_expect_success 'a live change: every node has it, no service restarted, in sync, recorded' '
    before=$(pids) &&
    hcctl config set log_level=debug resync_parallelism=4 -m "more logs" -o json >set.json &&
    jq -e ".operation.state == \"succeeded\"" set.json &&
    for i in 1 2 3; do
        [ "$(setting $i log_level)" = debug ] && [ "$(setting $i resync_parallelism)" = 4 ] || exit 1
    done &&
    [ "$(pids)" = "$before" ] &&
    wait_for 10 in_sync &&
    hcctl config history -o json | jq -e ".revisions[0] | .revision == 1 and .action == \"set\" and
        .message == \"more logs\" and .author != null and .values.log_level == \"debug\"" &&
    hcctl operation show "$(last_op)" -o json | jq -e ".operation.kind == \"config.apply\"" &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"config.revision\")] | length == 1" &&
    hcctl config diff -o json | jq -e ".from == 0 and .to == 1 and (.changes | length) == 2 and .restart == false"
'

test_expect_success 'setting a value it already has records nothing' '
    hcctl config set log_level=debug >out 2>err && grep -q "no change" err && [ "$(revisions)" = 1 ]
'

test_expect_success 'a restart change asks (no TTY: exit 2 without --yes) and records nothing' '
    expect_exit 2 hcctl config set fsync=batch 2>err && grep -q -- "--yes" err && [ "$(revisions)" = 1 ] &&
    hcctl config set fsync=batch --dry-run -o json | jq -e ".restart == true and .changes[0].name == \"fsync\""
'

test_expect_success 'a restart change under hcload: node by node, 0 failed, 0 lost, new value running' '
    before=$(pids) &&
    hcload_bg load --nodes "$NODES" --duration 300 --workers 3 --keys 60 --prefix rs --timeline tl.jsonl &&
    wait_for 10 "grep -q \"\\\"ops\\\":[1-9]\" tl.jsonl" &&
    hcctl config set fsync=batch --yes -o json >set2.json &&
    jq -e ".operation.state == \"succeeded\" and .operation.kind == \"config.rolling\"" set2.json &&
    kill -INT "$(pid_of load)" && hcload_wait load; cat load.err >&2
    jq -e ".ok and .errors == 0 and .verify.lost == 0 and .corrupt_reads == 0 and .writes > 0" load.json &&
    track_services && after=$(pids) &&
    for i in 1 2 3; do
        [ "$(echo $before | cut -d" " -f$i)" != "$(echo $after | cut -d" " -f$i)" ] || exit 1
        curl -s "$(svc $i)/health" | jq -e ".store.fsync == \"batch\"" || exit 1
    done &&
    wait_for 10 in_sync &&
    hcctl upgrade status -o json >/dev/null &&
    hcctl operation show "$(jq -r .operation.id set2.json)" -o json >op.json &&
    for i in 1 2 3; do
        jq -e "[.steps[] | select(.node == \"n$i\" and .step == \"settings\" and .state == \"succeeded\")] | length == 1" op.json || exit 1
    done
'

test_expect_success 'an upgrade to a version whose schema refuses a current value: refused, naming it' '
    hcctl software show 1.3 -o json | jq ".manifest | .version = \"1.5\" |
        .settings.fsync.values = [\"always\"]" >m15.json &&
    hcctl -q software build --manifest m15.json --dir "$BUNDLES/stage-1.3" \
        --key "$BUNDLES/dev.key" -o b15.tar.gz && hcctl -q software upload b15.tar.gz &&
    before=$(pids) &&
    expect_exit 5 hcctl upgrade --rolling --to 1.5 --yes 2>err && cat err &&
    grep -q "the new version refuses the current value of fsync: .batch. is not one of always" err &&
    expect_exit 5 hcctl upgrade --rolling --to 1.5 --dry-run 2>err &&
    [ "$(pids)" = "$before" ] && hcctl node list -o json | jq -e "[.nodes[] | select(.software_version == \"1.3\")] | length == 3"
'

test_expect_success 'a restart change that fails its health: that node back on the previous revision, no other node restarted' '
    before=$(pids) &&
    expect_exit 1 hcctl config set min_free_mb=16000000 --yes --node-timeout 10s -o json >bad.json 2>bad.err;
    cat bad.err && jq -e ".operation.state == \"failed\" and .operation.error.code == \"config_failed_rolled_back\"" bad.json &&
    jq -r .operation.error.message bad.json | grep -q "rolled back to revision 2" &&
    track_services && after=$(pids) &&
    [ "$(echo $before | cut -d" " -f2-)" = "$(echo $after | cut -d" " -f2-)" ] &&
    for i in 1 2 3; do [ "$(setting $i min_free_mb)" = 0 ] && [ "$(state $i)" = serving ] || exit 1; done &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"config.rolled_back\" and .node == \"n1\")] | length == 1" &&
    wait_for 10 "[ \"\$(node_state n1)\" = drift ]" &&
    expect_exit 4 hcctl config status >st.out 2>&1 && grep -q "drift" st.out
'

test_expect_success 'revert to revision 2: every node already has its values, none restarts' '
    before=$(pids) &&
    hcctl config revert 2 --yes -o json >rev.json &&
    jq -e ".operation.state == \"succeeded\"" rev.json &&
    hcctl config history -o json | jq -e ".revisions[0] | .revision == 4 and .action == \"revert\" and .reverted_to == 2" &&
    [ "$(pids)" = "$before" ] && wait_for 10 in_sync &&
    hcctl config diff 3 4 -o json | jq -e ".changes[0].name == \"min_free_mb\" and .restart == true"
'

test_expect_success 'drift by hand: a live value edited on a node is found and repaired by the poller' '
    f="$T/n2/service-settings.json" &&
    jq ".resync_parallelism = 32" "$f" >"$f.new" && mv "$f.new" "$f" &&
    wait_for 15 "hcctl events -o json | jq -e \"[.events[] | select(.type == \\\"config.repaired\\\" and .node == \\\"n2\\\")] | length >= 1\"" &&
    jq -e ".resync_parallelism == 4" "$f" && wait_for 10 in_sync
'

test_expect_success 'drift by hand of a restart value: shown, not repaired, fixed by config apply' '
    f="$T/n3/service-settings.json" &&
    jq ".fsync_interval_ms = 500" "$f" >"$f.new" && mv "$f.new" "$f" &&
    wait_for 10 "[ \"\$(node_state n3)\" = drift ]" && sleep 3 && [ "$(node_state n3)" = drift ] &&
    hcctl config status -o json | jq -e ".nodes[] | select(.name == \"n3\") | .detail | test(\"restart setting .*fsync_interval_ms.*config apply\")" &&
    hcctl config apply --dry-run -o json | jq -e ".nodes == [\"n3\"] and .restart == true" &&
    hcctl config apply --yes >apply.out 2>&1 && wait_for 10 in_sync &&
    jq -e ".fsync_interval_ms == 100" "$f"
'

test_expect_success 'hcctld SIGKILLed mid-apply: restarted, the rolling change finishes' '
    controller_stop TERM && HCCTLD_TEST_CRASH_AFTER_STEP=7 controller_start &&
    hcctl config set fsync=always --yes --no-wait -o json >kill.json &&
    op=$(jq -r .operation.id kill.json) &&
    wait_for 60 "! alive \$(pid_of hcctld)" && rm -f "$T/pids/hcctld" &&
    controller_start && hcctl operation wait "$op" --timeout 120s >/dev/null &&
    hcctl operation show "$op" -o json | jq -e ".operation.state == \"succeeded\"" &&
    for i in 1 2 3; do curl -s "$(svc $i)/health" | jq -e ".store.fsync == \"always\"" || exit 1; done &&
    wait_for 10 in_sync && track_services
'

test_expect_success 'a bound the nodes cannot apply: not_applied per node, with the reason; unset: in sync' '
    hcctl config set limits.cpu_percent=50 -o json >b.json && jq -e ".operation.state == \"succeeded\"" b.json &&
    wait_for 10 "[ \"\$(node_state n1)\$(node_state n2)\$(node_state n3)\" = not_appliednot_appliednot_applied ]" &&
    all_detail "a resource bound is not applied: limits not applied" &&
    expect_exit 4 hcctl config status >/dev/null 2>&1 &&
    hcctl config set limits.net_mbit=100 >/dev/null 2>&1 &&
    hcctl config unset limits.cpu_percent >/dev/null 2>&1 &&
    wait_for 10 "all_detail \"no network bound: the node has no storage interface\"" &&
    hcctl config unset limits.net_mbit >/dev/null 2>&1 && wait_for 10 in_sync &&
    hcctl config show -o json | jq -e ".values[\"limits.cpu_percent\"] == 0 and .revision == 9"
'

test_expect_success 'a read-only token cannot change the configuration' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name ro --role readonly --ttl 10m | grep -o "hct1\.[0-9a-f.]*") &&
    expect_exit 3 hcctl --token "$ro" config set log_level=info 2>err && grep -q "read-only" err &&
    hcctl --token "$ro" config show -o json | jq -e ".revision == 9"
'

test_expect_success 'agents and controller stop cleanly, without sanitizer reports' '
    for n in n1 n2 n3; do agent_kill $n TERM; done && controller_stop TERM &&
    ! grep -n "Sanitizer\|runtime error" "$T"/*.log
'

test_done
