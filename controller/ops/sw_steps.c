/* The software steps shared by the rolling upgrade and node add (see sw_steps.h). */
#include "controller/ops/sw_steps.h"
#include "controller/ha/ha.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/rolling.h"
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
    char base[1100];
    t->url[0] = '\0';
    if (hc_ha_current() && hc_controller_url(hc_op_controller(ctx), base, sizeof(base), err) == 0)
        snprintf(t->url, sizeof(t->url), "%s/v1/software/%s/bundle", base, t->version);
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

int hc_sw_stage_node(const struct hc_svc_node *n, const struct hc_sw_target *t, char *detail,
                     size_t len, struct hc_error *err)
{
    if (hc_sw_stage(n, t->version, t->url[0] ? t->url : NULL, t->token,
                    hc_json_str(t->bundle, "sha256", ""), hc_json_str(t->bundle, "signature", ""),
                    err) < 0)
        return -1;
    snprintf(detail, len, "%s staged and verified on the node", t->version);
    return 0;
}

static int stage_fn(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                    struct hc_error *err)
{
    (void)ctx;
    const struct sw_step *s = arg;
    return hc_sw_stage_node(s->n, s->t, detail, len, err);
}

int hc_sw_stage_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n,
                     const struct hc_sw_target *t, struct hc_error *err)
{
    struct sw_step s = {.n = n, .t = t};
    return hc_op_step(ctx, n->name, "stage", stage_fn, &s, err);
}

int hc_sw_activate_node(struct hc_op_ctx *ctx, const struct hc_svc_node *n, const char *version,
                        char *detail, size_t len, struct hc_error *err)
{
    struct sw_step step = {.n = n, .version = version}, *s = &step;
    struct hc_sw_state st;
    if (hc_sw_state(s->n, &st, err) < 0)
        return -1;
    /* Already on the target: activated by this operation before a restart (the agent takes the
     * same activation again as a no-op); what it ran before is now its previous version. */
    const char *was = !strcmp(st.current, s->version) ? st.previous : st.current;
    int written;
    if (hc_sw_activate(s->n, s->version, 1, err) < 0 ||
        (written = hc_rolling_event_written(ctx, "software.activated", s->n->name, err)) < 0 ||
        (!written &&
         hc_event_add(hc_op_db(ctx), "software.activated", s->n->name, hc_op_id(ctx), "controller",
                      json_pack("{s:s, s:s}", "from", was, "to", s->version), err,
                      "node %s activated %s (was %s)", s->n->name, s->version,
                      was[0] ? was : "nothing") < 0))
        return -1;
    snprintf(detail, len, "%s active (was %s)", s->version, was[0] ? was : "none");
    return 0;
}

static int activate_fn(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    const struct sw_step *s = arg;
    return hc_sw_activate_node(ctx, s->n, s->version, detail, len, err);
}

int hc_sw_activate_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n, const char *version,
                        struct hc_error *err)
{
    struct sw_step s = {.n = n, .version = version};
    return hc_op_step(ctx, n->name, "activate", activate_fn, &s, err);
}
