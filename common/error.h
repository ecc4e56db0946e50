/*
 * Error values shared by every library in the project.
 *
 * Library code (common/, db/, agent and controller internals) never prints: it fills a
 * struct hc_error and returns -1 (or NULL). Only the top of a command or a request handler
 * reports it. The same value renders as the one JSON error shape of both HTTP APIs:
 *   {"error":{"code":"not_ok_to_stop","message":"...","hint":"..."}}
 */
#ifndef HC_COMMON_ERROR_H
#define HC_COMMON_ERROR_H

#include <jansson.h>

#include "common/error_codes.h"

struct hc_error {
    int status;        /* HTTP status: the code's (hc_codes), or the one a peer answered with;
                        * 0 = no HTTP answer at all (a transport failure), replied as 500 */
    char code[48];     /* the wire string of a row of hc_codes, or a peer's code we do not know */
    char message[512]; /* lowercase, no full stop, names what failed first */
    char hint[256];    /* what to do next; may be empty */
};

/* Fills err (if not NULL) with code (a row of hc_codes: HC_E(NOT_FOUND)), its status and the
 * message, and returns -1, so callers can write `return hc_error_set(...)`. NULL code means
 * HC_E(INTERNAL). The macro below refuses anything but a row at compile time, so a call with a
 * hand-picked status (the old signature) does not build. */
int hc_error_set(struct hc_error *err, const struct hc_code *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define HC_CODE_ROW(c)                                                                             \
    _Generic((c), const struct hc_code * : (c), struct hc_code * : (c), void * : (c))
#define hc_error_set(err, code, ...) hc_error_set((err), HC_CODE_ROW(code), __VA_ARGS__)
/* The same for an error that is no HTTP answer (a request that never got one: refused
 * connection, TLS failure, transport timeout): status 0, so a caller tells "no answer" from
 * "answered 502"; a server that relays it replies 500. */
int hc_error_set_transport(struct hc_error *err, const struct hc_code *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A code that came from elsewhere as a string (a peer's JSON error, a stored operation's error,
 * a copy of another error): code and status are kept as they came, known or not. NULL or ""
 * wire means "internal". */
int hc_error_set_wire(struct hc_error *err, int status, const char *wire, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets the hint of an already filled error; returns -1. */
int hc_error_hint(struct hc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the message with context ("reading config: " + old message); returns -1. */
int hc_error_prefix(struct hc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hc_error_clear(struct hc_error *err);

/* New reference to {"error":{"code","message","hint"?}}. Caller owns it. */
json_t *hc_error_to_json(const struct hc_error *err);
/* Parses the error shape from a response body; returns 0 when body had it, -1 otherwise. */
int hc_error_from_json(struct hc_error *err, const json_t *body, int status);

#endif
