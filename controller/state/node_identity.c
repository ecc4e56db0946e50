/*
 * Node identity: the names and addresses a node certificate may carry, and the key pin every
 * call to a node's agent checks (see node_identity.h, docs/security.md "Node identity").
 */
#include "controller/state/node_identity.h"

#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "controller/state/nodes.h"

/* Actors the event log names besides nodes and API tokens; a node named so would make the
 * audit trail ambiguous, and the CN hcctld-client is the controller's client identity. */
static const char *const reserved_actors[] = {
    "admin", "anonymous", "controller", "hcctld", "hcctld-client",
    "hcctl", "localhost", "root",       "system",
};

static int reserved(const char *name, int allow_admin)
{
    if (strncmp(name, "op-", 3) == 0) /* operations are actors: "op-" + 12 hex */
        return 1;
    for (size_t i = 0; i < HC_ARRAY_LEN(reserved_actors); i++)
        if (strcasecmp(name, reserved_actors[i]) == 0)
            return !(allow_admin && strcmp(reserved_actors[i], "admin") == 0);
    return 0;
}

int hc_identity_node_name_check(struct hc_db *db, const char *name, struct hc_error *err)
{
    if (reserved(name, 0)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "node name '%s' is reserved", name);
        return hc_error_hint(err, "the event log uses it for another actor; choose another "
                                  "--name");
    }
    int taken = hc_auth_token_name_taken(db, name, err);
    if (taken < 0)
        return -1;
    if (taken) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "node name '%s' is an API token's name", name);
        return hc_error_hint(err, "a node and a token must not share a name in the event log; "
                                  "choose another --name");
    }
    return 0;
}

int hc_identity_token_name_check(struct hc_db *db, const char *name, struct hc_error *err)
{
    if (reserved(name, 1)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "token name '%s' is reserved", name);
        return hc_error_hint(err, "the event log uses it for another actor; choose another name");
    }
    int taken = hc_node_exists(db, name, err);
    if (taken < 0)
        return -1;
    if (taken) {
        hc_error_set(err, HC_E(CONFLICT), "token name '%s' is a node's name", name);
        return hc_error_hint(err, "choose another name");
    }
    return 0;
}

/* 1 when the controller's server certificate would pass a client's check for host: a node
 * certificate for that address could then stand in for the controller. */
static int controller_host(X509 *server_cert, const char *host)
{
    if (!server_cert)
        return 0;
    if (X509_check_ip_asc(server_cert, host, 0) == 1)
        return 1;
    return X509_check_host(server_cert, host, 0, 0, NULL) == 1;
}

int hc_identity_address_check(struct hc_db *db, X509 *server_cert, const char *host,
                              const char *replacing, struct hc_error *err)
{
    if (controller_host(server_cert, host)) {
        hc_error_set(err, HC_E(CONFLICT), "address '%s' is the controller's", host);
        return hc_error_hint(err, "a node certificate is never issued for an address in the "
                                  "controller's server certificate; give the agent its own "
                                  "address (--listen)");
    }
    struct hc_node_filter f = {.address = host, .except = replacing ? replacing : ""};
    struct hc_node_row *rows;
    size_t n;
    if (hc_nodes_rows(db, &f, &rows, &n, err) < 0)
        return -1;
    if (n) {
        const char *owner = rows[0].name;
        hc_error_set(err, HC_E(CONFLICT), "address '%s' belongs to node '%s'", host, owner);
        hc_error_hint(err, "remove node '%s' first ('hcctl node remove %s')", owner, owner);
    }
    hc_node_rows_free(rows, n);
    return n ? -1 : 0;
}

int hc_identity_url_base(const char *url, char *out, size_t len)
{
    const char *auth = strstr(url, "://");
    if (!auth || !auth[3])
        return -1;
    const char *end = strchr(auth + 3, '/');
    size_t n = end ? (size_t)(end - url) : strlen(url);
    if (n >= len)
        return -1;
    memcpy(out, url, n);
    out[n] = '\0';
    return 0;
}

int hc_identity_pin_for_url(void *arg, const char *url, char *pin, size_t len, struct hc_error *err)
{
    struct hc_db *db = arg;
    char base[600];
    if (hc_identity_url_base(url, base, sizeof(base)) < 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid agent URL '%s'", url);
    struct hc_node_row row;
    int found = hc_node_row_by_url(db, base, &row, err);
    if (found < 0)
        return -1;
    const char *stored = row.cert_pin;
    char computed[HC_PKI_PIN_LEN];
    int rc = 0;
    if (!found) {
        hc_error_set_transport(err, HC_E(TLS), "no node is enrolled at %s", base);
        rc = hc_error_hint(err, "the controller only calls agents of enrolled nodes");
    } else if (!stored && hc_pki_pem_pin(row.cert_pem, computed, err) < 0) {
        rc = hc_error_prefix(err, "certificate of the node at %s", base);
    } else if ((size_t)snprintf(pin, len, "%s%s%s", stored ? stored : computed,
                                row.cert_next_pin ? ";" : "",
                                row.cert_next_pin ? row.cert_next_pin : "") >= len) {
        /* a renewal under way (controller/remote/cert_renew.h): the node may serve either key */
        rc = hc_error_set_transport(err, HC_E(INTERNAL), "pin of the node at %s is too long", base);
    }
    hc_node_row_clear(&row);
    return rc;
}

int hc_identity_backfill(struct hc_db *db, struct hc_error *err)
{
    struct hc_node_row *rows;
    size_t n;
    if (hc_nodes_rows(db, NULL, &rows, &n, err) < 0)
        return -1;
    int filled = 0;
    for (size_t i = 0; i < n; i++) {
        char pin[HC_PKI_PIN_LEN];
        int64_t not_before, not_after;
        X509 *cert = NULL;
        if (rows[i].cert_pin && rows[i].cert_not_after && rows[i].cert_renew_at &&
            rows[i].cert_warn_at)
            continue;
        if (!(cert = hc_pki_cert_from_pem(rows[i].cert_pem, err)) ||
            hc_pki_cert_pin(cert, pin) < 0 ||
            hc_pki_cert_validity(cert, &not_before, &not_after, err) < 0) {
            X509_free(cert);
            hc_error_prefix(err, "certificate of node '%s'", rows[i].name);
            filled = -1;
            break;
        }
        X509_free(cert);
        if ((!rows[i].cert_pin && hc_node_set_cert_pin(db, rows[i].id, pin, err) < 0) ||
            hc_node_set_cert_validity(db, rows[i].id, not_after,
                                      hc_pki_renew_at_ms(not_before, not_after),
                                      hc_pki_warn_at_ms(not_before, not_after), err) < 0) {
            filled = -1;
            break;
        }
        filled++;
    }
    hc_node_rows_free(rows, n);
    return filled;
}
