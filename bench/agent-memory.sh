#!/usr/bin/env bash
# hcagent's memory at idle (issue 16): its private memory, not the RSS of the shared libraries it
# maps. One lab node brought in by `cluster create` (so the agent runs as on a host without
# systemd: a supervisor and its worker), hcstor 1.0 running under it, the controller polling
# every 2 s; after IDLE seconds (default 20) without operations, /proc/PID/smaps_rollup of each
# agent process: PSS (private pages plus a share of every shared page), USS (private pages only:
# what the agent alone costs the node), RSS. Then the mappings that hold the most PSS.
# Usage: bench/agent-memory.sh [BUILD_DIR] (default build-bench, a release build). Needs root.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench}
idle=${IDLE:-20}
. "$src/bench/lib.sh"

exec 9>/tmp/hc-lab.lock
flock 9
bench_hcstor_cluster 1
sleep "$idle"
sup=$(lab_exec n1 cat /run/hcctl/hcagent.pid)
pids="$sup $(pgrep -P "$sup" -x hcagent || true)"
kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$2/smaps_rollup"; }
total_pss=0 total_uss=0 total_rss=0
for p in $pids; do
    pss=$(kb Pss "$p") rss=$(kb Rss "$p")
    uss=$(($(kb Private_Clean "$p") + $(kb Private_Dirty "$p")))
    role=worker
    [ "$p" = "$sup" ] && role=supervisor
    echo "agent_${role}_pss_kb $pss"
    echo "agent_${role}_uss_kb $uss"
    echo "agent_${role}_rss_kb $rss"
    total_pss=$((total_pss + pss)) total_uss=$((total_uss + uss)) total_rss=$((total_rss + rss))
done
echo "agent_pss_kb $total_pss"
echo "agent_uss_kb $total_uss"
echo "agent_rss_kb $total_rss"
svc=$(pgrep -x hcstor | head -1 || true)
[ -z "$svc" ] || echo "service_hcstor_pss_kb $(kb Pss "$svc")"
echo "# PSS by mapping, agent processes together (kB):"
for p in $pids; do cat "/proc/$p/smaps"; done | awk '
    /^[0-9a-f]+-[0-9a-f]+ / { name = NF >= 6 ? $6 : "[anon]" }
    /^Pss:/ { pss[name] += $2 }
    END { for (n in pss) if (pss[n] >= 64) printf "#   %6d %s\n", pss[n], n }' | sort -k2 -rn | head -15
bench_stop
