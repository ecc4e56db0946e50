#!/usr/bin/env bash
# hcstor's settings (docs/hcstor.md "Settings"): the settings file over the flags over the
# defaults, refused at start when a key is unknown or bad (exit 2), re-read on POST /reload and
# SIGHUP (a bad file refused whole, every old value kept), the restart rule (fsync waits for a
# restart, reported as pending_restart), and each setting's effect: the log levels, the resync's
# parallelism (counted by the node and on the wire), fsync always vs batch (fsync calls counted
# by the store). Then the storage address: every socket of a member is on its --listen address,
# replication included. Two real hcstor processes on 127.0.0.91-92, replication 2.
. "$(dirname "$0")/lib.sh"

PORT=$(free_port)
url() { echo "http://127.0.0.9$1:$PORT"; }
start() { # start N [FLAGS...]
    local n=$1
    shift
    mkdir -p "$T/n$n"
    cp "$T/peers.json" "$T/n$n/peers.json"
    hcstor --listen "127.0.0.9$n:$PORT" --data "$T/n$n" --node "n$n" --version 1.0 \
        --settings "$T/n$n/settings.json" "$@" >>"$T/n$n.log" 2>&1 &
    echo $! >"$T/pids/n$n"
    wait_for 10 "curl -sf $(url "$n")/health >/dev/null"
}
state() { curl -s --max-time 3 "$(url "$1")/health" | jq -r .state; }
health() { curl -sS --max-time 5 "$(url "$1")/health"; }
settings() { curl -sS --max-time 5 "$(url "$1")/settings"; }
reload() { curl -sS --max-time 5 -o reload.json -w '%{http_code}' -X POST "$(url "$1")/reload"; }
put() { curl -sSf --max-time 10 -X PUT --data-binary "$3" "$(url "$1")/blocks/$2" >/dev/null; }
get() { curl -sS --max-time 10 "$(url "$1")/blocks/$2"; }
set_file() { echo "$2" >"$T/n$1/settings.json"; } # set_file N JSON
lines() { wc -l <"$T/n$1.log"; }
after() { tail -n +"$(($2 + 1))" "$T/n$1.log"; } # after N LINE: the log past a mark
# writes=N PREFIX: N blocks through n1 (both members hold every block)
writes() { for k in $(seq 1 "$1"); do put 1 "b$k" "$2-$k" || return 1; done; }

cat >"$T/peers.json" <<EOF
{"epoch": 1, "nodes": [{"name": "n1", "host": "127.0.0.91"}, {"name": "n2", "host": "127.0.0.92"}]}
EOF
mkdir -p "$T/n1" "$T/n2" "$T/x"

test_expect_success 'an unknown or bad setting refuses the start (exit 2), naming the key' '
    try() { hcstor --listen 127.0.0.99:1 --data "$T/x" --version 1 "$@"; } &&
    echo "{\"log_level\": \"info\", \"colour\": \"red\"}" >bad.json &&
    expect_exit 2 try --settings bad.json 2>err && cat err &&
    grep -q "unknown setting .colour. (known: log_level, resync_parallelism, fsync, fsync_interval_ms, min_free_mb)" err &&
    echo "{\"resync_parallelism\": 65}" >bad.json &&
    expect_exit 2 try --settings bad.json 2>err &&
    grep -q "setting .resync_parallelism.: 65 is out of range (an integer 1-64)" err &&
    echo "{\"log_level\": \"loud\"}" >bad.json &&
    expect_exit 2 try --settings bad.json 2>err &&
    grep -q "setting .log_level.: .loud. is not one of debug|info|warn|error" err &&
    echo "{\"fsync\": 1}" >bad.json &&
    expect_exit 2 try --settings bad.json 2>err && grep -q "setting .fsync.: expected a string" err &&
    echo "[1]" >bad.json &&
    expect_exit 2 try --settings bad.json 2>err && grep -q "expected a JSON object" err &&
    expect_exit 2 try --settings nosuch.json 2>err && grep -q "cannot read settings file" err &&
    expect_exit 2 try --fsync sometimes 2>err && grep -q "invalid --fsync: setting .fsync." err &&
    expect_exit 2 try --resync-parallelism 0 2>err && grep -q "invalid --resync-parallelism" err &&
    [ ! -d "$T/x/blocks" ]
'

test_expect_success 'POST /reload without --settings: 409, nothing to reload' '
    hcstor --listen "127.0.0.93:$PORT" --data "$T/x" --version 1 --log-level error >x.log 2>&1 &
    echo $! >"$T/pids/x" && wait_for 10 "curl -sf http://127.0.0.93:$PORT/health" &&
    [ "$(curl -s -o r.json -w "%{http_code}" -X POST "http://127.0.0.93:$PORT/reload")" = 409 ] &&
    jq -e ".error.message | test(\"started without --settings\")" r.json &&
    curl -s "http://127.0.0.93:$PORT/settings" | jq -e ".file == null and .settings.log_level == \"error\"" &&
    stop_daemon x TERM && rm -rf "$T/x"
'

# The health reason to wait for is the disk's: a starting service may give another one first.
disk_reason() { curl -s "http://127.0.0.93:$PORT/health" | jq -e '.reason // "" | test("min_free_mb")'; }
test_expect_success 'min_free_mb: health fails while the data directory has less free space' '
    hcstor --listen "127.0.0.93:$PORT" --data "$T/x" --version 1 --min-free-mb 16000000 >x.log 2>&1 &
    echo $! >"$T/pids/x" && wait_for 10 disk_reason &&
    [ "$(curl -s -o h.json -w "%{http_code}" "http://127.0.0.93:$PORT/health")" = 503 ] &&
    jq -e ".ok == false and (.reason | test(\"MB free in .*, below min_free_mb 16000000\"))" h.json &&
    stop_daemon x TERM && rm -rf "$T/x" || exit 1
    hcstor --listen "127.0.0.93:$PORT" --data "$T/x" --version 1 --min-free-mb 1 >x.log 2>&1 &
    echo $! >"$T/pids/x" && wait_for 10 "curl -sf http://127.0.0.93:$PORT/health" &&
    stop_daemon x TERM && rm -rf "$T/x" &&
    expect_exit 2 hcstor --listen "127.0.0.93:$PORT" --data "$T/x" --version 1 --min-free-mb 16777217 2>err &&
    grep -q "min-free-mb" err
'

test_expect_success 'the file overrides the flags, which override the defaults' '
    set_file 1 "{\"resync_parallelism\": 3}" && set_file 2 "{}" &&
    start 1 --log-level warn --resync-parallelism 5 && start 2 &&
    wait_for 10 "[ \"\$(state 1)\$(state 2)\" = servingserving ]" &&
    settings 1 >s1.json && cat s1.json &&
    jq -e ".settings == {log_level: \"warn\", resync_parallelism: 3, fsync: \"always\",
                         fsync_interval_ms: 100, min_free_mb: 0}" s1.json &&
    jq -e ".defaults.resync_parallelism == 5 and .pending_restart == {}" s1.json &&
    health 2 | jq -e ".settings.log_level == \"info\" and .settings.resync_parallelism == 8 and
                      .pending_restart == []"
'

test_expect_success 'POST /reload applies a live setting: debug messages appear, the pid stays' '
    pid=$(pid_of n1) && mark=$(lines 1) && put 1 k1 one &&
    ! after 1 "$mark" | grep -q " debug: " &&
    set_file 1 "{\"log_level\": \"debug\"}" &&
    [ "$(reload 1)" = 200 ] && cat reload.json &&
    jq -e ".changed == [\"log_level\", \"resync_parallelism\"] and .pending_restart == {} and
           .settings.log_level == \"debug\" and .settings.resync_parallelism == 5" reload.json &&
    put 1 k1 two &&
    after 1 "$mark" | grep -q "n1 debug: write of .k1. (3 bytes) coordinated here" &&
    [ "$(pid_of n1)" = "$pid" ] && alive "$pid"
'

test_expect_success 'a bad file is refused whole (400 naming the key), every old value kept' '
    set_file 1 "{\"log_level\": \"info\", \"resync_parallelism\": 0}" &&
    [ "$(reload 1)" = 400 ] && cat reload.json &&
    jq -e ".error.code == \"invalid_argument\" and
           (.error.message | test(\"setting .resync_parallelism.: 0 is out of range\"))" reload.json &&
    set_file 1 "{\"log_level\": \"info\", \"colour\": \"red\"}" &&
    [ "$(reload 1)" = 400 ] && jq -e ".error.message | test(\"unknown setting .colour.\")" reload.json &&
    set_file 1 "{\"log_level\": " && [ "$(reload 1)" = 400 ] &&
    jq -e ".error.message | test(\"cannot read settings file\")" reload.json &&
    settings 1 | jq -e ".settings.log_level == \"debug\" and .settings.resync_parallelism == 5" &&
    grep -q "settings not reloaded, keeping the old values: .*colour" n1.log &&
    set_file 1 "{\"log_level\": \"warn\", \"resync_parallelism\": 99}" &&
    kill -HUP "$(pid_of n1)" && wait_for 5 "grep -q \"n1 warn: settings not reloaded.*: 99 is\" n1.log" &&
    settings 1 | jq -e ".settings.log_level == \"debug\" and .settings.resync_parallelism == 5"
'

test_expect_success 'SIGHUP reloads: at level error neither info nor warn messages are written' '
    set_file 1 "{\"log_level\": \"error\"}" && kill -HUP "$(pid_of n1)" &&
    wait_for 5 "settings 1 | jq -e \".settings.log_level == \\\"error\\\"\"" &&
    mark=$(lines 1) &&
    stop_daemon n2 TERM && wait_for 5 "curl -s $(url 1)/ok-to-stop | grep -q \"n2 is down\"" &&
    put 1 k1 three && start 2 && wait_for 10 "[ \"\$(state 2)\" = serving ]" &&
    after 1 "$mark" >quiet.log && cat quiet.log && [ ! -s quiet.log ] &&
    set_file 1 "{\"log_level\": \"warn\"}" && kill -HUP "$(pid_of n1)" &&
    wait_for 5 "settings 1 | jq -e \".settings.log_level == \\\"warn\\\"\"" && mark=$(lines 1) &&
    stop_daemon n2 KILL && wait_for 5 "after 1 $mark | grep -q \"n1 warn: peer n2 is down\"" &&
    start 2 && wait_for 10 "[ \"\$(state 2)\" = serving ]" &&
    ! after 1 "$mark" | grep -v " warn: \| error: " | grep . &&
    grep -q "n2 info: resync done" n2.log
'

test_expect_success 'a restart setting is not applied by a reload: pending_restart until restarted' '
    set_file 1 "{\"fsync\": \"batch\", \"fsync_interval_ms\": 10000}" && pid=$(pid_of n1) &&
    [ "$(reload 1)" = 200 ] && cat reload.json &&
    jq -e ".pending_restart == {fsync: \"batch\", fsync_interval_ms: 10000} and
           .changed == [] and .settings.fsync == \"always\"" reload.json &&
    health 1 | jq -e ".pending_restart == [\"fsync\", \"fsync_interval_ms\"] and
                      .settings.fsync == \"always\" and .store.fsync == \"always\"" &&
    set_file 1 "{\"fsync\": \"always\"}" && [ "$(reload 1)" = 200 ] &&
    health 1 | jq -e ".pending_restart == []" &&
    set_file 1 "{\"fsync\": \"batch\", \"fsync_interval_ms\": 10000}" && [ "$(reload 1)" = 200 ] &&
    [ "$(pid_of n1)" = "$pid" ] &&
    stop_daemon n1 TERM && start 1 && health 1 >h.json && cat h.json &&
    jq -e ".pending_restart == [] and .settings.fsync == \"batch\" and .store.fsync == \"batch\"" h.json
'

# One pass of writes through n1 (fsync=batch, 10 s) reaches n2 (fsync=always) as replica writes.
test_expect_success 'fsync=always: every write fsynced before its answer; batch: later, together' '
    wait_for 10 "[ \"\$(state 1)\$(state 2)\" = servingserving ]" &&
    wait_for 15 "health 1 | jq -e \".store.unsynced == 0\"" &&
    health 1 >before1.json && health 2 >before2.json &&
    writes 10 batch && health 1 >after1.json && health 2 >after2.json &&
    jq -c .store before1.json after1.json before2.json after2.json &&
    jq -e ".store.unsynced == 0 and .store.fsync == \"always\"" after2.json &&
    [ $(( $(jq .store.syncs after2.json) - $(jq .store.syncs before2.json) )) = 20 ] &&
    jq -e ".store.unsynced == 10 and .store.fsync == \"batch\"" after1.json &&
    [ "$(jq .store.syncs after1.json)" = "$(jq .store.syncs before1.json)" ] &&
    wait_for 15 "health 1 | jq -e \".store.unsynced == 0\"" && health 1 >flushed1.json &&
    [ $(( $(jq .store.syncs flushed1.json) - $(jq .store.syncs after1.json) )) = 11 ] &&
    [ $(( $(jq .store.flushes flushed1.json) - $(jq .store.flushes after1.json) )) = 1 ] &&
    for k in $(seq 1 10); do [ "$(get 2 "b$k")" = "batch-$k" ] || exit 1; done
'

# n2 is hung (SIGSTOP) while n1 writes around it; when it wakes it notices its stall and fetches
# what it missed, resync_parallelism fetches at once, each on its own connection to n1.
fetch_conns() { ss -tnH state established src "127.0.0.92" dst "127.0.0.91:$PORT" | wc -l; }
# missed_resync PREFIX N: n2 misses 40 writes, then resyncs them at most N at once
missed_resync() {
    local mark
    mark=$(lines 2) && kill -STOP "$(pid_of n2)" && writes 40 "$1" && kill -CONT "$(pid_of n2)" &&
    wait_for 10 "after 2 $mark | grep -q \"n2 warn: this node stalled\"" &&
    wait_for 10 "after 2 $mark | grep -Eq \"resync done: (3[0-9]|40) blocks fetched\"" &&
    after 2 "$mark" | grep "resync done: [1-9]" | tee done.log &&
    grep -q "at most $2 at once (resync_parallelism $2)" done.log &&
    for k in $(seq 1 40); do [ "$(get 2 "b$k")" = "$1-$k" ] || exit 1; done
}

test_expect_success 'resync_parallelism bounds the fetches in flight, and they are on the wire' '
    set_file 2 "{\"resync_parallelism\": 1}" && [ "$(reload 2)" = 200 ] &&
    missed_resync p1 1 && curl -s "$(url 2)/resync" | jq -e ".parallelism == 1" &&
    [ "$(fetch_conns)" -le 10 ] &&
    set_file 2 "{\"resync_parallelism\": 16}" && [ "$(reload 2)" = 200 ] &&
    jq -e ".changed == [\"resync_parallelism\"]" reload.json &&
    missed_resync p16 16 && curl -s "$(url 2)/resync" | jq -e ".parallelism == 16" &&
    echo "connections n2 -> n1: $(fetch_conns)" && [ "$(fetch_conns)" -ge 16 ]
'

test_expect_success 'every socket of a member is on its --listen address, replication included' '
    ss -tnHp | grep "pid=$(pid_of n2)," >socks.txt && cat socks.txt &&
    [ "$(wc -l <socks.txt)" -ge 5 ] &&
    ! awk "{print \$4}" socks.txt | grep -v "^127\.0\.0\.92:" &&
    ss -tlnHp | grep "pid=$(pid_of n2)," | awk "{print \$4}" >listen.txt &&
    [ "$(cat listen.txt)" = "127.0.0.92:$PORT" ]
'

test_done
