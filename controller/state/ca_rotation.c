/* CA rotation: its state and files (see ca_rotation.h); the steps that call agents are
 * controller/remote/ca_rotate.c. */
#include "controller/state/ca_rotation.h"

#include <errno.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/init.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

/* The row, JSON null when no rotation runs, or NULL with err. */
json_t *hc_ca_rotation_row(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, "SELECT * FROM ca_rotation WHERE id = 1", "");
    if (!rows)
        return NULL;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return row ? row : json_null();
}

/* Replaces path with text when it differs; 1 when written, 0 when it was so, -1 with err. */
static int file_want(const char *path, const char *text, size_t len, int mode, struct hc_error *err)
{
    char *have = NULL;
    size_t have_len = 0;
    struct hc_error ignored = {0};
    int same = hc_file_read(path, &have, &have_len, &ignored) == 0 && have_len == len &&
               memcmp(have, text, len) == 0;
    free(have);
    if (same)
        return 0;
    return hc_file_write_atomic(path, text, len, mode, err) < 0 ? -1 : 1;
}

int hc_ca_rotate_files(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err)
{
    json_t *row = hc_ca_rotation_row(db, err);
    int rc = -1;
    char *key = NULL, *pem = NULL;
    size_t key_len = 0;
    if (!row)
        return -1;
    if (json_is_null(row)) {
        json_decref(row);
        return 0;
    }
    const char *phase = hc_json_str(row, "phase", "");
    const char *old_pem = hc_json_str(row, "old_pem", ""),
               *new_pem = hc_json_str(row, "new_pem", "");
    int old_signs = strcmp(phase, "trust") == 0;
    char kpath[1200];
    hc_ca_key_path(ctl, hc_json_str(row, old_signs ? "old_fingerprint" : "new_fingerprint", ""),
                   kpath, sizeof(kpath));
    if (strcmp(phase, "drop") == 0)
        pem = strdup(new_pem);
    else if (asprintf(&pem, "%s%s", old_signs ? old_pem : new_pem, old_signs ? new_pem : old_pem) <
             0)
        pem = NULL;
    if (!pem) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    /* the key first: between the two, the CA in ca.pem does not match it and nothing is
     * signed (hc_pki_issue checks the pair); the other order would sign with the wrong CA's
     * name */
    int changed_key = hc_file_read(kpath, &key, &key_len, err) < 0
                          ? -1
                          : file_want(ctl->ca_key_file, key, key_len, 0600, err);
    int changed_pem = changed_key < 0 ? -1 : file_want(ctl->ca_file, pem, strlen(pem), 0644, err);
    if (changed_pem < 0)
        goto cleanup;
    rc = changed_key || changed_pem;
    if (rc)
        HC_INFO("CA rotation, phase %s: ca.pem and ca.key now say what it wants (the %s CA signs)",
                phase, old_signs ? "old" : "new");
cleanup:
    free(key);
    free(pem);
    json_decref(row);
    return rc < 0 ? -1 : rc;
}

int hc_ca_rotate_start(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err)
{
    if (ctl->ha_etcd[0])
        return hc_error_set(err, HC_E(CONFLICT),
                            "a CA rotation is not supported in HA mode (each controller holds "
                            "its own copy of the CA files)");
    json_t *row = hc_ca_rotation_row(db, err);
    if (!row)
        return -1;
    if (!json_is_null(row)) {
        hc_error_set(err, HC_E(CONFLICT), "a CA rotation is under way (phase %s)",
                     hc_json_str(row, "phase", "?"));
        hc_error_hint(err, "see 'hcctld ca status --data-dir %s'", ctl->data_dir);
        json_decref(row);
        return -1;
    }
    json_decref(row);
    int rc = -1;
    char *old_text = NULL, *old_pem = NULL, *new_pem = NULL, *bundle = NULL;
    X509 *olds[2] = {NULL, NULL}, *fresh = NULL;
    size_t nold = 0;
    EVP_PKEY *old_key = NULL, *new_key = NULL;
    char old_fp[65], new_fp[65], digest[65], cn[128], dir[1200], path[1200], when[40];
    if (hc_file_read(ctl->ca_file, &old_text, NULL, err) < 0 ||
        hc_pki_bundle_from_pem(old_text, olds, 2, &nold, err) < 0 ||
        !(old_key = hc_pki_key_load(ctl->ca_key_file, err)))
        goto cleanup;
    if (nold != 1 || !hc_pki_cert_matches_key(olds[0], old_key)) {
        hc_error_set(err, HC_E(CONFLICT),
                     "'%s' must hold the one CA whose key is '%s' (an earlier rotation left "
                     "them otherwise)",
                     ctl->ca_file, ctl->ca_key_file);
        goto cleanup;
    }
    hc_pki_fingerprint(olds[0], old_fp);
    snprintf(cn, sizeof(cn), "hcctl cluster CA %.8s %s", ctl->cluster_id,
             hc_time_format(hc_now_ms(), when, sizeof(when)));
    cn[strlen("hcctl cluster CA ") + 8 + 1 + 10] = '\0'; /* the date: "... 2026-12-07" */
    if (!(new_key = hc_pki_key_new(err)) ||
        !(fresh = hc_pki_ca_new(new_key, cn, HC_INIT_CA_DAYS, err)))
        goto cleanup;
    hc_pki_fingerprint(fresh, new_fp);
    snprintf(dir, sizeof(dir), "%s/%s", ctl->data_dir, HC_CA_KEYS_DIR);
    if (hc_mkdir_p(dir, 0700, err) < 0)
        goto cleanup;
    hc_ca_key_path(ctl, old_fp, path, sizeof(path));
    if (hc_pki_key_save(old_key, path, err) < 0)
        goto cleanup;
    hc_ca_key_path(ctl, new_fp, path, sizeof(path));
    if (hc_pki_key_save(new_key, path, err) < 0)
        goto cleanup;
    if (!(old_pem = hc_pki_cert_to_pem(olds[0])) || !(new_pem = hc_pki_cert_to_pem(fresh)) ||
        asprintf(&bundle, "%s%s", old_pem, new_pem) < 0) {
        bundle = NULL;
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    hc_sha256_hex(bundle, strlen(bundle), digest);
    int64_t now = hc_now_ms();
    if (hc_db_begin(db, err) < 0)
        goto cleanup;
    if (hc_db_run(db, err,
                  "INSERT INTO ca_rotation (id, phase, old_fingerprint, new_fingerprint, old_pem, "
                  "new_pem, bundle_pem, bundle_digest, started_at, phase_at) VALUES (1, 'trust', "
                  "?, ?, ?, ?, ?, ?, ?, ?)",
                  "ssssssii", old_fp, new_fp, old_pem, new_pem, bundle, digest, now, now) < 0 ||
        hc_event_add(db, "ca.rotation_started", NULL, NULL, "hcctld",
                     json_pack("{s:s, s:s}", "old_fingerprint", old_fp, "new_fingerprint", new_fp),
                     err, "CA rotation started: %.16s... replaces %.16s...; agents are given both",
                     new_fp, old_fp) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        goto cleanup;
    }
    if (hc_ca_rotate_files(ctl, db, err) < 0 || hc_crl_write(ctl, db, err) < 0)
        goto cleanup;
    rc = 0;
cleanup:
    free(old_text);
    free(old_pem);
    free(new_pem);
    free(bundle);
    for (size_t i = 0; i < nold; i++)
        X509_free(olds[i]);
    X509_free(fresh);
    EVP_PKEY_free(old_key);
    EVP_PKEY_free(new_key);
    return rc;
}

/* 1 when the PEM certificate was signed by ca. */
int hc_ca_issued(X509 *ca, const char *pem)
{
    struct hc_error ignored = {0};
    X509 *x = pem ? hc_pki_cert_from_pem(pem, &ignored) : NULL;
    int yes = x && X509_check_issued(ca, x) == X509_V_OK;
    X509_free(x);
    return yes;
}

int hc_ca_file_issued(X509 *ca, const char *path)
{
    struct hc_error ignored = {0};
    X509 *x = hc_pki_cert_load(path, &ignored);
    int yes = x && X509_check_issued(ca, x) == X509_V_OK;
    X509_free(x);
    return yes;
}

json_t *hc_ca_rotation_status(struct hc_db *db, struct hc_error *err)
{
    json_t *row = hc_ca_rotation_row(db, err);
    struct hc_node_row *rows = NULL;
    size_t n = 0;
    if (!row || json_is_null(row))
        return row;
    struct hc_node_filter joined = {.state = "joined"};
    if (hc_nodes_rows(db, &joined, &rows, &n, err) < 0) {
        json_decref(row);
        return NULL;
    }
    struct hc_error ignored = {0};
    X509 *fresh = hc_pki_cert_from_pem(hc_json_str(row, "new_pem", ""), &ignored);
    const char *digest = hc_json_str(row, "bundle_digest", "");
    int reissue = strcmp(hc_json_str(row, "phase", ""), "reissue") == 0;
    int trusting = 0, on_new = 0;
    json_t *waiting = json_array();
    for (size_t i = 0; i < n; i++) {
        int trusts = rows[i].agent_ca_digest && strcmp(rows[i].agent_ca_digest, digest) == 0;
        int is_new = fresh && hc_ca_issued(fresh, rows[i].cert_pem);
        trusting += trusts;
        on_new += is_new;
        if ((reissue ? !is_new : !trusts) && json_array_size(waiting) < 20)
            json_array_append_new(waiting, json_string(rows[i].name));
    }
    X509_free(fresh);
    hc_node_rows_free(rows, n);
    char ts[40];
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:{s:i, s:i, s:i}, s:o}", "phase", hc_json_str(row, "phase", ""),
        "started_at", hc_time_format(hc_json_int(row, "started_at", 0), ts, sizeof(ts)),
        "old_fingerprint", hc_json_str(row, "old_fingerprint", ""), "new_fingerprint",
        hc_json_str(row, "new_fingerprint", ""), "bundle_pem", hc_json_str(row, "bundle_pem", ""),
        "nodes", "total", (int)n, "trusting", trusting, "on_new_ca", on_new, "waiting_on", waiting);
    json_decref(row);
    return out;
}

/* Moves to phase next with its bundle (NULL: the same), in one transaction with its event. */
int hc_ca_rotation_phase(struct hc_db *db, const char *next, const char *bundle,
                         const char *message, struct hc_error *err)
{
    char digest[65];
    if (bundle)
        hc_sha256_hex(bundle, strlen(bundle), digest);
    if (hc_db_begin(db, err) < 0)
        return -1;
    if ((bundle ? hc_db_run(db, err,
                            "UPDATE ca_rotation SET phase = ?, bundle_pem = ?, bundle_digest = ?, "
                            "phase_at = ? WHERE id = 1",
                            "sssi", next, bundle, digest, hc_now_ms())
                : hc_db_run(db, err, "UPDATE ca_rotation SET phase = ?, phase_at = ? WHERE id = 1",
                            "si", next, hc_now_ms())) < 0 ||
        hc_event_add(db, "ca.rotation_phase", NULL, NULL, "controller",
                     json_pack("{s:s}", "phase", next), err, "CA rotation: %s", message) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    HC_INFO("CA rotation: %s", message);
    return 0;
}

/* The rotation is over: the row goes, and with it the old CA's key. */
int hc_ca_rotation_finish(const struct hc_controller *ctl, struct hc_db *db, const json_t *row,
                          struct hc_error *err)
{
    char old_key[1200], new_key[1200], dir[1200];
    hc_ca_key_path(ctl, hc_json_str(row, "old_fingerprint", ""), old_key, sizeof(old_key));
    hc_ca_key_path(ctl, hc_json_str(row, "new_fingerprint", ""), new_key, sizeof(new_key));
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (hc_db_run(db, err, "DELETE FROM ca_rotation WHERE id = 1", "") < 0 ||
        hc_event_add(db, "ca.rotated", NULL, NULL, "controller",
                     json_pack("{s:s, s:s}", "old_fingerprint",
                               hc_json_str(row, "old_fingerprint", ""), "new_fingerprint",
                               hc_json_str(row, "new_fingerprint", "")),
                     err,
                     "CA rotation done: every certificate is the new CA's, the old one is "
                     "trusted by no node and its key is deleted") < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    /* ca.key holds the new key; the kept copies go */
    if ((unlink(old_key) < 0 && errno != ENOENT) || (unlink(new_key) < 0 && errno != ENOENT))
        HC_WARN("CA rotation: cannot delete the kept CA keys in %s/%s: %s", ctl->data_dir,
                HC_CA_KEYS_DIR, strerror(errno));
    snprintf(dir, sizeof(dir), "%s/%s", ctl->data_dir, HC_CA_KEYS_DIR);
    rmdir(dir);
    HC_INFO("CA rotation done");
    return hc_crl_write(ctl, db, err);
}
