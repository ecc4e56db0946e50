/* The agent's software and service endpoints, as C calls (see service_client.h). What the agent
 * says (reasons, details, versions) is copied through hc_text_clean: it ends up in operation
 * records, events and terminals, so no control characters and no UTF-8 cut in half. */
#include "controller/remote/service_client.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/remote/agent_client.h"

/* Calls the agent; *body receives the answer's JSON (new reference, may be NULL). */
static int call(const struct hc_svc_node *n, const char *method, const char *path,
                const json_t *req, json_t **body, struct hc_error *err)
{
    struct hc_http_response resp = {0};
    int rc = hc_agent_call(n->client, n->agent_url, method, path, req, n->timeout_ms, &resp, err);
    if (rc < 0 && !hc_agent_err_is_transport(err))
        hc_error_prefix(err, "node %s", n->name);
    if (body)
        *body = rc == 0 && resp.body ? json_incref(resp.body) : NULL;
    hc_http_response_clear(&resp);
    return rc;
}

/* A boolean the agent may name in more than one way ("ok_to_stop", "ok", "healthy"). */
static int answer_bool(const json_t *b, const char *key, const char *alt)
{
    const json_t *v = json_object_get(b, key);
    if (!json_is_boolean(v))
        v = json_object_get(b, alt);
    return json_is_true(v);
}

int hc_svc_ok_to_stop(const struct hc_svc_node *n, int *ok, char *reason, size_t len,
                      struct hc_error *err)
{
    json_t *b = NULL;
    if (call(n, "GET", "/v1/service/ok-to-stop", NULL, &b, err) < 0)
        return -1;
    *ok = answer_bool(b, "ok_to_stop", "ok");
    hc_text_clean(reason, len, hc_json_str(b, "reason", ""));
    json_decref(b);
    return 0;
}

int hc_svc_ok_to_stop_set(const struct hc_svc_node *n, const char *set, struct hc_svc_set_answer *a,
                          struct hc_error *err)
{
    json_t *b = NULL;
    char path[1200];
    if ((size_t)snprintf(path, sizeof(path), "/v1/service/ok-to-stop?nodes=%s", set) >=
        sizeof(path))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "the set of nodes is too long");
    if (call(n, "GET", path, NULL, &b, err) < 0)
        return -1;
    a->ok = answer_bool(b, "ok_to_stop", "ok");
    a->answered = json_is_true(json_object_get(b, "set"));
    a->set_blocks = hc_json_int(b, "set_blocks", 0);
    hc_text_clean(a->reason, sizeof(a->reason), hc_json_str(b, "reason", ""));
    json_decref(b);
    return 0;
}

int hc_svc_drain(const struct hc_svc_node *n, struct hc_error *err)
{
    return call(n, "POST", "/v1/service/drain", NULL, NULL, err);
}

int hc_svc_stop(const struct hc_svc_node *n, struct hc_error *err)
{
    return call(n, "POST", "/v1/service/stop", NULL, NULL, err);
}

int hc_svc_start(const struct hc_svc_node *n, struct hc_error *err)
{
    return call(n, "POST", "/v1/service/start", NULL, NULL, err);
}

int hc_svc_health(const struct hc_svc_node *n, int *healthy, char *detail, size_t len,
                  struct hc_error *err)
{
    json_t *b = NULL;
    if (call(n, "GET", "/v1/service/health", NULL, &b, err) < 0)
        return -1;
    *healthy = answer_bool(b, "healthy", "ok");
    hc_text_clean(detail, len, hc_json_str(b, "detail", hc_json_str(b, "reason", "")));
    json_decref(b);
    return 0;
}

int hc_svc_resync_pending(const struct hc_svc_node *n, int64_t *pending, struct hc_error *err)
{
    json_t *b = NULL;
    if (call(n, "GET", "/v1/service/resync", NULL, &b, err) < 0)
        return -1;
    *pending = hc_json_int(b, "pending", 0);
    json_decref(b);
    return 0;
}

int hc_sw_state(const struct hc_svc_node *n, struct hc_sw_state *st, struct hc_error *err)
{
    json_t *b = NULL;
    if (call(n, "GET", "/v1/software", NULL, &b, err) < 0)
        return -1;
    const json_t *svc = json_object_get(b, "service");
    hc_text_clean(st->current, sizeof(st->current), hc_json_str(b, "current", ""));
    hc_text_clean(st->previous, sizeof(st->previous), hc_json_str(b, "previous", ""));
    hc_text_clean(st->service, sizeof(st->service), hc_json_str(svc, "state", ""));
    json_decref(b);
    return 0;
}

int hc_sw_stage(const struct hc_svc_node *n, const char *version, const char *url,
                const char *token, const char *sha256, const char *signature, struct hc_error *err)
{
    /* Without a url the agent fetches from the controller URL it enrolled with: the one it
     * already trusts by name, whatever address the controller listens on. */
    json_t *req = json_pack("{s:s, s:s?, s:s, s:s, s:s}", "version", version, "url", url, "token",
                            token, "sha256", sha256, "signature", signature);
    int rc = call(n, "POST", "/v1/software/stage", req, NULL, err);
    json_decref(req);
    return rc;
}

int hc_agent_sw_stage_agent(const struct hc_svc_node *n, const char *version, const char *url,
                            const char *token, const char *sha256, const char *signature,
                            struct hc_error *err)
{
    json_t *req = json_pack("{s:s, s:s?, s:s, s:s, s:s}", "version", version, "url", url, "token",
                            token, "sha256", sha256, "signature", signature);
    int rc = call(n, "POST", "/v1/agent/stage", req, NULL, err);
    json_decref(req);
    return rc;
}

int hc_agent_sw_activate_agent(const struct hc_svc_node *n, const char *version,
                               long confirm_timeout_ms, struct hc_error *err)
{
    json_t *req = json_pack("{s:s, s:I}", "version", version, "confirm_timeout_ms",
                            (json_int_t)confirm_timeout_ms);
    int rc = call(n, "POST", "/v1/agent/activate", req, NULL, err);
    json_decref(req);
    return rc;
}

int hc_agent_sw_status(const struct hc_svc_node *n, struct hc_agent_state *st, struct hc_error *err)
{
    json_t *b = NULL;
    memset(st, 0, sizeof(*st));
    if (call(n, "GET", "/v1/status", NULL, &b, err) < 0)
        return -1;
    const json_t *up = json_object_get(b, "agent_upgrade"), *svc = json_object_get(b, "service");
    hc_text_clean(st->version, sizeof(st->version), hc_json_str(b, "agent_version", ""));
    st->api_version = (int)hc_json_int(b, "api_version", 1);
    st->service_pid = json_is_integer(json_object_get(svc, "pid"))
                          ? (long)json_integer_value(json_object_get(svc, "pid"))
                          : 0;
    hc_text_clean(st->service_state, sizeof(st->service_state), hc_json_str(svc, "state", ""));
    hc_text_clean(st->upgrade_to, sizeof(st->upgrade_to), hc_json_str(up, "to_version", ""));
    hc_text_clean(st->upgrade_state, sizeof(st->upgrade_state), hc_json_str(up, "state", ""));
    hc_text_clean(st->upgrade_reason, sizeof(st->upgrade_reason), hc_json_str(up, "reason", ""));
    json_decref(b);
    return 0;
}

int hc_sw_activate(const struct hc_svc_node *n, const char *version, int start,
                   struct hc_error *err)
{
    json_t *req = json_pack("{s:s, s:b}", "version", version, "start", start);
    int rc = call(n, "POST", "/v1/software/activate", req, NULL, err);
    json_decref(req);
    return rc;
}

int hc_sw_rollback(const struct hc_svc_node *n, struct hc_error *err)
{
    return call(n, "POST", "/v1/software/rollback", NULL, NULL, err);
}

int hc_cfg_push(const struct hc_svc_node *n, int64_t revision, const json_t *overrides,
                json_t **answer, struct hc_error *err)
{
    return hc_cfg_push_for(n, NULL, revision, overrides, answer, err);
}

int hc_cfg_push_for(const struct hc_svc_node *n, const char *version, int64_t revision,
                    const json_t *overrides, json_t **answer, struct hc_error *err)
{
    json_t *req = json_pack("{s:I, s:O, s:s*}", "revision", (json_int_t)revision, "values",
                            overrides, "version", version);
    int rc = req ? call(n, "PUT", "/v1/service/settings", req, answer, err)
                 : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_decref(req);
    if (rc == 0 && !json_is_object(*answer)) {
        json_decref(*answer);
        *answer = NULL;
        rc = hc_error_set(err, HC_E(AGENT_ERROR), "node %s: the settings answer is not an object",
                          n->name);
    }
    return rc;
}

int hc_cfg_get(const struct hc_svc_node *n, json_t **answer, struct hc_error *err)
{
    if (call(n, "GET", "/v1/service/settings", NULL, answer, err) < 0)
        return -1;
    if (json_is_object(json_object_get(*answer, "values")))
        return 0;
    json_decref(*answer);
    *answer = NULL;
    return hc_error_set(err, HC_E(AGENT_ERROR), "node %s: the settings answer has no values",
                        n->name);
}
