/*
 * Fuzz target: a service's settings (common/settings.c), which the controller will run on what an
 * operator types (`hcctl config set KEY=VALUE`) and on a bundle signer's manifest.
 *
 * The input is up to three parts separated by NUL bytes: a settings schema (JSON; when it does
 * not parse, or is refused, a fixed schema with one setting of every type is used, so that the
 * other parts still reach the values), a text, and a value set (JSON). The text goes, as typed,
 * through every setting's parser and through the placeholder renderer; the value set through
 * normalize, the upgrade check, the diff and the digest. Besides memory safety it checks the
 * invariants the controller and the agent rely on: a value accepted once is accepted again in
 * its normalized form and its canonical text, to the same value; normalizing is idempotent; a
 * normalized set passes its own schema's upgrade check unchanged and differs from itself in
 * nothing; the digest does not depend on the order of the keys. Pure: no files, no network.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "tests/fuzz/fuzz_util.h"

static const char fallback[] =
    "{\"i\":{\"type\":\"int\",\"min\":-5,\"max\":64,\"default\":8,\"help\":\"h\",\"apply\":"
    "\"live\"},"
    "\"b\":{\"type\":\"bool\",\"default\":true,\"help\":\"h\",\"apply\":\"restart\"},"
    "\"s\":{\"type\":\"string\",\"max_length\":16,\"default\":\"x\",\"help\":\"h\","
    "\"apply\":\"live\"},"
    "\"e\":{\"type\":\"enum\",\"values\":[\"always\",\"batch\"],\"default\":\"always\","
    "\"help\":\"h\",\"apply\":\"restart\"},"
    "\"z\":{\"type\":\"size\",\"min\":\"1K\",\"default\":\"512M\",\"help\":\"h\",\"apply\":"
    "\"live\"},"
    "\"d\":{\"type\":\"duration\",\"max\":\"1h\",\"default\":\"30s\",\"help\":\"h\","
    "\"apply\":\"live\"}}";

static struct hc_settings_schema *schema_from(const char *data, size_t len)
{
    struct hc_error err = {0};
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    struct hc_settings_schema *s = j ? hc_settings_schema_parse(j, &err) : NULL;
    json_decref(j);
    if (s && hc_settings_schema_count(s) > 0)
        return s;
    hc_settings_schema_free(s);
    j = json_loads(fallback, 0, NULL);
    s = hc_settings_schema_parse(j, &err);
    json_decref(j);
    if (!s)
        fuzz_die("the fallback schema is refused: %s", err.message);
    return s;
}

/* v was accepted for x: its normalized form and its canonical text give it back. */
static void check_round_trip(const struct hc_setting *x, const json_t *v)
{
    struct hc_error err = {0};
    char text[HC_SETTING_VALUE_MAX + 1];
    json_t *again = hc_setting_value_parse(x, v, &err);
    if (!again || !json_equal(again, v))
        fuzz_die("%s: a normalized value is not accepted as itself", x->name);
    json_decref(again);
    int n = hc_setting_value_text(x, v, text, sizeof(text));
    if (n < 0)
        fuzz_die("%s: a normalized value has no text", x->name);
    json_t *t = json_stringn(text, (size_t)n);
    json_t *back = t ? hc_setting_value_parse(x, t, &err) : NULL;
    if (t && (!back || !json_equal(back, v)))
        fuzz_die("%s: the text '%s' does not parse back to its value", x->name, text);
    json_decref(back);
    json_decref(t);
}

static void fuzz_text(const struct hc_settings_schema *s, const char *data, size_t len)
{
    struct hc_error err = {0};
    char *text = malloc(len + 1); /* the last part has no NUL of its own */
    if (!text)
        fuzz_die("out of memory");
    memcpy(text, data, len);
    text[len] = '\0';
    json_t *v = json_stringn_nocheck(text, len); /* what a shell hands over: any bytes */
    for (size_t i = 0; v && i < hc_settings_schema_count(s); i++) {
        const struct hc_setting *x = hc_settings_schema_at(s, i);
        json_t *out = hc_setting_value_parse(x, v, &err);
        if (out)
            check_round_trip(x, out);
        else if (!err.message[0] || strchr(err.message, '\n'))
            fuzz_die("%s: a refusal that is not one line", x->name);
        json_decref(out);
    }
    json_decref(v);
    char *r = hc_settings_render(text, s, NULL, "/f", &err);
    if (r && strlen(r) > HC_SETTINGS_RENDER_MAX)
        fuzz_die("a rendered text of %zu bytes", strlen(r));
    free(r);
    free(text);
}

/* The same object with its keys inserted in the reverse order. */
static json_t *reversed(const json_t *obj)
{
    json_t *out = json_object();
    size_t n = json_object_size(obj), i = 0;
    const char **keys = calloc(n + 1, sizeof(*keys));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) keys[i++] = k;
    while (i > 0) {
        i--;
        json_object_set(out, keys[i], json_object_get(obj, keys[i]));
    }
    free(keys);
    return out;
}

static void fuzz_values(const struct hc_settings_schema *s, const char *data, size_t len)
{
    struct hc_error err = {0};
    json_t *in = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    json_t *norm = hc_settings_normalize(s, in, HC_SETTINGS_DEFAULTS, &err);
    char d1[65], d2[65];
    if (norm) {
        json_t *again = hc_settings_normalize(s, norm, HC_SETTINGS_DEFAULTS, &err);
        if (!again || !json_equal(again, norm))
            fuzz_die("normalizing a normalized set changes it");
        json_decref(again);
        json_t *up = NULL;
        if (hc_settings_upgrade_check(s, norm, &up, NULL, &err) < 0 || !json_equal(up, norm))
            fuzz_die("a set fails its own schema's upgrade check: %s", err.message);
        json_decref(up);
        int restart = -1;
        json_t *d = hc_settings_diff(s, norm, norm, &restart);
        if (!d || json_array_size(d) != 0 || restart != 0)
            fuzz_die("a set differs from itself");
        json_decref(d);
        json_t *rev = reversed(norm);
        if (hc_settings_digest(norm, d1, &err) < 0 || hc_settings_digest(rev, d2, &err) < 0 ||
            strcmp(d1, d2) != 0)
            fuzz_die("the digest depends on the order of the keys");
        json_decref(rev);
        json_t *defaults = hc_settings_defaults(s);
        d = hc_settings_diff(s, defaults, norm, NULL);
        json_decref(d);
        json_decref(defaults);
    }
    /* Anything, even what normalize refused: the upgrade check, diff and digest must cope. */
    hc_settings_upgrade_check(s, in, NULL, NULL, &err);
    json_decref(hc_settings_diff(s, in, norm, NULL));
    hc_settings_digest(in, d1, &err);
    json_decref(norm);
    json_decref(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    const char *part[3] = {p, end, end};
    size_t len[3] = {size, 0, 0};
    for (int k = 1; k < 3; k++) {
        const char *nul = memchr(part[k - 1], '\0', len[k - 1]);
        if (!nul)
            break;
        len[k - 1] = (size_t)(nul - part[k - 1]);
        part[k] = nul + 1;
        len[k] = (size_t)(end - part[k]);
    }
    struct hc_settings_schema *s = schema_from(part[0], len[0]);
    fuzz_text(s, part[1], len[1] < HC_SETTING_VALUE_MAX * 2 ? len[1] : HC_SETTING_VALUE_MAX * 2);
    fuzz_values(s, part[2], len[2]);
    hc_settings_schema_free(s);
    return 0;
}
