#!/usr/bin/env bash
# CA rotation (docs/certificates.md "CA rotation"): `hcctld ca rotate` while three agents run
# hcstor under hcload: every node trusts both CAs, then every certificate (the agents', the
# controller's server and client) is reissued by the new CA, then the old CA is dropped from
# every node and the controller; no poll ever finds a node unreachable, hcload sees no error
# and loses nothing, the services are not restarted, hcctl keeps working (its config follows),
# and a node joined afterwards trusts the new CA. A second rotation while one runs is refused;
# hostile trust bundles are refused by the agent with its trust unchanged. Real hcctld,
# hcagent, hcstor, hcload, curl and openssl on 127.0.0.6x.
. "$(dirname "$0")/lib.sh"

need_bundles
ip() { echo "127.0.0.6$1"; }
NODES="$(ip 1):7480,$(ip 2):7480,$(ip 3):7480"
POLL=1s
hcpids() { for i in 1 2 3; do pgrep -f "hcstor --listen $(ip "$i"):7480" | head -1; done | tr '\n' ' '; }
track_services() { local p; for p in $(hcpids); do echo "$p" >"$T/pids/hcstor-$p"; done; }
# issued_by CA_FILE CERT_FILE: openssl verifies CERT with CA_FILE alone as the trust anchor
issued_by() { openssl verify -partial_chain -CAfile "$1" "$2" >/dev/null 2>&1; }
ncerts() { grep -c "BEGIN CERTIFICATE" "$1"; }
served_cert() {
    openssl s_client -connect "$1" -CAfile "$CTL_DIR/ca.pem" -cert "$CTL_DIR/client.pem" \
        -key "$CTL_DIR/client.key" </dev/null 2>/dev/null | openssl x509
}

test_expect_success 'three nodes run hcstor 1.0 under hcload' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    cp "$CTL_DIR/ca.pem" old-ca.pem &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" && agent_join n3 "$(ip 3)" &&
    wait_for 20 "[ \$(reachable_count) = 3 ]" &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl upgrade --rolling --to 1.0 --yes >up.out 2>&1 && track_services &&
    before=$(hcpids) && echo "$before" >pids.before &&
    hcload --nodes "$NODES" --json --duration 300 --workers 3 --keys 60 --prefix ca \
        --timeline tl.jsonl >load.json 2>load.err &
    echo $! >"$T/pids/load" &&
    wait_for 10 "grep -q \"\\\"ops\\\":[1-9]\" tl.jsonl"
'

test_expect_success 'the agent refuses trust bundles that are not the cluster'"'"'s' '
    AGENT=https://$(ip 1):$AGENT_PORT &&
    cp "$T/n1/ca.pem" n1-ca.before &&
    agent_api PUT /v1/cert/ca "{\"ca_pem\": \"junk\"}" | jq -e ".error.code" &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" "$T/n1/agent.pem")" | jq -e ".error.message | test(\"not a CA\")" &&
    openssl req -x509 -newkey ed25519 -nodes -keyout o.key -subj /CN=other -days 2 \
        -addext basicConstraints=critical,CA:TRUE -out other-ca.pem 2>/dev/null &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" other-ca.pem)" | jq -e ".error.code" &&
    cat old-ca.pem old-ca.pem old-ca.pem old-ca.pem old-ca.pem >five.pem &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" five.pem)" | jq -e ".error.message | test(\"more than 4\")" &&
    cmp n1-ca.before "$T/n1/ca.pem" && [ ! -e "$T/n1/ca.pem.new" ] &&
    wait_for 5 "[ \$(node_health n1) = reachable ]"
'

test_expect_success 'hcctld ca rotate: trust both, reissue everything, drop the old; nothing unreachable' '
    watch_health health.txt &&
    hcctld ca rotate --data-dir "$CTL_DIR" --timeout 2m >rotate.out 2>rotate.err &&
    stop_daemon watch KILL && cat rotate.out &&
    grep -q "^phase: reissue" rotate.out && grep -q "^phase: drop" rotate.out &&
    grep -q "^CA rotation done" rotate.out &&
    [ "$(wc -l <health.txt)" -ge 9 ] && { grep -v " reachable $" health.txt || true; } &&
    ! grep -v " reachable $" health.txt | grep -iE "certificate|tls|ssl|handshake|verif" &&
    [ "$(ncerts "$CTL_DIR/ca.pem")" = 1 ] && ! cmp -s old-ca.pem "$CTL_DIR/ca.pem" &&
    for i in 1 2 3; do
        cmp "$CTL_DIR/ca.pem" "$T/n$i/ca.pem" && issued_by "$CTL_DIR/ca.pem" "$T/n$i/agent.pem" &&
        served_cert "$(ip $i):$AGENT_PORT" >served.pem && issued_by "$CTL_DIR/ca.pem" served.pem || exit 1
    done &&
    issued_by "$CTL_DIR/ca.pem" "$CTL_DIR/server.pem" && issued_by "$CTL_DIR/ca.pem" "$CTL_DIR/client.pem" &&
    ! issued_by old-ca.pem "$CTL_DIR/server.pem" &&
    openssl s_client -connect "127.0.0.1:$CTL_PORT" -CAfile "$CTL_DIR/ca.pem" </dev/null 2>/dev/null | grep -q "Verify return code: 0" &&
    [ ! -e "$CTL_DIR/ca-keys" ] && openssl x509 -in "$CTL_DIR/ca.pem" -noout -pubkey >ca.pub &&
    openssl pkey -in "$CTL_DIR/ca.key" -pubout | cmp - ca.pub &&
    hcctl node list >/dev/null && hcctl -o json cluster status | jq -e ".certificates.rotation == null" &&
    hcctl events -o json | jq -e "[.events[].type] | (index(\"ca.rotation_started\") != null) and (index(\"ca.rotated\") != null) and ([.[] | select(. == \"ca.rotation_phase\")] | length == 2)" &&
    [ "$(hcpids)" = "$(cat pids.before)" ]
'

test_expect_success 'hcload saw no error and lost nothing through the rotation' '
    kill -INT "$(pid_of load)" && wait "$(pid_of load)"; rm -f "$T/pids/load"; cat load.err >&2
    jq -e ".ok and .errors == 0 and .verify.lost == 0 and .corrupt_reads == 0 and .writes > 0" load.json
'

test_expect_success 'a node joined after the rotation trusts the new CA' '
    agent_join n4 "$(ip 4)" && wait_for 20 "[ \$(reachable_count) = 4 ]" &&
    cmp "$CTL_DIR/ca.pem" "$T/n4/ca.pem" && issued_by "$CTL_DIR/ca.pem" "$T/n4/agent.pem"
'

test_expect_success 'a second rotation while one runs is refused; status names the phase' '
    hcctld ca rotate --data-dir "$CTL_DIR" --no-wait >r2.out &&
    ! hcctld ca rotate --data-dir "$CTL_DIR" --no-wait 2>r3.err && grep -q "under way" r3.err &&
    hcctld ca status --data-dir "$CTL_DIR" | grep -E "^phase: (trust|reissue|drop)" &&
    hcctl -o json cluster status | jq -e ".certificates.rotation.phase | type == \"string\"" &&
    wait_for 60 "hcctld ca status --data-dir \"$CTL_DIR\" | grep -q \"no CA rotation\"" &&
    for i in 1 2 3 4; do cmp "$CTL_DIR/ca.pem" "$T/n$i/ca.pem" || exit 1; done &&
    wait_for 10 "[ \$(reachable_count) = 4 ]"
'

test_done
