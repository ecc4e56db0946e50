/*
 * The configuration resources (docs/api.md "Configuration", docs/config.md):
 *   GET  /v1/config[?node=NAME][&defaults=1]  the desired revision and its effective values
 *   POST /v1/config {"set": {NAME: value}, "unset": [NAME], "revert": REV, "message",
 *                    "max_unavailable", "node_timeout_seconds", "dry_run", "batch"}
 *                   -> 202 {"revision", "changes", "restart", "operation"} (a new revision and
 *                   the operation applying it), or 200 for a dry run or no change
 *   POST /v1/config/apply {"max_unavailable", "batch", "dry_run"}  the desired revision again, to
 * the nodes not in sync GET  /v1/config/history, GET /v1/config/diff?from=&to=, GET
 * /v1/config/status Nothing here calls an agent: a node's values come from what the poller
 * recorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/ops/op_config.h"
#include "controller/ops/op_upgrade.h"
#include "controller/ops/ops.h"
#include "controller/ops/rolling.h"
#include "controller/state/checks.h"
#include "controller/state/config.h"
#include "controller/state/nodes.h"

#define MESSAGE_MAX 1000 /* bytes of a revision's message */

/* The newest version the nodes run that declares settings, into out ("" when none). */
static int settings_version(struct hc_db *db, char out[65], struct hc_error *err)
{
    json_t *versions = hc_nodes_versions(db, err);
    out[0] = '\0';
    if (!versions)
        return -1;
    for (size_t i = 0; i < json_array_size(versions); i++) {
        const char *v = json_string_value(json_array_get(versions, i));
        struct hc_settings_schema *s = hc_config_schema(db, v, err);
        if (!s) {
            json_decref(versions);
            return -1;
        }
        if (hc_settings_schema_count(s) && (!out[0] || hc_version_cmp(v, out) > 0))
            snprintf(out, 65, "%s", v);
        hc_settings_schema_free(s);
    }
    json_decref(versions);
    return 0;
}

/* [{"name","type","apply","default","value","set","allowed","help"}] for schema and values. */
static json_t *describe(const struct hc_settings_schema *s, const json_t *values,
                        const json_t *overrides)
{
    json_t *list = json_array();
    for (size_t i = 0; i < hc_settings_schema_count(s); i++) {
        const struct hc_setting *st = hc_settings_schema_at(s, i);
        char allowed[512];
        hc_setting_describe(st, allowed, sizeof(allowed));
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:O, s:O?, s:b, s:s, s:s}", "name",
                                              st->name, "type", hc_setting_type_name(st->type),
                                              "apply", st->live ? "live" : "restart", "default",
                                              st->def, "value", json_object_get(values, st->name),
                                              "set", json_object_get(overrides, st->name) != NULL,
                                              "allowed", allowed, "help", st->help));
    }
    return list;
}

void hc_res_config_show(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *node = hc_req_query(req, "node"), *defaults = hc_req_query(req, "defaults");
    int only_defaults = defaults && (!strcmp(defaults, "1") || !strcmp(defaults, "true"));
    char version[65], digest[65];
    int64_t rev = 0;
    json_t *overrides = NULL, *values = NULL, *body = NULL;
    struct hc_settings_schema *s = NULL;
    struct hc_node_row row = {0};
    if (node) {
        int found = hc_node_row_get(api->db, node, &row, &err);
        if (found == 0)
            hc_error_set(&err, HC_E(NOT_FOUND), "node '%s' not found", node);
        if (found < 1)
            goto done;
        snprintf(version, sizeof(version), "%s", row.software_version ? row.software_version : "");
        if (!version[0]) {
            hc_error_set(&err, HC_E(CONFLICT), "node '%s' runs no storage software yet", node);
            goto done;
        }
        rev = row.config_revision;
    } else if (settings_version(api->db, version, &err) < 0) {
        goto done;
    } else if (!version[0]) {
        hc_error_set(&err, HC_E(CONFLICT), "no node runs a version that declares settings");
        hc_error_hint(&err, "see hcctl software list and hcctl upgrade");
        goto done;
    } else if (hc_config_desired(api->db, &rev, &overrides, &err) < 0) {
        goto done;
    }
    if (node && hc_config_revision(api->db, rev, &overrides, &err) < 1) {
        if (!err.code[0])
            hc_error_set(&err, HC_E(NOT_FOUND), "revision %lld is not recorded", (long long)rev);
        goto done;
    }
    if (only_defaults) {
        json_decref(overrides);
        overrides = json_object();
        rev = 0;
    }
    if (!(s = hc_config_schema(api->db, version, &err)) ||
        !(values = hc_config_effective(api->db, version, overrides, digest, &err)))
        goto done;
    body = json_pack("{s:I, s:s, s:O, s:O, s:s, s:o}", "revision", (json_int_t)rev, "version",
                     version, "values", values, "overrides", overrides, "digest", digest,
                     "settings", describe(s, values, overrides));
    if (body && node)
        json_object_update_new(body, json_pack("{s:s, s:s?, s:s?}", "node", node, "state",
                                               row.config_state, "detail", row.config_detail));
done:
    hc_api_reply(req, 200, body, &err);
    hc_node_row_clear(&row);
    hc_settings_schema_free(s);
    json_decref(overrides);
    json_decref(values);
}

void hc_res_config_history(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    hc_api_reply(req, 200, hc_config_history(api->db, &err), &err);
}

void hc_res_config_status(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    unsigned deps = HC_DEP(NODES) | HC_DEP(CONFIG) | HC_DEP(OPERATIONS);
    if (hc_api_cached(api, req, deps))
        return;
    hc_api_reply_etag(api, req, deps, hc_config_status(api->db, &err), &err);
}

void hc_res_config_diff(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    int64_t desired = 0, from, to;
    json_t *a = NULL, *b = NULL, *cur = NULL, *changes = NULL;
    int restart = 0;
    if (hc_config_desired(api->db, &desired, &cur, &err) < 0 ||
        hc_api_query_int(req, "to", desired, 0, INT64_MAX, &to, &err) < 0 ||
        hc_api_query_int(req, "from", to > 0 ? to - 1 : 0, 0, INT64_MAX, &from, &err) < 0)
        goto done;
    int fa = hc_config_revision(api->db, from, &a, &err);
    int fb = fa < 0 ? -1 : hc_config_revision(api->db, to, &b, &err);
    if (fa == 0 || fb == 0)
        hc_error_set(&err, HC_E(NOT_FOUND), "revision %lld is not recorded (the latest is %lld)",
                     (long long)(fa == 0 ? from : to), (long long)desired);
    if (fa < 1 || fb < 1)
        goto done;
    changes = hc_config_changes(api->db, a, b, &restart, &err);
done:
    hc_api_reply(req, 200,
                 changes ? json_pack("{s:I, s:I, s:o, s:b}", "from", (json_int_t)from, "to",
                                     (json_int_t)to, "changes", changes, "restart", restart)
                         : NULL,
                 &err);
    json_decref(a);
    json_decref(b);
    json_decref(cur);
}

/* The overrides a POST /v1/config asks for, from the current ones. New reference or NULL with
 * err; *action, *reverted_to say what it is. */
static json_t *requested(struct hc_db *db, const json_t *body, const json_t *current,
                         const char **action, int64_t *reverted_to, struct hc_error *err)
{
    const json_t *set = json_object_get(body, "set"), *unset = json_object_get(body, "unset");
    const json_t *revert = json_object_get(body, "revert");
    json_t *v;
    const char *key;
    size_t i;
    *reverted_to = 0;
    if (json_is_integer(revert)) {
        json_t *o = NULL;
        *action = "revert";
        *reverted_to = json_integer_value(revert);
        int found = hc_config_revision(db, *reverted_to, &o, err);
        if (found == 0)
            hc_error_set(err, HC_E(NOT_FOUND), "revision %lld is not recorded",
                         (long long)*reverted_to);
        return found == 1 ? o : NULL;
    }
    if ((set && !json_is_object(set)) || (unset && !json_is_array(unset)) || (!set && !unset) ||
        (revert && !json_is_null(revert))) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "expected {\"set\": {NAME: value}}, {\"unset\": [NAME]} or {\"revert\": N}");
        return NULL;
    }
    json_t *out = json_deep_copy(current);
    *action = set ? "set" : "unset";
    json_object_foreach((json_t *)set, key, v) json_object_set(out, key, v);
    json_array_foreach(unset, i, v)
    {
        if (!json_is_string(v) || !hc_setting_name_valid(json_string_value(v))) {
            hc_error_set(err, HC_E(INVALID_SETTING), "unset: '%s' is not a setting name",
                         json_is_string(v) ? json_string_value(v) : "(not a string)");
            json_decref(out);
            return NULL;
        }
        json_object_del(out, json_string_value(v));
    }
    return out;
}

struct apply_params {
    int64_t max_unavailable, node_timeout_s;
    const char *batch; /* node | domain (controller/ops/rolling.h) */
};

/* The options of a change, checked before anything else. 0 or -1 with err (400). */
static int params_check(struct hc_db *db, const json_t *body, struct apply_params *p,
                        struct hc_error *err)
{
    const json_t *message = json_object_get(body, "message");
    if (message && (!json_is_string(message) || strlen(json_string_value(message)) > MESSAGE_MAX))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "message must be a string of at most %d bytes", MESSAGE_MAX);
    if (hc_api_body_int(body, "max_unavailable", 1, 1000, 1, &p->max_unavailable, err) < 0 ||
        hc_api_body_int(body, "node_timeout_seconds", 1, 86400, HC_UPGRADE_NODE_TIMEOUT_MS / 1000,
                        &p->node_timeout_s, err) < 0 ||
        hc_rolling_batch_check(db, body, p->max_unavailable, &p->batch, err) < 0)
        return -1;
    return 0;
}

/* Records the revision (overrides NULL: the desired one again) and submits the operation
 * applying it (live or rolling). */
static void record_and_apply(struct hc_request *req, struct hc_api *api, const json_t *body,
                             const struct apply_params *p, const json_t *overrides,
                             const char *action, int64_t reverted_to, const json_t *changes,
                             int restart, const json_t *only, struct hc_error *err)
{
    int64_t rev;
    char op_id[32];
    if (hc_config_blocked(api->db, err) < 0)
        return;
    if (overrides) {
        if (hc_db_begin(api->db, err) < 0)
            return;
        if (hc_config_record(api->db, overrides, action, reverted_to, hc_api_actor(req),
                             hc_json_str(body, "message", NULL), &rev, err) < 0 ||
            hc_db_commit(api->db, err) < 0) {
            hc_db_rollback(api->db);
            return;
        }
    } else {
        json_t *ignored = NULL;
        if (hc_config_desired(api->db, &rev, &ignored, err) < 0)
            return;
        json_decref(ignored);
    }
    json_t *params =
        json_pack("{s:I, s:I, s:I, s:O?, s:s}", "revision", (json_int_t)rev, "max_unavailable",
                  (json_int_t)p->max_unavailable, "node_timeout_ms",
                  (json_int_t)(p->node_timeout_s * 1000), "nodes", only, "batch", p->batch);
    const char *kind = restart ? HC_CONFIG_ROLLING_KIND : HC_CONFIG_APPLY_KIND;
    if (hc_ops_submit(api->db, api->ctl->cluster_id, kind, params, hc_api_actor(req), op_id, err) ==
        0) {
        if (api->ctl->ops)
            hc_ops_pool_kick(api->ctl->ops);
        hc_config_set_op(api->db, rev, op_id, err);
        json_t *op = hc_ops_show(api->db, op_id, err);
        hc_api_reply(req, 202,
                     op ? json_pack("{s:I, s:O, s:b, s:O}", "revision", (json_int_t)rev, "changes",
                                    changes, "restart", restart, "operation",
                                    json_object_get(op, "operation"))
                        : NULL,
                     err);
        json_decref(op);
    }
    json_decref(params);
}

void hc_res_config_set(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req), *current = NULL, *want = NULL, *norm = NULL, *changes = NULL;
    const char *action = "set";
    int64_t rev, reverted_to = 0;
    int restart = 0, replied = 0;
    struct apply_params p;
    if (!body)
        return;
    const json_t *skip;
    json_t *checks = NULL;
    if (params_check(api->db, body, &p, &err) < 0 || hc_checks_skip_arg(body, &skip, &err) < 0 ||
        hc_config_desired(api->db, &rev, &current, &err) < 0 ||
        !(want = requested(api->db, body, current, &action, &reverted_to, &err)) ||
        !(norm = hc_config_check(api->db, want, &err)) ||
        !(changes = hc_config_changes(api->db, current, norm, &restart, &err)))
        goto done;
    if (hc_json_bool(body, "dry_run", 0) || json_array_size(changes) == 0) {
        /* a dry run shows what the checks would say (and refuses nothing) */
        if (hc_json_bool(body, "dry_run", 0) && !(checks = hc_api_checks(api, &err)))
            goto done;
        json_t *reply =
            json_pack("{s:I, s:O, s:b, s:n, s:b}", "revision", (json_int_t)rev, "changes", changes,
                      "restart", restart, "operation", "dry_run", hc_json_bool(body, "dry_run", 0));
        if (checks)
            json_object_set(reply, "checks", checks);
        hc_api_reply(req, 200, reply, &err);
        replied = 1;
        goto done;
    }
    /* the pre-flight checks refuse a change on a cluster with errors (docs/api.md "Checks") */
    if (hc_api_checks_gate(api, skip, NULL, &err) < 0)
        goto done;
    record_and_apply(req, api, body, &p, norm, action, reverted_to, changes, restart, NULL, &err);
    replied = !err.code[0];
done:
    if (!replied)
        hc_api_reply(req, 202, NULL, &err);
    json_decref(body);
    json_decref(current);
    json_decref(want);
    json_decref(norm);
    json_decref(changes);
    json_decref(checks);
}

void hc_res_config_apply(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req), *status = NULL, *only = NULL, *node;
    int restart = 0, replied = 0;
    size_t i;
    struct apply_params p;
    if (!body)
        return;
    if (params_check(api->db, body, &p, &err) < 0 || !(status = hc_config_status(api->db, &err)))
        goto done;
    only = json_array();
    json_array_foreach(json_object_get(status, "nodes"), i, node)
    {
        const char *s = hc_json_str(node, "state", "");
        if (!strcmp(s, "in_sync") || !strcmp(s, "unreachable"))
            continue;
        json_array_append(only, json_object_get(node, "name"));
        /* Pending restarts and drift of unknown kind need the rolling path. */
        restart = restart || strcmp(s, "not_applied") != 0;
    }
    if (hc_json_bool(body, "restart", 0))
        restart = 1;
    if (hc_json_bool(body, "dry_run", 0) || json_array_size(only) == 0) {
        hc_api_reply(req, 200,
                     json_pack("{s:O, s:O, s:b, s:n, s:b}", "revision",
                               json_object_get(status, "revision"), "nodes", only, "restart",
                               restart, "operation", "dry_run", hc_json_bool(body, "dry_run", 0)),
                     &err);
        replied = 1;
        goto done;
    }
    json_t *changes = json_array();
    record_and_apply(req, api, body, &p, NULL, NULL, 0, changes, restart, only, &err);
    json_decref(changes);
    replied = !err.code[0];
done:
    if (!replied)
        hc_api_reply(req, 202, NULL, &err);
    json_decref(body);
    json_decref(status);
    json_decref(only);
}
