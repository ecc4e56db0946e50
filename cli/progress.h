/*
 * Progress of an operation being followed (hc_cmd_op_wait), on stderr. Two forms:
 *
 * - live, on a terminal: a block of lines redrawn in place with ANSI cursor movement, one
 *   header line (operation, state, elapsed time, an estimate of the time left) and one line
 *   per node (its latest step, state, how long it took or has been running, and what it
 *   waits on or the step's detail);
 * - plain, anywhere else: one line per event: the operation's state/step/waiting line when it
 *   changes, and one line per step that ends.
 *
 * Data never goes through here: with -o json stdout still holds only the final document.
 */
#ifndef HC_CLI_PROGRESS_H
#define HC_CLI_PROGRESS_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

struct hc_progress;

/* live: redraw in place (the caller decided the stream is a terminal); width: the terminal's
 * columns (lines are cut to fit, so that cursor movement stays exact; 0: 80). start_ms: when
 * following began (wall clock), the elapsed time's origin when the operation has no
 * started_at. NULL when out of memory. Free with hc_progress_free. */
struct hc_progress *hc_progress_new(FILE *f, int live, int width, int64_t start_ms);
void hc_progress_free(struct hc_progress *p); /* accepts NULL */

/* Shows doc ({"operation":OP,"steps":[STEP...]}) as of now_ms (wall clock). */
void hc_progress_update(struct hc_progress *p, const json_t *doc, int64_t now_ms);

/* Something else was printed below a live frame ("retrying"): draw the next one afresh. */
void hc_progress_break(struct hc_progress *p);

/* Whether f is a terminal that can take cursor movement (TERM is set and not "dumb"), and its
 * width in columns (0 when unknown). */
int hc_progress_tty(FILE *f, int *width);

/* "op-1 running: step 'leave' on n2 (waiting on ...)": the plain line of an operation. */
void hc_progress_line(const json_t *op, char *buf, size_t len);

#endif
