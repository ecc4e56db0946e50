/* Tests for the controller API (controller/api/api.c and res_*.c) over real TLS on loopback: a data
 * dir made by hcctld's own init code, the real server on 127.0.0.1 port 0 in a thread, driven by
 * hc_http_client (and plain libcurl where a malformed body is needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/https_client.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/init.h"
#include "controller/ops/op_node_remove.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

struct fixture {
    char *dir;
    struct hc_controller ctl;
    struct hc_init_result init;
    struct event_base *base;
    struct hc_api *api;
    pthread_t thread;
    struct hc_http_client *client;
    struct hc_db *db; /* the test's own connection, to look at and age rows */
    char viewer[HC_AUTH_TOKEN_TEXT_MAX];
    char url[64];
};

static void *serve(void *arg)
{
    event_base_dispatch(arg);
    return NULL;
}

static int make_dirs(struct fixture *f)
{
    if (!(f->dir = hc_test_mkdtemp("test_api")))
        return -1;
    return 0;
}

/* hcctld init into DIR/ctl, with the CLI config kept inside the temp dir. */
static int init_data_dir(struct fixture *f, struct hc_error *err)
{
    char *data = hc_path_join(f->dir, "ctl");
    char *cli = hc_path_join(f->dir, "cli/config.json");
    struct hc_init_options o = {
        .data_dir = data, .listen = "127.0.0.1:7443", .cluster_name = "apitest", .cli_config = cli};
    int rc = hc_init_run(&o, &f->init, err);
    if (rc == 0)
        rc = hc_controller_load(&f->ctl, data, err);
    free(data);
    free(cli);
    return rc;
}

static int start_server(struct fixture *f, struct hc_error *err)
{
    f->ctl.started_mono_ms = hc_mono_ms();
    f->base = event_base_new();
    f->ctl.base = f->base;
    f->api = f->base ? hc_api_new(&f->ctl, f->base, err) : NULL;
    if (!f->api || hc_api_listen(f->api, "127.0.0.1", 0, err) < 0)
        return -1;
    snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%d", hc_api_port(f->api));
    return pthread_create(&f->thread, NULL, serve, f->base) == 0 ? 0 : -1;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct hc_error err = {0};
    if (!f || make_dirs(f) < 0 || init_data_dir(f, &err) < 0 || start_server(f, &err) < 0)
        goto fail;
    struct hc_tls_client_config tls = {.ca_file = f->ctl.ca_file};
    f->client = hc_http_client_new(&tls, &err);
    f->db = f->client ? hc_db_open(f->ctl.db_path, &err) : NULL;
    if (!f->db ||
        hc_auth_token_create(f->db, "viewer", HC_AUTH_ROLE_READONLY, 0, f->viewer, &err) < 0)
        goto fail;
    *state = f;
    return 0;
fail:
    fprintf(stderr, "setup: %s\n", err.message);
    return -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    event_base_loopexit(f->base, NULL);
    pthread_join(f->thread, NULL);
    hc_api_free(f->api);
    event_base_free(f->base);
    hc_http_client_free(f->client);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* One request on client; asserts the status and returns the body (new reference). body is
 * stolen. */
static json_t *call_on(struct fixture *f, struct hc_http_client *client, const char *method,
                       const char *path, const char *token, json_t *body, long want)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", f->url, path);
    struct hc_http_response resp = {0};
    struct hc_error err = {0};
    int rc = hc_http_request(client, method, url, token, body, 10000, &resp, &err);
    json_decref(body);
    if (rc != 0)
        fail_msg("%s %s: %s", method, path, err.message);
    if (resp.status != want)
        fail_msg("%s %s: status %ld, want %ld: %s", method, path, resp.status, want,
                 resp.raw ? resp.raw : "");
    json_t *out = json_incref(resp.body);
    hc_http_response_clear(&resp);
    if (!out)
        fail_msg("%s %s: body is not JSON", method, path);
    return out;
}

static json_t *call(struct fixture *f, const char *method, const char *path, const char *token,
                    json_t *body, long want)
{
    return call_on(f, f->client, method, path, token, body, want);
}

static const char *admin(struct fixture *f)
{
    return f->init.admin_token;
}

/* Asserts the one error shape with the given code; returns the message. */
static const char *assert_error(json_t *body, const char *code)
{
    json_t *e = json_object_get(body, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    const char *message = json_string_value(json_object_get(e, "message"));
    assert_non_null(message);
    assert_true(message[0] != '\0');
    return message;
}

static const char *error_hint(json_t *body)
{
    return json_string_value(json_object_get(json_object_get(body, "error"), "hint"));
}

static void call_error(struct fixture *f, const char *method, const char *path, const char *token,
                       json_t *body, long want, const char *code)
{
    json_t *out = call(f, method, path, token, body, want);
    assert_error(out, code);
    json_decref(out);
}

/* api.call events (oldest first) as the admin sees them. */
static json_t *api_calls(struct fixture *f)
{
    json_t *out = call(f, "GET", "/v1/events?type=api.call&limit=1000", admin(f), NULL, 200);
    json_t *events = json_incref(json_object_get(out, "events"));
    json_decref(out);
    return events;
}

/* Number of api.call events matching actor, method, path and status. */
static int count_calls(struct fixture *f, const char *actor, const char *method, const char *path,
                       int status)
{
    json_t *events = api_calls(f);
    size_t i;
    json_t *ev;
    int n = 0;
    json_array_foreach(events, i, ev)
    {
        json_t *d = json_object_get(ev, "details");
        if (strcmp(json_string_value(json_object_get(ev, "actor")), actor) == 0 &&
            strcmp(json_string_value(json_object_get(d, "method")), method) == 0 &&
            strcmp(json_string_value(json_object_get(d, "path")), path) == 0 &&
            json_integer_value(json_object_get(d, "status")) == status)
            n++;
    }
    json_decref(events);
    return n;
}

static char *new_csr(const char *cn)
{
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509_REQ *req = key ? hc_pki_csr_new(key, cn, &err) : NULL;
    char *pem = req ? hc_pki_csr_to_pem(req) : NULL;
    X509_REQ_free(req);
    EVP_PKEY_free(key);
    if (!pem)
        fail_msg("csr: %s", err.message);
    return pem;
}

/* A new join token's text (caller frees). */
static char *join_token(struct fixture *f, int ttl)
{
    json_t *out =
        call(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:i}", "ttl_seconds", ttl), 201);
    char *text = strdup(json_string_value(json_object_get(out, "token")));
    json_decref(out);
    return text;
}

static json_t *enroll_body(const char *token, const char *name, const char *agent_url)
{
    char *csr = new_csr(*name ? name : "unnamed");
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s}", "token", token, "csr_pem", csr, "name",
                             name, "agent_url", agent_url, "hostname", "host-of-node");
    free(csr);
    return body;
}

/* POST /v1/enroll from source (an address on lo), as an agent enrolls from its own address. */
static json_t *enroll_from(struct fixture *f, const char *source, json_t *body, long want)
{
    struct hc_error err = {0};
    struct hc_tls_client_config tls = {.ca_file = f->ctl.ca_file, .source_address = source};
    struct hc_http_client *client = hc_http_client_new(&tls, &err);
    if (!client)
        fail_msg("enroll client: %s", err.message);
    json_t *out = call_on(f, client, "POST", "/v1/enroll", NULL, body, want);
    hc_http_client_free(client);
    return out;
}

/* Enrolls from the agent URL's host when it is a loopback address (else from 127.0.0.1). */
static json_t *enroll(struct fixture *f, const char *token, const char *name, const char *url,
                      long want)
{
    char host[64] = "127.0.0.1";
    sscanf(url, "https://%63[0-9.]:", host);
    return enroll_from(f, host, enroll_body(token, name, url), want);
}

static void test_public_routes_and_missing_token(void **state)
{
    struct fixture *f = *state;
    json_t *v = call(f, "GET", "/v1/version", NULL, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(v, "version")), HC_VERSION);
    assert_string_equal(json_string_value(json_object_get(v, "api")), "v1");
    json_decref(v);

    json_t *ca = call(f, "GET", "/v1/ca", NULL, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(ca, "ca_fingerprint")),
                        f->init.ca_fingerprint);
    assert_non_null(strstr(json_string_value(json_object_get(ca, "ca_pem")), "BEGIN CERTIFICATE"));
    json_decref(ca);

    json_t *out = call(f, "GET", "/v1/nodes", NULL, NULL, 401);
    assert_string_equal(assert_error(out, "unauthorized"), "invalid or missing API token");
    assert_string_equal(error_hint(out), "check --token, HCCTL_TOKEN or the config file");
    json_decref(out);
    char forged[200];
    snprintf(forged, sizeof(forged), "hct1.0000000000000000.%064d", 0);
    call_error(f, "GET", "/v1/cluster", forged, NULL, 401, "unauthorized");
    call_error(f, "GET", "/v1/events", "nonsense", NULL, 401, "unauthorized");
    call_error(f, "POST", "/v1/join-tokens", NULL, json_object(), 401, "unauthorized");
    /* a refused mutation is audited too, without a name to give */
    assert_int_equal(count_calls(f, "anonymous", "POST", "/v1/join-tokens", 401), 1);
}

/* Anyone reaching the port can make refused calls: their audit records are capped per minute
 * and a long path is cut, so the events table cannot be grown at will. */
static void test_anonymous_audit_is_bounded(void **state)
{
    struct fixture *f = *state;
    char path[400];
    memset(path, 'x', sizeof(path));
    memcpy(path, "/v1/", 4);
    path[sizeof(path) - 1] = '\0';
    call_error(f, "POST", path, NULL, json_object(), 404, "not_found");
    json_t *events = api_calls(f);
    const char *recorded = json_string_value(
        json_object_get(json_object_get(json_array_get(events, 0), "details"), "path"));
    assert_int_equal(strlen(recorded), 203);
    assert_non_null(strstr(recorded, "xxx..."));
    json_decref(events);
    for (int i = 0; i < 70; i++)
        call_error(f, "POST", "/v1/join-tokens", NULL, json_object(), 401, "unauthorized");
    assert_int_equal(count_calls(f, "anonymous", "POST", "/v1/join-tokens", 401), 19);
    /* calls with a valid token are all recorded */
    for (int i = 0; i < 3; i++)
        json_decref(call(f, "POST", "/v1/join-tokens", admin(f), json_object(), 201));
    assert_int_equal(count_calls(f, "admin", "POST", "/v1/join-tokens", 201), 3);
}

static void test_readonly_token(void **state)
{
    struct fixture *f = *state;
    json_t *nodes = call(f, "GET", "/v1/nodes", f->viewer, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(nodes, "nodes")), 0);
    json_decref(nodes);
    json_decref(call(f, "GET", "/v1/cluster", f->viewer, NULL, 200));

    json_t *out = call(f, "POST", "/v1/join-tokens", f->viewer, json_object(), 403);
    assert_non_null(strstr(assert_error(out, "forbidden"), "viewer"));
    json_decref(out);
    call_error(f, "DELETE", "/v1/nodes/n1", f->viewer, NULL, 403, "forbidden");
    call_error(f, "POST", "/v1/operations/op-000000000000/abort", f->viewer, NULL, 403,
               "forbidden");

    assert_int_equal(count_calls(f, "viewer", "POST", "/v1/join-tokens", 403), 1);
    assert_int_equal(count_calls(f, "viewer", "DELETE", "/v1/nodes/n1", 403), 1);
    json_t *created = call(f, "GET", "/v1/events?type=token.join_created", admin(f), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(created, "events")), 0);
    json_decref(created);
}

static void assert_node_shape(json_t *node)
{
    static const char *const keys[] = {
        "name",          "address",          "agent_url",       "hostname",      "state",
        "health",        "health_detail",    "maintenance",     "agent_version", "software_version",
        "service_state", "uptime_seconds",   "poll_latency_ms", "last_seen",     "joined_at",
        "cert_serial",   "config_revision",  "config_state",    "config_detail", "cert_not_after",
        "cert_state",    "cert_renew_error", "api_version",     "api_compat",    "failure_domain"};
    assert_int_equal(json_object_size(node), HC_ARRAY_LEN(keys));
    for (size_t i = 0; i < HC_ARRAY_LEN(keys); i++)
        if (!json_object_get(node, keys[i]))
            fail_msg("NODE has no '%s'", keys[i]);
}

/* The certificate in an enroll reply: signed by the cluster CA, CN = the node name. */
static void assert_agent_cert(struct fixture *f, json_t *reply, const char *name)
{
    struct hc_error err = {0};
    X509 *cert = hc_pki_cert_from_pem(json_string_value(json_object_get(reply, "cert_pem")), &err);
    X509 *ca = hc_pki_cert_load(f->ctl.ca_file, &err);
    assert_non_null(cert);
    assert_non_null(ca);
    assert_int_equal(hc_pki_verify(ca, cert, &err), 0);
    char cn[128];
    assert_int_equal(hc_pki_cert_cn(cert, cn, sizeof(cn)), 0);
    assert_string_equal(cn, name);
    X509_free(cert);
    X509_free(ca);
}

static void test_join_token_and_enroll_once(void **state)
{
    struct fixture *f = *state;
    json_t *jt =
        call(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:i}", "ttl_seconds", 600), 201);
    const char *token = json_string_value(json_object_get(jt, "token"));
    assert_true(strncmp(token, "hcj1.", 5) == 0);
    assert_string_equal(json_string_value(json_object_get(jt, "ca_fingerprint")),
                        f->init.ca_fingerprint);
    assert_non_null(strstr(token, f->init.ca_fingerprint));
    assert_non_null(strstr(token, json_string_value(json_object_get(jt, "id"))));
    assert_int_equal(strlen(json_string_value(json_object_get(jt, "expires_at"))), 24);

    json_t *r = enroll(f, token, "n1", "https://127.0.0.2:7444", 201);
    json_t *node = json_object_get(r, "node");
    assert_node_shape(node);
    assert_string_equal(json_string_value(json_object_get(node, "name")), "n1");
    assert_string_equal(json_string_value(json_object_get(node, "address")), "127.0.0.2");
    assert_string_equal(json_string_value(json_object_get(node, "agent_url")),
                        "https://127.0.0.2:7444");
    assert_string_equal(json_string_value(json_object_get(node, "hostname")), "host-of-node");
    assert_string_equal(json_string_value(json_object_get(node, "health")), "unknown");
    assert_true(json_is_null(json_object_get(node, "last_seen")));
    assert_string_equal(json_string_value(json_object_get(r, "controller_client_cn")),
                        HC_CONTROLLER_CLIENT_CN);
    assert_non_null(strstr(json_string_value(json_object_get(r, "ca_pem")), "BEGIN CERTIFICATE"));
    assert_agent_cert(f, r, "n1");
    json_decref(r);

    /* the same token again, even for another name: refused without saying why */
    json_t *again = enroll(f, token, "n2", "https://127.0.0.3:7444", 401);
    assert_string_equal(assert_error(again, "token_invalid"),
                        "join token is invalid, used or expired");
    json_decref(again);
    json_decref(jt);

    json_t *list = call(f, "GET", "/v1/nodes", f->viewer, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(list, "nodes")), 1);
    json_decref(list);
    json_t *shown = call(f, "GET", "/v1/nodes/n1", f->viewer, NULL, 200);
    assert_node_shape(json_object_get(shown, "node"));
    assert_true(json_is_array(json_object_get(shown, "interfaces")));
    json_decref(shown);
    json_t *missing = call(f, "GET", "/v1/nodes/n2", f->viewer, NULL, 404);
    assert_string_equal(assert_error(missing, "not_found"), "node 'n2' not found");
    assert_string_equal(error_hint(missing), "see 'hcctl node list'");
    json_decref(missing);

    assert_int_equal(count_calls(f, "n1", "POST", "/v1/enroll", 201), 1);
    assert_int_equal(count_calls(f, "anonymous", "POST", "/v1/enroll", 401), 1);
    assert_int_equal(count_calls(f, "admin", "POST", "/v1/join-tokens", 201), 1);
    json_t *joined = call(f, "GET", "/v1/events?type=node.joined&node=n1", admin(f), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(joined, "events")), 1);
    json_decref(joined);
}

static void test_enroll_refusals_keep_the_token(void **state)
{
    struct fixture *f = *state;
    char *first = join_token(f, 600), *second = join_token(f, 600);
    json_decref(enroll(f, first, "n1", "https://127.0.0.2:7444", 201));

    json_t *dup = enroll(f, second, "n1", "https://127.0.0.3:7444", 409);
    assert_error(dup, "conflict");
    assert_string_equal(error_hint(dup), "choose another --name or remove the node first");
    json_decref(dup);

    static const char *const bad_names[] = {
        "N1",  "-n", "n 1",
        "n/1", "",   "a123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad_names); i++)
        call_error(f, "POST", "/v1/enroll", NULL,
                   enroll_body(second, bad_names[i], "https://127.0.0.3:7444"), 400,
                   "invalid_argument");
    static const char *const bad_urls[] = {"http://127.0.0.3:7444",   "https://127.0.0.3",
                                           "https://127.0.0.3:99999", "https://a b:1",
                                           "https://h:1/path",        "https://u@h:1"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad_urls); i++)
        call_error(f, "POST", "/v1/enroll", NULL, enroll_body(second, "n2", bad_urls[i]), 400,
                   "invalid_argument");
    call_error(f, "POST", "/v1/enroll", NULL,
               json_pack("{s:s, s:s, s:s, s:s}", "token", second, "csr_pem", "not a csr", "name",
                         "n2", "agent_url", "https://127.0.0.3:7444"),
               400, "invalid_argument");
    call_error(f, "POST", "/v1/enroll", NULL,
               json_pack("{s:s, s:s, s:s}", "token", second, "name", "n2", "agent_url",
                         "https://127.0.0.3:7444"),
               400, "invalid_argument");
    call_error(f, "POST", "/v1/enroll", NULL, enroll_body("hcj1.0.0.0", "n2", "https://h:1"), 401,
               "token_invalid");

    /* none of that used the second token */
    json_decref(enroll(f, second, "n2", "https://127.0.0.3:7444", 201));
    /* a name is recorded as the address only from a token minted for it */
    json_t *named = call(f, "POST", "/v1/join-tokens", admin(f),
                         json_pack("{s:s}", "address", "node3.example"), 201);
    json_decref(enroll(f, json_string_value(json_object_get(named, "token")), "n3",
                       "https://node3.example:7444", 201));
    json_decref(named);
    json_t *n3 = call(f, "GET", "/v1/nodes/n3", admin(f), NULL, 200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(n3, "node"), "address")),
                        "node3.example");
    json_decref(n3);
    free(first);
    free(second);
}

/* The attacks of issue 12 item 1, each refused with the token left unused for a real join. */
static void test_enroll_identity_is_the_controllers_choice(void **state)
{
    struct fixture *f = *state;
    char *token = join_token(f, 600);
    /* names the event log or the agents give to others */
    static const char *const reserved[] = {"hcctld-client", "controller", "admin", "anonymous",
                                           "op-0123456789ab"};
    for (size_t i = 0; i < HC_ARRAY_LEN(reserved); i++) {
        json_t *r = enroll(f, token, reserved[i], "https://127.0.0.4:7444", 400);
        assert_non_null(strstr(assert_error(r, "invalid_argument"), "reserved"));
        json_decref(r);
    }
    /* an API token's name */
    json_t *r = enroll(f, token, "viewer", "https://127.0.0.4:7444", 400);
    assert_non_null(strstr(assert_error(r, "invalid_argument"), "API token"));
    json_decref(r);
    /* the controller's own address (a certificate for it could stand in for the controller) */
    r = enroll(f, token, "fake", "https://127.0.0.1:7444", 409);
    assert_string_equal(assert_error(r, "conflict"), "address '127.0.0.1' is the controller's");
    json_decref(r);
    r = enroll_from(f, "127.0.0.1", enroll_body(token, "fake", "https://localhost:7444"), 403);
    assert_error(r, "forbidden"); /* a name is never the source address */
    json_decref(r);
    /* an address the request does not come from */
    r = enroll_from(f, "127.0.0.5", enroll_body(token, "n5", "https://127.0.0.4:7444"), 403);
    assert_non_null(strstr(assert_error(r, "forbidden"), "not the address this request came from"));
    json_decref(r);

    /* a real node, then a phantom with its URL and with its address */
    json_decref(enroll(f, token, "real", "https://127.0.0.4:7444", 201));
    char *second = join_token(f, 600);
    r = enroll(f, second, "phantom", "https://127.0.0.4:7444", 409);
    assert_string_equal(assert_error(r, "conflict"), "address '127.0.0.4' belongs to node 'real'");
    json_decref(r);
    r = enroll(f, second, "phantom", "https://127.0.0.4:9999", 409);
    assert_error(r, "conflict");
    json_decref(r);
    json_t *list = call(f, "GET", "/v1/nodes", admin(f), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(list, "nodes")), 1);
    json_decref(list);
    /* the refusals left the second token unused */
    json_decref(enroll(f, second, "n6", "https://127.0.0.6:7444", 201));
    free(token);
    free(second);
}

/* A token minted for one node enrolls that node only: address and name are the token's. */
static void test_bound_join_token(void **state)
{
    struct fixture *f = *state;
    json_t *jt = call(f, "POST", "/v1/join-tokens", admin(f),
                      json_pack("{s:s, s:s}", "address", "127.0.0.7", "name", "n7"), 201);
    const char *token = json_string_value(json_object_get(jt, "token"));
    assert_string_equal(json_string_value(json_object_get(jt, "address")), "127.0.0.7");
    json_t *r = enroll(f, token, "n7", "https://127.0.0.8:7444", 403);
    assert_string_equal(assert_error(r, "forbidden"),
                        "this join token is for address '127.0.0.7', not '127.0.0.8'");
    json_decref(r);
    r = enroll(f, token, "other", "https://127.0.0.7:7444", 403);
    assert_error(r, "forbidden");
    json_decref(r);
    /* from any source (NAT): the address is the token's */
    json_decref(
        enroll_from(f, "127.0.0.9", enroll_body(token, "n7", "https://127.0.0.7:7444"), 201));
    json_decref(jt);
    call_error(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:s}", "name", "controller"),
               400, "invalid_argument");
    call_error(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:s}", "address", "a b"), 400,
               "invalid_argument");
}

/* A join whose answer never reached the agent: the agent joins again with a new token, and the
 * never-seen row is replaced, its certificate revoked; a seen node is never replaced. */
static void test_ghost_node_is_replaced(void **state)
{
    struct fixture *f = *state;
    char *t1 = join_token(f, 600), *t2 = join_token(f, 600), *t3 = join_token(f, 600);
    json_t *first = enroll(f, t1, "g1", "https://127.0.0.10:7444", 201);
    const char *old_serial =
        json_string_value(json_object_get(json_object_get(first, "node"), "cert_serial"));
    json_t *again = enroll(f, t2, "g1", "https://127.0.0.10:7444", 201);
    assert_string_not_equal(
        json_string_value(json_object_get(json_object_get(again, "node"), "cert_serial")),
        old_serial);
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT node_name FROM revoked_certs WHERE "
                                    "serial = ?",
                                    "s", old_serial);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    /* once the poller has seen it, the name is taken for good */
    assert_int_equal(hc_db_run(f->db, &err, "UPDATE nodes SET last_seen = 1 WHERE name = 'g1'", ""),
                     1);
    json_t *r = enroll(f, t3, "g1", "https://127.0.0.10:7444", 409);
    assert_error(r, "conflict");
    json_decref(r);
    json_decref(first);
    json_decref(again);
    free(t1);
    free(t2);
    free(t3);
}

/* hcctl token list|create|revoke|rotate: admin only, no secret ever listed, the last admin
 * token kept, a rotated token's old text dead at once. */
static void test_token_routes(void **state)
{
    struct fixture *f = *state;
    call_error(f, "GET", "/v1/tokens", f->viewer, NULL, 403, "forbidden");
    json_t *made =
        call(f, "POST", "/v1/tokens", admin(f),
             json_pack("{s:s, s:s, s:i}", "name", "ci", "role", "admin", "ttl_seconds", 3600), 201);
    char *ci = strdup(hc_json_str(made, "token", ""));
    char *ci_id = strdup(hc_json_str(made, "id", ""));
    assert_non_null(json_object_get(made, "expires_at"));
    json_decref(made);
    call_error(f, "POST", "/v1/tokens", admin(f), json_pack("{s:s}", "name", "anonymous"), 400,
               "invalid_argument");
    call_error(f, "POST", "/v1/tokens", admin(f), json_pack("{s:s}", "name", "ci"), 409,
               "conflict");
    call_error(f, "POST", "/v1/tokens", admin(f),
               json_pack("{s:s, s:s}", "name", "x", "role", "root"), 400, "invalid_argument");
    char *jt = join_token(f, 600);
    free(jt);

    json_t *list = call(f, "GET", "/v1/tokens", ci, NULL, 200);
    char *dump = json_dumps(list, 0);
    assert_null(strstr(dump, "secret"));
    assert_null(strstr(dump, "hct1."));
    free(dump);
    size_t i, api = 0, join = 0;
    json_t *t;
    json_array_foreach(json_object_get(list, "tokens"), i, t)
    {
        api += !strcmp(hc_json_str(t, "kind", ""), "api");
        join += !strcmp(hc_json_str(t, "kind", ""), "join");
    }
    assert_int_equal(api, 3); /* admin, viewer, ci */
    assert_int_equal(join, 1);
    json_decref(list);

    /* rotate: same id, new text; the old text stops working */
    json_t *rot = call(f, "POST", "/v1/tokens/ci/rotate", admin(f), json_object(), 200);
    assert_string_equal(hc_json_str(rot, "id", ""), ci_id);
    char *ci2 = strdup(hc_json_str(rot, "token", ""));
    assert_string_not_equal(ci2, ci);
    json_decref(rot);
    call_error(f, "GET", "/v1/nodes", ci, NULL, 401, "unauthorized");
    json_decref(call(f, "GET", "/v1/nodes", ci2, NULL, 200));

    /* revoke by name: the token stops working; the admin token is then the last one */
    json_decref(call(f, "DELETE", "/v1/tokens/ci", admin(f), NULL, 200));
    call_error(f, "GET", "/v1/nodes", ci2, NULL, 401, "unauthorized");
    call_error(f, "DELETE", "/v1/tokens/ci", admin(f), NULL, 404, "not_found");
    json_t *r = call(f, "DELETE", "/v1/tokens/admin", admin(f), NULL, 409);
    assert_non_null(strstr(assert_error(r, "conflict"), "last admin token"));
    json_decref(r);
    json_decref(call(f, "GET", "/v1/nodes", admin(f), NULL, 200));
    free(ci);
    free(ci2);
    free(ci_id);
}

/* The token handed to agents for staging reads its one bundle, nothing else, and is gone with
 * its operation. */
static void test_scoped_staging_token(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    assert_int_equal(hc_auth_token_create_scoped(f->db, "stage-op-1", "bundle:1.1", "op-1",
                                                 hc_now_ms() + 60000, text, &err),
                     0);
    call_error(f, "GET", "/v1/nodes", text, NULL, 403, "forbidden");
    call_error(f, "GET", "/v1/software/1.0/bundle", text, NULL, 403, "forbidden");
    call_error(f, "GET", "/v1/software/1.1/bundle", text, NULL, 404, "not_found");
    call_error(f, "GET", "/v1/software/1.1", text, NULL, 404, "not_found");
    assert_int_equal(hc_auth_scoped_tokens_delete(f->db, "op-2", &err), 0);
    assert_int_equal(hc_auth_scoped_tokens_delete(f->db, "op-1", &err), 1);
    call_error(f, "GET", "/v1/software/1.1/bundle", text, NULL, 401, "unauthorized");
    assert_true(hc_auth_scope_allows("", "DELETE", "/v1/nodes/n1"));
    assert_false(hc_auth_scope_allows("bundle:1.1", "GET", "/v1/software/1.1/bundle/x"));
    assert_false(hc_auth_scope_allows("bundle:1.1", "DELETE", "/v1/software/1.1"));
    assert_false(hc_auth_scope_allows("other:1.1", "GET", "/v1/software/1.1"));
}

static void test_expired_tokens(void **state)
{
    struct fixture *f = *state;
    json_t *jt =
        call(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:i}", "ttl_seconds", 1), 201);
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err, "UPDATE tokens SET expires_at = ? WHERE id = ?", "is",
                               hc_now_ms() - 1, json_string_value(json_object_get(jt, "id"))),
                     1);
    json_t *r = enroll(f, json_string_value(json_object_get(jt, "token")), "n1",
                       "https://127.0.0.2:7444", 401);
    assert_string_equal(assert_error(r, "token_invalid"), "join token is invalid, used or expired");
    json_decref(r);
    json_decref(jt);

    char old[HC_AUTH_TOKEN_TEXT_MAX];
    assert_int_equal(
        hc_auth_token_create(f->db, "old", HC_AUTH_ROLE_ADMIN, hc_now_ms() - 1000, old, &err), 0);
    call_error(f, "GET", "/v1/nodes", old, NULL, 401, "unauthorized");
}

static void test_join_token_ttl(void **state)
{
    struct fixture *f = *state;
    call_error(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:i}", "ttl_seconds", 0), 400,
               "invalid_argument");
    call_error(f, "POST", "/v1/join-tokens", admin(f),
               json_pack("{s:i}", "ttl_seconds", 7 * 86400 + 1), 400, "invalid_argument");
    call_error(f, "POST", "/v1/join-tokens", admin(f), json_pack("{s:s}", "ttl_seconds", "1h"), 400,
               "invalid_argument");
    json_decref(call(f, "POST", "/v1/join-tokens", admin(f),
                     json_pack("{s:i}", "ttl_seconds", 7 * 86400), 201));
    /* no body at all: the default of one hour */
    int64_t now = hc_now_ms();
    json_t *jt = call(f, "POST", "/v1/join-tokens", admin(f), NULL, 201);
    char lo[32], hi[32];
    hc_time_format(now + 3600 * 1000 - 2000, lo, sizeof(lo));
    hc_time_format(now + 3600 * 1000 + 60000, hi, sizeof(hi));
    const char *expires = json_string_value(json_object_get(jt, "expires_at"));
    assert_true(strcmp(expires, lo) > 0 && strcmp(expires, hi) < 0);
    json_decref(jt);
}

static size_t sink(char *data, size_t size, size_t n, void *arg)
{
    size_t len = size * n;
    char *buf = arg;
    size_t have = strlen(buf);
    size_t room = 4095 - have;
    memcpy(buf + have, data, len < room ? len : room);
    buf[have + (len < room ? len : room)] = '\0';
    return len;
}

/* POSTs raw bytes (not JSON) with plain libcurl; returns the status, body into out (4 KiB). */
static long raw_post(struct fixture *f, const char *path, const char *token, const char *data,
                     char out[4096])
{
    char url[512], auth[300];
    snprintf(url, sizeof(url), "%s%s", f->url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    out[0] = '\0';
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, f->ctl.ca_file);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static void test_malformed_json_on_every_post(void **state)
{
    struct fixture *f = *state;
    static const char *const paths[] = {
        "/v1/join-tokens", "/v1/enroll", "/v1/operations/op-000000000000/pause",
        "/v1/operations/op-000000000000/resume", "/v1/operations/op-000000000000/abort"};
    static const char *const bodies[] = {"{not json", "[1, 2]", "this is not json"};
    for (size_t i = 0; i < HC_ARRAY_LEN(paths); i++) {
        for (size_t j = 0; j < HC_ARRAY_LEN(bodies); j++) {
            char out[4096];
            long status = raw_post(f, paths[i], admin(f), bodies[j], out);
            if (status != 400)
                fail_msg("POST %s '%s': status %ld: %s", paths[i], bodies[j], status, out);
            json_t *body = json_loads(out, 0, NULL);
            assert_non_null(body);
            assert_error(body, "invalid_json");
            json_decref(body);
        }
    }
}

static void test_unknown_route_and_method(void **state)
{
    struct fixture *f = *state;
    call_error(f, "GET", "/v1/nope", admin(f), NULL, 404, "not_found");
    call_error(f, "GET", "/v1/nodes/n1/extra", admin(f), NULL, 404, "not_found");
    call_error(f, "PUT", "/v1/nodes", admin(f), json_object(), 405, "method_not_allowed");
}

/* Enrolls n1 and asks for its removal; returns the operation id (caller frees). */
static char *remove_n1(struct fixture *f)
{
    char *token = join_token(f, 600);
    json_decref(enroll(f, token, "n1", "https://127.0.0.2:7444", 201));
    free(token);
    json_t *r = call(f, "DELETE", "/v1/nodes/n1", admin(f), NULL, 202);
    json_t *op = json_object_get(r, "operation");
    assert_string_equal(json_string_value(json_object_get(op, "kind")), "node.remove");
    assert_string_equal(json_string_value(json_object_get(op, "state")), "pending");
    assert_string_equal(json_string_value(json_object_get(op, "requested_by")), "admin");
    assert_string_equal(json_string_value(json_object_get(json_object_get(op, "params"), "node")),
                        "n1");
    char *id = strdup(json_string_value(json_object_get(op, "id")));
    json_decref(r);
    return id;
}

static const char *op_state(json_t *reply)
{
    return json_string_value(json_object_get(json_object_get(reply, "operation"), "state"));
}

static void control(struct fixture *f, const char *id, const char *action, const char *want)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/operations/%s/%s", id, action);
    json_t *r = call(f, "POST", path, admin(f), NULL, 200);
    assert_string_equal(op_state(r), want);
    json_decref(r);
}

static size_t count_ops(struct fixture *f, const char *query)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/operations%s", query);
    json_t *r = call(f, "GET", path, f->viewer, NULL, 200);
    size_t n = json_array_size(json_object_get(r, "operations"));
    json_decref(r);
    return n;
}

static void test_node_delete_and_operations(void **state)
{
    struct fixture *f = *state;
    char *id = remove_n1(f);
    json_t *missing = call(f, "DELETE", "/v1/nodes/nosuch", admin(f), NULL, 404);
    assert_string_equal(assert_error(missing, "not_found"), "node 'nosuch' not found");
    json_decref(missing);
    assert_int_equal(count_ops(f, ""), 1);
    assert_int_equal(count_ops(f, "?state=pending"), 1);
    assert_int_equal(count_ops(f, "?state=running"), 0);
    call_error(f, "GET", "/v1/operations?state=bogus", admin(f), NULL, 400, "invalid_argument");

    char path[128];
    snprintf(path, sizeof(path), "/v1/operations/%s", id);
    json_t *shown = call(f, "GET", path, f->viewer, NULL, 200);
    assert_string_equal(op_state(shown), "pending");
    assert_true(json_is_array(json_object_get(shown, "steps")));
    json_decref(shown);
    json_t *cluster = call(f, "GET", "/v1/cluster", f->viewer, NULL, 200);
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(cluster, "operations"), "active")), 1);
    json_decref(cluster);

    control(f, id, "pause", "paused");
    control(f, id, "resume", "pending");
    control(f, id, "abort", "aborted");
    snprintf(path, sizeof(path), "/v1/operations/%s/abort", id);
    call_error(f, "POST", path, admin(f), NULL, 409, "conflict");
    call_error(f, "GET", "/v1/operations/op-000000000000", admin(f), NULL, 404, "not_found");
    call_error(f, "POST", "/v1/operations/op-000000000000/pause", admin(f), NULL, 404, "not_found");

    /* the calls about n1: its enrollment and its removal */
    json_t *about = call(f, "GET", "/v1/events?type=api.call&node=n1", admin(f), NULL, 200);
    assert_int_equal(json_array_size(json_object_get(about, "events")), 2);
    json_decref(about);
    assert_int_equal(count_calls(f, "admin", "DELETE", "/v1/nodes/n1", 202), 1);
    free(id);
}

static size_t nodes_listed(struct fixture *f)
{
    json_t *list = call(f, "GET", "/v1/nodes", f->viewer, NULL, 200);
    size_t n = json_array_size(json_object_get(list, "nodes"));
    assert_true(json_is_null(json_object_get(list, "next_after")));
    json_decref(list);
    return n;
}

static void test_cluster_and_events(void **state)
{
    struct fixture *f = *state;
    /* twice: the second from the reply cache, which the enrollment's write must invalidate */
    assert_int_equal(nodes_listed(f), 0);
    assert_int_equal(nodes_listed(f), 0);
    char *token = join_token(f, 600);
    json_decref(enroll(f, token, "n1", "https://127.0.0.2:7444", 201));
    free(token);
    assert_int_equal(nodes_listed(f), 1);
    static const char *const hostile[] = {"/v1/nodes?limit=0",
                                          "/v1/nodes?limit=-1",
                                          "/v1/nodes?limit=100000000000000000000",
                                          "/v1/nodes?limit=5001",
                                          "/v1/nodes?after=%01",
                                          "/v1/nodes?after=%C3%A9",
                                          "/v1/operations?after=nope",
                                          "/v1/software?after=9.9",
                                          "/v1/maintenance?limit=x",
                                          "/v1/watch?since=-1"};
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
        call_error(f, "GET", hostile[i], f->viewer, NULL, 400, "invalid_argument");
    json_t *c = call(f, "GET", "/v1/cluster", f->viewer, NULL, 200);
    json_t *cluster = json_object_get(c, "cluster");
    assert_string_equal(json_string_value(json_object_get(cluster, "name")), "apitest");
    assert_string_equal(json_string_value(json_object_get(cluster, "id")), f->init.cluster_id);
    assert_true(json_is_null(json_object_get(cluster, "mtu")));
    assert_int_equal(strlen(json_string_value(json_object_get(cluster, "created_at"))), 24);
    json_t *nodes = json_object_get(c, "nodes");
    assert_int_equal(json_integer_value(json_object_get(nodes, "total")), 1);
    assert_int_equal(json_integer_value(json_object_get(nodes, "unknown")), 1);
    assert_int_equal(json_integer_value(json_object_get(nodes, "reachable")), 0);
    assert_int_equal(json_integer_value(json_object_get(nodes, "unreachable")), 0);
    json_t *ctl = json_object_get(c, "controller");
    assert_string_equal(json_string_value(json_object_get(ctl, "version")), HC_VERSION);
    assert_int_equal(json_integer_value(json_object_get(ctl, "poll_interval_ms")),
                     HC_CONTROLLER_DEFAULT_POLL_MS);
    assert_true(json_is_integer(json_object_get(ctl, "uptime_seconds")));
    json_decref(c);

    json_t *one = call(f, "GET", "/v1/events?limit=1", f->viewer, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(one, "events")), 1);
    int64_t last = json_integer_value(json_object_get(one, "last_id"));
    json_decref(one);
    char path[128];
    snprintf(path, sizeof(path), "/v1/events?since=%lld", (long long)last);
    json_t *rest = call(f, "GET", path, f->viewer, NULL, 200);
    assert_true(json_array_size(json_object_get(rest, "events")) >= 3);
    assert_true(json_integer_value(json_object_get(
                    json_array_get(json_object_get(rest, "events"), 0), "id")) > last);
    json_decref(rest);
    call_error(f, "GET", "/v1/events?limit=0", f->viewer, NULL, 400, "invalid_argument");
    call_error(f, "GET", "/v1/events?limit=1001", f->viewer, NULL, 400, "invalid_argument");
    call_error(f, "GET", "/v1/events?since=abc", f->viewer, NULL, 400, "invalid_argument");
}

int main(void)
{
    evthread_use_pthreads(); /* the test thread stops the server thread's loop */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_public_routes_and_missing_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_anonymous_audit_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_token_and_enroll_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enroll_refusals_keep_the_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enroll_identity_is_the_controllers_choice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bound_join_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ghost_node_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scoped_staging_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_token_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_json_on_every_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_route_and_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_delete_and_operations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_and_events, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    libevent_global_shutdown();
    return failed;
}
