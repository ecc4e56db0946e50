/*
 * Help beyond one command: the docs topics of `hcctl help TOPIC` (exit codes, settings,
 * output, durations, ...) and the man pages generated from the command tables (hidden
 * `hcctl __man`). Topics are written once here and appear in both `hcctl help` and hcctl(1).
 */
#ifndef HC_CLI_HELP_H
#define HC_CLI_HELP_H

#include <stdio.h>

#include "cli/cmd.h"

/* A docs topic. text: paragraphs separated by a blank line; a line that starts with two blanks
 * belongs to an indented block kept as written (tables, examples). */
struct hc_help_topic {
    const char *name;    /* "exit-codes"; NULL ends the table */
    const char *title;   /* man page section heading: "EXIT STATUS" */
    const char *summary; /* one line, lowercase, no full stop */
    const char *text;
};

extern const struct hc_help_topic hc_help_topics[];
const struct hc_help_topic *hc_help_topic_find(const char *name);

/* Writes the roff source of hcctl(1) (group NULL) or hcctl-GROUP(1) to f. */
void hc_man_page(FILE *f, const struct hc_cmd_group *const *groups,
                 const struct hc_cmd_group *group);

#endif
