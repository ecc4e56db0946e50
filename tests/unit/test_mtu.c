/*
 * Unit tests for agents/hcagent/mtu.c: MTU changes with a revert timer, on a real veth pair in a
 * private network namespace (unshare(CLONE_NEWNET): the host's interfaces are never touched and
 * the namespace goes away with the process). Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); without
 * it every test is skipped with the reason.
 *
 * Checked against the kernel through `ip`, not only through our own netlink reader.
 *
 * Cached path MTUs (pmtu_learn.h): an exception learnt as from a router must be gone after a
 * change, a revert and a flush.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agents/hcagent/mtu.h"
#include "common/util.h"
#include "pmtu_learn.h"
#include "tests/unit/support/support.h"

#define IFACE "hcp-m0"
#define SELF "10.9.0.1" /* on IFACE */
#define PEER "10.9.0.5" /* on link, a static neighbour: nothing answers */

static int have_netns;
static char skip_reason[256];
static char tmp_root[512];

struct fixture {
    struct event_base *base;
    char dir[600];
};

static int group_setup(void **state)
{
    (void)state;
    const char *t = getenv("HC_TEST_TMP");
    if (t && *t)
        mkdir(t, 0700);
    snprintf(tmp_root, sizeof(tmp_root), "%s/test_mtu.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_root))
        return -1;
    if (hc_test_unshare_net(skip_reason, sizeof(skip_reason)) < 0)
        return 0;
    if (hc_test_sh("ip link add %s mtu 1500 type veth peer name hcp-m1", IFACE) != 0 ||
        hc_test_sh("ip link set %s up && ip link set hcp-m1 up && ip link set lo up", IFACE) != 0 ||
        hc_test_sh("ip addr add " SELF "/24 dev %s", IFACE) != 0 ||
        hc_test_sh("ip neigh add " PEER " lladdr 02:00:00:00:00:05 dev %s nud permanent", IFACE) !=
            0) {
        snprintf(skip_reason, sizeof(skip_reason), "cannot create a veth pair (iproute2?)");
        return 0;
    }
    have_netns = 1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (tmp_root[0])
        hc_test_sh("rm -rf '%s'", tmp_root);
    return 0; /* the namespace and its veth pair go with the process */
}

static int setup(void **state)
{
    static int n;
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    f->base = event_base_new();
    snprintf(f->dir, sizeof(f->dir), "%s/d%d", tmp_root, ++n);
    mkdir(f->dir, 0700);
    if (have_netns)
        hc_test_sh("ip link set %s mtu 1500", IFACE);
    *state = f;
    return f->base ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    event_base_free(f->base);
    free(f);
    return 0;
}

#define NEED_NETNS() HC_TEST_SKIP_UNLESS(have_netns, skip_reason)

static void run_loop_ms(struct event_base *base, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static struct hc_mtu_mgr *new_mgr(struct fixture *f)
{
    struct hc_error err = {0};
    struct hc_mtu_mgr *m = hc_mtu_mgr_new(f->base, f->dir, &err);
    if (!m)
        fail_msg("hc_mtu_mgr_new: %s", err.message);
    return m;
}

static void assert_pending(struct hc_mtu_mgr *m, int pending)
{
    json_t *st = hc_mtu_state_json(m);
    assert_int_equal(!json_is_null(json_object_get(st, "pending")), pending);
    json_decref(st);
}

static void route_get(char *out, size_t len)
{
    hc_test_route_get(PEER, out, len);
}

static int route_cached(void)
{
    return hc_test_route_cached(PEER);
}

static void learn_pmtu(int mtu)
{
    hc_test_learn_pmtu(SELF, PEER, mtu);
}

static void test_link_get(void **state)
{
    NEED_NETNS();
    (void)state;
    struct hc_mtu_link link;
    struct hc_error err = {0};
    assert_int_equal(hc_mtu_link_get(IFACE, &link, &err), 0);
    assert_int_equal(link.mtu, 1500);
    assert_int_equal(link.mtu, hc_test_link_mtu(IFACE));
    assert_int_equal(link.min_mtu, 68);
    assert_true(link.max_mtu >= 9000 && link.max_mtu <= 65535);
    assert_int_equal(hc_mtu_link_get("hcp-nosuch", &link, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "'hcp-nosuch' not found"));
}

static void expect_invalid(struct hc_mtu_mgr *m, const char *ifname, int mtu, int64_t after,
                           const char *needle)
{
    struct hc_error err = {0};
    assert_int_equal(hc_mtu_apply(m, ifname, mtu, after, NULL, &err), -1);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.code, "invalid_argument");
    if (!strstr(err.message, needle))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    assert_pending(m, 0);
}

static void test_invalid_values(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_mtu_mgr *m = new_mgr(f);
    expect_invalid(m, IFACE, 0, 1000, "mtu 0 for 'hcp-m0' is outside 68..");
    expect_invalid(m, IFACE, 67, 1000, "mtu 67 for");
    expect_invalid(m, IFACE, 70000, 1000, "mtu 70000 for");
    expect_invalid(m, IFACE, -1, 1000, "outside");
    expect_invalid(m, "hcp-nosuch", 9000, 1000, "not found");
    expect_invalid(m, "../etc", 9000, 1000, "invalid interface name");
    expect_invalid(m, IFACE, 9000, 0, "revert_after_ms 0 is outside");
    hc_mtu_mgr_free(m);
}

static void test_revert_after_timer(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    int64_t before = hc_now_ms();
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 300, &c, &err), 0);
    assert_int_equal(hc_test_link_mtu(IFACE), 9000);
    assert_int_equal(c.previous_mtu, 1500);
    assert_int_equal(c.mtu, 9000);
    assert_int_equal(strlen(c.change_id), 32);
    assert_true(c.revert_at_ms >= before + 300 && c.revert_at_ms <= hc_now_ms() + 300);
    assert_pending(m, 1);
    run_loop_ms(f->base, 150);
    assert_int_equal(hc_test_link_mtu(IFACE), 9000); /* not yet */
    run_loop_ms(f->base, 400);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    json_t *st = hc_mtu_state_json(m);
    json_t *last = json_object_get(st, "last_revert");
    assert_true(json_is_null(json_object_get(st, "pending")));
    assert_string_equal(json_string_value(json_object_get(last, "change_id")), c.change_id);
    assert_int_equal(json_integer_value(json_object_get(last, "previous_mtu")), 1500);
    assert_true(json_is_string(json_object_get(last, "reverted_at")));
    assert_null(json_object_get(last, "error"));
    json_decref(st);
    /* The controller confirms too late. */
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), -1);
    assert_int_equal(err.status, 409);
    assert_non_null(strstr(err.message, "already reverted"));
    hc_mtu_mgr_free(m);
}

static void test_confirm_keeps(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_apply(m, IFACE, 8982, 200, &c, &err), 0);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), 0);
    run_loop_ms(f->base, 400); /* past revert_at */
    assert_int_equal(hc_test_link_mtu(IFACE), 8982);
    assert_pending(m, 0);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), 0); /* a retried confirm */
    assert_int_equal(hc_mtu_confirm(m, "0123456789abcdef0123456789abcdef", &err), -1);
    assert_int_equal(err.status, 404);
    /* A later change works again, and the confirmed one survives a restart. */
    hc_mtu_mgr_free(m);
    m = new_mgr(f);
    assert_pending(m, 0);
    assert_int_equal(hc_test_link_mtu(IFACE), 8982);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), 0);
    hc_mtu_mgr_free(m);
}

static void test_second_change_conflicts(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 5000, &c, &err), 0);
    assert_int_equal(hc_mtu_apply(m, IFACE, 4000, 5000, NULL, &err), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, "conflict");
    assert_non_null(strstr(err.message, c.change_id));
    assert_int_equal(hc_test_link_mtu(IFACE), 9000);
    assert_int_equal(hc_mtu_revert_now(m), 0);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    hc_mtu_mgr_free(m);
}

/* An agent stopped while a change is pending re-arms the timer at start... */
static void test_restart_rearms(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 500, &c, &err), 0);
    hc_mtu_mgr_free(m); /* the "crash": no revert */
    assert_int_equal(hc_test_link_mtu(IFACE), 9000);
    m = new_mgr(f);
    json_t *st = hc_mtu_state_json(m);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(st, "pending"), "change_id")),
        c.change_id);
    json_decref(st);
    assert_int_equal(hc_test_link_mtu(IFACE), 9000);
    run_loop_ms(f->base, 800);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    assert_pending(m, 0);
    hc_mtu_mgr_free(m);
}

/* ...and reverts at once when its time passed while it was down. */
static void test_restart_reverts_late(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_apply(m, IFACE, 2000, 100, &c, &err), 0);
    hc_mtu_mgr_free(m);
    usleep(200 * 1000);
    assert_int_equal(hc_test_link_mtu(IFACE), 2000);
    m = new_mgr(f); /* no loop run: the revert happens in new */
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    assert_pending(m, 0);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), -1);
    assert_int_equal(err.status, 409);
    hc_mtu_mgr_free(m);
}

/* The controller's verification failed: it asks for the revert instead of waiting the timer. */
static void test_revert_on_request(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c, r;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 60000, &c, &err), 0);
    assert_int_equal(hc_test_link_mtu(IFACE), 9000);
    assert_int_equal(hc_mtu_revert(m, c.change_id, &r, &err), 0);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500); /* at once, not after 60 s */
    assert_pending(m, 0);
    assert_string_equal(r.change_id, c.change_id);
    assert_int_equal(r.requested, 1);
    assert_int_equal(r.previous_mtu, 1500);
    json_t *st = hc_mtu_state_json(m);
    json_t *last = json_object_get(st, "last_revert");
    assert_string_equal(json_string_value(json_object_get(last, "change_id")), c.change_id);
    assert_string_equal(json_string_value(json_object_get(last, "reverted_by")), "request");
    json_decref(st);
    /* A retried request is a success; confirming it now is refused. */
    assert_int_equal(hc_mtu_revert(m, c.change_id, &r, &err), 0);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), -1);
    assert_int_equal(err.status, 409);
    /* The timer is gone with the change: nothing happens at its old deadline. */
    run_loop_ms(f->base, 100);
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    /* The revert survives a restart, with who did it. */
    hc_mtu_mgr_free(m);
    m = new_mgr(f);
    assert_int_equal(hc_mtu_revert(m, c.change_id, &r, &err), 0);
    assert_int_equal(r.requested, 1);
    hc_mtu_mgr_free(m);
}

static void test_revert_refusals(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_mtu_change c, r;
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_int_equal(hc_mtu_revert(m, "", NULL, &err), -1);
    assert_int_equal(err.status, 400);
    assert_int_equal(hc_mtu_revert(m, "0123456789abcdef0123456789abcdef", NULL, &err), -1);
    assert_int_equal(err.status, 404);
    /* A confirmed change stays: reverting it is a conflict, the MTU is kept. */
    assert_int_equal(hc_mtu_apply(m, IFACE, 8000, 5000, &c, &err), 0);
    assert_int_equal(hc_mtu_confirm(m, c.change_id, &err), 0);
    assert_int_equal(hc_mtu_revert(m, c.change_id, NULL, &err), -1);
    assert_int_equal(err.status, 409);
    assert_non_null(strstr(err.message, "confirmed"));
    assert_int_equal(hc_test_link_mtu(IFACE), 8000);
    /* Reverted by the timer, then asked: a success that says the timer did it. */
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 150, &c, &err), 0);
    run_loop_ms(f->base, 400);
    assert_int_equal(hc_test_link_mtu(IFACE), 8000);
    assert_int_equal(hc_mtu_revert(m, c.change_id, &r, &err), 0);
    assert_int_equal(r.requested, 0);
    hc_mtu_mgr_free(m);
}

/* The route cache: a locked path MTU learnt at a small MTU goes with a flush. */
static void test_route_flush(void **state)
{
    NEED_NETNS();
    (void)state;
    char out[1024];
    struct hc_error err = {0};
    learn_pmtu(68);
    route_get(out, sizeof(out));
    if (!strstr(out, "mtu lock 552"))
        fail_msg("no locked exception was learnt: %s", out);
    assert_int_equal(hc_mtu_route_flush(&err), 0);
    route_get(out, sizeof(out));
    if (strstr(out, " mtu "))
        fail_msg("the exception survived the flush: %s", out);
}

/* Changing the MTU does not update a locked exception by itself (the kernel keeps it ~10 min):
 * the change flushes it, and so does the revert. */
static void test_change_and_revert_flush(void **state)
{
    NEED_NETNS();
    struct fixture *f = *state;
    char out[1024];
    struct hc_error err = {0};
    struct hc_mtu_change c;
    struct hc_mtu_mgr *m = new_mgr(f);
    learn_pmtu(68);
    assert_true(route_cached());
    assert_int_equal(hc_mtu_apply(m, IFACE, 9000, 60000, &c, &err), 0);
    route_get(out, sizeof(out));
    if (strstr(out, " mtu "))
        fail_msg("a cached path MTU survived the change to 9000: %s", out);
    learn_pmtu(1280);
    assert_true(route_cached());
    assert_int_equal(hc_mtu_revert(m, c.change_id, NULL, &err), 0);
    assert_false(route_cached());
    learn_pmtu(1280);
    assert_int_equal(hc_mtu_apply(m, IFACE, 4000, 100, &c, &err), 0);
    assert_false(route_cached());
    learn_pmtu(1280);
    run_loop_ms(f->base, 300); /* the timer's revert flushes too */
    assert_int_equal(hc_test_link_mtu(IFACE), 1500);
    assert_false(route_cached());
    hc_mtu_mgr_free(m);
}

/* A damaged state file is set aside; the agent starts. */
static void test_damaged_state_file(void **state)
{
    struct fixture *f = *state;
    char path[700], aside[720];
    snprintf(path, sizeof(path), "%s/%s", f->dir, HC_MTU_STATE_FILE);
    snprintf(aside, sizeof(aside), "%s.bad", path);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"pending\": {\"change_id\": 7", fp);
    fclose(fp);
    struct hc_mtu_mgr *m = new_mgr(f);
    assert_pending(m, 0);
    assert_int_equal(access(aside, F_OK), 0);
    assert_int_equal(access(path, F_OK), -1);
    hc_mtu_mgr_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_link_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_after_timer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_confirm_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_change_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_rearms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_reverts_late, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_state_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_on_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_and_revert_flush, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
