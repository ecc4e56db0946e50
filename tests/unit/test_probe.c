/*
 * Unit tests for agents/hcagent/probe.c: DF probes through real network namespaces.
 *
 * The test process moves into a private network namespace "A" (unshare: it vanishes with the
 * process) and builds named namespaces hcp-<pid>-{b,c,r,d} with veth pairs from 198.18.0.0/15:
 *
 *   A hcp-ab 198.18.100.1/24 mtu 9000 ── B hcp-ba 198.18.100.2-9/24 mtu 9000 (7 aliases)
 *   A hcp-ac 198.18.101.1/24 mtu 9000 ── C hcp-ca 198.18.101.2/24 mtu 1500
 *   A hcp-ar 198.18.102.1/24 mtu 9000 ── R hcp-ra 198.18.102.254/24 mtu 9000 (forwarding)
 *                                        R hcp-rd 198.18.103.254/24 mtu 1500 ── D hcp-dr
 *                                                                  198.18.103.2/24 mtu 1500
 *
 * Probe responders run in B, C, D and A (forked children that setns into the namespace); the
 * prober runs in A, or in C for the reverse direction. Named namespaces are deleted in the
 * group teardown, also when a test failed, and leftovers of a crashed run (a dead pid in the
 * name) at the next start. Needs root; without it every test is skipped with the reason.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agents/hcagent/probe.h"
#include "common/util.h"
#include "tests/unit/support/support.h"

#define NS_NAMES "bcrd"
#define MAX_RESPONDERS 8

static int have_netns;
static char skip_reason[256];
static int home_ns = -1; /* namespace A */
static pid_t responders[MAX_RESPONDERS];
static int nresponders;

static const char *ns(char which)
{
    static char names[4][64];
    int i = (int)(strchr(NS_NAMES, which) - NS_NAMES);
    snprintf(names[i], sizeof(names[i]), "hcp-%d-%c", (int)getpid(), which);
    return names[i];
}

/* Namespaces hcp-<pid>-x whose pid is gone: a crashed earlier run. */
static void remove_stale_namespaces(void)
{
    system("for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "
           "'^hcp-[0-9]+-[a-z]$'); do "
           "p=${n#hcp-}; p=${p%-*}; kill -0 \"$p\" 2>/dev/null || ip netns del \"$n\"; done");
}

static int build_namespaces(void)
{
    const char *b = ns('b'), *c = ns('c'), *r = ns('r'), *d = ns('d');
    int rc = hc_test_sh("ip link set lo up");
    for (const char *x = NS_NAMES; *x && rc == 0; x++)
        rc = hc_test_sh("ip netns add %s && ip -n %s link set lo up", ns(*x), ns(*x));
    if (rc == 0)
        rc = hc_test_sh(
            "ip link add hcp-ab mtu 9000 type veth peer name hcp-ba mtu 9000 netns %s && "
            "ip addr add 198.18.100.1/24 dev hcp-ab && ip link set hcp-ab up && "
            "ip -n %s addr add 198.18.100.2/24 dev hcp-ba && "
            "for i in 3 4 5 6 7 8 9; do ip -n %s addr add 198.18.100.$i/24 dev hcp-ba; done && "
            "ip -n %s link set hcp-ba up",
            b, b, b, b);
    if (rc == 0)
        rc = hc_test_sh(
            "ip link add hcp-ac mtu 9000 type veth peer name hcp-ca mtu 1500 netns %s && "
            "ip addr add 198.18.101.1/24 dev hcp-ac && ip link set hcp-ac up && "
            "ip -n %s addr add 198.18.101.2/24 dev hcp-ca && ip -n %s link set hcp-ca up",
            c, c, c);
    if (rc == 0)
        rc = hc_test_sh(
            "ip link add hcp-ar mtu 9000 type veth peer name hcp-ra mtu 9000 netns %s && "
            "ip addr add 198.18.102.1/24 dev hcp-ar && ip link set hcp-ar up && "
            "ip route add 198.18.103.0/24 via 198.18.102.254 && "
            "ip -n %s addr add 198.18.102.254/24 dev hcp-ra && ip -n %s link set hcp-ra up && "
            "ip netns exec %s sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward' && "
            "ip -n %s link add hcp-rd mtu 1500 type veth peer name hcp-dr mtu 1500 netns %s && "
            "ip -n %s addr add 198.18.103.254/24 dev hcp-rd && ip -n %s link set hcp-rd up && "
            "ip -n %s addr add 198.18.103.2/24 dev hcp-dr && ip -n %s link set hcp-dr up && "
            "ip -n %s route add 198.18.102.0/24 via 198.18.103.254",
            r, r, r, r, r, d, r, r, d, d, d);
    return rc;
}

static int enter_ns(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 ? setns(fd, CLONE_NEWNET) : -1;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* A responder on HC_PORT_PROBE in namespace name (NULL: A), in a child that dies with us. */
static int start_responder(const char *name)
{
    int ready[2];
    if (pipe(ready) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct hc_error err = {0};
        struct event_base *base = event_base_new();
        struct hc_probe_responder *r = NULL;
        if ((name && enter_ns(name) < 0) || !base ||
            !(r = hc_probe_responder_new(base, NULL, 0, &err)))
            _exit(1);
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        event_base_dispatch(base);
        _exit(0);
    }
    close(ready[1]);
    char c = 0;
    ssize_t n = pid > 0 ? read(ready[0], &c, 1) : -1;
    close(ready[0]);
    if (pid > 0)
        responders[nresponders++] = pid;
    return n == 1 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nresponders; i++) {
        kill(responders[i], SIGKILL);
        waitpid(responders[i], NULL, 0);
    }
    nresponders = 0;
    for (const char *x = NS_NAMES; *x; x++) {
        char path[128];
        snprintf(path, sizeof(path), "/run/netns/%s", ns(*x));
        if (access(path, F_OK) == 0)
            hc_test_sh("ip netns del %s", ns(*x));
    }
    if (home_ns >= 0)
        close(home_ns);
    return 0;
}

static int group_setup(void **state)
{
    if (hc_test_unshare_net(skip_reason, sizeof(skip_reason)) < 0)
        return 0;
    home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    remove_stale_namespaces();
    if (home_ns < 0 || build_namespaces() != 0 || start_responder(ns('b')) < 0 ||
        start_responder(ns('c')) < 0 || start_responder(ns('d')) < 0 || start_responder(NULL) < 0) {
        group_teardown(state);
        return -1;
    }
    have_netns = 1;
    return 0;
}

#define NEED_NETNS() HC_TEST_SKIP_UNLESS(have_netns, skip_reason)

static void target(struct hc_probe_target *t, const char *addr, int size)
{
    memset(t, 0, sizeof(*t));
    assert_int_equal(inet_pton(AF_INET, addr, &t->addr), 1);
    t->size = size;
}

/* Probes one target from the current namespace. */
static void probe1(const char *addr, int size, int timeout_ms, struct hc_probe_target *t)
{
    struct hc_error err = {0};
    struct hc_probe_options opt = {.timeout_ms = timeout_ms, .search = 1};
    target(t, addr, size);
    if (hc_probe_run(&opt, t, 1, &err) < 0)
        fail_msg("hc_probe_run: %s", err.message);
    print_message("  %s %d -> %s path_mtu %d largest_ok %d (%d probes sent): %s\n", addr, size,
                  hc_probe_verdict_name(t->result), t->path_mtu, t->largest_ok, t->sent, t->detail);
}

static void test_jumbo_ok(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    probe1("198.18.100.2", 9000, 1000, &t);
    assert_string_equal(hc_probe_verdict_name(t.result), "ok");
    assert_int_equal(t.largest_ok, 9000);
    assert_int_equal(t.path_mtu, 0);
    assert_true(t.rtt_ms >= 0 && t.rtt_ms < 1000);
    /* 9001 does not fit the 9000 interface: refused locally, the route's MTU named. */
    probe1("198.18.100.2", 9001, 500, &t);
    assert_string_equal(hc_probe_verdict_name(t.result), "frag_needed");
    assert_int_equal(t.path_mtu, 9000);
    assert_int_equal(t.largest_ok, 9000);
}

/* Eight targets that all pass take one round trip, not eight timeouts. */
static void test_eight_targets_concurrently(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t[8];
    struct hc_error err = {0};
    char addr[32];
    for (int i = 0; i < 8; i++) {
        snprintf(addr, sizeof(addr), "198.18.100.%d", i + 2);
        target(&t[i], addr, 9000);
    }
    struct hc_probe_options opt = {.timeout_ms = 1000, .search = 1};
    int64_t start = hc_mono_ms();
    assert_int_equal(hc_probe_run(&opt, t, 8, &err), 0);
    int64_t elapsed = hc_mono_ms() - start;
    int sent = 0;
    for (int i = 0; i < 8; i++)
        sent += t[i].sent;
    print_message("  8 targets at 9000 bytes in %lld ms, %d probes\n", (long long)elapsed, sent);
    for (int i = 0; i < 8; i++)
        assert_int_equal(t[i].result, HC_PROBE_OK);
    assert_true(elapsed < 500);
}

/* The echo of a probe sent to an alias comes from that alias, not from the primary address:
 * checked with an unconnected socket that sees the reply's source. */
static void test_reply_from_probed_address(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    probe1("198.18.100.5", 9000, 1000, &t); /* connected: a reply from .2 would be dropped */
    assert_int_equal(t.result, HC_PROBE_OK);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(HC_PORT_PROBE)};
    inet_pton(AF_INET, "198.18.100.5", &to.sin_addr);
    char msg[100] = "HCP1\0\0\0\1", reply[200];
    assert_int_equal(sendto(fd, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to)),
                     sizeof(msg));
    struct pollfd pfd = {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    struct sockaddr_in from;
    socklen_t len = sizeof(from);
    ssize_t n = recvfrom(fd, reply, sizeof(reply), 0, (struct sockaddr *)&from, &len);
    assert_int_equal(n, sizeof(msg));
    assert_memory_equal(reply, msg, sizeof(msg));
    char a[INET_ADDRSTRLEN];
    assert_string_equal(inet_ntop(AF_INET, &from.sin_addr, a, sizeof(a)), "198.18.100.5");
    /* Not a probe (wrong magic, too short): no echo. */
    memcpy(msg, "XXXX", 4);
    sendto(fd, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to));
    sendto(fd, "HCP", 3, 0, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(poll(&pfd, 1, 300), 0);
    close(fd);
}

/* C's interface is at 1500: big frames toward it are dropped on receive, silently. */
static void test_small_mtu_blackhole(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    int64_t start = hc_mono_ms();
    probe1("198.18.101.2", 9000, 300, &t);
    print_message("  blackhole search took %lld ms\n", (long long)(hc_mono_ms() - start));
    assert_int_equal(t.result, HC_PROBE_BLACKHOLE);
    assert_int_equal(t.path_mtu, 0);
    /* veth accepts up to 4 bytes over its MTU on receive: 1500..1504 */
    assert_in_range(t.largest_ok, 1500, 1504);
    assert_true(t.rtt_ms < 0);
    assert_non_null(strstr(t.detail, "no echo for 9000 bytes"));
}

/* From C (1500) toward A (9000): the kernel refuses the big probe locally. */
static void test_small_mtu_reverse(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    assert_int_equal(enter_ns(ns('c')), 0);
    probe1("198.18.101.1", 9000, 300, &t);
    assert_int_equal(setns(home_ns, CLONE_NEWNET), 0);
    assert_int_equal(t.result, HC_PROBE_FRAG_NEEDED);
    assert_int_equal(t.path_mtu, 1500);
    assert_int_equal(t.largest_ok, 1500);
    assert_non_null(strstr(t.detail, "path mtu toward 198.18.101.1 is 1500"));
}

static void test_unreachable(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    probe1("198.18.100.99", 9000, 300, &t); /* nobody has it: ARP fails */
    assert_int_equal(t.result, HC_PROBE_UNREACHABLE);
    assert_int_equal(t.largest_ok, 0);
    assert_non_null(strstr(t.detail, "no echo for 576 bytes"));
    /* B is there, but nothing listens on that port: ICMP port unreachable. */
    struct hc_error err = {0};
    struct hc_probe_options opt = {.timeout_ms = 300, .search = 1, .port = HC_PORT_PROBE + 1};
    target(&t, "198.18.100.2", 9000);
    assert_int_equal(hc_probe_run(&opt, &t, 1, &err), 0);
    assert_int_equal(t.result, HC_PROBE_UNREACHABLE);
    assert_non_null(strstr(t.detail, "connection refused"));
    /* No route at all. */
    probe1("198.19.200.1", 9000, 300, &t);
    assert_int_equal(t.result, HC_PROBE_UNREACHABLE);
}

/* A routed hop of 1500: the router names the MTU in ICMP; the second probe meets the kernel's
 * cached path MTU (EMSGSIZE locally) and reports the same. */
static void test_routed_hop_frag_needed(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t;
    probe1("198.18.103.2", 9000, 500, &t);
    assert_int_equal(t.result, HC_PROBE_FRAG_NEEDED);
    assert_int_equal(t.path_mtu, 1500);
    assert_int_equal(t.largest_ok, 1500);
    assert_non_null(strstr(t.detail, "ICMP fragmentation needed from 198.18.102.254"));
    probe1("198.18.103.2", 9000, 500, &t);
    assert_int_equal(t.result, HC_PROBE_FRAG_NEEDED);
    assert_int_equal(t.path_mtu, 1500);
    assert_int_equal(t.largest_ok, 1500);
    /* Small enough for the hop: fine. */
    probe1("198.18.103.2", 1500, 500, &t);
    assert_int_equal(t.result, HC_PROBE_OK);
}

/* Mixed targets in one request: each gets its own verdict, in one pass. */
static void test_mixed_request(void **state)
{
    NEED_NETNS();
    struct hc_probe_target t[4];
    struct hc_error err = {0};
    target(&t[0], "198.18.100.3", 9000);
    target(&t[1], "198.18.101.2", 9000);
    target(&t[2], "198.18.103.2", 9000);
    target(&t[3], "198.18.100.98", 9000);
    struct hc_probe_options opt = {.timeout_ms = 300, .search = 0};
    int64_t start = hc_mono_ms();
    assert_int_equal(hc_probe_run(&opt, t, 4, &err), 0);
    assert_true(hc_mono_ms() - start < 1000); /* no search: one round */
    assert_int_equal(t[0].result, HC_PROBE_OK);
    assert_int_equal(t[1].result, HC_PROBE_BLACKHOLE);
    assert_int_equal(t[1].largest_ok, 0); /* no search asked */
    assert_int_equal(t[2].result, HC_PROBE_FRAG_NEEDED);
    assert_int_equal(t[2].path_mtu, 1500);
    assert_int_equal(t[3].result, HC_PROBE_UNREACHABLE);
}

static void test_invalid_requests(void **state)
{
    struct hc_probe_target t;
    struct hc_error err = {0};
    struct hc_probe_options opt = {.timeout_ms = 100};
    target(&t, "127.0.0.1", 35);
    assert_int_equal(hc_probe_run(&opt, &t, 1, &err), -1);
    assert_int_equal(err.status, 400);
    target(&t, "127.0.0.1", 65536);
    assert_int_equal(hc_probe_run(&opt, &t, 1, &err), -1);
    /* A source address that is not ours. */
    target(&t, "127.0.0.1", 1500);
    inet_pton(AF_INET, "198.18.250.250", &opt.source);
    assert_int_equal(hc_probe_run(&opt, &t, 1, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "source address 198.18.250.250"));
}

/* ---------------------------------------------------------------- echoes of echoes (issue 12) */

/* Sends payload from from_addr:from_port to to_addr:to_port with a forged source (a raw socket:
 * what a spoofer on the path does). 0 or -1. */
static int send_spoofed(const char *from_addr, int from_port, const char *to_addr, int to_port,
                        const void *payload, size_t len)
{
    unsigned char pkt[1500];
    if (len > sizeof(pkt) - sizeof(struct iphdr) - sizeof(struct udphdr))
        return -1;
    struct iphdr *ip = (struct iphdr *)pkt;
    struct udphdr *udp = (struct udphdr *)(pkt + sizeof(*ip));
    size_t total = sizeof(*ip) + sizeof(*udp) + len;
    memset(pkt, 0, sizeof(*ip) + sizeof(*udp));
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons((uint16_t)total); /* the kernel fills the checksum and the id */
    inet_pton(AF_INET, from_addr, &ip->saddr);
    inet_pton(AF_INET, to_addr, &ip->daddr);
    udp->source = htons((uint16_t)from_port);
    udp->dest = htons((uint16_t)to_port);
    udp->len = htons((uint16_t)(sizeof(*udp) + len)); /* checksum 0: none (IPv4) */
    memcpy(pkt + sizeof(*ip) + sizeof(*udp), payload, len);
    int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
    if (fd < 0)
        return -1;
    struct sockaddr_in to = {.sin_family = AF_INET};
    to.sin_addr.s_addr = ip->daddr;
    ssize_t n = sendto(fd, pkt, total, 0, (struct sockaddr *)&to, sizeof(to));
    close(fd);
    return n == (ssize_t)total ? 0 : -1;
}

struct pair {
    struct event_base *base;
    struct hc_probe_responder *a, *b; /* on 127.0.0.2 and 127.0.0.3 */
};

/* Two responders on loopback addresses of namespace A; same_port: both on one port number, as
 * two agents on port 7445 are. */
static void pair_start(struct pair *p, int same_port)
{
    struct hc_error err = {0};
    p->base = event_base_new();
    assert_non_null(p->base);
    p->a = hc_probe_responder_new(p->base, "127.0.0.2", -1, &err);
    if (!p->a)
        fail_msg("responder a: %s", err.message);
    int port_b = same_port ? hc_probe_responder_port(p->a) : -1;
    p->b = hc_probe_responder_new(p->base, "127.0.0.3", port_b, &err);
    if (!p->b)
        fail_msg("responder b: %s", err.message);
}

/* Runs both responders for ms milliseconds and prints what they sent. */
static void pair_run(struct pair *p, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(p->base, &tv);
    event_base_dispatch(p->base);
    print_message("  echoes in %d ms: a %llu, b %llu (ignored a %llu, b %llu)\n", ms,
                  (unsigned long long)hc_probe_responder_echoes(p->a),
                  (unsigned long long)hc_probe_responder_echoes(p->b),
                  (unsigned long long)hc_probe_responder_ignored(p->a),
                  (unsigned long long)hc_probe_responder_ignored(p->b));
}

static void pair_free(struct pair *p)
{
    hc_probe_responder_free(p->a);
    hc_probe_responder_free(p->b);
    event_base_free(p->base);
}

/* One probe forged from responder a's address and port to responder b, as a current prober
 * builds it: b answers once, a takes the answer for what it is (a reply) and stays silent.
 * Before the reply was marked the two bounced it for ever (thousands of echoes a second). */
static void test_spoofed_probe_no_ping_pong(void **state)
{
    NEED_NETNS();
    struct pair p;
    pair_start(&p, 0);
    unsigned char msg[64] = "HCP1\0\0\0\7HCV2";
    assert_int_equal(send_spoofed("127.0.0.2", hc_probe_responder_port(p.a), "127.0.0.3",
                                  hc_probe_responder_port(p.b), msg, sizeof(msg)),
                     0);
    pair_run(&p, 1000);
    assert_int_equal(hc_probe_responder_echoes(p.b), 1);
    assert_int_equal(hc_probe_responder_echoes(p.a), 0);
    pair_free(&p);
}

/* The same with an unmarked (version 1) probe between responders on one port number, as all
 * agents are on 7445: a datagram from a responder's port is never answered, nor one from a
 * privileged port or from a source address no prober has. */
static void test_spoofed_v1_probe_from_responder_port(void **state)
{
    NEED_NETNS();
    struct pair p;
    pair_start(&p, 1);
    int port = hc_probe_responder_port(p.a);
    unsigned char msg[64] = "HCP1\0\0\0\7";
    assert_int_equal(send_spoofed("127.0.0.2", port, "127.0.0.3", port, msg, sizeof(msg)), 0);
    /* and from 7445 to a responder elsewhere, and from a privileged port (echo, chargen) */
    assert_int_equal(send_spoofed("127.0.0.2", HC_PORT_PROBE, "127.0.0.3", port, msg, 8), 0);
    assert_int_equal(send_spoofed("127.0.0.2", 19, "127.0.0.3", port, msg, 8), 0);
    /* and from addresses no prober has: broadcast, multicast (a raw socket cannot send from
     * 0.0.0.0: the kernel fills in a local address) */
    assert_int_equal(send_spoofed("255.255.255.255", 40000, "127.0.0.3", port, msg, 8), 0);
    assert_int_equal(send_spoofed("224.0.0.1", 40000, "127.0.0.3", port, msg, 8), 0);
    pair_run(&p, 1000);
    assert_int_equal(hc_probe_responder_echoes(p.a), 0);
    assert_int_equal(hc_probe_responder_echoes(p.b), 0);
    pair_free(&p);
}

/* What the responder answers: a marked probe with "HCR1" and otherwise the same bytes; an
 * unmarked one (a version 1 agent's, the poller's) byte for byte; a reply never. */
static void test_reply_marking_and_v1_compat(void **state)
{
    NEED_NETNS();
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(HC_PORT_PROBE)};
    inet_pton(AF_INET, "198.18.100.2", &to.sin_addr);
    struct pollfd pfd = {fd, POLLIN, 0};
    unsigned char v2[200] = "HCP1\0\0\1\2HCV2", v1[8] = "HCP1\0\0\1\3", reply[300];
    assert_int_equal(sendto(fd, v2, sizeof(v2), 0, (struct sockaddr *)&to, sizeof(to)), sizeof(v2));
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    assert_int_equal(recv(fd, reply, sizeof(reply), 0), sizeof(v2));
    assert_memory_equal(reply, HC_PROBE_REPLY_MAGIC, 4);
    assert_memory_equal(reply + 4, v2 + 4, sizeof(v2) - 4);
    struct hc_probe_packet pkt;
    assert_int_equal(hc_probe_packet_parse(reply, sizeof(v2), &pkt), 0);
    assert_int_equal(pkt.type, HC_PROBE_PKT_REPLY);
    assert_int_equal(pkt.seq, 0x102);
    assert_int_equal(sendto(fd, v1, sizeof(v1), 0, (struct sockaddr *)&to, sizeof(to)), sizeof(v1));
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    assert_int_equal(recv(fd, reply, sizeof(reply), 0), sizeof(v1));
    assert_memory_equal(reply, v1, sizeof(v1));
    /* A reply sent to a responder, and a v1-looking datagram of 100 bytes whose padding is not
     * the mark: the reply is dropped, the v1 probe echoed as it is. */
    memcpy(v2, HC_PROBE_REPLY_MAGIC, 4);
    sendto(fd, v2, sizeof(v2), 0, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(poll(&pfd, 1, 300), 0);
    unsigned char v1big[100] = "HCP1\0\0\1\4garbage";
    sendto(fd, v1big, sizeof(v1big), 0, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    assert_int_equal(recv(fd, reply, sizeof(reply), 0), sizeof(v1big));
    assert_memory_equal(reply, v1big, sizeof(v1big));
    close(fd);
}

/* A flood from one source is cut at the burst plus the refill; another source is still
 * answered. */
static void test_rate_limit_per_source(void **state)
{
    NEED_NETNS();
    struct hc_error err = {0};
    struct event_base *base = event_base_new();
    struct hc_probe_responder *r = hc_probe_responder_new(base, "127.0.0.4", -1, &err);
    assert_non_null(r);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)hc_probe_responder_port(r))};
    inet_pton(AF_INET, "127.0.0.4", &to.sin_addr);
    int flood = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int other = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.5", &src.sin_addr);
    assert_int_equal(bind(other, (struct sockaddr *)&src, sizeof(src)), 0);
    int big = 4 * 1024 * 1024;
    setsockopt(flood, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    unsigned char msg[16] = "HCP1\0\0\0\1HCV2";
    const int n = HC_PROBE_RATE_BURST * 3; /* limited unless sending it took over 4 s */
    int64_t start = hc_mono_ms();
    for (int i = 0; i < n; i++) {
        /* the responder reads between sends so that no datagram is lost in a socket buffer */
        sendto(flood, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to));
        if (i % 64 == 63)
            event_base_loop(base, EVLOOP_NONBLOCK);
    }
    for (int i = 0; i < 10; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
    int64_t elapsed = hc_mono_ms() - start;
    uint64_t echoes = hc_probe_responder_echoes(r), limited = hc_probe_responder_limited(r);
    print_message("  %d probes from one source in %lld ms: %llu echoed, %llu limited\n", n,
                  (long long)elapsed, (unsigned long long)echoes, (unsigned long long)limited);
    assert_true(echoes >= HC_PROBE_RATE_BURST);
    assert_true(echoes <=
                HC_PROBE_RATE_BURST + (uint64_t)(elapsed + 1) * HC_PROBE_RATE_PER_S / 1000);
    assert_true(limited > 0);
    assert_int_equal(echoes + limited + hc_probe_responder_ignored(r), n);
    /* another source is still answered */
    sendto(other, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to));
    for (int i = 0; i < 50 && hc_probe_responder_echoes(r) == echoes; i++) {
        usleep(1000);
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    assert_int_equal(hc_probe_responder_echoes(r), echoes + 1);
    close(flood);
    close(other);
    hc_probe_responder_free(r);
    event_base_free(base);
}

/* A responder as agents before issue 12 ran it: every datagram starting with "HCP1" sent back
 * as it is. In a child on 127.0.0.6:port; returns the port. */
static int start_v1_responder(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    inet_pton(AF_INET, "127.0.0.6", &sin.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        unsigned char buf[65536];
        for (;;) {
            struct sockaddr_in peer;
            socklen_t plen = sizeof(peer);
            ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &plen);
            if (n >= 8 && memcmp(buf, "HCP1", 4) == 0)
                sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, plen);
        }
    }
    close(fd);
    if (pid < 0)
        return -1;
    responders[nresponders++] = pid;
    return ntohs(sin.sin_port);
}

/* Mixed versions: a current prober takes an old responder's unchanged echo (HCP1 with the mark
 * still in it), at every size, the search included. */
static void test_prober_takes_v1_echo(void **state)
{
    NEED_NETNS();
    int port = start_v1_responder();
    assert_true(port > 0);
    struct hc_error err = {0};
    struct hc_probe_target t[2];
    target(&t[0], "127.0.0.6", 9000);
    target(&t[1], "127.0.0.6", HC_PROBE_MIN_SIZE); /* 8 bytes: sent unmarked */
    struct hc_probe_options opt = {.timeout_ms = 500, .search = 1, .port = port};
    assert_int_equal(hc_probe_run(&opt, t, 2, &err), 0);
    assert_int_equal(t[0].result, HC_PROBE_OK);
    assert_int_equal(t[1].result, HC_PROBE_OK);
}

/* The parser on its own: what is a probe, a reply, or dropped. */
static void test_packet_parse(void **state)
{
    struct hc_probe_packet p;
    static const struct {
        const char *bytes;
        size_t len;
        int rc;
        enum hc_probe_packet_type type;
        uint32_t seq;
    } cases[] = {
        {"HCP1\0\0\0\1", 8, 0, HC_PROBE_PKT_PROBE_V1, 1},
        {"HCP1\1\2\3\4HCV2", 12, 0, HC_PROBE_PKT_PROBE_V2, 0x01020304},
        {"HCP1\1\2\3\4HCV", 11, 0, HC_PROBE_PKT_PROBE_V1, 0x01020304}, /* the mark cut short */
        {"HCP1\1\2\3\4hcv2", 12, 0, HC_PROBE_PKT_PROBE_V1, 0x01020304},
        {"HCR1\0\0\0\5HCV2", 12, 0, HC_PROBE_PKT_REPLY, 5},
        {"HCR1\0\0\0\5", 8, -1, 0, 0},      /* a reply without the mark */
        {"HCR1\0\0\0\5XXXX", 12, -1, 0, 0}, /* nor with another one */
        {"HCP1\0\0\0", 7, -1, 0, 0},        /* short */
        {"HCP2\0\0\0\1HCV2", 12, -1, 0, 0}, /* unknown magic */
        {"", 0, -1, 0, 0},
    };
    for (size_t i = 0; i < HC_ARRAY_LEN(cases); i++) {
        memset(&p, 0, sizeof(p));
        int rc = hc_probe_packet_parse((const uint8_t *)cases[i].bytes, cases[i].len, &p);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d, want %d", i, rc, cases[i].rc);
        if (rc == 0) {
            assert_int_equal(p.type, cases[i].type);
            assert_int_equal(p.seq, cases[i].seq);
            assert_int_equal(p.length, cases[i].len);
            assert_int_equal(p.version, cases[i].type == HC_PROBE_PKT_PROBE_V1 ? 1 : 2);
        }
    }
    assert_int_equal(hc_probe_packet_parse(NULL, 8, &p), -1);
    static uint8_t huge[HC_PROBE_MAX_SIZE];
    memcpy(huge, "HCP1", 4);
    assert_int_equal(hc_probe_packet_parse(huge, HC_PROBE_MAX_SIZE - HC_IPV4_UDP_HEADERS, &p), 0);
    assert_int_equal(hc_probe_packet_parse(huge, HC_PROBE_MAX_SIZE - HC_IPV4_UDP_HEADERS + 1, &p),
                     -1);
}

static void test_verdict_names(void **state)
{
    assert_string_equal(hc_probe_verdict_name(HC_PROBE_OK), "ok");
    assert_string_equal(hc_probe_verdict_name(HC_PROBE_FRAG_NEEDED), "frag_needed");
    assert_string_equal(hc_probe_verdict_name(HC_PROBE_BLACKHOLE), "blackhole");
    assert_string_equal(hc_probe_verdict_name(HC_PROBE_UNREACHABLE), "unreachable");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_names),
        cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_jumbo_ok),
        cmocka_unit_test(test_eight_targets_concurrently),
        cmocka_unit_test(test_reply_from_probed_address),
        cmocka_unit_test(test_small_mtu_blackhole),
        cmocka_unit_test(test_small_mtu_reverse),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test(test_routed_hop_frag_needed),
        cmocka_unit_test(test_mixed_request),
        cmocka_unit_test(test_spoofed_probe_no_ping_pong),
        cmocka_unit_test(test_spoofed_v1_probe_from_responder_port),
        cmocka_unit_test(test_reply_marking_and_v1_compat),
        cmocka_unit_test(test_rate_limit_per_source),
        cmocka_unit_test(test_prober_takes_v1_echo),
        cmocka_unit_test(test_packet_parse),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
