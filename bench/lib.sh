# What the lab benchmarks share (sourced by bench/create.sh, jumbo.sh, load.sh, upgrade.sh): a
# release build, a scratch directory, and a controller with N lab nodes that is torn down on exit.
# Needs root. The caller sets `src` (the source tree) and `build` before sourcing.
set -euo pipefail
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" hcctl hcctld hcagent hcstor bundles >/dev/null
export PATH=$build/bin:$PATH
work=$(mktemp -d /tmp/hcctl-bench.XXXXXX)
export XDG_CONFIG_HOME=$work/config HC_TEST_TMP=$work
. "$src/tests/lab/lab.sh"
bench_pid=

bench_stop() {
    # || true: under set -e a controller that dies of the signal (143, e.g. killed while still
    # starting) would end the shell here, before lab_down, leaving the whole lab up
    [ -z "$bench_pid" ] || { kill "$bench_pid" 2>/dev/null && wait "$bench_pid" 2>/dev/null; } || true
    bench_pid=
    lab_down >/dev/null 2>&1 || true
}
# INT/TERM are ignored while tearing down: a signal then must not leave the lab up.
trap 'trap "" INT TERM; bench_stop; rm -rf "$work"' EXIT

bench_answers() { hcctl -o json version 2>/dev/null | jq -e .controller.version >/dev/null; }

# bench_controller N POLL [hcctld init options...]: a fresh controller and an N-node lab;
# BENCH_NODES receives the --node arguments for cluster create.
bench_controller() {
    local n=$1 poll=$2 i
    shift 2
    rm -rf "$work/controller" "$work/config"
    hcctld init --data-dir "$work/controller" --listen 198.18.0.1:7443 "$@" >/dev/null 2>&1
    lab_up "$n" --prefix hcb --key "$work/controller/ssh/id_ed25519.pub" >/dev/null 2>&1
    hcctld run --data-dir "$work/controller" --poll-interval "$poll" >"$work/hcctld.log" 2>&1 &
    bench_pid=$!
    # `hcctl version` exits 0 without a controller too: wait for the controller's own version
    for _ in $(seq 100); do bench_answers && break; sleep 0.1; done
    bench_answers || { echo "bench: hcctld does not answer; its log:" >&2; cat "$work/hcctld.log" >&2; return 1; }
    BENCH_NODES=()
    for i in $(seq "$n"); do BENCH_NODES+=(--node "198.18.0.$((10 + i))"); done
}

# bench_hcstor_cluster N: bench_controller N with the development bundle key, a cluster of the N
# nodes, hcstor 1.0 and 1.1 uploaded and 1.0 installed by a rolling upgrade.
bench_hcstor_cluster() {
    bench_controller "$1" 500ms --trust-key "$build/bundles/dev.pub"
    hcctl -q cluster create bench "${BENCH_NODES[@]}" --storage-interface eth1 --accept-new-host-keys
    hcctl -q software upload "$build/bundles/hcstor-1.0.tar.gz" >/dev/null
    hcctl -q software upload "$build/bundles/hcstor-1.1.tar.gz" >/dev/null
    hcctl -q upgrade --rolling --to 1.0 --yes >/dev/null
}
