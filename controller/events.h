/*
 * The append-only event log: every state change and every mutating API call. The table refuses
 * UPDATE and DELETE (triggers in the schema).
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

/* Events with id > since, oldest first, at most limit (1..1000); type/node filter when non-NULL.
 * Returns {"events":[...],"last_id":N} (new reference) or NULL with err. */
json_t *hc_events_list(struct hc_db *db, int64_t since, int limit, const char *type,
                       const char *node, struct hc_error *err);

#endif
