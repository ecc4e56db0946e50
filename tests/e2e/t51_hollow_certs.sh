#!/usr/bin/env bash
# hchollow's certificate routes (docs/hollow.md, docs/certificates.md): 12 hollow identities
# whose certificates a real hcctld issues for 15 s renew on their own over the agent API (each
# identity's new key, its CSR, the controller signs, it serves the new certificate from the next
# connection), none ever unreachable; hostile installs and trust bundles are refused as hcagent
# refuses them (the same code: agents/hcagent/cert.c); `hcctld ca rotate` completes against
# them; a restarted hchollow keeps the renewed certificates and the new CA.
. "$(dirname "$0")/lib.sh"

N=12
FIRST=127.1.$((RANDOM % 200 + 20)).1
SOCK=$T/hollow.sock
# The agent timeout is the poll interval. At 1 s, a CI run (ASan, the lab tests beside it) once
# saw 9 of the 12 identities time out in one poll, connects and answers alike: the poller (or
# the machine) stalled mid fan-out, nothing a node did, since all 12 are one hchollow process.
# "Never unreachable" is about the renewals, which fail at once when they break a node.
POLL=2s
hollow_start() {
    HCHOLLOW_TOKEN=$(cat "$CTL_DIR/admin.token") hchollow --controller "$CTL_URL" \
        --ca "$CTL_DIR/ca.pem" --count $N --first-address "$FIRST" --port "$AGENT_PORT" \
        --data-dir "$T/hollow" --control "$SOCK" >>"$T/hollow.log" 2>&1 &
    echo $! >"$T/pids/hollow"
}
addr() { echo "$FIRST" | awk -F. -v i="$1" '{ print $1 "." $2 "." $3 "." $4 + i }'; } # I
dir() { printf "%s/hollow/hollow-%04d" "$T" "$1"; }                                    # I
serials() { hcctl node list -o json | jq -r '.nodes | sort_by(.name)[] | .cert_serial'; }
# served I: the serial of the certificate identity I serves to a new connection (lowercase hex)
served() {
    openssl s_client -connect "$(addr "$1"):$AGENT_PORT" -CAfile "$CTL_DIR/ca.pem" \
        -cert "$CTL_DIR/client.pem" -key "$CTL_DIR/client.key" </dev/null 2>/dev/null |
        openssl x509 -noout -serial | sed 's/^serial=//' | tr 'A-F' 'a-f'
}
# recorded I: the serial the controller records for identity I
recorded() { hcctl node show "hollow-$(printf %04d "$1")" -o json | jq -r .node.cert_serial; }
# in_step I: identity I serves, on disk and to a new connection, what the controller records
# (a renewal every 10 s: asked again until they agree)
in_step() {
    local want
    want=$(recorded "$1") && [ "$(served "$1")" = "$want" ] &&
        [ "$(openssl x509 -in "$(dir "$1")/agent.pem" -noout -serial | sed s/^serial=// | tr A-F a-f)" = "$want" ]
}
issued_by() { openssl verify -partial_chain -CAfile "$1" "$2" >/dev/null 2>&1; }
AGENT=

test_expect_success '12 identities join a controller issuing 15 s certificates' '
    controller_init && controller_start --agent-cert-lifetime 15s &&
    cp "$CTL_DIR/ca.pem" old-ca.pem &&
    hollow_start && wait_for 30 "[ \$(reachable_count) = $N ]" &&
    serials >s0 && [ "$(sort -u s0 | grep -c "^[0-9a-f]\{32\}$")" = $N ] &&
    for i in 0 11; do
        cmp "$(dir $i)/ca.pem" "$CTL_DIR/ca.pem" &&
        AGENT=https://$(addr $i):$AGENT_PORT agent_api GET /v1/status >st.json &&
        jq -e --arg s "$(sed -n "$((i + 1))p" s0)" ".cert_serial == \$s and .cert_not_after_ms > 0 and (.ca_digest | length) == 64" st.json || exit 1
    done
'

test_expect_success 'every identity renews on its own, none ever unreachable' '
    watch_health health.txt &&
    wait_for 25 "serials >s1 && ! grep -qxFf s0 s1" &&
    sleep 1 && stop_daemon watch KILL &&
    [ "$(wc -l <health.txt)" -ge $((N * 20)) ] && ! grep -v " reachable " health.txt &&
    [ "$(sort -u s1 | wc -l)" = $N ] &&
    for i in 0 5 11; do
        wait_for 5 "in_step $i" &&
        openssl x509 -in "$(dir $i)/agent.pem" -noout -pubkey >new.pub &&
        openssl pkey -in "$(dir $i)/agent.key" -pubout | cmp - new.pub &&
        [ ! -e "$(dir $i)/agent.key.next" ] && [ "$(stat -c %a "$(dir $i)/agent.key")" = 600 ] || exit 1
    done &&
    hcctl events -o json | jq -e "[.events[] | select(.type == \"cert.renewed\")] | length >= $N" &&
    grep -q "certificate renewed: serial" "$T/hollow.log"
'

test_expect_success 'a hollow identity refuses hostile certificates and trust bundles as hcagent does' '
    AGENT=https://$(addr 3):$AGENT_PORT && d=$(dir 3) &&
    cp "$d/agent.pem" pem.before && cp "$d/ca.pem" ca.before &&
    agent_api POST /v1/cert/install "{\"cert_pem\": \"junk\"}" | jq -e ".error.code" &&
    agent_api POST /v1/cert/install "{}" | jq -e ".error.code == \"invalid_argument\"" &&
    agent_api POST /v1/cert/csr | jq -r .csr_pem >h3.csr && grep -q "BEGIN CERTIFICATE REQUEST" h3.csr &&
    openssl req -x509 -newkey ed25519 -nodes -keyout other.key -subj /CN=other-ca -days 1 \
        -addext basicConstraints=critical,CA:TRUE -out other-ca.pem 2>/dev/null &&
    openssl x509 -req -in h3.csr -CA other-ca.pem -CAkey other.key -set_serial 7 -days 1 -out foreign.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" foreign.pem)" | jq -e ".error.code" &&
    openssl x509 -req -in h3.csr -CA "$CTL_DIR/ca.pem" -CAkey "$CTL_DIR/ca.key" -subj /CN=hollow-0004 \
        -set_serial 8 -days 1 -out wrongname.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" wrongname.pem)" |
        jq -e ".error.message | test(\"names .hollow-0004., not this node .hollow-0003.\")" &&
    openssl req -new -newkey ed25519 -nodes -keyout stray.key -subj /CN=hollow-0003 -out stray.csr 2>/dev/null &&
    openssl x509 -req -in stray.csr -CA "$CTL_DIR/ca.pem" -CAkey "$CTL_DIR/ca.key" -set_serial 9 -days 1 -out otherkey.pem 2>/dev/null &&
    agent_api POST /v1/cert/install "$(jq -Rs "{cert_pem: .}" otherkey.pem)" | jq -e ".error.message | test(\"not for the key\")" &&
    agent_api PUT /v1/cert/ca "{\"ca_pem\": \"junk\"}" | jq -e ".error.code" &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" "$d/agent.pem")" | jq -e ".error.message | test(\"not a CA\")" &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" other-ca.pem)" | jq -e ".error.code" &&
    cat old-ca.pem old-ca.pem old-ca.pem old-ca.pem old-ca.pem >five.pem &&
    agent_api PUT /v1/cert/ca "$(jq -Rs "{ca_pem: .}" five.pem)" | jq -e ".error.message | test(\"more than 4\")" &&
    cmp ca.before "$d/ca.pem" && [ ! -e "$d/ca.pem.new" ] && [ ! -e "$d/agent.pem.new" ] &&
    grep -q "certificate install refused: the certificate names .hollow-0004." "$T/hollow.log" &&
    wait_for 5 "[ \$(node_health hollow-0003) = reachable ]"
'

test_expect_success 'hcctld ca rotate completes against them, none ever unreachable' '
    watch_health health2.txt &&
    hcctld ca rotate --data-dir "$CTL_DIR" --timeout 1m >rotate.out 2>rotate.err &&
    stop_daemon watch KILL && cat rotate.out &&
    grep -q "^phase: reissue" rotate.out && grep -q "^phase: drop" rotate.out &&
    grep -q "^CA rotation done" rotate.out &&
    [ "$(wc -l <health2.txt)" -ge $N ] && ! grep -v " reachable " health2.txt &&
    [ "$(grep -c "BEGIN CERTIFICATE" "$CTL_DIR/ca.pem")" = 1 ] && ! cmp -s old-ca.pem "$CTL_DIR/ca.pem" &&
    for i in $(seq 0 $((N - 1))); do
        cmp "$CTL_DIR/ca.pem" "$(dir $i)/ca.pem" && issued_by "$CTL_DIR/ca.pem" "$(dir $i)/agent.pem" || exit 1
    done &&
    openssl s_client -connect "$(addr 7):$AGENT_PORT" -CAfile "$CTL_DIR/ca.pem" -cert "$CTL_DIR/client.pem" \
        -key "$CTL_DIR/client.key" </dev/null 2>/dev/null | openssl x509 >served.pem &&
    issued_by "$CTL_DIR/ca.pem" served.pem && ! issued_by old-ca.pem served.pem &&
    hcctl -o json cluster status | jq -e ".certificates.rotation == null"
'

test_expect_success 'restarted, hchollow keeps the renewed certificates and the new CA' '
    stop_daemon hollow TERM && hollow_start && hollow_serving "$SOCK" $N && grep -q "$N identities loaded" "$T/hollow.log" &&
    hcctl events --type node.joined -o json | jq -e ".events | length == $N" &&
    for i in 2 9; do
        cmp "$CTL_DIR/ca.pem" "$(dir $i)/ca.pem" && wait_for 5 "in_step $i" || exit 1
    done
'

test_done
