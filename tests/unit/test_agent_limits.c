/*
 * Issue 12 item 5 and the controller half of 10c: what the controller accepts from an agent.
 *
 * A rogue agent here is a TLS server written with OpenSSL directly, on its own thread, that
 * streams its answers from one small buffer (100 MiB of body never exists in memory), so the
 * memory of this process is the controller side's alone: VmHWM must grow far less than the body
 * sent. It holds the agent's certificate from the cluster CA, as a compromised node would.
 * - the agent client (controller/remote/agent_client.c) aborts an oversized answer while it
 * arrives, with Content-Length, without (close-delimited) and chunked, and a small answer with too
 * many JSON values before parsing it; the error names the agent and the limit;
 * - the poller records such a node as unreachable with that error, and stores what an agent
 *   reports (hostname, versions, interfaces) without control characters;
 * - hcctl's client (cli/api_client.c) has a bound of its own toward the controller;
 * - the limit is derived from the largest legitimate answers, measured from the agent's own
 *   JSON (probe results at the agent's target maximum, a long interface list).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agents/hcagent/probe.h"
#include "cli/api_client.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/poller.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define HUGE_BODY (100ull * 1024 * 1024)
/* Peak memory one refused call may add, KiB: far below the 100 MiB body (before the fix, the
 * client buffered up to 64 MiB, and its doubling reallocations stay resident under ASan). */
#define PEAK_MAX_KIB (32 * 1024)
#define HOSTILE "\x1b]0;pwned\x07\x1b[2J"
/* Objects in "[{},{},...]" that the value limit still lets through: each "{}," weighs 8 + 1. */
#define WORST_OBJECTS ((HC_AGENT_MAX_JSON_VALUES - 3) / 9)

enum rogue_mode {
    ROGUE_LENGTH,  /* Content-Length: 100 MiB, then the body */
    ROGUE_CLOSE,   /* no length: the body ends when the connection does */
    ROGUE_CHUNKED, /* Transfer-Encoding: chunked */
    ROGUE_VALUES,  /* 1.5 MiB (under the byte limit) of "[0,0,...]" */
    ROGUE_HOSTILE, /* small, valid answers with escape sequences in every string */
    ROGUE_WORST,   /* the costliest answer still accepted: "[{},{},...]" up to the value limit */
};

struct rogue {
    SSL_CTX *ctx;
    int lfd, port;
    pthread_t thread;
    atomic_int mode, stop;
    atomic_ullong sent; /* body bytes written for the last answer */
};

struct fixture {
    char dir[512];
    char agent_cert[600], agent_key[600];
    struct hc_controller ctl;
    struct hc_db *db;
    struct rogue rogue;
    char url[64];
};

/* --- the rogue agent ----------------------------------------------------------------------- */

static int ssl_write_all(SSL *ssl, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        int w = SSL_write(ssl, p, len > 65536 ? 65536 : (int)len);
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Streams n bytes of "0,0,..." after "[" (it never needs to end: the client gives up first). */
static void stream_body(struct rogue *r, SSL *ssl, unsigned long long n, int chunked)
{
    static char chunk[65536];
    char head[32];
    memset(chunk, '0', sizeof(chunk));
    for (size_t i = 1; i < sizeof(chunk); i += 2)
        chunk[i] = ',';
    chunk[0] = '[';
    for (unsigned long long left = n; left > 0;) {
        size_t k = left > sizeof(chunk) ? sizeof(chunk) : (size_t)left;
        snprintf(head, sizeof(head), "%zx\r\n", k);
        if ((chunked && ssl_write_all(ssl, head, strlen(head)) < 0) ||
            ssl_write_all(ssl, chunk, k) < 0 || (chunked && ssl_write_all(ssl, "\r\n", 2) < 0))
            return;
        atomic_fetch_add(&r->sent, k);
        left -= k;
        chunk[0] = '0';
    }
    if (chunked)
        ssl_write_all(ssl, "0\r\n\r\n", 5);
}

static void answer_json(SSL *ssl, const char *body)
{
    char head[256];
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             strlen(body));
    if (ssl_write_all(ssl, head, strlen(head)) == 0)
        ssl_write_all(ssl, body, strlen(body));
}

static void answer_hostile(SSL *ssl, const char *path)
{
    json_t *doc;
    if (strstr(path, "/v1/interfaces"))
        doc = json_pack("{s:[{s:s, s:i, s:i, s:s, s:s, s:s, s:[s]}]}", "interfaces", "name",
                        "eth0" HOSTILE, "index", 2, "mtu", 1500, "state", "up\x1b[1A", "kind",
                        "veth\x07", "master",
                        "br\xc2\x9b"
                        "0",
                        "addresses", "10.0.0.1/24");
    else
        doc = json_pack("{s:s, s:s, s:s, s:i, s:{s:s}, s:s}", "agent_version", "1.0" HOSTILE,
                        "node_name", "n1", "hostname",
                        "host" HOSTILE "\xc2\x9b"
                        "end",
                        "uptime_seconds", 42, "service", "state", "running\r", "software_version",
                        "2.0\x1b[31m");
    char *text = hc_json_dump(doc);
    answer_json(ssl, text);
    free(text);
    json_decref(doc);
}

static void rogue_answer(struct rogue *r, SSL *ssl, const char *path)
{
    static const char ok_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
    char head[256];
    atomic_store(&r->sent, 0);
    switch ((enum rogue_mode)atomic_load(&r->mode)) {
    case ROGUE_LENGTH:
        snprintf(head, sizeof(head), "%sContent-Length: %llu\r\n\r\n", ok_head, HUGE_BODY);
        if (ssl_write_all(ssl, head, strlen(head)) == 0)
            stream_body(r, ssl, HUGE_BODY, 0);
        break;
    case ROGUE_CLOSE:
        snprintf(head, sizeof(head), "%sConnection: close\r\n\r\n", ok_head);
        if (ssl_write_all(ssl, head, strlen(head)) == 0)
            stream_body(r, ssl, HUGE_BODY, 0);
        break;
    case ROGUE_CHUNKED:
        snprintf(head, sizeof(head), "%sTransfer-Encoding: chunked\r\n\r\n", ok_head);
        if (ssl_write_all(ssl, head, strlen(head)) == 0)
            stream_body(r, ssl, HUGE_BODY, 1);
        break;
    case ROGUE_VALUES: {
        size_t n = 3 * 512 * 1024;
        char *body = malloc(n + 1);
        memset(body, '0', n);
        for (size_t i = 1; i + 1 < n; i += 2)
            body[i] = ',';
        body[0] = '[';
        body[n - 1] = ']';
        body[n] = '\0';
        answer_json(ssl, body);
        free(body);
        break;
    }
    case ROGUE_HOSTILE:
        answer_hostile(ssl, path);
        break;
    case ROGUE_WORST: {
        size_t objects = WORST_OBJECTS, n = 3 * objects + 1;
        char *body = malloc(n + 1);
        body[0] = '[';
        for (size_t i = 0; i < objects; i++)
            memcpy(body + 1 + 3 * i, "{},", 3);
        body[n - 1] = ']';
        body[n] = '\0';
        answer_json(ssl, body);
        free(body);
        break;
    }
    }
}

/* One request per connection: read the head, answer, close. */
static void rogue_serve(struct rogue *r, int fd)
{
    char req[8192];
    size_t got = 0;
    SSL *ssl = SSL_new(r->ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
        while (got + 1 < sizeof(req)) {
            int n = SSL_read(ssl, req + got, (int)(sizeof(req) - 1 - got));
            if (n <= 0)
                break;
            got += (size_t)n;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n")) {
                char path[256] = "";
                sscanf(req, "%*s %255s", path);
                rogue_answer(r, ssl, path);
                break;
            }
        }
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(fd);
}

static void *rogue_main(void *arg)
{
    struct rogue *r = arg;
    while (!atomic_load(&r->stop)) {
        struct pollfd pfd = {.fd = r->lfd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        int fd = accept(r->lfd, NULL, NULL);
        if (fd >= 0)
            rogue_serve(r, fd);
    }
    return NULL;
}

static void rogue_start(struct fixture *f)
{
    struct rogue *r = &f->rogue;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    r->ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(r->ctx);
    assert_int_equal(SSL_CTX_use_certificate_file(r->ctx, f->agent_cert, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(r->ctx, f->agent_key, SSL_FILETYPE_PEM), 1);
    r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(r->lfd >= 0);
    assert_int_equal(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(r->lfd, 16), 0);
    assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&sa, &len), 0);
    r->port = ntohs(sa.sin_port);
    snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%d", r->port);
    assert_int_equal(pthread_create(&r->thread, NULL, rogue_main, r), 0);
}

static void rogue_stop(struct rogue *r)
{
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    close(r->lfd);
    SSL_CTX_free(r->ctx);
}

/* --- fixture ------------------------------------------------------------------------------- */

static int setup(void **state)
{
    static struct fixture f;
    struct hc_error err = {0};
    memset(&f, 0, sizeof(f));
    signal(SIGPIPE, SIG_IGN); /* the rogue writes to connections the client aborts */
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_agent_limits");
    snprintf(f.agent_cert, sizeof(f.agent_cert), "%s/agent.pem", f.dir);
    snprintf(f.agent_key, sizeof(f.agent_key), "%s/agent.key", f.dir);
    f.ctl.agent_timeout_ms = 20000;
    hc_test_cluster_pki(&f.ctl, f.agent_cert, f.agent_key);
    f.db = hc_test_ctl_db_crl(&f.ctl);
    rogue_start(&f);
    char pin[HC_PKI_PIN_LEN]; /* the rogue holds the node's key: the pin lets it through */
    assert_int_equal(hc_pki_file_pin(f.agent_cert, pin, &err), 0);
    assert_int_equal(hc_db_run(f.db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, cert_pin, joined_at) VALUES ('c-test', "
                               "'n1', '127.0.0.1', ?, 'n1', 'PEM', ?, ?)",
                               "ssi", f.url, pin, hc_now_ms()),
                     1);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rogue_stop(&f->rogue);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    return 0;
}

/* Peak resident memory of this process, KiB. */
static long vm_hwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atol(line + 6);
    fclose(f);
    return kib;
}

/* --- tests --------------------------------------------------------------------------------- */

/* 100 MiB from a rogue agent, in each framing: the call fails with the limit, naming the agent,
 * after reading about the limit, and the controller side's memory does not follow the body. */
static void test_huge_answer_aborted(void **state)
{
    struct fixture *f = *state;
    static const enum rogue_mode modes[] = {ROGUE_LENGTH, ROGUE_CLOSE, ROGUE_CHUNKED};
    static const char *const names[] = {"content-length", "close-delimited", "chunked"};
    struct hc_error err = {0};
    struct hc_http_client *c = hc_agent_client_new(&f->ctl, f->db, &err);
    assert_non_null(c);
    char limit[64];
    snprintf(limit, sizeof(limit), "%u bytes", HC_AGENT_MAX_RESPONSE);
    for (size_t i = 0; i < HC_ARRAY_LEN(modes); i++) {
        struct hc_http_response resp = {0};
        atomic_store(&f->rogue.mode, (int)modes[i]);
        long before = vm_hwm_kib();
        int64_t t0 = hc_mono_ms();
        int rc = hc_agent_call(c, f->url, "GET", "/v1/status", NULL, 20000, &resp, &err);
        long grew = vm_hwm_kib() - before;
        int64_t took = hc_mono_ms() - t0;
        print_message("%s: VmHWM +%ld KiB, %lld ms, the rogue wrote %llu bytes\n", names[i], grew,
                      (long long)took, (unsigned long long)atomic_load(&f->rogue.sent));
        assert_int_equal(rc, -1);
        assert_string_equal(err.code, HC_ERR_RESPONSE_TOO_LARGE);
        if (!strstr(err.message, f->url) || !strstr(err.message, limit))
            fail_msg("%s: message '%s' names neither the agent nor the limit", names[i],
                     err.message);
        assert_false(hc_agent_err_is_transport(&err)); /* the node answered: wrongly */
        /* Far below the body: the limit, the buffer's growth and TLS buffers (resident under
         * ASan, whose quarantine keeps freed blocks), not 100 MiB. */
        if (grew > PEAK_MAX_KIB)
            fail_msg("%s: VmHWM grew by %ld KiB", names[i], grew);
        hc_http_response_clear(&resp);
    }
    /* With a Content-Length it is refused before the body: the rogue hardly got to write. */
    hc_http_client_free(c);
}

/* Under the byte limit, but more JSON values than any answer holds: refused unparsed (parsed,
 * 1.5 MiB of "0," costs jansson ~30 MiB). */
static void test_many_values_refused(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_http_response resp = {0};
    struct hc_http_client *c = hc_agent_client_new(&f->ctl, f->db, &err);
    assert_non_null(c);
    atomic_store(&f->rogue.mode, ROGUE_VALUES);
    long before = vm_hwm_kib();
    assert_int_equal(hc_agent_call(c, f->url, "GET", "/v1/status", NULL, 20000, &resp, &err), -1);
    long grew = vm_hwm_kib() - before;
    print_message("values: VmHWM +%ld KiB\n", grew);
    assert_string_equal(err.code, HC_ERR_RESPONSE_TOO_LARGE);
    assert_non_null(strstr(err.message, "JSON values"));
    assert_non_null(strstr(err.message, f->url));
    assert_true(grew < PEAK_MAX_KIB);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
}

/* The costliest answer that passes both limits, parsed: what one rogue call can cost at most
 * (objects are jansson's dearest value). */
static void test_worst_accepted_answer(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_http_response resp = {0};
    struct hc_http_client *c = hc_agent_client_new(&f->ctl, f->db, &err);
    assert_non_null(c);
    atomic_store(&f->rogue.mode, ROGUE_WORST);
    long before = vm_hwm_kib();
    int rc = hc_agent_call(c, f->url, "GET", "/v1/status", NULL, 20000, &resp, &err);
    long grew = vm_hwm_kib() - before;
    print_message("worst accepted answer (%zu bytes, %zu objects): VmHWM +%ld KiB\n", resp.raw_len,
                  json_array_size(resp.body), grew);
    assert_int_equal(rc, 0);
    assert_int_equal(json_array_size(resp.body), WORST_OBJECTS);
    assert_true(grew < PEAK_MAX_KIB);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
}

/* The poller's way: the fan-out's answers recorded; the node is unreachable, its detail says
 * why; hc_poller_ask (the join's first poll) says so too. */
static void test_poller_records_the_limit(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_http_client *c = hc_agent_client_new(&f->ctl, f->db, &err);
    char url1[128], url2[128], why[512];
    assert_non_null(c);
    atomic_store(&f->rogue.mode, ROGUE_CLOSE);
    snprintf(url1, sizeof(url1), "%s/v1/status", f->url);
    snprintf(url2, sizeof(url2), "%s/v1/interfaces", f->url);
    struct hc_http_call calls[2] = {{.method = "GET", .url = url1, .timeout_ms = 20000},
                                    {.method = "GET", .url = url2, .timeout_ms = 20000}};
    long before = vm_hwm_kib();
    assert_int_equal(hc_http_fanout(c, calls, 2, 0), 0);
    long grew = vm_hwm_kib() - before;
    print_message("fan-out of 2: VmHWM +%ld KiB\n", grew);
    assert_true(grew < 2 * PEAK_MAX_KIB);
    assert_int_equal(hc_poller_record(f->db, 1, "n1", &calls[0], &calls[1], hc_now_ms(), &err), 0);
    json_t *rows = hc_db_query_json(f->db, &err, "SELECT health, health_detail FROM nodes", "");
    assert_non_null(rows);
    json_t *row = json_array_get(rows, 0);
    assert_string_equal(hc_json_str(row, "health", ""), "unreachable");
    assert_non_null(strstr(hc_json_str(row, "health_detail", ""), "exceeds the limit"));
    json_decref(rows);

    assert_int_equal(hc_poller_ask(f->db, c, 1, "n1", f->url, 20000, why, sizeof(why), &err), 0);
    assert_non_null(strstr(why, "exceeds the limit"));
    hc_http_client_free(c);
}

/* 1 when s holds a byte below 0x20, DEL or a UTF-8 C1 control. */
static int has_controls(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 1;
    return 0;
}

/* What an agent reports is stored without control characters: no escape sequence reaches
 * `hcctl node show` (or any other reader of the database) from the controller's side. */
static void test_reported_strings_cleaned(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char why[512];
    struct hc_http_client *c = hc_agent_client_new(&f->ctl, f->db, &err);
    assert_non_null(c);
    atomic_store(&f->rogue.mode, ROGUE_HOSTILE);
    int rc = hc_poller_ask(f->db, c, 1, "n1", f->url, 20000, why, sizeof(why), &err);
    if (rc != 1)
        fail_msg("ask: %d %s %s", rc, why, err.message);
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT hostname, agent_version, software_version, "
                                    "service_state FROM nodes",
                                    "");
    assert_non_null(rows);
    json_t *row = json_array_get(rows, 0);
    assert_string_equal(hc_json_str(row, "hostname", ""), "host?]0;pwned??[2J?end");
    assert_string_equal(hc_json_str(row, "agent_version", ""), "1.0?]0;pwned??[2J");
    assert_string_equal(hc_json_str(row, "software_version", ""), "2.0?[31m");
    assert_string_equal(hc_json_str(row, "service_state", ""), "running?");
    json_decref(rows);
    rows = hc_db_query_json(f->db, &err, "SELECT name, state, kind, master FROM interfaces", "");
    assert_int_equal(json_array_size(rows), 1);
    row = json_array_get(rows, 0);
    const char *keys[] = {"name", "state", "kind", "master"};
    for (size_t i = 0; i < HC_ARRAY_LEN(keys); i++)
        if (has_controls(hc_json_str(row, keys[i], "")))
            fail_msg("interfaces.%s stored with control characters", keys[i]);
    assert_string_equal(hc_json_str(row, "name", ""), "eth0?]0;pwned??[2J");
    json_decref(rows);
    hc_http_client_free(c);
}

/* hc_text_clean: whole characters only, controls replaced, in place allowed. */
static void test_text_clean(void **state)
{
    (void)state;
    char buf[8], in[64];
    assert_string_equal(hc_text_clean(buf, sizeof(buf),
                                      "ab\x1b"
                                      "c"),
                        "ab?c");
    assert_string_equal(hc_text_clean(buf, sizeof(buf), "abcde\xc3\xa9"), "abcde\xc3\xa9");
    assert_string_equal(hc_text_clean(buf, sizeof(buf), "abcdef\xc3\xa9"), "abcdef"); /* no half */
    assert_string_equal(hc_text_clean(buf, sizeof(buf), "\xff\xc3(\x7f"), "?"
                                                                          "?(?");
    assert_string_equal(hc_text_clean(buf, sizeof(buf), "\xed\xa0\x80"), "???"); /* surrogate */
    assert_string_equal(hc_text_clean(buf, sizeof(buf), "\xc0\xaf"), "??");      /* overlong */
    assert_null(hc_text_clean(buf, sizeof(buf), NULL));
    snprintf(in, sizeof(in),
             "x\x1b[2J\xc2\x9b"
             "y\xe2\x82\xac");
    assert_string_equal(hc_text_clean(in, sizeof(in), in), "x?[2J?y\xe2\x82\xac");
}

/* An agent's error message is relayed into the controller's errors (hc_error_from_json, then a
 * prefix naming the node), which cut it to their buffer: the cut must not split a UTF-8
 * character, or the error has no JSON form (jansson refuses invalid UTF-8) and poisons any row
 * it is stored in (hc_db_query_json refuses to read it). */
static void test_relayed_error_stays_utf8(void **state)
{
    (void)state;
    char msg[1400] = "";
    struct hc_error err = {0};
    for (int i = 0; i < 600; i++)
        strcat(msg, "\xc3\xa9"); /* é: two bytes, so some cut falls inside one */
    for (int shift = 0; shift < 2; shift++) {
        json_t *body = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "agent_error", "message",
                                 msg + 0, "hint", msg);
        assert_int_equal(hc_error_from_json(&err, body, 502), 0);
        json_decref(body);
        for (int k = 0; k < 3; k++) {
            hc_error_prefix(&err, "%snode n1", shift ? "x" : "");
            json_t *doc = hc_error_to_json(&err);
            if (!doc)
                fail_msg("error with a prefix of %d bytes has no JSON form", shift + k);
            char *text = json_dumps(doc, 0);
            assert_non_null(text);
            free(text);
            json_decref(doc);
        }
    }
}

/* hcctl's own bound toward the controller: larger (lists), still bounded. */
static void test_cli_bounded(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_cli_config cfg = {.controller = f->url, .ca_file = f->ctl.ca_file};
    struct hc_api_client *api = hc_api_client_new(&cfg, 60000, &err);
    assert_non_null(api);
    atomic_store(&f->rogue.mode, ROGUE_CHUNKED);
    assert_null(hc_api_client_get(api, "/v1/nodes", &err));
    assert_string_equal(err.code, HC_ERR_RESPONSE_TOO_LARGE);
    assert_non_null(strstr(err.message, "67108864 bytes"));
    assert_non_null(strstr(err.hint, "really the controller"));
    assert_true(atomic_load(&f->rogue.sent) < HUGE_BODY);
    hc_api_client_free(api);
}

/* What hc_json_values_over counts (no strings in these texts hold structural characters). */
static size_t weigh(const char *text)
{
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == '{' ? 8 : *p == '[' ? 2 : *p == ',' || *p == ':' ? 1 : 0;
    return n;
}

/* The limit against the largest legitimate answers, built with the agent's own code: probe
 * results at the agent's maximum of targets with every field at its widest (a margin of 4), and
 * 4096 interfaces with three addresses each. */
static void test_limit_fits_legitimate_answers(void **state)
{
    (void)state;
    struct hc_probe_target *t = calloc(HC_PROBE_MAX_TARGETS, sizeof(*t));
    assert_non_null(t);
    for (size_t i = 0; i < HC_PROBE_MAX_TARGETS; i++) {
        inet_pton(AF_INET, "255.255.255.255", &t[i].addr);
        t[i].size = HC_PROBE_MAX_SIZE;
        t[i].result = HC_PROBE_FRAG_NEEDED;
        t[i].path_mtu = t[i].largest_ok = HC_PROBE_MAX_SIZE;
        t[i].rtt_ms = 99999.999;
        t[i].neighbor = HC_NEIGH_INCOMPLETE;
        memset(t[i].detail, 'x', sizeof(t[i].detail) - 1);
    }
    struct hc_neigh_table big = {.known = 1,
                                 .entries = INT32_MAX,
                                 .thresh1 = INT32_MAX,
                                 .thresh2 = INT32_MAX,
                                 .thresh3 = INT32_MAX,
                                 .fulls = UINT32_MAX},
                          zero = {.known = 1};
    json_t *probe = hc_probe_results_json(t, HC_PROBE_MAX_TARGETS, &zero, &big, 0);
    char *text = hc_json_dump(probe);
    size_t probe_len = strlen(text), probe_values = 0;
    probe_values = weigh(text);
    free(text);
    json_decref(probe);
    free(t);

    /* An interface as hc_netinfo reports it, with long names and three addresses. */
    json_t *list = json_array();
    for (int i = 0; i < 4096; i++) {
        char name[16], master[16];
        snprintf(name, sizeof(name), "vethabcd%05d", i);
        snprintf(master, sizeof(master), "br-0123456789");
        json_array_append_new(list, json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:[s, s, s]}", "name",
                                              name, "index", 100000 + i, "mtu", 9000, "state", "up",
                                              "kind", "veth", "master", master, "addresses",
                                              "198.18.100.200/24", "fe80::aaaa:bbbb:cccc:dddd/64",
                                              "2001:db8:1234:5678:aaaa:bbbb:cccc:dddd/64"));
    }
    json_t *ifaces = json_pack("{s:o}", "interfaces", list);
    text = hc_json_dump(ifaces);
    size_t if_len = strlen(text), if_values = 0;
    if_values = weigh(text);
    free(text);
    json_decref(ifaces);
    print_message("largest answers: probe x%d %zu bytes %zu values; 4096 interfaces %zu bytes "
                  "%zu values; limit %u bytes %u values\n",
                  HC_PROBE_MAX_TARGETS, probe_len, probe_values, if_len, if_values,
                  HC_AGENT_MAX_RESPONSE, HC_AGENT_MAX_JSON_VALUES);
    assert_true(4 * probe_len <= HC_AGENT_MAX_RESPONSE);
    assert_true(4 * probe_values <= HC_AGENT_MAX_JSON_VALUES);
    assert_true(2 * if_len <= HC_AGENT_MAX_RESPONSE);
    assert_true(if_values <= HC_AGENT_MAX_JSON_VALUES); /* 4096 interfaces: far beyond a node */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_fits_legitimate_answers),
        cmocka_unit_test(test_text_clean),
        cmocka_unit_test(test_relayed_error_stays_utf8),
        cmocka_unit_test_setup_teardown(test_huge_answer_aborted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_values_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worst_accepted_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poller_records_the_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reported_strings_cleaned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_bounded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
