/*
 * `hcctl shell`: an interactive shell over the same command engine. Each line is split like a
 * POSIX shell would split it (quotes, backslashes, comments; no expansions) and run by
 * hc_cli_main, so a line behaves exactly as `hcctl LINE` would, with the global options given
 * to `hcctl shell` in front. TAB completion asks the same engine as the bash/zsh/fish scripts
 * (cli/complete.c) on the partial line: groups, verbs, options, choices, files, and node names,
 * operation ids and bundle versions from the controller.
 *
 * On a terminal: readline with history in $XDG_STATE_HOME/hcctl/history (default
 * ~/.local/state/hcctl/history, mode 0600: a line may hold a --token), and each command runs in
 * a child process, so that Ctrl-C stops the command (a wait, events --follow) and not the shell;
 * Ctrl-C at the prompt discards the line. Without a terminal (commands piped in) lines are read
 * plainly and run in-process, and nothing is written to the history.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "cli/complete.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/util.h"

#define SHELL_PROMPT "hcctl> "
#define SHELL_HISTORY_LINES 1000
#define SHELL_MAX_PREFIX 16

struct shell {
    struct hc_cmd_ctx *ctx;
    char *prefix[SHELL_MAX_PREFIX]; /* global options of `hcctl shell`, repeated on every line */
    int nprefix;
    char timeout[32];
    char history[1024]; /* "" when there is none */
    int interactive;
    int last_rc;
};

/* Readline's callbacks take no user pointer: the one shell running in this process. */
static struct shell *active;
static struct hc_complete shown; /* the candidates of the completion being displayed */

/* ---------------------------------------------------------------- history */

/* $XDG_STATE_HOME/hcctl/history, created 0600 (its directory 0700) so that appending works. */
static int history_open(struct shell *sh)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[900];
    struct hc_error err = {0};
    if (state && state[0] == '/')
        snprintf(dir, sizeof(dir), "%s/hcctl", state);
    else if (home && home[0])
        snprintf(dir, sizeof(dir), "%s/.local/state/hcctl", home);
    else
        return -1;
    if (hc_mkdir_p(dir, 0700, &err) < 0) {
        hc_output_info(&sh->ctx->out, "hcctl: no history: %s", err.message);
        return -1;
    }
    snprintf(sh->history, sizeof(sh->history), "%s/history", dir);
    int fd = open(sh->history, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        hc_output_info(&sh->ctx->out, "hcctl: no history: cannot open '%s': %s", sh->history,
                       strerror(errno));
        sh->history[0] = '\0';
        return -1;
    }
    close(fd);
    read_history(sh->history);
    return 0;
}

/* Each line is appended at once: a shell killed later loses nothing. */
static void history_add(struct shell *sh, const char *line)
{
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (!sh->history[0] || (last && strcmp(last->line, line) == 0))
        return; /* no file, or the same line again */
    add_history(line);
    append_history(1, sh->history);
}

/* ---------------------------------------------------------------- completion */

static char *complete_next(const char *text, int state)
{
    static size_t next;
    (void)text;
    if (state == 0)
        next = 0;
    if (next >= shown.n)
        return NULL;
    const char *item = shown.items[next++];
    return strndup(item, strcspn(item, "\t"));
}

/* Shell words that are not commands, offered where a group is. */
static int add_builtins(struct hc_complete *c, const char *cur)
{
    static const char *const builtins[] = {"exit\tleave the shell", "quit\tleave the shell"};
    for (size_t i = 0; i < HC_ARRAY_LEN(builtins); i++) {
        if (strncmp(builtins[i], cur, strlen(cur)) != 0)
            continue;
        char *item = strdup(builtins[i]), **grown = realloc(c->items, (c->n + 2) * sizeof(*grown));
        if (grown)
            c->items = grown;
        if (!item || !grown) {
            free(item);
            return -1;
        }
        c->items[c->n++] = item;
        c->items[c->n] = NULL;
    }
    return 0;
}

/* Readline's completion entry: the partial line up to the cursor goes through the engine. */
static char **shell_complete(const char *text, int start, int end)
{
    char **words = NULL, *upto = strndup(rl_line_buffer, (size_t)end);
    int open_word = 0, n;
    struct hc_error err = {0};
    const struct hc_cli_globals *g = &active->ctx->g;
    struct hc_complete_conn conn = {g->controller, g->token, g->ca_file, 0, 0};
    (void)start;
    rl_attempted_completion_over = 1; /* never fall back to file names unless told to */
    hc_complete_clear(&shown);
    if (!upto || (n = hc_shell_split(upto, 1, &words, &open_word, &err)) < 0) {
        free(upto);
        return NULL;
    }
    int skip = n > 0 && strcmp(words[0], "hcctl") == 0 && (n > 1 || !open_word);
    int nwords = (open_word ? n - 1 : n) - skip;
    const char *cur = open_word ? words[n - 1] : "";
    if (hc_complete_line(active->ctx->groups, nwords, words + skip, cur, &conn, &shown) == 0 &&
        nwords == 0 && cur[0] != '-')
        add_builtins(&shown, cur);
    hc_shell_words_free(words);
    free(upto);
    if (shown.files) {
        rl_attempted_completion_over = 0; /* readline's own file name completion */
        return NULL;
    }
    return shown.n ? rl_completion_matches(text, complete_next) : NULL;
}

/* Lists the candidates with their descriptions ("node    the cluster's nodes"). */
static void shell_display(char **matches, int num, int max_len)
{
    (void)matches;
    fputc('\n', rl_outstream);
    for (size_t i = 0; i < shown.n && (int)i < num + 1; i++) {
        const char *item = shown.items[i], *tab = strchr(item, '\t');
        int len = tab ? (int)(tab - item) : (int)strlen(item);
        fprintf(rl_outstream, "  %-*.*s  %s\n", max_len, len, item, tab ? tab + 1 : "");
    }
    rl_forced_update_display();
}

/* ---------------------------------------------------------------- signals */

/* Ctrl-C at the prompt: the handler only writes a byte to a pipe, which the input loop watches
 * next to the terminal, so the line is discarded outside the signal handler and a signal that
 * arrives while readline is busy (not blocked in read) is not lost. */
static int sigint_pipe[2] = {-1, -1};

static void on_sigint(int sig)
{
    int saved = errno;
    (void)sig;
    if (write(sigint_pipe[1], "", 1) < 0) {
        /* the pipe is full: a Ctrl-C is already pending */
    }
    errno = saved;
}

static void set_sigint(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
}

/* Discards the line being typed and shows a fresh prompt. */
static void discard_line(void)
{
    char buf[64];
    while (read(sigint_pipe[0], buf, sizeof(buf)) > 0)
        ;
    rl_free_line_state();
    rl_callback_sigcleanup();
    rl_replace_line("", 0);
    rl_crlf();
    rl_on_new_line();
    rl_redisplay();
}

/* ---------------------------------------------------------------- running lines */

/* The global options given to `hcctl shell`, as words for every line. */
static void shell_prefix(struct shell *sh)
{
    const struct hc_cli_globals *g = &sh->ctx->g;
    const char *pairs[][2] = {
        {"--controller", g->controller}, {"--token", g->token}, {"--ca", g->ca_file}};
    for (size_t i = 0; i < HC_ARRAY_LEN(pairs); i++)
        if (pairs[i][1]) {
            sh->prefix[sh->nprefix++] = (char *)pairs[i][0];
            sh->prefix[sh->nprefix++] = (char *)pairs[i][1];
        }
    if (g->json) {
        sh->prefix[sh->nprefix++] = "--output";
        sh->prefix[sh->nprefix++] = "json";
    }
    if (g->quiet)
        sh->prefix[sh->nprefix++] = "--quiet";
    if (g->no_color)
        sh->prefix[sh->nprefix++] = "--no-color";
    if (g->yes)
        sh->prefix[sh->nprefix++] = "--yes";
    if (g->timeout_ms != 30000) {
        snprintf(sh->timeout, sizeof(sh->timeout), "%lldms", (long long)g->timeout_ms);
        sh->prefix[sh->nprefix++] = "--timeout";
        sh->prefix[sh->nprefix++] = sh->timeout;
    }
}

static int run_argv(struct shell *sh, int argc, char **argv)
{
    struct hc_cli_io io = {sh->ctx->out.out, sh->ctx->out.err,   sh->ctx->in, -1,
                           sh->ctx->in_tty,  sh->ctx->out.now_ms};
    if (!sh->interactive)
        return hc_cli_main(sh->ctx->groups, argc, argv, &io);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        int rc = hc_cli_main(sh->ctx->groups, argc, argv, &io);
        fflush(NULL);
        _exit(rc);
    }
    if (pid < 0)
        return hc_cli_main(sh->ctx->groups, argc, argv, &io);
    int status = 0;
    signal(SIGINT, SIG_IGN); /* the terminal's Ctrl-C is for the command */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status)) {
        fputc('\n', sh->ctx->out.err);
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

/* `exit [N]`: N, or the status of the last command. Returns -1 when the word is not exit. */
static int exit_code(struct shell *sh, int n, char **words)
{
    if (strcmp(words[0], "exit") != 0 && strcmp(words[0], "quit") != 0)
        return -1;
    if (n > 1)
        return atoi(words[1]) & 0xff;
    return sh->last_rc;
}

/* Runs one line. Returns 1 when the shell should end. */
static int shell_line(struct shell *sh, const char *line)
{
    char **words = NULL, *argv[256];
    struct hc_error err = {0};
    int n = hc_shell_split(line, 0, &words, NULL, &err), argc = 0, skip, code, done = 0;
    if (n < 0) {
        sh->last_rc = hc_cmd_fail(sh->ctx, &err, NULL);
        return 0;
    }
    skip = n > 1 && strcmp(words[0], "hcctl") == 0;
    if (n - skip <= 0)
        goto cleanup;
    if ((code = exit_code(sh, n - skip, words + skip)) >= 0) {
        sh->last_rc = code;
        done = 1;
        goto cleanup;
    }
    if (strcmp(words[skip], "shell") == 0) {
        sh->last_rc =
            hc_cmd_usage(sh->ctx, "type a command, or 'exit' to leave", "already in the shell");
        goto cleanup;
    }
    if (sh->nprefix + n + 1 >= (int)HC_ARRAY_LEN(argv)) {
        sh->last_rc = hc_cmd_usage(sh->ctx, NULL, "too many words on one line");
        goto cleanup;
    }
    argv[argc++] = "hcctl";
    for (int i = 0; i < sh->nprefix; i++)
        argv[argc++] = sh->prefix[i];
    for (int i = skip; i < n; i++)
        argv[argc++] = words[i];
    argv[argc] = NULL;
    sh->last_rc = run_argv(sh, argc, argv);
cleanup:
    hc_shell_words_free(words);
    return done;
}

static char *read_plain(struct shell *sh)
{
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, sh->ctx->in) < 0) {
        free(line);
        return NULL;
    }
    line[strcspn(line, "\r\n")] = '\0';
    return line;
}

/* readline's callback interface, so that one loop waits on the terminal and on Ctrl-C. */
static char *typed_line;
static int line_done;

static void on_line(char *line)
{
    typed_line = line; /* NULL: end of input (Ctrl-D on an empty line) */
    line_done = 1;
    rl_callback_handler_remove(); /* no prompt again before the command has run */
}

static char *read_interactive(struct shell *sh)
{
    int in = fileno(sh->ctx->in);
    typed_line = NULL;
    line_done = 0;
    set_sigint(on_sigint);
    rl_callback_handler_install(SHELL_PROMPT, on_line);
    while (!line_done) {
        struct pollfd fds[2] = {{in, POLLIN, 0}, {sigint_pipe[0], POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents & POLLIN)
            discard_line();
        else if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
            rl_callback_read_char();
    }
    if (!line_done)
        rl_callback_handler_remove();
    signal(SIGINT, SIG_DFL);
    return typed_line;
}

static int readline_setup(struct shell *sh)
{
    struct hc_error err = {0};
    if (pipe2(sigint_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        hc_error_set(&err, HC_E(INTERNAL), "cannot set up the shell: pipe: %s", strerror(errno));
        return hc_cmd_fail(sh->ctx, &err, NULL);
    }
    rl_readline_name = "hcctl";
    rl_instream = sh->ctx->in;
    rl_outstream = sh->ctx->out.err; /* the prompt and the echo are not data */
    rl_catch_signals = 0;            /* Ctrl-C: on_sigint and the input loop */
    rl_attempted_completion_function = shell_complete;
    rl_completion_display_matches_hook = shell_display;
    rl_completer_word_break_characters = " \t\n";
    rl_completer_quote_characters = "'\"";
    history_open(sh);
    if (sh->history[0])
        stifle_history(SHELL_HISTORY_LINES);
    return 0;
}

static int cmd_shell(struct hc_cmd_ctx *ctx)
{
    struct shell sh;
    if (active)
        return hc_cmd_usage(ctx, "type a command, or 'exit' to leave", "already in the shell");
    memset(&sh, 0, sizeof(sh));
    sh.ctx = ctx;
    sh.interactive = ctx->in && ctx->in_tty;
    if (!ctx->in)
        return hc_cmd_usage(ctx, NULL, "the shell needs an input");
    shell_prefix(&sh);
    active = &sh;
    if (sh.interactive && readline_setup(&sh) != 0) {
        active = NULL;
        return HC_EXIT_FAILED;
    }
    if (sh.interactive) {
        hc_output_info(&ctx->out,
                       "hcctl %s shell: TAB completes, 'help' helps, 'exit' or "
                       "Ctrl-D leaves",
                       HC_VERSION);
    }
    for (;;) {
        char *line = sh.interactive ? read_interactive(&sh) : read_plain(&sh);
        if (!line) {
            if (sh.interactive)
                fputc('\n', ctx->out.err); /* Ctrl-D leaves the prompt's line open */
            break;
        }
        if (sh.interactive && line[strspn(line, " \t")])
            history_add(&sh, line);
        int done = shell_line(&sh, line);
        free(line);
        if (done)
            break;
    }
    if (sh.history[0])
        history_truncate_file(sh.history, SHELL_HISTORY_LINES);
    if (sh.interactive) {
        clear_history();
        close(sigint_pipe[0]);
        close(sigint_pipe[1]);
        sigint_pipe[0] = sigint_pipe[1] = -1;
    }
    hc_complete_clear(&shown);
    active = NULL;
    return sh.last_rc;
}

static const struct hc_cmd_verb shell_verbs[] = {
    HC_VERB(.name = "shell", .handler = cmd_shell,
            .summary =
                "an interactive shell: history, TAB completion (node names too), 'help', 'exit'",
            .flags = HC_CMD_OFFLINE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_shell = {
    .name = "shell",
    .summary = "the interactive shell",
    .verbs = shell_verbs,
    .flags = HC_GROUP_STANDALONE,
};
