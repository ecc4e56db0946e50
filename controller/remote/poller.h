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
#include "common/https_client.h"
#include "controller/controller.h"
#include "db/db.h"

/* Calls in flight at once during a fan-out (two per node). Not every call of a cycle at once:
 * at 1,000 nodes that started 2,000 TLS handshakes together (each new connection costs the
 * poller's thread milliseconds: curl makes an SSL_CTX per connection, and OpenSSL 3's is dear),
 * none finished within the agent timeout, every timed-out connection was closed, and the next
 * cycle started over (bench/scale.sh; 256 at a time still fell into it now and then). 64 at a
 * time keep each call well inside the timeout even while every connection is new; the
 * connections themselves stay open from cycle to cycle (the client's connection cache holds a
 * quarter of the open-files limit: common/https_client.c), so a steady cycle makes no
 * handshakes at all and 64 in flight are plenty for requests answered in a millisecond. */
#define HC_POLLER_MAX_PARALLEL 64
#define HC_POLLER_MIN_PARALLEL 16
/* How often the poller thread prunes the events older than the retention, and how many batches
 * of HC_EVENTS_PRUNE_BATCH one pass removes at most. */
#define HC_POLLER_PRUNE_EVERY_MS 60000
#define HC_POLLER_PRUNE_BATCHES 4

struct hc_poller;

/* Opens the poller's own database connection and agent client and starts its thread, which
 * polls at once and then every ctl->poll_interval_ms. NULL with err. ctl must outlive it. */
struct hc_poller *hc_poller_start(struct hc_controller *ctl, struct hc_error *err);
/* Wakes the thread, waits for the cycle in progress (bounded by the agent timeout) and frees
 * everything. Accepts NULL. */
void hc_poller_stop(struct hc_poller *p);
/* hc_poller_cycles, the number of completed cycles, is declared in controller/controller.h: the
 * API thread reads it for /metrics without including this node-talking header. */

/* The one place where what an agent says about itself lands in the database, for the poller's
 * cycles and for anyone who asked an agent directly. Records node node_id's answers to
 * GET /v1/status (status) and GET /v1/interfaces (ifaces; NULL or failed: the interfaces keep
 * what was known) inside the caller's transaction: health reachable when status answered 200
 * with a JSON object (no stall verdict: that needs the poller's echo probes), else unreachable
 * with the reason; a change of health writes one node.health event, and operations paused on
 * the node resume when it becomes reachable. A node that is gone is no error. 0 or -1 with
 * err. */
int hc_poller_record(struct hc_db *db, int64_t node_id, const char *node_name,
                     const struct hc_http_call *status, const struct hc_http_call *ifaces,
                     int64_t now_ms, struct hc_error *err);

/* Asks one agent now instead of waiting for the next cycle (bootstrap's wait_healthy):
 * GET /v1/status, then GET /v1/interfaces on the same connection, through client (the caller's
 * controller client, see agent_client.h), and records the answers with hc_poller_record in a
 * transaction of its own. An agent whose status does not answer is not recorded (a node that is
 * still starting adds no health events; the cycles judge unreachable nodes). Returns 1 when
 * both answered and are recorded (the node is reachable, its interfaces known), 0 when either
 * did not answer (why says what happened; an answered status is recorded all the same), -1 with
 * err when the answers could not be recorded. */
int hc_poller_ask(struct hc_db *db, struct hc_http_client *client, int64_t node_id,
                  const char *node_name, const char *agent_url, long timeout_ms, char *why,
                  size_t why_len, struct hc_error *err);

#endif
