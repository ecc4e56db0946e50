/*
 * The controller's database: one SQLite file in WAL mode, foreign keys on, a busy timeout, and
 * numbered migrations embedded in the binary. PRAGMA user_version holds the schema version; a
 * database written by a newer binary is refused (schema_too_new) rather than misread.
 *
 * One struct hc_db per thread (SQLite connections are not shared between threads here).
 * Every mutation runs inside hc_db_begin/hc_db_commit (BEGIN IMMEDIATE, so writers queue on
 * the busy timeout instead of failing on upgrade from a read lock).
 */
#ifndef HC_DB_DB_H
#define HC_DB_DB_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "common/error.h"

#define HC_DB_BUSY_TIMEOUT_MS 5000

struct hc_db;

/* Opens (creating if needed) and migrates to the latest schema. NULL with err. */
struct hc_db *hc_db_open(const char *path, struct hc_error *err);
/* Opens without migrating; for tests and tools. */
struct hc_db *hc_db_open_raw(const char *path, struct hc_error *err);
/* Applies pending migrations, each in its own transaction. Refuses a newer schema. */
int hc_db_migrate(struct hc_db *db, struct hc_error *err);
void hc_db_close(struct hc_db *db); /* accepts NULL */
sqlite3 *hc_db_handle(struct hc_db *db);

int hc_db_schema_version(struct hc_db *db);
int hc_db_latest_version(void);

int hc_db_begin(struct hc_db *db, struct hc_error *err); /* BEGIN IMMEDIATE */
int hc_db_commit(struct hc_db *db, struct hc_error *err);
void hc_db_rollback(struct hc_db *db); /* safe when no transaction is open */
int hc_db_exec(struct hc_db *db, const char *sql, struct hc_error *err);

/* Prepares sql; NULL with err (500 db_error naming the statement's first words). */
sqlite3_stmt *hc_db_prepare(struct hc_db *db, const char *sql, struct hc_error *err);
/* Fills err from the connection's last error; returns -1. */
int hc_db_error(struct hc_db *db, struct hc_error *err, const char *what);

/* Runs a query and returns its rows as a JSON array of objects keyed by column name
 * (INTEGER -> integer, REAL -> real, TEXT -> string, NULL -> null; a TEXT column whose name
 * ends in "_json" is parsed into JSON). Binds: fmt is one char per parameter:
 * 's' const char *, 'i' int64_t, 'n' NULL. NULL with err on failure. */
json_t *hc_db_query_json(struct hc_db *db, struct hc_error *err, const char *sql, const char *fmt,
                         ...);
/* Same binds; runs a statement that returns no rows. Returns sqlite3_changes() or -1. */
int hc_db_run(struct hc_db *db, struct hc_error *err, const char *sql, const char *fmt, ...);

/* Calls fn(arg) just before each write transaction of this connection commits (SQLite's commit
 * hook: a non-zero return turns the commit into a rollback); NULL removes it. For the crash
 * test hook (controller/ops/test_hooks.h). */
void hc_db_set_commit_hook(struct hc_db *db, int (*fn)(void *), void *arg);

/* Test hook (fault injection, the SQLite way: fail at call N): with fail_at > 0, the
 * fail_at-th write from now on (a statement that changes the database, failed where it is
 * prepared, in hc_db_prepare, which every statement passes; or a COMMIT) does nothing and
 * fails with code (SQLITE_FULL or SQLITE_IOERR),
 * rolling back the open transaction as SQLite may do for those errors; the error message is
 * SQLite's own for the code ("database or disk is full", "disk I/O error"). Only that one call
 * fails. fail_at 0 counts writes without failing any; -1 turns the hook off (the default).
 * Process-wide: counts the writes of every connection. */
void hc_db_fault_set(long fail_at, int code);
/* Writes counted since the last hc_db_fault_set; whether the armed fault has fired. */
long hc_db_fault_writes(void);
int hc_db_fault_fired(void);

#endif
