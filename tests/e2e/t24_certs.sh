#!/usr/bin/env bash
# Certificates (docs/certificates.md): agents' certificates issued for 15 s renew on their own
# over the agent API (a new key on the node, a CSR, the controller signs, the agent serves it
# from the next connection, the old serial is revoked), with the node reachable at every poll;
# an agent whose certificate ended while it was stopped is reported expired with the command
# that recovers it, and that command does; the expiry is in cluster status, node show and
# /metrics; the agent refuses certificates that are not for its pending key, its name or the
# cluster CA; the renew-cert route refuses callers without an admin token. Real hcctld,
# hcagent, curl and openssl on 127.0.0.2-3.
. "$(dirname "$0")/lib.sh"

N1=https://127.0.0.2:$AGENT_PORT
N2=https://127.0.0.3:$AGENT_PORT
POLL=1s
serial() { hcctl node show "$1" -o json | jq -r .node.cert_serial; }
# served URL: the serial of the certificate the agent serves to a new connection (lowercase hex)
served() {
    openssl s_client -connect "${1#https://}" -CAfile "$CTL_DIR/ca.pem" -cert "$CTL_DIR/client.pem" \
        -key "$CTL_DIR/client.key" </dev/null 2>/dev/null | openssl x509 -noout -serial |
        sed 's/^serial=//' | tr 'A-F' 'a-f'
}
# revoked SERIAL: the revocation list names it (openssl prints it in capitals, maybe without
# the leading zero bytes)
revoked() { openssl crl -in "$CTL_DIR/crl.pem" -noout -text | grep -qi "serial number: 0*$(sed 's/^0*//' <<<"$1")\$"; }

test_expect_success 'a lifetime below 15 s is refused (exit 2)' '
    controller_init &&
    expect_exit 2 hcctld run --data-dir "$CTL_DIR" --agent-cert-lifetime 5s &&
    expect_exit 2 hcctld run --data-dir "$CTL_DIR" --agent-cert-lifetime 1.5m
'

test_expect_success 'agents enroll with 15 s certificates; their expiry is shown' '
    controller_start --agent-cert-lifetime 15s &&
    agent_join n1 127.0.0.2 && agent_join n2 127.0.0.3 &&
    wait_for 10 "[ \$(reachable_count) = 2 ]" &&
    hcctl node show n1 -o json | jq -e ".node.cert_state == \"valid\" and (.node.cert_not_after | type) == \"string\"" &&
    hcctl -o json cluster status | jq -e ".certificates.agents.total == 2 and .certificates.earliest.certificate == \"agent\" and .certificates.earliest.seconds_left <= 15 and .certificates.ca.state == \"valid\"" &&
    hcctl cluster status | grep -E "^First cert to end: +agent n[12]," &&
    curl -sS --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" \
        "$CTL_URL/metrics" >metrics.txt &&
    grep -E "^hcctld_certificate_expiry_timestamp_seconds\{certificate=\"agents\"\} [0-9]{10}" metrics.txt &&
    grep -E "^hcctld_agent_certificates\{state=\"valid\"\} 2" metrics.txt
'

test_expect_success 'certificates renew on their own, the nodes reachable at every poll' '
    s1=$(serial n1) && s2=$(serial n2) &&
    watch_health health.txt &&
    wait_for 25 "[ \"\$(serial n1)\" != $s1 ] && [ \"\$(serial n2)\" != $s2 ]" &&
    sleep 1 && stop_daemon watch KILL &&
    ! grep -v " reachable $" health.txt && [ "$(grep -c "^n1 " health.txt)" -gt 20 ] &&
    revoked "$s1" && revoked "$s2" &&
    wait_for 5 "[ \"\$(served $N1)\" = \"\$(serial n1)\" ]" &&
    [ "$(openssl x509 -in "$T/n1/agent.pem" -noout -serial | sed s/^serial=// | tr A-F a-f)" = "$(served $N1)" ] &&
    openssl x509 -in "$T/n1/agent.pem" -noout -pubkey >new.pub &&
    openssl pkey -in "$T/n1/agent.key" -pubout >key.pub && cmp new.pub key.pub &&
    [ ! -e "$T/n1/agent.key.next" ] && [ "$(stat -c %a "$T/n1/agent.key")" = 600 ] &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"cert.renewed\")] | length >= 2" &&
    grep -q "certificate renewed: serial" "$T/n1.log" &&
    hcctl node show n1 -o json | jq -e ".node.cert_state == \"valid\" or .node.cert_state == \"renewing\""
'

test_expect_success 'the agent refuses certificates that are not for it' '
    AGENT=$N1 &&
    agent_api POST /v1/cert/install "{\"cert_pem\": \"junk\"}" | jq -e ".error.code" &&
    agent_api POST /v1/cert/csr | jq -r .csr_pem >n1.csr && grep -q "BEGIN CERTIFICATE REQUEST" n1.csr &&
    openssl req -x509 -newkey ed25519 -nodes -keyout other.key -subj /CN=other-ca -days 1 -out other-ca.pem 2>/dev/null &&
    openssl x509 -req -in n1.csr -CA other-ca.pem -CAkey other.key -set_serial 7 -days 1 -out foreign.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" foreign.pem)" | jq -e ".error.code" &&
    openssl x509 -req -in n1.csr -CA "$CTL_DIR/ca.pem" -CAkey "$CTL_DIR/ca.key" -subj /CN=n2 -set_serial 8 -days 1 -out wrongname.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" wrongname.pem)" | jq -e ".error.message | test(\"names .n2., not this node\")" &&
    openssl req -new -newkey ed25519 -nodes -keyout stray.key -subj /CN=n1 -out stray.csr 2>/dev/null &&
    openssl x509 -req -in stray.csr -CA "$CTL_DIR/ca.pem" -CAkey "$CTL_DIR/ca.key" -set_serial 9 -days 1 -out otherkey.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" otherkey.pem)" | jq -e ".error.message | test(\"not for the key\")" &&
    wait_for 5 "[ \"\$(served $N1)\" = \"\$(serial n1)\" ]" &&
    [ "$(node_health n1)" = reachable ]
'

test_expect_success 'renew-cert needs an admin token (not a read-only one, not a join token); an unknown node is 404' '
    [ "$(curl -sS -o /dev/null -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" -X POST "$CTL_URL/v1/nodes/n1/renew-cert")" = 401 ] &&
    ro=$(hcctl token create viewer --role readonly) &&
    [ "$(curl -sS -o /dev/null -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $ro" -X POST "$CTL_URL/v1/nodes/n1/renew-cert")" = 403 ] &&
    jt=$(hcctl cluster join-token --ttl 5m) &&
    [ "$(curl -sS -o /dev/null -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $jt" -X POST "$CTL_URL/v1/nodes/n1/renew-cert")" = 401 ] &&
    expect_exit 1 hcctl node renew-cert nosuch 2>err && grep -q "not found" err
'

test_expect_success 'a certificate that ended while its agent was stopped: reported, then renewed by hand' '
    kill -STOP "$(pid_of n2)" &&
    na=$(hcctl node show n2 -o json | jq -r .node.cert_not_after) &&
    wait_for 25 "[ \$(date +%s) -gt \$(date -d $na +%s) ]" &&
    kill -CONT "$(pid_of n2)" &&
    wait_for 10 "hcctl node show n2 -o json | jq -e \".node.cert_state == \\\"expired\\\" and .node.health == \\\"unreachable\\\"\"" &&
    wait_for 10 "hcctl node show n2 -o json | jq -e \".node.health_detail | test(\\\"certificate expired at .*renew it with .hcctl node renew-cert n2.\\\")\"" &&
    hcctl -o json cluster status | jq -e ".certificates.agents.expired == 1" &&
    hcctl cluster check -o json | jq -e "[.checks[] | select(.id == \"cert_expiring\" and .node == \"n2\" and .severity == \"error\" and (.remedy | test(\"hcctl node renew-cert n2\")))] | length == 1" &&
    wait_for 10 "hcctl events -o json | jq -e \"[.events[] | select(.type == \\\"cert.expired\\\" and .node == \\\"n2\\\")] | length == 1\"" &&
    old=$(hcctl node show n2 -o json | jq -r .node.cert_serial) &&
    hcctl node renew-cert n2 >renew.out && grep -q "node n2: certificate renewed: serial [0-9a-f]\{32\}, valid until 20" renew.out &&
    new=$(hcctl node show n2 -o json | jq -r .node.cert_serial) && [ "$new" != "$old" ] && grep -q "$new" renew.out &&
    wait_for 10 "[ \$(node_health n2) = reachable ]" &&
    hcctl node show n2 -o json | jq -e ".node.cert_state != \"expired\""
'

test_done
