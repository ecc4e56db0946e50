/* Supervised daemon mode for hcagent: double fork, pid file, log file, restart on crash. */
#include "agents/hcagent/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/stop.h"
#include "common/util.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define STABLE_AFTER_MS 60000 /* a worker that ran this long resets the backoff */
#define LOG_MAX (16LL << 20)  /* the log file moves to FILE.1 past this, checked every minute */
#define LOG_CHECK_MS 60000

/* Both are read by the signal handler: lock-free atomics (common/stop.h). */
static struct hc_stop supervisor_stop;
static atomic_int worker_pid;

static void on_stop(int sig)
{
    hc_stop_request(&supervisor_stop);
    pid_t pid = atomic_load(&worker_pid);
    if (pid > 0)
        kill(pid, sig);
}

/* 1 when pid runs: it exists and is not a zombie (a killed supervisor's children are reparented
 * to an init that may never reap them, and kill(pid, 0) succeeds on a zombie). */
static int process_running(pid_t pid)
{
    char path[64], *text = NULL;
    struct hc_error ignored;
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (pid <= 0 || kill(pid, 0) != 0)
        return 0;
    if (hc_file_read(path, &text, NULL, &ignored) < 0)
        return 1; /* no /proc: trust kill() */
    const char *end = strrchr(text, ')');
    int running = !end || (end[1] == ' ' && end[2] != 'Z' && end[2] != 'X');
    free(text);
    return running;
}

static int pidfile_busy(const char *path)
{
    char *text = NULL;
    struct hc_error ignored;
    if (!path || hc_file_read(path, &text, NULL, &ignored) < 0)
        return 0;
    pid_t pid = (pid_t)atol(text);
    free(text);
    return process_running(pid);
}

static int redirect_stdio(const char *log_file)
{
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out =
        open(log_file ? log_file : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (in < 0 || out < 0)
        return -1;
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    close(in);
    close(out);
    return 0;
}

/* The supervisor's loop: returns 0 in a fresh worker, exits the process otherwise. */
/* Waits for the worker to end, keeping the log file within LOG_MAX meanwhile. */
static void wait_worker(pid_t pid, int *status, const char *log_file)
{
    int64_t checked = hc_mono_ms();
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return;
        if (log_file && hc_mono_ms() - checked >= LOG_CHECK_MS) {
            struct hc_error err = {0};
            if (hc_file_cap(log_file, LOG_MAX, &err) > 0)
                HC_INFO("supervisor: log over %lld MiB: moved to %s.1", LOG_MAX >> 20, log_file);
            checked = hc_mono_ms();
        }
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int supervise(const char *pidfile, const char *log_file)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int64_t backoff = BACKOFF_MIN_MS;
    for (;;) {
        int64_t started = hc_mono_ms();
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            return 0;
        }
        if (pid < 0) {
            HC_ERROR("supervisor: cannot fork the agent: %s", strerror(errno));
            sleep(1);
            continue;
        }
        atomic_store(&worker_pid, pid);
        int status = 0;
        wait_worker(pid, &status, log_file);
        atomic_store(&worker_pid, 0);
        int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (clean || hc_stop_requested(&supervisor_stop)) {
            HC_INFO("supervisor: agent stopped%s; exiting", clean ? "" : " on request");
            if (pidfile)
                unlink(pidfile);
            _exit(0);
        }
        if (hc_mono_ms() - started > STABLE_AFTER_MS)
            backoff = BACKOFF_MIN_MS;
        if (WIFSIGNALED(status))
            HC_WARN("supervisor: agent killed by signal %d; restarting in %lld ms",
                    WTERMSIG(status), (long long)backoff);
        else
            HC_WARN("supervisor: agent exited with status %d; restarting in %lld ms",
                    WEXITSTATUS(status), (long long)backoff);
        struct timespec ts = {backoff / 1000, (backoff % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !hc_stop_requested(&supervisor_stop))
            ;
        if (hc_stop_requested(&supervisor_stop)) {
            if (pidfile)
                unlink(pidfile);
            _exit(0);
        }
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

int hc_daemon_start(const struct hc_daemon_options *opts, struct hc_error *err)
{
    if (pidfile_busy(opts->pidfile))
        return hc_error_set(err, HC_E(CONFLICT), "an agent already runs (pid file '%s')",
                            opts->pidfile);
    if (opts->pidfile) {
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s", opts->pidfile);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            if (hc_mkdir_p(dir, 0755, err) < 0)
                return -1;
        }
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot fork: %s", strerror(errno));
    if (pid > 0)
        _exit(0); /* the caller (an SSH session, a shell) gets its prompt back */
    setsid();
    if (fork() > 0)
        _exit(0); /* the supervisor is no session leader: it never gets a terminal again */
    if (redirect_stdio(opts->log_file) < 0)
        _exit(1);
    if (opts->pidfile) {
        char text[32];
        snprintf(text, sizeof(text), "%d\n", (int)getpid());
        if (hc_file_write_atomic(opts->pidfile, text, strlen(text), 0644, err) < 0) {
            HC_ERROR("supervisor: %s", err->message);
            _exit(1);
        }
    }
    HC_INFO("supervisor: running as pid %d", (int)getpid());
    return supervise(opts->pidfile, opts->log_file);
}
