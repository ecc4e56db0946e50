/*
 * Tests of common/https_server.c and common/https_client.c together: real TLS on 127.0.0.1 with
 * ephemeral ports, the server's event_base running in a thread, certificates made with the
 * openssl command line in a temporary directory (revocation lists with common/pki.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/https_client.h"
#include "common/https_server.h"
#include "common/pki.h"
#include "common/util.h"
#include "tests/unit/ports.h"
#include "tests/unit/support/support.h"

#define ROUTE_NEEDS_AUTH 1

/* ---------------------------------------------------------------- certificates */

static char certdir[512];

static const char gen_script[] =
    "set -e\n"
    "cat > cnf <<'EOF'\n"
    "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n"
    "[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
    "subjectKeyIdentifier = hash\n"
    "[server]\nbasicConstraints = CA:FALSE\nsubjectAltName = IP:127.0.0.1\n"
    "extendedKeyUsage = serverAuth\n"
    "[client]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n"
    "EOF\n"
    "key='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'\n"
    "ca() { openssl req -x509 -config cnf -extensions v3_ca $key -keyout $1.key -out $1.pem "
    "-subj /CN=$2 -days 2; }\n"
    "leaf() { openssl req -new -config cnf $key -keyout $1.key -out $1.csr -subj /CN=$2 && "
    "openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -set_serial $4 -days 2 "
    "-extfile cnf -extensions $5 -out $1.pem; }\n"
    "ca ca hc-test-ca\n"
    "ca ca2 hc-other-ca\n"
    "leaf server 127.0.0.1 ca 1 server\n"
    "leaf server2 127.0.0.1 ca 5 server\n"
    "leaf client hcctld-client ca 2 client\n"
    "leaf intruder intruder ca 3 client\n"
    "leaf other hcctld-client ca2 4 client\n";

static const char *cert(const char *name)
{
    static char paths[16][600];
    static int next;
    char *p = paths[next++ % 16];
    snprintf(p, sizeof(paths[0]), "%s/%s", certdir, name);
    return p;
}

static int make_certs(void **state)
{
    const char *base = getenv("HC_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700);
    snprintf(certdir, sizeof(certdir), "%s/test_http.XXXXXX", base);
    if (!mkdtemp(certdir))
        return -1;
    char path[600], cmd[1400];
    snprintf(path, sizeof(path), "%s/gen.sh", certdir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(gen_script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cd '%s' && sh gen.sh > gen.log 2>&1", certdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "certificate generation failed, see %s/gen.log\n", certdir);
        return -1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int remove_certs(void **state)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", certdir);
    curl_global_cleanup();
    return system(cmd) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- server fixture */

/* What the server thread saw, read by the test thread after the reply arrived. */
static struct {
    pthread_mutex_t mu;
    int after_status;
    int after_calls;
    char peer_cn[256];
    int peer_cn_set;
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct server {
    struct event_base *base;
    struct hc_http_server *srv;
    pthread_t thread;
    char url[64];
    int running;
};

static pthread_cond_t running_cv = PTHREAD_COND_INITIALIZER;

static void on_node(struct hc_request *req, void *arg)
{
    const char *verbose = hc_req_query(req, "verbose");
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:s*}", "name", hc_req_param(req, "name"), "verbose", verbose));
}

static void on_echo(struct hc_request *req, void *arg)
{
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    hc_reply_json(req, 201, json_pack("{s:O}", "got", body));
}

static void on_whoami(struct hc_request *req, void *arg)
{
    const char *cn = hc_req_peer_cn(req);
    pthread_mutex_lock(&seen.mu);
    seen.peer_cn_set = cn != NULL;
    snprintf(seen.peer_cn, sizeof(seen.peer_cn), "%s", cn ? cn : "");
    pthread_mutex_unlock(&seen.mu);
    hc_reply_json(req, 200,
                  json_pack("{s:s*, s:s, s:s}", "cn", cn, "addr", hc_req_peer_addr(req), "user",
                            (const char *)hc_req_user(req)));
}

static void on_secret(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, json_pack("{s:s}", "user", (const char *)hc_req_user(req)));
}

static void on_forgetful(struct hc_request *req, void *arg)
{
    (void)req; /* a buggy handler that never replies */
}

static void on_empty(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, NULL);
}

static int before_hook(struct hc_request *req, const struct hc_route *route, void *arg)
{
    const char *auth = hc_req_header(req, "Authorization");
    if (!(route->flags & ROUTE_NEEDS_AUTH)) {
        hc_req_set_user(req, "anonymous");
        return 0;
    }
    if (auth && strcmp(auth, "Bearer good-token") == 0) {
        hc_req_set_user(req, "admin");
        return 0;
    }
    struct hc_error err;
    hc_error_set(&err, HC_E(UNAUTHORIZED), "missing or unknown token");
    hc_reply_error(req, &err);
    return 1;
}

static void after_hook(struct hc_request *req, int status, void *arg)
{
    pthread_mutex_lock(&seen.mu);
    seen.after_status = status;
    seen.after_calls++;
    pthread_mutex_unlock(&seen.mu);
}

static int last_after_status(void)
{
    pthread_mutex_lock(&seen.mu);
    int s = seen.after_status;
    pthread_mutex_unlock(&seen.mu);
    return s;
}

/* First callback of the loop: from here on event_base_loopbreak cannot be lost (a break
 * requested before the loop starts is forgotten by libevent). */
static void loop_running(evutil_socket_t fd, short what, void *arg)
{
    struct server *s = arg;
    pthread_mutex_lock(&seen.mu);
    s->running = 1;
    pthread_cond_broadcast(&running_cv);
    pthread_mutex_unlock(&seen.mu);
}

static void *server_thread(void *arg)
{
    struct server *s = arg;
    event_base_loop(s->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static struct server *server_start(const struct hc_tls_server_config *tls, int timeout_s)
{
    struct server *s = calloc(1, sizeof(*s));
    struct hc_error err = {0};
    assert_non_null(s);
    s->base = event_base_new();
    assert_non_null(s->base);
    s->srv = hc_http_server_new(s->base, tls, &err);
    if (!s->srv)
        fail_msg("server: %s", err.message);
    hc_http_server_set_limits(s->srv, 0, timeout_s);
    hc_http_server_set_hooks(s->srv, before_hook, after_hook, NULL);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/nodes/{name}", 0, on_node, NULL), 0);
    assert_int_equal(hc_http_server_route(s->srv, "POST", "/v1/echo", 0, on_echo, NULL), 0);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/whoami", 0, on_whoami, NULL), 0);
    assert_int_equal(
        hc_http_server_route(s->srv, "GET", "/v1/secret", ROUTE_NEEDS_AUTH, on_secret, NULL), 0);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/forgetful", 0, on_forgetful, NULL),
                     0);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/empty", 0, on_empty, NULL), 0);
    if (hc_http_server_listen(s->srv, "127.0.0.1", 0, &err) != 0)
        fail_msg("listen: %s", err.message);
    assert_true(hc_http_server_port(s->srv) > 0);
    snprintf(s->url, sizeof(s->url), "https://127.0.0.1:%d", hc_http_server_port(s->srv));
    assert_int_equal(event_base_once(s->base, -1, EV_TIMEOUT, loop_running, s, NULL), 0);
    assert_int_equal(pthread_create(&s->thread, NULL, server_thread, s), 0);
    pthread_mutex_lock(&seen.mu);
    while (!s->running)
        pthread_cond_wait(&running_cv, &seen.mu);
    pthread_mutex_unlock(&seen.mu);
    return s;
}

static void server_stop(struct server *s)
{
    event_base_loopbreak(s->base);
    pthread_join(s->thread, NULL);
    hc_http_server_free(s->srv);
    event_base_free(s->base);
    free(s);
}

static struct server *plain_server(void)
{
    struct hc_tls_server_config tls = {.cert_file = cert("server.pem"),
                                       .key_file = cert("server.key")};
    return server_start(&tls, 0);
}

static struct server *mtls_server(const char *required_cn)
{
    struct hc_tls_server_config tls = {.cert_file = cert("server.pem"),
                                       .key_file = cert("server.key"),
                                       .client_ca_file = cert("ca.pem"),
                                       .required_client_cn = required_cn};
    return server_start(&tls, 0);
}

/* ---------------------------------------------------------------- client helpers */

static struct hc_http_client *client_with(const char *ca, const char *who)
{
    struct hc_tls_client_config tls = {.ca_file = ca};
    char certname[64], keyname[64];
    if (who) {
        snprintf(certname, sizeof(certname), "%s.pem", who);
        snprintf(keyname, sizeof(keyname), "%s.key", who);
        tls.cert_file = cert(certname);
        tls.key_file = cert(keyname);
    }
    struct hc_error err = {0};
    struct hc_http_client *c = hc_http_client_new(&tls, &err);
    if (!c)
        fail_msg("client: %s", err.message);
    return c;
}

/* One request; returns 0/-1 like hc_http_request, fills resp and err. */
static int call(struct hc_http_client *c, const char *method, const struct server *s,
                const char *path, const char *bearer, const json_t *body,
                struct hc_http_response *resp, struct hc_error *err)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", s->url, path);
    hc_error_clear(err);
    return hc_http_request(c, method, url, bearer, body, 5000, resp, err);
}

static void assert_error_shape(const struct hc_http_response *resp, long status, const char *code)
{
    struct hc_error e;
    assert_int_equal(resp->status, status);
    assert_non_null(resp->body);
    assert_int_equal(json_object_size(resp->body), 1);
    assert_int_equal(hc_error_from_json(&e, resp->body, (int)resp->status), 0);
    assert_string_equal(e.code, code);
    assert_true(e.message[0] != '\0');
    assert_true(resp->raw_len > 0 && resp->raw[resp->raw_len - 1] == '\n');
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- plain TLS server */

static void test_get_with_path_param(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(
        call(c, "GET", s, "/v1/nodes/node%20one?verbose=yes%21", NULL, NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.raw, "{\"name\":\"node one\",\"verbose\":\"yes!\"}\n");
    assert_string_equal(json_string_value(json_object_get(resp.body, "name")), "node one");
    assert_int_equal(last_after_status(), 200);
    hc_http_response_clear(&resp);

    /* No query string: the member is absent; a reply without body is "{}". */
    assert_int_equal(call(c, "GET", s, "/v1/nodes/n2", NULL, NULL, &resp, &err), 0);
    assert_string_equal(resp.raw, "{\"name\":\"n2\"}\n");
    hc_http_response_clear(&resp);
    assert_int_equal(call(c, "GET", s, "/v1/empty", NULL, NULL, &resp, &err), 0);
    assert_string_equal(resp.raw, "{}\n");
    hc_http_response_clear(&resp);

    /* Without a client certificate there is no peer CN; the before-hook's user is visible. */
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), 0);
    assert_null(json_object_get(resp.body, "cn"));
    assert_string_equal(json_string_value(json_object_get(resp.body, "addr")), "127.0.0.1");
    assert_string_equal(json_string_value(json_object_get(resp.body, "user")), "anonymous");
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

static void test_unknown_path_and_wrong_method(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/nope", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 404, HC_ERR_NOT_FOUND);
    assert_int_equal(last_after_status(), 404);
    hc_http_response_clear(&resp);

    assert_int_equal(call(c, "GET", s, "/v1/nodes/", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 404, HC_ERR_NOT_FOUND);
    hc_http_response_clear(&resp);

    assert_int_equal(call(c, "PUT", s, "/v1/nodes/n1", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 405, HC_ERR_METHOD_NOT_ALLOWED);
    assert_int_equal(last_after_status(), 405);
    hc_http_response_clear(&resp);

    /* A method evhttp would answer itself (in HTML) still gets the JSON shape. */
    assert_int_equal(call(c, "PATCH", s, "/v1/echo", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 405, HC_ERR_METHOD_NOT_ALLOWED);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

/* Sends raw bytes (not JSON) with plain libcurl: our client only sends JSON. Also reports the
 * response's Content-Type, which our client does not expose. */
static char raw_content_type[128];

static long raw_post(const struct server *s, const char *path, const char *data, char **out)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", s->url, path);
    FILE *mem;
    size_t memlen = 0;
    *out = NULL;
    mem = open_memstream(out, &memlen);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CAINFO, cert("ca.pem"));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    long status = -1;
    char *ctype = NULL;
    raw_content_type[0] = '\0';
    if (curl_easy_perform(e) == CURLE_OK) {
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype);
        snprintf(raw_content_type, sizeof(raw_content_type), "%s", ctype ? ctype : "");
    }
    curl_easy_cleanup(e);
    fclose(mem);
    return status;
}

static void test_invalid_json(void **state)
{
    struct server *s = plain_server();
    char *out = NULL;
    assert_int_equal(raw_post(s, "/v1/echo", "this is not json", &out), 400);
    assert_string_equal(raw_content_type, "application/json");
    json_t *body = json_loads(out, 0, NULL);
    struct hc_http_response resp = {
        .status = 400, .raw = out, .raw_len = strlen(out), .body = body};
    assert_error_shape(&resp, 400, HC_ERR_INVALID_JSON);
    assert_int_equal(last_after_status(), 400);
    hc_http_response_clear(&resp);

    assert_int_equal(raw_post(s, "/v1/echo", "[1,2]", &out), 400);
    assert_non_null(strstr(out, "\"invalid_json\""));
    free(out);
    assert_int_equal(raw_post(s, "/v1/echo", "{\"k\":\"v\"}", &out), 201);
    assert_string_equal(raw_content_type, "application/json");
    assert_string_equal(out, "{\"got\":{\"k\":\"v\"}}\n");
    free(out);

    /* And a JSON object goes through to the handler. */
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_error err;
    json_t *in = json_pack("{s:i, s:[s]}", "n", 42, "list", "x");
    assert_int_equal(call(c, "POST", s, "/v1/echo", NULL, in, &resp, &err), 0);
    assert_int_equal(resp.status, 201);
    assert_true(json_equal(json_object_get(resp.body, "got"), in));
    assert_int_equal(last_after_status(), 201);
    hc_http_response_clear(&resp);
    json_decref(in);
    hc_http_client_free(c);
    server_stop(s);
}

static json_t *padded_body(size_t bytes)
{
    char *pad = malloc(bytes + 1);
    memset(pad, 'a', bytes);
    pad[bytes] = '\0';
    json_t *j = json_pack("{s:s}", "pad", pad);
    free(pad);
    return j;
}

static void test_body_too_large(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err;
    json_t *big = padded_body(1024 * 1024 + 64 * 1024); /* within the eighth libevent allows */
    assert_int_equal(call(c, "POST", s, "/v1/echo", NULL, big, &resp, &err), 0);
    assert_error_shape(&resp, 413, HC_ERR_BODY_TOO_LARGE);
    assert_int_equal(last_after_status(), 413);
    hc_http_response_clear(&resp);
    json_decref(big);

    /* Just under the limit is accepted. */
    json_t *fits = padded_body(1024 * 1024 - 64);
    assert_int_equal(call(c, "POST", s, "/v1/echo", NULL, fits, &resp, &err), 0);
    assert_int_equal(resp.status, 201);
    hc_http_response_clear(&resp);
    json_decref(fits);

    /* Past the backstop (the limit and an eighth) libevent itself answers 413, then the server
     * still works. */
    json_t *huge = padded_body(9 * 1024 * 1024);
    if (call(c, "POST", s, "/v1/echo", NULL, huge, &resp, &err) == 0)
        assert_int_equal(resp.status, 413);
    hc_http_response_clear(&resp);
    json_decref(huge);
    assert_int_equal(call(c, "GET", s, "/v1/nodes/after", NULL, NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

static void test_before_hook_401(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/secret", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 401, HC_ERR_UNAUTHORIZED);
    assert_int_equal(last_after_status(), 401);
    hc_http_response_clear(&resp);

    assert_int_equal(call(c, "GET", s, "/v1/secret", "bad-token", NULL, &resp, &err), 0);
    assert_error_shape(&resp, 401, HC_ERR_UNAUTHORIZED);
    hc_http_response_clear(&resp);

    assert_int_equal(call(c, "GET", s, "/v1/secret", "good-token", NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(json_string_value(json_object_get(resp.body, "user")), "admin");
    assert_int_equal(last_after_status(), 200);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

static void test_handler_without_reply(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/forgetful", NULL, NULL, &resp, &err), 0);
    assert_error_shape(&resp, 500, HC_ERR_INTERNAL);
    assert_int_equal(last_after_status(), 500);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

/* ---------------------------------------------------------------- TLS verification */

static void expect_tls_error(struct hc_http_client *c, const struct server *s)
{
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), -1);
    if (strcmp(err.code, HC_ERR_TLS) != 0)
        fail_msg("expected tls_error, got %s: %s", err.code, err.message);
    assert_int_equal(err.status, 0);
    assert_non_null(strstr(err.message, s->url));
    assert_int_equal(resp.status, 0);
    assert_null(resp.raw);
}

static void test_mtls_required_cn(void **state)
{
    struct server *s = mtls_server("hcctld-client");
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    expect_tls_error(c, s);
    hc_http_client_free(c);

    c = client_with(cert("ca.pem"), "intruder");
    expect_tls_error(c, s);
    hc_http_client_free(c);

    /* Right CN, but signed by another CA. */
    c = client_with(cert("ca.pem"), "other");
    expect_tls_error(c, s);
    hc_http_client_free(c);

    pthread_mutex_lock(&seen.mu);
    seen.peer_cn_set = 0;
    pthread_mutex_unlock(&seen.mu);
    c = client_with(cert("ca.pem"), "client");
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    assert_string_equal(json_string_value(json_object_get(resp.body, "cn")), "hcctld-client");
    pthread_mutex_lock(&seen.mu);
    assert_true(seen.peer_cn_set);
    assert_string_equal(seen.peer_cn, "hcctld-client");
    pthread_mutex_unlock(&seen.mu);
    hc_http_response_clear(&resp);
    /* A second request on the same client (reused connection) still sees the CN. */
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), 0);
    assert_string_equal(json_string_value(json_object_get(resp.body, "cn")), "hcctld-client");
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    server_stop(s);
}

/* Without required_client_cn any certificate of the CA is accepted: the CN check above is what
 * refused the intruder, not something else about its certificate. */
static void test_mtls_any_cn(void **state)
{
    struct server *s = mtls_server(NULL);
    struct hc_http_client *c = client_with(cert("ca.pem"), "intruder");
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), 0);
    assert_string_equal(json_string_value(json_object_get(resp.body, "cn")), "intruder");
    hc_http_response_clear(&resp);
    hc_http_client_free(c);

    c = client_with(cert("ca.pem"), NULL);
    expect_tls_error(c, s);
    hc_http_client_free(c);
    server_stop(s);
}

static void test_client_trust(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca2.pem"), NULL);
    expect_tls_error(c, s);
    hc_http_client_free(c);

    /* The CA as PEM text instead of a file. */
    FILE *f = fopen(cert("ca.pem"), "r");
    char pem[8192];
    size_t n = fread(pem, 1, sizeof(pem) - 1, f);
    fclose(f);
    pem[n] = '\0';
    struct hc_error err = {0};
    struct hc_tls_client_config tls = {.ca_pem = pem};
    c = hc_http_client_new(&tls, &err);
    assert_non_null(c);
    struct hc_http_response resp = {0};
    assert_int_equal(call(c, "GET", s, "/v1/nodes/pem", NULL, NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);

    /* insecure skips verification (used only to fetch a CA that is then pinned). */
    struct hc_tls_client_config insecure = {.ca_file = cert("ca2.pem"), .insecure = 1};
    c = hc_http_client_new(&insecure, &err);
    assert_non_null(c);
    assert_int_equal(call(c, "GET", s, "/v1/nodes/insecure", NULL, NULL, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);

    /* A missing file is reported at creation, naming the file. */
    struct hc_tls_client_config missing = {.ca_file = "/nonexistent/ca.pem"};
    assert_null(hc_http_client_new(&missing, &err));
    assert_non_null(strstr(err.message, "/nonexistent/ca.pem"));
    server_stop(s);
}

static void test_server_config_errors(void **state)
{
    struct event_base *base = event_base_new();
    struct hc_error err = {0};
    struct hc_tls_server_config nocert = {.cert_file = "/nonexistent/server.pem",
                                          .key_file = cert("server.key")};
    assert_null(hc_http_server_new(base, &nocert, &err));
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, "/nonexistent/server.pem"));

    /* The key of another certificate does not match. */
    struct hc_tls_server_config wrongkey = {.cert_file = cert("server.pem"),
                                            .key_file = cert("client.key")};
    assert_null(hc_http_server_new(base, &wrongkey, &err));
    assert_string_equal(err.code, HC_ERR_TLS);

    struct hc_tls_server_config noca = {.cert_file = cert("server.pem"),
                                        .key_file = cert("server.key"),
                                        .client_ca_file = "/nonexistent/ca.pem"};
    assert_null(hc_http_server_new(base, &noca, &err));
    assert_non_null(strstr(err.message, "/nonexistent/ca.pem"));

    /* Two servers on one port: the second listen fails, naming the address. */
    struct hc_tls_server_config ok = {.cert_file = cert("server.pem"),
                                      .key_file = cert("server.key")};
    struct hc_http_server *a = hc_http_server_new(base, &ok, &err);
    struct hc_http_server *b = hc_http_server_new(base, &ok, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(hc_http_server_listen(a, "127.0.0.1", 0, &err), 0);
    int port = hc_http_server_port(a);
    assert_int_equal(hc_http_server_listen(b, "127.0.0.1", port, &err), -1);
    assert_non_null(strstr(err.message, "127.0.0.1"));
    assert_non_null(strstr(err.message, "in use"));
    hc_http_server_free(a);
    hc_http_server_free(b);
    hc_http_server_free(NULL);
    event_base_free(base);
}

/* ---------------------------------------------------------------- fan-out and failures */

static void test_fanout(void **state)
{
    struct server *s = plain_server();
    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    enum { N = 50 };
    struct hc_http_call calls[N + 1];
    char urls[N + 1][128];
    memset(calls, 0, sizeof(calls));
    for (int i = 0; i < N; i++) {
        snprintf(urls[i], sizeof(urls[i]), "%s/v1/nodes/n%d", s->url, i);
        calls[i].method = "GET";
        calls[i].url = urls[i];
        calls[i].timeout_ms = 5000;
    }
    assert_int_equal(hc_http_fanout(c, calls, N, 8), N);
    for (int i = 0; i < N; i++) {
        char want[16];
        snprintf(want, sizeof(want), "n%d", i);
        assert_int_equal(calls[i].ok, 1);
        assert_int_equal(calls[i].resp.status, 200);
        assert_string_equal(json_string_value(json_object_get(calls[i].resp.body, "name")), want);
        assert_true(calls[i].elapsed_ms >= 0 && calls[i].elapsed_ms < 5000);
        hc_http_response_clear(&calls[i].resp);
    }

    /* One unreachable call among good ones fails alone, with its own error. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    snprintf(urls[N], sizeof(urls[N]), "https://127.0.0.1:%d/v1/status", ntohs(sa.sin_port));
    calls[N].method = "GET";
    calls[N].url = urls[N];
    assert_int_equal(hc_http_fanout(c, calls + N - 3, 4, 0), 3);
    assert_int_equal(calls[N].ok, 0);
    assert_string_equal(calls[N].err.code, HC_ERR_UNREACHABLE);
    for (int i = N - 3; i < N; i++)
        hc_http_response_clear(&calls[i].resp);
    hc_http_client_free(c);
    server_stop(s);
}

/* A listener that never answers: the kernel completes the TCP handshake (the socket listens,
 * so connections are accepted into its backlog) and then nothing ever comes back, like a peer
 * behind an MTU blackhole. */
static void test_timeout(void **state)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/status", ntohs(sa.sin_port));

    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err = {0};
    int64_t t0 = now_ms();
    assert_int_equal(hc_http_request(c, "GET", url, NULL, NULL, 500, &resp, &err), -1);
    int64_t took = now_ms() - t0;
    assert_string_equal(err.code, HC_ERR_TIMEOUT);
    assert_non_null(strstr(err.message, url));
    assert_true(took >= 400);
    assert_true(took < 3000);
    hc_http_client_free(c);
    close(fd);
}

static void test_closed_port(void **state)
{
    char url[128], want[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/status", hc_test_closed_port());
    snprintf(want, sizeof(want), "cannot reach '%s': connection refused", url);

    struct hc_http_client *c = client_with(cert("ca.pem"), NULL);
    struct hc_http_response resp = {0};
    struct hc_error err = {0};
    assert_int_equal(hc_http_request(c, "GET", url, NULL, NULL, 2000, &resp, &err), -1);
    assert_string_equal(err.code, HC_ERR_UNREACHABLE);
    assert_int_equal(err.status, 0);
    assert_string_equal(err.message, want);

    /* Not an https URL: refused before any connection. */
    assert_int_equal(
        hc_http_request(c, "GET", "http://127.0.0.1:1/", NULL, NULL, 2000, &resp, &err), -1);
    assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    hc_http_client_free(c);
}

/* The server's timeout also drops a client that connects and never says anything. */
static void test_server_drops_idle_client(void **state)
{
    struct hc_tls_server_config tls = {.cert_file = cert("server.pem"),
                                       .key_file = cert("server.key")};
    struct server *s = server_start(&tls, 1);
    int port = atoi(strrchr(s->url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = 6};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[64];
    int64_t t0 = now_ms();
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    int64_t took = now_ms() - t0;
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    assert_true(took < 4000);
    close(fd);
    server_stop(s);
}

/* ---------------------------------------------------------------- revocation */

/* crl.pem of the test CA listing the given serials (hex), made as hcctld makes its own. */
static void write_crl(const char *const *serials, size_t n)
{
    struct hc_error err = {0};
    struct hc_pki_revoked list[4];
    X509 *ca = hc_pki_cert_load(cert("ca.pem"), &err);
    EVP_PKEY *key = ca ? hc_pki_key_load(cert("ca.key"), &err) : NULL;
    if (!key)
        fail_msg("ca: %s", err.message);
    assert_true(n <= 4);
    for (size_t i = 0; i < n; i++)
        list[i] = (struct hc_pki_revoked){serials[i], (int64_t)time(NULL)};
    X509_CRL *crl = hc_pki_crl_new(ca, key, list, n, &err);
    if (!crl || hc_pki_crl_save(crl, cert("crl.pem"), &err) != 0)
        fail_msg("crl: %s", err.message);
    X509_CRL_free(crl);
    EVP_PKEY_free(key);
    X509_free(ca);
}

/* An agent-like server: its own certificate, the controller's client certificate required. */
static struct server *agent_like_server(const char *name)
{
    char certname[64], keyname[64];
    snprintf(certname, sizeof(certname), "%s.pem", name);
    snprintf(keyname, sizeof(keyname), "%s.key", name);
    struct hc_tls_server_config tls = {.cert_file = cert(certname),
                                       .key_file = cert(keyname),
                                       .client_ca_file = cert("ca.pem"),
                                       .required_client_cn = "hcctld-client"};
    return server_start(&tls, 0);
}

static struct hc_http_client *controller_like_client(void)
{
    struct hc_tls_client_config tls = {.ca_file = cert("ca.pem"),
                                       .cert_file = cert("client.pem"),
                                       .key_file = cert("client.key"),
                                       .crl_file = cert("crl.pem")};
    struct hc_error err = {0};
    struct hc_http_client *c = hc_http_client_new(&tls, &err);
    if (!c)
        fail_msg("client: %s", err.message);
    return c;
}

static void expect_ok(struct hc_http_client *c, const struct server *s)
{
    struct hc_http_response resp = {0};
    struct hc_error err;
    if (call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err) != 0)
        fail_msg("%s: %s", s->url, err.message);
    assert_int_equal(resp.status, 200);
    hc_http_response_clear(&resp);
}

static void expect_revoked(struct hc_http_client *c, const struct server *s)
{
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(call(c, "GET", s, "/v1/whoami", NULL, NULL, &resp, &err), -1);
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, s->url));
    assert_non_null(strstr(err.message, "revoked"));
}

/* GET /v1/whoami of s through a fan-out, answered 200: 1 when it opened a new connection. */
static int whoami_new_connection(struct hc_http_client *c, const struct server *s)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/whoami", s->url);
    struct hc_http_call one = {.method = "GET", .url = url, .timeout_ms = 5000};
    if (hc_http_fanout(c, &one, 1, 1) != 1)
        fail_msg("%s: %s", url, one.err.message);
    assert_int_equal(one.resp.status, 200);
    hc_http_response_clear(&one.resp);
    return one.new_connection;
}

/* server.pem (serial 01) stays good; server2.pem (serial 05) is revoked half-way. */
static void test_crl(void **state)
{
    struct server *good = agent_like_server("server");
    struct server *gone = agent_like_server("server2");

    /* An empty list breaks nothing. */
    write_crl(NULL, 0);
    struct hc_http_client *c = controller_like_client();
    assert_int_equal(whoami_new_connection(c, good), 1);
    expect_ok(c, gone);
    assert_int_equal(whoami_new_connection(c, good), 0);

    /* Revoked while this client holds a kept-alive connection and a TLS session to it: the
     * request on the kept connection is refused before it goes out (and the connection
     * closed), the next one on a new connection likewise. The serial is named as hcctl shows
     * serials (32 hex digits). The kept connection to the other peer stays. */
    const char *serials[] = {"05"};
    write_crl(serials, 1);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/whoami", gone->url);
    for (int i = 0; i < 2; i++) {
        struct hc_http_call one = {.method = "GET", .url = url, .timeout_ms = 5000};
        assert_int_equal(hc_http_fanout(c, &one, 1, 1), 0);
        assert_string_equal(one.err.code, HC_ERR_TLS);
        assert_non_null(
            strstr(one.err.message,
                   "its certificate (serial 00000000000000000000000000000005) is revoked"));
        assert_int_equal(one.new_connection, i); /* the kept one, then a new one */
        if (i == 0)
            assert_int_equal(whoami_new_connection(c, good), 0);
    }

    /* A fan-out (the poller's way) refuses the revoked one only. */
    char url_good[256], url_gone[256];
    snprintf(url_good, sizeof(url_good), "%s/v1/whoami", good->url);
    snprintf(url_gone, sizeof(url_gone), "%s/v1/whoami", gone->url);
    struct hc_http_call calls[] = {{.method = "GET", .url = url_good, .timeout_ms = 5000},
                                   {.method = "GET", .url = url_gone, .timeout_ms = 5000}};
    assert_int_equal(hc_http_fanout(c, calls, 2, 0), 1);
    assert_true(calls[0].ok);
    assert_int_equal(calls[0].resp.status, 200);
    assert_false(calls[1].ok);
    assert_string_equal(calls[1].err.code, HC_ERR_TLS);
    hc_http_response_clear(&calls[0].resp);
    hc_http_client_free(c);

    /* A new client refuses it from the start. */
    c = controller_like_client();
    expect_revoked(c, gone);
    expect_ok(c, good);

    /* A CA file written again: the connections verified against the old one are dropped. */
    assert_int_equal(whoami_new_connection(c, good), 0);
    char *ca = hc_test_file_text(cert("ca.pem"));
    struct hc_http_response resp = {0};
    struct hc_error err;
    assert_int_equal(hc_file_write_atomic(cert("ca.pem"), ca, strlen(ca), 0644, &err), 0);
    free(ca);
    assert_int_equal(whoami_new_connection(c, good), 1);
    assert_int_equal(whoami_new_connection(c, good), 0);

    /* A list followed by a broken one fails closed too (the broken one may be another CA's),
     * and the whole list written again is taken again. */
    char *crl = hc_test_file_text(cert("crl.pem"));
    char *broken = NULL;
    assert_true(asprintf(&broken, "%s-----BEGIN X509 CRL-----\nMIIB!!!!\n-----END X509 CRL-----\n",
                         crl) > 0);
    assert_int_equal(hc_file_write_atomic(cert("crl.pem"), broken, strlen(broken), 0644, &err), 0);
    assert_int_equal(call(c, "GET", good, "/v1/whoami", NULL, NULL, &resp, &err), -1);
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, "cannot be read"));
    assert_int_equal(hc_file_write_atomic(cert("crl.pem"), crl, strlen(crl), 0644, &err), 0);
    expect_ok(c, good);
    free(broken);
    free(crl);

    /* A list that disappears fails closed: no connection, old or new, goes on without it. */
    assert_int_equal(unlink(cert("crl.pem")), 0);
    assert_int_equal(call(c, "GET", good, "/v1/whoami", NULL, NULL, &resp, &err), -1);
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, "cannot be read"));
    hc_http_client_free(c);
    struct hc_tls_client_config tls = {.ca_file = cert("ca.pem"), .crl_file = cert("crl.pem")};
    assert_null(hc_http_client_new(&tls, &err));
    assert_string_equal(err.code, HC_ERR_IO);
    assert_non_null(strstr(err.message, "crl file"));

    server_stop(good);
    server_stop(gone);
}

int main(void)
{
    /* The test thread stops the server thread's loop: libevent needs its locks. */
    evthread_use_pthreads();
    /* As hcctld and hcagent do: the in-process server may write (TLS 1.3 session tickets) to a
     * client that has just refused its certificate and closed (test_crl); without this the
     * write's SIGPIPE kills the test now and then. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_with_path_param),
        cmocka_unit_test(test_unknown_path_and_wrong_method),
        cmocka_unit_test(test_invalid_json),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_before_hook_401),
        cmocka_unit_test(test_handler_without_reply),
        cmocka_unit_test(test_mtls_required_cn),
        cmocka_unit_test(test_mtls_any_cn),
        cmocka_unit_test(test_client_trust),
        cmocka_unit_test(test_server_config_errors),
        cmocka_unit_test(test_fanout),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_closed_port),
        cmocka_unit_test(test_server_drops_idle_client),
        cmocka_unit_test(test_crl),
    };
    int rc = cmocka_run_group_tests(tests, make_certs, remove_certs);
    libevent_global_shutdown();
    return rc;
}
