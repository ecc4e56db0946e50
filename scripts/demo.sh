#!/usr/bin/env bash
# Installs the packages, builds hcctl and runs the demo on a local multi-node cluster: a network-
# namespace lab of three nodes (management network at 1500, storage network at 9000, each node
# with its own sshd), a controller in the root namespace, then `hcctl cluster create` over SSH,
# `hcctl net check-jumbo`, and a rolling upgrade of the replicated reference storage service
# hcstor from 1.0 to 1.1 while hcload writes and reads blocks on it. Needs root (namespaces). Everything is torn down at the end; HC_DEMO_KEEP=1 keeps the
# scratch directory, HC_DEMO_NODES=N changes the size.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${HC_BUILD_DIR:-$src/build}
nodes=${HC_DEMO_NODES:-3}
if [ "$(id -u)" -ne 0 ]; then
    echo "demo: run as root (it builds network namespaces)" >&2
    exit 1
fi
bash "$src/scripts/install-deps.sh"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" hcctl hcctld hcagent hcstor hcload bundles
bin=$build/bin
bundles=$build/bundles
export PATH=$bin:$PATH

work=$(mktemp -d /tmp/hcctl-demo.XXXXXX)
export XDG_CONFIG_HOME=$work/config HC_TEST_TMP=$work
. "$src/tests/lab/lab.sh"
ctl_pid=
load_pid=
# Under set -e: a daemon killed before it handles the signal makes wait fail (143), which must
# not end the clean-up before the lab and the scratch directory are gone.
cleanup() {
    [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null || true
    [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null || true
    lab_down >/dev/null 2>&1 || true
    if [ "${HC_DEMO_KEEP:-0}" = 1 ]; then echo "demo files kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "hcctld init: cluster CA, certificates, admin token, SSH key, CLI config"
hcctld init --data-dir "$work/controller" --listen 198.18.0.1:7443 --cluster-name demo \
    --trust-key "$bundles/dev.pub"

say "lab: $nodes nodes in network namespaces (mgmt 198.18.0.0/24 @1500, storage 198.18.1.0/24 @9000)"
lab_up "$nodes" --prefix hcd --key "$work/controller/ssh/id_ed25519.pub" >/dev/null
lab_info

hcctld run --data-dir "$work/controller" --poll-interval 1s >"$work/hcctld.log" 2>&1 &
ctl_pid=$!
# `hcctl version` exits 0 without a controller too: wait for the controller's own version
answers() { hcctl version -o json 2>/dev/null | jq -e '.controller.version' >/dev/null; }
for _ in $(seq 100); do answers && break; sleep 0.1; done
answers || { echo "demo: hcctld does not answer; its log:" >&2; cat "$work/hcctld.log" >&2; exit 1; }

args=()
for i in $(seq "$nodes"); do args+=(--node "root@198.18.0.$((10 + i))"); done
say "hcctl cluster create demo ${args[*]} --storage-interface eth1 --mtu 9000 --accept-new-host-keys"
hcctl cluster create demo "${args[@]}" --storage-interface eth1 --mtu 9000 --accept-new-host-keys

say "hcctl node list"
hcctl node list
say "hcctl cluster status"
hcctl cluster status

say "hcctl net check-jumbo: 9000-byte DF probes along every directed pair of storage addresses"
hcctl net check-jumbo
say "the switch port toward node 2 drops to 1500 (a silent L2 mismatch) ..."
lab_set_port_mtu n2 storage 1500 >/dev/null
hcctl net check-jumbo || echo "(exit $? : a check found problems)"
lab_set_port_mtu n2 storage 9000 >/dev/null

say "hcctl software upload: signed bundles of the reference storage service"
hcctl software upload "$bundles/hcstor-1.0.tar.gz"
hcctl software upload "$bundles/hcstor-1.1.tar.gz"
say "hcctl upgrade --rolling --to 1.0 (first install, one node at a time)"
hcctl upgrade --rolling --to 1.0 --yes
say "hcctl upgrade --rolling --to 1.1 --dry-run"
hcctl upgrade --rolling --to 1.1 --dry-run
svc_nodes=$(hcctl net show -o json | jq -r '[.nodes[].address + ":7480"] | join(",")')
say "hcload --nodes $svc_nodes: a workload writing and reading blocks during the upgrade"
hcload --nodes "$svc_nodes" --duration 0 --workers 4 >"$work/hcload.txt" 2>"$work/hcload.err" &
load_pid=$!
sleep 3
say "hcctl upgrade --rolling --to 1.1 (while hcload runs)"
hcctl upgrade --rolling --to 1.1 --yes
sleep 3
kill -INT "$load_pid" && wait "$load_pid" && load_rc=0 || load_rc=$?
load_pid=
say "hcload's report (every acknowledged write read back and checked)"
cat "$work/hcload.txt"
[ "$load_rc" = 0 ] || { echo "demo: hcload reported failures (exit $load_rc)"; tail -n 20 "$work/hcload.err"; exit 1; }
say "hcctl upgrade status"
hcctl upgrade status
say "hcctl events --type maintenance.entered"
hcctl events --type maintenance.entered
