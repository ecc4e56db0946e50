#!/usr/bin/env bash
# hchollow (tools/hollow, docs/hollow.md): one process serving 12 agent identities that joined
# a real hcctld through the real join flow. Rolling upgrades over them (every node upgraded
# once), a failing node rolled back, an unreachable node seen as such while the others stay
# reachable, a restart that serves the same identities without joining again, and hostile
# input on the control socket and the agent API (the mutual-TLS rule holds for every identity).
. "$(dirname "$0")/lib.sh"

need_bundles
N=12
FIRST=127.1.$((RANDOM % 200 + 20)).1
SOCK=$T/hollow.sock
hollow_start() {
    HCHOLLOW_TOKEN=$(cat "$CTL_DIR/admin.token") hchollow --controller "$CTL_URL" \
        --ca "$CTL_DIR/ca.pem" --count $N --first-address "$FIRST" --port "$AGENT_PORT" \
        --data-dir "$T/hollow" --control "$SOCK" --trust-key "$BUNDLES/dev.pub" \
        --activate-ms 20 >>"$T/hollow.log" 2>&1 &
    echo $! >"$T/pids/hollow"
}
ctl() { hchollow ctl --control "$SOCK" "$@"; }
on_version() { hcctl node list -o json | jq "[.nodes[] | select(.software_version == \"$1\")] | length"; }
first_ip() { echo "$FIRST"; }
# the agent API of hollow node I (0-based), with the controller's client certificate and
# exactly the headers given
hollow_call() { # I METHOD PATH [CURL-ARGS...]
    local ip method=$2 path=$3
    ip=$(echo "$FIRST" | awk -F. -v i="$1" '{ print $1 "." $2 "." $3 "." $4 + i }')
    shift 3
    curl -sS --max-time 10 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" \
        --key "$CTL_DIR/client.key" -X "$method" "$@" "https://$ip:$AGENT_PORT$path"
}
hollow_api() { hollow_call "$1" GET "$2"; } # I PATH
generation() { sqlite3 "$CTL_DIR/hcctld.db" "SELECT generation FROM fence_generation"; }

test_expect_success '12 identities join through the real flow and turn reachable' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    hcctl -q software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
    hollow_start &&
    wait_for 30 "[ \$(reachable_count) = $N ]" &&
    hcctl events --type node.joined -o json | jq -e ".events | length == $N" &&
    ctl stats | jq -e ".identities == $N and .enrolled == $N"
'

test_expect_success 'a rolling upgrade over them: every node staged and upgraded once' '
    hcctl -q upgrade --rolling --to 1.0 --yes &&
    hcctl -q upgrade --rolling --to 1.1 --yes &&
    wait_for 10 "[ \$(on_version 1.1) = $N ]" &&
    for i in 0 5 11; do
        hollow_api $i /v1/service/history >h.json &&
        jq -e "[.events[] | select(.event == \"started\" and .version == \"1.1\")] | length == 1" h.json ||
        return 1
    done &&
    ctl stats | jq -e ".stage_failures == 0 and .staged_bytes > 0"
'

test_expect_success 'a failing node is rolled back and the upgrade fails; the others are untouched' '
    ctl fault 0 failing &&
    expect_exit 1 hcctl -q upgrade --rolling --to 1.0 --yes --node-timeout 2s \
        --skip-checks=service_unhealthy &&
    hcctl node show hollow-0000 -o json | jq -e ".node.software_version == \"1.1\"" &&
    [ "$(on_version 1.1)" = $N ] &&
    ctl fault 0 none
'

test_expect_success 'an unreachable node shows unreachable, the others stay reachable' '
    ctl fault 3 unreachable &&
    wait_for 10 "[ \"\$(node_health hollow-0003)\" = unreachable ]" &&
    [ "$(reachable_count)" = $((N - 1)) ] &&
    ctl fault 3 none &&
    wait_for 10 "[ \$(reachable_count) = $N ]"
'

test_expect_success 'a slow node still answers, a stalled one does not block the rest' '
    ctl fault 4 slow 300 && ctl fault 5 stalled &&
    wait_for 10 "[ \"\$(node_health hollow-0005)\" != reachable ]" &&
    [ "$(node_health hollow-0004)" = reachable ] &&
    [ "$(reachable_count)" = $((N - 1)) ] &&
    ctl fault 4-5 none && wait_for 10 "[ \$(reachable_count) = $N ]"
'

test_expect_success 'restarted with the same data dir: the same identities, no new join' '
    stop_daemon hollow TERM &&
    hollow_start && hollow_serving "$SOCK" $N &&
    hcctl events --type node.joined -o json | jq -e ".events | length == $N" &&
    grep -q "$N identities loaded" "$T/hollow.log"
'

test_expect_success 'each identity fences controller terms as hcagent does, in its own directory' '
    gen=$(generation) &&
    for i in 0 7 11; do
        hollow_api $i /v1/status | jq -e ".controller_term == $gen" || exit 1
    done &&
    [ "$(cat "$T/hollow/hollow-0007/controller-term")" = "$gen" ] &&
    service=$(hollow_api 7 /v1/software | jq -c "[.service.state, .service.pid]") &&
    hollow_call 7 POST /v1/service/stop -H "X-HC-Term: $((gen - 1))" |
        jq -e ".error.code == \"stale_term\"" &&
    grep -q "hollow-0007: refused POST /v1/service/stop from .*: controller term $((gen - 1)) is older" \
        "$T/hollow.log" &&
    hollow_call 7 POST /v1/service/stop | jq -e ".error.code == \"stale_term\"" &&
    hollow_call 7 GET /v1/status -H "X-HC-Term: $((gen - 1))" | jq -e ".controller_term == $gen" &&
    hollow_call 7 GET /v1/status -H "X-HC-Term: 7x" | jq -e ".error.code == \"invalid_argument\"" &&
    [ "$(hollow_api 7 /v1/software | jq -c "[.service.state, .service.pid]")" = "$service" ] &&
    controller_stop && controller_start && [ "$(generation)" = $((gen + 1)) ] &&
    for i in 0 7 11; do
        wait_for 10 "hollow_api $i /v1/status | jq -e \".controller_term == $((gen + 1))\"" || exit 1
    done
'

test_expect_success 'a corrupt term file of one identity keeps hchollow from starting, naming it' '
    stop_daemon hollow TERM &&
    f=$T/hollow/hollow-0003/controller-term && cp "$f" term.saved &&
    echo "3 4" >"$f" && hollow_start &&
    wait_for 20 "! kill -0 $(pid_of hollow)" &&
    grep -q "controller term file .$f. is corrupt" "$T/hollow.log" &&
    cp term.saved "$f" && hollow_start && hollow_serving "$SOCK" $N
'

test_expect_success 'hostile input: control socket garbage, a client without the controller certificate' '
    ! ctl bogus >o1 && jq -e ".ok == false" o1 &&
    ! ctl fault 99-100 none >o2 && jq -e ".error | test(\"bad range\")" o2 &&
    ! ctl fault 1 slow 0 >o3 && ! ctl fault all melt >o4 &&
    head -c 4096 /dev/urandom | tr -d "\n" | { cat; echo; } >junk &&
    python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(open(sys.argv[2],\"rb\").read()); print(s.recv(4096).decode(errors=\"replace\"))" "$SOCK" junk | grep -q "longer than" &&
    ctl stats | jq -e ".identities == $N" &&
    ip=$(first_ip) &&
    ! curl -sS --max-time 5 --cacert "$CTL_DIR/ca.pem" "https://$ip:$AGENT_PORT/v1/status" 2>err &&
    [ "$(reachable_count)" = $N ]
'

test_done
