/*
 * Unit tests of the operator's-experience parts of hcctl that need no terminal: the completion
 * engine on the real command table (groups, verbs, options, values, "--name=value", the group's
 * default verb, positional limits, help topics, file names) and on a table of its own, the
 * shell's word splitter, `hcctl __complete`, `hcctl completion`, `hcctl help TOPIC` with "did
 * you mean", the generated man pages, and the shell fed from a pipe (no terminal).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "cli/complete.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "cli/help.h"
#include "common/util.h"

/* ---------------------------------------------------------------- helpers */

/* Completes the words of line (split like the shell does); the last word is the current one
 * unless the line ends in a blank. Returns the candidates' words joined by spaces. */
static char *complete_text(const struct hc_cmd_group *const *groups, const char *line, int *files)
{
    char **words = NULL;
    int open_word = 0;
    struct hc_error err = {0};
    struct hc_complete c;
    struct hc_complete_conn conn = {0};
    conn.offline = 1;
    int n = hc_shell_split(line, 1, &words, &open_word, &err);
    assert_true(n >= 0);
    const char *cur = open_word ? words[n - 1] : "";
    assert_int_equal(hc_complete_line(groups, open_word ? n - 1 : n, words, cur, &conn, &c), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (size_t i = 0; i < c.n; i++)
        fprintf(f, "%s%.*s", i ? " " : "", (int)strcspn(c.items[i], "\t"), c.items[i]);
    fclose(f);
    if (files)
        *files = c.files;
    hc_complete_clear(&c);
    hc_shell_words_free(words);
    return text;
}

#define ASSERT_COMPLETES(line, expected)                                                           \
    do {                                                                                           \
        char *got_ = complete_text(hc_cmd_groups, line, NULL);                                     \
        if (strcmp(got_, expected) != 0)                                                           \
            fail_msg("completing '%s': got '%s', want '%s'", line, got_, expected);                \
        free(got_);                                                                                \
    } while (0)

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

struct run {
    int rc;
    char *out, *err;
};

static struct run run_line(const char *input, const char *const *words)
{
    struct run r = {0};
    size_t ol = 0, el = 0;
    char *argv[32];
    int argc = 0;
    argv[argc++] = "hcctl";
    while (words[argc - 1])
        argv[argc] = (char *)words[argc - 1], argc++;
    argv[argc] = NULL;
    FILE *out = open_memstream(&r.out, &ol), *err = open_memstream(&r.err, &el);
    FILE *in = fmemopen((void *)(input ? input : ""), input ? strlen(input) : 0, "r");
    struct hc_cli_io io = {out, err, in, 0, 0, 0};
    r.rc = hc_cli_main(hc_cmd_groups, argc, argv, &io);
    fclose(out);
    fclose(err);
    fclose(in);
    return r;
}

#define RUN(input, ...) run_line(input, (const char *const[]){__VA_ARGS__, NULL})

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* ---------------------------------------------------------------- engine, real table */

static void test_groups_and_verbs(void **state)
{
    (void)state;
    ASSERT_COMPLETES("cl", "cluster");
    ASSERT_COMPLETES("no", "node");
    ASSERT_COMPLETES("node ", "list show add set remove renew-cert");
    ASSERT_COMPLETES("node rem", "remove");
    ASSERT_COMPLETES("node re", "remove renew-cert");
    ASSERT_COMPLETES("operation w", "wait");
    /* hidden groups are never offered, but the table's visible ones all are */
    char *all = complete_text(hc_cmd_groups, "", NULL);
    assert_false(has_word(all, "self-test"));
    assert_false(has_word(all, "__complete"));
    assert_false(has_word(all, "__man"));
    for (size_t i = 0; hc_cmd_groups[i]; i++)
        if (!(hc_cmd_groups[i]->flags & HC_CMD_HIDDEN) && !has_word(all, hc_cmd_groups[i]->name))
            fail_msg("group '%s' is not offered: %s", hc_cmd_groups[i]->name, all);
    free(all);
    /* an unknown group or verb: nothing rather than a guess */
    ASSERT_COMPLETES("nod ", "");
    ASSERT_COMPLETES("node lst ", "");
}

static void test_options(void **state)
{
    (void)state;
    ASSERT_COMPLETES("--out", "--output");
    ASSERT_COMPLETES("-o ", "text json");
    ASSERT_COMPLETES("--output ", "text json");
    ASSERT_COMPLETES("--output=j", "--output=json");
    ASSERT_COMPLETES("-o json node l", "list");
    ASSERT_COMPLETES("node remove --no", "--no-wait --no-color");
    ASSERT_COMPLETES("operation list --state ", "pending running paused succeeded failed aborted");
    ASSERT_COMPLETES("operation list --state=f", "--state=failed");
    /* a verb's option shadows the global of the same name: node remove --timeout is the wait */
    char *opts = complete_text(hc_cmd_groups, "node remove --", NULL);
    const char *first = strstr(opts, "--timeout"),
               *second = first ? strstr(first + 1, "--timeout") : NULL;
    assert_non_null(first);
    assert_null(second);
    free(opts);
    /* an option value consumed: the word after it is positional again */
    ASSERT_COMPLETES("--timeout 5s no", "node");
    /* a flag takes no value: the next word is the group */
    ASSERT_COMPLETES("-q no", "node");
    /* "--" ends the options: a dash word is a positional then */
    ASSERT_COMPLETES("help -- --o", "");
}

/* Completion walks the line with the parser's walker: an option abbreviated as the parser
 * allows (a unique prefix of its long name) is that option, with its value, for both. */
static void test_abbreviations(void **state)
{
    (void)state;
    ASSERT_COMPLETES("--contr https://127.0.0.1:1 node ", "list show add set remove renew-cert");
    ASSERT_COMPLETES("--contr=https://127.0.0.1:1 node s", "show set");
    ASSERT_COMPLETES("--outp ", "text json");
    ASSERT_COMPLETES("operation list --sta ", "pending running paused succeeded failed aborted");
    ASSERT_COMPLETES("operation list --sta=f", "--sta=failed");
    /* ambiguous ("--t": --token or --timeout) is no option: its word is not consumed */
    ASSERT_COMPLETES("--t 5s ", "");
    /* the parser reads the same line the same way */
    struct run r = RUN(NULL, "--contr", "https://127.0.0.1:1", "--outp", "json", "node", "lst");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.out, "unknown verb 'lst' for 'node'"));
    run_free(&r);
}

/* The group's default verb is offered as the flag that selects it, never by its name. */
static void test_default_verb(void **state)
{
    (void)state;
    ASSERT_COMPLETES("upgrade ", "--rolling status pause resume abort");
    ASSERT_COMPLETES("upgrade --r", "--rolling");
    ASSERT_COMPLETES("upgrade --rolling --dr", "--dry-run");
    ASSERT_COMPLETES("upgrade upgrade ", ""); /* not a verb word */
    ASSERT_COMPLETES("help upgrade ", "status pause resume abort");
}

/* Bundle versions come from the controller (GET /v1/software) where a VERSION is expected; the
 * e2e test (tests/e2e/t40_ux.sh) asks a real controller, here the tables say where. */
static void test_bundle_completers(void **state)
{
    (void)state;
    const struct hc_cmd_group *sw = hc_cmd_find_group(hc_cmd_groups, "software");
    const struct hc_cmd_group *up = hc_cmd_find_group(hc_cmd_groups, "upgrade");
    assert_non_null(sw);
    assert_non_null(up);
    assert_int_equal(hc_cmd_find_verb(sw, "remove")->arg_completer, HC_COMPLETE_BUNDLE);
    assert_int_equal(hc_cmd_find_verb(sw, "show")->arg_completer, HC_COMPLETE_BUNDLE);
    const struct hc_cmd_verb *rolling = hc_cmd_default_verb(up);
    assert_non_null(rolling);
    const struct hc_cmd_opt *to = NULL;
    for (size_t i = 0; rolling->opts[i].name; i++)
        if (strcmp(rolling->opts[i].name, "to") == 0)
            to = &rolling->opts[i];
    assert_non_null(to);
    assert_int_equal(to->completer, HC_COMPLETE_BUNDLE);
    /* offline: no candidates and no file names */
    int files = 1;
    char *got = complete_text(hc_cmd_groups, "upgrade --rolling --to ", &files);
    assert_string_equal(got, "");
    assert_false(files);
    free(got);
}

static void test_values(void **state)
{
    (void)state;
    int files = 0;
    char *got = complete_text(hc_cmd_groups, "--ca ", &files);
    assert_true(files);
    assert_string_equal(got, "");
    free(got);
    got = complete_text(hc_cmd_groups, "cluster create x --ssh-key /tm", &files);
    assert_true(files);
    free(got);
    got = complete_text(hc_cmd_groups, "node show ", &files);
    assert_false(files); /* node names: from the controller, offline here */
    assert_string_equal(got, "");
    free(got);
    ASSERT_COMPLETES("completion ", "bash zsh fish");
    ASSERT_COMPLETES("completion z", "zsh");
    /* one positional only: nothing after it */
    ASSERT_COMPLETES("completion bash ", "");
    /* help: groups and docs topics, then a group's verbs */
    char *topics = complete_text(hc_cmd_groups, "help ", NULL);
    assert_true(has_word(topics, "node"));
    assert_true(has_word(topics, "exit-codes"));
    assert_true(has_word(topics, "durations"));
    free(topics);
    ASSERT_COMPLETES("help ex", "exit-codes");
    ASSERT_COMPLETES("help node s", "show set");
    ASSERT_COMPLETES("help exit-codes ", "");
}

/* A table of the test's own: a default verb named like its group, a standalone group. */
static int noop(struct hc_cmd_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const char *const colors[] = {"red", "green", NULL};
static const struct hc_cmd_opt roll_opts[] = {
    {"to", 0, HC_OPT_STRING, 1, "target", "V", HC_COMPLETE_NONE, NULL, NULL},
    {"color", 'c', HC_OPT_STRING, 0, "a color", "C", HC_COMPLETE_CHOICES, NULL, colors},
    {"file", 'f', HC_OPT_STRING, 0, "a file", "F", HC_COMPLETE_FILE, NULL, NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};
static const struct hc_cmd_verb roll_verbs[] = {
    {"roll", noop, roll_opts, 0, 0, "the default form", NULL, 0, HC_COMPLETE_NONE},
    {"status", noop, NULL, 0, 0, "status", NULL, 0, HC_COMPLETE_NONE},
    {"secret", noop, NULL, 0, 0, "hidden", NULL, HC_CMD_HIDDEN, HC_COMPLETE_NONE},
    {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, HC_COMPLETE_NONE},
};
static const struct hc_cmd_group roll_group = {"roll", "rolls", roll_verbs, 0};
static const struct hc_cmd_verb solo_verbs[] = {
    {"solo", noop, roll_opts, 0, 2, "alone", "A B", 0, HC_COMPLETE_SHELL},
    {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, HC_COMPLETE_NONE},
};
static const struct hc_cmd_group solo_group = {"solo", "alone", solo_verbs, HC_GROUP_STANDALONE};
static const struct hc_cmd_group *const own_groups[] = {&roll_group, &solo_group, NULL};

static void own(const char *line, const char *expected)
{
    char *got = complete_text(own_groups, line, NULL);
    if (strcmp(got, expected) != 0)
        fail_msg("completing '%s': got '%s', want '%s'", line, got, expected);
    free(got);
}

static void test_own_table(void **state)
{
    (void)state;
    own("", "roll solo");
    own("roll ", "status"); /* not the default verb's name, not the hidden verb */
    own("roll --t", "--to --token --timeout");
    own("roll --to 2 --co", "--color --controller");
    own("roll -c ", "red green");
    own("roll -cr", ""); /* a value attached to a short option: complete */
    own("roll -qc ", "red green");
    own("solo ", "bash zsh fish");
    own("solo bash ", "bash zsh fish");
    own("solo bash zsh ", ""); /* max_args reached */
    own("solo -c red ", "bash zsh fish");
    int files = 0;
    char *got = complete_text(own_groups, "solo --file ", &files);
    assert_true(files);
    free(got);
}

/* ---------------------------------------------------------------- splitting */

static void assert_split(const char *line, int partial, int want_n, const char *const *want,
                         int want_open)
{
    char **words = NULL;
    int open_word = -1;
    struct hc_error err = {0};
    int n = hc_shell_split(line, partial, &words, &open_word, &err);
    if (n != want_n)
        fail_msg("splitting [%s]: %d words, want %d (%s)", line, n, want_n, err.message);
    for (int i = 0; i < n; i++)
        assert_string_equal(words[i], want[i]);
    assert_null(words[n]);
    assert_int_equal(open_word, want_open);
    hc_shell_words_free(words);
}

static void test_split(void **state)
{
    (void)state;
    assert_split("", 0, 0, (const char *[]){NULL}, 0);
    assert_split("   ", 0, 0, (const char *[]){NULL}, 0);
    assert_split("node list", 0, 2, (const char *[]){"node", "list"}, 1);
    assert_split("  node   list  ", 0, 2, (const char *[]){"node", "list"}, 0);
    assert_split("a 'b c' \"d \\\" e\" f\\ g", 0, 4, (const char *[]){"a", "b c", "d \" e", "f g"},
                 1);
    assert_split("it''s \"\" x", 0, 3, (const char *[]){"its", "", "x"}, 1);
    assert_split("'a\\b' \"a\\b\"", 0, 2, (const char *[]){"a\\b", "a\\b"}, 1);
    assert_split("node list # a comment", 0, 2, (const char *[]){"node", "list"}, 0);
    assert_split("a#b", 0, 1, (const char *[]){"a#b"}, 1);
    /* partial: an open quote is the word being typed */
    assert_split("node show \"n", 1, 3, (const char *[]){"node", "show", "n"}, 1);
    assert_split("node show '", 1, 3, (const char *[]){"node", "show", ""}, 1);
    char **words = NULL;
    struct hc_error err = {0};
    assert_int_equal(hc_shell_split("node show \"n1", 0, &words, NULL, &err), -1);
    assert_string_equal(err.code, HC_CLI_ERR_USAGE);
    assert_non_null(strstr(err.message, "unterminated double quote"));
}

/* ---------------------------------------------------------------- commands */

static void test_complete_verb(void **state)
{
    (void)state;
    struct run r = RUN(NULL, "__complete", "--", "node", "");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "list\tlist the nodes with their health\n"
                               "show\tshow one node and its network interfaces\n"
                               "add\tbring hosts in over SSH: push, enroll and start the agent on "
                               "each\n"
                               "set\tset a node's failure domain (the storage service moves "
                               "replicas to match)\n"
                               "remove\tremove a node from the cluster (disruptive: asks, or "
                               "needs --yes)\n"
                               "renew-cert\trenew the node's certificate now (also one that has "
                               "expired)\n");
    run_free(&r);
    r = RUN(NULL, "__complete", "--", "--ca", "");
    assert_string_equal(r.out, ":files\n");
    run_free(&r);
    r = RUN(NULL, "-o", "json", "__complete", "--", "-o", "j");
    json_t *doc = json_loads(r.out, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "candidates"), 0), "word")),
                        "json");
    json_decref(doc);
    run_free(&r);
    /* no words at all: the groups */
    r = RUN(NULL, "__complete");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "cluster\t"));
    run_free(&r);
}

static void test_completion_scripts(void **state)
{
    (void)state;
    const char *shells[] = {"bash", "zsh", "fish"};
    for (size_t i = 0; i < 3; i++) {
        struct run r = RUN(NULL, "completion", shells[i]);
        assert_int_equal(r.rc, 0);
        assert_string_equal(r.out, hc_complete_script(shells[i]));
        /* driven by __complete, never by a list of commands */
        assert_non_null(strstr(r.out, "__complete --"));
        assert_null(strstr(r.out, "cluster"));
        run_free(&r);
    }
    struct run r = RUN(NULL, "completion", "zhs");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean 'zsh'?"));
    run_free(&r);
}

static void test_help_topics(void **state)
{
    (void)state;
    struct run r = RUN(NULL, "help", "exit-codes");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "6  timed out"));
    run_free(&r);
    r = RUN(NULL, "help", "node", "show");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Usage: hcctl node show NODE"));
    run_free(&r);
    r = RUN(NULL, "help", "node");
    assert_non_null(strstr(r.out, "Verbs:"));
    run_free(&r);
    r = RUN(NULL, "help", "completion"); /* a group with a topic of the same name */
    assert_non_null(strstr(r.out, "Usage: hcctl completion SHELL"));
    assert_non_null(strstr(r.out, "bash-completion/completions/hcctl"));
    run_free(&r);
    r = RUN(NULL, "help", "exit-code");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "no help topic 'exit-code'"));
    assert_non_null(strstr(r.err, "did you mean 'exit-codes'?"));
    run_free(&r);
    r = RUN(NULL, "help", "node", "shwo");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "hcctl help node"));
    run_free(&r);
    r = RUN(NULL, "help");
    assert_non_null(strstr(r.out, "Help topics"));
    run_free(&r);
    /* the engine's own "did you mean" for flags still answers inside new groups */
    r = RUN(NULL, "completion", "bash", "--quite");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean '--quiet'?"));
    run_free(&r);
}

static void test_man_pages(void **state)
{
    (void)state;
    struct run r = RUN(NULL, "__man");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, ".TH HCCTL 1 "));
    assert_non_null(strstr(r.out, ".SH EXIT STATUS"));
    for (size_t i = 0; hc_cmd_groups[i]; i++) {
        char see[128];
        snprintf(see, sizeof(see), "\\fBhcctl\\-%s\\fR(1)", hc_cmd_groups[i]->name);
        int hidden = (hc_cmd_groups[i]->flags & HC_CMD_HIDDEN) != 0;
        if ((strstr(r.out, see) != NULL) == hidden)
            fail_msg("hcctl(1) and group '%s' (hidden %d)", hc_cmd_groups[i]->name, hidden);
    }
    run_free(&r);
    r = RUN(NULL, "__man", "node");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, ".TH HCCTL\\-NODE 1 "));
    assert_non_null(strstr(r.out, "hcctl node show NODE"));
    assert_non_null(strstr(r.out, "\\fB\\-\\-no\\-wait\\fR"));
    run_free(&r);
    /* the default verb's synopsis is how it is typed */
    r = RUN(NULL, "__man", "upgrade");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, ".B hcctl upgrade \\-\\-rolling\n\\-\\-to VERSION [OPTIONS]\n"));
    assert_null(strstr(r.out, "hcctl upgrade upgrade"));
    run_free(&r);
    r = RUN(NULL, "__man", "cluster");
    assert_non_null(strstr(r.out, ".B hcctl cluster show\n"));
    run_free(&r);
    r = RUN(NULL, "__man", "nod");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);
    /* every page into a directory */
    char dir[512];
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    hc_mkdir_p(base, 0755, NULL);
    snprintf(dir, sizeof(dir), "%s/man.XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    r = RUN(NULL, "__man", "--dir", dir);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    for (size_t i = 0; hc_cmd_groups[i]; i++) {
        char path[700];
        snprintf(path, sizeof(path), "%s/hcctl-%s.1", dir, hc_cmd_groups[i]->name);
        FILE *f = fopen(path, "r");
        assert_int_equal(f != NULL, !(hc_cmd_groups[i]->flags & HC_CMD_HIDDEN));
        if (f)
            fclose(f), remove(path);
    }
    char path[700];
    snprintf(path, sizeof(path), "%s/hcctl.1", dir);
    assert_int_equal(remove(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_shell_from_pipe(void **state)
{
    (void)state;
    /* no terminal: lines run in-process, one after the other, with the same parser */
    struct run r = RUN("help durations\n"
                       "  # a comment line\n"
                       "\n"
                       "hcctl completion 'zsh'\n"
                       "node lst\n"
                       "help \"exit-codes\n"
                       "shell\n"
                       "exit 7\n"
                       "help durations\n",
                       "shell");
    assert_int_equal(r.rc, 7);
    assert_non_null(strstr(r.out, "1m30s"));
    assert_non_null(strstr(r.out, "#compdef hcctl"));
    assert_non_null(strstr(r.err, "unknown verb 'lst' for 'node'"));
    assert_non_null(strstr(r.err, "did you mean 'list'?"));
    assert_non_null(strstr(r.err, "unterminated double quote"));
    assert_non_null(strstr(r.err, "already in the shell"));
    /* nothing after exit ran */
    assert_null(strstr(strstr(r.out, "1m30s") + 1, "1m30s"));
    run_free(&r);
    /* end of input: the status of the last command */
    r = RUN("node lst\n", "shell");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);
    r = RUN("", "shell");
    assert_int_equal(r.rc, 0);
    run_free(&r);
}

static void test_self_test(void **state)
{
    (void)state;
    assert_int_equal(hc_cmd_self_test(hc_cmd_groups, stderr), 0);
    struct run r = RUN(NULL, "--help");
    assert_null(strstr(r.out, "__complete"));
    assert_null(strstr(r.out, "__man"));
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_and_verbs), cmocka_unit_test(test_options),
        cmocka_unit_test(test_values),           cmocka_unit_test(test_default_verb),
        cmocka_unit_test(test_abbreviations),    cmocka_unit_test(test_bundle_completers),
        cmocka_unit_test(test_own_table),        cmocka_unit_test(test_split),
        cmocka_unit_test(test_complete_verb),    cmocka_unit_test(test_completion_scripts),
        cmocka_unit_test(test_help_topics),      cmocka_unit_test(test_man_pages),
        cmocka_unit_test(test_shell_from_pipe),  cmocka_unit_test(test_self_test),
    };
    /* dynamic completion must not reach a controller configured on this machine */
    setenv("XDG_CONFIG_HOME", "/nonexistent-hcctl-test", 1);
    unsetenv("HCCTL_CONTROLLER");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
