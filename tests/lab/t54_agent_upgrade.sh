#!/usr/bin/env bash
# hcctl agent upgrade on a 3-node namespace lab (issue 18 part 3, docs/agent-upgrade.md): agents
# brought in by `cluster create` over SSH and run as it installs them (/opt/hcctl/agent/VERSION,
# the supervised daemon of `hcagent join --daemon`, no systemd in the nodes), hcstor 1.0
# installed by a rolling upgrade, hcload writing through all three.
# - under hcload: every node's agent replaced, one node at a time; the supervisor and the
#   worker keep their pids (exec in place) and the worker is the staged program; each hcstor
#   keeps its pid and its history shows no stop or start; hcload 0 errors, 0 lost, no stale read;
# - hcctld SIGKILLed after the first node's verify: the restart upgrades the others without
#   running the first node's steps again (the agent's own log: one activation);
# - a bundle whose agent does not come up: the first node's guardian and supervisor put the
#   previous agent back, the operation fails, no further node is touched, the services stay.
# The bundles' programs are a copy of this build's hcagent behind a script that sets the test
# knob HCAGENT_TEST_VERSION (the version it reports), so /proc/PID/exe names the staged copy.
# T54_FIGURES=FILE appends the figures (docs/agent-upgrade.md "Figures").
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

upgrade_lab_up agup hcag 3 3

V0=$(hcagent version | cut -d" " -f2)
STAGED=$AGENT_DATA/agent # where a node stages agent bundles (DIR/agent)

# The hcstor pid of each node (one PID namespace: told apart by their listen address).
svc_pids() {
    local i
    for i in 1 2 3; do pgrep -f "hcstor --listen 198.18.1.$((10 + i)):7480" | head -1; done | tr '\n' ' '
}
# The daemon's supervisor and its worker (the agent that serves) on node I.
sup_pid() { lab_exec "n$1" cat /run/hcctl/hcagent.pid; }
worker_pid() { pgrep -P "$(sup_pid "$1")" | head -1; }
# The program the worker of node I runs.
worker_exe() { readlink "/proc/$(worker_pid "$1")/exe"; }
# hcagent_procs I: the processes in node I's netns that run an hcagent program (the bundles'
# copies too): the supervisor and its worker, and a guardian while one watches an upgrade
hcagent_procs() {
    local p n=0
    for p in $(ip netns pids "hcag-n$1"); do
        case $(readlink "/proc/$p/exe" 2>/dev/null) in */hcagent | */hcagent-bin) n=$((n + 1)) ;; esac
    done
    echo "$n"
}
# status_of PID KEY: one line of /proc/PID/status
status_of() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
agent_url() { echo "https://$(node_ip "$1"):7444"; } # asked while hcctld is down too
agent_version() { agent_call "$(agent_url "$1")" GET /v1/status | jq -r .agent_version; }
versions3() { echo "$(agent_version 1) $(agent_version 2) $(agent_version 3)"; }
agent_log() { lab_exec "n$1" cat "$AGENT_DATA.log"; }
# node_list_on V: node list shows every node reachable on agent V, API ok.
node_list_on() {
    hcctl node list -o json | jq -e --arg v "$1" '[.nodes[] | select(.agent_version == $v and
        .api_compat == "ok" and .health == "reachable")] | length == 3' >/dev/null
}
# agent_bundle VERSION [broken]: a signed agent bundle whose program reports VERSION (a copy of
# hcagent behind a script); broken: it answers `version` and exits 3 when started to serve.
agent_bundle() {
    local v=$1 dir=$T/agent-src-$1
    mkdir -p "$dir/bin" && cp "$HC_BIN/hcagent" "$dir/bin/hcagent-bin" &&
        if [ "${2:-}" = broken ]; then
            printf '#!/bin/sh\n[ "$1" = version ] && HCAGENT_TEST_VERSION=%s exec "${0%%/*}/hcagent-bin" "$@"\necho "broken agent %s" >&2\nexit 3\n' \
                "$v" "$v" >"$dir/bin/hcagent"
        else
            printf '#!/bin/sh\nHCAGENT_TEST_VERSION=%s exec "${0%%/*}/hcagent-bin" "$@"\n' "$v" >"$dir/bin/hcagent"
        fi &&
        chmod 755 "$dir/bin/hcagent" &&
        jq -n --arg v "$v" '{format: 1, kind: "agent", name: "hcagent", version: $v,
            description: "hcagent for the lab test", entrypoint: "bin/hcagent"}' >"$dir.json" &&
        hcctl software build --manifest "$dir.json" --dir "$dir" --key "$BUNDLES/dev.key" \
            -o "hcagent-$v.tar.gz" >/dev/null &&
        hcctl -q software upload "hcagent-$v.tar.gz"
}
# node_times FILE: per node of an 'operation show -o json', the time from its first step's start
# to its last step's end, and each step's, in ms
node_times() {
    jq -r 'def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (.[20:23] | tonumber);
        .steps | group_by(.node)[] | "\(.[0].node): \((map(.finished_at | ms) | max) -
            (map(.started_at | ms) | min)) ms (" + (map("\(.step) \((.finished_at | ms) -
            (.started_at | ms))") | join(", ")) + ")"' "$1"
}
# timeline_window FILE FROM TO: ops/s and the worst p99 of hcload's timeline lines in [FROM, TO)
# (epoch ms)
timeline_window() {
    jq -s -r --argjson a "$2" --argjson b "$3" '[.[] | select(.t * 1000 >= $a and .t * 1000 < $b)]
        | "\(length) s: \((map(.ops) | add) / ([length, 1] | max) | floor) ops/s, p99 up to \(map(.p99_ms) | max) ms, errors \(map(.errors) | add)"' "$1"
}

test_expect_success 'hcstor 1.0 by a rolling upgrade; the agents as cluster create started them' '
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl upgrade --rolling --to 1.0 --yes >up.out 2>&1 &&
    [ "$(versions)" = "1.0 1.0 1.0" ] && node_list_on "$V0" &&
    for i in 1 2 3; do
        echo "n$i: supervisor $(sup_pid $i), worker $(worker_pid $i) $(worker_exe $i)" &&
        [ "$(worker_exe $i)" = "/opt/hcctl/agent/$V0/hcagent" ] || exit 1
    done &&
    agent_bundle 2.0 && agent_bundle 3.0 && agent_bundle 4.0 broken
'

test_expect_success 'agent upgrade under hcload: every node on the new agent, services untouched' '
    pids=$(svc_pids) && sups="$(sup_pid 1) $(sup_pid 2) $(sup_pid 3)" &&
    workers="$(worker_pid 1) $(worker_pid 2) $(worker_pid 3)" &&
    echo "services $pids; supervisors $sups; workers $workers" &&
    load_start agent && sleep 3 &&
    t0=$(now_ms) && hcctl agent upgrade --to 2.0 --yes -o json >op.json && t1=$(now_ms) &&
    sleep 2 && t2=$(now_ms) && load_stop agent &&
    jq -e ".operation.state == \"succeeded\"" op.json &&
    node_list_on 2.0 && [ "$(versions3)" = "2.0 2.0 2.0" ] &&
    [ "$(svc_pids)" = "$pids" ] &&
    [ "$(sup_pid 1) $(sup_pid 2) $(sup_pid 3)" = "$sups" ] &&
    [ "$(worker_pid 1) $(worker_pid 2) $(worker_pid 3)" = "$workers" ] &&
    for i in 1 2 3; do
        [ "$(worker_exe $i)" = "$STAGED/2.0/bin/hcagent-bin" ] &&
        tr "\0" " " <"/proc/$(worker_pid $i)/cmdline" | grep -q "run --data-dir $AGENT_DATA" &&
        agent_log $i | grep -q "agent upgrade from $V0 to 2.0 confirmed" &&
        w=$(worker_pid $i) && [ "$(status_of "$w" CapBnd)" = 00000000000010e1 ] &&
        [ "$(status_of "$w" NoNewPrivs)" = 1 ] && wait_for 5 "[ \$(hcagent_procs $i) = 2 ]" || exit 1
    done &&
    histories | jq -s -e --argjson a "$t0" --argjson b "$t1" \
        "[.[] | select(.ts_ms >= \$a and .ts_ms <= \$b and (.event | IN(\"adopted\", \"running\") | not))] | length == 0" &&
    hcctl operation show "$(last_op)" -o json >show.json &&
    jq -e "[.steps[] | select(.step == \"verify\") | .detail] | length == 3 and
        all(test(\"service pid [0-9]+ unchanged, running$\"))" show.json &&
    jq -r ".steps[] | \"\(.node) \(.step) \(.detail)\"" show.json && node_times show.json &&
    echo "agent upgrade of 3 nodes: $((t1 - t0)) ms" &&
    echo "hcload before: $(timeline_window "$T/agent.timeline" $((t0 - 3000)) "$t0")" &&
    echo "hcload during: $(timeline_window "$T/agent.timeline" "$t0" "$t1")" &&
    echo "hcload after:  $(timeline_window "$T/agent.timeline" "$t1" "$t2")" &&
    jq -c "{ops, ops_per_sec, errors, failovers, longest_stall_ms, latency_ms}" "$T/agent.json" &&
    if [ -n "${T54_FIGURES:-}" ]; then
        { echo "agent upgrade of 3 nodes: $((t1 - t0)) ms; services $pids"
          node_times show.json
          echo "before: $(timeline_window "$T/agent.timeline" $((t0 - 3000)) "$t0")"
          echo "during: $(timeline_window "$T/agent.timeline" "$t0" "$t1")"
          jq -c "{ops, ops_per_sec, errors, failovers, longest_stall_ms, latency_ms}" "$T/agent.json"; } >>"$T54_FIGURES"
    fi
'

test_expect_success 'hcctld SIGKILLed after the first node: the restart finishes without repeating its steps' '
    pids=$(svc_pids) &&
    controller_stop TERM && HCCTLD_TEST_CRASH_AFTER_STEP=8 POLL=500ms controller_start &&
    hcctl agent upgrade --to 3.0 --yes --no-wait >/dev/null &&
    wait_for 60 "! alive \$(pid_of hcctld)" && rm -f "$T/pids/hcctld" &&
    grep -q "durable step 8: .* hcag-n1/verify succeeded" "$T/hcctld.log" &&
    [ "$(versions3)" = "3.0 2.0 2.0" ] &&
    POLL=500ms controller_start &&
    id=$(last_op) && hcctl operation wait "$id" >/dev/null &&
    hcctl operation show "$id" -o json >show.json &&
    jq -e ".operation.state == \"succeeded\" and
        ([.steps[] | select(.node == \"hcag-n1\") | .attempts] | all(. == 1)) and
        ([.steps[] | select(.state == \"succeeded\")] | length == 9)" show.json &&
    [ "$(versions3)" = "3.0 3.0 3.0" ] && [ "$(svc_pids)" = "$pids" ] &&
    [ "$(agent_log 1 | grep -c "activating agent 3.0")" = 1 ] &&
    for i in 1 2 3; do [ "$(worker_exe $i)" = "$STAGED/3.0/bin/hcagent-bin" ] || exit 1; done &&
    wait_for 10 "node_list_on 3.0"
'

test_expect_success 'an agent that does not come up: rolled back on the first node, no other touched' '
    pids=$(svc_pids) && sup1=$(sup_pid 1) &&
    expect_exit 1 hcctl agent upgrade --to 4.0 --yes --confirm-timeout 10s -o json >op.json &&
    jq -e ".operation.state == \"failed\" and .operation.error.code == \"agent_upgrade_failed_rolled_back\"
        and (.operation.error.message | test(\"hcag-n1.*exited before it served\"))" op.json &&
    [ "$(versions3)" = "3.0 3.0 3.0" ] && [ "$(svc_pids)" = "$pids" ] && [ "$(sup_pid 1)" = "$sup1" ] &&
    [ "$(worker_exe 1)" = "$STAGED/3.0/bin/hcagent-bin" ] &&
    agent_log 1 >n1.log && grep -q "broken agent 4.0" n1.log &&
    grep -q "guardian: the new agent exited" n1.log && grep -q "supervisor: agent exited with status 3" n1.log &&
    agent_call "$(agent_url 1)" GET /v1/agent | jq -e ".current == \"3.0\" and .upgrade.state == \"rolled_back\"" &&
    hcctl operation show "$(last_op)" -o json >show.json &&
    jq -e "[.steps[] | select(.node != \"hcag-n1\")] | length == 0" show.json &&
    jq -e "[.steps[] | .step] == [\"stage\",\"activate\",\"verify\",\"rollback\"]" show.json &&
    for i in 2 3; do
        ! lab_exec n$i test -e "$STAGED/4.0" && ! agent_log $i | grep -qw "4\.0" || exit 1
    done &&
    wait_for 10 "node_list_on 3.0" && [ "$(pgrep -f "$STAGED/4\.0" | wc -l)" = 0 ] &&
    wait_for 5 "[ \$(hcagent_procs 1) = 2 ]"
'

test_expect_success 'the upgraded agent SIGKILLed: its supervisor starts the one current names' '
    pids=$(svc_pids) && sup=$(sup_pid 2) && w=$(worker_pid 2) && kill -KILL "$w" &&
    wait_for 15 "[ -n \"\$(worker_pid 2)\" ] && [ \"\$(worker_pid 2)\" != $w ] &&
        [ \"\$(worker_exe 2)\" = $STAGED/3.0/bin/hcagent-bin ]" &&
    wait_for 15 "[ \"\$(agent_version 2)\" = 3.0 ]" &&
    [ "$(sup_pid 2)" = "$sup" ] && [ "$(svc_pids)" = "$pids" ] &&
    agent_log 2 | grep -q "supervisor: agent killed by signal 9" && [ "$(hcagent_procs 2)" = 2 ] &&
    wait_for 10 "node_list_on 3.0"
'

test_expect_success 'no sanitizer report in any agent log' '
    for i in 1 2 3; do ! agent_log $i | grep -n "Sanitizer\|runtime error" || exit 1; done
'

test_done
