/* The software steps shared by the rolling upgrade and node add (see sw_steps.h). */
#include "controller/ops/sw_steps.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/state/events.h"
#include "controller/state/software.h"

#define STAGE_TOKEN_TTL_MS (30 * 60 * 1000)

json_t *hc_sw_bundle_row(struct hc_db *db, const char *version, struct hc_error *err)
{
    json_t *row = hc_software_row(db, version, err);
    if (!row && !strcmp(err->code, HC_ERR_NOT_FOUND))
        hc_error_hint(err, "upload it first: hcctl software upload FILE; see hcctl software list");
    return row;
}

int hc_sw_target_load(struct hc_db *db, const char *version, struct hc_sw_target *t,
                      struct hc_error *err)
{
    t->version = version;
    t->bundle = hc_sw_bundle_row(db, version, err);
    return t->bundle ? 0 : -1;
}

int hc_sw_target_token(struct hc_op_ctx *ctx, struct hc_sw_target *t, struct hc_error *err)
{
    char name[96], suffix[9], scope[80];
    hc_random_hex(suffix, 4);
    snprintf(name, sizeof(name), "stage-%s-%s", hc_op_id(ctx), suffix);
    snprintf(scope, sizeof(scope), "bundle:%s", t->version);
    if (hc_auth_scoped_tokens_delete(hc_op_db(ctx), hc_op_id(ctx), err) < 0)
        return -1;
    return hc_auth_token_create_scoped(hc_op_db(ctx), name, scope, hc_op_id(ctx),
                                       hc_now_ms() + STAGE_TOKEN_TTL_MS, t->token, err);
}

void hc_sw_target_clear(struct hc_op_ctx *ctx, struct hc_sw_target *t)
{
    struct hc_error err = {0};
    if (t->token[0] && hc_auth_scoped_tokens_delete(hc_op_db(ctx), hc_op_id(ctx), &err) < 0)
        HC_WARN("%s: staging token left to expire: %s", hc_op_id(ctx), err.message);
    t->token[0] = '\0';
    json_decref(t->bundle);
    t->bundle = NULL;
}

struct sw_step {
    const struct hc_svc_node *n;
    const struct hc_sw_target *t;
    const char *version;
};

static int stage_fn(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                    struct hc_error *err)
{
    const struct sw_step *s = arg;
    if (hc_sw_stage(s->n, s->t->version, NULL, s->t->token, hc_json_str(s->t->bundle, "sha256", ""),
                    hc_json_str(s->t->bundle, "signature", ""), err) < 0)
        return -1;
    snprintf(detail, len, "%s staged and verified on the node", s->t->version);
    return 0;
}

int hc_sw_stage_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n,
                     const struct hc_sw_target *t, struct hc_error *err)
{
    struct sw_step s = {.n = n, .t = t};
    return hc_op_step(ctx, n->name, "stage", stage_fn, &s, err);
}

int hc_sw_event_written(struct hc_op_ctx *ctx, const char *type, const char *node,
                        struct hc_error *err)
{
    /* Only the events since the operation started are looked at (events_ts index): the log
     * is long. */
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT COUNT(*) AS n FROM events "
                                    "WHERE ts >= (SELECT COALESCE(started_at, created_at) FROM "
                                    "operations WHERE id = ?) AND op_id = ? AND node = ? AND "
                                    "type = ?",
                                    "ssss", hc_op_id(ctx), hc_op_id(ctx), node, type);
    if (!rows)
        return -1;
    int n = (int)hc_json_int(json_array_get(rows, 0), "n", 0);
    json_decref(rows);
    return n > 0;
}

static int activate_fn(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    const struct sw_step *s = arg;
    struct hc_sw_state st;
    if (hc_sw_state(s->n, &st, err) < 0)
        return -1;
    /* Already on the target: activated by this operation before a restart (the agent takes the
     * same activation again as a no-op); what it ran before is now its previous version. */
    const char *was = !strcmp(st.current, s->version) ? st.previous : st.current;
    int written;
    if (hc_sw_activate(s->n, s->version, 1, err) < 0 ||
        (written = hc_sw_event_written(ctx, "software.activated", s->n->name, err)) < 0 ||
        (!written &&
         hc_event_add(hc_op_db(ctx), "software.activated", s->n->name, hc_op_id(ctx), "controller",
                      json_pack("{s:s, s:s}", "from", was, "to", s->version), err,
                      "node %s activated %s (was %s)", s->n->name, s->version,
                      was[0] ? was : "nothing") < 0))
        return -1;
    snprintf(detail, len, "%s active (was %s)", s->version, was[0] ? was : "none");
    return 0;
}

int hc_sw_activate_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n, const char *version,
                        struct hc_error *err)
{
    struct sw_step s = {.n = n, .version = version};
    return hc_op_step(ctx, n->name, "activate", activate_fn, &s, err);
}

enum hc_op_result hc_sw_step_result(struct hc_op_ctx *ctx, const char *node,
                                    const struct hc_error *err)
{
    if (!strcmp(err->code, "interrupted"))
        return hc_op_checkpoint(ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
    if (hc_agent_err_is_transport(err)) {
        hc_op_pause_until_reachable(ctx, node, err->message);
        return HC_OP_PAUSED;
    }
    char other[128];
    struct hc_error e = {0};
    if (!strcmp(err->code, HC_ERR_OTHER_UNREACHABLE) &&
        hc_avail_unreachable(hc_op_db(ctx), node, other, sizeof(other), &e) > 0) {
        hc_op_pause_until_reachable(ctx, other, err->message);
        return HC_OP_PAUSED;
    }
    return HC_OP_FAILED;
}
