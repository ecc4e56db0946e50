/*
 * Unit tests for a service's settings (common/settings.c): the schema and its refusals, every
 * type's JSON and text forms with their bounds (hostile input included: overflow, negative
 * sizes, "1e99", spaces, an embedded NUL, very long values), value sets, the upgrade check,
 * diffs, the digest (pinned to the serialization docs/bundles.md describes) and the
 * {setting:NAME} placeholders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/settings.h"

/* The brief's example schema, plus one setting of each remaining type. */
static const char schema_json[] =
    "{\"log_level\": {\"type\": \"enum\", \"values\": [\"debug\",\"info\",\"warn\",\"error\"],"
    "  \"default\": \"info\", \"help\": \"what the service logs\", \"apply\": \"live\"},"
    " \"resync_parallelism\": {\"type\": \"int\", \"min\": 1, \"max\": 64, \"default\": 8,"
    "  \"help\": \"blocks fetched at once\", \"apply\": \"live\"},"
    " \"fsync\": {\"type\": \"enum\", \"values\": [\"always\",\"batch\"], \"default\": "
    "\"always\","
    "  \"help\": \"when writes reach the disk\", \"apply\": \"restart\"},"
    " \"limits.memory_mb\": {\"type\": \"size\", \"min\": \"16M\", \"max\": \"1T\","
    "  \"default\": \"512M\", \"help\": \"memory bound\", \"apply\": \"live\"},"
    " \"compact\": {\"type\": \"bool\", \"default\": false, \"help\": \"compaction\","
    "  \"apply\": \"restart\"},"
    " \"label\": {\"type\": \"string\", \"max_length\": 8, \"default\": \"\", \"help\": \"a "
    "label\","
    "  \"apply\": \"live\"},"
    " \"flush_every\": {\"type\": \"duration\", \"min\": \"100ms\", \"max\": \"1h\","
    "  \"default\": \"30s\", \"help\": \"flush interval\", \"apply\": \"restart\"}}";

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!v)
        fail_msg("bad test JSON '%s': %s", text, jerr.text);
    return v;
}

static struct hc_settings_schema *schema_of(const char *text)
{
    struct hc_error err = {0};
    json_t *j = load(text);
    struct hc_settings_schema *s = hc_settings_schema_parse(j, &err);
    if (!s)
        fail_msg("schema refused: %s", err.message);
    json_decref(j);
    return s;
}

static void expect_fragment(const char *message, const char *fragment, const char *what)
{
    if (!strstr(message, fragment))
        fail_msg("%s: message '%s' lacks '%s'", what, message, fragment);
}

/* ---------------------------------------------------------------- schemas */

static void test_schema(void **state)
{
    (void)state;
    struct hc_settings_schema *s = schema_of(schema_json);
    assert_int_equal(hc_settings_schema_count(s), 7);
    /* Name order, whatever the manifest's. */
    assert_string_equal(hc_settings_schema_at(s, 0)->name, "compact");
    assert_string_equal(hc_settings_schema_at(s, 6)->name, "resync_parallelism");
    assert_null(hc_settings_schema_at(s, 7));
    const struct hc_setting *x = hc_settings_schema_find(s, "limits.memory_mb");
    assert_non_null(x);
    assert_int_equal(x->type, HC_SETTING_SIZE);
    assert_int_equal(x->min, 16LL << 20);
    assert_int_equal(x->max, 1LL << 40);
    assert_int_equal(json_integer_value(x->def), 512LL << 20);
    assert_true(x->live);
    x = hc_settings_schema_find(s, "fsync");
    assert_int_equal(x->type, HC_SETTING_ENUM);
    assert_false(x->live);
    assert_int_equal(x->n_values, 2);
    assert_string_equal(x->values[1], "batch");
    assert_string_equal(x->help, "when writes reach the disk");
    assert_int_equal(hc_settings_schema_find(s, "flush_every")->max, 3600000);
    assert_int_equal(hc_settings_schema_find(s, "label")->max_length, 8);
    assert_null(hc_settings_schema_find(s, "fsyn"));
    assert_true(hc_settings_schema_has_live(s));
    json_t *d = hc_settings_defaults(s);
    json_t *want = load("{\"log_level\":\"info\",\"resync_parallelism\":8,\"fsync\":\"always\","
                        "\"limits.memory_mb\":536870912,\"compact\":false,\"label\":\"\","
                        "\"flush_every\":30000}");
    assert_true(json_equal(d, want));
    json_decref(d);
    json_decref(want);
    hc_settings_schema_free(s);

    /* No settings: an empty schema. */
    struct hc_error err = {0};
    s = hc_settings_schema_parse(NULL, &err);
    assert_non_null(s);
    assert_int_equal(hc_settings_schema_count(s), 0);
    assert_false(hc_settings_schema_has_live(s));
    assert_null(hc_settings_schema_find(s, "x"));
    hc_settings_schema_free(s);
    hc_settings_schema_free(NULL);

    assert_true(hc_setting_name_valid("limits.cpu_percent"));
    assert_true(hc_setting_name_valid("a"));
    assert_false(hc_setting_name_valid("1a"));
    assert_false(hc_setting_name_valid("_a"));
    assert_false(hc_setting_name_valid("Log"));
    assert_false(hc_setting_name_valid("a-b"));
    assert_false(hc_setting_name_valid(""));
    assert_false(hc_setting_name_valid(NULL));
    char name[70];
    memset(name, 'a', 64);
    name[64] = '\0';
    assert_true(hc_setting_name_valid(name));
    strcat(name, "a");
    assert_false(hc_setting_name_valid(name));
}

#define S(body) "{\"x\": {" body "}}"
#define TAIL "\"help\":\"h\",\"apply\":\"live\""

static void test_schema_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *fragment;
    } cases[] = {
        {"[]", "'settings' must be an object"},
        {"{\"Log\": {}}", "'settings.Log': a setting's name is 1 to 64"},
        {"{\"1x\": {}}", "'settings.1x'"},
        {"{\"\": {}}", "'settings.'"},
        {"{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": {}}",
         "a setting's name"},
        {"{\"x\": 3}", "'settings.x' must be an object"},
        {S("\"default\":1," TAIL), "'settings.x.type' must be one of int, bool"},
        {S("\"type\":\"float\",\"default\":1," TAIL), "'settings.x.type'"},
        {S("\"type\":\"int\",\"values\":[\"a\"],\"default\":1," TAIL),
         "unknown key 'settings.x.values' (for a setting of type int)"},
        {S("\"type\":\"bool\",\"min\":1,\"default\":true," TAIL), "unknown key 'settings.x.min'"},
        {S("\"type\":\"int\",\"default\":1,\"apply\":\"live\""), "'settings.x.help' must be one"},
        {S("\"type\":\"int\",\"default\":1,\"help\":\"\",\"apply\":\"live\""), "'settings.x.help'"},
        {S("\"type\":\"int\",\"default\":1,\"help\":\"two\\nlines\",\"apply\":\"live\""),
         "'settings.x.help'"},
        {S("\"type\":\"int\",\"default\":1,\"help\":\"h\""),
         "'settings.x.apply' must be \"live\" or \"restart\""},
        {S("\"type\":\"int\",\"default\":1,\"help\":\"h\",\"apply\":\"now\""),
         "'settings.x.apply'"},
        {S("\"type\":\"int\"," TAIL), "'settings.x.default' is missing"},
        {S("\"type\":\"int\",\"min\":5,\"max\":4,\"default\":4," TAIL),
         "'settings.x.min' is more than 'settings.x.max'"},
        {S("\"type\":\"int\",\"min\":\"x\",\"default\":4," TAIL), "'settings.x.min' must be an "
                                                                  "integer"},
        {S("\"type\":\"int\",\"max\":1.5,\"default\":1," TAIL), "'settings.x.max'"},
        {S("\"type\":\"size\",\"min\":\"-1M\",\"default\":\"1M\"," TAIL), "'settings.x.min' must "
                                                                          "be a size"},
        {S("\"type\":\"size\",\"max\":\"9999999999T\",\"default\":\"1M\"," TAIL),
         "'settings.x.max' must be a size"},
        {S("\"type\":\"duration\",\"min\":30,\"max\":\"1s\",\"default\":\"2s\"," TAIL),
         "'settings.x.default' must be a duration from 30ms to 1s"},
        {S("\"type\":\"int\",\"min\":1,\"max\":64,\"default\":0," TAIL),
         "'settings.x.default' must be an integer from 1 to 64"},
        {S("\"type\":\"enum\",\"default\":\"a\"," TAIL), "'settings.x.values' must be an array"},
        {S("\"type\":\"enum\",\"values\":[],\"default\":\"a\"," TAIL), "'settings.x.values'"},
        {S("\"type\":\"enum\",\"values\":[\"a\",\"a\"],\"default\":\"a\"," TAIL),
         "'settings.x.values' has 'a' twice"},
        {S("\"type\":\"enum\",\"values\":[\"a b\"],\"default\":\"a b\"," TAIL),
         "'settings.x.values[0]'"},
        {S("\"type\":\"enum\",\"values\":[\"a\",1],\"default\":\"a\"," TAIL),
         "'settings.x.values[1]'"},
        {S("\"type\":\"enum\",\"values\":[\"\"],\"default\":\"\"," TAIL), "'settings.x.values[0]'"},
        {S("\"type\":\"string\",\"max_length\":0,\"default\":\"\"," TAIL),
         "'settings.x.max_length' must be an integer from 1 to 4096"},
        {S("\"type\":\"string\",\"max_length\":4097,\"default\":\"\"," TAIL),
         "'settings.x.max_length'"},
        {S("\"type\":\"string\",\"max_length\":2,\"default\":\"abc\"," TAIL),
         "'settings.x.default' must be a string of at most 2 bytes"},
        {S("\"type\":\"bool\",\"default\":\"yes\"," TAIL), "'settings.x.default' must be true or "
                                                           "false"},
        {"{\"fsync\": {\"type\": \"enum\", \"values\": [\"always\",\"batch\"], \"default\": "
         "\"sometimes\", \"help\": \"h\", \"apply\": \"restart\"}}",
         "manifest.json: 'settings.fsync.default' must be one of always, batch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hc_error err = {0};
        char what[32];
        json_t *j = load(cases[i].json);
        snprintf(what, sizeof(what), "case %zu", i);
        assert_null(hc_settings_schema_parse(j, &err));
        assert_string_equal(err.code, HC_BUNDLE_ERR_MANIFEST);
        assert_int_equal(err.status, 400);
        expect_fragment(err.message, "manifest.json: ", what);
        expect_fragment(err.message, cases[i].fragment, what);
        json_decref(j);
    }
    /* A key holding a NUL (no JSON parser makes one, a caller might): no name of a setting. */
    json_t *nul = json_object();
    struct hc_error nerr = {0};
    json_object_setn_new(nul, "a\0b", 3, json_object());
    assert_null(hc_settings_schema_parse(nul, &nerr));
    expect_fragment(nerr.message, "'settings.a': a setting's name", "NUL in a name");
    json_decref(nul);

    /* A help of exactly 200 bytes is fine, 201 is not. */
    char help[202], text[400];
    memset(help, 'h', 200);
    help[200] = '\0';
    snprintf(text, sizeof(text),
             "{\"x\":{\"type\":\"bool\",\"default\":true,\"help\":\"%s\",\"apply\":\"live\"}}",
             help);
    hc_settings_schema_free(schema_of(text));
    strcat(help, "h");
    snprintf(text, sizeof(text),
             "{\"x\":{\"type\":\"bool\",\"default\":true,\"help\":\"%s\",\"apply\":\"live\"}}",
             help);
    json_t *j = load(text);
    struct hc_error err = {0};
    assert_null(hc_settings_schema_parse(j, &err));
    expect_fragment(err.message, "'settings.x.help'", "help of 201");
    json_decref(j);

    /* 128 settings, not 129. */
    json_t *many = json_object();
    for (int i = 0; i < 129; i++) {
        char name[16];
        snprintf(name, sizeof(name), "s%03d", i);
        json_object_set_new(many, name,
                            json_pack("{s:s,s:b,s:s,s:s}", "type", "bool", "default", 1, "help",
                                      "h", "apply", "restart"));
        if (i == 127) {
            struct hc_settings_schema *s = hc_settings_schema_parse(many, &err);
            assert_non_null(s);
            assert_int_equal(hc_settings_schema_count(s), 128);
            assert_false(hc_settings_schema_has_live(s));
            hc_settings_schema_free(s);
        }
    }
    assert_null(hc_settings_schema_parse(many, &err));
    expect_fragment(err.message, "at most 128 settings", "129 settings");
    json_decref(many);
}

/* ---------------------------------------------------------------- one value */

struct value_case {
    const char *setting;
    const char *input;  /* JSON */
    const char *output; /* normalized JSON, or NULL: refused */
    const char *fragment;
};

static void run_value_cases(const struct hc_settings_schema *s, const struct value_case *cases,
                            size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct hc_error err = {0};
        char what[160];
        const struct hc_setting *x = hc_settings_schema_find(s, cases[i].setting);
        json_t *in = load(cases[i].input);
        json_t *out = hc_setting_value_parse(x, in, &err);
        snprintf(what, sizeof(what), "%s = %.100s", cases[i].setting, cases[i].input);
        if (cases[i].output) {
            json_t *want = load(cases[i].output);
            if (!out)
                fail_msg("%s: refused: %s", what, err.message);
            if (!json_equal(out, want))
                fail_msg("%s: got %s", what, json_dumps(out, JSON_ENCODE_ANY));
            json_decref(want);
        } else {
            if (out)
                fail_msg("%s: accepted", what);
            assert_string_equal(err.code, HC_ERR_INVALID_SETTING);
            expect_fragment(err.message, cases[i].fragment, what);
            /* One line, naming the key first. */
            assert_null(strchr(err.message, '\n'));
            assert_int_equal(strncmp(err.message, cases[i].setting, strlen(cases[i].setting)), 0);
        }
        json_decref(out);
        json_decref(in);
    }
}

static const char wide_json[] = "{\"i\": {\"type\":\"int\",\"default\":0," TAIL "},"
                                " \"z\": {\"type\":\"size\",\"default\":0," TAIL "},"
                                " \"d\": {\"type\":\"duration\",\"default\":0," TAIL "},"
                                " \"s\": {\"type\":\"string\",\"default\":\"\"," TAIL "}}";

static void test_values(void **state)
{
    (void)state;
    static const struct value_case cases[] = {
        /* int, 1 to 64 */
        {"resync_parallelism", "\"8\"", "8", NULL},
        {"resync_parallelism", "8", "8", NULL},
        {"resync_parallelism", "\"64\"", "64", NULL},
        {"resync_parallelism", "\"1\"", "1", NULL},
        {"resync_parallelism", "\"0\"", NULL,
         "resync_parallelism: '0' is not an integer from 1 to 64"},
        {"resync_parallelism", "65", NULL, "resync_parallelism: 65 is not an integer from 1 to 64"},
        {"resync_parallelism", "\"-1\"", NULL, "'-1' is not"},
        {"resync_parallelism", "\" 8\"", NULL, "' 8' is not"},
        {"resync_parallelism", "\"8 \"", NULL, "'8 ' is not"},
        {"resync_parallelism", "\"\"", NULL, "'' is not"},
        {"resync_parallelism", "\"+8\"", NULL, "'+8' is not"},
        {"resync_parallelism", "\"0x10\"", NULL, "is not"},
        {"resync_parallelism", "\"1e99\"", NULL, "'1e99' is not"},
        {"resync_parallelism", "1e99", NULL, "is not an integer"},
        {"resync_parallelism", "8.0", NULL, "8.0 is not an integer"},
        {"resync_parallelism", "\"8\\u00000\"", NULL,
         "resync_parallelism: the value contains a NUL"},
        {"resync_parallelism", "true", NULL, "true is not"},
        {"resync_parallelism", "null", NULL, "null is not"},
        {"resync_parallelism", "[8]", NULL, "[8] is not"},
        {"resync_parallelism", "\"18446744073709551624\"", NULL, "is not"}, /* 2^64 + 8 */
        /* bool */
        {"compact", "\"true\"", "true", NULL},
        {"compact", "\"false\"", "false", NULL},
        {"compact", "true", "true", NULL},
        {"compact", "false", "false", NULL},
        {"compact", "\"yes\"", NULL, "compact: 'yes' is not true or false"},
        {"compact", "\"TRUE\"", NULL, "is not true or false"},
        {"compact", "1", NULL, "1 is not true or false"},
        {"compact", "\"true\\u0000\"", NULL, "NUL"},
        /* enum */
        {"fsync", "\"batch\"", "\"batch\"", NULL},
        {"fsync", "\"sometimes\"", NULL, "fsync: 'sometimes' is not one of always, batch"},
        {"fsync", "\"Batch\"", NULL, "is not one of always, batch"},
        {"fsync", "\"batch \"", NULL, "is not one of"},
        {"fsync", "\"\"", NULL, "is not one of"},
        {"fsync", "1", NULL, "fsync: 1 is not one of always, batch"},
        {"fsync", "\"batch\\u0000x\"", NULL, "NUL"},
        /* string, at most 8 bytes */
        {"label", "\"rack-1\"", "\"rack-1\"", NULL},
        {"label", "\"\"", "\"\"", NULL},
        {"label", "\"12345678\"", "\"12345678\"", NULL},
        {"label", "\"\\u00e9t\\u00e9\"", "\"\\u00e9t\\u00e9\"", NULL}, /* UTF-8, 5 bytes */
        {"label", "\"123456789\"", NULL, "label: '123456789' is not a string of at most 8 bytes"},
        {"label", "\"a\\nb\"", NULL, "label: 'a?b' is not a string"},
        {"label", "\"a\\u007fb\"", NULL, "is not a string"},
        {"label", "\"a\\u0085\"", NULL, "is not a string"}, /* C1 */
        {"label", "\"a\\u0000b\"", NULL, "NUL"},
        {"label", "8", NULL, "label: 8 is not a string"},
        /* size, 16M to 1T */
        {"limits.memory_mb", "\"512M\"", "536870912", NULL},
        {"limits.memory_mb", "\"16M\"", "16777216", NULL},
        {"limits.memory_mb", "\"1T\"", "1099511627776", NULL},
        {"limits.memory_mb", "\"1024G\"", "1099511627776", NULL},
        {"limits.memory_mb", "\"16777216\"", "16777216", NULL},
        {"limits.memory_mb", "536870912", "536870912", NULL},
        {"limits.memory_mb", "\"16383K\"", NULL,
         "limits.memory_mb: '16383K' is not a size from 16M to 1T (bytes, or K, M, G, T"},
        {"limits.memory_mb", "\"1025G\"", NULL, "is not a size from 16M to 1T"},
        {"limits.memory_mb", "\"9999999999T\"", NULL, "'9999999999T' is not a size"},
        {"limits.memory_mb", "\"-1M\"", NULL, "'-1M' is not a size"},
        {"limits.memory_mb", "-1", NULL, "-1 is not a size"},
        {"limits.memory_mb", "\"1.5G\"", NULL, "is not a size"},
        {"limits.memory_mb", "\"512 M\"", NULL, "is not a size"},
        {"limits.memory_mb", "\"512m\"", NULL, "is not a size"},
        {"limits.memory_mb", "\"512MB\"", NULL, "is not a size"},
        {"limits.memory_mb", "\"M\"", NULL, "is not a size"},
        {"limits.memory_mb", "\"1e99\"", NULL, "is not a size"},
        {"limits.memory_mb", "1e99", NULL, "is not a size"},
        /* duration, 100ms to 1h */
        {"flush_every", "\"250ms\"", "250", NULL},
        {"flush_every", "\"30s\"", "30000", NULL},
        {"flush_every", "\"5m\"", "300000", NULL},
        {"flush_every", "\"1h\"", "3600000", NULL},
        {"flush_every", "\"100ms\"", "100", NULL},
        {"flush_every", "30000", "30000", NULL},
        {"flush_every", "\"99ms\"", NULL,
         "flush_every: '99ms' is not a duration from 100ms to 1h (with ms, s, m or h)"},
        {"flush_every", "\"61m\"", NULL, "is not a duration from 100ms to 1h"},
        {"flush_every", "\"30\"", NULL, "'30' is not a duration"},
        {"flush_every", "\"1m30s\"", NULL, "is not a duration"},
        {"flush_every", "\"-1s\"", NULL, "is not a duration"},
        {"flush_every", "\"1d\"", NULL, "is not a duration"},
        {"flush_every", "\"30S\"", NULL, "is not a duration"},
        {"flush_every", "\"s\"", NULL, "is not a duration"},
        {"flush_every", "30.5", NULL, "is not a duration"},
    };
    struct hc_settings_schema *s = schema_of(schema_json);
    run_value_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
    hc_settings_schema_free(s);

    /* The widest ranges: the edges of int64, and overflow refused rather than wrapped. */
    static const struct value_case edges[] = {
        {"i", "\"9223372036854775807\"", "9223372036854775807", NULL},
        {"i", "\"-9223372036854775808\"", "-9223372036854775808", NULL},
        {"i", "\"-0\"", "0", NULL},
        {"i", "\"007\"", "7", NULL},
        {"i", "\"9223372036854775808\"", NULL, "is not an integer from -9223372036854775808"},
        {"i", "\"-9223372036854775809\"", NULL, "is not an integer"},
        {"i", "\"99999999999999999999\"", NULL, "is not an integer"},
        {"i", "\"--1\"", NULL, "is not an integer"},
        {"i", "\"-\"", NULL, "is not an integer"},
        {"z", "\"0\"", "0", NULL},
        {"z", "\"8388607T\"", "9223370937343148032", NULL},
        {"z", "\"8589934591G\"", "9223372035781033984", NULL},
        {"z", "\"9223372036854775807\"", "9223372036854775807", NULL},
        {"z", "\"8388608T\"", NULL, "'8388608T' is not a size from 0 to 9223372036854775807"},
        {"z", "\"8589934592G\"", NULL, "is not a size"},
        {"z", "\"9999999999T\"", NULL, "is not a size"},
        {"z", "\"9223372036854775808\"", NULL, "is not a size"},
        {"z", "\"18014398509481984K\"", NULL, "is not a size"}, /* 2^54 K = 2^64: wraps to 0 */
        {"z", "-1", NULL, "-1 is not a size"},
        {"d", "\"0s\"", "0", NULL},
        {"d", "\"2562047788015h\"", "9223372036854000000", NULL},
        {"d", "\"2562047788016h\"", NULL, "is not a duration"},
        {"d", "\"9223372036854775807ms\"", "9223372036854775807", NULL},
        {"d", "\"9223372036854775808ms\"", NULL, "is not a duration"},
        {"d", "\"5124095576030432m\"", NULL, "is not a duration"}, /* x 60000 wraps */
    };
    s = schema_of(wide_json);
    run_value_cases(s, edges, sizeof(edges) / sizeof(edges[0]));

    /* Very long: refused before anything else, whatever the type; 4096 bytes are fine. */
    char *big = malloc(5000 + 3);
    struct hc_error err = {0};
    memset(big, 'a', 5000);
    big[5000] = '\0';
    const char *names[] = {"i", "z", "d", "s"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_string(big);
        assert_null(hc_setting_value_parse(hc_settings_schema_find(s, names[i]), v, &err));
        expect_fragment(err.message, "the value is longer than 4096 bytes", names[i]);
        json_decref(v);
    }
    big[4096] = '\0';
    json_t *v = json_string(big), *out;
    assert_non_null(out = hc_setting_value_parse(hc_settings_schema_find(s, "s"), v, &err));
    assert_int_equal(json_string_length(out), 4096);
    json_decref(out);
    json_decref(v);
    big[4097 - 1] = 'a';
    big[4097] = '\0';
    v = json_string(big);
    assert_null(hc_setting_value_parse(hc_settings_schema_find(s, "s"), v, &err));
    /* The value in the message is clipped: the one line stays short. */
    expect_fragment(err.message, "longer than 4096", "4097 bytes");
    json_decref(v);
    big[200] = '\0';
    v = json_string(big);
    assert_null(hc_setting_value_parse(hc_settings_schema_find(s, "i"), v, &err));
    expect_fragment(err.message, "aaa...' is not an integer", "clipped");
    assert_true(strlen(err.message) < 150);
    json_decref(v);
    /* Invalid UTF-8 (a string that did not come through a JSON parser). */
    v = json_stringn_nocheck("a\xff", 2);
    assert_null(hc_setting_value_parse(hc_settings_schema_find(s, "s"), v, &err));
    expect_fragment(err.message, "s: 'a?' is not a string", "invalid UTF-8");
    json_decref(v);
    free(big);
    hc_settings_schema_free(s);
}

static void test_text_forms(void **state)
{
    (void)state;
    static const struct {
        const char *setting;
        const char *json;
        const char *text;
    } cases[] = {
        {"z", "536870912", "512M"},
        {"z", "1024", "1K"},
        {"z", "1000", "1000"},
        {"z", "1536", "1536"},
        {"z", "0", "0"},
        {"z", "1099511627776", "1T"},
        {"z", "3221225472", "3G"},
        {"z", "2097152", "2M"},
        {"d", "250", "250ms"},
        {"d", "90000", "90s"},
        {"d", "3600000", "1h"},
        {"d", "60000", "1m"},
        {"d", "0", "0s"},
        {"d", "5400000", "90m"},
        {"d", "1500", "1500ms"},
        {"i", "-42", "-42"},
        {"i", "9223372036854775807", "9223372036854775807"},
        {"s", "\"a b\"", "a b"},
        {"b", "true", "true"},
        {"b", "false", "false"},
        {"e", "\"batch\"", "batch"},
    };
    struct hc_settings_schema *s =
        schema_of("{\"i\": {\"type\":\"int\",\"default\":0," TAIL "},"
                  " \"z\": {\"type\":\"size\",\"default\":0," TAIL "},"
                  " \"d\": {\"type\":\"duration\",\"default\":0," TAIL "},"
                  " \"b\": {\"type\":\"bool\",\"default\":true," TAIL "},"
                  " \"e\": {\"type\":\"enum\",\"values\":[\"always\",\"batch\"],"
                  "\"default\":\"always\"," TAIL "},"
                  " \"s\": {\"type\":\"string\",\"default\":\"\"," TAIL "}}");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct hc_setting *x = hc_settings_schema_find(s, cases[i].setting);
        char buf[64];
        struct hc_error err = {0};
        json_t *v = load(cases[i].json);
        assert_int_equal(hc_setting_value_text(x, v, buf, sizeof(buf)), strlen(cases[i].text));
        assert_string_equal(buf, cases[i].text);
        /* The text form parses back to the same value. */
        json_t *t = json_string(buf), *back = hc_setting_value_parse(x, t, &err);
        if (!back || !json_equal(back, v))
            fail_msg("%s: '%s' does not parse back (%s)", cases[i].setting, buf, err.message);
        json_decref(back);
        json_decref(t);
        json_decref(v);
    }
    /* Not a normalized value of the setting: no text. */
    char buf[8];
    json_t *v = json_string("8");
    assert_int_equal(hc_setting_value_text(hc_settings_schema_find(s, "i"), v, buf, sizeof(buf)),
                     -1);
    json_decref(v);
    v = json_integer(-1);
    assert_int_equal(hc_setting_value_text(hc_settings_schema_find(s, "z"), v, buf, sizeof(buf)),
                     -1);
    json_decref(v);
    v = json_string("sometimes");
    assert_int_equal(hc_setting_value_text(hc_settings_schema_find(s, "e"), v, buf, sizeof(buf)),
                     -1);
    json_decref(v);
    /* Does not fit. */
    v = json_string("12345678");
    assert_int_equal(hc_setting_value_text(hc_settings_schema_find(s, "s"), v, buf, sizeof(buf)),
                     -1);
    json_decref(v);
    /* What each type accepts, as `config set` and the help say it. */
    char what[200];
    hc_setting_describe(hc_settings_schema_find(s, "b"), what, sizeof(what));
    assert_string_equal(what, "true or false");
    hc_setting_describe(hc_settings_schema_find(s, "e"), what, sizeof(what));
    assert_string_equal(what, "one of always, batch");
    hc_setting_describe(hc_settings_schema_find(s, "e"), what, 12);
    assert_string_equal(what, "one of alwa");
    assert_string_equal(hc_setting_type_name(HC_SETTING_DURATION), "duration");
    hc_settings_schema_free(s);
}

/* ---------------------------------------------------------------- value sets */

static void test_normalize(void **state)
{
    (void)state;
    struct hc_settings_schema *s = schema_of(schema_json);
    struct hc_error err = {0};
    json_t *in = load("{\"resync_parallelism\":\"16\",\"fsync\":\"batch\","
                      "\"limits.memory_mb\":\"1G\",\"flush_every\":\"1m\"}");
    json_t *out = hc_settings_normalize(s, in, 0, &err);
    json_t *want = load("{\"resync_parallelism\":16,\"fsync\":\"batch\","
                        "\"limits.memory_mb\":1073741824,\"flush_every\":60000}");
    assert_non_null(out);
    assert_true(json_equal(out, want));
    json_decref(out);
    json_decref(want);
    /* Defaults filled for everything not set. */
    out = hc_settings_normalize(s, in, HC_SETTINGS_DEFAULTS, &err);
    assert_int_equal(json_object_size(out), 7);
    assert_string_equal(json_string_value(json_object_get(out, "log_level")), "info");
    assert_int_equal(json_integer_value(json_object_get(out, "resync_parallelism")), 16);
    /* Normalizing normalized values changes nothing. */
    json_t *again = hc_settings_normalize(s, out, HC_SETTINGS_DEFAULTS, &err);
    assert_true(json_equal(out, again));
    json_decref(again);
    json_decref(out);
    json_decref(in);
    out = hc_settings_normalize(s, NULL, 0, &err);
    assert_int_equal(json_object_size(out), 0);
    json_decref(out);

    static const struct {
        const char *json;
        const char *message;
    } bad[] = {
        {"{\"fsnc\":\"batch\"}",
         "fsnc: no such setting (known: compact, flush_every, fsync, label, limits.memory_mb, "
         "log_level, resync_parallelism)"},
        {"{\"fsync\":\"sometimes\"}", "fsync: 'sometimes' is not one of always, batch"},
        /* The first bad key in name order, whatever the order given. */
        {"{\"resync_parallelism\":0,\"fsync\":\"x\"}", "fsync: 'x' is not"},
        {"{\"fsync\":\"x\",\"compact\":\"x\"}", "compact: 'x' is not true or false"},
        {"[]", "settings must be a JSON object"},
        {"\"fsync=batch\"", "settings must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = load(bad[i].json);
        assert_null(hc_settings_normalize(s, in, HC_SETTINGS_DEFAULTS, &err));
        assert_string_equal(err.code, HC_ERR_INVALID_SETTING);
        expect_fragment(err.message, bad[i].message, bad[i].json);
        json_decref(in);
    }
    /* A key holding a NUL does not pass for the setting before the NUL. */
    in = json_object();
    json_object_setn_new(in, "log_level\0x", 11, json_string("info"));
    assert_null(hc_settings_normalize(s, in, 0, &err));
    expect_fragment(err.message, "log_level: no such setting", "NUL in a key");
    json_decref(in);
    /* At most 128 keys. */
    in = json_object();
    for (int i = 0; i < 129; i++) {
        char name[16];
        snprintf(name, sizeof(name), "k%03d", i);
        json_object_set_new(in, name, json_true());
    }
    assert_null(hc_settings_normalize(s, in, 0, &err));
    expect_fragment(err.message, "more than 128 settings", "129 keys");
    json_decref(in);
    hc_settings_schema_free(s);

    /* A service without settings. */
    s = schema_of("{}");
    in = load("{\"x\":1}");
    assert_null(hc_settings_normalize(s, in, 0, &err));
    assert_string_equal(err.message, "x: no such setting (the service has no settings)");
    json_decref(in);
    out = hc_settings_defaults(s);
    assert_int_equal(json_object_size(out), 0);
    json_decref(out);
    hc_settings_schema_free(s);
}

static void test_upgrade_check(void **state)
{
    (void)state;
    /* The next version: fsync lost "batch", resync_parallelism became 1-32, label vanished, a
     * new setting appeared. */
    struct hc_settings_schema *next = schema_of(
        "{\"log_level\": {\"type\": \"enum\", \"values\": [\"debug\",\"info\",\"warn\","
        "\"error\"], \"default\": \"warn\", \"help\": \"h\", \"apply\": \"live\"},"
        " \"resync_parallelism\": {\"type\": \"int\", \"min\": 1, \"max\": 32, \"default\": 8,"
        "  \"help\": \"h\", \"apply\": \"live\"},"
        " \"fsync\": {\"type\": \"enum\", \"values\": [\"always\"], \"default\": \"always\","
        "  \"help\": \"h\", \"apply\": \"restart\"},"
        " \"compact\": {\"type\": \"string\", \"default\": \"no\", \"help\": \"h\","
        "  \"apply\": \"restart\"},"
        " \"cache\": {\"type\": \"size\", \"default\": \"64M\", \"help\": \"h\","
        "  \"apply\": \"restart\"}}");
    struct hc_error err = {0};
    json_t *normalized = NULL, *vanished = NULL;

    json_t *cur = load("{\"fsync\":\"batch\",\"resync_parallelism\":16}");
    assert_int_equal(hc_settings_upgrade_check(next, cur, &normalized, &vanished, &err), -1);
    assert_string_equal(err.code, HC_ERR_CONFLICT);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.message, "the new version refuses the current value of fsync: "
                                     "'batch' is not one of always");
    expect_fragment(err.hint, "set fsync to a value", "hint");
    assert_null(normalized);
    assert_null(vanished);
    json_decref(cur);

    cur = load("{\"resync_parallelism\":64}");
    assert_int_equal(hc_settings_upgrade_check(next, cur, NULL, NULL, &err), -1);
    expect_fragment(err.message, "resync_parallelism: 64 is not an integer from 1 to 32", "range");
    json_decref(cur);

    /* A type that changed (bool to string): refused, the setting named. */
    cur = load("{\"compact\":true}");
    assert_int_equal(hc_settings_upgrade_check(next, cur, NULL, NULL, &err), -1);
    expect_fragment(err.message, "compact: true is not a string", "type change");
    json_decref(cur);

    /* Accepted: label vanished (reported, dropped), the rest carried in next's form. */
    cur = load("{\"resync_parallelism\":16,\"label\":\"rack-1\",\"log_level\":\"debug\","
               "\"zzz\":1}");
    assert_int_equal(hc_settings_upgrade_check(next, cur, &normalized, &vanished, &err), 0);
    json_t *want = load("{\"resync_parallelism\":16,\"log_level\":\"debug\"}");
    assert_true(json_equal(normalized, want));
    json_decref(want);
    want = load("[\"label\",\"zzz\"]");
    assert_true(json_equal(vanished, want));
    json_decref(want);
    json_decref(normalized);
    json_decref(vanished);
    json_decref(cur);

    /* Nothing set: nothing to refuse. */
    assert_int_equal(hc_settings_upgrade_check(next, NULL, &normalized, &vanished, &err), 0);
    assert_int_equal(json_object_size(normalized), 0);
    assert_int_equal(json_array_size(vanished), 0);
    json_decref(normalized);
    json_decref(vanished);
    hc_settings_schema_free(next);
}

static void test_diff(void **state)
{
    (void)state;
    struct hc_settings_schema *s = schema_of(schema_json);
    json_t *a = hc_settings_defaults(s), *b = json_deep_copy(a);
    int restart = -1;

    json_t *d = hc_settings_diff(s, a, b, &restart);
    assert_int_equal(json_array_size(d), 0);
    assert_int_equal(restart, 0);
    json_decref(d);

    /* Live changes only. */
    json_object_set_new(b, "log_level", json_string("debug"));
    json_object_set_new(b, "resync_parallelism", json_integer(16));
    d = hc_settings_diff(s, a, b, &restart);
    json_t *want = load("[{\"name\":\"log_level\",\"old\":\"info\",\"new\":\"debug\","
                        "\"apply\":\"live\"},{\"name\":\"resync_parallelism\",\"old\":8,"
                        "\"new\":16,\"apply\":\"live\"}]");
    assert_true(json_equal(d, want));
    assert_int_equal(restart, 0);
    json_decref(want);
    json_decref(d);

    /* A restart setting among them. */
    json_object_set_new(b, "fsync", json_string("batch"));
    d = hc_settings_diff(s, a, b, &restart);
    assert_int_equal(json_array_size(d), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(d, 0), "name")), "fsync");
    assert_string_equal(json_string_value(json_object_get(json_array_get(d, 0), "apply")),
                        "restart");
    assert_int_equal(restart, 1);
    json_decref(d);

    /* A key only one side has, unknown to the schema: restart (the safe guess). */
    json_t *c = json_deep_copy(a);
    json_object_set_new(c, "gone", json_integer(1));
    d = hc_settings_diff(s, c, a, &restart);
    want = load("[{\"name\":\"gone\",\"old\":1,\"new\":null,\"apply\":\"restart\"}]");
    assert_true(json_equal(d, want));
    assert_int_equal(restart, 1);
    json_decref(want);
    json_decref(d);
    json_decref(c);

    /* Against nothing: everything is new. */
    d = hc_settings_diff(s, NULL, a, NULL);
    assert_int_equal(json_array_size(d), 7);
    assert_true(json_is_null(json_object_get(json_array_get(d, 0), "old")));
    json_decref(d);
    d = hc_settings_diff(s, NULL, NULL, &restart);
    assert_int_equal(json_array_size(d), 0);
    assert_int_equal(restart, 0);
    json_decref(d);
    json_decref(a);
    json_decref(b);
    hc_settings_schema_free(s);
}

/* The digests of two sets (JSON texts) differ. */
static void digests_differ(const char *x, const char *y)
{
    char d1[65], d2[65];
    struct hc_error err = {0};
    json_t *a = load(x), *b = load(y);
    assert_int_equal(hc_settings_digest(a, d1, &err), 0);
    assert_int_equal(hc_settings_digest(b, d2, &err), 0);
    if (strcmp(d1, d2) == 0)
        fail_msg("%s and %s have the same digest", x, y);
    json_decref(a);
    json_decref(b);
}

static void test_digest(void **state)
{
    (void)state;
    char d1[65], d2[65];
    struct hc_error err = {0};
    /* Pinned: SHA-256 of "hcsettings1\n1:a=i2:-1\n1:b=b4:true\n9:log_level=s5:debug\n1:z=n0:\n"
     * (docs/bundles.md), so an agent written otherwise can reproduce it. */
    json_t *a = load("{\"z\":null,\"log_level\":\"debug\",\"b\":true,\"a\":-1}");
    assert_int_equal(hc_settings_digest(a, d1, &err), 0);
    assert_string_equal(d1, "c3ee1b458ce7cb199ccda9a868754e131b4395b71b8a17b37f39918cbf5ed686");
    /* The order of the keys does not matter. */
    json_t *b = load("{\"a\":-1,\"b\":true,\"log_level\":\"debug\",\"z\":null}");
    assert_int_equal(hc_settings_digest(b, d2, &err), 0);
    assert_string_equal(d1, d2);
    json_decref(a);
    json_decref(b);
    /* A value does, and so does the type (8 is not "8"); values cannot slide between keys; a
     * NUL inside a string counts. */
    digests_differ("{\"a\":-1,\"b\":true,\"log_level\":\"debug\",\"z\":null}",
                   "{\"a\":1,\"b\":true,\"log_level\":\"debug\",\"z\":null}");
    digests_differ("{\"x\":8}", "{\"x\":\"8\"}");
    digests_differ("{\"x\":true}", "{\"x\":\"true\"}");
    digests_differ("{\"x\":null}", "{\"x\":\"\"}");
    digests_differ("{\"a\":\"b=s1:c\"}", "{\"a\":\"b\",\"c\":\"\"}");
    digests_differ("{\"a\":\"x\\u0000y\"}", "{\"a\":\"x\"}");
    digests_differ("{}", "{\"a\":null}");
    /* Empty and NULL sets are the same: SHA-256 of the header alone. */
    assert_int_equal(hc_settings_digest(NULL, d1, &err), 0);
    assert_string_equal(d1, "b7ac1679a5bad0fc132b107fe6ce001851d6560186e157e04f51d93ccb893c5f");
    a = json_object();
    assert_int_equal(hc_settings_digest(a, d2, &err), 0);
    assert_string_equal(d1, d2);
    json_decref(a);
    /* No digest for what is no normalized value. */
    a = load("{\"a\":1.5}");
    assert_int_equal(hc_settings_digest(a, d1, &err), -1);
    expect_fragment(err.message, "a: only integers, booleans, strings and null", "real");
    json_decref(a);
    a = load("[1]");
    assert_int_equal(hc_settings_digest(a, d1, &err), -1);
    json_decref(a);
    /* The controller's and the agent's path: the defaults of a schema, normalized twice. */
    struct hc_settings_schema *s = schema_of(schema_json);
    a = hc_settings_defaults(s);
    json_t *in = load("{\"flush_every\":\"30s\",\"limits.memory_mb\":\"512M\"}");
    b = hc_settings_normalize(s, in, HC_SETTINGS_DEFAULTS, &err);
    assert_int_equal(hc_settings_digest(a, d1, &err), 0);
    assert_int_equal(hc_settings_digest(b, d2, &err), 0);
    assert_string_equal(d1, d2);
    json_decref(in);
    json_decref(a);
    json_decref(b);
    hc_settings_schema_free(s);
}

/* ---------------------------------------------------------------- placeholders */

static void test_render(void **state)
{
    (void)state;
    struct hc_settings_schema *s = schema_of(schema_json);
    struct hc_error err = {0};
    json_t *values = load("{\"log_level\":\"debug\",\"limits.memory_mb\":1073741824}");
    char *out = hc_settings_render("--log={setting:log_level} --mem={setting:limits.memory_mb} "
                                   "--par={setting:resync_parallelism} --cfg={settings_file} "
                                   "--node={node} {setting:flush_every}/{setting:compact}",
                                   s, values, "/var/lib/hcagent/service-settings.json", &err);
    assert_non_null(out);
    assert_string_equal(out, "--log=debug --mem=1G --par=8 "
                             "--cfg=/var/lib/hcagent/service-settings.json --node={node} "
                             "30s/false");
    free(out);
    /* NULL values: the defaults; NULL file: {settings_file} stays. */
    out = hc_settings_render("{setting:log_level}{settings_file}{setting}{}{", s, NULL, NULL, &err);
    assert_string_equal(out, "info{settings_file}{setting}{}{");
    free(out);
    out = hc_settings_render("", s, NULL, NULL, &err);
    assert_string_equal(out, "");
    free(out);

    static const struct {
        const char *text;
        const char *message;
    } bad[] = {
        {"{setting:fsnc}", "{setting:fsnc} names no setting"},
        {"x{setting:Log}", "a malformed {setting:NAME}"},
        {"{setting:log_level", "a malformed {setting:NAME}"},
        {"{setting:}", "a malformed"},
        {"{setting:log level}", "a malformed"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(hc_settings_render(bad[i].text, s, values, "f", &err));
        expect_fragment(err.message, bad[i].message, bad[i].text);
    }
    json_decref(values);
    /* A value that is not one of the setting's (not normalized) is refused, not passed on. */
    values = load("{\"log_level\":\"loud\"}");
    assert_null(hc_settings_render("{setting:log_level}", s, values, "f", &err));
    expect_fragment(err.message, "{setting:log_level}: the value is not a valid enum", "invalid");
    json_decref(values);
    hc_settings_schema_free(s);

    /* Bounded: 17 values of 4 KiB are past the 64 KiB a rendered string may have. */
    s = schema_of(wide_json);
    char *big = malloc(4097), text[400] = "";
    memset(big, 'v', 4096);
    big[4096] = '\0';
    values = json_pack("{s:s}", "s", big);
    for (int i = 0; i < 16; i++)
        strcat(text, "{setting:s}");
    out = hc_settings_render(text, s, values, NULL, &err);
    assert_non_null(out);
    assert_int_equal(strlen(out), 16 * 4096);
    free(out);
    strcat(text, "{setting:s}");
    assert_null(hc_settings_render(text, s, values, NULL, &err));
    expect_fragment(err.message, "longer than 65536 bytes", "too long");
    json_decref(values);
    free(big);
    hc_settings_schema_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema),    cmocka_unit_test(test_schema_refusals),
        cmocka_unit_test(test_values),    cmocka_unit_test(test_text_forms),
        cmocka_unit_test(test_normalize), cmocka_unit_test(test_upgrade_check),
        cmocka_unit_test(test_diff),      cmocka_unit_test(test_digest),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
