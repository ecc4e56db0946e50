/*
 * The controller's Prometheus metrics, served at GET /metrics in the text exposition format
 * (version 0.0.4): nodes by health, by state and by maintenance; operations by state; the
 * agent poll latency as a histogram; API requests by method and status code; build info,
 * uptime and poll cycles.
 *
 * Counters that events feed (API requests, agent polls) live in process-wide storage, as in
 * Prometheus client libraries' default registry: the API thread and the poller thread update
 * them without knowing about each other. Request counters are C11 atomics; the latency
 * histogram takes a mutex so that a scrape sees its buckets, sum and count from one moment.
 * Gauges that the database knows (nodes, operations) are read at scrape time.
 */
#ifndef HC_CONTROLLER_METRICS_H
#define HC_CONTROLLER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/https_server.h"
#include "controller/controller.h"
#include "db/db.h"

/* One API request answered with status (called from the API's after-hook). Thread-safe. */
void hc_metrics_api_request(const char *method, int status);
/* One agent poll: ok with its latency, or failed (no answer, TLS error, bad status).
 * Thread-safe (the poller thread). */
void hc_metrics_agent_poll(int ok, int64_t latency_ms);

/* The exposition text (caller frees) or NULL with err (a database error). ctl may be NULL
 * (no uptime, poll cycles). */
char *hc_metrics_render(struct hc_db *db, const struct hc_controller *ctl, struct hc_error *err);

/* GET /metrics (arg is the struct hc_api). */
void hc_res_metrics(struct hc_request *req, void *arg);

/* Zeroes the process-wide counters (tests). */
void hc_metrics_reset(void);

#endif
