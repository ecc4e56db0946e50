#!/usr/bin/env bash
# Issue 19's figure: the wall time of a rolling upgrade of 12 lab nodes in 4 failure domains of 3,
# one node at a time (the default) beside a whole domain at a time (--batch domain), on the same
# cluster and bundles, under hcload. Printed side by side with the ratio, hcload's operations,
# errors and lost writes for each run, and the most nodes and failure domains down at once (from
# the controller's maintenance events).
#
# Two services: hcstor as built (restarts in a fraction of a second), and the same hcstor behind a
# wrapper that takes 2 s to start (closer to a real storage service; tests/lab/upgrade_lib.sh
# slow_bundle). Each pair runs twice, the second time with both versions already staged on
# every node, so that the like-for-like figure has no bundle transfer in either column.
#
# Usage: bench/domains.sh [BUILD_DIR] (default build-bench, a release build). Needs root; one lab
# at a time: flock -o /tmp/hc-lab.lock bash bench/domains.sh
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
. "$src/bench/lib.sh"
ninja -C "$build" hcload >/dev/null
N=12
cd "$work"

ms() { date +%s%3N; }
secs() { awk -v t="$1" 'BEGIN {printf "%.1f", t / 1000}'; }
dom() { echo "r$(( ($1 - 1) / 3 + 1 ))"; }

# slow_bundle VERSION: hcstor 1.1 that waits 2 s before it starts (tests/lab/upgrade_lib.sh, which
# reads the bundles from $HC_BIN/../bundles and the manifests from $HC_SRC)
HC_BIN=$build/bin HC_SRC=$src
. "$src/tests/lab/upgrade_lib.sh"

# The most nodes and failure domains in maintenance at once during operation $1 (events replayed).
down_at_once() {
    hcctl events --type maintenance.entered --limit 1000 -o json >ent.json
    hcctl events --type maintenance.exited --limit 1000 -o json >exi.json
    jq -r -s --arg op "$1" '[.[0].events[] | select(.op_id == $op) | {id, node, in: true}]
           + [.[1].events[] | select(.op_id == $op) | {id, node, in: false}]
           | sort_by(.id) | reduce .[] as $e ({in: {}, n: 0, d: 0};
               .in[$e.node] = $e.in
               | [.in | to_entries[] | select(.value) | .key] as $down
               | .n = ([.n, ($down | length)] | max)
               | .d = ([.d, ([$down[] | ltrimstr("hcb-n") | tonumber | (. - 1) / 3 | floor] | unique | length)] | max))
           | "\(.n) \(.d)"' ent.json exi.json
}

# run LABEL VERSION [--batch domain]: one timed upgrade under hcload; prints a result line.
run() {
    local label=$1 v=$2 t0 t1 id nd
    shift 2
    hcload --nodes "$(svc_nodes)" --duration 0 --workers 4 --json --quiet >"load-$label.json" 2>"load-$label.err" &
    local lp=$!
    sleep 2
    t0=$(ms)
    hcctl -q upgrade --rolling --to "$v" --yes "$@" >/dev/null
    t1=$(ms)
    sleep 1
    kill -INT "$lp"
    wait "$lp" || true
    id=$(hcctl upgrade status -o json | jq -r .operation_id)
    nd=$(down_at_once "$id")
    printf '%-34s %8s s  ops %6s  errors %s  lost %s  down at once: %s node(s), %s domain(s)\n' \
        "$label" "$(secs $((t1 - t0)))" "$(jq .ops "load-$label.json")" \
        "$(jq .errors "load-$label.json")" "$(jq .verify.lost "load-$label.json")" ${nd}
    echo "$((t1 - t0))" >"t-$label"
}

bench_controller "$N" 500ms --trust-key "$build/bundles/dev.pub"
args=()
for i in $(seq $N); do args+=(--node "198.18.0.$((10 + i))" --failure-domain "198.18.0.$((10 + i))=$(dom "$i")"); done
hcctl -q cluster create bench "${args[@]}" --storage-interface eth1 --accept-new-host-keys
hcctl -q software upload "$build/bundles/hcstor-1.0.tar.gz" >/dev/null
hcctl -q software upload "$build/bundles/hcstor-1.1.tar.gz" >/dev/null
slow_bundle 1.5 2>/dev/null
slow_bundle 1.6 2>/dev/null
hcctl -q upgrade --rolling --to 1.0 --batch domain --yes >/dev/null
echo "bench/domains.sh: $N lab nodes in 4 failure domains of 3, hcstor replication 2, hcload 4 workers"

run "hcstor 1.0->1.1 node (stages 1.1)" 1.1
run "hcstor 1.1->1.0 domain" 1.0 --batch domain
run "hcstor 1.0->1.1 node (staged)" 1.1
run "hcstor 1.1->1.0 domain (staged)" 1.0 --batch domain
run "2s-start ->1.5 node (stages 1.5)" 1.5
run "2s-start 1.5->1.6 domain (stages)" 1.6 --batch domain
run "2s-start 1.6->1.5 node (staged)" 1.5
run "2s-start 1.5->1.6 domain (staged)" 1.6 --batch domain

ratio() { awk -v a="$(cat "t-$1")" -v b="$(cat "t-$2")" 'BEGIN {printf "%.2f", a / b}'; }
echo
echo "one node at a time / a domain at a time (staged, like for like):"
echo "  hcstor:         $(secs "$(cat "t-hcstor 1.0->1.1 node (staged)")") s / $(secs "$(cat "t-hcstor 1.1->1.0 domain (staged)")") s = $(ratio "hcstor 1.0->1.1 node (staged)" "hcstor 1.1->1.0 domain (staged)")"
echo "  2 s to start:   $(secs "$(cat "t-2s-start 1.6->1.5 node (staged)")") s / $(secs "$(cat "t-2s-start 1.5->1.6 domain (staged)")") s = $(ratio "2s-start 1.6->1.5 node (staged)" "2s-start 1.5->1.6 domain (staged)")"
