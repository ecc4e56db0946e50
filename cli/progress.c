/*
 * Progress of a followed operation (see progress.h): per-node rows from the operation's steps,
 * drawn in place on a terminal or as plain event lines elsewhere.
 */
#include "cli/progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/output.h"
#include "common/json_util.h"
#include "common/op_state.h"
#include "common/util.h"

#define PROGRESS_MAX_ROWS 20 /* node rows in a live frame; older ones are summed up */
#define PROGRESS_LINE 512

struct hc_progress {
    FILE *f;
    int live;
    int width;
    int64_t start_ms;
    int lines; /* lines of the last live frame (where the cursor goes back to) */
    char last_op[PROGRESS_LINE];
    json_t *reported; /* plain: "SEQ" of the steps whose end was printed */
};

/* One node's row: its latest step. */
struct row {
    const char *node, *step, *state, *detail;
    int64_t seq, started_ms, finished_ms; /* 0: unknown */
};

struct hc_progress *hc_progress_new(FILE *f, int live, int width, int64_t start_ms)
{
    struct hc_progress *p = calloc(1, sizeof(*p));
    if (!p || !(p->reported = json_object())) {
        free(p);
        return NULL;
    }
    p->f = f;
    p->live = live;
    p->width = width > 20 ? width : 80;
    p->start_ms = start_ms;
    return p;
}

void hc_progress_free(struct hc_progress *p)
{
    if (!p)
        return;
    json_decref(p->reported);
    free(p);
}

void hc_progress_break(struct hc_progress *p)
{
    if (p)
        p->lines = 0;
}

int hc_progress_tty(FILE *f, int *width)
{
    const char *term = getenv("TERM");
    struct winsize ws;
    int fd = fileno(f);
    *width = 0;
    if (fd < 0 || !isatty(fd) || !term || !term[0] || strcmp(term, "dumb") == 0)
        return 0;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0)
        *width = ws.ws_col;
    return 1;
}

static int64_t time_of(const json_t *obj, const char *key)
{
    int64_t ms = 0;
    const char *text = hc_json_str(obj, key, NULL);
    return text && hc_output_parse_time(text, &ms) == 0 ? ms : 0;
}

void hc_progress_line(const json_t *op, char *buf, size_t len)
{
    const json_t *progress = json_object_get(op, "progress");
    const char *step = hc_json_str(progress, "step", NULL),
               *node = hc_json_str(progress, "node", NULL);
    const char *waiting = hc_json_str(op, "waiting_on", NULL);
    char where[300] = "";
    if (step)
        snprintf(where, sizeof(where), ": step '%s'%s%s", step, node ? " on " : "",
                 node ? node : "");
    snprintf(buf, len, "%s %s%s%s%s%s", hc_json_str(op, "id", "?"), hc_json_str(op, "state", "?"),
             where, waiting ? " (waiting on " : "", waiting ? waiting : "", waiting ? ")" : "");
}

/* The latest step of every node, in the order the nodes started. Returns the row count. */
static size_t node_rows(const json_t *steps, struct row *rows, size_t cap)
{
    size_t n = 0, i;
    const json_t *s;
    json_array_foreach(steps, i, s)
    {
        const char *node = hc_json_str(s, "node", "-");
        size_t r = 0;
        while (r < n && strcmp(rows[r].node, node) != 0)
            r++;
        if (r == n && n == cap)
            continue;
        int64_t seq = hc_json_int(s, "seq", (int64_t)i);
        if (r < n && rows[r].seq > seq)
            continue;
        rows[r] = (struct row){node,
                               hc_json_str(s, "step", "?"),
                               hc_json_str(s, "state", "?"),
                               hc_json_str(s, "detail", NULL),
                               seq,
                               time_of(s, "started_at"),
                               time_of(s, "finished_at")};
        if (r == n)
            n++;
    }
    return n;
}

static void span(int64_t ms, char *buf, size_t len)
{
    hc_output_duration(ms > 0 ? ms / 1000 : 0, buf, len);
}

/* Nodes planned: those named in the parameters ("nodes": [...]) or seen in the steps. */
static size_t planned_nodes(const json_t *op, size_t seen)
{
    const json_t *nodes = json_object_get(json_object_get(op, "params"), "nodes");
    size_t planned = json_is_array(nodes) ? json_array_size(nodes) : 0;
    return planned > seen ? planned : seen;
}

/* "op-1 rolling.upgrade running  elapsed 1m20s  about 2m left  (2/5 nodes done)". */
static void header(const json_t *op, const struct row *rows, size_t n, int64_t elapsed_ms,
                   char *buf, size_t len)
{
    const char *current = hc_json_str(json_object_get(op, "progress"), "node", NULL);
    size_t done = 0, total = planned_nodes(op, n);
    char took[32], left[64] = "", count[48] = "";
    /* the node being worked on is not done until the operation ends, whatever its last step */
    if (hc_op_step_terminal(hc_json_str(op, "state", "")))
        current = NULL;
    for (size_t i = 0; i < n; i++)
        done += strcmp(rows[i].state, "succeeded") == 0 &&
                !(current && strcmp(current, rows[i].node) == 0);
    span(elapsed_ms, took, sizeof(took));
    if (done > 0 && total > done && !hc_op_step_terminal(hc_json_str(op, "state", ""))) {
        char eta[32];
        span(elapsed_ms / (int64_t)done * (int64_t)(total - done), eta, sizeof(eta));
        snprintf(left, sizeof(left), "  about %s left", eta);
    }
    if (total > 0)
        snprintf(count, sizeof(count), "  (%zu/%zu nodes done)", done, total);
    snprintf(buf, len, "%s %s %s  elapsed %s%s%s", hc_json_str(op, "id", "?"),
             hc_json_str(op, "kind", "?"), hc_json_str(op, "state", "?"), took, left, count);
}

static void row_text(const json_t *op, const struct row *r, int wnode, int wstep, int64_t now_ms,
                     char *buf, size_t len)
{
    const char *current = hc_json_str(json_object_get(op, "progress"), "node", NULL);
    const char *waiting = hc_json_str(op, "waiting_on", NULL);
    char took[32] = "-", note[300] = "";
    if (r->started_ms)
        span((r->finished_ms ? r->finished_ms : now_ms) - r->started_ms, took, sizeof(took));
    if (waiting && current && strcmp(current, r->node) == 0 && !hc_op_step_terminal(r->state))
        snprintf(note, sizeof(note), "waiting on %s", waiting);
    else if (r->detail)
        snprintf(note, sizeof(note), "%s", r->detail);
    snprintf(buf, len, "  %-*s  %-*s  %-9s  %6s  %s", wnode, r->node, wstep, r->step, r->state,
             took, note);
}

/* Cuts text to fit width-1 columns (UTF-8 aware) so that no line wraps. */
static void cut(char *text, int width)
{
    int cols = 0;
    for (char *p = text; *p; p++) {
        if (((unsigned char)*p & 0xC0) != 0x80 && ++cols >= width) {
            *p = '\0';
            return;
        }
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    }
}

static void draw(struct hc_progress *p, char lines[][PROGRESS_LINE], int n)
{
    if (p->lines > 0)
        fprintf(p->f, "\033[%dA", p->lines);
    for (int i = 0; i < n; i++) {
        cut(lines[i], p->width);
        fprintf(p->f, "\r\033[2K%s\n", lines[i]);
    }
    fputs("\033[J", p->f); /* a shorter frame than the last one leaves no stale line */
    fflush(p->f);
    p->lines = n;
}

static void update_live(struct hc_progress *p, const json_t *op, const struct row *rows, size_t n,
                        int64_t elapsed_ms, int64_t now_ms)
{
    static char lines[PROGRESS_MAX_ROWS + 2][PROGRESS_LINE];
    size_t first = n > PROGRESS_MAX_ROWS ? n - (PROGRESS_MAX_ROWS - 1) : 0;
    int wnode = 4, wstep = 4, k = 0;
    for (size_t i = first; i < n; i++) {
        if ((int)strlen(rows[i].node) > wnode)
            wnode = (int)strlen(rows[i].node);
        if ((int)strlen(rows[i].step) > wstep)
            wstep = (int)strlen(rows[i].step);
    }
    header(op, rows, n, elapsed_ms, lines[k++], PROGRESS_LINE);
    if (first > 0)
        snprintf(lines[k++], PROGRESS_LINE, "  ... %zu earlier node%s", first,
                 first == 1 ? "" : "s");
    for (size_t i = first; i < n; i++)
        row_text(op, &rows[i], wnode, wstep, now_ms, lines[k++], PROGRESS_LINE);
    draw(p, lines, k);
}

/* Plain: the operation's line when it changed, and each step that ended. */
static void update_plain(struct hc_progress *p, const json_t *op, const json_t *steps)
{
    char line[PROGRESS_LINE];
    const json_t *s;
    size_t i;
    json_array_foreach(steps, i, s)
    {
        char key[32], took[32] = "";
        const char *state = hc_json_str(s, "state", "?"), *detail = hc_json_str(s, "detail", NULL);
        int64_t start = time_of(s, "started_at"), end = time_of(s, "finished_at");
        snprintf(key, sizeof(key), "%lld", (long long)hc_json_int(s, "seq", (int64_t)i));
        if (!hc_op_step_terminal(state) || json_object_get(p->reported, key))
            continue;
        json_object_set_new(p->reported, key, json_true());
        if (start && end >= start)
            span(end - start, took, sizeof(took));
        fprintf(p->f, "%s: %s: step '%s' %s%s%s%s%s\n", hc_json_str(op, "id", "?"),
                hc_json_str(s, "node", "-"), hc_json_str(s, "step", "?"), state,
                took[0] ? " after " : "", took, detail ? ": " : "", detail ? detail : "");
    }
    hc_progress_line(op, line, sizeof(line));
    /* the end itself is reported by the caller ("operation op-1 (node.remove) succeeded") */
    if (strcmp(line, p->last_op) != 0 && !hc_op_step_terminal(hc_json_str(op, "state", "")))
        fprintf(p->f, "%s\n", line);
    snprintf(p->last_op, sizeof(p->last_op), "%s", line);
    fflush(p->f);
}

void hc_progress_update(struct hc_progress *p, const json_t *doc, int64_t now_ms)
{
    const json_t *op = json_object_get(doc, "operation"), *steps = json_object_get(doc, "steps");
    if (!p->live) {
        update_plain(p, op, steps);
        return;
    }
    size_t cap = json_array_size(steps) + 1;
    struct row *rows = calloc(cap, sizeof(*rows));
    if (!rows)
        return;
    size_t n = node_rows(steps, rows, cap);
    int64_t origin = time_of(op, "started_at");
    if (!origin)
        origin = p->start_ms;
    int64_t end = time_of(op, "finished_at");
    update_live(p, op, rows, n, (end ? end : now_ms) - origin, now_ms);
    free(rows);
}
