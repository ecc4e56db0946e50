/*
 * Unit tests of hcctl's output layer (cli/output.c): table and key/value alignment against
 * exact expected text, colors that do not break alignment, one JSON document per command, the
 * JSON error shape, and time formatting (RFC 3339 parsing, ages, durations).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/output.h"

/* 2026-11-29T18:54:36.123Z */
#define T0 1795978476123LL

struct capture {
    char *out_buf, *err_buf;
    size_t out_len, err_len;
    FILE *out, *err;
    struct hc_output o;
};

static void capture_open(struct capture *c)
{
    memset(c, 0, sizeof(*c));
    c->out = open_memstream(&c->out_buf, &c->out_len);
    c->err = open_memstream(&c->err_buf, &c->err_len);
    assert_non_null(c->out);
    assert_non_null(c->err);
    hc_output_init(&c->o, c->out, c->err);
    c->o.now_ms = T0;
}

/* Flushes the streams so that the buffers hold everything written so far. */
static void capture_sync(struct capture *c)
{
    fflush(c->out);
    fflush(c->err);
}

static void capture_close(struct capture *c)
{
    fclose(c->out);
    fclose(c->err);
    free(c->out_buf);
    free(c->err_buf);
}

static const struct hc_col iface_cols[] = {
    {"NAME", "name", NULL},
    {"MTU", "mtu", NULL},
    {"STATE", "state", NULL},
    {NULL, NULL, NULL},
};

/* Prints rows (JSON text) as a table of iface_cols and checks what stdout got. */
static void expect_iface_table(const char *rows_json, int header, const char *want)
{
    struct capture c;
    capture_open(&c);
    json_t *rows = json_loads(rows_json, 0, NULL);
    assert_non_null(rows);
    hc_output_table(&c.o, iface_cols, rows, NULL, header);
    capture_sync(&c);
    assert_string_equal(c.out_buf, want);
    json_decref(rows);
    capture_close(&c);
}

static void test_table_alignment(void **state)
{
    (void)state;
    struct capture c;
    capture_open(&c);
    json_t *rows = json_loads("[{\"name\":\"eth0\",\"mtu\":9000,\"state\":\"up\"},"
                              "{\"name\":\"storage-bond0\",\"mtu\":1500,\"state\":null},"
                              "{\"name\":\"lo\",\"mtu\":65536}]",
                              0, NULL);
    assert_non_null(rows);
    hc_output_table(&c.o, iface_cols, rows, NULL, 1);
    capture_sync(&c);
    assert_string_equal(c.out_buf, "NAME           MTU    STATE\n"
                                   "eth0           9000   up\n"
                                   "storage-bond0  1500   -\n"
                                   "lo             65536  -\n");
    assert_int_equal(c.err_len, 0);
    json_decref(rows);
    capture_close(&c);
}

/* A table wider than 32 columns (a 64-node pair matrix has 65) is drawn whole: it used to print
 * nothing at all past 32 columns. */
static void test_table_many_columns(void **state)
{
    (void)state;
    enum { NCOLS = 65 };
    struct hc_col cols[NCOLS + 1] = {{0}};
    char keys[NCOLS][8];
    json_t *row = json_object();
    for (int i = 0; i < NCOLS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "c%d", i);
        cols[i] = (struct hc_col){keys[i], keys[i], NULL};
        json_object_set_new(row, keys[i], json_string("ok"));
    }
    json_t *rows = json_pack("[o]", row);
    struct capture c;
    capture_open(&c);
    assert_int_equal(hc_output_table(&c.o, cols, rows, NULL, 1), 0);
    capture_sync(&c);
    assert_int_equal(c.err_len, 0);
    assert_non_null(strstr(c.out_buf, "c0 "));
    assert_non_null(strstr(c.out_buf, "c64\n"));
    const char *second = strchr(c.out_buf, '\n');
    assert_non_null(second);
    int oks = 0;
    for (const char *p = second; (p = strstr(p, "ok")); p += 2)
        oks++;
    assert_int_equal(oks, NCOLS);
    json_decref(rows);
    capture_close(&c);
}

static void test_table_empty_prints_header(void **state)
{
    (void)state;
    expect_iface_table("[]", 1, "NAME  MTU  STATE\n");
}

/* Followed streams keep the widths of earlier batches and grow them when needed. */
static void test_table_stream_widths(void **state)
{
    (void)state;
    struct capture c;
    int widths[8] = {0};
    capture_open(&c);
    json_t *a = json_loads("[{\"name\":\"a\",\"mtu\":1,\"state\":\"up\"}]", 0, NULL);
    json_t *b = json_loads("[{\"name\":\"bb\",\"mtu\":2,\"state\":\"down\"}]", 0, NULL);
    hc_output_table(&c.o, iface_cols, a, widths, 1);
    hc_output_table(&c.o, iface_cols, b, widths, 0);
    capture_sync(&c);
    assert_string_equal(c.out_buf, "NAME  MTU  STATE\n"
                                   "a     1    up\n"
                                   "bb    2    down\n");
    json_decref(a);
    json_decref(b);
    capture_close(&c);
}

/* Colors wrap the text; padding is computed from the visible width. */
static void test_table_color_keeps_alignment(void **state)
{
    (void)state;
    static const struct hc_col cols[] = {
        {"NAME", "name", NULL}, {"HEALTH", "health", hc_fmt_health}, {"X", "x", NULL}, {NULL}};
    struct capture c;
    capture_open(&c);
    c.o.color = 1;
    json_t *rows = json_loads("[{\"name\":\"n1\",\"health\":\"unreachable\",\"x\":1},"
                              "{\"name\":\"n2\",\"health\":\"reachable\",\"x\":2}]",
                              0, NULL);
    hc_output_table(&c.o, cols, rows, NULL, 1);
    capture_sync(&c);
    assert_string_equal(c.out_buf, "NAME  HEALTH       X\n"
                                   "n1    \033[31munreachable\033[0m  1\n"
                                   "n2    \033[32mreachable\033[0m    2\n");
    json_decref(rows);
    capture_close(&c);
}

static void test_fields_and_sections(void **state)
{
    (void)state;
    static const struct hc_col fields[] = {{"Name", "node.name", NULL},
                                           {"Poll latency", "node.poll_latency_ms", hc_fmt_ms},
                                           {"Uptime", "node.uptime_seconds", hc_fmt_seconds},
                                           {"Last seen", "node.last_seen", hc_fmt_time},
                                           {"Missing", "node.nope", NULL},
                                           {NULL}};
    static const struct hc_section view[] = {{HC_SECTION_FIELDS, NULL, NULL, fields},
                                             {HC_SECTION_TABLE, "Interfaces", "ifs", iface_cols},
                                             {0}};
    struct capture c;
    capture_open(&c);
    json_t *doc = json_loads("{\"node\":{\"name\":\"n1\",\"poll_latency_ms\":12,"
                             "\"uptime_seconds\":11520,\"last_seen\":\"2026-11-29T18:54:24.123Z\"},"
                             "\"ifs\":[{\"name\":\"eth0\",\"mtu\":9000,\"state\":\"up\"}]}",
                             0, NULL);
    assert_non_null(doc);
    assert_int_equal(hc_output_render(&c.o, view, doc), 0);
    capture_sync(&c);
    assert_string_equal(c.out_buf, "Name:         n1\n"
                                   "Poll latency: 12ms\n"
                                   "Uptime:       3h12m\n"
                                   "Last seen:    2026-11-29T18:54:24.123Z (12s ago)\n"
                                   "Missing:      -\n"
                                   "\n"
                                   "Interfaces:\n"
                                   "NAME  MTU   STATE\n"
                                   "eth0  9000  up\n");
    json_decref(doc);
    capture_close(&c);
}

static void test_json_mode_one_document(void **state)
{
    (void)state;
    struct capture c;
    static const struct hc_section view[] = {{HC_SECTION_TABLE, NULL, "nodes", iface_cols}, {0}};
    capture_open(&c);
    c.o.json = 1;
    json_t *doc =
        json_loads("{\"nodes\":[{\"name\":\"n1\",\"mtu\":1500}],\"x\":{\"y\":[1,2]}}", 0, NULL);
    hc_output_render(&c.o, view, doc);
    /* A later error must not add a second document to stdout (stderr still gets it). */
    struct hc_error err;
    hc_error_set(&err, HC_E(INTERNAL), "something broke");
    hc_output_error(&c.o, &err, NULL);
    capture_sync(&c);
    json_error_t jerr;
    json_t *parsed = json_loads(c.out_buf, 0, &jerr); /* rejects trailing data */
    assert_non_null(parsed);
    assert_true(json_equal(parsed, doc));
    assert_non_null(strstr(c.out_buf, "\n  \"nodes\": [")); /* indent 2 */
    assert_string_equal(c.err_buf, "hcctl: error: something broke\n");
    json_decref(parsed);
    json_decref(doc);
    capture_close(&c);
}

static void test_json_error_shape(void **state)
{
    (void)state;
    struct capture c;
    capture_open(&c);
    c.o.json = 1;
    struct hc_error err;
    hc_error_set(&err, HC_E(CONFLICT), "operation 'op-1' is running");
    hc_error_hint(&err, "wait for it");
    json_t *extra = json_pack("{s:{s:s}}", "operation", "id", "op-2");
    hc_output_error(&c.o, &err, extra);
    capture_sync(&c);
    json_t *parsed = json_loads(c.out_buf, 0, NULL);
    assert_non_null(parsed);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(parsed, "error"), "code")), "conflict");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(parsed, "error"), "hint")),
        "wait for it");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(parsed, "operation"), "id")), "op-2");
    assert_string_equal(c.err_buf,
                        "hcctl: error: operation 'op-1' is running; hint: wait for it\n");
    json_decref(parsed);
    json_decref(extra);
    capture_close(&c);
}

/* Text mode: errors only on stderr, nothing on stdout. */
static void test_text_error_stderr_only(void **state)
{
    (void)state;
    struct capture c;
    capture_open(&c);
    struct hc_error err;
    hc_error_set(&err, HC_E(NOT_FOUND), "node 'n9' not found");
    hc_output_error(&c.o, &err, NULL);
    capture_sync(&c);
    assert_int_equal(c.out_len, 0);
    assert_string_equal(c.err_buf, "hcctl: error: node 'n9' not found\n");
    capture_close(&c);
}

static void test_quiet_info(void **state)
{
    (void)state;
    struct capture c;
    capture_open(&c);
    hc_output_info(&c.o, "step %d", 1);
    c.o.quiet = 1;
    hc_output_info(&c.o, "step %d", 2);
    capture_sync(&c);
    assert_string_equal(c.err_buf, "step 1\n");
    assert_int_equal(c.out_len, 0);
    capture_close(&c);
}

static void test_parse_time(void **state)
{
    (void)state;
    int64_t t = 0;
    assert_int_equal(hc_output_parse_time("2026-11-29T18:54:36.123Z", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(hc_output_parse_time("2026-11-29T18:54:36Z", &t), 0);
    assert_int_equal(t, T0 - 123);
    assert_int_equal(hc_output_parse_time("2026-11-29T18:54:36.1+00:00", &t), 0);
    assert_int_equal(t, T0 - 23);
    assert_int_equal(hc_output_parse_time("2026-11-29 18:54:36Z", &t), -1);
    assert_int_equal(hc_output_parse_time("2026-11-29T18:54:36.Z", &t), -1);
    assert_int_equal(hc_output_parse_time("2026-13-29T18:54:36Z", &t), -1);
    assert_int_equal(hc_output_parse_time("2026-11-29T18:54:36+02:00", &t), -1);
    assert_int_equal(hc_output_parse_time("yesterday", &t), -1);
}

static void test_relative_age(void **state)
{
    (void)state;
    char buf[32];
    static const struct {
        int64_t delta_ms;
        const char *want;
    } cases[] = {
        {0, "0s ago"},
        {12000, "12s ago"},
        {59999, "59s ago"},
        {60000, "1m ago"},
        {5 * 60000 + 10, "5m ago"},
        {3 * 3600000LL, "3h ago"},
        {2 * 86400000LL, "2d ago"},
        {-5 * 60000, "in 5m"},
        {-1500, "in 1s"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hc_output_age(T0, T0 - cases[i].delta_ms, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].want);
    }
}

static void test_fmt_age_and_fallbacks(void **state)
{
    (void)state;
    struct capture c;
    char buf[64];
    enum hc_color color;
    capture_open(&c);
    json_t *ts = json_string("2026-11-29T18:49:36.123Z");
    hc_fmt_age(&c.o, ts, buf, sizeof(buf), &color);
    assert_string_equal(buf, "5m ago");
    hc_fmt_age(&c.o, NULL, buf, sizeof(buf), &color); /* absent */
    assert_string_equal(buf, "-");
    json_t *odd = json_string("not a time");
    hc_fmt_age(&c.o, odd, buf, sizeof(buf), &color); /* shown as-is, never hidden */
    assert_string_equal(buf, "not a time");
    json_decref(ts);
    json_decref(odd);
    capture_close(&c);
}

static void test_duration_text(void **state)
{
    (void)state;
    char buf[32];
    static const struct {
        int64_t secs;
        const char *want;
    } cases[] = {{0, "0s"},        {45, "45s"},     {725, "12m5s"}, {720, "12m"},
                 {11520, "3h12m"}, {90061, "1d1h"}, {-3, "0s"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hc_output_duration(cases[i].secs, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].want);
    }
}

static void test_fmt_text_values(void **state)
{
    (void)state;
    char buf[128];
    enum hc_color color;
    json_t *v = json_loads("{\"a\":[\"198.18.0.1/24\",\"fe80::1/64\"],\"b\":true,\"c\":[],"
                           "\"d\":{\"k\":1},\"e\":\"\",\"f\":1.5}",
                           0, NULL);
    hc_fmt_text(NULL, json_object_get(v, "a"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "198.18.0.1/24,fe80::1/64");
    hc_fmt_text(NULL, json_object_get(v, "b"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "yes");
    hc_fmt_text(NULL, json_object_get(v, "c"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "-");
    hc_fmt_text(NULL, json_object_get(v, "d"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "{\"k\":1}");
    hc_fmt_text(NULL, json_object_get(v, "e"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "-");
    hc_fmt_text(NULL, json_object_get(v, "f"), buf, sizeof(buf), &color);
    assert_string_equal(buf, "1.5");
    json_decref(v);
}

/* A newline inside a value must not break the table into extra lines. */
static void test_cell_newlines_flattened(void **state)
{
    (void)state;
    expect_iface_table("[{\"name\":\"a\\nb\",\"mtu\":1,\"state\":\"x\\ty\"}]", 0,
                       "a b   1    x y\n");
}

/* Issue 12: an agent reports a hostname or a detail holding terminal escape sequences (set the
 * window title, clear the screen). Text output shows them as visible escapes; nothing that
 * moves the cursor or talks to the terminal reaches it. */
#define HOSTILE "\x1b]0;pwned\x07\x1b[2J"
#define HOSTILE_SHOWN "\\x1b]0;pwned\\x07\\x1b[2J"

/* 1 when text holds a C0 control other than newline, DEL, or a C1 control (raw or UTF-8). */
static int has_controls(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f ||
            (*p >= 0x80 && *p <= 0x9f && (p == (const unsigned char *)text || p[-1] == 0xc2)))
            return 1;
    }
    return 0;
}

static void test_control_chars_escaped(void **state)
{
    (void)state;
    static const struct hc_col fields[] = {{"Name", "node.name", NULL},
                                           {"Hostname", "node.hostname", NULL},
                                           {"Detail", "node.health_detail", hc_fmt_health},
                                           {NULL}};
    static const struct hc_section view[] = {{HC_SECTION_FIELDS, NULL, NULL, fields},
                                             {HC_SECTION_TABLE, "Interfaces", "ifs", iface_cols},
                                             {0}};
    struct capture c;
    capture_open(&c);
    c.o.color = 1; /* the colors hcctl itself writes are the only escapes left */
    json_t *doc = json_pack("{s:{s:s, s:s, s:s}, s:[{s:s, s:i, s:s}]}", "node", "name", "n1",
                            "hostname", HOSTILE, "health_detail",
                            "cr\rbs\bdel\x7f csi\xc2\x9b"
                            "31m rlo\xe2\x80\xae"
                            "end",
                            "ifs", "name", "eth0\x1b[1A", "mtu", 1500, "state",
                            "up\x1b"
                            "c");
    assert_non_null(doc);
    assert_int_equal(hc_output_render(&c.o, view, doc), 0);
    capture_sync(&c);
    assert_string_equal(c.out_buf, "Name:     n1\n"
                                   "Hostname: " HOSTILE_SHOWN "\n"
                                   "Detail:   cr\\x0dbs\\x08del\\x7f csi\\u009b31m rlo\\u202eend\n"
                                   "\n"
                                   "Interfaces:\n"
                                   "NAME         MTU   STATE\n"
                                   "eth0\\x1b[1A  1500  up\\x1bc\n");
    assert_false(has_controls(c.out_buf));

    /* Errors on stderr too (an agent's message relayed by the controller). */
    struct hc_error err = {0};
    hc_error_set(&err, HC_E(AGENT_ERROR), "agent said " HOSTILE);
    hc_error_hint(&err, "hint " HOSTILE);
    hc_output_error(&c.o, &err, NULL);
    hc_output_info(&c.o, "node %s", HOSTILE);
    capture_sync(&c);
    assert_false(has_controls(c.err_buf));
    assert_non_null(strstr(c.err_buf, "agent said " HOSTILE_SHOWN "; hint: hint " HOSTILE_SHOWN));
    assert_non_null(strstr(c.err_buf, "node " HOSTILE_SHOWN "\n"));
    json_decref(doc);
    capture_close(&c);

    /* JSON stays data: jansson escapes every C0 control, and the document reads back as it was
     * (C1 and U+2028 stay as valid UTF-8: JSON, not a terminal, is the reader). */
    capture_open(&c);
    c.o.json = 1;
    doc = json_pack("{s:s}", "hostname", HOSTILE "\xc2\x9b\xe2\x80\xa8");
    hc_output_render(&c.o, NULL, doc);
    capture_sync(&c);
    assert_null(strchr(c.out_buf, '\x1b'));
    assert_null(strchr(c.out_buf, '\x07'));
    assert_non_null(strstr(c.out_buf, "\\u001B]0;pwned\\u0007\\u001B[2J"));
    json_t *back = json_loads(c.out_buf, 0, NULL);
    assert_true(json_equal(back, doc));
    json_decref(back);
    json_decref(doc);
    /* jansson never makes a string of invalid UTF-8, so none can reach the document. */
    assert_null(json_string("bad \xff\xfe utf-8"));
    assert_null(json_loads("{\"hostname\":\"\xc3\"}", 0, NULL));
    capture_close(&c);
}

static void test_utf8_width(void **state)
{
    (void)state;
    expect_iface_table("[{\"name\":\"n\\u00e9ud\",\"mtu\":1,\"state\":\"up\"},"
                       "{\"name\":\"nodes\",\"mtu\":2,\"state\":\"up\"}]",
                       0, "n\xc3\xa9ud   1    up\nnodes  2    up\n");
}

static void test_lookup(void **state)
{
    (void)state;
    json_t *doc = json_loads("{\"a\":{\"b\":{\"c\":7}},\"x\":1}", 0, NULL);
    assert_int_equal(json_integer_value(hc_output_lookup(doc, "a.b.c")), 7);
    assert_null(hc_output_lookup(doc, "a.x.c"));
    assert_null(hc_output_lookup(doc, "x.y"));
    assert_ptr_equal(hc_output_lookup(doc, NULL), doc);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_alignment),
        cmocka_unit_test(test_table_empty_prints_header),
        cmocka_unit_test(test_table_many_columns),
        cmocka_unit_test(test_table_stream_widths),
        cmocka_unit_test(test_table_color_keeps_alignment),
        cmocka_unit_test(test_fields_and_sections),
        cmocka_unit_test(test_json_mode_one_document),
        cmocka_unit_test(test_json_error_shape),
        cmocka_unit_test(test_text_error_stderr_only),
        cmocka_unit_test(test_quiet_info),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_relative_age),
        cmocka_unit_test(test_fmt_age_and_fallbacks),
        cmocka_unit_test(test_duration_text),
        cmocka_unit_test(test_fmt_text_values),
        cmocka_unit_test(test_cell_newlines_flattened),
        cmocka_unit_test(test_control_chars_escaped),
        cmocka_unit_test(test_utf8_width),
        cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
