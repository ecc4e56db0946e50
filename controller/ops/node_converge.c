/*
 * A node added to a running cluster converges to it: the cluster's storage version, then the
 * storage membership (see node_converge.h). Every step is recorded per node with hc_op_step and
 * idempotent, so a controller killed mid-add resumes where it was: the version decided before is
 * read back from its step, staging and activation ask the agent what it has, the peers are sent
 * again (a new epoch, the same members) and the resync is asked again.
 *
 * Which version: the one every other node runs. When they differ (an upgrade stopped half-way),
 * the one the latest rolling upgrade targeted, where the cluster was going, if that bundle is
 * still uploaded; otherwise the highest one run. No other node runs one: none.
 */
#include "controller/ops/node_converge.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/op_upgrade.h"
#include "controller/ops/rolling.h"
#include "controller/ops/sw_steps.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/remote/storage_peers.h"
#include "controller/state/config.h"
#include "controller/state/net.h"
#include "controller/state/nodes.h"
#include "controller/state/software.h"

#define NONE_YET "none"

struct converge {
    const char *const *names; /* the nodes this add brought in */
    size_t n;
    char version[64]; /* decided, or NONE_YET */
};

static int is_new(const struct converge *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->names[i], name))
            return 1;
    return 0;
}

/* The target of the latest rolling upgrade when its bundle is still uploaded, else "". */
static void latest_target(struct hc_db *db, char *out, size_t len)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(db, &err,
                                    "SELECT params_json FROM operations WHERE kind = ? "
                                    "ORDER BY created_at DESC LIMIT 1",
                                    "s", HC_UPGRADE_KIND);
    const json_t *p = json_object_get(json_array_get(rows, 0), "params_json");
    json_t *parsed = json_is_string(p) ? json_loads(json_string_value(p), 0, NULL) : NULL;
    const char *to = hc_json_str(parsed ? parsed : p, "to_version", "");
    json_t *row = to[0] ? hc_software_row(db, to, &err) : NULL;
    snprintf(out, len, "%s", row ? to : "");
    json_decref(row);
    json_decref(parsed);
    json_decref(rows);
}

static int step_version(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                        struct hc_error *err)
{
    struct converge *c = arg;
    struct hc_node_row *rows;
    size_t n, seen = 0, differ = 0;
    const char *top = NULL;
    if (hc_nodes_rows(hc_op_db(ctx), NULL, &rows, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *v = rows[i].software_version;
        if (!v || !v[0] || is_new(c, rows[i].name))
            continue;
        differ += seen++ && strcmp(v, top) != 0;
        if (!top || hc_version_cmp(v, top) > 0)
            top = v;
    }
    char target[64] = "";
    if (differ)
        latest_target(hc_op_db(ctx), target, sizeof(target));
    snprintf(c->version, sizeof(c->version), "%s", !top ? NONE_YET : target[0] ? target : top);
    if (!top)
        snprintf(detail, len, "%s: no node runs a storage version yet", NONE_YET);
    else if (!differ)
        snprintf(detail, len, "%s: the version every other node runs", c->version);
    else
        snprintf(detail, len, "%s: the nodes run different versions; %s", c->version,
                 target[0] ? "the latest upgrade's target" : "the highest one run");
    hc_node_rows_free(rows, n);
    return 0;
}

/* The version decided by this operation (the first word of its step's detail). */
static int decided_version(struct hc_op_ctx *ctx, struct converge *c, struct hc_error *err)
{
    c->version[0] = '\0';
    if (hc_op_step(ctx, NULL, "storage_version", step_version, c, err) < 0)
        return -1;
    if (c->version[0])
        return 0; /* decided now */
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT detail FROM operation_steps WHERE op_id = ? AND "
                                    "node IS NULL AND step = 'storage_version' AND "
                                    "state = 'succeeded'",
                                    "s", hc_op_id(ctx));
    if (!rows)
        return -1;
    const char *d = hc_json_str(json_array_get(rows, 0), "detail", "");
    snprintf(c->version, sizeof(c->version), "%.*s", (int)strcspn(d, ":"), d);
    json_decref(rows);
    if (!c->version[0])
        return hc_error_set(err, HC_E(INTERNAL), "the storage version decided is not recorded");
    return 0;
}

/* "storage" in the operation's result document, beside what the jumbo check put there. */
static int record_result(struct hc_op_ctx *ctx, const struct converge *c, struct hc_error *err)
{
    int none = !strcmp(c->version, NONE_YET);
    json_t *rows = hc_db_query_json(
        hc_op_db(ctx), err, "SELECT result_json FROM operations WHERE id = ?", "s", hc_op_id(ctx));
    if (!rows)
        return -1;
    const json_t *prev = json_object_get(json_array_get(rows, 0), "result_json");
    json_t *doc = json_is_object(prev) ? json_deep_copy(prev) : json_object(),
           *names = json_array();
    for (size_t i = 0; i < c->n; i++)
        json_array_append_new(names, json_string(c->names[i]));
    json_object_set_new(
        doc, "storage",
        json_pack("{s:s?, s:o, s:b, s:s}", "version", none ? NULL : c->version, "nodes", names,
                  "members", !none, "note",
                  none ? "no node runs a storage version yet: the new nodes run none and are not "
                         "storage members; the next 'hcctl upgrade --rolling' installs it"
                       : "the new nodes run the cluster's version, are storage members and "
                         "resynced"));
    int rc = hc_ops_store_result(hc_op_db(ctx), hc_op_id(ctx), doc, err);
    json_decref(doc);
    json_decref(rows);
    return rc;
}

/* A wait of one new node as a step: its service healthy, or in sync with the members. */
struct wait_step {
    const struct hc_svc_node *n;
    int (*wait)(struct hc_op_ctx *ctx, const struct hc_svc_node *n, int64_t timeout_ms,
                struct hc_error *err);
    const char *done; /* the detail: "DONE after N ms" */
};

static int step_wait(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    const struct wait_step *w = arg;
    int64_t t0 = hc_mono_ms();
    if (w->wait(ctx, w->n, HC_UPGRADE_NODE_TIMEOUT_MS, err) < 0)
        return -1;
    snprintf(detail, len, "%s after %lld ms", w->done, (long long)(hc_mono_ms() - t0));
    return 0;
}

/* The agent coordinates of a new node. 0, or -1 with err (404). */
static int svc_node(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *name,
                    struct hc_maint_node *mn, struct hc_svc_node *n, struct hc_error *err)
{
    if (hc_maint_node_load(hc_op_db(ctx), name, mn, err) < 0)
        return -1;
    *n = (struct hc_svc_node){client, mn->name, mn->agent_url,
                              hc_agent_timeout_ms(hc_op_controller(ctx))};
    return 0;
}

/* The cluster's configuration revision, written on the node for the staged version before the
 * service first starts there (its restart settings then apply from the start). A version that
 * declares no settings has nothing to write. */
struct settings_step {
    const struct hc_svc_node *n;
    const char *version;
};

static int step_settings(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    const struct settings_step *s = arg;
    int64_t rev;
    json_t *overrides = NULL, *answer = NULL;
    struct hc_settings_schema *schema = hc_config_schema(hc_op_db(ctx), s->version, err);
    int rc = -1;
    if (!schema || hc_config_desired(hc_op_db(ctx), &rev, &overrides, err) < 0)
        goto cleanup;
    if (hc_settings_schema_count(schema) == 0) {
        snprintf(detail, len, "%s declares no settings", s->version);
        rc = 0;
    } else if (hc_cfg_push_for(s->n, s->version, rev, overrides, &answer, err) == 0) {
        snprintf(detail, len, "configuration revision %lld written for %s", (long long)rev,
                 s->version);
        rc = 0;
    }
cleanup:
    hc_settings_schema_free(schema);
    json_decref(overrides);
    json_decref(answer);
    return rc;
}

/* Stage, write the configuration, activate and wait healthy: the node runs the cluster's
 * version with the cluster's settings. */
static enum hc_op_result install(struct hc_op_ctx *ctx, struct hc_http_client *client,
                                 const struct hc_sw_target *t, const char *name,
                                 struct hc_error *err)
{
    struct hc_maint_node mn;
    struct hc_svc_node n;
    struct wait_step healthy = {&n, hc_maint_wait_healthy, "healthy"};
    enum hc_op_result r;
    if (svc_node(ctx, client, name, &mn, &n, err) < 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    hc_op_waiting(ctx, "%s to stage and start %s", name, t->version);
    if (hc_sw_stage_step(ctx, &n, t, err) < 0)
        return hc_rolling_classify(ctx, name, err);
    struct settings_step settings = {&n, t->version};
    if (hc_op_step(ctx, name, "settings", step_settings, &settings, err) < 0 ||
        hc_sw_activate_step(ctx, &n, t->version, err) < 0 ||
        hc_op_step(ctx, name, "healthy", step_wait, &healthy, err) < 0)
        return hc_rolling_classify(ctx, name, err);
    if (hc_node_set_software_version(hc_op_db(ctx), name, t->version, hc_now_ms(), err) < 0)
        return HC_OP_FAILED;
    return HC_OP_SUCCEEDED;
}

static enum hc_op_result wait_resync(struct hc_op_ctx *ctx, struct hc_http_client *client,
                                     const char *name, struct hc_error *err)
{
    struct hc_maint_node mn;
    struct hc_svc_node n;
    struct wait_step synced = {&n, hc_maint_wait_resync, "a storage member, in sync"};
    if (svc_node(ctx, client, name, &mn, &n, err) < 0)
        return HC_OP_FAILED;
    if (hc_op_step(ctx, name, "resync", step_wait, &synced, err) < 0)
        return hc_rolling_classify(ctx, name, err);
    return HC_OP_SUCCEEDED;
}

enum hc_op_result hc_node_converge(struct hc_op_ctx *ctx, const char *const *names, size_t n,
                                   struct hc_error *err)
{
    struct converge c = {.names = names, .n = n};
    struct hc_sw_target t = {0};
    struct hc_http_client *client = NULL;
    enum hc_op_result r = HC_OP_FAILED;
    if (decided_version(ctx, &c, err) < 0)
        return HC_OP_FAILED;
    if (!strcmp(c.version, NONE_YET))
        return record_result(ctx, &c, err) < 0 ? HC_OP_FAILED : HC_OP_SUCCEEDED;
    if (hc_sw_target_load(hc_op_db(ctx), c.version, &t, err) < 0 ||
        hc_sw_target_token(ctx, &t, err) < 0 ||
        !(client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)))
        goto cleanup;
    for (size_t i = 0; i < n; i++)
        if ((r = install(ctx, client, &t, names[i], err)) != HC_OP_SUCCEEDED)
            goto cleanup;
    r = HC_OP_FAILED;
    /* Only now, with every new node's service running: a member that is not serving yet would
     * be given blocks it cannot take. */
    if (hc_storage_peers_step(ctx, client, err) < 0)
        goto cleanup;
    for (size_t i = 0; i < n; i++)
        if ((r = wait_resync(ctx, client, names[i], err)) != HC_OP_SUCCEEDED)
            goto cleanup;
    r = record_result(ctx, &c, err) < 0 ? HC_OP_FAILED : HC_OP_SUCCEEDED;
cleanup:
    hc_op_waiting(ctx, NULL);
    hc_sw_target_clear(ctx, &t);
    hc_http_client_free(client);
    return r;
}
