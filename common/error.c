/* Error values: fill, prefix, and convert to and from the API's JSON error shape; the table of
 * error codes (common/error_codes.h). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* vsnprintf cuts at a byte count: a UTF-8 character cut in half at the end is dropped, so that
 * the text stays valid UTF-8 (an agent's long message relayed here would otherwise leave an
 * error that jansson cannot turn into JSON, and a row that cannot be read back). */
static void utf8_trim(char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
        i--;
    if (i == 0 || (unsigned char)s[i - 1] < 0xc0)
        return; /* ends in ASCII or in stray continuation bytes: nothing was cut here */
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (n - (i - 1) < need)
        s[i - 1] = '\0';
}

/* The one place that fills an error: every setter below ends here. */
static int error_vset(struct hc_error *err, int status, const char *wire, const char *fmt,
                      va_list ap)
{
    if (!err)
        return -1;
    err->status = status;
    snprintf(err->code, sizeof(err->code), "%s", wire);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    utf8_trim(err->message);
    err->hint[0] = '\0';
    return -1;
}

#undef hc_error_set
int hc_error_set(struct hc_error *err, const struct hc_code *code, const char *fmt, ...)
{
    if (!code)
        code = HC_E(INTERNAL);
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code->status, code->wire, fmt, ap);
    va_end(ap);
    return -1;
}

int hc_error_set_transport(struct hc_error *err, const struct hc_code *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, 0, (code ? code : HC_E(INTERNAL))->wire, fmt, ap);
    va_end(ap);
    return -1;
}

int hc_error_set_wire(struct hc_error *err, int status, const char *wire, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, status, wire && *wire ? wire : HC_ERR_INTERNAL, fmt, ap);
    va_end(ap);
    return -1;
}

int hc_error_hint(struct hc_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
    va_end(ap);
    utf8_trim(err->hint);
    return -1;
}

int hc_error_prefix(struct hc_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256], old[sizeof(err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    utf8_trim(prefix);
    memcpy(old, err->message, sizeof(old));
    snprintf(err->message, sizeof(err->message), "%s: %s", prefix, old);
    utf8_trim(err->message);
    return -1;
}

void hc_error_clear(struct hc_error *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
}

json_t *hc_error_to_json(const struct hc_error *err)
{
    json_t *inner = json_pack("{s:s, s:s}", "code", err->code[0] ? err->code : HC_ERR_INTERNAL,
                              "message", err->message);
    if (err->hint[0])
        json_object_set_new(inner, "hint", json_string(err->hint));
    return json_pack("{s:o}", "error", inner);
}

int hc_error_from_json(struct hc_error *err, const json_t *body, int status)
{
    const json_t *inner = json_is_object(body) ? json_object_get(body, "error") : NULL;
    const char *code = json_string_value(json_object_get(inner, "code"));
    const char *message = json_string_value(json_object_get(inner, "message"));
    const char *hint = json_string_value(json_object_get(inner, "hint"));
    if (!code || !message)
        return -1;
    hc_error_set_wire(err, status, code, "%s", message);
    if (hint)
        hc_error_hint(err, "%s", hint);
    return 0;
}

#define HC_CODE_ROW_INIT(id, wire_, status_, exit_answer_, exit_op_, meaning_)                     \
    [HC_CODE_##id] = {.name = #id,                                                                 \
                      .wire = wire_,                                                               \
                      .status = status_,                                                           \
                      .exit_answer = exit_answer_,                                                 \
                      .exit_op = exit_op_,                                                         \
                      .meaning = meaning_},
const struct hc_code hc_codes[HC_CODE_COUNT] = {HC_ERROR_CODES(HC_CODE_ROW_INIT)};
#undef HC_CODE_ROW_INIT

const struct hc_code *hc_code_find(const char *wire)
{
    for (size_t i = 0; wire && i < HC_CODE_COUNT; i++)
        if (strcmp(hc_codes[i].wire, wire) == 0)
            return &hc_codes[i];
    return NULL;
}
