/*
 * `hcctl token`: the controller's API tokens (admin only). list shows every token, join tokens
 * too, never a secret; create prints a new token once; revoke deletes one (never the last
 * admin token); rotate gives one a new secret, and when it is the token this hcctl runs with
 * from the config file, writes the new one there.
 */
#include <stdio.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"
#include "common/token.h"

static const struct hc_col list_cols[] = {
    {"ID", "id", NULL},
    {"KIND", "kind", NULL},
    {"NAME", "name", NULL},
    {"ROLE", "role", NULL},
    {"SCOPE", "scope", NULL},
    {"CREATED", "created_at", hc_fmt_age},
    {"EXPIRES", "expires_at", hc_fmt_time},
    {"EXPIRED", "expired", NULL},
    {"USED BY", "used_by", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section list_view[] = {
    {HC_SECTION_TABLE, NULL, "tokens", list_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_list(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show_list(ctx, "/v1/tokens", "tokens", list_view);
}

/* --ttl as seconds for the body; 0 when not given. */
static json_int_t ttl_seconds(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_opt_set(ctx, "ttl") ? (json_int_t)(hc_cmd_opt_ms(ctx, "ttl") / 1000) : 0;
}

/* The new token alone on stdout (TOKEN=$(hcctl token create ...)), the rest on stderr. */
static int print_token(struct hc_cmd_ctx *ctx, json_t *doc, const char *what)
{
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
        return HC_EXIT_OK;
    }
    fprintf(ctx->out.out, "%s\n", hc_json_str(doc, "token", ""));
    hc_output_info(&ctx->out, "api token '%s' (%s, role %s) %s; expires %s; it is shown only now",
                   hc_json_str(doc, "name", "?"), hc_json_str(doc, "id", "?"),
                   hc_json_str(doc, "role", "?"), what, hc_json_str(doc, "expires_at", "never"));
    return HC_EXIT_OK;
}

static int cmd_create(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    if (hc_cmd_opt_set(ctx, "ttl") && hc_cmd_opt_ms(ctx, "ttl") < 1000)
        return hc_cmd_usage(ctx, "for example --ttl 90d", "--ttl must be at least 1s");
    json_int_t ttl = ttl_seconds(ctx);
    json_t *body =
        ttl ? json_pack("{s:s, s:s, s:I}", "name", ctx->argv[0], "role",
                        hc_cmd_opt_str(ctx, "role"), "ttl_seconds", ttl)
            : json_pack("{s:s, s:s}", "name", ctx->argv[0], "role", hc_cmd_opt_str(ctx, "role"));
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/tokens", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    int rc = print_token(ctx, doc, "created");
    json_decref(doc);
    return rc;
}

static int cmd_revoke(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    char path[512];
    if (hc_cmd_path(path, sizeof(path), "/v1/tokens/", ctx->argv[0]) < 0)
        return hc_cmd_usage(ctx, NULL, "token '%.64s...' is too long", ctx->argv[0]);
    if (hc_cmd_confirm(ctx, &err, "revoke token '%s'", ctx->argv[0]) < 0)
        return hc_cmd_fail(ctx, &err, NULL);
    json_t *doc = hc_cmd_request(ctx, "DELETE", path, NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (ctx->out.json)
        hc_output_json(&ctx->out, doc);
    else
        hc_output_info(&ctx->out, "%s token %s revoked", hc_json_str(doc, "kind", "?"),
                       hc_json_str(doc, "id", "?"));
    json_decref(doc);
    return HC_EXIT_OK;
}

/* After rotating the token this hcctl used from its config file, the file gets the new one:
 * the old text no longer works. */
static void update_config(struct hc_cmd_ctx *ctx, const json_t *doc)
{
    struct hc_token mine;
    const struct hc_cli_config *cfg = &ctx->config;
    struct hc_error err = {0};
    if (!cfg->token || !cfg->token_from || strcmp(cfg->token_from, "config") != 0 ||
        hc_token_parse(cfg->token, HC_TOKEN_API_PREFIX, &mine, NULL) < 0 ||
        strcmp(mine.id, hc_json_str(doc, "id", "")) != 0)
        return;
    if (hc_cli_config_set_token(cfg->path, hc_json_str(doc, "token", ""), &err) < 0)
        fprintf(ctx->out.err, "hcctl: warning: %s; hint: put the new token into %s yourself\n",
                err.message, cfg->path);
    else
        hc_output_info(&ctx->out, "%s now holds the new token", cfg->path);
}

static int cmd_rotate(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    char path[512];
    if (hc_cmd_path(path, sizeof(path), "/v1/tokens/", ctx->argv[0]) < 0 ||
        strlen(path) + sizeof("/rotate") > sizeof(path))
        return hc_cmd_usage(ctx, NULL, "token '%.64s...' is too long", ctx->argv[0]);
    if (hc_cmd_opt_set(ctx, "ttl") && hc_cmd_opt_ms(ctx, "ttl") < 1000)
        return hc_cmd_usage(ctx, "for example --ttl 90d", "--ttl must be at least 1s");
    strcat(path, "/rotate");
    json_int_t ttl = ttl_seconds(ctx);
    json_t *body = ttl ? json_pack("{s:I}", "ttl_seconds", ttl) : json_object();
    json_t *doc = hc_cmd_request(ctx, "POST", path, body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    update_config(ctx, doc);
    int rc = print_token(ctx, doc, "rotated (the old text no longer works)");
    json_decref(doc);
    return rc;
}

static const char *const roles[] = {"admin", "readonly", NULL};

static const struct hc_cmd_opt create_opts[] = {
    HC_OPT(.name = "role", .type = HC_OPT_STRING, .help = "what the token may do",
           .value_name = "ROLE", .completer = HC_COMPLETE_CHOICES, .def = "readonly",
           .choices = roles),
    HC_OPT(.name = "ttl", .type = HC_OPT_DURATION,
           .help = "how long it stays valid (default: until revoked)", .value_name = "DUR"),
    {.name = NULL},
};

static const struct hc_cmd_opt rotate_opts[] = {
    HC_OPT(.name = "ttl", .type = HC_OPT_DURATION,
           .help = "a new life (default: as long as the old one)", .value_name = "DUR"),
    {.name = NULL},
};

static const struct hc_cmd_verb token_verbs[] = {
    HC_VERB(.name = "list", .handler = cmd_list,
            .summary = "list the API and join tokens (never their secrets)"),
    HC_VERB(.name = "create", .handler = cmd_create, .opts = create_opts, .min_args = 1,
            .max_args = 1, .summary = "create an API token and print it once", .usage = "NAME"),
    HC_VERB(.name = "revoke", .handler = cmd_revoke, .min_args = 1, .max_args = 1,
            .summary =
                "revoke a token by id or name (asks, or needs --yes; never the last admin token)",
            .usage = "ID|NAME", .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "rotate", .handler = cmd_rotate, .opts = rotate_opts, .min_args = 1,
            .max_args = 1,
            .summary = "give a token a new secret (the old one stops working; this hcctl's config "
                       "follows)",
            .usage = "ID|NAME"),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_token = {
    .name = "token",
    .summary = "API tokens: list, create, revoke, rotate",
    .verbs = token_verbs,
};
