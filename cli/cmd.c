/*
 * The command engine: parses a command line against the tables (global options, group, verb,
 * the verb's options, positional count), then runs the verb's handler with a context. This is
 * the only place that parses; handlers never look at argv for options.
 */
#include "cli/cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "common/util.h"

/* A parsed option. Strings point into argv (which outlives the context). */
struct hc_opt_val {
    int set;
    const char *str;
    int64_t num;       /* bool 0/1, int, or duration in milliseconds */
    const char **list; /* HC_OPT_LIST: every value, NULL-terminated (owned) */
    size_t nlist;
};

static const char *const output_choices[] = {"text", "json", NULL};

const struct hc_cmd_opt hc_cmd_global_opts[] = {
    {"controller", 0, HC_OPT_STRING, 0,
     "controller URL (else HCCTL_CONTROLLER, else the config file)", "URL", HC_COMPLETE_NONE,
     NULL, NULL},
    {"token", 0, HC_OPT_STRING, 0, "API bearer token (else HCCTL_TOKEN, else the config file)",
     "TOKEN", HC_COMPLETE_NONE, NULL, NULL},
    {"output", 'o', HC_OPT_STRING, 0, "output format", "FORMAT", HC_COMPLETE_CHOICES, "text",
     output_choices},
    {"quiet", 'q', HC_OPT_BOOL, 0, "no progress or chatter on stderr", NULL, HC_COMPLETE_NONE,
     NULL, NULL},
    {"no-color", 0, HC_OPT_BOOL, 0, "never color the output (NO_COLOR does the same)", NULL,
     HC_COMPLETE_NONE, NULL, NULL},
    {"yes", 'y', HC_OPT_BOOL, 0, "confirm disruptive commands without asking", NULL,
     HC_COMPLETE_NONE, NULL, NULL},
    {"ca", 0, HC_OPT_STRING, 0,
     "CA certificate file of the controller (else HCCTL_CA_FILE, else the config file)", "FILE",
     HC_COMPLETE_FILE, NULL, NULL},
    {"timeout", 0, HC_OPT_DURATION, 0, "timeout of each request to the controller", "DUR",
     HC_COMPLETE_NONE, "30s", NULL},
    {"help", 'h', HC_OPT_BOOL, 0, "show help and exit", NULL, HC_COMPLETE_NONE, NULL, NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};

enum { G_CONTROLLER, G_TOKEN, G_OUTPUT, G_QUIET, G_NO_COLOR, G_YES, G_CA, G_TIMEOUT, G_HELP,
       G_COUNT };

/* One option the current getopt_long pass accepts, and where its value goes. */
struct parse_entry {
    const struct hc_cmd_opt *opt;
    struct hc_opt_val *val;
};

#define MAX_ENTRIES 64

static size_t opts_count(const struct hc_cmd_opt *opts)
{
    size_t n = 0;
    while (opts && opts[n].name)
        n++;
    return n;
}

static int usage_error(struct hc_error *err, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_error(struct hc_error *err, const char *hint, const char *fmt, ...)
{
    va_list ap;
    hc_error_set(err, 0, HC_CLI_ERR_USAGE, "%s", "");
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    if (hint)
        hc_error_hint(err, "%s", hint);
    return -1;
}

static void choices_text(const char *const *choices, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; choices[i] && used < len; i++)
        used += snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
}

/* Validates and stores one value. */
static int store_value(const struct parse_entry *e, const char *arg, struct hc_error *err)
{
    const struct hc_cmd_opt *opt = e->opt;
    e->val->set = 1;
    e->val->str = arg;
    e->val->num = 1;
    if (opt->type == HC_OPT_LIST) {
        const char **grown = realloc(e->val->list, (e->val->nlist + 2) * sizeof(*grown));
        if (!grown)
            return usage_error(err, NULL, "out of memory");
        grown[e->val->nlist++] = arg;
        grown[e->val->nlist] = NULL;
        e->val->list = grown;
        return 0;
    }
    if (opt->type == HC_OPT_STRING && opt->choices) {
        for (size_t i = 0; opt->choices[i]; i++)
            if (strcmp(arg, opt->choices[i]) == 0)
                return 0;
        char list[256], hint[300];
        choices_text(opt->choices, list, sizeof(list));
        const char *guess = hc_cmd_suggest(arg, opt->choices);
        if (guess)
            snprintf(hint, sizeof(hint), "did you mean '%s'? (one of: %s)", guess, list);
        else
            snprintf(hint, sizeof(hint), "one of: %s", list);
        return usage_error(err, hint, "invalid value '%s' for --%s", arg, opt->name);
    }
    if (opt->type == HC_OPT_INT) {
        char *end;
        errno = 0;
        long long n = strtoll(arg, &end, 10);
        if (!arg[0] || *end || errno)
            return usage_error(err, NULL, "invalid value '%s' for --%s: not an integer", arg,
                               opt->name);
        e->val->num = n;
    } else if (opt->type == HC_OPT_DURATION) {
        struct hc_error derr = {0};
        if (hc_duration_parse(arg, &e->val->num, &derr) < 0)
            return usage_error(err, derr.hint, "invalid value '%s' for --%s: not a duration",
                               arg, opt->name);
        /* Every duration bounds a wait or a lifetime: zero would wait for nothing. */
        if (e->val->num <= 0)
            return usage_error(err, "use a positive duration such as 30s",
                               "invalid value '%s' for --%s: must be more than 0", arg,
                               opt->name);
    }
    return 0;
}

/* Builds the getopt_long tables for entries. long_opts needs n+1 slots, shorts 3n+3 bytes. */
static void build_getopt(const struct parse_entry *e, size_t n, int posix, struct option *lo,
                         char *shorts)
{
    char *s = shorts;
    if (posix)
        *s++ = '+'; /* stop at the first non-option: the group word */
    *s++ = ':';     /* report missing values as ':' so that we word the message */
    for (size_t i = 0; i < n; i++) {
        int has_arg = e[i].opt->type == HC_OPT_BOOL ? no_argument : required_argument;
        lo[i] = (struct option){e[i].opt->name, has_arg, NULL, 256 + (int)i};
        if (e[i].opt->short_name && !memchr(shorts, e[i].opt->short_name, (size_t)(s - shorts))) {
            *s++ = e[i].opt->short_name;
            if (has_arg == required_argument)
                *s++ = ':';
        }
    }
    lo[n] = (struct option){NULL, 0, NULL, 0};
    *s = '\0';
}

static const struct parse_entry *entry_for(const struct parse_entry *e, size_t n, int c)
{
    if (c >= 256 && (size_t)(c - 256) < n)
        return &e[c - 256];
    for (size_t i = 0; i < n; i++)
        if (c > 0 && e[i].opt->short_name == c)
            return &e[i];
    return NULL;
}

/* The message for an option getopt refused: unknown (with a suggestion) or missing its value. */
static int option_error(const struct parse_entry *e, size_t n, int c, const char *text,
                        const char *where, struct hc_error *err)
{
    const struct parse_entry *known = entry_for(e, n, optopt);
    if (c == ':' && known)
        return usage_error(err, NULL, "option --%s needs a value (%s)", known->opt->name,
                           known->opt->value_name ? known->opt->value_name : "VALUE");
    if (known) /* "--quiet=x": a flag given a value */
        return usage_error(err, where, "option --%s takes no value", known->opt->name);
    if (optopt > 0 && optopt < 256)
        return usage_error(err, where, "unknown option '-%c'", optopt);
    char word[64], hint[128];
    const char *names[MAX_ENTRIES + 1];
    snprintf(word, sizeof(word), "%s", text + strspn(text, "-"));
    word[strcspn(word, "=")] = '\0';
    for (size_t i = 0; i < n; i++)
        names[i] = e[i].opt->name;
    names[n] = NULL;
    const char *guess = hc_cmd_suggest(word, names);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '--%s'?", guess);
    return usage_error(err, guess ? hint : where, "unknown option '%s'", text);
}

/* One getopt_long pass over argv with the given entries. *next receives the index of the first
 * argument getopt did not consume (after permutation, positionals start there). */
static int parse_options(const struct parse_entry *e, size_t n, int posix, int argc, char **argv,
                         const char *where, int *next, struct hc_error *err)
{
    struct option lo[MAX_ENTRIES + 1];
    char shorts[3 * MAX_ENTRIES + 3];
    int c;
    build_getopt(e, n, posix, lo, shorts);
    optind = 0; /* GNU: re-initialise, the engine runs getopt more than once per process */
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        const struct parse_entry *hit = entry_for(e, n, c);
        if (c == '?' || c == ':' || !hit)
            return option_error(e, n, c, argv[optind - 1], where, err);
        if (store_value(hit, optarg, err) < 0)
            return -1;
    }
    *next = optind;
    return 0;
}

static size_t global_entries(struct hc_opt_val *gvals, const struct hc_cmd_opt *shadow,
                             struct parse_entry *e, size_t n)
{
    for (size_t i = 0; i < G_COUNT; i++) {
        int shadowed = 0;
        for (size_t j = 0; shadow && shadow[j].name; j++)
            shadowed |= strcmp(shadow[j].name, hc_cmd_global_opts[i].name) == 0;
        if (!shadowed)
            e[n++] = (struct parse_entry){&hc_cmd_global_opts[i], &gvals[i]};
    }
    return n;
}

static int stream_tty(FILE *f, int given)
{
    return given >= 0 ? given : isatty(fileno(f));
}

/* Copies parsed global options into the context. */
static int apply_globals(struct hc_cmd_ctx *ctx, const struct hc_opt_val *g, int out_tty,
                         struct hc_error *err)
{
    const char *no_color = getenv("NO_COLOR");
    ctx->g.controller = g[G_CONTROLLER].set ? g[G_CONTROLLER].str : NULL;
    ctx->g.token = g[G_TOKEN].set ? g[G_TOKEN].str : NULL;
    ctx->g.ca_file = g[G_CA].set ? g[G_CA].str : NULL;
    ctx->g.json = g[G_OUTPUT].set && strcmp(g[G_OUTPUT].str, "json") == 0;
    ctx->g.quiet = g[G_QUIET].set;
    ctx->g.no_color = g[G_NO_COLOR].set || (no_color && no_color[0]);
    ctx->g.yes = g[G_YES].set;
    ctx->g.timeout_ms = g[G_TIMEOUT].num;
    if (!g[G_TIMEOUT].set)
        hc_duration_parse(hc_cmd_global_opts[G_TIMEOUT].def, &ctx->g.timeout_ms, NULL);
    ctx->out.json = ctx->g.json;
    ctx->out.quiet = ctx->g.quiet;
    ctx->out.color = !ctx->g.no_color && out_tty;
    return 0;
}

/* Finds the group word; unknown words get a suggestion among visible groups. */
static const struct hc_cmd_group *resolve_group(const struct hc_cmd_group *const *groups,
                                                const char *word, struct hc_error *err)
{
    const struct hc_cmd_group *g = hc_cmd_find_group(groups, word);
    const char *names[64];
    size_t n = 0;
    char hint[128];
    if (g)
        return g;
    for (size_t i = 0; groups[i] && n + 1 < HC_ARRAY_LEN(names); i++)
        if (!(groups[i]->flags & HC_CMD_HIDDEN))
            names[n++] = groups[i]->name;
    names[n] = NULL;
    const char *guess = hc_cmd_suggest(word, names);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '%s'?", guess);
    else
        snprintf(hint, sizeof(hint), "see 'hcctl --help'");
    usage_error(err, hint, "unknown command '%s'", word);
    return NULL;
}

static const struct hc_cmd_verb *resolve_verb(const struct hc_cmd_group *group, const char *word,
                                              struct hc_error *err)
{
    const struct hc_cmd_verb *v = hc_cmd_find_verb(group, word);
    const char *names[64];
    size_t n = 0;
    char hint[128];
    if (v)
        return v;
    for (size_t i = 0; group->verbs[i].name && n + 1 < HC_ARRAY_LEN(names); i++)
        if (!(group->verbs[i].flags & HC_CMD_HIDDEN) &&
            &group->verbs[i] != hc_cmd_default_verb(group)) /* never typed by its name */
            names[n++] = group->verbs[i].name;
    names[n] = NULL;
    const char *guess = hc_cmd_suggest(word, names);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '%s'?", guess);
    else
        snprintf(hint, sizeof(hint), "see 'hcctl %s --help'", group->name);
    usage_error(err, hint, "unknown verb '%s' for '%s'", word, group->name);
    return NULL;
}

/* Positional count and required options, checked here so that no handler has to. */
static int check_args(const struct hc_cmd_ctx *ctx, struct hc_error *err)
{
    const struct hc_cmd_verb *v = ctx->verb;
    char usage[256], hint[300], name[128];
    hc_cmd_usage_line(ctx->group, v, usage, sizeof(usage));
    hc_cmd_verb_words(ctx->group, v, name, sizeof(name));
    snprintf(hint, sizeof(hint), "usage: %s", usage);
    if (ctx->argc < v->min_args)
        return usage_error(err, hint, "missing argument for '%s' (expected %s)", name,
                           v->usage ? v->usage : "more arguments");
    if (v->max_args != HC_ARGS_MANY && ctx->argc > v->max_args)
        return usage_error(err, hint, "too many arguments for '%s': unexpected '%s'", name,
                           ctx->argv[v->max_args]);
    for (size_t i = 0; v->opts && v->opts[i].name; i++)
        if (v->opts[i].required && !ctx->vals[i].set)
            return usage_error(err, hint, "option --%s is required for '%s'", v->opts[i].name,
                               name);
    return 0;
}

/* Parses the verb's options (plus globals after the verb) from vargv (vargv[0] = verb word). */
static int parse_verb(struct hc_cmd_ctx *ctx, struct hc_opt_val *gvals, int vargc, char **vargv,
                      struct hc_error *err)
{
    struct parse_entry e[MAX_ENTRIES];
    size_t nv = opts_count(ctx->verb->opts), n = 0;
    char where[160], name[128];
    int next = 0;
    if (nv + G_COUNT > MAX_ENTRIES)
        return usage_error(err, NULL, "internal: too many options for '%s'", ctx->verb->name);
    ctx->vals = calloc(nv + 1, sizeof(*ctx->vals));
    if (!ctx->vals)
        return hc_error_set(err, 0, HC_ERR_INTERNAL, "out of memory");
    for (; n < nv; n++)
        e[n] = (struct parse_entry){&ctx->verb->opts[n], &ctx->vals[n]};
    n = global_entries(gvals, ctx->verb->opts, e, n);
    hc_cmd_verb_words(ctx->group, ctx->verb, name, sizeof(name));
    snprintf(where, sizeof(where), "see 'hcctl %s --help'", name);
    if (parse_options(e, n, 0, vargc, vargv, where, &next, err) < 0)
        return -1;
    ctx->argc = vargc - next;
    ctx->argv = vargv + next;
    return 0;
}

/* Group and verb words: returns 1 when help was printed, 0 to go on, -1 on error. *vi receives
 * the index of the verb word (the group word for standalone groups). */
static int resolve_words(struct hc_cmd_ctx *ctx, int argc, char **argv, int gi, int *vi,
                         struct hc_error *err)
{
    ctx->group = resolve_group(ctx->groups, argv[gi], err);
    if (!ctx->group)
        return -1;
    if (ctx->group->flags & HC_GROUP_STANDALONE) {
        ctx->verb = &ctx->group->verbs[0];
        *vi = gi;
        return 0;
    }
    char hint[128];
    snprintf(hint, sizeof(hint), "see 'hcctl %s --help'", ctx->group->name);
    if (gi + 1 >= argc)
        return usage_error(err, hint, "missing verb for '%s'", ctx->group->name);
    const char *word = argv[gi + 1];
    if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0) {
        hc_cmd_help_group(ctx->out.out, ctx->group);
        return 1;
    }
    if (word[0] == '-') {
        /* A verb named like its group is the group's default form: "upgrade --rolling ...". */
        ctx->verb = hc_cmd_default_verb(ctx->group);
        *vi = gi;
        if (ctx->verb)
            return 0;
        return usage_error(err, hint, "expected a verb after '%s', not the option '%s'",
                           ctx->group->name, word);
    }
    ctx->verb = resolve_verb(ctx->group, word, err);
    *vi = gi + 1;
    return ctx->verb ? 0 : -1;
}

/* Everything up to the handler. Returns 1 when help was printed, 0 to run, -1 on error. */
static int parse_line(struct hc_cmd_ctx *ctx, struct hc_opt_val *gvals, int argc, char **argv,
                      int out_tty, struct hc_error *err)
{
    struct parse_entry e[G_COUNT];
    int gi = 0, vi = 0, rc;
    size_t n = global_entries(gvals, NULL, e, 0);
    if (parse_options(e, n, 1, argc, argv, "see 'hcctl --help'", &gi, err) < 0 ||
        apply_globals(ctx, gvals, out_tty, err) < 0)
        return -1;
    if (gvals[G_HELP].set) {
        hc_cmd_help_top(ctx->out.out, ctx->groups);
        return 1;
    }
    if (gi >= argc)
        return usage_error(err, "see 'hcctl --help'", "missing command");
    if ((rc = resolve_words(ctx, argc, argv, gi, &vi, err)) != 0)
        return rc;
    if (parse_verb(ctx, gvals, argc - vi, argv + vi, err) < 0 ||
        apply_globals(ctx, gvals, out_tty, err) < 0)
        return -1;
    if (gvals[G_HELP].set) {
        hc_cmd_help_verb(ctx->out.out, ctx->group, ctx->verb);
        return 1;
    }
    return check_args(ctx, err);
}

/* ---------------------------------------------------------------- -o json on usage errors */

/* The option a word names for the scan below: the verb's options first, then the globals it
 * does not shadow (the order of build_getopt); a long name may be abbreviated as getopt_long
 * allows (a unique prefix). */
static const struct hc_cmd_opt *scan_long(const struct hc_cmd_verb *v, const char *name,
                                          size_t len)
{
    const struct hc_cmd_opt *tables[2] = {v ? v->opts : NULL, hc_cmd_global_opts}, *prefix = NULL;
    int nprefix = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; tables[t] && tables[t][i].name; i++) {
            const struct hc_cmd_opt *o = &tables[t][i];
            if (strncmp(o->name, name, len) != 0)
                continue;
            if (strlen(o->name) == len)
                return o;
            if (!prefix || strcmp(prefix->name, o->name) != 0) /* a shadowed global is the same */
                nprefix++;
            if (!prefix)
                prefix = o;
        }
    return nprefix == 1 ? prefix : NULL;
}

static const struct hc_cmd_opt *scan_short(const struct hc_cmd_verb *v, char c)
{
    for (size_t i = 0; v && v->opts && v->opts[i].name; i++)
        if (v->opts[i].short_name == c)
            return &v->opts[i];
    for (size_t i = 0; hc_cmd_global_opts[i].name; i++)
        if (hc_cmd_global_opts[i].short_name == c)
            return &hc_cmd_global_opts[i];
    return NULL;
}

/* The option of an option word and its value when attached ("--output=json", "-ojson",
 * "-qojson"); *value NULL when the value is the next word. */
static const struct hc_cmd_opt *scan_option(const struct hc_cmd_verb *v, const char *word,
                                            const char **value)
{
    *value = NULL;
    if (word[1] == '-') {
        const char *eq = strchr(word + 2, '=');
        const struct hc_cmd_opt *o =
            scan_long(v, word + 2, eq ? (size_t)(eq - word - 2) : strlen(word + 2));
        *value = o && eq ? eq + 1 : NULL;
        return o;
    }
    for (const char *p = word + 1; *p; p++) {
        const struct hc_cmd_opt *o = scan_short(v, *p);
        if (o && o->type != HC_OPT_BOOL) {
            *value = p[1] ? p + 1 : NULL;
            return o;
        }
    }
    return NULL;
}

/* Whether the line asks for -o json anywhere, read without getopt: a usage error stops the
 * parser at the bad word, possibly before an "-o json" that comes later, and the error must
 * still be the one JSON document on stdout. The scan follows the parser's rules: the group,
 * then the verb (or the group's default verb when an option follows the group word), whose
 * options shadow globals of the same name (`software build -o FILE` is not the output format);
 * an option that takes a value consumes the next word; "--" ends the options; the last -o wins.
 * Unknown words are passed over. */
static int line_wants_json(const struct hc_cmd_group *const *groups, int argc, char **argv)
{
    const struct hc_cmd_group *g = NULL;
    const struct hc_cmd_verb *v = NULL;
    int json = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *word = argv[i], *value;
        if (word[0] != '-' || !word[1]) { /* the group, the verb, or a positional */
            if (!g) {
                g = hc_cmd_find_group(groups, word);
                v = g && (g->flags & HC_GROUP_STANDALONE) ? &g->verbs[0] : NULL;
            } else if (!v) {
                v = hc_cmd_find_verb(g, word);
            }
            continue;
        }
        if (g && !v)
            v = hc_cmd_default_verb(g);
        const struct hc_cmd_opt *o = scan_option(v, word, &value);
        if (!o || o->type == HC_OPT_BOOL)
            continue;
        if (!value && i + 1 < argc)
            value = argv[++i];
        if (o == &hc_cmd_global_opts[G_OUTPUT])
            json = value && strcmp(value, "json") == 0;
    }
    return json;
}

int hc_cli_main(const struct hc_cmd_group *const *groups, int argc, char **argv,
                const struct hc_cli_io *io)
{
    struct hc_cmd_ctx ctx;
    struct hc_opt_val gvals[G_COUNT];
    struct hc_error err = {0};
    int rc;
    /* getopt permutes argv: work on a copy so the caller's array stays as it was. */
    char **args = calloc((size_t)argc + 1, sizeof(*args));
    memset(&ctx, 0, sizeof(ctx));
    memset(gvals, 0, sizeof(gvals));
    hc_output_init(&ctx.out, io->out, io->err);
    ctx.out.now_ms = io->now_ms;
    ctx.groups = groups;
    ctx.in = io->in;
    ctx.in_tty = io->in ? stream_tty(io->in, io->in_tty) : 0;
    if (!args) {
        rc = HC_EXIT_FAILED;
        goto cleanup;
    }
    memcpy(args, argv, (size_t)argc * sizeof(*args));
    rc = parse_line(&ctx, gvals, argc, args, stream_tty(io->out, io->out_tty), &err);
    if (rc < 0) {
        /* the parser may have stopped before it read -o json (argv: args is permuted) */
        ctx.out.json = ctx.out.json || line_wants_json(groups, argc, argv);
        rc = hc_cmd_fail(&ctx, &err, NULL);
    } else if (rc == 1) {
        rc = HC_EXIT_OK;
    } else {
        rc = ctx.verb->handler(&ctx);
    }
    fflush(io->out);
cleanup:
    hc_api_client_free(ctx.api);
    hc_cli_config_clear(&ctx.config);
    for (size_t i = 0; ctx.vals && ctx.verb && i < opts_count(ctx.verb->opts); i++)
        free(ctx.vals[i].list);
    free(ctx.vals);
    free(args);
    return rc;
}

/* The value slot of a declared option; an undeclared name is a bug in the handler. */
static const struct hc_opt_val *opt_slot(const struct hc_cmd_ctx *ctx, const char *name,
                                         const struct hc_cmd_opt **opt)
{
    for (size_t i = 0; ctx->verb->opts && ctx->verb->opts[i].name; i++)
        if (strcmp(ctx->verb->opts[i].name, name) == 0) {
            *opt = &ctx->verb->opts[i];
            return &ctx->vals[i];
        }
    fprintf(stderr, "hcctl: bug: verb '%s' has no option --%s\n", ctx->verb->name, name);
    abort();
}

int hc_cmd_opt_set(const struct hc_cmd_ctx *ctx, const char *name)
{
    const struct hc_cmd_opt *opt;
    return opt_slot(ctx, name, &opt)->set;
}

int hc_cmd_opt_bool(const struct hc_cmd_ctx *ctx, const char *name)
{
    return hc_cmd_opt_set(ctx, name);
}

const char *hc_cmd_opt_str(const struct hc_cmd_ctx *ctx, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = opt_slot(ctx, name, &opt);
    return v->set ? v->str : opt->def;
}

const char *const *hc_cmd_opt_list(const struct hc_cmd_ctx *ctx, const char *name, size_t *n)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = opt_slot(ctx, name, &opt);
    static const char *const none[] = {NULL};
    *n = v->nlist;
    return v->list ? v->list : none;
}

int64_t hc_cmd_opt_int(const struct hc_cmd_ctx *ctx, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = opt_slot(ctx, name, &opt);
    return v->set ? v->num : (opt->def ? strtoll(opt->def, NULL, 10) : 0);
}

int64_t hc_cmd_opt_ms(const struct hc_cmd_ctx *ctx, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = opt_slot(ctx, name, &opt);
    int64_t ms = 0;
    if (v->set)
        return v->num;
    if (opt->def)
        hc_duration_parse(opt->def, &ms, NULL); /* self-test guarantees it parses */
    return ms;
}

const struct hc_cli_config *hc_cmd_config(struct hc_cmd_ctx *ctx, struct hc_error *err)
{
    struct hc_cli_config_flags flags = {ctx->g.controller, ctx->g.token, ctx->g.ca_file};
    if (ctx->config_loaded)
        return &ctx->config;
    if (hc_cli_config_load(&ctx->config, &flags, err) < 0)
        return NULL;
    ctx->config_loaded = 1;
    return &ctx->config;
}

struct hc_api_client *hc_cmd_api(struct hc_cmd_ctx *ctx, struct hc_error *err)
{
    if (ctx->api)
        return ctx->api;
    const struct hc_cli_config *cfg = hc_cmd_config(ctx, err);
    if (cfg)
        ctx->api = hc_api_client_new(cfg, ctx->g.timeout_ms, err);
    return ctx->api;
}

json_t *hc_cmd_request(struct hc_cmd_ctx *ctx, const char *method, const char *path,
                       const json_t *body, struct hc_error *err)
{
    struct hc_api_client *api = hc_cmd_api(ctx, err);
    return api ? hc_api_client_call(api, method, path, body, NULL, err) : NULL;
}

int hc_cmd_show(struct hc_cmd_ctx *ctx, const char *path, const struct hc_section *view)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    hc_output_render(&ctx->out, view, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

int hc_cmd_fail(struct hc_cmd_ctx *ctx, const struct hc_error *err, const json_t *extra)
{
    hc_output_error(&ctx->out, err, extra);
    return hc_exit_code(err);
}

int hc_cmd_usage(struct hc_cmd_ctx *ctx, const char *hint, const char *fmt, ...)
{
    struct hc_error err;
    va_list ap;
    hc_error_set(&err, 0, HC_CLI_ERR_USAGE, "%s", "");
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof(err.message), fmt, ap);
    va_end(ap);
    if (hint)
        hc_error_hint(&err, "%s", hint);
    return hc_cmd_fail(ctx, &err, NULL);
}

int hc_cmd_confirm(struct hc_cmd_ctx *ctx, struct hc_error *err, const char *fmt, ...)
{
    char what[256], *line = NULL;
    size_t cap = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (ctx->g.yes)
        return 0;
    if (!ctx->in_tty)
        return usage_error(err, "pass --yes to confirm (stdin is not a terminal)",
                           "refusing to %s without confirmation", what);
    fprintf(ctx->out.err, "%s? [y/N] ", what);
    fflush(ctx->out.err);
    ssize_t n = getline(&line, &cap, ctx->in);
    if (n > 0)
        line[strcspn(line, "\r\n")] = '\0';
    int yes = n > 0 && (strcasecmp(line, "y") == 0 || strcasecmp(line, "yes") == 0);
    free(line);
    if (yes)
        return 0;
    return hc_error_set(err, 0, "not_confirmed", "%s: not confirmed", what);
}
