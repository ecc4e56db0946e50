/*
 * DATA_DIR/crl.pem from the revoked_certs table (see crl.h). The whole list is issued again on
 * every change: it stays small (one entry per removed node) and a fresh list never expires
 * before the CA does.
 */
#include "controller/api/crl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"

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

/* Reads the table and writes the file; the caller holds crl_lock. */
static int crl_write_locked(const struct hc_controller *ctl, struct hc_db *db, const char *path,
                            struct hc_error *err)
{
    int rc = -1;
    size_t n = 0;
    struct hc_pki_revoked *list = NULL;
    X509_CRL *crl = NULL;
    X509 *ca = hc_pki_cert_load(ctl->ca_file, err);
    EVP_PKEY *ca_key = ca ? hc_pki_key_load(ctl->ca_key_file, err) : NULL;
    json_t *rows = ca_key ? hc_db_query_json(db, err,
                                             "SELECT serial, node_name, revoked_at FROM "
                                             "revoked_certs ORDER BY revoked_at, serial",
                                             "")
                          : NULL;
    if (!rows)
        goto cleanup;
    if (!(list = crl_entries(rows, &n))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (!(crl = hc_pki_crl_new(ca, ca_key, list, n, err)) || hc_pki_crl_save(crl, path, err) < 0)
        goto cleanup;
    HC_DEBUG("revocation list %s written: %zu certificates", path, n);
    rc = 0;
cleanup:
    X509_CRL_free(crl);
    free(list);
    json_decref(rows);
    EVP_PKEY_free(ca_key);
    X509_free(ca);
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
