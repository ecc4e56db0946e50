#!/usr/bin/env bash
# The controller's side of check-jumbo at 1,000 nodes (issue 14): findings, result document and
# the failures-only answer of a simulated check of 999,000 directed pairs, healthy and with a
# bad link between two halves, and the peak RSS (bench/net_aggregate.c). No lab, no root.
# Usage: bench/net-aggregate.sh [NODES [BUILD_DIR]]   (default 1000; a release build in BUILD_DIR,
# default build-bench, configured as bench/lib.sh configures it). RUNS (default 5) per figure.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-1000}
build=${2:-$src/build-bench}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHC_TESTS=OFF >/dev/null
ninja -C "$build" net_aggregate >/dev/null
"$build/bin/net_aggregate" "$n" "${RUNS:-5}"
