/*
 * The controller's database: opening a connection with the project's settings (WAL, foreign
 * keys, busy timeout, file mode 0600), applying the embedded migrations, transactions, and
 * running statements with positional binds and results as JSON.
 *
 * Every error names the statement by its first words and carries sqlite3_errmsg, so a log line
 * says which query failed and why without dumping whole SQL texts.
 */
#include "db/db.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "db/db_internal.h"
#include "db/migrations.h"

/* --- fault injection (test hook, see db.h) ------------------------------------------------ */

static atomic_long fault_at = -1;
static atomic_int fault_code;
static atomic_long fault_writes;
static atomic_int fault_fired;

void hc_db_fault_set(long fail_at, int code)
{
    atomic_store(&fault_writes, 0);
    atomic_store(&fault_fired, 0);
    atomic_store(&fault_code, code ? code : SQLITE_FULL);
    atomic_store(&fault_at, fail_at);
}

long hc_db_fault_writes(void)
{
    return atomic_load(&fault_writes);
}

int hc_db_fault_fired(void)
{
    return atomic_load(&fault_fired);
}

/* Counts one write; 1 when it is the one to fail. */
static int fault_due(void)
{
    long at = atomic_load(&fault_at);
    if (at < 0)
        return 0;
    long n = atomic_fetch_add(&fault_writes, 1) + 1;
    if (at == 0 || n != at)
        return 0;
    atomic_store(&fault_fired, 1);
    return 1;
}

/* First ~40 characters of a statement, whitespace runs folded to one space, for messages. */
static const char *sql_excerpt(const char *sql, char buf[48])
{
    size_t n = 0;
    const char *p = sql;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    for (; *p && n < 40; p++) {
        int ws = *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r';
        if (ws && n > 0 && buf[n - 1] == ' ')
            continue;
        buf[n++] = ws ? ' ' : *p;
    }
    if (*p)
        memcpy(buf + 37, "...", 3);
    buf[n] = '\0';
    return buf;
}

int hc_db_error(struct hc_db *db, struct hc_error *err, const char *what)
{
    return hc_error_set(err, HC_E(DB), "%s: %s", what, sqlite3_errmsg(db->h));
}

static int stmt_error(struct hc_db *db, struct hc_error *err, const char *verb, const char *sql)
{
    char ex[48];
    return hc_error_set(err, HC_E(DB), "cannot %s '%s' on database '%s': %s", verb,
                        sql_excerpt(sql, ex), db->path, sqlite3_errmsg(db->h));
}

/* The injected failure of a write: nothing was written, and the transaction (if any) is rolled
 * back, which is what SQLite may do on SQLITE_FULL and SQLITE_IOERR (callers must cope). */
static int fault_fail(struct hc_db *db, struct hc_error *err, const char *sql)
{
    char ex[48];
    int code = atomic_load(&fault_code);
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    HC_WARN("test hook: database write %ld ('%s') fails: %s", atomic_load(&fault_writes),
            sql_excerpt(sql, ex), sqlite3_errstr(code));
    return hc_error_set(err, HC_E(DB), "cannot run '%s' on database '%s': %s", sql_excerpt(sql, ex),
                        db->path, sqlite3_errstr(code));
}

/* Creates the file ourselves so that it never exists with a wider mode than 0600; SQLite gives
 * the -wal and -shm files the mode of the database file. An existing file keeps its mode. */
static int create_private(const char *path, struct hc_error *err)
{
    if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0)
        return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return 0;
    if (fd < 0)
        return hc_error_set(err, HC_E(DB), "cannot open database '%s': %s", path, strerror(errno));
    int rc = fchmod(fd, 0600); /* open()'s mode went through the umask */
    int saved = errno;
    close(fd);
    if (rc < 0)
        return hc_error_set(err, HC_E(DB), "cannot set mode 0600 on database '%s': %s", path,
                            strerror(saved));
    return 0;
}

/* Opens a connection with the per-connection settings; touches nothing in the file. */
static struct hc_db *db_connect(const char *path, struct hc_error *err)
{
    if (create_private(path, err) < 0)
        return NULL;
    struct hc_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->path = strdup(path))) {
        free(db);
        hc_error_set(err, HC_E(INTERNAL), "out of memory opening database '%s'", path);
        return NULL;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        hc_error_set(err, HC_E(DB), "cannot open database '%s': %s", path,
                     db->h ? sqlite3_errmsg(db->h) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(db->h, HC_DB_BUSY_TIMEOUT_MS);
    if (hc_db_exec(db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL", err) < 0)
        goto fail;
    sqlite3_commit_hook(db->h, hc_db_commit_hook, db);
    return db;
fail:
    hc_db_close(db);
    return NULL;
}

/* WAL changes the file header, so it is set only once the schema version is known to be ours. */
static int db_set_wal(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, "PRAGMA journal_mode = WAL", NULL);
    if (!rows)
        return -1;
    const char *mode = json_string_value(json_object_get(json_array_get(rows, 0), "journal_mode"));
    int ok = mode && (strcmp(mode, "wal") == 0 || strcmp(mode, "memory") == 0);
    json_decref(rows);
    if (!ok)
        return hc_error_set(err, HC_E(DB), "cannot switch database '%s' to wal mode", db->path);
    return 0;
}

struct hc_db *hc_db_open_raw(const char *path, struct hc_error *err)
{
    struct hc_db *db = db_connect(path, err);
    /* A newer binary's file is looked at, not converted. */
    if (db && hc_db_schema_version(db) <= hc_db_latest_version() && db_set_wal(db, err) < 0) {
        hc_db_close(db);
        return NULL;
    }
    return db;
}

static int check_not_too_new(struct hc_db *db, struct hc_error *err)
{
    int have = hc_db_schema_version(db), latest = hc_db_latest_version();
    if (have < 0)
        return hc_db_error(db, err, "cannot read schema version");
    if (have <= latest)
        return 0;
    hc_error_set(err, HC_E(SCHEMA_TOO_NEW),
                 "database '%s' has schema version %d, newer than this binary's %d", db->path, have,
                 latest);
    return hc_error_hint(err, "upgrade hcctld to a version that knows schema %d", have);
}

struct hc_db *hc_db_open(const char *path, struct hc_error *err)
{
    struct hc_db *db = db_connect(path, err);
    if (!db)
        return NULL;
    if (check_not_too_new(db, err) < 0 || db_set_wal(db, err) < 0 || hc_db_migrate(db, err) < 0) {
        hc_db_close(db);
        return NULL;
    }
    /* HA mode: from here on its commits go to etcd first (replicate.h). */
    if (hc_db_repl_attach(db) < 0) {
        hc_error_set(err, HC_E(DB), "cannot set up replication on database '%s'", path);
        hc_db_close(db);
        return NULL;
    }
    return db;
}

void hc_db_close(struct hc_db *db)
{
    if (!db)
        return;
    hc_db_repl_detach(db);
    sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

void hc_db_set_commit_hook(struct hc_db *db, int (*fn)(void *), void *arg)
{
    db->test_commit = fn;
    db->test_commit_arg = arg;
}

sqlite3 *hc_db_handle(struct hc_db *db)
{
    return db->h;
}

int hc_db_schema_version(struct hc_db *db)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return version;
}

int hc_db_latest_version(void)
{
    int latest = 0;
    for (int i = 0; i < hc_migrations_count; i++)
        if (hc_migrations[i].version > latest)
            latest = hc_migrations[i].version;
    return latest;
}

/* One migration and its user_version bump commit together or not at all. The version is read
 * again inside the write lock: another process may have migrated while we waited for it. */
static int apply_migration(struct hc_db *db, const struct hc_migration *m, struct hc_error *err)
{
    char bump[64];
    snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", m->version);
    if (hc_db_begin(db, err) < 0)
        return -1;
    int have = hc_db_schema_version(db);
    if (have < 0) {
        hc_db_error(db, err, "cannot read schema version");
        goto fail;
    }
    if (have >= m->version) {
        hc_db_rollback(db);
        return 0;
    }
    if (hc_db_exec(db, m->sql, err) < 0 || hc_db_exec(db, bump, err) < 0 ||
        hc_db_commit(db, err) < 0)
        goto fail;
    return 0;
fail:
    hc_db_rollback(db);
    return hc_error_prefix(err, "cannot apply migration '%s' to database '%s'", m->name, db->path);
}

int hc_db_migrate(struct hc_db *db, struct hc_error *err)
{
    if (check_not_too_new(db, err) < 0)
        return -1;
    int have = hc_db_schema_version(db);
    for (int i = 0; i < hc_migrations_count; i++) {
        if (hc_migrations[i].version <= have)
            continue;
        if (apply_migration(db, &hc_migrations[i], err) < 0)
            return -1;
    }
    return 0;
}

int hc_db_begin(struct hc_db *db, struct hc_error *err)
{
    return hc_db_exec(db, "BEGIN IMMEDIATE", err);
}

int hc_db_commit(struct hc_db *db, struct hc_error *err)
{
    if (!sqlite3_get_autocommit(db->h) && fault_due())
        return fault_fail(db, err, "COMMIT");
    /* HA mode: the changed rows' images, read inside the transaction (replicate.h). */
    if (!sqlite3_get_autocommit(db->h) && hc_db_repl_resolve(db) < 0) {
        hc_db_rollback(db);
        return hc_error_set(err, HC_E(DB), "cannot read the rows to replicate from '%s'", db->path);
    }
    return hc_db_exec(db, "COMMIT", err);
}

void hc_db_rollback(struct hc_db *db)
{
    /* Some errors (SQLITE_FULL, IOERR, ...) already rolled back; a second ROLLBACK would fail. */
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

int hc_db_exec(struct hc_db *db, const char *sql, struct hc_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    char ex[48];
    hc_error_set(err, HC_E(DB), "cannot run '%s' on database '%s': %s", sql_excerpt(sql, ex),
                 db->path, msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return -1;
}

sqlite3_stmt *hc_db_prepare(struct hc_db *db, const char *sql, struct hc_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
        stmt_error(db, err, "prepare", sql);
        sqlite3_finalize(st);
        return NULL;
    }
    /* The fault hook fails a write here, where every statement passes (hc_db_run,
     * hc_db_query_json and the callers that step statements themselves). */
    if (st && !sqlite3_stmt_readonly(st) && fault_due()) {
        sqlite3_finalize(st);
        fault_fail(db, err, sql);
        return NULL;
    }
    return st;
}

/* Binds one parameter per fmt character; the counts must match so a forgotten bind is a
 * loud error instead of a silent NULL. */
static int bind_args(struct hc_db *db, sqlite3_stmt *st, const char *sql, const char *fmt,
                     va_list ap, struct hc_error *err)
{
    int want = sqlite3_bind_parameter_count(st);
    int given = fmt ? (int)strlen(fmt) : 0;
    char ex[48];
    if (given != want)
        return hc_error_set(err, HC_E(INTERNAL),
                            "cannot bind '%s': %d parameters given, %d expected",
                            sql_excerpt(sql, ex), given, want);
    for (int i = 0; i < given; i++) {
        int rc;
        const char *s;
        switch (fmt[i]) {
        case 's':
            s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_STATIC)
                   : sqlite3_bind_null(st, i + 1);
            break;
        case 'i':
            rc = sqlite3_bind_int64(st, i + 1, (sqlite3_int64)va_arg(ap, int64_t));
            break;
        case 'n':
            rc = sqlite3_bind_null(st, i + 1);
            break;
        default:
            return hc_error_set(err, HC_E(INTERNAL), "cannot bind '%s': bad format '%c'",
                                sql_excerpt(sql, ex), fmt[i]);
        }
        if (rc != SQLITE_OK)
            return stmt_error(db, err, "bind", sql);
    }
    return 0;
}

/* sql prepared with fmt's arguments bound, or NULL with err. */
static sqlite3_stmt *prepare_bound(struct hc_db *db, const char *sql, const char *fmt, va_list ap,
                                   struct hc_error *err)
{
    sqlite3_stmt *st = hc_db_prepare(db, sql, err);
    if (st && bind_args(db, st, sql, fmt, ap, err) < 0) {
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

static int has_json_suffix(const char *name)
{
    size_t n = strlen(name);
    return n >= 5 && strcmp(name + n - 5, "_json") == 0;
}

static json_t *column_json(sqlite3_stmt *st, int i)
{
    const char *text;
    int len;
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        return json_integer((json_int_t)sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(st, i));
    case SQLITE_NULL:
        return json_null();
    default: /* TEXT, and BLOB read as text */
        text = (const char *)sqlite3_column_text(st, i);
        len = sqlite3_column_bytes(st, i);
        if (text && has_json_suffix(sqlite3_column_name(st, i))) {
            /* Stored JSON that does not parse is shown raw rather than hidden. */
            json_t *v = json_loadb(text, (size_t)len, JSON_DECODE_ANY, NULL);
            if (v)
                return v;
        }
        return json_stringn(text ? text : "", (size_t)len);
    }
}

static json_t *row_json(sqlite3_stmt *st, struct hc_db *db, const char *sql, struct hc_error *err)
{
    json_t *row = json_object();
    for (int i = 0; row && i < sqlite3_column_count(st); i++) {
        json_t *v = column_json(st, i);
        if (!v) {
            char ex[48];
            hc_error_set(err, HC_E(DB), "cannot read '%s': column '%s' is not valid utf-8",
                         sql_excerpt(sql, ex), sqlite3_column_name(st, i));
            json_decref(row);
            return NULL;
        }
        json_object_set_new(row, sqlite3_column_name(st, i), v);
    }
    if (!row)
        hc_error_set(err, HC_E(INTERNAL), "out of memory reading rows");
    return row;
}

json_t *hc_db_query_json(struct hc_db *db, struct hc_error *err, const char *sql, const char *fmt,
                         ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = prepare_bound(db, sql, fmt, ap, err);
    va_end(ap);
    if (!st)
        return NULL;
    int rc;
    json_t *rows = json_array();
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *row = row_json(st, db, sql, err);
        if (!row)
            break;
        json_array_append_new(rows, row);
    }
    if (rc != SQLITE_DONE) {
        if (rc != SQLITE_ROW) /* SQLITE_ROW here means row_json already filled err */
            stmt_error(db, err, "run", sql);
        json_decref(rows);
        rows = NULL;
    }
    sqlite3_finalize(st);
    return rows;
}

int hc_db_run(struct hc_db *db, struct hc_error *err, const char *sql, const char *fmt, ...)
{
    int result = -1, rc;
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = prepare_bound(db, sql, fmt, ap, err);
    va_end(ap);
    if (!st)
        return -1;
    /* Statements with RETURNING yield rows; stepping to the end completes them. */
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (rc != SQLITE_DONE) {
        stmt_error(db, err, "run", sql);
        goto cleanup;
    }
    result = sqlite3_changes(db->h);
cleanup:
    sqlite3_finalize(st);
    return result;
}
