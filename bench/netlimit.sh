#!/usr/bin/env bash
# The service's bounds on this machine, asked vs measured (issue 15 item 3): CPU 10, 20 and 50%
# of a CPU, one cgroup changed live from one to the next, measured from the cgroup's own
# accounting over 2 s (cgroup v1 cpuacct here); the network egress bound at 10, 50 and 200
# Mbit/s and cleared, one HTB bound changed live under one TCP flow across a veth between two
# network namespaces, measured by the TCP payload that arrives over 2 s (a little under the
# rate on the wire: the headers count against the bound). The measuring code is the unit tests'
# (tests/unit/test_cgroup.c, test_netlimit.c, their "bench" mode).
# Needs root. Usage: bench/netlimit.sh [BUILD_DIR] (default build-bench-unit, a release build
# with the tests; an existing build-test works as well).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-bench-unit}
[ "$(id -u)" = 0 ] || { echo "netlimit.sh: needs root (cgroups, namespaces, qdiscs)" >&2; exit 2; }
if [ ! -f "$build/build.ninja" ]; then
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$build" test_cgroup test_netlimit >/dev/null
# the table's lines only: cmocka's own ([ RUN ], [ OK ], ...) are left out; a failure shows
# whole, and stops the bench
run() {
    local out
    out=$("$build/bin/$1" bench 2>&1) || { echo "$out" >&2; exit 1; }
    grep -v '^\[' <<<"$out" || true
}
printf '%-16s %13s %14s\n' bound asked measured
run test_cgroup
run test_netlimit
