#!/usr/bin/env bash
# What check-jumbo does that matters at size (issue 14), on a small lab:
# - neighbour resolution as its own verdict: with the host's neighbour (ARP) table held below
#   what the lab needs, the pairs that could not resolve their peer are neighbor_unresolved, with
#   one finding that names the full table and the sysctl to raise — not a switch port, the fabric
#   or a pair; with the thresholds back, the same lab passes;
# - a large check's way (HCCTLD_TEST_NET_LARGE_CHECK_PAIRS makes 4 nodes one): compact agent
#   answers (passing pairs by index: no round trip time), every pair classified, only a few
#   blackholes searched, the bad port still named with the size it passes.
# The lab's namespaces share one kernel, whose table and thresholds (set in the root namespace)
# they all use: the management neighbours are pinned (permanent entries are never refused nor
# collected), so the controller keeps reaching its agents while the storage ones cannot resolve.
. "$(dirname "$0")/lab_test.sh"

check() { timeout 60 hcctl net check-jumbo -o json >check.json 2>check.err; echo $? >check.rc; }
finding() { jq -e "$1" check.json >/dev/null || { cat check.json check.err; return 1; }; }
KEYS="net.ipv4.neigh.default.gc_thresh1 net.ipv4.neigh.default.gc_thresh2 net.ipv4.neigh.default.gc_thresh3"

hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name lab \
    >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up_when_free 4 --prefix hcn --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
controller_start

test_expect_success 'a 4-node cluster at 9000 whose check passes' '
    hcctl cluster create lab --node "$(node_ip 1)" --node "$(node_ip 2)" --node "$(node_ip 3)" \
        --node "$(node_ip 4)" --storage-interface eth1 --accept-new-host-keys --mtu 9000 --yes &&
    check && [ "$(cat check.rc)" = 0 ] &&
    finding "[.findings[] | select(.message | test(\"neighbour\"))] | length == 0"
'

# pin_management: permanent entries for the controller <-> agents addresses, both ways.
pin_management() {
    local i mac host_mac
    host_mac=$(cat /sys/class/net/hcn-host/address)
    for i in 1 2 3 4; do
        mac=$(lab_exec "n$i" cat /sys/class/net/eth0/address) &&
        ip neigh replace "$(node_ip "$i")" lladdr "$mac" dev hcn-host nud permanent &&
        lab_exec "n$i" ip neigh replace 198.18.0.1 lladdr "$host_mac" dev eth0 nud permanent ||
            return 1
    done
}
# squeeze: the storage entries flushed and the table held at what it holds now plus 2, so that
# at most two of the twelve storage neighbours can be made.
squeeze() {
    local i k entries
    for k in $KEYS; do printf '%s=%s\n' "$k" "$(sysctl -n "$k")"; done >saved.sysctl
    for i in 1 2 3 4; do lab_exec "n$i" ip neigh flush dev eth1 || return 1; done
    # entries counted against the thresholds: every non-permanent one, in every namespace
    entries=$(for ns in "" $(ip netns list | awk "{print \$1}"); do
        ip ${ns:+-n "$ns"} -4 neigh show | grep -vc PERMANENT; done | awk "{s += \$1} END {print s}")
    echo "# $entries entries not pinned; thresholds set to $((entries + 2))" >&2
    for k in $KEYS; do sysctl -qw "$k=$((entries + 2))" || return 1; done
}
restore() { while IFS= read -r line; do sysctl -qw "$line"; done <saved.sysctl; }

test_expect_success 'a full neighbour table: neighbor_unresolved pairs and one finding naming it' '
    pin_management && squeeze &&
    check; restore
    cat check.err; jq -c ".summary, [.pairs[] | .result] | group_by(.) | map({(.[0]): length})" check.json
    [ "$(cat check.rc)" = 4 ] &&
    finding ".passed == false" &&
    finding "[.pairs[] | select(.result == \"neighbor_unresolved\")] | length >= 6" &&
    finding "[.pairs[] | select(.result == \"neighbor_unresolved\") | .detail | test(\"neighbour\")] | all" &&
    finding "[.findings[] | select(.severity == \"error\")] | length == 1" &&
    finding ".findings[0] | (.scope == \"nodes\" or .scope == \"node\") and (.message | test(\"neighbour \\\\(ARP\\\\) table\")) and (.message | test(\"not the network\"))" &&
    finding ".findings[0].fix | test(\"sysctl -w net.ipv4.neigh.default.gc_thresh1=[0-9]+ net.ipv4.neigh.default.gc_thresh2=[0-9]+ net.ipv4.neigh.default.gc_thresh3=[0-9]+\")" &&
    finding "[.findings[] | select(.scope == \"fabric\" or .scope == \"pair\" or (.fix | test(\"switch port\")))] | length == 0"
'

test_expect_success 'text output: the finding and its fix' '
    pin_management && squeeze &&
    timeout 60 hcctl net check-jumbo >check.txt 2>&1; rc=$?; restore
    cat check.txt; [ $rc = 4 ] &&
    grep -q "neighbour (ARP) table" check.txt && grep -q "gc_thresh3=" check.txt
'

test_expect_success 'thresholds back: the same lab passes again' '
    check; [ "$(cat check.rc)" = 0 ] &&
    finding ".passed == true and .summary.pairs_failed == 0"
'

# A large check's way: the controller restarted with the threshold at 2 pairs, a switch port
# toward n4 at 1500. Every pair touching n4 is a blackhole; at most 2 from and 2 toward it are
# searched (largest_ok known), the others not; the finding still names n4 and the size.
test_expect_success 'a large check searches a sample of its blackholes and still names the port' '
    controller_stop && HCCTLD_TEST_NET_LARGE_CHECK_PAIRS=2 controller_start &&
    grep -q "HCCTLD_TEST_NET_LARGE_CHECK_PAIRS=2" "$T/hcctld.log" &&
    lab_set_port_mtu n4 storage 1500 &&
    check; lab_set_port_mtu n4 storage 9000
    jq -c "[.pairs[] | select(.result != \"ok\") | {from, to, result, largest_ok}]" check.json
    [ "$(cat check.rc)" = 4 ] &&
    finding "[.pairs[] | select(.from == \"hcn-n4\" or .to == \"hcn-n4\") | .result == \"blackhole\"] | all" &&
    finding "[.pairs[] | select(.from != \"hcn-n4\" and .to != \"hcn-n4\") | .result == \"ok\" and .rtt_ms == null and .path_mtu == 9000] | all" &&
    searched=$(jq "[.pairs[] | select(.result == \"blackhole\" and .largest_ok != null)] | length" check.json) &&
    echo "# searched $searched of 6 blackholes" &&
    [ "$searched" -ge 2 ] && [ "$searched" -le 4 ] &&
    finding "[.pairs[] | select(.largest_ok != null and .result == \"blackhole\") | .largest_ok >= 1500 and .largest_ok <= 1504] | all" &&
    finding "[.findings[] | select(.severity == \"error\")] | length == 1" &&
    finding ".findings[0].scope == \"node\" and .findings[0].node == \"hcn-n4\"" &&
    finding ".findings[0].fix | test(\"switch port toward hcn-n4.*~150[0-4]-byte\")"
'

test_done
