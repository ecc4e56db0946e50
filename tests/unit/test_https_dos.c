/*
 * Denial of service against common/https_server.c (issue 12, items 2 and 3). The server runs
 * in a forked child, so that its descriptors, CPU time, memory (VmHWM) and log can be measured
 * from outside while the test plays the attacker with raw sockets and OpenSSL:
 *   - descriptor exhaustion (RLIMIT_NOFILE lowered in the child): no spinning, no log flood,
 *     and it serves again once the attackers are gone;
 *   - the connection cap: the listener pauses instead of taking every descriptor;
 *   - slowloris (a header byte at a time), a TLS handshake that never ends, an idle kept-alive
 *     connection: all closed at the request deadline;
 *   - anonymous bodies of 60 MiB declared (or chunked) to the upload route and a JSON route:
 *     refused without being buffered; an authorised upload, also pipelined behind another
 *     request on the same connection, still gets its larger limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/https_server.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "tests/unit/testdir.h"

#define MIB (1024 * 1024)
#define ROUTE_AUTH 1
#define UPLOAD_LIMIT (64 * MIB)

/* Under AddressSanitizer freed memory sits in a quarantine (256 MB) and counts in VmRSS and
 * VmHWM: without one, the peak measures what the server holds, not what it has let go. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
}

static char *dir;
static char cert_path[600], key_path[600];
static SSL_CTX *client_ctx;

/* ---------------------------------------------------------------- the server child */

struct child_opts {
    int max_conns;
    int deadline_ms;
    int nofile_after; /* lower RLIMIT_NOFILE to this once listening (0: leave it) */
};

struct child {
    pid_t pid;
    int port;
    char log[700];
};

static void on_ping(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static void on_len(struct hc_request *req, void *arg)
{
    size_t len;
    hc_req_body(req, &len);
    hc_reply_json(req, 200, json_pack("{s:I}", "len", (json_int_t)len));
}

static int authorised(const char *authorization)
{
    return authorization && strcmp(authorization, "Bearer good") == 0;
}

static int head_hook(const struct hc_route *route, const char *authorization, void *arg)
{
    return (route->flags & ROUTE_AUTH) && authorised(authorization);
}

static int before_hook(struct hc_request *req, const struct hc_route *route, void *arg)
{
    if (!(route->flags & ROUTE_AUTH) || authorised(hc_req_header(req, "Authorization")))
        return 0;
    struct hc_error err;
    hc_error_set(&err, HC_E(UNAUTHORIZED), "no valid token");
    hc_reply_error(req, &err);
    return 1;
}

static void child_main(const struct child_opts *o, const char *log, int wfd)
{
    struct hc_error err = {0};
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0)
        _exit(3);
    close(fd);
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    struct hc_tls_server_config tls = {.cert_file = cert_path, .key_file = key_path};
    struct hc_http_server *srv = base ? hc_http_server_new(base, &tls, &err) : NULL;
    if (!srv || hc_http_server_route(srv, "GET", "/v1/ping", 0, on_ping, NULL) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/echo", 0, on_len, NULL) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/upload", ROUTE_AUTH, on_len, NULL) < 0 ||
        hc_http_server_route_limit(srv, "POST", "/v1/upload", UPLOAD_LIMIT) < 0)
        _exit(4);
    hc_http_server_set_hooks(srv, before_hook, NULL, NULL);
    hc_http_server_set_head_hook(srv, head_hook, NULL);
    hc_http_server_set_guard(srv, o->max_conns, o->deadline_ms);
    if (hc_http_server_listen(srv, "127.0.0.1", 0, &err) < 0)
        _exit(5);
    int port = hc_http_server_port(srv);
    if (write(wfd, &port, sizeof(port)) != sizeof(port))
        _exit(6);
    close(wfd);
    if (o->nofile_after) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = (rlim_t)o->nofile_after;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(7);
    }
    event_base_dispatch(base);
    _exit(0);
}

static void child_start(struct child *c, const struct child_opts *o)
{
    static int n;
    int p[2];
    snprintf(c->log, sizeof(c->log), "%s/server%d.log", dir, n++);
    assert_int_equal(pipe(p), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no server behind */
        close(p[0]);
        child_main(o, c->log, p[1]);
    }
    close(p[1]);
    assert_int_equal(read(p[0], &c->port, sizeof(c->port)), sizeof(c->port));
    close(p[0]);
}

static void child_stop(struct child *c)
{
    int status;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &status, 0);
}

/* ---------------------------------------------------------------- measurements */

static long cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    assert_non_null(p);
    unsigned long utime = 0, stime = 0;
    /* after ") ": state(3) ... utime(14) stime(15) */
    assert_int_equal(
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime), 2);
    return (long)((utime + stime) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, strlen(field)) == 0)
            kb = strtol(line + strlen(field), NULL, 10);
    fclose(f);
    return kb;
}

static int open_fds(pid_t pid)
{
    char path[64];
    int n = 0;
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---------------------------------------------------------------- clients */

static int tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static SSL *tls_connect(int port)
{
    int fd = tcp_connect(port);
    if (fd < 0)
        return NULL;
    SSL *ssl = SSL_new(client_ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    return ssl;
}

static void tls_close(SSL *ssl)
{
    int fd = SSL_get_fd(ssl);
    SSL_free(ssl);
    close(fd);
}

static int tls_write(SSL *ssl, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        int n = SSL_write(ssl, p, len > 65536 ? 65536 : (int)len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one response: its status, and its body into body (NUL-terminated, cut at len).
 * Returns the status or -1. */
static int read_response(SSL *ssl, char *body, size_t len)
{
    char head[8192];
    size_t n = 0;
    while (n < sizeof(head) - 1) {
        if (SSL_read(ssl, head + n, 1) != 1)
            return -1;
        n++;
        head[n] = '\0';
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    int status = -1;
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    long want = cl ? strtol(cl + 17, NULL, 10) : 0;
    size_t got = 0;
    char sink[4096];
    while ((long)got < want) {
        size_t chunk = (size_t)want - got > sizeof(sink) ? sizeof(sink) : (size_t)want - got;
        int r = SSL_read(ssl, sink, (int)chunk);
        if (r <= 0)
            return -1;
        if (body && got < len - 1)
            memcpy(body + got, sink, (size_t)r < len - 1 - got ? (size_t)r : len - 1 - got);
        got += (size_t)r;
    }
    if (body)
        body[got < len - 1 ? got : len - 1] = '\0';
    return status;
}

/* One request on a fresh connection: the head as given, then body_len bytes of 'x'. */
static int request(int port, const char *head, size_t body_len, char *body, size_t len)
{
    SSL *ssl = tls_connect(port);
    if (!ssl)
        return -1;
    int status = -1;
    char *data = malloc(body_len + 1);
    memset(data, 'x', body_len);
    if (tls_write(ssl, head, strlen(head)) == 0 && tls_write(ssl, data, body_len) == 0)
        status = read_response(ssl, body, len);
    free(data);
    tls_close(ssl);
    return status;
}

static int ping(int port)
{
    return request(port, "GET /v1/ping HTTP/1.1\r\nHost: t\r\n\r\n", 0, NULL, 0);
}

/* ms until the peer closes fd (reading and dropping whatever it sends), or -1 after limit_ms. */
static long ms_until_closed(int fd, long limit_ms)
{
    int64_t t0 = hc_mono_ms();
    char buf[4096];
    while (hc_mono_ms() - t0 < limit_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN))
                return (long)(hc_mono_ms() - t0);
        }
    }
    return -1;
}

/* ---------------------------------------------------------------- fixtures */

static int setup(void **state)
{
    struct hc_error err = {0};
    char serial[33], ca_path[600];
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {
        .cn = "server", .sans = sans, .nsans = 1, .server_auth = 1, .days = 1};
    if (!(dir = hc_test_mkdtemp("test_https_dos")))
        return -1;
    EVP_PKEY *ca_key = hc_pki_key_new(&err), *key = hc_pki_key_new(&err);
    X509 *ca = hc_pki_ca_new(ca_key, "test ca", 1, &err);
    X509 *cert = hc_pki_issue(ca, ca_key, key, &spec, serial, &err);
    snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
    snprintf(cert_path, sizeof(cert_path), "%s/server.pem", dir);
    snprintf(key_path, sizeof(key_path), "%s/server.key", dir);
    int rc = hc_pki_cert_save(ca, ca_path, &err) | hc_pki_cert_save(cert, cert_path, &err) |
             hc_pki_key_save(key, key_path, &err);
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    client_ctx = SSL_CTX_new(TLS_client_method());
    signal(SIGPIPE, SIG_IGN);
    return rc == 0 && client_ctx ? 0 : -1;
}

static int teardown(void **state)
{
    SSL_CTX_free(client_ctx);
    hc_test_rmtree(dir);
    free(dir);
    return 0;
}

/* ---------------------------------------------------------------- tests */

/* Out of descriptors: accept() fails with EMFILE on a listening socket that stays readable. */
static void test_descriptor_exhaustion(void **state)
{
    struct child c;
    struct child_opts o = {.deadline_ms = 30000, .nofile_after = 40};
    int fds[80], n = 0;
    child_start(&c, &o);
    assert_int_equal(ping(c.port), 200);
    for (int i = 0; i < 80; i++)
        if ((fds[n] = tcp_connect(c.port)) >= 0)
            n++;
    sleep_ms(500);
    long cpu0 = cpu_ms(c.pid), log0 = file_size(c.log);
    sleep_ms(1000);
    long cpu = cpu_ms(c.pid) - cpu0, logged = file_size(c.log) - log0;
    print_message("  %d connections, server at %d descriptors: %ld ms of CPU in 1 s, "
                  "%ld log bytes in 1 s, %ld in all\n",
                  n, open_fds(c.pid), cpu, logged, file_size(c.log));
    for (int i = 0; i < n; i++)
        close(fds[i]);
    int64_t t0 = hc_mono_ms();
    int status = -1;
    while ((status = ping(c.port)) != 200 && hc_mono_ms() - t0 < 8000)
        sleep_ms(100);
    print_message("  served again %lld ms after the attackers left\n",
                  (long long)(hc_mono_ms() - t0));
    child_stop(&c);
    assert_true(cpu < 300);
    assert_true(logged < 4096);
    assert_true(file_size(c.log) < 16384);
    assert_int_equal(status, 200);
}

/* At the cap the listener pauses: the connections wait in the backlog, not on descriptors. */
static void test_connection_cap(void **state)
{
    struct child c;
    struct child_opts o = {.max_conns = 8, .deadline_ms = 30000};
    int fds[30], n = 0;
    child_start(&c, &o);
    assert_int_equal(ping(c.port), 200);
    sleep_ms(200);
    int before = open_fds(c.pid);
    for (int i = 0; i < 30; i++)
        if ((fds[n] = tcp_connect(c.port)) >= 0)
            n++;
    sleep_ms(500);
    long cpu0 = cpu_ms(c.pid);
    sleep_ms(1000);
    long cpu = cpu_ms(c.pid) - cpu0;
    int held = open_fds(c.pid) - before;
    print_message("  %d connections: the server holds %d more descriptors, %ld ms of CPU in 1 s, "
                  "%ld log bytes\n",
                  n, held, cpu, file_size(c.log));
    for (int i = 0; i < n; i++)
        close(fds[i]);
    int64_t t0 = hc_mono_ms();
    int status = -1;
    while ((status = ping(c.port)) != 200 && hc_mono_ms() - t0 < 8000)
        sleep_ms(100);
    child_stop(&c);
    assert_int_equal(n, 30);
    assert_true(held <= 8);
    assert_true(cpu < 300);
    assert_int_equal(status, 200);
}

/* A header byte every 200 ms keeps an inactivity timeout from ever firing. */
static void test_slowloris(void **state)
{
    struct child c;
    struct child_opts o = {.deadline_ms = 1000};
    child_start(&c, &o);
    SSL *ssl = tls_connect(c.port);
    assert_non_null(ssl);
    int64_t t0 = hc_mono_ms();
    assert_int_equal(tls_write(ssl, "GET /v1/ping HTTP/1.1\r\nX-Slow: ", 31), 0);
    int closed = 0;
    while (!closed && hc_mono_ms() - t0 < 4000) {
        sleep_ms(200);
        closed = tls_write(ssl, "a", 1) != 0 || ms_until_closed(SSL_get_fd(ssl), 1) >= 0;
    }
    long took = (long)(hc_mono_ms() - t0);
    print_message("  slowloris connection closed: %s after %ld ms\n", closed ? "yes" : "no", took);
    tls_close(ssl);
    /* Meanwhile and afterwards the server answers. */
    assert_int_equal(ping(c.port), 200);
    child_stop(&c);
    assert_true(closed);
    assert_true(took >= 800 && took < 2500);
}

/* A TLS handshake that never ends: nothing sent, or a ClientHello a byte at a time. */
static void test_handshake_never_ends(void **state)
{
    static const unsigned char hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01,
                                          0xfc, 0x03, 0x03, 0x11, 0x22, 0x33, 0x44, 0x55,
                                          0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd};
    struct child c;
    struct child_opts o = {.deadline_ms = 1000};
    child_start(&c, &o);
    int silent = tcp_connect(c.port), dribble = tcp_connect(c.port);
    assert_true(silent >= 0 && dribble >= 0);
    int64_t t0 = hc_mono_ms();
    long dribble_ms = -1;
    for (size_t i = 0; i < sizeof(hello) && dribble_ms < 0 && hc_mono_ms() - t0 < 4000; i++) {
        if (send(dribble, &hello[i], 1, MSG_NOSIGNAL) != 1 || ms_until_closed(dribble, 200) >= 0)
            dribble_ms = (long)(hc_mono_ms() - t0);
    }
    long silent_ms = ms_until_closed(silent, 4000 - (long)(hc_mono_ms() - t0));
    if (silent_ms >= 0)
        silent_ms = (long)(hc_mono_ms() - t0);
    print_message("  closed: silent after %ld ms, byte-a-time handshake after %ld ms\n", silent_ms,
                  dribble_ms);
    close(silent);
    close(dribble);
    child_stop(&c);
    assert_true(silent_ms >= 800 && silent_ms < 2500);
    assert_true(dribble_ms >= 800 && dribble_ms < 2500);
}

/* After a reply the deadline runs again: an idle kept-alive connection does not stay. */
static void test_keepalive_idle(void **state)
{
    struct child c;
    struct child_opts o = {.deadline_ms = 1000};
    child_start(&c, &o);
    SSL *ssl = tls_connect(c.port);
    assert_non_null(ssl);
    assert_int_equal(tls_write(ssl, "GET /v1/ping HTTP/1.1\r\nHost: t\r\n\r\n", 34), 0);
    assert_int_equal(read_response(ssl, NULL, 0), 200);
    long ms = ms_until_closed(SSL_get_fd(ssl), 4000);
    print_message("  idle kept-alive connection closed after %ld ms\n", ms);
    tls_close(ssl);
    child_stop(&c);
    assert_true(ms >= 800 && ms < 2500);
}

/* Six anonymous requests declaring 60 MiB, each sending 10 MiB of it, kept open: the issue's
 * six connections took 412 MB. Then one sends all of it, and one chunked to a JSON route. */
static void test_anonymous_bodies(void **state)
{
    struct child c;
    struct child_opts o = {.deadline_ms = 20000};
    char head[256];
    child_start(&c, &o);
    assert_int_equal(ping(c.port), 200);
    long rss0 = status_kb(c.pid, "VmRSS:"), hwm0 = status_kb(c.pid, "VmHWM:");
    char *chunk = malloc(MIB);
    memset(chunk, 'x', MIB);
    SSL *six[6];
    for (int i = 0; i < 6; i++) {
        six[i] = tls_connect(c.port);
        assert_non_null(six[i]);
        snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n",
                 i % 2 ? "/v1/echo" : "/v1/upload", 60 * MIB);
        assert_int_equal(tls_write(six[i], head, strlen(head)), 0);
        for (int m = 0; m < 10; m++)
            assert_int_equal(tls_write(six[i], chunk, MIB), 0);
    }
    sleep_ms(300);
    long rss_six = status_kb(c.pid, "VmRSS:");
    for (int i = 0; i < 6; i++)
        tls_close(six[i]);

    /* All 60 MiB: the answer comes once the declared body is through. */
    snprintf(head, sizeof(head),
             "POST /v1/upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", 60 * MIB);
    int full = request(c.port, head, 60 * MIB, NULL, 0);
    /* Chunked, 1 MiB chunks, to the JSON route: cut at the limit. */
    SSL *ssl = tls_connect(c.port);
    assert_non_null(ssl);
    const char *chead = "POST /v1/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    int wrote = tls_write(ssl, chead, strlen(chead)) == 0, m = 0;
    for (; wrote && m < 60; m++)
        wrote = tls_write(ssl, "100000\r\n", 8) == 0 && tls_write(ssl, chunk, MIB) == 0 &&
                tls_write(ssl, "\r\n", 2) == 0;
    int chunked = read_response(ssl, NULL, 0);
    tls_close(ssl);
    free(chunk);
    long hwm = status_kb(c.pid, "VmHWM:"), rss = status_kb(c.pid, "VmRSS:");
    print_message("  VmRSS %ld kB before, %ld kB with six 60 MiB requests open (10 MiB sent "
                  "each), %ld kB after; VmHWM %ld -> %ld kB; full 60 MiB: %d; chunked: %d "
                  "after %d MiB sent\n",
                  rss0, rss_six, rss, hwm0, hwm, full, chunked, m);
    assert_int_equal(ping(c.port), 200);
    child_stop(&c);
    assert_true(full == 413 || full == 401);
    assert_true(chunked == 413 || chunked == -1);
    assert_true(m < 60);
    assert_true(hwm - hwm0 < 16 * 1024);
}

/* An authorised upload keeps its larger limit, also when it follows another request on the
 * same connection; a wrong token gets the JSON limit. */
static void test_authorised_upload(void **state)
{
    struct child c;
    struct child_opts o = {.deadline_ms = 1000};
    char head[512], body[256];
    child_start(&c, &o);
    snprintf(head, sizeof(head),
             "POST /v1/upload HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer good\r\n"
             "Content-Length: %d\r\n\r\n",
             20 * MIB);
    assert_int_equal(request(c.port, head, 20 * MIB, body, sizeof(body)), 200);
    assert_non_null(strstr(body, "20971520"));

    /* Pipelined: the upload's head arrives while the first request is still being handled. */
    SSL *ssl = tls_connect(c.port);
    assert_non_null(ssl);
    snprintf(head, sizeof(head),
             "GET /v1/ping HTTP/1.1\r\nHost: t\r\n\r\n"
             "POST /v1/upload HTTP/1.1\r\nHost: t\r\nauthorization: Bearer good\r\n"
             "Content-Length: %d\r\n\r\n",
             3 * MIB);
    char *data = malloc(3 * MIB);
    memset(data, 'y', 3 * MIB);
    assert_int_equal(tls_write(ssl, head, strlen(head)), 0);
    assert_int_equal(tls_write(ssl, data, 3 * MIB), 0);
    assert_int_equal(read_response(ssl, NULL, 0), 200);
    assert_int_equal(read_response(ssl, body, sizeof(body)), 200);
    assert_non_null(strstr(body, "3145728"));
    tls_close(ssl);
    free(data);

    /* A bad token: held to the JSON limit before the body is read. */
    snprintf(head, sizeof(head),
             "POST /v1/upload HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer bad\r\n"
             "Content-Length: %d\r\n\r\n",
             3 * MIB);
    assert_int_equal(request(c.port, head, 3 * MIB, NULL, 0), 413);
    /* Just over the JSON limit: the JSON 413, then the 401 for a small body. */
    snprintf(head, sizeof(head),
             "POST /v1/upload HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", MIB + 100);
    assert_int_equal(request(c.port, head, MIB + 100, body, sizeof(body)), 413);
    assert_non_null(strstr(body, HC_ERR_BODY_TOO_LARGE));
    assert_int_equal(request(c.port,
                             "POST /v1/upload HTTP/1.1\r\nHost: t\r\n"
                             "Content-Length: 2\r\n\r\n",
                             2, NULL, 0),
                     401);
    child_stop(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_exhaustion),
        cmocka_unit_test(test_connection_cap),
        cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_handshake_never_ends),
        cmocka_unit_test(test_keepalive_idle),
        cmocka_unit_test(test_anonymous_bodies),
        cmocka_unit_test(test_authorised_upload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
