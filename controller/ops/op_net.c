/*
 * The network operations (docs/net.md):
 *
 * - net.check (non-disruptive): every directed pair probed at the MTU (hc_net_check_run below,
 *   the probes in controller/remote/net_probe.c, the findings in controller/state/); the result
 *   document is stored with the operation (operations.result_json). The same check ends
 *   cluster.create and node.add when the cluster has an MTU (hc_net_check_after_join).
 * - net.set_mtu (disruptive, holds the cluster lease): node by node, in name order, the agent
 *   sets the storage interface's MTU with a revert timer (commit-confirmed); the controller
 *   re-probes that node against every other one, both ways, at the size each pair will use
 *   (the smaller of the two MTUs), and confirms only when all pass. Otherwise it tells the agent
 *   to revert at once (POST /v1/net/mtu/revert); only when the agent cannot be reached (the
 *   change cut it off, an older agent) does it wait for the agent's own timer to revert. Then it
 *   sets the nodes it already changed back to their old MTU and fails with the finding. Nodes
 *   already at the MTU are not changed, but every pair among them is probed at it before anything
 *   changes. clusters.mtu changes only when every node confirmed. The per-node changes are kept
 *   in result_json, so a restarted controller knows what to undo.
 * - net.bench (non-disruptive): TCP throughput between pairs with the agents' iperf endpoints,
 *   one pair at a time.
 */
#include "controller/ops/op_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/ops.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/net_probe.h"
#include "controller/state/events.h"
#include "controller/state/net.h"

#define MTU_DEFAULT_CONFIRM_MS 30000
#define MTU_REVERT_GRACE_MS 15000 /* how long after revert_at an agent may take to report it */
#define MTU_POLL_MS 500
#define BENCH_DEFAULT_S 3
#define BENCH_GRACE_MS 15000

/* One call to node n's agent: the body (new reference) of a 2xx answer, or NULL with err;
 * *status receives the HTTP status (0 on a transport failure). body is borrowed. */
static json_t *agent_do(struct hc_http_client *client, const struct hc_net_node *n,
                        const char *method, const char *path, const json_t *body, long timeout,
                        long *status, struct hc_error *err)
{
    struct hc_http_response resp = {0};
    json_t *out = NULL;
    int rc = hc_agent_call(client, n->agent_url, method, path, body, timeout, &resp, err);
    *status = resp.status;
    if (rc == 0 && json_is_object(resp.body))
        out = json_incref(resp.body);
    else if (rc == 0)
        hc_error_set(err, HC_E(AGENT_ERROR), "agent %s answered %s %s without JSON", n->name,
                     method, path);
    else
        hc_error_prefix(err, "%s: ", n->name);
    hc_http_response_clear(&resp);
    return out;
}

/* --- the whole check ------------------------------------------------------------------------ */

json_t *hc_net_check_run(struct hc_db *db, struct hc_http_client *client,
                         const struct hc_net_check_opts *o, struct hc_error *err)
{
    struct hc_net_check c = {.probe_timeout_ms = o->probe_timeout_ms, .search = 1};
    json_t *doc = NULL;
    char at[40];
    int64_t t0 = hc_mono_ms();
    int cluster_mtu = hc_net_cluster_mtu(db, err);
    if (cluster_mtu < 0)
        return NULL;
    c.mtu = o->mtu > 0 ? o->mtu : cluster_mtu > 0 ? cluster_mtu : HC_NET_DEFAULT_MTU;
    c.mtu_source = o->mtu > 0 ? "option" : cluster_mtu > 0 ? "cluster" : "default";
    if (hc_net_gather(db, o->nodes, &c, err) < 0 || hc_net_all_pairs(&c, err) < 0)
        goto cleanup;
    hc_net_probe(client, &c, 1);
    doc = hc_net_result_json(&c);
    json_object_set_new(doc, "cluster_mtu",
                        cluster_mtu > 0 ? json_integer(cluster_mtu) : json_null());
    json_object_set_new(doc, "checked_at",
                        json_string(hc_time_format(hc_now_ms(), at, sizeof(at))));
    json_object_set_new(doc, "duration_ms", json_integer(hc_mono_ms() - t0));
cleanup:
    hc_net_check_clear(&c);
    return doc;
}

/* The first error finding of a failed result as err (code mtu_check_failed). */
static int check_failure(const json_t *doc, struct hc_error *err)
{
    size_t i;
    const json_t *f, *first = NULL;
    json_array_foreach(json_object_get(doc, "findings"), i, f)
    {
        if (!first && strcmp(hc_json_str(f, "severity", ""), "error") == 0)
            first = f;
    }
    hc_error_set(err, HC_E(MTU_CHECK_FAILED), "jumbo frame check at MTU %lld failed: %s",
                 (long long)hc_json_int(doc, "mtu", 0),
                 first ? hc_json_str(first, "message", "") : "some pairs fail");
    return hc_error_hint(err, "%s; the nodes stay joined: fix it, then 'hcctl net check-jumbo'",
                         first ? hc_json_str(first, "fix", "see 'hcctl net check-jumbo'")
                               : "see 'hcctl net check-jumbo'");
}

int hc_net_check_after_join(struct hc_op_ctx *ctx, struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    struct hc_net_check_opts o = {0};
    struct hc_http_client *client = NULL;
    json_t *doc = NULL;
    int rc = -1;
    int mtu = hc_net_cluster_mtu(db, err);
    if (mtu <= 0)
        return mtu;
    hc_op_waiting(ctx, "every pair of nodes to pass %d-byte probes", mtu);
    if (!(client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)) ||
        !(doc = hc_net_check_run(db, client, &o, err)))
        goto cleanup;
    json_t *stored = json_pack("{s:O}", "net_check", doc);
    if (hc_ops_store_result(db, hc_op_id(ctx), stored, err) < 0) {
        json_decref(stored);
        goto cleanup;
    }
    json_decref(stored);
    rc = hc_json_bool(doc, "passed", 0) ? 0 : check_failure(doc, err);
    HC_INFO("operation %s: jumbo frame check at MTU %d %s", hc_op_id(ctx), mtu,
            rc == 0 ? "passed" : "failed");
cleanup:
    hc_op_waiting(ctx, NULL);
    json_decref(doc);
    hc_http_client_free(client);
    return rc;
}

/* --- net.check ------------------------------------------------------------------------------ */

static enum hc_op_result net_check_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    const json_t *nodes = json_object_get(p, "nodes");
    struct hc_net_check_opts o = {.mtu = (int)hc_json_int(p, "mtu", 0),
                                  .nodes = json_is_array(nodes) ? nodes : NULL};
    enum hc_op_result r = HC_OP_FAILED;
    json_t *doc = NULL;
    struct hc_http_client *client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err);
    if (!client)
        return HC_OP_FAILED;
    hc_op_waiting(ctx, "the agents to probe every pair of nodes");
    doc = hc_net_check_run(hc_op_db(ctx), client, &o, err);
    hc_op_waiting(ctx, NULL);
    if (doc && hc_ops_store_result(hc_op_db(ctx), hc_op_id(ctx), doc, err) == 0)
        r = HC_OP_SUCCEEDED; /* the check ran: whether it passed is in the result */
    json_decref(doc);
    hc_http_client_free(client);
    return r;
}

/* --- net.set_mtu ---------------------------------------------------------------------------- */

struct mtu_job {
    struct hc_op_ctx *ctx;
    struct hc_db *db;
    struct hc_http_client *client;
    long call_ms;
    int mtu;
    int64_t confirm_ms;
    struct hc_net_check chk; /* every node, interfaces fresh from the agents */
    int *cur;                /* the MTU each node runs now */
    json_t *state;           /* result_json: {"mtu","confirm_timeout_ms","changes":{NODE:{...}}} */
};

struct mtu_step {
    struct mtu_job *job;
    size_t node;
};

static json_t *change_of(struct mtu_job *j, const char *node)
{
    return json_object_get(json_object_get(j->state, "changes"), node);
}

/* Records a node's change (previous may be 0 to keep the recorded one) and stores the state. */
static void change_set(struct mtu_job *j, size_t i, const char *state, int previous,
                       const char *change_id)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    json_t *ch = change_of(j, n->name);
    struct hc_error err = {0};
    if (!ch) {
        ch = json_object();
        json_object_set_new(json_object_get(j->state, "changes"), n->name, ch);
    }
    json_object_set_new(ch, "interface", json_string(n->iface));
    json_object_set_new(ch, "mtu", json_integer(j->mtu));
    if (previous > 0)
        json_object_set_new(ch, "previous_mtu", json_integer(previous));
    if (change_id)
        json_object_set_new(ch, "change_id", json_string(change_id));
    json_object_set_new(ch, "state", json_string(state));
    if (hc_ops_store_result(j->db, hc_op_id(j->ctx), j->state, &err) < 0)
        HC_WARN("operation %s: cannot record the change on %s: %s", hc_op_id(j->ctx), n->name,
                err.message);
}

/* Waits until node i's agent no longer has change_id pending (it reverted by itself). Returns
 * 1 when it reported that revert, 0 when nothing is pending any more, -1 with err at the
 * deadline. */
static int wait_revert(struct mtu_job *j, size_t i, const char *change_id, int previous,
                       int64_t deadline, struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    long status;
    hc_op_waiting(j->ctx, "%s to revert %s to MTU %d by itself", n->name, n->iface, previous);
    while (hc_mono_ms() < deadline) {
        struct hc_error ignored = {0};
        json_t *st =
            agent_do(j->client, n, "GET", "/v1/net/mtu", NULL, j->call_ms, &status, &ignored);
        const json_t *lr = json_object_get(st, "last_revert");
        int pending = json_is_object(json_object_get(st, "pending"));
        int mine = change_id[0] && !strcmp(hc_json_str(lr, "change_id", ""), change_id);
        json_decref(st);
        if (st && (mine || !pending))
            return mine;
        hc_sleep_ms(MTU_POLL_MS);
    }
    hc_error_set(err, HC_E(TIMEOUT), "%s did not report reverting %s to MTU %d", n->name, n->iface,
                 previous);
    return hc_error_hint(err, "look at it by hand: 'ip link show %s' on %s", n->iface, n->name);
}

/* Re-probes node i against every other node, both ways, at the size each pair will use.
 * Returns 1 when every pair passed, 0 when some failed (msg/fix say why), -1 with err. */
static int verify(struct mtu_job *j, size_t i, char *msg, size_t len, char *fix, size_t fix_len,
                  struct hc_error *err)
{
    size_t n = j->chk.nnodes, k = 0;
    struct hc_net_check v = {.mtu = j->mtu, .search = 1};
    int rc = -1;
    v.nodes = calloc(n, sizeof(*v.nodes));
    v.pairs = calloc(2 * n, sizeof(*v.pairs));
    if (!v.nodes || !v.pairs) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    memcpy(v.nodes, j->chk.nodes, n * sizeof(*v.nodes));
    v.nnodes = n;
    for (size_t o = 0; o < n; o++) {
        if (o == i)
            continue;
        int size = j->cur[o] > 0 && j->cur[o] < j->mtu ? j->cur[o] : j->mtu;
        v.pairs[k++] = (struct hc_net_pair){.from = i, .to = o, .size = size};
        v.pairs[k++] = (struct hc_net_pair){.from = o, .to = i, .size = size};
    }
    v.npairs = k;
    hc_op_waiting(j->ctx, "%s to pass probes to and from %zu other node(s) at MTU %d",
                  j->chk.nodes[i].name, n - 1, j->mtu);
    hc_net_probe(j->client, &v, 0);
    hc_net_summary(&v, i, msg, len, fix, fix_len);
    rc = msg[0] ? 0 : 1;
cleanup:
    hc_net_check_clear(&v);
    return rc;
}

/* The pending change of node i, adopted when it is this operation's (a restart between apply
 * and confirm). 1 adopted (change_id, *previous filled), 0 none, -1 with err. */
static int adopt_pending(struct mtu_job *j, size_t i, char *change_id, size_t len, int *previous,
                         struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    long status;
    json_t *st = agent_do(j->client, n, "GET", "/v1/net/mtu", NULL, j->call_ms, &status, err);
    const json_t *p = json_object_get(st, "pending");
    int rc = 0;
    if (!st)
        return -1;
    if (json_is_object(p) && hc_json_int(p, "mtu", 0) == j->mtu &&
        !strcmp(hc_json_str(p, "interface", ""), n->iface)) {
        snprintf(change_id, len, "%s", hc_json_str(p, "change_id", ""));
        *previous = (int)hc_json_int(p, "previous_mtu", 0);
        rc = 1;
    } else if (json_is_object(p)) {
        rc = hc_error_set(err, HC_E(CONFLICT),
                          "%s has another MTU change pending on %s "
                          "(to %lld, change %s)",
                          n->name, hc_json_str(p, "interface", "?"),
                          (long long)hc_json_int(p, "mtu", 0), hc_json_str(p, "change_id", "?"));
        hc_error_hint(err, "wait until it is confirmed or reverted, then run set-mtu again");
    }
    json_decref(st);
    return rc;
}

/* Asks node i's agent to apply the MTU with the revert timer. 0 or -1 with err; *applied says
 * whether the change may have happened (a lost answer leaves that open). */
static int apply(struct mtu_job *j, size_t i, char *change_id, size_t len, int *previous,
                 int *applied, struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    long status;
    json_t *body = json_pack("{s:s, s:i, s:I}", "interface", n->iface, "mtu", j->mtu,
                             "revert_after_ms", (json_int_t)j->confirm_ms);
    hc_op_waiting(j->ctx, "%s to set %s to MTU %d", n->name, n->iface, j->mtu);
    json_t *r = agent_do(j->client, n, "POST", "/v1/net/mtu", body, j->call_ms, &status, err);
    json_decref(body);
    *applied = r != NULL || status == 0;
    if (!r)
        return -1;
    snprintf(change_id, len, "%s", hc_json_str(r, "change_id", ""));
    *previous = (int)hc_json_int(r, "previous_mtu", j->cur[i]);
    json_decref(r);
    return 0;
}

static int confirm(struct mtu_job *j, size_t i, const char *change_id, long *status,
                   struct hc_error *err)
{
    json_t *body = json_pack("{s:s}", "change_id", change_id);
    json_t *r = agent_do(j->client, &j->chk.nodes[i], "POST", "/v1/net/mtu/confirm", body,
                         j->call_ms, status, err);
    json_decref(body);
    json_decref(r);
    return r ? 0 : -1;
}

static void mtu_event(struct mtu_job *j, size_t i, int from, int to, const char *what)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    struct hc_error err = {0};
    json_t *d = json_pack("{s:s, s:i, s:i, s:s}", "interface", n->iface, "from", from, "to", to,
                          "result", what);
    if (hc_event_add(j->db, "net.mtu", n->name, hc_op_id(j->ctx), "controller", d, &err,
                     "%s on %s: MTU %d -> %d %s", n->iface, n->name, from, to, what) < 0)
        HC_WARN("cannot record an MTU event: %s", err.message);
}

enum revert_answer {
    REVERT_UNASKED = 0,   /* the agent could not be asked: its own timer reverts */
    REVERT_DONE = 1,      /* reverted (on this request, or by the timer before it) */
    REVERT_CONFIRMED = 2, /* the agent says the change was confirmed (a lost confirm answer) */
};

/* Asks node i's agent to revert change_id now: the counterpart of confirm. REVERT_DONE with
 * *by_request (this request did it, or the agent's timer already had), REVERT_CONFIRMED,
 * REVERT_UNASKED when the agent did not answer or does not know the route (an older hcagent),
 * or -1 with err when the agent answered that it could not put the old MTU back. */
static int ask_revert(struct mtu_job *j, size_t i, const char *change_id, int previous,
                      int *by_request, struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    struct hc_error e = {0};
    long status = 0;
    json_t *body = json_pack("{s:s}", "change_id", change_id);
    hc_op_waiting(j->ctx, "%s to revert %s to MTU %d", n->name, n->iface, previous);
    json_t *r = agent_do(j->client, n, "POST", "/v1/net/mtu/revert", body, j->call_ms, &status, &e);
    json_decref(body);
    if (r) {
        *by_request = strcmp(hc_json_str(r, "reverted_by", ""), "request") == 0;
        json_decref(r);
        return REVERT_DONE;
    }
    if (status == 409)
        return REVERT_CONFIRMED;
    if (status == 500) {
        *err = e;
        return -1;
    }
    HC_INFO("operation %s: cannot ask %s to revert change %s (%s): waiting for its own timer",
            hc_op_id(j->ctx), n->name, change_id, e.message);
    return REVERT_UNASKED;
}

/* How a change that must not stay ended: recorded, and the operation's error. */
static int reverted(struct mtu_job *j, size_t i, int previous, int by_request, const char *why,
                    const char *fix, struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    change_set(j, i, "reverted", previous, NULL);
    mtu_event(j, i, j->mtu, previous,
              by_request ? "reverted by the agent at the controller's "
                           "request (not verified)"
                         : "reverted by the agent itself (not confirmed)");
    hc_error_set(err, HC_E(MTU_CHANGE_FAILED),
                 "MTU %d on %s failed verification: %s; %s "
                 "reverted %s to %d %s",
                 j->mtu, n->name, why, n->name, n->iface, previous,
                 by_request ? "when asked" : "by itself");
    return hc_error_hint(err, "%s", fix);
}

/* The end of a change that must not stay, given what the agent answered to the revert request
 * (r: enum revert_answer, or -1 with err): when it could not be asked, its own timer reverts and
 * the controller waits for that. Then the operation fails. */
static int end_change(struct mtu_job *j, size_t i, const char *change_id, int previous, int r,
                      int by_request, const char *why, const char *fix, struct hc_error *err)
{
    const struct hc_net_node *n = &j->chk.nodes[i];
    if (r == REVERT_UNASKED) {
        int64_t deadline = hc_mono_ms() + j->confirm_ms + MTU_REVERT_GRACE_MS;
        r = wait_revert(j, i, change_id, previous, deadline, err) < 0 ? -1 : REVERT_DONE;
    } else if (r == REVERT_CONFIRMED) {
        hc_error_set(err, HC_E(INTERNAL), "its agent reports the change as confirmed");
        r = -1;
    }
    if (r < 0) {
        change_set(j, i, "unknown", previous, NULL);
        return hc_error_prefix(err, "MTU %d on %s failed (%s) and ", j->mtu, n->name, why);
    }
    return reverted(j, i, previous, by_request, why, fix, err);
}

/* A change that must not stay: the agent is told to revert it at once. An empty change_id (the
 * answer to the apply was lost) is looked up among the agent's pending changes first. */
static int let_revert(struct mtu_job *j, size_t i, const char *change_id, int previous,
                      const char *why, const char *fix, struct hc_error *err)
{
    char id[96];
    int by_request = 0, r = REVERT_UNASKED, ignored_prev = 0;
    struct hc_error ignored = {0};
    snprintf(id, sizeof(id), "%s", change_id);
    if (!id[0] && adopt_pending(j, i, id, sizeof(id), &ignored_prev, &ignored) != 1)
        id[0] = '\0';
    if (id[0])
        r = ask_revert(j, i, id, previous, &by_request, err);
    return end_change(j, i, id, previous, r, by_request, why, fix, err);
}

/* 1 when the operation's record says it changed node i (pending or confirmed, from another
 * MTU); *previous receives that MTU. */
static int changed_before_restart(struct mtu_job *j, size_t i, int *previous)
{
    const json_t *ch = change_of(j, j->chk.nodes[i].name);
    const char *state = hc_json_str(ch, "state", "");
    int prev = (int)hc_json_int(ch, "previous_mtu", 0);
    if ((strcmp(state, "pending") != 0 && strcmp(state, "confirmed") != 0) || prev <= 0 ||
        prev == j->mtu)
        return 0;
    *previous = prev;
    return 1;
}

/* 1 when this operation already wrote node i's "confirmed" event (before a restart). */
static int confirmed_recorded(struct mtu_job *j, size_t i)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(
        j->db, &err,
        "SELECT COUNT(*) AS n FROM events WHERE ts >= (SELECT COALESCE(started_at, "
        "created_at) FROM operations WHERE id = ?) AND op_id = ? AND node = ? AND type = "
        "'net.mtu' AND json_extract(details_json, '$.result') = 'confirmed'",
        "sss", hc_op_id(j->ctx), hc_op_id(j->ctx), j->chk.nodes[i].name);
    int n = rows ? (int)hc_json_int(json_array_get(rows, 0), "n", 0) : 0;
    json_decref(rows);
    return n > 0;
}

static int step_set_mtu(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                        struct hc_error *err)
{
    struct mtu_step *s = arg;
    struct mtu_job *j = s->job;
    size_t i = s->node;
    const struct hc_net_node *n = &j->chk.nodes[i];
    char id[96] = "", msg[1024], fix[768];
    int previous = j->cur[i], applied = 0;
    long status = 0;
    int adopted = adopt_pending(j, i, id, sizeof(id), &previous, err);
    if (adopted < 0)
        return -1;
    if (!adopted && j->cur[i] == j->mtu && changed_before_restart(j, i, &previous)) {
        /* This operation changed it before a restart and the confirmation landed: an agent
         * drops a pending change only by confirming it or by reverting to the old MTU. Recorded
         * as confirmed, with the old MTU kept for a rollback (recording it "unchanged" lost it:
         * a later failure left this node alone on the new MTU). */
        change_set(j, i, "confirmed", previous, NULL);
        if (!confirmed_recorded(j, i))
            mtu_event(j, i, previous, j->mtu, "confirmed");
        snprintf(detail, len, "%s %d -> %d, confirmed before a controller restart", n->iface,
                 previous, j->mtu);
        return 0;
    }
    if (!adopted && j->cur[i] == j->mtu) {
        /* Proven with the others already at it (step verify_unchanged) and with each node that
         * changes after it (that node's verification). */
        change_set(j, i, "unchanged", j->mtu, NULL);
        snprintf(detail, len, "%s already at MTU %d", n->iface, j->mtu);
        return 0;
    }
    if (!adopted && apply(j, i, id, sizeof(id), &previous, &applied, err) < 0) {
        if (!applied)
            return -1; /* refused: nothing changed (e.g. above the NIC's maximum) */
        snprintf(msg, sizeof(msg), "%s", err->message);
        return let_revert(j, i, "", previous, msg, "see 'hcctl node show'", err);
    }
    change_set(j, i, "pending", previous, id);
    int ok = verify(j, i, msg, sizeof(msg), fix, sizeof(fix), err);
    if (ok < 0)
        return -1;
    if (!ok)
        return let_revert(j, i, id, previous, msg, fix, err);
    if (confirm(j, i, id, &status, err) < 0) {
        int by_request = 0, r;
        if (status == 409) {
            change_set(j, i, "reverted", previous, NULL);
            hc_error_set(err, HC_E(TIMEOUT),
                         "MTU %d on %s reverted before it could be "
                         "confirmed",
                         j->mtu, n->name);
            return hc_error_hint(err, "give the probes more time: --confirm-timeout");
        }
        /* The confirm may have arrived and only its answer got lost: the agent knows. */
        snprintf(msg, sizeof(msg), "%s", err->message);
        r = ask_revert(j, i, id, previous, &by_request, err);
        if (r != REVERT_CONFIRMED)
            return end_change(j, i, id, previous, r, by_request, msg, "see 'hcctl node show'", err);
    }
    j->cur[i] = j->mtu;
    change_set(j, i, "confirmed", previous, id);
    mtu_event(j, i, previous, j->mtu, "confirmed");
    snprintf(detail, len, "%s %d -> %d, verified against %zu node(s), confirmed", n->iface,
             previous, j->mtu, j->chk.nnodes - 1);
    return 0;
}

/* Sets the nodes this operation confirmed back to their previous MTU (last changed first).
 * Appends what could not be undone to note. */
static void rollback(struct mtu_job *j, char *note, size_t len)
{
    size_t done = 0;
    note[0] = '\0';
    for (size_t k = j->chk.nnodes; k-- > 0;) {
        const struct hc_net_node *n = &j->chk.nodes[k];
        const json_t *ch = change_of(j, n->name);
        int previous = (int)hc_json_int(ch, "previous_mtu", 0);
        struct hc_error e = {0};
        long status;
        if (strcmp(hc_json_str(ch, "state", ""), "confirmed") != 0 || previous <= 0)
            continue;
        json_t *body = json_pack("{s:s, s:i, s:I}", "interface", n->iface, "mtu", previous,
                                 "revert_after_ms", (json_int_t)j->confirm_ms);
        hc_op_waiting(j->ctx, "%s to set %s back to MTU %d", n->name, n->iface, previous);
        json_t *r = agent_do(j->client, n, "POST", "/v1/net/mtu", body, j->call_ms, &status, &e);
        json_decref(body);
        if (r && confirm(j, k, hc_json_str(r, "change_id", ""), &status, &e) == 0) {
            change_set(j, k, "rolled_back", 0, NULL);
            mtu_event(j, k, j->mtu, previous, "set back by the controller");
            size_t l = strlen(note);
            snprintf(note + l, len - l, "%s%s",
                     done++ ? ", " : "; set back to the old MTU: ", n->name);
        } else {
            size_t l = strlen(note);
            snprintf(note + l, len - l, "; %s could NOT be set back to %d: %s", n->name, previous,
                     e.message);
        }
        json_decref(r);
    }
}

static int job_state(struct mtu_job *j, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(j->db, err, "SELECT result_json FROM operations WHERE id = ?",
                                    "s", hc_op_id(j->ctx));
    if (!rows)
        return -1;
    json_t *prev = json_object_get(json_array_get(rows, 0), "result_json");
    j->state = json_is_object(prev) ? json_incref(prev) : json_object();
    json_decref(rows);
    if (!json_is_object(json_object_get(j->state, "changes")))
        json_object_set_new(j->state, "changes", json_object());
    json_object_set_new(j->state, "mtu", json_integer(j->mtu));
    json_object_set_new(j->state, "confirm_timeout_ms", json_integer(j->confirm_ms));
    return 0;
}

/* Every node must be reachable with a known storage interface and address before any changes. */
static int preflight(struct mtu_job *j, struct hc_error *err)
{
    if (j->chk.nnodes == 0)
        return hc_error_set(err, HC_E(PRECONDITION_FAILED), "the cluster has no nodes");
    for (size_t i = 0; i < j->chk.nnodes; i++) {
        const struct hc_net_node *n = &j->chk.nodes[i];
        if (n->agent_ok == 0) {
            hc_error_set(err, HC_E(PRECONDITION_FAILED),
                         "cannot change the MTU: the agent on "
                         "%s did not answer (%s)",
                         n->name, n->agent_error);
            return hc_error_hint(err,
                                 "bring it back or remove the node first ('hcctl node "
                                 "show %s')",
                                 n->name);
        }
        const char *why = !n->iface[0]   ? "has no storage interface on record"
                          : !n->state[0] ? "did not report its storage interface"
                          : !n->addr[0]  ? "has no storage address"
                                         : NULL;
        if (why) {
            hc_error_set(err, HC_E(PRECONDITION_FAILED), "cannot change the MTU: %s %s", n->name,
                         why);
            return hc_error_hint(err, "see 'hcctl net show'; every node must answer first");
        }
        j->cur[i] = n->mtu;
    }
    return 0;
}

static int job_init(struct mtu_job *j, struct hc_error *err)
{
    const json_t *p = hc_op_params(j->ctx);
    j->db = hc_op_db(j->ctx);
    j->mtu = (int)hc_json_int(p, "mtu", 0);
    j->confirm_ms = hc_json_int(p, "confirm_timeout_ms", MTU_DEFAULT_CONFIRM_MS);
    j->call_ms = hc_agent_timeout_ms(hc_op_controller(j->ctx));
    if (j->mtu < HC_MTU_MIN || j->mtu > HC_MTU_MAX)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid MTU %d", j->mtu);
    if (!(j->client = hc_agent_client_new(hc_op_controller(j->ctx), hc_op_db(j->ctx), err)) ||
        hc_net_gather(j->db, NULL, &j->chk, err) < 0 || job_state(j, err) < 0)
        return -1;
    if (!(j->cur = calloc(j->chk.nnodes + 1, sizeof(*j->cur))))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    hc_op_waiting(j->ctx, "the agents to report their interfaces");
    hc_net_probe(j->client, &j->chk, 1); /* no pairs: only the fresh interfaces */
    return preflight(j, err);
}

static int set_cluster_mtu(struct mtu_job *j, struct hc_error *err)
{
    struct hc_controller *ctl = hc_op_controller(j->ctx);
    if (hc_db_begin(j->db, err) < 0)
        return -1;
    if (hc_db_run(j->db, err, "UPDATE clusters SET mtu = ? WHERE id = ?", "is", (int64_t)j->mtu,
                  ctl->cluster_id) < 0 ||
        hc_event_add(j->db, "net.mtu", NULL, hc_op_id(j->ctx), "controller",
                     json_pack("{s:i}", "mtu", j->mtu), err,
                     "cluster MTU set to %d on %zu "
                     "node(s)",
                     j->mtu, j->chk.nnodes) < 0 ||
        hc_db_commit(j->db, err) < 0) {
        hc_db_rollback(j->db);
        return -1;
    }
    return 0;
}

/* Nodes already at the MTU are left alone, but not unproven: before anything changes, every
 * directed pair among them is probed at the MTU (the pairs that touch a node that changes are
 * probed by that node's verification). A path that does not carry the MTU fails the operation
 * with the check's first finding, while nothing has changed yet. The check is stored in the
 * result ("unchanged_check"). */
static int step_verify_unchanged(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                                 struct hc_error *err)
{
    struct mtu_job *j = arg;
    struct hc_net_check v = {.mtu = j->mtu, .mtu_source = "option", .search = 1};
    struct hc_error ignored = {0};
    const json_t *f, *first = NULL;
    json_t *doc = NULL;
    size_t k;
    int rc = -1;
    if (!(v.nodes = calloc(j->chk.nnodes + 1, sizeof(*v.nodes))))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t i = 0; i < j->chk.nnodes; i++)
        if (j->cur[i] == j->mtu)
            v.nodes[v.nnodes++] = j->chk.nodes[i];
    if (v.nnodes < 2) {
        snprintf(detail, len, "%zu node(s) already at MTU %d: no pair among them", v.nnodes,
                 j->mtu);
        rc = 0;
        goto cleanup;
    }
    if (hc_net_all_pairs(&v, err) < 0)
        goto cleanup;
    hc_op_waiting(ctx, "the %zu nodes already at MTU %d to pass probes among themselves", v.nnodes,
                  j->mtu);
    hc_net_probe(j->client, &v, 0);
    doc = hc_net_result_json(&v);
    json_object_set(j->state, "unchanged_check", doc);
    hc_ops_store_result(j->db, hc_op_id(ctx), j->state, &ignored);
    json_array_foreach(json_object_get(doc, "findings"), k, f)
    {
        if (!first && strcmp(hc_json_str(f, "severity", ""), "error") == 0)
            first = f;
    }
    if (hc_json_bool(doc, "passed", 0)) {
        snprintf(detail, len, "%zu node(s) already at MTU %d: %zu pairs among them pass", v.nnodes,
                 j->mtu, v.npairs);
        rc = 0;
        goto cleanup;
    }
    hc_error_set(err, HC_E(MTU_CHANGE_FAILED),
                 "MTU %d does not pass between the nodes already "
                 "at it: %s; nothing was changed",
                 j->mtu, first ? hc_json_str(first, "message", "") : "some pairs fail");
    hc_error_hint(err, "%s", first ? hc_json_str(first, "fix", "") : "see 'hcctl net check-jumbo'");
cleanup:
    json_decref(doc);
    hc_net_check_clear(&v);
    return rc;
}

/* A failed step: the nodes already changed go back, and the error is recorded. */
static enum hc_op_result set_mtu_failed(struct mtu_job *j, struct hc_error *err)
{
    char note[1024];
    struct hc_error e = *err;
    rollback(j, note, sizeof(note));
    hc_error_set_wire(err, e.status, e.code, "%s%s", e.message, note);
    if (e.hint[0])
        hc_error_hint(err, "%s", e.hint);
    json_object_set_new(j->state, "error",
                        json_pack("{s:s, s:s, s:s}", "code", err->code, "message", err->message,
                                  "hint", err->hint));
    hc_ops_store_result(j->db, hc_op_id(j->ctx), j->state, &e);
    return HC_OP_FAILED;
}

static enum hc_op_result set_mtu_nodes(struct mtu_job *j, struct hc_error *err)
{
    char note[1024];
    size_t unchanged = 0;
    for (size_t i = 0; i < j->chk.nnodes; i++)
        unchanged += j->cur[i] == j->mtu;
    if (unchanged >= 2 &&
        hc_op_step(j->ctx, NULL, "verify_unchanged", step_verify_unchanged, j, err) < 0)
        return set_mtu_failed(j, err);
    for (size_t i = 0; i < j->chk.nnodes; i++) {
        enum hc_op_result cp = hc_op_checkpoint(j->ctx);
        struct mtu_step s = {j, i};
        if (cp == HC_OP_ABORTED)
            rollback(j, note, sizeof(note)); /* abort: back to the old MTU everywhere */
        if (cp != HC_OP_SUCCEEDED)
            return cp;
        if (hc_op_step(j->ctx, j->chk.nodes[i].name, "set_mtu", step_set_mtu, &s, err) < 0)
            return set_mtu_failed(j, err);
    }
    return HC_OP_SUCCEEDED;
}

static enum hc_op_result set_mtu_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    struct mtu_job j = {.ctx = ctx};
    enum hc_op_result r = HC_OP_FAILED;
    if (job_init(&j, err) < 0)
        goto cleanup;
    r = set_mtu_nodes(&j, err);
    if (r == HC_OP_SUCCEEDED && set_cluster_mtu(&j, err) < 0)
        r = HC_OP_FAILED;
    if (r == HC_OP_SUCCEEDED) {
        json_object_set_new(j.state, "cluster_mtu", json_integer(j.mtu));
        hc_ops_store_result(j.db, hc_op_id(ctx), j.state, err);
    }
cleanup:
    hc_op_waiting(ctx, NULL);
    hc_net_check_clear(&j.chk);
    free(j.cur);
    json_decref(j.state);
    hc_http_client_free(j.client);
    return r;
}

/* --- net.bench ------------------------------------------------------------------------------ */

int hc_net_bench_stalled(double bits_per_second, long long retransmits, int mtu, int seconds,
                         char *why, size_t len)
{
    char passed[160], retr[48] = "";
    double segments = bits_per_second * seconds / 8 / (mtu > 100 ? mtu - 40 : 1460);
    double lost = retransmits > 0 ? retransmits / (segments + (double)retransmits) : 0;
    why[0] = '\0';
    if (retransmits >= 0)
        snprintf(retr, sizeof(retr), ", %lld retransmits", retransmits);
    if (bits_per_second <= 0)
        snprintf(passed, sizeof(passed), "no data passed in %d s (0 bit/s%s)", seconds, retr);
    else if (bits_per_second < HC_NET_BENCH_MIN_BPS)
        snprintf(passed, sizeof(passed), "almost no data passed in %d s (%.0f kbit/s%s)", seconds,
                 bits_per_second / 1e3, retr);
    else if (retransmits >= HC_NET_BENCH_MIN_LOST && lost >= HC_NET_BENCH_MAX_LOSS)
        snprintf(passed, sizeof(passed),
                 "only %.1f Mbit/s passed in %d s, with %lld retransmits "
                 "(~%.0f%% of the segments)",
                 bits_per_second / 1e6, seconds, retransmits, lost * 100);
    else
        return 0;
    snprintf(why, len,
             "%s: full-size segments vanish on the path (an MTU blackhole?): check "
             "'hcctl net check-jumbo'",
             passed);
    return 1;
}

/* One iperf run from node a to node b; a new pair object (with "error" when it failed). */
static json_t *bench_pair(struct hc_op_ctx *ctx, struct hc_http_client *client,
                          const struct hc_net_node *a, const struct hc_net_node *b, int seconds)
{
    struct hc_error err = {0};
    long status, timeout = seconds * 1000L + BENCH_GRACE_MS;
    json_t *out = json_pack("{s:s, s:s, s:s, s:i}", "from", a->name, "to", b->name, "address",
                            b->addr, "duration_s", seconds);
    json_t *sbody = json_pack("{s:i}", "duration_s", seconds), *cbody = NULL, *r = NULL;
    hc_op_waiting(ctx, "iperf from %s to %s (%d s)", a->name, b->name, seconds);
    json_t *srv =
        agent_do(client, b, "POST", "/v1/net/bench/server", sbody, timeout, &status, &err);
    if (srv) {
        cbody = json_pack("{s:s, s:I, s:i}", "address", b->addr, "port",
                          (json_int_t)hc_json_int(srv, "port", 0), "duration_s", seconds);
        r = agent_do(client, a, "POST", "/v1/net/bench/client", cbody, timeout, &status, &err);
    }
    if (r) {
        const json_t *bps = json_object_get(r, "bits_per_second");
        double v = json_is_number(bps) ? json_number_value(bps) : 0;
        json_int_t retr = hc_json_int(r, "retransmits", 0);
        char why[256];
        json_object_set_new(out, "bits_per_second", json_real(v));
        json_object_set_new(out, "gbit_per_second", json_real(v / 1e9));
        json_object_set_new(out, "retransmits", json_integer(retr));
        json_object_set_new(out, "mtu", json_integer(hc_json_int(r, "mtu", a->mtu)));
        /* Measured, but (almost) nothing passed: a problem of the path, not a slow one. */
        if (hc_net_bench_stalled(v, (long long)retr, (int)hc_json_int(r, "mtu", a->mtu), seconds,
                                 why, sizeof(why)))
            json_object_set_new(out, "error", json_string(why));
    } else {
        json_object_set_new(out, "error", json_string(err.message));
    }
    json_decref(sbody);
    json_decref(cbody);
    json_decref(srv);
    json_decref(r);
    return out;
}

static enum hc_op_result bench_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx), *names = json_object_get(p, "nodes");
    int seconds = (int)hc_json_int(p, "duration_s", BENCH_DEFAULT_S);
    struct hc_net_check c = {0};
    struct hc_http_client *client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err);
    enum hc_op_result r = HC_OP_FAILED;
    json_t *pairs = json_array();
    if (!client || hc_net_gather(hc_op_db(ctx), json_is_array(names) ? names : NULL, &c, err) < 0)
        goto cleanup;
    if (c.nnodes < 2) {
        hc_error_set(err, HC_E(PRECONDITION_FAILED), "a benchmark needs two nodes, not %zu",
                     c.nnodes);
        goto cleanup;
    }
    /* Two nodes: both directions; more: a ring, so each node sends once and receives once. */
    size_t runs = c.nnodes == 2 ? 2 : c.nnodes;
    enum hc_op_result cp = HC_OP_SUCCEEDED;
    for (size_t i = 0; i < runs && (cp = hc_op_checkpoint(ctx)) == HC_OP_SUCCEEDED; i++)
        json_array_append_new(
            pairs, bench_pair(ctx, client, &c.nodes[i], &c.nodes[(i + 1) % c.nnodes], seconds));
    json_t *doc = json_pack("{s:i, s:O}", "duration_s", seconds, "pairs", pairs);
    r = hc_ops_store_result(hc_op_db(ctx), hc_op_id(ctx), doc, err) == 0 ? cp : HC_OP_FAILED;
    json_decref(doc);
cleanup:
    hc_op_waiting(ctx, NULL);
    json_decref(pairs);
    hc_net_check_clear(&c);
    hc_http_client_free(client);
    return r;
}

const struct hc_op_kind hc_op_kind_net_check = {"net.check", 0, net_check_run};
const struct hc_op_kind hc_op_kind_net_set_mtu = {"net.set_mtu", 1, set_mtu_run};
const struct hc_op_kind hc_op_kind_net_bench = {"net.bench", 0, bench_run};
