/*
 * Fuzz target: the hcctl command line (cli/cmd.c) — global options, the group and verb words,
 * each verb's options from its table (getopt_long arrays generated from it), types (integers,
 * durations, choices, repeatable lists), positional counts, "did you mean", and `help`. The
 * input is argv split at NUL bytes (argv[0] is "hcctl").
 *
 * Parse only: hc_cli_main runs on a copy of the command tables (hc_cmd_groups) in which every
 * handler but help's is replaced by one that reads each of its verb's options through the typed
 * accessors and returns; nothing reaches a controller, a file or the terminal (output goes to
 * /dev/null). The same words then go through the completion engine (cli/complete.c, offline)
 * and the whole input, up to its first NUL, through the shell's word splitter (hc_shell_split,
 * `hcctl shell`), which share the parser's rules.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/complete.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_ARGS 64

static struct {
    const struct hc_cmd_group **groups;
    FILE *null_out, *null_in;
    char *home;
} g;

static int read_options(struct hc_cmd_ctx *ctx)
{
    for (const struct hc_cmd_opt *o = ctx->verb->opts; o && o->name; o++) {
        size_t n;
        switch (o->type) {
        case HC_OPT_BOOL:
            hc_cmd_opt_bool(ctx, o->name);
            break;
        case HC_OPT_STRING:
            hc_cmd_opt_str(ctx, o->name);
            break;
        case HC_OPT_INT:
            hc_cmd_opt_int(ctx, o->name);
            break;
        case HC_OPT_DURATION:
            hc_cmd_opt_ms(ctx, o->name);
            break;
        case HC_OPT_LIST:
            hc_cmd_opt_list(ctx, o->name, &n);
            break;
        }
        hc_cmd_opt_set(ctx, o->name);
    }
    return 0;
}

static void cleanup(void)
{
    for (size_t i = 0; g.groups && g.groups[i]; i++) {
        if (strcmp(g.groups[i]->name, "help") != 0)
            free((void *)g.groups[i]->verbs);
        free((void *)g.groups[i]);
    }
    free(g.groups);
    if (g.null_out)
        fclose(g.null_out);
    if (g.null_in)
        fclose(g.null_in);
    fuzz_rmtree(g.home);
    free(g.home);
}

/* The tables with parse-only handlers (help keeps its own: it only prints the tables). */
static void setup(void)
{
    size_t n = 0;
    while (hc_cmd_groups[n])
        n++;
    g.groups = calloc(n + 1, sizeof(*g.groups));
    for (size_t i = 0; g.groups && i < n; i++) {
        struct hc_cmd_group *grp = malloc(sizeof(*grp));
        if (!grp)
            fuzz_die("out of memory");
        *grp = *hc_cmd_groups[i];
        if (strcmp(grp->name, "help") != 0) {
            size_t nv = 0;
            while (grp->verbs[nv].name)
                nv++;
            struct hc_cmd_verb *verbs = calloc(nv + 1, sizeof(*verbs));
            if (!verbs)
                fuzz_die("out of memory");
            memcpy(verbs, grp->verbs, (nv + 1) * sizeof(*verbs));
            for (size_t v = 0; v < nv; v++)
                verbs[v].handler = read_options;
            grp->verbs = verbs;
        }
        g.groups[i] = grp;
    }
    g.null_out = fopen("/dev/null", "w");
    g.null_in = fopen("/dev/null", "r");
    if (!g.groups || !g.null_out || !g.null_in)
        fuzz_die("setup failed");
    /* No configuration from the user running the fuzzer. */
    g.home = fuzz_mkdtemp("hcfuzz-cli");
    setenv("HOME", g.home, 1);
    setenv("XDG_CONFIG_HOME", g.home, 1);
    unsetenv("HCCTL_CONTROLLER");
    unsetenv("HCCTL_TOKEN");
    unsetenv("HCCTL_CA");
    setenv("NO_COLOR", "1", 1);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.groups)
        setup();
    /* argv: "hcctl" then the NUL-separated words (a copy, NUL-terminated) */
    char *buf = malloc(size + 1);
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[argc++] = "hcctl";
    for (size_t i = 0; i < size && argc <= MAX_ARGS;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    struct hc_cli_io io = {g.null_out, g.null_out, g.null_in, 0, 0, 1796000000000};
    hc_cli_main(g.groups, argc, argv, &io);

    /* completion of the last word after the others */
    struct hc_complete c = {0};
    struct hc_complete_conn conn = {.offline = 1};
    if (argc > 1)
        hc_complete_line(g.groups, argc - 2, argv + 1, argv[argc - 1], &conn, &c);
    hc_complete_clear(&c);

    char **words = NULL;
    struct hc_error err = {0};
    int open_word;
    if (hc_shell_split(buf, (int)(size & 1), &words, &open_word, &err) >= 0)
        hc_shell_words_free(words);
    free(buf);
    return 0;
}
