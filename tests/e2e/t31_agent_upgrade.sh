#!/usr/bin/env bash
# Agent self-upgrade and agent API skew (issue 18 part 3, docs/agent-upgrade.md): hcctld, two
# hcagents joined by hand on 127.0.0.91-92, each supervising hcstor 1.0 (installed by a rolling
# upgrade), hcload writing through them.
# - agent bundles are signed and verified like service bundles; each kind is refused where the
#   other is expected (upload, upgrade --rolling, agent upgrade, the agent's two stage routes);
# - agent upgrade under hcload: every node's agent is replaced, one at a time, the service pids
#   are unchanged, hcload sees no error;
# - hcctld SIGKILLed after the first node's verify: the restarted controller finishes without
#   running that node's steps again;
# - a bundle whose program does not start: the node's guardian puts the previous agent back,
#   the operation fails (agent_upgrade_failed_rolled_back), the other node is not touched;
# - an agent speaking an unsupported API (the test knob HCAGENT_TEST_API_VERSION): node list
#   says so, disruptive operations are refused naming it (exit 5), agent upgrade works on it;
# - hostile bodies to POST /v1/agent/upgrade and the agent's /v1/agent routes.
# The agent programs of the bundles are scripts that run this build's hcagent with the test
# knob HCAGENT_TEST_VERSION, so that it reports the bundle's version.
. "$(dirname "$0")/lib.sh"

need_bundles
ip() { echo "127.0.0.9$1"; }
agent_url() { echo "https://$(ip "$1"):$AGENT_PORT"; }
NODES="$(ip 1):7480,$(ip 2):7480"
hcpid() { pgrep -f "hcstor --listen $(ip "$1"):7480" | head -1; }
track_services() {
    local i p
    for i in 1 2; do
        for p in $(pgrep -f "hcstor --listen $(ip "$i"):7480"); do echo "$p" >"$T/pids/hcstor-$p"; done
    done
    return 0
}
serving() { curl -s --max-time 3 "http://$(ip "$1"):7480/health" | jq -e '.state == "serving"'; }
# the agent of node I: its version, and its pid recorded for the cleanup (a rollback starts a
# new process)
agent_version() { agent_call "$(agent_url "$1")" GET /v1/status | jq -r .agent_version; }
track_agent() {
    local pid
    pid=$(agent_call "$(agent_url "$1")" GET /v1/agent | jq -r .pid) && [ -n "$pid" ] &&
        echo "$pid" >"$T/pids/n$1-agent-$pid"
}
node_field() { hcctl node show "n$1" -o json | jq -r ".node.$2"; }
# hcctl_api_post BODY: POST /v1/agent/upgrade as the admin: refused with a 4xx and a JSON error,
# and no operation started.
hcctl_api_post() {
    local code
    code=$(curl -s --cacert "$CTL_DIR/ca.pem" -o resp.json -w "%{http_code}" \
        -H "Authorization: Bearer $(jq -r .token "$XDG_CONFIG_HOME/hcctl/config.json")" \
        -H "Content-Type: application/json" -X POST --data-binary @- "$CTL_URL/v1/agent/upgrade" <<<"$1") &&
        case $code in 4??) ;; *) echo "HTTP $code for ${1:0:80}" >&2; return 1 ;; esac &&
        # past the API's body limit libevent answers 413 itself (docs/hcctld.md), before any JSON
        { [ "$code" = 413 ] || jq -e ".error.code | type == \"string\"" resp.json >/dev/null; }
}
last_op() { hcctl operation list -o json | jq -r '.operations[0].id'; }
# agent_bundle VERSION [broken|hangs|dead|liar]: a signed agent bundle whose program reports
# VERSION; broken: it answers `version` but exits 3 instead of serving; hangs: it never serves;
# dead: it does not even answer `version`; liar: it reports 9.1; api9: it speaks agent API 9.
agent_bundle() {
    local v=$1 dir=$T/agent-src-$1
    mkdir -p "$dir/bin" &&
        if [ "${2:-}" = broken ]; then
            printf '#!/bin/sh\n[ "$1" = version ] && HCAGENT_TEST_VERSION=%s exec %s "$@"\necho "broken agent %s" >&2\nexit 3\n' \
                "$v" "$HC_BIN/hcagent" "$v" >"$dir/bin/hcagent"
        elif [ "${2:-}" = dead ]; then
            printf '#!/bin/sh\necho "dead agent %s" >&2\nexit 1\n' "$v" >"$dir/bin/hcagent"
        elif [ "${2:-}" = liar ]; then
            printf '#!/bin/sh\nHCAGENT_TEST_VERSION=9.1 exec %s "$@"\n' "$HC_BIN/hcagent" >"$dir/bin/hcagent"
        elif [ "${2:-}" = api9 ]; then
            printf '#!/bin/sh\nHCAGENT_TEST_VERSION=%s HCAGENT_TEST_API_VERSION=9 exec %s "$@"\n' "$v" "$HC_BIN/hcagent" >"$dir/bin/hcagent"
        elif [ "${2:-}" = hangs ]; then
            printf '#!/bin/sh\n[ "$1" = version ] && HCAGENT_TEST_VERSION=%s exec %s "$@"\necho "hung agent %s" >&2\nexec sleep 30\n' \
                "$v" "$HC_BIN/hcagent" "$v" >"$dir/bin/hcagent"
        else
            printf '#!/bin/sh\nHCAGENT_TEST_VERSION=%s exec %s "$@"\n' "$v" "$HC_BIN/hcagent" >"$dir/bin/hcagent"
        fi &&
        chmod 755 "$dir/bin/hcagent" &&
        jq -n --arg v "$v" '{format: 1, kind: "agent", name: "hcagent", version: $v,
            description: "hcagent for the e2e test", entrypoint: "bin/hcagent"}' >"$dir.json" &&
        hcctl software build --manifest "$dir.json" --dir "$dir" --key "$BUNDLES/dev.key" \
            -o "hcagent-$v.tar.gz" >/dev/null
}

test_expect_success 'two nodes run hcstor 1.0; node list shows each agent version and API state' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" &&
    wait_for 20 "[ \$(reachable_count) = 2 ]" &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl upgrade --rolling --to 1.0 --yes >up.out 2>&1 && track_services &&
    wait_for 20 "serving 1 && serving 2" &&
    v=$(hcagent version | cut -d" " -f2) &&
    hcctl node list -o json | jq -e --arg v "$v" "[.nodes[] | select(.agent_version == \$v and
        .api_version == 2 and .api_compat == \"ok\")] | length == 2" &&
    hcctl node list | grep -q "^n1 .* ok " &&
    hcctl node show n1 | grep -q "API compat: *ok"
'

test_expect_success 'agent bundles: signed like service bundles, each kind refused for the other' '
    agent_bundle 9.1 && agent_bundle 9.2 broken && agent_bundle 9.3 && agent_bundle 9.4 &&
    agent_bundle 9.5 hangs &&
    hcctl software upload hcagent-9.1.tar.gz -o json >up.json &&
    jq -e ".bundle.kind == \"agent\" and .bundle.signed_by == \"dev\"" up.json &&
    hcctl software list -o json | jq -e "[.bundles[] | {(.version): .kind}] | add == {\"1.0\": \"service\", \"9.1\": \"agent\"}" &&
    hcctl software keygen --out "$T/other" >/dev/null &&
    hcctl software build --manifest "$T/agent-src-9.3.json" --dir "$T/agent-src-9.3" \
        --key "$T/other.key" -o untrusted.tar.gz >/dev/null &&
    expect_exit 1 hcctl software upload untrusted.tar.gz 2>err && grep -q "not trusted" err &&
    cp hcagent-9.3.tar.gz badsig.tar.gz && cp hcagent-9.1.tar.gz.sig badsig.tar.gz.sig &&
    expect_exit 1 hcctl software upload badsig.tar.gz 2>err && grep -q "checksum mismatch\|does not verify" err &&
    jq ".health = {\"http\": \"http://x:1/\"}" "$T/agent-src-9.3.json" >hooks.json &&
    expect_exit 1 hcctl software build --manifest hooks.json --dir "$T/agent-src-9.3" \
        --key "$BUNDLES/dev.key" -o hooks.tar.gz 2>err && grep -q "unknown key .health." err &&
    expect_exit 1 hcctl upgrade --rolling --to 9.1 --yes -o json >err.json &&
    jq -e ".error.code == \"bundle_kind_mismatch\" and (.error.hint | test(\"hcctl agent upgrade\"))" err.json &&
    expect_exit 1 hcctl agent upgrade --to 1.0 --yes -o json >err.json &&
    jq -e ".error.code == \"bundle_kind_mismatch\"" err.json &&
    tok=$(hcctld token create --data-dir "$CTL_DIR" --name stage-x --role readonly --ttl 10m | grep -o "hct1\.[0-9a-f.]*") &&
    agent_call "$(agent_url 1)" POST /v1/software/stage "{\"version\":\"9.1\",\"token\":\"$tok\"}" |
        jq -e ".error.code == \"bundle_kind_mismatch\"" &&
    agent_call "$(agent_url 1)" POST /v1/agent/stage "{\"version\":\"1.0\",\"token\":\"$tok\"}" |
        jq -e ".error.code == \"bundle_kind_mismatch\"" &&
    [ ! -e "$T/n1/software/9.1" ] && [ ! -e "$T/n1/agent/1.0" ] &&
    hcctl operation list -o json | jq -e "[.operations[] | select(.kind == \"agent.upgrade\")] | length == 0"
'

test_expect_success 'dry run: the plan, nothing changed' '
    hcctl agent upgrade --to 9.1 --dry-run -o json >plan.json &&
    jq -e ".plan.to_version == \"9.1\" and (.plan.nodes | map(.name)) == [\"n1\",\"n2\"] and
        .plan.nodes[0].steps == [\"stage\",\"activate\",\"verify\"]" plan.json &&
    hcctl agent upgrade --to 9.1 --dry-run | grep -q "^n1 " &&
    [ ! -e "$T/n1/agent/9.1" ] && [ ! -e "$T/n2/agent/9.1" ] &&
    expect_exit 2 hcctl agent upgrade --to 9.1 </dev/null 2>err && grep -q -- "--yes" err &&
    hcctl operation list -o json | jq -e "[.operations[] | select(.kind == \"agent.upgrade\")] | length == 0"
'

test_expect_success 'agent upgrade under hcload: every agent replaced, service pids unchanged, no error' '
    p1=$(hcpid 1) && p2=$(hcpid 2) && a1=$(pid_of n1) && echo "services $p1 $p2, agent n1 $a1" &&
    hcload_bg load --nodes "$NODES" --duration 5 --workers 4 --timeline tl.jsonl &&
    wait_for 10 "grep -q \"\\\"ops\\\":[1-9]\" tl.jsonl" &&
    t0=$(date +%s%N) &&
    hcctl agent upgrade --to 9.1 --yes -o json >op.json &&
    t1=$(date +%s%N) && echo "agent upgrade of 2 nodes: $(((t1 - t0) / 1000000)) ms" &&
    jq -e ".operation.state == \"succeeded\"" op.json &&
    hcload_wait load && cat load.json &&
    jq -e ".errors == 0 and .ok == true and .verify.lost == 0 and .ops > 0" load.json &&
    if [ -n "${T31_FIGURES:-}" ]; then # where the report of a run by hand wants the figures
        { echo "agent upgrade of 2 nodes: $(((t1 - t0) / 1000000)) ms; services $p1 $p2 before," \
            "$(hcpid 1) $(hcpid 2) after"; jq -c "{ops, errors, failovers, longest_stall_ms, latency_ms}" load.json; } >>"$T31_FIGURES"
    fi &&
    [ "$(hcpid 1) $(hcpid 2)" = "$p1 $p2" ] &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.1 9.1" ] &&
    [ "$(agent_call "$(agent_url 1)" GET /v1/agent | jq -r .pid)" = "$a1" ] &&
    grep -q "adopted: pid $p1" "$T/n1.log" &&
    hcctl operation show "$(last_op)" -o json >show.json &&
    jq -e "[.steps[] | select(.step == \"verify\") | .detail] | all(test(\"service pid [0-9]+ unchanged, running$\"))" show.json &&
    jq -r ".steps[] | \"\(.node) \(.step) \(.detail)\"" show.json &&
    { [ -z "${T31_FIGURES:-}" ] || jq -r ".steps[] | \"\(.node) \(.step) \(.started_at) \(.finished_at) \(.detail)\"" show.json >>"$T31_FIGURES"; } &&
    wait_for 10 "hcctl node list -o json | jq -e \"[.nodes[] | select(.agent_version == \\\"9.1\\\" and .api_compat == \\\"ok\\\")] | length == 2\"" &&
    hcctl events --type agent.upgraded -o json | jq -e ".events | length == 2"
'

test_expect_success 'the exec'"'"'d agent still supervises its service: a killed service is reaped and restarted' '
    p=$(hcpid 1) && kill -9 "$p" &&
    wait_for 15 "[ -n \"\$(hcpid 1)\" ] && [ \"\$(hcpid 1)\" != $p ]" && track_services &&
    [ ! -e "/proc/$p" ] && wait_for 15 "serving 1" &&
    grep -q "service 1.0 exited\|signal 9" "$T/n1.log"
'

test_expect_success 'hcctld SIGKILLed after the first node: the restart finishes without repeating its steps' '
    hcctl -q software upload hcagent-9.3.tar.gz &&
    controller_stop TERM &&
    HCCTLD_TEST_CRASH_AFTER_STEP=8 controller_start &&
    hcctl agent upgrade --to 9.3 --yes --no-wait >/dev/null &&
    wait_for 60 "! alive \$(pid_of hcctld)" && rm -f "$T/pids/hcctld" &&
    grep -q "durable step 8: .* n1/verify succeeded" "$T/hcctld.log" &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.3 9.1" ] &&
    controller_start &&
    id=$(last_op) && hcctl operation wait "$id" >/dev/null &&
    hcctl operation show "$id" -o json >show.json &&
    jq -e ".operation.state == \"succeeded\" and
        ([.steps[] | select(.node == \"n1\") | .attempts] | all(. == 1)) and
        ([.steps[] | select(.node == \"n2\" and .state == \"succeeded\")] | length == 3)" show.json &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.3 9.3" ] &&
    [ "$(grep -c "activating agent 9.3" "$T/n1.log")" = 1 ]
'

test_expect_success 'a program that fails its trial (no answer, another version): nothing changes' '
    agent_bundle 9.8 dead && agent_bundle 9.9 liar &&
    hcctl -q software upload hcagent-9.8.tar.gz && hcctl -q software upload hcagent-9.9.tar.gz &&
    expect_exit 1 hcctl agent upgrade --to 9.8 --yes -o json >op.json &&
    jq -e ".operation.error.code == \"agent_start_failed\" and
        (.operation.error.message | test(\"agent 9.8 does not start on node n1: .* gave exit 1; still running 9.3\"))" op.json &&
    expect_exit 1 hcctl agent upgrade --to 9.9 --yes -o json >op.json &&
    jq -e ".operation.error.message | test(\"printed .hcagent 9.1.\")" op.json &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.3 9.3" ] &&
    agent_call "$(agent_url 1)" GET /v1/agent | jq -e ".current == \"9.3\"" &&
    hcctl operation show "$(last_op)" -o json | jq -e "[.steps[] | select(.node == \"n2\")] | length == 0"
'

test_expect_success 'a bundle whose agent does not start: rolled back on that node, the other untouched' '
    hcctl -q software upload hcagent-9.2.tar.gz &&
    p1=$(hcpid 1) &&
    expect_exit 1 hcctl agent upgrade --to 9.2 --yes --confirm-timeout 10s -o json >op.json &&
    jq -e ".operation.state == \"failed\" and .operation.error.code == \"agent_upgrade_failed_rolled_back\"
        and (.operation.error.message | test(\"n1.*exited before it served\"))" op.json &&
    track_agent 1 &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.3 9.3" ] && [ "$(hcpid 1)" = "$p1" ] &&
    grep -q "broken agent 9.2" "$T/n1.log" && grep -q "guardian: the new agent exited" "$T/n1.log" &&
    agent_call "$(agent_url 1)" GET /v1/agent | jq -e ".current == \"9.3\" and .upgrade.state == \"rolled_back\"" &&
    hcctl operation show "$(last_op)" -o json >show.json &&
    jq -e "[.steps[] | select(.node == \"n2\")] | length == 0" show.json &&
    jq -e "[.steps[] | select(.node == \"n1\") | .step] == [\"stage\",\"activate\",\"verify\",\"rollback\"]" show.json &&
    serving 1
'

test_expect_success 'a new agent that hangs: killed at the confirm timeout, the previous one back' '
    hcctl -q software upload hcagent-9.5.tar.gz &&
    p1=$(hcpid 1) &&
    expect_exit 1 hcctl agent upgrade --to 9.5 --yes --confirm-timeout 2s -o json >op.json &&
    jq -e ".operation.error.code == \"agent_upgrade_failed_rolled_back\"
        and (.operation.error.message | test(\"did not confirm in time\"))" op.json &&
    track_agent 1 &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.3 9.3" ] && [ "$(hcpid 1)" = "$p1" ] &&
    grep -q "hung agent 9.5" "$T/n1.log" && ! pgrep -f "^sleep 30$" -u 0 -P 1 >/dev/null &&
    serving 1
'

test_expect_success 'a daemon-mode agent: upgraded in its worker, a failed upgrade rolled back through the supervisor' '
    agent_bundle 9.6 && agent_bundle 9.7 broken &&
    hcctl -q software upload hcagent-9.6.tar.gz && hcctl -q software upload hcagent-9.7.tar.gz &&
    old=$(agent_call "$(agent_url 1)" GET /v1/agent | jq -r .pid) && p1=$(hcpid 1) &&
    kill -TERM "$old" && wait_for 10 "! alive $old" &&
    hcagent run --data-dir "$T/n1" --daemon --pidfile "$T/n1d.pid" --log-file "$T/n1d.log" &&
    wait_for 10 "[ -s \"$T/n1d.pid\" ]" && sup=$(cat "$T/n1d.pid") && echo "$sup" >"$T/pids/n1-supervisor" &&
    wait_for 20 "[ \"\$(agent_version 1)\" = 9.3 ]" && [ "$(hcpid 1)" = "$p1" ] &&
    w=$(agent_call "$(agent_url 1)" GET /v1/agent | jq -r .pid) &&
    hcctl agent upgrade --to 9.6 --yes >/dev/null &&
    [ "$(agent_version 1)" = 9.6 ] && [ "$(hcpid 1)" = "$p1" ] &&
    [ "$(agent_call "$(agent_url 1)" GET /v1/agent | jq -r .pid)" = "$w" ] && alive "$sup" &&
    expect_exit 1 hcctl agent upgrade --to 9.7 --yes --confirm-timeout 10s -o json >op.json &&
    jq -e ".operation.error.code == \"agent_upgrade_failed_rolled_back\"" op.json &&
    [ "$(agent_version 1) $(agent_version 2)" = "9.6 9.6" ] && [ "$(hcpid 1)" = "$p1" ] &&
    alive "$sup" && grep -q "supervisor: agent exited with status 3" "$T/n1d.log" &&
    [ "$(pgrep -f "hcagent run --data-dir $T/n1( |$)" | wc -l)" = 2 ] && # the supervisor, one agent
    agent_call "$(agent_url 1)" GET /v1/agent | jq -e ".current == \"9.6\" and .upgrade.state == \"rolled_back\""
'

test_expect_success 'an agent of an unsupported API: disruptive work refused naming it, agent upgrade works' '
    agent_kill n2 TERM && HCAGENT_TEST_API_VERSION=0 agent_start n2 &&
    wait_for 20 "[ \"\$(node_field 2 api_compat)\" = too_old ]" &&
    [ "$(node_field 2 api_version)" = 0 ] && [ "$(node_field 1 api_compat)" = ok ] &&
    expect_exit 5 hcctl maintenance enter n2 --yes -o json >err.json &&
    jq -e ".error.code == \"agent_api_unsupported\" and (.error.message | test(\"node .n2. speaks agent API 0\"))
        and (.error.hint | test(\"hcctl agent upgrade --to\"))" err.json &&
    expect_exit 5 hcctl upgrade --rolling --to 1.0 --yes 2>err && grep -q "n2" err &&
    expect_exit 5 hcctl node remove n2 --yes 2>err && grep -q "agent API 0" err &&
    hcctl -q software upload hcagent-9.4.tar.gz &&
    hcctl agent upgrade --to 9.4 --yes >/dev/null &&
    wait_for 20 "[ \"\$(node_field 2 api_compat)\" = ok ]" &&
    hcctl maintenance enter n2 --yes >/dev/null && hcctl maintenance exit n2 --yes >/dev/null;
    rc=$?; track_services; [ $rc = 0 ]
'

test_expect_success 'an upgrade to an agent of an API this controller does not speak stops at that node' '
    agent_bundle 9.10 api9 && hcctl -q software upload hcagent-9.10.tar.gz &&
    expect_exit 5 hcctl agent upgrade --to 9.10 --yes -o json >op.json &&
    jq -e ".operation.error.code == \"agent_api_unsupported\" and
        (.operation.error.message | test(\"node n1: agent 9.10 speaks agent API 9\"))" op.json &&
    [ "$(agent_version 2)" = 9.4 ] &&
    wait_for 10 "[ \"\$(node_field 1 api_compat)\" = too_new ]" &&
    expect_exit 5 hcctl maintenance enter n1 --yes 2>err && grep -q "upgrade hcctld first" err &&
    hcctl agent upgrade --to 9.4 --yes >/dev/null &&
    wait_for 10 "[ \"\$(node_field 1 api_compat)\" = ok ]"
'

test_expect_success 'hostile bodies: POST /v1/agent/upgrade and the agent routes refuse them' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name ro --role readonly | grep -o "hct1\.[0-9a-f.]*") &&
    expect_exit 3 hcctl --token "$ro" agent upgrade --to 9.4 --yes 2>/dev/null &&
    code=$(curl -sk -o /dev/null -w "%{http_code}" -X POST --data "{\"to_version\":\"9.4\"}" "$CTL_URL/v1/agent/upgrade") &&
    [ "$code" = 401 ] &&
    n_ops=$(hcctl operation list -o json | jq ".operations | length") &&
    for body in "not json" "[]" "{\"to_version\":7}" "{}" "{\"to_version\":\"9.4\",\"node_timeout_seconds\":-1}" \
        "{\"to_version\":\"9.4\",\"confirm_timeout_seconds\":\"x\"}" "{\"to_version\":\"../../x\"}"; do
        hcctl_api_post "$body" || exit 1
    done && echo "bodies refused" &&
    head -c 2000000 /dev/zero | tr "\0" a >big.txt &&
    { printf "{\"to_version\":\""; cat big.txt; printf "\"}"; } >big.json &&
    hcctl_api_post "$(cat big.json)" && grep -q 413 resp.json &&
    [ "$(hcctl operation list -o json | jq ".operations | length")" = "$n_ops" ] &&
    echo "big body refused" && a1=$(agent_url 1) &&
    agent_call "$a1" POST /v1/agent/activate "not json" | jq -e ".error.code == \"invalid_json\"" &&
    agent_call "$a1" POST /v1/agent/activate "{\"version\":\"../x\"}" | jq -e ".error.code == \"invalid_argument\"" &&
    agent_call "$a1" POST /v1/agent/activate "{\"version\":\"7.7\"}" | jq -e ".error.code == \"not_staged\"" &&
    agent_call "$a1" POST /v1/agent/activate "{\"version\":\"9.3\",\"confirm_timeout_ms\":1}" | jq -e ".error.code == \"invalid_argument\"" &&
    agent_call "$a1" POST /v1/agent/activate "{\"version\":\"9.4\"}" | jq -e ".restarting == false" &&
    agent_call "$a1" POST /v1/agent/stage "{\"version\":[1]}" | jq -e ".error.code == \"invalid_argument\"" &&
    [ "$(agent_version 1)" = 9.4 ]
'

test_expect_success 'agents and controller stop cleanly, without sanitizer reports' '
    for f in "$T"/pids/n1-agent-*; do [ -f "$f" ] && kill -TERM "$(cat "$f")"; done
    agent_kill n1 TERM; agent_kill n2 TERM; controller_stop TERM &&
    ! grep -n "Sanitizer\|runtime error" "$T"/*.log
'

test_done
