/*
 * Agent-side fencing of controller terms (docs/hcagent.md "Fencing"): the highest term
 * (X-HC-Term) the agent has seen from a controller, kept in DIR/controller-term, and the rule
 * that serves or refuses each request by it. A controller's term only grows (a start generation
 * in single mode, the leader's term in HA mode), so a request with a lower one comes from a
 * controller that has since been replaced: an old leader woken from a pause, an hcctld started
 * on a copy of the database. It may read, it may not change anything.
 *
 * The rule, for every request (all of them come from a controller: mutual TLS):
 *   - X-HC-Term malformed (not 1-19 decimal digits, above INT64_MAX, empty, or repeated with
 *     different values): 400 invalid_argument;
 *   - a term above the highest: recorded first (temporary file, fsync, rename, fsync of the
 *     directory; 0600), then served; recording failed: 500 io_error, not served;
 *   - a mutating request (any method but GET and HEAD) with a lower term, or with none while the
 *     highest is above 0: 409 stale_term, logged at warn, not served;
 *   - anything else is served, and a lower term on a read lowers nothing.
 *
 * One implementation for hcagent and for every identity of hchollow (tools/hollow). Thread-safe:
 * the compare and the write happen under one mutex, so concurrent raises stay monotonic.
 */
#ifndef HC_AGENTS_FENCE_H
#define HC_AGENTS_FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/https_server.h"

#define HC_AGENT_FILE_TERM "controller-term"
/* The header the controller sends its term in: HC_FENCE_HEADER of controller/ha/fence.h, which
 * the agent does not include (tests/unit/test_fence.c checks that the two agree). */
#define HC_AGENT_FENCE_HEADER "X-HC-Term"
/* The most X-HC-Term headers one request may carry (all equal) before it is refused. */
#define HC_AGENT_FENCE_MAX_HEADERS 8

struct hc_agent_fence;

/* A term as the header and the file write it: 1 to 19 decimal digits, at most INT64_MAX, nothing
 * else (no sign, no space). 0 with *out, or -1. */
int hc_agent_fence_parse(const char *text, int64_t *out);

/* Loads DIR/controller-term (a missing file is term 0). label names the agent in log lines
 * ("" for hcagent, the identity's name in hchollow); copied. A file that is not a term (one
 * decimal integer >= 0, a newline allowed after it) fails with a message naming the file and
 * a hint saying how to recover: the agent must not start on a fence it cannot read. NULL with
 * err. Free with hc_agent_fence_free. */
struct hc_agent_fence *hc_agent_fence_new(const char *dir, const char *label, struct hc_error *err);
void hc_agent_fence_free(struct hc_agent_fence *f); /* accepts NULL */
/* Removes DIR/controller-term: a node that leaves, or joins a cluster anew, owes no earlier
 * controller anything. 0, or -1 with err (a missing file is no error). */
int hc_agent_fence_forget(const char *dir, struct hc_error *err);

/* The highest term seen (GET /v1/status "controller_term"). */
int64_t hc_agent_fence_highest(struct hc_agent_fence *f);

/* The rule above for one request: mutating is 1 for any method but GET and HEAD; values are
 * the request's n X-HC-Term header values (n may exceed what values holds: refused). 0 to serve,
 * or -1 with err (400 invalid_argument, 409 stale_term or 500 io_error) and nothing served. */
int hc_agent_fence_admit(struct hc_agent_fence *f, int mutating, const char *const *values,
                         size_t n, struct hc_error *err);

/* The rule applied to req, for a server's before-hook: 0 to run the route, 1 when it has been
 * answered with the refusal (a stale term is also logged at warn with the method, the path,
 * the peer and both terms). */
int hc_agent_fence_request(struct hc_agent_fence *f, struct hc_request *req);

#endif
