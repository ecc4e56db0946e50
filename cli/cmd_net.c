/*
 * `hcctl net`: the storage network (docs/net.md).
 *
 *   show                      per node: storage interface, MTU, state, addresses, the bridge or
 *                             bond it hangs on; values that differ from the cluster MTU stand out
 *   check-jumbo [--mtu N] [--nodes A,B,...]
 *                             every directed pair probed at the MTU: pair matrix and findings;
 *                             exit 0 when all pass, 4 when anything fails; --nodes names two
 *                             or more (one node has no pair to prove: exit 2)
 *   set-mtu MTU [--confirm-timeout DUR]
 *                             disruptive: node by node, commit-confirmed (the agent reverts by
 *                             itself unless the controller confirms after re-probing)
 *   bench [--nodes A,B]       TCP throughput between pairs (iperf in the agents); exit 1 when a
 *                             pair could not be measured, 4 when one moved (almost) nothing
 *
 * check-jumbo and bench start an operation and wait for its stored result quietly; set-mtu
 * follows its operation like every disruptive command.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/constants.h"
#include "common/json_util.h"
#include "common/op_state.h"
#include "common/util.h"

/* Up to this many nodes the text output draws the pair matrix (17 columns of node names fill a
 * wide terminal); beyond, it lists the failing pairs instead, so that it never scrolls off into
 * a matrix nobody can read. -o json has every pair up to the controller's HC_NET_LIST_ALL_PAIRS
 * (65 nodes), beyond that the failing ones. */
#define MATRIX_MAX_NODES 16

/* --- helpers -------------------------------------------------------------------------------- */

/* --nodes A,B --nodes C -> ["A","B","C"], or NULL when not given. */
static json_t *nodes_option(struct hc_cmd_ctx *ctx)
{
    size_t n;
    const char *const *vals = hc_cmd_opt_list(ctx, "nodes", &n);
    if (n == 0)
        return NULL;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        char *copy = strdup(vals[i]), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (*t)
                json_array_append_new(list, json_string(t));
        free(copy);
    }
    return list;
}

/* POSTs body to path and waits for the operation's result (GET /v1/operations/ID/result, with
 * query appended when not NULL). Returns the final {"operation","result"} document, or NULL
 * after reporting (*rc set). */
static json_t *run_and_wait(struct hc_cmd_ctx *ctx, const char *path, const json_t *body,
                            const char *query, int64_t timeout_ms, int *rc)
{
    struct hc_error err = {0};
    char rpath[1024];
    json_t *doc = hc_cmd_request(ctx, "POST", path, body, &err);
    const char *id = hc_json_str(json_object_get(doc, "operation"), "id", NULL);
    int64_t started = hc_mono_ms(), deadline = started + timeout_ms, pause = 50;
    if (doc && (!id || hc_cmd_path(rpath, sizeof(rpath), "/v1/operations/", id) < 0))
        hc_error_set(&err, HC_E(INTERNAL), "the controller's answer names no operation");
    if (err.code[0])
        goto fail;
    strncat(rpath, "/result", sizeof(rpath) - strlen(rpath) - 1);
    if (query)
        strncat(rpath, query, sizeof(rpath) - strlen(rpath) - 1);
    for (;;) {
        json_t *res = hc_cmd_request(ctx, "GET", rpath, NULL, &err);
        if (!res)
            goto fail;
        if (hc_op_state_terminal(hc_json_str(json_object_get(res, "operation"), "state", ""))) {
            json_decref(doc);
            return res;
        }
        json_decref(res);
        if (hc_mono_ms() > deadline) {
            hc_error_set(&err, HC_E(TIMEOUT), "operation %s did not end within %lld ms", id,
                         (long long)timeout_ms);
            hc_error_hint(&err, "it goes on in the controller: 'hcctl operation wait %s'", id);
            goto fail;
        }
        /* A check usually ends within a few hundred ms: ask often at first, then back off. */
        hc_sleep_ms(pause);
        if (hc_mono_ms() > started + 2000)
            pause = pause * 2 > 500 ? 500 : pause * 2;
    }
fail:
    *rc = hc_cmd_fail(ctx, &err, NULL);
    json_decref(doc);
    return NULL;
}

/* A failed or aborted operation: its error, exit 1. */
static int op_failed(struct hc_cmd_ctx *ctx, const json_t *doc)
{
    const json_t *op = json_object_get(doc, "operation"), *oe = json_object_get(op, "error");
    struct hc_error err = {0};
    hc_error_set_wire(&err, 0, hc_json_str(oe, "code", "operation_failed"),
                      "operation %s (%s) %s: %s", hc_json_str(op, "id", "?"),
                      hc_json_str(op, "kind", "?"), hc_json_str(op, "state", "?"),
                      hc_json_str(oe, "message", "no reason given"));
    if (hc_json_str(oe, "hint", NULL))
        hc_error_hint(&err, "%s", hc_json_str(oe, "hint", ""));
    hc_cmd_fail(ctx, &err, NULL);
    return HC_EXIT_FAILED;
}

static void fmt_yes_no(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                       enum hc_color *color)
{
    snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
    *color = json_is_true(v) ? HC_COLOR_GREEN : HC_COLOR_RED;
}

/* A cell of "ok" green, "-" plain, anything else red. */
static void fmt_verdict(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                        enum hc_color *color)
{
    const char *s = json_string_value(v);
    snprintf(buf, len, "%s", s ? s : "-");
    *color = !s || !strcmp(s, "-") ? HC_COLOR_NONE
             : !strcmp(s, "ok")    ? HC_COLOR_GREEN
                                   : HC_COLOR_RED;
}

/* Text that flags itself: red when the row's display value ends with " !". */
static void fmt_flagged(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                        enum hc_color *color)
{
    hc_fmt_text(o, v, buf, len, color);
    size_t n = strlen(buf);
    *color = n > 2 && !strcmp(buf + n - 2, " !") ? HC_COLOR_RED : HC_COLOR_NONE;
}

/* "1500 (cluster 9000) !" when a value differs from the cluster MTU, else the value. */
static json_t *mtu_cell(const json_t *v, int ok, int mtu)
{
    char buf[64];
    if (!json_is_integer(v))
        return json_string("-");
    if (ok || mtu <= 0)
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, sizeof(buf), "%lld (cluster %d) !", (long long)json_integer_value(v), mtu);
    return json_string(buf);
}

/* --- net show ------------------------------------------------------------------------------- */

static const struct hc_col show_cols[] = {
    {"NODE", "name", NULL},
    {"HEALTH", "health", hc_fmt_health},
    {"INTERFACE", "interface", NULL},
    {"MTU", "mtu_text", fmt_flagged},
    {"STATE", "state", NULL},
    {"ADDRESSES", "addresses", NULL},
    {"ON", "master_text", fmt_flagged},
    {"PROBLEM", "problem", NULL},
    {NULL, NULL, NULL},
};

static json_t *show_row(const json_t *n, int mtu)
{
    json_t *row = json_deep_copy(n);
    const json_t *mm = json_object_get(n, "master_mtu"), *pm = json_object_get(n, "port_mtu");
    char on[160] = "-";
    int master_ok = !json_is_integer(mm) || mtu <= 0 || json_integer_value(mm) >= mtu;
    int port_ok = !json_is_integer(pm) || mtu <= 0 || json_integer_value(pm) >= mtu;
    json_object_set_new(row, "mtu_text",
                        mtu_cell(json_object_get(n, "mtu"),
                                 !json_is_false(json_object_get(n, "mtu_matches")), mtu));
    if (hc_json_str(n, "master", NULL))
        snprintf(on, sizeof(on), "%s mtu %lld%s", hc_json_str(n, "master", ""),
                 (long long)json_integer_value(mm), master_ok ? "" : " !");
    else if (hc_json_str(n, "port", NULL))
        snprintf(on, sizeof(on), "port %s mtu %lld%s", hc_json_str(n, "port", ""),
                 (long long)json_integer_value(pm), port_ok ? "" : " !");
    json_object_set_new(row, "master_text", json_string(on));
    return row;
}

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/net", NULL, &err), *rows;
    const json_t *n, *last;
    size_t i;
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
        json_decref(doc);
        return HC_EXIT_OK;
    }
    int mtu = (int)hc_json_int(doc, "mtu", 0);
    rows = json_array();
    json_array_foreach(json_object_get(doc, "nodes"), i, n)
    {
        json_array_append_new(rows, show_row(n, mtu));
    }
    if (mtu > 0)
        fprintf(ctx->out.out, "Cluster MTU: %d (payload %d bytes)\n\n", mtu, mtu - 28);
    else
        fprintf(ctx->out.out, "Cluster MTU: not set (hcctl net set-mtu MTU)\n\n");
    hc_output_table(&ctx->out, show_cols, rows, NULL, 1);
    last = json_object_get(doc, "last_check");
    if (json_is_object(last))
        fprintf(ctx->out.out, "\nLast check: %s at %s, MTU %lld: %s (%lld of %lld pairs fail)\n",
                hc_json_str(last, "operation_id", "?"), hc_json_str(last, "checked_at", "?"),
                (long long)hc_json_int(last, "mtu", 0),
                hc_json_bool(last, "passed", 0) ? "passed" : "FAILED",
                (long long)hc_json_int(json_object_get(last, "summary"), "pairs_failed", 0),
                (long long)hc_json_int(json_object_get(last, "summary"), "pairs", 0));
    json_decref(rows);
    json_decref(doc);
    return HC_EXIT_OK;
}

/* --- net check-jumbo ------------------------------------------------------------------------ */

static const struct hc_col check_node_cols[] = {
    {"NODE", "name", NULL},       {"INTERFACE", "interface", NULL},
    {"ADDRESS", "address", NULL}, {"MTU", "mtu_text", fmt_flagged},
    {"STATE", "state", NULL},     {"ON", "master", NULL},
    {"OK", "ok", fmt_yes_no},     {NULL, NULL, NULL},
};

/* "ok", "blackhole 1504", "frag_needed 1500", "unreachable", "not_probed". */
static void pair_cell(const json_t *p, char *buf, size_t len)
{
    const char *r = hc_json_str(p, "result", "?");
    int64_t pm = hc_json_int(p, "path_mtu", 0);
    if (strcmp(r, "ok") != 0 && pm > 0)
        snprintf(buf, len, "%s %lld", r, (long long)pm);
    else
        snprintf(buf, len, "%s", r);
}

static const struct hc_col failing_pair_cols[] = {
    {"FROM", "from", NULL},
    {"TO", "to", NULL},
    {"RESULT", "cell", NULL},
    {NULL, NULL, NULL},
};

/* Beyond MATRIX_MAX_NODES: the failing pairs as a list (all of them: they are what to fix, up to
 * the controller's cap). The counts come from the summary, which counts every pair, so a
 * document that lists only the failing pairs (--failures-only, or a large check) or only some
 * of them still tells how many there are. */
static void print_failing_pairs(struct hc_cmd_ctx *ctx, const json_t *res)
{
    const json_t *pairs = json_object_get(res, "pairs"), *p;
    const json_t *sum = json_object_get(res, "summary");
    json_t *rows = json_array();
    size_t i;
    json_array_foreach(pairs, i, p)
    {
        if (!strcmp(hc_json_str(p, "result", "ok"), "ok"))
            continue;
        char cell[64];
        pair_cell(p, cell, sizeof(cell));
        json_array_append_new(rows,
                              json_pack("{s:s, s:s, s:s}", "from", hc_json_str(p, "from", "?"),
                                        "to", hc_json_str(p, "to", "?"), "cell", cell));
    }
    size_t total = (size_t)hc_json_int(sum, "pairs", 0), listed = json_array_size(rows);
    size_t failed = (size_t)hc_json_int(sum, "pairs_failed", (json_int_t)listed);
    int every = !hc_json_bool(res, "failures_only", 0) &&
                strcmp(hc_json_str(res, "pairs_listed", "all"), "all") == 0;
    char more[96] = "";
    if (listed < failed)
        snprintf(more, sizeof(more), "; %zu listed, %zu left out", listed, failed - listed);
    const char *json_has =
        every ? "-o json has every pair" : "-o json lists the failing pairs and counts each node's";
    if (failed == 0)
        fprintf(ctx->out.out,
                "\nPairs: all %zu directed pairs passed (the matrix is drawn up to %d "
                "nodes; %s)\n",
                total, MATRIX_MAX_NODES, json_has);
    else {
        fprintf(ctx->out.out,
                "\nFailing pairs, %zu of %zu%s (the matrix is drawn up to %d nodes; %s):\n", failed,
                total, more, MATRIX_MAX_NODES, json_has);
        hc_output_table(&ctx->out, failing_pair_cols, rows, NULL, 1);
    }
    json_decref(rows);
}

/* The pair matrix: rows "from", columns "to", as a table with generated columns c0..cN; beyond
 * MATRIX_MAX_NODES the failing pairs instead. */
static void print_matrix(struct hc_cmd_ctx *ctx, const json_t *res)
{
    const json_t *nodes = json_object_get(res, "nodes"), *pairs = json_object_get(res, "pairs");
    size_t n = json_array_size(nodes), i, k;
    const json_t *p;
    if (n < 2)
        return;
    if (n > MATRIX_MAX_NODES || hc_json_bool(res, "failures_only", 0) ||
        strcmp(hc_json_str(res, "pairs_listed", "all"), "all") != 0) {
        print_failing_pairs(ctx, res);
        return;
    }
    struct hc_col *cols = calloc(n + 2, sizeof(*cols));
    char(*keys)[8] = calloc(n, sizeof(*keys));
    json_t *rows = json_array();
    cols[0] = (struct hc_col){"FROM \\ TO", "from", NULL};
    for (i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "c%zu", i);
        cols[i + 1] = (struct hc_col){hc_json_str(json_array_get(nodes, i), "name", "?"), keys[i],
                                      fmt_verdict};
    }
    for (i = 0; i < n; i++) {
        const char *from = hc_json_str(json_array_get(nodes, i), "name", "?");
        json_t *row = json_pack("{s:s}", "from", from);
        for (k = 0; k < n; k++)
            json_object_set_new(row, keys[k], json_string("-"));
        json_array_foreach(pairs, k, p)
        {
            if (strcmp(hc_json_str(p, "from", ""), from) != 0)
                continue;
            for (size_t t = 0; t < n; t++) {
                if (!strcmp(hc_json_str(json_array_get(nodes, t), "name", ""),
                            hc_json_str(p, "to", ""))) {
                    char cell[64];
                    pair_cell(p, cell, sizeof(cell));
                    json_object_set_new(row, keys[t], json_string(cell));
                }
            }
        }
        json_array_append_new(rows, row);
    }
    fprintf(ctx->out.out, "\nPairs (row: from, column: to; failures show the path MTU seen):\n");
    hc_output_table(&ctx->out, cols, rows, NULL, 1);
    json_decref(rows);
    free(keys);
    free(cols);
}

static void print_findings(struct hc_cmd_ctx *ctx, const json_t *findings)
{
    size_t i;
    const json_t *f;
    if (json_array_size(findings) == 0)
        return;
    fprintf(ctx->out.out, "\nFindings:\n");
    json_array_foreach(findings, i, f)
    {
        const char *scope = hc_json_str(f, "scope", "?");
        char who[160];
        if (!strcmp(scope, "node"))
            snprintf(who, sizeof(who), "node %s", hc_json_str(f, "node", "?"));
        else if (!strcmp(scope, "pair"))
            snprintf(who, sizeof(who), "pair %s/%s", hc_json_str(f, "from", "?"),
                     hc_json_str(f, "to", "?"));
        else
            snprintf(who, sizeof(who), "%s", scope);
        /* findings quote what agents reported (interface names): escaped like every cell */
        char *message = hc_output_sanitize(hc_json_str(f, "message", ""), 1);
        char *fix = hc_output_sanitize(hc_json_str(f, "fix", ""), 1);
        fprintf(ctx->out.out, "  %-7s %s: %s\n          fix: %s\n", hc_json_str(f, "severity", "?"),
                who, message ? message : "", fix ? fix : "");
        free(message);
        free(fix);
    }
}

static void print_check(struct hc_cmd_ctx *ctx, const json_t *res)
{
    const json_t *sum = json_object_get(res, "summary"), *n;
    int mtu = (int)hc_json_int(res, "mtu", 0);
    json_t *rows = json_array();
    size_t i;
    if (hc_json_int(sum, "pairs", 0) == 0)
        fprintf(ctx->out.out,
                "Jumbo frame check at MTU %d: %lld node(s), no pair of nodes to "
                "probe: nothing to check%s\n\n",
                mtu, (long long)hc_json_int(sum, "nodes", 0),
                hc_json_bool(res, "passed", 0) ? "" : " (FAILED: see the findings)");
    else
        fprintf(ctx->out.out,
                "Jumbo frame check at MTU %d (DF probes of %d bytes, payload %lld): "
                "%lld node(s), %lld directed pair(s), %lld failing: %s\n\n",
                mtu, mtu, (long long)hc_json_int(res, "payload_bytes", 0),
                (long long)hc_json_int(sum, "nodes", 0), (long long)hc_json_int(sum, "pairs", 0),
                (long long)hc_json_int(sum, "pairs_failed", 0),
                hc_json_bool(res, "passed", 0) ? "PASSED" : "FAILED");
    json_array_foreach(json_object_get(res, "nodes"), i, n)
    {
        json_t *row = json_deep_copy(n);
        int64_t m = hc_json_int(n, "mtu", 0);
        json_object_set_new(row, "mtu_text", mtu_cell(json_object_get(n, "mtu"), m == mtu, mtu));
        json_array_append_new(rows, row);
    }
    hc_output_table(&ctx->out, check_node_cols, rows, NULL, 1);
    json_decref(rows);
    print_matrix(ctx, res);
    print_findings(ctx, json_object_get(res, "findings"));
}

static int cmd_check(struct hc_cmd_ctx *ctx)
{
    int64_t mtu = hc_cmd_opt_int(ctx, "mtu");
    int rc = HC_EXIT_OK;
    if (hc_cmd_opt_set(ctx, "mtu") && (mtu < HC_MTU_MIN || mtu > HC_MTU_MAX))
        return hc_cmd_usage(ctx, "an MTU is 68 to 65535 bytes, e.g. 9000", "invalid --mtu %lld",
                            (long long)mtu);
    json_t *body = json_object(), *nodes = nodes_option(ctx);
    if (nodes && json_array_size(nodes) < 2) {
        /* One node has no pair to prove: passing it would be a vacuous "proof". */
        json_decref(nodes);
        json_decref(body);
        return hc_cmd_usage(ctx,
                            "a check proves pairs of nodes: e.g. --nodes n1,n2, or leave "
                            "--nodes out for every node",
                            "--nodes needs at least two nodes");
    }
    if (hc_cmd_opt_set(ctx, "mtu"))
        json_object_set_new(body, "mtu", json_integer(mtu));
    if (nodes)
        json_object_set_new(body, "nodes", nodes);
    json_t *doc = run_and_wait(ctx, "/v1/net/check", body,
                               hc_cmd_opt_bool(ctx, "failures-only") ? "?failures_only=1" : NULL,
                               hc_cmd_opt_ms(ctx, "timeout"), &rc);
    json_decref(body);
    if (!doc)
        return rc;
    const json_t *op = json_object_get(doc, "operation");
    json_t *res = json_object_get(doc, "result");
    if (strcmp(hc_json_str(op, "state", ""), "succeeded") != 0 || !json_is_object(res)) {
        rc = op_failed(ctx, doc);
    } else {
        json_object_set_new(res, "operation_id", json_string(hc_json_str(op, "id", "")));
        if (ctx->out.json)
            hc_output_json(&ctx->out, res);
        else
            print_check(ctx, res);
        rc = hc_json_bool(res, "passed", 0) ? HC_EXIT_OK : HC_EXIT_CHECK;
    }
    json_decref(doc);
    return rc;
}

/* --- net set-mtu ---------------------------------------------------------------------------- */

/* Strict: digits only, 68..65535. */
static int parse_mtu(const char *text, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || text[0] == '-' || text[0] == '+' || v < HC_MTU_MIN ||
        v > HC_MTU_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static const struct hc_col change_cols[] = {
    {"NODE", "node", NULL}, {"INTERFACE", "interface", NULL}, {"BEFORE", "previous_mtu", NULL},
    {"MTU", "mtu", NULL},   {"RESULT", "state", NULL},        {NULL, NULL, NULL},
};

/* After a successful set-mtu (text mode): what happened on each node. */
static void print_changes(struct hc_cmd_ctx *ctx, const char *id)
{
    char path[1024];
    struct hc_error err = {0};
    const char *key;
    json_t *ch, *rows = json_array();
    if (hc_cmd_path(path, sizeof(path), "/v1/operations/", id) < 0)
        return;
    strncat(path, "/result", sizeof(path) - strlen(path) - 1);
    json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
    json_object_foreach(json_object_get(json_object_get(doc, "result"), "changes"), key, ch)
    {
        json_t *row = json_deep_copy(ch);
        json_object_set_new(row, "node", json_string(key));
        json_array_append_new(rows, row);
    }
    if (json_array_size(rows))
        hc_output_table(&ctx->out, change_cols, rows, NULL, 1);
    json_decref(rows);
    json_decref(doc);
}

static int cmd_set_mtu(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    int mtu, rc;
    int64_t confirm = hc_cmd_opt_ms(ctx, "confirm-timeout");
    if (parse_mtu(ctx->argv[0], &mtu) < 0)
        return hc_cmd_usage(ctx, "an MTU is a whole number of bytes from 68 to 65535, e.g. 9000",
                            "invalid MTU '%s'", ctx->argv[0]);
    if (confirm < 1000 || confirm > 3600000)
        return hc_cmd_usage(ctx, "from 1s to 1h, e.g. 30s", "invalid --confirm-timeout");
    if (hc_cmd_confirm(ctx, &err, "set the storage MTU of every node to %d", mtu) < 0)
        return hc_cmd_fail(ctx, &err, NULL);
    json_t *body = json_pack("{s:i, s:I}", "mtu", mtu, "confirm_timeout_ms", (json_int_t)confirm);
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/net/mtu", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    const char *id = hc_json_str(json_object_get(doc, "operation"), "id", "");
    rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "setting MTU %d node by node", mtu);
    if (rc == HC_EXIT_OK && !ctx->out.json && !hc_cmd_opt_bool(ctx, "no-wait"))
        print_changes(ctx, id);
    json_decref(doc);
    return rc;
}

/* --- net bench ------------------------------------------------------------------------------ */

static void fmt_gbit(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                     enum hc_color *color)
{
    *color = HC_COLOR_NONE;
    if (json_is_number(v))
        snprintf(buf, len, "%.2f", json_number_value(v));
    else
        snprintf(buf, len, "-");
}

static const struct hc_col bench_cols[] = {
    {"FROM", "from", NULL},
    {"TO", "to", NULL},
    {"ADDRESS", "address", NULL},
    {"MTU", "mtu", NULL},
    {"GBIT/S", "gbit_per_second", fmt_gbit},
    {"RETRANSMITS", "retransmits", NULL},
    {"ERROR", "error", NULL},
    {NULL, NULL, NULL},
};

static int cmd_bench(struct hc_cmd_ctx *ctx)
{
    int64_t seconds = hc_cmd_opt_ms(ctx, "duration") / 1000;
    int rc = HC_EXIT_OK;
    size_t i;
    const json_t *p;
    if (seconds < 1 || seconds > 60)
        return hc_cmd_usage(ctx, "from 1s to 60s", "invalid --duration");
    json_t *body = json_pack("{s:I}", "duration_s", (json_int_t)seconds);
    json_t *nodes = nodes_option(ctx);
    if (nodes && json_array_size(nodes) < 2) {
        json_decref(nodes);
        json_decref(body);
        return hc_cmd_usage(ctx, "e.g. --nodes n1,n2", "--nodes needs at least two nodes");
    }
    if (nodes)
        json_object_set_new(body, "nodes", nodes);
    hc_output_info(&ctx->out, "measuring TCP throughput, %lld s per pair", (long long)seconds);
    json_t *doc =
        run_and_wait(ctx, "/v1/net/bench", body, NULL, hc_cmd_opt_ms(ctx, "timeout"), &rc);
    json_decref(body);
    if (!doc)
        return rc;
    const json_t *op = json_object_get(doc, "operation"), *res = json_object_get(doc, "result");
    if (strcmp(hc_json_str(op, "state", ""), "succeeded") != 0 || !json_is_object(res)) {
        rc = op_failed(ctx, doc);
    } else {
        if (ctx->out.json)
            hc_output_json(&ctx->out, res);
        else
            hc_output_table(&ctx->out, bench_cols, json_object_get(res, "pairs"), NULL, 1);
        /* A pair that could not be measured fails the command (1); one that was measured but
         * moved (almost) nothing is a problem the bench found (4). */
        json_array_foreach(json_object_get(res, "pairs"), i, p)
        {
            if (!json_object_get(p, "error"))
                continue;
            if (!json_object_get(p, "bits_per_second"))
                rc = HC_EXIT_FAILED;
            else if (rc == HC_EXIT_OK)
                rc = HC_EXIT_CHECK;
        }
    }
    json_decref(doc);
    return rc;
}

/* --- the table ------------------------------------------------------------------------------ */

static const struct hc_cmd_opt check_opts[] = {
    HC_OPT(.name = "mtu", .type = HC_OPT_INT,
           .help = "MTU to prove (default: the cluster's, else 9000)", .value_name = "N"),
    HC_OPT(.name = "nodes", .type = HC_OPT_LIST,
           .help = "only these nodes, at least two (comma-separated, or repeated)",
           .value_name = "A,B,...", .completer = HC_COMPLETE_NODE),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION, .help = "how long to wait for the result",
           .value_name = "DUR", .def = "2m"),
    HC_OPT(.name = "failures-only", .type = HC_OPT_BOOL,
           .help = "only the failing pairs in the result (the summary still counts every pair)"),
    {.name = NULL},
};

static const struct hc_cmd_opt set_mtu_opts[] = {
    HC_OPT(.name = "confirm-timeout", .type = HC_OPT_DURATION,
           .help = "how long each agent keeps a change unconfirmed before reverting it by itself",
           .value_name = "DUR", .def = "30s"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for the operation to end", .value_name = "DUR", .def = "30m"),
    {.name = NULL},
};

static const struct hc_cmd_opt bench_opts[] = {
    HC_OPT(.name = "nodes", .type = HC_OPT_LIST,
           .help = "measure between these nodes (default: a ring over all)",
           .value_name = "A,B,...", .completer = HC_COMPLETE_NODE),
    HC_OPT(.name = "duration", .type = HC_OPT_DURATION, .help = "length of each measurement",
           .value_name = "DUR", .def = "3s"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for all measurements", .value_name = "DUR", .def = "10m"),
    {.name = NULL},
};

static const struct hc_cmd_verb net_verbs[] = {
    HC_VERB(.name = "show", .handler = cmd_show,
            .summary = "per node: storage interface, MTU, state, addresses and the bridge or bond "
                       "it hangs on"),
    HC_VERB(.name = "check-jumbo", .handler = cmd_check, .opts = check_opts,
            .summary = "probe every directed pair at the MTU; exit 0 when all pass, 4 when "
                       "anything fails"),
    HC_VERB(.name = "set-mtu", .handler = cmd_set_mtu, .opts = set_mtu_opts, .min_args = 1,
            .max_args = 1,
            .summary = "set the storage MTU node by node, each change confirmed after re-probing "
                       "(disruptive)",
            .usage = "MTU", .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "bench", .handler = cmd_bench, .opts = bench_opts,
            .summary = "TCP throughput between nodes at the current MTU"),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_net = {
    .name = "net",
    .summary = "the storage network: MTU and jumbo frames",
    .verbs = net_verbs,
};
