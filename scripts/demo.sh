#!/usr/bin/env bash
# Installs the packages, builds hcctl and runs the demo: a controller and three agents on
# loopback addresses 127.0.0.2-4, joined with one-time tokens, then `hcctl node list` and
# `hcctl cluster status`. Everything runs in a scratch directory that is removed at the end
# (keep it with HC_DEMO_KEEP=1).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build}
bash "$src/scripts/install-deps.sh"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" hcctl hcctld hcagent
bin=$build/bin

work=$(mktemp -d /tmp/hcctl-demo.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${HC_DEMO_KEEP:-0}" = 1 ] && echo "demo files kept in $work" || rm -rf "$work"
}
trap cleanup EXIT
export XDG_CONFIG_HOME=$work/config
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

port=17443
say "hcctld init: cluster CA, certificates, admin token, CLI config"
"$bin/hcctld" init --data-dir "$work/controller" --listen 127.0.0.1:$port --cluster-name demo
"$bin/hcctld" run --data-dir "$work/controller" --poll-interval 1s >"$work/hcctld.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do "$bin/hcctl" -q version >/dev/null 2>&1 && break; sleep 0.1; done

for i in 1 2 3; do
    say "join node$i (agent on 127.0.0.$((i + 1)):7444, one-time join token)"
    token=$("$bin/hcctl" cluster join-token --ttl 10m -o json | jq -r .token)
    HCAGENT_TOKEN=$token "$bin/hcagent" join --controller https://127.0.0.1:$port \
        --data-dir "$work/node$i" --listen 127.0.0.$((i + 1)):7444 --name "node$i" \
        >"$work/node$i.log" 2>&1 &
    pids+=($!)
done
for _ in $(seq 100); do
    n=$("$bin/hcctl" node list -o json | jq '[.nodes[] | select(.health == "reachable")] | length')
    [ "$n" = 3 ] && break
    sleep 0.1
done

say "hcctl node list"
"$bin/hcctl" node list
say "hcctl cluster status"
"$bin/hcctl" cluster status
say "hcctl node show node1"
"$bin/hcctl" node show node1
say "hcctl events --limit 8"
"$bin/hcctl" events --limit 8
