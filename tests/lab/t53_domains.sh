#!/usr/bin/env bash
# Failure domains on a 12-node namespace lab in 4 domains of 3 (issue 19): the domains given at
# cluster create (HOST=DOMAIN) reach every hcstor through the storage peers; every block's two
# replicas are in distinct domains (the block files on the nodes); `upgrade --batch domain` under
# hcload takes a whole domain at a time — three services down together, never two domains, as
# both the controller's events and the agents' own service histories show — with 0 failed
# operations and 0 lost writes; a set holding both replicas of a block is refused with the block
# named; hcctld killed with SIGKILL mid-batch resumes and still never has two domains down.
# Kept short for CI (about a minute); bench/domains.sh has the wall-time comparison.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"
NODES=12
dom() { echo "r$(( ($1 - 1) / 3 + 1 ))"; } # node i -> its rack: n1-n3 r1, n4-n6 r2, ...
all_on() { [ "$(versions)" = "$(printf "$1 %.0s" $(seq $NODES) | sed "s/ $//")" ]; }
agent_api() { # NODE METHOD PATH
    agent_call "$(hcctl node show "$1" -o json | jq -r .node.agent_url)" "$2" "$3"
}

# The most failure domains with a node down at once, replayed from the agents' service
# histories between $1 and $2 (a service is down from started/stopped/exited/crashed until
# running), and from the controller's maintenance events.
domains_down_histories() {
    histories | jq -s --argjson since "$1" --argjson until "$2" '
        sort_by(.ts_ms) | reduce .[] as $e ({down: {}, max: 0};
            (if $e.event == "adopted" then . else .down[$e.node] = ($e.event != "running") end)
            | if $e.ts_ms >= $since and $e.ts_ms <= $until
              then .max = ([.max, ([.down | to_entries[] | select(.value) | .key
                  | ltrimstr("hcd-n") | tonumber | (. - 1) / 3 | floor] | unique | length)] | max)
              else . end)
        | .max'
}
domains_down_events() {
    hcctl events --type maintenance.entered --limit 1000 -o json >ent.json &&
    hcctl events --type maintenance.exited --limit 1000 -o json >exi.json &&
    jq -s '[.[0].events[] | {id, node, in: true}] + [.[1].events[] | {id, node, in: false}]
           | sort_by(.id) | reduce .[] as $e ({in: {}, max: 0};
               .in[$e.node] = $e.in
               | .max = ([.max, ([.in | to_entries[] | select(.value) | .key | ltrimstr("hcd-n")
                   | tonumber | (. - 1) / 3 | floor] | unique | length)] | max))
           | .max' ent.json exi.json
}
# spread: every block file is on exactly 2 nodes of distinct domains (read on the nodes)
spread() {
    local i
    for i in $(seq $NODES); do
        lab_exec "n$i" ls "$AGENT_DATA/service-data/blocks" 2>/dev/null | sed "s/$/ $(dom "$i")/"
    done | sort >holders.txt
    awk '{n[$1]++; d[$1] = d[$1] " " $2} END {for (k in n) print k, n[k], d[k]}' holders.txt >per_block.txt
    echo "$(wc -l <per_block.txt) blocks"
    awk '$2 != 2 || $3 == $4 {print "bad:", $0; bad = 1} END {exit bad}' per_block.txt
}

# figure COMMAND...: runs it; its output also goes to the figures printed at the end (TAP comments)
figure() {
    local rc
    "$@" >fig.out 2>&1
    rc=$?
    cat fig.out && cat fig.out >>"$T/figures.txt"
    return $rc
}

# the cluster as the issue gives it: --failure-domain HOST=DOMAIN at create
hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name dom \
    --trust-key "$BUNDLES/dev.pub" >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up_when_free $NODES --prefix hcd --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
POLL=500ms controller_start
args=()
for i in $(seq $NODES); do args+=(--node "198.18.0.$((10 + i))" --failure-domain "198.18.0.$((10 + i))=$(dom "$i")"); done

test_expect_success 'cluster create with a failure domain per node; node list shows them' '
    hcctl cluster create dom "${args[@]}" --storage-interface eth1 --accept-new-host-keys >create.out 2>&1 &&
    hcctl node list -o json | jq -e "[.nodes[] | .failure_domain] | group_by(.) | map(length) == [3, 3, 3, 3]" &&
    hcctl node list -o json | jq -e "all(.nodes[]; .failure_domain == (\"r\" + (((.name | ltrimstr(\"hcd-n\") | tonumber) - 1) / 3 | floor + 1 | tostring)))"
'

test_expect_success 'install 1.0 a domain at a time; hcstor knows its domain; blocks in two domains' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    slow_bundle 1.4 &&
    hcctl upgrade --rolling --to 1.0 --batch domain --dry-run -o json | jq -e ".plan.batches | length == 4 and all(.[]; .nodes | length == 3)" &&
    hcctl upgrade --rolling --to 1.0 --batch domain --yes >/dev/null && all_on 1.0 &&
    curl -s "$(stor_url 5 /health)" | jq -e ".domain == \"r2\" and .domains == 4 and .members == 12" &&
    lab_exec n1 cat "$AGENT_DATA/service-data/peers.json" | jq -e "[.nodes[].domain] | unique == [\"r1\",\"r2\",\"r3\",\"r4\"]" &&
    load_start fill && sleep 3 && load_stop fill && spread
'

test_expect_success 'a set holding both replicas of a block is refused, the block named' '
    b=$(awk "\$3 == \"r1\" && \$4 == \"r2\" {print \$1; exit}" per_block.txt) && [ -n "$b" ] &&
    h=$(grep "^$b " holders.txt | wc -l) && [ "$h" = 2 ] &&
    on=$(for i in $(seq $NODES); do lab_exec "n$i" test -f "$AGENT_DATA/service-data/blocks/$b" && echo "hcd-n$i"; done | tr "\n" " ") &&
    set -- $on && echo "block $b on $1 and $2" &&
    agent_api "$1" GET "/v1/service/ok-to-stop?nodes=$1,$2" >refused.json && cat refused.json &&
    jq -e ".ok_to_stop == false and .set == true and .set_blocks > 0 and (.reason | test(\"has every replica in the set\"))" refused.json &&
    agent_api hcd-n1 GET "/v1/service/ok-to-stop?nodes=hcd-n1,hcd-n2,hcd-n3" | jq -e ".ok_to_stop and .set"
'

# 1.4 is hcstor that takes 2 s to start (upgrade_lib.sh slow_bundle): a node's restart surely
# spans its batch mates' stops, so the histories show the whole domain down together.
test_expect_success '1.0 -> 1.4 --batch domain under hcload: a domain at a time, never two; 0 failed, 0 lost' '
    load_start u1 && sleep 2 &&
    t0=$(now_ms) && hcctl upgrade --rolling --to 1.4 --batch domain --yes >/dev/null && t1=$(now_ms) &&
    sleep 1 && figure load_stop u1 && all_on 1.4 &&
    n=$(max_down_from_histories "$t0" "$t1") && d=$(domains_down_histories "$t0" "$t1") &&
    e=$(domains_down_events) && m=$(max_down_from_events) &&
    figure echo "1.0 -> 1.4 by domains: services down at once: $n (histories), $m (events); domains down at once: $d (histories), $e (events); $((t1 - t0)) ms" &&
    [ "$n" = 3 ] && [ "$m" = 3 ] && [ "$d" = 1 ] && [ "$e" = 1 ] &&
    id=$(up_id) && hcctl events --type rolling.batch --limit 100 -o json |
        jq -e --arg id "$id" "[.events[] | select(.op_id == \$id)] | length == 4"
'


test_expect_success 'hcctld SIGKILLed mid-batch resumes; never two domains down, nothing lost' '
    load_start u2 && t0=$(now_ms) &&
    hcctl upgrade --rolling --to 1.0 --batch domain --yes --no-wait >/dev/null && id=$(up_id) &&
    kill_when "$id" "$(step_seen hcd-n5 stop)" "$(step_seen hcd-n8 activate)" &&
    hcctl operation wait "$id" --timeout 5m >/dev/null && t1=$(now_ms) &&
    sleep 1 && figure load_stop u2 && all_on 1.0 &&
    d=$(domains_down_histories "$t0" "$t1") && e=$(domains_down_events) &&
    figure echo "1.4 -> 1.0 by domains, hcctld killed twice: domains down at once: $d (histories), $e (events)" &&
    [ "$d" = 1 ] && [ "$e" = 1 ] &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")"
'

[ -f "$T/figures.txt" ] && sed 's/^/# /' "$T/figures.txt"
test_done
