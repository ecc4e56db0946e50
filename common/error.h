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

/* Stable error codes (snake_case, part of the API). Add here, never rename. */
#define HC_ERR_INTERNAL "internal"
#define HC_ERR_INVALID_ARGUMENT "invalid_argument"
#define HC_ERR_INVALID_JSON "invalid_json"
#define HC_ERR_BODY_TOO_LARGE "body_too_large"
#define HC_ERR_NOT_FOUND "not_found"
#define HC_ERR_METHOD_NOT_ALLOWED "method_not_allowed"
#define HC_ERR_UNAUTHORIZED "unauthorized"
#define HC_ERR_FORBIDDEN "forbidden"
#define HC_ERR_CONFLICT "conflict"
#define HC_ERR_TOKEN_INVALID "token_invalid"
#define HC_ERR_UNREACHABLE "unreachable"
#define HC_ERR_TIMEOUT "timeout"
#define HC_ERR_TLS "tls_error"
#define HC_ERR_DB "db_error"
#define HC_ERR_SCHEMA_TOO_NEW "schema_too_new"
#define HC_ERR_IO "io_error"

struct hc_error {
    int status;        /* HTTP status this error maps to (0 = not set, treated as 500) */
    char code[48];     /* one of HC_ERR_* or an operation-specific snake_case code */
    char message[512]; /* lowercase, no full stop, names what failed first */
    char hint[256];    /* what to do next; may be empty */
};

/* Fills err (if not NULL) and returns -1, so callers can write `return hc_error_set(...)`. */
int hc_error_set(struct hc_error *err, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets the hint of an already filled error; returns -1. */
int hc_error_hint(struct hc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the message with context ("reading config: " + old message); returns -1. */
int hc_error_prefix(struct hc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hc_error_clear(struct hc_error *err);

/* New reference to {"error":{"code","message","hint"?}}. Caller owns it. */
json_t *hc_error_to_json(const struct hc_error *err);
/* Parses the error shape from a response body; returns 0 when body had it, -1 otherwise. */
int hc_error_from_json(struct hc_error *err, const json_t *body, int status);

#endif
