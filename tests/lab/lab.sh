#!/usr/bin/env bash
# tests/lab/lab.sh — the network-namespace lab that hcctl's tests and demo run on.
#
# N "nodes" are network namespaces plugged into two bridges (management 1500, storage jumbo) that
# live in a "switch" namespace; the root namespace, where hcctld runs, has one veth on each
# network. Every node also has its own UTS namespace (hostname) and mount namespace (private
# /opt, /etc/hcctl, /var/lib/hcctl, /run/hcctl; /etc and /var/lib are copy-on-write overlays and
# /run is a private tmpfs, so nothing a node writes lands on the host) and runs a real OpenSSH
# sshd with a throwaway host key. See tests/lab/README.md for the picture and the quirks.
#
# Both a library (source it; public functions are lab_*, internals lab__*) and a CLI:
#   lab.sh up N [--shared] [--prefix P] [--mtu M] [--key FILE.pub] [--state DIR]
#   lab.sh down [--prefix P] [--state DIR]
#   lab.sh exec NODE CMD... | ssh NODE [CMD...] | info [--json]
#   lab.sh set-port-mtu NODE|host|all NET MTU | set-node-mtu NODE NET MTU
#   lab.sh route-node NODE [--mtu M] | unroute-node NODE | rekey NODE
# Global options --prefix/--state (or $HC_LAB_PREFIX/$HC_LAB_STATE) select the lab.
#
# Invariants: nothing is ever mounted in the root mount namespace; the only objects created in
# the root network namespace are the two veths P-host and P-hstor (and the routes their
# addresses imply); the host's own interfaces, default route and /etc are never touched.

LAB_PREFIX=${LAB_PREFIX:-${HC_LAB_PREFIX:-hcl}}
LAB_STATE=${LAB_STATE:-${HC_LAB_STATE:-}}
LAB_QUIET=${LAB_QUIET:-0}
LAB_MGMT_NET=198.18.0
LAB_STOR_NET=198.18.1
LAB_MGMT_MTU=1500
LAB_SSHD=${LAB_SSHD:-/usr/sbin/sshd}

# ---------------------------------------------------------------------------------------------
# small helpers

lab__say() { [ "$LAB_QUIET" = 1 ] || printf 'lab: %s\n' "$*" >&2; }
lab__err() { printf 'lab: error: %s\n' "$*" >&2; return 1; }

# lab__run CMD...: run a command; on failure report it (with its stderr) and return 1.
lab__run() {
    local out
    if ! out=$("$@" 2>&1); then
        lab__err "command failed: $* ${out:+: $out}"
        return 1
    fi
    [ -z "$out" ] || printf '%s\n' "$out" >&2
    return 0
}

lab__default_state() {
    if [ -n "${HC_TEST_TMP:-}" ]; then
        printf '%s/lab-%s\n' "$HC_TEST_TMP" "$1"
    else
        printf '/run/hcl-lab-%s\n' "$1"
    fi
}

# lab__select PREFIX STATE: make PREFIX (if non-empty) the current lab and resolve its state dir.
lab__select() {
    if [ -n "${1:-}" ] && [ "$1" != "$LAB_PREFIX" ]; then
        LAB_PREFIX=$1
        LAB_STATE=""
    fi
    [ -z "${2:-}" ] || LAB_STATE=$2
    [ -n "$LAB_STATE" ] || LAB_STATE=$(lab__default_state "$LAB_PREFIX")
    if ! [[ $LAB_PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]]; then
        lab__err "invalid prefix '$LAB_PREFIX': 1 to 8 of [a-z0-9], starting with a letter" \
            "(P-hstor must fit IFNAMSIZ)"
        return 2
    fi
}

lab__is_uint() { case ${1:-x} in *[!0-9]*) return 1 ;; *) return 0 ;; esac; }

lab__check_mtu() {
    if ! lab__is_uint "$1" || [ "${#1}" -gt 5 ] || [ "$1" -lt 68 ] || [ "$1" -gt 65535 ]; then
        lab__err "invalid mtu '$1': expected an integer from 68 to 65535"
        return 2
    fi
}

lab__need_root() {
    [ "$(id -u)" = 0 ] || { lab__err "the lab needs root (network and mount namespaces)"; return 1; }
}

lab__ns_exists() { [ -e "/run/netns/$1" ]; }

# lab__conf KEY: a value from the lab's lab.env (written by up).
lab__conf() {
    local k v
    [ -r "$LAB_STATE/lab.env" ] || return 1
    while IFS='=' read -r k v; do
        [ "$k" = "$1" ] && { printf '%s\n' "$v"; return 0; }
    done <"$LAB_STATE/lab.env"
    return 1
}

lab__require_up() {
    [ -r "$LAB_STATE/lab.env" ] || { lab__err "lab '$LAB_PREFIX' is not up (no $LAB_STATE/lab.env)"; return 1; }
}

lab__shared() { [ "$(lab__conf shared 2>/dev/null)" = 1 ]; }

# lab__node_index NODE: accept n3, 3 or P-n3; print 3.
lab__node_index() {
    local i=${1#"$LAB_PREFIX"-}
    i=${i#n}
    local n
    n=$(lab__conf nodes) || { lab__require_up; return 1; }
    if ! lab__is_uint "$i" || [ -z "$i" ] || [ "$i" -lt 1 ] || [ "$i" -gt "$n" ]; then
        lab__err "unknown node '$1': lab '$LAB_PREFIX' has n1..n$n"
        return 1
    fi
    printf '%d\n' "$((10#$i))"
}

# lab__node_pid I: the holder process whose namespaces are node I.
lab__node_pid() {
    local pid=""
    { read -r pid <"$LAB_STATE/n$1/holder.pid"; } 2>/dev/null || pid=""
    if [ -z "$pid" ] || ! lab__alive "$pid"; then
        lab__err "node 'n$1' of lab '$LAB_PREFIX' has no live holder process"
        return 1
    fi
    printf '%s\n' "$pid"
}

# lab__net I NET: print "netns-of-port port-name node-if subnet bridge" for node I on NET.
lab__net() {
    local net=$2 sub=$LAB_STOR_NET br=br-stor nif=eth1 port
    case $net in
        mgmt) sub=$LAB_MGMT_NET br=br-mgmt nif=eth0 ;;
        storage|stor) net=storage ;;
        *) lab__err "unknown network '$net': expected mgmt or storage"; return 2 ;;
    esac
    if lab__shared; then sub=$LAB_MGMT_NET br=br-mgmt nif=eth0 net=mgmt; fi
    [ "$net" = mgmt ] && port=n$1-mgmt || port=n$1-stor
    if [ "$1" = host ]; then
        [ "$net" = mgmt ] && port=host-mgmt || port=host-stor
    fi
    local ns=$LAB_PREFIX-sw
    [ "$1" != host ] && lab__ns_exists "$LAB_PREFIX-r$1" && [ "$net" = "$(lab__routed_net)" ] &&
        ns=$LAB_PREFIX-r$1
    printf '%s %s %s %s %s\n' "$ns" "$port" "$nif" "$sub" "$br"
}

lab__routed_net() { lab__shared && echo mgmt || echo storage; }

# lab__sysctl NS PATH=VALUE...: write /proc/sys entries inside a network namespace; entries that
# do not exist (e.g. bridge-nf without br_netfilter) are skipped.
lab__sysctl() {
    local ns=$1
    shift
    nsenter --net="/run/netns/$ns" -- sh -c '
        for kv; do f=/proc/sys/${kv%%=*}; [ -w "$f" ] && echo "${kv#*=}" >"$f"; done; true' \
        sh "$@"
}

# ---------------------------------------------------------------------------------------------
# up

lab__make_state() {
    if [ -e "$LAB_STATE" ] && [ ! -e "$LAB_STATE/.hcl-lab" ] && [ -n "$(ls -A "$LAB_STATE" 2>/dev/null)" ]; then
        lab__err "state dir '$LAB_STATE' exists and is not a lab's: refusing to use it"
        return 1
    fi
    case $LAB_STATE in
        /*) ;;
        *) lab__err "state dir '$LAB_STATE' must be an absolute path"; return 1 ;;
    esac
    case $LAB_STATE/ in
        /etc/*|/var/lib/*|/opt/*|/root/*)
            lab__err "state dir '$LAB_STATE' cannot live under /etc, /var/lib, /opt or /root" \
                "(nodes have their own)"
            return 1 ;;
    esac
    mkdir -p "$LAB_STATE" && chmod 0755 "$LAB_STATE" && : >"$LAB_STATE/.hcl-lab"
}

# lab__setup_key PUBFILE: authorise PUBFILE, or a fresh lab key pair when empty.
lab__setup_key() {
    local pub=$1 priv=""
    if [ -z "$pub" ]; then
        lab__run ssh-keygen -q -t ed25519 -N '' -C "hcl-lab-$LAB_PREFIX" -f "$LAB_STATE/lab_key" || return 1
        pub=$LAB_STATE/lab_key.pub priv=$LAB_STATE/lab_key
    else
        case $pub in *.pub) ;; *) [ -r "$pub.pub" ] && pub=$pub.pub ;; esac
        [ -r "$pub" ] || { lab__err "cannot read public key '$pub'"; return 1; }
        pub=$(cd "$(dirname "$pub")" && pwd)/$(basename "$pub")
        [ -r "${pub%.pub}" ] && priv=${pub%.pub}
    fi
    ssh-keygen -l -f "$pub" >/dev/null 2>&1 || { lab__err "'$pub' is not an ssh public key"; return 1; }
    printf 'key_pub=%s\nkey=%s\n' "$pub" "$priv" >>"$LAB_STATE/lab.env"
}

# lab__batch NS: run the `ip` commands on stdin in network namespace NS ("" for the root one);
# one process per namespace keeps `up` fast. ip stops at the first failing line.
lab__batch() {
    local out
    if [ -n "$1" ]; then
        out=$(ip -n "$1" -batch - 2>&1) && return 0
    else
        out=$(ip -batch - 2>&1) && return 0
    fi
    lab__err "ip -batch in namespace '${1:-root}' failed: $out"
}

# lab__bridge_cmds NAME MTU: an STP-less bridge with a user-set MTU, so that a port's MTU change
# does not drag the bridge's own MTU along (68 first: setting the current MTU is a no-op that
# would not mark it "set by user").
lab__bridge_cmds() {
    printf 'link add %s type bridge stp_state 0 forward_delay 0 nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0\n' "$1"
    printf 'link set %s mtu 68\nlink set %s mtu %s up\n' "$1" "$1" "$2"
}

# lab__port_cmds PORT PEER PEER_NS BRIDGE MTU: a veth from the switch onto a bridge.
lab__port_cmds() {
    printf 'link add %s mtu %s type veth peer name %s mtu %s netns %s\n' "$1" "$5" "$2" "$5" "$3"
    printf 'link set %s master %s up\n' "$1" "$4"
}

# lab__if_cmds IF ADDR: configure and raise one interface (inside its namespace).
lab__if_cmds() { printf 'addr add %s/24 dev %s\nlink set %s up\n' "$2" "$1" "$1"; }

# lab__up_net N STORAGE_MTU: namespaces, bridges, veths and addresses for the whole lab.
lab__up_net() {
    local n=$1 smtu=$2 mmtu=$LAB_MGMT_MTU sw=$LAB_PREFIX-sw p=$LAB_PREFIX i ns
    lab__shared && mmtu=$smtu
    {
        printf 'netns add %s\n' "$sw"
        for ((i = 1; i <= n; i++)); do printf 'netns add %s-n%d\n' "$p" "$i"; done
    } | lab__batch "" || return 1
    lab__sysctl "$sw" net/ipv6/conf/all/disable_ipv6=1 net/ipv6/conf/default/disable_ipv6=1 \
        net/bridge/bridge-nf-call-iptables=0 net/bridge/bridge-nf-call-ip6tables=0 \
        net/bridge/bridge-nf-call-arptables=0
    {
        printf 'link set lo up\n'
        lab__bridge_cmds br-mgmt "$mmtu"
        lab__shared || lab__bridge_cmds br-stor "$smtu"
        lab__port_cmds host-mgmt "$p-host" $$ br-mgmt "$mmtu"
        lab__shared || lab__port_cmds host-stor "$p-hstor" $$ br-stor "$smtu"
        for ((i = 1; i <= n; i++)); do
            lab__port_cmds "n$i-mgmt" eth0 "$p-n$i" br-mgmt "$mmtu"
            lab__shared || lab__port_cmds "n$i-stor" eth1 "$p-n$i" br-stor "$smtu"
        done
    } | lab__batch "$sw" || return 1
    {
        lab__if_cmds "$p-host" "$LAB_MGMT_NET.1"
        lab__shared || lab__if_cmds "$p-hstor" "$LAB_STOR_NET.1"
    } | lab__batch "" || return 1
    for ((i = 1; i <= n; i++)); do
        ns=$p-n$i
        {
            printf 'link set lo up\n'
            lab__if_cmds eth0 "$LAB_MGMT_NET.$((10 + i))"
            lab__shared || lab__if_cmds eth1 "$LAB_STOR_NET.$((10 + i))"
        } | lab__batch "$ns" || return 1
    done
}

# lab__spawn PIDFILE LOG CMD...: start CMD detached (stdin /dev/null, output to LOG, own session
# so a Ctrl-C aimed at the caller does not hit it) and record its PID.
lab__spawn() {
    local pidfile=$1 log=$2
    shift 2
    # set +m: with job control the child would lead its own process group and setsid would fork,
    # leaving $! pointing at a process that is gone
    (set +m; setsid "$@" </dev/null >>"$log" 2>&1 & echo $! >"$pidfile")
}

# lab__wait_exe PID PATH: wait until PID runs PATH (its namespaces are then in place).
lab__wait_exe() {
    local t
    for ((t = 0; t < 500; t++)); do
        [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ] && return 0
        lab__alive "$1" || return 1
        sleep 0.01
    done
    return 1
}

# Node setup, run as sh inside the node's fresh mount and UTS namespaces (and its netns) before
# the holder becomes `sleep infinity`. $1 node dir, $2 hostname, $3 state dir, $4 hosts file.
# /opt, /etc/hcctl, /var/lib/hcctl, /run/hcctl and /root (root's home: a real node has its own,
# and the host's dotfiles must not run in, nor slow down, every ssh session) are bind mounts of
# the node's directories in the state dir.
# /etc and /var/lib become overlays whose upper layers live on a node-private tmpfs (works on any
# host filesystem, vanishes with the node); /run becomes a private tmpfs, built aside and moved
# into place, holding sshd's privilege separation dir, /run/hcctl and, when the state dir is under
# /run, the state dir again (sshd reads its config and keys from there).
LAB__NODE_SETUP='
set -e
d=$1 name=$2 state=$3 hosts=$4
hostname "$name"
mount -n -t tmpfs -o mode=0755 lab-ovl "$d/ovl"
mkdir -p "$d/ovl/etc-upper" "$d/ovl/etc-work" "$d/ovl/vl-upper" "$d/ovl/vl-work"
mount -n -t overlay lab-etc -o "lowerdir=/etc,upperdir=$d/ovl/etc-upper,workdir=$d/ovl/etc-work" /etc
mount -n -t overlay lab-varlib -o "lowerdir=/var/lib,upperdir=$d/ovl/vl-upper,workdir=$d/ovl/vl-work" /var/lib
mkdir -p /etc/hcctl /var/lib/hcctl
mount -n --bind "$d/etc-hcctl" /etc/hcctl
mount -n --bind "$d/var-lib-hcctl" /var/lib/hcctl
mount -n --bind "$d/opt" /opt
mount -n --bind "$d/root" /root
# The fresh /sys of ip netns exec has no cgroup mounts: the tree of the host, as a real node has
# one of its own, so that the agent can bound its service (docs/bundles.md "Limits"). Best effort.
if [ -d /sys/fs/cgroup ] && mount -n -t tmpfs -o mode=0755 lab-cgroup /sys/fs/cgroup 2>/dev/null; then
    for c in cpu cpuacct memory; do
        mkdir -p "/sys/fs/cgroup/$c" && mount -n -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" 2>/dev/null ||
            rmdir "/sys/fs/cgroup/$c"
    done
fi
echo "$name" >/etc/hostname
cp "$hosts" /etc/hosts
mount -n -t tmpfs -o mode=0755,nosuid,nodev lab-run "$d/newrun"
mkdir -p "$d/newrun/sshd" "$d/newrun/hcctl" "$d/newrun/lock"
mount -n --bind "$d/run-hcctl" "$d/newrun/hcctl"
case $state in
/run/*) mkdir -p "$d/newrun/${state#/run/}"; mount -n --bind "$state" "$d/newrun/${state#/run/}" ;;
esac
mount -n --move "$d/newrun" /run
exec sleep infinity
'

# The holder: a process in node I's netns with fresh mount and UTS namespaces, set up as above,
# that then sleeps; everything "in the node" joins its namespaces (nsenter -t PID -m -u -n).
# `ip netns exec` remounts /sys for the netns (/sys/class/net shows the node's links); nothing
# relies on /etc/netns.
lab__up_holder() {
    local i=$1 d=$LAB_STATE/n$1 sleep_bin pid
    mkdir -p "$d"/{opt,etc-hcctl,var-lib-hcctl,run-hcctl,root,ovl,newrun} && chmod 0700 "$d/root" ||
        return 1
    sleep_bin=$(readlink -f "$(command -v sleep)")
    lab__spawn "$d/holder.pid" "$d/holder.log" \
        ip netns exec "$LAB_PREFIX-n$i" unshare --mount --uts --propagation private -- \
        sh -c "$LAB__NODE_SETUP" sh "$d" "$LAB_PREFIX-n$i" "$LAB_STATE" "$LAB_STATE/hosts"
    read -r pid <"$d/holder.pid"
    lab__wait_exe "$pid" "$sleep_bin" ||
        { lab__err "node n$i did not start: $(cat "$d/holder.log" 2>/dev/null)"; return 1; }
}

lab__write_sshd_config() {
    local i=$1 d=$LAB_STATE/n$1
    cat >"$d/sshd_config" <<EOF
# sshd for lab node n$i (generated by tests/lab/lab.sh; -f makes it ignore /etc/ssh)
Port 22
ListenAddress $LAB_MGMT_NET.$((10 + i))
AddressFamily inet
HostKey $d/ssh_host_ed25519_key
PidFile $d/sshd.pid
AuthorizedKeysFile $d/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxStartups 64:30:128
MaxSessions 32
LoginGraceTime 30
LogLevel VERBOSE
Subsystem sftp internal-sftp
EOF
}

# lab__host_key I: a fresh host key for node I plus its fingerprint.
lab__host_key() {
    local d=$LAB_STATE/n$1
    rm -f "$d/ssh_host_ed25519_key" "$d/ssh_host_ed25519_key.pub"
    local fp
    lab__run ssh-keygen -q -t ed25519 -N '' -C "root@$LAB_PREFIX-n$1" -f "$d/ssh_host_ed25519_key" &&
        fp=$(ssh-keygen -l -E sha256 -f "$d/ssh_host_ed25519_key.pub") || return 1
    fp=${fp#* }
    printf '%s\n' "${fp%% *}" >"$d/host_key.fp"
}

lab__start_sshd() {
    local i=$1 d=$LAB_STATE/n$1 pid
    pid=$(lab__node_pid "$i") || return 1
    rm -f "$d/sshd.pid"
    lab__spawn "$d/sshd.launch.pid" "$d/sshd.log" \
        nsenter -t "$pid" -m -u -n -- "$LAB_SSHD" -f "$d/sshd_config" -D -e
}

# lab__wait_sshd I...: sshd writes its PidFile after its listen socket is bound.
lab__wait_sshd() {
    local i t d pid
    for i; do
        d=$LAB_STATE/n$i
        for ((t = 0; t < 1000; t++)); do
            pid=""
            { read -r pid <"$d/sshd.pid"; } 2>/dev/null
            [ -n "$pid" ] && lab__alive "$pid" && break
            pid=""
            { read -r pid <"$d/sshd.launch.pid"; } 2>/dev/null
            if [ -n "$pid" ] && ! lab__alive "$pid"; then
                lab__err "sshd of node n$i exited: $(tail -n 5 "$d/sshd.log" 2>/dev/null)"
                return 1
            fi
            sleep 0.01
        done
        [ "$t" -lt 1000 ] || { lab__err "sshd of node n$i did not start in 10 s"; return 1; }
    done
}

# lab__up_node I: everything of node I above the network (runs in parallel for all nodes).
lab__up_node() {
    local i=$1 d=$LAB_STATE/n$1
    mkdir -p "$d" && lab__up_holder "$i" && lab__host_key "$i" || return 1
    cp "$(lab__conf key_pub)" "$d/authorized_keys" && lab__write_sshd_config "$i" &&
        lab__start_sshd "$i"
}

lab__write_hosts() {
    local n=$1 i
    {
        printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
        printf '%s.1\t%s-host\n' "$LAB_MGMT_NET" "$LAB_PREFIX"
        for ((i = 1; i <= n; i++)); do
            printf '%s.%d\t%s-n%d\n' "$LAB_MGMT_NET" $((10 + i)) "$LAB_PREFIX" "$i"
        done
    } >"$LAB_STATE/hosts"
}

lab__write_known_hosts() {
    local n i
    n=$(lab__conf nodes) || return 1
    for ((i = 1; i <= n; i++)); do
        printf '%s.%d %s\n' "$LAB_MGMT_NET" $((10 + i)) \
            "$(cut -d' ' -f1-2 "$LAB_STATE/n$i/ssh_host_ed25519_key.pub")"
    done >"$LAB_STATE/known_hosts"
}

# lab__check_addr_free: the address plan is fixed, so two labs cannot be up at once.
lab__check_addr_free() {
    local line
    line=$(ip -4 -o addr show to 198.18.0.0/15 2>/dev/null) || line=""
    [ -z "$line" ] && return 0
    lab__err "198.18.0.0/15 is already in use in the root namespace ($(echo "$line" | awk '{print $2, $4}' | head -n 1));" \
        "another lab is up? run: lab.sh down --prefix $(echo "$line" | awk '{print $2}' | head -n 1 | sed 's/-h.*//')"
}

lab__inject() { [ "${HC_LAB_INJECT_FAIL:-}" != "$1" ] || lab__err "injected failure at '$1'"; }

# The neighbour (ARP/NDP) table is the kernel's, shared by every namespace of the lab and sized by
# the root namespace's net.ipv{4,6}.neigh.default.gc_thresh{1,2,3} (default 128/512/1024). N
# nodes need about N*(N-1) storage neighbours plus the management ones: past ~30 nodes the
# default gc_thresh3 overflows ("neighbour: arp_cache: neighbor table overflow!") and peers stop
# resolving. lab__neigh_raise N raises them for the lab's life (never lowers them), saving the
# old values in LAB_NEIGH_SAVED — outside the state dir, so that a crashed lab whose state dir
# is gone still has them put back by the next lab's down; only one lab is up at a time (the
# address plan is fixed) — and lab__neigh_restore (lab down) puts them back.
LAB_NEIGH_SAVED=${LAB_NEIGH_SAVED:-/run/hcctl-lab-neigh.saved}
LAB__NEIGH_KEYS="net.ipv4.neigh.default.gc_thresh1 net.ipv4.neigh.default.gc_thresh2 net.ipv4.neigh.default.gc_thresh3 net.ipv6.neigh.default.gc_thresh1 net.ipv6.neigh.default.gc_thresh2 net.ipv6.neigh.default.gc_thresh3"
lab__neigh_raise() {
    local n=$1 need k cur want
    need=$((4 * n * n + 1024))
    [ -e "$LAB_NEIGH_SAVED" ] || for k in $LAB__NEIGH_KEYS; do
        printf '%s=%s\n' "$k" "$(sysctl -n "$k")"
    done >"$LAB_NEIGH_SAVED"
    for k in $LAB__NEIGH_KEYS; do
        cur=$(sysctl -n "$k")
        case $k in
            *thresh1) want=$((need / 8)) ;; *thresh2) want=$((need / 2)) ;; *) want=$need ;;
        esac
        [ "$cur" -ge "$want" ] || sysctl -qw "$k=$want" || return 1
    done
}
lab__neigh_restore() {
    local line
    [ -r "$LAB_NEIGH_SAVED" ] || return 0
    while IFS= read -r line; do
        [ -n "$line" ] && sysctl -qw "$line"
    done <"$LAB_NEIGH_SAVED"
    rm -f "$LAB_NEIGH_SAVED"
}

lab__up_steps() {
    local n=$1 shared=$2 smtu=$3 key=$4
    lab__make_state || return 1
    printf 'prefix=%s\nnodes=%s\nshared=%s\nmtu=%s\nstarted=%s\n' \
        "$LAB_PREFIX" "$n" "$shared" "$smtu" "$(date +%s)" >"$LAB_STATE/lab.env"
    lab__neigh_raise "$n" && lab__setup_key "$key" && lab__write_hosts "$n" || return 1
    lab__up_net "$n" "$smtu" && lab__inject net || return 1
    lab__up_nodes "$n" && lab__inject nodes || return 1
    lab__wait_sshd $(seq 1 "$n") && lab__write_known_hosts
}

# lab__up_nodes N: bring up every node's holder, files and sshd in parallel; fail if any failed.
lab__up_nodes() {
    local i pids=() rc=0
    for ((i = 1; i <= $1; i++)); do
        lab__up_node "$i" &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=1; done
    return $rc
}

lab__usage_up() { lab__err "usage: lab.sh up N [--shared] [--prefix P] [--mtu M] [--key FILE.pub] [--state DIR]"; return 2; }

# lab_up N [--shared] [--prefix P] [--mtu M] [--key FILE.pub] [--state DIR]
# Brings up a fresh lab (tearing down any leftover with the same prefix first). On failure
# everything it made is removed again and it returns non-zero.
lab_up() {
    local n="" shared=0 prefix="" mtu=9000 key="" state="" t0 rc
    while [ $# -gt 0 ]; do
        case $1 in
            --shared) shared=1 ;;
            --prefix|--mtu|--key|--state)
                [ $# -ge 2 ] || { lab__usage_up; return 2; }
                case $1 in
                    --prefix) prefix=$2 ;; --mtu) mtu=$2 ;; --key) key=$2 ;; --state) state=$2 ;;
                esac
                shift ;;
            --prefix=*) prefix=${1#*=} ;;
            --mtu=*) mtu=${1#*=} ;;
            --key=*) key=${1#*=} ;;
            --state=*) state=${1#*=} ;;
            -*) lab__err "unknown option '$1'"; lab__usage_up; return 2 ;;
            *) [ -z "$n" ] || { lab__usage_up; return 2; }; n=$1 ;;
        esac
        shift
    done
    if ! lab__is_uint "$n" || [ -z "$n" ] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
        lab__err "invalid node count '$n': expected 1 to 200"
        return 2
    fi
    lab__check_mtu "$mtu" || return 2
    lab__select "$prefix" "$state" || return 2
    lab__need_root || return 1
    t0=$(date +%s.%N)
    LAB_QUIET=1 lab_down >/dev/null 2>&1
    lab__check_addr_free || return 1
    if lab__up_steps "$n" "$shared" "$mtu" "$key"; then
        lab__say "lab '$LAB_PREFIX' up: $n node(s)$([ "$shared" = 1 ] && echo ', shared network') in" \
            "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s, state $LAB_STATE"
        return 0
    fi
    rc=1
    lab__err "bringing up lab '$LAB_PREFIX' failed; tearing down what was made"
    LAB_QUIET=1 lab_down >/dev/null
    return $rc
}

# ---------------------------------------------------------------------------------------------
# down

lab__namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$LAB_PREFIX-(sw|rt|n[0-9]+|r[0-9]+)\$" || true
}

# lab__recorded_pids: PIDs the state dir recorded, if they still run what we started there.
lab__recorded_pids() {
    local f pid args
    for f in "$LAB_STATE"/n*/holder.pid "$LAB_STATE"/n*/sshd.pid "$LAB_STATE"/n*/sshd.launch.pid; do
        { read -r pid <"$f"; } 2>/dev/null || continue
        [ -n "$pid" ] && lab__is_uint "$pid" || continue
        { mapfile -d '' -t args <"/proc/$pid/cmdline"; } 2>/dev/null || continue
        # a holder is a "sleep infinity" in a mount namespace other than ours
        case " ${args[*]:-} " in
            " sleep infinity ") [ "/proc/$pid/ns/mnt" -ef /proc/self/ns/mnt ] || printf '%s\n' "$pid" ;;
            *" -f $LAB_STATE/"*) printf '%s\n' "$pid" ;;
        esac
    done
}

# lab__alive PID: running and not a zombie (our detached processes are reaped by init, which
# may take its time, and kill -0 succeeds on a zombie).
lab__alive() {
    local st
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${st##*) }
    [ "${st:0:1}" != Z ]
}

# lab__kill_wait SIG PID...: signal the PIDs and wait up to 2 s for all of them to be gone.
# lab__find_state PID...: a lab brought up with --state and torn down without it: learn the state
# dir from the command line of one of its sshds (-f STATE/nI/sshd_config; sshd rewrites its
# argv into one string, hence the word split).
lab__find_state() {
    local pid args a dir
    for pid; do
        { mapfile -d '' -t args <"/proc/$pid/cmdline"; } 2>/dev/null || continue
        # shellcheck disable=SC2048 # splitting the one rewritten string into words is the point
        for a in ${args[*]:-}; do
            case $a in
                /*/n[0-9]*/sshd_config)
                    dir=${a%/n[0-9]*/sshd_config}
                    [ -e "$dir/.hcl-lab" ] && { LAB_STATE=$dir; return 0; } ;;
            esac
        done
    done
    return 0
}

lab__kill_wait() {
    local sig=$1 t pid alive
    shift
    [ $# -gt 0 ] || return 0
    kill "-$sig" "$@" 2>/dev/null || true
    for ((t = 0; t < 100; t++)); do
        alive=0
        for pid; do lab__alive "$pid" && { alive=1; break; }; done
        [ "$alive" = 0 ] && return 0
        sleep 0.02
    done
    return 1
}

lab__rm_state() {
    [ -n "$LAB_STATE" ] && [ "$LAB_STATE" != / ] && [ -d "$LAB_STATE" ] || return 0
    [ -e "$LAB_STATE/.hcl-lab" ] || { lab__say "leaving '$LAB_STATE' (not a lab state dir)"; return 0; }
    rm -rf -- "$LAB_STATE"
}

lab__del_host_link() {
    local info
    info=$(ip -d link show "$1" 2>/dev/null) || return 0
    case $info in
        *" veth "*|*"veth"*) ip link del "$1" 2>/dev/null || true ;;
        *) lab__say "not deleting '$1': it is not a veth" ;;
    esac
}

# lab_down [--prefix P] [--state DIR]: remove everything the lab made (idempotent; copes with a
# half-made or crashed lab): processes in its namespaces, the namespaces, the root veths, state.
lab_down() {
    local prefix="" state="" ns pids=() p
    while [ $# -gt 0 ]; do
        case $1 in
            --prefix) prefix=${2:-}; shift ;; --prefix=*) prefix=${1#*=} ;;
            --state) state=${2:-}; shift ;; --state=*) state=${1#*=} ;;
            -q) LAB_QUIET=1 ;;
            *) lab__err "usage: lab.sh down [--prefix P] [--state DIR]"; return 2 ;;
        esac
        shift
    done
    lab__select "$prefix" "$state" || return 2
    lab__need_root || return 1
    local nss
    nss=$(lab__namespaces)
    for ns in $nss; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
    done
    [ -e "$LAB_STATE/lab.env" ] || lab__find_state "${pids[@]}"
    for p in $(lab__recorded_pids); do pids+=("$p"); done
    if [ "${#pids[@]}" -gt 0 ]; then
        lab__kill_wait TERM "${pids[@]}" || lab__kill_wait KILL "${pids[@]}" ||
            lab__say "some lab processes did not exit: ${pids[*]}"
    fi
    for ns in $nss; do ip netns del "$ns" 2>/dev/null || true; done
    lab__del_host_link "$LAB_PREFIX-host"
    lab__del_host_link "$LAB_PREFIX-hstor"
    lab__neigh_restore
    lab__rm_state
    [ -z "$nss" ] || lab__say "lab '$LAB_PREFIX' down"
    return 0
}

# lab_trap_teardown [CMD]: tear the current lab down (then eval CMD, e.g. removing a temp dir)
# when the calling shell exits — normally, on failure, or on INT/TERM (turned into exit so that
# the EXIT trap runs; bash runs it once the foreground command ends, so long waits in tests are
# best written as `cmd & wait $!`). The shell's exit status is kept. Subshells do not inherit
# traps: call it again inside one that brings up its own lab.
lab_trap_teardown() {
    LAB__TRAP_EXTRA=${1:-}
    trap 'LAB_QUIET=1 lab_down >/dev/null 2>&1; eval "${LAB__TRAP_EXTRA:-}"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# ---------------------------------------------------------------------------------------------
# using the lab

# lab_exec NODE CMD...: run CMD inside the node (its netns, mount ns and UTS ns), in the caller's
# working directory when the node can see it.
lab_exec() {
    local i pid
    [ $# -ge 2 ] || { lab__err "usage: lab.sh exec NODE CMD..."; return 2; }
    lab__select "" "" || return 2
    i=$(lab__node_index "$1") && pid=$(lab__node_pid "$i") || return 1
    shift
    nsenter -t "$pid" -m -u -n -- /bin/sh -c 'cd -- "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@"
}

# lab_ssh NODE [CMD...]: ssh as root to the node's management address with the lab key and the
# lab's known_hosts (strict checking).
lab_ssh() {
    local i key
    [ $# -ge 1 ] || { lab__err "usage: lab.sh ssh NODE [CMD...]"; return 2; }
    lab__select "" "" || return 2
    i=$(lab__node_index "$1") || return 1
    shift
    key=$(lab__conf key)
    [ -n "$key" ] || { lab__err "the lab was given --key: no private key known; use ssh -i yourself"; return 1; }
    ssh -i "$key" -o BatchMode=yes -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes \
        -o UserKnownHostsFile="$LAB_STATE/known_hosts" -o GlobalKnownHostsFile=/dev/null \
        -o ConnectTimeout=5 -o LogLevel=ERROR "root@$LAB_MGMT_NET.$((10 + i))" "$@"
}

lab__set_mtu() {
    lab__run ip -n "$1" link set "$2" mtu "$3"
}

# lab_set_port_mtu NODE|host|all NET MTU: the MTU of the switch-side veth toward NODE (for a
# routed node's storage network: the router port toward it). "all" means every node's port.
lab_set_port_mtu() {
    local i nodes=() n f ns port
    [ $# -eq 3 ] || { lab__err "usage: lab.sh set-port-mtu NODE|host|all mgmt|storage MTU"; return 2; }
    lab__select "" "" && lab__check_mtu "$3" || return 2
    lab__require_up || return 1
    case $1 in
        host) nodes=(host) ;;
        all) n=$(lab__conf nodes); for ((i = 1; i <= n; i++)); do nodes+=("$i"); done ;;
        *) i=$(lab__node_index "$1") || return 1; nodes=("$i") ;;
    esac
    for i in "${nodes[@]}"; do
        f=$(lab__net "$i" "$2") || return 2
        read -r ns port _ <<<"$f"
        lab__set_mtu "$ns" "$port" "$3" || return 1
    done
}

# lab_set_node_mtu NODE NET MTU: the MTU of the node's own interface on NET.
lab_set_node_mtu() {
    local i f ns port nif
    [ $# -eq 3 ] || { lab__err "usage: lab.sh set-node-mtu NODE mgmt|storage MTU"; return 2; }
    lab__select "" "" && lab__check_mtu "$3" || return 2
    i=$(lab__node_index "$1") || return 1
    f=$(lab__net "$i" "$2") || return 2
    read -r ns port nif _ <<<"$f"
    lab__set_mtu "$LAB_PREFIX-n$i" "$nif" "$3"
}

# lab_rekey NODE: give the node a new host key and restart its sshd (known_hosts follows).
lab_rekey() {
    local i pid
    [ $# -eq 1 ] || { lab__err "usage: lab.sh rekey NODE"; return 2; }
    lab__select "" "" || return 2
    i=$(lab__node_index "$1") || return 1
    pid=$(cat "$LAB_STATE/n$i/sshd.pid" 2>/dev/null) || pid=""
    [ -z "$pid" ] || lab__kill_wait TERM "$pid" || lab__kill_wait KILL "$pid"
    lab__host_key "$i" && lab__start_sshd "$i" && lab__wait_sshd "$i" && lab__write_known_hosts
}


# ---------------------------------------------------------------------------------------------
# a routed hop (for frag_needed scenarios)
#
# route-node puts a node's storage link (the only network in shared mode) behind two routers
# joined by a link of the given MTU: bridge -- P-rt (router 1) ==hop== P-rI (router 2) -- node.
# The node keeps its address: both routers answer ARP for the other side (proxy ARP), so nothing
# changes in any node's configuration, only the path. Both routers send ICMP frag-needed naming
# the hop MTU (ICMP rate limiting is off in them, so probes are answered every time).

lab__router_sysctls() {
    lab__sysctl "$1" net/ipv4/ip_forward=1 net/ipv4/icmp_ratelimit=0 \
        net/ipv4/conf/all/rp_filter=0 net/ipv4/conf/default/rp_filter=0 \
        net/ipv6/conf/all/disable_ipv6=1 net/ipv6/conf/default/disable_ipv6=1
}

# lab__up_router1 SUB BRIDGE MTU: the router on the bridge, SUB.254.
lab__up_router1() {
    local rt=$LAB_PREFIX-rt sw=$LAB_PREFIX-sw
    lab__ns_exists "$rt" && return 0
    lab__run ip netns add "$rt" && lab__run ip -n "$rt" link set lo up && lab__router_sysctls "$rt" &&
        lab__run ip -n "$sw" link add rt-up mtu "$3" type veth peer name uplink mtu "$3" netns "$rt" &&
        lab__run ip -n "$sw" link set rt-up master "$2" up &&
        lab__run ip -n "$rt" addr add "$1.254/24" dev uplink &&
        lab__run ip -n "$rt" link set uplink up &&
        lab__sysctl "$rt" net/ipv4/conf/uplink/proxy_arp=1
}

lab__flush_neigh() {
    local n i nif
    n=$(lab__conf nodes)
    nif=eth1
    lab__shared && nif=eth0
    for ((i = 1; i <= n; i++)); do
        ip -n "$LAB_PREFIX-n$i" neigh flush dev "$nif" 2>/dev/null || true
        ip -n "$LAB_PREFIX-n$i" route flush cache 2>/dev/null || true
    done
    if lab__shared; then
        ip neigh flush dev "$LAB_PREFIX-host" 2>/dev/null || true
    else
        ip neigh flush dev "$LAB_PREFIX-hstor" 2>/dev/null || true
    fi
}

# lab_route_node NODE [--mtu M]: route NODE's storage network through a hop of MTU M (default
# 1500); on an already routed node, just change the hop's MTU.
lab_route_node() {
    local node="" mtu=1500 i f ns port nif sub br r2 rt smtu
    while [ $# -gt 0 ]; do
        case $1 in
            --mtu) mtu=${2:-}; shift ;; --mtu=*) mtu=${1#*=} ;;
            -*) lab__err "usage: lab.sh route-node NODE [--mtu M]"; return 2 ;;
            *) node=$1 ;;
        esac
        shift
    done
    [ -n "$node" ] || { lab__err "usage: lab.sh route-node NODE [--mtu M]"; return 2; }
    lab__select "" "" && lab__check_mtu "$mtu" || return 2
    i=$(lab__node_index "$node") || return 1
    r2=$LAB_PREFIX-r$i rt=$LAB_PREFIX-rt
    if lab__ns_exists "$r2"; then
        lab__set_mtu "$rt" "r$i-core" "$mtu" && lab__set_mtu "$r2" core "$mtu" || return 1
        printf '%s\n' "$mtu" >"$LAB_STATE/n$i/routed"
        return 0
    fi
    f=$(lab__net "$i" "$(lab__routed_net)") || return 1
    read -r ns port nif sub br <<<"$f"
    smtu=$(lab__conf mtu)
    lab__up_router1 "$sub" "$br" "$smtu" || return 1
    lab__run ip netns add "$r2" && lab__run ip -n "$r2" link set lo up && lab__router_sysctls "$r2" &&
        lab__run ip -n "$rt" link add "r$i-core" mtu "$mtu" type veth peer name core mtu "$mtu" netns "$r2" &&
        lab__run ip -n "$rt" addr add "198.19.$i.1/30" dev "r$i-core" &&
        lab__run ip -n "$rt" link set "r$i-core" up &&
        lab__run ip -n "$r2" addr add "198.19.$i.2/30" dev core &&
        lab__run ip -n "$r2" link set core up &&
        lab__run ip -n "$ns" link set "$port" nomaster &&
        lab__run ip -n "$ns" link set "$port" netns "$r2" &&
        lab__run ip -n "$r2" addr add "$sub.254/32" dev "$port" &&
        lab__run ip -n "$r2" link set "$port" up &&
        lab__run ip -n "$r2" route add "$sub.$((10 + i))/32" dev "$port" &&
        lab__run ip -n "$r2" route add "$sub.0/24" via "198.19.$i.1" dev core &&
        lab__run ip -n "$rt" route add "$sub.$((10 + i))/32" via "198.19.$i.2" dev "r$i-core" &&
        lab__sysctl "$r2" "net/ipv4/conf/$port/proxy_arp=1" || return 1
    printf '%s\n' "$mtu" >"$LAB_STATE/n$i/routed"
    lab__flush_neigh
}

# lab_unroute_node NODE: plug the node's port back into the bridge and drop its router.
lab_unroute_node() {
    local i r2 rt port br f
    [ $# -eq 1 ] || { lab__err "usage: lab.sh unroute-node NODE"; return 2; }
    lab__select "" "" || return 2
    i=$(lab__node_index "$1") || return 1
    r2=$LAB_PREFIX-r$i rt=$LAB_PREFIX-rt
    lab__ns_exists "$r2" || return 0
    f=$(lab__net "$i" "$(lab__routed_net)") || return 1
    read -r _ port _ _ br <<<"$f"
    lab__run ip -n "$r2" link set "$port" netns "$LAB_PREFIX-sw" &&
        lab__run ip -n "$LAB_PREFIX-sw" link set "$port" master "$br" up || return 1
    ip -n "$rt" link del "r$i-core" 2>/dev/null || true
    ip netns del "$r2" || return 1
    rm -f "$LAB_STATE/n$i/routed"
    if [ -z "$(ip netns list | awk '{print $1}' | grep -E "^$LAB_PREFIX-r[0-9]+\$")" ]; then
        ip -n "$LAB_PREFIX-sw" link del rt-up 2>/dev/null || true
        ip netns del "$rt" 2>/dev/null || true
    fi
    lab__flush_neigh
}

# ---------------------------------------------------------------------------------------------
# info

# lab__node_row I SHARED: node I's facts as one tab-separated line (all turned into JSON by one
# jq run in lab__info_json).
lab__node_row() {
    local i=$1 d=$LAB_STATE/n$1 sip=$LAB_STOR_NET.$(($1 + 10)) sif=eth1 pid=0 spid=0 routed=0 fp=""
    [ "$2" = 1 ] && sip=$LAB_MGMT_NET.$((10 + i)) sif=eth0
    { read -r pid <"$d/holder.pid"; } 2>/dev/null || pid=0
    { read -r spid <"$d/sshd.pid"; } 2>/dev/null || spid=0
    lab__alive "${pid:-0}" || pid=0         # 0: not running
    lab__alive "${spid:-0}" || spid=0
    { read -r routed <"$d/routed"; } 2>/dev/null || routed=0
    { read -r fp <"$d/host_key.fp"; } 2>/dev/null || fp=""
    printf '%s\t' "$i" "${pid:-0}" "${spid:-0}" "$LAB_MGMT_NET.$((10 + i))" "$sip" "$sif" \
        "${routed:-0}" "$fp"
    printf '%s\n' "$d"
}

lab__info_json() {
    local n shared mtu i
    n=$(lab__conf nodes) shared=$(lab__conf shared) mtu=$(lab__conf mtu)
    for ((i = 1; i <= n; i++)); do lab__node_row "$i" "$shared"; done |
        jq -R -s --arg prefix "$LAB_PREFIX" --arg state "$LAB_STATE" --argjson shared "$shared" \
            --argjson mtu "$mtu" --arg key "$(lab__conf key)" --arg pub "$(lab__conf key_pub)" \
            --arg mnet "$LAB_MGMT_NET" --arg snet "$LAB_STOR_NET" --argjson mmtu "$LAB_MGMT_MTU" '
        [split("\n")[] | select(length > 0) | split("\t") |
         {name: ("n" + .[0]), hostname: ($prefix + "-n" + .[0]), netns: ($prefix + "-n" + .[0]),
          pid: (.[1] | tonumber), sshd_pid: (.[2] | tonumber),
          mgmt_ip: .[3], mgmt_if: "eth0", storage_ip: .[4], storage_if: .[5],
          ssh_port: 22, ssh_user: "root",
          host_key_pub: (.[8] + "/ssh_host_ed25519_key.pub"), host_key_fingerprint: .[7],
          routed_hop_mtu: (.[6] | tonumber | if . == 0 then null else . end),
          dirs: {opt: (.[8] + "/opt"), etc_hcctl: (.[8] + "/etc-hcctl"),
                 var_lib_hcctl: (.[8] + "/var-lib-hcctl"), run_hcctl: (.[8] + "/run-hcctl")},
          sshd_log: (.[8] + "/sshd.log")}] as $nodes |
        {prefix: $prefix, state_dir: $state, shared: ($shared == 1),
         key: (if $key == "" then null else $key end), key_pub: $pub,
         known_hosts: ($state + "/known_hosts"), switch_netns: ($prefix + "-sw"),
         mgmt: {subnet: ($mnet + ".0/24"), mtu: (if $shared == 1 then $mtu else $mmtu end),
                bridge: "br-mgmt", host_if: ($prefix + "-host"), host_ip: ($mnet + ".1")},
         storage: (if $shared == 1 then
                     {subnet: ($mnet + ".0/24"), mtu: $mtu, bridge: "br-mgmt",
                      host_if: ($prefix + "-host"), host_ip: ($mnet + ".1")}
                   else
                     {subnet: ($snet + ".0/24"), mtu: $mtu, bridge: "br-stor",
                      host_if: ($prefix + "-hstor"), host_ip: ($snet + ".1")} end),
         nodes: $nodes}'
}

# lab_info [--json]: what is up (nodes, addresses, ssh, pids).
lab_info() {
    local json
    lab__select "" "" || return 2
    lab__require_up || return 1
    json=$(lab__info_json) || return 1
    if [ "${1:-}" = --json ]; then
        printf '%s\n' "$json"
        return 0
    fi
    jq -r '"lab \(.prefix): \(.nodes | length) node(s), state \(.state_dir)",
        "mgmt     \(.mgmt.subnet) mtu \(.mgmt.mtu), host side \(.mgmt.host_if) \(.mgmt.host_ip)",
        "storage  \(.storage.subnet) mtu \(.storage.mtu), host side \(.storage.host_if) \(.storage.host_ip)\(if .shared then " (shared with mgmt)" else "" end)",
        "ssh key  \(.key // .key_pub)", "known_hosts \(.known_hosts)", ""' <<<"$json"
    jq -r '(["NODE", "HOSTNAME", "MGMT", "STORAGE", "PID", "SSHD", "HOST KEY"] | @tsv),
        (.nodes[] | [.name, .hostname, .mgmt_ip, .storage_ip + (if .routed_hop_mtu then
            " (routed, hop \(.routed_hop_mtu))" else "" end), .pid, .sshd_pid,
            .host_key_fingerprint] | @tsv)' <<<"$json" | column -t -s "$(printf '\t')"
}

# ---------------------------------------------------------------------------------------------
# CLI

lab__usage() {
    cat >&2 <<'EOF2'
usage: lab.sh [--prefix P] [--state DIR] COMMAND ...
  up N [--shared] [--prefix P] [--mtu M] [--key FILE.pub] [--state DIR]
  down [--prefix P] [--state DIR]
  exec NODE CMD...             run CMD inside the node (netns + mount ns + UTS ns)
  ssh NODE [CMD...]            ssh root@node with the lab key and known_hosts
  info [--json]                nodes, addresses, ssh, pids
  set-port-mtu NODE|host|all mgmt|storage MTU   the switch-side port toward NODE
  set-node-mtu NODE mgmt|storage MTU            the node's own interface
  route-node NODE [--mtu M]    put NODE's storage link behind a routed hop of MTU M (1500)
  unroute-node NODE            undo route-node
  rekey NODE                   new host key for NODE, sshd restarted
EOF2
    return 2
}

lab_main() {
    local prefix="" state="" cmd
    while [ $# -gt 0 ]; do
        case $1 in
            --prefix) prefix=${2:-}; shift ;; --prefix=*) prefix=${1#*=} ;;
            --state) state=${2:-}; shift ;; --state=*) state=${1#*=} ;;
            -h|--help|help) lab__usage; return 0 ;;
            -*) lab__err "unknown option '$1'"; lab__usage; return 2 ;;
            *) break ;;
        esac
        shift
    done
    [ $# -ge 1 ] || { lab__usage; return 2; }
    cmd=$1
    shift
    lab__select "$prefix" "$state" || return 2
    case $cmd in
        up)
            trap 'lab__err "interrupted"; LAB_QUIET=1 lab_down >/dev/null; exit 130' INT TERM
            lab_up "$@" || return $?
            trap - INT TERM
            lab_info ;;
        down) lab_down "$@" ;;
        exec) lab_exec "$@" ;;
        ssh) lab_ssh "$@" ;;
        info) lab_info "$@" ;;
        set-port-mtu) lab_set_port_mtu "$@" ;;
        set-node-mtu) lab_set_node_mtu "$@" ;;
        route-node) lab_route_node "$@" ;;
        unroute-node) lab_unroute_node "$@" ;;
        rekey) lab_rekey "$@" ;;
        *) lab__err "unknown command '$cmd'"; lab__usage ;;
    esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    lab_main "$@"
    exit $?
fi
