/*
 * The health poller: one thread that asks every agent for /v1/status and /v1/interfaces each
 * poll interval, all at once through one curl multi handle (no thread per node), and records
 * what it learnt in the nodes and interfaces tables. A change of a node's health writes one
 * node.health event; a node whose health did not change writes none.
 */
#ifndef HC_CONTROLLER_POLLER_H
#define HC_CONTROLLER_POLLER_H

#include <stdint.h>

#include "common/error.h"
#include "controller/controller.h"

/* Calls in flight at once during a fan-out (two per node): bounded to stay under the default
 * 1024 open files with 1,000 nodes. */
#define HC_POLLER_MAX_PARALLEL 512

struct hc_poller;

/* Opens the poller's own database connection and agent client and starts its thread, which
 * polls at once and then every ctl->poll_interval_ms. NULL with err. ctl must outlive it. */
struct hc_poller *hc_poller_start(struct hc_controller *ctl, struct hc_error *err);
/* Wakes the thread, waits for the cycle in progress (bounded by the agent timeout) and frees
 * everything. Accepts NULL. */
void hc_poller_stop(struct hc_poller *p);
/* Number of completed poll cycles (for tests and the status page). */
uint64_t hc_poller_cycles(const struct hc_poller *p);

#endif
