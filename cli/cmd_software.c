/*
 * `hcctl software`: signing keys and bundle builds (offline, no controller), and the bundles
 * stored on the controller: upload (verified there before anything is stored), list, show,
 * remove. The bundle format is in docs/bundles.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/bundle.h"
#include "common/json_util.h"
#include "common/util.h"

#define SIG_HEADER "X-HC-Signature"

static const struct hc_col list_cols[] = {
    {"VERSION", "version", NULL},
    {"NAME", "name", NULL},
    {"KIND", "kind", NULL},
    {"SIZE", "size", NULL},
    {"SIGNED BY", "signed_by", NULL},
    {"RUNNING ON", "nodes_running", NULL},
    {"UPLOADED", "uploaded_at", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section list_view[] = {
    {HC_SECTION_TABLE, NULL, "bundles", list_cols},
    {0, NULL, NULL, NULL},
};

static const struct hc_col bundle_fields[] = {
    {"Name", "name", NULL},
    {"Version", "version", NULL},
    {"Kind", "kind", NULL},
    {"Description", "description", NULL},
    {"SHA-256", "sha256", NULL},
    {"Size", "size", NULL},
    {"Signed by", "signed_by", NULL},
    {"Min upgrade from", "min_upgrade_from", NULL},
    {"Uploaded", "uploaded_at", hc_fmt_time},
    {"Uploaded by", "uploaded_by", NULL},
    {"Running on", "nodes_running", NULL},
    {"Rollback target on", "nodes_rollback", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section bundle_view[] = {
    {HC_SECTION_FIELDS, NULL, "bundle", bundle_fields},
    {0, NULL, NULL, NULL},
};

static const struct hc_col keygen_fields[] = {
    {"Private key", "private_key", NULL},
    {"Public key", "public_key", NULL},
    {"Key id", "key_id", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section keygen_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, keygen_fields},
    {0, NULL, NULL, NULL},
};

static const struct hc_col build_fields[] = {
    {"Bundle", "bundle", NULL},  {"Signature", "signature", NULL},
    {"Name", "name", NULL},      {"Version", "version", NULL},
    {"SHA-256", "sha256", NULL}, {"Size", "size", NULL},
    {"Files", "entries", NULL},  {NULL, NULL, NULL},
};

static const struct hc_section build_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, build_fields},
    {0, NULL, NULL, NULL},
};

/* Reports a local (offline) failure: errors of files and keys are the user's to fix. */
static int local_fail(struct hc_cmd_ctx *ctx, struct hc_error *err)
{
    return hc_cmd_fail(ctx, err, NULL);
}

static int cmd_keygen(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *prefix = hc_cmd_opt_str(ctx, "out");
    char id[HC_BUNDLE_KEY_ID_LEN + 1], priv[1100], pub[1100];
    if (hc_bundle_keygen(prefix, id, &err) < 0)
        return local_fail(ctx, &err);
    snprintf(priv, sizeof(priv), "%s.key", prefix);
    snprintf(pub, sizeof(pub), "%s.pub", prefix);
    json_t *doc =
        json_pack("{s:s, s:s, s:s}", "private_key", priv, "public_key", pub, "key_id", id);
    hc_output_render(&ctx->out, keygen_view, doc);
    hc_output_info(&ctx->out, "keep %s secret; give %s to 'hcctld init --trust-key'", priv, pub);
    json_decref(doc);
    return HC_EXIT_OK;
}

static int cmd_build(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    struct hc_bundle_info info;
    const char *out = hc_cmd_opt_str(ctx, "output");
    char sig[1100];
    if (hc_bundle_build(hc_cmd_opt_str(ctx, "manifest"), hc_cmd_opt_str(ctx, "dir"),
                        hc_cmd_opt_str(ctx, "key"), out, &info, &err) < 0)
        return local_fail(ctx, &err);
    snprintf(sig, sizeof(sig), "%s.sig", out);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "bundle", out, "signature", sig,
                            "name", info.name, "version", info.version, "sha256", info.sha256,
                            "size", (json_int_t)info.size, "entries", (json_int_t)info.entries);
    hc_output_render(&ctx->out, build_view, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

/* Reads the bundle and its signature line for an upload. */
static int read_upload(const char *path, const char *sig_path, char **data, size_t *len, char **sig,
                       struct hc_error *err)
{
    struct stat st;
    size_t slen;
    if (stat(path, &st) == 0 && (uint64_t)st.st_size > HC_BUNDLE_MAX_BYTES)
        return hc_error_set(err, HC_E(BUNDLE_TOO_LARGE), "bundle '%s' exceeds %u bytes", path,
                            HC_BUNDLE_MAX_BYTES);
    if (hc_file_read(path, data, len, err) < 0)
        return -1;
    if (hc_file_read(sig_path, sig, &slen, err) < 0) {
        hc_error_hint(err, "'hcctl software build' writes FILE.sig next to the bundle; pass "
                           "another one with --signature");
        return -1;
    }
    (*sig)[strcspn(*sig, "\r\n")] = '\0';
    return 0;
}

static int cmd_upload(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *path = ctx->argv[0];
    char *data = NULL, *sig = NULL, sig_default[1100], header[HC_BUNDLE_SIG_MAX + 32];
    size_t len = 0;
    json_t *doc = NULL;
    int rc;
    snprintf(sig_default, sizeof(sig_default), "%s.sig", path);
    const char *sig_path =
        hc_cmd_opt_set(ctx, "signature") ? hc_cmd_opt_str(ctx, "signature") : sig_default;
    struct hc_api_client *api = hc_cmd_api(ctx, &err);
    if (!api || read_upload(path, sig_path, &data, &len, &sig, &err) < 0) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto cleanup;
    }
    snprintf(header, sizeof(header), "%s: %s", SIG_HEADER, sig);
    const char *headers[] = {header, NULL};
    hc_output_info(&ctx->out, "uploading '%s' (%zu bytes)", path, len);
    doc = hc_api_client_call_raw(api, "POST", "/v1/software", data, len, "application/gzip",
                                 headers, NULL, &err);
    if (!doc) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto cleanup;
    }
    if (hc_json_bool(doc, "already_uploaded", 0))
        hc_output_info(&ctx->out, "bundle %s was already uploaded (same sha256)",
                       hc_json_str(json_object_get(doc, "bundle"), "version", "?"));
    hc_output_render(&ctx->out, bundle_view, doc);
    rc = HC_EXIT_OK;
cleanup:
    json_decref(doc);
    free(data);
    free(sig);
    return rc;
}

static int cmd_list(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show_list(ctx, "/v1/software", "bundles", list_view);
}

static int version_path(struct hc_cmd_ctx *ctx, char *path, size_t len)
{
    if (hc_cmd_path(path, len, "/v1/software/", ctx->argv[0]) < 0)
        return hc_cmd_usage(ctx, NULL, "version '%.64s...' is too long", ctx->argv[0]);
    return 0;
}

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    char path[1024];
    int rc = version_path(ctx, path, sizeof(path));
    return rc ? rc : hc_cmd_show(ctx, path, bundle_view);
}

static int cmd_remove(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    char path[1024];
    int rc = version_path(ctx, path, sizeof(path));
    if (rc)
        return rc;
    json_t *doc = hc_cmd_request(ctx, "DELETE", path, NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    hc_output_info(&ctx->out, "bundle %s removed", ctx->argv[0]);
    if (ctx->out.json)
        hc_output_json(&ctx->out, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

static const struct hc_cmd_opt keygen_opts[] = {
    HC_OPT(.name = "out", .type = HC_OPT_STRING, .required = 1,
           .help = "writes PREFIX.key (private, 0600) and PREFIX.pub", .value_name = "PREFIX",
           .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_opt build_opts[] = {
    HC_OPT(.name = "manifest", .type = HC_OPT_STRING, .required = 1,
           .help = "the bundle's manifest.json (docs/bundles.md)", .value_name = "FILE",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "dir", .type = HC_OPT_STRING, .required = 1,
           .help = "directory whose files go into the bundle", .value_name = "DIR",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "key", .type = HC_OPT_STRING, .required = 1,
           .help = "Ed25519 private key that signs it (from software keygen)", .value_name = "KEY",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "output", .short_name = 'o', .type = HC_OPT_STRING, .required = 1,
           .help = "the bundle to write (the signature goes to OUT.sig)", .value_name = "OUT",
           .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_opt upload_opts[] = {
    HC_OPT(.name = "signature", .type = HC_OPT_STRING, .help = "signature file (default: FILE.sig)",
           .value_name = "FILE", .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_verb software_verbs[] = {
    HC_VERB(.name = "upload", .handler = cmd_upload, .opts = upload_opts, .min_args = 1,
            .max_args = 1,
            .summary = "upload a signed bundle (the controller verifies it before storing it)",
            .usage = "FILE", .arg_completer = HC_COMPLETE_FILE),
    HC_VERB(.name = "list", .handler = cmd_list,
            .summary = "list the uploaded bundles and the nodes running them"),
    HC_VERB(.name = "show", .handler = cmd_show, .min_args = 1, .max_args = 1,
            .summary = "show one uploaded bundle", .usage = "VERSION",
            .arg_completer = HC_COMPLETE_BUNDLE),
    HC_VERB(.name = "remove", .handler = cmd_remove, .min_args = 1, .max_args = 1,
            .summary =
                "remove an uploaded bundle (refused while a node runs it or may roll back to it)",
            .usage = "VERSION", .arg_completer = HC_COMPLETE_BUNDLE),
    HC_VERB(.name = "keygen", .handler = cmd_keygen, .opts = keygen_opts,
            .summary = "create an Ed25519 key pair for signing bundles", .flags = HC_CMD_OFFLINE),
    HC_VERB(.name = "build", .handler = cmd_build, .opts = build_opts,
            .summary = "build and sign a bundle from a manifest and a "
                       "directory",
            .flags = HC_CMD_OFFLINE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_software = {
    .name = "software",
    .summary = "storage software bundles",
    .verbs = software_verbs,
};
