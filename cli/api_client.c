/*
 * Controller API calls with a bearer token, and the translation of every failure into an error
 * value with a hint (see api_client.h for the mapping the exit codes rely on).
 */
#include "cli/api_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "common/https_client.h"

struct hc_api_client {
    struct hc_http_client *http;
    char *url;
    char *token;
    char config_path[1024];
    const char *token_from;
    int64_t timeout_ms;
};

/* Where a setting came from, as the user wrote it: the flag, the variable or the file. */
static const char *setting_source(const char *from, const char *flag, const char *env,
                                  const char *path, char *buf, size_t len)
{
    if (from && strcmp(from, "flag") == 0)
        snprintf(buf, len, "%s", flag);
    else if (from && strcmp(from, "env") == 0)
        snprintf(buf, len, "%s", env);
    else
        snprintf(buf, len, "the config file '%s'", path);
    return buf;
}

/* The settings are checked before any request, so that a mistake in them is named as such
 * instead of surfacing as a transport error with a misleading "is hcctld running?". */
static int check_settings(const struct hc_cli_config *cfg, struct hc_error *err)
{
    char from[1100];
    if (!cfg->controller) {
        hc_error_set(err, HC_E(USAGE), "no controller configured");
        return hc_error_hint(err, "pass --controller URL, set HCCTL_CONTROLLER, or run `hcctld "
                                  "init` which writes ~/.config/hcctl/config.json");
    }
    /* hcctld speaks only HTTPS; "host:port" alone was already made https:// by the config. */
    if (strncasecmp(cfg->controller, "https://", 8) != 0) {
        hc_error_set(err, HC_E(USAGE),
                     "the controller URL must start with https:// (got '%s' from %s)",
                     cfg->controller,
                     setting_source(cfg->controller_from, "--controller", "HCCTL_CONTROLLER",
                                    cfg->path, from, sizeof(from)));
        return hc_error_hint(err, "hcctld serves its API over HTTPS only: https://HOST:7443");
    }
    if (cfg->ca_file && access(cfg->ca_file, R_OK) != 0) {
        const char *why = strerror(errno);
        hc_error_set(
            err, HC_E(IO), "cannot read the CA file '%s' (from %s): %s", cfg->ca_file,
            setting_source(cfg->ca_from, "--ca", "HCCTL_CA_FILE", cfg->path, from, sizeof(from)),
            why);
        return hc_error_hint(err, "pass the cluster's CA certificate (`hcctld init` wrote it to "
                                  "DATA_DIR/ca.pem), or give no CA file to use \"ca_pem\" from "
                                  "the config file");
    }
    return 0;
}

/* What hcctl accepts from the controller in one answer (see common/https_client.h): far above
 * the largest list it serves, still bounded. */
#define HC_API_MAX_RESPONSE (64u * 1024 * 1024)
#define HC_API_MAX_JSON_VALUES (1u << 20)

struct hc_api_client *hc_api_client_new(const struct hc_cli_config *cfg, int64_t timeout_ms,
                                        struct hc_error *err)
{
    if (check_settings(cfg, err) < 0)
        return NULL;
    struct hc_api_client *api = calloc(1, sizeof(*api));
    /* The controller's largest answers are lists (events, operations, bundles): bounded, with
     * room to spare, so that a wrong or hostile endpoint cannot make hcctl take gigabytes. */
    struct hc_tls_client_config tls = {.ca_file = cfg->ca_file,
                                       .ca_pem = cfg->ca_file ? NULL : cfg->ca_pem,
                                       .pinned_pubkey = cfg->controller_pin,
                                       .max_response = HC_API_MAX_RESPONSE,
                                       .max_json_values = HC_API_MAX_JSON_VALUES};
    if (!api || !(api->url = strdup(cfg->controller)) ||
        (cfg->token && !(api->token = strdup(cfg->token)))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    api->http = hc_http_client_new(&tls, err);
    if (!api->http) {
        hc_error_prefix(err, "cannot set up the connection to '%s'", cfg->controller);
        goto fail;
    }
    snprintf(api->config_path, sizeof(api->config_path), "%s", cfg->path);
    api->token_from = cfg->token_from;
    api->timeout_ms = timeout_ms;
    return api;
fail:
    hc_api_client_free(api);
    return NULL;
}

void hc_api_client_free(struct hc_api_client *api)
{
    if (!api)
        return;
    hc_http_client_free(api->http);
    free(api->url);
    free(api->token);
    free(api);
}

const char *hc_api_client_url(const struct hc_api_client *api)
{
    return api->url;
}

/* Keeps the client's code (unreachable, timeout, tls_error) and says where to look. */
static void transport_error(const struct hc_api_client *api, struct hc_error *err)
{
    if (strcmp(err->code, HC_ERR_RESPONSE_TOO_LARGE) == 0)
        hc_error_hint(err, "no answer of hcctld is that large: is %s really the controller?",
                      api->url);
    else if (strcmp(err->code, HC_ERR_TIMEOUT) == 0)
        hc_error_hint(err,
                      "the controller at %s did not answer within %lld ms; raise --timeout "
                      "or check the network path (an MTU blackhole looks like this)",
                      api->url, (long long)api->timeout_ms);
    else if (strcmp(err->code, HC_ERR_TLS) == 0 && strstr(err->message, "pinned public key"))
        hc_error_hint(err,
                      "the server at %s is not the controller this config pins "
                      "(\"controller_pin\" in the config file, HCCTL_CONTROLLER_PIN); if the "
                      "controller's key really changed, take the new config from "
                      "'hcctld init'",
                      api->url);
    else if (strcmp(err->code, HC_ERR_TLS) == 0)
        hc_error_hint(err, "check the controller's CA: --ca FILE, HCCTL_CA_FILE or \"ca_pem\" in "
                           "the config file");
    else
        hc_error_hint(err,
                      "is hcctld running at %s? set the address with --controller or "
                      "HCCTL_CONTROLLER",
                      api->url);
}

/* Fills err from an HTTP error answer: the controller's JSON error shape when present. */
static void http_error(const struct hc_api_client *api, const char *method, const char *path,
                       const struct hc_http_response *resp, struct hc_error *err)
{
    static const struct {
        long status;
        const char *code;
    } codes[] = {{401, HC_ERR_UNAUTHORIZED},
                 {403, HC_ERR_FORBIDDEN},
                 {404, HC_ERR_NOT_FOUND},
                 {409, HC_ERR_CONFLICT},
                 {400, HC_ERR_INVALID_ARGUMENT}};
    if (hc_error_from_json(err, resp->body, (int)resp->status) < 0) {
        const char *code = HC_ERR_INTERNAL;
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
            if (codes[i].status == resp->status)
                code = codes[i].code;
        hc_error_set_wire(err, (int)resp->status, code, "%s %s: controller answered HTTP %ld",
                          method, path, resp->status);
    }
    if (err->hint[0])
        return;
    if (resp->status == 401 && !api->token)
        hc_error_hint(err, "no token configured: pass --token, set HCCTL_TOKEN or add \"token\" "
                           "to the config file");
    else if (resp->status == 401)
        hc_error_hint(err, "the token (from %s) was refused; check --token, HCCTL_TOKEN or %s",
                      api->token_from ? api->token_from : "?",
                      api->config_path[0] ? api->config_path : "the config file");
    else if (resp->status == 403)
        hc_error_hint(err, "this needs an admin token");
}

/* One call with a JSON body (body) or raw bytes (raw->data). */
struct raw_body {
    const void *data;
    size_t len;
    const char *content_type;
    const char *const *headers;
};

static json_t *api_call(struct hc_api_client *api, const char *method, const char *path,
                        const json_t *body, const struct raw_body *raw, long *http_status,
                        struct hc_error *err)
{
    char url[4096];
    struct hc_http_response resp = {0};
    json_t *out = NULL;
    int rc;
    snprintf(url, sizeof(url), "%s%s", api->url, path);
    if (raw)
        rc =
            hc_http_request_raw(api->http, method, url, api->token, raw->data, raw->len,
                                raw->content_type, raw->headers, (long)api->timeout_ms, &resp, err);
    else
        rc = hc_http_request(api->http, method, url, api->token, body, (long)api->timeout_ms, &resp,
                             err);
    if (rc < 0) {
        transport_error(api, err);
        goto cleanup;
    }
    if (http_status)
        *http_status = resp.status;
    if (resp.status < 200 || resp.status > 299) {
        http_error(api, method, path, &resp, err);
        goto cleanup;
    }
    if (resp.body)
        out = json_incref(resp.body);
    else if (resp.raw_len == 0)
        out = json_object();
    else
        hc_error_set_wire(err, (int)resp.status, HC_ERR_INVALID_JSON,
                          "%s %s: the controller's answer is not JSON", method, path);
cleanup:
    hc_http_response_clear(&resp);
    return out;
}

json_t *hc_api_client_call(struct hc_api_client *api, const char *method, const char *path,
                           const json_t *body, long *http_status, struct hc_error *err)
{
    return api_call(api, method, path, body, NULL, http_status, err);
}

json_t *hc_api_client_call_raw(struct hc_api_client *api, const char *method, const char *path,
                               const void *data, size_t len, const char *content_type,
                               const char *const *headers, long *http_status, struct hc_error *err)
{
    struct raw_body raw = {data, len, content_type, headers};
    return api_call(api, method, path, NULL, &raw, http_status, err);
}

struct stream {
    int (*on_line)(void *arg, const json_t *obj);
    int (*stop)(void *arg);
    void *arg;
    char *line;
    size_t len, cap;
    int ended;    /* on_line asked to end: not an error */
    int too_long; /* a line passed HC_API_STREAM_LINE_MAX */
};

static int stream_line(struct stream *s)
{
    json_t *obj = json_loadb(s->line, s->len, 0, NULL);
    int rc = json_is_object(obj) ? s->on_line(s->arg, obj) : 0; /* junk lines are skipped */
    json_decref(obj);
    s->len = 0;
    return rc;
}

static size_t stream_data(struct hc_http_call *call, const char *data, size_t len)
{
    struct stream *s = call->user;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n') {
            if (stream_line(s) != 0) {
                s->ended = 1;
                return 0;
            }
            continue;
        }
        if (s->len + 1 > s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 4096;
            char *p = cap <= HC_API_STREAM_LINE_MAX ? realloc(s->line, cap) : NULL;
            if (!p) {
                s->too_long = 1;
                return 0;
            }
            s->line = p;
            s->cap = cap;
        }
        s->line[s->len++] = data[i];
    }
    return len;
}

static int stream_stop(struct hc_http_call *call)
{
    struct stream *s = call->user;
    return s->stop && s->stop(s->arg);
}

int hc_api_client_stream(struct hc_api_client *api, const char *path, long idle_ms,
                         int (*on_line)(void *arg, const json_t *obj), int (*stop)(void *arg),
                         void *arg, struct hc_error *err)
{
    char url[4096];
    struct stream s = {on_line, stop, arg, NULL, 0, 0, 0, 0};
    struct hc_http_call call = {.method = "GET",
                                .url = url,
                                .bearer = api->token,
                                .timeout_ms = (long)api->timeout_ms,
                                .user = &s,
                                .on_data = stream_data,
                                .stop = stream_stop,
                                .stream_idle_ms = idle_ms};
    snprintf(url, sizeof(url), "%s%s", api->url, path);
    hc_http_fanout(api->http, &call, 1, 1);
    int rc = 0;
    if (s.too_long) {
        rc = hc_error_set(err, HC_E(RESPONSE_TOO_LARGE), "GET %s: a line of more than %d bytes",
                          path, HC_API_STREAM_LINE_MAX);
    } else if (!call.ok && !s.ended && !(stop && stop(arg))) {
        *err = call.err;
        transport_error(api, err);
        rc = -1;
    } else if (call.ok && call.resp.status != 200) {
        http_error(api, "GET", path, &call.resp, err);
        rc = -1;
    }
    hc_http_response_clear(&call.resp);
    free(s.line);
    return rc;
}

json_t *hc_api_client_get(struct hc_api_client *api, const char *path, struct hc_error *err)
{
    return hc_api_client_call(api, "GET", path, NULL, NULL, err);
}

json_t *hc_api_client_post(struct hc_api_client *api, const char *path, const json_t *body,
                           struct hc_error *err)
{
    return hc_api_client_call(api, "POST", path, body, NULL, err);
}

json_t *hc_api_client_delete(struct hc_api_client *api, const char *path, struct hc_error *err)
{
    return hc_api_client_call(api, "DELETE", path, NULL, NULL, err);
}

int hc_api_client_escape(const char *text, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p);
        if (o + (plain ? 1 : 3) >= len)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o >= len)
        return -1;
    out[o] = '\0';
    return 0;
}

int hc_api_client_query_add(char *path, size_t len, const char *key, const char *value)
{
    char escaped[1024];
    size_t used = strlen(path);
    if (hc_api_client_escape(value, escaped, sizeof(escaped)) < 0)
        return -1;
    int n =
        snprintf(path + used, len - used, "%c%s=%s", strchr(path, '?') ? '&' : '?', key, escaped);
    return n < 0 || (size_t)n >= len - used ? -1 : 0;
}
