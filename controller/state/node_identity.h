/*
 * Who a node is (docs/security.md "Node identity"). A node's certificate names it (CN) and its
 * address (the only SAN); the controller, not the enrolling agent, decides both may be issued:
 * names that other actors use and addresses that are the controller's or another node's are
 * refused. When it calls a node, the controller pins the public key that node enrolled with,
 * so a certificate for the same address held by anyone else (a phantom node, an old host) is
 * refused in the TLS handshake, and the poller checks the name the agent reports.
 */
#ifndef HC_CONTROLLER_NODE_IDENTITY_H
#define HC_CONTROLLER_NODE_IDENTITY_H

#include <openssl/x509.h>
#include <stddef.h>

#include "common/error.h"
#include "db/db.h"

/* 0 when name may be a node's: not one of the names the event log uses for other actors
 * (admin, anonymous, controller, hcctld, hcctld-client, ..., operation ids "op-*") and not the
 * name of an API token (the actor of its calls). Else -1 with a 400 naming the rule. */
int hc_identity_node_name_check(struct hc_db *db, const char *name, struct hc_error *err);

/* 0 when name may be an API token's: not a node's name nor a reserved actor other than
 * "admin" (the first token's name). Else -1 with 400/409. */
int hc_identity_token_name_check(struct hc_db *db, const char *name, struct hc_error *err);

/* 0 when host may be the address in a new node certificate: the controller's server
 * certificate is not valid for it (server_cert; NULL skips that check) and no node other than
 * the one named replacing (may be NULL) has it. Else -1 with a 409 saying whose it is. */
int hc_identity_address_check(struct hc_db *db, X509 *server_cert, const char *host,
                              const char *replacing, struct hc_error *err);

/* hc_http_pin_fn for the controller's agent clients: arg is the calling thread's struct
 * hc_db. The node whose agent_url is the scheme://host:port of url gives its pin; a URL no
 * node has is refused (nothing is sent to an address the controller does not know). While a
 * renewal is under way the pin is "OLD;NEW": the node may serve either key. */
int hc_identity_pin_for_url(void *db, const char *url, char *pin, size_t len, struct hc_error *err);

/* Fills nodes.cert_pin and cert_not_after from cert_pem where they are NULL (rows enrolled
 * before pins, or expiry, were recorded). Returns the number of rows filled, or -1 with err. */
int hc_identity_backfill(struct hc_db *db, struct hc_error *err);

/* "https://HOST:PORT" of url (no path, no trailing '/') into out. 0, or -1 when url has no
 * authority or out is too small. */
int hc_identity_url_base(const char *url, char *out, size_t len);

#endif
