/*
 * Rendering of command results: one JSON document with -o json, aligned tables and key/value
 * lists otherwise (see output.h for the rules on times and colors).
 */
#include "cli/output.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

#define CELL_MAX 1024

static const char *const color_codes[] = {"", "\033[31m", "\033[32m", "\033[33m"};

void hc_output_init(struct hc_output *o, FILE *out, FILE *err)
{
    memset(o, 0, sizeof(*o));
    o->out = out;
    o->err = err;
}

static int64_t output_now(const struct hc_output *o)
{
    return o->now_ms ? o->now_ms : hc_now_ms();
}

const json_t *hc_output_lookup(const json_t *doc, const char *path)
{
    if (!path)
        return doc;
    char part[128];
    const char *p = path;
    while (doc && *p) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        doc = json_is_object(doc) ? json_object_get(doc, part) : NULL;
        p += n;
        if (*p == '.')
            p++;
    }
    return doc;
}

/* Display width of UTF-8 text: code points (continuation bytes do not count). */
static int text_width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

int hc_output_parse_time(const char *text, int64_t *out_ms)
{
    struct tm tm = {0};
    int consumed = 0;
    if (!text || sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6)
        return -1;
    const char *p = text + consumed;
    int64_t frac_ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                frac_ms = frac_ms * 10 + (*p - '0');
        if (digits == 0)
            return -1;
        for (; digits < 3; digits++)
            frac_ms *= 10;
    }
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
        return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out_ms = (int64_t)timegm(&tm) * 1000 + frac_ms;
    return 0;
}

/* Largest whole unit of a span: "12s", "5m", "3h", "2d". */
static void span_text(int64_t ms, char *buf, size_t len)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, len, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, len, "%lldm", (long long)(s / 60));
    else if (s < 86400)
        snprintf(buf, len, "%lldh", (long long)(s / 3600));
    else
        snprintf(buf, len, "%lldd", (long long)(s / 86400));
}

void hc_output_age(int64_t now_ms, int64_t t_ms, char *buf, size_t len)
{
    char span[32];
    if (t_ms > now_ms) {
        span_text(t_ms - now_ms, span, sizeof(span));
        snprintf(buf, len, "in %s", span);
    } else {
        span_text(now_ms - t_ms, span, sizeof(span));
        snprintf(buf, len, "%s ago", span);
    }
}

void hc_output_duration(int64_t seconds, char *buf, size_t len)
{
    static const struct {
        int64_t secs;
        char unit;
    } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
    if (seconds < 0)
        seconds = 0;
    for (size_t i = 0; i < HC_ARRAY_LEN(units); i++) {
        if (seconds < units[i].secs && units[i].secs > 1)
            continue;
        int64_t major = seconds / units[i].secs;
        int64_t rest =
            i + 1 < HC_ARRAY_LEN(units) ? (seconds % units[i].secs) / units[i + 1].secs : 0;
        if (rest)
            snprintf(buf, len, "%lld%c%lld%c", (long long)major, units[i].unit, (long long)rest,
                     units[i + 1].unit);
        else
            snprintf(buf, len, "%lld%c", (long long)major, units[i].unit);
        return;
    }
}

/* Array of scalars joined by ","; other arrays and objects as compact JSON. */
static void text_compound(const json_t *v, char *buf, size_t len)
{
    if (json_is_array(v)) {
        size_t i, used = 0;
        json_t *item;
        buf[0] = '\0';
        json_array_foreach(v, i, item)
        {
            char one[CELL_MAX];
            enum hc_color unused;
            hc_fmt_text(NULL, item, one, sizeof(one), &unused);
            if (used >= len)
                break;
            used += snprintf(buf + used, len - used, "%s%s", i ? "," : "", one);
        }
        if (json_array_size(v) == 0)
            snprintf(buf, len, "-");
        return;
    }
    char *dump = json_dumps(v, JSON_COMPACT);
    snprintf(buf, len, "%s", dump ? dump : "-");
    free(dump);
}

void hc_fmt_text(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                 enum hc_color *color)
{
    (void)o;
    *color = HC_COLOR_NONE;
    if (!v || json_is_null(v))
        snprintf(buf, len, "-");
    else if (json_is_string(v))
        snprintf(buf, len, "%s", json_string_length(v) ? json_string_value(v) : "-");
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, len, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
    else
        text_compound(v, buf, len);
}

void hc_fmt_age(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                enum hc_color *color)
{
    int64_t t;
    if (!json_is_string(v) || hc_output_parse_time(json_string_value(v), &t) < 0) {
        hc_fmt_text(o, v, buf, len, color);
        return;
    }
    *color = HC_COLOR_NONE;
    hc_output_age(output_now(o), t, buf, len);
}

void hc_fmt_time(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                 enum hc_color *color)
{
    int64_t t;
    if (!json_is_string(v) || hc_output_parse_time(json_string_value(v), &t) < 0) {
        hc_fmt_text(o, v, buf, len, color);
        return;
    }
    char age[32];
    *color = HC_COLOR_NONE;
    hc_output_age(output_now(o), t, age, sizeof(age));
    snprintf(buf, len, "%s (%s)", json_string_value(v), age);
}

void hc_fmt_seconds(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                    enum hc_color *color)
{
    if (!json_is_integer(v)) {
        hc_fmt_text(o, v, buf, len, color);
        return;
    }
    *color = HC_COLOR_NONE;
    hc_output_duration(json_integer_value(v), buf, len);
}

void hc_fmt_ms(const struct hc_output *o, const json_t *v, char *buf, size_t len,
               enum hc_color *color)
{
    hc_fmt_text(o, v, buf, len, color);
    if (json_is_integer(v))
        snprintf(buf, len, "%lldms", (long long)json_integer_value(v));
}

/* Picks a color from a word list: the value's text is matched exactly. */
static enum hc_color color_of(const char *text, const char *const *red, const char *const *green,
                              const char *const *yellow)
{
    const char *const *lists[] = {red, green, yellow};
    const enum hc_color colors[] = {HC_COLOR_RED, HC_COLOR_GREEN, HC_COLOR_YELLOW};
    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; lists[l] && lists[l][i]; i++)
            if (strcmp(text, lists[l][i]) == 0)
                return colors[l];
    return HC_COLOR_NONE;
}

void hc_fmt_health(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                   enum hc_color *color)
{
    static const char *const red[] = {"unreachable", "stalled", "unhealthy", NULL};
    static const char *const green[] = {"reachable", "healthy", "ok", NULL};
    static const char *const yellow[] = {"unknown", NULL};
    hc_fmt_text(o, v, buf, len, color);
    *color = color_of(buf, red, green, yellow);
}

void hc_fmt_state(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                  enum hc_color *color)
{
    static const char *const red[] = {"failed", "aborted", NULL};
    static const char *const green[] = {"succeeded", NULL};
    static const char *const yellow[] = {"paused", NULL};
    hc_fmt_text(o, v, buf, len, color);
    *color = color_of(buf, red, green, yellow);
}

void hc_fmt_error(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                  enum hc_color *color)
{
    const char *code = json_string_value(json_object_get(v, "code"));
    const char *message = json_string_value(json_object_get(v, "message"));
    if (!code || !message) {
        hc_fmt_text(o, v, buf, len, color);
        return;
    }
    snprintf(buf, len, "%s: %s", code, message);
    *color = HC_COLOR_RED;
}

/* Code points a terminal acts on rather than shows: C0 and DEL, C1 (U+0080..U+009F, which
 * some terminals take as CSI and the like), the line and paragraph separators, and the bidi
 * overrides and isolates that reorder what is displayed. */
static int cp_hostile(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

char *hc_output_sanitize(const char *text, int flatten)
{
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    /* Worst case: every byte becomes "\xNN" (4 bytes). */
    char *out = malloc(4 * strlen((const char *)s) + 1), *w = out;
    if (!out)
        return NULL;
    while (*s) {
        uint32_t cp = 0;
        size_t n = hc_utf8_seq(s, &cp);
        if (n == 0) {
            w += sprintf(w, "\\x%02x", *s); /* not UTF-8: a raw 0x9b would be CSI in Latin-1 */
            s++;
        } else if (flatten && (cp == '\n' || cp == '\t')) {
            *w++ = ' '; /* one cell is one line: a newline would break the table */
            s++;
        } else if (cp_hostile(cp)) {
            w += cp < 0x80 ? sprintf(w, "\\x%02x", (unsigned)cp)
                           : sprintf(w, "\\u%04x", (unsigned)cp);
            s += n;
        } else {
            memcpy(w, s, n);
            w += n;
            s += n;
        }
    }
    *w = '\0';
    return out;
}

static char *cell_text(const struct hc_output *o, const struct hc_col *col, const json_t *row,
                       enum hc_color *color)
{
    char buf[CELL_MAX];
    hc_fmt_fn fmt = col->fmt ? col->fmt : hc_fmt_text;
    fmt(o, hc_output_lookup(row, col->key), buf, sizeof(buf), color);
    /* Values come from agents too: a hostname may carry escape sequences. */
    return hc_output_sanitize(buf, 1);
}

static void put_colored(const struct hc_output *o, const char *text, enum hc_color color)
{
    if (o->color && color != HC_COLOR_NONE)
        fprintf(o->out, "%s%s\033[0m", color_codes[color], text);
    else
        fputs(text, o->out);
}

/* Writes a cell padded to width plus the column gap; the last column gets no padding, so no
 * line ends in blanks. */
static void put_cell(const struct hc_output *o, const char *text, enum hc_color color, int width,
                     int last)
{
    put_colored(o, text, color);
    if (!last)
        fprintf(o->out, "%*s", width - text_width(text) + 2, "");
}

static size_t count_cols(const struct hc_col *cols)
{
    size_t n = 0;
    while (cols[n].header)
        n++;
    return n;
}

int hc_output_table(struct hc_output *o, const struct hc_col *cols, const json_t *rows, int *widths,
                    int header)
{
    size_t ncols = count_cols(cols), nrows = json_array_size(rows);
    int rc = -1;
    int *local = widths ? NULL : calloc(ncols + 1, sizeof(*local));
    int *w = widths ? widths : local;
    char **cells = calloc(nrows * ncols + 1, sizeof(*cells));
    enum hc_color *colors = calloc(nrows * ncols + 1, sizeof(*colors));
    if (!w || !cells || !colors) {
        /* never nothing: a table that cannot be drawn says so */
        fprintf(o->err,
                "hcctl: error: cannot draw a table of %zu row(s) and %zu column(s): out of "
                "memory\n",
                nrows, ncols);
        goto cleanup;
    }
    for (size_t c = 0; c < ncols; c++)
        if (w[c] < text_width(cols[c].header))
            w[c] = text_width(cols[c].header);
    for (size_t r = 0; r < nrows; r++)
        for (size_t c = 0; c < ncols; c++) {
            char *t = cell_text(o, &cols[c], json_array_get(rows, r), &colors[r * ncols + c]);
            cells[r * ncols + c] = t ? t : strdup("");
            if (cells[r * ncols + c] && w[c] < text_width(cells[r * ncols + c]))
                w[c] = text_width(cells[r * ncols + c]);
        }
    for (size_t c = 0; header && c < ncols; c++)
        put_cell(o, cols[c].header, HC_COLOR_NONE, w[c], c + 1 == ncols);
    if (header)
        fputc('\n', o->out);
    for (size_t r = 0; r < nrows; r++) {
        for (size_t c = 0; c < ncols; c++)
            put_cell(o, cells[r * ncols + c] ? cells[r * ncols + c] : "", colors[r * ncols + c],
                     w[c], c + 1 == ncols);
        fputc('\n', o->out);
    }
    rc = 0;
cleanup:
    for (size_t i = 0; cells && i < nrows * ncols; i++)
        free(cells[i]);
    free(cells);
    free(colors);
    free(local);
    return rc;
}

/* "Label:" lines with the values aligned one column after the longest label. */
static void render_fields(struct hc_output *o, const struct hc_col *cols, const json_t *obj)
{
    int width = 0;
    for (size_t c = 0; cols[c].header; c++)
        if (width < text_width(cols[c].header))
            width = text_width(cols[c].header);
    for (size_t c = 0; cols[c].header; c++) {
        enum hc_color color;
        char *text = cell_text(o, &cols[c], obj, &color);
        fprintf(o->out, "%s:%*s", cols[c].header, width - text_width(cols[c].header) + 1, "");
        put_colored(o, text ? text : "", color);
        fputc('\n', o->out);
        free(text);
    }
}

int hc_output_render(struct hc_output *o, const struct hc_section *view, const json_t *doc)
{
    if (o->json) {
        hc_output_json(o, doc);
        return 0;
    }
    for (size_t s = 0; view && view[s].cols; s++) {
        const json_t *part = hc_output_lookup(doc, view[s].path);
        if (s > 0)
            fputc('\n', o->out);
        if (view[s].title)
            fprintf(o->out, "%s:\n", view[s].title);
        if (view[s].kind == HC_SECTION_TABLE)
            hc_output_table(o, view[s].cols, json_is_array(part) ? part : NULL, NULL, 1);
        else
            render_fields(o, view[s].cols, part);
    }
    o->documents++;
    return 0;
}

void hc_output_json(struct hc_output *o, const json_t *doc)
{
    json_dumpf(doc, o->out, o->stream ? JSON_COMPACT : JSON_INDENT(2));
    fputc('\n', o->out);
    fflush(o->out);
    o->documents++;
}

void hc_output_error(struct hc_output *o, const struct hc_error *err, const json_t *extra)
{
    fflush(o->out);
    /* One line, so that a script's log keeps the error and what to do together; an agent's
     * words relayed in it are shown, never obeyed by the terminal. */
    char *message = hc_output_sanitize(err->message[0] ? err->message : "unknown error", 1);
    char *hint = hc_output_sanitize(err->hint, 1);
    fprintf(o->err, "hcctl: error: %s%s%s\n", message ? message : "unknown error",
            err->hint[0] ? "; hint: " : "", hint ? hint : "");
    free(message);
    free(hint);
    if (!o->json || (o->documents > 0 && !o->stream))
        return;
    json_t *doc = hc_error_to_json(err);
    if (doc && json_is_object(extra))
        json_object_update_missing(doc, (json_t *)extra);
    if (doc)
        hc_output_json(o, doc);
    json_decref(doc);
}

void hc_output_info(const struct hc_output *o, const char *fmt, ...)
{
    if (o->quiet)
        return;
    va_list ap;
    char buf[4096];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *text = hc_output_sanitize(buf, 0); /* chatter may be several lines */
    fputs(text ? text : buf, o->err);
    free(text);
    fputc('\n', o->err);
    fflush(o->err);
}
