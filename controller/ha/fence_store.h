/*
 * The fencing term's record in the database (db/migrations/0010_fence_generation.sql): single
 * mode's start generation, one row that only grows. `hcctld run` takes the next one at every
 * start (controller/main.c); the HA code stores the term it reached so that a database it
 * hands back to single mode (`hcctld ha export`) starts above every term the agents have seen.
 * Both run in a transaction of their own: call them outside one.
 */
#ifndef HC_CONTROLLER_HA_FENCE_STORE_H
#define HC_CONTROLLER_HA_FENCE_STORE_H

#include <stdint.h>

#include "common/error.h"
#include "db/db.h"

/* Adds one to the stored generation and writes the new value to *out (only on success). 0, or
 * -1 with err (the database failed; the generation would pass INT64_MAX). */
int hc_fence_generation_next(struct hc_db *db, int64_t *out, struct hc_error *err);
/* Stores value as the generation. A value below the stored one is refused (400
 * invalid_argument naming both): the term only grows. 0, or -1 with err. */
int hc_fence_generation_store(struct hc_db *db, int64_t value, struct hc_error *err);

#endif
