/*
 * hcagent, the node agent: its data directory, its configuration file, enrollment (join) and
 * the agent API it serves to the controller under mutual TLS.
 *
 * Data directory (created 0700 by join):
 *   agent.key  0600  the agent's EC private key (never leaves the node)
 *   agent.pem  0644  the agent's certificate, signed by the cluster CA at enrollment
 *   ca.pem     0644  the cluster CA, pinned by the join token's fingerprint
 *   agent.json 0644  {"name","controller","listen","agent_url","storage_interface"?}, written
 *                    last: its presence means "enrolled"
 *   controller-term 0600  the highest fencing term seen from a controller (fence.h), removed
 *                    when the node leaves or joins again
 *   kept/NAME/       the storage service's data of an earlier membership, moved there when the
 *                    node left the cluster (POST /v1/leave without purge); a later join starts
 *                    with none and never reads it
 */
#ifndef HC_AGENTS_AGENT_H
#define HC_AGENTS_AGENT_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>

#include "common/constants.h"
#include "common/error.h"

#define HC_AGENT_DEFAULT_LISTEN "0.0.0.0:7444"

#define HC_AGENT_FILE_KEY "agent.key"
#define HC_AGENT_FILE_CERT "agent.pem"
#define HC_AGENT_FILE_CA "ca.pem"
#define HC_AGENT_FILE_CONFIG "agent.json"
#define HC_AGENT_DIR_KEPT "kept"

/* The contents of agent.json. */
struct hc_agent_config {
    char name[64];                  /* node name, also the certificate's CN */
    char controller[512];           /* controller base URL, no trailing slash */
    char listen[300];               /* ADDR:PORT the agent API binds */
    char agent_url[320];            /* URL the controller uses to reach this agent */
    char controller_pin[64];        /* the controller's server key (hc_pki_cert_pin), given at
                                       enrollment: downloads from the controller pin it; "" in
                                       configurations from before pins */
    char controller_client_pin[64]; /* the controller's client key: the only client the agent
                                       API accepts ("" before pins: the CN alone decides) */
    char storage_interface[16];     /* the node's storage interface (IFNAMSIZ), whose IPv4
                                       address the storage service serves on ({storage_host},
                                       docs/bundles.md); "" when not given: the listen host */
};

/* agent_config.c */

/* Interface names as the kernel takes them: 1-15 bytes, no '/', ':', whitespace or control
 * character, not "." or "..". 0 or -1 with err naming where it came from. */
int hc_agent_iface_check(const char *iface, struct hc_error *err);
/* Node names: 1-63 characters of letters, digits, '.', '-', '_', starting with a letter or a
 * digit (it becomes a certificate CN and a path segment in the controller API). 0 or -1. */
int hc_agent_name_check(const char *name, struct hc_error *err);
/* New reference to the JSON form of cfg. */
json_t *hc_agent_config_to_json(const struct hc_agent_config *cfg);
/* Fills cfg from the JSON form; -1 with err naming the missing or invalid key. */
int hc_agent_config_from_json(const json_t *obj, struct hc_agent_config *cfg, struct hc_error *err);
/* Writes DIR/agent.json atomically (0644). */
int hc_agent_config_save(const char *data_dir, const struct hc_agent_config *cfg,
                         struct hc_error *err);
/* Reads DIR/agent.json. A missing file is reported as "not enrolled" with a hint to join. */
int hc_agent_config_load(const char *data_dir, struct hc_agent_config *cfg, struct hc_error *err);

/* join.c */

struct hc_join_options {
    const char *controller; /* https://HOST:PORT */
    const char *token;      /* hcj1.<id>.<secret>.<ca fingerprint> */
    const char *data_dir;
    const char *listen;            /* NULL: HC_AGENT_DEFAULT_LISTEN */
    const char *name;              /* NULL: the hostname */
    const char *storage_interface; /* NULL: none (the service serves on the listen host) */
};

/* Checks that ca_pem is the CA the join token pins: its SHA-256 fingerprint must equal
 * pinned_fp (compared in constant time). On mismatch returns -1 with the message
 * "controller at URL presented CA sha256:X but the join token pins sha256:Y". */
int hc_join_pin_ca(const char *controller, const char *ca_pem, const char *pinned_fp,
                   struct hc_error *err);
/* The URL the controller will use to reach this agent: https://IP:PORT with the listen
 * address, or, for a wildcard listen address (0.0.0.0, ::), the local source address of the
 * route toward the controller's host. */
int hc_join_agent_url(const char *controller, const char *listen, char *out, size_t len,
                      struct hc_error *err);
/* Enrolls with the controller and writes the data directory. Nothing is written unless the
 * controller accepted the join; the token is never sent to a controller whose CA does not
 * match the token's fingerprint. 0 or -1 with err (controller refusals keep their code,
 * message and hint). */
int hc_join(const struct hc_join_options *opt, struct hc_error *err);

/* agent_api.c */

struct hc_agent;
/* Loads the data directory and prepares the agent API server on base (mutual TLS: only the
 * controller's client certificate, CN HC_CONTROLLER_CLIENT_CN, signed by DIR/ca.pem). NULL
 * with err. Free with hc_agent_free. */
struct hc_agent *hc_agent_new(struct event_base *base, const char *data_dir, struct hc_error *err);
void hc_agent_free(struct hc_agent *agent);
/* Binds listen (NULL: the configured listen address). 0 or -1 with err. */
int hc_agent_listen(struct hc_agent *agent, const char *listen, struct hc_error *err);
int hc_agent_port(const struct hc_agent *agent);
const struct hc_agent_config *hc_agent_config(const struct hc_agent *agent);
/* The agent's data directory (owned by agent). */
const char *hc_agent_data_dir(const struct hc_agent *agent);
/* The agent's API server (owned by agent): the fuzz target runs requests through it. */
struct hc_http_server *hc_agent_http_server(struct hc_agent *agent);
/* 1 once POST /v1/leave removed the credentials (the loop has then been asked to exit). */
int hc_agent_has_left(const struct hc_agent *agent);
/* `hcagent run`: serves until SIGTERM/SIGINT or a leave request. 0 on a clean stop. */
int hc_agent_serve(const char *data_dir, struct hc_error *err);

#endif
