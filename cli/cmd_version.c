/*
 * `hcctl version`: the client's version, and the controller's when it answers GET /v1/version.
 * An unreachable or unconfigured controller is shown as such and the command still exits 0:
 * `version` must work on a machine that cannot reach anything (bug reports start here).
 */
#include <stdio.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"

/* {"url","version","api"} or {"url","error":{"code","message"}} as one line. */
static void fmt_controller(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                           enum hc_color *color)
{
    const json_t *e = json_object_get(v, "error");
    *color = HC_COLOR_NONE;
    if (e) {
        /* the message names the URL when it matters */
        snprintf(buf, len, "%s: %s", hc_json_str(e, "code", "?"), hc_json_str(e, "message", ""));
        *color = HC_COLOR_RED;
        return;
    }
    snprintf(buf, len, "%s (api %s) at %s", hc_json_str(v, "version", "?"),
             hc_json_str(v, "api", "?"), hc_json_str(v, "url", "?"));
}

static const struct hc_col version_fields[] = {
    {"Client", "client.version", NULL},
    {"Controller", "controller", fmt_controller},
    {NULL, NULL, NULL},
};

static const struct hc_section version_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, version_fields},
    {0, NULL, NULL, NULL},
};

static json_t *error_object(const struct hc_error *err)
{
    return json_pack("{s:s, s:s}", "code", err->code, "message", err->message);
}

/* The controller part of the answer; never fails, errors become part of it. */
static json_t *controller_part(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const struct hc_cli_config *cfg = hc_cmd_config(ctx, &err);
    if (!cfg)
        return json_pack("{s:n, s:o}", "url", "error", error_object(&err));
    if (!cfg->controller) {
        hc_error_set(&err, HC_E(NOT_CONFIGURED), "no controller configured");
        return json_pack("{s:n, s:o}", "url", "error", error_object(&err));
    }
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/version", NULL, &err);
    /* the controller that answered (one of several, the leader); else the list as configured */
    json_t *part = json_pack("{s:s}", "url", doc ? hc_api_client_url(ctx->api) : cfg->controller);
    if (!doc) {
        /* 'unreachable' whatever the transport said, with the reason in the message */
        if (hc_exit_code(&err) == HC_EXIT_UNAVAILABLE || hc_exit_code(&err) == HC_EXIT_TIMEOUT)
            snprintf(err.code, sizeof(err.code), "%s", HC_ERR_UNREACHABLE);
        json_object_set_new(part, "error", error_object(&err));
        return part;
    }
    json_object_set(part, "version", json_object_get(doc, "version"));
    json_object_set(part, "api", json_object_get(doc, "api"));
    json_decref(doc);
    return part;
}

static int cmd_version(struct hc_cmd_ctx *ctx)
{
    json_t *doc = json_pack("{s:{s:s}, s:o}", "client", "version", HC_VERSION, "controller",
                            controller_part(ctx));
    hc_output_render(&ctx->out, version_view, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

static const struct hc_cmd_verb version_verbs[] = {
    HC_VERB(.name = "version", .handler = cmd_version,
            .summary = "show the client's version and, when reachable, the controller's",
            .flags = HC_CMD_OFFLINE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_version = {
    .name = "version",
    .summary = "versions of hcctl and the controller",
    .verbs = version_verbs,
    .flags = HC_GROUP_STANDALONE,
};
