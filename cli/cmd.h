/*
 * hcctl on the command-line engine (common/cmdline.h, shared by the five programs). Every
 * command group is a file cli/cmd_<group>.c that ends with a table of verbs; options are data.
 * cmd.c parses the command line through the engine's walker: global options up to the group
 * word, the group, the verb, then the verb's options and positionals, checked against the
 * verb's min/max. Help, "did you mean", the hidden `self-test`, shell completion and man pages
 * all read the same tables, reachable through hc_cmd_groups (cli/groups.c) and
 * hc_cmd_global_opts. This header adds what is hcctl's own: its global options, the context
 * with the configuration, the API client and the output layer.
 *
 * Handlers receive a context, read options by name, build one JSON document and hand it to the
 * output layer; they return an exit code (cli/exit_codes.h). Errors are reported through
 * hc_cmd_fail so that text and JSON error output stay uniform.
 */
#ifndef HC_CLI_CMD_H
#define HC_CLI_CMD_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/config.h"
#include "cli/output.h"
#include "common/cmdline.h"
#include "common/error.h"

/* Every group, NULL-terminated: the one table parsing, help, self-test and completion read. */
extern const struct hc_cmd_group *const hc_cmd_groups[];
/* Global options (before the group word, and after the verb unless the verb has an option of
 * the same long name, which then wins). */
extern const struct hc_cmd_opt hc_cmd_global_opts[];

/* Streams and terminal facts; tests pass memory streams and pin the TTY answers. */
struct hc_cli_io {
    FILE *out, *err, *in;
    int out_tty, in_tty; /* -1: ask isatty() */
    int64_t now_ms;      /* 0: the wall clock */
};

struct hc_cli_globals {
    const char *controller, *token, *ca_file; /* flags; NULL when not given */
    int json, quiet, no_color, yes;
    int64_t timeout_ms; /* per request, --timeout (default 30s) */
};

struct hc_cmd_ctx {
    const struct hc_cmd_group *const *groups; /* the table being run (self-test reads it) */
    const struct hc_cmd_group *group;
    const struct hc_cmd_verb *verb;
    struct hc_cli_globals g;
    struct hc_output out;
    FILE *in;
    int in_tty;
    int argc; /* positional arguments after the verb */
    char **argv;
    struct hc_opt_val *vals; /* parallel to verb->opts */
    struct hc_cli_config config;
    int config_loaded;
    struct hc_api_client *api;
};

/* Runs one command line (argv[0] is the program). Returns the exit code. */
int hc_cli_main(const struct hc_cmd_group *const *groups, int argc, char **argv,
                const struct hc_cli_io *io);

/* Option values by long name; asking for a name the verb does not declare is a programming
 * error (abort). Unset options return their default ("def"), or NULL/0. */
int hc_cmd_opt_set(const struct hc_cmd_ctx *ctx, const char *name); /* given on the line */
int hc_cmd_opt_bool(const struct hc_cmd_ctx *ctx, const char *name);
const char *hc_cmd_opt_str(const struct hc_cmd_ctx *ctx, const char *name);
int64_t hc_cmd_opt_int(const struct hc_cmd_ctx *ctx, const char *name);
int64_t hc_cmd_opt_ms(const struct hc_cmd_ctx *ctx, const char *name); /* durations */
/* Every value of a repeatable option, in command-line order; *n receives the count. The array
 * belongs to ctx. */
const char *const *hc_cmd_opt_list(const struct hc_cmd_ctx *ctx, const char *name, size_t *n);

/* The resolved configuration (loaded on first use). NULL with err for a broken config file. */
const struct hc_cli_config *hc_cmd_config(struct hc_cmd_ctx *ctx, struct hc_error *err);
/* The API client (created on first use). NULL with err. Owned by ctx. */
struct hc_api_client *hc_cmd_api(struct hc_cmd_ctx *ctx, struct hc_error *err);

/* One API call through the context's client; a new reference to the body or NULL with err. */
json_t *hc_cmd_request(struct hc_cmd_ctx *ctx, const char *method, const char *path,
                       const json_t *body, struct hc_error *err);
/* GET path and render the answer with view. Returns the exit code. */
int hc_cmd_show(struct hc_cmd_ctx *ctx, const char *path, const struct hc_section *view);

/* GET every page of a paged list (docs/api.md "Pagination"): path, then path&after=next_after
 * until next_after is null, the items of list_key appended to the first page's array; the
 * result has no next_after. At most HC_CMD_MAX_PAGES pages. A new reference or NULL with err. */
#define HC_CMD_MAX_PAGES 10000
json_t *hc_cmd_request_all(struct hc_cmd_ctx *ctx, const char *path, const char *list_key,
                           struct hc_error *err);
/* hc_cmd_show for a paged list: every page (hc_cmd_request_all), rendered once. */
int hc_cmd_show_list(struct hc_cmd_ctx *ctx, const char *path, const char *list_key,
                     const struct hc_section *view);

/* Reports err (text on stderr; JSON error shape on stdout with -o json, merged with extra) and
 * returns its exit code. */
int hc_cmd_fail(struct hc_cmd_ctx *ctx, const struct hc_error *err, const json_t *extra);
/* A usage error found by a handler (bad option value): reports and returns HC_EXIT_USAGE. */
int hc_cmd_usage(struct hc_cmd_ctx *ctx, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Confirmation for disruptive verbs: 0 when --yes was given or the user answered y/yes on a
 * TTY; -1 with err otherwise (usage error with hint "--yes" without a TTY; "not confirmed"). */
int hc_cmd_confirm(struct hc_cmd_ctx *ctx, struct hc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Help generated from the tables, to f. */
void hc_cmd_help_top(FILE *f, const struct hc_cmd_group *const *groups);
void hc_cmd_help_group(FILE *f, const struct hc_cmd_group *group);
void hc_cmd_help_verb(FILE *f, const struct hc_cmd_group *group, const struct hc_cmd_verb *verb);
/* The help of verb (group and verb set), of group (verb NULL) or the top (both NULL), as text
 * or, with -o json, as one JSON document from the same tables. Returns 0. */
int hc_cmd_help_print(struct hc_output *o, const struct hc_cmd_group *const *groups,
                      const struct hc_cmd_group *group, const struct hc_cmd_verb *verb);
/* One usage line ("hcctl node show NODE [OPTIONS]") into buf. */
void hc_cmd_usage_line(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb, char *buf,
                       size_t len);

/* Validates every table (help present, no duplicate names, min <= max, required options
 * documented, defaults and choices consistent). Writes one line per problem to report (may be
 * NULL). Returns the number of problems. */
int hc_cmd_self_test(const struct hc_cmd_group *const *groups, FILE *report);

#endif
