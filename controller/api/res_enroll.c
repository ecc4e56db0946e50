/*
 * Enrollment (docs/architecture.md "Enrollment"): GET /v1/ca for the joining agent to pin,
 * POST /v1/join-tokens to mint one-time tokens, and POST /v1/enroll, which consumes a token,
 * signs the agent's CSR and records the node in one transaction.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/api/crl.h"
#include "controller/state/events.h"
#include "controller/state/node_identity.h"
#include "controller/state/nodes.h"
#include "controller/state/software.h"

#define JOIN_TTL_DEFAULT_S 3600
#define JOIN_TTL_MAX_S (7 * 24 * 3600)

void hc_res_ca_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    hc_api_ca_refresh(api);
    hc_reply_json(
        req, 200,
        json_pack("{s:s, s:s}", "ca_pem", api->ca_pem, "ca_fingerprint", api->ca_fingerprint));
}

static int ttl_from_body(const json_t *body, int64_t *ttl, struct hc_error *err)
{
    const json_t *v = json_object_get(body, "ttl_seconds");
    *ttl = JOIN_TTL_DEFAULT_S;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > JOIN_TTL_MAX_S) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "ttl_seconds must be an integer from 1 to %d (7 days)", JOIN_TTL_MAX_S);
        return -1;
    }
    *ttl = json_integer_value(v);
    return 0;
}

/* Mints the token and records the event in one transaction; returns the reply body. */
static json_t *join_token_create(struct hc_api *api, const char *actor, int64_t ttl,
                                 const struct hc_join_binding *bind, struct hc_error *err)
{
    struct hc_join_token jt;
    char expires[32];
    if (hc_db_begin(api->db, err) < 0)
        return NULL;
    if (hc_auth_join_create(api->db, api->ca_fingerprint, ttl, actor, bind, &jt, err) < 0 ||
        hc_event_add(api->db, "token.join_created", NULL, NULL, actor,
                     json_pack("{s:s, s:I, s:s?, s:s?}", "id", jt.id, "ttl_seconds",
                               (json_int_t)ttl, "address", bind->address[0] ? bind->address : NULL,
                               "name", bind->name[0] ? bind->name : NULL),
                     err, "join token %s created, valid for %lld s", jt.id, (long long)ttl) < 0 ||
        hc_db_commit(api->db, err) < 0) {
        hc_db_rollback(api->db);
        return NULL;
    }
    hc_time_format(jt.expires_at_ms, expires, sizeof(expires));
    return json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?}", "token", jt.text, "id", jt.id,
                     "expires_at", expires, "ca_fingerprint", api->ca_fingerprint, "address",
                     bind->address[0] ? bind->address : NULL, "name",
                     bind->name[0] ? bind->name : NULL);
}

static int host_chars_ok(const char *host);

/* The optional "address" and "name" a join token fixes (a hand join behind NAT, or a token
 * meant for one host). */
static int binding_from_body(struct hc_db *db, const json_t *body, struct hc_join_binding *bind,
                             struct hc_error *err)
{
    const char *address = hc_json_str(body, "address", NULL);
    const char *name = hc_json_str(body, "name", NULL);
    memset(bind, 0, sizeof(*bind));
    if (address && (strlen(address) >= sizeof(bind->address) || !host_chars_ok(address)))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid address '%s'", address);
    if (name && !hc_node_name_valid(name))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid node name '%s'", name);
    if (name && hc_identity_node_name_check(db, name, err) < 0)
        return -1;
    snprintf(bind->address, sizeof(bind->address), "%s", address ? address : "");
    snprintf(bind->name, sizeof(bind->name), "%s", name ? name : "");
    return 0;
}

void hc_res_join_token_create(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    hc_api_ca_refresh(api);
    struct hc_error err = {0};
    json_t *in = hc_api_body(req);
    if (!in)
        return;
    int64_t ttl;
    struct hc_join_binding bind;
    json_t *body = NULL;
    if (ttl_from_body(in, &ttl, &err) == 0 && binding_from_body(api->db, in, &bind, &err) == 0)
        body = join_token_create(api, hc_api_actor(req), ttl, &bind, &err);
    json_decref(in);
    hc_api_reply(req, 201, body, &err);
}

/* What an enrolling agent sent, checked. Strings point into the request body. */
struct enroll_req {
    const char *token;
    const char *csr_pem;
    const char *name;
    const char *agent_url;
    const char *hostname;
    char host[256]; /* from agent_url: the certificate's SAN and the node's address */
    int port;
    char url[320]; /* agent_url as recorded: https://HOST:PORT, no trailing '/' */
};

/* host as an IPv6 address (IPv4 mapped); 0 when it is no IP literal. */
static int ip_literal(const char *host, struct in6_addr *out)
{
    struct in_addr v4;
    if (inet_pton(AF_INET6, host, out) == 1)
        return 1;
    if (inet_pton(AF_INET, host, &v4) != 1)
        return 0;
    memset(out, 0, sizeof(*out));
    out->s6_addr[10] = out->s6_addr[11] = 0xff;
    memcpy(&out->s6_addr[12], &v4, 4);
    return 1;
}

static int host_chars_ok(const char *host)
{
    for (const char *p = host; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:", *p))
            return 0;
    return *host != '\0';
}

/* agent_url must be https://HOST:PORT (an optional trailing slash, nothing else). */
static int parse_agent_url(struct enroll_req *e, struct hc_error *err)
{
    const char *url = e->agent_url;
    char hostport[300];
    if (strncmp(url, "https://", 8) != 0 || strlen(url + 8) >= sizeof(hostport))
        goto bad;
    snprintf(hostport, sizeof(hostport), "%s", url + 8);
    size_t len = strlen(hostport);
    if (len && hostport[len - 1] == '/')
        hostport[len - 1] = '\0';
    if (hc_split_host_port(hostport, e->host, sizeof(e->host), &e->port, NULL) < 0 || e->port < 1 ||
        e->port > 65535 || !host_chars_ok(e->host))
        goto bad;
    snprintf(e->url, sizeof(e->url), "https://%s", hostport);
    return 0;
bad:
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid agent_url '%s'", url);
    return hc_error_hint(err, "use https://HOST:PORT with the agent's listen address");
}

static int enroll_parse(const json_t *body, struct enroll_req *e, struct hc_error *err)
{
    if (!(e->token = hc_json_req_str(body, "token", err)) ||
        !(e->csr_pem = hc_json_req_str(body, "csr_pem", err)) ||
        !(e->name = hc_json_req_str(body, "name", err)) ||
        !(e->agent_url = hc_json_req_str(body, "agent_url", err)))
        return -1;
    e->hostname = hc_json_str(body, "hostname", NULL);
    if (!hc_node_name_valid(e->name)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid node name '%s'", e->name);
        return hc_error_hint(err, "use up to 63 lowercase letters, digits, '.', '_' or '-', "
                                  "starting with a letter or digit");
    }
    if (e->hostname && strlen(e->hostname) > 255)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "hostname is too long");
    for (const char *p = e->hostname; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT), "hostname holds control characters");
    if (parse_agent_url(e, err) < 0)
        return -1;
    return hc_auth_join_check_format(e->token, err);
}

/* Issues the agent's certificate: CN = node name, SAN = the host in its agent_url. */
static X509 *issue_agent_cert(struct hc_api *api, const struct enroll_req *e, X509_REQ *csr,
                              char serial[33], struct hc_error *err)
{
    const char *sans[] = {e->host};
    struct hc_cert_spec spec = {.cn = e->name,
                                .sans = sans,
                                .nsans = 1,
                                .server_auth = 1,
                                .lifetime_s = hc_agent_cert_lifetime_s(api->ctl)};
    EVP_PKEY *pub = hc_pki_csr_pubkey(csr);
    if (!pub) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "csr_pem has no usable public key");
        return NULL;
    }
    X509 *cert = hc_pki_issue(api->ca, api->ca_key, pub, &spec, serial, err);
    EVP_PKEY_free(pub);
    return cert;
}

/* 1 when a and b are the same address: IP literals are compared as addresses (an IPv4
 * address and its IPv4-mapped IPv6 form are one), anything else as text. */
static int same_address(const char *a, const char *b)
{
    struct in6_addr x, y;
    if (!ip_literal(a, &x) || !ip_literal(b, &y))
        return strcmp(a, b) == 0;
    return memcmp(&x, &y, sizeof(x)) == 0;
}

/* The address in the certificate is never the requester's choice: a token minted for one
 * node names it (SSH bootstrap, or --address for a join behind NAT), and otherwise the agent
 * must enroll from the address it asks for, as the controller sees the connection. */
static int binding_check(const struct enroll_req *e, const struct hc_join_binding *bind,
                         const char *peer, struct hc_error *err)
{
    if (bind->name[0] && strcmp(bind->name, e->name) != 0) {
        hc_error_set(err, HC_E(FORBIDDEN), "this join token is for node '%s', not '%s'", bind->name,
                     e->name);
        return hc_error_hint(err, "join with --name %s, or create a token for this node",
                             bind->name);
    }
    if (bind->address[0] && !same_address(bind->address, e->host)) {
        hc_error_set(err, HC_E(FORBIDDEN), "this join token is for address '%s', not '%s'",
                     bind->address, e->host);
        return hc_error_hint(err, "listen on %s, or create a token with --address", bind->address);
    }
    if (!bind->address[0] && !same_address(peer, e->host)) {
        hc_error_set(err, HC_E(FORBIDDEN),
                     "agent_url host '%s' is not the address this request came from (%s)", e->host,
                     peer);
        return hc_error_hint(err,
                             "an agent enrolls from its own address; behind NAT, create the "
                             "token with 'hcctl cluster join-token --address %s'",
                             e->host);
    }
    return 0;
}

/* A node row a join left behind (committed, but its agent never got the answer and never
 * answered a poll) is replaced by a new join of the same name from the same address instead of
 * blocking the name; its certificate is revoked. *replaced tells the caller to issue the CRL. */
static int ghost_replace(struct hc_api *api, const struct enroll_req *e, int *replaced,
                         struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(api->db, e->name, &row, err);
    if (found < 0)
        return -1;
    int rc = 0;
    if (found && !row.last_seen && same_address(row.address, e->host)) {
        rc = hc_db_run(api->db, err,
                       "INSERT OR IGNORE INTO revoked_certs (serial, node_name, "
                       "revoked_at) VALUES (?, ?, ?)",
                       "ssi", row.cert_serial, e->name, hc_now_ms()) < 0 ||
                     hc_node_delete(api->db, e->name, err) < 0
                 ? -1
                 : 0;
        *replaced = rc == 0;
    }
    hc_node_row_clear(&row);
    return rc;
}

/* Everything about who the node is, checked after its token (so that a caller without one
 * learns nothing about names and addresses). */
static int identity_check(struct hc_api *api, const struct enroll_req *e,
                          const struct hc_join_binding *bind, const char *peer, int *replaced,
                          struct hc_error *err)
{
    if (binding_check(e, bind, peer, err) < 0 ||
        hc_identity_node_name_check(api->db, e->name, err) < 0 ||
        ghost_replace(api, e, replaced, err) < 0)
        return -1;
    return hc_identity_address_check(api->db, api->server_cert, e->host, e->name, err);
}

/* The enrollment transaction: token, certificate, node row and event commit together. */
static char *enroll_commit(struct hc_api *api, const struct enroll_req *e, X509_REQ *csr,
                           const char *peer, struct hc_error *err)
{
    char serial[33], pin[HC_PKI_PIN_LEN];
    char *pem = NULL;
    X509 *cert = NULL;
    struct hc_join_binding bind;
    int replaced = 0;
    if (hc_db_begin(api->db, err) < 0)
        return NULL;
    if (hc_auth_join_consume(api->db, e->token, e->name, &bind, err) < 0 ||
        identity_check(api, e, &bind, peer, &replaced, err) < 0)
        goto fail;
    if (!(cert = issue_agent_cert(api, e, csr, serial, err)))
        goto fail;
    int64_t not_before, not_after;
    if (!(pem = hc_pki_cert_to_pem(cert)) || hc_pki_cert_pin(cert, pin) < 0 ||
        hc_pki_cert_validity(cert, &not_before, &not_after, err) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot encode the certificate of '%s'", e->name);
        goto fail;
    }
    struct hc_node_new n = {.cluster_id = api->ctl->cluster_id,
                            .name = e->name,
                            .address = e->host,
                            .agent_url = e->url,
                            .hostname = e->hostname,
                            .cert_serial = serial,
                            .cert_pem = pem,
                            .cert_pin = pin,
                            .cert_not_after = not_after,
                            .cert_renew_at = hc_pki_renew_at_ms(not_before, not_after),
                            .cert_warn_at = hc_pki_warn_at_ms(not_before, not_after)};
    if (hc_node_insert(api->db, &n, err) < 0 ||
        hc_event_add(api->db, "node.joined", e->name, NULL, e->name,
                     json_pack("{s:s, s:s, s:s, s:b}", "agent_url", e->url, "cert_serial", serial,
                               "from", peer, "replaced_unseen", replaced),
                     err, "node '%s' joined from %s%s", e->name, e->url,
                     replaced ? " (replacing its never-seen earlier join)" : "") < 0 ||
        hc_db_commit(api->db, err) < 0)
        goto fail;
    if (replaced && hc_crl_write(api->ctl, api->db, err) < 0)
        HC_WARN("cannot issue the revocation list after replacing node '%s': %s", e->name,
                err->message);
    X509_free(cert);
    return pem;
fail:
    hc_db_rollback(api->db);
    X509_free(cert);
    free(pem);
    return NULL;
}

/* The answer carries the bundle signing keys the controller trusts: agents trust the same ones
 * (and only those) when they stage software. */
static json_t *enroll_reply(struct hc_api *api, const char *name, const char *cert_pem,
                            const struct hc_bundle_keys *keys, struct hc_error *err)
{
    json_t *node = hc_node_json(api->db, name, err);
    if (!node)
        return NULL;
    return json_pack("{s:o, s:s, s:s, s:s, s:s, s:s, s:o}", "node", node, "cert_pem", cert_pem,
                     "ca_pem", api->ca_pem, "controller_client_cn", HC_CONTROLLER_CLIENT_CN,
                     "controller_pin", api->server_pin, "controller_client_pin", api->client_pin,
                     "trusted_keys", hc_bundle_keys_to_json(keys));
}

void hc_res_enroll(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    hc_api_ca_refresh(api);
    struct hc_error err = {0};
    struct enroll_req e = {0};
    json_t *body = NULL;
    X509_REQ *csr = NULL;
    char *cert_pem = NULL;
    struct hc_bundle_keys *keys = NULL;
    json_t *in = hc_api_body(req);
    if (!in)
        return;
    /* The keys are read before the node is recorded: an enrollment either completes or not. */
    if (enroll_parse(in, &e, &err) < 0 || !(csr = hc_pki_csr_from_pem(e.csr_pem, &err)) ||
        !(keys = hc_software_keys_load(api->ctl->data_dir, &err)))
        goto cleanup;
    if (!(cert_pem = enroll_commit(api, &e, csr, hc_req_peer_addr(req), &err)))
        goto cleanup;
    /* Only a node that held a valid token is named as the actor of its enrollment. */
    hc_api_set_actor(api, req, e.name, e.name);
    body = enroll_reply(api, e.name, cert_pem, keys, &err);
cleanup:
    hc_bundle_keys_free(keys);
    hc_api_reply(req, 201, body, &err);
    X509_REQ_free(csr);
    free(cert_pem);
    json_decref(in);
}
