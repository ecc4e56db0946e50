/*
 * Every certificate of the cluster and when it ends (docs/certificates.md): the CA, the
 * controller's server and client certificates (from its files) and each node's (nodes table).
 * What `hcctl cluster status` shows, what /metrics exports and what the expiry warnings say.
 * The thresholds are common/pki.h's (hc_pki_warn_at_ms, hc_pki_error_at_ms), shared with the
 * pre-flight check cert_expiring.
 */
#ifndef HC_CONTROLLER_CERTS_H
#define HC_CONTROLLER_CERTS_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "controller/controller.h"
#include "controller/state/checks.h"
#include "db/db.h"

/* The controller's three (kind "ca", "server", "client"), from ctl's paths. */
void hc_certs_own(const struct hc_controller *ctl, struct hc_check_cert out[3]);

/* {"earliest": {"certificate", "node", "not_after", "seconds_left"} | null,
 *  "ca"|"server"|"client": {"not_after", "seconds_left", "state"} | {"error"},
 *  "agents": {"total", "valid", "expiring", "renewing", "expired", "unknown",
 *             "earliest": {"node", "not_after", "seconds_left"} | null}}
 * at now_ms ("state": valid, expiring, critical or expired). New reference, or NULL with err (a
 * database error). */
json_t *hc_certs_summary(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms,
                         struct hc_error *err);

/* The notAfter (epoch ms) of the controller's certificates and the earliest of the nodes', in
 * the order ca, server, client, agents (0 when unknown). 0 or -1 with err. */
int hc_certs_not_after(const struct hc_controller *ctl, struct hc_db *db, int64_t out[4],
                       struct hc_error *err);

/* The warnings: once per certificate and level (warning, error, expired), an event
 * cert.expiring or cert.expired naming the certificate, when it ends and what to do. Logged,
 * never fails. */
void hc_certs_alerts(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms);

/* Renews the controller's server and client certificates when two thirds of their lifetime
 * are gone, or when the CA in DIR/ca.pem (its first certificate: the one that signs) did not
 * sign them (a CA rotation): the same key, names and usages, the same lifetime, written in
 * place atomically (event cert.renewed). The caller serves the new server certificate
 * (*server_renewed); the client certificate is read at every new connection to an agent, and
 * agents pin its key, which does not change. Returns how many were renewed, or -1 with err. */
int hc_certs_renew_own(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms,
                       int *server_renewed, struct hc_error *err);

#endif
