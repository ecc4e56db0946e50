/*
 * DATA_DIR/crl.pem from the revoked_certs table (see crl.h). The whole list is issued again on
 * every change: it stays small (one entry per removed node) and a fresh list never expires
 * before the CA does.
 */
#include "controller/api/crl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"

static pthread_mutex_t crl_lock = PTHREAD_MUTEX_INITIALIZER;

void hc_crl_path(const struct hc_controller *ctl, char *buf, size_t len)
{
    if (ctl->data_dir[0])
        snprintf(buf, len, "%s/%s", ctl->data_dir, HC_CRL_FILE);
    else if (len > 0)
        buf[0] = '\0';
}

/* The rows of revoked_certs as entries; the strings stay owned by rows. */
static struct hc_pki_revoked *crl_entries(json_t *rows, size_t *n)
{
    struct hc_pki_revoked *list = calloc(json_array_size(rows) + 1, sizeof(*list));
    size_t i;
    json_t *row;
    *n = 0;
    if (!list)
        return NULL;
    json_array_foreach(rows, i, row)
    {
        const char *serial = hc_json_str(row, "serial", "");
        if (!hc_pki_serial_valid(serial)) {
            HC_WARN("revoked certificate serial '%s' of node %s is not a serial: left out of "
                    "the revocation list",
                    serial, hc_json_str(row, "node_name", "?"));
            continue;
        }
        list[*n].serial_hex = serial;
        list[*n].revoked_at = hc_json_int(row, "revoked_at", 0) / 1000;
        (*n)++;
    }
    return list;
}

/* The key of ca: ca.key when it matches (the CA that signs), else the one a CA rotation keeps
 * in DIR/ca-keys/FINGERPRINT.key. NULL when there is none. */
static EVP_PKEY *crl_ca_key(const struct hc_controller *ctl, X509 *ca)
{
    struct hc_error ignored = {0};
    char fp[65], path[1200];
    EVP_PKEY *key = hc_pki_key_load(ctl->ca_key_file, &ignored);
    if (key && hc_pki_cert_matches_key(ca, key))
        return key;
    EVP_PKEY_free(key);
    hc_pki_fingerprint(ca, fp);
    hc_ca_key_path(ctl, fp, path, sizeof(path));
    key = hc_pki_key_load(path, &ignored);
    if (key && hc_pki_cert_matches_key(ca, key))
        return key;
    EVP_PKEY_free(key);
    return NULL;
}

/* Reads the table and writes the file: one list per CA in ca.pem (two during a rotation: a
 * certificate of either CA is checked against its issuer's list, and one without a list is
 * refused). The caller holds crl_lock. */
static int crl_write_locked(const struct hc_controller *ctl, struct hc_db *db, const char *path,
                            struct hc_error *err)
{
    int rc = -1;
    size_t n = 0, ncas = 0, len = 0;
    struct hc_pki_revoked *list = NULL;
    X509 *cas[2] = {NULL, NULL};
    char *text = NULL, *pem_ca = NULL;
    json_t *rows = NULL;
    if (hc_file_read(ctl->ca_file, &pem_ca, NULL, err) < 0 ||
        hc_pki_bundle_from_pem(pem_ca, cas, 2, &ncas, err) < 0)
        goto cleanup;
    rows = hc_db_query_json(db, err,
                            "SELECT serial, node_name, revoked_at FROM revoked_certs ORDER BY "
                            "revoked_at, serial",
                            "");
    if (!rows)
        goto cleanup;
    if (!(list = crl_entries(rows, &n)) || !(text = calloc(1, 1))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < ncas; i++) {
        EVP_PKEY *key = crl_ca_key(ctl, cas[i]);
        if (!key) {
            if (i == 0) {
                hc_error_set(err, HC_E(INTERNAL), "'%s' does not match the CA in '%s'",
                             ctl->ca_key_file, ctl->ca_file);
                goto cleanup;
            }
            HC_WARN("no key for the second CA in %s: its revocation list is not written",
                    ctl->ca_file);
            continue;
        }
        X509_CRL *crl = hc_pki_crl_new(cas[i], key, list, n, err);
        char *pem = crl ? hc_pki_crl_to_pem(crl) : NULL;
        X509_CRL_free(crl);
        EVP_PKEY_free(key);
        char *grown = pem ? realloc(text, len + strlen(pem) + 1) : NULL;
        if (!grown) {
            free(pem);
            if (!err->message[0])
                hc_error_set(err, HC_E(INTERNAL), "cannot encode the revocation list");
            goto cleanup;
        }
        text = grown;
        memcpy(text + len, pem, strlen(pem) + 1);
        len += strlen(pem);
        free(pem);
    }
    if (hc_file_write_atomic(path, text, len, 0644, err) < 0)
        goto cleanup;
    HC_DEBUG("revocation list %s written: %zu certificates, %zu CAs", path, n, ncas);
    rc = 0;
cleanup:
    free(text);
    free(pem_ca);
    free(list);
    json_decref(rows);
    for (size_t i = 0; i < ncas; i++)
        X509_free(cas[i]);
    return rc;
}

int hc_crl_write(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err)
{
    char path[1200];
    hc_crl_path(ctl, path, sizeof(path));
    if (!path[0])
        return hc_error_set(err, HC_E(INTERNAL), "cannot write the revocation list: no data dir");
    pthread_mutex_lock(&crl_lock);
    int rc = crl_write_locked(ctl, db, path, err);
    pthread_mutex_unlock(&crl_lock);
    if (rc < 0)
        hc_error_prefix(err, "cannot write the revocation list '%s'", path);
    return rc;
}
