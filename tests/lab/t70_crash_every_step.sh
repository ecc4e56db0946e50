#!/usr/bin/env bash
# Crash after step N, for every N (issue 12; the SQLite way: enumerate, don't sample). hcctld's
# test hook HCCTLD_TEST_CRASH_AFTER_STEP=N (controller/ops/test_hooks.h, docs/operations.md "Crash
# points") SIGKILLs the controller right after the N-th durable step of an operation. For every N
# of a rolling upgrade (1.0 <-> 1.1, so that each N starts from a known version), of a
# maintenance enter + exit cycle and of an MTU change (net set-mtu 9000 <-> 8000, commit-
# confirmed), this test: starts hcctld with the hook, runs the operation(s), lets hcctld die at
# step N, restarts it without the hook, waits until the operation ends, and checks the
# invariants:
#   - every operation ends succeeded, and no terminal op.state is followed by another;
#   - the cluster ends where the operation was taking it (versions, maintenance none, MTUs);
#   - never more than max_unavailable (1) services down at any instant (agents' histories);
#   - a step that succeeded is not done again: one software.activated / maintenance.entered /
#     maintenance.exited / net.mtu "confirmed" event per node and operation, and each node's
#     agent history shows the service started on the new version exactly once.
# The total of each operation is learnt from a counting run (HCCTLD_TEST_CRASH_AFTER_STEP=0).
#
# HC_FULL=1 (or scripts/crash-enum.sh) enumerates every N of the 3-node upgrade, of the
# maintenance cycle and of the MTU change. Without it (CI) the upgrade has one node to upgrade
# (the other two are on the target already) and each case runs a subset of its N that still
# meets every kind of crash point (choose_points below): each operation's own points (created,
# running, succeeded) of every operation, each step kind once (budget, stop, set_mtu...: the
# upgrade's node steps are the maintenance cycle's code, hc_maint_enter_steps/exit_steps, so a
# kind met in one case is not sought again in the next) at one of its two points (running or
# succeeded) and on one of its nodes, chosen at random, plus T70_EXTRA (2) other N of each case
# at random. The seed is printed (`# crash points: seed S`); T70_SEED=S runs the same points
# again. T70_MAX_N=K stops each enumeration after K (for debugging the test).
# Run ONLY under `flock /tmp/hc-lab.lock` (one lab per machine).
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"
FULL=${HC_FULL:-0}
# T70_POINTS=writes: the finer crash points of HCCTLD_TEST_CRASH_AT_WRITE (every write
# transaction of the operation workers, cut just before it commits) instead of the durable steps.
POINTS=${T70_POINTS:-steps}
case $POINTS in
    steps) HOOK_VAR=HCCTLD_TEST_CRASH_AFTER_STEP POINT_RE='durable step [0-9]*: op-[0-9a-f]* '
           POINT_NAME='killed after durable step' ;;
    writes) HOOK_VAR=HCCTLD_TEST_CRASH_AT_WRITE POINT_RE='write [0-9]*: '
            POINT_NAME='killed as write' ;;
    *) echo "T70_POINTS must be steps or writes"; exit 2 ;;
esac
T_START=$(date +%s)
note() { echo "# $*" >>"$T/notes"; }

# --- the controller, its death and its restart -------------------------------------------------

# ctl_alive: the hcctld this test started runs (a zombie, i.e. killed and not reaped yet, does not).
ctl_alive() {
    local pid
    pid=$(pid_of hcctld) && alive "$pid"
}
# ctl_start_hook N: a fresh hcctld whose N-th durable step is its last ("" = no hook).
ctl_start_hook() {
    # The one running is idle (its operations ended): SIGKILL is quicker than a stop, and the
    # start after it is what every crash point tests anyway.
    if ctl_alive; then controller_stop KILL || return 1; fi
    rm -f "$T/pids/hcctld"
    if [ -n "$1" ]; then
        (export "$HOOK_VAR=$1"; POLL=1s controller_start)
    else
        POLL=1s controller_start
    fi
}
# ctl_recover: when the hooked hcctld died, a new one without the hook. Sets the file "crashed".
ctl_recover() {
    ctl_alive && return 0
    wait "$(pid_of hcctld)" 2>/dev/null
    rm -f "$T/pids/hcctld"
    touch "$T/crashed"
    POLL=1s controller_start
}
# ctl_call CMD...: CMD against hcctld, again (after recovering it) when the hook killed it
# under the call.
ctl_call() {
    local i out
    for i in $(seq 1 50); do
        out=$("$@" 2>/dev/null) && { printf '%s\n' "$out"; return 0; }
        ctl_recover >&2 || return 1
        sleep 0.1
    done
    "$@"
}
newest_op() { ctl_call hcctl operation list -o json | jq -r '.operations[0].id // ""'; }
op_state() { ctl_call hcctl operation show "$1" -o json | jq -r .operation.state; }
terminal() { case $1 in succeeded | failed | aborted) return 0 ;; esac; return 1; }

# submit_and_finish CMD...: runs a command that submits one operation (--no-wait) on whatever
# hcctld runs now, recovering hcctld whenever the hook killed it, until the operation ended.
# Prints the operation's id.
submit_and_finish() {
    local before id st deadline=$(($(date +%s) + 300))
    before=$(newest_op) || return 1
    "$@" >/dev/null 2>>"$T/submit.err"
    ctl_recover >&2 || return 1
    id=$(newest_op)
    [ -n "$id" ] && [ "$id" != "$before" ] || { echo "no new operation after: $*" >&2; return 1; }
    while :; do
        st=$(op_state "$id")
        terminal "$st" && break
        ctl_recover >&2 || return 1
        [ "$(date +%s)" -lt "$deadline" ] || { echo "operation $id still $st after 300 s" >&2; return 1; }
        sleep 0.1
    done
    echo "$id"
}

# hook_lines FROM: the hook's lines in hcctld's log after line FROM.
log_len() { wc -l <"$T/hcctld.log"; }

# --- invariants ----------------------------------------------------------------------------------

# check_op ID: succeeded; after its first terminal op.state event, no other op.state event; every
# step recorded succeeded.
check_op() {
    hcctl operation show "$1" -o json >op.json &&
    jq -e '.operation.state == "succeeded"' op.json >/dev/null ||
        { echo "operation $1: $(jq -c '.operation | {state, error}' op.json)"; return 1; }
    jq -e '[.steps[] | select(.state != "succeeded")] | length == 0' op.json >/dev/null ||
        { echo "operation $1 has steps not succeeded: $(jq -c '[.steps[] | select(.state != "succeeded")]' op.json)"; return 1; }
    jq -e --arg id "$1" '[.events[] | select(.type == "op.state" and .op_id == $id)] | sort_by(.id)
            | map(.details.to) | (index("succeeded") // index("failed") // index("aborted")) as $t
            | $t != null and $t == length - 1' "$T/ev.json" >/dev/null ||
        { echo "operation $1: op.state after a terminal state: $(jq -c --arg id "$1" '[.events[] | select(.type == "op.state" and .op_id == $id) | .details.to]' "$T/ev.json")"; return 1; }
}
# once_per_node TYPE ID NODES JQFILTER: exactly one event of TYPE of operation ID per node of
# NODES (space separated), none for other nodes (JQFILTER narrows the events, default true).
once_per_node() {
    jq -e --arg t "$1" --arg id "$2" --arg nodes "$3" "[.events[] | select(.type == \$t and .op_id == \$id) | select(${4:-true}) | .node] | sort
            == (\$nodes | split(\" \") | sort)" "$T/ev.json" >/dev/null ||
        { echo "$1 events of $2: $(jq -c --arg t "$1" --arg id "$2" '[.events[] | select(.type == $t and .op_id == $id) | .node]' "$T/ev.json"), want one for each of $3"; return 1; }
}
# started_once_each T0 T1 VERSION NODES: in the agents' histories, each node of NODES started
# its service on VERSION exactly once in [T0, T1], and no other node started it at all.
started_once_each() {
    jq -s -e --argjson t0 "$1" --argjson t1 "$2" --arg v "$3" --arg nodes "$4" '
        [.[] | select(.ts_ms >= $t0 and .ts_ms <= $t1 and .event == "started" and .version == $v) | .node]
        | sort == ($nodes | split(" ") | sort)' "$T/hist.jsonl" >/dev/null ||
        { echo "services started on $3 in the window: $(jq -s -c --argjson t0 "$1" --argjson t1 "$2" '[.[] | select(.ts_ms >= $t0 and .ts_ms <= $t1) | {node, event, version}]' "$T/hist.jsonl")"; return 1; }
}
# The agents' histories (tests/lab/upgrade_lib.sh), read once per run into hist.jsonl.
read_histories() { histories >"$T/hist.jsonl"; }
check_budget() {
    local h
    h=$(histories() { cat "$T/hist.jsonl"; }; max_down_from_histories "$1" "$2") || return 1
    [ "$h" -le 1 ] || { echo "$h services down at once between $1 and $2"; return 1; }
}
maint_none() { jq -e 'all(.nodes[]; .maintenance == "none")' "$T/nodes.json" >/dev/null; }
running_all() { hcctl node list -o json | jq -e 'all(.nodes[]; .service_state == "running")' >/dev/null; }

# --- one case: every N --------------------------------------------------------------------------

# --- which N: all of them (HC_FULL=1), or every kind of point once and a sample ---------------

SEED=${T70_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
EXTRA=${T70_EXTRA:-2}
case $SEED$EXTRA in *[!0-9]*) echo "T70_SEED and T70_EXTRA must be numbers"; exit 2 ;; esac
[ "$FULL" = 1 ] || [ "$POINTS" != steps ] || echo "# crash points: seed $SEED (T70_SEED=$SEED repeats them), $EXTRA more at random per case"
: >"$T/kinds.seen"
# choose_points NAME: the N to run of case NAME (one per line), from NAME.steps (line N: the
# N-th durable step, "created", "running", "succeeded" for an operation's own state, else
# "[NODE/]STEP STATE"). Every N when HC_FULL=1 or T70_POINTS=writes (a write has no kind to
# tell it by). Else: an operation's own points all (each case numbers its operations: the
# maintenance cycle's enter and exit are two), each step kind not in kinds.seen once (added to
# it), EXTRA more; the random choices come from SEED and the case's name.
choose_points() {
    if [ "$FULL" = 1 ] || [ "$POINTS" != steps ]; then
        seq 1 "$(wc -l <"$T/$1.steps")"
        return
    fi
    awk -v seed="$SEED" -v extra="$EXTRA" -v name="$1" -v seenf="$T/kinds.seen" '
        BEGIN {
            h = 0; for (i = 1; i <= length(name); i++) h = (h * 31 + index("abcdefghijklmnopqrstuvwxyz", substr(name, i, 1))) % 65536
            srand(seed + h)
            while ((getline k < seenf) > 0) seen[k] = 1
            close(seenf)
        }
        {
            if (NF == 1) { if ($1 == "created") op++; kind = "op" op " " $1 }
            else { kind = $1; sub(/.*\//, "", kind); kind = "step " kind }
            if (!(kind in count)) order[++nkinds] = kind
            member[kind, ++count[kind]] = NR
        }
        END {
            for (i = 1; i <= nkinds; i++) {
                k = order[i]
                if (k in seen) continue
                chosen[member[k, int(rand() * count[k]) + 1]] = 1
                if (k ~ /^step /) print k >>seenf
            }
            for (n = 1; n <= NR; n++) if (!(n in chosen)) rest[++nrest] = n
            for (e = 0; e < extra && nrest > 0; e++) {
                j = int(rand() * nrest) + 1; chosen[rest[j]] = 1; rest[j] = rest[nrest--]
            }
            for (n = 1; n <= NR; n++) if (n in chosen) print n
        }' "$T/$1.steps"
}

# enumerate NAME TOTAL FN: FN N runs step N's case (0: the counting run) and checks it, for each
# N choose_points picks; the results are printed as TAP lines, one per N.
enumerate() {
    local name=$1 total=$2 fn=$3 n t0 ran=0
    t0=$(date +%s)
    for n in $(choose_points "$name" | head -n "${T70_MAX_N:-$total}"); do
        test_expect_success "$name: hcctld $POINT_NAME $n/$total ($(sed -n "${n}p" "$T/$name.steps"))" "$fn $n"
        ran=$((ran + 1))
    done
    note "$name: $ran of $total crash points ($POINTS) run in $(($(date +%s) - t0)) s"
}

# count NAME FN: the counting run (hook 0); writes NAME.steps (one description per step, from
# the log lines of the counting hcctld) and prints the total.
count_steps() {
    local from
    from=$(log_len)
    "$2" 0 >"$T/count-$1.out" 2>&1 || { cat "$T/count-$1.out" >&2; echo "counting run of $1 failed" >&2; return 1; }
    tail -n +"$((from + 1))" "$T/hcctld.log" |
        sed -n "/test hook: $HOOK_VAR=0/,\$p" |
        grep -o "test hook: $POINT_RE.*" |
        sed "s/^test hook: $POINT_RE//" >"$T/$1.steps"
    ctl_start_hook "" >&2 || return 1
    wc -l <"$T/$1.steps"
}

# A run with the hook at N (0: counting only, nothing may crash). Cases call
# ctl_ensure first: the run before may have left the hooked hcctld dead.
ctl_ensure() { ctl_alive || ctl_recover; }
crash_run_begin() {
    rm -f "$T/crashed"
    # where this run's events start: the last one the run before read, else the newest
    E0=$(jq -e '.last_id' "$T/ev.json" 2>/dev/null) ||
        E0=$(hcctl events --limit 1 -o json | jq '.events[-1].id // 0') || return 1
    ctl_start_hook "$1" || return 1
    T0=$(now_ms)
}
crash_run_end() {
    T1=$(now_ms)
    if [ "$1" -gt 0 ]; then
        # the last step kills it right after the commit the test has just seen
        [ -f "$T/crashed" ] || wait_for 5 '! ctl_alive' ||
            { echo "hcctld was not killed at step $1"; return 1; }
        ctl_recover || return 1
    fi
    grep -h "" "$T/submit.err" 2>/dev/null | tail -n 3
    : >"$T/submit.err"
    read_histories
    # every event of the run (fewer than 1000: a run makes a few dozen)
    hcctl events --since "$E0" --limit 1000 -o json >"$T/ev.json" &&
    jq -e '.more == false' "$T/ev.json" >/dev/null || { echo "cannot read the events of the run"; return 1; }
    hcctl node list -o json >"$T/nodes.json"
}

# --- the lab -------------------------------------------------------------------------------------

upgrade_lab_up crash hcx 3 3
hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
hcctl software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
hcctl upgrade --rolling --to 1.0 --yes >"$T/install.out" 2>&1 || { cat "$T/install.out"; echo "first install failed"; exit 1; }
NODES="hcx-n1 hcx-n2 hcx-n3"

# --- rolling upgrade -----------------------------------------------------------------------------

# The upgrade case. HC_FULL=1: the whole cluster from the version it is on to the other one.
# Otherwise a one-node upgrade to 1.1: the cluster is on 1.1 but hcx-n3, which its agent rolled
# back to 1.0 behind the controller's back before the run (the poller then reports it on 1.0).
agent_url() { hcctl node show "$1" -o json | jq -r .node.agent_url; }
agent_api() { agent_call "$(agent_url "$1")" "$2" "$3"; } # NODE METHOD PATH
node_version() { hcctl node show "$1" -o json | jq -r .node.software_version; }
other_version() { [ "$1" = 1.0 ] && echo 1.1 || echo 1.0; }
upgrade_case() {
    local to id nodes=$NODES
    ctl_ensure || return 1
    if [ "$FULL" = 1 ]; then
        to=$(other_version "$(node_version hcx-n3)")
    else
        to=1.1 nodes=hcx-n3
        if [ "$(node_version hcx-n3)" != 1.0 ]; then
            agent_api hcx-n3 POST /v1/software/rollback >/dev/null &&
            wait_for 30 '[ "$(node_version hcx-n3)" = 1.0 ] && running_all' || return 1
        fi
        [ "$(versions)" = "1.1 1.1 1.0" ] || { echo "versions before the run: $(versions)"; return 1; }
    fi
    crash_run_begin "$1" || return 1
    id=$(submit_and_finish hcctl upgrade --rolling --to "$to" --yes --no-wait) || return 1
    crash_run_end "$1" || return 1
    check_op "$id" || return 1
    [ "$(jq -r '[.nodes[].software_version] | join(" ")' "$T/nodes.json")" = "$to $to $to" ] ||
        { echo "versions: $(jq -c '[.nodes[].software_version]' "$T/nodes.json"), want $to"; return 1; }
    maint_none || { echo "a node is left in maintenance"; return 1; }
    once_per_node software.activated "$id" "$nodes" &&
    once_per_node maintenance.entered "$id" "$nodes" &&
    once_per_node maintenance.exited "$id" "$nodes" &&
    started_once_each "$T0" "$T1" "$to" "$nodes" &&
    check_budget "$T0" "$T1"
}
if [ "$FULL" != 1 ]; then
    hcctl upgrade --rolling --to 1.1 --yes >"$T/install.out" 2>&1 || { cat "$T/install.out"; exit 1; }
fi

total=$(count_steps upgrade upgrade_case) || exit 1
echo "# upgrade: $total durable steps"
enumerate upgrade "$total" upgrade_case

# --- maintenance enter + exit ---------------------------------------------------------------------

# hist_count T0 T1 NODE EVENT: how many EVENT lines NODE's agent history has in [T0, T1].
hist_count() {
    jq -s --argjson t0 "$1" --argjson t1 "$2" --arg n "$3" --arg e "$4" \
        '[.[] | select(.ts_ms >= $t0 and .ts_ms <= $t1 and .node == $n and .event == $e)] | length' \
        "$T/hist.jsonl"
}
maint_case() {
    local id1 id2 stops starts
    ctl_ensure || return 1
    crash_run_begin "$1" || return 1
    id1=$(submit_and_finish hcctl maintenance enter hcx-n2 --yes --no-wait) || return 1
    id2=$(submit_and_finish hcctl maintenance exit hcx-n2 --yes --no-wait) || return 1
    crash_run_end "$1" || return 1
    check_op "$id1" && check_op "$id2" || return 1
    maint_none || { echo "a node is left in maintenance"; return 1; }
    wait_for 10 running_all || { echo "a service is not running"; return 1; }
    once_per_node maintenance.entered "$id1" hcx-n2 &&
    once_per_node maintenance.exited "$id2" hcx-n2 || return 1
    stops=$(hist_count "$T0" "$T1" hcx-n2 stopped) && starts=$(hist_count "$T0" "$T1" hcx-n2 started) &&
    [ "$stops" = 1 ] && [ "$starts" = 1 ] ||
        { echo "hcx-n2's service stopped $stops and started $starts time(s), want once each"; return 1; }
    check_budget "$T0" "$T1"
}
total=$(count_steps maintenance maint_case) || exit 1
echo "# maintenance enter + exit: $total durable steps"
enumerate maintenance "$total" maint_case

# --- MTU change ----------------------------------------------------------------------------------

mtu_of() { lab_exec "$1" cat /sys/class/net/eth1/mtu; }
# api GET PATH: the controller's raw answer (the stored result of an operation).
api() {
    curl -sS --max-time 10 --cacert "$CTL_DIR/ca.pem" \
        -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" -X "$1" "$CTL_URL$2"
}
mtu_case() {
    local id from to n
    ctl_ensure || return 1
    from=$(mtu_of n1) && to=$([ "$from" = 9000 ] && echo 8000 || echo 9000)
    crash_run_begin "$1" || return 1
    id=$(submit_and_finish hcctl net set-mtu "$to" --yes --no-wait) || return 1
    crash_run_end "$1" || return 1
    check_op "$id" || return 1
    for n in n1 n2 n3; do
        [ "$(mtu_of $n)" = "$to" ] || { echo "$n: eth1 MTU $(mtu_of $n), want $to"; return 1; }
    done
    hcctl cluster status -o json | jq -e --argjson m "$to" '.cluster.mtu == $m' >/dev/null ||
        { echo "cluster MTU $(hcctl cluster status -o json | jq .cluster.mtu), want $to"; return 1; }
    once_per_node net.mtu "$id" "$NODES" '.details.result == "confirmed"' &&
    once_per_node net.mtu "$id" "" '.node != null and .details.result != "confirmed"' || return 1
    # the stored record says what to undo: every node confirmed from the old MTU
    api GET "/v1/operations/$id/result" >res.json &&
    jq -e --argjson from "$from" --argjson to "$to" '[.result.changes[] | .state == "confirmed"
        and .previous_mtu == $from and .mtu == $to] | length == 3 and all' res.json >/dev/null ||
        { echo "recorded changes: $(jq -c .result.changes res.json)"; return 1; }
}
total=$(count_steps mtu mtu_case) || exit 1
echo "# MTU change: $total durable steps"
enumerate mtu "$total" mtu_case

note "total runtime $(($(date +%s) - T_START)) s"
cat "$T/notes"
test_done
