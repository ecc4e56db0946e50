#!/usr/bin/env bash
# tests/lab/t10_lab_smoke.sh — smoke test of the namespace lab (tests/lab/lab.sh) that the e2e
# tests and the demo stand on: real sshd with strict host key checking, per-node hostnames and
# private hcctl directories, the MTUs of both networks and the faults the MTU tests inject
# (switch port, node interface, routed hop), shared-network mode, and teardown in every way a
# test can end (normally, failing, half-way through up, killed, after a crash).
# Needs root; prints "ok N - ..." / "not ok N - ..." and exits non-zero on any failure.

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (network and mount namespaces)"
    exit 0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lab/lab.sh
. "$HERE/lab.sh"

P=${HC_LAB_TEST_PREFIX:-hct}
NUM=0
FAILS=0

ok() { NUM=$((NUM + 1)); echo "ok $NUM - $* ${T10_TIMES:+[$SECONDS s]}"; }
not_ok() { NUM=$((NUM + 1)); FAILS=$((FAILS + 1)); echo "not ok $NUM - $*"; }
note() { echo "# $*"; }
# check DESC CMD...: one test line from a command's success.
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# check_not DESC CMD...: one test line from a command's failure.
check_not() { local d=$1; shift; if "$@"; then not_ok "$d"; else ok "$d"; fi; }
jq_true() { jq -n -e "$@" >/dev/null; }
bail() { not_ok "$*"; echo "Bail out! $*"; exit 1; }

for c in ip bridge nsenter unshare setsid jq ssh ssh-keygen ping "$LAB_SSHD"; do
    command -v "$c" >/dev/null || bail "required command '$c' is missing"
done

mkdir -p "${HC_TEST_TMP:-/tmp}" && TMP=$(mktemp -d "${HC_TEST_TMP:-/tmp}/t10-lab.XXXXXX") ||
    bail "cannot create a temp dir"
lab_trap_teardown 'rm -rf "$TMP"'

etc_before=$(ls -A /etc | md5sum)
had_etc_hcctl=0
[ -e /etc/hcctl ] && had_etc_hcctl=1

# ---- helpers ---------------------------------------------------------------------------------

info() { lab_info --json; }
node_field() { info | jq -r --arg n "$1" ".nodes[] | select(.name == \$n) | .$2"; }

build_known_hosts() {
    info | jq -r '.nodes[] | "\(.mgmt_ip) \(.host_key_pub)"' | while read -r ip pub; do
        printf '%s %s\n' "$ip" "$(cut -d' ' -f1-2 "$pub")"
    done >"$TMP/known_hosts"
}

# tssh KNOWN_HOSTS KEY IP CMD...: strict, non-interactive ssh as root.
tssh() {
    local kh=$1 key=$2 ip=$3
    shift 3
    ssh -F /dev/null -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=yes \
        -o UserKnownHostsFile="$kh" -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes \
        -o ConnectTimeout=5 -o LogLevel=ERROR "root@$ip" "$@"
}
nssh() { tssh "$TMP/known_hosts" "$(lab__conf key)" "198.18.0.$((10 + ${1#n}))" "${@:2}"; }

# ping_df NODE|host IP SIZE: one DF ping of SIZE payload bytes (IP packet SIZE+28).
ping_df() {
    if [ "$1" = host ]; then
        ping -n -q -c 1 -W 2 -M "do" -s "$3" "$2" >/dev/null 2>&1
    else
        lab_exec "$1" ping -n -q -c 1 -W 2 -M "do" -s "$3" "$2" >/dev/null 2>&1
    fi
}

lab_gone() {
    local prefix=$1
    [ -z "$(ip netns list | awk '{print $1}' | grep "^$prefix-")" ] &&
        [ -z "$(ip -o link show | awk -F': ' '{print $2}' | grep "^$prefix-")" ] &&
        [ ! -e "$(lab__default_state "$prefix")" ]
}

# ---- a 3-node lab ----------------------------------------------------------------------------

neigh_before=$(sysctl -n net.ipv4.neigh.default.gc_thresh3 net.ipv6.neigh.default.gc_thresh3 | paste -sd' ')
t0=$(date +%s.%N)
lab_up 3 --prefix "$P" || bail "lab up 3 nodes"
ok "lab up 3 nodes ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"

check "info --json lists 3 nodes with addresses, ssh port and host keys" \
    jq_true --argjson i "$(info)" '$i | (.nodes | length == 3) and all(.nodes[];
        (.mgmt_ip | test("^198\\.18\\.0\\.1[1-3]$")) and (.storage_ip | test("^198\\.18\\.1\\.1[1-3]$"))
        and .ssh_port == 22 and .pid > 0 and .sshd_pid > 0 and .netns == .hostname
        and (.host_key_fingerprint | startswith("SHA256:"))) and (.key | type == "string")'

fp_ok=1
for n in n1 n2 n3; do
    want=$(ssh-keygen -l -E sha256 -f "$(node_field $n host_key_pub)" | awk '{print $2}')
    [ "$want" = "$(node_field $n host_key_fingerprint)" ] || fp_ok=0
done
check "info's host key fingerprints match the host key files" [ "$fp_ok" = 1 ]

build_known_hosts
hosts=()
ssh_ok=1
for n in n1 n2 n3; do
    h=$(nssh $n hostname) || { ssh_ok=0; note "ssh to $n failed"; continue; }
    [ "$h" = "$P-$n" ] || { ssh_ok=0; note "$n says hostname '$h'"; }
    hosts+=("$h")
done
check "ssh (strict host key checking, lab key) into every node; hostname is the node's own" \
    [ "$ssh_ok" = 1 ]
check "the three hostnames differ" [ "$(printf '%s\n' "${hosts[@]}" | sort -u | wc -l)" = 3 ]
check "the root namespace's hostname is untouched" [ "$(hostname)" != "$P-n1" ]

: >"$TMP/empty_known_hosts"
check_not "ssh with an empty known_hosts is refused (host key checking is live)" \
    tssh "$TMP/empty_known_hosts" "$(info | jq -r .key)" 198.18.0.11 true 2>/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$TMP/other_key"
check_not "ssh with a key the node does not authorise is refused" \
    tssh "$TMP/known_hosts" "$TMP/other_key" 198.18.0.11 true 2>/dev/null

# ---- private directories and identity --------------------------------------------------------

token=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
state=$(info | jq -r .state_dir)
declare -A mapped=([/var/lib/hcctl]=var-lib-hcctl [/etc/hcctl]=etc-hcctl [/opt]=opt [/run/hcctl]=run-hcctl)
for dir in /var/lib/hcctl /etc/hcctl /opt /run/hcctl; do
    nssh n1 "echo $token >$dir/t10-probe && cat $dir/t10-probe" >"$TMP/readback" 2>&1
    check "$dir: a file written in n1 (over ssh) reads back in n1" [ "$(cat "$TMP/readback")" = "$token" ]
    check_not "$dir: that file is not visible in n2" lab_exec n2 test -e "$dir/t10-probe"
    check_not "$dir: nor in the root namespace" test -e "$dir/t10-probe"
    check "$dir: it lives in the lab state dir (n1/${mapped[$dir]})" \
        grep -qx "$token" "$state/n1/${mapped[$dir]}/t10-probe"
done
nssh n1 "echo x >/etc/t10-etc-probe" 2>/dev/null
check_not "a file a node writes directly in /etc does not reach the host's /etc" test -e /etc/t10-etc-probe
check "/proc/sys/kernel/hostname in n2 is n2's" \
    [ "$(lab_exec n2 cat /proc/sys/kernel/hostname)" = "$P-n2" ]
check "/sys/class/net in n1 shows only n1's links (eth0 eth1 lo)" \
    [ "$(lab_exec n1 ls /sys/class/net | tr '\n' ' ')" = "eth0 eth1 lo " ]
check "/proc/net/dev in n1 shows n1's links" \
    [ "$(lab_exec n1 awk -F: 'NR>2 {gsub(/ /, "", $1); print $1}' /proc/net/dev | sort | tr '\n' ' ')" = "eth0 eth1 lo " ]
check "lab exec runs in the node's netns (eth1 has 198.18.1.11)" \
    lab_exec n1 sh -c 'ip -4 -o addr show dev eth1 | grep -q " 198.18.1.11/24 "'

# ---- MTUs ------------------------------------------------------------------------------------

check "storage: DF ping 8972 (9000-byte packets) n1 -> n2 passes" ping_df n1 198.18.1.12 8972
check "mgmt: DF ping 1472 (1500-byte packets) n1 -> n2 passes" ping_df n1 198.18.0.12 1472
check_not "mgmt: DF ping 1473 n1 -> n2 fails" ping_df n1 198.18.0.12 1473
check "root namespace reaches every node on mgmt" \
    sh -c 'for i in 11 12 13; do ping -n -q -c1 -W2 198.18.0.$i >/dev/null || exit 1; done'
check "root namespace reaches n3 on storage with DF 8972" ping_df host 198.18.1.13 8972
check "no default route in a node" [ -z "$(lab_exec n1 ip route show default)" ]

lab_set_port_mtu n2 storage 1500
check "set-port-mtu n2 storage 1500 sets the switch port" \
    [ "$(ip -n "$P-sw" -o link show n2-stor | grep -o 'mtu [0-9]*')" = "mtu 1500" ]
check_not "after it, DF ping 8972 n1 -> n2 fails (silent L2 drop)" ping_df n1 198.18.1.12 8972
check "after it, DF ping 1472 n1 -> n2 passes" ping_df n1 198.18.1.12 1472
if ping_df n1 198.18.1.12 1476; then q=passes; else q=fails; fi
note "quirk: a 1504-byte packet (ping -s 1476) through the 1500 port $q"
check_not "after it, DF ping 1477 (1505 bytes) n1 -> n2 fails" ping_df n1 198.18.1.12 1477
lab_set_port_mtu n2 storage 9000
check "set-port-mtu back to 9000: 8972 passes again" ping_df n1 198.18.1.12 8972

lab_set_node_mtu n2 storage 1500
check "set-node-mtu n2 storage 1500 sets n2's eth1" [ "$(lab_exec n2 cat /sys/class/net/eth1/mtu)" = 1500 ]
check_not "after it, DF ping 8972 n1 -> n2 fails" ping_df n1 198.18.1.12 8972
lab_set_node_mtu n2 storage 9000

lab_route_node n3 --mtu 1500
out=$(lab_exec n1 ping -n -c 1 -W 2 -M "do" -s 8972 198.18.1.13 2>&1)
check "route-node n3: a 9000-byte DF packet n1 -> n3 draws 'frag needed, mtu 1500'" \
    grep -q "Frag needed and DF set (mtu = 1500)" <<<"$out"
out=$(lab_exec n3 ping -n -c 1 -W 2 -M "do" -s 8972 198.18.1.12 2>&1)
check "route-node n3: and n3 -> n2 too (the hop is routed both ways)" \
    grep -q "Frag needed and DF set (mtu = 1500)" <<<"$out"
check "route-node n3: 1472 passes n1 -> n3 through the routers" ping_df n1 198.18.1.13 1472
check "route-node n3: n3 keeps its storage address" \
    [ "$(node_field n3 storage_ip)/$(node_field n3 routed_hop_mtu)" = "198.18.1.13/1500" ]
lab_unroute_node n3
check "unroute-node n3: 8972 passes n1 -> n3 again" ping_df n1 198.18.1.13 8972

old_fp=$(node_field n1 host_key_fingerprint)
cp "$TMP/known_hosts" "$TMP/known_hosts.old"
lab_rekey n1
check "rekey n1: a new host key" [ "$(node_field n1 host_key_fingerprint)" != "$old_fp" ]
check_not "rekey n1: the old known_hosts is refused" \
    tssh "$TMP/known_hosts.old" "$(info | jq -r .key)" 198.18.0.11 true 2>/dev/null
build_known_hosts
check "rekey n1: a known_hosts rebuilt from info works" nssh n1 true

holders=$(info | jq -r '.nodes[] | .pid, .sshd_pid')
lab_down
check "down leaves no $P-* namespaces, root links or state dir" lab_gone "$P"
check "down puts the neighbour thresholds back ($neigh_before)" \
    [ "$(sysctl -n net.ipv4.neigh.default.gc_thresh3 net.ipv6.neigh.default.gc_thresh3 | paste -sd' ')" = "$neigh_before" ]
alive=0
for p in $holders; do lab__alive "$p" && alive=1; done
check "down leaves none of the lab's processes" [ "$alive" = 0 ]
check "down again (nothing left) succeeds" lab_down

# ---- shared network --------------------------------------------------------------------------

if lab_up 2 --shared --prefix "$P"; then
    ok "lab up 2 --shared"
    build_known_hosts
    ssh_ok=1
    for n in n1 n2; do [ "$(nssh $n hostname)" = "$P-$n" ] || ssh_ok=0; done
    check "shared: ssh into both nodes works" [ "$ssh_ok" = 1 ]
    check "shared: a node has only eth0 (and lo), at MTU 9000" \
        [ "$(lab_exec n1 ls /sys/class/net | tr '\n' ' ')/$(lab_exec n1 cat /sys/class/net/eth0/mtu)" = "eth0 lo /9000" ]
    check "shared: $P-host has MTU 9000 and there is no $P-hstor" \
        sh -c "[ \"\$(cat /sys/class/net/$P-host/mtu)\" = 9000 ] && [ ! -e /sys/class/net/$P-hstor ]"
    check "shared: DF ping 8972 n1 -> n2 passes" ping_df n1 198.18.0.12 8972
    lab_down
    check "shared: down leaves nothing" lab_gone "$P"
else
    not_ok "lab up 2 --shared"
fi

# ---- teardown on failure ---------------------------------------------------------------------

(
    set -e
    lab_trap_teardown
    lab_up 1 --prefix "$P" >/dev/null 2>&1 || exit 3
    [ -e "/run/netns/$P-n1" ] || exit 4
    false
    exit 0
)
rc=$?
check "a failing step in a 'set -e' subshell with lab_trap_teardown fails it (rc $rc)" [ "$rc" = 1 ]
check "and the subshell's exit tore the lab down" lab_gone "$P"

HC_LAB_INJECT_FAIL=nodes lab_up 2 --prefix "$P" >/dev/null 2>&1
rc=$?
check "up failing half-way (injected, after the nodes) returns non-zero" [ "$rc" != 0 ]
check "and removes everything it had made" lab_gone "$P"

(
    lab_trap_teardown
    lab_up 1 --prefix "$P" >/dev/null 2>&1 || exit 3
    : >"$TMP/sub-up"
    sleep 60 >/dev/null 2>&1 &
    echo $! >"$TMP/sub-sleep.pid"
    wait $!
) &
sub=$!
for ((t = 0; t < 500; t++)); do [ -e "$TMP/sub-up" ] || ! kill -0 $sub 2>/dev/null && break; sleep 0.02; done
kill -TERM $sub
wait $sub
rc=$?
kill "$(cat "$TMP/sub-sleep.pid" 2>/dev/null)" 2>/dev/null
check "SIGTERM to a test holding a lab exits it (rc $rc)" [ "$rc" = 143 ]
check "and tears the lab down" lab_gone "$P"

# ---- 8 nodes, and leftovers from a crashed run -----------------------------------------------

t0=$(date +%s.%N)
lab_up 8 --prefix "$P" || bail "lab up 8 nodes"
neigh_raised() { [ "$(sysctl -n net.ipv4.neigh.default.gc_thresh3)" -ge "$1" ] &&
    [ "$(sysctl -n net.ipv6.neigh.default.gc_thresh3)" -ge "$1" ]; }
check "up 8 raises the root namespace's neighbour thresholds to at least 4*8*8+1024" \
    neigh_raised 1280
t8=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
ok "lab up 8 nodes ($t8 s)"
check "8 nodes came up within 30 s" awk -v t="$t8" 'BEGIN{exit !(t < 30)}'
# A crashed run: sshd of n1 killed, the state dir gone with every record of the PIDs.
kill -KILL "$(node_field n1 sshd_pid)"
rm -rf "$(info | jq -r .state_dir)"
lab_up 8 --prefix "$P" || bail "lab up 8 over a crashed lab"
ok "lab up 8 over the leftovers of a crashed one"
build_known_hosts
all_ok=1
for n in n1 n8; do [ "$(nssh $n hostname)" = "$P-$n" ] || all_ok=0; done
check "n1 and n8 of the relaunched lab answer over ssh" [ "$all_ok" = 1 ]
check "the relaunched lab has exactly 8 nodes + switch" \
    [ "$(ip netns list | awk '{print $1}' | grep -c "^$P-")" = 9 ]
lab_down
check "final down leaves nothing" lab_gone "$P"
check "final down puts the neighbour thresholds back, though the crashed lab's state dir is gone" \
    [ "$(sysctl -n net.ipv4.neigh.default.gc_thresh3 net.ipv6.neigh.default.gc_thresh3 | paste -sd' ')" = "$neigh_before" ]

check "the host's /etc listing is unchanged" [ "$(ls -A /etc | md5sum)" = "$etc_before" ]
[ "$had_etc_hcctl" = 1 ] || check_not "no /etc/hcctl appeared on the host" test -e /etc/hcctl

echo "1..$NUM"
[ "$FAILS" = 0 ] || { echo "# $FAILS of $NUM failed"; exit 1; }
exit 0
