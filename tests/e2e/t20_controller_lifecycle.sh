#!/usr/bin/env bash
# hcctld lifecycle: clean SIGTERM, refusal of a newer schema, refusal of bad command lines, the
# events retention.
. "$(dirname "$0")/lib.sh"

test_expect_success 'SIGTERM stops the controller cleanly (exit 0)' '
    controller_init &&
    { hcctld run --data-dir "$CTL_DIR" >>"$T/hcctld.log" 2>&1 & pid=$!; } &&
    wait_for 10 "hcctl version -o json | jq -e .controller.version" &&
    kill -TERM $pid && wait $pid && grep -q "hcctld stopped" "$T/hcctld.log"
'

test_expect_success 'a database newer than the binary is refused with a clear error and left intact' '
    v=$(sqlite3 "$CTL_DIR/hcctld.db" "pragma user_version") &&
    sqlite3 "$CTL_DIR/hcctld.db" "pragma user_version = $((v + 1))" &&
    sum=$(sha256sum <"$CTL_DIR/hcctld.db") &&
    ! timeout 10 hcctld run --data-dir "$CTL_DIR" 2>err &&
    grep -q "newer" err && grep -q "$((v + 1))" err &&
    [ "$(sha256sum <"$CTL_DIR/hcctld.db")" = "$sum" ] &&
    sqlite3 "$CTL_DIR/hcctld.db" "pragma user_version = $v"
'

test_expect_success 'events older than --events-retention are pruned, recent ones kept; bad values exit 2' '
    timeout 10 hcctld run --data-dir "$CTL_DIR" --events-retention 5m 2>err; [ $? = 2 ] &&
    grep -q "at least 1h" err &&
    timeout 10 hcctld run --data-dir "$CTL_DIR" --events-retention soon 2>err; [ $? = 2 ] &&
    old=$(( $(date +%s%3N) - 2 * 3600 * 1000 )) && q=$(printf "\047") &&
    sqlite3 "$CTL_DIR/hcctld.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
        WHERE i < 12000) INSERT INTO events (ts, type, message) SELECT $old, ${q}test.old${q}, ${q}o${q} FROM n;
        INSERT INTO events (ts, type, message) VALUES ($(date +%s%3N), ${q}test.recent${q}, ${q}r${q})" &&
    controller_start --events-retention 1h &&
    wait_for 10 "hcctl events --type events.pruned -o json | jq -e ${q}.events[0].details.removed == 12000${q}" &&
    [ "$(sqlite3 "$CTL_DIR/hcctld.db" "SELECT COUNT(*) FROM events WHERE type = ${q}test.old${q}")" = 0 ] &&
    [ "$(sqlite3 "$CTL_DIR/hcctld.db" "SELECT COUNT(*) FROM events WHERE type = ${q}test.recent${q}")" = 1 ] &&
    controller_stop
'

test_expect_success 'run on a directory that was never initialised fails with a hint' '
    ! timeout 10 hcctld run --data-dir "$T/nothing" 2>err && grep -qi "init" err
'

test_expect_success 'hcctl usage errors exit 2' '
    hcctl nodez list 2>err; [ $? = 2 ] && grep -q "did you mean" err &&
    hcctl node show 2>/dev/null; [ $? = 2 ] &&
    hcctl -o yaml node list 2>/dev/null; [ $? = 2 ]
'

test_expect_success 'join-token rejects a bad --ttl with exit 2' '
    controller_start &&
    hcctl cluster join-token --ttl abc 2>err; [ $? = 2 ] && grep -q "abc" err
'

test_expect_success 'operation wait on an unknown operation exits 1' '
    hcctl operation wait op-000000000000 2>err; [ $? = 1 ] && grep -q "op-000000000000" err
'

test_expect_success 'a second hcctld on the same data dir is refused, naming the first' '
    ! timeout 10 hcctld run --data-dir "$CTL_DIR" --listen "127.0.0.1:$(free_port)" 2>err &&
    grep -q "another hcctld (pid $(cat "$T/pids/hcctld")) already runs" err &&
    hcctl version -o json | jq -e .controller.version >/dev/null
'

test_expect_success 'init --advertise: nodes and the CLI are told that address; the certificate names it' '
    port=$(free_port) &&
    XDG_CONFIG_HOME=$T/adv-config hcctld init --data-dir "$T/adv" --listen "0.0.0.0:$port" \
        --advertise "127.0.0.7:$port" >adv.out &&
    jq -e ".advertise == \"127.0.0.7:$port\" and .listen == \"0.0.0.0:$port\"" "$T/adv/controller.json" &&
    jq -e ".controller == \"https://127.0.0.7:$port\"" "$T/adv-config/hcctl/config.json" &&
    openssl x509 -in "$T/adv/server.pem" -noout -ext subjectAltName | grep -q "IP Address:127.0.0.7" &&
    { hcctld run --data-dir "$T/adv" --poll-interval 1s >>"$T/adv.log" 2>&1 & echo $! >"$T/pids/adv"; } &&
    wait_for 10 "XDG_CONFIG_HOME=$T/adv-config hcctl version -o json | jq -e .controller.version" &&
    stop_daemon adv TERM
'

test_expect_success '--advertise that nodes could not use is refused (exit 2)' '
    timeout 10 hcctld run --data-dir "$T/adv" --advertise "127.0.0.99:1" 2>err; [ $? = 2 ] &&
    grep -q "certificate does not name" err &&
    timeout 10 hcctld run --data-dir "$T/adv" --advertise "0.0.0.0:7443" 2>err; [ $? = 2 ] &&
    grep -q "not an address and port nodes can reach" err &&
    hcctld init --data-dir "$T/adv2" --advertise "127.0.0.7" 2>err; [ $? = 2 ] &&
    [ ! -e "$T/adv2/hcctld.db" ]
'

test_expect_success 'init keeps a CLI config that was already there as .bak' '
    cp "$T/adv-config/hcctl/config.json" before.json &&
    XDG_CONFIG_HOME=$T/adv-config hcctld init --data-dir "$T/adv3" --listen "127.0.0.8:$(free_port)" \
        >/dev/null 2>err &&
    grep -q "kept as $T/adv-config/hcctl/config.json.bak" err &&
    cmp before.json "$T/adv-config/hcctl/config.json.bak" &&
    jq -e ".controller | startswith(\"https://127.0.0.8:\")" "$T/adv-config/hcctl/config.json"
'

test_done
