/* The fencing term's record in the database (fence_store.h). */
#include "controller/ha/fence_store.h"

#include <inttypes.h>

/* The stored generation (inside the caller's transaction). 0 with *out, or -1 with err. */
static int generation_read(struct hc_db *db, int64_t *out, struct hc_error *err)
{
    sqlite3_stmt *st = hc_db_prepare(db, "SELECT generation FROM fence_generation", err);
    if (!st)
        return -1;
    int rc = sqlite3_step(st);
    int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int more = rc == SQLITE_ROW ? sqlite3_step(st) : rc;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return hc_db_error(db, err, "reading the fence generation");
    /* The migration's triggers keep one row: anything else is a database edited by hand. */
    if (rc != SQLITE_ROW || more != SQLITE_DONE || v < 0)
        return hc_error_set(err, HC_E(DB),
                            "the fence_generation table must hold one row with a generation "
                            ">= 0");
    *out = v;
    return 0;
}

static int generation_write(struct hc_db *db, int64_t value, struct hc_error *err)
{
    return hc_db_run(db, err, "UPDATE fence_generation SET generation = ?", "i", value) < 0 ? -1
                                                                                            : 0;
}

int hc_fence_generation_next(struct hc_db *db, int64_t *out, struct hc_error *err)
{
    int64_t v = 0;
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (generation_read(db, &v, err) < 0)
        goto fail;
    if (v == INT64_MAX) {
        hc_error_set(err, HC_E(DB), "the fence generation is at its maximum (%" PRId64 ")", v);
        goto fail;
    }
    if (generation_write(db, v + 1, err) < 0 || hc_db_commit(db, err) < 0)
        goto fail;
    *out = v + 1;
    return 0;
fail:
    hc_db_rollback(db);
    return hc_error_prefix(err, "cannot take the next fence generation");
}

int hc_fence_generation_store(struct hc_db *db, int64_t value, struct hc_error *err)
{
    int64_t v = 0;
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (generation_read(db, &v, err) < 0)
        goto fail;
    if (value < v) {
        hc_db_rollback(db);
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "cannot store fence generation %" PRId64 ": it is lower than the "
                            "stored %" PRId64 " (the term only grows)",
                            value, v);
    }
    if (generation_write(db, value, err) < 0 || hc_db_commit(db, err) < 0)
        goto fail;
    return 0;
fail:
    hc_db_rollback(db);
    return hc_error_prefix(err, "cannot store fence generation %" PRId64, value);
}
