/*
 * Help text and "did you mean", generated from the command tables: nothing here is written per
 * command, so help cannot drift from what the parser accepts. Also the docs topics (exit codes,
 * settings, ...) and `hcctl help TOPIC`, which reaches both the tables and the topics. With
 * -o json every help (`help`, `--help`, `help GROUP [VERB]`, `help TOPIC`) is one JSON document
 * built from the same tables (docs/hcctl.md "help -o json").
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/groups.h"
#include "cli/help.h"
#include "common/util.h"

void hc_cmd_usage_line(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb, char *buf,
                       size_t len)
{
    hc_cmdline_usage_line("hcctl", group, verb, buf, len);
}

static void verb_line(FILE *f, const struct hc_cmd_group *g, const struct hc_cmd_verb *v)
{
    char name[128];
    hc_cmd_verb_words(g, v, name, sizeof(name));
    fprintf(f, "  %-24s %s\n", name, v->summary ? v->summary : "");
}

void hc_cmd_help_top(FILE *f, const struct hc_cmd_group *const *groups)
{
    fprintf(f, "Usage: hcctl [OPTIONS] GROUP VERB [ARGS] [OPTIONS]\n\n"
               "Manage the storage layer of a hyperconverged cluster through its controller "
               "(hcctld).\n\nCommands:\n");
    for (size_t i = 0; groups[i]; i++)
        for (size_t j = 0; groups[i]->verbs[j].name; j++)
            if (!((groups[i]->flags | groups[i]->verbs[j].flags) & HC_CMD_HIDDEN))
                verb_line(f, groups[i], &groups[i]->verbs[j]);
    fprintf(f, "\nGlobal options (before the group, or after the verb):\n");
    hc_cmdline_help_opts(f, hc_cmd_global_opts, 0);
    fprintf(f, "\nSettings: flag, else environment (HCCTL_CONTROLLER, HCCTL_TOKEN, "
               "HCCTL_CA_FILE),\nelse $XDG_CONFIG_HOME/hcctl/config.json "
               "(~/.config/hcctl/config.json).\n"
               "Exit codes: 0 ok, 1 failed, 2 usage, 3 controller unreachable or unauthorized,\n"
               "4 a check found problems, 5 refused, 6 timed out.\n"
               "Run 'hcctl GROUP --help' or 'hcctl GROUP VERB --help' for more, 'hcctl help' for\n"
               "the docs topics (exit-codes, settings, output, ...), 'man hcctl' for all of it.\n");
}

void hc_cmd_help_group(FILE *f, const struct hc_cmd_group *group)
{
    if (group->flags & HC_GROUP_STANDALONE) {
        hc_cmd_help_verb(f, group, &group->verbs[0]);
        return;
    }
    fprintf(f, "Usage: hcctl %s VERB [ARGS] [OPTIONS]\n\n%s\n\nVerbs:\n", group->name,
            group->summary ? group->summary : "");
    for (size_t j = 0; group->verbs[j].name; j++) {
        const struct hc_cmd_verb *v = &group->verbs[j];
        if (v->flags & HC_CMD_HIDDEN)
            continue;
        /* the default verb is typed as its option ("--rolling"), never by its name */
        fprintf(f, "  %-12s %s\n", hc_cmd_default_verb(group) == v && v->usage ? v->usage : v->name,
                v->summary ? v->summary : "");
    }
    fprintf(f, "\nRun 'hcctl %s VERB --help' for a verb's options.\n", group->name);
}

void hc_cmd_help_verb(FILE *f, const struct hc_cmd_group *group, const struct hc_cmd_verb *verb)
{
    char usage[256];
    const struct hc_cmd_opt *yes = NULL;
    hc_cmd_usage_line(group, verb, usage, sizeof(usage));
    fprintf(f, "Usage: %s\n\n%s\n", usage, verb->summary ? verb->summary : "");
    /* Disruptive verbs show the global --yes: it is part of how they are used. */
    for (size_t i = 0; (verb->flags & HC_CMD_DISRUPTIVE) && hc_cmd_global_opts[i].name; i++)
        if (strcmp(hc_cmd_global_opts[i].name, "yes") == 0)
            yes = &hc_cmd_global_opts[i];
    int width = hc_cmdline_opts_width(verb->opts, yes ? hc_cmdline_opt_width(yes) : 0);
    if (verb->opts || yes)
        fprintf(f, "\nOptions:\n");
    if (yes)
        hc_cmdline_help_opt(f, yes, width);
    hc_cmdline_help_opts(f, verb->opts, width);
    fprintf(f, "\nGlobal options: see 'hcctl --help'.\n");
}

/* ---------------------------------------------------------------- help as JSON */

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *opt_json(const struct hc_cmd_opt *o)
{
    static const char *const types[] = {"bool", "string", "int", "duration", "list"};
    char shortname[2] = {o->short_name, 0};
    json_t *choices = json_null();
    if (o->choices) {
        choices = json_array();
        for (size_t i = 0; o->choices[i]; i++)
            json_array_append_new(choices, json_string(o->choices[i]));
    }
    return json_pack("{s:s, s:o, s:s, s:b, s:o, s:o, s:o, s:o}", "name", o->name, "short",
                     o->short_name ? json_string(shortname) : json_null(), "type",
                     (unsigned)o->type < HC_ARRAY_LEN(types) ? types[o->type] : "string",
                     "required", o->required, "value_name", str_or_null(o->value_name), "default",
                     str_or_null(o->def), "choices", choices, "help", str_or_null(o->help));
}

static json_t *opts_json(const struct hc_cmd_opt *opts, const struct hc_cmd_opt *extra)
{
    json_t *a = json_array();
    if (extra)
        json_array_append_new(a, opt_json(extra));
    for (size_t i = 0; opts && opts[i].name; i++)
        json_array_append_new(a, opt_json(&opts[i]));
    return a;
}

static json_t *verb_json(const struct hc_cmd_group *g, const struct hc_cmd_verb *v)
{
    char words[128], usage[256];
    const struct hc_cmd_opt *yes = NULL;
    hc_cmd_verb_words(g, v, words, sizeof(words));
    hc_cmd_usage_line(g, v, usage, sizeof(usage));
    for (size_t i = 0; (v->flags & HC_CMD_DISRUPTIVE) && hc_cmd_global_opts[i].name; i++)
        if (strcmp(hc_cmd_global_opts[i].name, "yes") == 0)
            yes = &hc_cmd_global_opts[i];
    unsigned flags = g->flags | v->flags;
    return json_pack("{s:s, s:s, s:o, s:s, s:s, s:b, s:b, s:o}", "command", words, "group", g->name,
                     "verb", g->flags & HC_GROUP_STANDALONE ? json_null() : json_string(v->name),
                     "summary", v->summary ? v->summary : "", "usage", usage, "disruptive",
                     (flags & HC_CMD_DISRUPTIVE) != 0, "offline", (flags & HC_CMD_OFFLINE) != 0,
                     "options", opts_json(v->opts, yes));
}

static json_t *group_commands_json(const struct hc_cmd_group *g)
{
    json_t *a = json_array();
    for (size_t j = 0; g->verbs[j].name; j++)
        if (!((g->flags | g->verbs[j].flags) & HC_CMD_HIDDEN))
            json_array_append_new(a, verb_json(g, &g->verbs[j]));
    return a;
}

static json_t *top_json(const struct hc_cmd_group *const *groups)
{
    static const char *const exits[] = {"ok",
                                        "failed",
                                        "usage",
                                        "controller unreachable or unauthorized",
                                        "a check found problems",
                                        "refused (conflict or unsafe precondition)",
                                        "timed out"};
    json_t *commands = json_array(), *topics = json_array(), *codes = json_array();
    for (size_t i = 0; groups[i]; i++)
        if (!(groups[i]->flags & HC_CMD_HIDDEN)) {
            json_t *more = group_commands_json(groups[i]);
            json_array_extend(commands, more);
            json_decref(more);
        }
    for (size_t i = 0; hc_help_topics[i].name; i++)
        json_array_append_new(topics, json_pack("{s:s, s:s}", "name", hc_help_topics[i].name,
                                                "summary", hc_help_topics[i].summary));
    for (size_t i = 0; i < HC_ARRAY_LEN(exits); i++)
        json_array_append_new(codes, json_pack("{s:i, s:s}", "code", (int)i, "meaning", exits[i]));
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "usage",
                     "hcctl [OPTIONS] GROUP VERB [ARGS] [OPTIONS]", "commands", commands,
                     "global_options", opts_json(hc_cmd_global_opts, NULL), "topics", topics,
                     "exit_codes", codes);
}

static json_t *group_json(const struct hc_cmd_group *g)
{
    if (g->flags & HC_GROUP_STANDALONE)
        return verb_json(g, &g->verbs[0]);
    return json_pack("{s:s, s:s, s:o}", "group", g->name, "summary", g->summary ? g->summary : "",
                     "commands", group_commands_json(g));
}

static json_t *topic_json(const struct hc_help_topic *t)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "topic", t->name, "title", t->title, "summary",
                     t->summary, "text", t->text);
}

static int help_out(struct hc_output *o, json_t *doc)
{
    hc_output_json(o, doc);
    json_decref(doc);
    return 0;
}

int hc_cmd_help_print(struct hc_output *o, const struct hc_cmd_group *const *groups,
                      const struct hc_cmd_group *group, const struct hc_cmd_verb *verb)
{
    if (o->json)
        return help_out(o, verb    ? verb_json(group, verb)
                           : group ? group_json(group)
                                   : top_json(groups));
    if (verb)
        hc_cmd_help_verb(o->out, group, verb);
    else if (group)
        hc_cmd_help_group(o->out, group);
    else
        hc_cmd_help_top(o->out, groups);
    return 0;
}

/* ---------------------------------------------------------------- docs topics and `help` */

const struct hc_help_topic hc_help_topics[] = {
    {"exit-codes", "EXIT STATUS", "what hcctl's exit codes mean (scripts branch on them)",
     "Every command exits with one of these codes; scripts may rely on them.\n"
     "\n"
     "  0  ok\n"
     "  1  failed: the command or the operation failed (404, other 4xx/5xx, a failed or\n"
     "     aborted operation, a broken config file, a disruptive command not confirmed)\n"
     "  2  usage: bad command line, no controller configured, or a disruptive command\n"
     "     without --yes and without a terminal\n"
     "  3  controller unreachable or unauthorized: connection refused, TLS failure, 401, 403\n"
     "  4  a check found problems\n"
     "  5  refused: 409 conflict or an unsafe precondition (another disruptive operation runs)\n"
     "  6  timed out: a request timed out, or a wait ran out of --timeout\n"},
    {"settings", "ENVIRONMENT", "where the controller URL, the token and the CA come from",
     "Each setting is taken, independently, from the first of: the flag (--controller,\n"
     "--token, --ca), the environment (HCCTL_CONTROLLER, HCCTL_TOKEN, HCCTL_CA_FILE; empty\n"
     "counts as unset), the config file.\n"
     "\n"
     "The config file is $XDG_CONFIG_HOME/hcctl/config.json, or ~/.config/hcctl/config.json;\n"
     "'hcctld init' writes it (mode 0600):\n"
     "\n"
     "  {\"controller\": \"https://127.0.0.1:7443\", \"token\": \"hct1...\", \"ca_pem\": \"...\"}\n"
     "\n"
     "Prefer HCCTL_TOKEN or the config file to --token: a command line is visible in ps.\n"
     "NO_COLOR (non-empty) turns colors off, like --no-color. The shell keeps its history in\n"
     "$XDG_STATE_HOME/hcctl/history (default ~/.local/state/hcctl/history).\n"},
    {"output", "OUTPUT", "text tables, -o json documents, and where chatter goes",
     "Data goes to stdout; progress, confirmations and other chatter go to stderr, and -q\n"
     "silences the chatter (never the data or the errors).\n"
     "\n"
     "Text output is aligned tables and key/value lists; tables show ages (12s ago), key/value\n"
     "views show RFC 3339 times with the age. Colors only on a terminal, never with\n"
     "--no-color or NO_COLOR.\n"
     "\n"
     "With -o json, stdout holds exactly one JSON document for every command (events --follow\n"
     "streams JSON Lines instead); keys are snake_case and are API. An error is also printed\n"
     "on stdout in the API's shape:\n"
     "\n"
     "  {\"error\": {\"code\": \"not_found\", \"message\": \"...\", \"hint\": \"...\"}}\n"},
    {"durations", "DURATIONS", "how to write a duration (--timeout 30s)",
     "Durations (DUR) are 250ms, 30s, 5m, 2h, 1d, combinations such as 1m30s, or a bare\n"
     "number of seconds.\n"},
    {"progress", "PROGRESS", "how commands follow long operations",
     "Long work runs on the controller as an operation; commands that start one follow it\n"
     "until it ends (--no-wait returns at once with its id; 'operation wait ID' follows it\n"
     "again). On a terminal, hcctl shows one line per node, updated in place, with the\n"
     "operation's elapsed time and an estimate of the time left. Elsewhere (a pipe, a file)\n"
     "it prints one plain line per event instead; -q prints nothing. With -o json stdout\n"
     "holds only the final document.\n"
     "\n"
     "The exit code tells how it ended: 0 succeeded, 1 failed or aborted, 6 --timeout ran\n"
     "out (the operation goes on in the controller).\n"},
    {"shell", "INTERACTIVE SHELL", "hcctl shell: history, completion, the same commands",
     "'hcctl shell' reads commands with line editing: type a command without the leading\n"
     "hcctl ('node list'). TAB completes groups, verbs, options and values, including node\n"
     "names, operation ids and bundle versions asked from the controller. Quotes work as in\n"
     "sh. 'help TOPIC' shows help; 'exit', 'quit' or Ctrl-D leave. Global options given to\n"
     "'hcctl shell' apply to every command in it. History: $XDG_STATE_HOME/hcctl/history.\n"},
    {"completion", "COMPLETION", "installing bash, zsh and fish completion",
     "'hcctl completion SHELL' prints a completion script; every completion asks hcctl\n"
     "itself, so node names, operation ids and bundle versions come from the controller.\n"
     "\n"
     "  bash: hcctl completion bash > /usr/share/bash-completion/completions/hcctl\n"
     "  zsh:  hcctl completion zsh > \"${fpath[1]}/_hcctl\"\n"
     "  fish: hcctl completion fish > ~/.config/fish/completions/hcctl.fish\n"
     "\n"
     "Packages install all three.\n"},
    {NULL, NULL, NULL, NULL},
};

const struct hc_help_topic *hc_help_topic_find(const char *name)
{
    for (size_t i = 0; hc_help_topics[i].name; i++)
        if (strcmp(hc_help_topics[i].name, name) == 0)
            return &hc_help_topics[i];
    return NULL;
}

/* Visible group names and docs topics, for "did you mean". */
static void topic_names(const struct hc_cmd_group *const *groups, const char **names, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; groups[i] && n + 1 < cap; i++)
        if (!(groups[i]->flags & HC_CMD_HIDDEN))
            names[n++] = groups[i]->name;
    for (size_t i = 0; hc_help_topics[i].name && n + 1 < cap; i++)
        names[n++] = hc_help_topics[i].name;
    names[n] = NULL;
}

static void help_topics_list(FILE *f)
{
    fprintf(f, "\nHelp topics ('hcctl help TOPIC'):\n");
    for (size_t i = 0; hc_help_topics[i].name; i++)
        fprintf(f, "  %-24s %s\n", hc_help_topics[i].name, hc_help_topics[i].summary);
}

/* `hcctl help [GROUP [VERB] | TOPIC]`. */
static int cmd_help(struct hc_cmd_ctx *ctx)
{
    const char *names[96], *guess;
    char hint[160];
    FILE *f = ctx->out.out;
    if (ctx->argc == 0) {
        hc_cmd_help_print(&ctx->out, ctx->groups, NULL, NULL);
        if (!ctx->out.json)
            help_topics_list(f);
        return 0;
    }
    const struct hc_cmd_group *g = hc_cmd_find_group(ctx->groups, ctx->argv[0]);
    const struct hc_help_topic *t = g ? NULL : hc_help_topic_find(ctx->argv[0]);
    if (t && ctx->argc == 1) {
        if (ctx->out.json)
            return help_out(&ctx->out, topic_json(t));
        fprintf(f, "%s\n\n%s", t->summary, t->text);
        return 0;
    }
    if (g && ctx->argc == 1 && ctx->out.json)
        return hc_cmd_help_print(&ctx->out, ctx->groups, g, NULL);
    if (g && ctx->argc == 1) {
        hc_cmd_help_group(f, g);
        /* a group may have a topic of the same name: how to set it up ("help completion") */
        if ((t = hc_help_topic_find(g->name)))
            fprintf(f, "\n%s", t->text);
        return 0;
    }
    const struct hc_cmd_verb *v = g && ctx->argc == 2 && !(g->flags & HC_GROUP_STANDALONE)
                                      ? hc_cmd_find_verb(g, ctx->argv[1])
                                      : NULL;
    if (v)
        return hc_cmd_help_print(&ctx->out, ctx->groups, g, v);
    if (g && ctx->argc == 2 && !(g->flags & HC_GROUP_STANDALONE)) {
        snprintf(hint, sizeof(hint), "see 'hcctl help %s' for its verbs", g->name);
        return hc_cmd_usage(ctx, hint, "no help topic '%s %s'", g->name, ctx->argv[1]);
    }
    if (g || t)
        return hc_cmd_usage(ctx, "a topic is a group, 'GROUP VERB', or a docs topic",
                            "too many words for 'hcctl help'");
    topic_names(ctx->groups, names, HC_ARRAY_LEN(names));
    guess = hc_cmd_suggest(ctx->argv[0], names);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '%s'? ('hcctl help' lists the topics)", guess);
    else
        snprintf(hint, sizeof(hint), "'hcctl help' lists the groups and topics");
    return hc_cmd_usage(ctx, hint, "no help topic '%s'", ctx->argv[0]);
}

static const struct hc_cmd_verb help_verbs[] = {
    HC_VERB(.name = "help", .handler = cmd_help, .max_args = 2,
            .summary = "help on a group, a verb ('help node show') or a topic ('help exit-codes')",
            .usage = "[GROUP [VERB] | TOPIC]", .flags = HC_CMD_OFFLINE,
            .arg_completer = HC_COMPLETE_TOPIC),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_help = {
    .name = "help",
    .summary = "help on commands and topics",
    .verbs = help_verbs,
    .flags = HC_GROUP_STANDALONE,
};
