# End-to-end test library: starts the real hcctld and hcagents on loopback and runs hcctl
# against them. Sourced by tests/e2e/t*.sh. git's test style: test_expect_success with && chains.
#
# Environment: HC_BIN (directory with hcctl, hcctld, hcagent), HC_TEST_TMP (scratch root),
# HC_KEEP=1 keeps the scratch directory of a failed test.
set -u
HC_BIN=${HC_BIN:?HC_BIN must point at the bin directory of a build}
mkdir -p "${HC_TEST_TMP:-/tmp}"
T=$(mktemp -d "${HC_TEST_TMP:-/tmp}/e2e.XXXXXX")
# The agents' services run as the service user (docs/hcagent.md "Privilege"): it must be able
# to pass through the scratch directories to its bundle and data (pass, not list).
chmod go+x "$T"
if [ -O "${HC_TEST_TMP:-/tmp}" ]; then chmod go+x "${HC_TEST_TMP:-/tmp}"; fi
export XDG_CONFIG_HOME=$T/xdg
export XDG_CACHE_HOME=$T/cache # hcctl's leader cache (several controllers), kept in the test
cd "$T" || exit 1
export PATH=$HC_BIN:$PATH
unset HCCTL_CONTROLLER HCCTL_TOKEN HCCTL_CA_FILE
test_count=0
test_failed=0
# Daemons started by tests: one file per name holding its pid (test bodies run in subshells, so
# the record must live outside the shell's memory).
mkdir -p "$T/pids"

pid_of() { cat "$T/pids/$1" 2>/dev/null; }

# alive PID: the process runs. A zombie whose threads have all exited does not (its files,
# sockets and locks are released): kill -0 still succeeds on one, and a daemon whose parent was
# a test body's subshell is reaped by PID 1, which here takes about a second to get to it
# (waiting on kill -0 after every SIGKILL of hcctld was a fifth of lab/t70). The main thread of
# a killed process is a zombie before its other threads are gone, hence the count of tasks.
alive() {
    local st tasks
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${st##*) }
    [ "${st:0:1}" != Z ] && return 0
    tasks=("/proc/$1/task/"*)
    [ "${#tasks[@]}" -gt 1 ]
}

e2e_cleanup() {
    local f i left
    for f in "$T"/pids/*; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
    # up to 0.3 s for them to go, as long as one is left (most are gone at once)
    for i in 1 2 3 4 5 6; do
        left=0
        for f in "$T"/pids/*; do [ -f "$f" ] && alive "$(cat "$f")" && left=1 && break; done
        [ "$left" = 1 ] || break
        sleep 0.05
    done
    for f in "$T"/pids/*; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$test_failed" -ne 0 ] && [ "${HC_KEEP:-0}" = 1 ]; then
        echo "# kept $T"
    else
        rm -rf "$T"
    fi
}
trap e2e_cleanup EXIT

# test_expect_success DESCRIPTION 'commands'. Each result line ends with the case's wall time
# (a TAP comment, "# 1.23 s"): where a slow test spends its time is in every CI log.
test_expect_success() {
    local tes_t0 tes_took
    test_count=$((test_count + 1))
    tes_t0=$(date +%s%N)
    if (eval "$2") >"$T/test.out" 2>&1; then
        tes_took=$((($(date +%s%N) - tes_t0) / 10000000))
        printf 'ok %d - %s # %d.%02d s\n' "$test_count" "$1" $((tes_took / 100)) $((tes_took % 100))
    else
        tes_took=$((($(date +%s%N) - tes_t0) / 10000000))
        printf 'not ok %d - %s # %d.%02d s\n' "$test_count" "$1" $((tes_took / 100)) $((tes_took % 100))
        sed 's/^/#   /' "$T/test.out"
        test_failed=$((test_failed + 1))
    fi
}

test_done() {
    echo "1..$test_count"
    if [ "$test_failed" -ne 0 ]; then
        echo "# failed $test_failed of $test_count"
        for f in "$T"/*.log $(! type -t extra_logs >/dev/null || extra_logs); do [ -f "$f" ] && { echo "# --- $f"; tail -n 30 "$f" | sed 's/^/#   /'; }; done
        exit 1
    fi
    exit 0
}

# A TCP port nobody listens on (on any loopback address), below the kernel's ephemeral range
# (ip_local_port_range, 32768 and up by default): a port in that range can be taken by any
# outgoing connection of a test running beside this one before our daemon binds it.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 12000))
        ss -ltnH "( sport = :$p )" | grep -q . || { echo "$p"; return; }
    done
}

# wait_for SECONDS 'condition': polls every 100 ms.
wait_for() {
    local deadline=$(($(date +%s%N) / 1000000 + $1 * 1000))
    while [ $(($(date +%s%N) / 1000000)) -lt $deadline ]; do
        eval "$2" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timed out after $1 s waiting for: $2" >&2
    return 1
}

CTL_PORT=$(free_port)
AGENT_PORT=$(free_port)
CTL_URL=https://127.0.0.1:$CTL_PORT
CTL_DIR=$T/controller

controller_init() {
    hcctld init --data-dir "$CTL_DIR" --listen "127.0.0.1:$CTL_PORT" --cluster-name e2e "$@" \
        >"$T/init.out" 2>"$T/init.log"
}

controller_start() {
    hcctld run --data-dir "$CTL_DIR" --poll-interval "${POLL:-1s}" "$@" >>"$T/hcctld.log" 2>&1 &
    echo $! >"$T/pids/hcctld"
    wait_for 10 "hcctl version -o json | jq -e '.controller.version'"
}

# controller_stop [SIGNAL]: stops hcctld and waits until the process is gone.
controller_stop() {
    stop_daemon hcctld "${1:-TERM}"
}

# stop_daemon NAME SIGNAL: signals a daemon started by this test and waits for it to exit.
stop_daemon() {
    local pid
    pid=$(pid_of "$1") || return 1
    kill -"$2" "$pid" || return 1
    while alive "$pid"; do sleep 0.02; done
    wait "$pid" 2>/dev/null # reaps it when it is our child, silences the shell's "Killed"
    rm -f "$T/pids/$1"
}

# agent_join NAME IP: joins a new agent with a fresh token and leaves it running.
agent_join() {
    local name=$1 ip=$2 token
    token=$(hcctl cluster join-token --ttl 5m -o json | jq -r .token) || return 1
    HCAGENT_TOKEN=$token hcagent join --controller "$CTL_URL" --data-dir "$T/$name" \
        --listen "$ip:$AGENT_PORT" --name "$name" >>"$T/$name.log" 2>&1 &
    echo $! >"$T/pids/$name"
    wait_for 10 "[ -f '$T/$name/agent.pem' ]"
}

agent_start() {
    hcagent run --data-dir "$T/$1" >>"$T/$1.log" 2>&1 &
    echo $! >"$T/pids/$1"
}

agent_kill() {
    stop_daemon "$1" "${2:-KILL}"
}

# node_health NAME: prints the node's health as the controller sees it.
node_health() {
    hcctl node show "$1" -o json | jq -r .node.health
}

# hollow_serving SOCK N: after a start of hchollow, it answers on its control socket SOCK (its
# listeners are bound before it), then all N nodes are reachable as polled since. The node list
# alone is not enough: right after a restart it still shows the polls before the stop, and a
# poll made while hchollow was starting may yet turn nodes unreachable.
hollow_serving() {
    wait_for 20 "hchollow ctl --control '$1' stats" || return 1
    local since
    since=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
    wait_for 20 "[ \$(hcctl node list -o json | jq --arg t $since '[.nodes[] | select(.health == \"reachable\" and .last_seen > \$t)] | length') = $2 ]"
}
reachable_count() {
    hcctl node list -o json | jq '[.nodes[] | select(.health == "reachable")] | length'
}

# expect_exit CODE COMMAND...: the command must exit with CODE.
expect_exit() {
    local want=$1 rc
    shift
    "$@"
    rc=$?
    [ "$rc" = "$want" ] || { echo "exit $rc, expected $want: $*" >&2; return 1; }
}

# need_bundles: BUNDLES, the signed bundles of the build's `bundles` target; bails out without.
need_bundles() {
    BUNDLES=$(cd "$HC_BIN/../bundles" 2>/dev/null && pwd)
    [ -f "$BUNDLES/hcstor-1.0.tar.gz" ] || { echo "Bail out! no bundles in $HC_BIN/../bundles: build the 'bundles' target"; exit 1; }
}

# agent_call URL METHOD PATH [JSON]: the API of the agent at URL, with the controller's client
# certificate, as the current controller: a change carries the highest term the agent has seen
# (agent_term), which it refuses without once it has seen one (docs/hcagent.md "Fencing").
agent_call() {
    local term=
    [ "$2" = GET ] || term=$(agent_term "$1") || return 1
    curl -sS --max-time 60 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" \
        --key "$CTL_DIR/client.key" -X "$2" ${term:+-H "X-HC-Term: $term"} \
        ${4:+-H "Content-Type: application/json" --data "$4"} "$1$3"
}
# The agent API of the agent at $AGENT.
agent_api() { agent_call "$AGENT" "$@"; } # METHOD PATH [JSON]
# agent_term URL: the highest controller term the agent at URL has seen (GET /v1/status).
# Fails when the agent does not answer (jq -e alone exits 0 on empty input).
agent_term() {
    local status
    status=$(curl -sS --max-time 30 --cacert "$CTL_DIR/ca.pem" --cert "$CTL_DIR/client.pem" \
        --key "$CTL_DIR/client.key" "$1/v1/status") && [ -n "$status" ] &&
        jq -er .controller_term <<<"$status"
}
# Remembers the service's pid so that the cleanup kills it whatever happens.
svc_pid() {
    local pid
    pid=$(agent_api GET /v1/software | jq -r '.service.pid // empty')
    [ -n "$pid" ] && echo "$pid" >"$T/pids/hcstor-$pid" && echo "$pid"
}
healthy() { agent_api GET /v1/service/health | jq -e '.healthy == true'; }
# hcload_bg NAME ARGS...: hcload in the background, report in NAME.json (stderr NAME.err); the
# pid in $T/pids/NAME so that the cleanup stops it whatever happens.
hcload_bg() {
    local name=$1
    shift
    hcload "$@" --json >"$name.json" 2>"$name.err" &
    echo $! >"$T/pids/$name"
}
# hcload_wait NAME: waits for it (in the shell that started it) and returns its exit code.
hcload_wait() {
    local rc
    wait "$(pid_of "$1")"
    rc=$?
    rm -f "$T/pids/$1"
    return $rc
}
# watch_health FILE: "NAME HEALTH DETAIL" of every node, every 200 ms, appended to FILE until
# `stop_daemon watch KILL` (the certificate tests: no sample may be anything but reachable)
watch_health() {
    while :; do
        hcctl node list -o json 2>/dev/null |
            jq -r '.nodes[] | "\(.name) \(.health) \(.health_detail // "")"' >>"$1"
        sleep 0.2
    done &
    echo $! >"$T/pids/watch"
}
# track_services [N...]: every hcstor serving on $(ip N):7480 (default nodes 1 2 3), as its pid
# is now, is killed by the cleanup too (the agents start them; a restart gives new pids).
track_services() {
    local i p
    for i in ${*:-1 2 3}; do
        for p in $(pgrep -f "hcstor --listen $(ip "$i"):7480"); do echo "$p" >"$T/pids/hcstor-$p"; done
    done
    return 0
}
