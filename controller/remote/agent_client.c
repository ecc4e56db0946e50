/*
 * Calls from the controller to agents over mutual TLS: client construction from the
 * controller's files, URL joining, and one-call error mapping (see agent_client.h).
 */
#include "controller/remote/agent_client.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "controller/api/crl.h"
#include "controller/ha/fence.h"
#include "controller/state/node_identity.h"

long hc_agent_timeout_ms(const struct hc_controller *ctl)
{
    return ctl->agent_timeout_ms > 0 ? (long)ctl->agent_timeout_ms : HC_AGENT_DEFAULT_TIMEOUT_MS;
}

/* Fencing (controller/ha/fence.h), in the one path every request to an agent takes: each carries
 * the term once there is one, and a mutating one is sent only while this process may drive
 * agents (an HA leader whose lease lapsed may not). */
static int agent_fence(void *arg, const char *method, const char *url, char *header, size_t len,
                       struct hc_error *err)
{
    (void)arg;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 && hc_fence_check(err) < 0)
        return hc_error_prefix(err, "%s %s not sent", method, url);
    int64_t term = hc_fence_term();
    if (term > 0)
        snprintf(header, len, "%s: %lld", HC_FENCE_HEADER, (long long)term);
    return 0;
}

static struct hc_http_client *agent_client_make(const struct hc_controller *ctl, struct hc_db *db,
                                                int ignore_expiry, struct hc_error *err)
{
    long timeout = hc_agent_timeout_ms(ctl);
    char crl[1200];
    hc_crl_path(ctl, crl, sizeof(crl));
    struct hc_tls_client_config tls = {
        .ca_file = ctl->ca_file,
        .cert_file = ctl->client_cert,
        .key_file = ctl->client_key,
        /* Written at start (hc_api_new) and at every revocation; never optional once there is
         * a data dir: a missing list fails the client rather than trusting a removed node. */
        .crl_file = crl[0] ? crl : NULL,
        /* A peer that does not finish the TCP handshake within the request timeout is as
         * unreachable as one that refuses it; never wait longer than the request itself. */
        .connect_timeout_ms = timeout < 3000 ? timeout : 3000,
        /* An agent's answer is small; a rogue agent's is cut off here (agent_client.h). */
        .max_response = HC_AGENT_MAX_RESPONSE,
        .max_json_values = HC_AGENT_MAX_JSON_VALUES,
        .ignore_expiry = ignore_expiry,
    };
    struct hc_http_client *c = hc_http_client_new(&tls, err);
    if (!c)
        hc_error_prefix(err, "cannot create the agent client");
    if (c) {
        hc_http_client_set_pinner(c, hc_identity_pin_for_url, db);
        hc_http_client_set_before(c, agent_fence, NULL);
    }
    if (!c && crl[0] && access(crl, F_OK) != 0)
        hc_error_hint(err, "restart hcctld: it writes the revocation list from its database");
    return c;
}

struct hc_http_client *hc_agent_client_new(const struct hc_controller *ctl, struct hc_db *db,
                                           struct hc_error *err)
{
    return agent_client_make(ctl, db, 0, err);
}

struct hc_http_client *hc_agent_client_new_expired(const struct hc_controller *ctl,
                                                   struct hc_db *db, struct hc_error *err)
{
    return agent_client_make(ctl, db, 1, err);
}

int hc_agent_url(char *buf, size_t len, const char *agent_url, const char *path,
                 struct hc_error *err)
{
    size_t base = strlen(agent_url);
    while (base > 0 && agent_url[base - 1] == '/')
        base--;
    int n = snprintf(buf, len, "%.*s%s", (int)base, agent_url, path);
    if (n < 0 || (size_t)n >= len)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "agent url '%s' is too long", agent_url);
    return 0;
}

int hc_agent_err_is_transport(const struct hc_error *err)
{
    return strcmp(err->code, HC_ERR_UNREACHABLE) == 0 || strcmp(err->code, HC_ERR_TIMEOUT) == 0 ||
           strcmp(err->code, HC_ERR_TLS) == 0;
}

int hc_agent_call(struct hc_http_client *client, const char *agent_url, const char *method,
                  const char *path, const json_t *body, long timeout_ms,
                  struct hc_http_response *resp, struct hc_error *err)
{
    char url[2048];
    if (hc_agent_url(url, sizeof(url), agent_url, path, err) != 0)
        return -1;
    /* The client's transport errors already name the URL ("cannot reach '...': ..."). */
    if (hc_http_request(client, method, url, NULL, body, timeout_ms, resp, err) != 0)
        return -1;
    if (resp->status >= 200 && resp->status < 300)
        return 0;
    /* 502: the agent is reachable but refused or failed; its own error says why. */
    if (hc_error_from_json(err, resp->body, 502) == 0)
        return hc_error_prefix(err, "agent %s answered %s %s with HTTP %ld", agent_url, method,
                               path, resp->status);
    return hc_error_set(err, HC_E(AGENT_ERROR), "agent %s answered %s %s with HTTP %ld", agent_url,
                        method, path, resp->status);
}
