/* The configuration's revisions and the nodes' reports (see config.h). */
#include "controller/state/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"
#include "controller/state/software.h"

/* ---------------------------------------------------------------- revisions */

int hc_config_revision(struct hc_db *db, int64_t revision, json_t **overrides, struct hc_error *err)
{
    *overrides = NULL;
    if (revision == 0) {
        *overrides = json_object();
        return 1;
    }
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT overrides AS overrides_json FROM config_revisions "
                                    "WHERE revision = ?",
                                    "i", revision);
    if (!rows)
        return -1;
    json_t *o = json_object_get(json_array_get(rows, 0), "overrides_json");
    int found = json_is_object(o);
    if (found)
        *overrides = json_incref(o);
    json_decref(rows);
    return found;
}

int hc_config_desired(struct hc_db *db, int64_t *revision, json_t **overrides, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT COALESCE(MAX(revision), 0) AS r FROM "
                                    "config_revisions",
                                    "");
    if (!rows)
        return -1;
    *revision = hc_json_int(json_array_get(rows, 0), "r", 0);
    json_decref(rows);
    if (hc_config_revision(db, *revision, overrides, err) < 1)
        return err->code[0]
                   ? -1
                   : hc_error_set(err, HC_E(DB), "revision %lld vanished", (long long)*revision);
    return 0;
}

int hc_config_record(struct hc_db *db, const json_t *overrides, const char *action,
                     int64_t reverted_to, const char *author, const char *message,
                     int64_t *revision, struct hc_error *err)
{
    json_t *old = NULL;
    int64_t cur;
    if (hc_config_desired(db, &cur, &old, err) < 0)
        return -1;
    char *text = json_dumps(overrides, JSON_SORT_KEYS | JSON_COMPACT);
    json_t *diff = hc_settings_diff(NULL, old, overrides, NULL);
    int rc = -1;
    *revision = cur + 1;
    if (!text || !diff) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (hc_db_run(db, err,
                  "INSERT INTO config_revisions (revision, overrides, action, author, message, "
                  "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                  "issssi", *revision, text, action, author, message && *message ? message : NULL,
                  hc_now_ms()) < 0)
        goto cleanup;
    if (reverted_to > 0 &&
        hc_db_run(db, err, "UPDATE config_revisions SET reverted_to = ? WHERE revision = ?", "ii",
                  reverted_to, *revision) < 0)
        goto cleanup;
    rc = hc_event_add(db, "config.revision", NULL, NULL, author,
                      json_pack("{s:I, s:s, s:O, s:s?}", "revision", (json_int_t)*revision,
                                "action", action, "changes", diff, "message",
                                message && *message ? message : NULL),
                      err, "configuration revision %lld (%s, %zu change(s)) by %s",
                      (long long)*revision, action, json_array_size(diff), author);
cleanup:
    free(text);
    json_decref(diff);
    json_decref(old);
    return rc;
}

int hc_config_set_op(struct hc_db *db, int64_t revision, const char *op_id, struct hc_error *err)
{
    return hc_db_run(db, err, "UPDATE config_revisions SET op_id = ? WHERE revision = ?", "si",
                     op_id, revision);
}

json_t *hc_config_history(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT revision, action, reverted_to, author, message, "
                                    "created_at, overrides AS values_json, op_id AS operation_id "
                                    "FROM config_revisions ORDER BY revision DESC",
                                    "");
    if (!rows)
        return NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        char buf[32];
        json_object_set(row, "values", json_object_get(row, "values_json"));
        json_object_del(row, "values_json");
        json_object_set_new(
            row, "created_at",
            json_string(hc_time_format(hc_json_int(row, "created_at", 0), buf, sizeof(buf))));
    }
    return json_pack("{s:o}", "revisions", rows);
}

/* ---------------------------------------------------------------- schemas */

struct hc_settings_schema *hc_config_schema(struct hc_db *db, const char *version,
                                            struct hc_error *err)
{
    json_t *row = hc_software_row(db, version, err);
    if (!row) {
        if (!strcmp(err->code, HC_ERR_NOT_FOUND))
            hc_error_set(err, HC_E(NOT_FOUND),
                         "the controller has no bundle of version %s, which a node runs: its "
                         "settings cannot be checked",
                         version);
        return NULL;
    }
    struct hc_settings_schema *s =
        hc_settings_schema_of(json_object_get(row, "manifest_json"), err);
    json_decref(row);
    return s;
}

json_t *hc_config_check(struct hc_db *db, const json_t *overrides, struct hc_error *err)
{
    json_t *versions = hc_nodes_versions(db, err), *out = NULL;
    size_t i, with_settings = 0;
    if (!versions)
        return NULL;
    for (i = 0; i < json_array_size(versions); i++) {
        const char *v = json_string_value(json_array_get(versions, i));
        struct hc_settings_schema *s = hc_config_schema(db, v, err);
        if (!s)
            goto fail;
        if (hc_settings_schema_count(s) == 0) {
            hc_settings_schema_free(s);
            continue;
        }
        with_settings++;
        json_t *n = hc_settings_normalize(s, overrides, 0, err);
        hc_settings_schema_free(s);
        if (!n) {
            if (json_array_size(versions) > 1)
                hc_error_prefix(err, "version %s", v);
            goto fail;
        }
        if (!out)
            out = n; /* the first version's normal form (they agree: same types) */
        else
            json_decref(n);
    }
    if (!with_settings) {
        hc_error_set(err, HC_E(CONFLICT),
                     json_array_size(versions)
                         ? "no node runs a version that declares settings"
                         : "no node runs storage software yet: there are no settings to set");
        hc_error_hint(err, "upgrade to a version whose manifest declares settings (hcctl "
                           "software list)");
        goto fail;
    }
    json_decref(versions);
    return out;
fail:
    json_decref(out);
    json_decref(versions);
    return NULL;
}

json_t *hc_config_changes(struct hc_db *db, const json_t *a, const json_t *b, int *restart,
                          struct hc_error *err)
{
    json_t *versions = hc_nodes_versions(db, err), *changes = NULL;
    char digest[65];
    *restart = 0;
    if (!versions)
        return NULL;
    for (size_t i = 0; i < json_array_size(versions); i++) {
        const char *v = json_string_value(json_array_get(versions, i));
        struct hc_settings_schema *s = hc_config_schema(db, v, err);
        json_t *ea = NULL, *eb = NULL, *d = NULL;
        int r = 0, ok = s != NULL;
        if (ok && hc_settings_schema_count(s) > 0) {
            ok = (ea = hc_config_effective(db, v, a, digest, err)) &&
                 (eb = hc_config_effective(db, v, b, digest, err)) &&
                 (d = hc_settings_diff(s, ea, eb, &r));
            *restart = *restart || r;
            if (d && !changes)
                changes = json_incref(d); /* the first version's names the changes */
        }
        hc_settings_schema_free(s);
        json_decref(ea);
        json_decref(eb);
        json_decref(d);
        if (!ok) {
            if (!err->code[0])
                hc_error_set(err, HC_E(INTERNAL), "out of memory");
            json_decref(changes);
            json_decref(versions);
            return NULL;
        }
    }
    json_decref(versions);
    return changes ? changes : json_array();
}

json_t *hc_config_effective(struct hc_db *db, const char *version, const json_t *overrides,
                            char digest[65], struct hc_error *err)
{
    struct hc_settings_schema *s = hc_config_schema(db, version, err);
    json_t *kept = NULL, *values = NULL;
    if (!s)
        return NULL;
    /* As the agent does: what this version no longer has is dropped. */
    if (hc_settings_upgrade_check(s, overrides, &kept, NULL, err) == 0 &&
        (values = hc_settings_normalize(s, kept, HC_SETTINGS_DEFAULTS, err)) &&
        hc_settings_digest(values, digest, err) < 0) {
        json_decref(values);
        values = NULL;
    }
    json_decref(kept);
    hc_settings_schema_free(s);
    return values;
}

/* ---------------------------------------------------------------- judging reports */

int hc_config_judge_init(struct hc_config_judge *j, struct hc_db *db, struct hc_error *err)
{
    memset(j, 0, sizeof(*j));
    j->db = db;
    return hc_config_desired(db, &j->revision, &j->overrides, err);
}

void hc_config_judge_clear(struct hc_config_judge *j)
{
    json_decref(j->overrides);
    memset(j, 0, sizeof(*j));
}

const char *hc_config_judge_digest(struct hc_config_judge *j, const char *version,
                                   const char **error)
{
    size_t i;
    for (i = 0; i < j->n_seen; i++)
        if (!strcmp(j->seen[i].version, version))
            break;
    if (i == j->n_seen) {
        i = j->n_seen < HC_ARRAY_LEN(j->seen) ? j->n_seen++ : HC_ARRAY_LEN(j->seen) - 1;
        struct hc_error err = {0};
        snprintf(j->seen[i].version, sizeof(j->seen[i].version), "%s", version);
        j->seen[i].digest[0] = j->seen[i].error[0] = '\0';
        json_t *v = hc_config_effective(j->db, version, j->overrides, j->seen[i].digest, &err);
        if (!v)
            snprintf(j->seen[i].error, sizeof(j->seen[i].error), "%s", err.message);
        json_decref(v);
    }
    *error = j->seen[i].error;
    return j->seen[i].digest;
}

const char *hc_config_judge_node(struct hc_config_judge *j, const json_t *reported, char *detail,
                                 size_t len)
{
    detail[0] = '\0';
    if (!json_is_object(reported)) {
        snprintf(detail, len, "%s", HC_CONFIG_NO_SETTINGS);
        return "not_applied";
    }
    const char *version = hc_json_str(reported, "version", ""), *error;
    if (json_object_get(reported, "error")) {
        snprintf(detail, len, "%s", hc_json_str(reported, "error", ""));
        return "not_applied";
    }
    const char *want = hc_config_judge_digest(j, version, &error);
    if (error[0]) {
        snprintf(detail, len, "%s", error);
        return "not_applied";
    }
    int64_t rev = hc_json_int(reported, "revision", -1);
    const char *digest = hc_json_str(reported, "digest", "");
    if (strcmp(digest, want) != 0) {
        if (rev == j->revision)
            snprintf(detail, len,
                     "the values on the node differ from revision %lld (changed on the node?)",
                     (long long)j->revision);
        else
            snprintf(detail, len, "the node has revision %lld, the cluster %lld", (long long)rev,
                     (long long)j->revision);
        return "drift";
    }
    const json_t *bounds = json_object_get(reported, "bounds");
    if (json_is_false(json_object_get(bounds, "applied"))) {
        snprintf(detail, len, "a resource bound is not applied: %s",
                 hc_json_str(bounds, "detail", "?"));
        return "not_applied";
    }
    if (json_is_true(json_object_get(reported, "pending_restart"))) {
        snprintf(detail, len, "written; the service runs the old values until it restarts");
        return "pending_restart";
    }
    return "in_sync";
}

int hc_config_node_store(struct hc_db *db, const char *node, const json_t *reported,
                         const char *state, const char *detail, struct hc_error *err)
{
    const json_t *rev = json_object_get(reported, "revision");
    struct hc_node_config c = {
        .revision = json_is_integer(rev) ? json_integer_value(rev) : -1,
        .digest = json_is_integer(rev) ? hc_json_str(reported, "digest", "") : NULL,
        .pending_restart = json_is_true(json_object_get(reported, "pending_restart")),
        .state = state,
        .detail = detail};
    return hc_node_set_config(db, node, &c, err);
}

int hc_config_node_unreachable(struct hc_db *db, const char *node, struct hc_error *err)
{
    return hc_node_set_config_state(db, node, "unreachable", "the node does not answer", err);
}

json_t *hc_config_status(struct hc_db *db, struct hc_error *err)
{
    int64_t rev;
    json_t *overrides = NULL;
    if (hc_config_desired(db, &rev, &overrides, err) < 0)
        return NULL;
    json_decref(overrides);
    json_t *rows = hc_nodes_config_list(db, err);
    if (!rows)
        return NULL;
    json_t *counts = json_object(), *row;
    size_t i;
    json_array_foreach(rows, i, row)
    {
        const char *s = hc_json_str(row, "state", "unknown");
        json_object_set_new(counts, s, json_integer(hc_json_int(counts, s, 0) + 1));
    }
    return json_pack("{s:I, s:o, s:o}", "revision", (json_int_t)rev, "nodes", rows, "counts",
                     counts);
}
