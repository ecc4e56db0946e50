/*
 * A service's settings (common/settings.h, docs/bundles.md "Settings"): the schema of a bundle's
 * manifest, values checked against it in their JSON and text forms, the upgrade check, diffs,
 * digests and the {setting:NAME} placeholders.
 *
 * Everything an operator or a manifest hands in is bounded before it is looked at (a value's
 * text at 4 KiB, 128 keys, names of 64 bytes) and numbers are accumulated with an overflow check
 * at every digit, so "9999999999T" is refused instead of wrapping to a small size. There is no
 * pattern for strings: a regular expression in a manifest is a denial of service waiting for a
 * value (backtracking), and max_length plus "UTF-8 without control characters" is what the
 * agent needs to pass a value on safely.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"
#include "common/util.h"

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_."
#define ENUM_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:+-"
#define SHOWN_MAX 48 /* bytes of a value quoted in a message */

struct hc_settings_schema {
    size_t n;
    struct hc_setting *items; /* sorted by name */
};

/* A key of a JSON object with its length (a key may hold a NUL) and its value. */
struct entry {
    const char *key;
    size_t len;
    json_t *value;
};

static const char *const type_names[] = {"int", "bool", "string", "enum", "size", "duration"};

const char *hc_setting_type_name(enum hc_setting_type type)
{
    return (size_t)type < HC_ARRAY_LEN(type_names) ? type_names[type] : "?";
}

int hc_setting_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n >= 1 && n <= HC_SETTING_NAME_MAX && name[0] >= 'a' && name[0] <= 'z' &&
           strspn(name, NAME_CHARS) == n;
}

/* UTF-8 without control characters (C0, DEL, C1): fit to pass on as an argument or to show. */
static int text_ok(const char *s)
{
    while (*s) {
        uint32_t cp = 0;
        size_t n = hc_utf8_seq((const unsigned char *)s, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
            return 0;
        s += n;
    }
    return 1;
}

/* A hostile string made fit for a message: control characters replaced, clipped with "...". */
static void shown(const char *s, char out[SHOWN_MAX + 4])
{
    hc_text_clean(out, SHOWN_MAX + 1, s);
    if (strlen(s) > SHOWN_MAX)
        strcat(out, "...");
}

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The members of obj sorted by key (bytes), so that the first error is the same whatever the
 * order of the input. Caller frees; NULL when out of memory (or obj is empty: *n = 0). */
static struct entry *sorted_entries(const json_t *obj, size_t *n)
{
    const char *key;
    size_t len, i = 0;
    json_t *v;
    *n = json_object_size(obj);
    struct entry *e = *n ? calloc(*n, sizeof(*e)) : NULL;
    if (!e)
        return NULL;
    json_object_keylen_foreach((json_t *)obj, key, len, v)
    {
        e[i].key = key;
        e[i].len = len;
        e[i++].value = v;
    }
    qsort(e, *n, sizeof(*e), cmp_entry);
    return e;
}

/* ---------------------------------------------------------------- numbers and text forms */

/* Decimal digits at s into *out, refusing a number above limit (checked before each digit is
 * added: no wrap). *end receives the first byte after the digits. 0, or -1. */
static int digits(const char *s, uint64_t limit, uint64_t *out, const char **end)
{
    uint64_t acc = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (acc > (limit - d) / 10)
            return -1;
        acc = acc * 10 + d;
    }
    *out = acc;
    *end = p;
    return p == s ? -1 : 0;
}

static int int_text(const char *s, int64_t *out)
{
    int neg = s[0] == '-';
    uint64_t u;
    const char *end;
    if (digits(s + neg, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &u, &end) < 0 || *end)
        return -1;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

static const struct unit {
    const char *suffix;
    int64_t factor;
} size_units[] = {{"T", 1LL << 40}, {"G", 1LL << 30}, {"M", 1LL << 20}, {"K", 1LL << 10}, {"", 1}},
  duration_units[] = {{"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};

/* DIGITS SUFFIX with one of units; a number whose product exceeds int64 is refused. */
static int unit_text(const char *s, const struct unit *units, size_t n, int64_t *out)
{
    uint64_t u;
    const char *end;
    if (digits(s, INT64_MAX, &u, &end) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            if (u > (uint64_t)(INT64_MAX / units[i].factor))
                return -1;
            *out = (int64_t)u * units[i].factor;
            return 0;
        }
    return -1;
}

/* The largest unit that divides v exactly ("512M", "90s"); 0 is "0" as a size, "0s" as a
 * duration. */
static void unit_format(int64_t v, const struct unit *units, size_t n, char *buf, size_t len)
{
    size_t i = 0;
    if (v == 0) {
        snprintf(buf, len, "0%s", units == duration_units ? "s" : "");
        return;
    }
    while (i + 1 < n && v % units[i].factor != 0)
        i++; /* the last unit's factor is 1 */
    snprintf(buf, len, "%lld%s", (long long)(v / units[i].factor), units[i].suffix);
}

static void number_format(const struct hc_setting *s, int64_t v, char *buf, size_t len)
{
    if (s->type == HC_SETTING_SIZE)
        unit_format(v, size_units, HC_ARRAY_LEN(size_units), buf, len);
    else if (s->type == HC_SETTING_DURATION)
        unit_format(v, duration_units, HC_ARRAY_LEN(duration_units), buf, len);
    else
        snprintf(buf, len, "%lld", (long long)v);
}

static int number_text(const struct hc_setting *s, const char *t, int64_t *out)
{
    if (s->type == HC_SETTING_SIZE)
        return unit_text(t, size_units, HC_ARRAY_LEN(size_units), out);
    if (s->type == HC_SETTING_DURATION)
        return unit_text(t, duration_units, HC_ARRAY_LEN(duration_units), out);
    return int_text(t, out);
}

static int is_number(const struct hc_setting *s)
{
    return s->type == HC_SETTING_INT || s->type == HC_SETTING_SIZE ||
           s->type == HC_SETTING_DURATION;
}

void hc_setting_describe(const struct hc_setting *s, char *buf, size_t len)
{
    char lo[32], hi[32];
    size_t used;
    switch (s->type) {
    case HC_SETTING_BOOL:
        snprintf(buf, len, "true or false");
        return;
    case HC_SETTING_STRING:
        snprintf(buf, len, "a string of at most %zu bytes (UTF-8, no control characters)",
                 s->max_length);
        return;
    case HC_SETTING_ENUM:
        used = (size_t)snprintf(buf, len, "one of");
        for (size_t i = 0; i < s->n_values && used < len; i++)
            used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "", s->values[i]);
        return;
    default:
        number_format(s, s->min, lo, sizeof(lo));
        number_format(s, s->max, hi, sizeof(hi));
        snprintf(buf, len, "%s from %s to %s%s",
                 s->type == HC_SETTING_INT    ? "an integer"
                 : s->type == HC_SETTING_SIZE ? "a size"
                                              : "a duration",
                 lo, hi,
                 s->type == HC_SETTING_SIZE       ? " (bytes, or K, M, G, T = 1024^n)"
                 : s->type == HC_SETTING_DURATION ? " (with ms, s, m or h)"
                                                  : "");
    }
}

/* ---------------------------------------------------------------- one value */

/* "NAME: 'VALUE' is not WHAT", the one line `config set` prints. */
static json_t *value_bad(const struct hc_setting *s, const json_t *v, struct hc_error *err)
{
    char what[400], show[SHOWN_MAX + 8]; /* quoted */
    if (json_is_string(v)) {
        char clip[SHOWN_MAX + 4];
        shown(json_string_value(v), clip);
        snprintf(show, sizeof(show), "'%s'", clip);
    } else {
        char *dump = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        shown(dump ? dump : "?", show);
        free(dump);
    }
    hc_setting_describe(s, what, sizeof(what));
    hc_error_set(err, HC_E(INVALID_SETTING), "%s: %s is not %s", s->name, show, what);
    return NULL;
}

static int in_enum(const struct hc_setting *s, const char *t)
{
    for (size_t i = 0; i < s->n_values; i++)
        if (strcmp(s->values[i], t) == 0)
            return 1;
    return 0;
}

static json_t *from_text(const struct hc_setting *s, const json_t *v, struct hc_error *err)
{
    const char *t = json_string_value(v);
    int64_t n;
    switch (s->type) {
    case HC_SETTING_BOOL:
        if (strcmp(t, "true") == 0 || strcmp(t, "false") == 0)
            return json_boolean(t[0] == 't');
        break;
    case HC_SETTING_STRING:
        if (strlen(t) <= s->max_length && text_ok(t))
            return json_string(t);
        break;
    case HC_SETTING_ENUM:
        if (in_enum(s, t))
            return json_string(t);
        break;
    default:
        if (number_text(s, t, &n) == 0 && n >= s->min && n <= s->max)
            return json_integer(n);
    }
    return value_bad(s, v, err);
}

json_t *hc_setting_value_parse(const struct hc_setting *s, const json_t *v, struct hc_error *err)
{
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        if (n > HC_SETTING_VALUE_MAX) {
            hc_error_set(err, HC_E(INVALID_SETTING), "%s: the value is longer than %d bytes",
                         s->name, HC_SETTING_VALUE_MAX);
            return NULL;
        }
        if (strlen(json_string_value(v)) != n) {
            hc_error_set(err, HC_E(INVALID_SETTING), "%s: the value contains a NUL character",
                         s->name);
            return NULL;
        }
        return from_text(s, v, err);
    }
    if (is_number(s) && json_is_integer(v) && json_integer_value(v) >= s->min &&
        json_integer_value(v) <= s->max)
        return json_integer(json_integer_value(v));
    if (s->type == HC_SETTING_BOOL && json_is_boolean(v))
        return json_boolean(json_is_true(v));
    return value_bad(s, v, err);
}

/* 1 when v is a valid value of s in the normalized JSON form (not the text form). */
static int normalized_ok(const struct hc_setting *s, const json_t *v)
{
    int form = is_number(s)                 ? json_is_integer(v)
               : s->type == HC_SETTING_BOOL ? json_is_boolean(v)
                                            : json_is_string(v);
    json_t *parsed = form ? hc_setting_value_parse(s, v, NULL) : NULL;
    json_decref(parsed);
    return parsed != NULL;
}

int hc_setting_value_text(const struct hc_setting *s, const json_t *v, char *buf, size_t len)
{
    char num[32];
    const char *text = num;
    if (!normalized_ok(s, v))
        return -1;
    if (is_number(s))
        number_format(s, json_integer_value(v), num, sizeof(num));
    else if (s->type == HC_SETTING_BOOL)
        text = json_is_true(v) ? "true" : "false";
    else
        text = json_string_value(v);
    size_t n = strlen(text);
    if (n >= len)
        return -1;
    memcpy(buf, text, n + 1);
    return (int)n;
}

/* ---------------------------------------------------------------- schemas */

/* A schema's refusal is a manifest's, worded like bundle_manifest.c's (the format a literal). */
#define schema_bad(err, ...)                                                                       \
    (hc_error_set((err), HC_E(BUNDLE_MANIFEST), "manifest.json: " __VA_ARGS__),                    \
     hc_error_hint((err), "see docs/bundles.md \"Settings\" for the schema of a setting"))

/* The keys a setting of each type may have, after type, default, help and apply. */
static const char *const type_keys[][3] = {
    [HC_SETTING_INT] = {"min", "max", NULL},    [HC_SETTING_BOOL] = {NULL},
    [HC_SETTING_STRING] = {"max_length", NULL}, [HC_SETTING_ENUM] = {"values", NULL},
    [HC_SETTING_SIZE] = {"min", "max", NULL},   [HC_SETTING_DURATION] = {"min", "max", NULL},
};

static int known_key(enum hc_setting_type type, const char *key)
{
    static const char *const common[] = {"type", "default", "help", "apply"};
    for (size_t i = 0; i < HC_ARRAY_LEN(common); i++)
        if (strcmp(common[i], key) == 0)
            return 1;
    for (size_t i = 0; type_keys[type][i]; i++)
        if (strcmp(type_keys[type][i], key) == 0)
            return 1;
    return 0;
}

static int parse_type(const char *name, const json_t *def, struct hc_setting *s,
                      struct hc_error *err)
{
    const char *type = json_string_value(json_object_get(def, "type"));
    size_t i = 0;
    while (type && i < HC_ARRAY_LEN(type_names) && strcmp(type, type_names[i]) != 0)
        i++;
    if (!type || i == HC_ARRAY_LEN(type_names))
        return schema_bad(err,
                          "'settings.%s.type' must be one of int, bool, string, enum, size, "
                          "duration",
                          name);
    s->type = (enum hc_setting_type)i;
    const char *key;
    size_t len;
    json_t *v;
    json_object_keylen_foreach((json_t *)def, key, len, v)
    {
        char show[SHOWN_MAX + 4];
        if (strlen(key) != len || !known_key(s->type, key)) {
            shown(key, show);
            return schema_bad(err, "unknown key 'settings.%s.%s' (for a setting of type %s)", name,
                              show, type);
        }
    }
    return 0;
}

static int parse_help_apply(const char *name, const json_t *def, struct hc_setting *s,
                            struct hc_error *err)
{
    const json_t *help = json_object_get(def, "help");
    const char *apply = json_string_value(json_object_get(def, "apply"));
    size_t n = json_string_length(help);
    if (!json_is_string(help) || n < 1 || n > HC_SETTING_HELP_MAX ||
        strlen(json_string_value(help)) != n || !text_ok(json_string_value(help)))
        return schema_bad(err, "'settings.%s.help' must be one line of 1 to %d bytes", name,
                          HC_SETTING_HELP_MAX);
    memcpy(s->help, json_string_value(help), n + 1);
    if (!apply || (strcmp(apply, "live") != 0 && strcmp(apply, "restart") != 0))
        return schema_bad(err, "'settings.%s.apply' must be \"live\" or \"restart\"", name);
    s->live = apply[0] == 'l';
    return 0;
}

/* min and max of a number, in the type's JSON or text form. */
static int parse_bounds(const char *name, const json_t *def, struct hc_setting *s,
                        struct hc_error *err)
{
    static const char *const keys[] = {"min", "max"};
    int64_t *bound[] = {&s->min, &s->max};
    char what[200];
    s->min = s->type == HC_SETTING_INT ? INT64_MIN : 0;
    s->max = INT64_MAX;
    struct hc_setting wide = *s; /* the widest range: what a bound may be */
    hc_setting_describe(&wide, what, sizeof(what));
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(def, keys[i]);
        if (!v)
            continue;
        json_t *parsed = hc_setting_value_parse(&wide, v, NULL);
        if (!parsed)
            return schema_bad(err, "'settings.%s.%s' must be %s", name, keys[i], what);
        *bound[i] = json_integer_value(parsed);
        json_decref(parsed);
    }
    if (s->min > s->max)
        return schema_bad(err, "'settings.%s.min' is more than 'settings.%s.max'", name, name);
    return 0;
}

static int parse_values(const char *name, const json_t *def, struct hc_setting *s,
                        struct hc_error *err)
{
    const json_t *values = json_object_get(def, "values"), *item;
    size_t i;
    if (!json_is_array(values) || json_array_size(values) < 1 ||
        json_array_size(values) > HC_SETTING_ENUM_MAX)
        return schema_bad(err, "'settings.%s.values' must be an array of 1 to %d strings", name,
                          HC_SETTING_ENUM_MAX);
    s->values = calloc(json_array_size(values), sizeof(*s->values));
    if (!s->values)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_array_foreach(values, i, item)
    {
        const char *t = json_string_value(item);
        size_t n = json_string_length(item);
        if (!t || n < 1 || n > HC_SETTING_ENUM_MAX || strspn(t, ENUM_CHARS) != n)
            return schema_bad(err,
                              "'settings.%s.values[%zu]' must be 1 to %d of a-z, A-Z, 0-9, '_', "
                              "'.', ':', '+', '-'",
                              name, i, HC_SETTING_ENUM_MAX);
        if (in_enum(s, t))
            return schema_bad(err, "'settings.%s.values' has '%s' twice", name, t);
        if (!(s->values[s->n_values++] = strdup(t)))
            return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    }
    return 0;
}

static int parse_max_length(const char *name, const json_t *def, struct hc_setting *s,
                            struct hc_error *err)
{
    const json_t *v = json_object_get(def, "max_length");
    s->max_length = HC_SETTING_VALUE_MAX;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > HC_SETTING_VALUE_MAX)
        return schema_bad(err, "'settings.%s.max_length' must be an integer from 1 to %d", name,
                          HC_SETTING_VALUE_MAX);
    s->max_length = (size_t)json_integer_value(v);
    return 0;
}

static int parse_setting(const char *name, const json_t *def, struct hc_setting *s,
                         struct hc_error *err)
{
    char what[400];
    snprintf(s->name, sizeof(s->name), "%s", name);
    if (!json_is_object(def))
        return schema_bad(err, "'settings.%s' must be an object with type, default, help and apply",
                          name);
    if (parse_type(name, def, s, err) < 0 || parse_help_apply(name, def, s, err) < 0)
        return -1;
    int rc = s->type == HC_SETTING_ENUM     ? parse_values(name, def, s, err)
             : s->type == HC_SETTING_STRING ? parse_max_length(name, def, s, err)
             : is_number(s)                 ? parse_bounds(name, def, s, err)
                                            : 0;
    if (rc < 0)
        return -1;
    const json_t *v = json_object_get(def, "default");
    if (!v)
        return schema_bad(err, "'settings.%s.default' is missing", name);
    if (!(s->def = hc_setting_value_parse(s, v, NULL))) {
        hc_setting_describe(s, what, sizeof(what));
        return schema_bad(err, "'settings.%s.default' must be %s", name, what);
    }
    return 0;
}

void hc_settings_schema_free(struct hc_settings_schema *schema)
{
    if (!schema)
        return;
    for (size_t i = 0; i < schema->n; i++) {
        struct hc_setting *s = &schema->items[i];
        for (size_t k = 0; k < s->n_values; k++)
            free(s->values[k]);
        free(s->values);
        json_decref(s->def);
    }
    free(schema->items);
    free(schema);
}

struct hc_settings_schema *hc_settings_schema_parse(const json_t *settings, struct hc_error *err)
{
    struct hc_settings_schema *schema = calloc(1, sizeof(*schema));
    struct entry *e = NULL;
    size_t n = 0;
    int ok = 0;
    if (!schema) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    if (!settings || json_is_null(settings) ||
        (json_is_object(settings) && json_object_size(settings) == 0))
        return schema;
    if (!json_is_object(settings) || json_object_size(settings) > HC_SETTINGS_MAX) {
        schema_bad(err, "'settings' must be an object of at most %d settings", HC_SETTINGS_MAX);
        goto cleanup;
    }
    if (!(e = sorted_entries(settings, &n)) ||
        !(schema->items = calloc(n, sizeof(*schema->items)))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        char show[SHOWN_MAX + 4];
        if (strlen(e[i].key) != e[i].len || !hc_setting_name_valid(e[i].key)) {
            shown(e[i].key, show);
            schema_bad(err,
                       "'settings.%s': a setting's name is 1 to %d of a-z, 0-9, '_', '.', "
                       "starting with a letter",
                       show, HC_SETTING_NAME_MAX);
            goto cleanup;
        }
        schema->n++; /* counted first: a half-parsed setting is freed too */
        if (parse_setting(e[i].key, e[i].value, &schema->items[i], err) < 0)
            goto cleanup;
    }
    ok = 1;
cleanup:
    free(e);
    if (!ok) {
        hc_settings_schema_free(schema);
        schema = NULL;
    }
    return schema;
}

struct hc_settings_schema *hc_settings_schema_of(const json_t *manifest, struct hc_error *err)
{
    return hc_settings_schema_parse(json_object_get(manifest, "settings"), err);
}

size_t hc_settings_schema_count(const struct hc_settings_schema *schema)
{
    return schema ? schema->n : 0;
}

const struct hc_setting *hc_settings_schema_at(const struct hc_settings_schema *schema, size_t i)
{
    return schema && i < schema->n ? &schema->items[i] : NULL;
}

static int cmp_setting(const void *key, const void *item)
{
    return strcmp(key, ((const struct hc_setting *)item)->name);
}

const struct hc_setting *hc_settings_schema_find(const struct hc_settings_schema *schema,
                                                 const char *name)
{
    if (!schema || !schema->n || !name)
        return NULL;
    return bsearch(name, schema->items, schema->n, sizeof(*schema->items), cmp_setting);
}

int hc_settings_schema_has_live(const struct hc_settings_schema *schema)
{
    for (size_t i = 0; i < hc_settings_schema_count(schema); i++)
        if (schema->items[i].live)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- value sets */

/* "NAME: no such setting (known: a, b, c)". */
static int unknown_setting(const struct hc_settings_schema *schema, const char *key,
                           struct hc_error *err)
{
    char show[SHOWN_MAX + 4], known[300] = "";
    size_t used = 0;
    shown(key, show);
    for (size_t i = 0; i < hc_settings_schema_count(schema) && used < sizeof(known); i++)
        used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "",
                                 schema->items[i].name);
    if (used >= sizeof(known))
        strcpy(known + sizeof(known) - 4, "...");
    if (!used)
        return hc_error_set(err, HC_E(INVALID_SETTING),
                            "%s: no such setting (the service has no settings)", show);
    return hc_error_set(err, HC_E(INVALID_SETTING), "%s: no such setting (known: %s)", show, known);
}

/* values must be NULL, null or an object of at most HC_SETTINGS_MAX keys; its members sorted
 * into *e (caller frees). 0 or -1 with err. */
static int value_set(const json_t *values, struct entry **e, size_t *n, struct hc_error *err)
{
    *e = NULL;
    *n = 0;
    if (!values || json_is_null(values))
        return 0;
    if (!json_is_object(values))
        return hc_error_set(err, HC_E(INVALID_SETTING),
                            "settings must be a JSON object of NAME: value");
    if (json_object_size(values) > HC_SETTINGS_MAX)
        return hc_error_set(err, HC_E(INVALID_SETTING), "more than %d settings in one set",
                            HC_SETTINGS_MAX);
    if (json_object_size(values) && !(*e = sorted_entries(values, n)))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    return 0;
}

/* The setting an entry names: a key holding a NUL names none. */
static const struct hc_setting *entry_setting(const struct hc_settings_schema *schema,
                                              const struct entry *e)
{
    return strlen(e->key) == e->len ? hc_settings_schema_find(schema, e->key) : NULL;
}

json_t *hc_settings_normalize(const struct hc_settings_schema *schema, const json_t *values,
                              unsigned flags, struct hc_error *err)
{
    struct entry *e = NULL;
    size_t n;
    int ok = 0;
    json_t *out = json_object();
    if (!out) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    if (value_set(values, &e, &n, err) < 0)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        const struct hc_setting *s = entry_setting(schema, &e[i]);
        json_t *v;
        if (!s) {
            unknown_setting(schema, e[i].key, err);
            goto cleanup;
        }
        if (!(v = hc_setting_value_parse(s, e[i].value, err)))
            goto cleanup;
        json_object_set_new(out, s->name, v);
    }
    for (size_t i = 0; (flags & HC_SETTINGS_DEFAULTS) && i < hc_settings_schema_count(schema); i++)
        if (!json_object_get(out, schema->items[i].name))
            json_object_set_new(out, schema->items[i].name, json_deep_copy(schema->items[i].def));
    ok = 1;
cleanup:
    free(e);
    if (!ok) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

json_t *hc_settings_defaults(const struct hc_settings_schema *schema)
{
    return hc_settings_normalize(schema, NULL, HC_SETTINGS_DEFAULTS, NULL);
}

int hc_settings_upgrade_check(const struct hc_settings_schema *next, const json_t *overrides,
                              json_t **normalized, json_t **vanished, struct hc_error *err)
{
    struct entry *e = NULL;
    size_t n;
    int rc = -1;
    json_t *out = json_object(), *gone = json_array();
    if (!out || !gone) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (value_set(overrides, &e, &n, err) < 0)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        const struct hc_setting *s = entry_setting(next, &e[i]);
        struct hc_error why = {0};
        json_t *v;
        if (!s) {
            json_array_append_new(gone, json_stringn(e[i].key, e[i].len));
            continue;
        }
        if (!(v = hc_setting_value_parse(s, e[i].value, &why))) {
            /* A refusal of the state, not of the request: 409, like every unsafe upgrade. */
            hc_error_set(err, HC_E(CONFLICT), "the new version refuses the current value of %s",
                         why.message);
            hc_error_hint(err,
                          "set %s to a value the new version accepts, or unset it, then "
                          "upgrade",
                          s->name);
            goto cleanup;
        }
        json_object_set_new(out, s->name, v);
    }
    rc = 0;
    if (normalized)
        *normalized = json_incref(out);
    if (vanished)
        *vanished = json_incref(gone);
cleanup:
    free(e);
    json_decref(out);
    json_decref(gone);
    return rc;
}

json_t *hc_settings_diff(const struct hc_settings_schema *schema, const json_t *a, const json_t *b,
                         int *restart)
{
    json_t *keys = json_object(), *out = json_array();
    struct entry *e = NULL;
    size_t n = 0;
    if (restart)
        *restart = 0;
    /* The union of both sets' keys, then walked in name order. */
    if (!keys || !out || (a && json_is_object(a) && json_object_update(keys, (json_t *)a) < 0) ||
        (b && json_is_object(b) && json_object_update(keys, (json_t *)b) < 0) ||
        (json_object_size(keys) && !(e = sorted_entries(keys, &n)))) {
        json_decref(out);
        out = NULL;
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *va = json_object_getn(a, e[i].key, e[i].len);
        json_t *vb = json_object_getn(b, e[i].key, e[i].len);
        if (va && vb && json_equal(va, vb))
            continue;
        const struct hc_setting *s = entry_setting(schema, &e[i]);
        int live = s && s->live;
        if (restart && !live)
            *restart = 1;
        json_array_append_new(out,
                              json_pack("{s:s%,s:O?,s:O?,s:s}", "name", e[i].key, e[i].len, "old",
                                        va, "new", vb, "apply", live ? "live" : "restart"));
    }
cleanup:
    free(e);
    json_decref(keys);
    return out;
}

/* ---------------------------------------------------------------- digest */

/* One member: "<key length>:<key>=<kind><text length>:<text>\n", kind i (integer, decimal),
 * b (true/false), s (string bytes), n (null). Length prefixes: no two sets serialize alike. */
static int digest_member(EVP_MD_CTX *ctx, const struct entry *e)
{
    char head[64], mid[40], num[32];
    const char *text = num;
    size_t len;
    char kind;
    if (json_is_integer(e->value)) {
        kind = 'i';
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(e->value));
    } else if (json_is_boolean(e->value)) {
        kind = 'b';
        text = json_is_true(e->value) ? "true" : "false";
    } else if (json_is_string(e->value)) {
        kind = 's';
        text = json_string_value(e->value);
    } else if (json_is_null(e->value)) {
        kind = 'n';
        text = "";
    } else {
        return -1;
    }
    len = kind == 's' ? json_string_length(e->value) : strlen(text);
    int hn = snprintf(head, sizeof(head), "%zu:", e->len);
    int mn = snprintf(mid, sizeof(mid), "=%c%zu:", kind, len);
    return EVP_DigestUpdate(ctx, head, (size_t)hn) == 1 &&
                   EVP_DigestUpdate(ctx, e->key, e->len) == 1 &&
                   EVP_DigestUpdate(ctx, mid, (size_t)mn) == 1 &&
                   EVP_DigestUpdate(ctx, text, len) == 1 && EVP_DigestUpdate(ctx, "\n", 1) == 1
               ? 0
               : -1;
}

int hc_settings_digest(const json_t *values, char out[65], struct hc_error *err)
{
    static const char magic[] = "hcsettings1\n";
    struct entry *e = NULL;
    size_t n = 0;
    unsigned char md[32];
    unsigned int mdlen = 0;
    int rc = -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (value_set(values, &e, &n, err) < 0)
        goto cleanup;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, magic, sizeof(magic) - 1) != 1) {
        hc_error_set(err, HC_E(INTERNAL), "sha-256 is not available");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++)
        if (digest_member(ctx, &e[i]) < 0) {
            char show[SHOWN_MAX + 4];
            shown(e[i].key, show);
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "%s: only integers, booleans, strings and null have a digest", show);
            goto cleanup;
        }
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != sizeof(md)) {
        hc_error_set(err, HC_E(INTERNAL), "sha-256 failed");
        goto cleanup;
    }
    for (size_t i = 0; i < sizeof(md); i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    rc = 0;
cleanup:
    free(e);
    EVP_MD_CTX_free(ctx);
    return rc;
}

/* ---------------------------------------------------------------- placeholders */

struct buf {
    char *data;
    size_t len, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n, struct hc_error *err)
{
    if (b->len + n > HC_SETTINGS_RENDER_MAX)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "the text is longer than %d bytes once its settings are in",
                            HC_SETTINGS_RENDER_MAX);
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return hc_error_set(err, HC_E(INTERNAL), "out of memory");
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* {setting:NAME} at p (past "{setting:"): appends the value's text; *used receives the bytes
 * consumed after the prefix. */
static int render_setting(struct buf *b, const char *p, const struct hc_settings_schema *schema,
                          const json_t *values, size_t *used, struct hc_error *err)
{
    char name[HC_SETTING_NAME_MAX + 1], text[HC_SETTING_VALUE_MAX + 1];
    size_t n = strspn(p, NAME_CHARS);
    if (n == 0 || n > HC_SETTING_NAME_MAX || p[n] != '}')
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "a malformed {setting:NAME} (NAME is 1 to %d of a-z, 0-9, '_', '.', "
                            "then '}')",
                            HC_SETTING_NAME_MAX);
    memcpy(name, p, n);
    name[n] = '\0';
    const struct hc_setting *s = hc_settings_schema_find(schema, name);
    if (!s)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "{setting:%s} names no setting", name);
    const json_t *v = json_object_get(values, name);
    int len = hc_setting_value_text(s, v ? v : s->def, text, sizeof(text));
    if (len < 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "{setting:%s}: the value is not a valid %s", name,
                            hc_setting_type_name(s->type));
    *used = n + 1;
    return buf_add(b, text, (size_t)len, err);
}

char *hc_settings_render(const char *text, const struct hc_settings_schema *schema,
                         const json_t *values, const char *settings_file, struct hc_error *err)
{
    static const char setting[] = "{setting:", file[] = "{settings_file}";
    struct buf b = {0};
    if (buf_add(&b, "", 0, err) < 0)
        return NULL;
    for (const char *p = text; *p;) {
        size_t used = 1;
        int rc;
        if (strncmp(p, setting, sizeof(setting) - 1) == 0) {
            rc = render_setting(&b, p + sizeof(setting) - 1, schema, values, &used, err);
            used += sizeof(setting) - 1;
        } else if (settings_file && strncmp(p, file, sizeof(file) - 1) == 0) {
            rc = buf_add(&b, settings_file, strlen(settings_file), err);
            used = sizeof(file) - 1;
        } else {
            rc = buf_add(&b, p, 1, err);
        }
        if (rc < 0) {
            free(b.data);
            return NULL;
        }
        p += used;
    }
    return b.data;
}
