/*
 * Unit tests of hcctl's controller list (cli/controllers.c: the URLs and their hostile forms,
 * the config file's array, the pin rule) and of its leader search (cli/api_client.c) against
 * stand-in controllers on 127.0.0.1 over real TLS (common/https_server): a closed port, a
 * standby answering 421 not_leader that names another, a leader answering 200, one answering
 * 503 no_leader (with Retry-After) for a while, a 421 loop, a 421 naming nobody or a bad URL,
 * and a controller that never answers, which counts what it received. These stand-ins are test
 * doubles of the HA controller's answers (docs/api.md), not the HA controller itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/api_client.h"
#include "cli/cmd.h"
#include "cli/config.h"
#include "cli/controllers.h"
#include "cli/exit_codes.h"
#include "common/https_server.h"
#include "common/pki.h"
#include "common/util.h"
#include "tests/unit/support/support.h"

/* ---------------------------------------------------------------- the list */

static void parse_ok(const char *text, size_t n, const char *first)
{
    struct hc_cli_controllers list;
    struct hc_error err = {0};
    char *norm = hc_cli_controllers_normalize(text);
    assert_non_null(norm);
    if (hc_cli_controllers_parse(norm, "--controller", &list, &err) < 0)
        fail_msg("'%s' refused: %s", text, err.message);
    assert_int_equal(list.n, n);
    assert_string_equal(list.url[0], first);
    free(norm);
}

static void parse_bad(const char *text, const char *expect)
{
    struct hc_cli_controllers list;
    struct hc_error err = {0};
    char *norm = hc_cli_controllers_normalize(text);
    assert_non_null(norm);
    if (hc_cli_controllers_parse(norm, "--controller", &list, &err) == 0)
        fail_msg("'%.80s' accepted", text);
    assert_string_equal(err.code, HC_CLI_ERR_USAGE);
    if (!strstr(err.message, expect))
        fail_msg("'%.80s': '%s' lacks '%s'", text, err.message, expect);
    assert_non_null(strstr(err.message, "--controller"));
    free(norm);
}

static void test_list_parse(void **state)
{
    (void)state;
    parse_ok("https://a:7443", 1, "https://a:7443");
    parse_ok("10.0.0.1:7443/", 1, "https://10.0.0.1:7443");
    parse_ok("https://a:7443,https://b:7443,https://c:7443", 3, "https://a:7443");
    parse_ok(" https://a:7443 , b:7443\t", 2, "https://a:7443"); /* blanks around items */
    parse_ok("https://[::1]:7443,https://[fe80::1]", 2, "https://[::1]:7443");
    parse_ok("HTTPS://Ctl-1.example_x.org", 1, "HTTPS://Ctl-1.example_x.org");
    parse_ok("a:1,b:2,c:3,d:4,e:5,f:6,g:7", 7, "https://a:1");

    parse_bad("https://a:7443,,https://b:7443", "empty item (2 of 3)");
    parse_bad(",", "empty item (1 of 2)");
    parse_bad("https://a:7443,", "empty item (2 of 2)");
    parse_bad("http://a:7443", "must start with https:// (got 'http://a:7443' from --controller)");
    parse_bad("https://a:7443,ftp://b", "must start with https://");
    parse_bad("https://a:7443/api", "must not have a path, query or fragment");
    parse_bad("https://a:7443?x=1", "must not have a path, query or fragment");
    parse_bad("https://a:7443#top", "must not have a path, query or fragment");
    parse_bad("https://user:pw@a:7443", "user name or password");
    parse_bad("https://a b:7443", "a blank or a control character");
    parse_bad("https://a\x1b[2J:7443", "a blank or a control character");
    parse_bad("https://h\xc3\xa9:7443", "no valid host");
    parse_bad("https://:7443", "no valid host");
    parse_bad("https://", "no valid host");
    parse_bad("https://[::1", "no valid host");
    parse_bad("https://a:0", "invalid port");
    parse_bad("https://a:65536", "invalid port");
    parse_bad("https://a:", "invalid port");
    parse_bad("https://a:74x3", "invalid port");
    parse_bad("a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8", "at most 7 controller URLs may be given (got 8");
    parse_bad("https://a:7443,https://b:7443,https://A:7443", "'https://A:7443' is given twice");
    parse_bad("https://a,https://a:443", "given twice");
    parse_bad("https://a:7443,a:7443/", "given twice");

    /* huge values: one giant URL, and a giant list of commas, each refused in one pass */
    size_t big = 4 << 20;
    char *huge = malloc(big + 16);
    memcpy(huge, "https://", 8);
    memset(huge + 8, 'a', big);
    huge[big + 8] = '\0';
    parse_bad(huge, "is too long (4194312 bytes; at most 300)");
    memset(huge, ',', big);
    huge[big] = '\0';
    parse_bad(huge, "at most 7 controller URLs may be given (got 4194305");
    free(huge);

    char out[HC_CLI_URL_MAX + 1];
    struct hc_error err = {0};
    assert_int_equal(hc_cli_controller_url_check("https://b:7443/", "x", out, &err), 0);
    assert_string_equal(out, "https://b:7443");
    assert_int_equal(hc_cli_controller_url_check("https://b,https://c", "x", out, &err), -1);
    assert_int_equal(hc_cli_controller_url_check("http://b", "x", out, &err), -1);
}

/* ---------------------------------------------------------------- stand-in controllers */

enum mode {
    ANSWER,        /* 200 */
    NOT_LEADER,    /* 421 naming leader */
    NAMES_NOBODY,  /* 421 without a "leader" */
    NO_LEADER,     /* 503 no_leader with Retry-After retry_after, elections times, then 200 */
    NEVER_ANSWERS, /* keeps the request open (deferred), never replies */
};

struct standin {
    struct hc_http_server *srv;
    char url[64];
    enum mode mode;
    char leader[128];
    int elections;
    int answer_after; /* > 0: answers 200 once it has had that many requests (a new leader) */
    const char *retry_after;
    int requests;
    char auth[128];
    struct hc_deferred *held[8];
    int nheld;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct event_base *base;
static pthread_t loop_thread;
static struct standin sa, sb, sc;
static char dir[512], ca_path[700], other_ca_path[700], closed_url[64];
static char cache_path[700]; /* $XDG_CACHE_HOME/hcctl/leader, in the scratch dir */

static int failover_after; /* operation polls the leader answers before a failover */

/* GET /v1/operations/op-1: "running" from sa, which after failover_after polls becomes a
 * standby naming sc, while sc answers no_leader for a while (an election longer than the
 * search's --timeout) and then "succeeded": the same operation, on the new leader. */
static void on_operation(struct hc_request *req, struct standin *s)
{
    int done = s == &sc;
    pthread_mutex_lock(&mu);
    if (s == &sa && --failover_after <= 0) {
        sa.mode = NOT_LEADER;
        snprintf(sa.leader, sizeof(sa.leader), "%s", sc.url);
        sc.mode = NO_LEADER;
        sc.elections = 7; /* each round asks it three times: sa's hop, sb's, its own */
        sc.retry_after = "1";
    }
    pthread_mutex_unlock(&mu);
    hc_reply_json(req, 200,
                  json_pack("{s:{s:s, s:s, s:s, s:n}, s:[]}", "operation", "id",
                            hc_req_param(req, "id"), "kind", "rolling.upgrade", "state",
                            done ? "succeeded" : "running", "error", "steps"));
}

static void on_any(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    struct hc_error err = {0};
    const char *auth = hc_req_header(req, "Authorization");
    pthread_mutex_lock(&mu);
    s->requests++;
    snprintf(s->auth, sizeof(s->auth), "%s", auth ? auth : "");
    enum mode mode = s->mode;
    if (mode == NO_LEADER && s->elections-- <= 0)
        mode = ANSWER;
    if (s->answer_after > 0 && s->requests > s->answer_after)
        mode = ANSWER;
    pthread_mutex_unlock(&mu);
    switch (mode) {
    case ANSWER:
        if (strncmp(hc_req_path(req), "/v1/operations/", 15) == 0) {
            on_operation(req, s);
            return;
        }
        hc_reply_json(req, 200,
                      json_pack("{s:s, s:s}", "served_by", s->url, "method", hc_req_method(req)));
        return;
    case NOT_LEADER:
    case NAMES_NOBODY: {
        json_t *body = json_pack("{s:{s:s, s:s}}", "error", "code", HC_ERR_NOT_LEADER, "message",
                                 "this controller is a standby");
        if (mode == NOT_LEADER)
            json_object_set_new(json_object_get(body, "error"), "leader", json_string(s->leader));
        hc_reply_json(req, 421, body);
        return;
    }
    case NO_LEADER:
        if (s->retry_after)
            hc_reply_header(req, "Retry-After", s->retry_after);
        hc_error_set(&err, HC_E(NO_LEADER), "no controller leads right now");
        hc_reply_error(req, &err);
        return;
    case NEVER_ANSWERS:
        if (s->nheld < 8)
            s->held[s->nheld++] = hc_req_defer(req);
        return;
    }
}

static void standin_new(struct standin *s, const char *cert, const char *key)
{
    struct hc_error err = {0};
    struct hc_tls_server_config tls = {.cert_file = cert, .key_file = key};
    s->srv = hc_http_server_new(base, &tls, &err);
    assert_non_null(s->srv);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/nodes", 0, on_any, s), 0);
    assert_int_equal(hc_http_server_route(s->srv, "POST", "/v1/upgrade", 0, on_any, s), 0);
    assert_int_equal(hc_http_server_route(s->srv, "GET", "/v1/operations/{id}", 0, on_any, s), 0);
    assert_int_equal(hc_http_server_listen(s->srv, "127.0.0.1", 0, &err), 0);
    snprintf(s->url, sizeof(s->url), "https://127.0.0.1:%d", hc_http_server_port(s->srv));
}

static void *loop_main(void *arg)
{
    event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* A port nobody listens on: bound, then closed. */
static void closed_port(char *url, size_t len)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    close(fd);
    snprintf(url, len, "https://127.0.0.1:%d", ntohs(sin.sin_port));
}

static int setup(void **state)
{
    struct hc_error err = {0};
    const char *tmp = getenv("HC_TEST_TMP");
    char cert[700], key[700];
    static const char *const sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {
        .cn = "127.0.0.1", .sans = sans, .nsans = 1, .server_auth = 1, .days = 2};
    mkdir(tmp && *tmp ? tmp : "/tmp", 0700);
    snprintf(dir, sizeof(dir), "%s/test_leader.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    EVP_PKEY *ca_key = hc_pki_key_new(&err), *other_key = hc_pki_key_new(&err);
    X509 *ca = hc_pki_ca_new(ca_key, "test-ca", 2, &err);
    X509 *other = hc_pki_ca_new(other_key, "other-ca", 2, &err);
    snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
    snprintf(other_ca_path, sizeof(other_ca_path), "%s/other.pem", dir);
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    if (hc_pki_cert_save(ca, ca_path, &err) < 0 || hc_pki_cert_save(other, other_ca_path, &err))
        return -1;
    hc_test_cert_write(ca, ca_key, &spec, cert, key);
    X509_free(ca);
    X509_free(other);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(other_key);
    setenv("XDG_CACHE_HOME", dir, 1); /* the leader cache stays in the scratch dir */
    snprintf(cache_path, sizeof(cache_path), "%s/hcctl/leader", dir);
    evthread_use_pthreads();
    base = event_base_new();
    standin_new(&sa, cert, key);
    standin_new(&sb, cert, key);
    standin_new(&sc, cert, key);
    closed_port(closed_url, sizeof(closed_url));
    return pthread_create(&loop_thread, NULL, loop_main, NULL) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    event_base_loopbreak(base);
    pthread_join(loop_thread, NULL);
    struct standin *all[] = {&sa, &sb, &sc};
    for (size_t i = 0; i < 3; i++) {
        for (int h = 0; h < all[i]->nheld; h++)
            hc_deferred_reply_json(all[i]->held[h], 200, NULL);
        hc_http_server_free(all[i]->srv);
    }
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
    return hc_test_sh("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

/* Each test sets the stand-ins' behaviour from scratch. */
static void behave(struct standin *s, enum mode mode, const struct standin *leader)
{
    pthread_mutex_lock(&mu);
    s->mode = mode;
    snprintf(s->leader, sizeof(s->leader), "%s", leader ? leader->url : "");
    s->requests = 0;
    s->elections = 0;
    s->answer_after = 0;
    s->retry_after = NULL;
    s->auth[0] = '\0';
    pthread_mutex_unlock(&mu);
}

static int requests(struct standin *s)
{
    pthread_mutex_lock(&mu);
    int n = s->requests;
    pthread_mutex_unlock(&mu);
    return n;
}

/* A client of the controllers in list (comma-separated), trusting the stand-ins' CA, with the
 * leader remembered by an earlier process as it is. */
static struct hc_api_client *client_cached(const char *list, int64_t timeout_ms)
{
    struct hc_cli_config cfg = {.controller = (char *)list,
                                .token = "hct1.tok",
                                .ca_file = ca_path,
                                .controller_from = "flag"};
    struct hc_error err = {0};
    struct hc_api_client *api = hc_api_client_new(&cfg, timeout_ms, &err);
    if (!api)
        fail_msg("client for '%s': %s", list, err.message);
    return api;
}

/* The same for a first hcctl process: no leader cached. */
static struct hc_api_client *client(const char *list, int64_t timeout_ms)
{
    unlink(cache_path);
    return client_cached(list, timeout_ms);
}

/* The "served_by" of an answer (freed by the caller's json_decref of doc). */
static const char *served_by(const json_t *doc)
{
    const char *by = json_string_value(json_object_get(doc, "served_by"));
    return by ? by : "";
}

static void test_refused_standby_leader(void **state)
{
    (void)state;
    char list[256];
    struct hc_error err = {0};
    behave(&sa, ANSWER, NULL);
    behave(&sb, NOT_LEADER, &sc);
    behave(&sc, ANSWER, NULL);
    snprintf(list, sizeof(list), "%s,%s,%s", closed_url, sb.url, sc.url);
    struct hc_api_client *api = client(list, 5000);
    json_t *doc = hc_api_client_get(api, "/v1/nodes", &err);
    if (!doc)
        fail_msg("%s", err.message);
    assert_string_equal(served_by(doc), sc.url);
    assert_int_equal(requests(&sb), 1);
    assert_int_equal(requests(&sc), 1);
    assert_string_equal(sc.auth, "Bearer hct1.tok"); /* re-added across hosts */
    assert_string_equal(hc_api_client_url(api), sc.url);
    json_decref(doc);
    /* the leader is remembered: the next request, a POST, goes straight to it */
    doc = hc_api_client_post(api, "/v1/upgrade", NULL, &err);
    assert_non_null(doc);
    assert_string_equal(served_by(doc), sc.url);
    assert_int_equal(requests(&sb), 1);
    assert_int_equal(requests(&sc), 2);
    json_decref(doc);
    hc_api_client_free(api);

    /* a fresh client: the POST passes the closed port (never sent) and the standby (refused
     * unprocessed) to the leader, once */
    behave(&sb, NOT_LEADER, &sc);
    behave(&sc, ANSWER, NULL);
    api = client(list, 5000);
    doc = hc_api_client_post(api, "/v1/upgrade", NULL, &err);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "method")), "POST");
    assert_int_equal(requests(&sb), 1);
    assert_int_equal(requests(&sc), 1);
    json_decref(doc);
    hc_api_client_free(api);

    /* every controller down: the usual unreachable error, naming them */
    char down[256];
    snprintf(down, sizeof(down), "%s,https://127.0.0.1:1", closed_url);
    api = client(down, 5000);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_UNREACHABLE);
    assert_non_null(strstr(err.message, "none of the 2 controllers answered"));
    assert_non_null(strstr(err.hint, "is hcctld running at"));
    assert_int_equal(hc_exit_code(&err), HC_EXIT_UNAVAILABLE);
    hc_api_client_free(api);
}

static void test_no_leader_then_leader(void **state)
{
    (void)state;
    struct hc_error err = {0};
    behave(&sa, NO_LEADER, NULL);
    sa.elections = 2;
    sa.retry_after = "0"; /* at least 100 ms between rounds all the same */
    struct hc_api_client *api = client(sa.url, 5000);
    int64_t t0 = hc_mono_ms();
    json_t *doc = hc_api_client_post(api, "/v1/upgrade", NULL, &err);
    int64_t took = hc_mono_ms() - t0;
    if (!doc)
        fail_msg("%s", err.message);
    assert_int_equal(requests(&sa), 3);
    assert_true(took >= 200 && took < 2000);
    json_decref(doc);

    /* Retry-After is honoured, capped at 2 s */
    behave(&sa, NO_LEADER, NULL);
    sa.elections = 1;
    sa.retry_after = "30";
    t0 = hc_mono_ms();
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    took = hc_mono_ms() - t0;
    assert_non_null(doc);
    if (took < 1900 || took > 3500)
        fail_msg("waited %lld ms", (long long)took);
    json_decref(doc);
    hc_api_client_free(api);

    /* Retry-After as an HTTP date is not read: the default second */
    behave(&sa, NO_LEADER, NULL);
    sa.elections = 1;
    sa.retry_after = "Fri, 04 Dec 2026 03:00:00 GMT";
    api = client(sa.url, 5000);
    t0 = hc_mono_ms();
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    took = hc_mono_ms() - t0;
    assert_non_null(doc);
    if (took < 900 || took > 1900)
        fail_msg("waited %lld ms", (long long)took);
    json_decref(doc);
    hc_api_client_free(api);

    /* an election that does not end: no_leader once the deadline (--timeout) passes */
    behave(&sa, NO_LEADER, NULL);
    sa.elections = 1000;
    sa.retry_after = "1";
    api = client(sa.url, 1500);
    t0 = hc_mono_ms();
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    took = hc_mono_ms() - t0;
    assert_string_equal(err.code, HC_ERR_NO_LEADER);
    assert_non_null(strstr(err.hint, "no controller took the lead within 1500 ms"));
    assert_int_equal(hc_exit_code(&err), HC_EXIT_UNAVAILABLE);
    assert_true(took >= 900 && took < 2500);
    hc_api_client_free(api);
}

static void test_redirect_loop(void **state)
{
    (void)state;
    char list[256];
    struct hc_error err = {0};
    behave(&sa, NOT_LEADER, &sb);
    behave(&sb, NOT_LEADER, &sa);
    snprintf(list, sizeof(list), "%s,%s", sa.url, sb.url);
    struct hc_api_client *api = client(list, 5000);
    assert_null(hc_api_client_post(api, "/v1/upgrade", NULL, &err));
    assert_string_equal(err.code, HC_ERR_NOT_LEADER);
    assert_non_null(strstr(err.message, "no leader after 3 redirects"));
    assert_non_null(strstr(err.message, sa.url));
    assert_int_equal(hc_exit_code(&err), HC_EXIT_UNAVAILABLE);
    /* the first and three hops: four requests, then a stop */
    assert_int_equal(requests(&sa) + requests(&sb), 4);
    hc_api_client_free(api);
}

/* Right after the leader died the standbys still name it until its lease runs out (seconds), and
 * a restarted controller may name itself: both are waited out like an election. */
static void test_stale_leader(void **state)
{
    (void)state;
    struct hc_error err = {0};
    behave(&sb, NOT_LEADER, NULL);
    snprintf(sb.leader, sizeof(sb.leader), "%s", closed_url);
    sb.answer_after = 2; /* then it leads itself */
    struct hc_api_client *api = client(sb.url, 5000);
    int64_t t0 = hc_mono_ms();
    json_t *doc = hc_api_client_post(api, "/v1/upgrade", NULL, &err);
    int64_t took = hc_mono_ms() - t0;
    if (!doc)
        fail_msg("%s", err.message);
    assert_string_equal(served_by(doc), sb.url);
    assert_int_equal(requests(&sb), 3);
    assert_true(took >= 900 && took < 3000); /* two rounds of 500 ms */
    json_decref(doc);
    hc_api_client_free(api);

    behave(&sb, NOT_LEADER, &sb); /* names itself */
    sb.answer_after = 1;
    api = client(sb.url, 5000);
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_non_null(doc);
    assert_int_equal(requests(&sb), 2);
    json_decref(doc);
    hc_api_client_free(api);

    /* a stale view that does not end: the deadline, with what was seen */
    behave(&sb, NOT_LEADER, &sb);
    api = client(sb.url, 1200);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_NOT_LEADER);
    assert_non_null(strstr(err.message, "is not the leader and names itself"));
    assert_non_null(strstr(err.hint, "a failover may still be under way"));
    assert_true(requests(&sb) >= 2 && requests(&sb) <= 4);
    hc_api_client_free(api);
}

static void test_standby_names_nobody(void **state)
{
    (void)state;
    char list[256];
    struct hc_error err = {0};
    behave(&sb, NAMES_NOBODY, NULL);
    struct hc_api_client *api = client(sb.url, 5000);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_NOT_LEADER);
    assert_non_null(strstr(err.message, "is not the leader and names none"));
    assert_int_equal(requests(&sb), 1);
    hc_api_client_free(api);

    /* a leader URL that is no controller URL (a path, http): refused like a configured one */
    behave(&sb, NOT_LEADER, NULL);
    snprintf(sb.leader, sizeof(sb.leader), "http://127.0.0.1:1/x");
    api = client(sb.url, 5000);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_NOT_LEADER);
    assert_non_null(strstr(err.message, "must start with https://"));
    assert_non_null(strstr(err.message, "from the standby at"));
    hc_api_client_free(api);

    /* the others are still tried */
    behave(&sb, NAMES_NOBODY, NULL);
    behave(&sc, ANSWER, NULL);
    snprintf(list, sizeof(list), "%s,%s", sb.url, sc.url);
    api = client(list, 5000);
    json_t *doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_non_null(doc);
    assert_string_equal(served_by(doc), sc.url);
    json_decref(doc);
    hc_api_client_free(api);
}

static void test_post_timeout_not_resent(void **state)
{
    (void)state;
    char list[256];
    struct hc_error err = {0};
    behave(&sa, NEVER_ANSWERS, NULL);
    behave(&sc, ANSWER, NULL);
    snprintf(list, sizeof(list), "%s,%s", sa.url, sc.url);
    struct hc_api_client *api = client(list, 400);
    assert_null(hc_api_client_post(api, "/v1/upgrade", NULL, &err));
    assert_string_equal(err.code, HC_ERR_TIMEOUT);
    assert_int_equal(hc_exit_code(&err), HC_EXIT_TIMEOUT);
    assert_non_null(strstr(err.hint, "outcome is unknown"));
    assert_non_null(strstr(err.hint, "hcctl operation list"));
    assert_int_equal(requests(&sa), 1);
    assert_int_equal(requests(&sc), 0); /* never sent again */
    hc_api_client_free(api);

    /* a GET is harmless to repeat: after the time-out it goes on to the next controller */
    behave(&sa, NEVER_ANSWERS, NULL);
    api = client(list, 2000);
    json_t *doc = hc_api_client_get(api, "/v1/nodes", &err);
    if (!doc)
        fail_msg("%s", err.message);
    assert_string_equal(served_by(doc), sc.url);
    json_decref(doc);
    /* and the silent one is tried last from now on */
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_non_null(doc);
    assert_int_equal(requests(&sa), 1);
    json_decref(doc);
    hc_api_client_free(api);
}

/* hcctl operation wait across a failover: polls on the leader, then its 421 naming another,
 * whose election outlasts one search (--timeout 1s: the wait retries no_leader itself), then
 * the operation's end on the new leader. */
static void test_operation_wait_failover(void **state)
{
    (void)state;
    char list[256];
    char *out = NULL, *errs = NULL;
    size_t out_len = 0, err_len = 0;
    behave(&sa, ANSWER, NULL);
    behave(&sb, NOT_LEADER, &sa);
    behave(&sc, NOT_LEADER, &sa);
    pthread_mutex_lock(&mu);
    failover_after = 2;
    pthread_mutex_unlock(&mu);
    unlink(cache_path); /* a first process: no leader remembered */
    snprintf(list, sizeof(list), "%s,%s,%s", sb.url, sa.url, sc.url);
    char *argv[] = {"hcctl",     "--controller", list, "--ca",      ca_path, "--token",
                    "hct1.tok",  "--timeout",    "1s", "operation", "wait",  "op-1",
                    "--timeout", "20s",          "-o", "json",      NULL};
    FILE *fo = open_memstream(&out, &out_len), *fe = open_memstream(&errs, &err_len);
    struct hc_cli_io io = {fo, fe, NULL, 0, 0, 0};
    int64_t t0 = hc_mono_ms();
    int rc = hc_cli_main(hc_cmd_groups, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, &io);
    int64_t took = hc_mono_ms() - t0;
    fclose(fo);
    fclose(fe);
    if (rc != HC_EXIT_OK)
        fail_msg("rc %d after %lld ms: %s", rc, (long long)took, errs);
    json_t *doc = json_loads(out, 0, NULL);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "operation"), "state")),
        "succeeded");
    json_decref(doc);
    /* the election outlasted two searches of 1 s (one round, one Retry-After each): the wait
     * said so once on stderr and went on */
    if (!strstr(errs, "no controller leads right now; retrying") || took < 1000 || took > 15000)
        fail_msg("after %lld ms: %s", (long long)took, errs);
    assert_int_equal(requests(&sc), 8); /* seven no_leader answers, then the end */
    free(out);
    free(errs);
}

/* The leader is remembered for the next process, in $XDG_CACHE_HOME/hcctl/leader: used only when
 * it is one of the listed URLs, exactly; a cache that cannot be written changes nothing. */
static void test_leader_cache(void **state)
{
    (void)state;
    char list[256], text[512];
    struct hc_error err = {0};
    behave(&sb, NOT_LEADER, &sc);
    behave(&sc, ANSWER, NULL);
    snprintf(list, sizeof(list), "%s,%s", sb.url, sc.url);
    struct hc_api_client *api = client(list, 5000);
    json_t *doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_non_null(doc);
    json_decref(doc);
    hc_api_client_free(api);
    char *cached = hc_test_file_text(cache_path);
    snprintf(text, sizeof(text), "%s\n", sc.url);
    assert_string_equal(cached, text);
    free(cached);
    struct stat st;
    assert_int_equal(stat(cache_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* the next process starts at the leader: the standby is not asked */
    behave(&sb, NOT_LEADER, &sc);
    api = client_cached(list, 5000);
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_string_equal(served_by(doc), sc.url);
    assert_int_equal(requests(&sb), 0);
    json_decref(doc);
    hc_api_client_free(api);
    /* hostile or stale caches are ignored: the list's order again */
    const char *bad[] = {"garbage\n", "", "https://127.0.0.1:1\n", "\n\n\n", NULL};
    char other[600];
    snprintf(other, sizeof(other), "%s/\n", sc.url); /* not exactly a listed URL */
    for (size_t i = 0; i < 5; i++) {
        hc_test_write_text(cache_path, bad[i] ? bad[i] : other, 0600);
        behave(&sb, NOT_LEADER, &sc);
        api = client_cached(list, 5000);
        doc = hc_api_client_get(api, "/v1/nodes", &err);
        assert_non_null(doc);
        assert_int_equal(requests(&sb), 1);
        json_decref(doc);
        hc_api_client_free(api);
    }
    /* a cache that cannot be written (a file where its directory should be): no error */
    char cache_dir[700];
    snprintf(cache_dir, sizeof(cache_dir), "%s/blocked", dir);
    hc_test_write_text(cache_dir, "x", 0600);
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    api = client_cached(list, 5000);
    doc = hc_api_client_get(api, "/v1/nodes", &err);
    assert_non_null(doc);
    json_decref(doc);
    hc_api_client_free(api);
    setenv("XDG_CACHE_HOME", dir, 1);
}

/* ---------------------------------------------------------------- settings */

static void test_settings(void **state)
{
    (void)state;
    char path[700], list[256];
    struct hc_cli_config cfg;
    struct hc_error err = {0};
    setenv("XDG_CONFIG_HOME", dir, 1);
    unsetenv("HCCTL_CONTROLLER");
    unsetenv("HCCTL_CONTROLLER_PIN");
    snprintf(path, sizeof(path), "%s/hcctl", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/hcctl/config.json", dir);
    /* the file's "controller" as an array of strings */
    hc_test_write_text(path,
                       "{\"controller\":[\"https://a:7443/\",\"b:7443\"],\"token\":\"t\","
                       "\"controller_pin\":\"sha256//AAAA\"}",
                       0600);
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), 0);
    assert_string_equal(cfg.controller, "https://a:7443,https://b:7443");
    assert_string_equal(cfg.controller_from, "config");
    /* a pin names one controller's key: with two and no CA, a usage error */
    assert_null(hc_api_client_new(&cfg, 1000, &err));
    assert_string_equal(err.code, HC_CLI_ERR_USAGE);
    assert_non_null(strstr(err.message, "cannot check 2 controllers"));
    assert_non_null(strstr(err.hint, "CA"));
    /* with the CA, the CA verifies each */
    cfg.ca_file = strdup(ca_path);
    struct hc_api_client *api = hc_api_client_new(&cfg, 1000, &err);
    assert_non_null(api);
    hc_api_client_free(api);
    hc_cli_config_clear(&cfg);

    const char *bad[][2] = {
        {"{\"controller\":[]}", "\"controller\" is an empty list"},
        {"{\"controller\":[\"https://a\",7]}", "\"controller\" item 2 is not a URL string"},
        {"{\"controller\":[\"https://a,https://b\"]}", "item 1 is not a URL string"},
        {"{\"controller\":[\"\"]}", "item 1 is not a URL string"},
        {"{\"controller\":{\"a\":1}}", "\"controller\" is not a string"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hc_test_write_text(path, bad[i][0], 0600);
        assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), -1);
        if (!strstr(err.message, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err.message);
    }
    /* a hostile list from the environment: named with where it came from */
    setenv("HCCTL_CONTROLLER", "https://a:7443, ,https://b", 1);
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), 0);
    assert_null(hc_api_client_new(&cfg, 1000, &err));
    assert_non_null(strstr(err.message, "from HCCTL_CONTROLLER has an empty item (2 of 3)"));
    hc_cli_config_clear(&cfg);
    /* a list from the environment and a wrong CA: a TLS failure on every controller */
    snprintf(list, sizeof(list), "%s,%s", sa.url, sb.url);
    behave(&sa, ANSWER, NULL);
    behave(&sb, ANSWER, NULL);
    setenv("HCCTL_CONTROLLER", list, 1);
    setenv("HCCTL_CA_FILE", other_ca_path, 1);
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), 0);
    api = hc_api_client_new(&cfg, 2000, &err);
    assert_non_null(api);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_int_equal(requests(&sa) + requests(&sb), 0);
    hc_api_client_free(api);
    hc_cli_config_clear(&cfg);
    unsetenv("HCCTL_CONTROLLER");
    unsetenv("HCCTL_CA_FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_parse),
        cmocka_unit_test(test_refused_standby_leader),
        cmocka_unit_test(test_no_leader_then_leader),
        cmocka_unit_test(test_redirect_loop),
        cmocka_unit_test(test_stale_leader),
        cmocka_unit_test(test_standby_names_nobody),
        cmocka_unit_test(test_post_timeout_not_resent),
        cmocka_unit_test(test_operation_wait_failover),
        cmocka_unit_test(test_leader_cache),
        cmocka_unit_test(test_settings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
