/*
 * Renewal of the agents' certificates over the agent API (docs/certificates.md), run by the
 * poller after each cycle with its database connection and agent client.
 *
 * A node is due once two thirds of its certificate's lifetime are gone (nodes.cert_renew_at),
 * or when `hcctl node renew-cert` asked (nodes.cert_renew_asked). Renewal of one node:
 *
 *   1. POST /v1/cert/csr: the agent makes a new key and returns a CSR for it;
 *   2. the controller signs the CSR's key with what it records about the node (CN = its name,
 *      SAN = its address: never what the CSR says), for the configured lifetime, and records
 *      the new certificate as pending (cert_next_*): calls to the node now pin either key;
 *   3. POST /v1/cert/install: the agent serves the new certificate from the next connection;
 *   4. one transaction makes the new certificate the node's, revokes the old serial (event
 *      cert.renewed), and the revocation list is written again.
 *
 * A pending renewal that a crash or a lost answer left is settled from what the agent reports
 * serving (GET /v1/status cert_serial): the new serial finishes it (4), the old one abandons it
 * (its serial is revoked: never used). A certificate that has expired makes the node unreachable
 * (the TLS handshake fails): it is renewed only when asked, and then through a connection that
 * skips the chain's validity but still pins the key the node enrolled with.
 */
#ifndef HC_CONTROLLER_CERT_RENEW_H
#define HC_CONTROLLER_CERT_RENEW_H

#include "common/error.h"
#include "common/https_client.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_CERT_RENEWALS_PER_CYCLE 16 /* nodes renewed in one poll cycle at most */

/* One pass: settles pending renewals, renews the due nodes (at most
 * HC_CERT_RENEWALS_PER_CYCLE), gives the expiry warnings (events cert.expiring / cert.expired,
 * once per certificate and level) and prunes revoked entries past their certificate's end.
 * Never fails: what goes wrong is logged and tried again next cycle. */
void hc_cert_renew_cycle(struct hc_controller *ctl, struct hc_db *db,
                         struct hc_http_client *client);

/* Renews node name now (the work of one node in the pass above; `expired_ok` lets it reach a
 * node whose certificate has expired, see above). 0, or -1 with err. */
int hc_cert_renew_node(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client,
                       const char *name, int expired_ok, struct hc_error *err);

#endif
