#!/usr/bin/env bash
# Privilege end to end (docs/hcagent.md "Privilege"): a real hcagent in daemon mode (what a node
# brought in over SSH without systemd runs) supervising the reference service hcstor from the
# signed bundles. The supervisor and the agent keep only the documented capabilities
# (bounding set included) with no_new_privs; hcstor runs as the service user with no
# capability, owns its data directory and nothing else, and is still stopped, adopted after an
# agent restart and stopped again by the agent across the uid boundary.
. "$(dirname "$0")/lib.sh"

need_bundles
IP=127.0.0.33
AGENT=https://$IP:$AGENT_PORT
SVC=http://$IP:7480
# CAP_CHOWN CAP_KILL CAP_SETGID CAP_SETUID CAP_NET_ADMIN (agents/hcagent/privilege.h)
AGENT_CAPS=00000000000010e1
if [ "$(id -u)" = 0 ]; then SVC_UID=60600 SVC_GID=60600; else SVC_UID=$(id -u) SVC_GID=$(id -g); fi

# field PID KEY: one line of /proc/PID/status, tabs as spaces.
field() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
supervisor() { cat "$T/n1.pid"; }
worker() { ps -o pid= --ppid "$(supervisor)" | tr -d ' ' | head -n 1; }
start_daemon() {
    hcagent run --data-dir "$T/n1" --daemon --pidfile "$T/n1.pid" --log-file "$T/n1.log" &&
    wait_for 10 "[ -s '$T/n1.pid' ] && [ -n \"\$(worker)\" ]" &&
    supervisor >"$T/pids/n1-supervisor"
}

test_expect_success 'an agent joins and runs as a supervised daemon' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    token=$(hcctl cluster join-token --ttl 5m -o json | jq -r .token) &&
    HCAGENT_TOKEN=$token hcagent join --controller "$CTL_URL" --data-dir "$T/n1" \
        --listen "$IP:$AGENT_PORT" --name n1 --daemon --pidfile "$T/n1.pid" \
        --log-file "$T/n1.log" &&
    wait_for 10 "[ -s '$T/n1.pid' ] && [ -n \"\$(worker)\" ]" &&
    supervisor >"$T/pids/n1-supervisor" &&
    wait_for 10 "[ \$(reachable_count) = 1 ]"
'

test_expect_success 'supervisor and agent hold only the documented capabilities, no_new_privs' '
    for p in $(supervisor) $(worker); do
        echo "pid $p: CapBnd $(field $p CapBnd) CapPrm $(field $p CapPrm) NoNewPrivs $(field $p NoNewPrivs)" &&
        [ "$(field $p NoNewPrivs)" = 1 ] || exit 1
        if [ "$(id -u)" = 0 ]; then
            [ "$(field $p CapBnd)" = $AGENT_CAPS ] && [ "$(field $p CapPrm)" = $AGENT_CAPS ] &&
            [ "$(field $p CapEff)" = $AGENT_CAPS ] || exit 1
        else
            [ "$(field $p CapEff)" = 0000000000000000 ] || exit 1
        fi
    done
'

test_expect_success 'hcstor runs as the service user: no capability, no_new_privs, no groups' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    tok=$(hcctld token create --data-dir "$CTL_DIR" --name stage --role readonly --ttl 10m | grep -o "hct1\.[0-9a-f.]*") &&
    agent_api POST /v1/software/stage "{\"version\":\"1.0\",\"token\":\"$tok\"}" | jq -e ".staged == true" &&
    agent_api POST /v1/software/activate "{\"version\":\"1.0\"}" | jq -e ".current == \"1.0\"" &&
    wait_for 20 healthy && pid=$(svc_pid) &&
    echo "hcstor pid $pid: Uid $(field $pid Uid) CapEff $(field $pid CapEff) CapBnd $(field $pid CapBnd)" &&
    [ "$(field $pid Uid)" = "$SVC_UID $SVC_UID $SVC_UID $SVC_UID" ] &&
    [ "$(field $pid Gid)" = "$SVC_GID $SVC_GID $SVC_GID $SVC_GID" ] &&
    [ "$(field $pid CapEff)" = 0000000000000000 ] && [ "$(field $pid CapPrm)" = 0000000000000000 ] &&
    [ "$(field $pid CapAmb)" = 0000000000000000 ] && [ "$(field $pid NoNewPrivs)" = 1 ] &&
    { [ "$(id -u)" != 0 ] || [ -z "$(field $pid Groups)" ]; } &&
    grep -q "starting hcstor 1.0 .* as $SVC_UID:$SVC_GID\|starting hcstor 1.0 .* as .*($SVC_UID:$SVC_GID)" \
        "$T/n1/software/service.log"
'

test_expect_success 'hcstor writes its own data directory, and only it' '
    [ "$(stat -c "%u:%g %a" "$T/n1/service-data")" = "$SVC_UID:$SVC_GID 700" ] &&
    curl -sS --max-time 10 -X PUT --data-binary hello "$SVC/blocks/k1" | jq -e ".key == \"k1\"" &&
    [ "$(curl -sS --max-time 10 "$SVC/blocks/k1")" = hello ] &&
    f=$(find "$T/n1/service-data" -type f -name k1 | head -n 1) && [ -n "$f" ] &&
    [ "$(stat -c %u "$f")" = "$SVC_UID" ] &&
    [ "$(stat -c %u "$T/n1/software/1.0/bin/hcstor")" = "$(id -u)" ] &&
    if [ "$(id -u)" = 0 ]; then
        [ "$(stat -c %a "$T/n1")" = 711 ] &&
        [ "$(stat -c %a "$T/n1/agent.key")" = 600 ]
    fi
'

test_expect_success 'the agent writes the peers file into that directory as the service user' '
    agent_api PUT /v1/service/peers "{\"epoch\":3,\"nodes\":[{\"name\":\"n1\",\"host\":\"$IP\"}]}" |
        jq -e ".written == true" &&
    [ "$(stat -c %u "$T/n1/service-data/peers.json")" = "$SVC_UID" ]
'

test_expect_success 'a restarted agent adopts the service of another uid, then stops it' '
    pid=$(svc_pid) && sup=$(supervisor) &&
    kill -TERM "$sup" && wait_for 10 "! alive $sup" &&
    alive "$pid" && start_daemon &&
    wait_for 30 "agent_api GET /v1/software | jq -e \".service.pid == $pid\"" &&
    agent_api POST /v1/service/stop | jq -e ".service.state == \"stopped\"" &&
    wait_for 10 "! alive $pid"
'

test_expect_success 'the daemon stops cleanly, without sanitizer reports' '
    sup=$(supervisor) && kill -TERM "$sup" && wait_for 10 "! alive $sup" &&
    ! grep -q "ERROR: AddressSanitizer\|runtime error\|LeakSanitizer" "$T/n1.log"
'

test_done
