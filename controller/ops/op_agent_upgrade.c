/*
 * agent.upgrade: see op_agent_upgrade.h for the sequence. The agent side is
 * agents/hcagent/agent_upgrade.c; the wire calls are in controller/remote/service_client.c.
 */
#include "controller/ops/op_agent_upgrade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bundle.h"
#include "common/constants.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/ops.h"
#include "controller/ops/sw_steps.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define POLL_MS 250

static const char *const node_steps[] = {"stage", "activate", "verify", NULL};

json_t *hc_agent_upgrade_plan(struct hc_db *db, const json_t *params, struct hc_error *err)
{
    const char *to = hc_json_str(params, "to_version", "");
    json_t *bundle = hc_sw_bundle_row(db, to, err), *rows = NULL, *plan = NULL, *row;
    size_t i;
    if (!bundle)
        return NULL;
    if (strcmp(hc_bundle_kind(json_object_get(bundle, "manifest_json")), HC_BUNDLE_KIND_AGENT)) {
        hc_error_set(err, HC_E(BUNDLE_KIND), "%s is a storage service bundle, not an agent", to);
        hc_error_hint(err, "a service bundle is rolled out with 'hcctl upgrade --rolling --to %s'",
                      to);
        goto cleanup;
    }
    if (!(rows = hc_nodes_agents(db, err)))
        goto cleanup;
    if (json_array_size(rows) == 0) {
        hc_error_set(err, HC_E(CONFLICT), "the cluster has no nodes to upgrade");
        hc_error_hint(err, "bring nodes in first: hcctl cluster create / hcctl node add");
        goto cleanup;
    }
    json_array_foreach(rows, i, row)
    {
        json_object_del(row, "agent_url");
        int done = !strcmp(hc_json_str(row, "from_version", ""), to);
        json_t *steps = json_array();
        for (size_t s = 0; !done && node_steps[s]; s++)
            json_array_append_new(steps, json_string(node_steps[s]));
        json_object_set_new(row, "action",
                            json_string(done ? "none (already on target)" : "upgrade"));
        json_object_set_new(row, "steps", steps);
    }
    plan = json_pack("{s:s, s:O}", "to_version", to, "nodes", rows);
cleanup:
    json_decref(bundle);
    json_decref(rows);
    return plan;
}

/* --- the run ------------------------------------------------------------------------------- */

struct agent_node {
    struct hc_svc_node svc;
    const char *to;
    const struct hc_sw_target *target;
    long confirm_ms, node_timeout_ms;
};

/* Asks the agent until it answers and want(st) holds, bounded by timeout_ms; a transport
 * failure meanwhile is the agent restarting. 1 when it held, 0 at the timeout (err says what
 * was seen last), -1 with err on an error that is not the agent's absence. */
static int wait_agent(struct hc_op_ctx *ctx, const struct agent_node *n, long timeout_ms,
                      int (*want)(const struct agent_node *, const struct hc_agent_state *),
                      const char *waiting, struct hc_agent_state *st, struct hc_error *err)
{
    int64_t end = hc_mono_ms() + timeout_ms;
    hc_op_waiting(ctx, "%s", waiting);
    for (;;) {
        struct hc_error e = {0};
        if (hc_agent_sw_status(&n->svc, st, &e) == 0) {
            if (want(n, st))
                break;
            hc_error_set(err, HC_E(TIMEOUT), "node %s: the agent reports %s", n->svc.name,
                         st->version);
        } else if (!hc_agent_err_is_transport(&e)) {
            *err = e;
            return -1;
        } else {
            *err = e;
        }
        if (hc_mono_ms() >= end)
            return 0;
        hc_sleep_ms(POLL_MS);
    }
    hc_op_waiting(ctx, NULL);
    return 1;
}

static int answers(const struct agent_node *n, const struct hc_agent_state *st)
{
    (void)n;
    (void)st;
    return 1;
}

/* The target answers, or the guardian has put the previous agent back and that answers. */
static int settled(const struct agent_node *n, const struct hc_agent_state *st)
{
    return !strcmp(st->version, n->to) ||
           (!strcmp(st->upgrade_to, n->to) && !strcmp(st->upgrade_state, "rolled_back"));
}

/* The adopted service has passed its health check again under the new agent. */
static int service_running(const struct agent_node *n, const struct hc_agent_state *st)
{
    (void)n;
    return !strcmp(st->service_state, "running");
}

static int step_stage(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    const struct agent_node *n = arg;
    const struct hc_sw_target *t = n->target;
    (void)ctx;
    if (hc_agent_sw_stage_agent(&n->svc, n->to, t->url[0] ? t->url : NULL, t->token,
                                hc_json_str(t->bundle, "sha256", ""),
                                hc_json_str(t->bundle, "signature", ""), err) < 0)
        return -1;
    snprintf(detail, len, "agent %s staged and verified on the node", n->to);
    return 0;
}

/* Records the service's pid in the detail ("service pid N", "no service"), which verify reads
 * back: the new agent must adopt that very process. */
static int step_activate(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    const struct agent_node *n = arg;
    struct hc_agent_state st;
    char waiting[160];
    snprintf(waiting, sizeof(waiting), "agent on %s to answer before its activation", n->svc.name);
    int r = wait_agent(ctx, n, n->node_timeout_ms, answers, waiting, &st, err);
    if (r <= 0)
        return -1;
    if (!strcmp(st.version, n->to)) { /* activated before a controller restart */
        snprintf(detail, len, "already on %s", n->to);
        return 0;
    }
    if (hc_agent_sw_activate_agent(&n->svc, n->to, n->confirm_ms, err) < 0)
        return -1;
    if (st.service_pid > 0)
        snprintf(detail, len, "service pid %ld; agent %s restarting as %s", st.service_pid,
                 st.version, n->to);
    else
        snprintf(detail, len, "no service; agent %s restarting as %s", st.version, n->to);
    return hc_event_add(hc_op_db(ctx), "agent.activated", n->svc.name, hc_op_id(ctx), "controller",
                        json_pack("{s:s, s:s, s:I}", "from", st.version, "to", n->to, "service_pid",
                                  (json_int_t)st.service_pid),
                        err, "node %s: agent %s activated (was %s)", n->svc.name, n->to,
                        st.version);
}

/* The service pid activate recorded: > 0, 0 for none, -1 unknown (a re-run found the target). */
static long recorded_pid(struct hc_op_ctx *ctx, const char *node, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT detail FROM operation_steps WHERE op_id = ? AND "
                                    "node = ? AND step = 'activate'",
                                    "ss", hc_op_id(ctx), node);
    const char *d = hc_json_str(json_array_get(rows, 0), "detail", "");
    long pid = !strncmp(d, "service pid ", 12) ? strtol(d + 12, NULL, 10)
               : !strncmp(d, "no service", 10) ? 0
                                               : -1;
    json_decref(rows);
    return pid;
}

static int step_verify(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    const struct agent_node *n = arg;
    struct hc_agent_state st;
    char waiting[160];
    long pid = recorded_pid(ctx, n->svc.name, err);
    snprintf(waiting, sizeof(waiting), "agent %s on %s to answer (up to %ld s)", n->to, n->svc.name,
             n->node_timeout_ms / 1000);
    int r = wait_agent(ctx, n, n->node_timeout_ms, settled, waiting, &st, err);
    if (r < 0)
        return -1;
    if (r == 0 || strcmp(st.version, n->to) != 0) {
        if (r == 0)
            hc_error_prefix(err, "agent %s did not answer within %ld s", n->to,
                            n->node_timeout_ms / 1000);
        else
            hc_error_set(err, HC_E(AGENT_START_FAILED), "agent %s did not come up: %s", n->to,
                         st.upgrade_reason[0] ? st.upgrade_reason : "rolled back");
        return -1;
    }
    if (st.api_version < HC_AGENT_API_OLDEST_SUPPORTED || st.api_version > HC_AGENT_API_VERSION) {
        /* It came up and confirmed: no guardian puts the previous one back. */
        hc_error_set(err, HC_E(AGENT_API_UNSUPPORTED),
                     "node %s: agent %s speaks agent API %d, this controller drives %d to %d",
                     n->svc.name, n->to, st.api_version, HC_AGENT_API_OLDEST_SUPPORTED,
                     HC_AGENT_API_VERSION);
        return hc_error_hint(err,
                             "upgrade hcctld to a version that speaks it, or put an agent this "
                             "controller speaks back on the node with 'hcctl agent upgrade --to "
                             "VERSION'");
    }
    if (pid > 0 && st.service_pid != pid)
        return hc_error_set(err, HC_E(AGENT_ERROR),
                            "agent %s answers but the service runs as pid %ld, not %ld: it was "
                            "restarted",
                            n->to, st.service_pid, pid);
    snprintf(waiting, sizeof(waiting), "the service on %s to pass its health check under agent %s",
             n->svc.name, n->to);
    if (pid > 0 &&
        (r = wait_agent(ctx, n, n->node_timeout_ms, service_running, waiting, &st, err)) <= 0)
        return r < 0 ? -1
                     : hc_error_prefix(err, "the service on %s is %s under agent %s", n->svc.name,
                                       st.service_state, n->to);
    if (pid > 0 && st.service_pid != pid)
        return hc_error_set(err, HC_E(AGENT_ERROR),
                            "the service on %s restarted (pid %ld, was %ld)", n->svc.name,
                            st.service_pid, pid);
    if (hc_node_set_agent_version(hc_op_db(ctx), n->svc.name, st.version, st.api_version, err) < 0)
        return -1;
    if (pid > 0)
        snprintf(detail, len, "agent %s answers (API %d); service pid %ld unchanged, %s", n->to,
                 st.api_version, pid, st.service_state);
    else
        snprintf(detail, len, "agent %s answers (API %d)", n->to, st.api_version);
    return hc_event_add(hc_op_db(ctx), "agent.upgraded", n->svc.name, hc_op_id(ctx), "controller",
                        json_pack("{s:s, s:i}", "to", n->to, "api_version", st.api_version), err,
                        "node %s runs agent %s", n->svc.name, n->to);
}

/* After a failed verify: the previous agent must answer again (its guardian restarts it). */
static int step_rollback(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    const struct agent_node *n = arg;
    struct hc_agent_state st;
    char waiting[160];
    snprintf(waiting, sizeof(waiting), "the previous agent on %s to answer again", n->svc.name);
    int r = wait_agent(ctx, n, n->node_timeout_ms, answers, waiting, &st, err);
    if (r <= 0)
        return hc_error_prefix(err, "node %s: no agent answers after the failed upgrade",
                               n->svc.name),
               -1;
    if (!strcmp(st.version, n->to))
        return hc_error_set(err, HC_E(AGENT_ERROR), "node %s: agent %s runs after all", n->svc.name,
                            n->to);
    snprintf(detail, len, "agent %s answers again%s%s", st.version,
             st.upgrade_reason[0] ? ": " : "", st.upgrade_reason);
    return hc_event_add(hc_op_db(ctx), "agent.rolled_back", n->svc.name, hc_op_id(ctx),
                        "controller", json_pack("{s:s, s:s}", "from", n->to, "to", st.version), err,
                        "node %s: agent %s rolled back to %s", n->svc.name, n->to, st.version);
}

/* One node: stage, activate, verify; rollback when verify fails. */
static enum hc_op_result upgrade_node(struct hc_op_ctx *ctx, struct agent_node *n,
                                      struct hc_error *err)
{
    enum hc_op_result c;
    if ((c = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return c;
    if (hc_op_step(ctx, n->svc.name, "stage", step_stage, n, err) < 0 ||
        hc_op_step(ctx, n->svc.name, "activate", step_activate, n, err) < 0)
        return HC_OP_FAILED;
    if (hc_op_step(ctx, n->svc.name, "verify", step_verify, n, err) == 0)
        return HC_OP_SUCCEEDED;
    if (!strcmp(err->code, "agent_api_unsupported"))
        return HC_OP_FAILED; /* the new agent runs: nothing to wait for */
    struct hc_error why = *err;
    memset(err, 0, sizeof(*err));
    if (hc_op_step(ctx, n->svc.name, "rollback", step_rollback, n, err) < 0)
        return HC_OP_FAILED;
    hc_error_set(err, HC_E(AGENT_UPGRADE_ROLLED_BACK), "node %s: %s; its previous agent runs again",
                 n->svc.name, why.message);
    hc_error_hint(err,
                  "no further node was touched; fix the agent bundle and upload a new version");
    return HC_OP_FAILED;
}

static enum hc_op_result agent_upgrade_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct hc_sw_target target = {0};
    struct hc_http_client *client = NULL;
    enum hc_op_result r = HC_OP_FAILED;
    const char *to = hc_json_str(p, "to_version", "");
    json_t *plan = hc_agent_upgrade_plan(hc_op_db(ctx), p, err), *nodes = NULL, *row;
    size_t i;
    if (!plan || hc_sw_target_load(hc_op_db(ctx), to, &target, err) < 0 ||
        hc_sw_target_token(ctx, &target, err) < 0 ||
        !(client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)) ||
        !(nodes = hc_nodes_agents(hc_op_db(ctx), err)))
        goto cleanup;
    r = HC_OP_SUCCEEDED;
    json_array_foreach(nodes, i, row)
    {
        struct agent_node n = {
            .svc = {.client = client,
                    .name = hc_json_str(row, "name", ""),
                    .agent_url = hc_json_str(row, "agent_url", ""),
                    .timeout_ms = hc_agent_timeout_ms(hc_op_controller(ctx))},
            .to = to,
            .target = &target,
            .confirm_ms = (long)hc_json_int(p, "confirm_timeout_ms", HC_AGENT_UPGRADE_CONFIRM_MS),
            .node_timeout_ms =
                (long)hc_json_int(p, "node_timeout_ms", HC_AGENT_UPGRADE_NODE_TIMEOUT_MS)};
        if ((r = upgrade_node(ctx, &n, err)) != HC_OP_SUCCEEDED)
            break;
    }
cleanup:
    if (r != HC_OP_PAUSED)
        hc_op_waiting(ctx, NULL);
    hc_sw_target_clear(ctx, &target);
    hc_http_client_free(client);
    json_decref(plan);
    json_decref(nodes);
    return r;
}

const struct hc_op_kind hc_op_kind_agent_upgrade = {HC_AGENT_UPGRADE_KIND, 1, agent_upgrade_run};
