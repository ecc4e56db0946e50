#!/usr/bin/env bash
# hcload, the workload client, against real hcstor processes on 127.0.0.61, .62, .64 and .65
# (127.0.0.63 stays dead: nothing listens there). Each hcstor here is a store of its own, so every failover
# test keeps the data on one node: the dead or hung node never answers a request. Checked: the
# report and the timeline, failover from a refused, a hung and a draining node, a restart seen
# as a stall and not an error, lost writes and corrupt reads detected, a cluster that stays down,
# bad usage.
. "$(dirname "$0")/lib.sh"

A=127.0.0.61:$(free_port)
B=127.0.0.62:$(free_port)
DEAD=127.0.0.63:$(free_port)
C=127.0.0.64:$(free_port)
D=127.0.0.65:$(free_port)

# stor_start NAME HOST:PORT DIR: starts hcstor and waits until it answers.
stor_start() {
    hcstor --listen "$2" --data "$3" --version 1.0 >>"$T/$1.log" 2>&1 &
    echo $! >"$T/pids/$1"
    wait_for 20 "curl -sf --max-time 1 http://$2/health"
}
# acked FILE: true once the timeline shows a completed operation.
acked() { grep -q '"ops":[1-9]' "$1"; }

test_expect_success 'bad usage: one line on stderr, exit 2' '
    for args in "" "--nodes $A --workers 0" "--nodes $A --read-ratio 2" \
        "--nodes $A --block-size abc" "--nodes $A --block-size 100" "--nodes $A --bogus" \
        "--nodes $A --keys" "--nodes 127.0.0.61" "--nodes $A, " "--nodes $A --prefix .x" \
        "--nodes $A --duration -1" "--nodes $A extra"; do
        expect_exit 2 hcload $args >out 2>err &&
        [ ! -s out ] && [ "$(wc -l <err)" = 1 ] && grep -q "^hcload: " err || exit 1
    done &&
    expect_exit 2 hcload --nodes $A --workers 0 2>err &&
    grep -q "invalid --workers .0.: expected an integer from 1" err &&
    expect_exit 2 hcload --nodes $A --read-ratio 2 2>err &&
    grep -q "invalid --read-ratio .2.: expected a number from 0 to 1" err &&
    expect_exit 2 hcload --nodes $A --block-size abc 2>err &&
    grep -q "invalid --block-size .abc." err &&
    expect_exit 2 hcload --workers 2 2>err && grep -q "\-\-nodes is required" err &&
    expect_exit 2 hcload --nodes $A --timeline "$T/no/such/dir/tl" 2>err &&
    grep -q "cannot open --timeline" err &&
    hcload --help >out && grep -q "^usage: hcload --nodes" out
'

test_expect_success 'a 3-second run against one hcstor: exit 0 and the whole report' '
    stor_start a $A "$T/a" &&
    hcload --nodes $A --duration 3 --json --timeline tl.jsonl >r.json 2>err &&
    jq -e ".ops > 0 and .ops == .writes + .reads and .reads > 0 and .errors == 0
        and .failovers == 0 and .stale_reads == 0 and .corrupt_reads == 0 and .ok == true
        and .verify.ok == true and .verify.keys > 0 and .verify.checked == .verify.keys
        and .verify.lost == 0 and .duration_s >= 3 and .duration_s < 5 and .ops_per_sec > 0
        and .latency_ms.p50 > 0 and .latency_ms.p50 <= .latency_ms.p99
        and .latency_ms.p99 <= .latency_ms.max and .longest_stall_ms >= 0
        and .longest_stall_ms <= 3000 and (.prefix | test(\"^hcload-\"))" r.json &&
    grep -q "load stopped" err &&
    [ "$(wc -l <tl.jsonl)" -ge 3 ] && [ "$(wc -l <tl.jsonl)" -le 5 ] &&
    jq -se "all(.[]; (.t | type) == \"number\" and .t > 1e9 and .ops >= 0 and .errors == 0
        and .p99_ms <= .max_ms) and (map(.ops) | add) == $(jq .ops r.json)" tl.jsonl
'

test_expect_success 'the text report names the same fields; --quiet is silent on stderr' '
    hcload --nodes $A --duration 1 --quiet --workers 2 --keys 10 --block-size 256 \
        --read-ratio 0.9 >r.txt 2>err &&
    [ ! -s err ] &&
    grep -q "^verify\.ok  *true$" r.txt && grep -q "^latency_ms\.p99  *[0-9.]*$" r.txt &&
    grep -q "^errors  *0$" r.txt && [ "$(wc -l <r.txt)" = 20 ]
'

test_expect_success 'a refused first node is failed over: no error' '
    hcload --nodes $DEAD,$A --duration 2 --workers 2 --json >r.json 2>err &&
    jq -e ".errors == 0 and .failovers > 0 and .ops > 0 and .verify.ok and .ok" r.json
'

test_expect_success 'a hung (SIGSTOPped) node is failed over after --request-timeout' '
    stor_start b $B "$T/b" &&
    kill -STOP "$(pid_of b)" &&
    hcload --nodes $B,$A --duration 2 --workers 2 --request-timeout 300 --json >r.json 2>err;
    rc=$?; kill -KILL "$(pid_of b)"; rm -f "$T/pids/b"
    [ "$rc" = 0 ] &&
    jq -e ".errors == 0 and .failovers > 0 and .verify.ok and .latency_ms.max >= 300
        and .latency_ms.max < 2000" r.json
'

# Writes only, and shorter than the failback period: a worker that left the draining node never
# goes back to read there, where its blocks are not.
test_expect_success 'a draining node (503 on writes) is failed over' '
    stor_start c $C "$T/c" &&
    curl -sf -X POST http://$C/drain >/dev/null &&
    [ "$(curl -s -o /dev/null -w "%{http_code}" -X PUT --data x http://$C/blocks/probe)" = 503 ] &&
    hcload --nodes $C,$A --duration 1.5 --workers 2 --keys 20 --read-ratio 0 --json >r.json \
        2>err &&
    jq -e ".errors == 0 and .failovers > 0 and .writes > 0 and .verify.ok" r.json
'

test_expect_success 'a restart of the only node is a stall, not an error; SIGINT stops cleanly' '
    hcload_bg run --nodes $A --duration 0 --workers 2 --timeline tl2.jsonl &&
    wait_for 10 "acked tl2.jsonl" &&
    stop_daemon a TERM && sleep 1 &&
    stor_start a $A "$T/a" && sleep 0.5 &&
    kill -INT "$(pid_of run)" &&
    expect_exit 0 hcload_wait run &&
    grep -q "SIGINT: stopping" run.err &&
    jq -e ".errors == 0 and .verify.ok and .longest_stall_ms >= 1000
        and .latency_ms.max >= 1000" run.json
'

test_expect_success 'SIGTERM with --duration 0 stops, verifies and reports' '
    hcload_bg term --nodes $A --duration 0 --workers 1 --timeline tl3.jsonl &&
    wait_for 10 "acked tl3.jsonl" &&
    kill -TERM "$(pid_of term)" &&
    expect_exit 0 hcload_wait term &&
    jq -e ".ok and .ops > 0 and .verify.checked == .verify.keys" term.json
'

# Deterministic: hcload is told to stop while its node is down, so no write reaches the new,
# empty node before the verification, and every key acknowledged before the restart is gone.
test_expect_success 'lost writes are detected: exit 1, verify.lost > 0' '
    hcload_bg lost --nodes $A --duration 0 --workers 2 --timeline tl4.jsonl &&
    wait_for 10 "acked tl4.jsonl" &&
    stop_daemon a TERM &&
    kill -INT "$(pid_of lost)" && sleep 0.5 &&
    stor_start a $A "$T/a-empty" &&
    expect_exit 1 hcload_wait lost &&
    jq -e ".verify.lost > 0 and .verify.ok == false and .ok == false and .errors == 0
        and .verify.lost + 2 >= .verify.keys and .verify.checked == .verify.keys
        and .verify.unreachable == 0" lost.json &&
    grep -q "verify: lost write: .* not found, last acknowledged write was seq" lost.err
'

# With --read-ratio 1 a worker writes one key, then only reads it. One byte of its file in
# hcstor's data directory (DATA/blocks/KEY) is changed behind hcstor's back.
test_expect_success 'a corrupt block is detected: corrupt_reads > 0, verify.lost == 1, exit 1' '
    stor_start d $D "$T/d" &&
    hcload_bg corrupt --nodes $D --duration 0 --workers 1 --read-ratio 1 --prefix cx &&
    wait_for 10 "ls $T/d/blocks/cx-w0-*" &&
    printf Z | dd of="$(ls $T/d/blocks/cx-w0-*)" bs=1 seek=300 conv=notrunc 2>/dev/null &&
    wait_for 10 "grep -q \"read .cx-w0-[0-9]*. corrupt\" corrupt.err" &&
    kill -INT "$(pid_of corrupt)" &&
    expect_exit 1 hcload_wait corrupt &&
    jq -e ".corrupt_reads > 0 and .stale_reads == 0 and .errors == 0 and .writes == 1
        and .verify.keys == 1 and .verify.lost == 1 and .ok == false" corrupt.json
'

# Verification stops reading once a key stayed unreachable for a whole --op-timeout, instead of
# spending keys x op-timeout on a dead cluster.
test_expect_success 'a cluster that stays down: exit 1 soon, every key counted unreachable' '
    hcload_bg down --nodes $A --duration 0 --workers 2 --op-timeout 1000 --timeline tl5.jsonl &&
    wait_for 10 "acked tl5.jsonl" &&
    stop_daemon a TERM &&
    kill -INT "$(pid_of down)" &&
    start=$(date +%s) &&
    expect_exit 1 hcload_wait down &&
    [ $(($(date +%s) - start)) -le 10 ] &&
    jq -e ".verify.keys > 0 and .verify.checked == 0 and .verify.unreachable == .verify.keys
        and .verify.lost == .verify.keys and .verify.ok == false" down.json &&
    grep -q "keys not read back, counted lost" down.err
'

test_done
