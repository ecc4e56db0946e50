/*
 * hcctl's output layer. A command builds one jansson document and hands it, with a view that
 * says how to show it as text, to hc_output_render: with -o json the document itself is printed
 * (exactly one JSON document on stdout), otherwise the view's sections are rendered as aligned
 * tables and key/value lists. The text and the JSON come from the same document, so the two
 * never drift (the iproute2 json_print habit).
 *
 * Times: table cells show the age relative to now ("12s ago"); key/value fields show the RFC
 * 3339 time as sent by the controller followed by the age ("2026-...Z (12s ago)"). The event
 * log shows raw RFC 3339 times (hc_fmt_text): a streamed log line must not carry an age that is
 * stale a second later.
 */
#ifndef HC_CLI_OUTPUT_H
#define HC_CLI_OUTPUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

enum hc_color { HC_COLOR_NONE = 0, HC_COLOR_RED, HC_COLOR_GREEN, HC_COLOR_YELLOW };

struct hc_output {
    FILE *out;      /* data: stdout */
    FILE *err;      /* chatter, progress and errors: stderr */
    int json;       /* -o json */
    int color;      /* ANSI colors in text output (a TTY, no --no-color, no NO_COLOR) */
    int quiet;      /* -q: no chatter */
    int64_t now_ms; /* reference for ages; 0 = the wall clock (tests pin it) */
    int documents;  /* JSON documents written to out so far */
    int stream;     /* JSON Lines mode (events --follow): one compact document per line */
};

/* Formats cell or field value v (NULL when the key is absent) into buf; may pick a color. */
typedef void (*hc_fmt_fn)(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                          enum hc_color *color);

/* A table column or a key/value field: header (or label), the key in the row object (a dotted
 * path such as "nodes.total" reaches into nested objects), and a formatter (NULL: hc_fmt_text). */
struct hc_col {
    const char *header;
    const char *key;
    hc_fmt_fn fmt;
};

enum hc_section_kind { HC_SECTION_FIELDS, HC_SECTION_TABLE };

/* One part of a text view. A view is an array of sections ended by one with cols == NULL. */
struct hc_section {
    enum hc_section_kind kind;
    const char *title;         /* line printed above the section ("Interfaces:"), or NULL */
    const char *path;          /* dotted path of the section's data in the document; NULL: root.
                                  FIELDS: an object; TABLE: an array of objects */
    const struct hc_col *cols; /* ended by an entry with header == NULL */
};

/* Sets streams and defaults (text, no color, not quiet, wall clock). */
void hc_output_init(struct hc_output *o, FILE *out, FILE *err);

/* Prints doc: as JSON when o->json, else through view. Returns 0. doc is borrowed. */
int hc_output_render(struct hc_output *o, const struct hc_section *view, const json_t *doc);
/* Prints doc as one JSON document (pretty, indent 2; compact in stream mode). */
void hc_output_json(struct hc_output *o, const json_t *doc);
/* Prints a table of rows (array of objects), of any number of columns. widths (one int per
 * column, may be NULL) keeps the column widths across calls so that a followed stream stays
 * aligned; header: print it. Returns 0, or -1 after saying on o->err that the table could not be
 * drawn (out of memory): never silently nothing. */
int hc_output_table(struct hc_output *o, const struct hc_col *cols, const json_t *rows, int *widths,
                    int header);

/* Reports err: "hcctl: error: MESSAGE" and "hint: HINT" on stderr; with -o json also the JSON
 * error shape on stdout, merged with extra (borrowed, may be NULL) — unless a document was
 * already printed (one document per command), except in stream mode. */
void hc_output_error(struct hc_output *o, const struct hc_error *err, const json_t *extra);
/* Chatter/progress to stderr unless quiet. */
void hc_output_info(const struct hc_output *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Text safe for a terminal (new string, caller frees; NULL when out of memory): C0 controls,
 * DEL and invalid UTF-8 bytes become "\x1b"-style escapes, C1 controls, U+2028/U+2029 and bidi
 * overrides "\u009b"-style ones; with flatten, newlines and tabs become spaces. Every table
 * cell, field, error and info line goes through it; JSON output does not need it (jansson
 * escapes controls, and its strings are valid UTF-8). */
char *hc_output_sanitize(const char *text, int flatten);

/* Looks up a dotted path ("cluster.name") in an object; NULL when absent. */
const json_t *hc_output_lookup(const json_t *doc, const char *path);

/* Parses an RFC 3339 UTC time ("2026-11-29T18:54:36.123Z", fraction optional, "Z" or
 * "+00:00"). Returns 0 and epoch milliseconds, or -1. */
int hc_output_parse_time(const char *text, int64_t *out_ms);
/* Age of t relative to now: "12s ago", "5m ago", "3h ago", "2d ago"; future: "in 5m". */
void hc_output_age(int64_t now_ms, int64_t t_ms, char *buf, size_t len);
/* Duration in seconds as "45s", "12m", "3h12m", "4d3h". */
void hc_output_duration(int64_t seconds, char *buf, size_t len);

/* Formatters for columns and fields. Absent or null values print as "-". */
void hc_fmt_text(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                 enum hc_color *color); /* strings as-is, numbers, yes/no, lists joined by "," */
void hc_fmt_age(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                enum hc_color *color); /* RFC 3339 -> "12s ago" */
void hc_fmt_time(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                 enum hc_color *color); /* RFC 3339 -> "2026-...Z (12s ago)" */
void hc_fmt_seconds(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                    enum hc_color *color); /* 11520 -> "3h12m" */
void hc_fmt_ms(const struct hc_output *o, const json_t *v, char *buf, size_t len,
               enum hc_color *color); /* 12 -> "12ms" */
void hc_fmt_health(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                   enum hc_color *color); /* reachable green, unreachable/stalled red */
void hc_fmt_state(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                  enum hc_color *color); /* succeeded green, failed/aborted red, paused yellow */
void hc_fmt_error(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                  enum hc_color *color); /* {"code","message"} -> "code: message" in red */

#endif
