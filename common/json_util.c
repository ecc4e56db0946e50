/* JSON helpers: strict body parsing and typed getters with defaults. */
#include "common/json_util.h"

#include <stdlib.h>

const char *hc_json_str(const json_t *obj, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : def;
}

int64_t hc_json_int(const json_t *obj, const char *key, int64_t def)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

int hc_json_bool(const json_t *obj, const char *key, int def)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

const char *hc_json_req_str(const json_t *obj, const char *key, struct hc_error *err)
{
    const char *s = json_string_value(json_object_get(obj, key));
    if (!s || !*s) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "missing or empty string field '%s'", key);
        return NULL;
    }
    return s;
}

json_t *hc_json_parse_object(const char *data, size_t len, struct hc_error *err)
{
    json_error_t jerr;
    json_t *v = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        hc_error_set(err, HC_E(INVALID_JSON), "body is not valid JSON: %s at line %d column %d",
                     jerr.text, jerr.line, jerr.column);
        hc_error_hint(err, "send a JSON object with Content-Type: application/json");
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        hc_error_set(err, HC_E(INVALID_JSON), "body must be a JSON object");
        return NULL;
    }
    return v;
}

char *hc_json_dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
}
