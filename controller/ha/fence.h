/*
 * Fencing (docs/ha.md "Fencing"): the term of the controller that drives the agents. It only
 * grows: in single mode it is the start generation kept in the database (one more at every
 * `hcctld run`); in HA mode it is the leader key's etcd create_revision plus the base recorded at
 * `hcctld ha init`. Every call the controller makes to an agent carries it (X-HC-Term); an agent
 * persists the highest term it has seen and refuses a mutating call with a lower one (409
 * stale_term). Before a mutating call the controller also asks hc_fence_check(): in HA mode a
 * leader whose lease was not renewed recently (paused, partitioned) may not drive anything.
 * Process-wide; every function may be called from any thread.
 */
#ifndef HC_CONTROLLER_HA_FENCE_H
#define HC_CONTROLLER_HA_FENCE_H

#include <stdint.h>

#include "common/error.h"

#define HC_FENCE_HEADER "X-HC-Term"

/* The current term; 0 until one is set (an agent then sees no header). */
int64_t hc_fence_term(void);
void hc_fence_set_term(int64_t term);

/* 0 when this process may drive agents now, else -1 with err (503 not_leader). Single mode
 * (no checker set): always 0. */
int hc_fence_check(struct hc_error *err);
/* Installs the HA leader's checker (NULL: back to single mode). */
void hc_fence_set_checker(int (*check)(struct hc_error *err));

#endif
