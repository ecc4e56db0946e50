#!/usr/bin/env bash
# Controller HA on etcd (issue 17, docs/ha.md): three etcd members on loopback over mutual TLS,
# three hcctld on the lab's management network (198.18.0.1-3), a 3-node lab under hcload, and a
# rolling upgrade during which the leader is SIGKILLed at random steps (HA_KILLS times, the seed
# printed). Asserted: the operation succeeds; every node ran the new version's service start
# exactly once; never more than one service down (agents' histories); hcload saw no error and
# lost nothing; every event acknowledged before a kill is still there after it; a killed hcctld
# comes back as a standby. Then: the leader SIGSTOPped past its lease exits when continued and
# no agent accepts its stale term; etcd's raft leader killed, and both at once.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"
BIN=$HC_BIN HA_DIR=$T/ha HA_TTL=2s HA_POLL=500ms
. "$HC_SRC/tests/ha/ha_lib.sh"
lab_trap_teardown 'ha_teardown; e2e_cleanup'
HA_CTL_IPS=(198.18.0.1 198.18.0.2 198.18.0.3)
HA_PORT=$CTL_PORT
SEED=${HA_SEED:-$RANDOM}
HA_KILLS=${HA_KILLS:-3}
RANDOM=$SEED
echo "# seed $SEED (HA_SEED=$SEED reproduces the kill points)"
mkdir -p "$HA_DIR"

leader_url() { echo "https://${HA_CTL_IPS[$(($1 - 1))]}:$HA_PORT"; }
# hcctl given every controller: it finds the leader itself, and waits through a failover.
hc() { HCCTL_CONTROLLER="$(leader_url 1),$(leader_url 2),$(leader_url 3)" hcctl "$@"; }
succeeded_steps() { hc operation show "$1" -o json | jq '[.steps[] | select(.state == "succeeded")] | length'; }
op_state() { hc operation show "$1" -o json | jq -r .operation.state; }
max_event_id() { hc events --limit 1 -o json | jq '.events[0].id'; }
# start_waiter OP: `hcctl operation wait OP` in the background, its exit status into wait.rc.
start_waiter() {
    (hc operation wait "$1" --timeout 10m >wait.out 2>wait.err; echo $? >wait.rc) &
}

hcctld init --data-dir "$HA_DIR/c1" --listen "198.18.0.1:$CTL_PORT" --cluster-name ha \
    --trust-key "$BUNDLES/dev.pub" >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up 3 --prefix hca --key "$HA_DIR/c1/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
host_if=$(ip -4 -o addr show to 198.18.0.1/32 | awk '{print $2}')
ip addr add 198.18.0.2/24 dev "$host_if" && ip addr add 198.18.0.3/24 dev "$host_if" || exit 1

test_expect_success 'ha init moves the controller into etcd; it leads; /v1/ha says so' '
    ha_etcd_start &&
    hcctld ha init --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" >ha-init.out &&
    grep -q "rows of" ha-init.out &&
    ! hcctld ha init --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" 2>again.err &&
    grep -q "already holds hcctl state" again.err &&
    ha_ctl_start 1 && [ "$(ha_wait_leader 20)" = 1 ] &&
    ha_status 1 >ha1.json && jq -e ".role == \"leader\" and .leader.term > 0 and (.etcd | length) == 3 and all(.etcd[]; .healthy)" ha1.json
'

test_expect_success 'a cluster, bundles and a first install through the HA leader' '
    hc cluster create ha --node 198.18.0.11 --node 198.18.0.12 --node 198.18.0.13 \
        --storage-interface eth1 --accept-new-host-keys >create.out 2>&1 &&
    hc software upload "$BUNDLES/hcstor-1.0.tar.gz" && hc software upload "$BUNDLES/hcstor-1.1.tar.gz" &&
    hc software upload "$BUNDLES/hcstor-1.3.tar.gz" &&
    hc upgrade --rolling --to 1.0 --yes && [ "$(hc node list -o json | jq -r "[.nodes[].software_version] | join(\" \")")" = "1.0 1.0 1.0" ]
'

test_expect_success 'two more controllers join from the leader and stand by' '
    for n in 2 3; do
        hcctld ha join --data-dir "$HA_DIR/c$n" --from "$(leader_url 1)" \
            --token-file "$HA_DIR/c1/admin.token" --ca-file "$HA_DIR/c1/ca.pem" \
            --listen "${HA_CTL_IPS[$((n - 1))]}:$HA_PORT" >join$n.out &&
        grep -q "bundles: 3" join$n.out && ha_ctl_start $n || exit 1
    done &&
    for n in 2 3; do wait_for 20 "[ \"\$(ha_status $n | ha_json role)\" = standby ]" || exit 1; done &&
    wait_for 10 "ha_status 2 | jq -e \"(.members | length) == 3 and ([.members[] | select(.alive)] | length) == 3\"" &&
    curl -s --cacert "$HA_DIR/c1/ca.pem" -o standby.json -w "%{http_code}" "$(leader_url 2)/v1/nodes" >code &&
    [ "$(cat code)" = 421 ] && jq -e ".error.code == \"not_leader\" and .error.leader == \"$(leader_url 1)\"" standby.json
'

# kill_leader_during OP: SIGKILLs the leader at random steps of OP until it ends or HA_KILLS
# kills were made in all (counted in the file kills); each time, the events acknowledged before
# the kill must still be there once another controller leads.
kill_leader_during() {
    local op=$1 at l acked t0 t1 nl
    while [ "$(wc -l <kills)" -lt "$HA_KILLS" ]; do
        at=$(( $(succeeded_steps "$op") + 1 + RANDOM % 2 ))
        wait_for 120 "[ \$(succeeded_steps $op) -ge $at ] || [ \"\$(op_state $op)\" != running ]" || return 1
        [ "$(op_state "$op")" = running ] || return 0
        l=$(ha_leader) && acked=$(max_event_id) || return 1
        t0=$(date +%s%3N) && kill -KILL "$(ha_ctl_pid "$l")" || return 1
        until nl=$(ha_leader) && [ "$nl" != "$l" ] || [ "$(ha_status $l | ha_json role)" = leader ]; do sleep 0.05; done
        t1=$(date +%s%3N)
        hc events --limit 1000 -o json | jq -e --argjson a "$acked" "[.events[].id] | index(\$a) != null" >/dev/null ||
            { echo "event $acked lost"; return 1; }
        echo "kill $(( $(wc -l <kills) + 1 )): leader c$l at step $at of $op, new leader c$(ha_leader) after $((t1 - t0)) ms; events up to $acked kept" | tee -a kills
    done
}

# upgrade_with_kills VERSION: a rolling upgrade to VERSION under kills; it succeeds, hcctl's
# operation wait follows it to the end, every node started VERSION exactly once.
upgrade_with_kills() {
    local op
    op=$(hc upgrade --rolling --to "$1" --yes --no-wait -o json | jq -r .operation.id) &&
    echo "operation $op to $1" && rm -f wait.rc && start_waiter "$op" &&
    kill_leader_during "$op" &&
    wait_for 300 "[ \"\$(op_state $op)\" != running ] && [ \"\$(op_state $op)\" != pending ]" &&
    [ "$(op_state "$op")" = succeeded ] &&
    wait_for 60 "[ -s wait.rc ]" && echo "operation wait across the failovers: exit $(cat wait.rc)" &&
    [ "$(cat wait.rc)" = 0 ] &&
    [ "$(hc node list -o json | jq -r "[.nodes[].software_version] | join(\" \")")" = "$1 $1 $1" ] &&
    histories | jq -s --arg v "$1" "[.[] | select(.event == \"started\" and .version == \$v)] | group_by(.node) | map(length)" >starts.json &&
    echo "starts of $1 per node: $(cat starts.json)" && jq -e "length == 3 and all(.[]; . == 1)" starts.json
}

test_expect_success "rolling upgrades under hcload with the leader SIGKILLed $HA_KILLS times at random steps" '
    load_start ha && : >kills &&
    upgrade_with_kills 1.1 &&
    { [ "$(wc -l <kills)" -ge "$HA_KILLS" ] || upgrade_with_kills 1.3; } &&
    echo "$(wc -l <kills) kills" && [ "$(wc -l <kills)" -ge 2 ] &&
    load_stop ha &&
    h=$(max_down_from_histories) && echo "most services down at once: $h" && [ "$h" -le 1 ] &&
    hc events --type op.resumed -o json | jq -e "[.events[] | select(.op_id != null)] | length >= 2"
'

[ -f "$T/kills" ] && sed 's/^/# /' "$T/kills"
[ -f "$T/ha.json" ] && echo "# hcload: $(jq -c '{ops, errors, longest_stall_ms, verify}' "$T/ha.json")"

test_expect_success 'every killed controller came back as a standby' '
    for n in 1 2 3; do
        wait_for 20 "[ -n \"\$(ha_status $n | ha_json role)\" ]" || exit 1
    done &&
    [ "$(for n in 1 2 3; do ha_status $n | ha_json role; done | sort | tr "\n" " ")" = "leader standby standby " ]
'

test_expect_success 'a leader SIGSTOPped past its lease exits when continued; agents refuse its term' '
    l=$(ha_leader) && pid=$(ha_ctl_pid "$l") && oldterm=$(ha_status "$l" | ha_json leader.term) &&
    kill -STOP "$pid" &&
    wait_for 20 "nl=\$(ha_leader) && [ \"\$nl\" != $l ]" && nl=$(ha_leader) &&
    newterm=$(ha_status "$nl" | ha_json leader.term) &&
    sleep 2 && kill -CONT "$pid" &&
    wait_for 10 "! kill -0 $pid 2>/dev/null" &&
    grep -q "leadership lost" "$HA_DIR/c$l.log" &&
    for i in 11 12 13; do
        curl -s --cacert "$HA_DIR/c1/ca.pem" --cert "$HA_DIR/c1/client.pem" --key "$HA_DIR/c1/client.key" \
            "https://198.18.0.$i:7444/v1/status" | jq -e --argjson t "$newterm" ".controller_term >= \$t" >/dev/null || exit 1
    done &&
    code=$(curl -s -o stale.json -w "%{http_code}" --cacert "$HA_DIR/c1/ca.pem" --cert "$HA_DIR/c1/client.pem" \
        --key "$HA_DIR/c1/client.key" -H "X-HC-Term: $oldterm" -H "Content-Type: application/json" \
        -d "{\"change_id\":\"x\"}" "https://198.18.0.11:7444/v1/net/mtu/confirm") &&
    echo "a call with the paused leader'"'"'s term $oldterm: $code $(cat stale.json)" &&
    [ "$code" = 409 ] && jq -e ".error.code == \"stale_term\"" stale.json
'

test_expect_success "etcd's raft leader SIGKILLed: the controllers carry on" '
    e=$(ha_etcd_raft_leader) && kill -KILL "$(ha_etcd_pid "$e")" &&
    sleep 3 && wait_for 20 "ha_leader" && hc node list -o json | jq -e "(.nodes | length) == 3" &&
    hc token create ha-after-etcd-kill -o json >/dev/null &&
    ha_etcd_member_start "$e" && sleep 1
'

test_expect_success 'the controller leader and the etcd raft leader SIGKILLed at once' '
    l=$(ha_leader) && e=$(ha_etcd_raft_leader) &&
    kill -KILL "$(ha_ctl_pid "$l")" "$(ha_etcd_pid "$e")" && t0=$(date +%s%3N) &&
    wait_for 30 "nl=\$(ha_leader) && [ \"\$nl\" != $l ] || [ \"\$(ha_status $l | ha_json role)\" = leader ]" &&
    echo "new leader after $(( $(date +%s%3N) - t0 )) ms" &&
    hc token list -o json | jq -e "[.tokens[].name] | index(\"ha-after-etcd-kill\") != null" &&
    ha_etcd_member_start "$e"
'

test_expect_success 'ha export writes a standalone database holding every node' '
    hcctld ha export --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" --output "$T/export.db" >export.out &&
    grep -q "rows written" export.out &&
    n=$(sqlite3 "$T/export.db" "SELECT COUNT(*) FROM nodes") && [ "$n" = 3 ] &&
    ! hcctld ha export --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" --output "$T/export.db" 2>exists.err
'

test_done
