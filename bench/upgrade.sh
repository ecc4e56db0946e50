#!/usr/bin/env bash
# Rolling upgrade wall time on 3 and 6 lab nodes, and the controller's own overhead per node:
# total minus the time the service itself spends restarting on the new version and passing its
# health check (the activate and verify_health steps). Needs root.
#
# Beside it, on the same lab and the same bundles, the same rolling upgrade as an Ansible
# playbook with `serial: 1` (bench/ansible/rolling-upgrade.yml: SSH to each node, the agent API
# called on the node; it stages the bundle itself, as hcctl does): issue 5's figure is
# hcctl_vs_ansible_ratio_nodes_N = hcctl time / ansible-playbook time, goal <= 0.33. Both go
# 1.0 -> 1.1 with 1.1 not yet staged on the nodes: between the two, hcctl rolls the cluster back
# to 1.0 and the staged 1.1 is deleted on every node (untimed). Ansible (Debian package
# `ansible`) is installed when missing.
#
# Usage: bench/upgrade.sh [BUILD_DIR] (default build-bench, a release build). Only one lab can be
# up on a machine: run it as `flock /run/hcctl-lab.lock bash bench/upgrade.sh`.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}

if ! command -v ansible-playbook >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends ansible >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends ansible >/dev/null; }
fi
. "$src/bench/lib.sh"

ms() { date +%s%3N; }
secs() { awk -v t="$1" 'BEGIN {printf "%.2f", t / 1000}'; }
# The software version of every node, in name order, as the controller's poller last saw it.
versions() { hcctl node list -o json | jq -r '[.nodes | sort_by(.name)[] | .software_version // "none"] | join(" ")'; }
# wait_versions N V: until the controller reports V on all N nodes (a few poll intervals at most).
wait_versions() {
    local want i
    want=$(for i in $(seq "$1"); do printf '%s ' "$2"; done)
    want=${want% }
    for i in $(seq 40); do
        [ "$(versions)" = "$want" ] && return 0
        sleep 0.25
    done
    echo "upgrade.sh: nodes run '$(versions)', expected $2 everywhere" >&2
    return 1
}
# agents_on V: every agent itself says that V is current and its service runs (asked directly,
# not through the controller's poller).
agents_on() {
    local url ctl=$work/controller
    for url in $(hcctl node list -o json | jq -r '.nodes[].agent_url'); do
        curl -sf --cacert "$ctl/ca.pem" --cert "$ctl/client.pem" --key "$ctl/client.key" \
            "$url/v1/software" | jq -e --arg v "$1" '.current == $v and .service.state == "running"' \
            >/dev/null || { echo "upgrade.sh: $url does not run $1" >&2; return 1; }
    done
}

# ansible_setup: inventory, ansible.cfg and vars for bench/ansible/rolling-upgrade.yml, from the
# controller's node list; SSH as the controller does (its key, the lab's host keys, strictly).
ansible_setup() {
    local a=$work/ansible
    rm -rf "$a"
    mkdir -p "$a/cp" "$a/tmp"
    {
        echo "[storage]"
        hcctl node list -o json | jq -r '.nodes | sort_by(.name)[]
            | "\(.name) ansible_host=\(.address) agent_url=\(.agent_url)"'
        echo
        echo "[storage:vars]"
        echo "ansible_user=root"
        echo "ansible_ssh_private_key_file=$work/controller/ssh/id_ed25519"
        echo "ansible_ssh_common_args='-o UserKnownHostsFile=$(lab_info --json | jq -r .known_hosts) -o StrictHostKeyChecking=yes'"
        echo "agent_ca=/var/lib/hcctl/agent/ca.pem"
    } >"$a/inventory.ini"
    cat >"$a/ansible.cfg" <<EOF
[defaults]
inventory = $a/inventory.ini
forks = 50
gathering = explicit
interpreter_python = /usr/bin/python3
local_tmp = $a/tmp
retry_files_enabled = false
nocows = 1

[ssh_connection]
pipelining = true
ssh_args = -o ControlMaster=auto -o ControlPersist=60s
control_path_dir = $a/cp
EOF
    jq -n --arg v 1.1 --arg url "https://198.18.0.1:7443" --arg dir "$work/controller" \
        --arg bin "$build/bin/hcctld" \
        '{target_version: $v, controller_url: $url, controller_dir: $dir, hcctld_bin: $bin}' \
        >"$a/vars.json"
}

for n in 3 6; do
    bench_hcstor_cluster "$n"
    t0=$(ms)
    hcctl -q upgrade --rolling --to 1.1 --yes >/dev/null
    t1=$(ms)
    id=$(hcctl upgrade status -o json | jq -r .operation_id)
    service_ms=$(hcctl operation show "$id" -o json | jq '[.steps[] | select(.step == "activate"
        or .step == "verify_health") | ((.finished_at | sub("\\.[0-9]+Z$"; "Z") | fromdate) * 1000
        + (.finished_at | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber)) - ((.started_at
        | sub("\\.[0-9]+Z$"; "Z") | fromdate) * 1000 + (.started_at
        | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber))] | add')
    total=$((t1 - t0))
    wait_versions "$n" 1.1
    echo "upgrade_seconds_nodes_$n $(secs "$total")"
    echo "upgrade_service_restart_and_health_seconds_nodes_$n $(secs "$service_ms")"
    echo "upgrade_controller_overhead_ms_per_node_nodes_$n $(( (total - service_ms) / n ))"

    # Back to where hcctl started: 1.0 running, 1.1 uploaded but staged nowhere.
    hcctl -q upgrade --rolling --to 1.0 --yes >/dev/null
    for i in $(seq "$n"); do
        lab_exec "n$i" rm -rf /var/lib/hcctl/agent/software/1.1 \
            /var/lib/hcctl/agent/software/.meta/1.1.json
    done
    wait_versions "$n" 1.0
    agents_on 1.0
    ansible_setup
    t0=$(ms)
    if ! ANSIBLE_CONFIG=$work/ansible/ansible.cfg ansible-playbook \
        -e "@$work/ansible/vars.json" "$src/bench/ansible/rolling-upgrade.yml" \
        >"$work/ansible/run.log" 2>&1; then
        cat "$work/ansible/run.log" >&2
        echo "upgrade.sh: ansible-playbook failed on $n nodes" >&2
        exit 1
    fi
    t1=$(ms)
    agents_on 1.1
    wait_versions "$n" 1.1
    ansible_ms=$((t1 - t0))
    echo "ansible_upgrade_seconds_nodes_$n $(secs "$ansible_ms")"
    echo "hcctl_vs_ansible_ratio_nodes_$n $(awk -v h="$total" -v a="$ansible_ms" 'BEGIN {printf "%.2f", h / a}')"
    bench_stop
done
