/*
 * Software bundles on the controller: trusted keys, verified storage, listing with the nodes
 * that run each bundle, reading for agents, guarded removal (see software.h).
 */
#include "controller/state/software.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ha/ha.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define BUNDLE_SELECT                                                                              \
    "SELECT name, version, sha256, signature, signed_by, manifest_json, size, uploaded_at, "       \
    "uploaded_by FROM bundles "

/* ---------------------------------------------------------------- keys */

struct hc_bundle_keys *hc_software_keys_load(const char *data_dir, struct hc_error *err)
{
    char *dir = hc_path_join(data_dir, HC_SOFTWARE_KEYS_DIR);
    struct hc_bundle_keys *keys = hc_bundle_keys_new();
    if (!dir || !keys) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    if (hc_bundle_keys_load_dir(keys, dir, err) < 0)
        goto fail;
    free(dir);
    return keys;
fail:
    free(dir);
    hc_bundle_keys_free(keys);
    return NULL;
}

/* "dev" from ".../dev.pub" or ".../dev.pem"; refuses names that are not plain file names. */
static int key_name(const char *file, char *name, size_t len, struct hc_error *err)
{
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    size_t n = strcspn(base, ".");
    if (n == 0 || n >= len ||
        strspn(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-") < n)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "cannot name trusted key '%s': use a file name of letters, digits, "
                            "'_' and '-' (before the extension)",
                            file);
    snprintf(name, len, "%.*s", (int)n, base);
    return 0;
}

int hc_software_keys_install(const char *data_dir, const char *const *files, size_t n,
                             struct hc_error *err)
{
    char *dir = hc_path_join(data_dir, HC_SOFTWARE_KEYS_DIR);
    struct hc_bundle_keys *check = hc_bundle_keys_new();
    json_t *names = json_object();
    int rc = -1;
    if (!dir || !check || !names || hc_mkdir_p(dir, 0755, err) < 0)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        char name[128], path[1400], *pem = NULL;
        size_t len;
        if (key_name(files[i], name, sizeof(name), err) < 0)
            goto cleanup;
        if (json_object_get(names, name)) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "two --trust-key files are named '%s'", name);
            goto cleanup;
        }
        json_object_set_new(names, name, json_true());
        if (hc_bundle_keys_add_file(check, files[i], err) < 0 ||
            hc_file_read(files[i], &pem, &len, err) < 0)
            goto cleanup;
        snprintf(path, sizeof(path), "%s/%s.pem", dir, name);
        int wrc = hc_file_write_atomic(path, pem, len, 0644, err);
        free(pem);
        if (wrc < 0)
            goto cleanup;
    }
    rc = 0;
cleanup:
    free(dir);
    hc_bundle_keys_free(check);
    json_decref(names);
    return rc;
}

/* ---------------------------------------------------------------- rows */

static int bundle_path(const struct hc_controller *ctl, const char *version, const char *suffix,
                       char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s/%s.tar.gz%s", ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR, version,
                     suffix);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The names of the nodes running version (or, rollback set, that may roll back to it), as a
 * JSON array (new reference). */
static json_t *node_names(struct hc_db *db, const char *version, int rollback, struct hc_error *err)
{
    struct hc_node_filter f = {.software_version = rollback ? NULL : version,
                               .previous_software_version = rollback ? version : NULL};
    struct hc_node_row *rows;
    size_t n;
    if (hc_nodes_rows(db, &f, &rows, &n, err) < 0)
        return NULL;
    json_t *names = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(names, json_string(rows[i].name));
    hc_node_rows_free(rows, n);
    return names;
}

/* A bundles row as BUNDLE. */
static json_t *bundle_object(struct hc_db *db, const json_t *row, struct hc_error *err)
{
    const char *version = hc_json_str(row, "version", "");
    const json_t *m = json_object_get(row, "manifest_json");
    char when[32];
    json_t *running = node_names(db, version, 0, err);
    json_t *rollback = running ? node_names(db, version, 1, err) : NULL;
    if (!rollback) {
        json_decref(running);
        return NULL;
    }
    hc_time_format(hc_json_int(row, "uploaded_at", 0), when, sizeof(when));
    json_t *from = json_object_get(m, "min_upgrade_from"),
           *desc = json_object_get(m, "description");
    return json_pack(
        "{s:s, s:s, s:s, s:O, s:s, s:I, s:s, s:O, s:s, s:O, s:o, s:o}", "name",
        hc_json_str(row, "name", ""), "version", version, "kind", hc_bundle_kind(m), "description",
        desc ? desc : json_null(), "sha256", hc_json_str(row, "sha256", ""), "size",
        (json_int_t)hc_json_int(row, "size", 0), "signed_by", hc_json_str(row, "signed_by", ""),
        "min_upgrade_from", from ? from : json_null(), "uploaded_at", when, "uploaded_by",
        json_object_get(row, "uploaded_by"), "nodes_running", running, "nodes_rollback", rollback);
}

json_t *hc_software_row(struct hc_db *db, const char *version, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, BUNDLE_SELECT "WHERE version = ?", "s", version);
    if (!rows)
        return NULL;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row) {
        hc_error_set(err, HC_E(NOT_FOUND), "software version '%s' is not uploaded", version);
        hc_error_hint(err, "see 'hcctl software list'");
    }
    return row;
}

/* ---------------------------------------------------------------- upload */

static int write_files(const struct hc_controller *ctl, const struct hc_bundle *b,
                       struct hc_error *err)
{
    char dir[1200], path[1400], sig[HC_BUNDLE_SIG_MAX + 2];
    size_t len;
    const void *data = hc_bundle_data(b, &len);
    const char *version = hc_bundle_info(b)->version;
    snprintf(dir, sizeof(dir), "%s/%s", ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR);
    snprintf(sig, sizeof(sig), "%s\n", hc_bundle_signature(b));
    if (hc_mkdir_p(dir, 0700, err) < 0 || bundle_path(ctl, version, "", path, sizeof(path)) < 0 ||
        hc_file_write_atomic(path, data, len, 0644, err) < 0)
        return -1;
    if (bundle_path(ctl, version, ".sig", path, sizeof(path)) < 0 ||
        hc_file_write_atomic(path, sig, strlen(sig), 0644, err) < 0)
        return -1;
    return 0;
}

static void remove_files(const struct hc_controller *ctl, const char *version)
{
    static const char *const suffixes[] = {"", ".sig"};
    char path[1400];
    for (size_t i = 0; i < HC_ARRAY_LEN(suffixes); i++)
        if (bundle_path(ctl, version, suffixes[i], path, sizeof(path)) == 0 && unlink(path) < 0 &&
            errno != ENOENT)
            HC_WARN("cannot remove '%s': %s", path, strerror(errno));
}

static int record(struct hc_db *db, const struct hc_bundle *b, const char *actor,
                  struct hc_error *err)
{
    const struct hc_bundle_info *info = hc_bundle_info(b);
    char *manifest = hc_json_dump(hc_bundle_manifest(b));
    int rc = -1;
    if (!manifest)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    if (hc_db_begin(db, err) < 0)
        goto cleanup;
    if (hc_db_run(
            db, err,
            "INSERT INTO bundles (name, version, sha256, signature, signed_by, manifest_json, "
            "size, uploaded_at, uploaded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "ssssssiis", info->name, info->version, info->sha256, hc_bundle_signature(b),
            info->signed_by, manifest, (int64_t)info->size, hc_now_ms(), actor) < 0 ||
        hc_event_add(db, "software.uploaded", NULL, NULL, actor,
                     json_pack("{s:s, s:s, s:s, s:s}", "name", info->name, "version", info->version,
                               "sha256", info->sha256, "signed_by", info->signed_by),
                     err, "bundle %s %s uploaded (sha256 %.12s, signed by '%s')", info->name,
                     info->version, info->sha256, info->signed_by) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(manifest);
    return rc;
}

/* The version is taken: the same file again is fine, another one is a conflict. */
static json_t *existing(struct hc_db *db, const struct hc_bundle_info *info, json_t *row,
                        int *already, struct hc_error *err)
{
    if (strcmp(hc_json_str(row, "sha256", ""), info->sha256) != 0) {
        hc_error_set(err, HC_E(CONFLICT),
                     "bundle version '%s' is already uploaded with sha256 %.12s (this one is "
                     "%.12s)",
                     info->version, hc_json_str(row, "sha256", ""), info->sha256);
        hc_error_hint(err,
                      "give the new build its own version, or remove the old one first "
                      "('hcctl software remove %s')",
                      info->version);
        return NULL;
    }
    *already = 1;
    json_t *b = bundle_object(db, row, err);
    return b ? json_pack("{s:o}", "bundle", b) : NULL;
}

json_t *hc_software_store(const struct hc_controller *ctl, struct hc_db *db, const void *data,
                          size_t len, const char *sig_line, const char *actor, int *already,
                          struct hc_error *err)
{
    struct hc_bundle_keys *keys = hc_software_keys_load(ctl->data_dir, err);
    struct hc_bundle *b = NULL;
    json_t *row = NULL, *out = NULL, *rows = NULL;
    *already = 0;
    if (!keys || !(b = hc_bundle_open(data, len, sig_line, keys, err)))
        goto cleanup;
    const struct hc_bundle_info *info = hc_bundle_info(b);
    if (!(rows = hc_db_query_json(db, err, BUNDLE_SELECT "WHERE version = ?", "s", info->version)))
        goto cleanup;
    if (json_array_size(rows) > 0) {
        out = existing(db, info, json_array_get(rows, 0), already, err);
        goto cleanup;
    }
    /* HA mode: a majority of controllers hold it before the row says it exists. */
    if (write_files(ctl, b, err) < 0 || hc_ha_bundle_replicate(ctl, info->version, err) < 0 ||
        record(db, b, actor, err) < 0) {
        remove_files(ctl, info->version);
        goto cleanup;
    }
    HC_INFO("bundle %s %s stored (%zu bytes, signed by '%s')", info->name, info->version,
            info->size, info->signed_by);
    if ((row = hc_software_row(db, info->version, err))) {
        json_t *obj = bundle_object(db, row, err);
        out = obj ? json_pack("{s:o}", "bundle", obj) : NULL;
    }
cleanup:
    json_decref(rows);
    json_decref(row);
    hc_bundle_free(b);
    hc_bundle_keys_free(keys);
    return out;
}

/* ---------------------------------------------------------------- list, get, read */

static int by_version(const void *a, const void *b)
{
    const json_t *const *x = a, *const *y = b;
    return hc_bundle_version_cmp(hc_json_str(*x, "version", ""), hc_json_str(*y, "version", ""));
}

json_t *hc_software_list(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, BUNDLE_SELECT, "");
    if (!rows)
        return NULL;
    size_t n = json_array_size(rows);
    json_t **objs = calloc(n ? n : 1, sizeof(*objs)), *list = NULL;
    size_t made = 0;
    for (; objs && made < n; made++)
        if (!(objs[made] = bundle_object(db, json_array_get(rows, made), err)))
            goto cleanup;
    if (!objs) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    qsort(objs, n, sizeof(*objs), by_version);
    list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(list, objs[i]);
cleanup:
    for (size_t i = 0; objs && i < made; i++)
        json_decref(objs[i]);
    free(objs);
    json_decref(rows);
    return list ? json_pack("{s:o}", "bundles", list) : NULL;
}

json_t *hc_software_get(struct hc_db *db, const char *version, struct hc_error *err)
{
    json_t *row = hc_software_row(db, version, err), *obj = NULL;
    if (!row || !(obj = bundle_object(db, row, err))) {
        json_decref(row);
        return NULL;
    }
    json_t *out = json_pack("{s:o, s:O, s:s}", "bundle", obj, "manifest",
                            json_object_get(row, "manifest_json"), "signature",
                            hc_json_str(row, "signature", ""));
    json_decref(row);
    return out;
}

int hc_software_read(const struct hc_controller *ctl, struct hc_db *db, const char *version,
                     char **data, size_t *len, struct hc_error *err)
{
    char path[1400], hex[65];
    json_t *row = hc_software_row(db, version, err);
    int rc = -1;
    *data = NULL;
    if (!row)
        return -1;
    if (bundle_path(ctl, version, "", path, sizeof(path)) < 0 ||
        hc_file_read(path, data, len, err) < 0) {
        hc_error_prefix(err, "bundle %s", version);
        goto cleanup;
    }
    hc_sha256_hex(*data, *len, hex);
    if (strcmp(hex, hc_json_str(row, "sha256", "")) != 0) {
        /* The one code that goes out with a second status: docs/api.md promises a 500 for a
         * bundle damaged on disk (our fault, not the client's) under the code tests pin. */
        hc_error_set_wire(err, 500, HC_BUNDLE_ERR_CHECKSUM,
                          "stored bundle '%s' is damaged: its sha256 is %s, %s was uploaded", path,
                          hex, hc_json_str(row, "sha256", ""));
        hc_error_hint(err, "remove it and upload it again");
        free(*data);
        *data = NULL;
        goto cleanup;
    }
    rc = 0;
cleanup:
    json_decref(row);
    return rc;
}

/* ---------------------------------------------------------------- remove */

/* What still needs this version: nodes running it, nodes that may roll back to it, active
 * operations targeting it. 0 when nothing, 1 with err (409) naming them, -1 on error. */
static int in_use(struct hc_db *db, const char *version, struct hc_error *err)
{
    json_t *running = node_names(db, version, 0, err);
    json_t *rollback = running ? node_names(db, version, 1, err) : NULL;
    json_t *ops = rollback ? hc_db_query_json(db, err,
                                              "SELECT id FROM operations WHERE state IN "
                                              "('pending', 'running', 'paused') AND "
                                              "json_extract(params_json, '$.to_version') = ?",
                                              "s", version)
                           : NULL;
    int rc = -1;
    if (!ops)
        goto cleanup;
    char *r = hc_json_dump(running), *b = hc_json_dump(rollback);
    rc = 1;
    if (json_array_size(running) > 0)
        hc_error_set(err, HC_E(CONFLICT), "bundle %s is running on nodes %s", version, r);
    else if (json_array_size(rollback) > 0)
        hc_error_set(err, HC_E(CONFLICT), "bundle %s is the rollback target of nodes %s", version,
                     b);
    else if (json_array_size(ops) > 0)
        hc_error_set(err, HC_E(CONFLICT), "operation %s targets bundle %s",
                     hc_json_str(json_array_get(ops, 0), "id", "?"), version);
    else
        rc = 0;
    if (rc == 1)
        hc_error_hint(err, "upgrade those nodes to another version first");
    free(r);
    free(b);
cleanup:
    json_decref(running);
    json_decref(rollback);
    json_decref(ops);
    return rc;
}

int hc_software_remove(const struct hc_controller *ctl, struct hc_db *db, const char *version,
                       const char *actor, struct hc_error *err)
{
    json_t *row = NULL;
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (!(row = hc_software_row(db, version, err)) || in_use(db, version, err) != 0 ||
        hc_db_run(db, err, "DELETE FROM bundles WHERE version = ?", "s", version) < 0 ||
        hc_event_add(
            db, "software.removed", NULL, NULL, actor,
            json_pack("{s:s, s:s}", "version", version, "sha256", hc_json_str(row, "sha256", "")),
            err, "bundle %s %s removed", hc_json_str(row, "name", ""), version) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        json_decref(row);
        return -1;
    }
    json_decref(row);
    remove_files(ctl, version);
    return 0;
}
