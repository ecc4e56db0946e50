/*
 * The command-line engine (see cmdline.h): the walker over a command line's words, typed
 * values and their usage errors, lookups, "did you mean", and help text from the tables.
 */
#include "common/cmdline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

const struct hc_cmd_opt hc_cmdline_help_only[] = {
    HC_OPT(.name = "help", .short_name = 'h', .type = HC_OPT_BOOL, .help = "show help and exit"),
    {.name = NULL},
};

/* ---------------------------------------------------------------- lookups */

const struct hc_cmd_group *hc_cmd_find_group(const struct hc_cmd_group *const *groups,
                                             const char *name)
{
    for (size_t i = 0; groups && groups[i]; i++)
        if (strcmp(groups[i]->name, name) == 0)
            return groups[i];
    return NULL;
}

static int is_default_verb(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb)
{
    return !(group->flags & HC_GROUP_STANDALONE) && strcmp(verb->name, group->name) == 0;
}

const struct hc_cmd_verb *hc_cmd_find_verb(const struct hc_cmd_group *group, const char *name)
{
    for (size_t i = 0; group->verbs[i].name; i++)
        if (strcmp(group->verbs[i].name, name) == 0 && !is_default_verb(group, &group->verbs[i]))
            return &group->verbs[i];
    return NULL;
}

const struct hc_cmd_verb *hc_cmd_default_verb(const struct hc_cmd_group *group)
{
    for (size_t i = 0; group->verbs[i].name; i++)
        if (is_default_verb(group, &group->verbs[i]))
            return &group->verbs[i];
    return NULL;
}

void hc_cmd_verb_words(const struct hc_cmd_group *group, const struct hc_cmd_verb *verb, char *buf,
                       size_t len)
{
    if (group->flags & HC_GROUP_STANDALONE)
        snprintf(buf, len, "%s", group->name);
    else if (is_default_verb(group, verb))
        snprintf(buf, len, "%s%s%s", group->name, verb->usage ? " " : "",
                 verb->usage ? verb->usage : "");
    else
        snprintf(buf, len, "%s %s", group->name, verb->name);
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

/* ---------------------------------------------------------------- the walker */

int hc_walk_set(struct hc_walk *w, const struct hc_cmd_verb *verb)
{
    size_t n = 0;
    for (size_t i = 0; verb && verb->opts && verb->opts[i].name; i++) {
        if (n == HC_WALK_MAX_OPTS)
            return -1;
        w->set[n++] = &verb->opts[i];
    }
    for (size_t i = 0; w->globals && w->globals[i].name; i++) {
        int shadowed = 0;
        for (size_t j = 0; verb && verb->opts && verb->opts[j].name; j++)
            shadowed |= strcmp(verb->opts[j].name, w->globals[i].name) == 0;
        if (shadowed)
            continue;
        if (n == HC_WALK_MAX_OPTS)
            return -1;
        w->set[n++] = &w->globals[i];
    }
    w->nset = n;
    return 0;
}

const struct hc_cmd_opt *hc_walk_find_long(const struct hc_walk *w, const char *name, size_t len)
{
    const struct hc_cmd_opt *prefix = NULL;
    int nprefix = 0;
    for (size_t i = 0; i < w->nset; i++) {
        if (strncmp(w->set[i]->name, name, len) != 0)
            continue;
        if (strlen(w->set[i]->name) == len)
            return w->set[i];
        if (!prefix)
            prefix = w->set[i];
        nprefix++;
    }
    return nprefix == 1 ? prefix : NULL;
}

static const struct hc_cmd_opt *find_short(const struct hc_walk *w, char c)
{
    for (size_t i = 0; i < w->nset; i++)
        if (w->set[i]->short_name == c)
            return w->set[i];
    return NULL;
}

static int walk_stop(struct hc_walk *w, enum hc_walk_stop stop, int at)
{
    w->stop = stop;
    w->at = at;
    return -1;
}

/* Hands one option to the caller. */
static int walk_hit(struct hc_walk *w, const struct hc_cmd_opt *o, const char *value, int at)
{
    if (w->on_option && w->on_option(w, o, value) < 0)
        return walk_stop(w, HC_WALK_CALLBACK, at);
    return 0;
}

/* "--name", "--name=value", "--name value". */
static int walk_long(struct hc_walk *w, int nwords, char *const *words, int *i)
{
    const char *word = words[*i], *eq = strchr(word + 2, '=');
    int at = (*i)++;
    const struct hc_cmd_opt *o =
        hc_walk_find_long(w, word + 2, eq ? (size_t)(eq - word - 2) : strlen(word + 2));
    if (!o)
        return w->keep_going ? 0 : walk_stop(w, HC_WALK_UNKNOWN_LONG, at);
    if (o->type == HC_OPT_BOOL) {
        if (eq) {
            w->opt = o;
            return w->keep_going ? 0 : walk_stop(w, HC_WALK_NO_VALUE, at);
        }
        return walk_hit(w, o, NULL, at);
    }
    if (eq)
        return walk_hit(w, o, eq + 1, at);
    if (*i >= nwords) {
        w->opt = o;
        return walk_stop(w, HC_WALK_VALUE, at);
    }
    return walk_hit(w, o, words[(*i)++], at);
}

/* "-q", "-qy", "-ojson", "-o json". */
static int walk_short(struct hc_walk *w, int nwords, char *const *words, int *i)
{
    const char *word = words[*i];
    int at = (*i)++;
    for (const char *p = word + 1; *p; p++) {
        const struct hc_cmd_opt *o = find_short(w, *p);
        if (!o) {
            if (w->keep_going)
                continue;
            w->letter = *p;
            return walk_stop(w, HC_WALK_UNKNOWN_SHORT, at);
        }
        if (o->type == HC_OPT_BOOL) {
            if (walk_hit(w, o, NULL, at) < 0)
                return -1;
            continue;
        }
        if (p[1])
            return walk_hit(w, o, p + 1, at);
        if (*i >= nwords) {
            w->opt = o;
            return walk_stop(w, HC_WALK_VALUE, at);
        }
        return walk_hit(w, o, words[(*i)++], at);
    }
    return 0;
}

static int add_pos(struct hc_walk *w, char *word)
{
    char **grown = realloc(w->pos, (size_t)(w->npos + 2) * sizeof(*grown));
    if (!grown)
        return -1;
    grown[w->npos++] = word;
    grown[w->npos] = NULL;
    w->pos = grown;
    return 0;
}

int hc_walk_options(struct hc_walk *w, int posix, int nwords, char *const *words, int *i)
{
    w->stop = HC_WALK_OK;
    while (*i < nwords) {
        char *word = words[*i];
        int rc;
        if (w->dashdash || word[0] != '-' || !word[1]) {
            if (posix)
                return 0;
            if (add_pos(w, word) < 0) {
                hc_error_set_transport(w->on_err, HC_E(INTERNAL), "out of memory");
                return walk_stop(w, HC_WALK_CALLBACK, *i);
            }
            (*i)++;
            continue;
        }
        if (strcmp(word, "--") == 0) {
            (*i)++;
            if (posix) /* "hcctl -- node list": the group word follows */
                return 0;
            w->dashdash = 1;
            continue;
        }
        rc = word[1] == '-' ? walk_long(w, nwords, words, i) : walk_short(w, nwords, words, i);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int hc_walk_words(struct hc_walk *w, int nwords, char *const *words, int *i)
{
    w->stop = HC_WALK_OK;
    if (!w->groups)
        return 0;
    if (*i >= nwords)
        return walk_stop(w, HC_WALK_NO_GROUP, *i);
    w->group = hc_cmd_find_group(w->groups, words[*i]);
    if (!w->group)
        return walk_stop(w, HC_WALK_BAD_GROUP, *i);
    if (w->group->flags & HC_GROUP_STANDALONE) {
        w->verb = &w->group->verbs[0];
        (*i)++;
        return 0;
    }
    const char *word = ++*i < nwords ? words[*i] : NULL;
    if (!word)
        return walk_stop(w, HC_WALK_NO_VERB, *i);
    if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0)
        return walk_stop(w, HC_WALK_GROUP_HELP, *i);
    if (word[0] == '-') {
        /* A verb named like its group is the group's default form: "upgrade --rolling ...". */
        w->verb = hc_cmd_default_verb(w->group);
        return w->verb ? 0 : walk_stop(w, HC_WALK_NOT_VERB, *i);
    }
    w->verb = hc_cmd_find_verb(w->group, word);
    if (!w->verb)
        return walk_stop(w, HC_WALK_BAD_VERB, *i);
    (*i)++;
    return 0;
}

void hc_walk_clear(struct hc_walk *w)
{
    free(w->pos);
    w->pos = NULL;
    w->npos = 0;
}

/* ---------------------------------------------------------------- values and messages */

static int usage_errorv(struct hc_error *err, const char *hint, const char *fmt, va_list ap)
{
    hc_error_set(err, HC_E(USAGE), "%s", "");
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    if (hint)
        hc_error_hint(err, "%s", hint);
    return -1;
}

int hc_cmdline_usage_error(struct hc_error *err, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    usage_errorv(err, hint, fmt, ap);
    va_end(ap);
    return -1;
}

int hc_walk_error(const struct hc_walk *w, char *const *words, const char *where,
                  struct hc_error *err)
{
    const char *names[HC_WALK_MAX_OPTS + 1];
    char word[64], hint[128];
    switch (w->stop) {
    case HC_WALK_VALUE:
        return hc_cmdline_usage_error(err, NULL, "option --%s needs a value (%s)", w->opt->name,
                                      w->opt->value_name ? w->opt->value_name : "VALUE");
    case HC_WALK_NO_VALUE: /* "--quiet=x": a flag given a value */
        return hc_cmdline_usage_error(err, where, "option --%s takes no value", w->opt->name);
    case HC_WALK_UNKNOWN_SHORT:
        return hc_cmdline_usage_error(err, where, "unknown option '-%c'", w->letter);
    case HC_WALK_UNKNOWN_LONG:
        break;
    default: /* the callback filled err */
        return -1;
        break;
    }
    const char *text = words[w->at];
    snprintf(word, sizeof(word), "%s", text + strspn(text, "-"));
    word[strcspn(word, "=")] = '\0';
    for (size_t i = 0; i < w->nset; i++)
        names[i] = w->set[i]->name;
    names[w->nset] = NULL;
    const char *guess = hc_cmd_suggest(word, names);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '--%s'?", guess);
    return hc_cmdline_usage_error(err, guess ? hint : where, "unknown option '%s'", text);
}

static void choices_text(const char *const *choices, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; choices[i] && used < len; i++)
        used += snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
}

static int store_choice(const struct hc_cmd_opt *opt, const char *arg, struct hc_error *err)
{
    char list[256], hint[300];
    for (size_t i = 0; opt->choices[i]; i++)
        if (strcmp(arg, opt->choices[i]) == 0)
            return 0;
    choices_text(opt->choices, list, sizeof(list));
    const char *guess = hc_cmd_suggest(arg, opt->choices);
    if (guess)
        snprintf(hint, sizeof(hint), "did you mean '%s'? (one of: %s)", guess, list);
    else
        snprintf(hint, sizeof(hint), "one of: %s", list);
    return hc_cmdline_usage_error(err, hint, "invalid value '%s' for --%s", arg, opt->name);
}

int hc_cmdline_store(const struct hc_cmd_opt *opt, struct hc_opt_val *val, const char *arg,
                     struct hc_error *err)
{
    val->set = 1;
    val->str = arg;
    val->num = 1;
    if (opt->type == HC_OPT_LIST) {
        const char **grown = realloc(val->list, (val->nlist + 2) * sizeof(*grown));
        if (!grown)
            return hc_cmdline_usage_error(err, NULL, "out of memory");
        grown[val->nlist++] = arg;
        grown[val->nlist] = NULL;
        val->list = grown;
        return 0;
    }
    if (opt->type == HC_OPT_STRING && opt->choices)
        return store_choice(opt, arg, err);
    if (opt->type == HC_OPT_INT) {
        char *end;
        errno = 0;
        long long n = strtoll(arg, &end, 10);
        if (!arg[0] || *end || errno)
            return hc_cmdline_usage_error(err, NULL, "invalid value '%s' for --%s: not an integer",
                                          arg, opt->name);
        val->num = n;
    } else if (opt->type == HC_OPT_DURATION) {
        struct hc_error derr = {0};
        if (hc_duration_parse(arg, &val->num, &derr) < 0)
            return hc_cmdline_usage_error(
                err, derr.hint, "invalid value '%s' for --%s: not a duration", arg, opt->name);
        /* Every duration bounds a wait or a lifetime: zero would wait for nothing. */
        if (val->num <= 0)
            return hc_cmdline_usage_error(err, "use a positive duration such as 30s",
                                          "invalid value '%s' for --%s: must be more than 0", arg,
                                          opt->name);
    }
    return 0;
}

const struct hc_opt_val *hc_cmdline_slot(const struct hc_cmd_opt *opts,
                                         const struct hc_opt_val *vals, const char *name,
                                         const struct hc_cmd_opt **opt)
{
    for (size_t i = 0; opts && opts[i].name; i++)
        if (strcmp(opts[i].name, name) == 0) {
            *opt = &opts[i];
            return &vals[i];
        }
    *opt = NULL;
    return NULL;
}

const char *hc_cmdline_str(const struct hc_cmd_opt *opt, const struct hc_opt_val *v)
{
    return v->set ? v->str : opt->def;
}

int64_t hc_cmdline_int(const struct hc_cmd_opt *opt, const struct hc_opt_val *v)
{
    return v->set ? v->num : (opt->def ? strtoll(opt->def, NULL, 10) : 0);
}

int64_t hc_cmdline_ms(const struct hc_cmd_opt *opt, const struct hc_opt_val *v)
{
    int64_t ms = 0;
    if (v->set)
        return v->num;
    if (opt->def)
        hc_duration_parse(opt->def, &ms, NULL); /* self-tests guarantee it parses */
    return ms;
}

/* ---------------------------------------------------------------- help */

static void required_opts(const struct hc_cmd_opt *opts, char *buf, size_t len)
{
    size_t used = strlen(buf);
    for (size_t i = 0; opts && opts[i].name && used < len; i++)
        if (opts[i].required)
            used += snprintf(buf + used, len - used, " --%s %s", opts[i].name,
                             opts[i].value_name ? opts[i].value_name : "VALUE");
}

void hc_cmdline_usage_line(const char *prog, const struct hc_cmd_group *group,
                           const struct hc_cmd_verb *verb, char *buf, size_t len)
{
    char words[128] = "";
    /* A default verb's usage is its selecting option, already part of its words. */
    if (group)
        hc_cmd_verb_words(group, verb, words, sizeof(words));
    snprintf(buf, len, "%s%s%s", prog, words[0] ? " " : "", words);
    if (verb->usage && !(group && is_default_verb(group, verb))) {
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
            used +=
                snprintf(extra + used, sizeof(extra) - used, "%s%s", i ? "|" : "", o->choices[i]);
    }
    if (o->def && used < sizeof(extra))
        snprintf(extra + used, sizeof(extra) - used, " (default %s)", o->def);
    if (o->required && used < sizeof(extra))
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " (required)");
    fprintf(f, "  %-*s  %s%s\n", width, syn, o->help ? o->help : "", extra);
}

int hc_cmdline_opts_width(const struct hc_cmd_opt *opts, int width)
{
    char syn[96];
    for (size_t i = 0; opts && opts[i].name; i++) {
        opt_synopsis(&opts[i], syn, sizeof(syn));
        if ((int)strlen(syn) > width)
            width = (int)strlen(syn);
    }
    return width;
}

void hc_cmdline_help_opts(FILE *f, const struct hc_cmd_opt *opts, int width)
{
    if (!width)
        width = hc_cmdline_opts_width(opts, 0);
    for (size_t i = 0; opts && opts[i].name; i++)
        opt_help(f, &opts[i], width);
}

void hc_cmdline_help_opt(FILE *f, const struct hc_cmd_opt *o, int width)
{
    opt_help(f, o, width);
}

int hc_cmdline_opt_width(const struct hc_cmd_opt *o)
{
    char syn[96];
    opt_synopsis(o, syn, sizeof(syn));
    return (int)strlen(syn);
}

/* ---------------------------------------------------------------- the end of a command */

int hc_cmdline_close_stdout(const char *prog, int rc)
{
    int failed, saved;
    errno = 0;
    failed = fflush(stdout) != 0 || ferror(stdout);
    saved = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = 1;
        saved = errno;
    }
    if (!failed)
        return rc;
    fprintf(stderr, "%s: write failure on standard output%s%s\n", prog, saved ? ": " : "",
            saved ? strerror(saved) : "");
    return rc ? rc : 1;
}

/* ---------------------------------------------------------------- words and arguments */

static int unknown_group(const struct hc_cmd_group *const *groups, const char *prog,
                         const char *word, struct hc_error *err)
{
    const char *names[64], *guess;
    char hint[128];
    size_t n = 0;
    for (size_t i = 0; groups[i] && n + 1 < HC_ARRAY_LEN(names); i++)
        if (!(groups[i]->flags & HC_CMD_HIDDEN))
            names[n++] = groups[i]->name;
    names[n] = NULL;
    if ((guess = hc_cmd_suggest(word, names)))
        snprintf(hint, sizeof(hint), "did you mean '%s'?", guess);
    else
        snprintf(hint, sizeof(hint), "see '%s --help'", prog);
    return hc_cmdline_usage_error(err, hint, "unknown command '%s'", word);
}

static int unknown_verb(const struct hc_cmd_group *group, const char *prog, const char *word,
                        struct hc_error *err)
{
    const char *names[64], *guess;
    char hint[128];
    size_t n = 0;
    for (size_t i = 0; group->verbs[i].name && n + 1 < HC_ARRAY_LEN(names); i++)
        if (!(group->verbs[i].flags & HC_CMD_HIDDEN) &&
            !is_default_verb(group, &group->verbs[i])) /* never typed by its name */
            names[n++] = group->verbs[i].name;
    names[n] = NULL;
    if ((guess = hc_cmd_suggest(word, names)))
        snprintf(hint, sizeof(hint), "did you mean '%s'?", guess);
    else
        snprintf(hint, sizeof(hint), "see '%s %s --help'", prog, group->name);
    return hc_cmdline_usage_error(err, hint, "unknown verb '%s' for '%s'", word, group->name);
}

int hc_walk_words_error(const struct hc_walk *w, const char *prog, char *const *words,
                        struct hc_error *err)
{
    char hint[128];
    const char *group = w->group ? w->group->name : "";
    snprintf(hint, sizeof(hint), "see '%s %s --help'", prog, group);
    switch (w->stop) {
    case HC_WALK_NO_GROUP:
        snprintf(hint, sizeof(hint), "see '%s --help'", prog);
        return hc_cmdline_usage_error(err, hint, "missing command");
    case HC_WALK_BAD_GROUP:
        return unknown_group(w->groups, prog, words[w->at], err);
    case HC_WALK_NO_VERB:
        return hc_cmdline_usage_error(err, hint, "missing verb for '%s'", group);
    case HC_WALK_NOT_VERB:
        return hc_cmdline_usage_error(err, hint, "expected a verb after '%s', not the option '%s'",
                                      group, words[w->at]);
    default:
        return unknown_verb(w->group, prog, words[w->at], err);
    }
}

int hc_cmdline_check(const char *prog, const struct hc_cmd_group *group,
                     const struct hc_cmd_verb *verb, const struct hc_opt_val *vals, int argc,
                     char *const *argv, struct hc_error *err)
{
    char usage[256], hint[300], name[128];
    hc_cmdline_usage_line(prog, group, verb, usage, sizeof(usage));
    if (group)
        hc_cmd_verb_words(group, verb, name, sizeof(name));
    else
        snprintf(name, sizeof(name), "%s", prog);
    snprintf(hint, sizeof(hint), "usage: %s", usage);
    if (argc < verb->min_args)
        return hc_cmdline_usage_error(err, hint, "missing argument for '%s' (expected %s)", name,
                                      verb->usage ? verb->usage : "more arguments");
    if (verb->max_args != HC_ARGS_MANY && argc > verb->max_args)
        return hc_cmdline_usage_error(err, hint, "too many arguments for '%s': unexpected '%s'",
                                      name, argv[verb->max_args]);
    for (size_t i = 0; verb->opts && verb->opts[i].name; i++)
        if (verb->opts[i].required && !vals[i].set)
            return hc_cmdline_usage_error(err, hint, "option --%s is required for '%s'",
                                          verb->opts[i].name, name);
    return 0;
}

/* ---------------------------------------------------------------- the daemons' runner */

static int global_slot(const struct hc_cmdline *cl, const struct hc_cmd_opt *o)
{
    for (int i = 0; cl->prog->globals && cl->prog->globals[i].name; i++)
        if (o == &cl->prog->globals[i])
            return i;
    return -1;
}

static int cl_store(struct hc_walk *w, const struct hc_cmd_opt *o, const char *value)
{
    struct hc_cmdline *cl = w->arg;
    int g = global_slot(cl, o);
    struct hc_opt_val *val = g >= 0 ? &cl->gvals[g] : &cl->vals[o - cl->verb->opts];
    return hc_cmdline_store(o, val, value, w->on_err);
}

static void report(const struct hc_cmdline_prog *prog, const struct hc_error *err)
{
    fprintf(stderr, "%s: %s%s%s%s\n", prog->name, err->message, err->hint[0] ? " (" : "", err->hint,
            err->hint[0] ? ")" : "");
}

static int help_asked(const struct hc_cmdline *cl)
{
    for (int i = 0; cl->prog->globals && cl->prog->globals[i].name; i++)
        if (strcmp(cl->prog->globals[i].name, "help") == 0)
            return cl->gvals[i].set;
    return 0;
}

/* The hidden `PROG __man [FILE]`: the man page on stdout or into FILE. Returns 1, or -1. */
static int write_man(const struct hc_cmdline_prog *prog, const char *path, struct hc_error *err)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f)
        return hc_error_set_transport(err, HC_E(IO), "cannot write '%s': %s", path,
                                      strerror(errno));
    hc_cmdline_man(f, prog);
    if (path && fclose(f) != 0)
        return hc_error_set_transport(err, HC_E(IO), "cannot write '%s': %s", path,
                                      strerror(errno));
    return 1;
}

/* Returns 1 when help was printed, 0 to run, -1 with err. */
static int cl_parse(struct hc_cmdline *cl, int argc, char **argv, struct hc_error *err)
{
    const struct hc_cmdline_prog *prog = cl->prog;
    struct hc_walk *w = &cl->walk;
    static char *no_args[] = {NULL};
    char where[160];
    int i = 1;
    w->groups = prog->groups;
    w->globals = prog->globals;
    w->on_option = cl_store;
    w->on_err = err;
    w->arg = cl;
    snprintf(where, sizeof(where), "see '%s --help'", prog->name);
    if (prog->groups) {
        hc_walk_set(w, NULL);
        if (hc_walk_options(w, 1, argc, argv, &i) < 0)
            return hc_walk_error(w, argv, where, err);
        if (help_asked(cl)) {
            hc_cmdline_help_top(stdout, prog);
            return 1;
        }
        if (prog->man_section && i < argc && i + 2 >= argc && strcmp(argv[i], "__man") == 0)
            return write_man(prog, i + 1 < argc ? argv[i + 1] : NULL, err);
        if (hc_walk_words(w, argc, argv, &i) < 0) {
            if (w->stop != HC_WALK_GROUP_HELP)
                return hc_walk_words_error(w, prog->name, argv, err);
            hc_cmdline_help_group(stdout, prog, w->group);
            return 1;
        }
        cl->group = w->group;
        cl->verb = w->verb;
        if (cl->verb->flags & HC_CMD_RAW) {
            cl->argc = argc - (i - 1);
            cl->argv = argv + i - 1;
            return 0;
        }
    } else {
        cl->verb = prog->command;
    }
    if (hc_walk_set(w, cl->verb) < 0)
        return hc_cmdline_usage_error(err, NULL, "internal: too many options");
    size_t nv = 0;
    while (cl->verb->opts && cl->verb->opts[nv].name)
        nv++;
    if (!(cl->vals = calloc(nv + 1, sizeof(*cl->vals))))
        return hc_error_set_transport(err, HC_E(INTERNAL), "out of memory");
    if (cl->group) {
        char name[128];
        hc_cmd_verb_words(cl->group, cl->verb, name, sizeof(name));
        snprintf(where, sizeof(where), "see '%s %s --help'", prog->name, name);
    }
    if (hc_walk_options(w, 0, argc, argv, &i) < 0)
        return hc_walk_error(w, argv, where, err);
    cl->argc = w->npos;
    cl->argv = w->pos ? w->pos : no_args;
    if (help_asked(cl)) {
        hc_cmdline_help_verb(stdout, prog, cl->group, cl->verb);
        return 1;
    }
    return hc_cmdline_check(prog->name, cl->group, cl->verb, cl->vals, cl->argc, cl->argv, err);
}

int hc_cmdline_main(const struct hc_cmdline_prog *prog, struct hc_cmdline *cl,
                    struct hc_cmd_ctx *ctx, int argc, char **argv)
{
    struct hc_error err = {0};
    int rc;
    memset(cl, 0, sizeof(*cl));
    cl->prog = prog;
    rc = cl_parse(cl, argc, argv, &err);
    if (rc < 0) {
        report(prog, &err);
        rc = prog->usage_exit;
    } else if (rc == 1) {
        rc = 0;
    } else {
        rc = cl->verb->handler(ctx);
    }
    for (size_t i = 0; cl->vals && cl->verb->opts && cl->verb->opts[i].name; i++)
        free(cl->vals[i].list);
    for (size_t i = 0; i < HC_WALK_MAX_OPTS; i++)
        free(cl->gvals[i].list);
    free(cl->vals);
    hc_walk_clear(&cl->walk);
    return hc_cmdline_close_stdout(prog->name, rc);
}

int hc_cmdline_usage(const struct hc_cmdline *cl, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cl->prog->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return cl->prog->usage_exit;
}

static const struct hc_opt_val *cl_slot(const struct hc_cmdline *cl, const char *name,
                                        const struct hc_cmd_opt **opt)
{
    const struct hc_opt_val *v = hc_cmdline_slot(cl->verb->opts, cl->vals, name, opt);
    if (!v)
        v = hc_cmdline_slot(cl->prog->globals, cl->gvals, name, opt);
    if (v)
        return v;
    fprintf(stderr, "%s: bug: '%s' has no option --%s\n", cl->prog->name, cl->verb->name, name);
    abort();
}

int hc_cmdline_opt_set(const struct hc_cmdline *cl, const char *name)
{
    const struct hc_cmd_opt *opt;
    return cl_slot(cl, name, &opt)->set;
}

const char *hc_cmdline_opt_str(const struct hc_cmdline *cl, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = cl_slot(cl, name, &opt);
    return hc_cmdline_str(opt, v);
}

int64_t hc_cmdline_opt_int(const struct hc_cmdline *cl, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = cl_slot(cl, name, &opt);
    return hc_cmdline_int(opt, v);
}

int64_t hc_cmdline_opt_ms(const struct hc_cmdline *cl, const char *name)
{
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = cl_slot(cl, name, &opt);
    return hc_cmdline_ms(opt, v);
}

const char *const *hc_cmdline_opt_list(const struct hc_cmdline *cl, const char *name, size_t *n)
{
    static const char *const none[] = {NULL};
    const struct hc_cmd_opt *opt;
    const struct hc_opt_val *v = cl_slot(cl, name, &opt);
    *n = v->nlist;
    return v->list ? v->list : none;
}

/* ---------------------------------------------------------------- the daemons' help */

static void cmd_line(FILE *f, const struct hc_cmdline_prog *prog, const struct hc_cmd_group *g,
                     const struct hc_cmd_verb *v)
{
    char usage[256];
    hc_cmdline_usage_line(prog->name, g, v, usage, sizeof(usage));
    fprintf(f, "  %s\n      %s\n", usage, v->summary ? v->summary : "");
}

void hc_cmdline_help_top(FILE *f, const struct hc_cmdline_prog *prog)
{
    if (!prog->groups) {
        hc_cmdline_help_verb(f, prog, NULL, prog->command);
        return;
    }
    fprintf(f, "usage: %s COMMAND [ARGS] [OPTIONS]\n\n%s\n\nCommands:\n", prog->name,
            prog->summary);
    for (size_t i = 0; prog->groups[i]; i++)
        for (size_t j = 0; prog->groups[i]->verbs[j].name; j++)
            if (!((prog->groups[i]->flags | prog->groups[i]->verbs[j].flags) & HC_CMD_HIDDEN))
                cmd_line(f, prog, prog->groups[i], &prog->groups[i]->verbs[j]);
    fprintf(f, "\nOptions:\n");
    hc_cmdline_help_opts(f, prog->globals, 0);
    if (prog->epilog)
        fprintf(f, "\n%s", prog->epilog);
    fprintf(f, "\nRun '%s COMMAND --help' for a command's options, 'man %s' for more.\n",
            prog->name, prog->name);
}

void hc_cmdline_help_group(FILE *f, const struct hc_cmdline_prog *prog,
                           const struct hc_cmd_group *group)
{
    if (group->flags & HC_GROUP_STANDALONE) {
        hc_cmdline_help_verb(f, prog, group, &group->verbs[0]);
        return;
    }
    fprintf(f, "usage: %s %s VERB [ARGS] [OPTIONS]\n\n%s\n\nVerbs:\n", prog->name, group->name,
            group->summary ? group->summary : "");
    for (size_t j = 0; group->verbs[j].name; j++)
        if (!(group->verbs[j].flags & HC_CMD_HIDDEN))
            cmd_line(f, prog, group, &group->verbs[j]);
}

/* The description of a command from prog->commands, or NULL. */
static const char *command_text(const struct hc_cmdline_prog *prog,
                                const struct hc_cmd_group *group, const struct hc_cmd_verb *verb)
{
    char words[128];
    if (group)
        hc_cmd_verb_words(group, verb, words, sizeof(words));
    else
        snprintf(words, sizeof(words), "%s", prog->name);
    for (size_t i = 0; prog->commands && prog->commands[i].name; i++)
        if (strcmp(prog->commands[i].name, words) == 0)
            return prog->commands[i].text;
    return NULL;
}

void hc_cmdline_help_verb(FILE *f, const struct hc_cmdline_prog *prog,
                          const struct hc_cmd_group *group, const struct hc_cmd_verb *verb)
{
    char usage[256];
    hc_cmdline_usage_line(prog->name, group, verb, usage, sizeof(usage));
    fprintf(f, "usage: %s\n\n%s\n", usage, verb->summary ? verb->summary : "");
    const char *text = command_text(prog, group, verb);
    if (text)
        fprintf(f, "\n%s", text);
    int width = hc_cmdline_opts_width(prog->globals, hc_cmdline_opts_width(verb->opts, 0));
    fprintf(f, "\nOptions:\n");
    hc_cmdline_help_opts(f, verb->opts, width);
    hc_cmdline_help_opts(f, prog->globals, width);
    if (!group && prog->epilog)
        fprintf(f, "\n%s", prog->epilog);
}

/* ---------------------------------------------------------------- man pages */

/* Writes s escaped for roff: backslashes, and '-' as a minus sign where it is typed (options,
 * commands) so that copy and paste from the page works. */
void hc_roff_put(FILE *f, const char *s, int minus)
{
    for (; s && *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-' && minus)
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

/* One line of running text: a leading '.' or '\'' would be read as a request. */
static void roff_line(FILE *f, const char *s, size_t len)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, s);
    if (buf[0] == '.' || buf[0] == '\'')
        fputs("\\&", f);
    hc_roff_put(f, buf, 0);
    fputc('\n', f);
}

/* A topic's text: paragraphs, and indented blocks kept as written. */
void hc_roff_text(FILE *f, const char *text)
{
    int in_block = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        int indented = strncmp(p, "  ", 2) == 0;
        if (len == 0) {
            if (in_block)
                fputs(".fi\n.RE\n", f);
            in_block = 0;
            fputs(".PP\n", f);
        } else if (indented && !in_block) {
            fputs(".RS 2\n.nf\n", f);
            in_block = 1;
        }
        if (len > 0)
            roff_line(f, indented ? p + 2 : p, indented ? len - 2 : len);
        p += len + (p[len] == '\n');
    }
    if (in_block)
        fputs(".fi\n.RE\n", f);
}

void hc_roff_opt(FILE *f, const struct hc_cmd_opt *o)
{
    fputs(".TP\n", f);
    if (o->short_name)
        fprintf(f, "\\fB\\-%c\\fR, ", o->short_name);
    fputs("\\fB\\-\\-", f);
    hc_roff_put(f, o->name, 1);
    fputs("\\fR", f);
    if (o->value_name) {
        fputs(" \\fI", f);
        hc_roff_put(f, o->value_name, 0);
        fputs("\\fR", f);
    }
    fputc('\n', f);
    hc_roff_put(f, o->help, 0);
    for (size_t i = 0; o->choices && o->choices[i]; i++) {
        fputs(i ? "|" : ": ", f);
        hc_roff_put(f, o->choices[i], 1);
    }
    if (o->def) {
        fputs(" (default ", f);
        hc_roff_put(f, o->def, 1);
        fputc(')', f);
    }
    fputs(o->required ? " (required)\n" : "\n", f);
}

/* The page's date: SOURCE_DATE_EPOCH when set (reproducible builds), else today. */
const char *hc_roff_date(char *buf, size_t len)
{
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    time_t t = epoch && epoch[0] ? (time_t)strtoll(epoch, NULL, 10) : time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d", &tm);
    return buf;
}

static void man_usage(FILE *f, const struct hc_cmdline_prog *prog, const struct hc_cmd_group *g,
                      const struct hc_cmd_verb *v)
{
    char usage[256];
    hc_cmdline_usage_line(prog->name, g, v, usage, sizeof(usage));
    fputs(".B ", f);
    hc_roff_put(f, usage, 1);
    fputs("\n", f);
}

/* Every visible command of prog, with fn called for each. */
static void each_command(const struct hc_cmdline_prog *prog,
                         void (*fn)(FILE *f, const struct hc_cmdline_prog *prog,
                                    const struct hc_cmd_group *g, const struct hc_cmd_verb *v,
                                    int n),
                         FILE *f)
{
    int n = 0;
    if (!prog->groups) {
        fn(f, prog, NULL, prog->command, 0);
        return;
    }
    for (size_t i = 0; prog->groups[i]; i++)
        for (size_t j = 0; prog->groups[i]->verbs[j].name; j++)
            if (!((prog->groups[i]->flags | prog->groups[i]->verbs[j].flags) & HC_CMD_HIDDEN))
                fn(f, prog, prog->groups[i], &prog->groups[i]->verbs[j], n++);
}

static void man_synopsis(FILE *f, const struct hc_cmdline_prog *prog, const struct hc_cmd_group *g,
                         const struct hc_cmd_verb *v, int n)
{
    if (n)
        fputs(".br\n", f);
    man_usage(f, prog, g, v);
}

static void man_command(FILE *f, const struct hc_cmdline_prog *prog, const struct hc_cmd_group *g,
                        const struct hc_cmd_verb *v, int n)
{
    (void)n;
    char usage[256];
    const char *text = command_text(prog, g, v);
    hc_cmdline_usage_line(prog->name, g, v, usage, sizeof(usage));
    fputs(".SS \"", f);
    hc_roff_put(f, usage, 1);
    fputs("\"\n", f);
    hc_roff_put(f, v->summary, 0);
    fputs(".\n", f);
    if (text) {
        fputs(".PP\n", f);
        hc_roff_text(f, text);
    }
    for (size_t j = 0; v->opts && v->opts[j].name; j++)
        hc_roff_opt(f, &v->opts[j]);
}

void hc_cmdline_man(FILE *f, const struct hc_cmdline_prog *prog)
{
    char upper[64], date[32];
    size_t i = 0;
    for (; prog->name[i] && i + 1 < sizeof(upper); i++)
        upper[i] = (char)(prog->name[i] >= 'a' && prog->name[i] <= 'z' ? prog->name[i] - 32
                                                                       : prog->name[i]);
    upper[i] = '\0';
    fprintf(f, ".\\\" Generated by '%s __man' from its command table: do not edit.\n", prog->name);
    fprintf(f, ".TH %s %d %s \"hcctl %s\" \"hcctl manual\"\n.SH NAME\n", upper,
            prog->man_section ? prog->man_section : 1, hc_roff_date(date, sizeof(date)),
            HC_VERSION);
    hc_roff_put(f, prog->name, 1);
    fputs(" \\- ", f);
    hc_roff_put(f, prog->man_name ? prog->man_name : prog->summary, 0);
    fputs("\n.SH SYNOPSIS\n", f);
    each_command(prog, man_synopsis, f);
    for (size_t s = 0; prog->man && prog->man[s].name; s++) {
        if (strcmp(prog->man[s].name, "COMMANDS") == 0) {
            fputs(prog->groups ? ".SH COMMANDS\n" : ".SH OPTIONS\n", f);
            each_command(prog, man_command, f);
            if (prog->globals && prog->groups) {
                fputs(".SS \"Options of every command\"\n", f);
                for (size_t j = 0; prog->globals[j].name; j++)
                    hc_roff_opt(f, &prog->globals[j]);
            }
            continue;
        }
        fputs(".SH ", f);
        hc_roff_put(f, prog->man[s].name, 0);
        fputc('\n', f);
        hc_roff_text(f, prog->man[s].text);
    }
}
