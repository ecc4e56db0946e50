/*
 * Fail at call N for SQLite writes (issue 12; the SQLite way: enumerate, don't sample). The
 * database's fault hook (db/db.h hc_db_fault_set) makes the N-th write from now on fail with
 * SQLITE_FULL or SQLITE_IOERR. For every N, until a run in which the fault no longer fires, a
 * maintenance cycle (maintenance.enter then maintenance.exit of one node, the real operations
 * through the real pool, against a stand-in agent) runs on a fresh database, and then:
 *   - every operation has ended (failed, or succeeded when the write that failed was retried
 *     or not needed), none is left pending or running;
 *   - an operation that failed names the cause ("database or disk is full" / "disk I/O error");
 *   - PRAGMA integrity_check is ok;
 *   - nothing is half-written (the invariants of controller/ops/ops.c and op_maintenance.c):
 *     every operation has its op.created event; its last op.state event names its state; a
 *     terminal operation has finished_at, holds no cluster lease and has no step left running;
 *     a lease row names an operation that has not ended; a node in maintenance 'active' has
 *     maintenance.entered as its last maintenance event, a node out of maintenance has none or
 *     maintenance.exited; a submission that failed left no operation, lease or event.
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
#include "controller/api/crl.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/ops/test_hooks.h"
#include "db/db.h"
#include "tests/unit/support/svc_standin.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 8000
#define MAX_N 2000

struct fixture {
    char dir[512];
    struct hc_controller ctl;
    struct svc_standin agent;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_db_faults");
    f.ctl.agent_timeout_ms = 2000;
    svc_standin_start(&f.agent, &f.ctl, f.dir);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_db_fault_set(-1, 0);
    svc_standin_stop(&f->agent);
    hc_test_rmtree(f->dir);
    return 0;
}

/* A new database: the cluster and two nodes that are up, both served by the stand-in. */
static struct hc_db *fresh_db(struct fixture *f)
{
    struct hc_error err = {0};
    char path[1200], url[64];
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", f->ctl.db_path, suffixes[i]);
        unlink(path);
    }
    struct hc_db *db = hc_test_ctl_db(&f->ctl);
    /* n1's agent is the stand-in (its certificate on record, as enrolment leaves it); n2 has
     * an agent of its own that the cycle never calls */
    char *pem = svc_standin_pem(&f->agent);
    for (int i = 1; i <= 2; i++) {
        char name[8];
        snprintf(name, sizeof(name), "n%d", i);
        if (i == 1)
            snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->agent.port);
        else
            snprintf(url, sizeof(url), "https://127.0.0.102:7444");
        assert_int_equal(hc_db_run(db, &err,
                                   "INSERT INTO nodes (cluster_id, name, address, "
                                   "agent_url, cert_serial, cert_pem, joined_at, health, "
                                   "service_state, software_version) VALUES ('c-test', ?, "
                                   "'127.0.0.1', ?, ?, ?, ?, 'reachable', 'running', '1.0')",
                                   "ssssi", name, url, name, i == 1 ? pem : "PEM", hc_now_ms()),
                         1);
    }
    free(pem);
    assert_int_equal(hc_crl_write(&f->ctl, db, &err), 0);
    return db;
}

static int64_t count(struct hc_db *db, const char *sql, const char *arg)
{
    struct hc_error err = {0};
    json_t *rows =
        arg ? hc_db_query_json(db, &err, sql, "s", arg) : hc_db_query_json(db, &err, sql, "");
    if (!rows)
        fail_msg("%s: %s", sql, err.message);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}

static int terminal(const char *state)
{
    return !strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "aborted");
}

/* Submits a maintenance operation of n1 and waits until it ends. Returns its state ("" when
 * the submission failed: then err names the cause). */
static void run_op(struct hc_db *db, struct hc_ops_pool *pool, const char *kind, char state[16],
                   const char *cause, long n)
{
    struct hc_error err = {0};
    char id[32];
    json_t *params = json_pack("{s:s, s:i}", "node", "n1", "timeout_ms", 3000);
    int rc = hc_ops_submit(db, "c-test", kind, params, "test", id, &err);
    json_decref(params);
    state[0] = '\0';
    if (rc != 0) {
        if (!strstr(err.message, cause))
            fail_msg("N=%ld: submit of %s failed without naming '%s': %s", n, kind, cause,
                     err.message);
        return;
    }
    hc_ops_pool_kick(pool);
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    for (;;) {
        json_t *rows = hc_db_query_json(db, &err,
                                        "SELECT state, error_message FROM operations "
                                        "WHERE id = ?",
                                        "s", id);
        assert_non_null(rows);
        const json_t *row = json_array_get(rows, 0);
        snprintf(state, 16, "%s", hc_json_str(row, "state", "?"));
        if (terminal(state)) {
            const char *msg = hc_json_str(row, "error_message", "");
            if (!strcmp(state, "failed") && !strstr(msg, cause))
                fail_msg("N=%ld: %s failed without naming '%s': %s", n, kind, cause, msg);
            if (strcmp(state, "failed") != 0 && strcmp(state, "succeeded") != 0)
                fail_msg("N=%ld: %s ended %s", n, kind, state);
            json_decref(rows);
            return;
        }
        json_decref(rows);
        if (hc_mono_ms() > deadline)
            fail_msg("N=%ld: %s %s still %s after %d ms", n, kind, id, state, WAIT_MS);
        usleep(10 * 1000);
    }
}

/* The invariants of the header comment, on the database as the run left it. */
static void check_invariants(struct hc_db *db, long n)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(db, &err, "PRAGMA integrity_check", "");
    assert_non_null(rows);
    const char *ok = hc_json_str(json_array_get(rows, 0), "integrity_check", "");
    if (strcmp(ok, "ok") != 0)
        fail_msg("N=%ld: integrity_check: %s", n, ok);
    json_decref(rows);

    static const struct {
        const char *what, *sql;
    } zero[] = {
        {"operation without its op.created event",
         "SELECT COUNT(*) AS n FROM operations o WHERE NOT EXISTS (SELECT 1 FROM events e "
         "WHERE e.op_id = o.id AND e.type = 'op.created')"},
        {"operation whose last op.state event does not name its state",
         "SELECT COUNT(*) AS n FROM operations o WHERE o.state != 'pending' AND o.state IS NOT "
         "(SELECT json_extract(e.details_json, '$.to') FROM events e WHERE e.op_id = o.id AND "
         "e.type = 'op.state' ORDER BY e.id DESC LIMIT 1)"},
        {"pending operation with an op.state event after its creation that is not a return "
         "to pending",
         "SELECT COUNT(*) AS n FROM operations o WHERE o.state = 'pending' AND EXISTS (SELECT 1 "
         "FROM events e WHERE e.op_id = o.id AND e.type = 'op.state')"},
        {"operation not ended", "SELECT COUNT(*) AS n FROM operations WHERE state IN "
                                "('pending', 'running', 'paused')"},
        {"terminal operation without finished_at",
         "SELECT COUNT(*) AS n FROM operations WHERE state IN ('succeeded', 'failed', "
         "'aborted') AND finished_at IS NULL"},
        {"lease held by an ended or missing operation",
         "SELECT COUNT(*) AS n FROM cluster_lease l LEFT JOIN operations o ON o.id = l.op_id "
         "WHERE o.id IS NULL OR o.state IN ('succeeded', 'failed', 'aborted')"},
        {"step left running in an ended operation",
         "SELECT COUNT(*) AS n FROM operation_steps s JOIN operations o ON o.id = s.op_id "
         "WHERE s.state = 'running' AND o.state IN ('succeeded', 'failed', 'aborted')"},
        {"step of an operation that does not exist",
         "SELECT COUNT(*) AS n FROM operation_steps s WHERE NOT EXISTS (SELECT 1 FROM "
         "operations o WHERE o.id = s.op_id)"},
        {"succeeded operation with a step not succeeded",
         "SELECT COUNT(*) AS n FROM operation_steps s JOIN operations o ON o.id = s.op_id "
         "WHERE o.state = 'succeeded' AND s.state NOT IN ('succeeded', 'skipped')"},
        {"node in maintenance 'active' whose last maintenance event is not 'entered'",
         "SELECT COUNT(*) AS n FROM nodes d WHERE d.maintenance = 'active' AND 'maintenance."
         "entered' IS NOT (SELECT e.type FROM events e WHERE e.node = d.name AND e.type IN "
         "('maintenance.entered', 'maintenance.exited') ORDER BY e.id DESC LIMIT 1)"},
        {"node out of maintenance whose last maintenance event is 'entered'",
         "SELECT COUNT(*) AS n FROM nodes d WHERE d.maintenance = 'none' AND 'maintenance."
         "entered' IS (SELECT e.type FROM events e WHERE e.node = d.name AND e.type IN "
         "('maintenance.entered', 'maintenance.exited') ORDER BY e.id DESC LIMIT 1)"},
        {"node in maintenance without the operation that took it down",
         "SELECT COUNT(*) AS n FROM nodes WHERE maintenance != 'none' AND maintenance_op IS "
         "NULL"},
        {"event of an operation that does not exist",
         "SELECT COUNT(*) AS n FROM events e WHERE e.op_id IS NOT NULL AND NOT EXISTS (SELECT 1 "
         "FROM operations o WHERE o.id = e.op_id)"},
    };
    for (size_t i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
        int64_t bad = count(db, zero[i].sql, NULL);
        if (bad != 0)
            fail_msg("N=%ld: %lld %s", n, (long long)bad, zero[i].what);
    }
}

struct tally {
    long runs, failed, succeeded, refused;
};

/* One run with the N-th write failing with code; returns whether the fault fired. */
static int run_with_fault(struct fixture *f, long n, int code, const char *cause, struct tally *t)
{
    struct hc_error err = {0};
    char enter[16], leave[16] = "";
    struct hc_db *db = fresh_db(f);
    struct hc_ops_pool *pool = hc_ops_pool_start(&f->ctl, 1, &err);
    assert_non_null(pool);
    hc_db_fault_set(n, code);
    run_op(db, pool, "maintenance.enter", enter, cause, n);
    if (!strcmp(enter, "succeeded"))
        run_op(db, pool, "maintenance.exit", leave, cause, n);
    int fired = hc_db_fault_fired();
    hc_db_fault_set(-1, 0);
    hc_ops_pool_stop(pool);
    check_invariants(db, n);
    if (!fired) {
        /* past the last write: the cycle ran as without the hook */
        assert_string_equal(enter, "succeeded");
        assert_string_equal(leave, "succeeded");
        char buf[16];
        json_t *rows = hc_db_query_json(db, &err,
                                        "SELECT maintenance FROM nodes WHERE name = "
                                        "'n1'",
                                        "");
        snprintf(buf, sizeof(buf), "%s", hc_json_str(json_array_get(rows, 0), "maintenance", ""));
        json_decref(rows);
        assert_string_equal(buf, "none");
    }
    hc_db_close(db);
    t->runs++;
    if (!enter[0] || (!strcmp(enter, "succeeded") && !leave[0]))
        t->refused++;
    else if (!strcmp(enter, "failed") || !strcmp(leave, "failed"))
        t->failed++;
    else
        t->succeeded++;
    return fired;
}

static void enumerate(struct fixture *f, int code, const char *cause)
{
    struct tally t = {0};
    long n;
    for (n = 1; n < MAX_N; n++)
        if (!run_with_fault(f, n, code, cause, &t))
            break;
    assert_true(n < MAX_N);
    /* a maintenance cycle writes dozens of times: the enumeration covered them all */
    assert_true(n > 20);
    print_message("%s: %ld writes enumerated: %ld runs failed naming the cause, %ld refused at "
                  "submission, %ld ended succeeded\n",
                  cause, n - 1, t.failed, t.refused, t.succeeded - 1);
}

static void test_disk_full_at_every_write(void **state)
{
    enumerate(*state, SQLITE_FULL, "database or disk is full");
}

static void test_io_error_at_every_write(void **state)
{
    enumerate(*state, SQLITE_IOERR, "disk I/O error");
}

/* The crash hook's count (controller/ops/test_hooks.h) on the same cycle: exactly the durable steps
 * of docs/operations.md "Crash points" (created, running, two per step, the outcome), the same
 * on every run, and none at all with the hook off. */
static void test_durable_steps_of_a_cycle(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char enter[16], leave[16];
    for (int run = 0; run < 3; run++) {
        struct hc_db *db = fresh_db(f);
        struct hc_ops_pool *pool = hc_ops_pool_start(&f->ctl, 1, &err);
        assert_non_null(pool);
        hc_test_crash_set(run < 2 ? 0 : -1);
        run_op(db, pool, "maintenance.enter", enter, "", 0);
        long after_enter = hc_test_crash_count();
        run_op(db, pool, "maintenance.exit", leave, "", 0);
        long total = hc_test_crash_count();
        hc_test_crash_set(-1);
        hc_ops_pool_stop(pool);
        hc_db_close(db);
        assert_string_equal(enter, "succeeded");
        assert_string_equal(leave, "succeeded");
        if (run < 2) {
            /* enter: budget, ok_to_stop, drain, stop; exit: start, healthy, resync */
            assert_int_equal(after_enter, 2 + 2 * 4 + 1);
            assert_int_equal(total - after_enter, 2 + 2 * 3 + 1);
        } else {
            assert_int_equal(total, 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_full_at_every_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_error_at_every_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_durable_steps_of_a_cycle, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
