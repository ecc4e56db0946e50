#!/usr/bin/env bash
# Controller HA on etcd without nodes (issue 17, docs/ha.md): three etcd members and three
# supervised hcctld on loopback. Election, standbys (421 not_leader naming the leader, /v1/ha),
# every acknowledged write kept across SIGKILLs of the leader, a leader SIGSTOPped past its lease
# exits when continued, rows in etcd, export, and the hostile inputs of the ha commands.
# (tests/lab/t80_ha_failover.sh does the same under a rolling upgrade with nodes and hcload.)
. "$(dirname "$0")/lib.sh"
command -v etcd >/dev/null || { echo "SKIP: no etcd (scripts/install-deps.sh installs it)"; exit 0; }
BIN=$HC_BIN HA_DIR=$T/ha HA_TTL=2s HA_PORT=$CTL_PORT
HA_ETCD_PORT=$(free_port) HA_ETCD_PEER_PORT=$(free_port)
. "$HC_SRC/tests/ha/ha_lib.sh"
trap 'ha_teardown; e2e_cleanup' EXIT
mkdir -p "$HA_DIR"
url() { echo "https://${HA_CTL_IPS[$(($1 - 1))]}:$HA_PORT"; }
# hcctl given every controller: it finds the leader itself (docs/hcctl.md "Several controllers").
hc() { HCCTL_CONTROLLER="$(url 1),$(url 2),$(url 3)" hcctl "$@"; }
BUNDLES=$HC_BIN/../bundles
# peer_put N FILE NAME [SECRET]: PUT a bundle file to standby N as another controller would.
peer_put() {
    curl -s --cacert "$HA_DIR/c1/ca.pem" -o put.json -w "%{http_code}" -X PUT --data-binary "@$2" \
        -H "Authorization: Bearer hcha1.${4:-$(cat "$HA_DIR/c1/ha.secret")}" "$(url "$1")/v1/ha/bundles/$3"
}

test_expect_success 'ha init moves the state into etcd; the controller leads' '
    hcctld init --data-dir "$HA_DIR/c1" --listen "127.0.0.21:$HA_PORT" --trust-key "$BUNDLES/dev.pub" >init.out 2>&1 &&
    ha_etcd_start &&
    hcctld ha init --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" >ha-init.out && cat ha-init.out &&
    ha_etcdctl get --prefix /hcctl/rows/clusters/ --keys-only | grep -q "/hcctl/rows/clusters/" &&
    ha_ctl_start 1 && [ "$(ha_wait_leader 20)" = 1 ] &&
    ha_status 1 >s.json && jq -e ".role == \"leader\" and .leader.url == \"$(url 1)\" and .leader.term > 0" s.json &&
    hc token create before-join -o json >/dev/null
'

test_expect_success 'hostile ha command lines are refused clearly' '
    hcctld init --data-dir "$HA_DIR/foreign" --listen "127.0.0.29:$HA_PORT" --cli-config foreign.json >/dev/null 2>&1 &&
    ! hcctld ha init --data-dir "$HA_DIR/foreign" --etcd "$HA_ETCD_URLS" 2>e9 && grep -q "tls handshake" e9 &&
    mkdir "$HA_DIR/other" && (cd "$HA_DIR/c1" && cp -r ca.pem ca.key client.pem client.key server.pem server.key hcctld.db "$HA_DIR/other/") &&
    jq ".cluster_id = \"0123456789abcdef\"" "$HA_DIR/c1/controller.json" >"$HA_DIR/other/controller.json" &&
    ! hcctld ha init --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" 2>e0 && grep -q "already runs" e0 &&
    ! hcctld ha init --data-dir "$HA_DIR/other" --etcd "$HA_ETCD_URLS" 2>e1 && grep -q "already holds hcctl state" e1 &&
    ! hcctld run --data-dir "$HA_DIR/other" --ha-etcd "http://127.0.0.11:$HA_ETCD_PORT" 2>e2 &&
    grep -q "not https://HOST:PORT" e2 &&
    ! hcctld run --data-dir "$HA_DIR/other" --ha-etcd "$HA_ETCD_URLS" --ha-lease-ttl 500ms 2>e3 &&
    grep -q "whole seconds" e3 &&
    ! timeout 20 hcctld run --data-dir "$HA_DIR/other" --ha-etcd "$HA_ETCD_URLS" 2>e3b &&
    grep -q "etcd holds cluster" e3b &&
    eight=$(printf "https://127.0.0.1:%d," 1 2 3 4 5 6 7 8) &&
    ! hcctld ha export --data-dir "$HA_DIR/c1" --etcd "$eight" --output x.db 2>e4 && grep -q "more than 7" e4 &&
    ! hcctld ha export --data-dir "$HA_DIR/c1" --etcd "https://127.0.0.11:$HA_ETCD_PORT,https://127.0.0.11:$HA_ETCD_PORT" --output x.db 2>e5 &&
    grep -q "twice" e5 &&
    echo hct1_not_a_token >bad.token &&
    ! hcctld ha join --data-dir "$HA_DIR/bad" --from "$(url 1)" --token-file bad.token \
        --ca-file "$HA_DIR/c1/ca.pem" --listen 127.0.0.22:1 2>e6 && grep -q "401" e6 && [ ! -e "$HA_DIR/bad" ] &&
    ! hcctld ha join --data-dir "$HA_DIR/bad" --from "http://127.0.0.21:$HA_PORT" --token-file bad.token \
        --ca-file "$HA_DIR/c1/ca.pem" --listen 127.0.0.22:1 2>e7 && grep -q "not https" e7 &&
    ! hcctld ha join --data-dir "$HA_DIR/c1" --from "$(url 1)" --token-file "$HA_DIR/c1/admin.token" \
        --ca-file "$HA_DIR/c1/ca.pem" --listen 127.0.0.22:1 2>e8 && grep -q "exists already" e8 &&
    curl -s --cacert "$HA_DIR/c1/ca.pem" -o anon.json -w "%{http_code}" "$(url 1)/v1/ha/join" >code &&
    [ "$(cat code)" = 401 ]
'

test_expect_success 'two controllers join and stand by; a standby answers 421 naming the leader' '
    for n in 2 3; do
        hcctld ha join --data-dir "$HA_DIR/c$n" --from "$(url 1)" --token-file "$HA_DIR/c1/admin.token" \
            --ca-file "$HA_DIR/c1/ca.pem" --listen "${HA_CTL_IPS[$((n - 1))]}:$HA_PORT" >join$n.out &&
        [ "$(stat -c %a "$HA_DIR/c$n/ca.key")" = 600 ] && ha_ctl_start $n || exit 1
    done &&
    for n in 2 3; do wait_for 20 "[ \"\$(ha_status $n | ha_json role)\" = standby ]" || exit 1; done &&
    wait_for 10 "ha_status 3 | jq -e \"([.members[] | select(.alive)] | length) == 3 and .leader.url == \\\"$(url 1)\\\"\"" &&
    for n in 1 2 3; do jq -e ".ha_etcd == \"$HA_ETCD_URLS\"" "$HA_DIR/c$n/controller.json" >/dev/null || exit 1; done &&
    ! hcctld token create --data-dir "$HA_DIR/c2" --name local 2>tok.err && grep -q "belongs to an HA controller" tok.err &&
    curl -s -D hdr --cacert "$HA_DIR/c1/ca.pem" -o sb.json -w "%{http_code}" "$(url 2)/v1/nodes?x=1" >code &&
    [ "$(cat code)" = 421 ] && jq -e ".error.code == \"not_leader\" and .error.leader == \"$(url 1)\"" sb.json &&
    grep -qi "^location: $(url 1)/v1/nodes" hdr
'

# etcd member e0's count of Status calls (a GET /v1/ha round asks each member once).
etcd_status_calls() {
    curl -s --cacert "$HA_DIR/c1/ca.pem" --cert "$HA_DIR/etcd-certs/e0.pem" --key "$HA_DIR/etcd-certs/e0.key" \
        "https://127.0.0.11:$HA_ETCD_PORT/metrics" |
        awk '/^grpc_server_started_total.*grpc_method="Status"/ { n += $2 } END { print n + 0 }'
}
test_expect_success 'hcctl cluster status shows the controllers and etcd' '
    hc cluster status -o json >cs.json &&
    jq -e ".ha.role == \"leader\" and (.ha.members | length) == 3 and (.ha.etcd | length) == 3" cs.json &&
    hc cluster status >cs.txt && cat cs.txt && grep -q "127.0.0.22:$HA_PORT" cs.txt && grep -q "127.0.0.12:$HA_ETCD_PORT" cs.txt
'

test_expect_success 'anonymous GET /v1/ha floods do not reach etcd: at most one round a second' '
    before=$(etcd_status_calls) && t0=$(date +%s) &&
    for i in $(seq 100); do curl -s -o /dev/null --cacert "$HA_DIR/c1/ca.pem" "$(url 2)/v1/ha"; done &&
    elapsed=$(( $(date +%s) - t0 )) && after=$(etcd_status_calls) &&
    echo "100 calls in ${elapsed}s: etcd Status calls $before -> $after" &&
    [ "$after" -gt "$before" ] && [ $((after - before)) -le $((elapsed + 2)) ]
'

test_expect_success 'an upload is acknowledged once a majority holds verified copies' '
    hc software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    for n in 2 3; do cmp "$BUNDLES/hcstor-1.0.tar.gz" "$HA_DIR/c$n/bundles/1.0.tar.gz" || exit 1; done &&
    ha_ctl_stop 3 && hc software upload "$BUNDLES/hcstor-1.1.tar.gz" &&
    cmp "$BUNDLES/hcstor-1.1.tar.gz" "$HA_DIR/c2/bundles/1.1.tar.gz" &&
    ha_ctl_stop 2 && ! hc software upload "$BUNDLES/hcstor-1.2-broken.tar.gz" 2>maj.err &&
    grep -q "reached 1 of 3 controllers" maj.err &&
    ! hc software list -o json | jq -e ".bundles[] | select(.version == \"1.2\")" &&
    ha_ctl_start 2 && ha_ctl_start 3 &&
    for n in 2 3; do wait_for 20 "[ \"\$(ha_status $n | ha_json role)\" = standby ]" || exit 1; done
'

test_expect_success 'standbys refuse bundle copies without the secret, with a bad name or contents' '
    [ "$(peer_put 2 "$BUNDLES/hcstor-1.1.tar.gz" 1.1.tar.gz wrongsecret)" = 401 ] &&
    [ "$(peer_put 2 "$BUNDLES/hcstor-1.1.tar.gz" ..%2Fx.tar.gz)" = 400 ] &&
    [ "$(peer_put 2 "$BUNDLES/hcstor-1.1.tar.gz" 9.9.tar.gz)" = 409 ] &&
    printf "hcsig1 nonsense\n" >bad.sig && [ "$(peer_put 2 bad.sig 9.9.tar.gz.sig)" = 400 ] &&
    [ "$(peer_put 2 "$BUNDLES/hcstor-1.1.tar.gz.sig" 9.9.tar.gz.sig)" = 200 ] &&
    [ "$(peer_put 2 "$BUNDLES/hcstor-1.0.tar.gz" 9.9.tar.gz)" = 400 ] &&
    jq -e ".error.code | startswith(\"bundle_\")" put.json && [ ! -e "$HA_DIR/c2/bundles/9.9.tar.gz" ]
'

test_expect_success 'every acknowledged write survives three SIGKILLs of the leader' '
    : >failovers &&
    for k in 1 2 3; do
        hc token create "kill-$k" -o json >/dev/null &&
        l=$(ha_leader) && t0=$(date +%s%3N) && kill -KILL "$(ha_ctl_pid "$l")" &&
        wait_for 20 "nl=\$(ha_leader) && [ \"\$nl\" != $l ] || [ \"\$(ha_status $l | ha_json role)\" = leader ]" &&
        echo "kill $k: c$l -> c$(ha_leader) in $(( $(date +%s%3N) - t0 )) ms" | tee -a failovers &&
        hc token list -o json >tokens.json &&
        for want in before-join $(seq -f "kill-%g" 1 "$k"); do
            jq -e --arg w "$want" "[.tokens[].name] | index(\$w) != null" tokens.json >/dev/null || { echo "lost $want"; exit 1; }
        done || exit 1
    done &&
    terms=$(for n in 1 2 3; do ha_status $n | ha_json leader.term; done | sort -u | wc -l) && [ "$terms" = 1 ] &&
    l=$(ha_leader) && curl -s --cacert "$HA_DIR/c1/ca.pem" -H "Authorization: Bearer $(cat "$HA_DIR/c1/admin.token")" \
        "$(url "$l")/v1/software/1.1/bundle" | cmp - "$BUNDLES/hcstor-1.1.tar.gz"
'

test_expect_success 'a leader SIGSTOPped past its lease exits as soon as it is continued' '
    l=$(ha_leader) && pid=$(ha_ctl_pid "$l") && kill -STOP "$pid" &&
    wait_for 20 "nl=\$(ha_leader) && [ \"\$nl\" != $l ]" &&
    kill -CONT "$pid" && wait_for 10 "! kill -0 $pid 2>/dev/null" &&
    grep -q "leadership lost" "$HA_DIR/c$l.log" &&
    wait_for 20 "[ \"\$(ha_status $l | ha_json role)\" = standby ]" &&
    hc token create after-stop -o json >/dev/null
'

test_expect_success 'ha export writes a standalone database with every row' '
    hcctld ha export --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" --output "$T/export.db" >export.out &&
    [ "$(sqlite3 "$T/export.db" "SELECT COUNT(*) FROM tokens WHERE name LIKE '"'"'kill-%'"'"'")" = 3 ] &&
    ! hcctld ha export --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" --output "$T/export.db" 2>ex.err &&
    grep -q "exists already" ex.err
'

test_done
