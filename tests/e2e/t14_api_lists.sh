#!/usr/bin/env bash
# The API at scale (issue 16, docs/api.md "Pagination", "ETag and caching", "Watch"): paged
# lists and hostile cursors, 304 until a change, hcctl events --follow on the watch stream, the
# watch's own limits (no anonymous watcher, at most HC_WATCH_MAX, a watcher that never reads is
# dropped without harming the others). A real hcctld and two agents on 127.0.0.6x.
. "$(dirname "$0")/lib.sh"

ip() { echo "127.0.0.6$1"; }
tok() { jq -r .token "$XDG_CONFIG_HOME/hcctl/config.json"; }
api() { curl -s --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $(tok)" "$@"; }
# watch ARGS...: for a background watcher; exec, so that $! is curl itself
watch() { exec curl -sN --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $(tok)" "$@"; }
etag_of() { tr -d '\r' | awk 'tolower($1) == "etag:" {print $2}'; }
status_of() { head -n 1 | awk '{print $2}'; }
MAX_WATCHERS=32 # HC_WATCH_MAX (controller/api/watch.h)
n2_changed() { # a node line for n2 with the hostname sqlite3 wrote
    grep "\"node\":" nodes.out |
        jq -e "select(.node.name == \"n2\" and .node.hostname == \"changed-by-sqlite\")" >/dev/null
}
# A watcher that asks for every event from 0 and never reads (a small receive buffer).
cat >"$T/sleeper.py" <<'PY'
import socket, ssl, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
c = ssl.create_default_context(cafile=sys.argv[2]).wrap_socket(s, server_hostname="127.0.0.1")
c.sendall(("GET /v1/watch?since=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
           % sys.argv[3]).encode())
print("sent", flush=True)
time.sleep(60)  # never reads
PY

test_expect_success 'a controller and two agents' '
    controller_init && controller_start &&
    agent_join n1 "$(ip 1)" && agent_join n2 "$(ip 2)" &&
    wait_for 20 "[ \"\$(hcctl node list -o json | jq \".nodes | length\")\" = 2 ]"
'

test_expect_success 'pages: limit and after, next_after, the CLI gets every node' '
    api "$CTL_URL/v1/nodes?limit=1" >p1 &&
    jq -e ".nodes | length == 1 and .[0].name == \"n1\"" p1 >/dev/null &&
    jq -e ".nodes[0].name == \"n1\" and .next_after == \"n1\"" p1 &&
    api "$CTL_URL/v1/nodes?limit=1&after=n1" >p2 &&
    jq -e ".nodes[0].name == \"n2\" and .next_after == null" p2 &&
    api "$CTL_URL/v1/nodes?after=n2" | jq -e ".nodes == [] and .next_after == null" &&
    api "$CTL_URL/v1/maintenance?limit=1" | jq -e ".next_after == \"n1\"" &&
    hcctl node list -o json | jq -e "[.nodes[].name] == [\"n1\", \"n2\"] and (has(\"next_after\") | not)"
'

test_expect_success 'hostile limits and cursors: 400 with the JSON error' '
    for q in "limit=0" "limit=-1" "limit=100000000000000000000" "limit=5001" "limit=1x" \
        "after=%01" "after=a%20b" "after=$(printf "x%.0s" $(seq 200))" "after=%FF"; do
        api -o out -w "%{http_code}" "$CTL_URL/v1/nodes?$q" >code &&
        [ "$(cat code)" = 400 ] && jq -e ".error.code == \"invalid_argument\"" out >/dev/null ||
        { echo "not refused: $q"; cat out; exit 1; }
    done &&
    api -o out -w "%{http_code}" "$CTL_URL/v1/operations?after=op-nonesuch" | grep -qx 400 &&
    jq -e ".error.code == \"invalid_argument\"" out
'

test_expect_success 'ETag: 304 until a change, then 200 with a new ETag; junk never matches' '
    api -i "$CTL_URL/v1/events?type=token.api_created" >r1 && e1=$(etag_of <r1) && [ -n "$e1" ] &&
    api -i -H "If-None-Match: $e1" "$CTL_URL/v1/events?type=token.api_created" >r2 &&
    [ "$(status_of <r2)" = 304 ] &&
    api -i -H "If-None-Match: W/\"zz\", $e1" "$CTL_URL/v1/events?type=token.api_created" |
        status_of | grep -qx 304 &&
    for junk in "\"" "garbage" "W/" "$(printf "\"%.0s" $(seq 300))" "*x"; do
        api -i -H "If-None-Match: $junk" "$CTL_URL/v1/events?type=token.api_created" | status_of |
            grep -qx 200 || { echo "matched: $junk"; exit 1; }
    done &&
    hcctl token create etag-probe --role readonly >/dev/null &&
    api -i -H "If-None-Match: $e1" "$CTL_URL/v1/events?type=token.api_created" >r3 &&
    [ "$(status_of <r3)" = 200 ] && e3=$(etag_of <r3) && [ -n "$e3" ] && [ "$e3" != "$e1" ] &&
    api -i -H "If-None-Match: $e3" "$CTL_URL/v1/events?type=token.api_created" | status_of | grep -qx 304
'

test_expect_success 'events --follow gets an event another command writes' '
    { hcctl events --follow -o json >follow.out 2>follow.err & echo $! >"$T/pids/follow"; } &&
    wait_for 10 "grep -q cluster.initialised follow.out" &&
    hcctl token create follow-probe --role readonly >/dev/null &&
    wait_for 3 "grep -q follow-probe follow.out" &&
    stop_daemon follow INT
'

test_expect_success 'no anonymous watcher; a revoked token ends its watch' '
    curl -s --cacert "$CTL_DIR/ca.pem" -o out -w "%{http_code}" "$CTL_URL/v1/watch" | grep -qx 401 &&
    jq -e ".error.code == \"unauthorized\"" out &&
    ro=$(hcctl token create watch-ro --role readonly) &&
    { curl -sN --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $ro" "$CTL_URL/v1/watch" \
        >ro.out & echo $! >"$T/pids/ro-watch"; } &&
    wait_for 5 "grep -q heartbeat ro.out" &&
    hcctl token revoke watch-ro --yes >/dev/null &&
    wait_for 5 "! alive $(pid_of ro-watch)"
'

test_expect_success 'a node changed by another process reaches its watcher as the new object' '
    { watch "$CTL_URL/v1/watch?node=n2" >nodes.out & echo $! >"$T/pids/node-watch"; } &&
    wait_for 5 "grep -q heartbeat nodes.out" &&
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE nodes SET hostname = \"changed-by-sqlite\" WHERE name = \"n2\"" &&
    wait_for 5 n2_changed &&
    ! grep -q "\"name\":\"n1\"" nodes.out &&
    stop_daemon node-watch TERM
'

test_expect_success 'at most HC_WATCH_MAX watchers; a watcher that never reads is dropped' '
    for i in $(seq $MAX_WATCHERS); do
        watch "$CTL_URL/v1/watch" >w$i.out & echo $! >"$T/pids/w$i"
    done &&
    wait_for 15 "[ \$(grep -l heartbeat w*.out | wc -l) = $MAX_WATCHERS ]" &&
    api -o out -w "%{http_code}" "$CTL_URL/v1/watch" | grep -qx 503 &&
    jq -e ".error.code == \"too_many_watchers\"" out &&
    for i in $(seq 2 $MAX_WATCHERS); do stop_daemon w$i TERM; done &&
    # 20,000 events of ~300 bytes (6 MB, more than the socket buffers hold) straight into the log: the watchers resuming from 0 get all of them
    sqlite3 "$CTL_DIR/hcctld.db" "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s
        WHERE i < 20000) INSERT INTO events (ts, type, message) SELECT 1764680000000 + i,
        \"bench.filler\", printf(\"%.300c\", \"x\") FROM s" &&
    { python3 "$T/sleeper.py" "$CTL_PORT" "$CTL_DIR/ca.pem" "$(tok)" >sleeper.out 2>&1 &
      echo $! >"$T/pids/sleeper"; } &&
    { watch "$CTL_URL/v1/watch?since=0" >reader.out & echo $! >"$T/pids/reader"; } &&
    wait_for 30 "grep -q \"dropping a watcher of /v1/watch: it reads too slowly\" $T/hcctld.log" || { cat sleeper.out; exit 1; } &&
    wait_for 30 "[ \$(grep -c bench.filler reader.out) = 20000 ]" &&
    grep -q heartbeat w1.out && alive $(pid_of w1) &&
    hcctl node list >/dev/null &&
    stop_daemon reader TERM && stop_daemon sleeper TERM && stop_daemon w1 TERM
'

test_done
