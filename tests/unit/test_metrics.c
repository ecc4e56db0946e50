/*
 * Unit tests of the controller's Prometheus metrics (controller/api/metrics.c): gauges read from a
 * real SQLite database (nodes by health, state and maintenance, operations by state, every
 * known value present even at 0), the poll latency histogram (cumulative buckets, +Inf equal
 * to the count, sum), request counters by method and code, label escaping, and the counters
 * fed from several threads at once (the poller and the API thread do that) losing nothing.
 * The text is checked line by line here; e2e (t40_ux.sh) also runs promtool on a live scrape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "controller/api/metrics.h"
#include "db/db.h"

static char dir[512], path[600];

static int setup(void **state)
{
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    struct hc_error err = {0};
    hc_mkdir_p(base, 0755, NULL);
    snprintf(dir, sizeof(dir), "%s/metrics.XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/hcctld.db", dir);
    struct hc_db *db = hc_db_open(path, &err);
    if (!db)
        fail_msg("%s", err.message);
    *state = db;
    hc_metrics_reset();
    return 0;
}

static int teardown(void **state)
{
    hc_db_close(*state);
    char wal[700];
    unlink(path);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", path);
    unlink(wal);
    rmdir(dir);
    return 0;
}

/* The value of the sample whose line starts with "name{labels} " or "name ", or -1. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static char *render(struct hc_db *db)
{
    struct hc_error err = {0};
    char *text = hc_metrics_render(db, NULL, &err);
    if (!text)
        fail_msg("%s", err.message);
    return text;
}

static void add_node(struct hc_db *db, const char *name, const char *health, const char *maint)
{
    struct hc_error err = {0};
    if (hc_db_run(db, &err,
                  "INSERT INTO nodes (cluster_id, name, address, agent_url, cert_serial, cert_pem, "
                  "health, maintenance, joined_at) VALUES ('c1', ?, '127.0.0.2', "
                  "'https://127.0.0.2:7444', '01', 'x', ?, ?, 0)",
                  "sss", name, health, maint) < 0)
        fail_msg("%s", err.message);
}

static void add_op(struct hc_db *db, const char *id, const char *opstate)
{
    struct hc_error err = {0};
    if (hc_db_run(db, &err,
                  "INSERT INTO operations (id, cluster_id, kind, state, created_at, updated_at) "
                  "VALUES (?, 'c1', 'node.remove', ?, 0, 0)",
                  "ss", id, opstate) < 0)
        fail_msg("%s", err.message);
}

static void test_gauges(void **state)
{
    struct hc_db *db = *state;
    struct hc_error err = {0};
    char *text = render(db);
    /* an empty cluster: every known series is there, at 0 */
    assert_true(value_of(text, "hcctld_nodes{health=\"reachable\"}") == 0);
    assert_true(value_of(text, "hcctld_nodes{health=\"stalled\"}") == 0);
    assert_true(value_of(text, "hcctld_operations{state=\"aborted\"}") == 0);
    assert_non_null(strstr(text, "# TYPE hcctld_nodes gauge\n"));
    assert_non_null(strstr(text, "# TYPE hcctld_agent_poll_latency_seconds histogram\n"));
    assert_non_null(strstr(text, "hcctld_build_info{version=\"" HC_VERSION "\"} 1\n"));
    free(text);
    assert_true(hc_db_run(db, &err,
                          "INSERT INTO clusters (id, name, created_at) VALUES "
                          "('c1', 'test', 0)",
                          "") >= 0);
    add_node(db, "n1", "reachable", "none");
    add_node(db, "n2", "reachable", "none");
    add_node(db, "n3", "unreachable", "entered");
    add_node(db, "n4", "we\"ird\\", "none"); /* a value the controller does not know yet */
    add_op(db, "op-1", "succeeded");
    add_op(db, "op-2", "succeeded");
    add_op(db, "op-3", "running");
    text = render(db);
    assert_true(value_of(text, "hcctld_nodes{health=\"reachable\"}") == 2);
    assert_true(value_of(text, "hcctld_nodes{health=\"unreachable\"}") == 1);
    assert_true(value_of(text, "hcctld_nodes{health=\"unknown\"}") == 0);
    assert_true(value_of(text, "hcctld_nodes{health=\"we\\\"ird\\\\\"}") == 1);
    assert_true(value_of(text, "hcctld_nodes_by_state{state=\"joined\"}") == 4);
    assert_true(value_of(text, "hcctld_nodes_by_maintenance{maintenance=\"entered\"}") == 1);
    assert_true(value_of(text, "hcctld_operations{state=\"succeeded\"}") == 2);
    assert_true(value_of(text, "hcctld_operations{state=\"running\"}") == 1);
    assert_true(value_of(text, "hcctld_operations{state=\"failed\"}") == 0);
    free(text);
}

static void test_histogram_and_requests(void **state)
{
    struct hc_db *db = *state;
    hc_metrics_agent_poll(1, 3); /* 0.003 s: le 0.005 */
    hc_metrics_agent_poll(1, 3);
    hc_metrics_agent_poll(1, 200);   /* le 0.25 */
    hc_metrics_agent_poll(1, 60000); /* above every bucket: only +Inf */
    hc_metrics_agent_poll(0, 0);
    hc_metrics_api_request("GET", 200);
    hc_metrics_api_request("GET", 200);
    hc_metrics_api_request("POST", 409);
    hc_metrics_api_request("BREW", 418);
    hc_metrics_api_request("GET", 42); /* not a status: ignored */
    char *text = render(db);
    const char *b = "hcctld_agent_poll_latency_seconds_bucket";
    char series[128];
    snprintf(series, sizeof(series), "%s{le=\"0.0025\"}", b);
    assert_true(value_of(text, series) == 0);
    snprintf(series, sizeof(series), "%s{le=\"0.005\"}", b);
    assert_true(value_of(text, series) == 2);
    snprintf(series, sizeof(series), "%s{le=\"0.1\"}", b);
    assert_true(value_of(text, series) == 2);
    snprintf(series, sizeof(series), "%s{le=\"0.25\"}", b);
    assert_true(value_of(text, series) == 3);
    snprintf(series, sizeof(series), "%s{le=\"5\"}", b);
    assert_true(value_of(text, series) == 3);
    snprintf(series, sizeof(series), "%s{le=\"+Inf\"}", b);
    assert_true(value_of(text, series) == 4);
    assert_true(value_of(text, "hcctld_agent_poll_latency_seconds_count") == 4);
    double sum = value_of(text, "hcctld_agent_poll_latency_seconds_sum");
    assert_true(sum > 60.2059 && sum < 60.2061);
    assert_true(value_of(text, "hcctld_agent_polls_total{result=\"failed\"}") == 1);
    assert_true(value_of(text, "hcctld_agent_polls_total{result=\"ok\"}") == 4);
    assert_true(value_of(text, "hcctld_api_requests_total{method=\"GET\",code=\"200\"}") == 2);
    assert_true(value_of(text, "hcctld_api_requests_total{method=\"POST\",code=\"409\"}") == 1);
    assert_true(value_of(text, "hcctld_api_requests_total{method=\"other\",code=\"418\"}") == 1);
    assert_null(strstr(text, "code=\"42\""));
    free(text);
}

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        hc_metrics_agent_poll(1, i % 50);
        hc_metrics_api_request("GET", 200);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct hc_db *db = *state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
    /* scrapes while the counters move: +Inf always equals the count */
    for (int k = 0; k < 20; k++) {
        char *text = render(db);
        assert_true(value_of(text, "hcctld_agent_poll_latency_seconds_bucket{le=\"+Inf\"}") ==
                    value_of(text, "hcctld_agent_poll_latency_seconds_count"));
        free(text);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *text = render(db);
    assert_true(value_of(text, "hcctld_agent_poll_latency_seconds_count") == 80000);
    assert_true(value_of(text, "hcctld_api_requests_total{method=\"GET\",code=\"200\"}") == 80000);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gauges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_histogram_and_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
