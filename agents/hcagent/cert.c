/* The agent's certificate and its renewal (see cert.h). */
#include "agents/hcagent/cert.h"

#include <errno.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"

struct hc_agent_cert {
    struct hc_http_server *srv;
    char data_dir[1024];
    char node_name[64];
    char client_pin[64];
    char serial[41];      /* of the certificate served; "" when unreadable */
    int64_t not_after_ms; /* 0 when unreadable */
    char ca_digest[65];   /* sha256 of ca.pem's bytes; "" when unreadable */
};

static int join_path(char *buf, size_t len, const char *dir, const char *name, struct hc_error *err)
{
    if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "data dir '%s' is too long", dir);
    return 0;
}

int hc_agent_tls_config(struct hc_agent_tls *t, const char *data_dir,
                        const char *controller_client_pin, struct hc_error *err)
{
    memset(t, 0, sizeof(*t));
    if (join_path(t->cert, sizeof(t->cert), data_dir, HC_AGENT_FILE_CERT, err) < 0 ||
        join_path(t->key, sizeof(t->key), data_dir, HC_AGENT_FILE_KEY, err) < 0 ||
        join_path(t->ca, sizeof(t->ca), data_dir, HC_AGENT_FILE_CA, err) < 0)
        return -1;
    t->tls = (struct hc_tls_server_config){
        .cert_file = t->cert,
        .key_file = t->key,
        .client_ca_file = t->ca,
        .required_client_cn = HC_CONTROLLER_CLIENT_CN,
        /* only the controller's own key, whatever else the CA may have signed with that CN */
        .required_client_pin =
            controller_client_pin && controller_client_pin[0] ? controller_client_pin : NULL};
    return 0;
}

/* 1 when the certificate file holds the public half of the key file, 0 when not (or either
 * is missing or unreadable). */
static int cert_fits_key(const char *cert_path, const char *key_path)
{
    struct hc_error ignored = {0};
    if (access(cert_path, F_OK) != 0 || access(key_path, F_OK) != 0)
        return 0;
    X509 *cert = hc_pki_cert_load(cert_path, &ignored);
    EVP_PKEY *key = cert ? hc_pki_key_load(key_path, &ignored) : NULL;
    int fits = key && hc_pki_cert_matches_key(cert, key);
    EVP_PKEY_free(key);
    X509_free(cert);
    return fits;
}

int hc_agent_cert_recover(const char *data_dir, struct hc_error *err)
{
    char cert[1100], key[1100], next[1100];
    if (join_path(cert, sizeof(cert), data_dir, HC_AGENT_FILE_CERT, err) < 0 ||
        join_path(key, sizeof(key), data_dir, HC_AGENT_FILE_KEY, err) < 0 ||
        join_path(next, sizeof(next), data_dir, HC_AGENT_FILE_KEY_NEXT, err) < 0)
        return -1;
    if (access(next, F_OK) != 0)
        return 0;
    if (cert_fits_key(cert, next)) {
        /* the new certificate was in place, its key not yet */
        if (rename(next, key) < 0)
            return hc_error_set(err, HC_E(IO), "cannot move '%s' to '%s': %s", next, key,
                                strerror(errno));
        hc_dir_sync(data_dir);
        HC_INFO("certificate renewal finished at start: %s is the key of %s", key, cert);
        return 0;
    }
    /* a key asked for (POST /v1/cert/csr) whose certificate never came */
    if (unlink(next) < 0 && errno != ENOENT)
        return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", next, strerror(errno));
    return 0;
}

/* Reads what the served certificate says into c (serial, notAfter). */
static void cert_learn(struct hc_agent_cert *c, X509 *cert)
{
    int64_t not_before;
    struct hc_error ignored = {0};
    c->serial[0] = '\0';
    c->not_after_ms = 0;
    if (!cert || hc_pki_cert_serial(cert, c->serial) < 0 ||
        hc_pki_cert_validity(cert, &not_before, &c->not_after_ms, &ignored) < 0) {
        c->serial[0] = '\0';
        c->not_after_ms = 0;
    }
}

static void csr_route(struct hc_request *req, void *arg)
{
    struct hc_agent_cert *c = arg;
    struct hc_error err = {0};
    char next[1100];
    char *pem = NULL;
    X509_REQ *csr = NULL;
    EVP_PKEY *key = NULL;
    if (join_path(next, sizeof(next), c->data_dir, HC_AGENT_FILE_KEY_NEXT, &err) < 0 ||
        !(key = hc_pki_key_new(&err)) || !(csr = hc_pki_csr_new(key, c->node_name, &err)) ||
        hc_pki_key_save(key, next, &err) < 0)
        goto fail;
    if (!(pem = hc_pki_csr_to_pem(csr))) {
        hc_error_set(&err, HC_E(INTERNAL), "cannot encode the certificate request");
        goto fail;
    }
    HC_INFO("certificate renewal: new key %s, request sent to the controller", next);
    hc_reply_json(req, 200, json_pack("{s:s}", "csr_pem", pem));
    goto cleanup;
fail:
    HC_ERROR("certificate renewal: %s", err.message);
    hc_reply_error(req, &err);
cleanup:
    free(pem);
    X509_REQ_free(csr);
    EVP_PKEY_free(key);
}

/* The certificate the controller sent must be for the pending key, name this node and verify
 * against the cluster CA. */
static X509 *install_check(struct hc_agent_cert *c, const char *pem, const char *ca,
                           EVP_PKEY *pending, struct hc_error *err)
{
    char cn[256];
    X509 *cert = hc_pki_cert_from_pem(pem, err);
    if (!cert)
        return NULL;
    if (!hc_pki_cert_matches_key(cert, pending)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "the certificate is not for the key of the last request");
        hc_error_hint(err, "ask for a new request: POST /v1/cert/csr");
    } else if (hc_pki_cert_cn(cert, cn, sizeof(cn)) < 0 || strcmp(cn, c->node_name) != 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "the certificate names '%s', not this node '%s'",
                     cn, c->node_name);
    } else if (hc_pki_verify_file(ca, cert, err) == 0) {
        return cert;
    }
    X509_free(cert);
    return NULL;
}

static void install_route(struct hc_request *req, void *arg)
{
    struct hc_agent_cert *c = arg;
    struct hc_error err = {0};
    struct hc_agent_tls t;
    char next[1100], staged[1200];
    X509 *cert = NULL;
    EVP_PKEY *pending = NULL;
    json_t *in = hc_req_json(req);
    if (!in)
        return;
    const char *pem = hc_json_req_str(in, "cert_pem", &err);
    staged[0] = '\0';
    if (!pem || hc_agent_tls_config(&t, c->data_dir, c->client_pin, &err) < 0 ||
        join_path(next, sizeof(next), c->data_dir, HC_AGENT_FILE_KEY_NEXT, &err) < 0)
        goto fail;
    if (access(next, F_OK) != 0) {
        hc_error_set(&err, HC_E(CONFLICT), "no certificate request is pending");
        hc_error_hint(&err, "ask for one first: POST /v1/cert/csr");
        goto fail;
    }
    if (!(pending = hc_pki_key_load(next, &err)) ||
        !(cert = install_check(c, pem, t.ca, pending, &err)))
        goto fail;
    /* Staged beside agent.pem, loaded into a new TLS context with the pending key (which
     * proves the pair), and only then put in place: agent.pem first, agent.key second. */
    snprintf(staged, sizeof(staged), "%s.new", t.cert);
    struct hc_tls_server_config tls = t.tls;
    tls.cert_file = staged;
    tls.key_file = next;
    if (hc_pki_cert_save(cert, staged, &err) < 0 || hc_http_server_reload_tls(c->srv, &tls, &err))
        goto fail;
    if (rename(staged, t.cert) < 0 || rename(next, t.key) < 0) {
        hc_error_set(&err, HC_E(IO), "cannot put the new certificate in place in '%s': %s",
                     c->data_dir, strerror(errno));
        goto fail;
    }
    staged[0] = '\0';
    hc_dir_sync(c->data_dir);
    char old[41];
    snprintf(old, sizeof(old), "%s", c->serial);
    cert_learn(c, cert);
    HC_INFO("certificate renewed: serial %s replaces %s", c->serial, old[0] ? old : "?");
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:I}", "cert_serial", c->serial, "cert_not_after_ms",
                            (json_int_t)c->not_after_ms));
    goto cleanup;
fail:
    if (staged[0])
        unlink(staged);
    HC_WARN("certificate install refused: %s", err.message);
    hc_reply_error(req, &err);
cleanup:
    X509_free(cert);
    EVP_PKEY_free(pending);
}

/* PUT /v1/cert/ca {"ca_pem"}: the CA certificates this agent trusts (a rotation adds the new
 * CA beside the old, then drops the old). Each must be a CA, at most HC_AGENT_CA_MAX, and they
 * must verify the certificate this agent serves: a bundle that could not is someone else's. */
static void ca_route(struct hc_request *req, void *arg)
{
    struct hc_agent_cert *c = arg;
    struct hc_error err = {0};
    struct hc_agent_tls t;
    X509 *certs[HC_AGENT_CA_MAX], *served = NULL;
    size_t n = 0;
    char staged[1200] = "";
    json_t *in = hc_req_json(req);
    if (!in)
        return;
    const char *pem = hc_json_req_str(in, "ca_pem", &err);
    if (!pem || hc_agent_tls_config(&t, c->data_dir, c->client_pin, &err) < 0 ||
        hc_pki_bundle_from_pem(pem, certs, HC_AGENT_CA_MAX, &n, &err) < 0)
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (X509_check_ca(certs[i]) < 1) {
            hc_error_set(&err, HC_E(INVALID_ARGUMENT), "certificate %zu of ca_pem is not a CA",
                         i + 1);
            goto fail;
        }
    snprintf(staged, sizeof(staged), "%s.new", t.ca);
    struct hc_tls_server_config tls = t.tls;
    tls.client_ca_file = staged;
    if (hc_file_write_atomic(staged, pem, strlen(pem), 0644, &err) < 0 ||
        !(served = hc_pki_cert_load(t.cert, &err)) ||
        hc_pki_verify_file(staged, served, &err) < 0 ||
        hc_http_server_reload_tls(c->srv, &tls, &err) < 0)
        goto fail;
    if (rename(staged, t.ca) < 0) {
        hc_error_set(&err, HC_E(IO), "cannot put '%s' in place: %s", t.ca, strerror(errno));
        goto fail;
    }
    staged[0] = '\0';
    hc_dir_sync(c->data_dir);
    hc_sha256_hex(pem, strlen(pem), c->ca_digest);
    HC_INFO("trusted CAs replaced: %zu certificates (digest %.16s)", n, c->ca_digest);
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:i}", "ca_digest", c->ca_digest, "certificates", (int)n));
    goto cleanup;
fail:
    if (staged[0])
        unlink(staged);
    HC_WARN("trusted CAs not replaced: %s", err.message);
    hc_reply_error(req, &err);
cleanup:
    for (size_t i = 0; i < n; i++)
        X509_free(certs[i]);
    X509_free(served);
}

struct hc_agent_cert *hc_agent_cert_new(struct hc_http_server *srv, const char *data_dir,
                                        const char *node_name, const char *controller_client_pin,
                                        struct hc_error *err)
{
    struct hc_agent_cert *c = calloc(1, sizeof(*c));
    char cert_path[1100];
    if (!c) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    c->srv = srv;
    snprintf(c->data_dir, sizeof(c->data_dir), "%s", data_dir);
    snprintf(c->node_name, sizeof(c->node_name), "%s", node_name);
    snprintf(c->client_pin, sizeof(c->client_pin), "%s", controller_client_pin);
    if (join_path(cert_path, sizeof(cert_path), data_dir, HC_AGENT_FILE_CERT, err) < 0)
        goto fail;
    struct hc_error ignored = {0};
    X509 *cert = hc_pki_cert_load(cert_path, &ignored);
    cert_learn(c, cert);
    X509_free(cert);
    char ca_path[1100], *ca_pem = NULL;
    size_t ca_len = 0;
    if (join_path(ca_path, sizeof(ca_path), data_dir, HC_AGENT_FILE_CA, err) < 0)
        goto fail;
    if (hc_file_read(ca_path, &ca_pem, &ca_len, &ignored) == 0)
        hc_sha256_hex(ca_pem, ca_len, c->ca_digest);
    free(ca_pem);
    if (hc_http_server_route(srv, "POST", "/v1/cert/csr", 0, csr_route, c) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/cert/install", 0, install_route, c) < 0 ||
        hc_http_server_route(srv, "PUT", "/v1/cert/ca", 0, ca_route, c) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot register the certificate routes");
        goto fail;
    }
    return c;
fail:
    free(c);
    return NULL;
}

void hc_agent_cert_free(struct hc_agent_cert *c)
{
    free(c);
}

void hc_agent_cert_status(const struct hc_agent_cert *c, json_t *body)
{
    json_object_set_new(body, "cert_serial",
                        c && c->serial[0] ? json_string(c->serial) : json_null());
    json_object_set_new(body, "cert_not_after_ms",
                        c && c->not_after_ms ? json_integer((json_int_t)c->not_after_ms)
                                             : json_null());
    json_object_set_new(body, "ca_digest",
                        c && c->ca_digest[0] ? json_string(c->ca_digest) : json_null());
}
