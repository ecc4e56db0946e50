#!/usr/bin/env bash
# The reference storage service on its own: three real hcstor processes on 127.0.0.81-83 sharing
# one peers file (what hcagent writes from the controller's list), driven with curl. Placement
# and replication, drain and a stop, ok-to-stop refusing with the reason, resync after a restart
# and after a SIGKILL, a hung peer (SIGSTOP) catching up by itself, and bad requests.
. "$(dirname "$0")/lib.sh"

PORT=$(free_port)
url() { echo "http://127.0.0.8$1:$PORT"; }

start() { # start N [VERSION]
    mkdir -p "$T/n$1"
    cp "$T/peers.json" "$T/n$1/peers.json"
    hcstor --listen "127.0.0.8$1:$PORT" --data "$T/n$1" --node "n$1" --version "${2:-1.0}" \
        >>"$T/n$1.log" 2>&1 &
    echo $! >"$T/pids/n$1"
    wait_for 10 "curl -sf $(url "$1")/health >/dev/null"
}
state() { curl -s --max-time 3 "$(url "$1")/health" | jq -r .state; }
put() { curl -sSf --max-time 10 -X PUT --data-binary "$3" "$(url "$1")/blocks/$2"; }
get() { curl -sS --max-time 10 "$(url "$1")/blocks/$2"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
held_by() { for i in 1 2 3; do [ -f "$T/n$i/blocks/$1" ] && printf 'n%s ' "$i"; done; }
okstop() { curl -sS --max-time 10 "$(url "$1")/ok-to-stop"; }
# every block reads back with the given prefix from every node
all_read() {
    local i k got
    for i in 1 2 3; do for k in $(seq 1 30); do
        got=$(get "$i" "k$k")
        [ "$got" = "$1-k$k" ] || { echo "n$i k$k: $got (again: $(get "$i" "k$k"))"; return 1; }
    done; done
}

cat >"$T/peers.json" <<EOF
{"epoch": 1, "nodes": [{"name": "n1", "host": "127.0.0.81"}, {"name": "n2", "host": "127.0.0.82"},
 {"name": "n3", "host": "127.0.0.83"}]}
EOF

test_expect_success 'three members start serving' '
    start 1 && start 2 && start 3 &&
    wait_for 10 "[ \"\$(state 1)\$(state 2)\$(state 3)\" = servingservingserving ]" &&
    curl -s "$(url 1)/health" | jq -e ".members == 3 and .replication == 2"
'

test_expect_success 'a write is acknowledged by two replicas, on disk on exactly those two' '
    for k in $(seq 1 30); do put $(( k % 3 + 1 )) "k$k" "a-k$k" >>acks.json || exit 1; done &&
    jq -se "length == 30 and all(.replicas | length == 2)" acks.json &&
    for k in $(seq 1 30); do
        want=$(jq -r "select(.key == \"k$k\") | .replicas | sort | join(\" \")" acks.json) &&
        [ "$(held_by "k$k")" = "$want " ] || { echo "k$k held by $(held_by "k$k") acked by $want"; exit 1; }
    done &&
    all_read a
'

test_expect_success 'ok-to-stop is true while every block has another serving replica' '
    for i in 1 2 3; do okstop $i | jq -e ".ok_to_stop == true" || exit 1; done
'

test_expect_success 'drain refuses client requests, tells the peers; the others carry on' '
    curl -sS -X POST "$(url 1)/drain" | jq -e ".drained == true" &&
    [ "$(code -X PUT --data-binary x "$(url 1)/blocks/k1")" = 503 ] &&
    wait_for 5 "grep -q \"n1 is draining\" n2.log" &&
    kill -TERM "$(pid_of n1)" && wait_for 5 "! curl -s $(url 1)/health" &&
    for k in $(seq 1 30); do put $(( k % 2 + 2 )) "k$k" "b-k$k" >/dev/null || exit 1; done
'

test_expect_success 'with n1 down, ok-to-stop refuses on a node holding the last copy, naming it' '
    okstop 2 >ok2.json && okstop 3 >ok3.json && cat ok2.json ok3.json &&
    jq -e ".ok_to_stop == false and (.reason | test(\"has no other in-sync serving replica .n1 is down\"))" ok2.json &&
    jq -e ".ok_to_stop == false and .unprotected_blocks > 0" ok3.json
'

test_expect_success 'n1 restarted resyncs the writes it missed, then serves them' '
    start 1 1.1 &&
    wait_for 10 "[ \"\$(state 1)\" = serving ]" &&
    curl -s "$(url 1)/resync" | jq -e ".pending == 0 and .done == true and .fetched > 0" &&
    grep -q "resync done" n1.log &&
    all_read b &&
    for i in 1 2 3; do okstop $i | jq -e ".ok_to_stop == true" || exit 1; done
'

test_expect_success 'SIGKILL of n2: writes go on; when back it catches up' '
    kill -KILL "$(pid_of n2)" &&
    for k in $(seq 1 30); do put $(( k % 2 * 2 + 1 )) "k$k" "c-k$k" >/dev/null || exit 1; done &&
    start 2 && wait_for 10 "[ \"\$(state 2)\" = serving ]" &&
    all_read c
'

# n3 notices its own stall before it answers anything, so it serves nothing from the copies the
# others wrote around: it lists every peer (not only the first that says it missed writes).
test_expect_success 'a hung peer (SIGSTOP) is written around and resyncs by itself when it wakes' '
    kill -STOP "$(pid_of n3)" &&
    for k in $(seq 1 30); do put $(( k % 2 + 1 )) "k$k" "d-k$k" >/dev/null || exit 1; done &&
    grep -q "to n3 failed" n1.log n2.log &&
    kill -CONT "$(pid_of n3)" &&
    wait_for 10 "grep -q \"n3 warn: this node stalled for .* resyncing from every peer\" n3.log" &&
    wait_for 10 "[ \"\$(state 3)\" = serving ]" &&
    all_read d
'

test_expect_success 'both replicas of some blocks were down: the first back serves none of them stale' '
    curl -sS -X POST "$(url 1)/drain" >/dev/null && kill -TERM "$(pid_of n1)" &&
    wait_for 5 "! curl -s $(url 1)/health" &&
    for k in $(seq 1 30); do put $(( k % 2 + 2 )) "k$k" "e-k$k" >/dev/null || exit 1; done &&
    kill -KILL "$(pid_of n3)" &&
    start 1 && wait_for 10 "[ \"\$(state 1)\" = serving ]" && grep -q "skipping n3" n1.log &&
    shared=$(jq -r "select(.replicas | sort == [\"n1\", \"n3\"]) | .key" acks.json) &&
    [ -n "$shared" ] &&
    for k in $shared; do
        c=$(code "$(url 1)/blocks/$k") && [ "$c" = 503 ] || { echo "$k: $c $(get 1 "$k")"; exit 1; }
    done &&
    for k in $(jq -r "select(.replicas | sort == [\"n1\", \"n2\"]) | .key" acks.json); do
        [ "$(get 1 "$k")" = "e-$k" ] || { echo "$k: $(get 1 "$k")"; exit 1; }
    done &&
    start 3 && wait_for 10 "grep -q \"n3 answers again\|n3 says hello\" n1.log" &&
    wait_for 10 "[ \"\$(state 1)\$(state 3)\" = servingserving ]" &&
    all_read e
'

test_expect_success 'bad requests get clear errors and change nothing' '
    [ "$(code -X PUT --data-binary x "$(url 1)/blocks/.hidden")" = 400 ] &&
    [ "$(code -X PUT --data-binary x "$(url 1)/blocks/a%2Fb")" = 400 ] &&
    [ "$(code "$(url 1)/blocks/nosuchkey")" = 404 ] &&
    [ "$(code -X PUT --data-binary x "$(url 1)/internal/blocks/k1")" = 400 ] &&
    [ "$(code -X POST --data "not json" "$(url 1)/internal/hello")" = 404 ] &&
    [ "$(code -X DELETE "$(url 1)/blocks/k1")" = 405 ] &&
    curl -s -X DELETE "$(url 1)/blocks/k1" | jq -e ".error.code == \"method_not_allowed\"" &&
    head -c 17M /dev/zero >big.bin &&
    curl -s -X PUT --data-binary @big.bin "$(url 1)/blocks/big" >big.json &&
    jq -e ".error.code == \"body_too_large\"" big.json &&
    [ "$(code "$(url 1)/blocks/big")" = 404 ] &&
    [ "$(code "$(url 1)/nowhere")" = 404 ] &&
    all_read e
'

test_expect_success 'hcstor refuses bad arguments' '
    ! hcstor --listen nonsense --data "$T/x" --version 1 2>err && grep -q "invalid --listen" err &&
    ! hcstor --listen 127.0.0.1:1 --data "$T/x" --version 1 --replication 0 2>err &&
    grep -q usage err
'

test_done
