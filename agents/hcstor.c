/*
 * hcstor: the reference storage-node service, shipped as a signed bundle (docs/bundles.md) and
 * supervised by hcagent. This version is a single-node block store; issue 6 makes it replicate.
 *
 *   hcstor --listen HOST:PORT --data DIR --version VERSION [--fail-health]
 *
 * Plain HTTP on HOST:PORT (the agent and the node's clients reach it locally), libevent evhttp:
 *   PUT  /blocks/{key}  store the body; answered only once the data and its directory entry are
 *                       on disk (write, fsync, rename, fsync of the directory)
 *   GET  /blocks/{key}  the stored bytes
 *   GET  /health        200 {"ok":true,"version","state","blocks"}; 503 with --fail-health (a
 *                       deliberately broken build, for the tests of automatic rollback)
 *   GET  /ok-to-stop    {"ok_to_stop","reason"}: false while DIR/pinned exists (its first line
 *                       is the reason), true otherwise; see the reason text for what it means
 *   POST /drain         stop accepting writes, then answer {"drained":true,"in_flight":0}
 *   GET  /resync        {"pending":0,"done":true}: nothing to catch up without replicas
 *
 * Requests are served one at a time by the single event loop and every write completes (fsync
 * included) inside its handler, so when /drain runs no write is in flight: it can answer at once
 * and truthfully. SIGTERM and SIGINT stop the loop after the request being served.
 */
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define BLOCK_MAX (16 * 1024 * 1024)
#define KEY_MAX 128

struct hcstor {
    struct event_base *base;
    char data[1024];
    char blocks[1100];
    char version[65];
    int fail_health;
    int draining;
};

static void reply(struct evhttp_request *req, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    struct evbuffer *out = evbuffer_new();
    json_decref(body);
    if (out && text)
        evbuffer_add_printf(out, "%s\n", text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, status, NULL, out);
    if (out)
        evbuffer_free(out);
    free(text);
}

static void reply_error(struct evhttp_request *req, int status, const char *code,
                        const char *message)
{
    reply(req, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message));
}

/* Keys are file names: [A-Za-z0-9._-], 1 to 128 characters, not starting with '.'. */
static int key_valid(const char *key)
{
    size_t n = strlen(key);
    return n > 0 && n <= KEY_MAX && key[0] != '.' &&
           strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static size_t count_blocks(const struct hcstor *s)
{
    DIR *d = opendir(s->blocks);
    struct dirent *e;
    size_t n = 0;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Durable write: the data, then the rename, then the directory entry reach the disk. */
static int store_block(const struct hcstor *s, const char *key, struct evbuffer *body, char *why,
                       size_t why_len)
{
    char tmp[1400], final[1400];
    size_t len = evbuffer_get_length(body);
    const unsigned char *data = len ? evbuffer_pullup(body, -1) : (const unsigned char *)"";
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", s->blocks, key);
    snprintf(final, sizeof(final), "%s/%s", s->blocks, key);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), dfd = -1, rc = -1;
    if (fd < 0 || write_all(fd, data, len) < 0 || fsync(fd) < 0 || close(fd) < 0) {
        snprintf(why, why_len, "cannot write block '%s': %s", key, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, final) < 0 || (dfd = open(s->blocks, O_RDONLY | O_DIRECTORY)) < 0 ||
        fsync(dfd) < 0)
        snprintf(why, why_len, "cannot commit block '%s': %s", key, strerror(errno));
    else
        rc = 0;
    if (dfd >= 0)
        close(dfd);
    return rc;
}

static void block_put(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    char why[1600];
    if (s->draining) {
        reply_error(req, 503, "draining", "hcstor is draining: writes are not accepted");
        return;
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    if (store_block(s, key, body, why, sizeof(why)) < 0) {
        reply_error(req, 500, "io_error", why);
        return;
    }
    reply(req, 201, json_pack("{s:s, s:I}", "key", key, "bytes", (json_int_t)len));
}

static void block_get(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    char path[1400];
    snprintf(path, sizeof(path), "%s/%s", s->blocks, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        reply_error(req, 404, "not_found", "no such block");
        return;
    }
    struct evbuffer *out = evbuffer_new();
    /* evbuffer_add_file takes over the descriptor. */
    if (!out || evbuffer_add_file(out, fd, 0, st.st_size) != 0) {
        close(fd);
        if (out)
            evbuffer_free(out);
        reply_error(req, 500, "io_error", "cannot read block");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/octet-stream");
    evhttp_send_reply(req, 200, NULL, out);
    evbuffer_free(out);
}

static void health(struct hcstor *s, struct evhttp_request *req)
{
    const char *state = s->draining ? "draining" : "serving";
    if (s->fail_health) {
        reply(req, 503,
              json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "version", s->version, "state", state,
                        "reason", "started with --fail-health"));
        return;
    }
    reply(req, 200,
          json_pack("{s:b, s:s, s:s, s:I}", "ok", 1, "version", s->version, "state", state,
                    "blocks", (json_int_t)count_blocks(s)));
}

/* False only while DIR/pinned exists; otherwise true, and the reason says what stopping costs. */
static void ok_to_stop(struct hcstor *s, struct evhttp_request *req)
{
    char path[1100], line[256] = "";
    snprintf(path, sizeof(path), "%s/pinned", s->data);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(line, sizeof(line), f))
            line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        char reason[400];
        snprintf(reason, sizeof(reason), "pinned: %s", line[0] ? line : "(no reason given)");
        reply(req, 200, json_pack("{s:b, s:s}", "ok_to_stop", 0, "reason", reason));
        return;
    }
    reply(req, 200,
          json_pack("{s:b, s:s}", "ok_to_stop", 1, "reason",
                    "this version keeps no replicas: while it is stopped its blocks "
                    "are unavailable, none are lost"));
}

static void route(struct evhttp_request *req, void *arg)
{
    struct hcstor *s = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (!path)
        path = "/";
    if (strncmp(path, "/blocks/", 8) == 0) {
        const char *key = path + 8;
        if (!key_valid(key))
            reply_error(req, 400, "invalid_argument", "invalid block key");
        else if (cmd == EVHTTP_REQ_PUT)
            block_put(s, req, key);
        else if (cmd == EVHTTP_REQ_GET)
            block_get(s, req, key);
        else
            reply_error(req, 405, "method_not_allowed", "use GET or PUT");
    } else if (strcmp(path, "/health") == 0 && cmd == EVHTTP_REQ_GET) {
        health(s, req);
    } else if (strcmp(path, "/ok-to-stop") == 0 && cmd == EVHTTP_REQ_GET) {
        ok_to_stop(s, req);
    } else if (strcmp(path, "/drain") == 0 && cmd == EVHTTP_REQ_POST) {
        s->draining = 1;
        fprintf(stderr, "hcstor %s: draining, writes refused from now on\n", s->version);
        reply(req, 200, json_pack("{s:b, s:i}", "drained", 1, "in_flight", 0));
    } else if (strcmp(path, "/resync") == 0 && cmd == EVHTTP_REQ_GET) {
        reply(req, 200, json_pack("{s:i, s:b}", "pending", 0, "done", 1));
    } else {
        reply_error(req, 404, "not_found", "no such endpoint");
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    event_base_loopexit(arg, NULL);
}

static int usage(void)
{
    fprintf(stderr, "usage: hcstor --listen HOST:PORT --data DIR --version VERSION "
                    "[--fail-health]\n");
    return 2;
}

static int parse_args(int argc, char **argv, struct hcstor *s, char *listen, size_t len)
{
    static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                         {"data", required_argument, NULL, 'd'},
                                         {"version", required_argument, NULL, 'v'},
                                         {"fail-health", no_argument, NULL, 'f'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'l')
            snprintf(listen, len, "%s", optarg);
        else if (c == 'd')
            snprintf(s->data, sizeof(s->data), "%s", optarg);
        else if (c == 'v')
            snprintf(s->version, sizeof(s->version), "%s", optarg);
        else if (c == 'f')
            s->fail_health = 1;
        else
            return -1;
    }
    return optind == argc && listen[0] && s->data[0] && s->version[0] ? 0 : -1;
}

static int serve(struct hcstor *s, const char *host, int port)
{
    struct evhttp *http = evhttp_new(s->base);
    struct event *term = evsignal_new(s->base, SIGTERM, on_signal, s->base);
    struct event *intr = evsignal_new(s->base, SIGINT, on_signal, s->base);
    int rc = 1;
    if (!http || !term || !intr || event_add(term, NULL) < 0 || event_add(intr, NULL) < 0)
        goto cleanup;
    evhttp_set_max_body_size(http, BLOCK_MAX);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_PUT | EVHTTP_REQ_POST);
    evhttp_set_gencb(http, route, s);
    if (evhttp_bind_socket(http, host, (ev_uint16_t)port) != 0) {
        fprintf(stderr, "hcstor: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
        goto cleanup;
    }
    fprintf(stderr, "hcstor %s serving on http://%s:%d, data in %s%s\n", s->version, host, port,
            s->data, s->fail_health ? " (--fail-health: health answers 503)" : "");
    event_base_dispatch(s->base);
    fprintf(stderr, "hcstor %s stopped\n", s->version);
    rc = 0;
cleanup:
    if (term)
        event_free(term);
    if (intr)
        event_free(intr);
    if (http)
        evhttp_free(http);
    return rc;
}

int main(int argc, char **argv)
{
    static struct hcstor s;
    char listen[300] = "", host[256];
    int port;
    struct hc_error err = {0};
    if (parse_args(argc, argv, &s, listen, sizeof(listen)) < 0)
        return usage();
    if (hc_split_host_port(listen, host, sizeof(host), &port, &err) < 0 || port <= 0) {
        fprintf(stderr, "hcstor: invalid --listen '%s'\n", listen);
        return 2;
    }
    snprintf(s.blocks, sizeof(s.blocks), "%s/blocks", s.data);
    if (hc_mkdir_p(s.blocks, 0755, &err) < 0) {
        fprintf(stderr, "hcstor: %s\n", err.message);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    s.base = event_base_new();
    if (!s.base)
        return 1;
    int rc = serve(&s, host, port);
    event_base_free(s.base);
    return rc;
}
