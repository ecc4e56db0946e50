/*
 * The poller's MTU-stall verdict (controller/remote/poller.c, issue 4 item 7) when HTTPS times out:
 * an agent stand-in that accepts TCP but never answers, plus a UDP echo responder on port 7445
 * that echoes only datagrams up to a size limit (what a smaller-MTU hop lets through):
 * - small echoed, big lost      -> 'stalled', the MTU blackhole named, in the first poll cycle;
 * - small and big echoed        -> 'unreachable', the agent named as hung;
 * - no echo at all              -> 'unreachable', no answer within the timeout.
 * Port 7445 is fixed, so the test runs in a network namespace of its own: it needs root and
 * skips without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/remote/poller.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define ECHO_PORT 7445
#define POLL_MS 500
#define AGENT_TIMEOUT_MS 500

static int have_netns; /* set by main: we are root in a fresh network namespace */

/* --- a UDP echo responder with a size limit ------------------------------------------------ */

struct echo {
    int fd;
    int stop[2];
    atomic_int limit; /* largest UDP payload echoed; 0: echo nothing */
    pthread_t thread;
};

static void *echo_main(void *arg)
{
    struct echo *e = arg;
    static unsigned char buf[65536];
    for (;;) {
        struct pollfd p[2] = {{.fd = e->fd, .events = POLLIN},
                              {.fd = e->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 || p[1].revents)
            return NULL;
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(e->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (n > 0 && n <= atomic_load(&e->limit))
            sendto(e->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
    }
}

static void echo_start(struct echo *e, int limit)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(ECHO_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    e->fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(e->fd >= 0);
    assert_int_equal(bind(e->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(pipe(e->stop), 0);
    atomic_init(&e->limit, limit);
    assert_int_equal(pthread_create(&e->thread, NULL, echo_main, e), 0);
}

static void echo_stop(struct echo *e)
{
    ssize_t w = write(e->stop[1], "x", 1);
    assert_int_equal(w, 1);
    pthread_join(e->thread, NULL);
    close(e->fd);
    close(e->stop[0]);
    close(e->stop[1]);
}

/* --- fixture ------------------------------------------------------------------------------- */

struct fixture {
    char dir[512];
    struct hc_controller ctl;
    struct hc_db *db;
    int silent_fd;
};

static int setup(void **state)
{
    static struct fixture f;
    struct hc_error err = {0};
    char url[64];
    int port;
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_poller_stall");
    f.ctl.poll_interval_ms = POLL_MS;
    f.ctl.agent_timeout_ms = AGENT_TIMEOUT_MS;
    /* the controller's client certificate: its agent client is built from it */
    hc_test_cluster_pki(&f.ctl, NULL, NULL);
    f.db = hc_test_ctl_db_crl(&f.ctl); /* the agent client reads crl.pem from the data dir */
    f.silent_fd = hc_test_silent_listener(&port);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
    assert_int_equal(hc_db_run(f.db, &err,
                               "INSERT INTO nodes (id, cluster_id, name, address, "
                               "agent_url, cert_serial, cert_pem, cert_pin, joined_at) VALUES "
                               "(1, 'c-test', 'n1', '127.0.0.1', ?, 's1', 'PEM', "
                               "'sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=', ?)",
                               "si", url, hc_now_ms()),
                     1);
    /* what the poller learnt before the stall: the management interface and its MTU */
    assert_int_equal(hc_db_run(f.db, &err,
                               "INSERT INTO interfaces (node_id, name, mtu, state, "
                               "addresses_json, updated_at) VALUES (1, 'lo', 9000, 'up', "
                               "'[\"127.0.0.1/8\"]', ?)",
                               "i", hc_now_ms()),
                     1);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_db_close(f->db);
    close(f->silent_fd);
    hc_test_rmtree(f->dir);
    return 0;
}

/* Runs the poller until n1's health is `want` (or the deadline); returns the ms it took and
 * fills detail. */
static int64_t poll_until(struct fixture *f, const char *want, char *detail, size_t len)
{
    struct hc_error err = {0};
    int64_t t0 = hc_mono_ms(), took = -1;
    struct hc_poller *p = hc_poller_start(&f->ctl, &err);
    if (!p)
        fail_msg("poller: %s", err.message);
    while (hc_mono_ms() - t0 < 10000 && took < 0) {
        json_t *rows = hc_db_query_json(f->db, &err,
                                        "SELECT health, health_detail FROM nodes "
                                        "WHERE name = 'n1'",
                                        "");
        const json_t *row = json_array_get(rows, 0);
        if (!strcmp(hc_json_str(row, "health", ""), want)) {
            took = hc_mono_ms() - t0;
            snprintf(detail, len, "%s", hc_json_str(row, "health_detail", ""));
        }
        json_decref(rows);
        usleep(20 * 1000);
    }
    hc_poller_stop(p);
    if (took < 0)
        fail_msg("n1 never became %s", want);
    return took;
}

static void assert_has(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("'%s' lacks '%s'", text, part);
}

static void test_stalled(void **state)
{
    struct fixture *f = *state;
    struct echo e;
    char detail[640];
    if (!have_netns)
        skip();
    echo_start(&e, 1500 - 28); /* a 1500-byte hop in front of a 9000-byte node */
    int64_t took = poll_until(f, "stalled", detail, sizeof(detail));
    echo_stop(&e);
    assert_has(detail, "answers small packets but large TCP segments vanish");
    assert_has(detail, "suspected MTU blackhole");
    assert_has(detail, "9000 bytes lost");
    /* the first cycle says it: one agent timeout plus the echo wait, well within a poll interval
     * after the request timed out */
    if (took > AGENT_TIMEOUT_MS + POLL_MS)
        fail_msg("stalled reported after %lld ms", (long long)took);
}

static void test_hung_agent(void **state)
{
    struct fixture *f = *state;
    struct echo e;
    char detail[640];
    if (!have_netns)
        skip();
    echo_start(&e, 65535);
    poll_until(f, "unreachable", detail, sizeof(detail));
    echo_stop(&e);
    assert_has(detail, "no answer within 500 ms");
    assert_has(detail, "hung or overloaded");
}

static void test_silent(void **state)
{
    struct fixture *f = *state;
    char detail[640];
    if (!have_netns)
        skip();
    poll_until(f, "unreachable", detail, sizeof(detail));
    assert_has(detail, "no answer within 500 ms");
    if (strstr(detail, "blackhole") || strstr(detail, "UDP echo"))
        fail_msg("no echo, yet: %s", detail);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stalled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent, setup, teardown),
    };
    /* Before any thread exists: a private network namespace with only lo, so that port 7445
     * is ours whatever else runs on the machine. */
    if (geteuid() == 0 && unshare(CLONE_NEWNET) == 0 && system("ip link set lo up") == 0)
        have_netns = 1;
    else
        fprintf(stderr, "SKIP: needs root for a network namespace of its own\n");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
