/*
 * hcctl's REST client for the controller API (docs/api.md), on top of hc_http_client. Every call
 * returns the parsed JSON body of a 2xx answer, or NULL with an error value whose code and
 * status hc_exit_code turns into the exit code: transport failures keep the client's code
 * (unreachable, tls_error -> 3; timeout -> 6), HTTP errors carry the controller's JSON error
 * shape and status (401/403 -> 3, 409 -> 5, other 4xx/5xx -> 1). Hints name the setting to fix.
 */
#ifndef HC_CLI_API_CLIENT_H
#define HC_CLI_API_CLIENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/config.h"
#include "common/error.h"

struct hc_api_client;

/* Needs cfg->controller (else a usage error naming the three ways to set it). timeout_ms bounds
 * each request. cfg is copied. Returns NULL with err. Caller frees with hc_api_client_free. */
struct hc_api_client *hc_api_client_new(const struct hc_cli_config *cfg, int64_t timeout_ms,
                                        struct hc_error *err);
void hc_api_client_free(struct hc_api_client *api);

/* path starts with "/v1/" and is already escaped (hc_api_client_escape). body may be NULL. Returns
 * a new reference to the response body (an empty object when the body was empty) or NULL with err.
 * http_status (may be NULL) receives the HTTP status whenever one arrived. */
json_t *hc_api_client_call(struct hc_api_client *api, const char *method, const char *path,
                           const json_t *body, long *http_status, struct hc_error *err);
/* Same, sending len bytes of data as the body with content_type and extra "Name: value" header
 * lines (NULL-terminated, may be NULL): uploads. */
json_t *hc_api_client_call_raw(struct hc_api_client *api, const char *method, const char *path,
                               const void *data, size_t len, const char *content_type,
                               const char *const *headers, long *http_status, struct hc_error *err);
json_t *hc_api_client_get(struct hc_api_client *api, const char *path, struct hc_error *err);
json_t *hc_api_client_post(struct hc_api_client *api, const char *path, const json_t *body,
                           struct hc_error *err);
json_t *hc_api_client_delete(struct hc_api_client *api, const char *path, struct hc_error *err);

/* GET path as a stream of JSON lines (GET /v1/watch): on_line(arg, obj) for each line (obj
 * borrowed; a non-zero return ends the stream), stop(arg) polled to end it early (may be NULL).
 * A line longer than HC_API_STREAM_LINE_MAX ends it with an error. idle_ms: what a silent
 * stream may last before it ends as a timeout. Returns 0 when the stream ended (closed by the
 * controller, on_line or stop), or -1 with err (an HTTP error answer, a transport failure). */
#define HC_API_STREAM_LINE_MAX (1024 * 1024)
int hc_api_client_stream(struct hc_api_client *api, const char *path, long idle_ms,
                         int (*on_line)(void *arg, const json_t *obj), int (*stop)(void *arg),
                         void *arg, struct hc_error *err);

/* 1 when err is a failure a later request may not meet, so that a command waiting on an
 * operation or following events keeps trying until its own deadline: no controller reachable,
 * a timeout, standbys that named no usable leader, an election (no_leader). A failover shows
 * as these. */
int hc_api_client_transient(const struct hc_error *err);

/* 1 once a controller has answered a request of this client (any answer): a later failure
 * is then no wrong address. */
int hc_api_client_answered(const struct hc_api_client *api);

/* The controller URL in use: the one that answered last (the leader), else the first
 * configured. */
const char *hc_api_client_url(const struct hc_api_client *api);

/* Percent-encodes text for a path segment or query value (RFC 3986 unreserved characters kept).
 * Returns 0, or -1 when out is too small. */
int hc_api_client_escape(const char *text, char *out, size_t len);
/* Appends "?key=value" or "&key=value" (value escaped) to path (a buffer of len bytes).
 * Returns 0, or -1 when it does not fit. */
int hc_api_client_query_add(char *path, size_t len, const char *key, const char *value);

#endif
