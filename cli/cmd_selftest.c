/*
 * `hcctl self-test` (hidden): validates every command table, so that a table mistake (missing
 * help, duplicate name, impossible argument count, undocumented required option, a default that
 * does not parse) fails a test instead of confusing a user. Runs in CI through test_cli.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/exit_codes.h"
#include "common/util.h"

struct checker {
    FILE *report;
    int problems;
    int verbs, opts;
};

static void problem(struct checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct checker *c, const char *fmt, ...)
{
    va_list ap;
    c->problems++;
    if (!c->report)
        return;
    va_start(ap, fmt);
    vfprintf(c->report, fmt, ap);
    va_end(ap);
    fputc('\n', c->report);
}

static int empty(const char *s)
{
    return !s || !s[0];
}

static int in_list(const char *word, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(word, list[i]) == 0)
            return 1;
    return 0;
}

/* The default must be a value the parser itself would accept. */
static void check_default(struct checker *c, const char *where, const struct hc_cmd_opt *o)
{
    char *end;
    int64_t ms;
    if (!o->def)
        return;
    if (o->required)
        problem(c, "%s --%s: required and has a default", where, o->name);
    if (o->type == HC_OPT_INT && (strtoll(o->def, &end, 10), *end || !o->def[0]))
        problem(c, "%s --%s: default '%s' is not an integer", where, o->name, o->def);
    if (o->type == HC_OPT_DURATION && hc_duration_parse(o->def, &ms, NULL) < 0)
        problem(c, "%s --%s: default '%s' is not a duration", where, o->name, o->def);
    if (o->choices && !in_list(o->def, o->choices))
        problem(c, "%s --%s: default '%s' is not one of its choices", where, o->name, o->def);
}

static void check_opt(struct checker *c, const char *where, const struct hc_cmd_opt *o)
{
    c->opts++;
    if (o->name[0] == '-' || strchr(o->name, '='))
        problem(c, "%s --%s: bad option name", where, o->name);
    if (empty(o->help))
        problem(c, "%s --%s: no help text", where, o->name);
    if (o->type == HC_OPT_BOOL &&
        (o->value_name || o->required || o->def || o->choices || o->completer))
        problem(c,
                "%s --%s: a flag takes no value name, default, choices, completer, and "
                "cannot be required",
                where, o->name);
    if (o->type != HC_OPT_BOOL && empty(o->value_name))
        problem(c, "%s --%s: takes a value but has no value name", where, o->name);
    if (o->choices && o->type != HC_OPT_STRING)
        problem(c, "%s --%s: choices on a non-string option", where, o->name);
    if ((o->completer == HC_COMPLETE_CHOICES) != (o->choices != NULL))
        problem(c, "%s --%s: choices and the choices completer go together", where, o->name);
    check_default(c, where, o);
}

/* Duplicates inside one table, and short letters that clash with a different global option. */
static void check_opt_table(struct checker *c, const char *where, const struct hc_cmd_opt *opts,
                            int is_global)
{
    for (size_t i = 0; opts && opts[i].name; i++) {
        check_opt(c, where, &opts[i]);
        if (!is_global && strcmp(opts[i].name, "help") == 0)
            problem(c, "%s --help: reserved for the engine", where);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(opts[i].name, opts[j].name) == 0)
                problem(c, "%s --%s: declared twice", where, opts[i].name);
            if (opts[i].short_name && opts[i].short_name == opts[j].short_name)
                problem(c, "%s -%c: used by two options", where, opts[i].short_name);
        }
        for (size_t g = 0; !is_global && hc_cmd_global_opts[g].name; g++)
            if (opts[i].short_name && opts[i].short_name == hc_cmd_global_opts[g].short_name &&
                strcmp(opts[i].name, hc_cmd_global_opts[g].name) != 0)
                problem(c, "%s -%c: clashes with global --%s", where, opts[i].short_name,
                        hc_cmd_global_opts[g].name);
    }
}

/* A group's default verb is never typed by name: its usage is the flag that selects it
 * ("--rolling"), which help, messages and completion show instead, so it must be one of the
 * verb's own flags. */
static void check_default_verb(struct checker *c, const char *where, const struct hc_cmd_verb *v)
{
    const char *flag = v->usage && strncmp(v->usage, "--", 2) == 0 ? v->usage + 2 : NULL;
    size_t i = 0;
    while (flag && v->opts && v->opts[i].name &&
           (strcmp(v->opts[i].name, flag) != 0 || v->opts[i].type != HC_OPT_BOOL))
        i++;
    if (!flag || !v->opts || !v->opts[i].name)
        problem(c, "%s: a default verb's usage is one of its flags (\"--rolling\")", where);
    if (v->max_args != 0)
        problem(c, "%s: a default verb takes no positional arguments", where);
}

static void check_verb(struct checker *c, const struct hc_cmd_group *g, const struct hc_cmd_verb *v)
{
    char where[128];
    c->verbs++;
    snprintf(where, sizeof(where), "%s %s", g->name, v->name);
    if (!v->handler)
        problem(c, "%s: no handler", where);
    if (empty(v->summary))
        problem(c, "%s: no summary", where);
    if (v->min_args < 0 || (v->max_args != HC_ARGS_MANY && v->max_args < v->min_args))
        problem(c, "%s: min_args %d > max_args %d", where, v->min_args, v->max_args);
    if (v == hc_cmd_default_verb(g))
        check_default_verb(c, where, v);
    else if ((v->max_args != 0) != !empty(v->usage))
        problem(c, "%s: positional arguments and the usage text go together", where);
    if (v->arg_completer == HC_COMPLETE_CHOICES ||
        (v->arg_completer != HC_COMPLETE_NONE && v->max_args == 0))
        problem(c, "%s: completer for positional arguments it does not take", where);
    check_opt_table(c, where, v->opts, 0);
}

static void check_group(struct checker *c, const struct hc_cmd_group *const *groups, size_t gi)
{
    const struct hc_cmd_group *g = groups[gi];
    size_t n = 0;
    if (empty(g->name) || empty(g->summary) || !g->verbs) {
        problem(c, "group #%zu: needs a name, a summary and a verb table", gi);
        return;
    }
    for (size_t j = 0; j < gi; j++)
        if (strcmp(groups[j]->name, g->name) == 0)
            problem(c, "%s: group declared twice", g->name);
    for (; g->verbs[n].name; n++) {
        check_verb(c, g, &g->verbs[n]);
        for (size_t j = 0; j < n; j++)
            if (strcmp(g->verbs[j].name, g->verbs[n].name) == 0)
                problem(c, "%s %s: verb declared twice", g->name, g->verbs[n].name);
    }
    if ((g->flags & HC_GROUP_STANDALONE) && (n != 1 || strcmp(g->verbs[0].name, g->name) != 0))
        problem(c, "%s: a standalone group has exactly one verb with its name", g->name);
    if (n == 0)
        problem(c, "%s: no verbs", g->name);
}

int hc_cmd_self_test(const struct hc_cmd_group *const *groups, FILE *report)
{
    struct checker c = {report, 0, 0, 0};
    check_opt_table(&c, "global", hc_cmd_global_opts, 1);
    for (size_t i = 0; groups[i]; i++)
        check_group(&c, groups, i);
    return c.problems;
}

/* Handler: problems as a list; exit 4 (a check found problems) when there are any. */
static int cmd_self_test(struct hc_cmd_ctx *ctx)
{
    char *text = NULL;
    size_t len = 0, groups = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return HC_EXIT_FAILED;
    int problems = hc_cmd_self_test(ctx->groups, mem);
    fclose(mem);
    json_t *list = json_array();
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        json_array_append_new(list, json_string(line));
    free(text);
    while (ctx->groups[groups])
        groups++;
    json_t *doc =
        json_pack("{s:b, s:i, s:o}", "ok", problems == 0, "groups", (int)groups, "problems", list);
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
    } else {
        for (size_t i = 0; i < json_array_size(list); i++)
            fprintf(ctx->out.out, "problem: %s\n", json_string_value(json_array_get(list, i)));
        fprintf(ctx->out.out, "self-test: %d problem%s in %zu groups\n", problems,
                problems == 1 ? "" : "s", groups);
    }
    json_decref(doc);
    return problems ? HC_EXIT_CHECK : HC_EXIT_OK;
}

static const struct hc_cmd_verb self_test_verbs[] = {
    HC_VERB(.name = "self-test", .handler = cmd_self_test,
            .summary = "validate every command table (for developers)",
            .flags = HC_CMD_HIDDEN | HC_CMD_OFFLINE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_self_test = {
    .name = "self-test",
    .summary = "validate every command table",
    .verbs = self_test_verbs,
    .flags = HC_GROUP_STANDALONE | HC_CMD_HIDDEN,
};
