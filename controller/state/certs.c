/* The cluster's certificates and their ends (see certs.h). */
#include "controller/state/certs.h"

#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

void hc_certs_own(const struct hc_controller *ctl, struct hc_check_cert out[3])
{
    out[0] = (struct hc_check_cert){.kind = "ca", .what = "controller's CA", .path = ctl->ca_file};
    out[1] = (struct hc_check_cert){
        .kind = "server", .what = "controller's server", .path = ctl->server_cert};
    out[2] = (struct hc_check_cert){
        .kind = "client", .what = "controller's client", .path = ctl->client_cert};
}

/* One of the controller's files: its validity, 0 or -1 with err. */
static int own_validity(const struct hc_check_cert *c, int64_t *not_before, int64_t *not_after,
                        char serial[41], struct hc_error *err)
{
    X509 *cert = hc_pki_cert_load(c->path, err);
    int rc = cert ? hc_pki_cert_validity(cert, not_before, not_after, err) : -1;
    if (rc == 0 && serial && hc_pki_cert_serial(cert, serial) < 0)
        serial[0] = '\0';
    X509_free(cert);
    return rc;
}

static const char *level_name(int64_t not_before, int64_t not_after, int64_t now)
{
    if (not_after <= now)
        return "expired";
    if (now >= hc_pki_error_at_ms(not_before, not_after))
        return "critical";
    if (now >= hc_pki_warn_at_ms(not_before, not_after))
        return "expiring";
    return "valid";
}

static json_t *when_object(int64_t not_after, int64_t now)
{
    char ts[40];
    hc_time_format(not_after, ts, sizeof(ts));
    int64_t left = (not_after - now) / 1000;
    return json_pack("{s:s, s:I}", "not_after", ts, "seconds_left", (json_int_t)left);
}

/* The earliest so far, replaced by (certificate, node, not_after) when that ends sooner. */
static void earliest_keep(json_t **earliest, int64_t *earliest_ms, const char *certificate,
                          const char *node, int64_t not_after, int64_t now)
{
    if (*earliest && not_after >= *earliest_ms)
        return;
    json_decref(*earliest);
    *earliest = when_object(not_after, now);
    json_object_set_new(*earliest, "certificate", json_string(certificate));
    json_object_set_new(*earliest, "node", node ? json_string(node) : json_null());
    *earliest_ms = not_after;
}

json_t *hc_certs_summary(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms,
                         struct hc_error *err)
{
    struct hc_check_cert own[3];
    json_t *out = json_object(), *earliest = NULL;
    int64_t earliest_ms = 0;
    hc_certs_own(ctl, own);
    for (int i = 0; i < 3; i++) {
        int64_t nb, na;
        struct hc_error ferr = {0};
        if (own_validity(&own[i], &nb, &na, NULL, &ferr) < 0) {
            json_object_set_new(out, own[i].kind, json_pack("{s:s}", "error", ferr.message));
            continue;
        }
        json_t *o = when_object(na, now_ms);
        json_object_set_new(o, "state", json_string(level_name(nb, na, now_ms)));
        json_object_set_new(out, own[i].kind, o);
        earliest_keep(&earliest, &earliest_ms, own[i].kind, NULL, na, now_ms);
    }
    json_t *counts = hc_nodes_count_by(db, "cert_state", err);
    json_t *first = counts ? hc_nodes_cert_earliest(db, err) : NULL;
    if (!first) {
        json_decref(counts);
        json_decref(earliest);
        json_decref(out);
        return NULL;
    }
    json_t *agents = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i}", "total", 0, "valid", 0, "expiring",
                               0, "renewing", 0, "expired", 0, "unknown", 0);
    const json_t *row;
    size_t i;
    json_array_foreach(counts, i, row)
    {
        int64_t n = hc_json_int(row, "n", 0);
        json_object_set_new(agents, hc_json_str(row, "v", "unknown"), json_integer(n));
        json_object_set_new(agents, "total", json_integer(hc_json_int(agents, "total", 0) + n));
    }
    const json_t *f = first;
    if (json_is_object(f)) {
        int64_t na = hc_json_int(f, "cert_not_after", 0);
        json_t *e = when_object(na, now_ms);
        json_object_set_new(e, "node", json_string(hc_json_str(f, "name", "")));
        json_object_set_new(agents, "earliest", e);
        earliest_keep(&earliest, &earliest_ms, "agent", hc_json_str(f, "name", ""), na, now_ms);
    } else {
        json_object_set_new(agents, "earliest", json_null());
    }
    json_object_set_new(out, "agents", agents);
    json_object_set_new(out, "earliest", earliest ? earliest : json_null());
    json_decref(counts);
    json_decref(first);
    return out;
}

int hc_certs_not_after(const struct hc_controller *ctl, struct hc_db *db, int64_t out[4],
                       struct hc_error *err)
{
    struct hc_check_cert own[3];
    hc_certs_own(ctl, own);
    for (int i = 0; i < 3; i++) {
        int64_t nb;
        struct hc_error ignored = {0};
        if (own_validity(&own[i], &nb, &out[i], NULL, &ignored) < 0)
            out[i] = 0;
    }
    json_t *first = hc_nodes_cert_earliest(db, err);
    if (!first)
        return -1;
    out[3] = hc_json_int(first, "cert_not_after", 0);
    json_decref(first);
    return 0;
}

/* Records (subject, level); 1 when it is new (an event is due), 0 when given before, -1. */
static int alert_once(struct hc_db *db, const char *subject, const char *level, int64_t now,
                      struct hc_error *err)
{
    int changed = hc_db_run(
        db, err, "INSERT OR IGNORE INTO cert_alerts (subject, level, at) VALUES (?, ?, ?)", "ssi",
        subject, level, now);
    return changed < 0 ? -1 : changed > 0;
}

/* One certificate's warning at its level, once. */
static void alert(struct hc_db *db, const char *subject, const char *what, const char *node,
                  int64_t not_before, int64_t not_after, int64_t now, const char *remedy)
{
    struct hc_error err = {0};
    const char *level = level_name(not_before, not_after, now);
    if (strcmp(level, "valid") == 0)
        return;
    const char *db_level = strcmp(level, "expiring") == 0   ? "warning"
                           : strcmp(level, "critical") == 0 ? "error"
                                                            : "expired";
    char when[40];
    hc_time_format(not_after, when, sizeof(when));
    if (hc_db_begin(db, &err) < 0) {
        HC_WARN("certificate warning for the %s certificate: %s", what, err.message);
        return;
    }
    /* the mark and its event commit together: a warning is neither lost nor given twice */
    int fresh = alert_once(db, subject, db_level, now, &err);
    int expired = strcmp(db_level, "expired") == 0;
    if (fresh == 1)
        fresh =
            hc_event_add(db, expired ? "cert.expired" : "cert.expiring", node, NULL, "controller",
                         json_pack("{s:s, s:s, s:s, s:I, s:s}", "certificate", what, "level",
                                   db_level, "not_after", when, "seconds_left",
                                   (json_int_t)((not_after - now) / 1000), "remedy", remedy),
                         &err, "the %s certificate %s %s; %s", what,
                         expired ? "expired at" : "expires at", when, remedy);
    if (fresh < 0 || hc_db_commit(db, &err) < 0) {
        hc_db_rollback(db);
        HC_WARN("certificate warning for the %s certificate: %s", what, err.message);
    }
}

void hc_certs_alerts(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms)
{
    struct hc_check_cert own[3];
    struct hc_error err = {0};
    hc_certs_own(ctl, own);
    for (int i = 0; i < 3; i++) {
        int64_t nb, na;
        char serial[41], subject[64];
        if (own_validity(&own[i], &nb, &na, serial, &err) < 0) {
            HC_WARN("certificate warnings: %s", err.message);
            err = (struct hc_error){0};
            continue;
        }
        snprintf(subject, sizeof(subject), "%s:%s", own[i].kind, serial);
        alert(db, subject, own[i].what, NULL, nb, na, now_ms,
              strcmp(own[i].kind, "ca") == 0
                  ? "rotate the CA: 'hcctld ca rotate' (docs/certificates.md)"
                  : "restart hcctld, which renews its own certificates");
    }
    /* Only the nodes already past their warning time: a PEM parsed each only then. */
    json_t *rows = hc_nodes_cert_warned(db, now_ms, &err);
    if (!rows) {
        HC_WARN("certificate warnings: %s", err.message);
        return;
    }
    const json_t *row;
    size_t i;
    json_array_foreach(rows, i, row)
    {
        const char *name = hc_json_str(row, "name", "?");
        int64_t nb, na;
        char remedy[200];
        struct hc_error perr = {0};
        X509 *cert = hc_pki_cert_from_pem(hc_json_str(row, "cert_pem", ""), &perr);
        int ok = cert && hc_pki_cert_validity(cert, &nb, &na, &perr) == 0;
        X509_free(cert);
        if (!ok)
            continue;
        snprintf(remedy, sizeof(remedy), "renew it: 'hcctl node renew-cert %s'", name);
        alert(db, hc_json_str(row, "cert_serial", name), "node's", name, nb, na, now_ms, remedy);
    }
    json_decref(rows);
}

/* One of the controller's certificates reissued (same key, names and usages) when it is due or
 * was not signed by the CA that signs now. 1 when reissued, 0 when not due, -1 with err. */
static int renew_own_one(const struct hc_check_cert *c, X509 *ca, EVP_PKEY *ca_key,
                         struct hc_db *db, int64_t now, struct hc_error *err)
{
    int64_t nb, na;
    char serial[33], old_serial[41] = "";
    X509 *cert = hc_pki_cert_load(c->path, err), *fresh = NULL;
    int rc = -1;
    if (!cert || hc_pki_cert_validity(cert, &nb, &na, err) < 0)
        goto cleanup;
    int foreign = X509_check_issued(ca, cert) != X509_V_OK;
    if (!foreign && now < hc_pki_renew_at_ms(nb, na)) {
        rc = 0;
        goto cleanup;
    }
    hc_pki_cert_serial(cert, old_serial);
    int64_t lifetime = hc_pki_lifetime_s(cert);
    if (!(fresh = hc_pki_reissue(cert, ca, ca_key, lifetime > 0 ? lifetime : 86400, serial, err)) ||
        hc_pki_cert_save(fresh, c->path, err) < 0)
        goto cleanup;
    int64_t fnb = 0, fna = 0;
    hc_pki_cert_validity(fresh, &fnb, &fna, err);
    char when[40];
    hc_time_format(fna, when, sizeof(when));
    struct hc_error ev = {0};
    hc_event_add(db, "cert.renewed", NULL, NULL, "controller",
                 json_pack("{s:s, s:s, s:s, s:s}", "certificate", c->kind, "serial", serial,
                           "replaces", old_serial, "not_after", when),
                 &ev, "the %s certificate was renewed%s: serial %s, valid until %s", c->what,
                 foreign ? " under the current CA" : "", serial, when);
    HC_INFO("the %s certificate was renewed: serial %s replaces %s, valid until %s", c->what,
            serial, old_serial, when);
    rc = 1;
cleanup:
    X509_free(cert);
    X509_free(fresh);
    return rc;
}

int hc_certs_renew_own(const struct hc_controller *ctl, struct hc_db *db, int64_t now_ms,
                       int *server_renewed, struct hc_error *err)
{
    struct hc_check_cert own[3];
    X509 *ca = hc_pki_cert_load(ctl->ca_file, err);
    EVP_PKEY *ca_key = ca ? hc_pki_key_load(ctl->ca_key_file, err) : NULL;
    int rc = -1, n = 0;
    *server_renewed = 0;
    hc_certs_own(ctl, own);
    if (!ca_key)
        goto cleanup;
    for (int i = 1; i < 3; i++) {
        int r = renew_own_one(&own[i], ca, ca_key, db, now_ms, err);
        if (r < 0)
            goto cleanup;
        if (r > 0 && i == 1)
            *server_renewed = 1;
        n += r;
    }
    rc = n;
cleanup:
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return rc;
}
