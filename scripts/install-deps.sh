#!/usr/bin/env bash
# Installs every Debian 12 package hcctl needs to build, test and run its demo. Idempotent.
set -euo pipefail
packages=(
    build-essential cmake ninja-build pkg-config git ca-certificates
    libevent-dev libcurl4-openssl-dev libjansson-dev libsqlite3-dev libssh-dev libssl-dev
    libarchive-dev libreadline-dev libiperf-dev libmnl-dev libcmocka-dev
    openssh-server openssh-client iproute2 iputils-ping util-linux procps psmisc
    nftables # scripts/check-jumbo-scale.sh: a bad trunk between two switches, on the lab's bridge
    jq curl openssl sqlite3
    zsh fish bsdutils prometheus mandoc man-db systemd file dpkg-dev
    clang libclang-rt-14-dev zlib1g-dev # the libFuzzer build (docs/fuzzing.md)
    clang-format-14 # scripts/check-format.sh: CI fails on a file that deviates from .clang-format
    nginx-light wrk # bench/scale.sh, bench/api-list.sh: nginx serves GET /v1/nodes's bytes beside hcctld
    etcd-server etcd-client # hcctld in HA mode (docs/ha.md): tests/ha and bench/ha.sh start their own members
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing packages: ${missing[*]} (run as root)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
