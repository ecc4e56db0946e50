#!/usr/bin/env bash
# The spine end to end: a real hcctld, three real hcagents on 127.0.0.2-4, hcctl over HTTPS.
. "$(dirname "$0")/lib.sh"

test_expect_success 'hcctld init creates the database, CA, certificates and a 0600 admin token' '
    controller_init &&
    for f in hcctld.db ca.pem ca.key server.pem server.key client.pem client.key admin.token; do
        [ -f "$CTL_DIR/$f" ] || { echo "missing $f"; exit 1; }
    done &&
    [ "$(stat -c %a "$CTL_DIR/admin.token")" = 600 ] &&
    [ "$(stat -c %a "$CTL_DIR/ca.key")" = 600 ] &&
    [ "$(stat -c %a "$XDG_CONFIG_HOME/hcctl/config.json")" = 600 ] &&
    token=$(cat "$CTL_DIR/admin.token") &&
    ! sqlite3 "$CTL_DIR/hcctld.db" .dump | grep -qF "${token##*.}"
'

test_expect_success 'init refuses an already initialised data dir' '
    ! hcctld init --data-dir "$CTL_DIR" --listen 127.0.0.1:1 2>err &&
    grep -q "already" err
'

test_expect_success 'controller serves the API' '
    controller_start &&
    hcctl cluster status -o json | jq -e ".cluster.name == \"e2e\""
'

test_expect_success 'three agents join with one-time tokens' '
    agent_join n1 127.0.0.2 && agent_join n2 127.0.0.3 && agent_join n3 127.0.0.4 &&
    wait_for 10 "[ \$(reachable_count) = 3 ]"
'

test_expect_success 'node list -o json shows three reachable nodes with versions and last_seen' '
    hcctl node list -o json >out.json &&
    jq -e "[.nodes[].name] == [\"n1\",\"n2\",\"n3\"]" out.json &&
    jq -e "all(.nodes[]; .health == \"reachable\" and .last_seen != null and .agent_version != null)" out.json &&
    jq -e ".nodes[0].agent_url == \"https://127.0.0.2:$AGENT_PORT\"" out.json
'

test_expect_success 'node list text output is an aligned table' '
    hcctl node list >out.txt &&
    head -n1 out.txt | grep -q "NAME" &&
    [ "$(wc -l <out.txt)" = 4 ] &&
    grep -q "^n2 .*reachable" out.txt
'

test_expect_success 'node show lists interfaces read from the kernel' '
    wait_for 5 "hcctl node show n1 -o json | jq -e \"[.interfaces[].name] | index(\\\"lo\\\")\"" &&
    hcctl node show n1 -o json | jq -e ".interfaces[] | select(.name == \"lo\") | .addresses | index(\"127.0.0.1/8\")"
'

test_expect_success 'a used join token is refused' '
    token=$(hcctl cluster join-token -o json | jq -r .token) &&
    { HCAGENT_TOKEN=$token hcagent join --controller "$CTL_URL" --data-dir "$T/x1" \
        --listen 127.0.0.5:$AGENT_PORT --name x1 >x1.log 2>&1 & echo $! >"$T/pids/x1"; } &&
    wait_for 10 "[ -f $T/x1/agent.pem ]" &&
    ! HCAGENT_TOKEN=$token timeout 10 hcagent join --controller "$CTL_URL" --data-dir "$T/x2" \
        --listen 127.0.0.6:$AGENT_PORT --name x2 2>err &&
    grep -qi "invalid, used or expired" err &&
    [ ! -e "$T/x2/agent.key" ] &&
    hcctl node show x1 -o json >/dev/null && ! hcctl node show x2 -o json >/dev/null 2>&1
'

test_expect_success 'an expired join token is refused' '
    token=$(hcctl cluster join-token --ttl 1s -o json | jq -r .token) && sleep 1.5 &&
    ! HCAGENT_TOKEN=$token timeout 10 hcagent join --controller "$CTL_URL" --data-dir "$T/x3" \
        --listen 127.0.0.7:$AGENT_PORT --name x3 2>err &&
    grep -qi "invalid, used or expired" err
'

test_expect_success 'a join never trusts a controller whose CA does not match the token' '
    token=$(hcctl cluster join-token -o json | jq -r .token) &&
    forged=${token%.*}.$(printf "%064d" 0) &&
    ! HCAGENT_TOKEN=$forged timeout 10 hcagent join --controller "$CTL_URL" --data-dir "$T/x4" \
        --listen 127.0.0.8:$AGENT_PORT --name x4 2>err &&
    grep -q "pins" err && [ ! -e "$T/x4/agent.key" ]
'

test_expect_success 'hcctld run writes an empty revocation list signed by the CA' '
    [ "$(stat -c %a "$CTL_DIR/crl.pem")" = 644 ] &&
    openssl crl -in "$CTL_DIR/crl.pem" -CAfile "$CTL_DIR/ca.pem" -noout 2>&1 | grep -q "verify OK" &&
    openssl crl -in "$CTL_DIR/crl.pem" -noout -text | grep -q "No Revoked Certificates" &&
    openssl verify -crl_check -CAfile "$CTL_DIR/ca.pem" -CRLfile "$CTL_DIR/crl.pem" "$T/n1/agent.pem"
'

test_expect_success 'node remove of the extra node x1 runs an operation to the end' '
    cp "$T/x1/agent.pem" x1.pem && # the agent deletes its credentials when it leaves
    hcctl node remove x1 --yes -o json >op.json &&
    ! hcctl node show x1 >/dev/null 2>&1 &&
    hcctl operation list -o json | jq -e "[.operations[] | select(.kind == \"node.remove\" and .state == \"succeeded\")] | length == 1" &&
    sqlite3 "$CTL_DIR/hcctld.db" "select count(*) from revoked_certs where node_name = \"x1\"" | grep -qx 1 &&
    openssl verify -CAfile "$CTL_DIR/ca.pem" x1.pem &&
    ! openssl verify -crl_check -CAfile "$CTL_DIR/ca.pem" -CRLfile "$CTL_DIR/crl.pem" x1.pem >verify.out 2>&1 &&
    cat verify.out && grep -q "certificate revoked" verify.out &&
    openssl verify -crl_check -CAfile "$CTL_DIR/ca.pem" -CRLfile "$CTL_DIR/crl.pem" "$T/n2/agent.pem" | grep -q ": OK$" &&
    serial=$(openssl x509 -in x1.pem -noout -serial | cut -d= -f2) &&
    openssl crl -in "$CTL_DIR/crl.pem" -noout -text | grep -qi "Serial Number: *$serial"
'

test_expect_success 'an agent killed with SIGKILL turns unreachable within the poll interval' '
    agent_kill n2 KILL &&
    start=$(date +%s%N) &&
    wait_for 5 "[ \$(node_health n2) = unreachable ]" &&
    elapsed=$((($(date +%s%N) - start) / 1000000)) &&
    echo "unreachable after ${elapsed} ms" && [ "$elapsed" -le 2500 ] &&
    hcctl node show n2 -o json | jq -e ".node.health_detail | test(\"refused|reach\")"
'

test_expect_success 'the restarted agent is reachable again' '
    agent_start n2 &&
    wait_for 5 "[ \$(node_health n2) = reachable ]" &&
    hcctl events --type node.health -o json | jq -e "[.events[] | select(.node == \"n2\")] | length >= 2"
'

test_expect_success 'a wrong API token gives exit 3 and a one-line error' '
    hcctl --token hct1.0000000000000000.$(printf "%064d" 0) node list 2>err; rc=$?
    [ $rc = 3 ] && [ "$(wc -l <err)" = 1 ] && grep -q "error:" err
'

test_expect_success 'a malformed token and a missing token are refused with exit 3' '
    hcctl --token nonsense node list 2>/dev/null; [ $? = 3 ] &&
    HCCTL_TOKEN= hcctl --token "" node list 2>/dev/null; [ $? = 3 ]
'

test_expect_success 'a read-only token reads but cannot mutate (exit 3, forbidden)' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name viewer --role readonly | grep -o "hct1\.[0-9a-f.]*") &&
    hcctl --token "$ro" node list -o json | jq -e ".nodes | length == 3" &&
    hcctl --token "$ro" cluster join-token 2>err; [ $? = 3 ] && grep -qi "forbidden\|read-only\|admin" err
'

test_expect_success 'every mutating call is in the event log with the token name' '
    hcctl events --type api.call -o json | jq -e "[.events[] | select(.actor == \"admin\" and .details.method == \"POST\")] | length >= 1" &&
    hcctl events --type api.call -o json | jq -e "[.events[] | select(.actor == \"viewer\" and .details.status == 403)] | length == 1"
'

test_expect_success 'a client without the controller certificate cannot call an agent' '
    url=https://127.0.0.3:$AGENT_PORT/v1/status &&
    ! curl -sS --max-time 5 --cacert "$CTL_DIR/ca.pem" "$url" 2>err1 &&
    ! curl -sS --max-time 5 --cacert "$CTL_DIR/ca.pem" --cert "$T/n1/agent.pem" --key "$T/n1/agent.key" "$url" 2>err2 &&
    curl -sS --max-time 5 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" --key "$CTL_DIR/client.key" "$url" | jq -e ".node_name == \"n2\""
'

# check_sev ID NODE: the pre-flight check's severity for the node
check_sev() {
    hcctl cluster check -o json | jq -r --arg id "$1" --arg n "$2" \
        '.checks[] | select(.id == $id and .node == $n) | .severity'
}
test_expect_success 'the agent reports its clock and data directory; the checks see them for real agents' '
    url=https://127.0.0.3:$AGENT_PORT/v1/status &&
    curl -sS --max-time 5 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" --key "$CTL_DIR/client.key" "$url" >st.json &&
    now=$(date +%s%3N) &&
    jq -e --argjson now "$now" "(.time_ms - \$now | fabs) < 5000 and .data_dir_total_bytes > 0 and .data_dir_free_bytes >= 0 and .data_dir_free_bytes <= .data_dir_total_bytes" st.json &&
    wait_for 10 "[ \"\$(check_sev clock_skew n2)\" = ok ]" &&
    [ "$(check_sev disk_low n2)" != unknown ] && [ "$(check_sev node_unreachable n2)" = ok ]
'

test_expect_success 'malformed JSON on every POST gives 400 with the error shape' '
    tok=$(cat "$CTL_DIR/admin.token") &&
    for path in /v1/join-tokens /v1/enroll /v1/operations/op-000000000000/pause; do
        code=$(curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" \
            -H "Authorization: Bearer $tok" -H "Content-Type: application/json" \
            --data-binary "this is not json" "$CTL_URL$path") &&
        echo "$path -> $code" &&
        { [ "$code" = 400 ] || [ "$code" = 404 ]; } &&
        jq -e ".error.code and .error.message" body.json || exit 1
    done &&
    code=$(curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" \
        -H "Authorization: Bearer $tok" --data-binary "{not json" "$CTL_URL/v1/join-tokens") &&
    [ "$code" = 400 ] && jq -e ".error.code == \"invalid_json\"" body.json
'

test_expect_success 'unknown routes and methods answer with the error shape' '
    tok=$(cat "$CTL_DIR/admin.token") &&
    code=$(curl -sS -o body.json -w "%{http_code}" --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $tok" "$CTL_URL/v1/nope") &&
    [ "$code" = 404 ] && jq -e ".error.code == \"not_found\"" body.json &&
    code=$(curl -sS -o body.json -w "%{http_code}" -X PUT --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $tok" "$CTL_URL/v1/nodes") &&
    [ "$code" = 405 ] && jq -e ".error.code == \"method_not_allowed\"" body.json
'

test_expect_success 'unknown node gives exit 1 and names the node' '
    hcctl node show nosuch 2>err; [ $? = 1 ] && grep -q "nosuch" err
'

test_expect_success 'a node without storage software enters and leaves maintenance' '
    hcctl maintenance enter n2 --yes -o json >enter.json &&
    hcctl maintenance status -o json | jq -e ".nodes[] | select(.name == \"n2\") | .maintenance == \"active\"" &&
    hcctl maintenance exit n2 --yes -o json >exit.json &&
    jq -e ".operation.state == \"succeeded\"" exit.json &&
    jq -e "[.steps[] | select(.step == \"start\") | .detail] == [\"no storage software on this node: nothing to start\"]" exit.json &&
    hcctl maintenance status -o json | jq -e ".nodes[] | select(.name == \"n2\") | .maintenance == \"none\""
'

test_expect_success 'a restarted controller keeps every node, and writes the revocation list again' '
    controller_stop TERM &&
    rm "$CTL_DIR/crl.pem" &&
    controller_start &&
    ! openssl verify -crl_check -CAfile "$CTL_DIR/ca.pem" -CRLfile "$CTL_DIR/crl.pem" x1.pem >verify.out 2>&1 &&
    grep -q "certificate revoked" verify.out &&
    wait_for 5 "[ \$(reachable_count) = 3 ]" &&
    hcctl node list -o json | jq -e "[.nodes[].name] == [\"n1\",\"n2\",\"n3\"]"
'

test_expect_success 'a controller killed with SIGKILL restarts with its state intact' '
    controller_stop KILL &&
    controller_start &&
    wait_for 5 "[ \$(reachable_count) = 3 ]"
'

test_expect_success 'an unreachable controller gives exit 3' '
    hcctl --controller https://127.0.0.1:1 node list 2>err; [ $? = 3 ] && grep -q "127.0.0.1:1" err
'

test_done
