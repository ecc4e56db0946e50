/*
 * The command-line engine of every program (hcctl, hcctld, hcagent, hcstor, hcload), after
 * libvirt's vsh.c (one engine, several programs) and git's commands[] table. A program is
 * data: groups of verbs (or one command), each verb with a table of options. One walker reads
 * a command line against those tables (global options up to the group word, the group, the
 * verb, then the verb's options and positionals in any order); parsing, shell completion and
 * the -o json scan of hcctl all go through it, so they cannot disagree about what a word is.
 * On top of the walk: typed values (bool, string with choices, int, duration, repeatable
 * lists), required options and defaults, usage errors with "did you mean", generated help and
 * man pages.
 *
 * Handlers take a struct hc_cmd_ctx, which each program defines for itself (hcctl: cli/cmd.h;
 * the daemons: their main.c); the engine only passes the pointer along.
 */
#ifndef HC_COMMON_CMDLINE_H
#define HC_COMMON_CMDLINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

/* HC_OPT_LIST: a string option that may be repeated (--node a --node b). */
enum hc_opt_type { HC_OPT_BOOL = 0, HC_OPT_STRING, HC_OPT_INT, HC_OPT_DURATION, HC_OPT_LIST };

/* Where a value can be completed from (shell completion; hcctl's kinds after FILE). */
enum hc_completer {
    HC_COMPLETE_NONE = 0,
    HC_COMPLETE_CHOICES,   /* the option's fixed choices */
    HC_COMPLETE_FILE,      /* a local file */
    HC_COMPLETE_NODE,      /* node names (GET /v1/nodes) */
    HC_COMPLETE_OPERATION, /* operation ids (GET /v1/operations) */
    HC_COMPLETE_TOPIC,     /* help topics: a group, then its verbs, or a docs topic */
    HC_COMPLETE_SHELL,     /* a shell with a completion script: bash, zsh, fish */
    HC_COMPLETE_BUNDLE,    /* uploaded bundle versions (GET /v1/software) */
};

struct hc_cmd_opt {
    const char *name; /* long name without "--"; NULL ends a table */
    char short_name;  /* 0: none */
    enum hc_opt_type type;
    int required;                /* the verb cannot run without it (never for bool) */
    const char *help;            /* one line, lowercase, no full stop */
    const char *value_name;      /* "DUR", "N", "STATE"; NULL for bool */
    enum hc_completer completer; /* only for options that take a value */
    const char *def;             /* default as text (help shows it, the engine applies it) */
    const char *const *choices;  /* allowed values (NULL-terminated), or NULL for any */
};

struct hc_cmd_ctx; /* defined by each program */
/* Returns an exit code. */
typedef int (*hc_cmd_fn)(struct hc_cmd_ctx *ctx);

#define HC_ARGS_MANY (-1) /* max_args: no upper limit */

/* Verb and group flags. */
#define HC_CMD_HIDDEN 0x1u     /* left out of help, suggestions and completion */
#define HC_CMD_DISRUPTIVE 0x2u /* asks for confirmation on a TTY, needs --yes otherwise */
#define HC_CMD_OFFLINE 0x4u    /* works without a configured controller */
#define HC_CMD_RAW                                                                                 \
    0x10u /* an internal command that reads its own words (hcagent probe): the                     \
            engine hands it argv from the command word on, unparsed */
#define HC_GROUP_STANDALONE                                                                        \
    0x8u /* group flag: the group word is the command ("hcctl events"); its                        \
            table holds exactly one verb with the group's name */

struct hc_cmd_verb {
    const char *name; /* NULL ends a table */
    hc_cmd_fn handler;
    const struct hc_cmd_opt *opts; /* ended by {NULL}; NULL when the verb has no options */
    int min_args;
    int max_args;        /* HC_ARGS_MANY: unlimited */
    const char *summary; /* one line, lowercase, no full stop */
    const char *usage;   /* positional synopsis ("NODE"), NULL without positionals */
    unsigned flags;
    enum hc_completer arg_completer; /* what positional arguments are */
};

/* One row of an option or verb table, with named fields:
 *     HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
 *            .help = "the data directory"),
 * The macro is the braces and nothing else: written as a call, clang-format packs a row's fields
 * onto as few lines as fit instead of one designator a line. A table ends with {.name = NULL}. */
#define HC_OPT(...)                                                                                \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define HC_VERB(...)                                                                               \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }

struct hc_cmd_group {
    const char *name;
    const char *summary;
    const struct hc_cmd_verb *verbs; /* ended by {NULL} */
    unsigned flags;
};

/* Prose beyond the tables: a command's description ("join", "token create"; shown by its
 * --help and in the man page), or a man page section ("FILES", "EXIT STATUS"). Text is plain,
 * wrapped, "\n"-ended; the man page generator escapes it. */
struct hc_cmdline_text {
    const char *name; /* NULL ends a table */
    const char *text;
};

/* A program. Either groups (hcctl, hcctld, hcagent) or command (hcstor, hcload: no words). */
struct hc_cmdline_prog {
    const char *name;                         /* "hcctld" */
    const char *summary;                      /* one line for --help */
    const char *man_name;                     /* the man page's NAME line (default: summary) */
    const struct hc_cmd_group *const *groups; /* NULL-terminated, or NULL */
    const struct hc_cmd_verb *command;        /* the one command, or NULL */
    const struct hc_cmd_opt *globals;         /* before the group word; may be NULL */
    const char *epilog;                       /* help text after the commands (exit codes) */
    int usage_exit;                           /* exit code of a usage error (2) */
    int man_section;                          /* 1 or 8 */
    const struct hc_cmdline_text *commands;   /* descriptions of commands, by their words */
    const struct hc_cmdline_text *man;        /* extra man sections (DESCRIPTION, FILES...) */
};

/* The global options of a program whose only one is -h/--help (the daemons). */
extern const struct hc_cmd_opt hc_cmdline_help_only[];

/* A parsed option. Strings point into argv (which outlives the parse). */
struct hc_opt_val {
    int set;
    const char *str;
    int64_t num;       /* bool 0/1, int, or duration in milliseconds */
    const char **list; /* HC_OPT_LIST: every value, NULL-terminated (owned) */
    size_t nlist;
};

/* ---------------------------------------------------------------- the walker */

#define HC_WALK_MAX_OPTS 64

/* Why a walk step stopped. */
enum hc_walk_stop {
    HC_WALK_OK = 0,
    HC_WALK_VALUE,         /* the words ended where opt's value goes */
    HC_WALK_UNKNOWN_LONG,  /* words[at] is no option of the set (or an ambiguous prefix) */
    HC_WALK_UNKNOWN_SHORT, /* letter is no option of the set */
    HC_WALK_NO_VALUE,      /* "--flag=x": opt takes no value */
    HC_WALK_CALLBACK,      /* on_option refused the value (it filled the error) */
    HC_WALK_NO_GROUP,      /* the words ended where the group goes */
    HC_WALK_BAD_GROUP,     /* words[at] is no group */
    HC_WALK_NO_VERB,       /* the words ended where the verb goes */
    HC_WALK_GROUP_HELP,    /* "GROUP --help" */
    HC_WALK_NOT_VERB,      /* words[at] is an option where the verb goes, and no default verb */
    HC_WALK_BAD_VERB,      /* words[at] is no verb of group */
};

struct hc_walk {
    /* set by the caller */
    const struct hc_cmd_group *const *groups;
    const struct hc_cmd_opt *globals;
    /* Called for every option and its value (NULL for a flag); < 0 stops the walk. */
    int (*on_option)(struct hc_walk *w, const struct hc_cmd_opt *o, const char *value);
    void *arg;
    struct hc_error *on_err; /* where on_option may report (the parsers' error) */
    int keep_going;          /* pass over unknown options (completion, the -o json scan) */
    /* where the walk is */
    const struct hc_cmd_group *group;
    const struct hc_cmd_verb *verb;
    enum hc_walk_stop stop;
    int at;                       /* the word the walk stopped at */
    const struct hc_cmd_opt *opt; /* HC_WALK_VALUE, HC_WALK_NO_VALUE */
    char letter;                  /* HC_WALK_UNKNOWN_SHORT */
    int dashdash;                 /* "--" was seen */
    char **pos;                   /* positionals in order (owned; hc_walk_clear) */
    int npos;
    /* the option set of the current step: a verb's options, then the globals they do not
     * shadow (a verb option of the same long name wins, so does its short letter) */
    const struct hc_cmd_opt *set[HC_WALK_MAX_OPTS];
    size_t nset;
};

/* Makes the set the globals alone (verb NULL) or verb's options plus the unshadowed globals.
 * Returns -1 when the tables hold more than HC_WALK_MAX_OPTS options. */
int hc_walk_set(struct hc_walk *w, const struct hc_cmd_verb *verb);
/* Options from words[*i] on. posix: stop at the first non-option (the group word) and after
 * "--"; otherwise non-options are positionals (kept in w->pos) and everything after "--" is a
 * positional. Long names may be abbreviated to a unique prefix; "--name=value", "-xVALUE",
 * "-qy" as getopt_long reads them. Returns 0 (*i past the options walked), or -1 with w->stop. */
int hc_walk_options(struct hc_walk *w, int posix, int nwords, char *const *words, int *i);
/* The group and the verb at words[*i] (a standalone group is its own verb; an option after
 * the group word selects the group's default verb). Returns 0 with *i at the first word the
 * verb's options are read from, or -1 with w->stop. Without groups (a program with one
 * command), nothing is read. */
int hc_walk_words(struct hc_walk *w, int nwords, char *const *words, int *i);
void hc_walk_clear(struct hc_walk *w);
/* The option of the set with this long name (len characters of name): the exact name, else
 * the one option it is a prefix of; NULL when none or ambiguous. */
const struct hc_cmd_opt *hc_walk_find_long(const struct hc_walk *w, const char *name, size_t len);

/* ---------------------------------------------------------------- values and messages */

/* Validates arg for opt (choices, integer, positive duration) and stores it into val.
 * Returns 0, or -1 with a usage error. */
int hc_cmdline_store(const struct hc_cmd_opt *opt, struct hc_opt_val *val, const char *arg,
                     struct hc_error *err);
/* The usage error for a walk that stopped on an option (w->stop <= HC_WALK_NO_VALUE); where is
 * the hint when there is no suggestion ("see 'hcctl --help'"). Returns -1. */
int hc_walk_error(const struct hc_walk *w, char *const *words, const char *where,
                  struct hc_error *err);
/* Fills err with a usage error (code HC_CLI_ERR_USAGE, the table's USAGE row; hint may be NULL);
 * returns -1. */
int hc_cmdline_usage_error(struct hc_error *err, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Optimal-string-alignment (Damerau-Levenshtein) distance. */
int hc_cmd_distance(const char *a, const char *b);
/* The closest of candidates (NULL-terminated) within distance 2, or NULL. */
const char *hc_cmd_suggest(const char *word, const char *const *candidates);

/* Lookups. hc_cmd_find_verb finds the verbs typed as a word after the group word, so never a
 * group's default verb: the verb named like its (not standalone) group, run when an option
 * follows the group word ("hcctl upgrade --rolling --to V"); its usage holds the option that
 * selects it, which help, messages, man pages and completion show in the verb's place. */
const struct hc_cmd_group *hc_cmd_find_group(const struct hc_cmd_group *const *groups,
                                             const char *name);
const struct hc_cmd_verb *hc_cmd_find_verb(const struct hc_cmd_group *group, const char *name);
const struct hc_cmd_verb *hc_cmd_default_verb(const struct hc_cmd_group *group);
/* How a verb is typed, for messages and help: "node show", "events", "upgrade --rolling". */
void hc_cmd_verb_words(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb, char *buf,
                       size_t len);

/* Value of an option of opts (vals parallel to it) by long name; NULL opt when undeclared. */
const struct hc_opt_val *hc_cmdline_slot(const struct hc_cmd_opt *opts,
                                         const struct hc_opt_val *vals, const char *name,
                                         const struct hc_cmd_opt **opt);
/* Unset options give their default. */
const char *hc_cmdline_str(const struct hc_cmd_opt *opt, const struct hc_opt_val *v);
int64_t hc_cmdline_int(const struct hc_cmd_opt *opt, const struct hc_opt_val *v);
int64_t hc_cmdline_ms(const struct hc_cmd_opt *opt, const struct hc_opt_val *v);

/* ---------------------------------------------------------------- help */

/* "  -o, --output FORMAT  output format: text|json (default text)" for each option of opts,
 * the synopses aligned on width (0: the widest of opts). */
void hc_cmdline_help_opts(FILE *f, const struct hc_cmd_opt *opts, int width);
void hc_cmdline_help_opt(FILE *f, const struct hc_cmd_opt *o, int width);
/* The widest synopsis of opts, at least width; one option's synopsis width. */
int hc_cmdline_opts_width(const struct hc_cmd_opt *opts, int width);
int hc_cmdline_opt_width(const struct hc_cmd_opt *o);
/* "PROG GROUP VERB ARGS --required X [OPTIONS]" into buf. */
void hc_cmdline_usage_line(const char *prog, const struct hc_cmd_group *group,
                           const struct hc_cmd_verb *verb, char *buf, size_t len);

/* The usage error for a walk that stopped at the group or the verb word (any stop from
 * HC_WALK_NO_GROUP on but HC_WALK_GROUP_HELP), with "did you mean" among the visible words.
 * Returns -1. */
int hc_walk_words_error(const struct hc_walk *w, const char *prog, char *const *words,
                        struct hc_error *err);
/* Positional count (argc against min/max) and required options (vals parallel to
 * verb->opts), checked here so that no handler has to. group NULL: a program's one command.
 * Returns 0, or -1 with a usage error. */
int hc_cmdline_check(const char *prog, const struct hc_cmd_group *group,
                     const struct hc_cmd_verb *verb, const struct hc_opt_val *vals, int argc,
                     char *const *argv, struct hc_error *err);

/* ---------------------------------------------------------------- the daemons' runner */

/* A parsed command line of a program other than hcctl (which has its own context with the
 * API client and the output layer, cli/cmd.h). */
struct hc_cmdline {
    const struct hc_cmdline_prog *prog;
    const struct hc_cmd_group *group; /* NULL for a program with one command */
    const struct hc_cmd_verb *verb;
    int argc; /* positional arguments */
    char **argv;
    struct hc_opt_val *vals;                   /* parallel to verb->opts */
    struct hc_opt_val gvals[HC_WALK_MAX_OPTS]; /* parallel to prog->globals */
    struct hc_walk walk;
};

/* Parses argv against prog into cl and runs the verb's handler with ctx (the program's own
 * struct, which holds cl), then closes stdout (hc_cmdline_close_stdout). --help (anywhere, per
 * group or per command) prints help generated from the tables; a usage error prints one line,
 * "PROG: MESSAGE (HINT)", on stderr. Returns the exit code: the handler's, 0 after help,
 * prog->usage_exit after a usage error. */
int hc_cmdline_main(const struct hc_cmdline_prog *prog, struct hc_cmdline *cl,
                    struct hc_cmd_ctx *ctx, int argc, char **argv);
/* A usage error found by a handler (a bad value, a value out of range): one line on stderr as
 * above; returns prog->usage_exit. */
int hc_cmdline_usage(const struct hc_cmdline *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Option values by long name (the verb's options, then the globals); an undeclared name is a
 * programming error (abort). Unset options give their default, or NULL/0. */
int hc_cmdline_opt_set(const struct hc_cmdline *cl, const char *name);
const char *hc_cmdline_opt_str(const struct hc_cmdline *cl, const char *name);
int64_t hc_cmdline_opt_int(const struct hc_cmdline *cl, const char *name);
int64_t hc_cmdline_opt_ms(const struct hc_cmdline *cl, const char *name);
/* Every value of a repeatable option in command-line order; *n receives the count. */
const char *const *hc_cmdline_opt_list(const struct hc_cmdline *cl, const char *name, size_t *n);

/* Help for the daemons, from the tables (hcctl words its own, cli/cmd_help.c). */
void hc_cmdline_help_top(FILE *f, const struct hc_cmdline_prog *prog);
void hc_cmdline_help_group(FILE *f, const struct hc_cmdline_prog *prog,
                           const struct hc_cmd_group *group);
void hc_cmdline_help_verb(FILE *f, const struct hc_cmdline_prog *prog,
                          const struct hc_cmd_group *group, const struct hc_cmd_verb *verb);

/* ---------------------------------------------------------------- man pages */

/* The program's man page (roff) from its tables: NAME, SYNOPSIS (every command's usage line),
 * then prog->man's sections in their order; the one named "COMMANDS" is generated (each
 * command's usage, summary, description and options). `PROG __man` prints it (a hidden word
 * the runner knows when man_section is set); the build writes the page from there. */
void hc_cmdline_man(FILE *f, const struct hc_cmdline_prog *prog);
/* roff helpers, shared with hcctl's pages (cli/cmd_man.c). hc_roff_put escapes s, with '-' as
 * a minus sign when minus is set (options, commands, so that copy and paste works);
 * hc_roff_text writes plain text: paragraphs, and blocks indented by two spaces kept as
 * written; hc_roff_opt one option as a .TP item; hc_roff_date the page date
 * (SOURCE_DATE_EPOCH when set, for reproducible builds). */
void hc_roff_put(FILE *f, const char *s, int minus);
void hc_roff_text(FILE *f, const char *text);
void hc_roff_opt(FILE *f, const struct hc_cmd_opt *o);
const char *hc_roff_date(char *buf, size_t len);

/* ---------------------------------------------------------------- the end of a command */

/* As git's run_builtin: flushes and closes stdout, and reports a failed write ("hcctl --help
 * >/dev/full") on stderr as "PROG: write failure on standard output: REASON". Returns rc, or 1
 * when rc was 0 and the write failed: output that did not arrive is not a success. */
int hc_cmdline_close_stdout(const char *prog, int rc);

#endif
