/*
 * The supervisor of the storage-node service (see service.h and docs/bundles.md "On the node").
 *
 * The service runs in its own session and process group (so a stop reaches everything it
 * started), with stdout and stderr appended to DIR/software/service.log, inside the limits'
 * cgroup when there is one (the child waits on a pipe until the agent has moved it there), then
 * as the service user with no capability and no_new_privs (agents/hcagent/privilege.c), its data
 * directory the one place it owns. Its exit is watched on the event loop through a pidfd. A
 * crash is followed by a restart after a backoff that doubles from 0.5 s to 30 s; after 6
 * crashes in a row, each within 10 s of its start, the supervisor gives up (state crashed)
 * until the next start or activation.
 *
 * The service outlives the agent: DIR/software/service.pid records its pid and start time, and
 * the next agent adopts it (a pidfd works on a process that is not our child; its exit status is
 * then unknown). So an agent restart, crash or upgrade does not interrupt storage. The service
 * is stopped when the node leaves the cluster.
 *
 * Health: while starting the health hook runs every 0.5 s; the first pass makes the state
 * running. While running it runs every 5 s and the last answer is reported (it does not change
 * the state: the operations decide what an unhealthy service means).
 *
 * History: every change of the process's life (started, adopted, running, stopped, exited,
 * crashed) is appended as one JSON line to DIR/software/service-history.jsonl, with the
 * wall-clock time in ms, the version and the pid, so that what the controller believes can be
 * checked against what happened on the node. The file keeps the last HISTORY_KEEP lines (it is
 * cut back to that many once it has HISTORY_SLACK more).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/hcagent/netlimit.h"
#include "agents/hcagent/privilege.h"
#include "agents/hcagent/service.h"
#include "agents/hcagent/service_settings.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"

#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 30000
#define FAST_FAIL_MS 10000
#define MAX_FAST_FAILS 6
#define STOP_DEFAULT_MS 10000
#define HEALTH_STARTING_MS 500
#define HEALTH_RUNNING_MS 5000
#define POLL_EXIT_MS 200
#define HISTORY_KEEP 1000
#define HISTORY_SLACK 250

struct hc_service {
    struct event_base *base;
    struct hc_jobs *jobs;
    char log_path[1100], pid_path[1100], history_path[1100];
    int history_lines; /* lines in the history file, -1 until counted */
    enum hc_service_state state;
    int installed; /* what an idle state means: stopped or not_installed */
    json_t *manifest;
    struct hc_service_env env;
    pid_t pid;            /* 0: nothing runs */
    int child;            /* our child (exit status known) or adopted */
    long long start_time; /* /proc/PID/stat field 22, to recognise the process */
    int pidfd;
    struct event *exit_ev, *restart_timer, *kill_timer, *health_timer;
    uint64_t generation; /* bumped at each start: late health answers are dropped */
    int health_inflight, healthy;
    char health_detail[512];
    int restarts, fast_fails;
    int64_t started_mono, started_wall;
    char last_exit[300];
    struct hc_cgroup cg;
    /* the bounds asked by settings (-1: not asked, the manifest's "limits" hold) */
    int want_cpu, want_mem, want_net;
    struct hc_netlimit net;       /* what the last apply found (loop thread) */
    struct netlimit_job *net_job; /* the apply in flight, NULL when none */
    int net_again;                /* another apply is due once it ends */
    hc_service_stopped_fn stop_done;
    void *stop_arg;
};

static const char *const state_names[] = {"not_installed", "starting", "running", "stopping",
                                          "stopped",       "crashed",  "backoff"};

const char *hc_service_state_name(enum hc_service_state s)
{
    return (size_t)s < HC_ARRAY_LEN(state_names) ? state_names[s] : "unknown";
}

static void on_exit_event(evutil_socket_t fd, short what, void *arg);
static void on_restart(evutil_socket_t fd, short what, void *arg);
static void on_kill(evutil_socket_t fd, short what, void *arg);
static void on_health(evutil_socket_t fd, short what, void *arg);

struct hc_service *hc_service_new(struct event_base *base, struct hc_jobs *jobs, const char *sw_dir,
                                  struct hc_error *err)
{
    struct hc_service *svc = calloc(1, sizeof(*svc));
    if (!svc) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    svc->base = base;
    svc->jobs = jobs;
    svc->want_cpu = svc->want_mem = svc->want_net = -1;
    svc->pidfd = -1;
    snprintf(svc->log_path, sizeof(svc->log_path), "%s/service.log", sw_dir);
    snprintf(svc->pid_path, sizeof(svc->pid_path), "%s/service.pid", sw_dir);
    snprintf(svc->history_path, sizeof(svc->history_path), "%s/%s", sw_dir,
             HC_SERVICE_HISTORY_FILE);
    svc->history_lines = -1;
    svc->restart_timer = evtimer_new(base, on_restart, svc);
    svc->kill_timer = evtimer_new(base, on_kill, svc);
    svc->health_timer = evtimer_new(base, on_health, svc);
    if (!svc->restart_timer || !svc->kill_timer || !svc->health_timer) {
        hc_error_set(err, HC_E(INTERNAL), "cannot create the supervisor's timers");
        hc_service_free(svc, 0);
        return NULL;
    }
    return svc;
}

static void unwatch(struct hc_service *svc)
{
    if (svc->exit_ev)
        event_free(svc->exit_ev);
    svc->exit_ev = NULL;
    if (svc->pidfd >= 0)
        close(svc->pidfd);
    svc->pidfd = -1;
}

/* ---------------------------------------------------------------- history */

static int count_lines(const char *text, size_t len)
{
    int n = 0;
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
        n++;
    return n;
}

/* Cuts the history file back to its last HISTORY_KEEP lines. */
static void history_trim(struct hc_service *svc)
{
    struct hc_error err = {0};
    char *text = NULL;
    size_t len = 0;
    if (hc_file_read(svc->history_path, &text, &len, &err) < 0) {
        HC_WARN("cannot trim the service history: %s", err.message);
        return;
    }
    int lines = count_lines(text, len), drop = lines - HISTORY_KEEP;
    const char *keep = text;
    for (; drop > 0 && keep; drop--)
        if ((keep = memchr(keep, '\n', len - (size_t)(keep - text))))
            keep++;
    if (keep &&
        hc_file_write_atomic(svc->history_path, keep, len - (size_t)(keep - text), 0644, &err) < 0)
        HC_WARN("cannot trim the service history: %s", err.message);
    else
        svc->history_lines = lines < HISTORY_KEEP ? lines : HISTORY_KEEP;
    free(text);
}

/* Appends one transition to the history: {"ts_ms","time","event","node","version","pid",
 * "detail"?}. version NULL: the one the supervisor runs; pid 0: none. */
static void history(struct hc_service *svc, const char *event, pid_t pid, const char *version,
                    const char *detail)
{
    if (svc->history_lines < 0) {
        char *text = NULL;
        size_t len = 0;
        struct hc_error ignore = {0};
        svc->history_lines =
            hc_file_read(svc->history_path, &text, &len, &ignore) == 0 ? count_lines(text, len) : 0;
        free(text);
    }
    char when[32];
    int64_t now = hc_now_ms();
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s}", "ts_ms", (json_int_t)now, "time",
                          hc_time_format(now, when, sizeof(when)), "event", event, "node",
                          svc->env.node, "version", version ? version : svc->env.version);
    json_object_set_new(o, "pid", pid > 0 ? json_integer(pid) : json_null());
    if (detail && *detail)
        json_object_set_new(o, "detail", json_string(detail));
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line) {
        HC_WARN("cannot record the service's %s in its history: out of memory", event);
        return;
    }
    /* One write of the whole line, newline included (in place of the NUL), appended. */
    size_t n = strlen(line);
    line[n] = '\n';
    int fd = open(svc->history_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, n + 1) != (ssize_t)(n + 1))
        HC_WARN("cannot append to '%s': %s", svc->history_path, strerror(errno));
    else if (++svc->history_lines >= HISTORY_KEEP + HISTORY_SLACK)
        history_trim(svc);
    if (fd >= 0)
        close(fd);
    free(line);
}

json_t *hc_service_history_json(const struct hc_service *svc, int64_t since_ms)
{
    json_t *events = json_array();
    char *text = NULL;
    size_t len = 0;
    struct hc_error ignore = {0};
    if (hc_file_read(svc->history_path, &text, &len, &ignore) < 0)
        return events; /* nothing happened yet */
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *e = json_loads(line, 0, NULL); /* a torn last line is skipped */
        if (json_is_object(e) && hc_json_int(e, "ts_ms", 0) >= since_ms)
            json_array_append(events, e);
        json_decref(e);
    }
    free(text);
    return events;
}

/* ---------------------------------------------------------------- process identity */

static long long proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
        return -1; /* a zombie has exited: nothing to adopt or wait for */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

static void write_pid_file(struct hc_service *svc)
{
    struct hc_error err = {0};
    json_t *doc = json_pack("{s:i, s:I, s:s}", "pid", (int)svc->pid, "start_time",
                            (json_int_t)svc->start_time, "version", svc->env.version);
    char *text = hc_json_dump(doc);
    if (!text || hc_file_write_atomic(svc->pid_path, text, strlen(text), 0644, &err) < 0)
        HC_WARN("cannot record the service's pid: %s", err.message);
    free(text);
    json_decref(doc);
}

/* Watches for the exit: a pidfd becomes readable when the process ends (child or not). */
static void watch(struct hc_service *svc)
{
    struct timeval poll = {0, POLL_EXIT_MS * 1000};
    svc->pidfd = (int)syscall(SYS_pidfd_open, svc->pid, 0);
    if (svc->pidfd >= 0)
        svc->exit_ev = event_new(svc->base, svc->pidfd, EV_READ, on_exit_event, svc);
    else
        svc->exit_ev = event_new(svc->base, -1, EV_PERSIST, on_exit_event, svc);
    if (svc->exit_ev)
        event_add(svc->exit_ev, svc->pidfd >= 0 ? NULL : &poll);
}

static void health_later(struct hc_service *svc, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(svc->health_timer, &tv);
}

/* The process is up (started or adopted): watch it and check its health. */
static void running_now(struct hc_service *svc)
{
    svc->start_time = proc_start_time(svc->pid);
    svc->generation++;
    svc->healthy = 0;
    snprintf(svc->health_detail, sizeof(svc->health_detail), "not checked yet");
    svc->state = HC_SVC_STARTING;
    svc->installed = 1;
    watch(svc);
    write_pid_file(svc);
    health_later(svc, HEALTH_STARTING_MS);
}

/* ---------------------------------------------------------------- starting */

struct spawn_plan {
    char *prog;
    char **argv, **envp;
    int log, devnull, sync[2];
    struct hc_service_user user;
};

static void plan_free(struct spawn_plan *p)
{
    hc_service_env_free(p->argv); /* argv[0] is prog */
    hc_service_env_free(p->envp);
    if (p->log >= 0)
        close(p->log);
    if (p->devnull >= 0)
        close(p->devnull);
    for (int i = 0; i < 2; i++)
        if (p->sync[i] >= 0)
            close(p->sync[i]);
}

/* A manifest with settings: the effective values (the controller's overrides of the last revision
 * it handed, under this version's schema: service_settings.h) written to env.settings_file
 * (DIR/service-settings.json), mode 0644, beside the service's data directory DIR/service-data:
 * the agent, without CAP_DAC_OVERRIDE, cannot write in the service's own directory, and the
 * service (its own user) can read there but not change it. {setting:NAME} / {settings_file} are
 * rendered in its arguments. Without settings: nothing. */
static int plan_settings(struct hc_service *svc, struct spawn_plan *p, size_t nargs,
                         struct hc_error *err)
{
    int rc = -1;
    if (!json_object_get(svc->manifest, "settings"))
        return 0;
    struct hc_settings_schema *schema = hc_settings_schema_of(svc->manifest, err);
    json_t *values = schema ? hc_service_settings_prepare(svc->manifest, &svc->env, err) : NULL;
    if (!values)
        goto cleanup;
    for (size_t i = 1; i <= nargs; i++) {
        char *r = hc_settings_render(p->argv[i], schema, values, svc->env.settings_file, err);
        if (!r)
            goto cleanup;
        free(p->argv[i]);
        p->argv[i] = r;
    }
    hc_service_apply_bounds(svc, values); /* before the fork: the child is attached to them */
    rc = 0;
cleanup:
    json_decref(values);
    hc_settings_schema_free(schema);
    return rc;
}

static int plan_make(struct hc_service *svc, struct spawn_plan *p, struct hc_error *err)
{
    const json_t *args = json_object_get(svc->manifest, "args");
    size_t n = json_array_size(args);
    *p = (struct spawn_plan){.log = -1, .devnull = -1, .sync = {-1, -1}};
    if (!(p->argv = calloc(n + 2, sizeof(char *))) ||
        !(p->argv[0] = p->prog =
              hc_path_join(svc->env.bundle_dir, hc_json_str(svc->manifest, "entrypoint", ""))))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(p->argv[i + 1] =
                  hc_service_expand(json_string_value(json_array_get(args, i)), &svc->env)))
            return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    if (!(p->envp = hc_service_environ(&svc->env)))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    /* The service's own user, and its data directory the only place it may write. */
    const char *reach[] = {p->prog, NULL}; /* the bundle's directories down to it */
    if (hc_service_env_check(svc->manifest, &svc->env, err) < 0 ||
        hc_privilege_service_user(&p->user, err) < 0 ||
        hc_privilege_service_dir(svc->env.data_dir, reach, &p->user, err) < 0 ||
        plan_settings(svc, p, n, err) < 0)
        return -1;
    if (!p->user.switch_user)
        HC_INFO("%s", p->user.detail); /* no other user to become: said once per start */
    p->log = open(svc->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    p->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (p->log < 0 || p->devnull < 0 || pipe2(p->sync, O_CLOEXEC) < 0)
        return hc_error_set(err, HC_E(IO), "cannot prepare '%s': %s", svc->log_path,
                            strerror(errno));
    char stamp[32], line[1600];
    int len =
        snprintf(line, sizeof(line), "--- %s hcagent: starting %s %s (%s) as %s\n",
                 hc_time_format(hc_now_ms(), stamp, sizeof(stamp)),
                 hc_json_str(svc->manifest, "name", "?"), svc->env.version, p->prog, p->user.name);
    if (write(p->log, line, (size_t)len) < 0)
        HC_WARN("cannot write '%s': %s", svc->log_path, strerror(errno));
    return 0;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_exec(const struct spawn_plan *p, const char *dir)
{
    char c;
    sigset_t none;
    setsid();
    close(p->sync[1]);
    while (read(p->sync[0], &c, 1) < 0 && errno == EINTR)
        ; /* EOF once the parent has placed us in the cgroup */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    /* In its cgroup by now (moved while still root): the service's own user from here on, with
     * no capability and no way to gain one. */
    if (hc_privilege_drop_child(&p->user) < 0) {
        static const char drop[] = "hcagent: cannot drop privileges for the service: not "
                                   "started\n";
        if (write(p->log, drop, sizeof(drop) - 1) < 0)
            _exit(126);
        _exit(126);
    }
    /* Nothing of the agent's may leak into the service (its listening sockets would outlive
     * the agent and stop the next one from binding): everything past stderr is closed. */
    if (chdir(dir) == 0 && dup2(p->devnull, 0) >= 0 && dup2(p->log, 1) >= 0 &&
        dup2(p->log, 2) >= 0 && close_range(3, ~0U, 0) == 0)
        execve(p->prog, p->argv, p->envp);
    static const char msg[] = "hcagent: cannot execute the service's entrypoint\n";
    if (write(p->log, msg, sizeof(msg) - 1) < 0)
        _exit(127);
    _exit(127);
}

static int spawn(struct hc_service *svc, struct hc_error *err)
{
    struct spawn_plan p;
    int rc = -1;
    if (plan_make(svc, &p, err) < 0)
        goto cleanup;
    pid_t pid = fork();
    if (pid < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot fork: %s", strerror(errno));
        goto cleanup;
    }
    if (pid == 0)
        child_exec(&p, svc->env.bundle_dir);
    char why[400];
    if (hc_cgroup_attach(&svc->cg, pid, why, sizeof(why)) < 0) {
        HC_WARN("service limits: %s", why);
        snprintf(svc->cg.detail, sizeof(svc->cg.detail), "limits not applied: %s", why);
        svc->cg.applied = 0;
    }
    svc->pid = pid;
    svc->child = 1;
    svc->started_mono = hc_mono_ms();
    svc->started_wall = hc_now_ms();
    running_now(svc);
    history(svc, "started", pid, NULL, NULL);
    HC_INFO("service %s %s started (pid %d)", hc_json_str(svc->manifest, "name", "?"),
            svc->env.version, (int)pid);
    rc = 0;
cleanup:
    plan_free(&p); /* closing the write end of sync lets the child go on */
    return rc;
}

static int take_definition(struct hc_service *svc, const json_t *manifest,
                           const struct hc_service_env *env, struct hc_error *err)
{
    json_t *copy = json_deep_copy(manifest);
    if (!copy)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_decref(svc->manifest);
    svc->manifest = copy;
    svc->env = *env;
    const json_t *limits = json_object_get(manifest, "limits");
    char cgname[128];
    snprintf(cgname, sizeof(cgname), "hcservice-%s", env->node);
    hc_cgroup_setup(&svc->cg, NULL, cgname, (int)hc_json_int(limits, "cpu_percent", 0),
                    (int)hc_json_int(limits, "memory_mb", 0));
    if (!svc->cg.applied && (svc->cg.cpu_percent || svc->cg.memory_mb))
        HC_WARN("service %s: %s", env->version, svc->cg.detail);
    return 0;
}

int hc_service_start(struct hc_service *svc, const json_t *manifest,
                     const struct hc_service_env *env, struct hc_error *err)
{
    if (svc->pid)
        return hc_error_set(err, HC_E(CONFLICT), "the service still runs (pid %d)", (int)svc->pid);
    evtimer_del(svc->restart_timer);
    svc->fast_fails = 0;
    if (take_definition(svc, manifest, env, err) < 0)
        return -1;
    if (spawn(svc, err) < 0) {
        svc->state = HC_SVC_CRASHED;
        snprintf(svc->last_exit, sizeof(svc->last_exit), "could not start: %s", err->message);
        history(svc, "crashed", 0, NULL, svc->last_exit);
        return -1;
    }
    return 0;
}

int hc_service_adopt(struct hc_service *svc, const json_t *manifest,
                     const struct hc_service_env *env, int *adopted, struct hc_error *err)
{
    char *text = NULL;
    size_t len;
    struct hc_error ignore = {0};
    *adopted = 0;
    if (hc_file_read(svc->pid_path, &text, &len, &ignore) < 0)
        return 0;
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    pid_t pid = (pid_t)hc_json_int(doc, "pid", 0);
    long long recorded = hc_json_int(doc, "start_time", -2);
    int same = pid > 0 && proc_start_time(pid) == recorded;
    char ran[65];
    snprintf(ran, sizeof(ran), "%s", hc_json_str(doc, "version", ""));
    int version_ok = strcmp(ran, env->version) == 0;
    json_decref(doc);
    snprintf(svc->env.node, sizeof(svc->env.node), "%s", env->node); /* for the history */
    if (!same) {
        unlink(svc->pid_path); /* that process is gone */
        history(svc, "exited", pid, ran, "ended while no agent watched it (found at agent start)");
        return 0;
    }
    if (!version_ok) {
        /* Left by an activation that did not finish: the current link names another version. */
        HC_WARN("stopping pid %d: it runs a version other than the current %s", (int)pid,
                env->version);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        unlink(svc->pid_path);
        history(svc, "stopped", pid, ran, "killed at agent start: not the current version");
        return 0;
    }
    if (take_definition(svc, manifest, env, err) < 0)
        return -1;
    svc->pid = pid;
    /* Our child after all when this agent was exec'd in place by its predecessor (an agent
     * self-upgrade, docs/agent-upgrade.md): then it is ours to reap, and its exit status known. */
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    svc->child = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
    svc->started_mono = hc_mono_ms();
    svc->started_wall = hc_now_ms();
    running_now(svc);
    history(svc, "adopted", pid, NULL, "left running by an earlier agent");
    HC_INFO("service %s adopted: pid %d, left running by an earlier agent", env->version, (int)pid);
    *adopted = 1;
    return 0;
}

/* ---------------------------------------------------------------- exits */

static void describe_exit(struct hc_service *svc, int known, int status, char *buf, size_t len)
{
    if (!known)
        snprintf(buf, len, "exited (started by an earlier agent: exit status unknown)");
    else if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "ended (wait status %d)", status);
}

/* pid: the process that just ended. */
static void crashed(struct hc_service *svc, pid_t pid)
{
    int64_t up = hc_mono_ms() - svc->started_mono;
    svc->restarts++;
    svc->fast_fails = up < FAST_FAIL_MS ? svc->fast_fails + 1 : 1;
    if (svc->fast_fails >= MAX_FAST_FAILS) {
        svc->state = HC_SVC_CRASHED;
        history(svc, "crashed", pid, NULL, svc->last_exit);
        HC_ERROR("service %s %s %d times in a row within %d s of starting: giving up until the "
                 "next start",
                 svc->env.version, svc->last_exit, svc->fast_fails, FAST_FAIL_MS / 1000);
        return;
    }
    int64_t delay = (int64_t)BACKOFF_FIRST_MS << (svc->fast_fails - 1);
    if (delay > BACKOFF_MAX_MS)
        delay = BACKOFF_MAX_MS;
    struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000};
    char detail[400];
    snprintf(detail, sizeof(detail), "%s; restart in %lld ms", svc->last_exit, (long long)delay);
    svc->state = HC_SVC_BACKOFF;
    evtimer_add(svc->restart_timer, &tv);
    history(svc, "exited", pid, NULL, detail);
    HC_WARN("service %s %s after %lld ms: restart %d in %lld ms", svc->env.version, svc->last_exit,
            (long long)up, svc->restarts, (long long)delay);
}

/* The process is gone: reap it (when it is our child) and decide what comes next. */
static void gone(struct hc_service *svc, int known, int status)
{
    pid_t pid = svc->pid;
    describe_exit(svc, known, status, svc->last_exit, sizeof(svc->last_exit));
    unwatch(svc);
    unlink(svc->pid_path);
    svc->pid = 0;
    evtimer_del(svc->kill_timer);
    evtimer_del(svc->health_timer);
    svc->healthy = 0;
    if (svc->state == HC_SVC_STOPPING) {
        svc->state = HC_SVC_STOPPED;
        history(svc, "stopped", pid, NULL, svc->last_exit);
        HC_INFO("service %s stopped (%s)", svc->env.version, svc->last_exit);
        hc_service_stopped_fn done = svc->stop_done;
        svc->stop_done = NULL;
        if (done)
            done(svc->stop_arg);
        return;
    }
    crashed(svc, pid);
}

static void on_exit_event(evutil_socket_t fd, short what, void *arg)
{
    struct hc_service *svc = arg;
    int status = 0;
    if (svc->child) {
        pid_t r = waitpid(svc->pid, &status, svc->pidfd >= 0 ? 0 : WNOHANG);
        if (r == 0)
            return; /* polling: still running */
        gone(svc, r == svc->pid, status);
    } else if (svc->pidfd >= 0 || kill(svc->pid, 0) < 0 ||
               proc_start_time(svc->pid) != svc->start_time) {
        gone(svc, 0, 0);
    }
}

static void on_restart(evutil_socket_t fd, short what, void *arg)
{
    struct hc_service *svc = arg;
    struct hc_error err = {0};
    if (spawn(svc, &err) < 0) {
        svc->state = HC_SVC_CRASHED;
        snprintf(svc->last_exit, sizeof(svc->last_exit), "could not restart: %s", err.message);
        history(svc, "crashed", 0, NULL, svc->last_exit);
        HC_ERROR("service %s: %s", svc->env.version, svc->last_exit);
    }
}

/* ---------------------------------------------------------------- stopping */

static void on_kill(evutil_socket_t fd, short what, void *arg)
{
    struct hc_service *svc = arg;
    if (!svc->pid)
        return;
    HC_WARN("service %s did not stop within its stop timeout: SIGKILL", svc->env.version);
    kill(-svc->pid, SIGKILL);
    kill(svc->pid, SIGKILL);
}

void hc_service_stop(struct hc_service *svc, hc_service_stopped_fn done, void *arg)
{
    evtimer_del(svc->restart_timer);
    evtimer_del(svc->health_timer);
    if (!svc->pid) {
        svc->state = svc->installed ? HC_SVC_STOPPED : HC_SVC_NOT_INSTALLED;
        if (done)
            done(arg);
        return;
    }
    int64_t ms = hc_json_int(svc->manifest, "stop_timeout_ms", STOP_DEFAULT_MS);
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    svc->state = HC_SVC_STOPPING;
    svc->stop_done = done;
    svc->stop_arg = arg;
    if (kill(-svc->pid, SIGTERM) < 0)
        kill(svc->pid, SIGTERM);
    evtimer_add(svc->kill_timer, &tv);
}

void hc_service_set_idle(struct hc_service *svc, int installed)
{
    svc->installed = installed;
    if (!svc->pid && svc->state != HC_SVC_CRASHED)
        svc->state = installed ? HC_SVC_STOPPED : HC_SVC_NOT_INSTALLED;
}

/* ---------------------------------------------------------------- health */

struct health_job {
    struct hc_service *svc;
    uint64_t generation;
    json_t *hook;
    struct hc_service_env env;
    struct hc_hook_result res;
};

static void health_work(void *arg)
{
    struct health_job *j = arg;
    struct hc_error err = {0};
    hc_hook_run(HC_HOOK_HEALTH, j->hook, &j->env, &j->res);
    /* The log is kept in check here, off the event loop, at the pace of the health checks. */
    int rotated = hc_file_cap(j->svc->log_path, HC_SERVICE_LOG_MAX, &err);
    if (rotated < 0)
        HC_WARN("%s", err.message);
    else if (rotated)
        HC_INFO("service log over %d MiB: moved to %s.1", HC_SERVICE_LOG_MAX >> 20,
                j->svc->log_path);
}

static void health_done(void *arg)
{
    struct health_job *j = arg;
    struct hc_service *svc = j->svc;
    svc->health_inflight = 0;
    int live = svc->state == HC_SVC_STARTING || svc->state == HC_SVC_RUNNING;
    if (j->generation == svc->generation && live) {
        svc->healthy = j->res.ok;
        snprintf(svc->health_detail, sizeof(svc->health_detail), "%s",
                 j->res.ok && !j->res.detail[0] ? "ok" : j->res.detail);
        if (svc->state == HC_SVC_STARTING && j->res.ok) {
            svc->state = HC_SVC_RUNNING;
            history(svc, "running", svc->pid, NULL, "health check passed");
            HC_INFO("service %s is healthy: running", svc->env.version);
        }
        health_later(svc, svc->state == HC_SVC_RUNNING ? HEALTH_RUNNING_MS : HEALTH_STARTING_MS);
    }
    json_decref(j->hook);
    free(j);
}

static void on_health(evutil_socket_t fd, short what, void *arg)
{
    struct hc_service *svc = arg;
    struct hc_error err = {0};
    if (svc->health_inflight || !svc->pid)
        return;
    struct health_job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->svc = svc;
    j->generation = svc->generation;
    j->hook = json_deep_copy(json_object_get(svc->manifest, "health"));
    j->env = svc->env;
    if (hc_jobs_start(svc->jobs, health_work, health_done, j, &err) < 0) {
        HC_WARN("cannot check the service's health: %s", err.message);
        json_decref(j->hook);
        free(j);
        health_later(svc, HEALTH_RUNNING_MS);
        return;
    }
    svc->health_inflight = 1;
}

void hc_service_note_health(struct hc_service *svc, const char *version, int ok, const char *detail)
{
    int live = svc->state == HC_SVC_STARTING || svc->state == HC_SVC_RUNNING;
    if (!svc->pid || !live || strcmp(version, svc->env.version) != 0)
        return;
    svc->healthy = ok;
    snprintf(svc->health_detail, sizeof(svc->health_detail), "%s", ok && !*detail ? "ok" : detail);
    if (svc->state == HC_SVC_STARTING && ok) {
        svc->state = HC_SVC_RUNNING;
        history(svc, "running", svc->pid, NULL, "health check passed");
        HC_INFO("service %s is healthy: running", svc->env.version);
        health_later(svc, HEALTH_RUNNING_MS);
    }
}

/* ---------------------------------------------------------------- state */

enum hc_service_state hc_service_state(const struct hc_service *svc)
{
    return svc->state;
}

const char *hc_service_version(const struct hc_service *svc)
{
    return svc->pid ? svc->env.version : "";
}

/* ---------------------------------------------------------------- bounds from settings */

struct netlimit_job {
    struct hc_service *svc; /* NULL once the service is freed: the result is dropped */
    char ifname[16], addr[64];
    int mbit;
    struct hc_netlimit nl;
};

static void netlimit_work(void *arg)
{
    struct netlimit_job *j = arg;
    hc_netlimit_apply(j->ifname, j->addr, j->mbit, &j->nl);
}

static void netlimit_start(struct hc_service *svc);

static void netlimit_done(void *arg)
{
    struct netlimit_job *j = arg;
    struct hc_service *svc = j->svc;
    if (svc) {
        svc->net = j->nl;
        svc->net_job = NULL;
        if (!j->nl.applied && j->mbit)
            HC_WARN("service network bound of %d Mbit/s not applied: %s", j->mbit, j->nl.detail);
        else
            HC_INFO("service network bound: %s", j->nl.detail);
        if (svc->net_again) {
            svc->net_again = 0;
            netlimit_start(svc);
        }
    }
    free(j);
}

static void netlimit_start(struct hc_service *svc)
{
    struct hc_error err = {0};
    if (svc->net_job) {
        svc->net_again = 1;
        return;
    }
    struct netlimit_job *j = calloc(1, sizeof(*j));
    if (!j) {
        snprintf(svc->net.detail, sizeof(svc->net.detail), "out of memory");
        return;
    }
    j->svc = svc;
    j->nl = svc->net;
    j->mbit = svc->want_net;
    snprintf(j->ifname, sizeof(j->ifname), "%s", svc->env.storage_interface);
    snprintf(j->addr, sizeof(j->addr), "%s", svc->env.storage_host);
    if (!j->ifname[0] || !j->addr[0]) {
        snprintf(svc->net.detail, sizeof(svc->net.detail), "no network bound: %s",
                 j->ifname[0] ? svc->env.storage_problem : "the node has no storage interface");
        svc->net.applied = 0;
        free(j);
        return;
    }
    svc->net_job = j;
    if (hc_jobs_start(svc->jobs, netlimit_work, netlimit_done, j, &err) < 0) {
        snprintf(svc->net.detail, sizeof(svc->net.detail), "%s", err.message);
        svc->net_job = NULL;
        free(j);
    }
}

/* A limits.NAME of values as an int, or -1 when values has none. */
static int bound_of(const json_t *values, const char *name)
{
    const json_t *v = json_object_get(values, name);
    return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

void hc_service_apply_bounds(struct hc_service *svc, const json_t *values)
{
    const json_t *limits = json_object_get(svc->manifest, "limits");
    int cpu = bound_of(values, "limits.cpu_percent"), mem = bound_of(values, "limits.memory_mb");
    int net = bound_of(values, "limits.net_mbit");
    int changed = cpu != svc->want_cpu || mem != svc->want_mem;
    svc->want_cpu = cpu;
    svc->want_mem = mem;
    if (cpu < 0)
        cpu = (int)hc_json_int(limits, "cpu_percent", 0);
    if (mem < 0)
        mem = (int)hc_json_int(limits, "memory_mb", 0);
    if (changed || svc->cg.cpu_percent != cpu || svc->cg.memory_mb != mem) {
        if (svc->pid && svc->cg.applied) {
            if (hc_cgroup_update(&svc->cg, cpu, mem) < 0)
                HC_WARN("service bounds: %s", svc->cg.detail);
        } else {
            char cgname[128], why[400];
            snprintf(cgname, sizeof(cgname), "hcservice-%s", svc->env.node);
            hc_cgroup_setup(&svc->cg, NULL, cgname, cpu, mem);
            if (svc->pid && svc->cg.applied &&
                hc_cgroup_attach(&svc->cg, svc->pid, why, sizeof(why)) < 0) {
                snprintf(svc->cg.detail, sizeof(svc->cg.detail), "limits not applied: %s", why);
                svc->cg.applied = 0;
            }
        }
    }
    if (net >= 0 || svc->want_net > 0) {
        svc->want_net = net < 0 ? 0 : net;
        netlimit_start(svc);
    }
}

int hc_service_bounds_ok(const struct hc_service *svc, char *why, size_t len)
{
    why[0] = '\0';
    if ((svc->want_cpu > 0 || svc->want_mem > 0) && !svc->cg.applied)
        snprintf(why, len, "%s", svc->cg.detail);
    else if (svc->want_net > 0 && !svc->net_job && !svc->net.applied)
        snprintf(why, len, "%s", svc->net.detail);
    return !why[0];
}

json_t *hc_service_json(const struct hc_service *svc)
{
    char when[32];
    json_t *o =
        json_pack("{s:s, s:i, s:s, s:o}", "state", hc_service_state_name(svc->state), "restarts",
                  svc->restarts, "log", svc->log_path, "limits", hc_cgroup_json(&svc->cg));
    if (svc->want_net >= 0)
        json_object_set_new(json_object_get(o, "limits"), "net", hc_netlimit_json(&svc->net));
    json_object_set_new(o, "version", svc->pid ? json_string(svc->env.version) : json_null());
    json_object_set_new(o, "pid", svc->pid ? json_integer(svc->pid) : json_null());
    json_object_set_new(o, "started_at",
                        svc->pid
                            ? json_string(hc_time_format(svc->started_wall, when, sizeof(when)))
                            : json_null());
    json_object_set_new(o, "uptime_seconds",
                        svc->pid ? json_integer((hc_mono_ms() - svc->started_mono) / 1000)
                                 : json_null());
    json_object_set_new(o, "last_exit",
                        svc->last_exit[0] ? json_string(svc->last_exit) : json_null());
    json_object_set_new(o, "healthy", svc->pid ? json_boolean(svc->healthy) : json_false());
    json_object_set_new(o, "health_detail",
                        svc->pid ? json_string(svc->health_detail) : json_null());
    return o;
}

void hc_service_free(struct hc_service *svc, int stop)
{
    if (!svc)
        return;
    if (stop && svc->pid) {
        /* The node leaves: the service goes too, here and now. */
        kill(-svc->pid, SIGTERM);
        kill(svc->pid, SIGTERM);
        for (int i = 0; i < 100 && kill(svc->pid, 0) == 0; i++) {
            if (svc->child && waitpid(svc->pid, NULL, WNOHANG) == svc->pid)
                break;
            usleep(50000);
        }
        kill(-svc->pid, SIGKILL);
        if (svc->child)
            waitpid(svc->pid, NULL, 0);
        unlink(svc->pid_path);
        history(svc, "stopped", svc->pid, NULL, "the node leaves the cluster");
        hc_cgroup_release(&svc->cg);
    }
    if (svc->net_job)
        svc->net_job->svc = NULL; /* its end is dropped */
    unwatch(svc);
    if (svc->restart_timer)
        event_free(svc->restart_timer);
    if (svc->kill_timer)
        event_free(svc->kill_timer);
    if (svc->health_timer)
        event_free(svc->health_timer);
    json_decref(svc->manifest);
    free(svc);
}
