/*
 * Unit tests for hcagent's enrollment (agents/hcagent/join.c), configuration file
 * (agents/hcagent/agent_config.c) and agent API (agents/hcagent/agent_api.c).
 *
 * The join tests run against a fake controller served with the project's real HTTPS server on
 * loopback, on its own event-loop thread, with a real cluster CA: a wrong CA fingerprint must
 * stop the join before the token is sent, a refusal must leave no files, and a successful join
 * must produce a data directory from which the agent serves its API to the controller's client
 * certificate and to nobody else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/software.h"
#include "common/https_client.h"
#include "common/https_server.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/token.h"
#include "common/util.h"
#include "tests/unit/testdir.h"

/* A cluster CA, a second unrelated CA, and the certificates the controller would hold. */
struct env {
    char *dir;
    EVP_PKEY *ca_key;
    X509 *ca;
    char *ca_pem;
    char ca_fp[65];
    char other_fp[65];
    char server_cert[4096], server_key[4096]; /* the controller's API certificate */
    char client_cert[4096], client_key[4096]; /* CN hcctld-client */
    char rogue_cert[4096], rogue_key[4096];   /* same CA, another CN */
    char twin_cert[4096], twin_key[4096];     /* same CA, the controller's CN, another key */
    char data_dir[4096];
    /* fake controller */
    struct event_base *base;
    struct hc_http_server *srv;
    pthread_t thread;
    char controller[128];
    int enroll_calls; /* read only after the loop thread has stopped */
    int refuse;       /* answer enroll with 409 */
};

/* Issues a certificate (and key) from the env's CA into the given files. */
static int issue_files(struct env *e, const char *cn, const char *san, int server,
                       const char *cert_path, const char *key_path)
{
    struct hc_error err = {0};
    char serial[33];
    const char *sans[] = {san};
    struct hc_cert_spec spec = {.cn = cn,
                                .sans = sans,
                                .nsans = san ? 1 : 0,
                                .server_auth = server,
                                .client_auth = !server,
                                .days = 2};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509 *cert = key ? hc_pki_issue(e->ca, e->ca_key, key, &spec, serial, &err) : NULL;
    int rc = cert && hc_pki_cert_save(cert, cert_path, &err) == 0 &&
                     hc_pki_key_save(key, key_path, &err) == 0
                 ? 0
                 : -1;
    if (rc < 0)
        fprintf(stderr, "issue_files: %s\n", err.message);
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

static int make_cas(struct env *e)
{
    struct hc_error err = {0};
    e->ca_key = hc_pki_key_new(&err);
    e->ca = e->ca_key ? hc_pki_ca_new(e->ca_key, "test cluster ca", 2, &err) : NULL;
    EVP_PKEY *other_key = hc_pki_key_new(&err);
    X509 *other = other_key ? hc_pki_ca_new(other_key, "test cluster ca", 2, &err) : NULL;
    if (!e->ca || !other) {
        fprintf(stderr, "make_cas: %s\n", err.message);
        X509_free(other);
        EVP_PKEY_free(other_key);
        return -1;
    }
    e->ca_pem = hc_pki_cert_to_pem(e->ca);
    hc_pki_fingerprint(e->ca, e->ca_fp);
    hc_pki_fingerprint(other, e->other_fp);
    X509_free(other);
    EVP_PKEY_free(other_key);
    return 0;
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    if (!e || !(e->dir = hc_test_mkdtemp("test_agent_join")) || make_cas(e) < 0)
        return -1;
    snprintf(e->server_cert, sizeof(e->server_cert), "%s/server.pem", e->dir);
    snprintf(e->server_key, sizeof(e->server_key), "%s/server.key", e->dir);
    snprintf(e->client_cert, sizeof(e->client_cert), "%s/client.pem", e->dir);
    snprintf(e->client_key, sizeof(e->client_key), "%s/client.key", e->dir);
    snprintf(e->rogue_cert, sizeof(e->rogue_cert), "%s/rogue.pem", e->dir);
    snprintf(e->rogue_key, sizeof(e->rogue_key), "%s/rogue.key", e->dir);
    snprintf(e->twin_cert, sizeof(e->twin_cert), "%s/twin.pem", e->dir);
    snprintf(e->twin_key, sizeof(e->twin_key), "%s/twin.key", e->dir);
    snprintf(e->data_dir, sizeof(e->data_dir), "%s/agent/data", e->dir);
    if (issue_files(e, "controller", "127.0.0.1", 1, e->server_cert, e->server_key) < 0 ||
        issue_files(e, HC_CONTROLLER_CLIENT_CN, NULL, 0, e->client_cert, e->client_key) < 0 ||
        issue_files(e, "intruder", NULL, 0, e->rogue_cert, e->rogue_key) < 0 ||
        issue_files(e, HC_CONTROLLER_CLIENT_CN, NULL, 0, e->twin_cert, e->twin_key) < 0)
        return -1;
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    hc_test_rmtree(e->dir);
    free(e->dir);
    free(e->ca_pem);
    X509_free(e->ca);
    EVP_PKEY_free(e->ca_key);
    free(e);
    return 0;
}

/* ---- the fake controller ---- */

static void ca_route(struct hc_request *req, void *arg)
{
    struct env *e = arg;
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:s}", "ca_pem", e->ca_pem, "ca_fingerprint", e->ca_fp));
}

/* Signs the CSR like the real controller: CN = name, SAN = the agent URL's host. */
static json_t *sign_enrollment(struct env *e, json_t *body, struct hc_error *err)
{
    char host[64] = "", serial[33];
    const char *name = hc_json_str(body, "name", "");
    sscanf(hc_json_str(body, "agent_url", ""), "https://%63[^:]", host);
    const char *sans[] = {host};
    struct hc_cert_spec spec = {
        .cn = name, .sans = sans, .nsans = 1, .server_auth = 1, .client_auth = 1, .days = 2};
    X509_REQ *csr = hc_pki_csr_from_pem(hc_json_str(body, "csr_pem", ""), err);
    EVP_PKEY *pub = csr ? hc_pki_csr_pubkey(csr) : NULL;
    X509 *cert = pub ? hc_pki_issue(e->ca, e->ca_key, pub, &spec, serial, err) : NULL;
    char *pem = cert ? hc_pki_cert_to_pem(cert) : NULL;
    char pin[HC_PKI_PIN_LEN], client_pin[HC_PKI_PIN_LEN];
    json_t *reply = pem && hc_pki_file_pin(e->server_cert, pin, err) == 0 &&
                            hc_pki_file_pin(e->client_cert, client_pin, err) == 0
                        ? json_pack("{s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:s}", "node", "name", name,
                                    "cert_serial", serial, "cert_pem", pem, "ca_pem", e->ca_pem,
                                    "controller_client_cn", HC_CONTROLLER_CLIENT_CN,
                                    "controller_pin", pin, "controller_client_pin", client_pin)
                        : NULL;
    free(pem);
    X509_free(cert);
    EVP_PKEY_free(pub);
    X509_REQ_free(csr);
    return reply;
}

static void enroll_route(struct hc_request *req, void *arg)
{
    struct env *e = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    e->enroll_calls++;
    if (e->refuse) {
        hc_error_set(&err, HC_E(CONFLICT), "node name '%s' is already taken",
                     hc_json_str(body, "name", ""));
        hc_error_hint(&err, "pass --name with another name");
        hc_reply_error(req, &err);
        return;
    }
    json_t *reply = sign_enrollment(e, body, &err);
    if (reply)
        hc_reply_json(req, 201, reply);
    else
        hc_reply_error(req, &err);
}

static void *loop_main(void *arg)
{
    event_base_loop(arg, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static void controller_start(struct env *e)
{
    struct hc_error err = {0};
    struct hc_tls_server_config tls = {.cert_file = e->server_cert, .key_file = e->server_key};
    e->base = event_base_new();
    assert_non_null(e->base);
    e->srv = hc_http_server_new(e->base, &tls, &err);
    if (!e->srv)
        fail_msg("fake controller: %s", err.message);
    assert_int_equal(hc_http_server_route(e->srv, "GET", "/v1/ca", 0, ca_route, e), 0);
    assert_int_equal(hc_http_server_route(e->srv, "POST", "/v1/enroll", 0, enroll_route, e), 0);
    assert_int_equal(hc_http_server_listen(e->srv, "127.0.0.1", 0, &err), 0);
    snprintf(e->controller, sizeof(e->controller), "https://127.0.0.1:%d",
             hc_http_server_port(e->srv));
    assert_int_equal(pthread_create(&e->thread, NULL, loop_main, e->base), 0);
}

static void controller_stop(struct env *e)
{
    /* loopexit, not loopbreak: it is an event, so it also works before the thread has entered
     * the loop (loopbreak would be forgotten then). */
    event_base_loopexit(e->base, NULL);
    pthread_join(e->thread, NULL);
    hc_http_server_free(e->srv);
    event_base_free(e->base);
    e->srv = NULL;
    e->base = NULL;
}

static void make_token(const char *fp, char *out, size_t len)
{
    struct hc_token t;
    assert_int_equal(hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX, fp), 0);
    hc_token_format(&t, out, len);
}

static int exists(const char *dir, const char *name)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int file_mode(const char *dir, const char *name)
{
    char path[8192];
    struct stat st;
    snprintf(path, sizeof(path), "%s%s%s", dir, name ? "/" : "", name ? name : "");
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

/* ---- CA pinning ---- */

static void test_pin_accepts_matching_ca(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    assert_int_equal(hc_join_pin_ca("https://c:7443", e->ca_pem, e->ca_fp, &err), 0);
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] =
            (char)(e->ca_fp[i] >= 'a' && e->ca_fp[i] <= 'f' ? e->ca_fp[i] - 32 : e->ca_fp[i]);
    assert_int_equal(hc_join_pin_ca("https://c:7443", e->ca_pem, upper, &err), 0);
}

static void test_pin_refuses_other_ca(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    char want[320];
    assert_int_equal(hc_join_pin_ca("https://c:7443", e->ca_pem, e->other_fp, &err), -1);
    snprintf(want, sizeof(want),
             "controller at https://c:7443 presented CA sha256:%s but the "
             "join token pins sha256:%s",
             e->ca_fp, e->other_fp);
    assert_string_equal(err.message, want);
    assert_true(err.hint[0] != '\0');
    assert_int_equal(hc_join_pin_ca("https://c:7443", "not a pem", e->ca_fp, &err), -1);
    assert_non_null(strstr(err.message, "unreadable CA"));
}

/* ---- agent.json, names, agent URL ---- */

static void test_config_round_trip(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    struct hc_agent_config in = {.name = "node-1.rack2",
                                 .controller = "https://10.0.0.1:7443",
                                 .listen = "0.0.0.0:7444",
                                 .agent_url = "https://10.0.0.5:7444"};
    struct hc_agent_config out;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/cfg", e->dir);
    assert_int_equal(hc_agent_config_load(dir, &out, &err), -1);
    assert_string_equal(err.code, HC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.hint, "hcagent join"));
    assert_int_equal(hc_mkdir_p(dir, 0700, &err), 0);
    assert_int_equal(hc_agent_config_save(dir, &in, &err), 0);
    assert_int_equal(file_mode(dir, HC_AGENT_FILE_CONFIG), 0644);
    memset(&out, 0, sizeof(out));
    assert_int_equal(hc_agent_config_load(dir, &out, &err), 0);
    assert_memory_equal(&in, &out, sizeof(in));
}

static void test_config_rejects_bad_files(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    struct hc_agent_config out;
    char dir[4096], path[8192];
    snprintf(dir, sizeof(dir), "%s/badcfg", e->dir);
    snprintf(path, sizeof(path), "%s/" HC_AGENT_FILE_CONFIG, dir);
    assert_int_equal(hc_mkdir_p(dir, 0700, &err), 0);
    const char *missing = "{\"name\":\"n1\",\"controller\":\"https://c\",\"listen\":\"0:1\"}";
    assert_int_equal(hc_file_write_atomic(path, missing, strlen(missing), 0644, &err), 0);
    assert_int_equal(hc_agent_config_load(dir, &out, &err), -1);
    assert_non_null(strstr(err.message, "agent_url"));
    const char *badname =
        "{\"name\":\"-x\",\"controller\":\"c\",\"listen\":\"l\",\"agent_url\":\"u\"}";
    assert_int_equal(hc_file_write_atomic(path, badname, strlen(badname), 0644, &err), 0);
    assert_int_equal(hc_agent_config_load(dir, &out, &err), -1);
    assert_non_null(strstr(err.message, "invalid node name '-x'"));
    assert_int_equal(hc_file_write_atomic(path, "[1]", 3, 0644, &err), 0);
    assert_int_equal(hc_agent_config_load(dir, &out, &err), -1);
}

static void test_name_check(void **state)
{
    (void)state;
    assert_int_equal(hc_agent_name_check("n1", NULL), 0);
    assert_int_equal(hc_agent_name_check("node_2.example-com", NULL), 0);
    assert_int_equal(hc_agent_name_check("Node2", NULL), -1); /* the controller would refuse it */
    assert_int_equal(hc_agent_name_check("", NULL), -1);
    assert_int_equal(hc_agent_name_check(".n", NULL), -1);
    assert_int_equal(hc_agent_name_check("a/b", NULL), -1);
    assert_int_equal(hc_agent_name_check("a b", NULL), -1);
    char longname[80];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(hc_agent_name_check(longname, NULL), -1);
    longname[63] = '\0';
    assert_int_equal(hc_agent_name_check(longname, NULL), 0);
}

static void test_agent_url(void **state)
{
    (void)state;
    struct hc_error err = {0};
    char url[320];
    assert_int_equal(
        hc_join_agent_url("https://127.0.0.1:7443", "127.0.0.2:7444", url, sizeof(url), &err), 0);
    assert_string_equal(url, "https://127.0.0.2:7444");
    /* Wildcard: the source address of the route toward the controller (loopback here). */
    assert_int_equal(
        hc_join_agent_url("https://127.0.0.1:7443", "0.0.0.0:7555", url, sizeof(url), &err), 0);
    assert_string_equal(url, "https://127.0.0.1:7555");
    assert_int_equal(hc_join_agent_url("https://[::1]:7443", "[::1]:7444", url, sizeof(url), &err),
                     0);
    assert_string_equal(url, "https://[::1]:7444");
    assert_int_equal(hc_join_agent_url("https://c:7443", "127.0.0.1:0", url, sizeof(url), &err),
                     -1);
    assert_int_equal(hc_join_agent_url("https://c:7443", "nonsense", url, sizeof(url), &err), -1);
    assert_int_equal(
        hc_join_agent_url("http://127.0.0.1:7443", "0.0.0.0:7444", url, sizeof(url), &err), -1);
    assert_non_null(strstr(err.message, "must use https"));
}

/* ---- join against the fake controller ---- */

static int run_join(struct env *e, const char *fp, const char *name, struct hc_error *err)
{
    char token[256];
    make_token(fp, token, sizeof(token));
    struct hc_join_options opt = {.controller = e->controller,
                                  .token = token,
                                  .data_dir = e->data_dir,
                                  .listen = "127.0.0.1:7444",
                                  .name = name};
    controller_start(e);
    int rc = hc_join(&opt, err);
    controller_stop(e);
    return rc;
}

static void test_join_refuses_unpinned_controller(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    e->enroll_calls = 0;
    assert_int_equal(run_join(e, e->other_fp, "n1", &err), -1);
    assert_non_null(strstr(err.message, e->ca_fp));
    assert_non_null(strstr(err.message, e->other_fp));
    assert_int_equal(e->enroll_calls, 0); /* the token never left the node */
    assert_int_equal(access(e->data_dir, F_OK), -1);
}

static void test_join_refusal_leaves_no_files(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    e->enroll_calls = 0;
    e->refuse = 1;
    assert_int_equal(run_join(e, e->ca_fp, "n1", &err), -1);
    e->refuse = 0;
    assert_int_equal(e->enroll_calls, 1);
    assert_string_equal(err.code, HC_ERR_CONFLICT);
    assert_non_null(strstr(err.message, "node name 'n1' is already taken"));
    assert_string_equal(err.hint, "pass --name with another name");
    assert_int_equal(access(e->data_dir, F_OK), -1);
}

/* Calls the agent at port with the given client certificate (NULL: none). */
static int call_agent(struct env *e, int port, const char *method, const char *path,
                      const char *cert, const char *key, struct hc_http_response *resp)
{
    struct hc_error err = {0};
    char url[256], ca[8192];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", port, path);
    snprintf(ca, sizeof(ca), "%s/" HC_AGENT_FILE_CA, e->data_dir);
    struct hc_tls_client_config tls = {.ca_file = ca, .cert_file = cert, .key_file = key};
    struct hc_http_client *c = hc_http_client_new(&tls, &err);
    assert_non_null(c);
    int rc = hc_http_request(c, method, url, NULL, NULL, 5000, resp, &err);
    hc_http_client_free(c);
    return rc;
}

static void check_agent_api(struct env *e, int port)
{
    struct hc_http_response resp = {0};
    assert_int_equal(call_agent(e, port, "GET", "/v1/status", e->client_cert, e->client_key, &resp),
                     0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(hc_json_str(resp.body, "node_name", ""), "n1");
    assert_string_equal(hc_json_str(resp.body, "agent_version", ""), HC_VERSION);
    assert_true(json_is_integer(json_object_get(resp.body, "uptime_seconds")));
    assert_string_equal(hc_json_str(json_object_get(resp.body, "service"), "state", ""),
                        "not_installed");
    hc_http_response_clear(&resp);
    assert_int_equal(
        call_agent(e, port, "GET", "/v1/interfaces", e->client_cert, e->client_key, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_true(json_array_size(json_object_get(resp.body, "interfaces")) > 0);
    hc_http_response_clear(&resp);
    /* No client certificate, or one from the right CA with the wrong CN: refused. */
    int rc = call_agent(e, port, "GET", "/v1/status", NULL, NULL, &resp);
    assert_true(rc < 0 || resp.status != 200);
    hc_http_response_clear(&resp);
    rc = call_agent(e, port, "GET", "/v1/status", e->rogue_cert, e->rogue_key, &resp);
    assert_true(rc < 0 || resp.status != 200);
    hc_http_response_clear(&resp);
    /* The controller's CN from the same CA, but not the controller's key: refused too. */
    rc = call_agent(e, port, "GET", "/v1/status", e->twin_cert, e->twin_key, &resp);
    assert_true(rc < 0 || resp.status != 200);
    hc_http_response_clear(&resp);
}

static void check_data_dir(struct env *e)
{
    struct hc_error err = {0};
    struct hc_agent_config cfg;
    assert_int_equal(file_mode(e->data_dir, NULL), 0700);
    assert_int_equal(file_mode(e->data_dir, HC_AGENT_FILE_KEY), 0600);
    assert_true(exists(e->data_dir, HC_AGENT_FILE_CERT));
    assert_true(exists(e->data_dir, HC_AGENT_FILE_CA));
    assert_int_equal(hc_agent_config_load(e->data_dir, &cfg, &err), 0);
    assert_string_equal(cfg.name, "n1");
    assert_string_equal(cfg.controller, e->controller);
    assert_string_equal(cfg.listen, "127.0.0.1:7444");
    assert_string_equal(cfg.agent_url, "https://127.0.0.1:7444");
}

static void test_join_then_serve_then_leave(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    if (run_join(e, e->ca_fp, "n1", &err) < 0)
        fail_msg("join: %s", err.message);
    check_data_dir(e);
    /* A second join into the same directory is refused before contacting anyone. */
    assert_int_equal(run_join(e, e->ca_fp, "n1", &err), -1);
    assert_string_equal(err.code, HC_ERR_CONFLICT);

    struct event_base *base = event_base_new();
    struct hc_agent *agent = hc_agent_new(base, e->data_dir, &err);
    if (!agent)
        fail_msg("agent: %s", err.message);
    assert_int_equal(hc_agent_listen(agent, "127.0.0.1:0", &err), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, loop_main, base), 0);
    check_agent_api(e, hc_agent_port(agent));
    struct hc_http_response resp = {0};
    assert_int_equal(call_agent(e, hc_agent_port(agent), "POST", "/v1/leave", e->client_cert,
                                e->client_key, &resp),
                     0);
    assert_int_equal(resp.status, 202);
    assert_true(hc_json_bool(resp.body, "leaving", 0));
    hc_http_response_clear(&resp);
    pthread_join(th, NULL); /* the leave timer ends the loop by itself */
    assert_true(hc_agent_has_left(agent));
    assert_false(exists(e->data_dir, HC_AGENT_FILE_KEY));
    assert_false(exists(e->data_dir, HC_AGENT_FILE_CERT));
    assert_false(exists(e->data_dir, HC_AGENT_FILE_CONFIG));
    hc_agent_free(agent);
    event_base_free(base);
}

/* A data directory that still holds an earlier membership's service data (the node was removed
 * while its agent did not answer): a new join sets it aside, unused and not deleted. */
static void test_join_sets_aside_old_service_data(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    char path[1200];
    assert_int_equal(hc_mkdir_p(e->data_dir, 0700, &err), 0);
    snprintf(path, sizeof(path), "%s/%s", e->data_dir, HC_AGENT_DIR_SERVICE_DATA);
    assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
    snprintf(path, sizeof(path), "%s/%s/block-1", e->data_dir, HC_AGENT_DIR_SERVICE_DATA);
    assert_int_equal(hc_file_write_atomic(path, "old", 3, 0600, &err), 0);
    if (run_join(e, e->ca_fp, "n1", &err) < 0)
        fail_msg("join: %s", err.message);
    assert_false(exists(e->data_dir, HC_AGENT_DIR_SERVICE_DATA));
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "test \"$(cat %s/%s/earlier.*/block-1)\" = old", e->data_dir,
             HC_AGENT_DIR_KEPT);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    evthread_use_pthreads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pin_accepts_matching_ca),
        cmocka_unit_test(test_pin_refuses_other_ca),
        cmocka_unit_test(test_config_round_trip),
        cmocka_unit_test(test_config_rejects_bad_files),
        cmocka_unit_test(test_name_check),
        cmocka_unit_test(test_agent_url),
        cmocka_unit_test(test_join_refuses_unpinned_controller),
        cmocka_unit_test(test_join_refusal_leaves_no_files),
        cmocka_unit_test(test_join_then_serve_then_leave),
        /* after the leave above: the directory holds no membership, only old service data */
        cmocka_unit_test(test_join_sets_aside_old_service_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
