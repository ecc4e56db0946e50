/*
 * hcctl's command engine: parses a command line against the tables through the shared walker
 * (common/cmdline.h: global options, group, verb, the verb's options, positional count), then
 * runs the verb's handler with a context. This is the only place that parses; handlers never
 * look at argv for options.
 */
#include "cli/cmd.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "common/util.h"

static const char *const output_choices[] = {"text", "json", NULL};

const struct hc_cmd_opt hc_cmd_global_opts[] = {
    HC_OPT(.name = "controller", .type = HC_OPT_STRING,
           .help = "controller URL, or an HA controller's URLs comma-separated (else "
                   "HCCTL_CONTROLLER, else the config file)",
           .value_name = "URL[,URL...]"),
    HC_OPT(.name = "token", .type = HC_OPT_STRING,
           .help = "API bearer token (else HCCTL_TOKEN, else the config file)",
           .value_name = "TOKEN"),
    HC_OPT(.name = "output", .short_name = 'o', .type = HC_OPT_STRING, .help = "output format",
           .value_name = "FORMAT", .completer = HC_COMPLETE_CHOICES, .def = "text",
           .choices = output_choices),
    HC_OPT(.name = "quiet", .short_name = 'q', .type = HC_OPT_BOOL,
           .help = "no progress or chatter on stderr"),
    HC_OPT(.name = "no-color", .type = HC_OPT_BOOL,
           .help = "never color the output (NO_COLOR does the same)"),
    HC_OPT(.name = "yes", .short_name = 'y', .type = HC_OPT_BOOL,
           .help = "confirm disruptive commands without asking"),
    HC_OPT(.name = "ca", .type = HC_OPT_STRING,
           .help =
               "CA certificate file of the controller (else HCCTL_CA_FILE, else the config file)",
           .value_name = "FILE", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "timeout of each request to the controller", .value_name = "DUR", .def = "30s"),
    HC_OPT(.name = "help", .short_name = 'h', .type = HC_OPT_BOOL, .help = "show help and exit"),
    {.name = NULL},
};

enum {
    G_CONTROLLER,
    G_TOKEN,
    G_OUTPUT,
    G_QUIET,
    G_NO_COLOR,
    G_YES,
    G_CA,
    G_TIMEOUT,
    G_HELP,
    G_COUNT
};

static size_t opts_count(const struct hc_cmd_opt *opts)
{
    size_t n = 0;
    while (opts && opts[n].name)
        n++;
    return n;
}

static int global_index(const struct hc_cmd_opt *o)
{
    for (int i = 0; i < G_COUNT; i++)
        if (o == &hc_cmd_global_opts[i])
            return i;
    return -1;
}

/* Where the walk's options go: the verb's slots, or the globals' (a verb option shadows a
 * global one of the same name, so the walker hands us the verb's). */
struct parse {
    struct hc_cmd_ctx *ctx;
    struct hc_opt_val *gvals;
    struct hc_error *err;
};

static int store_option(struct hc_walk *w, const struct hc_cmd_opt *o, const char *value)
{
    struct parse *p = w->arg;
    int g = global_index(o);
    struct hc_opt_val *val = g >= 0 ? &p->gvals[g] : &p->ctx->vals[o - p->ctx->verb->opts];
    return hc_cmdline_store(o, val, value, p->err);
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

/* The verb's options (plus globals after the verb) and its positionals, from words[i]. */
static int parse_verb(struct hc_cmd_ctx *ctx, struct hc_walk *w, int argc, char **argv, int i,
                      struct hc_error *err)
{
    static char *no_args[] = {NULL};
    char where[160], name[128];
    ctx->verb = w->verb;
    if (hc_walk_set(w, ctx->verb) < 0)
        return hc_cmdline_usage_error(err, NULL, "internal: too many options for '%s'",
                                      ctx->verb->name);
    ctx->vals = calloc(opts_count(ctx->verb->opts) + 1, sizeof(*ctx->vals));
    if (!ctx->vals)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    hc_cmd_verb_words(ctx->group, ctx->verb, name, sizeof(name));
    snprintf(where, sizeof(where), "see 'hcctl %s --help'", name);
    if (hc_walk_options(w, 0, argc, argv, &i) < 0)
        return hc_walk_error(w, argv, where, err);
    ctx->argc = w->npos;
    ctx->argv = w->pos ? w->pos : no_args;
    return 0;
}

/* Everything up to the handler. Returns 1 when help was printed, 0 to run, -1 on error. */
static int parse_line(struct hc_cmd_ctx *ctx, struct hc_walk *w, struct hc_opt_val *gvals, int argc,
                      char **argv, int out_tty, struct hc_error *err)
{
    struct parse p = {ctx, gvals, err};
    int i = 1;
    w->groups = ctx->groups;
    w->globals = hc_cmd_global_opts;
    w->on_option = store_option;
    w->on_err = err;
    w->arg = &p;
    hc_walk_set(w, NULL);
    if (hc_walk_options(w, 1, argc, argv, &i) < 0)
        return hc_walk_error(w, argv, "see 'hcctl --help'", err);
    apply_globals(ctx, gvals, out_tty, err);
    if (gvals[G_HELP].set) {
        hc_cmd_help_print(&ctx->out, ctx->groups, NULL, NULL);
        return 1;
    }
    if (hc_walk_words(w, argc, argv, &i) < 0) {
        if (w->stop != HC_WALK_GROUP_HELP)
            return hc_walk_words_error(w, "hcctl", argv, err);
        hc_cmd_help_print(&ctx->out, ctx->groups, w->group, NULL);
        return 1;
    }
    ctx->group = w->group;
    if (parse_verb(ctx, w, argc, argv, i, err) < 0)
        return -1;
    apply_globals(ctx, gvals, out_tty, err);
    if (gvals[G_HELP].set) {
        hc_cmd_help_print(&ctx->out, ctx->groups, ctx->group, ctx->verb);
        return 1;
    }
    return hc_cmdline_check("hcctl", ctx->group, ctx->verb, ctx->vals, ctx->argc, ctx->argv, err);
}

/* ---------------------------------------------------------------- -o json on usage errors */

static int note_output(struct hc_walk *w, const struct hc_cmd_opt *o, const char *value)
{
    if (o == &hc_cmd_global_opts[G_OUTPUT])
        *(int *)w->arg = value && strcmp(value, "json") == 0;
    return 0;
}

/* Whether the line asks for -o json anywhere: a usage error stops the parser at the bad word,
 * possibly before an "-o json" that comes later, and the error must still be the one JSON
 * document on stdout. The same walk as the parser's, passing over unknown options; after an
 * unknown group or verb the rest is read with the global options alone. The last -o wins. */
static int line_wants_json(const struct hc_cmd_group *const *groups, int argc, char **argv)
{
    int json = 0, i = 1;
    struct hc_walk w = {.groups = groups,
                        .globals = hc_cmd_global_opts,
                        .on_option = note_output,
                        .arg = &json,
                        .keep_going = 1};
    hc_walk_set(&w, NULL);
    if (hc_walk_options(&w, 1, argc, argv, &i) < 0)
        goto done;
    if (hc_walk_words(&w, argc, argv, &i) == 0) {
        if (hc_walk_set(&w, w.verb) < 0)
            goto done;
    } else if (w.stop == HC_WALK_BAD_GROUP || w.stop == HC_WALK_BAD_VERB) {
        i = w.at + 1;
    } else if (w.stop == HC_WALK_NOT_VERB) {
        i = w.at;
    } else {
        goto done;
    }
    hc_walk_options(&w, 0, argc, argv, &i);
done:
    hc_walk_clear(&w);
    return json;
}

int hc_cli_main(const struct hc_cmd_group *const *groups, int argc, char **argv,
                const struct hc_cli_io *io)
{
    struct hc_cmd_ctx ctx;
    struct hc_opt_val gvals[G_COUNT];
    struct hc_walk walk;
    struct hc_error err = {0};
    int rc;
    memset(&ctx, 0, sizeof(ctx));
    memset(gvals, 0, sizeof(gvals));
    memset(&walk, 0, sizeof(walk));
    hc_output_init(&ctx.out, io->out, io->err);
    ctx.out.now_ms = io->now_ms;
    ctx.groups = groups;
    ctx.in = io->in;
    ctx.in_tty = io->in ? stream_tty(io->in, io->in_tty) : 0;
    rc = parse_line(&ctx, &walk, gvals, argc, argv, stream_tty(io->out, io->out_tty), &err);
    if (rc < 0) {
        /* the parser may have stopped before it read -o json */
        ctx.out.json = ctx.out.json || line_wants_json(groups, argc, argv);
        rc = hc_cmd_fail(&ctx, &err, NULL);
    } else if (rc == 1) {
        rc = HC_EXIT_OK;
    } else {
        rc = ctx.verb->handler(&ctx);
    }
    fflush(io->out);
    hc_api_client_free(ctx.api);
    hc_cli_config_clear(&ctx.config);
    for (size_t i = 0; ctx.vals && ctx.verb && i < opts_count(ctx.verb->opts); i++)
        free(ctx.vals[i].list);
    free(ctx.vals);
    hc_walk_clear(&walk);
    return rc;
}

/* The value slot of a declared option; an undeclared name is a bug in the handler. */
static const struct hc_opt_val *opt_slot(const struct hc_cmd_ctx *ctx, const char *name,
                                         const struct hc_cmd_opt **opt)
{
    const struct hc_opt_val *v = hc_cmdline_slot(ctx->verb->opts, ctx->vals, name, opt);
    if (v)
        return v;
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
    return hc_cmdline_str(opt, v);
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
    return hc_cmdline_int(opt, v);
}

int64_t hc_cmd_opt_ms(const struct hc_cmd_ctx *ctx, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = opt_slot(ctx, name, &opt);
    return hc_cmdline_ms(opt, v);
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

json_t *hc_cmd_request_all(struct hc_cmd_ctx *ctx, const char *path, const char *list_key,
                           struct hc_error *err)
{
    json_t *all = hc_cmd_request(ctx, "GET", path, NULL, err);
    json_t *items = all ? json_object_get(all, list_key) : NULL;
    for (int pages = 1; items; pages++) {
        const char *after = json_string_value(json_object_get(all, "next_after"));
        if (!after)
            break;
        char next[1024];
        snprintf(next, sizeof(next), "%s", path);
        if (pages >= HC_CMD_MAX_PAGES ||
            hc_api_client_query_add(next, sizeof(next), "after", after) < 0) {
            hc_error_set(err, HC_E(INTERNAL), "cannot page through %s after '%.64s'", path, after);
            json_decref(all);
            return NULL;
        }
        json_t *page = hc_cmd_request(ctx, "GET", next, NULL, err);
        if (!page) {
            json_decref(all);
            return NULL;
        }
        json_array_extend(items, json_object_get(page, list_key));
        json_object_set(all, "next_after", json_object_get(page, "next_after"));
        json_decref(page);
    }
    if (all)
        json_object_del(all, "next_after");
    return all;
}

int hc_cmd_show_list(struct hc_cmd_ctx *ctx, const char *path, const char *list_key,
                     const struct hc_section *view)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request_all(ctx, path, list_key, &err);
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
    hc_error_set(&err, HC_E(USAGE), "%s", "");
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
        return hc_cmdline_usage_error(err, "pass --yes to confirm (stdin is not a terminal)",
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
    return hc_error_set(err, HC_E(NOT_CONFIRMED), "%s: not confirmed", what);
}
