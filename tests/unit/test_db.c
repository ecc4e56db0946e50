/* Unit tests for db/db.c: open + migrate, schema guard, transactions, binds, JSON rows,
 * schema constraints (append-only events, foreign keys), file mode and concurrent writers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "db/db.h"
#include "tests/unit/testdir.h"

struct fixture {
    char *dir;
    char *path; /* dir/hcctld.db, not created yet */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f || !(f->dir = hc_test_mkdtemp("test_db")))
        return -1;
    f->path = hc_path_join(f->dir, "hcctld.db");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_test_rmtree(f->dir);
    free(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static struct hc_db *open_ok(const char *path)
{
    struct hc_error err = {0};
    struct hc_db *db = hc_db_open(path, &err);
    if (!db)
        fail_msg("open '%s': %s", path, err.message);
    return db;
}

/* The single value of a one-row, one-column query. */
static json_t *scalar(struct hc_db *db, const char *sql)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(db, &err, sql, NULL);
    if (!rows || json_array_size(rows) != 1)
        fail_msg("query '%s': %s", sql, rows ? "not one row" : err.message);
    json_t *row = json_array_get(rows, 0);
    json_t *out = json_incref(json_object_iter_value(json_object_iter(row)));
    json_decref(rows);
    return out;
}

static int64_t scalar_int(struct hc_db *db, const char *sql)
{
    json_t *v = scalar(db, sql);
    assert_true(json_is_integer(v));
    int64_t n = json_integer_value(v);
    json_decref(v);
    return n;
}

static int table_exists(struct hc_db *db, const char *name)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(
        db, &err, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", "s", name);
    assert_non_null(rows);
    int n = (int)json_array_size(rows);
    json_decref(rows);
    return n;
}

static char *read_all(const char *path, size_t *len)
{
    char *data = NULL;
    struct hc_error err = {0};
    if (hc_file_read(path, &data, len, &err) < 0)
        fail_msg("%s", err.message);
    return data;
}

static void test_fresh_open_migrates(void **state)
{
    struct fixture *f = *state;
    assert_true(hc_db_latest_version() >= 1);
    struct hc_db *db = open_ok(f->path);
    assert_non_null(hc_db_handle(db));
    assert_int_equal(hc_db_schema_version(db), hc_db_latest_version());
    assert_int_equal(scalar_int(db, "PRAGMA user_version"), hc_db_latest_version());
    static const char *const tables[] = {
        "clusters",        "pki",           "nodes",  "interfaces",   "tokens", "operations",
        "operation_steps", "cluster_lease", "events", "revoked_certs"};
    for (size_t i = 0; i < HC_ARRAY_LEN(tables); i++)
        if (!table_exists(db, tables[i]))
            fail_msg("table '%s' missing", tables[i]);
    hc_db_close(db);
    hc_db_close(NULL);
}

static int count_stmt(unsigned type, void *ctx, void *p, void *x)
{
    (*(int *)ctx)++;
    return 0;
}

static void test_reopen_does_not_remigrate(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    assert_int_equal(
        hc_db_run(db, &err, "INSERT INTO clusters VALUES ('c1', 'one', NULL, 1)", NULL), 1);
    hc_db_close(db);

    /* 0001 uses plain CREATE TABLE: had it run again, this open would fail. */
    db = open_ok(f->path);
    assert_int_equal(hc_db_schema_version(db), hc_db_latest_version());
    assert_int_equal(scalar_int(db, "SELECT count(*) FROM clusters WHERE id = 'c1'"), 1);

    /* An up-to-date database runs nothing but the version check. */
    int stmts = 0;
    sqlite3_trace_v2(hc_db_handle(db), SQLITE_TRACE_STMT, count_stmt, &stmts);
    assert_int_equal(hc_db_migrate(db, &err), 0);
    sqlite3_trace_v2(hc_db_handle(db), 0, NULL, NULL);
    assert_true(stmts <= 2); /* PRAGMA user_version reads only */
    hc_db_close(db);
}

static void test_pragmas(void **state)
{
    struct fixture *f = *state;
    struct hc_db *db = open_ok(f->path);
    json_t *mode = scalar(db, "PRAGMA journal_mode");
    assert_string_equal(json_string_value(mode), "wal");
    json_decref(mode);
    assert_int_equal(scalar_int(db, "PRAGMA foreign_keys"), 1);
    assert_int_equal(scalar_int(db, "PRAGMA synchronous"), 1); /* NORMAL */
    assert_int_equal(scalar_int(db, "PRAGMA busy_timeout"), HC_DB_BUSY_TIMEOUT_MS);
    hc_db_close(db);
}

/* A database made by a newer binary, written with plain SQLite (rollback journal, as a newer
 * binary might leave it): opening must refuse it and leave every byte as it was. */
static void test_schema_too_new_refused(void **state)
{
    struct fixture *f = *state;
    int newer = hc_db_latest_version() + 1;
    sqlite3 *h = NULL;
    char sql[128];
    snprintf(sql, sizeof(sql), "CREATE TABLE future(x); PRAGMA user_version = %d", newer);
    assert_int_equal(sqlite3_open(f->path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    size_t len_before = 0, len_after = 0;
    char *before = read_all(f->path, &len_before);

    struct hc_error err = {0};
    assert_null(hc_db_open(f->path, &err));
    assert_string_equal(err.code, HC_ERR_SCHEMA_TOO_NEW);
    assert_int_equal(err.status, 500);
    char want[256];
    snprintf(want, sizeof(want), "has schema version %d, newer than this binary's %d", newer,
             newer - 1);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, f->path));
    assert_non_null(strstr(err.hint, "upgrade hcctld"));

    char *after = read_all(f->path, &len_after);
    assert_int_equal(len_after, len_before);
    assert_memory_equal(after, before, len_before);
    assert_int_equal((unsigned char)after[18], 1); /* still a rollback-journal file, not WAL */

    struct hc_db *raw = hc_db_open_raw(f->path, &err);
    assert_non_null(raw);
    assert_int_equal(hc_db_schema_version(raw), newer);
    assert_int_equal(hc_db_migrate(raw, &err), -1); /* the explicit migrate refuses as well */
    assert_string_equal(err.code, HC_ERR_SCHEMA_TOO_NEW);
    assert_false(table_exists(raw, "nodes"));
    hc_db_close(raw);
    char *again = read_all(f->path, &len_after);
    assert_int_equal((unsigned char)again[18], 1); /* a raw look does not convert it to WAL */
    free(again);
    free(before);
    free(after);
}

static void test_failed_transaction_rolls_back(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = hc_db_open_raw(f->path, &err);
    assert_non_null(db);
    hc_db_rollback(db); /* harmless without a transaction */
    assert_int_equal(hc_db_begin(db, &err), 0);
    assert_int_equal(hc_db_exec(db,
                                "CREATE TABLE t(x); INSERT INTO t VALUES (1);\n"
                                "PRAGMA user_version = 7; INSERT INTO nosuch VALUES (1)",
                                &err),
                     -1);
    assert_string_equal(err.code, HC_ERR_DB);
    assert_non_null(strstr(err.message, "no such table: nosuch"));
    assert_non_null(
        strstr(err.message, "'CREATE TABLE t(x); INSERT INTO t VALU...'")); /* excerpt */
    hc_db_rollback(db);
    assert_false(table_exists(db, "t"));
    assert_int_equal(hc_db_schema_version(db), 0);
    hc_db_close(db);
}

/* Fault injection into the real migration: a table already named like one that 0001 creates
 * late makes it fail halfway; everything it did before must be rolled back. */
static void test_failing_migration_rolls_back(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = hc_db_open_raw(f->path, &err);
    assert_non_null(db);
    assert_int_equal(hc_db_exec(db, "CREATE TABLE events(x)", &err), 0);
    assert_int_equal(hc_db_migrate(db, &err), -1);
    assert_string_equal(err.code, HC_ERR_DB);
    assert_non_null(strstr(err.message, "cannot apply migration '0001_init'"));
    assert_non_null(strstr(err.message, "already exists"));
    assert_int_equal(hc_db_schema_version(db), 0);
    assert_false(table_exists(db, "clusters")); /* created before the failure, rolled back */
    assert_false(table_exists(db, "nodes"));
    assert_true(sqlite3_get_autocommit(hc_db_handle(db))); /* no transaction left open */

    assert_int_equal(hc_db_exec(db, "DROP TABLE events", &err), 0);
    assert_int_equal(hc_db_migrate(db, &err), 0);
    assert_int_equal(hc_db_schema_version(db), hc_db_latest_version());
    hc_db_close(db);
}

static void test_query_json_types_and_binds(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    const int64_t big = ((int64_t)1 << 40) + 3;
    assert_int_equal(
        hc_db_run(db, &err, "INSERT INTO clusters VALUES (?, ?, ?, ?)", "ssni", "c1", "one", big),
        1);
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO operations (id, cluster_id, kind, params_json, state, "
                               "progress_json, requested_by, created_at, updated_at) "
                               "VALUES (?, 'c1', 'test', ?, 'pending', ?, ?, 5, 6)",
                               "ssss", "op-1", "{\"a\":[1,2]}", "not json{", (const char *)NULL),
                     1);
    json_t *rows = hc_db_query_json(db, &err,
                                    "SELECT c.id, c.mtu, c.created_at, o.params_json, "
                                    "o.progress_json, o.requested_by, 1.5 AS r "
                                    "FROM clusters c JOIN operations o ON o.cluster_id = c.id "
                                    "WHERE c.id = ? AND o.created_at = ?",
                                    "si", "c1", (int64_t)5);
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 1);
    json_t *row = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(row, "id")), "c1");
    assert_true(json_is_null(json_object_get(row, "mtu")));
    assert_true(json_is_integer(json_object_get(row, "created_at")));
    assert_int_equal(json_integer_value(json_object_get(row, "created_at")), big);
    json_t *params = json_object_get(row, "params_json");
    assert_true(json_is_object(params));
    assert_int_equal(json_integer_value(json_array_get(json_object_get(params, "a"), 1)), 2);
    /* Invalid stored JSON comes back as the raw string rather than disappearing. */
    assert_string_equal(json_string_value(json_object_get(row, "progress_json")), "not json{");
    assert_true(json_is_null(json_object_get(row, "requested_by"))); /* 's' NULL bound NULL */
    assert_true(json_is_real(json_object_get(row, "r")));
    json_decref(rows);

    rows = hc_db_query_json(db, &err, "SELECT * FROM clusters WHERE id = ?", "s", "none");
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 0);
    json_decref(rows);

    /* Errors: wrong bind count, bad format char, bad SQL (named by its first words). */
    assert_null(hc_db_query_json(db, &err, "SELECT ?, ?", "s", "x"));
    assert_non_null(strstr(err.message, "1 parameters given, 2 expected"));
    assert_null(hc_db_query_json(db, &err, "SELECT ?", "x", "x"));
    assert_null(hc_db_query_json(db, &err, "SELECT x FROM nowhere_at_all_table", NULL));
    assert_string_equal(err.code, HC_ERR_DB);
    assert_non_null(strstr(err.message, "SELECT x FROM nowhere_at_all_table"));
    assert_non_null(strstr(err.message, "no such table"));
    assert_int_equal(hc_db_run(db, &err,
                               "UPDATE clusters SET name = 'a very long statement indeed' "
                               "WHERE id = 'nonexistent_column_follows' AND bogus = 1",
                               NULL),
                     -1);
    assert_non_null(strstr(err.message, "'UPDATE clusters SET name = 'a very lo...'"));
    assert_non_null(strstr(err.message, "no such column: bogus"));
    hc_db_close(db);
}

static void test_run_returns_changes(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    static const char *ins = "INSERT INTO tokens (id, kind, name, role, secret_hash, created_at) "
                             "VALUES (?, ?, ?, ?, 'h', 1)";
    assert_int_equal(hc_db_run(db, &err, ins, "ssss", "t1", "api", "admin", "admin"), 1);
    assert_int_equal(hc_db_run(db, &err, ins, "ssss", "t2", "join", "j1", "join"), 1);
    assert_int_equal(hc_db_run(db, &err, ins, "ssss", "t3", "join", "j2", "join"), 1);
    assert_int_equal(
        hc_db_run(db, &err, "UPDATE tokens SET used_at = ? WHERE kind = 'join'", "i", (int64_t)9),
        2);
    assert_int_equal(hc_db_run(db, &err, "UPDATE tokens SET used_at = 1 WHERE id = 'x'", NULL), 0);
    assert_int_equal(hc_db_run(db, &err, "DELETE FROM tokens WHERE id = ?", "s", "t1"), 1);
    /* CHECK and UNIQUE constraints are errors, not zero changes. */
    assert_int_equal(hc_db_run(db, &err, ins, "ssss", "t4", "bogus", "x", "admin"), -1);
    assert_non_null(strstr(err.message, "CHECK constraint failed"));
    assert_int_equal(hc_db_run(db, &err, ins, "ssss", "t2", "api", "x", "admin"), -1);
    /* RETURNING rows are consumed; the statement still completes. */
    assert_int_equal(
        hc_db_run(db, &err, "DELETE FROM tokens WHERE kind = 'join' RETURNING id", NULL), 2);
    assert_int_equal(scalar_int(db, "SELECT count(*) FROM tokens"), 0);
    hc_db_close(db);
}

static void test_events_append_only(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO events (ts, type, message) VALUES (1, 'x', 'first')",
                               NULL),
                     1);
    assert_int_equal(hc_db_run(db, &err, "UPDATE events SET message = 'changed'", NULL), -1);
    assert_non_null(strstr(err.message, "events are append-only"));
    assert_int_equal(hc_db_run(db, &err, "DELETE FROM events", NULL), -1);
    assert_non_null(strstr(err.message, "events are append-only"));
    json_t *msg = scalar(db, "SELECT message FROM events");
    assert_string_equal(json_string_value(msg), "first");
    json_decref(msg);
    json_t *details = scalar(db, "SELECT details_json FROM events");
    assert_true(json_is_object(details)); /* default '{}' parsed */
    json_decref(details);
    hc_db_close(db);
}

static void test_foreign_keys(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    static const char *node = "INSERT INTO nodes (id, cluster_id, name, address, agent_url, "
                              "cert_serial, cert_pem, joined_at) VALUES (?, ?, ?, 'a', 'u', 's', "
                              "'p', 1)";
    assert_int_equal(hc_db_run(db, &err, node, "iss", (int64_t)1, "nope", "n1"), -1);
    assert_non_null(strstr(err.message, "FOREIGN KEY constraint failed"));
    assert_int_equal(
        hc_db_run(db, &err, "INSERT INTO clusters VALUES ('c1', 'one', 9000, 1)", NULL), 1);
    assert_int_equal(hc_db_run(db, &err, node, "iss", (int64_t)1, "c1", "n1"), 1);
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO interfaces (node_id, name, mtu, state, updated_at) "
                               "VALUES (1, 'eth0', 9000, 'up', 1)",
                               NULL),
                     1);
    /* A referenced cluster cannot go; a deleted node takes its interfaces with it. */
    assert_int_equal(hc_db_run(db, &err, "DELETE FROM clusters", NULL), -1);
    assert_int_equal(hc_db_run(db, &err, "DELETE FROM nodes WHERE id = 1", NULL), 1);
    assert_int_equal(scalar_int(db, "SELECT count(*) FROM interfaces"), 0);
    hc_db_close(db);
}

static void test_file_mode(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    mode_t old = umask(0); /* SQLite alone would create 0644 here */
    struct hc_db *db = hc_db_open(f->path, &err);
    umask(old);
    assert_non_null(db);
    assert_int_equal(hc_db_run(db, &err, "INSERT INTO clusters VALUES ('c', 'n', NULL, 1)", NULL),
                     1);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    char *wal = NULL;
    assert_true(asprintf(&wal, "%s-wal", f->path) > 0);
    assert_int_equal(stat(wal, &st), 0); /* the WAL holds data too: same mode */
    assert_int_equal(st.st_mode & 07777, 0600);
    free(wal);
    hc_db_close(db);

    char *bad = hc_path_join(f->dir, "missing/dir/x.db");
    assert_null(hc_db_open(bad, &err));
    assert_string_equal(err.code, HC_ERR_DB);
    assert_non_null(strstr(err.message, bad));
    free(bad);

    char *junk = hc_path_join(f->dir, "junk.db");
    char garbage[4096];
    memset(garbage, 'x', sizeof(garbage));
    assert_int_equal(hc_file_write_atomic(junk, garbage, sizeof(garbage), 0600, &err), 0);
    assert_null(hc_db_open(junk, &err));
    assert_string_equal(err.code, HC_ERR_DB);
    assert_non_null(strstr(err.message, "not a database"));
    free(junk);
}

#define WRITER_ROUNDS 150

struct writer {
    const char *path;
    pthread_barrier_t *start;
    int failures;
    char first_error[512];
};

/* Read-modify-write of one counter in each transaction: with BEGIN IMMEDIATE the two writers
 * serialise (waiting on the busy timeout), so no update is lost and none fails. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct hc_error err = {0};
    struct hc_db *db = hc_db_open(w->path, &err);
    pthread_barrier_wait(w->start);
    for (int i = 0; db && i < WRITER_ROUNDS; i++) {
        json_t *rows = NULL;
        int ok = hc_db_begin(db, &err) == 0 &&
                 (rows = hc_db_query_json(db, &err, "SELECT mtu FROM clusters WHERE id = 'c'",
                                          NULL)) != NULL;
        int64_t v = ok ? json_integer_value(json_object_get(json_array_get(rows, 0), "mtu")) : 0;
        json_decref(rows);
        ok = ok &&
             hc_db_run(db, &err, "UPDATE clusters SET mtu = ? WHERE id = 'c'", "i", v + 1) == 1 &&
             hc_db_run(db, &err, "INSERT INTO events (ts, type, message) VALUES (?, 't', 'm')", "i",
                       (int64_t)i) == 1 &&
             hc_db_commit(db, &err) == 0;
        if (!ok) {
            if (!w->failures++)
                snprintf(w->first_error, sizeof(w->first_error), "%s", err.message);
            hc_db_rollback(db);
        }
    }
    if (!db) {
        w->failures = -1;
        snprintf(w->first_error, sizeof(w->first_error), "%s", err.message);
    }
    hc_db_close(db);
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_db *db = open_ok(f->path);
    assert_int_equal(hc_db_run(db, &err, "INSERT INTO clusters VALUES ('c', 'n', 0, 1)", NULL), 1);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    struct writer w[2] = {{.path = f->path, .start = &start}, {.path = f->path, .start = &start}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 2; i++)
        if (w[i].failures)
            fail_msg("writer %d: %d failures, first: %s", i, w[i].failures, w[i].first_error);
    assert_int_equal(scalar_int(db, "SELECT mtu FROM clusters WHERE id = 'c'"), 2 * WRITER_ROUNDS);
    assert_int_equal(scalar_int(db, "SELECT count(*) FROM events"), 2 * WRITER_ROUNDS);
    hc_db_close(db);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_fresh_open_migrates),
        T(test_reopen_does_not_remigrate),
        T(test_pragmas),
        T(test_schema_too_new_refused),
        T(test_failed_transaction_rolls_back),
        T(test_failing_migration_rolls_back),
        T(test_query_json_types_and_binds),
        T(test_run_returns_changes),
        T(test_events_append_only),
        T(test_foreign_keys),
        T(test_file_mode),
        T(test_concurrent_writers),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
