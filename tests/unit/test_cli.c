/*
 * Unit tests of hcctl's command engine and client (cli/): parsing through the real engine and
 * tables (unknown group/verb/flag with "did you mean", argument counts, option types, help for
 * every verb, self-test), configuration precedence with a temporary XDG_CONFIG_HOME, the
 * exit-code mapping, and whole commands against a fake controller served over real TLS on
 * 127.0.0.1 (common/https_server.c, certificates from common/pki.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/net_sim.h"
#include "cli/api_client.h"
#include "cli/cmd.h"
#include "cli/config.h"
#include "cli/exit_codes.h"
#include "common/https_server.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/net.h"

/* ---------------------------------------------------------------- running hcctl */

struct run {
    int rc;
    char *out, *err;
};

static char tmpdir[512];

static struct run run_io(const struct hc_cmd_group *const *groups, int out_tty, int in_tty,
                         const char *input, const char *const *words)
{
    struct run r = {0};
    size_t out_len = 0, err_len = 0;
    char *argv[64];
    int argc = 0;
    argv[argc++] = "hcctl";
    for (; words[argc - 1]; argc++)
        argv[argc] = (char *)words[argc - 1];
    argv[argc] = NULL;
    FILE *out = open_memstream(&r.out, &out_len), *err = open_memstream(&r.err, &err_len);
    FILE *in = input ? fmemopen((void *)input, strlen(input), "r") : NULL;
    struct hc_cli_io io = {out, err, in, out_tty, in_tty, 0};
    r.rc = hc_cli_main(groups, argc, argv, &io);
    fclose(out);
    fclose(err);
    if (in)
        fclose(in);
    return r;
}

#define RUN(...) run_io(hc_cmd_groups, 0, 0, NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_FAKE(...) run_io(fake_groups, 0, 0, NULL, (const char *const[]){__VA_ARGS__, NULL})

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Asserts that stdout holds exactly one JSON document and returns it (caller decrefs). */
static json_t *one_document(const char *text)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr); /* jansson refuses trailing data */
    if (!doc)
        fail_msg("stdout is not one JSON document (%s): %s", jerr.text, text);
    return doc;
}

static const char *error_code(const json_t *doc)
{
    return json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
}

/* ---------------------------------------------------------------- a fake table */

static struct {
    int called, argc, verbose, json, color, quiet, yes;
    char argv[4][64], name[64], color_choice[16], controller[256], token[64], ca_pem[64];
    char controller_from[16], token_from[16], ca_file[256];
    int64_t count, wait_ms, verb_timeout_ms, global_timeout_ms;
} seen;

static int probe_handler(struct hc_cmd_ctx *ctx)
{
    seen.called++;
    seen.argc = ctx->argc;
    for (int i = 0; i < ctx->argc && i < 4; i++)
        snprintf(seen.argv[i], sizeof(seen.argv[i]), "%s", ctx->argv[i]);
    seen.verbose = hc_cmd_opt_bool(ctx, "verbose");
    snprintf(seen.name, sizeof(seen.name), "%s",
             hc_cmd_opt_str(ctx, "name") ? hc_cmd_opt_str(ctx, "name") : "(null)");
    snprintf(seen.color_choice, sizeof(seen.color_choice), "%s", hc_cmd_opt_str(ctx, "color"));
    seen.count = hc_cmd_opt_int(ctx, "count");
    seen.wait_ms = hc_cmd_opt_ms(ctx, "wait");
    seen.verb_timeout_ms = hc_cmd_opt_ms(ctx, "timeout");
    seen.global_timeout_ms = ctx->g.timeout_ms;
    seen.json = ctx->out.json;
    seen.color = ctx->out.color;
    seen.quiet = ctx->out.quiet;
    seen.yes = ctx->g.yes;
    return 0;
}

static int need_handler(struct hc_cmd_ctx *ctx)
{
    seen.called++;
    snprintf(seen.name, sizeof(seen.name), "%s", hc_cmd_opt_str(ctx, "target"));
    return 0;
}

static int config_handler(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const struct hc_cli_config *cfg = hc_cmd_config(ctx, &err);
    seen.called++;
    if (!cfg)
        return hc_cmd_fail(ctx, &err, NULL);
    snprintf(seen.controller, sizeof(seen.controller), "%s",
             cfg->controller ? cfg->controller : "");
    snprintf(seen.token, sizeof(seen.token), "%s", cfg->token ? cfg->token : "");
    snprintf(seen.ca_pem, sizeof(seen.ca_pem), "%s", cfg->ca_pem ? cfg->ca_pem : "");
    snprintf(seen.ca_file, sizeof(seen.ca_file), "%s", cfg->ca_file ? cfg->ca_file : "");
    snprintf(seen.controller_from, sizeof(seen.controller_from), "%s",
             cfg->controller_from ? cfg->controller_from : "");
    snprintf(seen.token_from, sizeof(seen.token_from), "%s",
             cfg->token_from ? cfg->token_from : "");
    return 0;
}

static const char *const colors[] = {"red", "green", "blue", NULL};

static const struct hc_cmd_opt probe_opts[] = {
    {"verbose", 'v', HC_OPT_BOOL, 0, "talk more", NULL, HC_COMPLETE_NONE, NULL, NULL},
    {"name", 'n', HC_OPT_STRING, 0, "a name", "NAME", HC_COMPLETE_NONE, NULL, NULL},
    {"count", 'c', HC_OPT_INT, 0, "a count", "N", HC_COMPLETE_NONE, "3", NULL},
    {"wait", 0, HC_OPT_DURATION, 0, "a wait", "DUR", HC_COMPLETE_NONE, "1m", NULL},
    {"color", 0, HC_OPT_STRING, 0, "a color", "COLOR", HC_COMPLETE_CHOICES, "red", colors},
    {"timeout", 0, HC_OPT_DURATION, 0, "shadows the global", "DUR", HC_COMPLETE_NONE, "5m", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};

static const struct hc_cmd_opt need_opts[] = {
    {"target", 't', HC_OPT_STRING, 1, "where to", "TARGET", HC_COMPLETE_NONE, NULL, NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};

static const struct hc_cmd_verb fake_verbs[] = {
    {"probe", probe_handler, probe_opts, 0, 2, "record what was parsed", "[A [B]]", 0, 0},
    {"need", need_handler, need_opts, 0, 0, "needs --target", NULL, 0, 0},
    {"config", config_handler, NULL, 0, 0, "resolve the configuration", NULL, 0, 0},
    {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
};
static const struct hc_cmd_group fake_group = {"fake", "a fake group", fake_verbs, 0};
static const struct hc_cmd_verb solo_verbs[] = {
    {"solo", probe_handler, probe_opts, 0, 1, "a standalone command", "[A]", 0, 0},
    {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
};
static const struct hc_cmd_group solo_group = {"solo", "a standalone group", solo_verbs,
                                               HC_GROUP_STANDALONE};
static const struct hc_cmd_group *const fake_groups[] = {&fake_group, &solo_group, NULL};

/* ---------------------------------------------------------------- environment */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char config_dir[600], config_path[700];

static void write_config(const char *text)
{
    write_file(config_path, text);
}

/* Every test starts from a clean environment: XDG_CONFIG_HOME in the temp dir, no config
 * file, no HCCTL_* or NO_COLOR variables. */
static int reset_env(void **state)
{
    (void)state;
    char xdg[600];
    memset(&seen, 0, sizeof(seen));
    snprintf(xdg, sizeof(xdg), "%s/xdg", tmpdir);
    snprintf(config_dir, sizeof(config_dir), "%s/hcctl", xdg);
    snprintf(config_path, sizeof(config_path), "%s/config.json", config_dir);
    mkdir(xdg, 0700);
    mkdir(config_dir, 0700);
    unlink(config_path);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    unsetenv("HCCTL_CONTROLLER");
    unsetenv("HCCTL_TOKEN");
    unsetenv("HCCTL_CA_FILE");
    unsetenv("NO_COLOR");
    return 0;
}

/* ---------------------------------------------------------------- parsing: real table */

static void test_unknown_group_suggests(void **state)
{
    (void)state;
    struct run r = RUN("clustr", "status");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "hcctl: error: unknown command 'clustr'; "));
    assert_non_null(strstr(r.err, "; hint: did you mean 'cluster'?\n"));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("zzzzzz");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "see 'hcctl --help'"));
    run_free(&r);
    /* hidden groups are never suggested */
    r = RUN("self-tst");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_null(strstr(r.err, "self-test"));
    run_free(&r);
}

static void test_unknown_verb(void **state)
{
    (void)state;
    struct run r = RUN("node", "lst");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "unknown verb 'lst' for 'node'"));
    assert_non_null(strstr(r.err, "did you mean 'list'?"));
    run_free(&r);
    r = RUN("operation", "wiat", "op-1"); /* a transposition is one edit */
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean 'wait'?"));
    run_free(&r);
    r = RUN("node", "frobnicate");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "hint: see 'hcctl node --help'"));
    run_free(&r);
    r = RUN("node");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "missing verb for 'node'"));
    run_free(&r);
    r = run_io(hc_cmd_groups, 0, 0, NULL, (const char *const[]){NULL});
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "missing command"));
    run_free(&r);
}

static void test_unknown_flag(void **state)
{
    (void)state;
    struct run r = RUN("node", "list", "--bogus");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "unknown option '--bogus'"));
    assert_non_null(strstr(r.err, "see 'hcctl node list --help'"));
    run_free(&r);
    r = RUN("--contoller", "https://x", "node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean '--controller'?"));
    run_free(&r);
    r = RUN("node", "remove", "n1", "--no-wiat");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean '--no-wait'?"));
    run_free(&r);
    r = RUN("-Z", "node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "unknown option '-Z'"));
    run_free(&r);
    r = RUN("node", "-o", "json", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "expected a verb after 'node'"));
    run_free(&r);
}

static void test_arg_counts(void **state)
{
    (void)state;
    struct run r = RUN("node", "show");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "missing argument for 'node show' (expected NODE)"));
    assert_non_null(strstr(r.err, "hint: usage: hcctl node show NODE [OPTIONS]"));
    run_free(&r);
    r = RUN("node", "show", "a", "b");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "too many arguments for 'node show': unexpected 'b'"));
    run_free(&r);
    r = RUN("node", "list", "extra");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);
    r = RUN("events", "extra");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "too many arguments for 'events'"));
    run_free(&r);
}

static void test_output_format(void **state)
{
    (void)state;
    struct run r = RUN("-o", "yaml", "node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "invalid value 'yaml' for --output"));
    assert_non_null(strstr(r.err, "one of: text, json"));
    run_free(&r);
    r = RUN("node", "list", "--output=yaml");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);
    r = RUN("node", "list", "-o", "jsno");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "did you mean 'json'?"));
    run_free(&r);
    r = RUN("--timeout", "soon", "version");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "invalid value 'soon' for --timeout: not a duration"));
    run_free(&r);
    r = RUN("--timeout", "0s", "version");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);
}

/* Usage errors with -o json: the JSON error shape on stdout too, exactly one document. */
/* A host that is no [USER@]HOST[:PORT] is a usage error, found before the controller is asked
 * (none is configured here: a request would fail with exit 3). */
static void test_bad_node_addresses(void **state)
{
    (void)state;
    static const char *const bad[] = {"root@", "host:99999", "x;rm -rf /", "a b", "h:0", "[h]:22"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct run r = RUN("node", "add", "198.18.0.11", bad[i], "--yes");
        if (r.rc != HC_EXIT_USAGE || !strstr(r.err, "invalid node address"))
            fail_msg("'%s': rc %d, stderr '%s'", bad[i], r.rc, r.err);
        run_free(&r);
        r = RUN("cluster", "create", "c", "--node", bad[i], "--yes");
        assert_int_equal(r.rc, HC_EXIT_USAGE);
        run_free(&r);
    }
}

static void test_usage_error_json(void **state)
{
    (void)state;
    struct run r = RUN("-o", "json", "clustr");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "usage");
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "error"), "hint")),
                        "did you mean 'cluster'?");
    assert_non_null(strstr(r.err, "hcctl: error: unknown command 'clustr'"));
    json_decref(doc);
    run_free(&r);
    r = RUN("node", "show", "-o", "json");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    doc = one_document(r.out);
    assert_string_equal(error_code(doc), "usage");
    json_decref(doc);
    run_free(&r);
}

/* -o json anywhere on the line, even after the word the parser stopped at or written in any
 * form getopt accepts: the usage error is also the one JSON document on stdout. */
static void test_usage_error_json_anywhere(void **state)
{
    (void)state;
    static const struct {
        const char *words[10];
        const char *message;
    } cases[] = {
        {{"-o", "json", "--timeout", "abc", "node", "list"}, "invalid value 'abc' for --timeout"},
        {{"cluster", "join-token", "--ttl", "abc", "-o", "json"}, "invalid value 'abc' for --ttl"},
        {{"--timeout", "abc", "node", "list", "--output=json"}, "for --timeout"},
        {{"node", "list", "--bogus", "-ojson"}, "unknown option '--bogus'"},
        {{"-qo", "json", "--timeout", "0", "node", "list"}, "for --timeout: must be more than 0"},
        {{"upgrade", "--rolling", "--to", "1.1", "--node-timeout", "0", "-o", "json"},
         "invalid value '0' for --node-timeout: must be more than 0"},
        {{"maintenance", "enter", "n1", "--timeout", "0s", "-o", "json"}, "must be more than 0"},
        {{"--outp", "json", "clustr"}, "unknown command 'clustr'"},
        {{"node", "-o", "json"}, "expected a verb after 'node'"},
        {{"node", "show", "a", "b", "--output", "json"}, "too many arguments"},
        {{"upgrade", "--rolling", "-o", "json"}, "option --to is required"},
        {{"events", "--limit", "x", "-o", "json"}, "not an integer"},
        {{"cluster", "join-token", "--ttl", "-o", "json"}, "invalid value '-o' for --ttl"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r = run_io(hc_cmd_groups, 0, 0, NULL, cases[i].words);
        if (r.rc != HC_EXIT_USAGE || !strstr(r.err, cases[i].message))
            fail_msg("case %zu: rc %d, stderr '%s'", i, r.rc, r.err);
        if (i + 1 < sizeof(cases) / sizeof(cases[0])) {
            json_t *doc = one_document(r.out);
            assert_string_equal(error_code(doc), "usage");
            assert_non_null(
                strstr(json_string_value(json_object_get(json_object_get(doc, "error"), "message")),
                       cases[i].message));
            json_decref(doc);
        } else {
            /* "-o" was the value of --ttl: "json" is a stray word, the output stays text */
            assert_string_equal(r.out, "");
        }
        run_free(&r);
    }
    /* software build -o is the bundle file, not the output format: text */
    struct run r = RUN("software", "build", "-o", "json", "--bogus");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("cluster", "join-token", "--ttl", "abc", "-o", "text");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_string_equal(r.out, "");
    run_free(&r);
}

/* The group's default verb ("upgrade --rolling") is never shown by its name "upgrade". */
static void test_default_verb_wording(void **state)
{
    (void)state;
    struct run r = RUN("upgrade", "--rolling");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "option --to is required for 'upgrade --rolling'; hint: usage: "
                                  "hcctl upgrade --rolling --to VERSION [OPTIONS]"));
    run_free(&r);
    r = RUN("upgrade", "--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "\n  --rolling    upgrade every node"));
    assert_null(strstr(r.out, "\n  upgrade ")); /* no verb line for the pseudo-verb */
    run_free(&r);
    r = RUN("upgrade", "--rolling", "--help");
    assert_non_null(strstr(r.out, "Usage: hcctl upgrade --rolling --to VERSION [OPTIONS]\n"));
    run_free(&r);
    r = RUN("--help");
    assert_non_null(strstr(r.out, "\n  upgrade --rolling        upgrade every node"));
    run_free(&r);
    /* the pseudo-verb cannot be typed, and "did you mean" never offers it */
    r = RUN("upgrade", "upgrade", "--rolling", "--to", "1");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "unknown verb 'upgrade' for 'upgrade'"));
    run_free(&r);
    r = RUN("upgrade", "upgrad");
    assert_null(strstr(r.err, "did you mean 'upgrade'"));
    run_free(&r);
    r = RUN("upgrade", "--to", "1");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "add --rolling"));
    run_free(&r);
}

static void expect_help(const char *const *words, const char *usage_prefix)
{
    struct run r = run_io(hc_cmd_groups, 0, 0, NULL, words);
    if (r.rc != 0 || strncmp(r.out, usage_prefix, strlen(usage_prefix)) != 0 || r.err[0])
        fail_msg("help for '%s %s': rc %d, out '%.80s', err '%s'", words[0], words[1], r.rc, r.out,
                 r.err);
    run_free(&r);
}

/* --help and -h on hcctl, every group and every verb (hidden ones too), from the tables. */
static void test_help_everywhere(void **state)
{
    (void)state;
    char prefix[128];
    expect_help((const char *const[]){"--help", NULL}, "Usage: hcctl [OPTIONS]");
    expect_help((const char *const[]){"-h", NULL}, "Usage: hcctl [OPTIONS]");
    for (size_t g = 0; hc_cmd_groups[g]; g++) {
        const struct hc_cmd_group *grp = hc_cmd_groups[g];
        snprintf(prefix, sizeof(prefix), "Usage: hcctl %s", grp->name);
        expect_help((const char *const[]){grp->name, "--help", NULL}, prefix);
        expect_help((const char *const[]){grp->name, "-h", NULL}, prefix);
        for (size_t v = 0; grp->verbs[v].name; v++) {
            if (grp->flags & HC_GROUP_STANDALONE)
                continue;
            /* the group's default verb is typed as its flag ("upgrade --rolling") */
            const char *word = &grp->verbs[v] == hc_cmd_default_verb(grp) ? grp->verbs[v].usage
                                                                          : grp->verbs[v].name;
            snprintf(prefix, sizeof(prefix), "Usage: hcctl %s %s", grp->name, word);
            expect_help((const char *const[]){grp->name, word, "--help", NULL}, prefix);
            /* help wins over missing arguments */
            expect_help((const char *const[]){grp->name, word, "-h", NULL}, prefix);
        }
    }
}

static void test_help_content(void **state)
{
    (void)state;
    struct run r = RUN("--help");
    /* every visible verb is listed, the hidden self-test is not */
    assert_non_null(strstr(r.out, "  node remove "));
    assert_non_null(strstr(r.out, "  events "));
    assert_null(strstr(r.out, "self-test"));
    assert_non_null(strstr(r.out, "-o, --output FORMAT"));
    run_free(&r);
    r = RUN("node", "remove", "--help");
    assert_non_null(strstr(r.out, "Usage: hcctl node remove NODE [OPTIONS]\n"));
    assert_non_null(strstr(r.out, "-y, --yes")); /* disruptive verbs show --yes */
    assert_non_null(strstr(r.out, "--timeout DUR"));
    assert_non_null(strstr(r.out, "(default 10m)"));
    run_free(&r);
    r = RUN("operation", "list", "--help");
    assert_non_null(strstr(r.out, "pending|running|paused|succeeded|failed|aborted"));
    run_free(&r);
}

static void test_self_test_real_tables(void **state)
{
    (void)state;
    assert_int_equal(hc_cmd_self_test(hc_cmd_groups, stderr), 0);
    struct run r = RUN("self-test");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "self-test: 0 problems"));
    run_free(&r);
    r = RUN("-o", "json", "self-test");
    json_t *doc = one_document(r.out);
    assert_true(json_is_true(json_object_get(doc, "ok")));
    assert_int_equal(json_array_size(json_object_get(doc, "problems")), 0);
    json_decref(doc);
    run_free(&r);
}

/* The self-test must actually catch broken tables. */
static void test_self_test_finds_problems(void **state)
{
    (void)state;
    static const struct hc_cmd_opt bad_opts[] = {
        {"dup", 0, HC_OPT_BOOL, 0, "one", NULL, 0, NULL, NULL},
        {"dup", 0, HC_OPT_BOOL, 0, "two", NULL, 0, NULL, NULL},            /* declared twice */
        {"nohelp", 0, HC_OPT_BOOL, 0, NULL, NULL, 0, NULL, NULL},          /* no help */
        {"req", 0, HC_OPT_STRING, 1, "required", NULL, 0, NULL, NULL},     /* no value name */
        {"n", 0, HC_OPT_INT, 0, "bad default", "N", 0, "many", NULL},      /* default */
        {"d", 0, HC_OPT_DURATION, 0, "bad default", "D", 0, "soon", NULL}, /* default */
        {"q", 'q', HC_OPT_BOOL, 0, "clashes with -q/--quiet", NULL, 0, NULL, NULL},
        {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
    };
    static const struct hc_cmd_verb bad_verbs[] = {
        {"a", probe_handler, bad_opts, 0, 0, "fine", NULL, 0, 0},
        {"a", probe_handler, NULL, 0, 0, "duplicate", NULL, 0, 0}, /* declared twice */
        {"b", probe_handler, NULL, 2, 1, "min > max", "X", 0, 0},  /* min > max */
        {"c", NULL, NULL, 0, 0, NULL, NULL, 0, 0},                 /* handler, summary */
        {"d", probe_handler, NULL, 1, 1, "args without usage", NULL, 0, 0},
        {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
    };
    static const struct hc_cmd_group bad = {"bad", "broken", bad_verbs, 0};
    static const struct hc_cmd_group *const groups[] = {&bad, &bad, NULL}; /* group twice */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int n = hc_cmd_self_test(groups, f);
    fclose(f);
    const char *expected[] = {
        "bad a --dup: declared twice",
        "bad a --nohelp: no help text",
        "bad a --req: takes a value but has no value name",
        "bad a --n: default 'many' is not an integer",
        "bad a --d: default 'soon' is not a duration",
        "bad a -q: clashes with global --quiet",
        "bad a: verb declared twice",
        "bad b: min_args 2 > max_args 1",
        "bad c: no handler",
        "bad c: no summary",
        "bad d: positional arguments and the usage text go together",
        "bad: group declared twice",
    };
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
        if (!strstr(text, expected[i]))
            fail_msg("self-test did not report '%s'; it said:\n%s", expected[i], text);
    /* each problem of the group is reported once per copy of the group */
    assert_int_equal(n, 2 * 11 + 1);
    free(text);
    /* and through the engine the exit code says "a check found problems" */
    const struct hc_cmd_group *self_test = hc_cmd_find_group(hc_cmd_groups, "self-test");
    assert_non_null(self_test);
    struct run r = run_io((const struct hc_cmd_group *const[]){&bad, self_test, NULL}, 0, 0, NULL,
                          (const char *const[]){"self-test", NULL});
    assert_int_equal(r.rc, HC_EXIT_CHECK);
    assert_non_null(strstr(r.out, "problem: bad a --dup: declared twice"));
    run_free(&r);
}

/* A group's default verb must name the flag that selects it (its usage). */
static void test_self_test_default_verb(void **state)
{
    (void)state;
    static const struct hc_cmd_opt flag_opts[] = {
        {"go", 0, HC_OPT_BOOL, 0, "go", NULL, 0, NULL, NULL},
        {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
    };
    static const struct hc_cmd_verb good_verbs[] = {
        {"grp", probe_handler, flag_opts, 0, 0, "default", "--go", 0, 0},
        {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
    };
    static const struct hc_cmd_verb bad_verbs[] = {
        {"grp", probe_handler, flag_opts, 0, 0, "default", NULL, 0, 0},
        {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
    };
    static const struct hc_cmd_verb wrong_verbs[] = {
        {"grp", probe_handler, flag_opts, 0, 0, "default", "--stop", 0, 0},
        {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, 0},
    };
    static const struct hc_cmd_group good = {"grp", "g", good_verbs, 0};
    static const struct hc_cmd_group bad = {"grp", "g", bad_verbs, 0};
    static const struct hc_cmd_group wrong = {"grp", "g", wrong_verbs, 0};
    assert_int_equal(hc_cmd_self_test((const struct hc_cmd_group *const[]){&good, NULL}, NULL), 0);
    assert_int_equal(hc_cmd_self_test((const struct hc_cmd_group *const[]){&bad, NULL}, NULL), 1);
    assert_int_equal(hc_cmd_self_test((const struct hc_cmd_group *const[]){&wrong, NULL}, NULL), 1);
}

/* ---------------------------------------------------------------- parsing: fake table */

static void test_options_parsed(void **state)
{
    (void)state;
    struct run r = RUN_FAKE("fake", "probe", "a", "-v", "--name", "x", "b", "-c", "7", "--wait",
                            "250ms", "--color=green", "-o", "json", "--timeout", "10s", "-q");
    assert_int_equal(r.rc, 0);
    assert_int_equal(seen.called, 1);
    assert_int_equal(seen.argc, 2);
    assert_string_equal(seen.argv[0], "a");
    assert_string_equal(seen.argv[1], "b");
    assert_int_equal(seen.verbose, 1);
    assert_string_equal(seen.name, "x");
    assert_int_equal(seen.count, 7);
    assert_int_equal(seen.wait_ms, 250);
    assert_string_equal(seen.color_choice, "green");
    assert_int_equal(seen.json, 1); /* global after the verb */
    assert_int_equal(seen.quiet, 1);
    assert_int_equal(seen.verb_timeout_ms, 10000); /* the verb's --timeout wins after the verb */
    assert_int_equal(seen.global_timeout_ms, 30000);
    run_free(&r);
}

static void test_option_defaults_and_globals(void **state)
{
    (void)state;
    struct run r = RUN_FAKE("--timeout", "5s", "-y", "fake", "probe");
    assert_int_equal(r.rc, 0);
    assert_int_equal(seen.argc, 0);
    assert_int_equal(seen.verbose, 0);
    assert_string_equal(seen.name, "(null)");
    assert_int_equal(seen.count, 3);
    assert_int_equal(seen.wait_ms, 60000);
    assert_string_equal(seen.color_choice, "red");
    assert_int_equal(seen.verb_timeout_ms, 300000);
    assert_int_equal(seen.global_timeout_ms, 5000);
    assert_int_equal(seen.yes, 1);
    assert_int_equal(seen.json, 0);
    run_free(&r);
    /* "--" ends the options */
    r = RUN_FAKE("fake", "probe", "--", "-v");
    assert_int_equal(r.rc, 0);
    assert_int_equal(seen.verbose, 0);
    assert_string_equal(seen.argv[0], "-v");
    run_free(&r);
    /* standalone group: the options follow the group word */
    r = RUN_FAKE("solo", "--count", "9", "x");
    assert_int_equal(r.rc, 0);
    assert_int_equal(seen.count, 9);
    assert_string_equal(seen.argv[0], "x");
    run_free(&r);
}

static void test_option_errors(void **state)
{
    (void)state;
    static const struct {
        const char *words[6];
        const char *message;
    } cases[] = {
        {{"fake", "probe", "--count", "x"}, "invalid value 'x' for --count: not an integer"},
        {{"fake", "probe", "--count", "7z"}, "not an integer"},
        {{"fake", "probe", "--wait", "soon"}, "invalid value 'soon' for --wait: not a duration"},
        {{"fake", "probe", "--color", "gren"}, "did you mean 'green'?"},
        {{"fake", "probe", "--name"}, "option --name needs a value (NAME)"},
        {{"fake", "probe", "-n"}, "option --name needs a value (NAME)"},
        {{"fake", "probe", "--verbose=yes"}, "option --verbose takes no value"},
        {{"fake", "probe", "a", "b", "c"}, "too many arguments for 'fake probe'"},
        {{"fake", "need"}, "option --target is required for 'fake need'"},
        {{"solo", "a", "b"}, "too many arguments for 'solo'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r = run_io(fake_groups, 0, 0, NULL, cases[i].words);
        if (r.rc != HC_EXIT_USAGE || !strstr(r.err, cases[i].message))
            fail_msg("case %zu: rc %d, stderr '%s', wanted '%s'", i, r.rc, r.err, cases[i].message);
        assert_int_equal(seen.called, 0); /* the handler never runs on a usage error */
        run_free(&r);
    }
    struct run r = RUN_FAKE("fake", "need", "-t", "x");
    assert_int_equal(r.rc, 0);
    assert_string_equal(seen.name, "x");
    run_free(&r);
    r = RUN_FAKE("fake", "need", "--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Usage: hcctl fake need --target TARGET [OPTIONS]"));
    assert_non_null(strstr(r.out, "(required)"));
    run_free(&r);
}

static void test_color_rules(void **state)
{
    (void)state;
    struct run r = run_io(fake_groups, 1, 0, NULL, (const char *const[]){"fake", "probe", NULL});
    assert_int_equal(seen.color, 1); /* a TTY */
    run_free(&r);
    r = run_io(fake_groups, 0, 0, NULL, (const char *const[]){"fake", "probe", NULL});
    assert_int_equal(seen.color, 0); /* not a TTY */
    run_free(&r);
    r = run_io(fake_groups, 1, 0, NULL, (const char *const[]){"--no-color", "fake", "probe", NULL});
    assert_int_equal(seen.color, 0);
    run_free(&r);
    setenv("NO_COLOR", "1", 1);
    r = run_io(fake_groups, 1, 0, NULL, (const char *const[]){"fake", "probe", NULL});
    assert_int_equal(seen.color, 0);
    run_free(&r);
}

static void test_suggestions(void **state)
{
    (void)state;
    assert_int_equal(hc_cmd_distance("clustr", "cluster"), 1);
    assert_int_equal(hc_cmd_distance("ndoe", "node"), 1);
    assert_int_equal(hc_cmd_distance("node", "node"), 0);
    assert_int_equal(hc_cmd_distance("", "abc"), 3);
    assert_int_equal(hc_cmd_distance("kitten", "sitting"), 3);
    const char *const names[] = {"cluster", "node", "operation", "events", "version", NULL};
    assert_string_equal(hc_cmd_suggest("clsuter", names), "cluster");
    assert_string_equal(hc_cmd_suggest("evnts", names), "events");
    assert_string_equal(hc_cmd_suggest("nod", names), "node");
    assert_null(hc_cmd_suggest("x", names));
    assert_null(hc_cmd_suggest("zzzzzz", names));
}

/* ---------------------------------------------------------------- configuration */

static void test_config_precedence(void **state)
{
    (void)state;
    write_config("{\"controller\":\"https://file.example:7443/\",\"token\":\"tok-file\","
                 "\"ca_pem\":\"PEM-FILE\",\"future_key\":1}");
    struct run r = RUN_FAKE("fake", "config");
    assert_int_equal(r.rc, 0);
    assert_string_equal(seen.controller, "https://file.example:7443");
    assert_string_equal(seen.controller_from, "config");
    assert_string_equal(seen.token, "tok-file");
    assert_string_equal(seen.ca_pem, "PEM-FILE");
    run_free(&r);

    setenv("HCCTL_CONTROLLER", "env.example:7443", 1); /* no scheme: https */
    setenv("HCCTL_TOKEN", "", 1);                      /* empty counts as unset */
    r = RUN_FAKE("fake", "config");
    assert_string_equal(seen.controller, "https://env.example:7443");
    assert_string_equal(seen.controller_from, "env");
    assert_string_equal(seen.token, "tok-file");
    assert_string_equal(seen.token_from, "config");
    run_free(&r);

    setenv("HCCTL_TOKEN", "tok-env", 1);
    setenv("HCCTL_CA_FILE", "/env/ca.pem", 1);
    r = RUN_FAKE("--controller", "https://flag.example:1", "fake", "config", "--token", "tok-flag");
    assert_string_equal(seen.controller, "https://flag.example:1");
    assert_string_equal(seen.controller_from, "flag");
    assert_string_equal(seen.token, "tok-flag");
    assert_string_equal(seen.token_from, "flag");
    assert_string_equal(seen.ca_file, "/env/ca.pem");
    assert_string_equal(seen.ca_pem, ""); /* a CA file replaces the file's ca_pem */
    run_free(&r);

    r = RUN_FAKE("--ca", "/flag/ca.pem", "fake", "config");
    assert_string_equal(seen.ca_file, "/flag/ca.pem");
    assert_string_equal(seen.token, "tok-env");
    assert_string_equal(seen.token_from, "env");
    run_free(&r);
}

static void test_config_missing_file(void **state)
{
    (void)state;
    struct run r = RUN_FAKE("fake", "config");
    assert_int_equal(r.rc, 0);
    assert_string_equal(seen.controller, "");
    assert_string_equal(seen.token, "");
    run_free(&r);
    /* nothing configured: commands that need the controller say how to configure it */
    r = RUN("node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "no controller configured"));
    assert_non_null(strstr(r.err, "HCCTL_CONTROLLER"));
    run_free(&r);
}

static void test_config_malformed(void **state)
{
    (void)state;
    write_config("{\"controller\": \"https://x\",\n  oops}");
    struct hc_cli_config cfg;
    struct hc_error err = {0};
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), -1);
    assert_non_null(strstr(err.message, config_path));
    assert_non_null(strstr(err.message, "line 2"));
    assert_null(cfg.controller);

    struct run r = RUN("node", "list");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_non_null(strstr(r.err, "hcctl: error: cannot parse config file '"));
    assert_non_null(strstr(r.err, config_path));
    run_free(&r);
    r = RUN("-o", "json", "node", "list");
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "invalid_json");
    json_decref(doc);
    run_free(&r);

    /* everything given on the command line: the broken file is not even read */
    r = RUN_FAKE("--controller", "https://a", "--token", "t", "--ca", "/c", "fake", "config");
    assert_int_equal(r.rc, 0);
    run_free(&r);

    write_config("[\"not\", \"an object\"]");
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), -1);
    assert_non_null(strstr(err.message, "not a JSON object"));
    write_config("{\"controller\": 7443}");
    assert_int_equal(hc_cli_config_load(&cfg, NULL, &err), -1);
    assert_non_null(strstr(err.message, "\"controller\" is not a string"));
}

static void test_config_path(void **state)
{
    (void)state;
    char buf[1024], home[1024];
    struct hc_error err = {0};
    snprintf(home, sizeof(home), "%s", getenv("HOME") ? getenv("HOME") : "/");
    setenv("XDG_CONFIG_HOME", "/x/y", 1);
    assert_int_equal(hc_cli_config_path(buf, sizeof(buf), &err), 0);
    assert_string_equal(buf, "/x/y/hcctl/config.json");
    setenv("XDG_CONFIG_HOME", "relative", 1); /* ignored, per the XDG spec */
    setenv("HOME", "/home/u", 1);
    assert_int_equal(hc_cli_config_path(buf, sizeof(buf), &err), 0);
    assert_string_equal(buf, "/home/u/.config/hcctl/config.json");
    setenv("HOME", home, 1);
}

/* ---------------------------------------------------------------- exit codes */

static void test_exit_code_mapping(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *code;
        int want;
    } cases[] = {
        {401, HC_ERR_UNAUTHORIZED, HC_EXIT_UNAVAILABLE},
        {401, HC_ERR_TOKEN_INVALID, HC_EXIT_UNAVAILABLE},
        {403, HC_ERR_FORBIDDEN, HC_EXIT_UNAVAILABLE},
        {409, HC_ERR_CONFLICT, HC_EXIT_REFUSED},
        {409, "not_ok_to_stop", HC_EXIT_REFUSED},
        {404, HC_ERR_NOT_FOUND, HC_EXIT_FAILED},
        {400, HC_ERR_INVALID_ARGUMENT, HC_EXIT_FAILED},
        {500, HC_ERR_INTERNAL, HC_EXIT_FAILED},
        {503, "db_error", HC_EXIT_FAILED},
        {0, HC_ERR_TIMEOUT, HC_EXIT_TIMEOUT},
        {0, HC_ERR_UNREACHABLE, HC_EXIT_UNAVAILABLE},
        {0, HC_ERR_TLS, HC_EXIT_UNAVAILABLE},
        {0, HC_CLI_ERR_USAGE, HC_EXIT_USAGE},
        {0, HC_CLI_ERR_CHECK, HC_EXIT_CHECK},
        {0, HC_ERR_INVALID_JSON, HC_EXIT_FAILED},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hc_error err;
        hc_error_set_wire(&err, cases[i].status, cases[i].code, "x");
        if (hc_exit_code(&err) != cases[i].want)
            fail_msg("%d %s -> %d, want %d", cases[i].status, cases[i].code, hc_exit_code(&err),
                     cases[i].want);
    }
    assert_int_equal(hc_exit_code(NULL), HC_EXIT_FAILED);
}

static void test_escape(void **state)
{
    (void)state;
    char buf[64], small[4];
    assert_int_equal(hc_api_client_escape("n1-a_b.c~", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "n1-a_b.c~");
    assert_int_equal(hc_api_client_escape("a b/c?d", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "a%20b%2Fc%3Fd");
    assert_int_equal(hc_api_client_escape("abcd", small, sizeof(small)), -1);
    char path[64] = "/v1/events";
    assert_int_equal(hc_api_client_query_add(path, sizeof(path), "since", "5"), 0);
    assert_int_equal(hc_api_client_query_add(path, sizeof(path), "type", "node.joined&x"), 0);
    assert_string_equal(path, "/v1/events?since=5&type=node.joined%26x");
    char tiny[16] = "/v1/x";
    assert_int_equal(hc_api_client_query_add(tiny, sizeof(tiny), "long", "valuevalue"), -1);
}

/* ---------------------------------------------------------------- confirmation */

static void test_remove_needs_confirmation(void **state)
{
    (void)state;
    /* not a TTY, no --yes: refused before any request */
    struct run r = RUN("node", "remove", "n1");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "refusing to remove node 'n1' without confirmation"));
    assert_non_null(strstr(r.err, "--yes"));
    run_free(&r);
    /* a TTY and the answer "n" */
    r = run_io(hc_cmd_groups, 0, 1, "n\n", (const char *const[]){"node", "remove", "n1", NULL});
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_non_null(strstr(r.err, "remove node 'n1'? [y/N] "));
    assert_non_null(strstr(r.err, "not confirmed"));
    run_free(&r);
    /* a TTY and "y": it goes on to the controller (none is configured here) */
    r = run_io(hc_cmd_groups, 0, 1, "y\n", (const char *const[]){"node", "remove", "n1", NULL});
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "no controller configured"));
    run_free(&r);
}

static void test_version_offline(void **state)
{
    (void)state;
    struct run r = RUN("version");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Client:     " HC_VERSION "\n"));
    assert_non_null(strstr(r.out, "not_configured"));
    run_free(&r);
    r = RUN("-o", "json", "version", "--controller", "https://127.0.0.1:1");
    assert_int_equal(r.rc, 0);
    json_t *doc = one_document(r.out);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "client"), "version")), HC_VERSION);
    json_t *ctl = json_object_get(doc, "controller");
    assert_string_equal(json_string_value(json_object_get(ctl, "url")), "https://127.0.0.1:1");
    assert_string_equal(error_code(ctl), "unreachable");
    json_decref(doc);
    run_free(&r);
}

/* ---------------------------------------------------------------- a fake controller */

static struct {
    pthread_mutex_t mu;
    int op_polls;
    int64_t ttl_seconds;
    char events_query[256];
    int ha; /* GET /v1/ha: 0 answers 404 (a controller without HA), 1 an HA cluster, 2 500 */
} ctl = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct server {
    struct event_base *base;
    struct hc_http_server *srv;
    pthread_t thread;
    char url[64];
};
static struct server *server;
static char ca_path[700], other_ca_path[700];

static const char node_n1[] =
    "{\"name\":\"n1\",\"address\":\"198.18.0.1\",\"agent_url\":\"https://198.18.0.1:7444\","
    "\"hostname\":\"host1\",\"state\":\"joined\",\"health\":\"reachable\",\"health_detail\":null,"
    "\"maintenance\":\"none\",\"agent_version\":\"0.1.0\",\"software_version\":null,"
    "\"service_state\":\"not_installed\",\"uptime_seconds\":3700,\"poll_latency_ms\":3,"
    "\"last_seen\":\"2026-01-01T00:00:00.000Z\",\"joined_at\":\"2026-01-01T00:00:00.000Z\","
    "\"cert_serial\":\"ab\"}";

static void reply_text(struct hc_request *req, int status, const char *json)
{
    hc_reply_json(req, status, json_loads(json, 0, NULL));
}

static void reply_err(struct hc_request *req, int status, const char *code, const char *msg,
                      const char *hint)
{
    struct hc_error err;
    hc_error_set_wire(&err, status, code, "%s", msg);
    if (hint)
        hc_error_hint(&err, "%s", hint);
    hc_reply_error(req, &err);
}

static void on_version(struct hc_request *req, void *arg)
{
    reply_text(req, 200, "{\"version\":\"9.9.9\",\"api\":\"v1\"}");
}

static void on_nodes(struct hc_request *req, void *arg)
{
    char body[2048];
    snprintf(body, sizeof(body), "{\"nodes\":[%s]}", node_n1);
    reply_text(req, 200, body);
}

static void on_node(struct hc_request *req, void *arg)
{
    char body[2048];
    if (strcmp(hc_req_param(req, "name"), "n1") != 0) {
        reply_err(req, 404, HC_ERR_NOT_FOUND, "node 'n9' not found", "see 'hcctl node list'");
        return;
    }
    snprintf(body, sizeof(body),
             "{\"node\":%s,\"interfaces\":[{\"name\":\"eth0\",\"mtu\":9000,"
             "\"state\":\"up\",\"kind\":null,\"master\":null,"
             "\"addresses\":[\"198.18.0.1/24\"],\"updated_at\":null}]}",
             node_n1);
    reply_text(req, 200, body);
}

static void on_node_delete(struct hc_request *req, void *arg)
{
    const char *name = hc_req_param(req, "name");
    if (strcmp(name, "busy") == 0) {
        reply_err(req, 409, HC_ERR_CONFLICT, "operation 'op-9' (upgrade) is running",
                  "wait for it: 'hcctl operation wait op-9'");
        return;
    }
    pthread_mutex_lock(&ctl.mu);
    ctl.op_polls = 0;
    pthread_mutex_unlock(&ctl.mu);
    reply_text(req, 202,
               "{\"operation\":{\"id\":\"op-ok\",\"kind\":\"node.remove\","
               "\"state\":\"pending\"}}");
}

static void on_operation(struct hc_request *req, void *arg)
{
    const char *id = hc_req_param(req, "id");
    pthread_mutex_lock(&ctl.mu);
    int polls = ++ctl.op_polls;
    pthread_mutex_unlock(&ctl.mu);
    if (strcmp(id, "op-fail") == 0)
        reply_text(req, 200,
                   "{\"operation\":{\"id\":\"op-fail\",\"kind\":\"node.remove\","
                   "\"state\":\"failed\",\"error\":{\"code\":\"agent_unreachable\","
                   "\"message\":\"agent n2 did not answer\",\"hint\":\"check n2\"}},"
                   "\"steps\":[]}");
    else if (strcmp(id, "op-ok") == 0 && polls >= 3)
        reply_text(req, 200,
                   "{\"operation\":{\"id\":\"op-ok\",\"kind\":\"node.remove\","
                   "\"state\":\"succeeded\",\"error\":null},\"steps\":[]}");
    else
        reply_text(req, 200,
                   "{\"operation\":{\"id\":\"op-x\",\"kind\":\"node.remove\","
                   "\"state\":\"running\",\"progress\":{\"node\":\"n1\","
                   "\"step\":\"leave\"},\"waiting_on\":\"agent n1\"},\"steps\":[]}");
}

static void on_join_token(struct hc_request *req, void *arg)
{
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    pthread_mutex_lock(&ctl.mu);
    ctl.ttl_seconds = json_integer_value(json_object_get(body, "ttl_seconds"));
    pthread_mutex_unlock(&ctl.mu);
    reply_text(req, 201,
               "{\"token\":\"hcj1.abc.def.ff\",\"id\":\"abc\","
               "\"expires_at\":\"2026-01-01T01:00:00.000Z\",\"ca_fingerprint\":\"ff\"}");
}

/* One event (id 6); with limit=2 the answer says more exist beyond the page. */
static void on_events(struct hc_request *req, void *arg)
{
    const char *limit = hc_req_query(req, "limit");
    char body[512];
    pthread_mutex_lock(&ctl.mu);
    snprintf(ctl.events_query, sizeof(ctl.events_query),
             "since=%s before=%s limit=%s newest=%s type=%s node=%s", hc_req_query(req, "since"),
             hc_req_query(req, "before"), limit, hc_req_query(req, "newest"),
             hc_req_query(req, "type"), hc_req_query(req, "node"));
    pthread_mutex_unlock(&ctl.mu);
    snprintf(body, sizeof(body),
             "{\"events\":[{\"id\":6,\"ts\":\"2026-01-01T00:00:00.000Z\","
             "\"type\":\"node.joined\",\"node\":\"n1\",\"op_id\":null,"
             "\"actor\":\"n1\",\"message\":\"node 'n1' joined\",\"details\":{}}],"
             "\"last_id\":6,\"more\":%s}",
             limit && strcmp(limit, "2") == 0 ? "true" : "false");
    reply_text(req, 200, body);
}

static void on_cluster(struct hc_request *req, void *arg)
{
    reply_text(req, 200,
               "{\"cluster\":{\"id\":\"c0ffee\",\"name\":\"prod\",\"mtu\":9000,"
               "\"created_at\":\"2026-01-01T00:00:00.000Z\"},\"nodes\":{\"total\":3,"
               "\"reachable\":2,\"unreachable\":1,\"unknown\":0},"
               "\"operations\":{\"active\":[]},\"controller\":{\"version\":\"9.9.9\","
               "\"uptime_seconds\":5,\"poll_interval_ms\":1000}}");
}

/* GET /v1/ha of a standby of three controllers, one of them dead, and three etcd members, one
 * failing (docs/api.md). */
static void on_ha(struct hc_request *req, void *arg)
{
    pthread_mutex_lock(&ctl.mu);
    int ha = ctl.ha;
    pthread_mutex_unlock(&ctl.mu);
    if (ha == 0) {
        reply_err(req, 404, HC_ERR_NOT_FOUND, "no route GET /v1/ha", NULL);
        return;
    }
    if (ha == 2) {
        reply_err(req, 500, HC_ERR_INTERNAL, "etcd status failed", NULL);
        return;
    }
    reply_text(req, 200,
               "{\"role\":\"standby\",\"name\":\"c1\",\"url\":\"https://10.0.0.1:7443\","
               "\"leader\":{\"name\":\"c2\",\"url\":\"https://10.0.0.2:7443\",\"term\":7},"
               "\"members\":[{\"name\":\"c1\",\"url\":\"https://10.0.0.1:7443\","
               "\"role\":\"standby\",\"alive\":true},{\"name\":\"c2\","
               "\"url\":\"https://10.0.0.2:7443\",\"role\":\"leader\",\"alive\":true},"
               "{\"name\":\"c3\",\"url\":\"https://10.0.0.3:7443\",\"role\":\"standby\","
               "\"alive\":false}],"
               "\"etcd\":[{\"endpoint\":\"https://127.0.0.11:2379\",\"healthy\":true,"
               "\"leader\":true,\"raft_term\":3,\"db_size\":4096,\"version\":\"3.4.23\","
               "\"error\":null},{\"endpoint\":\"https://127.0.0.12:2379\",\"healthy\":false,"
               "\"leader\":false,\"raft_term\":null,\"db_size\":null,\"version\":null,"
               "\"error\":\"connection refused\"}]}");
}

static void on_ca(struct hc_request *req, void *arg)
{
    reply_text(req, 200,
               "{\"ca_pem\":\"-----BEGIN CERTIFICATE-----\",\"ca_fingerprint\":\"ab12\"}");
}

/* A cluster that never ran an upgrade (controller/ops/op_upgrade.c hc_upgrade_status). */
static void on_upgrade(struct hc_request *req, void *arg)
{
    reply_text(req, 200,
               "{\"operation_id\":null,\"state\":\"none\",\"to_version\":null,"
               "\"done\":0,\"total\":0,\"nodes\":[],\"error\":null,"
               "\"waiting_on\":null}");
}

/* net check-jumbo: a check at --mtu 9000 is op-net-bad, the stored result of a simulated 150-node
 * check with a bad link between its halves (11,250 failing pairs, more than the document lists);
 * any other is op-net-ok, the same cluster healthy. Both made by the controller's own
 * hc_net_result_json, and ?failures_only=1 by its filter. */
static void on_net_check(struct hc_request *req, void *arg)
{
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    reply_text(req, 202,
               json_integer_value(json_object_get(body, "mtu")) == 9000
                   ? "{\"operation\":{\"id\":\"op-net-bad\",\"kind\":\"net.check\"}}"
                   : "{\"operation\":{\"id\":\"op-net-ok\",\"kind\":\"net.check\"}}");
}

static void on_op_result(struct hc_request *req, void *arg)
{
    const char *id = hc_req_param(req, "id"), *fo = hc_req_query(req, "failures_only");
    struct hc_net_check c;
    assert_int_equal(hc_net_sim_new(&c, 150, 9000), 0);
    if (strcmp(id, "op-net-bad") == 0)
        hc_net_sim_segment(&c, 75, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *res = hc_net_result_json(&c);
    hc_net_check_clear(&c);
    if (fo && strcmp(fo, "1") == 0)
        hc_net_result_failures_only(res);
    hc_reply_json(req, 200,
                  json_pack("{s:{s:s, s:s, s:s}, s:o}", "operation", "id", id, "kind", "net.check",
                            "state", "succeeded", "result", res));
}

static int before_hook(struct hc_request *req, const struct hc_route *route, void *arg)
{
    const char *auth = hc_req_header(req, "Authorization");
    if (route->flags == 0 || (auth && strcmp(auth, "Bearer good-token") == 0))
        return 0;
    reply_err(req, 401, HC_ERR_UNAUTHORIZED, "missing or unknown token", NULL);
    return 1;
}

static void *server_thread(void *arg)
{
    struct server *s = arg;
    event_base_loop(s->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* CA and server certificate for 127.0.0.1 from common/pki, plus an unrelated CA. */
static void make_certs(const char *dir)
{
    struct hc_error err = {0};
    char key_path[700], cert_path[700], serial[33];
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {
        .cn = "127.0.0.1", .sans = sans, .nsans = 1, .server_auth = 1, .days = 2};
    EVP_PKEY *ca_key = hc_pki_key_new(&err), *key = hc_pki_key_new(&err);
    EVP_PKEY *other_key = hc_pki_key_new(&err);
    assert_non_null(ca_key);
    X509 *ca = hc_pki_ca_new(ca_key, "test-ca", 2, &err);
    X509 *other = hc_pki_ca_new(other_key, "other-ca", 2, &err);
    X509 *srv = hc_pki_issue(ca, ca_key, key, &spec, serial, &err);
    if (!ca || !other || !srv)
        fail_msg("pki: %s", err.message);
    snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
    snprintf(other_ca_path, sizeof(other_ca_path), "%s/other.pem", dir);
    snprintf(key_path, sizeof(key_path), "%s/server.key", dir);
    snprintf(cert_path, sizeof(cert_path), "%s/server.pem", dir);
    assert_int_equal(hc_pki_cert_save(ca, ca_path, &err), 0);
    assert_int_equal(hc_pki_cert_save(other, other_ca_path, &err), 0);
    assert_int_equal(hc_pki_cert_save(srv, cert_path, &err), 0);
    assert_int_equal(hc_pki_key_save(key, key_path, &err), 0);
    X509_free(ca);
    X509_free(other);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    EVP_PKEY_free(other_key);
}

static void add_routes(struct hc_http_server *srv)
{
    static const struct {
        const char *method, *pattern;
        int auth;
        hc_route_fn fn;
    } routes[] = {
        {"GET", "/v1/version", 0, on_version},
        {"GET", "/v1/nodes", 1, on_nodes},
        {"GET", "/v1/nodes/{name}", 1, on_node},
        {"DELETE", "/v1/nodes/{name}", 1, on_node_delete},
        {"GET", "/v1/operations/{id}", 1, on_operation},
        {"POST", "/v1/join-tokens", 1, on_join_token},
        {"GET", "/v1/events", 1, on_events},
        {"GET", "/v1/cluster", 1, on_cluster},
        {"GET", "/v1/ca", 0, on_ca},
        {"GET", "/v1/ha", 0, on_ha},
        {"GET", "/v1/upgrade", 1, on_upgrade},
        {"POST", "/v1/net/check", 1, on_net_check},
        {"GET", "/v1/operations/{id}/result", 1, on_op_result},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        assert_int_equal(hc_http_server_route(srv, routes[i].method, routes[i].pattern,
                                              routes[i].auth, routes[i].fn, NULL),
                         0);
}

static int server_up(void **state)
{
    struct hc_error err = {0};
    char key_path[700], cert_path[700];
    make_certs(tmpdir);
    snprintf(key_path, sizeof(key_path), "%s/server.key", tmpdir);
    snprintf(cert_path, sizeof(cert_path), "%s/server.pem", tmpdir);
    struct hc_tls_server_config tls = {.cert_file = cert_path, .key_file = key_path};
    evthread_use_pthreads(); /* the test thread stops the server thread's loop */
    server = calloc(1, sizeof(*server));
    server->base = event_base_new();
    server->srv = hc_http_server_new(server->base, &tls, &err);
    if (!server->srv) {
        fprintf(stderr, "server: %s\n", err.message);
        return -1;
    }
    hc_http_server_set_hooks(server->srv, before_hook, NULL, NULL);
    add_routes(server->srv);
    if (hc_http_server_listen(server->srv, "127.0.0.1", 0, &err) < 0) {
        fprintf(stderr, "listen: %s\n", err.message);
        return -1;
    }
    snprintf(server->url, sizeof(server->url), "https://127.0.0.1:%d",
             hc_http_server_port(server->srv));
    return pthread_create(&server->thread, NULL, server_thread, server) == 0 ? 0 : -1;
}

static int server_down(void **state)
{
    event_base_loopbreak(server->base);
    pthread_join(server->thread, NULL);
    hc_http_server_free(server->srv);
    event_base_free(server->base);
    free(server);
    return 0;
}

/* hcctl with the flags that reach the fake controller, then words. */
static struct run run_ctl(const char *token, const char *const *words)
{
    const char *argv[40] = {"--controller", server->url, "--ca", ca_path, "--token", token};
    size_t n = 6;
    for (size_t i = 0; words[i] && n + 1 < 40; i++)
        argv[n++] = words[i];
    argv[n] = NULL;
    return run_io(hc_cmd_groups, 0, 0, NULL, argv);
}
#define CTL(...) run_ctl("good-token", (const char *const[]){__VA_ARGS__, NULL})

static void test_api_node_list(void **state)
{
    (void)state;
    struct run r = CTL("node", "list");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "NAME  ADDRESS     HEALTH     STATE   MAINTENANCE  AGENT  "));
    assert_non_null(strstr(r.out, "\nn1    198.18.0.1  reachable  joined  none         0.1.0  "));
    assert_string_equal(r.err, "");
    run_free(&r);
    r = CTL("node", "list", "-o", "json");
    assert_int_equal(r.rc, 0);
    json_t *doc = one_document(r.out);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "nodes"), 0), "name")),
                        "n1");
    json_decref(doc);
    run_free(&r);
}

static void test_api_node_show(void **state)
{
    (void)state;
    struct run r = CTL("node", "show", "n1");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Name:          n1\n"));
    assert_non_null(strstr(r.out, "Uptime:        1h1m\n"));
    assert_non_null(strstr(r.out, "\nInterfaces:\nNAME  MTU   STATE  KIND  MASTER  ADDRESSES      "
                                  "UPDATED\neth0  9000  up     -     -       198.18.0.1/24  -\n"));
    run_free(&r);
    r = CTL("node", "show", "n9");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_string_equal(r.err, "hcctl: error: node 'n9' not found; hint: see 'hcctl node list'\n");
    assert_string_equal(r.out, "");
    run_free(&r);
    r = CTL("-o", "json", "node", "show", "n9");
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "not_found");
    json_decref(doc);
    run_free(&r);
}

/* A TCP listener that never accepts: the kernel completes the handshake, nobody speaks TLS. */
static int silent_listener(char *url, size_t len)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(url, len, "https://127.0.0.1:%d", ntohs(sa.sin_port));
    return fd;
}

static void test_api_auth_and_transport(void **state)
{
    (void)state;
    struct run r = run_ctl("bad-token", (const char *const[]){"node", "list", NULL});
    assert_int_equal(r.rc, HC_EXIT_UNAVAILABLE);
    assert_non_null(strstr(r.err, "hcctl: error: missing or unknown token; "));
    assert_non_null(strstr(r.err, "hint: the token (from flag) was refused"));
    run_free(&r);
    /* the wrong CA: TLS failure */
    r = RUN("--controller", server->url, "--ca", other_ca_path, "--token", "good-token", "node",
            "list");
    assert_int_equal(r.rc, HC_EXIT_UNAVAILABLE);
    assert_non_null(strstr(r.err, "hint: check the controller's CA"));
    run_free(&r);
    /* nobody listening */
    r = RUN("--controller", "https://127.0.0.1:1", "--ca", ca_path, "node", "list");
    assert_int_equal(r.rc, HC_EXIT_UNAVAILABLE);
    assert_non_null(strstr(r.err, "is hcctld running"));
    run_free(&r);
    /* a peer that accepts the connection and never answers: the request timeout */
    char url[64];
    int fd = silent_listener(url, sizeof(url));
    r = RUN("--controller", url, "--ca", ca_path, "--timeout", "300ms", "node", "list");
    close(fd);
    if (r.rc != HC_EXIT_TIMEOUT)
        fail_msg("rc %d: %s", r.rc, r.err);
    assert_non_null(strstr(r.err, "raise --timeout"));
    run_free(&r);
}

/* The config file written by `hcctld init` is enough: controller, token and the CA as PEM. */
static void test_api_via_config_file(void **state)
{
    (void)state;
    char *pem = NULL;
    size_t len;
    struct hc_error err = {0};
    assert_int_equal(hc_file_read(ca_path, &pem, &len, &err), 0);
    json_t *cfg = json_pack("{s:s, s:s, s:s}", "controller", server->url, "token", "good-token",
                            "ca_pem", pem);
    assert_int_equal(json_dump_file(cfg, config_path, 0), 0);
    struct run r = RUN("node", "list");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "n1"));
    run_free(&r);
    /* the environment overrides the file's token */
    setenv("HCCTL_TOKEN", "bad-token", 1);
    r = RUN("node", "list");
    assert_int_equal(r.rc, HC_EXIT_UNAVAILABLE);
    assert_non_null(strstr(r.err, "from env"));
    run_free(&r);
    json_decref(cfg);
    free(pem);
}

static void test_api_node_remove(void **state)
{
    (void)state;
    struct run r = CTL("node", "remove", "n1", "--yes");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.err, "removing node 'n1': operation op-ok\n"));
    assert_non_null(strstr(r.err, "running: step 'leave' on n1 (waiting on agent n1)\n"));
    assert_non_null(strstr(r.err, "operation op-ok (node.remove) succeeded\n"));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = CTL("-q", "-o", "json", "node", "remove", "n1", "-y");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.err, "");
    json_t *doc = one_document(r.out);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "operation"), "state")),
        "succeeded");
    json_decref(doc);
    run_free(&r);
    r = CTL("node", "remove", "n1", "--yes", "--no-wait");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "op-ok\n");
    run_free(&r);
    r = CTL("node", "remove", "busy", "--yes");
    assert_int_equal(r.rc, HC_EXIT_REFUSED);
    assert_non_null(strstr(r.err, "operation 'op-9' (upgrade) is running"));
    run_free(&r);
}

static void test_api_operation_wait(void **state)
{
    (void)state;
    struct run r = CTL("operation", "wait", "op-fail");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_non_null(strstr(r.err, "hcctl: error: operation op-fail (node.remove) failed: agent n2 "
                                  "did not answer; hint: check n2\n"));
    run_free(&r);
    r = CTL("-o", "json", "operation", "wait", "op-fail");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "agent_unreachable");
    assert_non_null(json_object_get(doc, "operation")); /* the operation rides along */
    json_decref(doc);
    run_free(&r);
    r = CTL("operation", "wait", "op-forever", "--timeout", "700ms");
    assert_int_equal(r.rc, HC_EXIT_TIMEOUT);
    assert_non_null(strstr(r.err, "operation op-forever did not end within 700ms"));
    assert_non_null(strstr(r.err, "'hcctl operation wait op-forever' to keep waiting"));
    run_free(&r);
}

static void test_api_join_token_events_version(void **state)
{
    (void)state;
    struct run r = CTL("cluster", "join-token", "--ttl", "30m");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "hcj1.abc.def.ff\n");
    assert_non_null(strstr(r.err, "join token 'abc' expires at 2026-01-01T01:00:00.000Z"));
    pthread_mutex_lock(&ctl.mu);
    assert_int_equal(ctl.ttl_seconds, 1800);
    pthread_mutex_unlock(&ctl.mu);
    run_free(&r);
    r = CTL("cluster", "join-token", "--ttl", "10ms");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);

    r = CTL("events", "--since", "5", "--limit", "10", "--type", "node.joined", "--node", "n 1");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "6   2026-01-01T00:00:00.000Z  node.joined  n1    -"));
    pthread_mutex_lock(&ctl.mu);
    assert_string_equal(ctl.events_query,
                        "since=5 before=(null) limit=10 newest=(null) type=node.joined node=n 1");
    pthread_mutex_unlock(&ctl.mu);
    assert_string_equal(r.err, ""); /* the page held everything: no note */
    run_free(&r);
    r = CTL("events", "--limit", "0");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    run_free(&r);

    r = CTL("version");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Controller: 9.9.9 (api v1) at https://127.0.0.1:"));
    run_free(&r);
}

/* Without --since, events asks for the newest page; a page that does not hold every event says
 * so on stderr (not with -q, not in JSON, whose "more" says it) and names the way to the rest. */
static void test_api_events_newest(void **state)
{
    (void)state;
    struct run r = CTL("events");
    assert_int_equal(r.rc, 0);
    pthread_mutex_lock(&ctl.mu);
    assert_string_equal(ctl.events_query,
                        "since=(null) before=(null) limit=100 newest=1 type=(null) node=(null)");
    pthread_mutex_unlock(&ctl.mu);
    assert_string_equal(r.err, "");
    run_free(&r);
    r = CTL("events", "--limit", "2");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "node 'n1' joined"));
    assert_string_equal(r.err, "showing the newest 1 events; older ones exist: see them with "
                               "--before 6, or raise --limit (at most 1000)\n");
    run_free(&r);
    r = CTL("events", "--limit", "2", "--before", "9");
    pthread_mutex_lock(&ctl.mu);
    assert_string_equal(ctl.events_query,
                        "since=(null) before=9 limit=2 newest=1 type=(null) node=(null)");
    pthread_mutex_unlock(&ctl.mu);
    run_free(&r);
    r = CTL("events", "--limit", "2", "--since", "0");
    pthread_mutex_lock(&ctl.mu); /* --since 0: from the start, oldest first */
    assert_string_equal(ctl.events_query,
                        "since=(null) before=(null) limit=2 newest=(null) type=(null) node=(null)");
    pthread_mutex_unlock(&ctl.mu);
    assert_non_null(strstr(r.err, "newer ones exist: go on with --since 6"));
    run_free(&r);
    r = CTL("-q", "events", "--limit", "2");
    assert_string_equal(r.err, "");
    run_free(&r);
    r = CTL("events", "--limit", "2", "-o", "json");
    assert_string_equal(r.err, "");
    json_t *doc = one_document(r.out);
    assert_true(json_is_true(json_object_get(doc, "more")));
    json_decref(doc);
    run_free(&r);
    r = CTL("events", "--before", "3", "--follow");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "--before cannot be combined with --follow"));
    run_free(&r);
}

/* cluster show: the settings from GET /v1/cluster and GET /v1/ca, the URL in use. */
static void test_api_cluster_show(void **state)
{
    (void)state;
    char line[128];
    struct run r = CTL("cluster", "show");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Name:               prod\n"));
    assert_non_null(strstr(r.out, "ID:                 c0ffee\n"));
    assert_non_null(strstr(r.out, "MTU:                9000\n"));
    assert_non_null(strstr(r.out, "Created:            2026-01-01T00:00:00.000Z ("));
    snprintf(line, sizeof(line), "Controller:         %s\n", server->url);
    assert_non_null(strstr(r.out, line));
    assert_non_null(strstr(r.out, "Controller version: 9.9.9\n"));
    assert_non_null(strstr(r.out, "CA fingerprint:     ab12\n"));
    assert_non_null(
        strstr(r.out, "Nodes:              3 (2 reachable, 1 unreachable, 0 unknown)\n"));
    assert_string_equal(r.err, "");
    run_free(&r);
    r = CTL("cluster", "show", "-o", "json");
    assert_int_equal(r.rc, 0);
    json_t *doc = one_document(r.out);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "cluster"), "name")),
                        "prod");
    json_t *c = json_object_get(doc, "controller");
    assert_string_equal(json_string_value(json_object_get(c, "url")), server->url);
    assert_string_equal(json_string_value(json_object_get(c, "ca_fingerprint")), "ab12");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "nodes"), "total")),
                     3);
    json_decref(doc);
    run_free(&r);
}

static void set_ha(int ha)
{
    pthread_mutex_lock(&ctl.mu);
    ctl.ha = ha;
    pthread_mutex_unlock(&ctl.mu);
}

/* cluster status: GET /v1/cluster and GET /v1/ha; "ha" null from a controller without HA. */
static void test_api_cluster_status_ha(void **state)
{
    (void)state;
    set_ha(0);
    struct run r = CTL("cluster", "status", "-o", "json");
    assert_int_equal(r.rc, 0);
    json_t *doc = one_document(r.out);
    assert_true(json_is_null(json_object_get(doc, "ha")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "cluster"), "name")),
                        "prod");
    json_decref(doc);
    run_free(&r);
    r = CTL("cluster", "status");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Cluster:"));
    assert_null(strstr(r.out, "High availability"));
    run_free(&r);

    set_ha(1);
    r = CTL("cluster", "status", "-o", "json");
    assert_int_equal(r.rc, 0);
    doc = one_document(r.out);
    json_t *ha = json_object_get(doc, "ha");
    assert_string_equal(json_string_value(json_object_get(ha, "role")), "standby");
    assert_int_equal(json_array_size(json_object_get(ha, "members")), 3);
    assert_int_equal(json_array_size(json_object_get(ha, "etcd")), 2);
    json_decref(doc);
    run_free(&r);
    r = CTL("cluster", "status");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "High availability:\nHA role:         standby\n"
                                  "This controller: c1\n"
                                  "Leader:          c2 https://10.0.0.2:7443 (term 7)\n"));
    assert_non_null(strstr(r.out, "Controllers:\nNAME  URL                    ROLE     ALIVE\n"
                                  "c1    https://10.0.0.1:7443  standby  yes\n"
                                  "c2    https://10.0.0.2:7443  leader   yes\n"
                                  "c3    https://10.0.0.3:7443  standby  no\n"));
    assert_non_null(strstr(r.out, "etcd:\nENDPOINT                 HEALTHY  LEADER  RAFT TERM"));
    assert_non_null(strstr(r.out, "https://127.0.0.12:2379  no       no      -"));
    assert_non_null(strstr(r.out, "connection refused"));
    run_free(&r);

    /* /v1/ha failing otherwise is an error of the command, not a silent null */
    set_ha(2);
    r = CTL("cluster", "status", "-o", "json");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    doc = one_document(r.out);
    assert_string_equal(error_code(doc), "internal");
    json_decref(doc);
    run_free(&r);
    set_ha(0);
}

/* upgrade status before any upgrade: exit 0, "no rolling upgrade has run", the documented keys;
 * pause/resume/abort have nothing to act on. */
static void test_api_upgrade_status_none(void **state)
{
    (void)state;
    struct run r = CTL("upgrade", "status");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "no rolling upgrade has run\n");
    assert_string_equal(r.err, "");
    run_free(&r);
    r = CTL("upgrade", "status", "-o", "json");
    assert_int_equal(r.rc, 0);
    json_t *doc = one_document(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "none");
    assert_true(json_is_null(json_object_get(doc, "operation_id")));
    assert_int_equal(json_array_size(json_object_get(doc, "nodes")), 0);
    json_decref(doc);
    run_free(&r);
    r = CTL("upgrade", "pause");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_non_null(strstr(r.err, "no rolling upgrade has run on this cluster"));
    run_free(&r);
}

/* join-token --ttl is bounded by the controller's 7 days: a usage error before any request. */
static void test_api_join_token_ttl_max(void **state)
{
    (void)state;
    pthread_mutex_lock(&ctl.mu);
    ctl.ttl_seconds = -1;
    pthread_mutex_unlock(&ctl.mu);
    struct run r = CTL("cluster", "join-token", "--ttl", "999999d");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "--ttl must be at most 7d"));
    run_free(&r);
    r = CTL("cluster", "join-token", "--ttl", "7d1s", "-o", "json");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "usage");
    json_decref(doc);
    run_free(&r);
    pthread_mutex_lock(&ctl.mu);
    assert_int_equal(ctl.ttl_seconds, -1); /* never sent */
    pthread_mutex_unlock(&ctl.mu);
    r = CTL("cluster", "join-token", "--ttl", "7d");
    assert_int_equal(r.rc, 0);
    pthread_mutex_lock(&ctl.mu);
    assert_int_equal(ctl.ttl_seconds, 7 * 24 * 3600);
    pthread_mutex_unlock(&ctl.mu);
    run_free(&r);
    r = RUN("cluster", "join-token", "--help");
    assert_non_null(strstr(r.out, "(1s to 7d)"));
    run_free(&r);
}

/* The controller URL must be https:// wherever it comes from: a usage error naming the source,
 * never a transport error ("is hcctld running?"). An unreadable CA file is named too. */
/* check-jumbo's text for a result that lists only the failing pairs, only some of them: the
 * counts come from the summary, and it does not claim that -o json has every pair. */
static void test_api_net_check_large(void **state)
{
    (void)state;
    struct run r = CTL("net", "check-jumbo", "--mtu", "9000");
    assert_int_equal(r.rc, HC_EXIT_CHECK);
    assert_non_null(strstr(r.out, "150 node(s), 22350 directed pair(s), 11250 failing: FAILED"));
    assert_non_null(strstr(r.out, "\nFailing pairs, 11250 of 22350; 10000 listed, 1250 left out "
                                  "(the matrix is drawn up to 16 nodes; -o json lists the failing "
                                  "pairs and counts each node's):\n"));
    assert_non_null(strstr(r.out, "\nn1    n76   blackhole 1504\n"));
    assert_non_null(strstr(r.out, "error   segment: every pair between {n1, n2, n3, n4, n5, n6, "
                                  "n7, n8 and 67 more} (75 nodes) and {n76,"));
    assert_null(strstr(r.out, "has every pair"));
    run_free(&r);
    r = CTL("net", "check-jumbo", "--mtu", "9000", "--failures-only");
    assert_int_equal(r.rc, HC_EXIT_CHECK);
    assert_non_null(strstr(r.out, "\nFailing pairs, 11250 of 22350; 10000 listed, 1250 left out "));
    run_free(&r);
    r = CTL("net", "check-jumbo");
    assert_int_equal(r.rc, HC_EXIT_OK);
    assert_non_null(strstr(r.out, "\nPairs: all 22350 directed pairs passed (the matrix is drawn "
                                  "up to 16 nodes; -o json lists the failing pairs and counts "
                                  "each node's)\n"));
    run_free(&r);
    r = CTL("-o", "json", "net", "check-jumbo", "--mtu", "9000");
    json_t *doc = one_document(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "pairs_listed")), "failures");
    assert_int_equal(json_integer_value(json_object_get(doc, "pairs_omitted")), 1250);
    json_decref(doc);
    run_free(&r);
}

static void test_settings_checked(void **state)
{
    (void)state;
    struct run r = RUN("--controller", "http://127.0.0.1:7443", "--ca", ca_path, "node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "hcctl: error: the controller URL must start with https:// "
                                  "(got 'http://127.0.0.1:7443' from --controller)"));
    assert_null(strstr(r.err, "is hcctld running"));
    run_free(&r);
    setenv("HCCTL_CONTROLLER", "HTTP://127.0.0.1:7443", 1);
    r = RUN("-o", "json", "node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "from HCCTL_CONTROLLER"));
    json_t *doc = one_document(r.out);
    assert_string_equal(error_code(doc), "usage");
    json_decref(doc);
    run_free(&r);
    unsetenv("HCCTL_CONTROLLER");
    write_config("{\"controller\":\"ftp://127.0.0.1:7443\"}");
    r = RUN("node", "list");
    assert_int_equal(r.rc, HC_EXIT_USAGE);
    assert_non_null(strstr(r.err, "from the config file '"));
    run_free(&r);
    /* a CA file that cannot be read */
    r = RUN("--controller", server->url, "--ca", "/nonexistent/ca.pem", "node", "list");
    assert_int_equal(r.rc, HC_EXIT_FAILED);
    assert_non_null(strstr(r.err, "hcctl: error: cannot read the CA file '/nonexistent/ca.pem' "
                                  "(from --ca): No such file or directory; hint: "));
    assert_non_null(strstr(r.err, "ca.pem"));
    run_free(&r);
}

/* ---------------------------------------------------------------- main */

static int make_tmpdir(void **state)
{
    const char *base = getenv("HC_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700);
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_cli.XXXXXX", base);
    if (!mkdtemp(tmpdir))
        return -1;
    return server_up(state);
}

static int remove_tmpdir(void **state)
{
    char cmd[700];
    server_down(state);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

#define T(f) cmocka_unit_test_setup(f, reset_env)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_unknown_group_suggests),
        T(test_unknown_verb),
        T(test_unknown_flag),
        T(test_arg_counts),
        T(test_output_format),
        T(test_bad_node_addresses),
        T(test_usage_error_json),
        T(test_usage_error_json_anywhere),
        T(test_default_verb_wording),
        T(test_help_everywhere),
        T(test_help_content),
        T(test_self_test_real_tables),
        T(test_self_test_finds_problems),
        T(test_self_test_default_verb),
        T(test_options_parsed),
        T(test_option_defaults_and_globals),
        T(test_option_errors),
        T(test_color_rules),
        T(test_suggestions),
        T(test_config_precedence),
        T(test_config_missing_file),
        T(test_config_malformed),
        T(test_config_path),
        T(test_exit_code_mapping),
        T(test_escape),
        T(test_remove_needs_confirmation),
        T(test_version_offline),
        T(test_api_node_list),
        T(test_api_node_show),
        T(test_api_auth_and_transport),
        T(test_api_via_config_file),
        T(test_api_node_remove),
        T(test_api_operation_wait),
        T(test_api_join_token_events_version),
        T(test_api_events_newest),
        T(test_api_cluster_show),
        T(test_api_cluster_status_ha),
        T(test_api_upgrade_status_none),
        T(test_api_join_token_ttl_max),
        T(test_api_net_check_large),
        T(test_settings_checked),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
