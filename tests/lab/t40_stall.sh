#!/usr/bin/env bash
# The MTU stall (issue 4 item 7) in the lab's shared-network mode: management and storage on one
# 9000-byte network, and the switch port toward one node set to 1500. That node still answers
# small packets while every full-size segment toward it vanishes (an ssh to it hangs). No call of
# hcctl or hcctld may hang on it (every call here is bounded with `timeout`, and must end well
# inside it), and the poller reports the node 'stalled' with the suspected MTU blackhole named
# within the poll interval.
. "$(dirname "$0")/lab_test.sh"

POLL=1s
POLL_MS=1000
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# note TEXT: a measured figure, printed at the end (test bodies' output is kept only on failure).
note() { echo "# $*" | tee -a "$T/notes"; }
# bounded SECONDS CMD...: runs CMD with a hard limit; 124 means it hung.
bounded() { timeout --kill-after=2 "$@"; }
health_of() { bounded 10 hcctl node show "$1" -o json | jq -r .node.health; }
# ms_until SECONDS NODE HEALTH: how long until NODE's health is HEALTH (fails at the limit).
ms_until() {
    local t0 deadline
    t0=$(now_ms)
    deadline=$((t0 + $1 * 1000))
    while [ "$(now_ms)" -lt $deadline ]; do
        [ "$(health_of "$2")" = "$3" ] && { echo $(($(now_ms) - t0)); return 0; }
        sleep 0.05
    done
    echo "node $2 did not become $3 within $1 s" >&2
    return 1
}

hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name lab \
    >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up_when_free 4 --shared --prefix hcj --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
LAB_JSON=$(lab_info --json)
controller_start

test_expect_success 'cluster create on the shared network at 9000' '
    bounded 120 hcctl cluster create lab --node "$(node_ip 1)" --node "$(node_ip 2)" --node "$(node_ip 3)" \
        --storage-interface eth0 --accept-new-host-keys --mtu 9000 --yes &&
    wait_for 10 "[ \$(reachable_count) = 3 ]" &&
    { bounded 60 hcctl net check-jumbo >cj.out 2>&1 || { cat cj.out; false; }; }
'

# The switch port toward n2 now passes only 1500-byte frames.
T_BEFORE=$(now_ms)
lab_set_port_mtu n2 mgmt 1500
T_AFTER=$(now_ms)

# The controller's own record of the change (its node.health event) dates the detection; the
# first poll cycle that starts after the port change must report it.
test_expect_success 'the stalled node is reported within the poll interval, MTU blackhole named' '
    ms_until 20 hcj-n2 stalled >/dev/null &&
    ts=$(bounded 10 hcctl events --type node.health --node hcj-n2 -o json |
         jq -r "[.events[] | select(.details.to == \"stalled\")][0].ts") &&
    ev=$(date -d "$ts" +%s%3N) &&
    note "stall recorded $((ev - T_AFTER)) ms after the port change ($((ev - T_BEFORE)) ms after the lab began it; poll interval $POLL_MS ms)" &&
    [ $((ev - T_AFTER)) -le $((POLL_MS + 400)) ] &&
    detail=$(bounded 10 hcctl node show hcj-n2 -o json | jq -r .node.health_detail) &&
    echo "$detail" | grep -q "suspected MTU blackhole" &&
    [ "$(health_of hcj-n1)" = reachable ] && [ "$(health_of hcj-n3)" = reachable ] &&
    bounded 10 hcctl events --type node.health -o json |
        jq -e "[.events[] | select(.node == \"hcj-n2\" and .details.to == \"stalled\")] | length == 1"
'

test_expect_success 'the stall is real: ssh to the node hangs, small pings pass' '
    key=$CTL_DIR/ssh/id_ed25519 &&
    ping -c 1 -W 2 -s 56 "$(node_ip 2)" >/dev/null &&
    ! ping -c 1 -W 2 -M do -s 8972 "$(node_ip 2)" >/dev/null &&
    { timeout 6 ssh -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o ConnectTimeout=3 "root@$(node_ip 2)" true 2>ssh.err; rc=$?; } ;
    note "ssh ended with $rc: $(cat ssh.err)"; [ $rc = 124 ] || grep -q "timed out" ssh.err
'

test_expect_success 'no hcctl call hangs: list, show, status, events, net show' '
    for cmd in "node list" "node show hcj-n2" "cluster status" "events --limit 5" "net show" \
               "operation list"; do
        t0=$(now_ms); bounded 15 hcctl $cmd >/dev/null; rc=$?; took=$(( $(now_ms) - t0 ))
        note "hcctl $cmd: exit $rc in $took ms"
        [ $rc = 0 ] && [ $took -lt 5000 ] || exit 1
    done &&
    bounded 10 hcctl net show -o json | jq -e ".nodes[] | select(.name == \"hcj-n2\") | .health == \"stalled\""
'

test_expect_success 'node add of a host behind a small-MTU port fails in bounded time, naming the cause' '
    lab_set_port_mtu n4 mgmt 1500 &&
    t0=$(now_ms); bounded 60 hcctl node add "$(node_ip 4)" --storage-interface eth0 \
        --accept-new-host-keys --yes 2>err; rc=$?
    note "node add behind the stall: exit $rc in $(( $(now_ms) - t0 )) ms"
    cat err; lab_set_port_mtu n4 mgmt 9000
    [ $rc = 1 ] && grep -q "no answer within\|timed out\|did not finish" err && grep -qi "mtu" err &&
    ! grep -q ": ;" err
'

test_expect_success 'check-jumbo ends (exit 4) and names the stalled node' '
    t0=$(now_ms); bounded 60 hcctl net check-jumbo -o json >check.json; rc=$?
    note "check-jumbo: exit $rc in $(( $(now_ms) - t0 )) ms"; [ $rc = 4 ] &&
    jq -e "(.findings | length) == 1 and .findings[0].scope == \"node\" and .findings[0].node == \"hcj-n2\"" check.json &&
    jq -e "[.pairs[] | select(.from == \"hcj-n2\" or .to == \"hcj-n2\") | .result != \"ok\"] | all" check.json &&
    jq -e "[.pairs[] | select(.from != \"hcj-n2\" and .to != \"hcj-n2\") | .result == \"ok\"] | all" check.json
'

test_expect_success 'hcctld stops and restarts without hanging; the node is stalled again' '
    pid=$(pid_of hcctld) && t0=$(now_ms) && kill -TERM "$pid" &&
    for i in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done &&
    ! alive "$pid" && note "hcctld stopped in $(( $(now_ms) - t0 )) ms" &&
    rm -f "$T/pids/hcctld" && controller_start &&
    ms=$(ms_until 20 hcj-n2 stalled) && note "stalled again $ms ms after the restart"
'

lab_set_port_mtu n2 mgmt 9000
test_expect_success 'port fixed: the node is reachable again' '
    ms=$(ms_until 20 hcj-n2 reachable) && note "reachable after $ms ms" &&
    bounded 60 hcctl net check-jumbo -q >/dev/null
'

[ -f "$T/notes" ] && cat "$T/notes"
test_done
