/*
 * Unit tests of the availability budget (controller/ops/op_maintenance.c) without root: what counts
 * as down (hc_avail_down_reason: maintenance, unreachable, stalled, never seen, service not
 * running), the budget check against a real database (hc_avail_down, hc_avail_check: nodes
 * already down count, the node asked about does not count against itself, max_unavailable 1
 * and 2), and the maintenance.enter operation through the operations pool against a stand-in
 * agent: refused by the budget or by ok-to-stop before anything is touched, admitted
 * otherwise, and --mode none --force that skips ok-to-stop but not the budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/ops/rolling.h"
#include "controller/state/nodes.h"
#include "db/db.h"
#include "tests/unit/support/svc_standin.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 15000

struct fixture {
    char dir[512];
    struct hc_controller ctl;
    struct hc_db *db;
    struct svc_standin agent;
    struct hc_ops_pool *pool;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_budget");
    f.ctl.agent_timeout_ms = 2000;
    svc_standin_start(&f.agent, &f.ctl, f.dir);
    f.db = hc_test_ctl_db_crl(&f.ctl);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_ops_pool_stop(f->pool);
    svc_standin_stop(&f->agent);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    return 0;
}

/* A node that is up: reachable, service running, out of maintenance. n1's agent is the
 * stand-in (its certificate on record, as enrolment leaves it); the others have agents of their
 * own that no test calls (each node has its own URL). */
static void add_node(struct fixture *f, const char *name)
{
    struct hc_error err = {0};
    char url[64];
    int n1 = !strcmp(name, "n1");
    char *pem = n1 ? svc_standin_pem(&f->agent) : strdup("PEM");
    if (n1)
        snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->agent.port);
    else
        snprintf(url, sizeof(url), "https://127.0.0.%d:7444", 100 + name[1] - '0');
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, "
                               "agent_url, cert_serial, cert_pem, joined_at, health, "
                               "service_state, software_version) VALUES ('c-test', ?, "
                               "'127.0.0.1', ?, ?, ?, ?, 'reachable', 'running', '1.0')",
                               "ssssi", name, url, name, pem, hc_now_ms()),
                     1);
    free(pem);
}

static void set_col(struct fixture *f, const char *node, const char *col, const char *value)
{
    struct hc_error err = {0};
    char sql[128];
    snprintf(sql, sizeof(sql), "UPDATE nodes SET %s = ? WHERE name = ?", col);
    assert_int_equal(hc_db_run(f->db, &err, sql, "ss", value, node), 1);
}

static const char *node_col(struct fixture *f, const char *node, const char *col, char *buf,
                            size_t len)
{
    struct hc_error err = {0};
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT %s AS v FROM nodes WHERE name = ?", col);
    json_t *rows = hc_db_query_json(f->db, &err, sql, "s", node);
    assert_non_null(rows);
    snprintf(buf, len, "%s", hc_json_str(json_array_get(rows, 0), "v", ""));
    json_decref(rows);
    return buf;
}

/* --- failure domains (issue 19) ------------------------------------------------------------- */

static int set_admitted(struct fixture *f, const char *const *names, size_t n, int max, int domains,
                        char *msg, size_t len)
{
    struct hc_error err = {0};
    int rc = hc_avail_check_set(f->db, names, n, max, domains, &err);
    snprintf(msg, len, "%s", err.message);
    if (rc < 0) {
        assert_int_equal(err.status, 409);
        assert_string_equal(err.code, HC_ERR_BUDGET);
    }
    return rc == 0;
}

static void test_budget_counts_domains(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char msg[600];
    static const char *const domain[] = {"ra", "ra", "ra", "rb", "rb", NULL};
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof(name), "n%d", i + 1);
        add_node(f, name);
        assert_int_equal(hc_node_set_failure_domain(f->db, name, domain[i], &err), 0);
    }
    set_col(f, "n1", "maintenance", "active");
    /* the rest of ra goes with n1's domain already down: still one domain */
    const char *ra[] = {"n2", "n3"}, *rb[] = {"n4", "n5"}, *n6[] = {"n6"};
    assert_true(set_admitted(f, ra, 2, 1, 1, msg, sizeof(msg)));
    /* counted in nodes, the same set is three down */
    assert_false(set_admitted(f, ra, 2, 2, 0, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "leave 3 node(s) down"));
    assert_true(set_admitted(f, ra, 2, 3, 0, msg, sizeof(msg)));
    /* another domain would be the second */
    assert_false(set_admitted(f, rb, 2, 1, 1, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "leave 2 failure domain(s) down, more than max_unavailable 1"));
    assert_non_null(strstr(msg, "n1 (in maintenance, domain ra)"));
    assert_true(set_admitted(f, rb, 2, 2, 1, msg, sizeof(msg)));
    /* a node without a domain is a domain of its own */
    assert_false(set_admitted(f, n6, 1, 1, 1, msg, sizeof(msg)));
    /* and never the same as a named domain that has its name */
    set_col(f, "n1", "maintenance", "none");
    set_col(f, "n6", "maintenance", "active");
    assert_int_equal(hc_node_set_failure_domain(f->db, "n4", "n6", &err), 0);
    const char *n4[] = {"n4"};
    assert_false(set_admitted(f, n4, 1, 1, 1, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "n6 (in maintenance, domain of its own)"));
    /* the cluster's domains: ra, rb, n6 (named "n6" by n4), n6 alone */
    assert_int_equal(hc_nodes_domain_count(f->db, &err), 4);
}

static void test_rolling_batches(void **state)
{
    (void)state;
    json_t *rows =
        json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}, {s:s}, {s:s, s:s}]", "name", "n1",
                  "failure_domain", "ra", "name", "n2", "failure_domain", "rb", "name", "n3",
                  "failure_domain", "ra", "name", "n4", "name", "n5", "failure_domain", "rb");
    json_t *one = hc_rolling_plan_batches(rows, 1), *two = hc_rolling_plan_batches(rows, 2);
    json_t *want1 = json_loads("[{\"domains\": [\"ra\"], \"nodes\": [\"n1\", \"n3\"]},"
                               " {\"domains\": [\"rb\"], \"nodes\": [\"n2\", \"n5\"]},"
                               " {\"domains\": [\"n4\"], \"nodes\": [\"n4\"]}]",
                               0, NULL);
    json_t *want2 = json_loads("[{\"domains\": [\"ra\", \"rb\"], \"nodes\": [\"n1\", \"n2\", "
                               "\"n3\", \"n5\"]}, {\"domains\": [\"n4\"], \"nodes\": [\"n4\"]}]",
                               0, NULL);
    assert_true(json_equal(one, want1));
    assert_true(json_equal(two, want2));
    /* the engine's batches keep the whole rows */
    json_t *full = hc_rolling_batches(rows, 1);
    assert_string_equal(
        hc_json_str(json_array_get(json_object_get(json_array_get(full, 0), "nodes"), 1),
                    "failure_domain", ""),
        "ra");
    json_t *params = json_pack("{s:s}", "batch", "domain");
    assert_true(hc_rolling_params_domain(params));
    json_object_set_new(params, "batch", json_string("node"));
    assert_false(hc_rolling_params_domain(params));
    json_decref(params);
    json_decref(full);
    json_decref(one);
    json_decref(two);
    json_decref(want1);
    json_decref(want2);
    json_decref(rows);
}

/* --- what counts as down -------------------------------------------------------------------- */

static void test_down_reason(void **state)
{
    /* up: reachable, out of maintenance, the service running or not installed */
    assert_null(hc_avail_down_reason("none", "reachable", "running"));
    assert_null(hc_avail_down_reason("none", "reachable", "not_installed"));
    assert_null(hc_avail_down_reason("none", "reachable", NULL));
    assert_null(hc_avail_down_reason(NULL, "reachable", "running"));
    /* in maintenance in any phase, whatever the rest says (being upgraded is in maintenance) */
    assert_string_equal(hc_avail_down_reason("entering", "reachable", "running"), "in maintenance");
    assert_string_equal(hc_avail_down_reason("active", "reachable", "stopped"), "in maintenance");
    assert_string_equal(hc_avail_down_reason("exiting", "unreachable", "running"),
                        "in maintenance");
    /* unreachable, stalled, or never seen by the poller: down, named by its health */
    assert_string_equal(hc_avail_down_reason("none", "unreachable", "running"), "unreachable");
    assert_string_equal(hc_avail_down_reason("none", "stalled", "running"), "stalled");
    assert_string_equal(hc_avail_down_reason("none", "unknown", "running"), "unknown");
    assert_string_equal(hc_avail_down_reason("none", NULL, "running"), "unknown");
    /* reachable but the service is not serving */
    static const char *const not_running[] = {"stopped", "crashed", "backoff", "starting"};
    for (size_t i = 0; i < sizeof(not_running) / sizeof(not_running[0]); i++)
        assert_string_equal(hc_avail_down_reason("none", "reachable", not_running[i]),
                            "service not running");
}

/* --- the budget against the database ---------------------------------------------------------- */

static void expect_refused(struct fixture *f, const char *node, int max, const char *names)
{
    struct hc_error err = {0};
    assert_int_equal(hc_avail_check(f->db, node, max, &err), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, HC_ERR_BUDGET);
    if (!strstr(err.message, names))
        fail_msg("refusal '%s' does not name '%s'", err.message, names);
    assert_non_null(strstr(err.hint, "max-unavailable"));
}

static void expect_admitted(struct fixture *f, const char *node, int max)
{
    struct hc_error err = {0};
    if (hc_avail_check(f->db, node, max, &err) != 0)
        fail_msg("taking %s down with max_unavailable %d refused: %s", node, max, err.message);
}

static void test_budget_counts_every_reason(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char who[512];
    int down = -1;
    add_node(f, "n1");
    add_node(f, "n2");
    add_node(f, "n3");
    assert_int_equal(hc_avail_down(f->db, NULL, &down, who, sizeof(who), &err), 0);
    assert_int_equal(down, 0);
    assert_string_equal(who, "");
    expect_admitted(f, "n1", 1);

    /* each reason alone spends the one slot of max_unavailable 1 */
    static const char *const reasons[][3] = {
        {"maintenance", "active", "n2 (in maintenance)"},
        {"maintenance", "entering", "n2 (in maintenance)"},
        {"health", "unreachable", "n2 (unreachable)"},
        {"health", "stalled", "n2 (stalled)"},
        {"health", "unknown", "n2 (unknown)"},
        {"service_state", "crashed", "n2 (service not running)"},
        {"service_state", "stopped", "n2 (service not running)"},
    };
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        const char *col = reasons[i][0];
        set_col(f, "n2", col, reasons[i][1]);
        expect_refused(f, "n1", 1, reasons[i][2]);
        expect_admitted(f, "n1", 2); /* one down + n1 = 2 */
        assert_int_equal(hc_avail_down(f->db, "n1", &down, who, sizeof(who), &err), 0);
        assert_int_equal(down, 1);
        set_col(f, "n2", col,
                !strcmp(col, "maintenance") ? "none"
                : !strcmp(col, "health")    ? "reachable"
                                            : "running");
        expect_admitted(f, "n1", 1);
    }

    /* two down for different reasons: max 2 is spent too, and both are named */
    set_col(f, "n2", "maintenance", "active");
    set_col(f, "n3", "health", "unreachable");
    expect_refused(f, "n1", 2, "n2 (in maintenance), n3 (unreachable)");
    expect_admitted(f, "n1", 3);
    assert_int_equal(hc_avail_down(f->db, NULL, &down, who, sizeof(who), &err), 0);
    assert_int_equal(down, 2);
    /* the message counts the node asked about: 3 would be down */
    assert_int_equal(hc_avail_check(f->db, "n1", 2, &err), -1);
    assert_non_null(strstr(err.message, "leave 3 node(s) down, more than max_unavailable 2"));
}

static void test_node_already_down_is_not_counted_twice(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int down = -1;
    char who[256];
    add_node(f, "n1");
    add_node(f, "n2");
    /* n1 itself is down (service crashed): taking it down changes nothing for the budget */
    set_col(f, "n1", "service_state", "crashed");
    expect_admitted(f, "n1", 1);
    /* but it spends the slot of every other node */
    expect_refused(f, "n2", 1, "n1 (service not running)");
    assert_int_equal(hc_avail_down(f->db, "n2", &down, who, sizeof(who), &err), 0);
    assert_int_equal(down, 1);
    assert_string_equal(who, "n1 (service not running)");
}

/* --- maintenance.enter through the pool --------------------------------------------------------
 */

static json_t *enter(struct fixture *f, const char *node, int max, const char *mode,
                     const char *want_state)
{
    struct hc_error err = {0};
    char id[32];
    json_t *params = json_pack("{s:s, s:s, s:b, s:i, s:i}", "node", node, "mode", mode, "force",
                               !strcmp(mode, "none"), "max_unavailable", max, "timeout_ms", 5000);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "maintenance.enter", params, "test", id, &err),
                     0);
    json_decref(params);
    if (!f->pool) {
        f->pool = hc_ops_pool_start(&f->ctl, 1, &err);
        assert_non_null(f->pool);
    }
    hc_ops_pool_kick(f->pool);
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    for (;;) {
        json_t *show = hc_ops_show(f->db, id, &err);
        assert_non_null(show);
        const char *st = hc_json_str(json_object_get(show, "operation"), "state", "");
        if (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "aborted")) {
            if (strcmp(st, want_state) != 0)
                fail_msg("maintenance.enter %s ended %s, want %s", node, st, want_state);
            return show;
        }
        json_decref(show);
        if (hc_mono_ms() > deadline)
            fail_msg("maintenance.enter %s did not end", node);
        usleep(20 * 1000);
    }
}

static const char *op_error(const json_t *show, const char *field)
{
    return hc_json_str(json_object_get(json_object_get(show, "operation"), "error"), field, "");
}

static int calls(struct fixture *f, enum svc_route r)
{
    return atomic_load(&f->agent.calls[r]);
}

static void test_enter_refused_by_budget_touches_nothing(void **state)
{
    struct fixture *f = *state;
    char buf[32];
    add_node(f, "n1");
    add_node(f, "n2");
    set_col(f, "n2", "health", "unreachable");
    json_t *show = enter(f, "n1", 1, "ensure-accessibility", "failed");
    assert_string_equal(op_error(show, "code"), HC_ERR_BUDGET);
    assert_non_null(strstr(op_error(show, "message"), "n2 (unreachable)"));
    json_decref(show);
    /* refused before the service was even asked */
    assert_int_equal(calls(f, SVC_OK_TO_STOP), 0);
    assert_int_equal(calls(f, SVC_DRAIN), 0);
    assert_int_equal(calls(f, SVC_STOP), 0);
    assert_string_equal(node_col(f, "n1", "maintenance", buf, sizeof(buf)), "none");
    /* max_unavailable 2 admits it */
    show = enter(f, "n1", 2, "ensure-accessibility", "succeeded");
    json_decref(show);
    assert_int_equal(calls(f, SVC_OK_TO_STOP), 1);
    assert_int_equal(calls(f, SVC_DRAIN), 1);
    assert_int_equal(calls(f, SVC_STOP), 1);
    assert_string_equal(node_col(f, "n1", "maintenance", buf, sizeof(buf)), "active");
    /* and now n1 in maintenance + n2 unreachable spend max 2: a third node is refused */
    add_node(f, "n3");
    show = enter(f, "n3", 2, "ensure-accessibility", "failed");
    assert_string_equal(op_error(show, "code"), HC_ERR_BUDGET);
    assert_non_null(strstr(op_error(show, "message"), "n1 (in maintenance), n2 (unreachable)"));
    json_decref(show);
    assert_int_equal(calls(f, SVC_STOP), 1);
}

static void test_enter_refused_by_ok_to_stop(void **state)
{
    struct fixture *f = *state;
    char buf[32];
    add_node(f, "n1");
    add_node(f, "n2");
    snprintf(f->agent.refusal, sizeof(f->agent.refusal), "only copy of block b7");
    atomic_store(&f->agent.ok_to_stop, 0);
    json_t *show = enter(f, "n1", 1, "ensure-accessibility", "failed");
    assert_string_equal(op_error(show, "code"), HC_ERR_NOT_OK_TO_STOP);
    assert_non_null(strstr(op_error(show, "message"), "only copy of block b7"));
    assert_non_null(strstr(op_error(show, "hint"), "--mode none --force"));
    json_decref(show);
    assert_int_equal(calls(f, SVC_OK_TO_STOP),
                     1); /* asked once: a maintenance request does not wait */
    assert_int_equal(calls(f, SVC_DRAIN), 0);
    assert_int_equal(calls(f, SVC_STOP), 0);
    assert_string_equal(node_col(f, "n1", "maintenance", buf, sizeof(buf)), "none");

    /* --mode none --force skips the service's answer, not the budget */
    set_col(f, "n2", "maintenance", "active");
    show = enter(f, "n1", 1, "none", "failed");
    assert_string_equal(op_error(show, "code"), HC_ERR_BUDGET);
    json_decref(show);
    set_col(f, "n2", "maintenance", "none");
    show = enter(f, "n1", 1, "none", "succeeded");
    json_decref(show);
    assert_int_equal(calls(f, SVC_OK_TO_STOP), 1);
    assert_int_equal(calls(f, SVC_STOP), 1);
    assert_string_equal(node_col(f, "n1", "maintenance", buf, sizeof(buf)), "active");
    assert_string_equal(node_col(f, "n1", "maintenance_mode", buf, sizeof(buf)), "none");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_down_reason),
        cmocka_unit_test(test_rolling_batches),
        cmocka_unit_test_setup_teardown(test_budget_counts_domains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_counts_every_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_already_down_is_not_counted_twice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_enter_refused_by_budget_touches_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_enter_refused_by_ok_to_stop, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
