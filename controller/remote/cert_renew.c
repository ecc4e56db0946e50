/* Renewal of the agents' certificates (see cert_renew.h). */
#include "controller/remote/cert_renew.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/remote/agent_client.h"
#include "controller/state/certs.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

/* The CA that signs, from the controller's files. */
struct signer {
    X509 *ca;
    EVP_PKEY *key;
};

static int signer_load(const struct hc_controller *ctl, struct signer *s, struct hc_error *err)
{
    s->key = NULL;
    if (!(s->ca = hc_pki_cert_load(ctl->ca_file, err)) ||
        !(s->key = hc_pki_key_load(ctl->ca_key_file, err))) {
        X509_free(s->ca);
        s->ca = NULL;
        return -1;
    }
    return 0;
}

static void signer_free(struct signer *s)
{
    X509_free(s->ca);
    EVP_PKEY_free(s->key);
}

/* The pending certificate becomes the node's; the old serial is revoked. */
static int renew_finish(struct hc_controller *ctl, struct hc_db *db, const struct hc_node_row *row,
                        struct hc_error *err)
{
    int64_t not_before, not_after;
    X509 *cert = hc_pki_cert_from_pem(row->cert_next_pem, err);
    if (!cert)
        return hc_error_prefix(err, "pending certificate of node '%s'", row->name);
    int rc = hc_pki_cert_validity(cert, &not_before, &not_after, err);
    X509_free(cert);
    if (rc < 0)
        return -1;
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (hc_node_cert_promote(db, row->id, row->cert_next_serial, not_after,
                             hc_pki_renew_at_ms(not_before, not_after),
                             hc_pki_warn_at_ms(not_before, not_after), err) < 0 ||
        hc_db_run(db, err,
                  "INSERT OR IGNORE INTO revoked_certs (serial, node_name, revoked_at, "
                  "cert_not_after) VALUES (?, ?, ?, ?)",
                  "ssii", row->cert_serial, row->name, hc_now_ms(), row->cert_not_after) < 0 ||
        hc_event_add(db, "cert.renewed", row->name, NULL, "controller",
                     json_pack("{s:s, s:s, s:I}", "serial", row->cert_next_serial, "replaces",
                               row->cert_serial, "not_after_ms", (json_int_t)not_after),
                     err, "certificate of node '%s' renewed: serial %s, valid until %s", row->name,
                     row->cert_next_serial, hc_time_format(not_after, (char[32]){0}, 32)) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    HC_INFO("node %s: certificate %s in use, %s revoked", row->name, row->cert_next_serial,
            row->cert_serial);
    return hc_crl_write(ctl, db, err);
}

/* A pending certificate the node does not serve: dropped, its serial revoked (it was issued). */
static int renew_abandon(struct hc_controller *ctl, struct hc_db *db, const struct hc_node_row *row,
                         const char *why, struct hc_error *err)
{
    int64_t not_after = 0;
    struct hc_error ignored = {0};
    hc_pki_pem_not_after(row->cert_next_pem, &not_after, &ignored);
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (hc_node_cert_pending_drop(db, row->id, row->cert_next_serial, err) < 0 ||
        hc_db_run(db, err,
                  "INSERT OR IGNORE INTO revoked_certs (serial, node_name, revoked_at, "
                  "cert_not_after) VALUES (?, ?, ?, NULLIF(?, 0))",
                  "ssii", row->cert_next_serial, row->name, hc_now_ms(), not_after) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    HC_WARN("node %s: renewal to certificate %s abandoned (%s)", row->name, row->cert_next_serial,
            why);
    return hc_crl_write(ctl, db, err);
}

/* Issues the certificate for the CSR's key and records it as pending. The caller then installs
 * it. 0 with *pem (the caller frees), or -1 with err. */
static int renew_issue(struct hc_controller *ctl, struct hc_db *db, const struct hc_node_row *row,
                       const char *csr_pem, char **pem, struct hc_error *err)
{
    struct signer s;
    char serial[33], pin[HC_PKI_PIN_LEN];
    X509 *cert = NULL;
    EVP_PKEY *pub = NULL;
    X509_REQ *csr = hc_pki_csr_from_pem(csr_pem, err);
    int rc = -1;
    *pem = NULL;
    if (!csr)
        return hc_error_prefix(err, "node '%s' sent an invalid certificate request", row->name);
    if (signer_load(ctl, &s, err) < 0) {
        X509_REQ_free(csr);
        return -1;
    }
    const char *sans[] = {row->address};
    struct hc_cert_spec spec = {.cn = row->name,
                                .sans = sans,
                                .nsans = 1,
                                .server_auth = 1,
                                .lifetime_s = hc_agent_cert_lifetime_s(ctl)};
    if (!(pub = hc_pki_csr_pubkey(csr))) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "the certificate request of node '%s' has no usable key", row->name);
        goto cleanup;
    }
    if (!(cert = hc_pki_issue(s.ca, s.key, pub, &spec, serial, err)))
        goto cleanup;
    if (!(*pem = hc_pki_cert_to_pem(cert)) || hc_pki_cert_pin(cert, pin) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot encode the certificate of '%s'", row->name);
        goto cleanup;
    }
    /* pinned beside the old key from now on: the node may start serving it at any moment */
    int recorded = hc_node_cert_pending_set(db, row->id, row->cert_serial, serial, *pem, pin, err);
    if (recorded < 0)
        goto cleanup;
    if (recorded == 0) {
        hc_error_set(err, HC_E(CONFLICT),
                     "the certificate of node '%s' changed while it was renewed", row->name);
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (rc < 0) {
        free(*pem);
        *pem = NULL;
    }
    X509_free(cert);
    EVP_PKEY_free(pub);
    X509_REQ_free(csr);
    signer_free(&s);
    return rc;
}

/* Steps 1 to 4 for a node with nothing pending. */
static int renew_start(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client,
                       const struct hc_node_row *row, struct hc_error *err)
{
    struct hc_http_response resp = {0};
    long timeout = hc_agent_timeout_ms(ctl);
    char *pem = NULL;
    int rc = -1;
    if (hc_agent_call(client, row->agent_url, "POST", "/v1/cert/csr", NULL, timeout, &resp, err) <
        0)
        goto cleanup;
    const char *csr = hc_json_str(resp.body, "csr_pem", NULL);
    if (!csr) {
        hc_error_set(err, HC_E(AGENT_ERROR), "node '%s' answered no csr_pem", row->name);
        goto cleanup;
    }
    if (renew_issue(ctl, db, row, csr, &pem, err) < 0)
        goto cleanup;
    hc_http_response_clear(&resp);
    json_t *body = json_pack("{s:s}", "cert_pem", pem);
    int sent = hc_agent_call(client, row->agent_url, "POST", "/v1/cert/install", body, timeout,
                             &resp, err);
    json_decref(body);
    struct hc_node_row now;
    int found = hc_node_row_get_id(db, row->id, &now, &(struct hc_error){0});
    if (found != 1) {
        hc_node_row_clear(&now);
        goto cleanup;
    }
    if (sent == 0) {
        rc = renew_finish(ctl, db, &now, err);
    } else if (!hc_agent_err_is_transport(err)) {
        /* the agent answered and refused: it serves the old certificate */
        struct hc_error ignored = {0};
        renew_abandon(ctl, db, &now, err->message, &ignored);
    } /* else: no answer, settled from what it reports serving next cycle */
    hc_node_row_clear(&now);
cleanup:
    if (rc < 0)
        hc_error_prefix(err, "cannot renew the certificate of node '%s'", row->name);
    hc_http_response_clear(&resp);
    free(pem);
    return rc;
}

/* A pending renewal: settled by what the agent reported serving at the last poll. Returns 1
 * when it is settled (or cannot be yet), 0 when a new renewal may start. */
static int renew_settle(struct hc_controller *ctl, struct hc_db *db, const struct hc_node_row *row,
                        struct hc_error *err)
{
    if (!row->cert_next_serial)
        return 0;
    const char *serving = row->agent_cert_serial;
    if (serving && strcmp(serving, row->cert_next_serial) == 0)
        return renew_finish(ctl, db, row, err) < 0 ? -1 : 1;
    if (serving && strcmp(serving, row->cert_serial) == 0)
        return renew_abandon(ctl, db, row, "the node still serves the old certificate", err) < 0
                   ? -1
                   : 0;
    return 1; /* not known yet */
}

int hc_cert_renew_node(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client,
                       const char *name, int expired_ok, struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(db, name, &row, err);
    if (found <= 0) {
        if (found == 0)
            hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
        return -1;
    }
    int rc = 0;
    int settled = renew_settle(ctl, db, &row, err);
    if (settled < 0) {
        rc = -1;
    } else if (settled == 0) {
        struct hc_node_row fresh;
        /* abandon changed the row */
        if (hc_node_row_get(db, name, &fresh, err) != 1) {
            rc = -1;
        } else {
            int expired = fresh.cert_not_after && fresh.cert_not_after <= hc_now_ms();
            struct hc_http_client *lenient = NULL;
            if (expired && !expired_ok) {
                hc_error_set(err, HC_E(CONFLICT), "the certificate of node '%s' has expired", name);
                hc_error_hint(err, "renew it by its pinned key: 'hcctl node renew-cert %s'", name);
                rc = -1;
            } else if (expired && !(lenient = hc_agent_client_new_expired(ctl, db, err))) {
                rc = -1;
            } else {
                rc = renew_start(ctl, db, lenient ? lenient : client, &fresh, err);
            }
            hc_http_client_free(lenient);
            hc_node_row_clear(&fresh);
        }
    }
    hc_node_row_clear(&row);
    return rc;
}

void hc_cert_renew_cycle(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client)
{
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    json_t *due = hc_nodes_cert_due(db, now, HC_CERT_RENEWALS_PER_CYCLE, &err);
    size_t i;
    json_t *node;
    if (!due) {
        HC_WARN("certificate renewal: cannot read the nodes: %s", err.message);
        return;
    }
    json_array_foreach(due, i, node)
    {
        const char *name = hc_json_str(node, "name", "?");
        struct hc_error one = {0};
        if (hc_cert_renew_node(ctl, db, client, name, hc_json_int(node, "asked", 0) != 0, &one) <
            0) {
            HC_WARN("%s", one.message);
            /* an asked renewal that failed is not asked again every cycle */
            hc_node_cert_failed(db, name, one.message, &(struct hc_error){0});
            hc_event_add(db, "cert.renew_failed", name, NULL, "controller",
                         json_pack("{s:s}", "error", one.message), &(struct hc_error){0}, "%s",
                         one.message);
        }
    }
    json_decref(due);
    hc_certs_alerts(ctl, db, now);
    if (hc_db_run(db, &err,
                  "DELETE FROM revoked_certs WHERE cert_not_after IS NOT NULL AND "
                  "cert_not_after < ?",
                  "i", now) < 0)
        HC_WARN("certificate renewal: cannot prune the revocation list: %s", err.message);
}
