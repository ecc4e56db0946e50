/*
 * Unit tests of the operations framework (controller/ops/ops.c) on a real SQLite file: submission
 * and the cluster lease, the worker pool, steps, pause/resume/abort, crash recovery, and the
 * rule that a terminal state is never overwritten. Test kinds count their calls so that the
 * tests can tell a skipped step from a re-run one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/constants.h"
#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/ops.h"
#include "db/db.h"

#define WAIT_MS 15000

static atomic_int first_calls, second_calls, slow_runs, slow_returns, slow_running, slow_done;

struct fixture {
    char dir[512];
    struct hc_controller ctl;
    struct hc_db *db;
};

/* --- test kinds ---------------------------------------------------------------------------- */

static int step_first(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    atomic_fetch_add(&first_calls, 1);
    snprintf(detail, len, "first done");
    return 0;
}

static int step_second(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    atomic_fetch_add(&second_calls, 1);
    return 0;
}

static enum hc_op_result run_ok(struct hc_op_ctx *ctx, struct hc_error *err)
{
    enum hc_op_result r;
    if (hc_op_step(ctx, "n1", "first", step_first, NULL, err) != 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    if (hc_op_step(ctx, "n1", "second", step_second, NULL, err) != 0)
        return HC_OP_FAILED;
    return HC_OP_SUCCEEDED;
}

static int step_boom(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    hc_error_set_wire(err, 500, "test_failure", "step boom failed on purpose");
    return hc_error_hint(err, "nothing to do, it is a test");
}

static enum hc_op_result run_fail(struct hc_op_ctx *ctx, struct hc_error *err)
{
    if (hc_op_step(ctx, NULL, "boom", step_boom, NULL, err) != 0)
        return HC_OP_FAILED;
    return HC_OP_SUCCEEDED;
}

/* Works until the test sets slow_done, checking for pause/abort/stop every 10 ms. */
static enum hc_op_result run_slow(struct hc_op_ctx *ctx, struct hc_error *err)
{
    enum hc_op_result r;
    atomic_fetch_add(&slow_runs, 1);
    atomic_store(&slow_running, 1);
    hc_op_waiting(ctx, "the test to set slow_done");
    while ((r = hc_op_checkpoint(ctx)) == HC_OP_SUCCEEDED && !atomic_load(&slow_done))
        usleep(10 * 1000);
    atomic_store(&slow_running, 0);
    atomic_fetch_add(&slow_returns, 1);
    return r;
}

static const struct hc_op_kind kind_ok = {"test.ok", 0, run_ok};
static const struct hc_op_kind kind_fail = {"test.fail", 0, run_fail};
static const struct hc_op_kind kind_slow = {"test.slow", 1, run_slow};
static const struct hc_op_kind *const test_kinds[] = {&kind_ok, &kind_fail, &kind_slow, NULL};

/* --- helpers ------------------------------------------------------------------------------- */

static int setup(void **state)
{
    static struct fixture f;
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    struct hc_error err = {0};
    memset(&f, 0, sizeof(f));
    assert_int_equal(hc_mkdir_p(base, 0700, &err), 0);
    snprintf(f.dir, sizeof(f.dir), "%s/test_ops.XXXXXX", base);
    assert_non_null(mkdtemp(f.dir));
    snprintf(f.ctl.data_dir, sizeof(f.ctl.data_dir), "%s", f.dir);
    snprintf(f.ctl.db_path, sizeof(f.ctl.db_path), "%s/hcctld.db", f.dir);
    snprintf(f.ctl.cluster_id, sizeof(f.ctl.cluster_id), "c-test");
    f.db = hc_db_open(f.ctl.db_path, &err);
    assert_non_null(f.db);
    assert_int_equal(hc_db_run(f.db, &err,
                               "INSERT INTO clusters (id, name, created_at) VALUES (?, ?, ?)",
                               "ssi", "c-test", "test", hc_now_ms()),
                     1);
    hc_ops_test_kinds(test_kinds);
    atomic_store(&first_calls, 0);
    atomic_store(&second_calls, 0);
    atomic_store(&slow_runs, 0);
    atomic_store(&slow_returns, 0);
    atomic_store(&slow_running, 0);
    atomic_store(&slow_done, 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    static const char *const files[] = {"hcctld.db", "hcctld.db-wal", "hcctld.db-shm"};
    hc_db_close(f->db);
    for (size_t i = 0; i < HC_ARRAY_LEN(files); i++) {
        char *p = hc_path_join(f->dir, files[i]);
        unlink(p);
        free(p);
    }
    rmdir(f->dir);
    return 0;
}

/* Current state of op id ("" when absent). */
static void op_state(struct fixture *f, const char *id, char out[32])
{
    struct hc_error err = {0};
    json_t *rows =
        hc_db_query_json(f->db, &err, "SELECT state FROM operations WHERE id = ?", "s", id);
    assert_non_null(rows);
    snprintf(out, 32, "%s", hc_json_str(json_array_get(rows, 0), "state", ""));
    json_decref(rows);
}

/* Waits until op id is in state want; fails the test after WAIT_MS. */
static void wait_state(struct fixture *f, const char *id, const char *want)
{
    char state[32] = "";
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    while (hc_mono_ms() < deadline) {
        op_state(f, id, state);
        if (strcmp(state, want) == 0)
            return;
        usleep(10 * 1000);
    }
    fail_msg("operation %s is %s, not %s after %d ms", id, state, want, WAIT_MS);
}

static void wait_flag(atomic_int *flag, int want)
{
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    while (atomic_load(flag) != want && hc_mono_ms() < deadline)
        usleep(5 * 1000);
    assert_int_equal(atomic_load(flag), want);
}

static int64_t count(struct fixture *f, const char *sql, const char *id)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err, sql, id ? "s" : "", id);
    assert_non_null(rows);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}

static int64_t lease_rows(struct fixture *f)
{
    return count(f, "SELECT COUNT(*) AS n FROM cluster_lease", NULL);
}

static int64_t events_of(struct fixture *f, const char *id, const char *type, const char *to)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT COUNT(*) AS n FROM events WHERE op_id = ? AND type = ? "
                                    "AND (? IS NULL OR json_extract(details_json, '$.to') = ?)",
                                    "ssss", id, type, to, to);
    assert_non_null(rows);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}

static void submit(struct fixture *f, const char *kind, char id[32])
{
    struct hc_error err = {0};
    json_t *params = json_pack("{s:s}", "node", "n1");
    int rc = hc_ops_submit(f->db, "c-test", kind, params, "test-token", id, &err);
    json_decref(params);
    if (rc != 0)
        fail_msg("submit %s: %s", kind, err.message);
    assert_int_equal(strncmp(id, "op-", 3), 0);
    assert_int_equal(strlen(id), 15);
}

static struct hc_ops_pool *pool_start(struct fixture *f, int n)
{
    struct hc_error err = {0};
    struct hc_ops_pool *pool = hc_ops_pool_start(&f->ctl, n, &err);
    if (!pool)
        fail_msg("pool start: %s", err.message);
    return pool;
}

static void control(struct fixture *f, const char *id, const char *action, int want_status,
                    const char *want_in_message)
{
    struct hc_error err = {0};
    int rc = hc_ops_control(f->db, id, action, &err);
    if (want_status == 0) {
        if (rc != 0)
            fail_msg("%s %s: %s", action, id, err.message);
        return;
    }
    assert_int_equal(rc, -1);
    assert_int_equal(err.status, want_status);
    if (want_in_message && !strstr(err.message, want_in_message))
        fail_msg("%s %s: message '%s' lacks '%s'", action, id, err.message, want_in_message);
}

/* --- tests --------------------------------------------------------------------------------- */

static void test_ok_runs_with_steps(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    submit(f, "test.ok", id);
    struct hc_ops_pool *pool = pool_start(f, 2);
    hc_ops_pool_kick(pool);
    wait_state(f, id, "succeeded");
    hc_ops_pool_stop(pool);

    assert_int_equal(atomic_load(&first_calls), 1);
    assert_int_equal(atomic_load(&second_calls), 1);
    json_t *show = hc_ops_show(f->db, id, &err);
    assert_non_null(show);
    json_t *op = json_object_get(show, "operation");
    json_t *steps = json_object_get(show, "steps");
    assert_string_equal(hc_json_str(op, "id", ""), id);
    assert_string_equal(hc_json_str(op, "kind", ""), "test.ok");
    assert_string_equal(hc_json_str(op, "state", ""), "succeeded");
    assert_true(json_is_false(json_object_get(op, "disruptive")));
    assert_string_equal(hc_json_str(json_object_get(op, "params"), "node", ""), "n1");
    assert_string_equal(hc_json_str(op, "requested_by", ""), "test-token");
    assert_true(json_is_null(json_object_get(op, "error")));
    assert_true(json_is_null(json_object_get(op, "waiting_on")));
    /* finished: no "step X on N" left to suggest it still runs (the keys stay, null) */
    assert_true(json_is_null(json_object_get(json_object_get(op, "progress"), "step")));
    assert_true(json_is_null(json_object_get(json_object_get(op, "progress"), "node")));
    for (const char *const *k =
             (const char *const[]){"created_at", "started_at", "finished_at", NULL};
         *k; k++) {
        const char *t = hc_json_str(op, *k, "");
        assert_int_equal(strlen(t), 24); /* 2026-11-29T18:54:36.123Z */
        assert_int_equal(t[23], 'Z');
    }
    assert_int_equal(json_array_size(steps), 2);
    json_t *s1 = json_array_get(steps, 0), *s2 = json_array_get(steps, 1);
    assert_int_equal(hc_json_int(s1, "seq", 0), 1);
    assert_string_equal(hc_json_str(s1, "step", ""), "first");
    assert_string_equal(hc_json_str(s1, "node", ""), "n1");
    assert_string_equal(hc_json_str(s1, "state", ""), "succeeded");
    assert_int_equal(hc_json_int(s1, "attempts", 0), 1);
    assert_string_equal(hc_json_str(s1, "detail", ""), "first done");
    assert_true(json_is_string(json_object_get(s1, "finished_at")));
    assert_int_equal(hc_json_int(s2, "seq", 0), 2);
    assert_string_equal(hc_json_str(s2, "step", ""), "second");
    assert_true(json_is_null(json_object_get(s2, "detail")));
    json_decref(show);

    assert_int_equal(events_of(f, id, "op.created", NULL), 1);
    assert_int_equal(events_of(f, id, "op.state", "running"), 1);
    assert_int_equal(events_of(f, id, "op.state", "succeeded"), 1);
}

static void test_fail_records_error(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    submit(f, "test.fail", id);
    struct hc_ops_pool *pool = pool_start(f, 1);
    wait_state(f, id, "failed");
    hc_ops_pool_stop(pool);

    json_t *show = hc_ops_show(f->db, id, &err);
    assert_non_null(show);
    json_t *e = json_object_get(json_object_get(show, "operation"), "error");
    assert_string_equal(hc_json_str(e, "code", ""), "test_failure");
    assert_string_equal(hc_json_str(e, "message", ""), "step boom failed on purpose");
    assert_string_equal(hc_json_str(e, "hint", ""), "nothing to do, it is a test");
    json_t *step = json_array_get(json_object_get(show, "steps"), 0);
    assert_true(json_is_null(json_object_get(step, "node")));
    assert_string_equal(hc_json_str(step, "state", ""), "failed");
    assert_string_equal(hc_json_str(step, "detail", ""), "step boom failed on purpose");
    json_decref(show);
    assert_int_equal(events_of(f, id, "op.state", "failed"), 1);
}

static void test_submit_rejects_bad_input(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    assert_int_equal(hc_ops_submit(f->db, "c-test", "no.such.kind", NULL, NULL, id, &err), -1);
    assert_int_equal(err.status, 400);
    json_t *arr = json_array();
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.ok", arr, NULL, id, &err), -1);
    assert_int_equal(err.status, 400);
    json_decref(arr);
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM operations", NULL), 0);
}

static void test_lease_one_disruptive(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char a[32], b[32], ok[32];
    submit(f, "test.slow", a);
    assert_int_equal(lease_rows(f), 1);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.slow", NULL, NULL, b, &err), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, HC_ERR_CONFLICT);
    assert_non_null(strstr(err.message, a));
    assert_non_null(strstr(err.message, "test.slow"));
    char hint[128];
    snprintf(hint, sizeof(hint), "hcctl operation wait %s", a);
    assert_non_null(strstr(err.hint, hint));
    submit(f, "test.ok", ok); /* not disruptive: allowed next to it */
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM operations", NULL), 2);

    struct hc_ops_pool *pool = pool_start(f, 2);
    wait_state(f, ok, "succeeded");
    wait_flag(&slow_running, 1);
    assert_int_equal(lease_rows(f), 1);
    atomic_store(&slow_done, 1);
    wait_state(f, a, "succeeded");
    assert_int_equal(lease_rows(f), 0);
    submit(f, "test.slow", b);
    hc_ops_pool_kick(pool);
    wait_state(f, b, "succeeded");
    assert_int_equal(lease_rows(f), 0);
    hc_ops_pool_stop(pool);
}

/* A node whose agent speaks api (-1: reported none, i.e. API 1). */
static void add_node(struct fixture *f, const char *name, int api)
{
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, joined_at, health, agent_version, "
                               "agent_api_version) VALUES ('c-test', ?, '127.0.0.1', ?, ?, 'x', "
                               "?, 'reachable', '0.1.0', NULLIF(?, -1))",
                               "sssii", name, name, name, hc_now_ms(), (int64_t)api),
                     1);
}

/* The agent API skew (docs/agent-upgrade.md): a disruptive kind is refused while an agent it
 * would drive is outside [current - 1, current]; agent.upgrade and non-disruptive kinds are not;
 * an operation naming a node looks at that node only; a forced node.remove is let through. */
static void test_agent_api_gate(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    add_node(f, "n1", HC_AGENT_API_VERSION);
    add_node(f, "n2", -1); /* one behind: driven */
    submit(f, "test.slow", id);
    assert_int_equal(hc_ops_control(f->db, id, "abort", &err), 0);
    add_node(f, "n3", HC_AGENT_API_VERSION - 2);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.slow", NULL, NULL, id, &err), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, "agent_api_unsupported");
    assert_non_null(strstr(err.message, "node 'n3' speaks agent API 0"));
    assert_non_null(strstr(err.hint, "hcctl agent upgrade --to"));
    int64_t before = count(f, "SELECT COUNT(*) AS n FROM operations", NULL);
    json_t *on_n1 = json_pack("{s:s}", "node", "n1"), *on_n3 = json_pack("{s:s}", "node", "n3");
    memset(&err, 0, sizeof(err));
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.slow", on_n3, NULL, id, &err), -1);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.slow", on_n1, NULL, id, &err), 0);
    assert_int_equal(hc_ops_control(f->db, id, "abort", &err), 0);
    submit(f, "test.ok", id); /* not disruptive */
    json_t *to = json_pack("{s:s}", "to_version", "9.9");
    assert_int_equal(hc_ops_submit(f->db, "c-test", "agent.upgrade", to, NULL, id, &err), 0);
    assert_int_equal(hc_ops_control(f->db, id, "abort", &err), 0);
    json_t *forced = json_pack("{s:s, s:b}", "node", "n3", "force", 1);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "node.remove", forced, NULL, id, &err), 0);
    assert_int_equal(hc_ops_control(f->db, id, "abort", &err), 0);
    json_object_set_new(forced, "force", json_false());
    assert_int_equal(hc_ops_submit(f->db, "c-test", "node.remove", forced, NULL, id, &err), -1);
    assert_string_equal(err.code, "agent_api_unsupported");
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM operations", NULL), before + 4);
    json_decref(on_n1);
    json_decref(on_n3);
    json_decref(to);
    json_decref(forced);
}

static void test_stale_lease_replaced(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    int64_t now = hc_now_ms();
    /* A lease row left by an operation that ended (a hand-edited or damaged database). */
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO operations (id, cluster_id, kind, state, disruptive, "
                               "created_at, updated_at, finished_at) VALUES ('op-000000000old', "
                               "'c-test', 'test.slow', 'failed', 1, ?, ?, ?)",
                               "iii", now, now, now),
                     1);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO cluster_lease VALUES ('c-test', 'op-000000000old', ?)",
                               "i", now),
                     1);
    submit(f, "test.slow", id);
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM cluster_lease WHERE op_id = ?", id), 1);
    assert_int_equal(lease_rows(f), 1);
}

static void test_control_transitions(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char x[32], y[32], z[32], state_now[32];
    submit(f, "test.slow", x); /* no pool: the operation stays where control puts it */
    control(f, x, "pause", 0, NULL);
    op_state(f, x, state_now);
    assert_string_equal(state_now, "paused");
    control(f, x, "pause", 409, "paused");
    control(f, x, "resume", 0, NULL);
    op_state(f, x, state_now);
    assert_string_equal(state_now, "pending");
    control(f, x, "resume", 409, "pending");
    control(f, x, "pause", 0, NULL);
    assert_int_equal(lease_rows(f), 1); /* paused still holds the lease */
    control(f, x, "abort", 0, NULL);
    op_state(f, x, state_now);
    assert_string_equal(state_now, "aborted");
    assert_int_equal(lease_rows(f), 0);
    assert_int_equal(events_of(f, x, "op.state", "aborted"), 1);
    json_t *show = hc_ops_show(f->db, x, &err);
    assert_true(json_is_string(json_object_get(json_object_get(show, "operation"), "finished_at")));
    json_decref(show);

    control(f, "op-doesnotexist", "pause", 404, "op-doesnotexist");
    control(f, x, "explode", 400, "explode");

    /* A paused disruptive operation keeps others out, and the refusal names its state. */
    submit(f, "test.slow", y);
    control(f, y, "pause", 0, NULL);
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.slow", NULL, NULL, z, &err), -1);
    assert_int_equal(err.status, 409);
    assert_non_null(strstr(err.message, y));
    assert_non_null(strstr(err.message, "paused"));
    control(f, y, "abort", 0, NULL);
}

static void test_terminal_never_overwritten(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char x[32], y[32], state_now[32];
    submit(f, "test.slow", x);
    control(f, x, "abort", 0, NULL);
    control(f, x, "abort", 409, "aborted");
    control(f, x, "pause", 409, "aborted");
    control(f, x, "resume", 409, "aborted");
    op_state(f, x, state_now);
    assert_string_equal(state_now, "aborted");

    /* A running operation whose row turns terminal behind the worker's back (here: by hand)
     * stops at its next checkpoint, and the worker's outcome does not overwrite the row. */
    submit(f, "test.slow", y);
    struct hc_ops_pool *pool = pool_start(f, 1);
    wait_flag(&slow_running, 1);
    assert_int_equal(hc_db_run(f->db, &err,
                               "UPDATE operations SET state = 'failed', error_code = 'by_hand', "
                               "error_message = 'set by the test' WHERE id = ?",
                               "s", y),
                     1);
    wait_flag(&slow_returns, 1);
    hc_ops_pool_stop(pool); /* joins the worker, so its outcome is written by now */
    op_state(f, y, state_now);
    assert_string_equal(state_now, "failed");
    assert_int_equal(count(f,
                           "SELECT COUNT(*) AS n FROM operations WHERE error_code = 'by_hand' "
                           "AND id = ?",
                           y),
                     1);
    assert_int_equal(events_of(f, y, "op.state", "aborted"), 0);
    assert_int_equal(atomic_load(&slow_runs), 1);
}

static void test_pause_resume_abort_running(void **state)
{
    struct fixture *f = *state;
    char id[32], state_now[32];
    submit(f, "test.slow", id);
    struct hc_ops_pool *pool = pool_start(f, 2);
    wait_flag(&slow_running, 1);
    control(f, id, "resume", 409, "running");
    control(f, id, "pause", 0, NULL);
    wait_state(f, id, "paused");
    wait_flag(&slow_running, 0);
    assert_int_equal(lease_rows(f), 1);
    control(f, id, "resume", 0, NULL);
    hc_ops_pool_kick(pool);
    wait_flag(&slow_running, 1);
    assert_int_equal(atomic_load(&slow_runs), 2);
    control(f, id, "abort", 0, NULL);
    control(f, id, "pause", 409, "abort"); /* "being aborted", or "aborted" if already honoured */
    wait_state(f, id, "aborted");
    assert_int_equal(lease_rows(f), 0);
    hc_ops_pool_stop(pool);
    op_state(f, id, state_now);
    assert_string_equal(state_now, "aborted");
    assert_int_equal(atomic_load(&slow_runs), 2);
}

static void test_crash_recovery_skips_done_steps(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    const char *id = "op-0123456789ab";
    /* What a controller killed between the two steps of test.ok leaves behind. */
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO operations (id, cluster_id, kind, params_json, state, "
                               "lease_holder, created_at, started_at, updated_at) VALUES "
                               "(?, 'c-test', 'test.ok', '{}', 'running', 'hcctld-1/worker-0', "
                               "?, ?, ?)",
                               "siii", id, now, now, now),
                     1);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO operation_steps (op_id, seq, node, step, state, "
                               "attempts, started_at, finished_at, detail) VALUES "
                               "(?, 1, 'n1', 'first', 'succeeded', 1, ?, ?, 'first done')",
                               "sii", id, now, now),
                     1);
    struct hc_ops_pool *pool = pool_start(f, 2);
    wait_state(f, id, "succeeded");
    hc_ops_pool_stop(pool);
    assert_int_equal(atomic_load(&first_calls), 0);
    assert_int_equal(atomic_load(&second_calls), 1);
    assert_int_equal(events_of(f, id, "op.resumed", NULL), 1);
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM operation_steps WHERE op_id = ?", id), 2);
    assert_int_equal(count(f,
                           "SELECT attempts AS n FROM operation_steps WHERE op_id = ? "
                           "AND step = 'first'",
                           id),
                     1);
}

static void test_stop_leaves_running_for_next_start(void **state)
{
    struct fixture *f = *state;
    char id[32], state_now[32];
    submit(f, "test.slow", id);
    struct hc_ops_pool *pool = pool_start(f, 1);
    wait_flag(&slow_running, 1);
    hc_ops_pool_stop(pool); /* the run sees the stop at its checkpoint */
    op_state(f, id, state_now);
    assert_string_equal(state_now, "running");
    assert_int_equal(lease_rows(f), 1);

    pool = pool_start(f, 1);
    wait_flag(&slow_running, 1);
    assert_int_equal(atomic_load(&slow_runs), 2);
    assert_int_equal(events_of(f, id, "op.resumed", NULL), 1);
    atomic_store(&slow_done, 1);
    wait_state(f, id, "succeeded");
    hc_ops_pool_stop(pool);
    assert_int_equal(lease_rows(f), 0);
}

static void test_recovery_honours_pending_controls(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    /* Killed after a user asked for pause (a) and abort (b) but before the worker saw it. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(hc_db_run(f->db, &err,
                                   "INSERT INTO operations (id, cluster_id, kind, state, control, "
                                   "created_at, updated_at) VALUES (?, 'c-test', 'test.ok', "
                                   "'running', ?, ?, ?)",
                                   "ssii", i ? "op-00000000000b" : "op-00000000000a",
                                   i ? "abort" : "pause", now, now),
                         1);
    struct hc_ops_pool *pool = pool_start(f, 1);
    hc_ops_pool_stop(pool);
    char s[32];
    op_state(f, "op-00000000000a", s);
    assert_string_equal(s, "paused");
    op_state(f, "op-00000000000b", s);
    assert_string_equal(s, "aborted");
    assert_int_equal(atomic_load(&first_calls), 0);
}

static void test_list_and_active(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char a[32], b[32];
    submit(f, "test.ok", a);
    usleep(3 * 1000); /* distinct created_at */
    submit(f, "test.slow", b);
    control(f, a, "abort", 0, NULL);

    json_t *all = hc_ops_list(f->db, NULL, &err);
    assert_non_null(all);
    json_t *ops = json_object_get(all, "operations");
    assert_int_equal(json_array_size(ops), 2);
    assert_string_equal(hc_json_str(json_array_get(ops, 0), "id", ""), b); /* newest first */
    assert_true(json_is_true(json_object_get(json_array_get(ops, 0), "disruptive")));
    assert_true(json_is_null(json_object_get(json_array_get(ops, 0), "started_at")));
    json_decref(all);

    json_t *aborted = hc_ops_list(f->db, "aborted", &err);
    assert_int_equal(json_array_size(json_object_get(aborted, "operations")), 1);
    json_decref(aborted);
    assert_null(hc_ops_list(f->db, "sleeping", &err));
    assert_int_equal(err.status, 400);

    json_t *active = hc_ops_active(f->db, &err);
    assert_int_equal(json_array_size(active), 1);
    assert_string_equal(hc_json_str(json_array_get(active, 0), "id", ""), b);
    json_decref(active);
    assert_null(hc_ops_show(f->db, "op-nothere00000", &err));
    assert_int_equal(err.status, 404);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ok_runs_with_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_records_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_rejects_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_one_disruptive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_api_gate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_lease_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_transitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminal_never_overwritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pause_resume_abort_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_recovery_skips_done_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_leaves_running_for_next_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovery_honours_pending_controls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_and_active, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
