/*
 * The append-only event log (controller/state/events.h): append with the wall-clock time, and list
 * by id with optional type and node filters, times rendered as RFC 3339.
 */
#include "controller/state/events.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/json_util.h"
#include "common/util.h"

int hc_event_add(struct hc_db *db, const char *type, const char *node, const char *op_id,
                 const char *actor, json_t *details, struct hc_error *err, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    char *details_text = details ? hc_json_dump(details) : NULL;
    json_decref(details);
    int rc = -1;
    sqlite3_stmt *st = hc_db_prepare(db,
                                     "INSERT INTO events (ts, type, node, op_id, actor, message, "
                                     "details_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                     err);
    if (!st)
        goto cleanup;
    /* sqlite3_bind_text with a NULL pointer binds SQL NULL, which is what the optional
     * columns want. */
    sqlite3_bind_int64(st, 1, hc_now_ms());
    sqlite3_bind_text(st, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, node, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, op_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, actor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, message, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, details_text ? details_text : "{}", -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        hc_db_error(db, err, "cannot append event");
        goto cleanup;
    }
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    free(details_text);
    return rc;
}

static json_t *column_text_or_null(sqlite3_stmt *st, int col)
{
    const unsigned char *s = sqlite3_column_text(st, col);
    return s ? json_string((const char *)s) : json_null();
}

/* One EVENT object from the current row of the list query. */
static json_t *event_from_row(sqlite3_stmt *st)
{
    char ts[32];
    hc_time_format(sqlite3_column_int64(st, 1), ts, sizeof(ts));
    const char *details_text = (const char *)sqlite3_column_text(st, 7);
    json_t *details = details_text ? json_loads(details_text, 0, NULL) : NULL;
    json_t *ev = json_object();
    json_object_set_new(ev, "id", json_integer(sqlite3_column_int64(st, 0)));
    json_object_set_new(ev, "ts", json_string(ts));
    json_object_set_new(ev, "type", column_text_or_null(st, 2));
    json_object_set_new(ev, "node", column_text_or_null(st, 3));
    json_object_set_new(ev, "op_id", column_text_or_null(st, 4));
    json_object_set_new(ev, "actor", column_text_or_null(st, 5));
    json_object_set_new(ev, "message", column_text_or_null(st, 6));
    json_object_set_new(ev, "details", details ? details : json_object());
    return ev;
}

/* One page's query without its order: the same filters serve both ends of the log. */
#define EVENTS_PAGE                                                                                \
    "SELECT id, ts, type, node, op_id, actor, message, details_json FROM events WHERE id > ? "     \
    "AND (? IS NULL OR id < ?) AND (? IS NULL OR type = ?) AND (? IS NULL OR node = ?) "

/* Reads up to limit + 1 rows: the extra one only tells whether there is more. */
static int read_page(sqlite3_stmt *st, int limit, json_t *events, int *more)
{
    int rc;
    *more = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((int)json_array_size(events) == limit) {
            *more = 1;
            return SQLITE_DONE;
        }
        json_array_append_new(events, event_from_row(st));
    }
    return rc;
}

/* A page read newest first is sent oldest first, like every other page. */
static void reverse(json_t *events)
{
    size_t n = json_array_size(events);
    for (size_t i = 0; i < n / 2; i++) {
        json_t *a = json_incref(json_array_get(events, i));
        json_array_set(events, i, json_array_get(events, n - 1 - i));
        json_array_set_new(events, n - 1 - i, a);
    }
}

json_t *hc_events_query(struct hc_db *db, const struct hc_events_query *q, struct hc_error *err)
{
    if (q->limit < 1 || q->limit > 1000) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "limit %d is out of range", q->limit);
        hc_error_hint(err, "use a limit between 1 and 1000");
        return NULL;
    }
    json_t *result = NULL;
    json_t *events = json_array();
    int more = 0;
    /* "? IS NULL OR" lets one statement serve every combination of filters; ids are the
     * primary key, so either end of the log is an index walk. */
    sqlite3_stmt *st = hc_db_prepare(
        db, q->newest ? EVENTS_PAGE "ORDER BY id DESC LIMIT ?" : EVENTS_PAGE "ORDER BY id LIMIT ?",
        err);
    if (!st)
        goto cleanup;
    sqlite3_bind_int64(st, 1, q->since);
    for (int i = 2; i <= 3; i++)
        if (q->before > 0)
            sqlite3_bind_int64(st, i, q->before);
        else
            sqlite3_bind_null(st, i);
    sqlite3_bind_text(st, 4, q->type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, q->type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, q->node, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, q->node, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, q->limit + 1);
    if (read_page(st, q->limit, events, &more) != SQLITE_DONE) {
        hc_db_error(db, err, "cannot list events");
        goto cleanup;
    }
    if (q->newest)
        reverse(events);
    /* With no new events last_id stays at since, so a follower keeps asking from there. */
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    int64_t last_id = last ? json_integer_value(json_object_get(last, "id")) : q->since;
    result = json_pack("{s:O, s:I, s:b}", "events", events, "last_id", (json_int_t)last_id, "more",
                       more);
cleanup:
    sqlite3_finalize(st);
    json_decref(events);
    return result;
}

json_t *hc_events_list(struct hc_db *db, int64_t since, int limit, const char *type,
                       const char *node, struct hc_error *err)
{
    struct hc_events_query q = {since, 0, limit, 0, type, node};
    return hc_events_query(db, &q, err);
}

int64_t hc_events_prune(struct hc_db *db, int64_t older_than_ms, int max_batches,
                        struct hc_error *err)
{
    int64_t removed = 0;
    for (int batch = 0; batch < max_batches; batch++) {
        if (hc_db_begin(db, err) < 0)
            return -1;
        /* MAX: the cutoff only grows (the schema's trigger refuses a smaller one) */
        int n = hc_db_run(db, err,
                          "UPDATE events_retention SET cutoff_ms = MAX(cutoff_ms, ?) WHERE id = 1",
                          "i", older_than_ms);
        if (n >= 0)
            n = hc_db_run(db, err,
                          "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? "
                          "ORDER BY id LIMIT ?)",
                          "ii", older_than_ms, (int64_t)HC_EVENTS_PRUNE_BATCH);
        if (n < 0 || hc_db_commit(db, err) < 0) {
            hc_db_rollback(db);
            return -1;
        }
        removed += n;
        if (n < HC_EVENTS_PRUNE_BATCH)
            break;
    }
    if (removed > 0) {
        char when[40];
        hc_time_format(older_than_ms, when, sizeof(when));
        if (hc_event_add(
                db, "events.pruned", NULL, NULL, "controller",
                json_pack("{s:I, s:s}", "removed", (json_int_t)removed, "older_than", when), err,
                "%lld events older than %s removed (events retention)", (long long)removed,
                when) < 0)
            return -1;
    }
    return removed;
}
