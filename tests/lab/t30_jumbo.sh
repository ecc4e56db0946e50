#!/usr/bin/env bash
# Jumbo frames made safe (issue 4) on the namespace lab: `net check-jumbo` proves every directed
# pair and names what is wrong (a node's interface, the switch port toward a node, a 9000/8982
# mismatch, a routed hop, a non-jumbo switch) and never reports a path MTU the kernel merely
# cached; cluster create and node add end with that check; `net set-mtu` has a change that
# breaks connectivity reverted at once when the agent answers, and by the agent itself when the
# change cut it off, reports it, sets back the nodes it changed, proves the paths of nodes
# already at the MTU, and updates the cluster MTU only when every node confirmed; bad MTU values
# and a one-node check are usage errors; `net show` and `net bench` (a blackholed pair fails).
. "$(dirname "$0")/lab_test.sh"

# api GET PATH: the controller's raw answer (for what hcctl does not print, e.g. stored results).
api() {
    curl -sS --max-time 10 --cacert "$CTL_DIR/ca.pem" \
        -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" -X "$1" "$CTL_URL$2" \
        ${3:+-H "Content-Type: application/json" --data "$3"}
}
# check: net check-jumbo -o json into check.json, its exit code into check.rc.
check() { timeout 60 hcctl net check-jumbo -o json >check.json 2>check.err; echo $? >check.rc; }
finding() { jq -e "$1" check.json >/dev/null || { cat check.json; return 1; }; }
# pairs_touching NODE RESULT: every pair from or to NODE has RESULT, every other pair is ok.
pairs_touching() {
    finding "[.pairs[] | select(.from == \"$1\" or .to == \"$1\") | .result == \"$2\"] | all" &&
    finding "[.pairs[] | select(.from != \"$1\" and .to != \"$1\") | .result == \"ok\"] | all"
}
mtu_of() { lab_exec "$1" cat /sys/class/net/eth1/mtu; }
# note TEXT: a measured figure, printed at the end (a passing test's output is not shown).
note() { echo "# $*" >>"$T/notes"; }

hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name lab \
    >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up_when_free 4 --prefix hcj --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
controller_start

test_expect_success 'cluster create with --mtu 9000 ends with a passing jumbo check' '
    hcctl cluster create lab --node "$(node_ip 1)" --node "$(node_ip 2)" --node "$(node_ip 3)" \
        --storage-interface eth1 --accept-new-host-keys --mtu 9000 --yes &&
    id=$(hcctl operation list -o json | jq -r ".operations[0].id") &&
    api GET "/v1/operations/$id/result" >res.json &&
    jq -e ".result.net_check.passed == true and .result.net_check.summary.pairs == 6" res.json &&
    hcctl cluster status -o json | jq -e ".cluster.mtu == 9000"
'

lab_set_node_mtu n4 storage 1500
test_expect_success 'node add of a 1500 node: joined, but the operation fails naming it' '
    hcctl node add "$(node_ip 4)" --storage-interface eth1 --accept-new-host-keys --yes 2>err; rc=$?
    cat err; [ $rc = 1 ] &&
    grep -q "jumbo frame check at MTU 9000 failed" err && grep -q "eth1 on hcj-n4 has MTU 1500" err &&
    grep -q "hcctl net set-mtu 9000" err &&
    [ "$(node_health hcj-n4)" = reachable ] &&
    hcctl operation list -o json | jq -e ".operations[0].kind == \"node.add\" and .operations[0].state == \"failed\""
'

test_expect_success 'net show: storage interface and MTU per node, the odd one flagged' '
    hcctl net show -o json >show.json &&
    jq -e ".mtu == 9000 and (.nodes | length) == 4" show.json &&
    jq -e "[.nodes[] | .interface == \"eth1\"] | all" show.json &&
    jq -e ".nodes[] | select(.name == \"hcj-n4\") | .mtu == 1500 and .mtu_matches == false and (.problem | test(\"1500\"))" show.json &&
    jq -e ".nodes[] | select(.name == \"hcj-n1\") | .mtu == 9000 and .mtu_matches == true and .problem == null and (.addresses | index(\"198.18.1.11/24\"))" show.json &&
    hcctl net show >show.txt && grep "hcj-n4" show.txt | grep -q "1500 (cluster 9000) !"
'
lab_set_node_mtu n4 storage 9000

test_expect_success 'all at 9000: every directed pair passes, exit 0' '
    check; [ "$(cat check.rc)" = 0 ] &&
    finding ".passed == true and .mtu == 9000 and .payload_bytes == 8972" &&
    finding "(.pairs | length) == 12 and ([.pairs[] | .result == \"ok\" and .path_mtu == 9000] | all)" &&
    finding "(.findings | length) == 0" &&
    finding "[.nodes[] | .interface == \"eth1\" and .mtu == 9000 and .ok == true] | all" &&
    hcctl net check-jumbo >check.txt && grep -q "PASSED" check.txt && grep -q "FROM" check.txt
'

# A frozen agent accepts TCP (the kernel does) and never finishes TLS: the connect timeout (3 s at
# most for agents) fires long before the probe request's own (12 s). The finding states the
# timeout that fired, not the request's.
test_expect_success 'a frozen agent: its finding states the timeout really in force' '
    sup=$(lab_exec n4 cat /run/hcctl/hcagent.pid) && worker=$(pgrep -P "$sup") &&
    kill -STOP $worker &&
    t0=$(date +%s%N); check; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    kill -CONT $worker
    jq .findings check.json
    [ "$(cat check.rc)" = 4 ] &&
    said=$(jq -r ".findings[] | select(.node == \"hcj-n4\") | .message | capture(\"timed out after (?<ms>[0-9]+) ms\").ms" check.json) &&
    note "frozen agent: check-jumbo took $ms ms, its finding says timed out after $said ms" &&
    [ -n "$said" ] && [ "$said" -le "$ms" ] && [ "$said" -lt 12000 ]
'

lab_set_node_mtu n2 storage 1500
test_expect_success 'one node interface at 1500: that node named, with the fix' '
    check; [ "$(cat check.rc)" = 4 ] &&
    finding ".passed == false and (.findings | length) == 1" &&
    finding ".findings[0] | .severity == \"error\" and .scope == \"node\" and .node == \"hcj-n2\"" &&
    finding ".findings[0].message | test(\"eth1 on hcj-n2 has MTU 1500\")" &&
    finding ".findings[0].fix | test(\"set eth1 MTU on hcj-n2 to 9000: hcctl net set-mtu 9000\")" &&
    finding "[.pairs[] | select(.from == \"hcj-n2\") | .result == \"frag_needed\" and .path_mtu == 1500] | all" &&
    finding ".nodes[] | select(.name == \"hcj-n2\") | .ok == false and .mtu == 1500" &&
    finding "[.pairs[] | select(.to == \"hcj-n2\") | .result == \"blackhole\"] | all" &&
    finding "[.pairs[] | select(.from != \"hcj-n2\" and .to != \"hcj-n2\") | .result == \"ok\"] | all"
'

test_expect_success '--failures-only: only the 6 failing pairs, the summary still counts 12; text lists them' '
    { timeout 60 hcctl net check-jumbo --failures-only -o json >fo.json; [ $? = 4 ]; } &&
    jq -e ".failures_only == true and (.pairs | length) == 6 and .summary.pairs == 12" fo.json &&
    jq -e "[.pairs[] | .from == \"hcj-n2\" or .to == \"hcj-n2\"] | all" fo.json &&
    jq -e "(.findings | length) == 1 and .findings[0].node == \"hcj-n2\"" fo.json &&
    { hcctl net check-jumbo --failures-only >fo.txt; [ $? = 4 ]; } &&
    grep -q "Failing pairs, 6 of 12" fo.txt && grep -q "hcj-n2 .*frag_needed 1500" fo.txt
'
lab_set_node_mtu n2 storage 9000

lab_set_port_mtu n2 storage 1500
test_expect_success 'switch port toward a node at 1500: blackhole, that node named' '
    check; [ "$(cat check.rc)" = 4 ] &&
    pairs_touching hcj-n2 blackhole &&
    finding "(.findings | length) == 1 and .findings[0].scope == \"node\" and .findings[0].node == \"hcj-n2\"" &&
    finding ".findings[0].message | test(\"vanish while small probes pass\")" &&
    finding ".findings[0].fix | test(\"switch port toward hcj-n2\")" &&
    finding "[.pairs[] | select(.to == \"hcj-n2\") | .largest_ok >= 1500 and .largest_ok <= 1504] | all" &&
    finding ".nodes[] | select(.name == \"hcj-n2\") | .ok == true"
'
lab_set_port_mtu n2 storage 9000

lab_set_node_mtu n2 storage 8982
test_expect_success '9000 against 8982: a mismatch with path MTU about 8982' '
    check; [ "$(cat check.rc)" = 4 ] &&
    finding "(.findings | length) == 1 and .findings[0].node == \"hcj-n2\" and (.findings[0].message | test(\"8982\"))" &&
    finding "[.pairs[] | select(.from == \"hcj-n2\" or .to == \"hcj-n2\") | .result != \"ok\" and .path_mtu >= 8982 and .path_mtu <= 8986] | all"
'
lab_set_node_mtu n2 storage 9000

lab_route_node n3 --mtu 1500 >"$T/route.log" 2>&1
# Proxy ARP answers after up to 0.8 s (proxy_delay): wait until the routed path carries small
# packets between n3 and every other node, both ways, as it would on a settled network.
routed_ready() {
    local i
    for i in 1 2 4; do
        lab_exec n$i ping -c 1 -W 1 198.18.1.13 && lab_exec n3 ping -c 1 -W 1 "198.18.1.1$i" || return 1
    done
}
wait_for 15 routed_ready
test_expect_success 'a routed hop at 1500: frag_needed 1500, the routed node named' '
    check; [ "$(cat check.rc)" = 4 ] &&
    finding "[.pairs[] | select(.from == \"hcj-n3\" or .to == \"hcj-n3\") | .result == \"frag_needed\" and .path_mtu == 1500] | all" &&
    finding "(.findings | length) == 1 and .findings[0].scope == \"node\" and .findings[0].node == \"hcj-n3\"" &&
    finding ".findings[0].message | test(\"fragmentation needed\") and test(\"MTU 1500\")" &&
    finding ".findings[0].fix | test(\"router\")"
'

# The hop is fixed (raised to 9000) without anyone flushing the nodes' route caches: the kernel
# keeps the 1500 it learnt for ~10 minutes. The agents flush before they probe, so the check
# measures the path as it is now instead of reporting the cached value as frag_needed.
lab_route_node n3 --mtu 9000 >>"$T/route.log" 2>&1
test_expect_success 'a routed hop raised to 9000: passes at once, no stale cached path MTU' '
    lab_exec n1 ip route get 198.18.1.13 >route.txt; cat route.txt; grep -q "mtu 1500" route.txt &&
    check; [ "$(cat check.rc)" = 0 ] &&
    finding ".passed == true and ([.pairs[] | .result == \"ok\"] | all)"
'
lab_unroute_node n3 >>"$T/route.log" 2>&1

lab_set_port_mtu all storage 1500
test_expect_success 'every switch port at 1500: the fabric named, not a node' '
    check; [ "$(cat check.rc)" = 4 ] &&
    finding "[.pairs[] | .result == \"blackhole\"] | all" &&
    finding "(.findings | length) == 1 and .findings[0].scope == \"fabric\" and .findings[0].node == null" &&
    finding ".findings[0].fix | test(\"hcctl net set-mtu 1500\")" &&
    hcctl net check-jumbo >check.txt; [ $? = 4 ] && grep -q "fabric" check.txt
'

# The cluster runs at 1500 on a non-jumbo switch: raising it to 9000 cuts nodes off each other.
for n in n1 n2 n3 n4; do lab_set_node_mtu $n storage 1500; done
# The agents answer the controller (management network) while their storage paths fail: the
# controller tells the failing one to revert at once instead of waiting out --confirm-timeout.
test_expect_success 'set-mtu that breaks connectivity: reverted at once when asked, reported' '
    t0=$(date +%s%N)
    timeout 120 hcctl net set-mtu 9000 --confirm-timeout 30s --yes 2>err; rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 )); cat err
    note "set-mtu failing verification, agent reachable: exit $rc after $ms ms (confirm timeout 30 s)"
    [ $rc = 1 ] && [ $ms -lt 15000 ] &&
    grep -q "failed verification" err && grep -q "reverted eth1 to 1500 when asked" err &&
    grep -q "set back to the old MTU: hcj-n1" err && grep -q "switch ports" err &&
    for n in n1 n2 n3 n4; do [ "$(mtu_of $n)" = 1500 ] || exit 1; done &&
    hcctl events --type net.mtu -o json >ev.json &&
    jq -e "[.events[] | select(.node == \"hcj-n2\" and (.message | test(\"at the controller.s request\")))] | length == 1" ev.json &&
    jq -e "[.events[] | select(.node == \"hcj-n1\" and (.message | test(\"set back by the controller\")))] | length == 1" ev.json &&
    hcctl cluster status -o json | jq -e ".cluster.mtu == 9000" &&
    id=$(hcctl operation list -o json | jq -r ".operations[0].id") &&
    api GET "/v1/operations/$id/result" >res.json &&
    jq -e ".operation.state == \"failed\" and .result.changes[\"hcj-n2\"].state == \"reverted\" and .result.changes[\"hcj-n1\"].state == \"rolled_back\"" res.json
'

# The change cuts n2 off from the controller (here: its management link goes down as soon as its
# MTU changed), so nothing can reach its agent: the agent reverts by itself at the deadline, the
# controller cannot ask for the revert, learns of it once n2 is back, and reports it.
test_expect_success 'set-mtu that cuts a node off from the controller: its agent reverts by itself' '
    t0=$(date +%s%N)
    ( timeout 120 hcctl net set-mtu 9000 --confirm-timeout 3s --yes 2>err; echo $? >rc ) &
    wait_for 30 "[ \"\$(mtu_of n2)\" = 9000 ]" && t1=$(date +%s%N) &&
    lab_exec n2 ip link set eth0 down &&
    wait_for 20 "[ \"\$(mtu_of n2)\" = 1500 ]"; cut=$?
    t2=$(date +%s%N); lab_exec n2 ip link set eth0 up
    wait; cat err
    note "set-mtu with n2 cut off: n2 reverted by itself $(( (t2 - t1) / 1000000 )) ms after its change (confirm timeout 3 s); exit $(cat rc) after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    [ $cut = 0 ] && [ "$(cat rc)" = 1 ] &&
    grep -q "failed" err && grep -q "reverted eth1 to 1500 by itself" err &&
    grep -q "set back to the old MTU: hcj-n1" err &&
    for n in n1 n2 n3 n4; do [ "$(mtu_of $n)" = 1500 ] || exit 1; done &&
    hcctl events --type net.mtu -o json >ev.json &&
    jq -e "[.events[] | select(.node == \"hcj-n2\" and (.message | test(\"reverted by the agent itself\")))] | length == 1" ev.json &&
    hcctl cluster status -o json | jq -e ".cluster.mtu == 9000" &&
    id=$(hcctl operation list -o json | jq -r ".operations[0].id") &&
    api GET "/v1/operations/$id/result" >res.json &&
    jq -e ".operation.state == \"failed\" and .result.changes[\"hcj-n2\"].state == \"reverted\"" res.json
'

test_expect_success 'set-mtu updates the cluster MTU once every node confirmed' '
    hcctl net set-mtu 1500 --yes >out && hcctl cluster status -o json | jq -e ".cluster.mtu == 1500" &&
    lab_set_port_mtu all storage 9000 &&
    hcctl net set-mtu 9000 --confirm-timeout 10s --yes >out && cat out &&
    [ "$(grep -c confirmed out)" = 4 ] &&
    for n in n1 n2 n3 n4; do [ "$(mtu_of $n)" = 9000 ] || exit 1; done &&
    hcctl cluster status -o json | jq -e ".cluster.mtu == 9000" &&
    check && [ "$(cat check.rc)" = 0 ]
'

# Nothing to change is not nothing to prove: with n2's switch port back at 1500, a set-mtu to the
# MTU every node already has probes the paths among them and fails, naming n2, changing nothing.
lab_set_port_mtu n2 storage 1500
test_expect_success 'set-mtu to the MTU the nodes already have still proves their paths' '
    timeout 120 hcctl net set-mtu 9000 --confirm-timeout 10s --yes >out 2>err; rc=$?
    cat err; [ $rc = 1 ] &&
    grep -q "does not pass between the nodes already at it" err && grep -q "hcj-n2" err &&
    grep -q "nothing was changed" err && grep -q "switch port toward hcj-n2" err &&
    for n in n1 n2 n3 n4; do [ "$(mtu_of $n)" = 9000 ] || exit 1; done &&
    id=$(hcctl operation list -o json | jq -r ".operations[0].id") &&
    api GET "/v1/operations/$id/result" >res.json &&
    jq -e ".operation.state == \"failed\" and .result.unchanged_check.passed == false" res.json &&
    jq -e "[.result.unchanged_check.findings[] | select(.node == \"hcj-n2\")] | length == 1" res.json
'
lab_set_port_mtu n2 storage 9000

# Running at a tiny MTU leaves locked path MTUs in the nodes' route caches (~10 min). The agents
# flush them when they change the MTU, so raising it again works at once.
test_expect_success 'after running at MTU 68, set-mtu 9000 works at once (route caches flushed)' '
    timeout 120 hcctl net set-mtu 68 --confirm-timeout 10s --yes >out 2>err || { cat err; exit 1; }
    timeout 60 hcctl net bench --nodes hcj-n1,hcj-n2 --duration 1s >bench.txt 2>&1
    lab_exec n2 ip route get 198.18.1.11 >route.txt; cat route.txt bench.txt
    grep -q "mtu lock" route.txt &&
    timeout 120 hcctl net set-mtu 9000 --confirm-timeout 10s --yes >out 2>err; rc=$?
    cat err; [ $rc = 0 ] && [ "$(grep -c confirmed out)" = 4 ] &&
    for n in n1 n2 n3 n4; do [ "$(mtu_of $n)" = 9000 ] || exit 1; done &&
    lab_exec n2 ip route get 198.18.1.11 >route.txt && ! grep -q "mtu lock" route.txt &&
    check && [ "$(cat check.rc)" = 0 ]
'

test_expect_success 'check-jumbo with one node named is a usage error (no pair to prove)' '
    hcctl net check-jumbo --nodes hcj-n1 -o json >out 2>err; rc=$?
    cat err; [ $rc = 2 ] && grep -q "at least two nodes" err &&
    hcctl net check-jumbo --nodes hcj-n1,hcj-n2 -o json >out && jq -e ".summary.pairs == 2" out
'

test_expect_success 'MTU values 0, 67, 70000 and abc are usage errors (exit 2)' '
    for v in 0 67 70000 abc; do
        hcctl net set-mtu "$v" --yes 2>err; rc=$?
        [ $rc = 2 ] && grep -q "invalid MTU" err && grep -q "68 to 65535" err || exit 1
    done &&
    hcctl net check-jumbo --mtu 70000 2>err; [ $? = 2 ] &&
    hcctl net set-mtu 9000 </dev/null 2>err; [ $? = 2 ] && grep -q -- "--yes" err
'

test_expect_success 'the API validates too: MTU range, node names, confirm timeout' '
    ops=$(hcctl operation list -o json | jq "[.operations[] | select(.kind == \"net.set_mtu\")] | length") &&
    for body in "{\"mtu\": 67}" "{\"mtu\": 70000}" "{\"mtu\": \"abc\"}" "{}" \
                "{\"mtu\": 9000, \"confirm_timeout_ms\": 10}"; do
        api POST /v1/net/mtu "$body" >resp.json &&
        jq -e ".error.code == \"invalid_argument\"" resp.json || exit 1
    done &&
    api POST /v1/net/check "{\"nodes\": [\"hcj-n9\"]}" >resp.json &&
    jq -e ".error.code == \"not_found\" and (.error.message | test(\"hcj-n9\"))" resp.json &&
    api POST /v1/net/check "{\"mtu\": 67}" >resp.json && jq -e ".error.code == \"invalid_argument\"" resp.json &&
    api POST /v1/net/bench "{\"nodes\": [\"hcj-n1\"]}" >resp.json && jq -e ".error.code == \"invalid_argument\"" resp.json &&
    api POST /v1/net/check "{\"nodes\": [\"hcj-n1\"]}" >resp.json && jq -e ".error.code == \"invalid_argument\"" resp.json &&
    hcctl operation list -o json | jq -e "[.operations[] | select(.kind == \"net.set_mtu\")] | length == $ops"
'

test_expect_success 'net bench: TCP throughput both ways between two nodes' '
    timeout 120 hcctl net bench --nodes hcj-n1,hcj-n2 --duration 1s -o json >bench.json; rc=$?
    cat bench.json; [ $rc = 0 ] &&
    jq -e "(.pairs | length) == 2 and ([.pairs[] | .bits_per_second > 0 and .mtu == 9000] | all)" bench.json &&
    jq -e "[.pairs[] | has(\"error\")] | any | not" bench.json
'

# Behind a 1500 switch port the TCP handshake passes and full-size segments vanish: the pair
# moves (almost) nothing. That is a problem the bench found (exit 4), not a slow pair. A real
# switch drops every frame above its port's MTU; a veth lets GSO packets through whatever their
# size, so the nodes' storage links send one segment per packet here (gso_max_segs 1), as a NIC
# puts them on the wire.
lab_set_port_mtu n2 storage 1500
for n in n1 n2; do lab_exec $n ip link set dev eth1 gso_max_segs 1; done
test_expect_success 'net bench across a blackholed pair: an error for the pair, exit 4' '
    timeout 120 hcctl net bench --nodes hcj-n1,hcj-n2 --duration 1s -o json >bench.json; rc=$?
    cat bench.json; [ $rc = 4 ] &&
    jq -e "[.pairs[] | (.error | test(\"vanish on the path\")) and (.error | test(\"check-jumbo\")) and .bits_per_second < 1e6] | all" bench.json &&
    timeout 120 hcctl net bench --nodes hcj-n1,hcj-n2 --duration 1s >blackhole.txt; rc=$?
    cat blackhole.txt; [ $rc = 4 ] && grep "198.18.1.12" blackhole.txt | grep -q "check-jumbo"
'
for n in n1 n2; do lab_exec $n ip link set dev eth1 gso_max_segs 65535; done
lab_set_port_mtu n2 storage 9000

[ -f "$T/notes" ] && cat "$T/notes"
test_done
