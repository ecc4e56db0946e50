/* Replication hooks of the controller's database (replicate.h). */
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include "db/replicate.h"

#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "db/db_internal.h"

#define REPL_MAX_LOCAL 64

struct table_info {
    char *name;
    int ncols;
    char **cols;
    unsigned char *local; /* per column: its changes alone are not sent */
    int ipk;              /* the INTEGER PRIMARY KEY column (the rowid's alias), or -1 */
    int no_rowid; /* not replicated: WITHOUT ROWID (local caches like change_counters), or in
                     local_tables */
};

struct pending {
    const struct table_info *table;
    int64_t rowid;
    char *image; /* NULL: deleted */
    size_t seq;
};

/* The last INSERT hc_db_row_insert prepared: a rebuild inserts thousands of rows of one table
 * with the same columns, one prepare serves them all. */
struct insert_cache {
    const struct table_info *table;
    unsigned char *present; /* per column of table: the image has it */
    sqlite3_stmt *st;
};

struct hc_db_repl {
    struct hc_db *db;
    struct insert_cache ins;
    struct table_info *tables;
    size_t ntables;
    struct pending *p;
    size_t n, cap;
    int broken; /* a change that cannot be replicated: the commit must fail */
};

static struct {
    atomic_int on;
    hc_db_send_fn send;
    void *arg;
    char *local[REPL_MAX_LOCAL];
    size_t nlocal;
} R;

void hc_db_replicate_start(hc_db_send_fn send, void *arg, const char *const *local_columns)
{
    R.send = send;
    R.arg = arg;
    for (size_t i = 0; local_columns && local_columns[i] && R.nlocal < REPL_MAX_LOCAL; i++)
        R.local[R.nlocal++] = strdup(local_columns[i]);
    atomic_store(&R.on, 1);
}

void hc_db_replicate_stop(void)
{
    atomic_store(&R.on, 0);
    for (size_t i = 0; i < R.nlocal; i++)
        free(R.local[i]);
    R.nlocal = 0;
    R.send = NULL;
}

int hc_db_replicating(void)
{
    return atomic_load(&R.on);
}

/* Tables of one controller alone: fence_generation is single mode's start generation (in HA
 * mode the term comes from etcd, and `ha export` sets the generation of the file it writes). */
static const char *const local_tables[] = {"fence_generation"};

static int is_local_table(const char *name)
{
    for (size_t i = 0; i < sizeof(local_tables) / sizeof(local_tables[0]); i++)
        if (strcmp(local_tables[i], name) == 0)
            return 1;
    return 0;
}

static int is_local(const char *table, const char *col)
{
    char name[256];
    snprintf(name, sizeof(name), "%s.%s", table, col);
    for (size_t i = 0; i < R.nlocal; i++)
        if (R.local[i] && strcmp(R.local[i], name) == 0)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- the schema */

static void tables_free(struct table_info *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < t[i].ncols; c++)
            free(t[i].cols[c]);
        free(t[i].cols);
        free(t[i].local);
        free(t[i].name);
    }
    free(t);
}

/* A table has a rowid when "SELECT rowid" prepares. */
static int has_rowid(sqlite3 *h, const char *table)
{
    char sql[300];
    snprintf(sql, sizeof(sql), "SELECT rowid FROM \"%s\" LIMIT 0", table);
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK;
    sqlite3_finalize(st);
    return ok;
}

static int load_columns(sqlite3 *h, struct table_info *t)
{
    char sql[300];
    snprintf(sql, sizeof(sql), "PRAGMA table_info(\"%s\")", t->name);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    int npk = 0, pk_col = -1, pk_integer = 0;
    t->ipk = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int cid = sqlite3_column_int(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        const char *type = (const char *)sqlite3_column_text(st, 2);
        if (cid != t->ncols || !name)
            break;
        char **cols = realloc(t->cols, sizeof(*cols) * (size_t)(t->ncols + 1));
        unsigned char *local = realloc(t->local, (size_t)(t->ncols + 1));
        if (cols)
            t->cols = cols;
        if (local)
            t->local = local;
        if (!cols || !local || !(t->cols[t->ncols] = strdup(name)))
            break;
        t->local[t->ncols] = (unsigned char)is_local(t->name, name);
        if (sqlite3_column_int(st, 5) > 0) {
            npk++;
            pk_col = cid;
            pk_integer = type && strcasecmp(type, "INTEGER") == 0;
        }
        t->ncols++;
    }
    sqlite3_finalize(st);
    if (npk == 1 && pk_integer)
        t->ipk = pk_col;
    return t->ncols > 0 ? 0 : -1;
}

static int load_tables(sqlite3 *h, struct table_info **out, size_t *nout)
{
    sqlite3_stmt *st = NULL;
    struct table_info *t = NULL;
    size_t n = 0;
    if (sqlite3_prepare_v2(h,
                           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                           "LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name)
            continue;
        struct table_info *grown = realloc(t, sizeof(*t) * (n + 1));
        if (!grown) {
            rc = -1;
            break;
        }
        t = grown;
        memset(&t[n], 0, sizeof(t[n]));
        t[n].name = strdup(name);
        t[n].no_rowid = is_local_table(name) || !has_rowid(h, name);
        n++;
        if (!t[n - 1].name || (!t[n - 1].no_rowid && load_columns(h, &t[n - 1]) < 0)) {
            rc = -1;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        tables_free(t, n);
        return -1;
    }
    *out = t;
    *nout = n;
    return 0;
}

static const struct table_info *find_table(const struct hc_db_repl *r, const char *name)
{
    for (size_t i = 0; i < r->ntables; i++)
        if (strcmp(r->tables[i].name, name) == 0)
            return &r->tables[i];
    return NULL;
}

int hc_db_replicated_tables(struct hc_db *db, char ***names, size_t *n, struct hc_error *err)
{
    struct table_info *t;
    size_t nt;
    if (load_tables(db->h, &t, &nt) < 0)
        return hc_db_error(db, err, "cannot read the schema");
    *names = calloc(nt ? nt : 1, sizeof(char *));
    size_t out = 0;
    for (size_t i = 0; *names && i < nt; i++) {
        if (t[i].no_rowid)
            continue;
        (*names)[out++] = t[i].name;
        t[i].name = NULL;
    }
    tables_free(t, nt);
    if (!*names)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    *n = out;
    return 0;
}

/* ---------------------------------------------------------------- images */

static json_t *value_json(sqlite3_value *v)
{
    switch (sqlite3_value_type(v)) {
    case SQLITE_INTEGER:
        return json_integer((json_int_t)sqlite3_value_int64(v));
    case SQLITE_FLOAT:
        return json_real(sqlite3_value_double(v));
    case SQLITE_NULL:
        return json_null();
    case SQLITE_BLOB: {
        int len = sqlite3_value_bytes(v);
        const void *data = sqlite3_value_blob(v);
        char *b64 = malloc(4 * (((size_t)len + 2) / 3) + 1);
        if (!b64)
            return NULL;
        EVP_EncodeBlock((unsigned char *)b64, data, len);
        json_t *o = json_pack("{s:s}", "blob_b64", b64);
        free(b64);
        return o;
    }
    default:
        return json_stringn((const char *)sqlite3_value_text(v), (size_t)sqlite3_value_bytes(v));
    }
}

static char *image_dump(json_t *image)
{
    char *text = image ? json_dumps(image, JSON_COMPACT) : NULL;
    json_decref(image);
    return text;
}

/* The image of the row the hook is about to write (INSERT, UPDATE). */
static char *hook_image(sqlite3 *h, const struct table_info *t, int64_t rowid)
{
    json_t *image = json_object();
    json_object_set_new(image, "rowid", json_integer((json_int_t)rowid));
    for (int i = 0; image && i < t->ncols; i++) {
        sqlite3_value *v = NULL;
        json_t *j = i == t->ipk ? json_integer((json_int_t)rowid)
                                : (sqlite3_preupdate_new(h, i, &v) == SQLITE_OK && v ? value_json(v)
                                                                                     : NULL);
        if (!j || json_object_set_new(image, t->cols[i], j) < 0) {
            json_decref(image);
            return NULL;
        }
    }
    return image_dump(image);
}

static int values_equal(sqlite3_value *a, sqlite3_value *b)
{
    int ta = sqlite3_value_type(a), tb = sqlite3_value_type(b);
    if (ta != tb)
        return 0;
    switch (ta) {
    case SQLITE_NULL:
        return 1;
    case SQLITE_INTEGER:
        return sqlite3_value_int64(a) == sqlite3_value_int64(b);
    case SQLITE_FLOAT:
        return sqlite3_value_double(a) == sqlite3_value_double(b);
    default: {
        int la = sqlite3_value_bytes(a), lb = sqlite3_value_bytes(b);
        return la == lb && memcmp(sqlite3_value_blob(a), sqlite3_value_blob(b), (size_t)la) == 0;
    }
    }
}

/* 1 when an UPDATE changes nothing but local columns. */
static int only_local_changed(sqlite3 *h, const struct table_info *t)
{
    for (int i = 0; i < t->ncols; i++) {
        if (t->local[i])
            continue;
        sqlite3_value *o = NULL, *n = NULL;
        if (sqlite3_preupdate_old(h, i, &o) != SQLITE_OK ||
            sqlite3_preupdate_new(h, i, &n) != SQLITE_OK || !o || !n || !values_equal(o, n))
            return 0;
    }
    return 1;
}

static void pending_add(struct hc_db_repl *r, const struct table_info *t, int64_t rowid,
                        char *image, int deleted)
{
    if (!deleted && !image) {
        r->broken = 1;
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct pending *p = realloc(r->p, sizeof(*p) * cap);
        if (!p) {
            free(image);
            r->broken = 1;
            return;
        }
        r->p = p;
        r->cap = cap;
    }
    r->p[r->n] = (struct pending){.table = t, .rowid = rowid, .image = image, .seq = r->n};
    r->n++;
}

static void pending_clear(struct hc_db_repl *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->p[i].image);
    r->n = 0;
    r->broken = 0;
}

static void on_preupdate(void *ctx, sqlite3 *h, int op, const char *zdb, const char *table,
                         sqlite3_int64 key1, sqlite3_int64 key2)
{
    struct hc_db_repl *r = ctx;
    if (strcmp(zdb, "main") != 0 || strncmp(table, "sqlite_", 7) == 0)
        return;
    const struct table_info *t = find_table(r, table);
    if (!t) {
        HC_ERROR("replication: a write to table '%s', unknown to this connection", table);
        r->broken = 1;
        return;
    }
    if (t->no_rowid)
        return;
    switch (op) {
    case SQLITE_DELETE:
        pending_add(r, t, key1, NULL, 1);
        break;
    case SQLITE_INSERT:
        pending_add(r, t, key2, hook_image(h, t, key2), 0);
        break;
    case SQLITE_UPDATE:
        if (key1 == key2 && only_local_changed(h, t))
            break;
        if (key1 != key2)
            pending_add(r, t, key1, NULL, 1);
        pending_add(r, t, key2, hook_image(h, t, key2), 0);
        break;
    }
}

static int pending_cmp(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    int c = strcmp(x->table->name, y->table->name);
    if (c)
        return c;
    if (x->rowid != y->rowid)
        return x->rowid < y->rowid ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Keeps the last change of each row, in (table, rowid) order. */
static void pending_dedupe(struct hc_db_repl *r)
{
    if (r->n < 2)
        return;
    qsort(r->p, r->n, sizeof(*r->p), pending_cmp);
    size_t out = 0;
    for (size_t i = 0; i < r->n; i++) {
        int last = i + 1 == r->n || r->p[i + 1].table != r->p[i].table ||
                   r->p[i + 1].rowid != r->p[i].rowid;
        if (last)
            r->p[out++] = r->p[i];
        else
            free(r->p[i].image);
    }
    r->n = out;
}

char *hc_db_row_image(struct hc_db *db, const char *table, int64_t rowid, struct hc_error *err)
{
    char sql[300];
    snprintf(sql, sizeof(sql), "SELECT rowid AS \"rowid\", * FROM \"%s\" WHERE rowid = ?", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
        hc_db_error(db, err, "cannot read a row to replicate");
        return NULL;
    }
    sqlite3_bind_int64(st, 1, rowid);
    char *text = NULL;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        json_t *image = json_object();
        for (int i = 0; image && i < sqlite3_column_count(st); i++) {
            json_t *v = value_json(sqlite3_column_value(st, i));
            if (!v || json_object_set_new(image, sqlite3_column_name(st, i), v) < 0) {
                json_decref(image);
                image = NULL;
            }
        }
        if (!(text = image_dump(image)))
            hc_error_set(err, HC_E(INTERNAL), "cannot encode a row of '%s'", table);
    } else if (rc != SQLITE_DONE) {
        hc_db_error(db, err, "cannot read a row to replicate");
    } else if (err) {
        err->message[0] = '\0';
    }
    sqlite3_finalize(st);
    return text;
}

int hc_db_repl_resolve(struct hc_db *db)
{
    struct hc_db_repl *r = db->repl;
    if (!r || !r->n || r->broken)
        return 0;
    pending_dedupe(r);
    for (size_t i = 0; i < r->n; i++) {
        struct hc_error err = {0};
        free(r->p[i].image);
        r->p[i].image = hc_db_row_image(db, r->p[i].table->name, r->p[i].rowid, &err);
        if (!r->p[i].image && err.message[0]) {
            HC_ERROR("replication: %s", err.message);
            r->broken = 1;
            return -1;
        }
    }
    return 0;
}

int hc_db_commit_hook(void *arg)
{
    struct hc_db *db = arg;
    if (db->test_commit && db->test_commit(db->test_commit_arg) != 0)
        return 1;
    struct hc_db_repl *r = db->repl;
    if (!r || !atomic_load(&R.on))
        return 0;
    if (!r->n && !r->broken)
        return 0;
    int refuse = 1;
    if (!r->broken) {
        pending_dedupe(r);
        struct hc_db_change *ch = calloc(r->n, sizeof(*ch));
        if (ch) {
            for (size_t i = 0; i < r->n; i++)
                ch[i] = (struct hc_db_change){
                    .table = r->p[i].table->name, .rowid = r->p[i].rowid, .image = r->p[i].image};
            refuse = R.send(R.arg, ch, r->n) != 0;
            free(ch);
        }
    } else {
        HC_ERROR("replication: a change could not be captured; the commit is refused");
    }
    pending_clear(r);
    return refuse;
}

static void on_rollback(void *arg)
{
    struct hc_db_repl *r = arg;
    pending_clear(r);
}

int hc_db_repl_attach(struct hc_db *db)
{
    if (!atomic_load(&R.on))
        return 0;
    struct hc_db_repl *r = calloc(1, sizeof(*r));
    if (!r || load_tables(db->h, &r->tables, &r->ntables) < 0) {
        free(r);
        return -1;
    }
    r->db = db;
    db->repl = r;
    sqlite3_preupdate_hook(db->h, on_preupdate, r);
    sqlite3_rollback_hook(db->h, on_rollback, r);
    return 0;
}

static void repl_free(struct hc_db_repl *r)
{
    sqlite3_finalize(r->ins.st);
    free(r->ins.present);
    pending_clear(r);
    free(r->p);
    tables_free(r->tables, r->ntables);
    free(r);
}

void hc_db_repl_detach(struct hc_db *db)
{
    if (db->schema) {
        repl_free(db->schema);
        db->schema = NULL;
    }
    struct hc_db_repl *r = db->repl;
    if (!r)
        return;
    sqlite3_preupdate_hook(db->h, NULL, NULL);
    sqlite3_rollback_hook(db->h, NULL, NULL);
    repl_free(r);
    db->repl = NULL;
}

/* ---------------------------------------------------------------- rebuild */

int hc_db_row_insert(struct hc_db *db, const char *table, const json_t *image, struct hc_error *err)
{
    /* The connection's own list when it replicates; else one read once (rebuild, export). */
    if (!db->repl && !db->schema) {
        struct hc_db_repl *s = calloc(1, sizeof(*s));
        if (!s || load_tables(db->h, &s->tables, &s->ntables) < 0) {
            free(s);
            return hc_db_error(db, err, "cannot read the schema");
        }
        db->schema = s;
    }
    const struct table_info *t = find_table(db->repl ? db->repl : db->schema, table);
    int rc = -1;
    json_t *rowid = json_object_get(image, "rowid");
    if (!t || t->no_rowid) {
        hc_error_set(err, HC_E(DB), "a row of table '%s', which this schema does not replicate",
                     table);
        goto done;
    }
    if (!json_is_integer(rowid)) {
        hc_error_set(err, HC_E(DB), "a row of table '%s' without a rowid", table);
        goto done;
    }
    /* Every key of the image must be a column (or rowid): nothing is dropped silently. */
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)image, key, v)
    {
        int known = strcmp(key, "rowid") == 0;
        for (int i = 0; !known && i < t->ncols; i++)
            known = strcmp(t->cols[i], key) == 0;
        if (!known) {
            hc_error_set(err, HC_E(DB), "a row of table '%s' has column '%s', unknown here", table,
                         key);
            goto done;
        }
    }
    struct hc_db_repl *cache_of = db->repl ? db->repl : db->schema;
    struct insert_cache *c = &cache_of->ins;
    unsigned char present[512];
    if (t->ncols > (int)sizeof(present)) {
        hc_error_set(err, HC_E(DB), "table '%s' has too many columns", table);
        goto done;
    }
    for (int i = 0; i < t->ncols; i++)
        present[i] = i != t->ipk && json_object_get(image, t->cols[i]) != NULL;
    sqlite3_stmt *st = NULL;
    if (c->table == t && c->present && memcmp(c->present, present, (size_t)t->ncols) == 0) {
        st = c->st;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    } else {
        char sql[8192];
        size_t len =
            (size_t)snprintf(sql, sizeof(sql), "INSERT OR REPLACE INTO \"%s\" (rowid", table);
        int nbind = 1;
        for (int i = 0; i < t->ncols; i++)
            if (present[i] && len < sizeof(sql) - 300) {
                len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", \"%s\"", t->cols[i]);
                nbind++;
            }
        len += (size_t)snprintf(sql + len, sizeof(sql) - len, ") VALUES (?");
        for (int i = 1; i < nbind && len < sizeof(sql) - 8; i++)
            len += (size_t)snprintf(sql + len, sizeof(sql) - len, ", ?");
        snprintf(sql + len, sizeof(sql) - len, ")");
        sqlite3_finalize(c->st);
        free(c->present);
        c->st = NULL;
        c->table = NULL;
        c->present = malloc((size_t)t->ncols + 1);
        if (!c->present || sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
            sqlite3_finalize(st);
            hc_db_error(db, err, "cannot prepare a row's insert");
            goto done;
        }
        memcpy(c->present, present, (size_t)t->ncols);
        c->table = t;
        c->st = st;
    }
    sqlite3_bind_int64(st, 1, json_integer_value(rowid));
    int b = 2;
    for (int i = 0; i < t->ncols; i++) {
        if (!present[i])
            continue;
        v = json_object_get(image, t->cols[i]);
        if (json_is_integer(v))
            sqlite3_bind_int64(st, b, json_integer_value(v));
        else if (json_is_real(v))
            sqlite3_bind_double(st, b, json_real_value(v));
        else if (json_is_string(v))
            sqlite3_bind_text(st, b, json_string_value(v), (int)json_string_length(v),
                              SQLITE_TRANSIENT);
        else if (json_is_object(v) && json_is_string(json_object_get(v, "blob_b64"))) {
            const char *b64 = json_string_value(json_object_get(v, "blob_b64"));
            size_t n = strlen(b64);
            unsigned char *blob = malloc(n / 4 * 3 + 1);
            int got = blob ? EVP_DecodeBlock(blob, (const unsigned char *)b64, (int)n) : -1;
            while (got > 0 && n > 0 && b64[n - 1] == '=') {
                got--;
                n--;
            }
            if (got >= 0)
                sqlite3_bind_blob(st, b, blob, got, SQLITE_TRANSIENT);
            free(blob);
        } else
            sqlite3_bind_null(st, b);
        b++;
    }
    if (sqlite3_step(st) != SQLITE_DONE)
        hc_db_error(db, err, "cannot insert a replicated row");
    else
        rc = 0;
    sqlite3_reset(st);
done:
    return rc;
}
