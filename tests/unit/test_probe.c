/*
 * Unit tests for agents/probe.c: DF probes through real network namespaces.
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

#include "agents/probe.h"
#include "common/util.h"

#define NS_NAMES "bcrd"
#define MAX_RESPONDERS 4

static int have_netns;
static char skip_reason[256];
static int home_ns = -1; /* namespace A */
static pid_t responders[MAX_RESPONDERS];
static int nresponders;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "test_probe: '%s' failed (%d)\n", cmd, rc);
    return rc;
}

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
    int rc = sh("ip link set lo up");
    for (const char *x = NS_NAMES; *x && rc == 0; x++)
        rc = sh("ip netns add %s && ip -n %s link set lo up", ns(*x), ns(*x));
    if (rc == 0)
        rc = sh("ip link add hcp-ab mtu 9000 type veth peer name hcp-ba mtu 9000 netns %s && "
                "ip addr add 198.18.100.1/24 dev hcp-ab && ip link set hcp-ab up && "
                "ip -n %s addr add 198.18.100.2/24 dev hcp-ba && "
                "for i in 3 4 5 6 7 8 9; do ip -n %s addr add 198.18.100.$i/24 dev hcp-ba; done && "
                "ip -n %s link set hcp-ba up",
                b, b, b, b);
    if (rc == 0)
        rc = sh("ip link add hcp-ac mtu 9000 type veth peer name hcp-ca mtu 1500 netns %s && "
                "ip addr add 198.18.101.1/24 dev hcp-ac && ip link set hcp-ac up && "
                "ip -n %s addr add 198.18.101.2/24 dev hcp-ca && ip -n %s link set hcp-ca up",
                c, c, c);
    if (rc == 0)
        rc = sh("ip link add hcp-ar mtu 9000 type veth peer name hcp-ra mtu 9000 netns %s && "
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

/* A responder on HC_PROBE_PORT in namespace name (NULL: A), in a child that dies with us. */
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
            sh("ip netns del %s", ns(*x));
    }
    if (home_ns >= 0)
        close(home_ns);
    return 0;
}

static int group_setup(void **state)
{
    if (geteuid() != 0) {
        snprintf(skip_reason, sizeof(skip_reason), "needs root (network namespaces)");
        return 0;
    }
    if (unshare(CLONE_NEWNET) < 0) {
        snprintf(skip_reason, sizeof(skip_reason), "unshare(CLONE_NEWNET): %s", strerror(errno));
        return 0;
    }
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

#define NEED_NETNS()                                                                               \
    do {                                                                                           \
        if (!have_netns) {                                                                         \
            print_message("skipping: %s\n", skip_reason);                                          \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

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
    print_message("  %s %d -> %s path_mtu %d largest_ok %d: %s\n", addr, size,
                  hc_probe_verdict_name(t->result), t->path_mtu, t->largest_ok, t->detail);
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
    print_message("  8 targets at 9000 bytes in %lld ms\n", (long long)elapsed);
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
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(HC_PROBE_PORT)};
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
    struct hc_probe_options opt = {.timeout_ms = 300, .search = 1, .port = HC_PROBE_PORT + 1};
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
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
