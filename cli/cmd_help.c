/*
 * Help text and "did you mean", generated from the command tables: nothing here is written per
 * command, so help cannot drift from what the parser accepts.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "common/util.h"

const struct hc_cmd_group *hc_cmd_find_group(const struct hc_cmd_group *const *groups,
                                             const char *name)
{
    for (size_t i = 0; groups[i]; i++)
        if (strcmp(groups[i]->name, name) == 0)
            return groups[i];
    return NULL;
}

const struct hc_cmd_verb *hc_cmd_find_verb(const struct hc_cmd_group *group, const char *name)
{
    for (size_t i = 0; group->verbs[i].name; i++)
        if (strcmp(group->verbs[i].name, name) == 0)
            return &group->verbs[i];
    return NULL;
}

int hc_cmd_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            /* a transposition of two adjacent characters counts as one edit */
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *hc_cmd_suggest(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; candidates[i]; i++) {
        int d = hc_cmd_distance(word, candidates[i]);
        /* one- and two-letter words are within 2 edits of everything short: need d < len */
        if (d < best_d && (size_t)d < strlen(word)) {
            best = candidates[i];
            best_d = d;
        }
    }
    return best;
}

static void required_opts(const struct hc_cmd_opt *opts, char *buf, size_t len)
{
    size_t used = strlen(buf);
    for (size_t i = 0; opts && opts[i].name && used < len; i++)
        if (opts[i].required)
            used += snprintf(buf + used, len - used, " --%s %s", opts[i].name,
                             opts[i].value_name ? opts[i].value_name : "VALUE");
}

void hc_cmd_usage_line(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb,
                       char *buf, size_t len)
{
    if (group->flags & HC_GROUP_STANDALONE)
        snprintf(buf, len, "hcctl %s", group->name);
    else
        snprintf(buf, len, "hcctl %s %s", group->name, verb->name);
    if (verb->usage) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " %s", verb->usage);
    }
    required_opts(verb->opts, buf, len);
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, " [OPTIONS]");
}

/* "-o, --output FORMAT" or "    --no-wait". */
static void opt_synopsis(const struct hc_cmd_opt *o, char *buf, size_t len)
{
    char shortpart[8] = "    ";
    if (o->short_name)
        snprintf(shortpart, sizeof(shortpart), "-%c, ", o->short_name);
    snprintf(buf, len, "%s--%s%s%s", shortpart, o->name, o->value_name ? " " : "",
             o->value_name ? o->value_name : "");
}

static void opt_help(FILE *f, const struct hc_cmd_opt *o, int width)
{
    char syn[96], extra[256] = "";
    size_t used = 0;
    opt_synopsis(o, syn, sizeof(syn));
    if (o->choices) {
        used += snprintf(extra + used, sizeof(extra) - used, ": ");
        for (size_t i = 0; o->choices[i] && used < sizeof(extra); i++)
            used += snprintf(extra + used, sizeof(extra) - used, "%s%s", i ? "|" : "",
                             o->choices[i]);
    }
    if (o->def && used < sizeof(extra))
        snprintf(extra + used, sizeof(extra) - used, " (default %s)", o->def);
    if (o->required && used < sizeof(extra))
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " (required)");
    fprintf(f, "  %-*s  %s%s\n", width, syn, o->help ? o->help : "", extra);
}

static int opts_width(const struct hc_cmd_opt *opts, int width)
{
    char syn[96];
    for (size_t i = 0; opts && opts[i].name; i++) {
        opt_synopsis(&opts[i], syn, sizeof(syn));
        if ((int)strlen(syn) > width)
            width = (int)strlen(syn);
    }
    return width;
}

static void verb_line(FILE *f, const struct hc_cmd_group *g, const struct hc_cmd_verb *v)
{
    char name[96];
    if (g->flags & HC_GROUP_STANDALONE)
        snprintf(name, sizeof(name), "%s", g->name);
    else
        snprintf(name, sizeof(name), "%s %s", g->name, v->name);
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
    int width = opts_width(hc_cmd_global_opts, 0);
    for (size_t i = 0; hc_cmd_global_opts[i].name; i++)
        opt_help(f, &hc_cmd_global_opts[i], width);
    fprintf(f, "\nSettings: flag, else environment (HCCTL_CONTROLLER, HCCTL_TOKEN, "
               "HCCTL_CA_FILE),\nelse $XDG_CONFIG_HOME/hcctl/config.json "
               "(~/.config/hcctl/config.json).\n"
               "Exit codes: 0 ok, 1 failed, 2 usage, 3 controller unreachable or unauthorized,\n"
               "4 a check found problems, 5 refused, 6 timed out.\n"
               "Run 'hcctl GROUP --help' or 'hcctl GROUP VERB --help' for more.\n");
}

void hc_cmd_help_group(FILE *f, const struct hc_cmd_group *group)
{
    if (group->flags & HC_GROUP_STANDALONE) {
        hc_cmd_help_verb(f, group, &group->verbs[0]);
        return;
    }
    fprintf(f, "Usage: hcctl %s VERB [ARGS] [OPTIONS]\n\n%s\n\nVerbs:\n", group->name,
            group->summary ? group->summary : "");
    for (size_t j = 0; group->verbs[j].name; j++)
        if (!(group->verbs[j].flags & HC_CMD_HIDDEN))
            fprintf(f, "  %-12s %s\n", group->verbs[j].name,
                    group->verbs[j].summary ? group->verbs[j].summary : "");
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
    char syn[96] = "";
    if (yes)
        opt_synopsis(yes, syn, sizeof(syn));
    int width = opts_width(verb->opts, (int)strlen(syn));
    if (verb->opts || yes)
        fprintf(f, "\nOptions:\n");
    if (yes)
        opt_help(f, yes, width);
    for (size_t i = 0; verb->opts && verb->opts[i].name; i++)
        opt_help(f, &verb->opts[i], width);
    fprintf(f, "\nGlobal options: see 'hcctl --help'.\n");
}
