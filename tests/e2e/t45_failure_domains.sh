#!/usr/bin/env bash
# Failure domains end to end on loopback (issue 19): hcctld, three hcagents joined by hand on
# 127.0.0.71-73, each supervising a real hcstor; hcload writing through them.
# - `node set` with a bad name, a too long one, an unknown node, a read-only token: exit 2, 2, 1,
#   3 and nothing changes; `upgrade --batch` with a bad word or more domains than there are: 2;
# - `node set n1 --failure-domain ra`: shown by node list (text and JSON), carried in the peers
#   file the agent writes and in hcstor's /health (desired state, not a side channel);
# - `upgrade --rolling --batch domain` (ra = n1+n2, n3 alone): the dry run shows the batches; under
#   hcload n1 and n2 are down together (the controller's events say so), never two domains, 0
#   failed operations, 0 lost writes;
# - three domains of one node with --max-unavailable 2: the first batch holds both replicas of
#   blocks, the service refuses the set naming such a block, and the batch goes one node at a time
#   (event rolling.batch_fallback): no two nodes down at once, nothing lost;
# - a restart-class configuration change with --batch domain goes by the same batches.
. "$(dirname "$0")/lib.sh"

need_bundles
ip() { echo "127.0.0.7$1"; }
svc() { echo "http://$(ip "$1"):7480"; }
NODES="$(ip 1):7480,$(ip 2):7480,$(ip 3):7480"
state() { curl -s --max-time 3 "$(svc "$1")/health" | jq -r .state; }
serving() { [ "$(state 1)$(state 2)$(state 3)" = servingservingserving ]; }
domain_of() { hcctl node list -o json | jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .failure_domain // "-"'; }
# max_down OP DOMAINS: the most nodes (DOMAINS=0) or failure domains (1) in maintenance at once,
# replayed from the controller's maintenance events of operation OP (domains from node list)
max_down() {
    hcctl events -o json --limit 1000 >ev.json || return 1
    hcctl node list -o json | jq -c '[.nodes[] | {key: .name, value: (.failure_domain // ("node/" + .name))}] | from_entries' >dom.json
    jq -r --arg op "$1" --slurpfile d dom.json --argjson by "$2" '
        [.events[] | select(.op_id == $op and (.type == "maintenance.entered" or .type == "maintenance.exited"))]
        | sort_by(.id) | reduce .[] as $e ({down: {}, max: 0};
            .down[$e.node] = ($e.type == "maintenance.entered")
            | .max = ([.max, ([.down | to_entries[] | select(.value) | .key | if $by == 1 then $d[0][.] else . end] | unique | length)] | max))
        | .max' ev.json
}

test_expect_success 'three nodes run hcstor 1.0' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" && agent_join n3 "$(ip 3)" &&
    wait_for 20 "[ \$(reachable_count) = 3 ]" &&
    for v in 1.0 1.1 1.3; do hcctl -q software upload "$BUNDLES/hcstor-$v.tar.gz" || exit 1; done &&
    hcctl upgrade --rolling --to 1.0 --yes >up0.out 2>&1 && track_services && wait_for 20 serving &&
    hcctl node list | grep -q "DOMAIN" && [ "$(domain_of n1)" = - ]
'

test_expect_success 'hostile node set: bad name, too long, unknown node, read-only token' '
    long=$(head -c 64 /dev/zero | tr "\0" a) &&
    expect_exit 2 hcctl node set n1 --failure-domain "Rack 1!" 2>err && grep -q "invalid failure domain" err &&
    expect_exit 2 hcctl node set n1 --failure-domain "$long" 2>err && grep -q "invalid failure domain" err &&
    expect_exit 2 hcctl node set n1 --failure-domain "-x" -o json >err.json &&
    jq -e ".error.code == \"usage\" or .error.code == \"invalid_argument\"" err.json &&
    expect_exit 2 hcctl node set n1 2>err && grep -q "nothing to set" err &&
    expect_exit 1 hcctl node set n9 --failure-domain ra 2>err && grep -q "node .n9. not found" err &&
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name ro --role readonly --ttl 10m | grep -o "hct1\.[0-9a-f.]*") &&
    expect_exit 3 hcctl --token "$ro" node set n1 --failure-domain ra 2>err && grep -q "read-only" err &&
    code=$(curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" -X PUT \
        -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" -H "Content-Type: application/json" \
        --data "{\"failure_domain\": \"ok\", \"extra\": 1}" "$CTL_URL/v1/nodes/n1/failure-domain") &&
    [ "$code" = 400 ] && jq -e ".error.code == \"invalid_argument\"" body.json &&
    [ "$(domain_of n1)" = - ] && [ "$(domain_of n2)" = - ]
'

# ctl_post PATH JSON: the controller API with the admin token; prints the HTTP status.
ctl_post() {
    curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" \
        -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" \
        -H "Content-Type: application/json" --data-binary "$2" "$CTL_URL$1"
}

test_expect_success 'hostile --failure-domain at node add / cluster create: exit 2 or 400, nothing started' '
    ops=$(hcctl operation list -o json | jq ".operations | length") &&
    expect_exit 2 hcctl node add root@127.0.0.99 --failure-domain root@127.0.0.98=ra 2>err &&
    grep -q "names no host given to this command" err &&
    expect_exit 2 hcctl node add 127.0.0.99 --failure-domain "Bad!" 2>err && grep -q "invalid failure domain" err &&
    expect_exit 2 hcctl cluster create e2e --node 127.0.0.99 --failure-domain 127.0.0.99= 2>err &&
    for case in "400:invalid_argument:{\"nodes\": [\"127.0.0.99\"], \"failure_domains\": {\"127.0.0.98\": \"ra\"}}" \
        "400:invalid_failure_domain:{\"nodes\": [\"127.0.0.99\"], \"failure_domains\": {\"127.0.0.99\": \"Bad!\"}}" \
        "400:invalid_argument:{\"nodes\": [\"127.0.0.99\"], \"failure_domains\": [\"ra\"]}" \
        "400:invalid_failure_domain:{\"nodes\": [\"127.0.0.99\"], \"failure_domains\": {\"127.0.0.99\": 7}}"; do
        want=${case%%:*} rest=${case#*:} code=${rest%%:*} body=${rest#*:}
        got=$(ctl_post /v1/nodes "$body") && [ "$got" = "$want" ] &&
        jq -e --arg c "$code" ".error.code == \$c" body.json || { echo "$body -> $got $(cat body.json)"; exit 1; }
    done &&
    [ "$(hcctl operation list -o json | jq ".operations | length")" = "$ops" ]
'

test_expect_success 'node set: shown in node list, sent to the agents, in hcstor' '
    hcctl node set n1 --failure-domain ra --yes >set.out 2>&1 &&
    hcctl node set n2 --failure-domain ra -o json >set2.json &&
    jq -e ".operation.state == \"succeeded\" and .operation.kind == \"node.set\"" set2.json &&
    [ "$(domain_of n1)" = ra ] && [ "$(domain_of n2)" = ra ] && [ "$(domain_of n3)" = - ] &&
    hcctl node list | grep -E "^n1 .* ra " &&
    hcctl node show n2 | grep -q "Domain: *ra" &&
    jq -e "[.nodes[] | select(.name == \"n1\")][0].domain == \"ra\" and
        ([.nodes[] | select(.name == \"n3\")][0] | has(\"domain\") | not)" "$T/n3/service-data/peers.json" &&
    wait_for 10 "curl -s $(svc 3)/health | jq -e \".domains == 2 and .domain == null\"" &&
    curl -s $(svc 1)/health | jq -e ".domain == \"ra\"" &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"node.failure_domain\")] | length == 2"
'

test_expect_success 'upgrade --batch: a bad word, more domains than the cluster has' '
    { expect_exit 2 hcctl upgrade --rolling --to 1.1 --batch rack --yes 2>err && grep -q "invalid --batch" err; } &&
    { expect_exit 2 hcctl upgrade --rolling --to 1.1 --batch domain --max-unavailable 3 --yes 2>err &&
      grep -q "the cluster has 2" err; } &&
    { expect_exit 2 hcctl config set log_level=debug --batch domain --max-unavailable 5 --yes 2>err &&
      grep -q "counts failure domains" err; } || { cat err; exit 1; }
'

# After a domain change every member resyncs; the poller's next look must see them healthy
# before the pre-flight checks let an upgrade start.
checks_ok() {
    hcctl cluster check -o json >check.json 2>/dev/null
    jq -e '[.checks[] | select(.severity == "error")] | length == 0' check.json >/dev/null
}

test_expect_success 'the dry run shows the batches' '
    hcctl upgrade --rolling --to 1.1 --batch domain --dry-run -o json >dry.json &&
    jq -e ".plan.batch == \"domain\" and .plan.batches == [{\"domains\": [\"ra\"], \"nodes\": [\"n1\", \"n2\"]}, {\"domains\": [\"n3\"], \"nodes\": [\"n3\"]}]" dry.json &&
    hcctl upgrade --rolling --to 1.1 --batch domain --dry-run >dry.txt && grep -q "^Batches" dry.txt
'

test_expect_success 'upgrade --batch domain under hcload: ra at once, then n3; 0 failed, 0 lost' '
    { wait_for 20 checks_ok || { jq -c ".checks[] | select(.severity == \"error\")" check.json; exit 1; }; } &&
    hcload_bg load --nodes "$NODES" --duration 300 --workers 3 --keys 60 --prefix bd &&
    sleep 2 &&
    hcctl upgrade --rolling --to 1.1 --batch domain --yes -o json >up1.json; track_services &&
    kill -INT "$(pid_of load)" && hcload_wait load; cat load.err >&2
    jq -e ".operation.state == \"succeeded\"" up1.json &&
    jq -e ".ok and .errors == 0 and .verify.lost == 0 and .corrupt_reads == 0 and .writes > 0" load.json &&
    op=$(jq -r .operation.id up1.json) &&
    hcctl events -o json --limit 1000 | jq -e --arg op "$op" "[.events[] | select(.op_id == \$op and .type == \"rolling.batch\")] | length == 2" &&
    nodes=$(max_down "$op" 0) && doms=$(max_down "$op" 1) && echo "at most $nodes nodes, $doms domains down" &&
    [ "$nodes" = 2 ] && [ "$doms" = 1 ] &&
    hcctl node list -o json | jq -e "all(.nodes[]; .software_version == \"1.1\")"
'

test_expect_success 'a batch whose set holds both replicas of blocks goes one node at a time' '
    hcctl node set n2 --failure-domain rb --yes >/dev/null 2>&1 &&
    hcctl node set n3 --failure-domain rc --yes >/dev/null 2>&1 &&
    wait_for 20 serving &&
    { wait_for 20 checks_ok || { jq -c ".checks[] | select(.severity == \"error\")" check.json; exit 1; }; } &&
    hcload_bg load2 --nodes "$NODES" --duration 300 --workers 3 --keys 60 --prefix fb &&
    sleep 2 &&
    hcctl upgrade --rolling --to 1.3 --batch domain --max-unavailable 2 --yes -o json >up2.json; track_services &&
    kill -INT "$(pid_of load2)" && hcload_wait load2; cat load2.err >&2
    jq -e ".operation.state == \"succeeded\"" up2.json &&
    jq -e ".ok and .errors == 0 and .verify.lost == 0 and .corrupt_reads == 0" load2.json &&
    op=$(jq -r .operation.id up2.json) &&
    hcctl events -o json --limit 1000 >ev2.json &&
    jq -e --arg op "$op" "[.events[] | select(.op_id == \$op and .type == \"rolling.batch_fallback\")] | length >= 1" ev2.json &&
    jq -r --arg op "$op" "[.events[] | select(.op_id == \$op and .type == \"rolling.batch_fallback\")][0].message" ev2.json | tee fb.txt &&
    grep -q "block .* has every replica in the set" fb.txt &&
    [ "$(max_down "$op" 0)" = 1 ] &&
    hcctl node list -o json | jq -e "all(.nodes[]; .software_version == \"1.3\")"
'

test_expect_success 'a restart-class config change --batch domain: the same batches, under hcload' '
    hcctl node set n2 --failure-domain ra --yes >/dev/null 2>&1 && wait_for 20 serving &&
    { wait_for 20 checks_ok || { jq -c ".checks[] | select(.severity == \"error\")" check.json; exit 1; }; } &&
    hcload_bg load3 --nodes "$NODES" --duration 300 --workers 3 --keys 60 --prefix cf &&
    sleep 2 &&
    hcctl config set fsync=batch --batch domain --yes -o json >cfg.json; track_services &&
    kill -INT "$(pid_of load3)" && hcload_wait load3; cat load3.err >&2
    jq -e ".operation.state == \"succeeded\" and .operation.kind == \"config.rolling\"" cfg.json &&
    jq -e ".ok and .errors == 0 and .verify.lost == 0 and .corrupt_reads == 0" load3.json &&
    op=$(jq -r .operation.id cfg.json) &&
    hcctl events -o json --limit 1000 | jq -e --arg op "$op" "[.events[] | select(.op_id == \$op and .type == \"rolling.batch\")] | length == 2" &&
    [ "$(max_down "$op" 0)" = 2 ] && [ "$(max_down "$op" 1)" = 1 ] &&
    for i in 1 2 3; do curl -s $(svc $i)/health | jq -e ".store.fsync == \"batch\"" || exit 1; done
'

# Batches ra (n1), rb (n2), rc (n3); n3's agent killed first: the first batch's budget counts rc
# as down, so it cannot go; rather than wait out the node timeout the operation pauses on n3, and
# resumes by itself once n3 answers again.
test_expect_success 'an agent unreachable while a batch waits for the budget: paused, resumed when back' '
    hcctl node set n2 --failure-domain rb --yes >/dev/null 2>&1 && wait_for 20 serving &&
    agent_kill n3 &&
    wait_for 20 "[ \"\$(node_health n3)\" = unreachable ]" &&
    hcctl config set fsync=always --batch domain --skip-checks=node_unreachable,service_unhealthy --yes --no-wait -o json >cfg2.json &&
    id=$(jq -r .operation.id cfg2.json) &&
    wait_for 30 "hcctl operation show $id -o json | jq -e \".operation.state == \\\"paused\\\"\"" &&
    hcctl operation show "$id" -o json >paused.json &&
    jq -r .operation.waiting_on paused.json &&
    jq -e ".operation.waiting_on | test(\"n3 is unreachable while the batch of domain\\\\(s\\\\) ra waits\")" paused.json &&
    hcctl events -o json --limit 1000 | jq -e --arg op "$id" "[.events[] | select(.op_id == \$op and .type == \"rolling.batch\")] | length == 0" &&
    hcctl maintenance status -o json | jq -e "all(.nodes[]; .maintenance == \"none\")" &&
    agent_start n3 &&
    hcctl operation wait "$id" --timeout 2m >/dev/null; track_services &&
    hcctl operation show "$id" -o json | jq -e ".operation.state == \"succeeded\"" &&
    for i in 1 2 3; do curl -s $(svc $i)/health | jq -e ".store.fsync == \"always\"" || exit 1; done
'

test_done
