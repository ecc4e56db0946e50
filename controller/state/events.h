/*
 * The append-only event log: every state change and every mutating API call. The table refuses
 * UPDATE, and DELETE of any event newer than the retention cutoff (triggers in the schema,
 * db/migrations/0009_events_retention.sql); hc_events_prune is the one way events leave.
 */
#ifndef HC_CONTROLLER_EVENTS_H
#define HC_CONTROLLER_EVENTS_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "db/db.h"

/* Appends one event. node, op_id, actor may be NULL; details is stolen (may be NULL).
 * Runs inside the caller's transaction when one is open. Returns 0 or -1 with err. */
int hc_event_add(struct hc_db *db, const char *type, const char *node, const char *op_id,
                 const char *actor, json_t *details, struct hc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* Which events a page holds. */
struct hc_events_query {
    int64_t since;    /* only ids > since (0: from the start) */
    int64_t before;   /* only ids < before (0: no upper bound) */
    int limit;        /* at most this many, 1..1000 */
    int newest;       /* the newest matching page instead of the oldest (still sent oldest first) */
    const char *type; /* filters, NULL for any */
    const char *node;
};

/* One page of matching events, oldest first. Returns {"events":[...],"last_id":N,"more":B}
 * (new reference) or NULL with err. last_id is the id of the newest event returned (since when
 * none), so a follower asks again from there; more says whether matching events exist beyond
 * the page: newer ones after it, or with newest, older ones before it. */
json_t *hc_events_query(struct hc_db *db, const struct hc_events_query *q, struct hc_error *err);

/* hc_events_query of the oldest page: events with id > since, at most limit (1..1000). */
json_t *hc_events_list(struct hc_db *db, int64_t since, int limit, const char *type,
                       const char *node, struct hc_error *err);

/* Events removed by one transaction of hc_events_prune, so that a prune never holds the write
 * lock for long. */
#define HC_EVENTS_PRUNE_BATCH 5000

/* Removes the events older than older_than_ms (epoch ms), oldest first, in transactions of
 * HC_EVENTS_PRUNE_BATCH, at most max_batches of them (the rest waits for the next call), and
 * records one events.pruned event naming how many went. Raises the schema's cutoff to
 * older_than_ms first: the database then refuses to delete anything newer. Returns the number
 * removed, or -1 with err. */
int64_t hc_events_prune(struct hc_db *db, int64_t older_than_ms, int max_batches,
                        struct hc_error *err);

#endif
