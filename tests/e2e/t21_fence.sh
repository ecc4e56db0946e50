#!/usr/bin/env bash
# Fencing of controller terms (docs/hcagent.md "Fencing"): every `hcctld run` is one more start
# generation (the term), which the agent records in DIR/controller-term and holds every later
# request to. A request in the controller's name (its client certificate, from its data dir)
# with an older term may read but not change anything; one without a term, once a term was seen,
# likewise; a malformed term is refused outright. The term survives an agent restart, and a
# corrupt term file keeps the agent from starting. Real hcctld, hcagent and curl on 127.0.0.2.
. "$(dirname "$0")/lib.sh"

IP=127.0.0.2
AGENT=https://$IP:$AGENT_PORT
TERM_FILE=$T/n1/controller-term
generation() { sqlite3 "$CTL_DIR/hcctld.db" "SELECT generation FROM fence_generation"; }
term() { agent_term "$AGENT"; }
# raw METHOD PATH [CURL-ARGS...]: the agent API in the controller's name, with exactly the
# headers given; prints the HTTP status, the body goes to body.json.
raw() {
    local method=$1 path=$2
    shift 2
    curl -sS --max-time 30 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" \
        --key "$CTL_DIR/client.key" -o body.json -w '%{http_code}' -X "$method" "$@" "$AGENT$path"
}
# refused STATUS CODE METHOD PATH [CURL-ARGS...]: the request is answered STATUS with error CODE.
refused() {
    local status=$1 code=$2 got
    shift 2
    got=$(raw "$@") || return 1
    [ "$got" = "$status" ] && jq -e --arg c "$code" '.error.code == $c' body.json >/dev/null ||
        { echo "$*: HTTP $got, expected $status $code: $(cat body.json)"; return 1; }
}

test_expect_success 'each hcctld run takes the next start generation; the agent records it 0600' '
    controller_init && [ "$(generation)" = 0 ] &&
    controller_start && [ "$(generation)" = 1 ] &&
    grep -q "fencing term 1 (start generation)" "$T/hcctld.log" &&
    agent_join n1 $IP && wait_for 10 "[ \$(reachable_count) = 1 ]" &&
    wait_for 10 "[ \"\$(term)\" = 1 ]" &&
    [ "$(cat "$TERM_FILE")" = 1 ] && [ "$(stat -c %a "$TERM_FILE")" = 600 ]
'

test_expect_success 'a restarted hcctld has a higher term, and the agent sees it grow' '
    controller_stop && controller_start && [ "$(generation)" = 2 ] &&
    wait_for 10 "[ \"\$(term)\" = 2 ]" && [ "$(cat "$TERM_FILE")" = 2 ] &&
    grep -q "controller term 2 is the highest seen (was 1)" "$T/n1.log"
'

test_expect_success 'a POST with a lower term is refused 409 stale_term, at warn, not run' '
    refused 409 stale_term POST /v1/service/stop -H "X-HC-Term: 1" &&
    jq -e ".error.message == \"controller term 1 is older than term 2 seen from another controller\"" body.json &&
    grep "WARN refused POST /v1/service/stop from 127.0.0.1: controller term 1 is older than term 2" "$T/n1.log" &&
    refused 409 stale_term PUT /v1/service/peers -H "X-HC-Term: 0" -H "Content-Type: application/json" \
        --data "{\"epoch\":1,\"nodes\":[{\"name\":\"n1\",\"host\":\"$IP\"}]}" &&
    [ "$(cat "$TERM_FILE")" = 2 ]
'

test_expect_success 'a GET with a lower term is served and lowers nothing' '
    [ "$(raw GET /v1/status -H "X-HC-Term: 1")" = 200 ] &&
    jq -e ".controller_term == 2 and .node_name == \"n1\"" body.json &&
    [ "$(raw GET /v1/software -H "X-HC-Term: 0")" = 200 ] &&
    [ "$(cat "$TERM_FILE")" = 2 ]
'

test_expect_success 'a POST without a term, once one was seen, is refused 409; a GET is served' '
    refused 409 stale_term POST /v1/service/stop &&
    jq -e ".error.message | test(\"without a controller term .* term 2\")" body.json &&
    [ "$(raw GET /v1/status)" = 200 ] &&
    [ "$(raw POST /v1/service/stop -H "X-HC-Term: 2")" != 409 ] || { cat body.json; false; }
'

test_expect_success 'malformed terms are refused 400 on reads and changes, and change nothing' '
    for v in abc -1 +2 0x2 1e3 "2 3" 2.0 9223372036854775808 99999999999999999999999; do
        refused 400 invalid_argument GET /v1/status -H "X-HC-Term: $v" &&
        refused 400 invalid_argument POST /v1/service/stop -H "X-HC-Term: $v" || exit 1
    done &&
    refused 400 invalid_argument GET /v1/status -H "X-HC-Term;" &&
    jq -e ".error.message | test(\"X-HC-Term must be a decimal integer\")" body.json &&
    refused 400 invalid_argument POST /v1/service/stop -H "X-HC-Term: 2" -H "X-HC-Term: 3" &&
    jq -e ".error.message | test(\"different values \\\\(2 and 3\\\\)\")" body.json &&
    refused 400 invalid_argument GET /v1/status -H "X-HC-Term: 9" -H "X-HC-Term: 2" &&
    [ "$(raw GET /v1/status -H "X-HC-Term: 2" -H "X-HC-Term: 2")" = 200 ] &&
    [ "$(cat "$TERM_FILE")" = 2 ] && [ "$(term)" = 2 ]
'

test_expect_success 'a newer term fences the running hcctld off: its changes fail with stale_term' '
    [ "$(raw GET /v1/status -H "X-HC-Term: 5")" = 200 ] &&
    jq -e ".controller_term == 5" body.json && [ "$(cat "$TERM_FILE")" = 5 ] &&
    ! hcctl maintenance enter n1 --yes 2>err && cat err &&
    grep -q "controller term 2 is older than term 5" err &&
    grep -q "WARN refused POST .* controller term 2 is older than term 5" "$T/n1.log" &&
    hcctl maintenance status -o json | jq -e ".nodes[] | select(.name == \"n1\") | .maintenance != \"active\""
'

test_expect_success 'a controller started above that term drives the node again' '
    controller_stop &&
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE fence_generation SET generation = 9" &&
    ! sqlite3 "$CTL_DIR/hcctld.db" "UPDATE fence_generation SET generation = 3" 2>err &&
    grep -q "only grows" err &&
    controller_start && [ "$(generation)" = 10 ] &&
    wait_for 10 "[ \"\$(term)\" = 10 ]" &&
    agent_api POST /v1/service/stop | jq -e ".error.code != \"stale_term\""
'

test_expect_success 'a restarted agent keeps its term' '
    controller_stop && agent_kill n1 TERM && agent_start n1 &&
    wait_for 10 "[ \"\$(raw GET /v1/status)\" = 200 ]" &&
    jq -e ".controller_term == 10" body.json &&
    refused 409 stale_term POST /v1/service/stop -H "X-HC-Term: 9"
'

test_expect_success 'a corrupt term file keeps the agent from starting, naming the file and the way out' '
    agent_kill n1 TERM &&
    echo "ten" >"$TERM_FILE" &&
    ! timeout 10 hcagent run --data-dir "$T/n1" 2>err && cat err &&
    grep -q "controller term file .$TERM_FILE. is corrupt" err && grep -q "remove it" err &&
    printf "" >"$TERM_FILE" && ! timeout 10 hcagent run --data-dir "$T/n1" 2>/dev/null &&
    echo "-4" >"$TERM_FILE" && ! timeout 10 hcagent run --data-dir "$T/n1" 2>/dev/null &&
    echo 10 >"$TERM_FILE" && agent_start n1 &&
    wait_for 10 "[ \"\$(term)\" = 10 ]"
'

test_done
