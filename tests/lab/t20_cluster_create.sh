#!/usr/bin/env bash
# cluster create / node add over real SSH into a namespace lab: host-key pinning, per-node
# failures that do not stop the others, re-runs that finish the rest, and a controller killed
# with SIGKILL in the middle of an add.
. "$(dirname "$0")/lab_test.sh"

nodes_named() { hcctl node list -o json | jq -r '[.nodes[].name] | join(" ")'; }

# Listening on every address, the controller tells the nodes the one they reach it on.
hcctld init --data-dir "$CTL_DIR" --listen "0.0.0.0:$CTL_PORT" --advertise "198.18.0.1:$CTL_PORT" \
    --cluster-name lab >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
lab_up 7 --prefix hce --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
    { cat "$T/lab.log"; exit 1; }
controller_start
LAB_JSON=$(lab_info --json)
AUTHKEYS6=$(echo "$LAB_JSON" | jq -r ".state_dir")/n6/authorized_keys
fingerprint() { echo "$LAB_JSON" | jq -r ".nodes[$(($1 - 1))].host_key_fingerprint"; }

test_expect_success 'unknown host keys are refused without --accept-new-host-keys' '
    hcctl cluster create lab --node "$(node_ip 1)" --node "$(node_ip 2)" --node "$(node_ip 3)" \
        --storage-interface eth1 --yes 2>err; rc=$?
    cat err; [ $rc = 1 ] &&
    grep -q "not known" err && grep -q -- "--accept-new-host-keys" err &&
    hcctl operation show "$(last_op)" -o json >op.json &&
    for i in 1 2 3; do
        jq -e --arg fp "$(fingerprint $i)" --arg n "root@$(node_ip $i):22" \
            ".steps[] | select(.node == \$n and .step == \"connect\" and .state == \"failed\") | .detail | contains(\$fp)" op.json || exit 1
    done &&
    [ "$(nodes_named)" = "" ]
'

test_expect_success 'cluster create with --accept-new-host-keys brings three healthy nodes' '
    hcctl cluster create lab --node "$(node_ip 1)" --node "$(node_ip 2)" --node "root@$(node_ip 3):22" \
        --storage-interface eth1 --accept-new-host-keys --yes &&
    [ "$(nodes_named)" = "hce-n1 hce-n2 hce-n3" ] &&
    [ "$(reachable_count)" = 3 ] &&
    hcctl cluster status -o json | jq -e ".cluster.name == \"lab\""
'

test_expect_success 'host keys are pinned on the node records' '
    for i in 1 2 3; do
        [ "$(sqlite3 "$CTL_DIR/hcctld.db" "select ssh_host_key from nodes where name = \"hce-n$i\"")" = "$(fingerprint $i)" ] || exit 1
    done
'

test_expect_success 'each agent runs from its versioned directory with its own files' '
    lab_exec n1 test -x /opt/hcctl/agent/current/hcagent &&
    [ "$(lab_exec n1 readlink /opt/hcctl/agent/current)" = "$(hcctl version -o json | jq -r .client.version)" ] &&
    lab_exec n2 test -f /var/lib/hcctl/agent/agent.pem &&
    [ "$(stat -c %a "$(echo "$LAB_JSON" | jq -r ".nodes[1].dirs.etc_hcctl")/agent/join.token")" = 600 ] &&
    [ ! -e /var/lib/hcctl/agent/agent.pem ]
'

test_expect_success 'hcctld killed with SIGKILL during node add; after restart the add completes' '
    hcctl node add "$(node_ip 4)" --storage-interface eth1 --accept-new-host-keys --no-wait -o json >add.json &&
    id=$(jq -r .operation.id add.json) &&
    { hcctl node add "root@$(node_ip 4):22" --storage-interface eth1 --yes 2>err; rc=$?; } &&
    cat err && [ $rc = 5 ] && grep -q "already being brought in by operation $id" err &&
    wait_for 30 "hcctl operation show $id -o json | jq -e \"[.steps[] | select(.step == \\\"push\\\")] | length > 0\"" &&
    controller_stop KILL &&
    controller_start &&
    hcctl operation wait "$id" --timeout 90s &&
    [ "$(node_health hce-n4)" = reachable ]
'

test_expect_success 'unreachable host, wrong key and missing interface fail per node; the others join' '
    lab_exec n5 ip link del eth1 &&
    cp "$AUTHKEYS6" "$T/n6.keys" && : >"$AUTHKEYS6" &&
    hcctl node add 198.18.0.99 "$(node_ip 5)" "$(node_ip 6)" "$(node_ip 7)" --storage-interface eth1 \
        --accept-new-host-keys --yes 2>err; rc=$?
    cat err; [ $rc = 1 ] &&
    hcctl operation show "$(last_op)" -o json >op.json &&
    jq -e ".operation.state == \"failed\"" op.json &&
    jq -e ".operation.error.message | test(\"3 of 4\")" op.json &&
    jq -e "[.steps[] | select(.node == \"root@198.18.0.99:22\" and .state == \"failed\")][0].detail | test(\"198.18.0.99\")" op.json &&
    jq -e "[.steps[] | select(.node == \"root@$(node_ip 5):22\" and .state == \"failed\")][0].detail | test(\"storage interface .eth1.\")" op.json &&
    jq -e "[.steps[] | select(.node == \"root@$(node_ip 6):22\" and .state == \"failed\")][0].detail | test(\"refused\")" op.json &&
    [ "$(node_health hce-n7)" = reachable ] &&
    ! hcctl node show hce-n5 >/dev/null 2>&1 && ! hcctl node show hce-n6 >/dev/null 2>&1
'

test_expect_success 're-running after the fix finishes the rest without redoing joined nodes' '
    cp "$T/n6.keys" "$AUTHKEYS6" &&
    pid7=$(lab_exec n7 cat /run/hcctl/hcagent.pid) &&
    hcctl node add "$(node_ip 6)" "$(node_ip 7)" --storage-interface eth1 --yes &&
    [ "$(node_health hce-n6)" = reachable ] &&
    [ "$(lab_exec n7 cat /run/hcctl/hcagent.pid)" = "$pid7" ] &&
    hcctl operation show "$(last_op)" -o json >op.json &&
    jq -e "[.steps[] | select(.node == \"root@$(node_ip 7):22\" and .step == \"push\")] | length == 0" op.json &&
    jq -e "[.steps[] | select(.node == \"root@$(node_ip 6):22\" and .step == \"push\" and .state == \"succeeded\")] | length == 1" op.json
'

test_expect_success 'a changed host key is refused on the next node add, naming both keys' '
    old=$(fingerprint 2) &&
    lab_rekey n2 >/dev/null 2>&1 &&
    new=$(lab_info --json | jq -r ".nodes[1].host_key_fingerprint") &&
    hcctl node add "$(node_ip 2)" --storage-interface eth1 --accept-new-host-keys --yes 2>err; rc=$?
    cat err; [ $rc = 1 ] && grep -q "changed" err && grep -qF "$old" err && grep -qF "$new" err
'

test_expect_success 'six nodes are healthy after the adds' '
    [ "$(reachable_count)" = 6 ]
'

# /etc of a lab node is an overlay private to it: the account goes with the lab.
test_expect_success 'preflight refuses a host where the service uid 60600 is another account' '
    lab_exec n5 sh -c "echo bob:x:60600:100::/nonexistent:/bin/false >>/etc/passwd" &&
    { hcctl node add "$(node_ip 5)" --storage-interface eth1 --accept-new-host-keys --yes 2>err; rc=$?; true; } &&
    cat err && [ $rc = 1 ] && grep -q "60600.*belongs to .bob." err &&
    lab_exec n5 sed -i "/^bob:x:60600:/d" /etc/passwd && ! lab_exec n5 grep -q "^bob:" /etc/passwd &&
    ! hcctl node show hce-n5 >/dev/null 2>&1
'

# No storage software runs in this lab: a block file stands for the service's data.
test_expect_success 'node remove asks the agent to leave, uninstalls it over ssh and revokes it, keeping the service data' '
    serial=$(hcctl node show hce-n7 -o json | jq -r .node.cert_serial) &&
    sup=$(lab_exec n7 cat /run/hcctl/hcagent.pid) && alive "$sup" &&
    lab_exec n7 sh -c "mkdir -p /var/lib/hcctl/agent/service-data/blocks && echo v1 >/var/lib/hcctl/agent/service-data/blocks/k1" &&
    hcctl node remove hce-n7 --yes 2>err && cat err &&
    op=$(last_op) && kept=/var/lib/hcctl/agent/kept/hce-n7.$op &&
    grep -qF "the service'"'"'s data: kept on the node in $kept" err &&
    ! hcctl node show hce-n7 >/dev/null 2>&1 &&
    ! lab_exec n7 test -e /opt/hcctl/agent &&
    ! lab_exec n7 test -e /var/lib/hcctl/agent/agent.key &&
    ! lab_exec n7 test -e /var/lib/hcctl/agent/service-data &&
    [ "$(lab_exec n7 ls /var/lib/hcctl/agent)" = kept ] &&
    [ "$(lab_exec n7 cat "$kept/blocks/k1")" = v1 ] &&
    ! alive "$sup" &&
    sqlite3 "$CTL_DIR/hcctld.db" "select node_name from revoked_certs where serial = \"$serial\"" | grep -qx hce-n7
'

test_expect_success 'the removed host joins again over ssh: the kept data stays aside, unused' '
    kept=$(lab_exec n7 sh -c "ls -d /var/lib/hcctl/agent/kept/*") &&
    hcctl node add "$(node_ip 7)" --storage-interface eth1 --yes >/dev/null &&
    wait_for 20 "[ \"\$(node_health hce-n7)\" = reachable ]" &&
    [ "$(lab_exec n7 cat "$kept/blocks/k1")" = v1 ] &&
    ! lab_exec n7 test -e /var/lib/hcctl/agent/service-data &&
    hcctl node remove hce-n7 --purge --yes 2>err && cat err &&
    grep -q "the service.s data: deleted (--purge)" err &&
    ! lab_exec n7 test -e /var/lib/hcctl/agent
'

test_expect_success 'node remove of a hung agent stops it over ssh' '
    sup=$(lab_exec n6 cat /run/hcctl/hcagent.pid) && worker=$(pgrep -P "$sup") &&
    kill -STOP "$worker" &&
    hcctl node remove hce-n6 --yes &&
    hcctl operation show "$(last_op)" -o json |
        jq -e ".steps[] | select(.step == \"uninstall\") | .detail | test(\"removed over ssh\")" &&
    ! alive "$worker" && ! alive "$sup" &&
    ! lab_exec n6 test -e /opt/hcctl/agent
'

test_expect_success 'node remove with the agent down and ssh refused: the node leaves, the operation fails with the cleanup left to do' '
    serial=$(hcctl node show hce-n2 -o json | jq -r .node.cert_serial) &&
    sup=$(lab_exec n2 cat /run/hcctl/hcagent.pid) && worker=$(pgrep -P "$sup") &&
    kill -KILL "$sup" "$worker" && wait_for 5 "! alive $sup && ! alive $worker" &&
    hcctl node remove hce-n2 --yes 2>err; rc=$?
    cat err; [ $rc = 1 ] &&
    hcctl operation show "$(last_op)" -o json >op.json &&
    jq -e ".operation.state == \"failed\" and .operation.error.code == \"host_key_changed\"" op.json &&
    jq -e ".operation.error.message | startswith(\"node '"'"'hce-n2'"'"' left the cluster (certificate revoked) but its host root@$(node_ip 2):22 was not cleaned up\")" op.json &&
    hint=$(jq -r .operation.error.hint op.json) &&
    [ "$hint" = "on $(node_ip 2), as root: pkill -x hcagent; rm -rf /opt/hcctl/agent /etc/hcctl/agent /var/lib/hcctl/agent.log* /var/lib/hcctl/agent/agent.key /run/hcctl/hcagent.pid" ] &&
    jq -e ".operation.error.message | contains(\"(the service'"'"'s data in /var/lib/hcctl/agent/service-data)\")" op.json &&
    grep -qF "$hint" err &&
    jq -e "[.steps[] | select(.step == \"leave\") | .detail] == [\"agent unreachable, credentials revoked only\"]" op.json &&
    jq -e "[.steps[] | select(.step == \"uninstall\") | .state] == [\"failed\"]" op.json &&
    jq -e "[.steps[] | select(.step == \"revoke\") | .state] == [\"succeeded\"]" op.json &&
    ! hcctl node show hce-n2 >/dev/null 2>&1 &&
    sqlite3 "$CTL_DIR/hcctld.db" "select node_name from revoked_certs where serial = \"$serial\"" | grep -qx hce-n2 &&
    openssl crl -in "$CTL_DIR/crl.pem" -noout -text | grep -qi "Serial Number: *$serial" &&
    lab_exec n2 test -e /opt/hcctl/agent && lab_exec n2 test -e /var/lib/hcctl/agent &&
    # the hint names every path to delete (its pkill is not run here: the lab nodes share the
    # host pid namespace, and the agent is already dead)
    lab_exec n2 sh -c "rm -rf ${hint#*rm -rf }" &&
    for d in /opt/hcctl/agent /etc/hcctl/agent /var/lib/hcctl/agent/agent.key /var/lib/hcctl/agent.log /run/hcctl/hcagent.pid; do
        ! lab_exec n2 test -e "$d" || { echo "left: $d"; exit 1; }
    done
'

test_done
