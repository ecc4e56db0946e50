#!/usr/bin/env bash
# The operator's experience end to end, against a real hcctld with three real hcagents:
# the JSON keys of every read command frozen in golden files (tests/golden), completion of node
# names, operation ids and bundle versions from the controller through `hcctl __complete` and
# through the bash,
# zsh and fish scripts the build generated, the interactive shell on a terminal (script(1))
# completing node names, progress of a followed operation (plain lines off a terminal, redrawn
# rows on one, nothing but the JSON document on stdout with -o json), and /metrics checked by
# promtool, Prometheus's own parser of the text format.
#
# HC_GOLDEN_UPDATE=1 rewrites the golden files from this run (review the diff: keys are API).
. "$(dirname "$0")/lib.sh"

BUILD=$(cd "$HC_BIN/.." && pwd)
GOLDEN=$HC_SRC/tests/golden
COMPLETIONS=$HC_SRC/completions # committed; t41 checks them against the built hcctl

# The sorted key paths of a JSON document ("nodes.[].name"): values, array lengths and the
# free-form objects (event details, operation params) are left out, keys are kept.
key_paths() {
    jq -S '[paths | map(if type == "number" then "[]" else . end)
            | select((.[:-1] | any(. == "details" or . == "params")) | not)
            | join(".")] | unique'
}

# golden NAME hcctl-args...: the keys of `hcctl ARGS -o json` against tests/golden/NAME.json.
golden() {
    local name=$1
    shift
    hcctl "$@" -o json >"$name.doc.json" || [ "$name" = error ] || return 1
    key_paths <"$name.doc.json" >"$name.keys.json" || return 1
    if [ "${HC_GOLDEN_UPDATE:-0}" = 1 ]; then
        cp "$name.keys.json" "$GOLDEN/$name.json"
    fi
    diff -u "$GOLDEN/$name.json" "$name.keys.json"
}

test_expect_success 'a controller with three agents and an uploaded bundle' '
    controller_init --trust-key "$BUILD/bundles/dev.pub" && controller_start &&
    hcctl -q software upload "$BUILD/bundles/hcstor-1.0.tar.gz" &&
    agent_join n1 127.0.0.2 && agent_join n2 127.0.0.3 && agent_join n3 127.0.0.4 &&
    wait_for 15 "[ \$(reachable_count) = 3 ]" &&
    wait_for 10 "hcctl node show n3 -o json | jq -e \".interfaces | length > 0\""
'

test_expect_success 'node remove -o json: one JSON document on stdout, one plain line per event on stderr' '
    agent_join x1 127.0.0.5 && wait_for 15 "[ \$(reachable_count) = 4 ]" &&
    hcctl node remove x1 --yes -o json >rm.json 2>rm.err &&
    [ "$(jq -s length rm.json)" = 1 ] &&
    jq -e ".operation.state == \"succeeded\" and (.steps | length) > 0" rm.json &&
    grep -Eq "^op-[0-9a-f]+: x1: step .leave. succeeded" rm.err &&
    grep -q "^operation op-[0-9a-f]* (node.remove) succeeded" rm.err &&
    ! grep -q "$(printf "\033")" rm.err &&
    jq -r .operation.id rm.json >op.id
'

test_expect_success 'on a terminal, progress is redrawn in place: rows per node, elapsed time' '
    agent_join x2 127.0.0.6 && wait_for 15 "[ \$(reachable_count) = 4 ]" &&
    TERM=xterm script -qefc "hcctl node remove x2 --yes" /dev/null </dev/null >tty.out 2>&1 &&
    grep -q "$(printf "\033\\[2K")op-[0-9a-f]* node.remove .* elapsed" tty.out &&
    grep -q "$(printf "\033\\[J")" tty.out &&
    grep -Eq "x2 +(budget|ok_to_stop|drain|leave|uninstall|revoke|service_data) " tty.out &&
    grep -q "operation op-[0-9a-f]* (node.remove) succeeded" tty.out
'

test_expect_success 'golden: the JSON keys of every read command' '
    wait_for 10 "[ \$(reachable_count) = 3 ]" &&
    golden cluster-status cluster status &&
    golden cluster-show cluster show &&
    golden upgrade-status upgrade status &&
    golden node-list node list &&
    golden node-show node show n1 &&
    golden operation-list operation list &&
    golden operation-show operation show "$(cat op.id)" &&
    golden events events --type node.joined &&
    golden version version &&
    golden net-show net show &&
    golden software-list software list &&
    golden software-show software show 1.0 &&
    golden maintenance-status maintenance status &&
    golden error node show nosuchnode
'

test_expect_success '__complete asks the controller for node names and operation ids' '
    hcctl __complete -- node show "" | cut -f1 >nodes.txt &&
    printf "n1\nn2\nn3\n" | diff -u - nodes.txt &&
    hcctl __complete -- node show n | grep -q "^n2	127.0.0.3, reachable$" &&
    hcctl __complete -- operation show "" | cut -f1 | grep -qx "$(cat op.id)" &&
    hcctl __complete -- events --node "" | cut -f1 | grep -qx n3 &&
    hcctl __complete -- --output=json maintenance enter n | cut -f1 | grep -qx n1
'

test_expect_success '__complete asks the controller for bundle versions' '
    [ "$(hcctl __complete -- software remove "")" = "$(printf "1.0\thcstor, %s" \
        "$(hcctl software show 1.0 -o json | jq -r .bundle.uploaded_at)")" ] &&
    hcctl __complete -- software show "" | cut -f1 | grep -qx 1.0 &&
    hcctl __complete -- upgrade --rolling --to "" | cut -f1 | grep -qx 1.0 &&
    hcctl __complete -- upgrade --to 1 | cut -f1 | grep -qx 1.0 &&
    hcctl __complete -- upgrade --rolling --to=1 | cut -f1 | grep -qx -- --to=1.0 &&
    [ -z "$(hcctl __complete -- software remove 2)" ]
'

test_expect_success 'upgrade is typed, shown and completed as upgrade --rolling' '
    hcctl __complete -- upgrade "" | cut -f1 | head -1 | grep -qx -- --rolling &&
    ! hcctl upgrade --rolling 2>u.err &&
    grep -q "option --to is required for .upgrade --rolling.; hint: usage: hcctl upgrade --rolling --to VERSION" u.err &&
    hcctl upgrade --help >u.help && grep -q "^  --rolling  " u.help && ! grep -q "^  upgrade " u.help &&
    grep -qxF ".B hcctl upgrade \\-\\-rolling" "$BUILD/man/hcctl-upgrade.1" &&
    grep -qF ".B hcctl cluster show" "$BUILD/man/hcctl-cluster.1"
'

test_expect_success 'upgrade status before any upgrade: exit 0, says so' '
    [ "$(hcctl upgrade status)" = "no rolling upgrade has run" ] &&
    hcctl upgrade status -o json | jq -e ".state == \"none\" and .operation_id == null and .nodes == [] and .done == 0 and .total == 0"
'

test_expect_success 'cluster show: the settings, as key: value lines' '
    hcctl cluster show >cs.out &&
    grep -qx "Name: *e2e" cs.out &&
    grep -qx "Controller: *$CTL_URL" cs.out &&
    grep -qx "CA fingerprint: *$(curl -sS --cacert "$CTL_DIR/ca.pem" "$CTL_URL/v1/ca" | jq -r .ca_fingerprint)" cs.out &&
    grep -qx "Nodes: *3 (3 reachable, 0 unreachable, 0 unknown)" cs.out &&
    [ "$(hcctl cluster show -o json | jq -r .cluster.id)" = "$(hcctl cluster status -o json | jq -r .cluster.id)" ]
'

test_expect_success 'events: the newest N by default, "more" when older ones exist, --before pages back' '
    hcctl events --since 0 --limit 1000 -o json >all.json &&
    jq -e ".more == false and (.events | length) > 6" all.json &&
    hcctl events --limit 3 -o json >new3.json &&
    jq -e ".more == true and (.events | length) == 3" new3.json &&
    [ "$(jq -c "[.events[].id]" new3.json)" = "$(jq -c "[.events[-3:][].id]" all.json)" ] &&
    [ "$(jq .last_id new3.json)" = "$(jq ".events[-1].id" all.json)" ] &&
    first=$(jq ".events[0].id" new3.json) &&
    hcctl events --limit 3 --before "$first" -o json >prev3.json &&
    [ "$(jq -c "[.events[].id]" prev3.json)" = "$(jq -c "[.events[-6:-3][].id]" all.json)" ] &&
    hcctl events --limit 3 >new3.out 2>new3.err &&
    [ "$(tail -n +2 new3.out | wc -l)" = 3 ] &&
    grep -qx "showing the newest 3 events; older ones exist: see them with --before $first, or raise --limit (at most 1000)" new3.err &&
    hcctl -q events --limit 3 2>q.err >/dev/null && [ ! -s q.err ] &&
    hcctl events --since 0 --limit 2 -o json | jq -e ".more == true and [.events[].id] == [$(jq -r "[.events[:2][].id] | join(\",\")" all.json)]" &&
    hcctl events --limit 1000 -o json | jq -e ".more == false" &&
    hcctl events 2>all.err >/dev/null && [ ! -s all.err ]
'

test_expect_success 'join-token --ttl: at most the controller'"'"'s 7 days, a usage error beyond' '
    hcctl -q cluster join-token --ttl 7d >/dev/null &&
    hcctl cluster join-token --ttl 7d1s -o json >ttl.json 2>ttl.err; [ $? = 2 ] &&
    jq -e ".error.code == \"usage\"" ttl.json &&
    grep -q "at most 7d" ttl.err &&
    hcctl cluster join-token --help | grep -q "(1s to 7d)"
'

test_expect_success 'usage errors are one JSON document with -o json anywhere on the line' '
    hcctl -o json --timeout abc node list >j1 2>/dev/null; [ $? = 2 ] &&
    jq -e ".error.code == \"usage\"" j1 &&
    hcctl cluster join-token --ttl abc -o json >j2 2>/dev/null; [ $? = 2 ] &&
    jq -e ".error.message | test(\"--ttl\")" j2 &&
    hcctl node list --bogus --output=json >j3 2>/dev/null; [ $? = 2 ] &&
    [ "$(jq -s length j3)" = 1 ]
'

test_expect_success 'the controller URL must be https, from any setting; an unreadable CA is named' '
    hcctl --controller "http://127.0.0.1:$CTL_PORT" node list 2>h1; [ $? = 2 ] &&
    grep -q "the controller URL must start with https://" h1 && ! grep -q "is hcctld running" h1 &&
    HCCTL_CONTROLLER=http://127.0.0.1:$CTL_PORT hcctl node list 2>h2; [ $? = 2 ] &&
    grep -q "from HCCTL_CONTROLLER" h2 &&
    hcctl --ca /nonexistent/ca.pem node list 2>h3; [ $? = 1 ] &&
    grep -q "cannot read the CA file ./nonexistent/ca.pem. (from --ca): No such file or directory; hint: " h3
'

test_expect_success '__complete uses the controller named on the line, and fails quietly' '
    start=$(date +%s%N) &&
    out=$(hcctl __complete -- --controller https://127.0.0.1:1 node show "") &&
    [ -z "$out" ] &&
    [ $(( ($(date +%s%N) - start) / 1000000 )) -lt 4000 ]
'

test_expect_success 'bash: the generated script completes groups, options and node names' '
    bash -c "
        set -u
        source $COMPLETIONS/hcctl.bash
        COMP_WORDS=(hcctl cl); COMP_CWORD=1; _hcctl
        [ \"\${COMPREPLY[*]}\" = cluster ] || { echo \"groups: \${COMPREPLY[*]}\"; exit 1; }
        COMP_WORDS=(hcctl node show \"\"); COMP_CWORD=3; _hcctl
        [ \"\${COMPREPLY[*]}\" = \"n1 n2 n3\" ] || { echo \"nodes: \${COMPREPLY[*]}\"; exit 1; }
        COMP_WORDS=(hcctl operation list --state = f); COMP_CWORD=5; _hcctl
        [ \"\${COMPREPLY[*]}\" = failed ] || { echo \"state=: \${COMPREPLY[*]}\"; exit 1; }
        COMP_WORDS=(hcctl --ca $CTL_DIR/ca.p); COMP_CWORD=2; _hcctl
        [ \"\${COMPREPLY[*]}\" = $CTL_DIR/ca.pem ] || { echo \"files: \${COMPREPLY[*]}\"; exit 1; }
        complete -p hcctl | grep -q _hcctl
    "
'

test_expect_success 'fish: complete -C runs the generated script' '
    fish --no-config -c "source $COMPLETIONS/hcctl.fish; complete -C \"hcctl cl\"" >f1 &&
    grep -q "^cluster	the cluster as a whole" f1 &&
    fish --no-config -c "source $COMPLETIONS/hcctl.fish; complete -C \"hcctl node show \"" >f2 &&
    [ "$(cut -f1 f2 | tr "\n" " ")" = "n1 n2 n3 " ] &&
    grep -q "^n1	127.0.0.2, reachable" f2 &&
    fish --no-config -c "source $COMPLETIONS/hcctl.fish; complete -C \"hcctl -o \"" | cut -f1 >f3 &&
    [ "$(tr "\n" " " <f3)" = "json text " ]
'

# zsh completes only inside its line editor: the completion system's display functions
# (_describe, _files) are stood in for by ones that print what they were given, and the
# generated _hcctl runs with zsh's own words/CURRENT.
test_expect_success 'zsh: the generated _hcctl hands the candidates to _describe' '
    zsh -f -c "
        source $COMPLETIONS/hcctl.zsh
        _describe() { print -rl -- \"\${(@P)\${@[-1]}}\" }
        _files() { print FILES }
        words=(hcctl cl); CURRENT=2; _hcctl
        words=(hcctl node show \"\"); CURRENT=4; _hcctl
        words=(hcctl --ca \"\"); CURRENT=3; _hcctl
    " >z.out &&
    grep -q "^cluster:the cluster as a whole" z.out &&
    grep -q "^n2:127.0.0.3, reachable$" z.out &&
    grep -qx FILES z.out &&
    zsh -f -c "autoload -Uz compinit && compinit -u -d $T/zcompdump && source $COMPLETIONS/hcctl.zsh && [[ \${_comps[hcctl]} == _hcctl ]]"
'

test_expect_success 'the shell on a terminal completes node names from the controller' '
    { sleep 2; printf "node show n\t\t"; sleep 2; printf "\025exit 3\r"; sleep 1; } |
        TERM=dumb XDG_STATE_HOME=$T/state script -qefc "hcctl shell" /dev/null >shell.out 2>&1
    [ $? = 3 ] &&
    grep -q "n1  *127.0.0.2, reachable" shell.out &&
    grep -q "n3  *127.0.0.4, reachable" shell.out
'

test_expect_success '/metrics: Prometheus text format (promtool), nodes, operations, latency, requests' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name prometheus --role readonly) &&
    curl -sS --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $ro" -D headers \
        "$CTL_URL/metrics" >metrics.txt &&
    grep -qi "^content-type: text/plain; version=0.0.4" headers &&
    promtool check metrics <metrics.txt &&
    grep -qx "hcctld_nodes{health=\"reachable\"} 3" metrics.txt &&
    grep -qx "hcctld_operations{state=\"succeeded\"} 2" metrics.txt &&
    grep -Eq "^hcctld_poll_cycle_seconds\{quantile=\"0.99\"\} [0-9.e+-]+$" metrics.txt &&
    grep -Eq "^hcctld_agent_poll_latency_seconds_count [1-9]" metrics.txt &&
    grep -Eq "^hcctld_api_requests_total\{method=\"DELETE\",code=\"202\"\} 2$" metrics.txt &&
    grep -Eq "^hcctld_api_requests_total\{method=\"GET\",code=\"200\"\} [1-9]" metrics.txt &&
    code=$(curl -s -o /dev/null -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" "$CTL_URL/metrics") &&
    [ "$code" = 401 ] &&
    curl -s --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $ro" "$CTL_URL/metrics" >m2 &&
    grep -Eq "^hcctld_api_requests_total\{method=\"GET\",code=\"401\"\} 1$" m2
'

test_expect_success 'errors say what to do next: did you mean, for groups, verbs, options and topics' '
    ! hcctl clustr status 2>e1 && grep -q "did you mean .cluster.?" e1 &&
    ! hcctl node lsit 2>e2 && grep -q "did you mean .list.?" e2 &&
    ! hcctl node list --outptu json 2>e3 && grep -q "did you mean .--output.?" e3 &&
    ! hcctl help exit-code 2>e4 && grep -q "did you mean .exit-codes.?" e4 &&
    NO_COLOR=1 script -qefc "hcctl node list" /dev/null </dev/null >nc.out &&
    ! grep -q "$(printf "\033")" nc.out &&
    script -qefc "hcctl node list" /dev/null </dev/null >c.out &&
    grep -q "$(printf "\033\\[32m")reachable" c.out
'

test_expect_success 'help -o json is one JSON document built from the same tables as the text' '
    hcctl help -o json >h.json &&
    hcctl help | sed -n "/^Commands:/,/^$/p" | awk "NF { print \$1 }" | grep -v "^Commands:" |
        sort -u >text.groups &&
    jq -r ".commands[].group" h.json | sort -u >json.groups && cmp text.groups json.groups &&
    [ "$(wc -l <json.groups)" -ge 10 ] &&
    jq -e ".exit_codes[5].code == 5 and (.topics | map(.name) | index(\"exit-codes\")) != null" h.json &&
    hcctl -o json node list --help | jq -e ".command == \"node list\" and .verb == \"list\"" &&
    hcctl help upgrade -o json | jq -e ".commands | map(.options[].name) | index(\"max-unavailable\")" &&
    hcctl help maintenance enter -o json |
        jq -e "(.options | map(.name) | index(\"yes\")) != null and .disruptive" &&
    hcctl help settings -o json | jq -e ".topic == \"settings\" and (.text | length) > 100" &&
    expect_exit 2 hcctl help nope -o json >nope.json && jq -e ".error.code == \"usage\"" nope.json
'

test_done
