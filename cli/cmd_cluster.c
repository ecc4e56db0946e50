/*
 * `hcctl cluster`: the cluster at a glance (status), its pre-flight checks (check), its settings
 * (show) and one-time join tokens for new nodes.
 */
#include <stdio.h>
#include <string.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/check_ids.h"
#include "common/json_util.h"

/* The controller's limit on a join token's life (JOIN_TTL_MAX_S in controller/api/res_enroll.c):
 * checked here too, so that a typo is a usage error naming the limit rather than a 400. */
#define JOIN_TTL_MAX "7d"
#define JOIN_TTL_MAX_MS (7 * 24 * 3600 * 1000LL)

static int cmd_join_token(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    int64_t ttl_ms = hc_cmd_opt_ms(ctx, "ttl");
    if (ttl_ms < 1000)
        return hc_cmd_usage(ctx, "for example --ttl 30m", "--ttl must be at least 1s");
    if (ttl_ms > JOIN_TTL_MAX_MS)
        return hc_cmd_usage(ctx, "for example --ttl 1d; a new token can be created at any time",
                            "--ttl must be at most " JOIN_TTL_MAX " (the controller's limit)");
    json_t *body =
        json_pack("{s:I, s:s?, s:s?}", "ttl_seconds", (json_int_t)(ttl_ms / 1000), "address",
                  hc_cmd_opt_str(ctx, "address"), "name", hc_cmd_opt_str(ctx, "name"));
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/join-tokens", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
    } else {
        /* The token alone on stdout, so that TOKEN=$(hcctl cluster join-token) works. */
        fprintf(ctx->out.out, "%s\n", json_string_value(json_object_get(doc, "token")));
        hc_output_info(&ctx->out,
                       "join token '%s' expires at %s; use it once, on the new node: "
                       "HCAGENT_TOKEN=... hcagent join --controller URL --data-dir DIR",
                       hc_json_str(doc, "id", "?"), hc_json_str(doc, "expires_at", "?"));
    }
    json_decref(doc);
    return HC_EXIT_OK;
}

/* "agent n3, 2027-12-07T10:00:00Z (in 364 days)": the certificate that ends first, in yellow
 * within 30 days and red once ended. */
static void fmt_cert_earliest(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                              enum hc_color *color)
{
    (void)o;
    *color = HC_COLOR_NONE;
    if (!json_is_object(v)) {
        snprintf(buf, len, "-");
        return;
    }
    int64_t left = hc_json_int(v, "seconds_left", 0);
    char in[64];
    if (left <= 0)
        snprintf(in, sizeof(in), "expired");
    else if (left >= 86400)
        snprintf(in, sizeof(in), "in %lld days", (long long)(left / 86400));
    else
        snprintf(in, sizeof(in), "in %lld s", (long long)left);
    const char *node = hc_json_str(v, "node", NULL);
    snprintf(buf, len, "%s%s%s, %s (%s)", hc_json_str(v, "certificate", "?"), node ? " " : "",
             node ? node : "", hc_json_str(v, "not_after", "?"), in);
    *color = left <= 0 ? HC_COLOR_RED : left < 30 * 86400 ? HC_COLOR_YELLOW : HC_COLOR_NONE;
}

/* "3 valid, 1 renewing, 0 expiring, 0 expired": the agents' certificates. */
static void fmt_agent_certs(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                            enum hc_color *color)
{
    (void)o;
    long long expired = (long long)hc_json_int(v, "expired", 0);
    long long expiring = (long long)hc_json_int(v, "expiring", 0);
    snprintf(buf, len, "%lld valid, %lld renewing, %lld expiring, %lld expired",
             (long long)hc_json_int(v, "valid", 0), (long long)hc_json_int(v, "renewing", 0),
             expiring, expired);
    *color = expired ? HC_COLOR_RED : expiring ? HC_COLOR_YELLOW : HC_COLOR_NONE;
}

static const struct hc_col status_fields[] = {
    {"Cluster", "cluster.name", NULL},
    {"ID", "cluster.id", NULL},
    {"MTU", "cluster.mtu", NULL},
    {"Created", "cluster.created_at", hc_fmt_time},
    {"Nodes", "nodes.total", NULL},
    {"Reachable", "nodes.reachable", NULL},
    {"Unreachable", "nodes.unreachable", NULL},
    {"Unknown", "nodes.unknown", NULL},
    {"Controller", "controller.version", NULL},
    {"Uptime", "controller.uptime_seconds", hc_fmt_seconds},
    {"Poll interval", "controller.poll_interval_ms", hc_fmt_ms},
    {"First cert to end", "certificates.earliest", fmt_cert_earliest},
    {"Agent certs", "certificates.agents", fmt_agent_certs},
    {NULL, NULL, NULL},
};

static const struct hc_col active_cols[] = {
    {"ID", "id", NULL},
    {"KIND", "kind", NULL},
    {"STATE", "state", hc_fmt_state},
    {"WAITING ON", "waiting_on", NULL},
    {"CREATED", "created_at", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section status_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, status_fields},
    {HC_SECTION_TABLE, "Active operations", "operations.active", active_cols},
    {0, NULL, NULL, NULL},
};

/* "c2 https://10.0.0.2:7443 (term 7)": the leader object of GET /v1/ha, or "none" (an
 * election). */
static void fmt_leader(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                       enum hc_color *color)
{
    *color = json_is_object(v) ? HC_COLOR_NONE : HC_COLOR_YELLOW;
    if (!json_is_object(v)) {
        snprintf(buf, len, "none (an election is under way)");
        return;
    }
    snprintf(buf, len, "%s %s (term %lld)", hc_json_str(v, "name", "?"), hc_json_str(v, "url", "?"),
             (long long)hc_json_int(v, "term", 0));
}

/* A controller's role: the leader in green, one that is not alive in red. */
static void fmt_role(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                     enum hc_color *color)
{
    hc_fmt_text(o, v, buf, len, color);
    if (json_is_string(v) && strcmp(json_string_value(v), "leader") == 0)
        *color = HC_COLOR_GREEN;
}

static void fmt_yes_red(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                        enum hc_color *color)
{
    hc_fmt_text(o, v, buf, len, color);
    *color = json_is_true(v) ? HC_COLOR_NONE : HC_COLOR_RED;
}

static const struct hc_col ha_fields[] = {
    {"HA role", "role", NULL},
    {"This controller", "name", NULL},
    {"Leader", "leader", fmt_leader},
    {NULL, NULL, NULL},
};

static const struct hc_col member_cols[] = {
    {"NAME", "name", NULL},          {"URL", "url", NULL}, {"ROLE", "role", fmt_role},
    {"ALIVE", "alive", fmt_yes_red}, {NULL, NULL, NULL},
};

static const struct hc_col etcd_cols[] = {
    {"ENDPOINT", "endpoint", NULL}, {"HEALTHY", "healthy", fmt_yes_red},
    {"LEADER", "leader", NULL},     {"RAFT TERM", "raft_term", NULL},
    {"DB SIZE", "db_size", NULL},   {"VERSION", "version", NULL},
    {"ERROR", "error", NULL},       {NULL, NULL, NULL},
};

/* The HA part, after the cluster's: the controllers and etcd when there are any. */
static void render_ha(struct hc_cmd_ctx *ctx, const json_t *ha)
{
    const struct hc_section fields[] = {{HC_SECTION_FIELDS, "High availability", NULL, ha_fields},
                                        {0, NULL, NULL, NULL}};
    const struct hc_section members[] = {{HC_SECTION_TABLE, "Controllers", "members", member_cols},
                                         {0, NULL, NULL, NULL}};
    const struct hc_section etcd[] = {{HC_SECTION_TABLE, "etcd", "etcd", etcd_cols},
                                      {0, NULL, NULL, NULL}};
    if (!json_is_object(ha))
        return;
    fputc('\n', ctx->out.out);
    hc_output_render(&ctx->out, fields, ha);
    if (json_array_size(json_object_get(ha, "members")) > 0) {
        fputc('\n', ctx->out.out);
        hc_output_render(&ctx->out, members, ha);
    }
    if (json_array_size(json_object_get(ha, "etcd")) > 0) {
        fputc('\n', ctx->out.out);
        hc_output_render(&ctx->out, etcd, ha);
    }
}

/* GET /v1/cluster and GET /v1/ha ("ha": null from a controller without HA, which answers 404
 * there). The cluster is asked first: the leader search then starts from the leader, and
 * /v1/ha is answered by whichever controller answers (every one does, standbys too). */
static int cmd_status(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    long status = 0;
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/cluster", NULL, &err);
    json_t *ha = doc ? hc_api_client_call(ctx->api, "GET", "/v1/ha", NULL, &status, &err) : NULL;
    if (doc && !ha && status != 404) {
        json_decref(doc);
        return hc_cmd_fail(ctx, &err, NULL);
    }
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    json_object_set_new(doc, "ha", ha ? ha : json_null());
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
    } else {
        hc_output_render(&ctx->out, status_view, doc);
        render_ha(ctx, ha);
    }
    json_decref(doc);
    return HC_EXIT_OK;
}

static const char *const check_ids[] = {
#define X(id) #id,
    HC_CHECK_IDS
#undef X
};

static int check_id_known(const char *id, size_t len)
{
    for (size_t i = 0; i < sizeof(check_ids) / sizeof(check_ids[0]); i++)
        if (strlen(check_ids[i]) == len && strncmp(check_ids[i], id, len) == 0)
            return 1;
    return 0;
}

int hc_cmd_skip_checks(struct hc_cmd_ctx *ctx, json_t *body)
{
    const char *list = hc_cmd_opt_str(ctx, "skip-checks"), *p = list;
    if (!list)
        return HC_EXIT_OK;
    json_t *ids = json_array();
    for (;;) {
        size_t len = strcspn(p, ",");
        if (!check_id_known(p, len)) {
            json_decref(ids);
            return hc_cmd_usage(ctx, "the ids are those of 'hcctl cluster check -o json'",
                                "--skip-checks: unknown check '%.*s'", (int)(len > 64 ? 64 : len),
                                p);
        }
        json_array_append_new(ids, json_stringn(p, len));
        if (!p[len])
            break;
        p += len + 1;
    }
    json_object_set_new(body, "skip_checks", ids);
    return HC_EXIT_OK;
}

int hc_cmd_batch(struct hc_cmd_ctx *ctx, json_t *body)
{
    const char *batch = hc_cmd_opt_str(ctx, "batch");
    if (!batch)
        return HC_EXIT_OK;
    if (strcmp(batch, "node") != 0 && strcmp(batch, "domain") != 0)
        return hc_cmd_usage(ctx,
                            "node (one node, or --max-unavailable nodes, at a time) or "
                            "domain (whole failure domains)",
                            "invalid --batch '%.40s'", batch);
    json_object_set_new(body, "batch", json_string(batch));
    return HC_EXIT_OK;
}

void hc_cmd_checks_render(struct hc_cmd_ctx *ctx, const json_t *report)
{
    const json_t *c, *sum = json_object_get(report, "summary");
    size_t i;
    json_array_foreach(json_object_get(report, "checks"), i, c)
    {
        const char *sev = hc_json_str(c, "severity", "?"), *node = hc_json_str(c, "node", NULL);
        const char *remedy = hc_json_str(c, "remedy", "");
        if (strcmp(sev, "ok") == 0)
            continue;
        fprintf(ctx->out.out, "%-7s %-17s %s%s%s%s%s\n", sev, hc_json_str(c, "id", "?"),
                node ? node : "", node ? ": " : "", hc_json_str(c, "message", ""),
                remedy[0] ? " -- " : "", remedy);
    }
    fprintf(ctx->out.out, "%lld ok, %lld warning, %lld error, %lld unknown\n",
            (long long)hc_json_int(sum, "ok", 0), (long long)hc_json_int(sum, "warning", 0),
            (long long)hc_json_int(sum, "error", 0), (long long)hc_json_int(sum, "unknown", 0));
}

/* GET /v1/checks. Exit 4 when anything is at warning or worse, unknown included: what could not
 * be checked is not known to be fine (docs/hcctl.md "cluster check"). */
static int cmd_check(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/checks", NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    const json_t *sum = json_object_get(doc, "summary");
    int problems = hc_json_int(sum, "warning", 0) + hc_json_int(sum, "error", 0) +
                       hc_json_int(sum, "unknown", 0) >
                   0;
    if (ctx->out.json)
        hc_output_json(&ctx->out, doc);
    else
        hc_cmd_checks_render(ctx, doc);
    json_decref(doc);
    return problems ? HC_EXIT_CHECK : HC_EXIT_OK;
}

/* "3 (2 reachable, 1 unreachable, 0 unknown)" from the node counts object. */
static void fmt_node_counts(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                            enum hc_color *color)
{
    if (!json_is_object(v)) {
        hc_fmt_text(o, v, buf, len, color);
        return;
    }
    *color = HC_COLOR_NONE;
    snprintf(buf, len, "%lld (%lld reachable, %lld unreachable, %lld unknown)",
             (long long)hc_json_int(v, "total", 0), (long long)hc_json_int(v, "reachable", 0),
             (long long)hc_json_int(v, "unreachable", 0), (long long)hc_json_int(v, "unknown", 0));
}

static const struct hc_col show_fields[] = {
    {"Name", "cluster.name", NULL},
    {"ID", "cluster.id", NULL},
    {"MTU", "cluster.mtu", NULL},
    {"Created", "cluster.created_at", hc_fmt_time},
    {"Controller", "controller.url", NULL},
    {"Controller version", "controller.version", NULL},
    {"CA fingerprint", "controller.ca_fingerprint", NULL},
    {"Nodes", "nodes", fmt_node_counts},
    {NULL, NULL, NULL},
};

static const struct hc_section show_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, show_fields},
    {0, NULL, NULL, NULL},
};

/* The settings of the cluster, from what the API has: GET /v1/cluster (the cluster row, node
 * counts, the controller's version), GET /v1/ca (the fingerprint joining agents pin) and the
 * URL this client reached the controller at. No per-cluster storage interface exists (it is
 * chosen per node), so none is shown. */
static json_t *show_document(struct hc_cmd_ctx *ctx, struct hc_error *err)
{
    json_t *cl = hc_cmd_request(ctx, "GET", "/v1/cluster", NULL, err);
    json_t *ca = cl ? hc_cmd_request(ctx, "GET", "/v1/ca", NULL, err) : NULL;
    json_t *doc = NULL;
    if (ca) {
        json_t *controller = json_pack("{s:s, s:O, s:O}", "url", hc_api_client_url(ctx->api),
                                       "version", hc_output_lookup(cl, "controller.version"),
                                       "ca_fingerprint", json_object_get(ca, "ca_fingerprint"));
        doc = json_pack("{s:O, s:o, s:O}", "cluster", json_object_get(cl, "cluster"), "controller",
                        controller, "nodes", json_object_get(cl, "nodes"));
    }
    if (ca && !doc)
        hc_error_set(err, HC_E(INVALID_JSON), "GET /v1/cluster: unexpected answer");
    json_decref(cl);
    json_decref(ca);
    return doc;
}

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    json_t *doc = show_document(ctx, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    hc_output_render(&ctx->out, show_view, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

static int cmd_create(struct hc_cmd_ctx *ctx)
{
    size_t n;
    const char *const *nodes = hc_cmd_opt_list(ctx, "node", &n);
    return hc_cmd_bootstrap(ctx, ctx->argv[0], nodes, n);
}

static const struct hc_cmd_opt create_opts[] = {
    HC_OPT(.name = "node", .type = HC_OPT_LIST, .required = 1,
           .help = "a host to bring in over SSH (repeat for each node)",
           .value_name = "[USER@]HOST[:PORT]"),
    HC_BOOTSTRAP_OPTS,
    {.name = NULL},
};

static const struct hc_cmd_opt join_token_opts[] = {
    HC_OPT(.name = "ttl", .type = HC_OPT_DURATION,
           .help = "how long the token stays valid (1s to " JOIN_TTL_MAX ")", .value_name = "DUR",
           .def = "1h"),
    HC_OPT(.name = "address", .type = HC_OPT_STRING,
           .help = "the address the node's certificate will name (default: the address the join "
                   "comes from, "
                   "e.g. behind NAT give the agent's own)",
           .value_name = "ADDR"),
    HC_OPT(.name = "name", .type = HC_OPT_STRING, .help = "the only node name the token may enroll",
           .value_name = "NODE"),
    {.name = NULL},
};

static const struct hc_cmd_verb cluster_verbs[] = {
    HC_VERB(.name = "create", .handler = cmd_create, .opts = create_opts, .min_args = 1,
            .max_args = 1,
            .summary = "name the cluster and bring its first nodes in over SSH (agents pushed and "
                       "enrolled)",
            .usage = "NAME"),
    HC_VERB(.name = "join-token", .handler = cmd_join_token, .opts = join_token_opts,
            .summary = "create a one-time token with which a new node joins (hcagent join)"),
    HC_VERB(.name = "status", .handler = cmd_status,
            .summary =
                "show the cluster, node health counts, active operations and the controller"),
    HC_VERB(.name = "check", .handler = cmd_check,
            .summary = "run the pre-flight checks (exit 4 when any is at warning, error or "
                       "unknown)"),
    HC_VERB(.name = "show", .handler = cmd_show,
            .summary = "show the cluster's settings: name, id, MTU, created, controller URL, CA "
                       "fingerprint, nodes"),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_cluster = {
    .name = "cluster",
    .summary = "the cluster as a whole: create, status, settings and join tokens",
    .verbs = cluster_verbs,
};
