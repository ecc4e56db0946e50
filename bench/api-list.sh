#!/usr/bin/env bash
# GET /v1/nodes at 1,000 nodes against nginx serving the same bytes (issue 16): a release hcctld
# with its own data dir and 1,000 synthetic node rows inserted with sqlite3 (no agents: the
# poller is set to a long interval so that it does not rewrite them during the run), the exact
# reply body saved, and nginx serving that file over TLS 1.3 with hcctld's own P-256 certificate
# and key. wrk runs against both with the same Authorization header, connections, threads,
# keep-alive and duration. One API thread in hcctld, so nginx runs one worker process.
# No root needed; runs on loopback (ports picked free). Prints:
#   api_nodes_body_bytes B / api_nodes_rps_hcctld X / api_nodes_rps_nginx Y / api_nodes_ratio Z
# Usage: bash bench/api-list.sh [BUILD_DIR]   (default build-bench-api, a release build)
# Environment: NODES (1000), CONNS (16), THREADS (1), DURATION (10s).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench-api}
nodes=${NODES:-1000}
conns=${CONNS:-16}
threads=${THREADS:-1}
duration=${DURATION:-10s}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctld >/dev/null
work=$(mktemp -d /tmp/hcctl-api-bench.XXXXXX)
ctl_pid= nginx_pid=
cleanup() {
    [ -z "$ctl_pid" ] || { kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null; } || true
    [ -z "$nginx_pid" ] || { kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null; } || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ctl_port=$(free_port)
ngx_port=$(free_port)
data=$work/controller

HOME=$work XDG_CONFIG_HOME=$work/config "$build/bin/hcctld" init --data-dir "$data" \
    --listen "127.0.0.1:$ctl_port" --cluster-name bench >/dev/null 2>&1
token=$(cat "$data/admin.token")
cluster=$(sqlite3 "$data/hcctld.db" 'SELECT id FROM clusters')
# $nodes rows shaped like real ones: every column the list shows is set.
sqlite3 "$data/hcctld.db" <<SQL
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $nodes)
INSERT INTO nodes (cluster_id, name, address, agent_url, hostname, cert_serial, cert_pem, health,
    health_detail, agent_version, software_version, service_state, uptime_s, poll_latency_ms,
    last_seen, joined_at, config_revision, config_state, cert_pin)
SELECT '$cluster', printf('n%04d', i), printf('10.%d.%d.%d', i / 65536, (i / 256) % 256, i % 256),
    printf('https://10.%d.%d.%d:7444', i / 65536, (i / 256) % 256, i % 256), printf('host-%04d', i),
    printf('%032x', i), 'x', 'reachable', NULL, '0.16.0', '1.3.0', 'running', 86400 + i, 3,
    1764680000000 + i, 1764600000000 + i, 4, 'in_sync', 'sha256//bench' FROM seq;
SQL
HOME=$work "$build/bin/hcctld" run --data-dir "$data" --poll-interval 1h >"$work/hcctld.log" 2>&1 &
ctl_pid=$!
url=https://127.0.0.1:$ctl_port/v1/nodes
for _ in $(seq 100); do
    curl -sf --cacert "$data/ca.pem" -H "Authorization: Bearer $token" "$url" -o "$work/nodes.json" && break
    sleep 0.1
done
[ "$(jq '.nodes | length' "$work/nodes.json")" = "$nodes" ] || { echo "api-list.sh: no $nodes nodes" >&2; cat "$work/hcctld.log" >&2; exit 1; }
echo "api_nodes_body_bytes $(stat -c %s "$work/nodes.json")"

. "$src/bench/nginx.sh"
nginx_serve "$work" "$work/nodes.json" "$data/server.pem" "$data/server.key" "$ngx_port"
rps() { wrk_rps "$1" "$token" "$conns" "$threads" "$duration"; }
a=$(rps "$url")
b=$(rps "https://127.0.0.1:$ngx_port/v1/nodes")
echo "api_nodes_rps_hcctld $a"
echo "api_nodes_rps_nginx $b"
echo "api_nodes_ratio $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')"
