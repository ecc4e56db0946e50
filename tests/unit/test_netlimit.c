/* Unit tests of the storage service's network egress bound (agents/hcagent/netlimit.c), for
 * real: two network namespaces hcnl-PID-a and hcnl-PID-b joined by a veth (nla 198.18.150.1 and
 * .3, nlb 198.18.150.2), made by the group setup and removed by its teardown whatever failed
 * (and any left by an earlier run that died). TCP is sent from a child in A to this process in
 * B, measured by what arrives over 2 s after 0.5 s of settling:
 * - 50 Mbit/s applied: within 20% of 50 (a TCP payload, so a little under the rate on the
 *   wire); applied again, the same qdisc, class and filter; raised to 200 while the flow runs:
 *   within 20% of 200; cleared: well above 200 (over 400);
 * - TCP from the interface's other address is not bounded (over 400) while .1's is;
 * - the agent's own privilege (its five capabilities, no_new_privs) is enough for tc;
 * - what cannot apply says so and bounds nothing: tc missing, tc not permitted (a child as
 *   nobody), tc that hangs (killed after 5 s), a root qdisc the agent did not make (left
 *   alone, by clear too), no such interface, an IPv6 address; a change that fails keeps the
 *   bound there was and says both; the report of a bound removed by hand says it is gone.
 * Needs root (skipped, saying why, otherwise). `test_netlimit bench` prints asked vs measured
 * for 10, 50 and 200 Mbit/s (bench/netlimit.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agents/hcagent/netlimit.h"
#include "agents/hcagent/privilege.h"
#include "support/support.h"

#define IF_A "nla"
#define ADDR_A "198.18.150.1"
#define ADDR_A2 "198.18.150.3"
#define ADDR_B "198.18.150.2"

struct lab {
    char ns_a[64], ns_b[64];
    int home, a, b; /* namespace fds */
};
static struct lab lab = {.home = -1, .a = -1, .b = -1};

static void enter(int fd)
{
    if (setns(fd, CLONE_NEWNET) < 0)
        fail_msg("setns: %s", strerror(errno));
}

/* Namespaces hcnl-PID-* whose PID is gone: an earlier run that died before its teardown. */
static void remove_stale(void)
{
    char line[256];
    FILE *f = popen("ip netns list 2>/dev/null", "r");
    while (f && fgets(line, sizeof(line), f)) {
        int pid;
        char side;
        line[strcspn(line, " \n")] = '\0';
        if (sscanf(line, "hcnl-%d-%c", &pid, &side) == 2 && kill(pid, 0) < 0 && errno == ESRCH)
            hc_test_sh("ip netns del '%s'", line);
    }
    if (f)
        pclose(f);
}

static int group_teardown(void **state)
{
    if (lab.home >= 0)
        setns(lab.home, CLONE_NEWNET);
    int fds[] = {lab.home, lab.a, lab.b};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    lab.home = lab.a = lab.b = -1;
    if (lab.ns_a[0])
        hc_test_sh("ip netns del %s 2>/dev/null", lab.ns_a); /* its veth end takes the other */
    if (lab.ns_b[0])
        hc_test_sh("ip netns del %s 2>/dev/null", lab.ns_b);
    return 0;
}

static int group_setup(void **state)
{
    char path[128];
    if (geteuid() != 0) {
        printf("# test_netlimit: not root: network namespaces, veth and qdiscs need it; "
               "skipped\n");
        return 0;
    }
    remove_stale();
    snprintf(lab.ns_a, sizeof(lab.ns_a), "hcnl-%d-a", (int)getpid());
    snprintf(lab.ns_b, sizeof(lab.ns_b), "hcnl-%d-b", (int)getpid());
    if (hc_test_sh("ip netns add %s && ip netns add %s && "
                   "ip link add " IF_A " netns %s type veth peer name nlb netns %s && "
                   "ip -n %s addr add " ADDR_A "/24 dev " IF_A " && "
                   "ip -n %s addr add " ADDR_A2 "/24 dev " IF_A " && "
                   "ip -n %s addr add " ADDR_B "/24 dev nlb && "
                   "ip -n %s link set " IF_A " up && ip -n %s link set nlb up",
                   lab.ns_a, lab.ns_b, lab.ns_a, lab.ns_b, lab.ns_a, lab.ns_a, lab.ns_b, lab.ns_a,
                   lab.ns_b) != 0)
        goto fail;
    lab.home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/run/netns/%s", lab.ns_a);
    lab.a = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/run/netns/%s", lab.ns_b);
    lab.b = open(path, O_RDONLY | O_CLOEXEC);
    if (lab.home < 0 || lab.a < 0 || lab.b < 0)
        goto fail;
    return 0;
fail:
    group_teardown(state);
    return -1;
}

/* Each test starts on the interface as the kernel made it, whatever the last one left. */
static int clean_root(void **state)
{
    if (lab.ns_a[0])
        hc_test_sh("ip netns exec %s tc qdisc del dev " IF_A " root 2>/dev/null || true", lab.ns_a);
    return 0;
}

static void need_root(void)
{
    if (geteuid() != 0)
        skip();
}

static int apply_in_a(const char *src, int mbit, struct hc_netlimit *nl)
{
    enter(lab.a);
    int rc = hc_netlimit_apply(IF_A, src, mbit, nl);
    enter(lab.home);
    return rc;
}

static json_t *json_in_a(const struct hc_netlimit *nl)
{
    enter(lab.a);
    json_t *j = hc_netlimit_json(nl);
    enter(lab.home);
    return j;
}

/* `tc WHAT show dev nla` in A without its counters (HTB's direct_packets_stat counts the
 * neighbour discovery that passes meanwhile), into out. */
static void tc_show(const char *what, char *out, size_t len)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "ip netns exec %s tc %s show dev " IF_A
             " 2>&1 | sed 's/ direct_packets_stat [0-9]*//'",
             lab.ns_a, what);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    pclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- TCP across the veth */

struct flow {
    int fd;       /* the receiving end, in B */
    pid_t sender; /* a child in A writing as fast as it may */
};

/* A TCP connection from src (in A) to ADDR_B:port (in B), its sender running. */
static void flow_start(struct flow *f, const char *src, int port)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ADDR_B, &to.sin_addr);
    int one = 1;
    enter(lab.b);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    assert_int_equal(bind(l, (struct sockaddr *)&to, sizeof(to)), 0);
    assert_int_equal(listen(l, 1), 0);
    enter(lab.a);
    f->sender = fork();
    assert_true(f->sender >= 0);
    if (f->sender == 0) {
        static char buf[65536];
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion skips flow_stop */
        struct sockaddr_in from = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &from.sin_addr);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || bind(s, (struct sockaddr *)&from, sizeof(from)) < 0 ||
            connect(s, (struct sockaddr *)&to, sizeof(to)) < 0)
            _exit(1);
        while (write(s, buf, sizeof(buf)) > 0)
            ;
        _exit(0);
    }
    enter(lab.home);
    struct pollfd p = {l, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 5000), 1);
    f->fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(f->fd >= 0);
    close(l);
}

/* Mbit/s of TCP payload arriving over secs, after 0.5 s to settle (a change of the bound just
 * made, the connection's start); bytes receives what was counted. */
static double flow_measure(struct flow *f, double secs, long long *bytes)
{
    static char buf[1 << 20];
    long long n = 0;
    double t0 = now_s(), start = t0 + 0.5, end = start + secs, t;
    int counting = 0;
    while ((t = now_s()) < end) {
        struct pollfd p = {f->fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t got = read(f->fd, buf, sizeof(buf));
        if (got <= 0)
            fail_msg("the flow ended: %s", got < 0 ? strerror(errno) : "eof");
        if (!counting && t >= start) {
            counting = 1;
            start = t;
            end = t + secs;
            continue; /* what this read returned arrived before the window */
        }
        n += counting ? got : 0;
    }
    if (bytes)
        *bytes = n;
    return (double)n * 8 / (t - start) / 1e6;
}

static void flow_stop(struct flow *f)
{
    kill(f->sender, SIGKILL);
    waitpid(f->sender, NULL, 0);
    close(f->fd);
}

static long long sent_bytes(const struct hc_netlimit *nl)
{
    json_t *j = json_in_a(nl);
    json_t *v = json_object_get(j, "sent_bytes");
    long long n = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return n;
}

/* ---------------------------------------------------------------- tests */

/* 50 Mbit/s, the same again, 200 live, cleared; measured by what arrives. */
static void test_bound_live(void **state)
{
    need_root();
    struct hc_netlimit nl;
    struct flow f;
    char qdisc[1024], klass[1024], filter[2048], again[2048];
    long long got;
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), 0);
    printf("# %s\n", nl.detail);
    assert_true(nl.applied);
    assert_int_equal(nl.mbit, 50);
    assert_string_equal(nl.detail,
                        "egress TCP from " ADDR_A " on " IF_A " held to 50 Mbit/s (htb 4863:)");
    tc_show("qdisc", qdisc, sizeof(qdisc));
    tc_show("class", klass, sizeof(klass));
    tc_show("filter", filter, sizeof(filter));
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), 0);
    tc_show("qdisc", again, sizeof(again));
    assert_string_equal(again, qdisc);
    tc_show("class", again, sizeof(again));
    assert_string_equal(again, klass);
    tc_show("filter", again, sizeof(again));
    assert_string_equal(again, filter);
    assert_non_null(strstr(filter, "flowid 4863:1"));

    flow_start(&f, ADDR_A, 5001);
    long long before = sent_bytes(&nl);
    double at50 = flow_measure(&f, 2, &got);
    long long through = sent_bytes(&nl) - before;
    assert_int_equal(apply_in_a(ADDR_A, 200, &nl), 0); /* the flow runs on */
    tc_show("qdisc", again, sizeof(again));
    assert_string_equal(again, qdisc); /* the class changed in place */
    double at200 = flow_measure(&f, 2, NULL);
    assert_int_equal(apply_in_a(ADDR_A, 0, &nl), 0);
    double cleared = flow_measure(&f, 2, NULL);
    flow_stop(&f);
    printf("# 50 Mbit/s: %.1f measured (%lld bytes in, the class counted %lld); 200: %.1f; "
           "cleared: %.1f\n",
           at50, got, through, at200, cleared);
    assert_true(at50 >= 40 && at50 <= 60);
    assert_true(at200 >= 160 && at200 <= 240);
    assert_true(cleared > 400);
    /* the class's counter is the wire's: the payload plus its headers (and the 0.5 s before) */
    assert_true(through >= got && through <= got * 1.5);
    assert_false(nl.applied);
    assert_string_equal(nl.detail, "the service's traffic on " IF_A " is not bounded");
    tc_show("qdisc", again, sizeof(again));
    assert_null(strstr(again, "htb"));
    json_t *j = json_in_a(&nl);
    assert_true(json_is_false(json_object_get(j, "applied")));
    assert_true(json_is_null(json_object_get(j, "sent_bytes")));
    json_decref(j);
}

/* Only TCP from the storage address is held: the interface's other address is not. */
static void test_other_source_unbounded(void **state)
{
    need_root();
    struct hc_netlimit nl;
    struct flow bounded, other;
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), 0);
    flow_start(&bounded, ADDR_A, 5002);
    flow_start(&other, ADDR_A2, 5003);
    double fast = flow_measure(&other, 2, NULL);
    double slow = flow_measure(&bounded, 2, NULL);
    flow_stop(&other);
    flow_stop(&bounded);
    json_t *j = json_in_a(&nl);
    char *text = json_dumps(j, JSON_COMPACT);
    printf("# from " ADDR_A2 ": %.1f Mbit/s; from " ADDR_A " at 50: %.1f; %s\n", fast, slow, text);
    free(text);
    assert_true(json_is_true(json_object_get(j, "applied")));
    assert_int_equal(json_integer_value(json_object_get(j, "mbit")), 50);
    assert_string_equal(json_string_value(json_object_get(j, "interface")), IF_A);
    assert_string_equal(json_string_value(json_object_get(j, "address")), ADDR_A);
    assert_true(json_integer_value(json_object_get(j, "sent_bytes")) > 0);
    json_decref(j);
    assert_int_equal(apply_in_a(ADDR_A, 0, &nl), 0);
    assert_true(fast > 400);
    assert_true(slow >= 40 && slow <= 60);
}

/* Runs work(fd) in a child in A, what it writes to fd into out. */
static void in_child_of_a(void (*work)(int fd), char *out, size_t len)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    enter(lab.a);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        work(p[1]);
        _exit(0);
    }
    enter(lab.home);
    close(p[1]);
    ssize_t n = read(p[0], out, len - 1);
    close(p[0]);
    waitpid(pid, NULL, 0);
    out[n > 0 ? n : 0] = '\0';
}

/* As nobody (no CAP_NET_ADMIN): apply's rc and detail. */
static void apply_as_nobody(int fd)
{
    struct hc_netlimit nl = {0};
    if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
        _exit(3);
    int r = hc_netlimit_apply(IF_A, ADDR_A, 50, &nl);
    dprintf(fd, "%d %s", r, nl.detail);
}

/* With the agent's privilege: apply's rc, applied, clear's rc and detail. */
static void apply_as_agent(int fd)
{
    struct hc_netlimit nl = {0};
    struct hc_error err = {0};
    if (hc_privilege_restrict_agent(&err) < 0) {
        dprintf(fd, "restrict: %s", err.message);
        return;
    }
    int a = hc_netlimit_apply(IF_A, ADDR_A, 50, &nl), applied = nl.applied;
    dprintf(fd, "%d %d %d %s", a, applied, hc_netlimit_clear(IF_A, &nl), nl.detail);
}

/* The agent's own privilege (hc_privilege_restrict_agent: its five capabilities,
 * no_new_privs) is enough for tc: a child so restricted applies and clears the bound. */
static void test_agent_privilege(void **state)
{
    need_root();
    char buf[1024];
    in_child_of_a(apply_as_agent, buf, sizeof(buf));
    printf("# with the agent's capabilities: %s\n", buf);
    assert_string_equal(buf, "0 1 0 the service's traffic on " IF_A " is not bounded");
}

/* What cannot apply says why and bounds nothing. */
static void test_cannot_apply(void **state)
{
    need_root();
    struct hc_netlimit nl;
    char detail[1024], show[1024], script[600];
    json_t *j;

    setenv("HCAGENT_TC", "/nonexistent/tc", 1);
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), -1);
    printf("# tc missing: %s\n", nl.detail);
    assert_false(nl.applied);
    assert_string_equal(nl.detail, "net bound of 50 Mbit/s not applied: cannot run "
                                   "/nonexistent/tc: No such file or directory: the service's "
                                   "traffic on " IF_A " is not bounded");
    /* a tc that hangs: killed after 5 s */
    snprintf(script, sizeof(script), "%s/hang-tc-%d",
             getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp", (int)getpid());
    hc_test_write_text(script, "#!/bin/sh\necho starting\nexec sleep 30\n", 0755);
    setenv("HCAGENT_TC", script, 1);
    double t0 = now_s();
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), -1);
    double took = now_s() - t0;
    unsetenv("HCAGENT_TC");
    unlink(script);
    printf("# tc hangs (%.1f s): %s\n", took, nl.detail);
    assert_true(took >= 4.9 && took < 8);
    assert_non_null(strstr(nl.detail, " qdisc did not finish within 5 s (killed): starting: "
                                      "the service's traffic on " IF_A " is not bounded"));

    in_child_of_a(apply_as_nobody, detail, sizeof(detail));
    printf("# as nobody: %s\n", detail);
    assert_non_null(strstr(detail, "-1 net bound of 50 Mbit/s not applied: not permitted to "
                                   "change qdiscs (CAP_NET_ADMIN): "));
    assert_non_null(strstr(detail, "Operation not permitted"));
    assert_non_null(strstr(detail, "the service's traffic on " IF_A " is not bounded"));

    /* someone else's root qdisc: left alone, by apply and by clear */
    assert_int_equal(hc_test_sh("ip netns exec %s tc qdisc add dev " IF_A
                                " root handle 8001: tbf rate 1gbit burst 64k latency 10ms",
                                lab.ns_a),
                     0);
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), -1);
    printf("# someone else's qdisc: %s\n", nl.detail);
    assert_non_null(strstr(nl.detail, "has a root qdisc the agent did not put there (tbf 8001:), "
                                      "left alone"));
    enter(lab.a);
    assert_int_equal(hc_netlimit_clear(IF_A, &nl), 0);
    enter(lab.home);
    tc_show("qdisc", show, sizeof(show));
    assert_non_null(strstr(show, "qdisc tbf 8001: root"));
    hc_test_sh("ip netns exec %s tc qdisc del dev " IF_A " root", lab.ns_a);

    /* no such interface; not an IPv4 address */
    enter(lab.a);
    assert_int_equal(hc_netlimit_apply("nosuch0", ADDR_A, 50, &nl), -1);
    assert_string_equal(nl.detail, "net bound of 50 Mbit/s not applied: no interface nosuch0: "
                                   "the service's traffic on nosuch0 is not bounded");
    assert_int_equal(hc_netlimit_apply(IF_A, "fd00::1", 50, &nl), -1);
    assert_non_null(strstr(nl.detail, "needs an interface, an IPv4 address"));
    /* refused arguments leave what an earlier apply set, and say it still holds */
    assert_int_equal(hc_netlimit_apply(IF_A, ADDR_A, 50, &nl), 0);
    assert_int_equal(hc_netlimit_apply(IF_A, ADDR_A, -5, &nl), -1);
    assert_true(nl.applied);
    assert_string_equal(nl.detail, "egress TCP from " ADDR_A " on " IF_A " held to 50 Mbit/s "
                                   "(htb 4863:); net bound not applied: needs an interface, an "
                                   "IPv4 address and 0-1000000 Mbit/s (got 'nla', "
                                   "'198.18.150.1', -5)");
    /* another interface: the bound moves (lo: a root qdisc of its own is fine there) */
    assert_int_equal(hc_netlimit_apply("lo", "127.0.0.1", 20, &nl), 0);
    assert_string_equal(nl.interface, "lo");
    enter(lab.home);
    tc_show("qdisc", show, sizeof(show));
    assert_null(strstr(show, "htb"));
    enter(lab.a);
    assert_int_equal(hc_netlimit_apply("lo", "127.0.0.1", 0, &nl), 0);
    enter(lab.home);

    /* a change that fails leaves the bound it had, and says both */
    assert_int_equal(apply_in_a(ADDR_A, 50, &nl), 0);
    setenv("HCAGENT_TC", "/nonexistent/tc", 1);
    assert_int_equal(apply_in_a(ADDR_A, 200, &nl), -1);
    unsetenv("HCAGENT_TC");
    assert_true(nl.applied);
    assert_int_equal(nl.mbit, 50);
    assert_string_equal(nl.detail, "egress TCP from " ADDR_A " on " IF_A " held to 50 Mbit/s "
                                   "(htb 4863:); net bound of 200 Mbit/s not applied: cannot run "
                                   "/nonexistent/tc: No such file or directory");

    /* the filter removed by hand: the class alone bounds nothing, and the report says so */
    hc_test_sh("ip netns exec %s tc filter del dev " IF_A " parent 4863: prio 1", lab.ns_a);
    j = json_in_a(&nl);
    assert_true(json_is_false(json_object_get(j, "applied")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "detail")), "is gone"));
    json_decref(j);
    /* a new address, live: the filter replaced, and the kernel's address reported */
    assert_int_equal(apply_in_a(ADDR_A2, 50, &nl), 0);
    assert_string_equal(nl.address, ADDR_A2);
    j = json_in_a(&nl);
    assert_string_equal(json_string_value(json_object_get(j, "address")), ADDR_A2);
    json_decref(j);

    /* a bound removed by hand: the report says it is gone */
    hc_test_sh("ip netns exec %s tc qdisc del dev " IF_A " root", lab.ns_a);
    j = json_in_a(&nl);
    const char *said = json_string_value(json_object_get(j, "detail"));
    printf("# removed by hand: %s\n", said);
    assert_true(json_is_false(json_object_get(j, "applied")));
    assert_non_null(strstr(said, "the net bound of 50 Mbit/s on " IF_A " is gone"));
    json_decref(j);
}

/* bench/netlimit.sh: asked vs measured, one bound changed live from one rate to the next. */
static void bench_net(void **state)
{
    need_root();
    const int asked[] = {10, 50, 200, 0};
    struct hc_netlimit nl;
    struct flow f;
    flow_start(&f, ADDR_A, 5004);
    for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
        assert_int_equal(apply_in_a(ADDR_A, asked[i], &nl), 0);
        double got = flow_measure(&f, 2, NULL);
        if (asked[i])
            printf("%-16s %6d Mbit/s %7.1f Mbit/s\n", "net, htb on veth", asked[i], got);
        else
            printf("%-16s %13s %7.1f Mbit/s\n", "net, htb on veth", "none", got);
    }
    flow_stop(&f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_bound_live, clean_root),
        cmocka_unit_test_setup(test_other_source_unbounded, clean_root),
        cmocka_unit_test_setup(test_agent_privilege, clean_root),
        cmocka_unit_test_setup(test_cannot_apply, clean_root),
    };
    const struct CMUnitTest bench[] = {cmocka_unit_test(bench_net)};
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return cmocka_run_group_tests(bench, group_setup, group_teardown);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
