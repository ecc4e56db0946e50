/*
 * The identities of hchollow (hollow.h): DIR/NAME/{agent.key, agent.pem, ca.pem, node.json} (the
 * key, certificate and trusted CAs under hcagent's own names, so that its certificate code
 * serves them: agents/hcagent/cert.h) when a previous run enrolled them, else the real join
 * flow, from the identity's own address: an admin API token mints a one-time join token
 * (POST /v1/join-tokens), and POST /v1/enroll sends a CSR for a key made here, from a connection
 * whose source address is the identity's, as `hcagent join` does (agents/hcagent/join.c): the
 * controller binds the certificate to that address. K identities at a time, each on its own
 * thread with its own connections.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/cert.h"
#include "agents/hcagent/fence.h"
#include "common/constants.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/pki.h"
#include "common/util.h"
#include "tools/hollow/hollow.h"

#define ENROLL_TIMEOUT_MS 30000

/* The trusted CAs an identity starts with: the --ca file's bytes (hcagent's join writes the CA
 * it pinned). Later only PUT /v1/cert/ca changes them. */
static int ca_write(const struct hollow *h, const struct hollow_node *n, struct hc_error *err)
{
    char path[1200], *pem = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/%s", n->dir, HC_AGENT_FILE_CA);
    int rc = hc_file_read(h->ca_file, &pem, &len, err) < 0
                 ? -1
                 : hc_file_write_atomic(path, pem, len, 0644, err);
    free(pem);
    return rc;
}

/* 1 when DIR/NAME holds this identity (an install a crash interrupted finished or undone, as
 * hcagent does at start), 0 when it must join, -1 with err. */
static int load_identity(struct hollow *h, struct hollow_node *n, struct hc_error *err)
{
    char path[1200], *text = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/node.json", n->dir);
    if (access(path, R_OK) != 0 || hc_file_read(path, &text, &len, err) < 0) {
        hc_error_clear(err);
        return 0;
    }
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    const char *pin = hc_json_str(doc, "controller_client_pin", "");
    int ok = !strcmp(hc_json_str(doc, "name", ""), n->name) &&
             !strcmp(hc_json_str(doc, "address", ""), n->addr) && !strncmp(pin, "sha256//", 8) &&
             strlen(pin) < sizeof(n->client_pin);
    if (ok)
        snprintf(n->client_pin, sizeof(n->client_pin), "%s", pin);
    json_decref(doc);
    if (ok && hc_agent_cert_recover(n->dir, err) < 0)
        return hc_error_prefix(err, "identity %s", n->name);
    return ok;
}

/* POST to the controller; the answer's body (new reference) when it has the status wanted. */
static json_t *post(struct hc_http_client *c, const char *url, const char *bearer, json_t *body,
                    long want, struct hc_error *err)
{
    struct hc_http_response resp = {0};
    json_t *out = NULL;
    if (hc_http_request(c, "POST", url, bearer, body, ENROLL_TIMEOUT_MS, &resp, err) == 0) {
        if (resp.status == want && json_is_object(resp.body))
            out = json_incref(resp.body);
        else if (hc_error_from_json(err, resp.body, (int)resp.status) < 0)
            hc_error_set(err, HC_E(INTERNAL), "HTTP %ld from %s", resp.status, url);
    }
    hc_http_response_clear(&resp);
    return out;
}

static int enroll_one(struct hollow *h, struct hollow_node *n, struct hc_error *err)
{
    int rc = -1;
    char url[700], agent_url[128], path[1200], hostname[96];
    json_t *tok = NULL, *req = NULL, *reply = NULL, *meta = NULL;
    X509_REQ *csr = NULL;
    X509 *cert = NULL;
    char *csr_pem = NULL;
    EVP_PKEY *key = hc_pki_key_new(err);
    struct hc_tls_client_config tls = {.ca_file = h->ca_file, .source_address = n->addr};
    struct hc_http_client *c = hc_http_client_new(&tls, err);
    if (!key || !c)
        goto cleanup;
    snprintf(url, sizeof(url), "%s/v1/join-tokens", h->controller);
    req = json_pack("{s:I}", "ttl_seconds", (json_int_t)3600);
    if (!(tok = post(c, url, h->token, req, 201, err)))
        goto cleanup;
    json_decref(req);
    snprintf(agent_url, sizeof(agent_url), "https://%s:%d", n->addr, h->port);
    snprintf(hostname, sizeof(hostname), "hollow-%s", n->name);
    if (!(csr = hc_pki_csr_new(key, n->name, err)) || !(csr_pem = hc_pki_csr_to_pem(csr)))
        goto cleanup;
    req = json_pack("{s:s, s:s, s:s, s:s, s:s}", "token", hc_json_str(tok, "token", ""), "csr_pem",
                    csr_pem, "name", n->name, "agent_url", agent_url, "hostname", hostname);
    snprintf(url, sizeof(url), "%s/v1/enroll", h->controller);
    if (!(reply = post(c, url, NULL, req, 201, err)))
        goto cleanup;
    const char *cert_pem = hc_json_str(reply, "cert_pem", NULL);
    const char *pin = hc_json_str(reply, "controller_client_pin", "");
    if (!cert_pem || !(cert = hc_pki_cert_from_pem(cert_pem, err)) ||
        X509_check_private_key(cert, key) != 1 || strncmp(pin, "sha256//", 8) != 0 ||
        strlen(pin) >= sizeof(n->client_pin)) {
        if (!err->code[0])
            hc_error_set(err, HC_E(TLS), "the enrollment answer for %s is not usable", n->name);
        goto cleanup;
    }
    snprintf(n->client_pin, sizeof(n->client_pin), "%s", pin);
    /* A new identity owes nothing to the controller an earlier one saw. */
    if (hc_mkdir_p(n->dir, 0700, err) < 0 || hc_agent_fence_forget(n->dir, err) < 0)
        goto cleanup;
    snprintf(path, sizeof(path), "%s/%s", n->dir, HC_AGENT_FILE_KEY);
    if (hc_pki_key_save(key, path, err) < 0)
        goto cleanup;
    snprintf(path, sizeof(path), "%s/%s", n->dir, HC_AGENT_FILE_CERT);
    if (hc_pki_cert_save(cert, path, err) < 0 || ca_write(h, n, err) < 0)
        goto cleanup;
    /* a key asked for by an earlier identity of this name is not this one's */
    snprintf(path, sizeof(path), "%s/%s", n->dir, HC_AGENT_FILE_KEY_NEXT);
    unlink(path);
    meta = json_pack("{s:s, s:s, s:s}", "name", n->name, "address", n->addr,
                     "controller_client_pin", pin);
    char *text = hc_json_dump(meta);
    snprintf(path, sizeof(path), "%s/node.json", n->dir);
    rc = text ? hc_file_write_atomic(path, text, strlen(text), 0600, err) : -1;
    free(text);
cleanup:
    json_decref(tok);
    json_decref(req);
    json_decref(reply);
    json_decref(meta);
    free(csr_pem);
    X509_REQ_free(csr);
    X509_free(cert);
    EVP_PKEY_free(key);
    hc_http_client_free(c);
    return rc;
}

struct enroll_run {
    struct hollow *h;
    pthread_mutex_t mu;
    int failed;
    struct hc_error first;
};

static int enroll_item(void *arg, unsigned worker, size_t i)
{
    (void)worker;
    struct enroll_run *run = arg;
    struct hollow_node *n = &run->h->nodes[i];
    struct hc_error err = {0};
    if (n->enrolled)
        return 0;
    if (enroll_one(run->h, n, &err) == 0) {
        n->enrolled = 1;
        return 0;
    }
    pthread_mutex_lock(&run->mu);
    if (!run->failed++)
        run->first = err;
    pthread_mutex_unlock(&run->mu);
    return 1; /* the first failure stops the hand-out: no use enrolling the rest */
}

/* Every identity's fence, loaded from its directory (the same code as hcagent's): a corrupt
 * term file stops hchollow as it stops hcagent. */
static int load_fences(struct hollow *h, struct hc_error *err)
{
    for (int i = 0; i < h->count; i++)
        if (!(h->nodes[i].fence = hc_agent_fence_new(h->nodes[i].dir, h->nodes[i].name, err)))
            return -1;
    return 0;
}

int hollow_identities(struct hollow *h, struct hc_error *err)
{
    int missing = 0;
    for (int i = 0; i < h->count; i++) {
        struct hollow_node *n = &h->nodes[i];
        if ((n->enrolled = load_identity(h, n, err)) < 0)
            return -1;
        missing += !n->enrolled;
    }
    if (!missing) {
        HC_INFO("hchollow: %d identities loaded from %s", h->count, h->data_dir);
        return load_fences(h, err);
    }
    if (!h->token[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "%d identities need to join: set HCHOLLOW_TOKEN to an admin API token",
                            missing);
    int64_t t0 = hc_mono_ms();
    struct enroll_run run = {.h = h};
    pthread_mutex_init(&run.mu, NULL);
    hc_parallel_for((size_t)h->count, (unsigned)h->enroll_parallel, enroll_item, &run);
    pthread_mutex_destroy(&run.mu);
    if (run.failed) {
        *err = run.first;
        return hc_error_prefix(err, "enrollment failed (%d identities)", run.failed);
    }
    HC_INFO("hchollow: %d identities enrolled in %lld ms (%d at a time)", missing,
            (long long)(hc_mono_ms() - t0), h->enroll_parallel);
    return load_fences(h, err);
}
