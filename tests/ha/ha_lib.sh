# Helpers for the HA tests and bench/ha.sh (docs/ha.md): three etcd members on 127.0.0.11-13
# over mutual TLS with certificates from the cluster CA, and up to three hcctld on 127.0.0.21-23,
# each under a supervisor loop that restarts it when it exits (as systemd Restart=always does).
# Source it with BIN (the build's bin directory) and HA_DIR (a scratch directory) set; call
# ha_teardown from an EXIT trap.

HA_ETCD_IPS=(127.0.0.11 127.0.0.12 127.0.0.13)
HA_CTL_IPS=(127.0.0.21 127.0.0.22 127.0.0.23)
HA_PORT=${HA_PORT:-7443}
HA_TTL=${HA_TTL:-2s}
# etcd's client and peer ports: tests pick free ones so that two of them never meet.
HA_ETCD_PORT=${HA_ETCD_PORT:-2379}
HA_ETCD_PEER_PORT=${HA_ETCD_PEER_PORT:-2380}
HA_ETCD_URLS="https://127.0.0.11:$HA_ETCD_PORT,https://127.0.0.12:$HA_ETCD_PORT,https://127.0.0.13:$HA_ETCD_PORT"
HA_ETCD_PIDS=()

ha_log() { printf '[ha %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }

# etcd's members, certificates from c1's CA (hcctld ha etcd-cert); 127.0.0.1 is a SAN too: etcd
# checks a peer's certificate against the address it connects from, and on loopback that is it.
ha_etcd_start() {
    local cluster="" i
    for i in 0 1 2; do
        cluster+="${cluster:+,}e$i=https://${HA_ETCD_IPS[$i]}:$HA_ETCD_PEER_PORT"
        "$BIN/hcctld" ha etcd-cert --data-dir "$HA_DIR/c1" --name "e$i" \
            --san "${HA_ETCD_IPS[$i]}" --san 127.0.0.1 --out-dir "$HA_DIR/etcd-certs" >/dev/null
    done
    for i in 0 1 2; do ha_etcd_member_start "$i" "$cluster" new; done
    local deadline=$((SECONDS + 30))
    until ETCDCTL_API=3 etcdctl --endpoints="$HA_ETCD_URLS" --cacert "$HA_DIR/c1/ca.pem" \
        --cert "$HA_DIR/etcd-certs/e0.pem" --key "$HA_DIR/etcd-certs/e0.key" \
        endpoint health >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { ha_log "etcd did not become healthy"; return 1; }
        sleep 0.2
    done
}

ha_etcd_member_start() {
    local i=$1 cluster=${2:-} state=${3:-existing} ip=${HA_ETCD_IPS[$1]} c="$HA_DIR/etcd-certs"
    [[ -n $cluster ]] || cluster=$(cat "$HA_DIR/etcd-cluster")
    echo "$cluster" >"$HA_DIR/etcd-cluster"
    etcd --name "e$i" --data-dir "$HA_DIR/etcd$i" \
        --listen-client-urls "https://$ip:$HA_ETCD_PORT" --advertise-client-urls "https://$ip:$HA_ETCD_PORT" \
        --listen-peer-urls "https://$ip:$HA_ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "https://$ip:$HA_ETCD_PEER_PORT" \
        --initial-cluster "$cluster" --initial-cluster-state "$state" \
        --client-cert-auth --trusted-ca-file "$HA_DIR/c1/ca.pem" \
        --cert-file "$c/e$i.pem" --key-file "$c/e$i.key" \
        --peer-client-cert-auth --peer-trusted-ca-file "$HA_DIR/c1/ca.pem" \
        --peer-cert-file "$c/e$i.pem" --peer-key-file "$c/e$i.key" \
        --max-txn-ops 4096 --max-request-bytes 8388608 \
        --auto-compaction-mode periodic --auto-compaction-retention 1h \
        --heartbeat-interval 100 --election-timeout 1000 \
        >>"$HA_DIR/etcd$i.log" 2>&1 &
    HA_ETCD_PIDS[$i]=$!
    # Tests start members in subshells: the file is how ha_teardown finds them.
    echo $! >"$HA_DIR/etcd$i.pid"
}

ha_etcd_pid() { cat "$HA_DIR/etcd$1.pid"; }

ha_etcdctl() {
    ETCDCTL_API=3 etcdctl --endpoints="$HA_ETCD_URLS" --cacert "$HA_DIR/c1/ca.pem" \
        --cert "$HA_DIR/etcd-certs/e0.pem" --key "$HA_DIR/etcd-certs/e0.key" "$@"
}

# The etcd member that leads raft right now (0..2), by its own status.
ha_etcd_raft_leader() {
    ha_etcdctl endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
for i, e in enumerate(json.load(sys.stdin)):
    if e["Status"]["leader"] == e["Status"]["header"]["member_id"]:
        print(["127.0.0.11", "127.0.0.12", "127.0.0.13"].index(e["Endpoint"].split("//")[1].split(":")[0])); break'
}

# Controller n (1..3) under a supervisor that restarts it after any exit but a clean one.
ha_ctl_start() {
    local n=$1 ip=${HA_CTL_IPS[$(($1 - 1))]}
    (
        set +e # a child's non-zero exit is what this loop is for
        trap 'kill -TERM $child 2>/dev/null; wait $child; exit 0' TERM
        while :; do
            "$BIN/hcctld" run --data-dir "$HA_DIR/c$n" --ha-etcd "$HA_ETCD_URLS" \
                --ha-lease-ttl "$HA_TTL" --poll-interval "${HA_POLL:-500ms}" \
                >>"$HA_DIR/c$n.log" 2>&1 &
            child=$!
            echo "$child" >"$HA_DIR/c$n.pid"
            wait $child
            rc=$?
            echo "exit $rc" >>"$HA_DIR/c$n.exits"
            [[ -f $HA_DIR/c$n.hold ]] && exit 0
            sleep 0.2
        done
    ) &
    echo $! >"$HA_DIR/c$n.supervisor"
}

ha_ctl_pid() { cat "$HA_DIR/c$1.pid"; }

# Controller n stopped for good (its supervisor too), until ha_ctl_start n again.
ha_ctl_stop() {
    local pid sup
    touch "$HA_DIR/c$1.hold"
    pid=$(cat "$HA_DIR/c$1.pid") sup=$(cat "$HA_DIR/c$1.supervisor")
    kill -TERM "$pid" 2>/dev/null
    while kill -0 "$sup" 2>/dev/null; do sleep 0.05; done
    rm -f "$HA_DIR/c$1.hold"
}

# A field of the JSON on stdin ("role", "leader.term"); "" when absent or not JSON.
ha_json() {
    python3 -c '
import json, sys
try:
    v = json.load(sys.stdin)
    for k in sys.argv[1].split("."):
        v = v[int(k)] if isinstance(v, list) else v[k]
    print("" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))
except Exception:
    print("")' "$1"
}

# GET /v1/ha of controller n, or "" when it does not answer.
ha_status() {
    curl -s --max-time 2 --cacert "$HA_DIR/c1/ca.pem" "https://${HA_CTL_IPS[$(($1 - 1))]}:$HA_PORT/v1/ha"
}

# The number (1..3) of the controller that says it leads; "" when none does.
ha_leader() {
    local n
    for n in 1 2 3; do
        [[ -d $HA_DIR/c$n ]] || continue
        if [[ $(ha_status "$n" | ha_json role) == leader ]]; then
            echo "$n"
            return 0
        fi
    done
    return 1
}

ha_wait_leader() {
    local deadline=$((SECONDS + ${1:-20})) l
    while ((SECONDS < deadline)); do
        l=$(ha_leader) && { echo "$l"; return 0; }
        sleep 0.1
    done
    return 1
}

# A first controller (c1) on 127.0.0.21, moved into etcd; c2 and c3 joined from it.
ha_setup() {
    "$BIN/hcctld" init --data-dir "$HA_DIR/c1" --listen "${HA_CTL_IPS[0]}:$HA_PORT" \
        --cli-config "$HA_DIR/cli.json" ${HA_INIT_ARGS:-} >"$HA_DIR/init.out"
    ha_etcd_start
    "$BIN/hcctld" ha init --data-dir "$HA_DIR/c1" --etcd "$HA_ETCD_URLS" >"$HA_DIR/ha-init.out"
    ha_ctl_start 1
    ha_wait_leader 20 >/dev/null || { ha_log "c1 did not lead"; return 1; }
    local n
    for n in 2 3; do
        "$BIN/hcctld" ha join --data-dir "$HA_DIR/c$n" --from "https://${HA_CTL_IPS[0]}:$HA_PORT" \
            --token-file "$HA_DIR/c1/admin.token" --ca-file "$HA_DIR/c1/ca.pem" \
            --listen "${HA_CTL_IPS[$((n - 1))]}:$HA_PORT" >"$HA_DIR/join$n.out"
        ha_ctl_start "$n"
    done
}

ha_teardown() {
    # Called from EXIT traps of scripts under set -e: a process already gone must not end it early.
    local - n pid
    set +e
    for n in 1 2 3; do
        touch "$HA_DIR/c$n.hold" 2>/dev/null
        [[ -f $HA_DIR/c$n.supervisor ]] && kill -TERM "$(cat "$HA_DIR/c$n.supervisor")" 2>/dev/null
    done
    sleep 0.3
    for n in 1 2 3; do
        [[ -f $HA_DIR/c$n.pid ]] && kill -KILL "$(cat "$HA_DIR/c$n.pid")" 2>/dev/null
    done
    for n in 0 1 2; do
        [[ -f $HA_DIR/etcd$n.pid ]] && kill -KILL "$(cat "$HA_DIR/etcd$n.pid")" 2>/dev/null
    done
    wait 2>/dev/null || true
}
