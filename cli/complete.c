/*
 * The completion engine (see complete.h): the parser's walk over the words before the cursor,
 * then candidates for the current word from the completer kind the table gives for that place.
 * Also the quote-aware word splitter the shell uses both to run a line and to complete one.
 */
#include "cli/complete.h"

#include <stdlib.h>
#include <string.h>

#include "cli/api_client.h"
#include "cli/config.h"
#include "cli/exit_codes.h"
#include "cli/help.h"
#include "common/json_util.h"
#include "common/util.h"

#define COMPLETE_DEFAULT_TIMEOUT_MS 2000

/* The parser's walk over the complete words (common/cmdline.h), and the connection settings
 * given on the line. */
struct walk {
    struct hc_walk w;
    const char *controller, *token, *ca;
};

/* A verb option with this exact name (for shadowing in the candidates). */
static const struct hc_cmd_opt *find_long(const struct hc_cmd_opt *opts, const char *name,
                                          size_t len)
{
    for (size_t i = 0; opts && opts[i].name; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static int is_global(const struct hc_cmd_opt *o)
{
    for (size_t i = 0; hc_cmd_global_opts[i].name; i++)
        if (o == &hc_cmd_global_opts[i])
            return 1;
    return 0;
}

/* Remembers --controller, --token and --ca given on the line: dynamic values must come from
 * the controller the command itself would talk to. */
static int note_global(struct hc_walk *hw, const struct hc_cmd_opt *o, const char *value)
{
    struct walk *w = hw->arg;
    if (!value || !is_global(o))
        return 0; /* a verb option of the same name is not the global one */
    if (strcmp(o->name, "controller") == 0)
        w->controller = value;
    else if (strcmp(o->name, "token") == 0)
        w->token = value;
    else if (strcmp(o->name, "ca") == 0)
        w->ca = value;
    return 0;
}

/* ---------------------------------------------------------------- candidates */

static int add_item(struct hc_complete *out, const char *prefix, const char *word, const char *desc,
                    const char *cur)
{
    size_t plen = prefix ? strlen(prefix) : 0, wlen = strlen(word);
    size_t dlen = desc && desc[0] ? strlen(desc) : 0, clen = strlen(cur);
    /* the candidate, prefix + word, must start with what was typed */
    size_t head = clen < plen ? clen : plen;
    if (strncmp(prefix ? prefix : "", cur, head) != 0 ||
        (clen > plen && strncmp(word, cur + plen, clen - plen) != 0))
        return 0;
    if (out->n + 1 >= out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        char **grown = realloc(out->items, cap * sizeof(*grown));
        if (!grown)
            return -1;
        out->items = grown;
        out->cap = cap;
    }
    char *item = malloc(plen + wlen + (dlen ? dlen + 1 : 0) + 1);
    if (!item)
        return -1;
    memcpy(item, prefix ? prefix : "", plen);
    memcpy(item + plen, word, wlen);
    item[plen + wlen] = '\0';
    if (dlen) {
        item[plen + wlen] = '\t';
        memcpy(item + plen + wlen + 1, desc, dlen + 1);
        for (char *p = item + plen + wlen + 1; *p; p++)
            if (*p == '\t' || *p == '\n' || *p == '\r')
                *p = ' '; /* one candidate is one line */
    }
    out->items[out->n++] = item;
    out->items[out->n] = NULL;
    return 0;
}

static int add_groups(const struct walk *w, const char *cur, struct hc_complete *out)
{
    const struct hc_cmd_group *const *groups = w->w.groups;
    for (size_t i = 0; groups[i]; i++)
        if (!(groups[i]->flags & HC_CMD_HIDDEN) &&
            add_item(out, NULL, groups[i]->name, groups[i]->summary, cur) < 0)
            return -1;
    return 0;
}

/* The verbs after the group word. The group's default verb is never offered by its name: after
 * the group word (with_default) as the flag that selects it ("upgrade --rolling"), and not at
 * all as a help topic (`help upgrade --rolling` would be an option of help). */
static int add_verbs(const struct hc_cmd_group *g, int with_default, const char *cur,
                     struct hc_complete *out)
{
    const struct hc_cmd_verb *def = hc_cmd_default_verb(g);
    for (size_t i = 0; g->verbs[i].name; i++) {
        const struct hc_cmd_verb *v = &g->verbs[i];
        const char *word = v != def ? v->name : with_default ? v->usage : NULL;
        if (!(v->flags & HC_CMD_HIDDEN) && word && add_item(out, NULL, word, v->summary, cur) < 0)
            return -1;
    }
    return 0;
}

/* "--name" for every option of opts not shadowed by shadow. */
static int add_opt_names(const struct hc_cmd_opt *opts, const struct hc_cmd_opt *shadow,
                         const char *cur, struct hc_complete *out)
{
    for (size_t i = 0; opts && opts[i].name; i++) {
        if (shadow && find_long(shadow, opts[i].name, strlen(opts[i].name)))
            continue;
        if (add_item(out, "--", opts[i].name, opts[i].help, cur) < 0)
            return -1;
    }
    return 0;
}

/* Values only the controller knows: where to ask, and which keys make a candidate. */
static const struct remote {
    enum hc_completer kind;
    const char *path, *list, *word, *desc1, *desc2;
} remotes[] = {
    {HC_COMPLETE_NODE, "/v1/nodes", "nodes", "name", "address", "health"},
    {HC_COMPLETE_OPERATION, "/v1/operations", "operations", "id", "kind", "state"},
    {HC_COMPLETE_BUNDLE, "/v1/software", "bundles", "version", "name", "uploaded_at"},
};

static int add_remote_items(const struct remote *r, const json_t *doc, const char *prefix,
                            const char *cur, struct hc_complete *out)
{
    const json_t *item;
    size_t i;
    json_array_foreach(json_object_get(doc, r->list), i, item)
    {
        char desc[256];
        const char *word = hc_json_str(item, r->word, NULL);
        snprintf(desc, sizeof(desc), "%s, %s", hc_json_str(item, r->desc1, "?"),
                 hc_json_str(item, r->desc2, "?"));
        if (word && add_item(out, prefix, word, desc, cur) < 0)
            return -1;
    }
    return 0;
}

/* Candidates from the controller; silent when it cannot be asked. */
static int add_remote(const struct walk *w, enum hc_completer kind, const char *prefix,
                      const char *cur, const struct hc_complete_conn *conn, struct hc_complete *out)
{
    static const struct hc_complete_conn none = {0};
    const struct hc_complete_conn *c = conn ? conn : &none;
    struct hc_cli_config_flags flags = {w->controller ? w->controller : c->controller,
                                        w->token ? w->token : c->token, w->ca ? w->ca : c->ca_file};
    struct hc_cli_config cfg = {0};
    struct hc_error err = {0};
    struct hc_api_client *api = NULL;
    json_t *doc = NULL;
    const struct remote *r = NULL;
    int rc = 0;
    int64_t timeout = c->timeout_ms > 0 ? c->timeout_ms : COMPLETE_DEFAULT_TIMEOUT_MS;
    for (size_t i = 0; i < HC_ARRAY_LEN(remotes); i++)
        if (remotes[i].kind == kind)
            r = &remotes[i];
    if (!r || c->offline || hc_cli_config_load(&cfg, &flags, &err) < 0 || !cfg.controller)
        goto cleanup;
    if (!(api = hc_api_client_new(&cfg, timeout, &err)))
        goto cleanup;
    if ((doc = hc_api_client_get(api, r->path, &err)))
        rc = add_remote_items(r, doc, prefix, cur, out);
cleanup:
    json_decref(doc);
    hc_api_client_free(api);
    hc_cli_config_clear(&cfg);
    return rc;
}

static int add_list(const char *const *words, const char *prefix, const char *cur,
                    struct hc_complete *out)
{
    for (size_t i = 0; words && words[i]; i++)
        if (add_item(out, prefix, words[i], NULL, cur) < 0)
            return -1;
    return 0;
}

/* `help` topics: a group or a docs topic, then a verb of that group. */
static int add_topics(const struct walk *w, const char *cur, struct hc_complete *out)
{
    if (w->w.npos == 0) {
        if (add_groups(w, cur, out) < 0)
            return -1;
        for (size_t i = 0; hc_help_topics[i].name; i++)
            if (!hc_cmd_find_group(w->w.groups, hc_help_topics[i].name) &&
                add_item(out, NULL, hc_help_topics[i].name, hc_help_topics[i].summary, cur) < 0)
                return -1;
        return 0;
    }
    const struct hc_cmd_group *g = hc_cmd_find_group(w->w.groups, w->w.pos[0]);
    if (w->w.npos == 1 && g && !(g->flags & (HC_GROUP_STANDALONE | HC_CMD_HIDDEN)))
        return add_verbs(g, 0, cur, out);
    return 0;
}

static int add_values(const struct walk *w, enum hc_completer kind, const char *const *choices,
                      const char *prefix, const char *cur, const struct hc_complete_conn *conn,
                      struct hc_complete *out)
{
    static const char *const shells[] = {"bash", "zsh", "fish", NULL};
    switch (kind) {
    case HC_COMPLETE_CHOICES:
        return add_list(choices, prefix, cur, out);
    case HC_COMPLETE_FILE:
        out->files = 1;
        return 0;
    case HC_COMPLETE_NODE:
    case HC_COMPLETE_OPERATION:
    case HC_COMPLETE_BUNDLE:
        return add_remote(w, kind, prefix, cur, conn, out);
    case HC_COMPLETE_TOPIC:
        return add_topics(w, cur, out);
    case HC_COMPLETE_SHELL:
        return add_list(shells, prefix, cur, out);
    case HC_COMPLETE_NONE:
        break;
    }
    return 0;
}

/* "--name=VALUE" typed as one word: complete the value, keeping "--name=" in front. */
static int complete_attached(struct walk *w, const char *cur, const struct hc_complete_conn *conn,
                             struct hc_complete *out)
{
    const char *eq = strchr(cur, '=');
    const struct hc_cmd_opt *o = hc_walk_find_long(&w->w, cur + 2, (size_t)(eq - cur - 2));
    if (!o || o->type == HC_OPT_BOOL)
        return 0;
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%.*s", (int)(eq - cur + 1), cur);
    return add_values(w, o->completer, o->choices, prefix, cur, conn, out);
}

static int complete_after_verb(struct walk *w, const char *cur, const struct hc_complete_conn *conn,
                               struct hc_complete *out)
{
    const struct hc_cmd_verb *v = w->w.verb;
    if (!w->w.dashdash && cur[0] == '-') {
        if (strncmp(cur, "--", 2) == 0 && strchr(cur, '='))
            return complete_attached(w, cur, conn, out);
        if (add_opt_names(v->opts, NULL, cur, out) < 0 ||
            add_opt_names(hc_cmd_global_opts, v->opts, cur, out) < 0)
            return -1;
        return 0;
    }
    if (v->max_args != HC_ARGS_MANY && w->w.npos >= v->max_args)
        return 0;
    return add_values(w, v->arg_completer, NULL, NULL, cur, conn, out);
}

/* Where the group or the verb goes. */
static int complete_words(struct walk *w, const char *cur, const struct hc_complete_conn *conn,
                          struct hc_complete *out)
{
    if (w->w.stop == HC_WALK_NO_GROUP) {
        if (cur[0] != '-')
            return add_groups(w, cur, out);
        if (strncmp(cur, "--", 2) == 0 && strchr(cur, '='))
            return complete_attached(w, cur, conn, out);
        return add_opt_names(hc_cmd_global_opts, NULL, cur, out);
    }
    if (w->w.stop != HC_WALK_NO_VERB)
        return 0; /* an unknown group or verb: nothing to offer */
    if (cur[0] == '-' && (w->w.verb = hc_cmd_default_verb(w->w.group))) {
        if (hc_walk_set(&w->w, w->w.verb) < 0)
            return 0;
        return complete_after_verb(w, cur, conn, out); /* the group's default verb */
    }
    return cur[0] == '-' ? add_item(out, NULL, "--help", "show help and exit", cur)
                         : add_verbs(w->w.group, 1, cur, out);
}

/* The parser's walk (global options, group and verb, the verb's options and positionals), but
 * passing over unknown options; where it ends says what the current word is. */
static int complete_walk(struct walk *w, int nwords, char *const *words, const char *cur,
                         const struct hc_complete_conn *conn, struct hc_complete *out)
{
    const struct hc_cmd_opt *o;
    int i = 0;
    hc_walk_set(&w->w, NULL);
    if (hc_walk_options(&w->w, 1, nwords, words, &i) < 0)
        goto value;
    if (hc_walk_words(&w->w, nwords, words, &i) < 0)
        return complete_words(w, cur, conn, out);
    if (hc_walk_set(&w->w, w->w.verb) < 0)
        return 0;
    if (hc_walk_options(&w->w, 0, nwords, words, &i) < 0)
        goto value;
    return complete_after_verb(w, cur, conn, out);
value:
    if (w->w.stop != HC_WALK_VALUE)
        return 0;
    o = w->w.opt;
    return add_values(w, o->completer, o->choices, NULL, cur, conn, out);
}

int hc_complete_line(const struct hc_cmd_group *const *groups, int nwords, char *const *words,
                     const char *cur, const struct hc_complete_conn *conn, struct hc_complete *out)
{
    struct walk w;
    memset(&w, 0, sizeof(w));
    memset(out, 0, sizeof(*out));
    w.w.groups = groups;
    w.w.globals = hc_cmd_global_opts;
    w.w.on_option = note_global;
    w.w.arg = &w;
    w.w.keep_going = 1;
    int rc = complete_walk(&w, nwords, words, cur ? cur : "", conn, out);
    hc_walk_clear(&w.w);
    return rc;
}

void hc_complete_clear(struct hc_complete *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->items[i]);
    free(c->items);
    memset(c, 0, sizeof(*c));
}

/* ---------------------------------------------------------------- splitting a line */

/* The word being built and the words so far. */
struct split {
    char **words;
    int n, cap;
    char *buf;
    size_t len, bufcap;
    int in_word;
};

static int split_putc(struct split *s, char c)
{
    if (s->len + 2 > s->bufcap) {
        size_t cap = s->bufcap ? s->bufcap * 2 : 64;
        char *grown = realloc(s->buf, cap);
        if (!grown)
            return -1;
        s->buf = grown;
        s->bufcap = cap;
    }
    s->buf[s->len++] = c;
    s->in_word = 1;
    return 0;
}

static int split_push(struct split *s)
{
    if (s->n + 2 > s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        char **grown = realloc(s->words, (size_t)cap * sizeof(*grown));
        if (!grown)
            return -1;
        s->words = grown;
        s->cap = cap;
    }
    char *word = strndup(s->buf ? s->buf : "", s->len);
    if (!word)
        return -1;
    s->words[s->n++] = word;
    s->words[s->n] = NULL;
    s->len = 0;
    s->in_word = 0;
    return 0;
}

/* One character outside quotes. *quote receives the quote it opens. Returns 1 at a comment. */
static int split_plain(struct split *s, const char **p, char *quote)
{
    char c = **p;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        return s->in_word ? split_push(s) : 0;
    if (c == '#' && !s->in_word)
        return 1;
    if (c == '\'' || c == '"') {
        *quote = c;
        s->in_word = 1;
        return 0;
    }
    if (c == '\\' && (*p)[1])
        c = *++*p;
    return split_putc(s, c);
}

int hc_shell_split(const char *line, int partial, char ***words, int *open_word,
                   struct hc_error *err)
{
    struct split s = {0};
    char quote = 0;
    int rc = 0;
    for (const char *p = line; *p && rc == 0; p++) {
        if (quote == '\'' && *p == '\'')
            quote = 0;
        else if (quote == '"' && *p == '"')
            quote = 0;
        else if (quote == '"' && *p == '\\' && p[1] && strchr("\"\\$`", p[1]))
            rc = split_putc(&s, *++p);
        else if (quote)
            rc = split_putc(&s, *p);
        else
            rc = split_plain(&s, &p, &quote);
    }
    if (rc < 0)
        goto fail;
    if (quote && !partial) {
        hc_error_set(err, HC_E(USAGE), "unterminated %s quote", quote == '"' ? "double" : "single");
        hc_error_hint(err, "close the quote, or escape it with a backslash");
        goto fail;
    }
    if (open_word)
        *open_word = s.in_word;
    if (s.in_word && split_push(&s) < 0)
        goto fail;
    if (!s.words && !(s.words = calloc(1, sizeof(*s.words))))
        goto fail;
    free(s.buf);
    *words = s.words;
    return s.n;
fail:
    if (rc < 0 || !quote || partial)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(s.buf);
    hc_shell_words_free(s.words);
    return -1;
}

void hc_shell_words_free(char **words)
{
    for (size_t i = 0; words && words[i]; i++)
        free(words[i]);
    free(words);
}
