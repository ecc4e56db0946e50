/*
 * The controller's HTTPS client toward agents: mutual TLS with the controller's client
 * certificate (CN hcctld-client), the cluster CA as the only trust anchor, and the cluster's
 * revocation list (DATA_DIR/crl.pem, controller/api/crl.h): a removed node's certificate is
 * refused.
 *
 * A client wraps one hc_http_client (one curl multi handle) and, like it, belongs to one thread.
 * Use hc_http_fanout on it for many agents at once.
 */
#ifndef HC_CONTROLLER_AGENT_CLIENT_H
#define HC_CONTROLLER_AGENT_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "common/https_client.h"
#include "controller/controller.h"
#include "db/db.h"

/*
 * The most the controller accepts in one answer from an agent, and the JSON values in it
 * (common/https_client.h: checked while the answer arrives, refused with response_too_large).
 * Derived from what the agent API can produce, measured in tests/unit/test_agent_limits.c: the
 * largest answer is POST /v1/net/probe at its 1024-target maximum with every field at its
 * widest, 397 KiB and 22.5 Ki values compact; /v1/interfaces takes ~212 bytes and ~38 values per
 * interface (4096 interfaces: 848 KiB, 152 Ki values); every other answer is a few KiB. So
 * 2 MiB and 256 Ki values: 5 times the probe answer, ~6,700 interfaces. A rogue agent's answer
 * then costs the controller at most ~12 MiB resident per call (parsed, under ASan) instead of
 * the 64 MiB buffered and gigabytes parsed it could cost before.
 */
#define HC_AGENT_MAX_RESPONSE (2u * 1024 * 1024)
#define HC_AGENT_MAX_JSON_VALUES (256u * 1024)

/* Default per-request timeout when ctl->agent_timeout_ms is not set. */
#define HC_AGENT_DEFAULT_TIMEOUT_MS 5000

/* New client configured from ctl (client_cert, client_key, ca_file, the CRL in data_dir).
 * Every call pins the public key of the node enrolled at the URL's host:port, looked up in db
 * (the calling thread's connection, borrowed for the client's life): only the agent holding
 * that node's key is talked to, and a URL no node has is refused unsent
 * (controller/state/node_identity.h). Every call carries the fencing term (X-HC-Term, when
 * there is one) and a mutating call is refused unsent while hc_fence_check fails
 * (controller/ha/fence.h). NULL with err, e.g. when the CRL file is missing (the
 * controller writes it at start). Caller frees with hc_http_client_free. */
struct hc_http_client *hc_agent_client_new(const struct hc_controller *ctl, struct hc_db *db,
                                           struct hc_error *err);

/* The same, but a node's certificate past its notAfter is accepted (CA, revocation list and
 * the node's pinned key are still checked): only to renew an expired certificate
 * (controller/remote/cert_renew.h). */
struct hc_http_client *hc_agent_client_new_expired(const struct hc_controller *ctl,
                                                   struct hc_db *db, struct hc_error *err);

/* The request timeout to use for ctl: agent_timeout_ms, or the default. */
long hc_agent_timeout_ms(const struct hc_controller *ctl);

/* Joins an agent URL ("https://10.0.0.2:7444", trailing '/' allowed) and a path ("/v1/status").
 * Returns 0, or -1 with err when buf is too small. */
int hc_agent_url(char *buf, size_t len, const char *agent_url, const char *path,
                 struct hc_error *err);

/* One call to an agent. body may be NULL. Returns 0 on a 2xx answer. Returns -1 with err on a
 * transport failure (err->code unreachable, timeout or tls_error, message naming the agent) or
 * on a non-2xx answer (err from the agent's error body, or "agent ... answered HTTP N"); resp is
 * filled whenever an answer arrived, and the caller clears it in every case. */
int hc_agent_call(struct hc_http_client *client, const char *agent_url, const char *method,
                  const char *path, const json_t *body, long timeout_ms,
                  struct hc_http_response *resp, struct hc_error *err);

/* 1 when err is a transport failure (the agent could not be reached or did not answer). */
int hc_agent_err_is_transport(const struct hc_error *err);

#endif
