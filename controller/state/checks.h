/*
 * The pre-flight checks (issue 18 part 4; docs/api.md "Checks"): judgements on what the
 * controller knows of the cluster, its database (which the poller fills from every agent's
 * GET /v1/status) and its own certificates. Nothing here calls a node: the checks cost no more
 * than a few reads, so an upgrade or a configuration change can run them first.
 *
 * Each check has a stable id (HC_CHECK_IDS, common/check_ids.h) and gives one result per node it
 * concerns (or one for the cluster, node null): severity ok, warning, error or unknown. Data the
 * controller could not get (a node never polled, unreachable since, an agent too old to report it)
 * is unknown, never ok.
 */
#ifndef HC_CONTROLLER_CHECKS_H
#define HC_CONTROLLER_CHECKS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/check_ids.h"
#include "common/error.h"
#include "db/db.h"

/* Thresholds (docs/api.md "Checks" says them too). */
/* Certificates: warning within 30 days of their end, error within 7 or ended (shorter for
 * short-lived ones: hc_pki_warn_at_ms, common/pki.h) */
#define HC_CHECK_CLOCK_WARN_MS 2000 /* |agent clock - controller clock| */
#define HC_CHECK_CLOCK_ERROR_MS 30000
#define HC_CHECK_DISK_WARN_PERCENT 10 /* free space of the agent's data directory below */
#define HC_CHECK_DISK_ERROR_PERCENT 5

/* One certificate of the controller's own (CA, server, client): what it is and its file. */
struct hc_check_cert {
    const char *kind; /* "ca", "server", "client" */
    const char *what; /* "controller's CA", ... */
    const char *path;
};

/* 1 when id is one of HC_CHECK_IDS, else 0. */
int hc_check_id_valid(const char *id);

/* Runs every check at time now_ms (epoch ms) and returns
 * {"checks":[{"id","severity","node"|null,"message","remedy"}...],
 *  "summary":{"ok","warning","error","unknown"}} (new reference), or NULL with err when the
 * database cannot be read. An unreadable certificate file is a result (unknown), not an err. */
json_t *hc_checks_run(struct hc_db *db, const struct hc_check_cert *certs, size_t ncerts,
                      int64_t now_ms, struct hc_error *err);

/* The ids of report's results at error, not in skip (an array of ids, may be NULL), comma
 * separated into buf ("" when none). Returns how many. */
int hc_checks_errors(const json_t *report, const json_t *skip, char *buf, size_t len);

/* Validates "skip_checks" of a request body (absent: *skip NULL): an array of known ids, else
 * 400 invalid_argument naming the bad one. 0 with *skip borrowed from body, or -1 with err. */
int hc_checks_skip_arg(const json_t *body, const json_t **skip, struct hc_error *err);

/* What the refusing routes share: runs the checks and, when any not in skip is at error,
 * fails with 409 checks_failed naming them (the hint: GET /v1/checks, skip_checks). 0 when
 * the change may go on (*report, when report is not NULL, is the checks' report: a new
 * reference), -1 with err. */
int hc_checks_gate(struct hc_db *db, const struct hc_check_cert *certs, size_t ncerts,
                   int64_t now_ms, const json_t *skip, json_t **report, struct hc_error *err);

#endif
