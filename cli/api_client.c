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
#include <time.h>
#include <unistd.h>

#include "cli/controllers.h"
#include "cli/exit_codes.h"
#include "common/https_client.h"
#include "common/util.h"

struct hc_api_client {
    struct hc_http_client *http;
    struct hc_cli_controllers list;
    char list_text[1100]; /* the list as configured, for hints */
    /* Where the last request was answered (the leader, or the one controller): tried first.
     * It may be outside the list: a standby named it. "" until a controller answered. */
    char leader[HC_CLI_URL_MAX + 1];
    unsigned char failed[HC_CLI_MAX_CONTROLLERS]; /* 1: did not answer last time: tried last */
    int answered;                                 /* some controller answered in this process */
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
static int check_settings(const struct hc_cli_config *cfg, struct hc_cli_controllers *list,
                          struct hc_error *err)
{
    char from[1100];
    if (!cfg->controller) {
        hc_error_set(err, HC_E(USAGE), "no controller configured");
        return hc_error_hint(err, "pass --controller URL, set HCCTL_CONTROLLER, or run `hcctld "
                                  "init` which writes ~/.config/hcctl/config.json");
    }
    setting_source(cfg->controller_from, "--controller", "HCCTL_CONTROLLER", cfg->path, from,
                   sizeof(from));
    if (hc_cli_controllers_parse(cfg->controller, from, list, err) < 0)
        return -1;
    /* A pin is one controller's key, and each controller of an HA cluster has its own: with
     * several URLs only the cluster's CA can vouch for all of them. */
    if (cfg->controller_pin && list->n > 1 && !cfg->ca_file && !cfg->ca_pem) {
        hc_error_set(err, HC_E(USAGE),
                     "a controller pin (\"controller_pin\", HCCTL_CONTROLLER_PIN) names one "
                     "controller's key; it cannot check %zu controllers (from %s)",
                     list->n, from);
        return hc_error_hint(err, "give the cluster's CA (--ca FILE, HCCTL_CA_FILE or \"ca_pem\" "
                                  "in the config file): it verifies every controller");
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
    struct hc_cli_controllers list;
    if (check_settings(cfg, &list, err) < 0)
        return NULL;
    struct hc_api_client *api = calloc(1, sizeof(*api));
    /* The controller's largest answers are lists (events, operations, bundles): bounded, with
     * room to spare, so that a wrong or hostile endpoint cannot make hcctl take gigabytes. With
     * several controllers the pin is left out: the CA verifies each (check_settings). */
    struct hc_tls_client_config tls = {.ca_file = cfg->ca_file,
                                       .ca_pem = cfg->ca_file ? NULL : cfg->ca_pem,
                                       .pinned_pubkey = list.n == 1 ? cfg->controller_pin : NULL,
                                       .max_response = HC_API_MAX_RESPONSE,
                                       .max_json_values = HC_API_MAX_JSON_VALUES};
    if (!api || (cfg->token && !(api->token = strdup(cfg->token)))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    api->list = list;
    snprintf(api->list_text, sizeof(api->list_text), "%s", cfg->controller);
    if (list.n > 1)
        hc_cli_leader_cache_read(&list, api->leader);
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
    free(api->token);
    free(api);
}

int hc_api_client_answered(const struct hc_api_client *api)
{
    return api->answered;
}

const char *hc_api_client_url(const struct hc_api_client *api)
{
    return api->leader[0] ? api->leader : api->list.url[0];
}

/* Keeps the client's code (unreachable, timeout, tls_error) and says where to look; base is the
 * controller that failed (NULL: every one of the list did). */
static void transport_error(const struct hc_api_client *api, const char *base, struct hc_error *err)
{
    const char *url = base ? base : api->list_text;
    if (strcmp(err->code, HC_ERR_RESPONSE_TOO_LARGE) == 0)
        hc_error_hint(err, "no answer of hcctld is that large: is %s really the controller?", url);
    else if (strcmp(err->code, HC_ERR_TIMEOUT) == 0)
        hc_error_hint(err,
                      "the controller at %s did not answer within %lld ms; raise --timeout "
                      "or check the network path (an MTU blackhole looks like this)",
                      url, (long long)api->timeout_ms);
    else if (strcmp(err->code, HC_ERR_TLS) == 0 && strstr(err->message, "pinned public key"))
        hc_error_hint(err,
                      "the server at %s is not the controller this config pins "
                      "(\"controller_pin\" in the config file, HCCTL_CONTROLLER_PIN); if the "
                      "controller's key really changed, take the new config from "
                      "'hcctld init'",
                      url);
    else if (strcmp(err->code, HC_ERR_TLS) == 0)
        hc_error_hint(err, "check the controller's CA: --ca FILE, HCCTL_CA_FILE or \"ca_pem\" in "
                           "the config file");
    else
        hc_error_hint(err,
                      "is hcctld running at %s? set the address with --controller or "
                      "HCCTL_CONTROLLER",
                      url);
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

/* ---------------------------------------------------------------- finding the leader */

/*
 * Every request goes through leader_exchange (docs/hcctl.md "Several controllers"). A round
 * tries the last leader, then the list's controllers that answered last time, then those that
 * did not. A controller that cannot be reached before the request left (refused, no route, the
 * handshake failed) hands over to the next one, even for a POST: it was never sent. A standby's
 * 421 not_leader names the leader, and the request is sent there (the token added again by
 * hcctl: libcurl never follows a redirect here), at most HC_API_MAX_HOPS times in a row. A 503
 * no_leader (an election) makes hcctl try the rest of the round, then wait Retry-After (at most
 * HC_API_RETRY_MAX_MS) and try again, while the search's deadline (--timeout from the first
 * attempt) is not reached. Each attempt has the whole --timeout, as a request always had, and a
 * round tries every controller: a GET that timed out on a hung leader still reaches the next.
 * A request other than GET that failed after it may have reached a controller is never sent
 * again: its outcome is unknown. A standby that names a leader which cannot be reached, or
 * names itself, is taken for a failover under way (its view of the lease is stale, seconds at
 * most): waited out like an election, HC_API_FAILOVER_WAIT_MS a round.
 */
#define HC_API_MAX_HOPS 3
#define HC_API_RETRY_MIN_MS 100
#define HC_API_RETRY_MAX_MS 2000
/* A standby named a leader that cannot be reached, or named itself: its view is stale (the dead
 * leader's lease has not run out yet), so a failover is under way. */
#define HC_API_FAILOVER_WAIT_MS 500

/* One request as the search sends it, to one controller after another. */
struct exchange {
    const char *path;
    struct hc_http_call call; /* the caller's method, bearer, body and stream callbacks */
    const int *answered;      /* a stream's: set once its answer began (never sent again) */
};

/* The outcome of one round. */
struct round {
    struct hc_error err; /* the most telling failure so far (rank) */
    int rank;            /* 0 none, 1 unreachable, 2 timeout, 3 tls, 4 a controller's answer */
    int electing;        /* a controller answered no_leader */
    long wait_ms;        /* what it asked to wait */
};

static void round_note(struct round *r, const struct hc_error *err, int rank)
{
    if (rank > r->rank) {
        r->err = *err;
        r->rank = rank;
    }
}

/* Something in this round says a leader is being elected: wait wait_ms, then try again. */
static void round_electing(struct round *r, long wait_ms)
{
    if (!r->electing || wait_ms < r->wait_ms)
        r->wait_ms = wait_ms;
    r->electing = 1;
}

static int transport_rank(const struct hc_error *err)
{
    if (strcmp(err->code, HC_ERR_TLS) == 0)
        return 3;
    return strcmp(err->code, HC_ERR_TIMEOUT) == 0 ? 2 : 1;
}

/* The index of url in the list, or -1 (a leader a standby named). */
static int list_index(const struct hc_api_client *api, const char *url)
{
    for (size_t i = 0; i < api->list.n; i++)
        if (strcmp(api->list.url[i], url) == 0)
            return (int)i;
    return -1;
}

/* This round's order (see above); the URLs point into api. */
static size_t round_order(const struct hc_api_client *api,
                          const char *order[HC_CLI_MAX_CONTROLLERS + 1])
{
    size_t n = 0;
    if (api->leader[0])
        order[n++] = api->leader;
    for (int failed = 0; failed < 2; failed++)
        for (size_t i = 0; i < api->list.n; i++)
            if (api->failed[i] == failed && strcmp(api->list.url[i], api->leader) != 0)
                order[n++] = api->list.url[i];
    return n;
}

static void mark(struct hc_api_client *api, const char *base, int answered)
{
    int i = list_index(api, base);
    if (i >= 0)
        api->failed[i] = !answered;
    /* Only a change is written, and only a listed URL can be read back. */
    if (answered && api->list.n > 1 && i >= 0 && strcmp(api->leader, base) != 0)
        hc_cli_leader_cache_write(base);
    if (answered)
        snprintf(api->leader, sizeof(api->leader), "%s", base);
    else if (strcmp(base, api->leader) == 0)
        api->leader[0] = '\0';
    api->answered |= answered;
}

/* Sends x to base + path within timeout_ms. 0 when an answer came (x->call.resp), -1 else. */
static int send_once(struct hc_api_client *api, const char *base, struct exchange *x,
                     long timeout_ms)
{
    char url[HC_CLI_URL_MAX + 4096];
    snprintf(url, sizeof(url), "%s%s", base, x->path);
    x->call.url = url;
    x->call.timeout_ms = timeout_ms;
    hc_http_fanout(api->http, &x->call, 1, 1);
    x->call.url = NULL;
    return x->call.ok ? 0 : -1;
}

/* The leader a 421 answer names, checked like a configured URL, into next. 0, or -1 with err
 * when the answer names none or a bad one. */
static int named_leader(const struct exchange *x, const char *base, char *next,
                        struct hc_error *err)
{
    const json_t *e = json_object_get(x->call.resp.body, "error");
    const char *leader = json_string_value(json_object_get(e, "leader"));
    char from[HC_CLI_URL_MAX + 64];
    snprintf(from, sizeof(from), "the standby at %s", base);
    if (!leader || !leader[0]) {
        hc_error_set(err, HC_E(NOT_LEADER),
                     "%s %s: the controller at %s is not the leader and names none", x->call.method,
                     x->path, base);
        return hc_error_hint(err, "an HA controller's standby names its leader; see 'hcctl "
                                  "cluster status' and the controllers' logs");
    }
    if (hc_cli_controller_url_check(leader, from, next, err) < 0) {
        char why[sizeof(err->message)];
        snprintf(why, sizeof(why), "%s", err->message);
        hc_error_set_wire(err, 421, HC_ERR_NOT_LEADER, "%s %s: %s", x->call.method, x->path, why);
        return hc_error_hint(err, "the standby's advertised leader URL is wrong: check the "
                                  "controllers' --advertise/--listen settings");
    }
    return 0;
}

/* The code of an error answer ("" for anything else). */
static const char *answer_code(const struct hc_http_response *resp)
{
    const char *code =
        json_string_value(json_object_get(json_object_get(resp->body, "error"), "code"));
    return code ? code : "";
}

enum step { STEP_ANSWER, STEP_NEXT, STEP_FAIL };

/* One controller of a round, and the leaders it names: STEP_ANSWER with x->call.resp, or
 * STEP_NEXT (go on with the round, r noted), or STEP_FAIL with err (stop). */
static enum step try_controller(struct hc_api_client *api, const char *start, struct exchange *x,
                                struct round *r, struct hc_error *err)
{
    char base[HC_CLI_URL_MAX + 1], next[HC_CLI_URL_MAX + 1], trail[1024];
    int idempotent = strcmp(x->call.method, "GET") == 0;
    snprintf(base, sizeof(base), "%s", start);
    snprintf(trail, sizeof(trail), "%s", start);
    for (int hops = 0;; hops++) {
        if (send_once(api, base, x, (long)api->timeout_ms) < 0) {
            struct hc_error *e = &x->call.err;
            int retry = (!x->call.maybe_sent || idempotent) && !(x->answered && *x->answered) &&
                        !(x->call.stop && x->call.stop(&x->call)) &&
                        (!strcmp(e->code, HC_ERR_UNREACHABLE) || !strcmp(e->code, HC_ERR_TIMEOUT) ||
                         !strcmp(e->code, HC_ERR_TLS));
            mark(api, base, 0);
            if (!retry) {
                *err = *e;
                transport_error(api, base, err);
                if (!idempotent && x->call.maybe_sent)
                    hc_error_hint(err,
                                  "%s %s reached %s but its outcome is unknown, so hcctl did not "
                                  "send it again: see 'hcctl operation list' and 'hcctl events' "
                                  "before retrying",
                                  x->call.method, x->path, base);
                return STEP_FAIL;
            }
            round_note(r, e, transport_rank(e));
            if (hops > 0) /* the leader a standby named is gone */
                round_electing(r, HC_API_FAILOVER_WAIT_MS);
            return STEP_NEXT;
        }
        long status = x->call.resp.status;
        if (status == 503 && !strcmp(answer_code(&x->call.resp), HC_ERR_NO_LEADER)) {
            long s = x->call.resp.retry_after_s;
            long wait = s < 0 ? 1000 : s * 1000;
            struct hc_error e = {0};
            http_error(api, x->call.method, x->path, &x->call.resp, &e);
            round_note(r, &e, 4);
            wait = wait < HC_API_RETRY_MIN_MS ? HC_API_RETRY_MIN_MS : wait;
            round_electing(r, wait > HC_API_RETRY_MAX_MS ? HC_API_RETRY_MAX_MS : wait);
            hc_http_response_clear(&x->call.resp);
            return STEP_NEXT;
        }
        if (status != 421) {
            mark(api, base, 1);
            return STEP_ANSWER;
        }
        struct hc_error e = {0};
        int named = named_leader(x, base, next, &e);
        hc_http_response_clear(&x->call.resp);
        if (named < 0) {
            round_note(r, &e, 4);
            return STEP_NEXT;
        }
        if (strcmp(next, base) == 0) {
            hc_error_set(&e, HC_E(NOT_LEADER),
                         "%s %s: the controller at %s is not the leader and names itself",
                         x->call.method, x->path, base);
            round_note(r, &e, 4);
            round_electing(r, HC_API_FAILOVER_WAIT_MS);
            return STEP_NEXT;
        }
        size_t used = strlen(trail);
        snprintf(trail + used, sizeof(trail) - used, " -> %s", next);
        if (hops == HC_API_MAX_HOPS) {
            hc_error_set(err, HC_E(NOT_LEADER),
                         "%s %s: no leader after %d redirects, each controller naming another: "
                         "%s",
                         x->call.method, x->path, HC_API_MAX_HOPS, trail);
            hc_error_hint(err, "the controllers disagree on who leads: see GET /v1/ha on each "
                               "('hcctl cluster status') and their logs");
            return STEP_FAIL;
        }
        snprintf(base, sizeof(base), "%s", next);
    }
}

/* The search's end without an answer: the most telling failure of the last round (a round
 * tries at least one controller, and each that gives no answer is noted). */
static int search_failed(const struct hc_api_client *api, const struct round *r,
                         struct hc_error *err)
{
    *err = r->err;
    if (r->electing) {
        return hc_error_hint(err,
                             "no controller took the lead within %lld ms (--timeout): a failover "
                             "may still be under way; see 'hcctl cluster status' and try again",
                             (long long)api->timeout_ms);
    }
    if (r->rank < 4) {
        if (api->list.n > 1)
            hc_error_prefix(err, "none of the %zu controllers answered", api->list.n);
        transport_error(api, api->list.n > 1 ? NULL : api->list.url[0], err);
    }
    return -1;
}

/* Sends x to the leader: 0 with x->call.resp (any answer but 421 and 503 no_leader), or -1 with
 * err. */
static int leader_exchange(struct hc_api_client *api, struct exchange *x, struct hc_error *err)
{
    int64_t deadline = hc_mono_ms() + api->timeout_ms;
    for (;;) {
        const char *order[HC_CLI_MAX_CONTROLLERS + 1];
        char bases[HC_CLI_MAX_CONTROLLERS + 1][HC_CLI_URL_MAX + 1];
        size_t n = round_order(api, order);
        struct round r = {0};
        /* mark() rewrites api->leader while the round runs: the round keeps its own copy. */
        for (size_t i = 0; i < n; i++)
            snprintf(bases[i], sizeof(bases[i]), "%s", order[i]);
        for (size_t i = 0; i < n; i++) {
            enum step step = try_controller(api, bases[i], x, &r, err);
            if (step == STEP_ANSWER)
                return 0;
            if (step == STEP_FAIL)
                return -1;
        }
        if (!r.electing || hc_mono_ms() + r.wait_ms >= deadline)
            return search_failed(api, &r, err);
        hc_sleep_ms(r.wait_ms);
    }
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
    struct exchange x = {.path = path,
                         .call = {.method = method, .bearer = api->token, .body = body}};
    json_t *out = NULL;
    if (raw) {
        x.call.raw_body = raw->data ? raw->data : "";
        x.call.raw_len = raw->len;
        x.call.content_type = raw->content_type;
        x.call.headers = raw->headers;
    }
    if (leader_exchange(api, &x, err) < 0)
        return NULL;
    struct hc_http_response *resp = &x.call.resp;
    if (http_status)
        *http_status = resp->status;
    if (resp->status < 200 || resp->status > 299) {
        http_error(api, method, path, resp, err);
        goto cleanup;
    }
    if (resp->body)
        out = json_incref(resp->body);
    else if (resp->raw_len == 0)
        out = json_object();
    else
        hc_error_set_wire(err, (int)resp->status, HC_ERR_INVALID_JSON,
                          "%s %s: the controller's answer is not JSON", method, path);
cleanup:
    hc_http_response_clear(resp);
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
    int answered; /* bytes of a 200 arrived: the stream is never sent elsewhere */
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
    s->answered = 1;
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
    struct stream s = {on_line, stop, arg, NULL, 0, 0, 0, 0, 0};
    struct exchange x = {.path = path,
                         .answered = &s.answered,
                         .call = {.method = "GET",
                                  .bearer = api->token,
                                  .user = &s,
                                  .on_data = stream_data,
                                  .stop = stream_stop,
                                  .stream_idle_ms = idle_ms}};
    int rc = 0;
    if (leader_exchange(api, &x, err) < 0) {
        /* the stream's own end (on_line, stop) is no failure, whatever the transfer says */
        rc = s.too_long                       ? hc_error_set(err, HC_E(RESPONSE_TOO_LARGE),
                                                             "GET %s: a line of more than %d bytes", path,
                                                             HC_API_STREAM_LINE_MAX)
             : s.ended || (stop && stop(arg)) ? 0
                                              : -1;
    } else if (x.call.resp.status != 200) {
        http_error(api, "GET", path, &x.call.resp, err);
        rc = -1;
    }
    hc_http_response_clear(&x.call.resp);
    free(s.line);
    return rc;
}

int hc_api_client_transient(const struct hc_error *err)
{
    static const char *const codes[] = {HC_ERR_UNREACHABLE, HC_ERR_TIMEOUT, HC_ERR_NOT_LEADER,
                                        HC_ERR_NO_LEADER};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strcmp(err->code, codes[i]) == 0)
            return 1;
    return 0;
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
