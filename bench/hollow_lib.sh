# What the hollow-node benchmarks share (sourced by bench/scale.sh and bench/certs.sh): times,
# percentiles, waiting for N nodes, a process's CPU and RSS. The caller sets `work` (hcctl's
# config there) before using node_count and wait_nodes.
ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1000 }'; }
# pct P FILE: the P-th percentile of the numbers in FILE (one a line)
pct() { sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR * p + 99) / 100); if (i < 1) i = 1; print v[i] }'; }
node_count() { hcctl -o json node list | jq "[.nodes[] | select($1)] | length"; }
wait_nodes() { # FILTER N TIMEOUT_S
    local i
    for i in $(seq $(($3 * 5))); do
        [ "$(node_count "$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
        sleep 0.2
    done
    echo "bench: only $(node_count "$1") nodes match $1 after $3 s" >&2
    return 1
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# stop_pids PID...: each process is sent TERM, then waited for (unset or gone ones are skipped)
stop_pids() {
    local p
    for p in "$@"; do kill "$p" 2>/dev/null || true; done
    for p in "$@"; do wait "$p" 2>/dev/null || true; done
}
