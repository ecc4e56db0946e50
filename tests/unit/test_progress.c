/*
 * Unit tests of the progress display of followed operations (cli/progress.c): plain event lines
 * (one per change of the operation, one per step that ends, nothing twice, not the end itself),
 * and the live frame (one row per node with its latest step, elapsed time and estimate in the
 * header, cursor movement that redraws in place, rows cut to the terminal width, long node
 * lists summed up).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/progress.h"

#define T0 1764442476000LL /* 2025-11-29T18:54:36.000Z */

static char *rfc(int64_t ms, char *buf)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
    return buf;
}

/* A step: started at T0 + start s, finished at T0 + end s (end < 0: still running). */
static json_t *step(int seq, const char *node, const char *name, const char *state, int start,
                    int end, const char *detail)
{
    char a[32], b[32];
    return json_pack("{s:i, s:s, s:s, s:s, s:i, s:s, s:s?, s:s?}", "seq", seq, "node", node, "step",
                     name, "state", state, "attempts", 1, "started_at", rfc(T0 + start * 1000LL, a),
                     "finished_at", end >= 0 ? rfc(T0 + end * 1000LL, b) : NULL, "detail", detail);
}

static json_t *doc(const char *state, const char *node, const char *stepname, const char *waiting,
                   json_t *steps, json_t *params)
{
    char a[32];
    return json_pack("{s:{s:s, s:s, s:s, s:o, s:{s:s?, s:s?}, s:s?, s:s}, s:o}", "operation", "id",
                     "op-1", "kind", "rolling.upgrade", "state", state, "params",
                     params ? params : json_object(), "progress", "node", node, "step", stepname,
                     "waiting_on", waiting, "started_at", rfc(T0, a), "steps", steps);
}

struct capture {
    char *text;
    size_t len;
    FILE *f;
};

static void cap_open(struct capture *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
}

/* What was written since the last call. */
static char *cap_take(struct capture *c, size_t *from)
{
    fflush(c->f);
    char *part = strndup(c->text + *from, c->len - *from);
    *from = c->len;
    return part;
}

static void test_plain(void **state)
{
    (void)state;
    struct capture c;
    size_t at = 0;
    cap_open(&c);
    struct hc_progress *p = hc_progress_new(c.f, 0, 80, T0);
    json_t *d1 = doc("running", "n1", "stage", "agent n1 to answer",
                     json_pack("[o]", step(1, "n1", "stage", "running", 0, -1, NULL)), NULL);
    hc_progress_update(p, d1, T0 + 1000);
    char *out = cap_take(&c, &at);
    assert_string_equal(out, "op-1 running: step 'stage' on n1 (waiting on agent n1 to answer)\n");
    free(out);
    hc_progress_update(p, d1, T0 + 2000); /* nothing changed: nothing printed */
    out = cap_take(&c, &at);
    assert_string_equal(out, "");
    free(out);
    json_t *d2 = doc("running", "n2", "stage", NULL,
                     json_pack("[o,o]", step(1, "n1", "stage", "succeeded", 0, 2, "staged 1.1"),
                               step(2, "n2", "stage", "running", 2, -1, NULL)),
                     NULL);
    hc_progress_update(p, d2, T0 + 3000);
    out = cap_take(&c, &at);
    assert_string_equal(out, "op-1: n1: step 'stage' succeeded after 2s: staged 1.1\n"
                             "op-1 running: step 'stage' on n2\n");
    free(out);
    json_t *d3 = doc("succeeded", "n2", "stage", NULL,
                     json_pack("[o,o]", step(1, "n1", "stage", "succeeded", 0, 2, "staged 1.1"),
                               step(2, "n2", "stage", "failed", 2, 65, "no space")),
                     NULL);
    hc_progress_update(p, d3, T0 + 66000);
    out = cap_take(&c, &at);
    /* each step's end once; the operation's own end is the caller's to report */
    assert_string_equal(out, "op-1: n2: step 'stage' failed after 1m3s: no space\n");
    free(out);
    assert_null(strchr(c.text, '\033'));
    json_decref(d1);
    json_decref(d2);
    json_decref(d3);
    hc_progress_free(p);
    fclose(c.f);
    free(c.text);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static void test_live(void **state)
{
    (void)state;
    struct capture c;
    size_t at = 0;
    cap_open(&c);
    struct hc_progress *p = hc_progress_new(c.f, 1, 100, T0);
    json_t *params = json_pack("{s:[s,s,s,s]}", "nodes", "n1", "n2", "n3", "n4");
    json_t *d1 = doc("running", "n1", "activate", "agent n1 to report healthy",
                     json_pack("[o,o]", step(1, "n1", "stage", "succeeded", 0, 1, "staged"),
                               step(2, "n1", "activate", "running", 1, -1, NULL)),
                     json_incref(params));
    hc_progress_update(p, d1, T0 + 10000);
    char *f1 = cap_take(&c, &at);
    /* the first frame: no cursor movement up; header and one row for n1 (its latest step) */
    assert_null(strstr(f1, "\033[2A"));
    assert_non_null(
        strstr(f1, "\r\033[2Kop-1 rolling.upgrade running  elapsed 10s  (0/4 nodes done)\n"));
    assert_non_null(strstr(f1, "n1    activate  running        9s  waiting on agent n1 to report"));
    assert_null(strstr(f1, "stage"));
    assert_int_equal(count(f1, "\n"), 2);
    free(f1);
    json_t *d2 = doc("running", "n3", "activate", NULL,
                     json_pack("[o,o,o,o,o,o]", step(1, "n1", "stage", "succeeded", 0, 1, NULL),
                               step(2, "n1", "activate", "succeeded", 1, 10, "1.1 healthy"),
                               step(3, "n2", "stage", "succeeded", 10, 11, NULL),
                               step(4, "n2", "activate", "succeeded", 11, 20, "1.1 healthy"),
                               step(5, "n3", "stage", "succeeded", 20, 21, NULL),
                               step(6, "n3", "activate", "running", 21, -1, NULL)),
                     json_incref(params));
    hc_progress_update(p, d2, T0 + 30000);
    char *f2 = cap_take(&c, &at);
    /* back up over the 2 lines drawn before, redraw, clear what is left below */
    assert_true(strncmp(f2, "\033[2A", 4) == 0);
    assert_non_null(strstr(f2, "\033[J"));
    /* 2 nodes done in 30 s, 2 to go: about 30 s left */
    assert_non_null(strstr(f2, "elapsed 30s  about 30s left  (2/4 nodes done)"));
    assert_non_null(strstr(f2, "n2    activate  succeeded      9s  1.1 healthy"));
    assert_int_equal(count(f2, "\n"), 4);
    free(f2);
    /* a narrow terminal: no line wraps, every row is cut to the width */
    struct capture narrow;
    size_t nat = 0;
    cap_open(&narrow);
    struct hc_progress *np = hc_progress_new(narrow.f, 1, 30, T0);
    hc_progress_update(np, d2, T0 + 30000);
    free(cap_take(&narrow, &nat));
    int lines = 0;
    for (char *line = strtok(narrow.text, "\n"); line; line = strtok(NULL, "\n")) {
        char *start = strstr(line, "\033[2K");
        if (start && ++lines && strlen(start + 4) >= 30)
            fail_msg("line longer than the terminal: '%s'", start + 4);
    }
    assert_int_equal(lines, 4);
    hc_progress_free(np);
    fclose(narrow.f);
    free(narrow.text);
    json_decref(d1);
    json_decref(d2);
    json_decref(params);
    hc_progress_free(p);
    fclose(c.f);
    free(c.text);
}

static void test_live_many_nodes(void **state)
{
    (void)state;
    struct capture c;
    size_t at = 0;
    cap_open(&c);
    struct hc_progress *p = hc_progress_new(c.f, 1, 100, T0);
    json_t *steps = json_array();
    char name[16];
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "node%02d", i);
        json_array_append_new(steps, step(i + 1, name, "stage", i < 29 ? "succeeded" : "running", i,
                                          i < 29 ? i + 1 : -1, NULL));
    }
    json_t *d = doc("running", "node29", "stage", NULL, steps, NULL);
    hc_progress_update(p, d, T0 + 40000);
    char *f = cap_take(&c, &at);
    /* at most 20 node rows: the latest ones, the rest summed up */
    assert_non_null(strstr(f, "... 11 earlier nodes"));
    assert_null(strstr(f, "node10 "));
    assert_non_null(strstr(f, "node11 "));
    assert_non_null(strstr(f, "node29 "));
    assert_int_equal(count(f, "\n"), 21);
    free(f);
    /* something printed below the frame: the next one does not move up over it */
    hc_progress_break(p);
    hc_progress_update(p, d, T0 + 41000);
    f = cap_take(&c, &at);
    assert_null(strstr(f, "\033[21A"));
    free(f);
    json_decref(d);
    hc_progress_free(p);
    fclose(c.f);
    free(c.text);
}

static void test_line_and_tty(void **state)
{
    (void)state;
    char buf[256];
    json_t *op = json_pack("{s:s, s:s, s:n, s:n}", "id", "op-2", "state", "pending", "progress",
                           "waiting_on");
    hc_progress_line(op, buf, sizeof(buf));
    assert_string_equal(buf, "op-2 pending");
    json_decref(op);
    /* a memory stream is no terminal */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int width = -1;
    assert_int_equal(hc_progress_tty(f, &width), 0);
    assert_int_equal(width, 0);
    fclose(f);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_live),
        cmocka_unit_test(test_live_many_nodes),
        cmocka_unit_test(test_line_and_tty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
