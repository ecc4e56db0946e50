# What the lab tests of rolling upgrades share (t50, t51, t60): the cluster's versions, the
# upgrade's state, and the availability invariant read two ways: from the controller's event log
# and from the agents' own service histories. Sourced after lab.sh and e2e/lib.sh, with the lab
# up (the node list comes from it).
AGENT_DATA=/var/lib/hcctl/agent
BUNDLES=$HC_BIN/../bundles

# upgrade_lab_up CLUSTER PREFIX LAB_NODES CLUSTER_NODES: a controller trusting the development
# bundle key (polling every 500 ms), a lab of LAB_NODES nodes, and a cluster of its first
# CLUSTER_NODES. Run in the test script's own shell; exits the script on failure.
upgrade_lab_up() {
    local i nodes=()
    hcctld init --data-dir "$CTL_DIR" --listen "198.18.0.1:$CTL_PORT" --cluster-name "$1" \
        --trust-key "$BUNDLES/dev.pub" >"$T/init.out" 2>"$T/init.log" || { cat "$T/init.log"; exit 1; }
    lab_up "$3" --prefix "$2" --key "$CTL_DIR/ssh/id_ed25519.pub" >"$T/lab.out" 2>"$T/lab.log" ||
        { cat "$T/lab.log"; exit 1; }
    POLL=500ms controller_start
    for i in $(seq "$4"); do nodes+=(--node "198.18.0.$((10 + i))"); done
    hcctl cluster create "$1" "${nodes[@]}" --storage-interface eth1 --accept-new-host-keys \
        >"$T/create.out" 2>&1 || { cat "$T/create.out"; exit 1; }
}
# svc_nodes: hcstor's client addresses, HOST:7480 on each node's storage address (the one the
# controller records and sends in the storage peers), comma-separated, for hcload --nodes.
svc_nodes() { hcctl net show -o json | jq -r '[.nodes[].address + ":7480"] | join(",")'; }
# stor_url N PATH: hcstor of lab node N on the storage network.
stor_url() { echo "http://198.18.1.$((10 + $1)):7480$2"; }
versions() { hcctl node list -o json | jq -r '[.nodes[].software_version // "none"] | join(" ")'; }
up_state() { hcctl upgrade status -o json | jq -r .state; }
up_id() { hcctl upgrade status -o json | jq -r .operation_id; }
now_ms() { date +%s%3N; }

# load_start NAME [NODES]: hcload in the background against NODES (HOST:PORT,...; default the
# test's svc_nodes), until load_stop NAME.
load_start() {
    hcload --nodes "${2:-$(svc_nodes)}" --duration 0 --workers 4 --json --quiet \
        --timeline "$T/$1.timeline" >"$T/$1.json" 2>"$T/$1.err" &
    echo $! >"$T/pids/hcload-$1"
    wait_for 10 "[ -s \"$T/$1.timeline\" ]"
}
# load_stop NAME: stops it; it verifies every acknowledged write; the report must be clean.
load_stop() {
    local pid
    pid=$(pid_of "hcload-$1")
    kill -INT "$pid" && wait_for 120 "! alive $pid"
    rm -f "$T/pids/hcload-$1"
    jq -c '{ops, ops_per_sec, errors, failovers, latency_ms, longest_stall_ms, stale_reads,
            corrupt_reads, verify}' "$T/$1.json" || { cat "$T/$1.err"; return 1; }
    jq -e '.ops > 0 and .errors == 0 and .stale_reads == 0 and .corrupt_reads == 0
           and .verify.lost == 0 and .verify.ok == true' "$T/$1.json" >/dev/null
}

# The controller's view: replaying maintenance entered/exited events in order, the most nodes
# in maintenance at once (over the whole test: the event log has no cheap time filter).
max_down_from_events() {
    hcctl events --type maintenance.entered --limit 1000 -o json >ent.json &&
    hcctl events --type maintenance.exited --limit 1000 -o json >exi.json &&
    jq -s '[.[0].events[] | {id, node, in: true}] + [.[1].events[] | {id, node, in: false}]
           | sort_by(.id) | reduce .[] as $e ({in: {}, max: 0};
               .in[$e.node] = $e.in | .max = ([.max, ([.in[] | select(.)] | length)] | max))
           | .max' ent.json exi.json
}

# The agents' view: every lab node's DIR/software/service-history.jsonl, one event per line,
# tagged with the node (PREFIX-nI) it was read from.
histories() {
    local n
    for n in $(lab_info --json | jq -r '.nodes[].name'); do
        lab_exec "$n" cat "$AGENT_DATA/software/service-history.jsonl" 2>/dev/null |
            jq -c --arg n "$LAB_PREFIX-$n" '. + {node: $n}'
    done
}

# Replaying all histories in time order (a service is down from started, stopped, exited or
# crashed until running; an adoption changes nothing): the most services down at once between
# $1 and $2 (epoch ms; the state at $1 counts), or over the whole test without arguments.
max_down_from_histories() {
    histories | jq -s --argjson since "${1:-0}" --argjson until "${2:-99999999999999}" '
        sort_by(.ts_ms) | reduce .[] as $e ({down: {}, pre: 0, max: 0};
            (if $e.event == "adopted" then . else .down[$e.node] = ($e.event != "running") end)
            | ([.down[] | select(.)] | length) as $n
            | if $e.ts_ms < $since then .pre = $n
              elif $e.ts_ms <= $until then .max = ([.max, $n] | max)
              else . end)
        | [.max, .pre] | max'
}

# slow_bundle VERSION: hcstor 1.1's binary behind a wrapper that waits 2 s before it starts (a real
# storage service takes that long and more), so that a node's restart surely spans the next
# node's stop: the overlap of two nodes is then visible in the agents' histories.
slow_bundle() {
    local v=$1
    rm -rf "slow-$v" && mkdir -p "slow-$v/bin" &&
    cp "$BUNDLES/stage-1.1/bin/hcstor" "slow-$v/bin/" &&
    printf '#!/bin/sh\nsleep 2\nexec "$(dirname "$0")/hcstor" "$@"\n' >"slow-$v/bin/slow-start" &&
    chmod 755 "slow-$v/bin/slow-start" &&
    jq --arg v "$v" '.version = $v | .entrypoint = "bin/slow-start"
        | .description = "hcstor that takes 2 s to start (tests)"
        | .args |= map(if . == "1.1" then $v else . end)' \
        "$HC_SRC/agents/hcstor/bundle/1.1.json" >"slow-$v.json" &&
    hcctl software build --manifest "slow-$v.json" --dir "slow-$v" --key "$BUNDLES/dev.key" \
        -o "hcstor-$v.tar.gz" >/dev/null &&
    hcctl software upload "hcstor-$v.tar.gz" >/dev/null
}

# SIGKILL of hcctld at chosen moments of one upgrade: WHEN... are jq tests on 'operation show'.
kill_when() {
    local id=$1 when
    shift
    for when in "$@"; do
        wait_for 90 "hcctl operation show $id -o json | jq -e '$when'" || return 1
        echo "killing hcctld when: $when"
        hcctl maintenance status -o json | jq -c "[.nodes[] | select(.maintenance != \"none\") | .name]"
        controller_stop KILL && POLL=500ms controller_start || return 1
    done
}
step_seen() { echo "[.steps[] | select(.node == \"$1\" and .step == \"$2\")] | length > 0"; }
