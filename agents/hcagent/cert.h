/*
 * The agent's own certificate (docs/certificates.md): the TLS configuration the agent API
 * serves with, and its renewal over that API, driven by the controller.
 *
 *   POST /v1/cert/csr      a new key (DIR/agent.key.next, 0600) and a CSR for it: {"csr_pem"}
 *   POST /v1/cert/install  {"cert_pem"}: a certificate for that key, signed by a CA in
 *                          DIR/ca.pem, naming this node; the API serves it from the next
 *                          connection on, and it replaces agent.pem and agent.key on disk
 *   PUT /v1/cert/ca        {"ca_pem"}: the CA certificates trusted from now on (a CA rotation:
 *                          old and new, then the new alone); they must verify the agent's own
 *                          certificate. GET /v1/status reports "ca_digest", the sha256 of them
 *
 * The key never leaves the node and the controller never chooses what the certificate says
 * about the node beyond what it signs (it signs with the node's recorded name and address). An
 * install interrupted by a crash is finished or undone at the next start (hc_agent_cert_recover):
 * agent.pem is replaced first, then agent.key, and at start agent.pem's key decides which key
 * file is the agent's.
 */
#ifndef HC_AGENTS_CERT_H
#define HC_AGENTS_CERT_H

#include <event2/event.h>
#include <jansson.h>

#include "common/error.h"
#include "common/https_server.h"

#define HC_AGENT_FILE_KEY_NEXT "agent.key.next"
#define HC_AGENT_CA_MAX 4 /* CA certificates a PUT /v1/cert/ca may hold */

/* The agent API's TLS configuration: the strings point into the struct. */
struct hc_agent_tls {
    char cert[1100], key[1100], ca[1100];
    struct hc_tls_server_config tls;
};
/* Fills t from the data directory: agent.pem, agent.key, client CA ca.pem, the controller's
 * client CN and (when not "") its pin. 0, or -1 with err when a path does not fit. */
int hc_agent_tls_config(struct hc_agent_tls *t, const char *data_dir,
                        const char *controller_client_pin, struct hc_error *err);

/* Finishes or undoes an install a crash interrupted (see above). 0 or -1 with err. */
int hc_agent_cert_recover(const char *data_dir, struct hc_error *err);

struct hc_agent_cert;
/* Registers the two routes on srv. node_name is the name the certificate must carry; the
 * strings are copied. NULL with err. */
struct hc_agent_cert *hc_agent_cert_new(struct hc_http_server *srv, const char *data_dir,
                                        const char *node_name, const char *controller_client_pin,
                                        struct hc_error *err);
void hc_agent_cert_free(struct hc_agent_cert *c);
/* Adds "cert_serial" and "cert_not_after_ms" of the certificate the API serves and "ca_digest"
 * of the trusted CAs (null when they cannot be read) to a GET /v1/status body. */
void hc_agent_cert_status(const struct hc_agent_cert *c, json_t *body);

#endif
