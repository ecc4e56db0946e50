/*
 * JSON helpers on top of jansson: typed getters with defaults and strict parsing of bodies.
 */
#ifndef HC_COMMON_JSON_UTIL_H
#define HC_COMMON_JSON_UTIL_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"

/* Parses a request/response body that must be a JSON object. len may include no NUL.
 * Returns a new reference, or NULL with err (status 400, code invalid_json). */
json_t *hc_json_parse_object(const char *data, size_t len, struct hc_error *err);

/* Getters: return the member when present with the right type, else the default. */
const char *hc_json_str(const json_t *obj, const char *key, const char *def);
int64_t hc_json_int(const json_t *obj, const char *key, int64_t def);
int hc_json_bool(const json_t *obj, const char *key, int def);

/* Required string member: returns it or NULL with err (400 invalid_argument naming the key). */
const char *hc_json_req_str(const json_t *obj, const char *key, struct hc_error *err);

/* Serialises compactly (sorted keys). Caller frees. */
char *hc_json_dump(const json_t *v);

#endif
