/*
 * Shared by the two API fuzz targets: turns the fuzzer's bytes into a request that did not come
 * from a connection, runs it through a server's router, hooks and handlers
 * (hc_http_server_handle) and frees it again.
 *
 * Input format (what the corpus files hold), close to HTTP/1.1 without the version:
 *   METHOD SP URI LF
 *   Name: value LF        (any number of header lines)
 *   LF
 *   body                  (the rest, any bytes)
 * CR before LF is dropped; Content-Length is set to the body's length (unless the input has a
 * Transfer-Encoding header), as evhttp would have read it. What evhttp would refuse before a
 * server's callback (an unknown method, a URI it cannot parse, a header line without a colon, more
 * than 64 KiB of headers) is refused here too, so that every request a handler sees could have come
 * from the network.
 */
#ifndef HC_TESTS_FUZZ_HTTP_H
#define HC_TESTS_FUZZ_HTTP_H

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/https_server.h"

#define FUZZ_HTTP_MAX_HEADERS (64 * 1024)

static inline int fuzz_http_method(const char *m, size_t n, enum evhttp_cmd_type *out)
{
    static const struct {
        const char *name;
        enum evhttp_cmd_type cmd;
    } methods[] = {{"GET", EVHTTP_REQ_GET},       {"POST", EVHTTP_REQ_POST},
                   {"HEAD", EVHTTP_REQ_HEAD},     {"PUT", EVHTTP_REQ_PUT},
                   {"DELETE", EVHTTP_REQ_DELETE}, {"OPTIONS", EVHTTP_REQ_OPTIONS},
                   {"TRACE", EVHTTP_REQ_TRACE},   {"CONNECT", EVHTTP_REQ_CONNECT},
                   {"PATCH", EVHTTP_REQ_PATCH}};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, m, n) == 0) {
            *out = methods[i].cmd;
            return 0;
        }
    return -1;
}

/* The next line of [*p, end) without its LF (and a CR before it); NULL at the end. */
static inline const char *fuzz_http_line(const uint8_t **p, const uint8_t *end, size_t *len)
{
    if (*p >= end)
        return NULL;
    const uint8_t *start = *p, *nl = memchr(start, '\n', (size_t)(end - start));
    const uint8_t *stop = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    if (stop > start && stop[-1] == '\r')
        stop--;
    *len = (size_t)(stop - start);
    return (const char *)start;
}

/* A request built from data, or NULL when evhttp would not have passed it on. Free with
 * fuzz_http_free. */
static inline struct evhttp_request *fuzz_http_request(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    size_t len;
    const char *line = fuzz_http_line(&p, end, &len);
    const char *sp = line ? memchr(line, ' ', len) : NULL;
    enum evhttp_cmd_type cmd;
    if (!sp || fuzz_http_method(line, (size_t)(sp - line), &cmd) < 0)
        return NULL;
    size_t ulen = len - (size_t)(sp - line) - 1;
    if (ulen == 0 || memchr(sp + 1, '\0', ulen))
        return NULL;
    struct evhttp_request *ev = evhttp_request_new(NULL, NULL);
    if (!ev)
        return NULL;
    ev->kind = EVHTTP_REQUEST;
    ev->type = cmd;
    ev->flags |= EVHTTP_REQ_DEFER_FREE; /* the reply must not free it (no connection) */
    if (!(ev->uri = strndup(sp + 1, ulen)) ||
        !(ev->uri_elems = evhttp_uri_parse_with_flags(ev->uri, EVHTTP_URI_NONCONFORMANT)))
        goto refused;
    size_t header_bytes = 0;
    while ((line = fuzz_http_line(&p, end, &len)) && len > 0) {
        const char *colon = memchr(line, ':', len);
        header_bytes += len;
        if (!colon || colon == line || memchr(line, '\0', len) ||
            header_bytes > FUZZ_HTTP_MAX_HEADERS)
            goto refused;
        char *name = strndup(line, (size_t)(colon - line));
        const char *v = colon + 1, *vend = line + len;
        while (v < vend && (*v == ' ' || *v == '\t'))
            v++;
        char *value = strndup(v, (size_t)(vend - v));
        int rc = name && value ? evhttp_add_header(ev->input_headers, name, value) : -1;
        free(name);
        free(value);
        if (rc < 0)
            goto refused;
    }
    if (p < end && evbuffer_add(ev->input_buffer, p, (size_t)(end - p)) < 0)
        goto refused;
    /* evhttp reads exactly Content-Length bytes (or de-chunks): the header a handler sees
     * always matches the body. */
    char length[32];
    snprintf(length, sizeof(length), "%zu", (size_t)(end - p));
    while (evhttp_remove_header(ev->input_headers, "Content-Length") == 0)
        ;
    if (!evhttp_find_header(ev->input_headers, "Transfer-Encoding") &&
        evhttp_add_header(ev->input_headers, "Content-Length", length) < 0)
        goto refused;
    return ev;
refused:
    ev->flags &= ~EVHTTP_REQ_DEFER_FREE;
    evhttp_request_free(ev);
    return NULL;
}

/* The status the request was answered with (0: not answered yet). */
static inline int fuzz_http_status(const struct evhttp_request *ev)
{
    return ev->kind == EVHTTP_RESPONSE ? ev->response_code : 0;
}

static inline void fuzz_http_free(struct evhttp_request *ev)
{
    ev->flags &= ~(EVHTTP_REQ_DEFER_FREE | EVHTTP_REQ_NEEDS_FREE);
    evhttp_request_free(ev);
}

#endif
