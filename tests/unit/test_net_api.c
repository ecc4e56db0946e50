/*
 * Unit tests for the agent's network routes (agents/hcagent/net_api.c) through the real agent API:
 * HTTPS with mutual TLS on loopback, a real cluster CA, the agent's event loop in a thread.
 *
 * What only this level shows: a probe runs in a worker thread and is answered through a
 * deferred reply, so /v1/status is answered while a slow probe runs; the JSON shapes and
 * status codes of docs/api.md; an iperf3 bench between the agent and itself; a shutdown with a
 * probe in flight. Runs in a private network namespace (with a silent target behind a veth),
 * so it needs root; without it every test is skipped with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <event2/thread.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/net_api.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "pmtu_learn.h"
#include "tests/unit/support/support.h"

#define SILENT "198.18.200.2" /* behind the dummy interface: probes vanish */

struct env {
    char dir[512];
    char data_dir[600];
    char client_cert[600], client_key[600], ca[600];
    struct event_base *base;
    struct hc_agent *agent;
    pthread_t loop;
    int port;
};

static struct env env;
static int have_env;
static char skip_reason[256];

#define NEED_ENV() HC_TEST_SKIP_UNLESS(have_env, skip_reason)

static int issue(X509 *ca, EVP_PKEY *ca_key, const char *cn, int server, const char *cert_path,
                 const char *key_path)
{
    struct hc_error err = {0};
    char serial[33];
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {.cn = cn,
                                .sans = sans,
                                .nsans = server ? 1 : 0,
                                .server_auth = server,
                                .client_auth = !server,
                                .days = 2};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509 *cert = key ? hc_pki_issue(ca, ca_key, key, &spec, serial, &err) : NULL;
    int rc = cert && hc_pki_cert_save(cert, cert_path, &err) == 0 &&
                     hc_pki_key_save(key, key_path, &err) == 0
                 ? 0
                 : -1;
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

/* An enrolled data directory for node n1, and the controller's client certificate. */
static int make_data_dir(struct env *e)
{
    struct hc_error err = {0};
    char cert[700], key[700];
    EVP_PKEY *ca_key = hc_pki_key_new(&err);
    X509 *ca = ca_key ? hc_pki_ca_new(ca_key, "test cluster ca", 2, &err) : NULL;
    snprintf(cert, sizeof(cert), "%s/" HC_AGENT_FILE_CERT, e->data_dir);
    snprintf(key, sizeof(key), "%s/" HC_AGENT_FILE_KEY, e->data_dir);
    snprintf(e->ca, sizeof(e->ca), "%s/" HC_AGENT_FILE_CA, e->data_dir);
    snprintf(e->client_cert, sizeof(e->client_cert), "%s/client.pem", e->dir);
    snprintf(e->client_key, sizeof(e->client_key), "%s/client.key", e->dir);
    struct hc_agent_config cfg = {.name = "n1",
                                  .controller = "https://127.0.0.1:7443",
                                  .listen = "127.0.0.1:0",
                                  .agent_url = "https://127.0.0.1:7444"};
    int rc =
        ca && hc_mkdir_p(e->data_dir, 0700, &err) == 0 && hc_pki_cert_save(ca, e->ca, &err) == 0 &&
                issue(ca, ca_key, "n1", 1, cert, key) == 0 &&
                issue(ca, ca_key, HC_CONTROLLER_CLIENT_CN, 0, e->client_cert, e->client_key) == 0 &&
                hc_agent_config_save(e->data_dir, &cfg, &err) == 0
            ? 0
            : -1;
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return rc;
}

static void *loop_main(void *arg)
{
    event_base_dispatch(arg);
    return NULL;
}

static int start_agent(struct env *e)
{
    struct hc_error err = {0};
    e->base = event_base_new();
    e->agent = e->base ? hc_agent_new(e->base, e->data_dir, &err) : NULL;
    if (!e->agent || hc_agent_listen(e->agent, "127.0.0.1:0", &err) < 0 ||
        hc_agent_net_start_responder(e->agent, &err) < 0) {
        fprintf(stderr, "test_net_api: agent: %s\n", err.message);
        return -1;
    }
    e->port = hc_agent_port(e->agent);
    return pthread_create(&e->loop, NULL, loop_main, e->base) == 0 ? 0 : -1;
}

/* Stops the loop, then frees the agent (which cancels and answers running jobs). */
static void stop_agent(struct env *e)
{
    if (!e->agent)
        return;
    event_base_loopexit(e->base, NULL);
    pthread_join(e->loop, NULL);
    hc_agent_free(e->agent);
    event_base_free(e->base);
    e->agent = NULL;
    e->base = NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int group_setup(void **state)
{
    if (hc_test_unshare_net(skip_reason, sizeof(skip_reason)) < 0)
        return 0;
    /* The silent target: a static neighbour entry with a MAC nobody has, so frames leave
     * without ARP and the other end of the veth discards them. */
    if (system("ip link set lo up && "
               "ip link add hcp-sink type veth peer name hcp-sink1 && "
               "ip addr add 198.18.200.1/24 dev hcp-sink && ip link set hcp-sink up && "
               "ip link set hcp-sink1 up && "
               "ip neigh add " SILENT " lladdr 02:00:00:00:00:02 dev hcp-sink nud permanent") != 0)
        return -1;
    const char *t = getenv("HC_TEST_TMP");
    snprintf(env.dir, sizeof(env.dir), "%s/test_net_api.XXXXXX", t && *t ? t : "/tmp");
    if (t && *t)
        mkdir(t, 0700);
    if (!mkdtemp(env.dir))
        return -1;
    snprintf(env.data_dir, sizeof(env.data_dir), "%s/data", env.dir);
    if (make_data_dir(&env) < 0 || start_agent(&env) < 0)
        return -1;
    have_env = 1;
    return 0;
}

static int group_teardown(void **state)
{
    stop_agent(&env);
    if (env.dir[0])
        nftw(env.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static struct hc_http_client *client(void)
{
    struct hc_error err = {0};
    struct hc_tls_client_config tls = {
        .ca_file = env.ca, .cert_file = env.client_cert, .key_file = env.client_key};
    struct hc_http_client *c = hc_http_client_new(&tls, &err);
    if (!c)
        fail_msg("client: %s", err.message);
    return c;
}

/* One call; the body (may be NULL) is given as JSON text. */
static long call(const char *method, const char *path, const char *body_text,
                 struct hc_http_response *resp)
{
    struct hc_error err = {0};
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", env.port, path);
    json_t *body = body_text ? json_loads(body_text, 0, NULL) : NULL;
    struct hc_http_client *c = client();
    int rc = hc_http_request(c, method, url, NULL, body, 30000, resp, &err);
    hc_http_client_free(c);
    json_decref(body);
    if (rc < 0)
        fail_msg("%s %s: %s", method, path, err.message);
    return resp->status;
}

static void expect_error(const char *method, const char *path, const char *body, long status,
                         const char *needle)
{
    struct hc_http_response resp = {0};
    assert_int_equal(call(method, path, body, &resp), status);
    const char *msg = hc_json_str(json_object_get(resp.body, "error"), "message", "");
    if (!strstr(msg, needle))
        fail_msg("%s %s %s: message '%s' lacks '%s'", method, path, body, msg, needle);
    hc_http_response_clear(&resp);
}

static void test_probe_shape(void **state)
{
    NEED_ENV();
    struct hc_http_response resp = {0};
    assert_int_equal(call("POST", "/v1/net/probe",
                          "{\"targets\":[{\"address\":\"127.0.0.1\",\"size\":9000},"
                          "{\"address\":\"" SILENT "\",\"size\":9000}],\"timeout_ms\":200}",
                          &resp),
                     200);
    json_t *results = json_object_get(resp.body, "results");
    assert_int_equal(json_array_size(results), 2);
    json_t *ok = json_array_get(results, 0), *lost = json_array_get(results, 1);
    const char *keys[] = {"address",    "size",   "result", "path_mtu",
                          "largest_ok", "rtt_ms", "detail"};
    for (size_t i = 0; i < HC_ARRAY_LEN(keys); i++) {
        assert_non_null(json_object_get(ok, keys[i]));
        assert_non_null(json_object_get(lost, keys[i]));
    }
    assert_int_equal(json_object_size(ok), HC_ARRAY_LEN(keys));
    assert_string_equal(hc_json_str(ok, "address", ""), "127.0.0.1");
    assert_string_equal(hc_json_str(ok, "result", ""), "ok");
    assert_int_equal(hc_json_int(ok, "largest_ok", 0), 9000);
    assert_true(json_is_number(json_object_get(ok, "rtt_ms")));
    assert_true(json_is_null(json_object_get(ok, "path_mtu")));
    assert_string_equal(hc_json_str(lost, "result", ""), "unreachable");
    assert_true(json_is_null(json_object_get(lost, "largest_ok")));
    assert_true(json_is_null(json_object_get(lost, "rtt_ms")));
    hc_http_response_clear(&resp);
}

static void test_probe_validation(void **state)
{
    NEED_ENV();
    expect_error("POST", "/v1/net/probe", "{}", 400, "targets must be an array");
    expect_error("POST", "/v1/net/probe", "{\"targets\":[]}", 400, "targets must be an array");
    expect_error("POST", "/v1/net/probe", "{\"targets\":[{\"address\":\"x\",\"size\":9000}]}", 400,
                 "targets[0].address");
    expect_error("POST", "/v1/net/probe",
                 "{\"targets\":[{\"address\":\"127.0.0.1\",\"size\":9000},"
                 "{\"address\":\"127.0.0.1\",\"size\":20}]}",
                 400, "targets[1].size");
    expect_error("POST", "/v1/net/probe",
                 "{\"targets\":[{\"address\":\"127.0.0.1\",\"size\":9000}],\"timeout_ms\":5}", 400,
                 "timeout_ms");
    expect_error("POST", "/v1/net/probe",
                 "{\"source\":\"198.18.250.1\",\"targets\":[{\"address\":\"127.0.0.1\","
                 "\"size\":9000}]}",
                 400, "source address 198.18.250.1");
}

/* A probe that takes 1.5 s must not hold up /v1/status. */
static void test_status_answered_while_probing(void **state)
{
    NEED_ENV();
    char url_probe[256], url_status[256];
    snprintf(url_probe, sizeof(url_probe), "https://127.0.0.1:%d/v1/net/probe", env.port);
    snprintf(url_status, sizeof(url_status), "https://127.0.0.1:%d/v1/status", env.port);
    json_t *body = json_loads("{\"targets\":[{\"address\":\"" SILENT "\",\"size\":9000}],"
                              "\"timeout_ms\":1500}",
                              0, NULL);
    struct hc_http_call calls[3] = {
        {.method = "POST", .url = url_probe, .body = body, .timeout_ms = 10000},
        {.method = "GET", .url = url_status, .timeout_ms = 10000},
        {.method = "GET", .url = url_status, .timeout_ms = 10000},
    };
    struct hc_http_client *c = client();
    assert_int_equal(hc_http_fanout(c, calls, 3, 0), 3);
    print_message("  probe %ld ms, status %ld ms and %ld ms\n", calls[0].elapsed_ms,
                  calls[1].elapsed_ms, calls[2].elapsed_ms);
    assert_int_equal(calls[0].resp.status, 200);
    assert_true(calls[0].elapsed_ms >= 1400);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(calls[i].resp.status, 200);
        assert_true(calls[i].elapsed_ms < 700);
    }
    json_t *r = json_array_get(json_object_get(calls[0].resp.body, "results"), 0);
    assert_string_equal(hc_json_str(r, "result", ""), "unreachable");
    for (int i = 0; i < 3; i++)
        hc_http_response_clear(&calls[i].resp);
    hc_http_client_free(c);
    json_decref(body);
}

/* Sets hcp-sink's MTU through the API (200 expected) and writes the {"change_id": ...} body
 * that confirms or reverts that change. */
static void apply_mtu(int mtu, int revert_after_ms, char *body, size_t len)
{
    struct hc_http_response resp = {0};
    char req[128];
    snprintf(req, sizeof(req), "{\"interface\":\"hcp-sink\",\"mtu\":%d,\"revert_after_ms\":%d}",
             mtu, revert_after_ms);
    assert_int_equal(call("POST", "/v1/net/mtu", req, &resp), 200);
    snprintf(body, len, "{\"change_id\":\"%s\"}", hc_json_str(resp.body, "change_id", ""));
    hc_http_response_clear(&resp);
}

static void test_mtu_routes(void **state)
{
    NEED_ENV();
    struct hc_http_response resp = {0};
    assert_int_equal(call("GET", "/v1/net/mtu", NULL, &resp), 200);
    assert_true(json_is_null(json_object_get(resp.body, "pending")));
    assert_true(json_is_null(json_object_get(resp.body, "last_revert")));
    hc_http_response_clear(&resp);
    expect_error("POST", "/v1/net/mtu",
                 "{\"interface\":\"hcp-sink\",\"mtu\":70000,\"revert_after_ms\":1000}", 400,
                 "mtu 70000");
    expect_error("POST", "/v1/net/mtu",
                 "{\"interface\":\"hcp-sink\",\"mtu\":\"abc\",\"revert_after_ms\":1000}", 400,
                 "must be integers");
    expect_error("POST", "/v1/net/mtu", "{\"mtu\":9000,\"revert_after_ms\":1000}", 400,
                 "interface");
    assert_int_equal(call("POST", "/v1/net/mtu",
                          "{\"interface\":\"hcp-sink\",\"mtu\":9000,\"revert_after_ms\":300}",
                          &resp),
                     200);
    char id[64];
    snprintf(id, sizeof(id), "%s", hc_json_str(resp.body, "change_id", ""));
    assert_int_equal(strlen(id), 32);
    assert_int_equal(hc_json_int(resp.body, "mtu", 0), 9000);
    assert_int_equal(hc_json_int(resp.body, "previous_mtu", 0), 1500);
    assert_string_equal(hc_json_str(resp.body, "interface", ""), "hcp-sink");
    assert_true(json_is_string(json_object_get(resp.body, "revert_at")));
    hc_http_response_clear(&resp);
    expect_error("POST", "/v1/net/mtu",
                 "{\"interface\":\"hcp-sink\",\"mtu\":4000,\"revert_after_ms\":300}", 409, id);
    usleep(600 * 1000); /* past the revert */
    assert_int_equal(call("GET", "/v1/net/mtu", NULL, &resp), 200);
    json_t *last = json_object_get(resp.body, "last_revert");
    assert_string_equal(hc_json_str(last, "change_id", ""), id);
    assert_true(json_is_string(json_object_get(last, "reverted_at")));
    hc_http_response_clear(&resp);
    char body[128];
    snprintf(body, sizeof(body), "{\"change_id\":\"%s\"}", id);
    expect_error("POST", "/v1/net/mtu/confirm", body, 409, "already reverted");
    /* Apply and confirm in time. */
    apply_mtu(9000, 5000, body, sizeof(body));
    assert_int_equal(call("POST", "/v1/net/mtu/confirm", body, &resp), 200);
    assert_true(hc_json_bool(resp.body, "confirmed", 0));
    hc_http_response_clear(&resp);
    expect_error("POST", "/v1/net/mtu/confirm", "{\"change_id\":\"nope\"}", 404, "not found");
}

/* The counterpart of confirm: POST /v1/net/mtu/revert puts the old MTU back at once. */
static void test_mtu_revert_route(void **state)
{
    NEED_ENV();
    struct hc_http_response resp = {0};
    char body[128], id[64];
    int before = hc_test_link_mtu("hcp-sink");
    assert_int_equal(call("POST", "/v1/net/mtu",
                          "{\"interface\":\"hcp-sink\",\"mtu\":4000,\"revert_after_ms\":60000}",
                          &resp),
                     200);
    snprintf(id, sizeof(id), "%s", hc_json_str(resp.body, "change_id", ""));
    hc_http_response_clear(&resp);
    assert_int_equal(hc_test_link_mtu("hcp-sink"), 4000);
    snprintf(body, sizeof(body), "{\"change_id\":\"%s\"}", id);
    int64_t t0 = hc_mono_ms();
    assert_int_equal(call("POST", "/v1/net/mtu/revert", body, &resp), 200);
    assert_true(hc_mono_ms() - t0 < 5000); /* at once, not at the 60 s deadline */
    assert_int_equal(hc_test_link_mtu("hcp-sink"), before);
    assert_string_equal(hc_json_str(resp.body, "change_id", ""), id);
    assert_string_equal(hc_json_str(resp.body, "reverted_by", ""), "request");
    assert_int_equal(hc_json_int(resp.body, "previous_mtu", 0), before);
    assert_true(json_is_string(json_object_get(resp.body, "reverted_at")));
    hc_http_response_clear(&resp);
    assert_int_equal(call("GET", "/v1/net/mtu", NULL, &resp), 200);
    assert_true(json_is_null(json_object_get(resp.body, "pending")));
    assert_string_equal(hc_json_str(json_object_get(resp.body, "last_revert"), "reverted_by", ""),
                        "request");
    hc_http_response_clear(&resp);
    assert_int_equal(call("POST", "/v1/net/mtu/revert", body, &resp), 200); /* a retry */
    hc_http_response_clear(&resp);
    expect_error("POST", "/v1/net/mtu/confirm", body, 409, "already reverted");
    expect_error("POST", "/v1/net/mtu/revert", "{}", 400, "change_id");
    expect_error("POST", "/v1/net/mtu/revert", "{\"change_id\":\"nope\"}", 404, "not found");
    /* A confirmed change is not reverted. */
    apply_mtu(4000, 60000, body, sizeof(body));
    assert_int_equal(call("POST", "/v1/net/mtu/confirm", body, &resp), 200);
    hc_http_response_clear(&resp);
    expect_error("POST", "/v1/net/mtu/revert", body, 409, "confirmed");
    assert_int_equal(hc_test_link_mtu("hcp-sink"), 4000);
}

/* A probe measures the path as it is now: a path MTU cached earlier (learnt from a router that
 * has been fixed since) is flushed first instead of being reported as the path. */
static void test_probe_flushes_cached_pmtu(void **state)
{
    NEED_ENV();
    struct hc_http_response resp = {0};
    hc_test_learn_pmtu("198.18.200.1", SILENT, 1280);
    assert_true(hc_test_route_cached(SILENT));
    assert_int_equal(call("POST", "/v1/net/probe",
                          "{\"targets\":[{\"address\":\"" SILENT "\",\"size\":1400}],"
                          "\"timeout_ms\":100,\"search\":false}",
                          &resp),
                     200);
    json_t *r = json_array_get(json_object_get(resp.body, "results"), 0);
    assert_string_equal(hc_json_str(r, "result", ""), "unreachable"); /* it answers nothing */
    hc_http_response_clear(&resp);
    assert_false(hc_test_route_cached(SILENT)); /* the probe flushed before it sent */
}

static void test_bench(void **state)
{
    NEED_ENV();
    struct hc_http_response resp = {0};
    assert_int_equal(call("POST", "/v1/net/bench/server", "{\"duration_s\":1}", &resp), 200);
    json_int_t port = hc_json_int(resp.body, "port", 0);
    assert_true(port > 0 && port < 65536);
    hc_http_response_clear(&resp);
    char body[128];
    snprintf(body, sizeof(body), "{\"address\":\"127.0.0.1\",\"port\":%d,\"duration_s\":1}",
             (int)port);
    assert_int_equal(call("POST", "/v1/net/bench/client", body, &resp), 200);
    double bps = json_number_value(json_object_get(resp.body, "bits_per_second"));
    print_message("  loopback: %.0f bit/s, %lld retransmits, mtu %lld\n", bps,
                  (long long)hc_json_int(resp.body, "retransmits", -2),
                  (long long)hc_json_int(resp.body, "mtu", 0));
    assert_true(bps > 1e6);
    assert_true(json_is_integer(json_object_get(resp.body, "retransmits")));
    assert_int_equal(hc_json_int(resp.body, "mtu", 0), 65535); /* loopback's route: IP_MAX_MTU */
    hc_http_response_clear(&resp);
    /* The one-test server is gone: a second client fails, with the reason. */
    expect_error("POST", "/v1/net/bench/client", body, 502, "iperf3 test toward 127.0.0.1");
    expect_error("POST", "/v1/net/bench/client", "{\"address\":\"127.0.0.1\",\"duration_s\":1}",
                 400, "port");
    expect_error("POST", "/v1/net/bench/server", "{\"duration_s\":0}", 400, "duration_s");
}

struct inflight {
    long status;
    int rc;
};

static void *slow_probe(void *arg)
{
    struct inflight *f = arg;
    struct hc_http_response resp = {0};
    struct hc_error err = {0};
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/net/probe", env.port);
    json_t *body = json_loads("{\"targets\":[{\"address\":\"" SILENT "\",\"size\":9000}],"
                              "\"timeout_ms\":10000}",
                              0, NULL);
    struct hc_http_client *c = client();
    f->rc = hc_http_request(c, "POST", url, NULL, body, 20000, &resp, &err);
    f->status = resp.status;
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    json_decref(body);
    return NULL;
}

/* Runs last: stopping the agent with a 10 s probe in flight is quick and clean (ASan). */
static void test_shutdown_with_probe_in_flight(void **state)
{
    NEED_ENV();
    struct inflight f = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_probe, &f), 0);
    usleep(500 * 1000);
    int64_t start = hc_mono_ms();
    stop_agent(&env);
    int64_t took = hc_mono_ms() - start;
    pthread_join(th, NULL);
    print_message("  shutdown took %lld ms; the client got rc %d status %ld\n", (long long)took,
                  f.rc, f.status);
    assert_true(took < 1000);
    assert_true(f.rc < 0 || f.status != 0); /* closed or answered, never hung */
}

int main(void)
{
    evthread_use_pthreads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_shape),
        cmocka_unit_test(test_probe_validation),
        cmocka_unit_test(test_status_answered_while_probing),
        cmocka_unit_test(test_mtu_routes),
        cmocka_unit_test(test_mtu_revert_route),
        cmocka_unit_test(test_probe_flushes_cached_pmtu),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_shutdown_with_probe_in_flight),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
