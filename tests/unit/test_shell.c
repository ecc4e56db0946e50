/*
 * `hcctl shell` driven through a real pseudo-terminal (forkpty): the child runs the shell on
 * the pty as a user's terminal would, the test types into it and reads the screen. Checked:
 * `cl<TAB>` completes to `cluster`, a double TAB lists verbs with their descriptions, a line
 * runs with the same parser as the command line (an error and its exit status), Ctrl-C at the
 * prompt discards the line, `help` works inside, `exit N` ends with N, and the history lands in
 * $XDG_STATE_HOME/hcctl/history (mode 0600) where a second shell finds it (Ctrl-P).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/util.h"

#define EXPECT_MS 30000 /* generous: a loaded 2-core CI machine starts ASan binaries slowly */

struct term {
    int fd;
    pid_t pid;
    char screen[1 << 16]; /* everything the shell wrote */
    size_t len;
    size_t mark; /* expectations look after this */
};

static char tmpdir[512];

/* Starts `hcctl shell` on a new pty, in a child. */
static void term_start(struct term *t)
{
    memset(t, 0, sizeof(*t));
    t->pid = forkpty(&t->fd, NULL, NULL, NULL);
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        char state[600], home[600];
        snprintf(state, sizeof(state), "%s/state", tmpdir);
        snprintf(home, sizeof(home), "%s/home", tmpdir);
        setenv("XDG_STATE_HOME", state, 1);
        setenv("HOME", home, 1);
        setenv("XDG_CONFIG_HOME", home, 1); /* no config file: no controller */
        setenv("TERM", "dumb", 1);
        setenv("INPUTRC", "/dev/null", 1);
        unsetenv("HCCTL_CONTROLLER");
        unsetenv("HCCTL_TOKEN");
        char *argv[] = {"hcctl", "shell", NULL};
        struct hc_cli_io io = {stdout, stderr, stdin, -1, -1, 0};
        int rc = hc_cli_main(hc_cmd_groups, 2, argv, &io);
        fflush(NULL);
        _exit(rc);
    }
}

static void term_type(struct term *t, const char *keys)
{
    size_t n = strlen(keys);
    assert_int_equal(write(t->fd, keys, n), (ssize_t)n);
}

/* Reads until what appears after the mark; moves the mark past it. */
static void term_expect(struct term *t, const char *what)
{
    int64_t deadline = hc_mono_ms() + EXPECT_MS;
    for (;;) {
        t->screen[t->len] = '\0';
        char *hit = strstr(t->screen + t->mark, what);
        if (hit) {
            t->mark = (size_t)(hit - t->screen) + strlen(what);
            return;
        }
        int64_t left = deadline - hc_mono_ms();
        struct pollfd pfd = {t->fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
            char cmd[256];
            /* where the shell is stuck, for the record (gdb where it is installed) */
            snprintf(cmd, sizeof(cmd),
                     "grep State /proc/%d/status; gdb -p %d -batch -ex bt "
                     "2>/dev/null | grep '^#'",
                     (int)t->pid, (int)t->pid);
            if (system(cmd) != 0)
                fprintf(stderr, "(no backtrace)\n");
            fail_msg("timed out waiting for '%s'; the whole screen:\n%s", what, t->screen);
        }
        ssize_t n = read(t->fd, t->screen + t->len, sizeof(t->screen) - 1 - t->len);
        if (n <= 0)
            fail_msg("the shell closed the terminal while waiting for '%s':\n%s", what,
                     t->screen + t->mark);
        t->len += (size_t)n;
    }
}

/* Waits for the shell to end, draining the pty meanwhile. Returns its exit status. */
static int term_wait(struct term *t)
{
    int status = 0;
    int64_t deadline = hc_mono_ms() + EXPECT_MS;
    while (waitpid(t->pid, &status, WNOHANG) == 0) {
        char buf[4096];
        struct pollfd pfd = {t->fd, POLLIN, 0};
        if (hc_mono_ms() > deadline) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &status, 0);
            fail_msg("the shell did not exit");
        }
        if (poll(&pfd, 1, 100) > 0 && read(t->fd, buf, sizeof(buf)) <= 0)
            usleep(10000);
    }
    close(t->fd);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_shell_on_a_terminal(void **state)
{
    (void)state;
    struct term t;
    term_start(&t);
    term_expect(&t, "hcctl> ");
    /* the acceptance test of the issue: cl<TAB> completes to cluster */
    term_type(&t, "cl\t");
    term_expect(&t, "cluster ");
    /* ...and the line runs as `hcctl cluster status` would: no controller here */
    term_type(&t, "status\r");
    term_expect(&t, "no controller configured");
    term_expect(&t, "hcctl> ");
    /* a double TAB lists the candidates with their descriptions */
    term_type(&t, "node \t\t");
    term_expect(&t, "list the nodes with their health");
    term_type(&t, "\x15"); /* Ctrl-U: clear the line */
    /* Ctrl-C at the prompt discards what was typed */
    term_type(&t, "garbage");
    term_expect(&t, "garbage");
    term_type(&t, "\x03");
    term_expect(&t, "hcctl> ");
    term_type(&t, "help durations\r");
    term_expect(&t, "1m30s");
    term_type(&t, "exit 7\r");
    assert_int_equal(term_wait(&t), 7);
    if (getenv("HC_TEST_SHOW_SCREEN")) /* debugging aid: what a user would have seen */
        fwrite(t.screen, 1, t.len, stderr);
    assert_null(strstr(t.screen, "unknown command 'garbage'"));

    char path[700], *hist = NULL;
    size_t len = 0;
    struct stat st;
    snprintf(path, sizeof(path), "%s/state/hcctl/history", tmpdir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(hc_file_read(path, &hist, &len, NULL), 0);
    assert_non_null(strstr(hist, "cluster status\n"));
    assert_non_null(strstr(hist, "help durations\n"));
    assert_null(strstr(hist, "garbage"));
    free(hist);

    /* a second shell finds the history: Ctrl-P brings back "exit 7" */
    term_start(&t);
    term_expect(&t, "hcctl> ");
    term_type(&t, "\x10");
    term_expect(&t, "exit 7");
    term_type(&t, "\r");
    assert_int_equal(term_wait(&t), 7);

    /* Ctrl-D on an empty line leaves with the last command's status */
    term_start(&t);
    term_expect(&t, "hcctl> ");
    term_type(&t, "node lst\r");
    term_expect(&t, "did you mean 'list'?");
    term_expect(&t, "hcctl> ");
    term_type(&t, "\x04");
    assert_int_equal(term_wait(&t), 2);
}

int main(void)
{
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    hc_mkdir_p(base, 0755, NULL);
    snprintf(tmpdir, sizeof(tmpdir), "%s/shell.XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shell_on_a_terminal),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
    return rc;
}
