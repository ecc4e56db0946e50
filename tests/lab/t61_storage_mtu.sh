#!/usr/bin/env bash
# The seed's story on the storage network (issue 15): a 3-node cluster at storage MTU 9000 runs
# hcstor-1.3, which serves and replicates on each node's storage address (its traffic crosses the
# storage bridge, not the management one). One switch port set to 1500: hcload with 64 KiB blocks
# stalls or fails, and `net check-jumbo` names that port's node (exit 4). The port back at 9000:
# the same load, 0 errors. A node whose storage interface lost its IPv4 address refuses to start
# the service, saying why; with the address back it serves again.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

BLOCK=65536
# load NAME [hcload options...]: 8 s of hcload with BLOCK-byte blocks on every member's storage
# address, the report in NAME.json (its exit status is not the verdict: the report is).
load() {
    local name=$1
    shift
    timeout 120 hcload --nodes "$(svc_nodes)" --duration 8 --workers 4 --block-size $BLOCK \
        --request-timeout 2000 --op-timeout 6000 --json --quiet "$@" >"$name.json" 2>"$name.err"
    jq -c '{ops, writes, errors, failovers, longest_stall_ms, latency_ms, verify}' "$name.json" ||
        { cat "$name.err"; return 1; }
}
# port_bytes NET: bytes the switch sent toward the three nodes on NET (mgmt or stor).
port_bytes() {
    local i sum=0 b
    for i in 1 2 3; do
        b=$(ip netns exec "$LAB_PREFIX-sw" cat "/sys/class/net/n$i-$1/statistics/tx_bytes") || return 1
        sum=$((sum + b))
    done
    echo "$sum"
}
serving() { curl -s --max-time 2 "$(stor_url "$1" /health)" | jq -e '.state == "serving" and .members == 3' >/dev/null; }
all_serving() { serving 1 && serving 2 && serving 3; }
check() { timeout 60 hcctl net check-jumbo -o json >check.json 2>check.err; echo $? >check.rc; }
note() { echo "# $*" >>"$T/notes"; }

hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name seed \
    --trust-key "$BUNDLES/dev.pub" >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up_when_free 3 --prefix hcs --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
POLL=500ms controller_start

test_expect_success 'cluster create at storage MTU 9000: each agent told its storage interface' '
    hcctl cluster create seed --node "$(node_ip 1)" --node "$(node_ip 2)" --node "$(node_ip 3)" \
        --storage-interface eth1 --accept-new-host-keys --mtu 9000 --yes >create.out 2>&1 ||
        { cat create.out; exit 1; }
    hcctl cluster status -o json | jq -e ".cluster.mtu == 9000" &&
    for i in 1 2 3; do
        lab_exec n$i cat "$AGENT_DATA/agent.json" | jq -e ".storage_interface == \"eth1\"" || exit 1
    done
'

test_expect_success 'hcstor-1.3 serves and replicates on the storage addresses only' '
    hcctl software upload "$BUNDLES/hcstor-1.3.tar.gz" >/dev/null &&
    hcctl upgrade --rolling --to 1.3 --yes >/dev/null && [ "$(versions)" = "1.3 1.3 1.3" ] &&
    wait_for 20 all_serving &&
    [ "$(svc_nodes)" = "198.18.1.11:7480,198.18.1.12:7480,198.18.1.13:7480" ] &&
    for i in 1 2 3; do
        ! curl -s --max-time 2 "http://$(node_ip $i):7480/health" || exit 1
        lab_exec n$i cat "$AGENT_DATA/service-data/peers.json" |
            jq -e "[.nodes[].host] | sort == [\"198.18.1.11\", \"198.18.1.12\", \"198.18.1.13\"]" || exit 1
    done
'

test_expect_success 'at 9000: 64 KiB blocks, 0 errors, and the bytes cross the storage bridge' '
    s0=$(port_bytes stor) && m0=$(port_bytes mgmt) &&
    load ok1 && s1=$(port_bytes stor) && m1=$(port_bytes mgmt) &&
    jq -e ".ops > 0 and .errors == 0 and .failovers == 0 and .stale_reads == 0 and .verify.ok == true" ok1.json &&
    written=$(( $(jq .writes ok1.json) * BLOCK )) &&
    echo "written $written, storage ports +$((s1 - s0)), management ports +$((m1 - m0))" &&
    note "at 9000: $(jq -c "{ops_per_sec, longest_stall_ms}" ok1.json), $written bytes written, storage ports +$((s1 - s0)), management ports +$((m1 - m0))" &&
    [ $((s1 - s0)) -ge "$written" ] && [ $((m1 - m0)) -lt $((written / 20)) ] &&
    lab_exec n1 ss -tnH state established "( sport = :7480 or dport = :7480 )" >ss.txt &&
    grep -q "198.18.1.11:[0-9]* *198.18.1.1[23]:7480" ss.txt && ! grep -q "198.18.0." ss.txt
'

lab_set_port_mtu n3 storage 1500
test_expect_success 'one switch port at 1500: hcload with 64 KiB blocks stalls or fails' '
    load bad &&
    note "port n3-stor at 1500: $(jq -c "{ops_per_sec, errors, failovers, longest_stall_ms}" bad.json)" &&
    jq -e ".errors > 0 or .failovers > 0" bad.json &&
    jq -e ".longest_stall_ms >= 1000" bad.json
'

test_expect_success 'check-jumbo names that port: exit 4, the finding on hcs-n3' '
    check; [ "$(cat check.rc)" = 4 ] &&
    jq -e "(.findings | length) == 1 and .findings[0].node == \"hcs-n3\"" check.json &&
    jq -e ".findings[0].fix | test(\"switch port toward hcs-n3\")" check.json
'

lab_set_port_mtu n3 storage 9000
test_expect_success 'the port back at 9000: the same load, 0 errors' '
    check; [ "$(cat check.rc)" = 0 ] &&
    wait_for 60 all_serving &&
    load ok2 &&
    note "port back at 9000: $(jq -c "{ops_per_sec, errors, failovers, longest_stall_ms}" ok2.json)" &&
    jq -e ".ops > 0 and .errors == 0 and .stale_reads == 0 and .corrupt_reads == 0 and .verify.lost == 0 and .verify.ok == true" ok2.json
'

AGENT=https://$(node_ip 3):7444
test_expect_success 'a storage interface without IPv4: the start is refused with the reason' '
    agent_api POST /v1/service/stop >/dev/null &&
    lab_exec n3 ip addr flush dev eth1 &&
    agent_api POST /v1/service/start >start.json; cat start.json &&
    jq -e ".error.code == \"precondition_failed\" and (.error.message | test(\"storage interface eth1 has no IPv4 address\"))" start.json &&
    agent_api GET /v1/status | jq -e ".storage_interface == \"eth1\" and .storage_host == null and (.storage_problem | test(\"no IPv4\"))" &&
    agent_api GET /v1/software | jq -e ".service.state == \"crashed\" and (.service.last_exit | test(\"no IPv4 address\"))"
'

test_expect_success 'the address back: the service starts on it and serves' '
    lab_exec n3 ip addr add 198.18.1.13/24 dev eth1 &&
    agent_api POST /v1/service/start >start.json &&
    agent_api GET /v1/status | jq -e ".storage_host == \"198.18.1.13\"" &&
    wait_for 30 all_serving
'

[ -f "$T/notes" ] && cat "$T/notes"
test_done
