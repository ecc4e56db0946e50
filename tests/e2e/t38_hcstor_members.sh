#!/usr/bin/env bash
# hcstor when the members change: real hcstor processes on 127.0.0.101-105, each with its own
# peers file written as the agent writes it (atomically, one node after the other, as the
# controller sends it). Checked: members added leave the old nodes serving (nothing is placed on
# them), the blocks placed on the new node reach it by its resync, the copies the old nodes no
# longer own are dropped only once every owner holds them (never while an owner is down), every
# block ends on exactly its replication factor of nodes, and a node added under hcload costs no
# failed operation, no stale read and no lost write.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hcstor_lib.sh"


# peers_file N...: the members list of those nodes, with a new epoch each time.
EPOCH=1
peers_file() {
    local i sep=""
    EPOCH=$((EPOCH + 1))
    printf '{"epoch": %d, "nodes": [' "$EPOCH"
    for i in "$@"; do printf '%s{"name": "n%s", "host": "127.0.0.10%s"}' "$sep" "$i" "$i"; sep=", "; done
    printf ']}\n'
}
# push FILE N...: FILE becomes the peers file of each node, in turn (rename: what the agent does).
push() {
    local f=$1 i
    shift
    for i in "$@"; do
        mkdir -p "$T/n$i" && cp "$f" "$T/n$i/.peers.tmp" && mv "$T/n$i/.peers.tmp" "$T/n$i/peers.json" ||
            return 1
        sleep 0.1
    done
}
copies() { local i n=0; for i in "$@"; do [ -f "$T/n$i/blocks/$K" ] && n=$((n + 1)); done; echo $n; }
# every block k1..k40 reads back as PREFIX-kN from every node given
all_read() {
    local p=$1 i k got
    shift
    for i in "$@"; do for k in $(seq 1 40); do
        got=$(get "$i" "k$k")
        [ "$got" = "$p-k$k" ] || { echo "n$i k$k: $got"; return 1; }
    done; done
}
# every block k1..k40 is held by exactly 2 of the nodes given
two_copies() {
    local k
    for k in $(seq 1 40); do
        K=k$k
        [ "$(copies "$@")" = 2 ] || { echo "k$k on $(copies "$@") nodes"; return 1; }
    done
}
sum() { local i t=0; for i in "${@:2}"; do t=$((t + $(resync "$i" | jq ".$1"))); done; echo $t; }

# made here, not in a test body (a subshell): the epochs grow from one list to the next
peers_file 1 2 3 >p3.json
peers_file 1 2 3 4 >p4.json
peers_file 1 2 3 4 5 >p5.json

test_expect_success 'three members serve 40 blocks, each on 2 nodes' '
    push p3.json 1 2 3 && start 1 && start 2 && start 3 &&
    wait_for 10 "[ \"\$(state 1)\$(state 2)\$(state 3)\" = servingservingserving ]" &&
    for k in $(seq 1 40); do put $(( k % 3 + 1 )) "k$k" "a-k$k" >/dev/null || exit 1; done &&
    two_copies 1 2 3 && all_read a 1 2 3 &&
    for i in 1 2 3; do resync $i | jq -e ".stale == 0 and .dropped == 0 and .settled" || exit 1; done
'

# The controller sends the list one node after the other: n1 has it, n2 and n3 not yet. A write
# n1 coordinates by the new list must reach the replica the old list names too, which still
# serves it from its own copy.
test_expect_success 'a write by the new list while others have the old one: no stale copy served' '
    push p4.json 1 && wait_for 5 "curl -s $(url 1)/health | jq -e \".members == 4\"" &&
    for k in $(seq 1 40); do put 1 "k$k" "b-k$k" >/dev/null || exit 1; done &&
    all_read b 2 3 && all_read b 1
'

# The 4th member is in the list but not running: the old owners keep every copy.
test_expect_success 'a member added but down: old nodes serve on, copies that moved are kept' '
    push p4.json 2 3 &&
    wait_for 5 "(for i in 1 2 3; do curl -s $(url \$i)/health | jq -e \".members == 4\" || exit 1; done)" &&
    for i in 1 2 3; do grep -q "members added: no block is newly placed on this node, serving on" n$i.log || exit 1; done &&
    ! grep "serving -> resyncing" n1.log n2.log n3.log &&
    stale=$(sum stale 1 2 3) && echo "stale copies: $stale" && [ "$stale" -gt 0 ] && sleep 1.5 &&
    [ "$(sum dropped 1 2 3)" = 0 ] && two_copies 1 2 3 &&
    for i in 1 2 3; do resync $i | jq -e ".settled == false" || exit 1; done &&
    all_read b 1 2 3
'

# Unsettled (n4 has not said it holds the list): a write goes to the old replica too.
test_expect_success 'while the change is unsettled, writes reach the old replicas as well' '
    for k in $(seq 1 40); do put $(( k % 3 + 1 )) "k$k" "c-k$k" >/dev/null || exit 1; done &&
    two_copies 1 2 3 && all_read c 1 2 3
'

test_expect_success 'the new member resyncs what is placed on it; then the moved copies are dropped' '
    push p4.json 4 && start 4 &&
    wait_for 10 "[ \"\$(state 4)\" = serving ]" &&
    resync 4 | jq -e ".fetched > 0 and .pending == 0 and .stale == 0" &&
    grep -q "resync done" n4.log &&
    wait_for 10 "[ \"\$(sum stale 1 2 3)\" = 0 ]" &&
    dropped=$(sum dropped 1 2 3) && held=$(ls n4/blocks | wc -l) && echo "$dropped" >dropped1 &&
    echo "dropped $dropped, n4 holds $held" && [ "$dropped" -gt 0 ] && [ "$dropped" = "$held" ] &&
    two_copies 1 2 3 4 && all_read c 1 2 3 4 &&
    grep -q "dropped .* copies placed on other members, each held by all of its owners" n1.log n2.log n3.log
'

test_expect_success 'an owner answers /internal/holds only for its own members list' '
    code=$(curl -s -o holds.json -w "%{http_code}" -X POST --data "{\"node\": \"n1\", \"epoch\": 1, \"keys\": [[\"k1\", 1]]}" "$(url 1)/internal/holds") &&
    [ "$code" = 409 ] && jq -e ".error.code == \"members_behind\"" holds.json &&
    curl -s -X POST --data "{\"node\": \"n1\", \"epoch\": $(jq .epoch p4.json), \"keys\": [[\"k1\", 1], [\"nosuch\", 1], [\"k1\", 99999999999999999]]}" "$(url 1)/internal/holds" >holds.json &&
    jq -e ".held == (if $(test -f n1/blocks/k1 && echo true || echo false) then [\"k1\"] else [] end)" holds.json
'

test_expect_success 'a node added alone, then given the members under hcload: nothing failed, stale or lost' '
    start 5 && [ "$(state 5)" = serving ] || exit 1
    # alone, it would take itself for the only replica of every block: a forwarded read is 503
    c=$(curl -s -o /dev/null -w "%{http_code}" -H "X-Hcstor-Forwarded: n1" "$(url 5)/blocks/k1")
    [ "$c" = 503 ] || { echo "forwarded read of k1 to the lone n5: $c"; exit 1; }
    hcload --nodes "127.0.0.101:$PORT,127.0.0.102:$PORT,127.0.0.103:$PORT,127.0.0.104:$PORT" \
        --duration 0 --workers 4 --keys 100 --block-size 2048 --json --quiet >load.json 2>load.err &
    echo $! >"$T/pids/hcload"
    sleep 2 &&
    push p5.json 1 2 3 4 5 &&
    wait_for 20 "[ \"\$(state 5)\" = serving ]" &&
    wait_for 20 "[ \"\$(sum stale 1 2 3 4 5)\" = 0 ]" && sleep 1 &&
    kill -INT "$(pid_of hcload)" && wait "$(pid_of hcload)"; rc=$?
    rm -f "$T/pids/hcload"; jq -c "{ops, errors, failovers, stale_reads, corrupt_reads, verify}" load.json
    [ $rc = 0 ] && jq -e ".ops > 0 and .errors == 0 and .stale_reads == 0 and .corrupt_reads == 0
        and .verify.lost == 0 and .verify.ok == true" load.json &&
    resync 5 | jq -e ".fetched > 0" && [ "$(sum dropped 1 2 3 4)" -gt "$(cat dropped1)" ] &&
    for i in 1 2 3 4 5; do resync $i | jq -e ".settled and .epoch == $EPOCH" || exit 1; done
'

test_done
