/*
 * The agent's version and its self-upgrade: see agent_upgrade.h for the files and the sequence,
 * docs/agent-upgrade.md for the API and the skew policy.
 *
 * Why exec in place: the pid stays, so whatever watches the agent (systemd's main pid, the
 * daemon supervisor's worker) keeps watching the new one, and the storage service, adopted
 * through DIR/software/service.pid exactly as after an agent restart, is never touched. Why a
 * guardian: once exec has happened nothing of the old agent is left to notice that the new one
 * does not come up, so a small process forked before the exec does.
 */
#include "agents/hcagent/agent_upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agents/hcagent/software.h"
#include "common/bundle.h"
#include "common/constants.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

#define AGENT_DIR "agent"
#define UPGRADE_FILE "upgrade.json"
#define LAUNCHED_ENV "HCAGENT_LAUNCHED"     /* set for a program started as DIR/agent/current */
#define SUPERVISED_ENV "HCAGENT_SUPERVISED" /* set by a daemon-mode worker for what it execs */
#define TRIAL_TIMEOUT_MS 10000              /* `NEW version` must answer within */
#define CONFIRM_TIMEOUT_MS_DEFAULT 30000
#define CONFIRM_TIMEOUT_MS_MAX 600000
#define EXEC_DELAY_MS 200 /* the activation's answer leaves before the agent stops */

/* ---------------------------------------------------------------- identity */

static char reported_version[65] = HC_VERSION;
static int reported_api = HC_AGENT_API_VERSION;

void hc_agent_identity_init(void)
{
    const char *v = getenv("HCAGENT_TEST_VERSION"), *api = getenv("HCAGENT_TEST_API_VERSION");
    if (v && hc_bundle_version_valid(v))
        snprintf(reported_version, sizeof(reported_version), "%s", v);
    if (api && *api) {
        char *end;
        long n = strtol(api, &end, 10);
        if (!*end && n >= 0 && n <= 1000)
            reported_api = (int)n;
    }
}

const char *hc_agent_version(void)
{
    return reported_version;
}

int hc_agent_api_version(void)
{
    return reported_api;
}

/* ---------------------------------------------------------------- how to start an agent */

static struct {
    const char *data_dir, *log_level, *max_connections, *request_deadline;
    int supervised;
    char exec_path[PATH_MAX]; /* the program an activation asked for, "" when none */
    char dir[PATH_MAX];       /* DIR/agent, absolute */
} run_args;

void hc_agent_upgrade_set_args(const char *data_dir, const char *log_level,
                               const char *max_connections, const char *request_deadline,
                               int supervised)
{
    char abs[PATH_MAX];
    run_args.data_dir = data_dir;
    run_args.log_level = log_level;
    run_args.max_connections = max_connections;
    run_args.request_deadline = request_deadline;
    /* systemd sets INVOCATION_ID for the processes of a unit; a daemon-mode worker marks
     * itself, so that the agent it execs (started without --daemon) knows it too */
    run_args.supervised =
        supervised || getenv("INVOCATION_ID") != NULL || getenv(SUPERVISED_ENV) != NULL;
    if (supervised)
        setenv(SUPERVISED_ENV, "1", 1);
    snprintf(run_args.dir, sizeof(run_args.dir), "%s/%s", realpath(data_dir, abs) ? abs : data_dir,
             AGENT_DIR);
}

/* Execs program as `program run --data-dir DIR ...` with the options this agent got; returns
 * only when exec failed (errno set). The test knobs go along when the program is started as
 * the current agent at start (launch: the same agent, run from where its upgrade put it), not
 * to another version (upgrade, rollback): that one reports what it is. */
static void exec_agent(const char *program, int keep_knobs)
{
    if (!keep_knobs) {
        unsetenv("HCAGENT_TEST_VERSION");
        unsetenv("HCAGENT_TEST_API_VERSION");
    }
    const char *argv[12];
    int n = 0;
    argv[n++] = program;
    argv[n++] = "run";
    argv[n++] = "--data-dir";
    argv[n++] = run_args.data_dir;
    if (run_args.log_level) {
        argv[n++] = "--log-level";
        argv[n++] = run_args.log_level;
    }
    if (run_args.max_connections) {
        argv[n++] = "--max-connections";
        argv[n++] = run_args.max_connections;
    }
    if (run_args.request_deadline) {
        argv[n++] = "--request-deadline";
        argv[n++] = run_args.request_deadline;
    }
    argv[n] = NULL;
    setenv(LAUNCHED_ENV, "1", 1);
    execv(program, (char *const *)argv);
    int saved = errno;
    unsetenv(LAUNCHED_ENV);
    errno = saved;
}

/* The agent program of staged version (DIR/agent/VERSION/ENTRYPOINT) into out, with its
 * manifest checked to be an agent bundle's. 0 or -1 with err (404 not staged). */
static int program_of(const char *version, char *out, size_t len, struct hc_error *err)
{
    char path[PATH_MAX + 64], *text = NULL;
    size_t n;
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", run_args.dir, version);
    if (!hc_bundle_version_valid(version) || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        hc_error_set(err, HC_E(NOT_STAGED), "agent version '%s' is not staged on this node",
                     version);
        return hc_error_hint(err, "stage it first (POST /v1/agent/stage)");
    }
    snprintf(path, sizeof(path), "%s/%s/%s", run_args.dir, version, HC_BUNDLE_MANIFEST);
    if (hc_file_read(path, &text, &n, err) < 0)
        return -1;
    json_t *m = hc_json_parse_object(text, n, err);
    free(text);
    int rc = -1;
    if (!m || hc_bundle_manifest_check(m, err) < 0)
        hc_error_prefix(err, "staged agent version %s", version);
    else if (strcmp(hc_bundle_kind(m), HC_BUNDLE_KIND_AGENT) != 0)
        hc_error_set(err, HC_E(BUNDLE_KIND), "staged version %s is not an agent bundle", version);
    else if (snprintf(out, len, "%s/%s/%s", run_args.dir, version,
                      hc_json_str(m, "entrypoint", "")) >= (int)len)
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "agent program path too long");
    else
        rc = 0;
    json_decref(m);
    return rc;
}

/* The version DIR/agent/current names, "" when none. */
static void current_version(char out[65])
{
    char path[PATH_MAX + 16], target[128];
    snprintf(path, sizeof(path), "%s/current", run_args.dir);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    out[0] = '\0';
    if (n > 0) {
        target[n] = '\0';
        if (hc_bundle_version_valid(target))
            snprintf(out, 65, "%s", target);
    }
}

/* Points DIR/agent/current at version, or removes it (NULL: the installed program). */
static int set_current(const char *version, struct hc_error *err)
{
    char path[PATH_MAX + 16], tmp[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/current", run_args.dir);
    snprintf(tmp, sizeof(tmp), "%s/.current.tmp", run_args.dir);
    if (!version) {
        if (unlink(path) < 0 && errno != ENOENT)
            return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", path, strerror(errno));
    } else {
        unlink(tmp);
        if (symlink(version, tmp) < 0 || rename(tmp, path) < 0)
            return hc_error_set(err, HC_E(IO), "cannot point '%s' at %s: %s", path, version,
                                strerror(errno));
    }
    hc_dir_sync(run_args.dir);
    return 0;
}

void hc_agent_upgrade_launch(const char *data_dir)
{
    char version[65], program[PATH_MAX + 200], self[PATH_MAX];
    struct hc_error err = {0};
    (void)data_dir;
    if (getenv(LAUNCHED_ENV)) {
        unsetenv(LAUNCHED_ENV); /* started as the current program: run */
        return;
    }
    current_version(version);
    if (!version[0])
        return;
    if (program_of(version, program, sizeof(program), &err) < 0) {
        HC_ERROR("agent %s named by %s/current cannot run: %s; running %s instead", version,
                 run_args.dir, err.message, hc_agent_version());
        return;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0 && (self[n] = '\0', !strcmp(self, program)))
        return;
    HC_INFO("agent %s is current here (%s): starting it", version, program);
    exec_agent(program, 1);
    HC_ERROR("cannot run agent %s (%s): %s; running %s instead", version, program, strerror(errno),
             hc_agent_version());
}

/* ---------------------------------------------------------------- upgrade.json */

static json_t *record_read(void)
{
    char path[PATH_MAX + 32], *text = NULL;
    size_t n;
    struct hc_error err = {0};
    snprintf(path, sizeof(path), "%s/%s", run_args.dir, UPGRADE_FILE);
    if (hc_file_read(path, &text, &n, &err) < 0)
        return NULL;
    json_t *doc = hc_json_parse_object(text, n, &err);
    free(text);
    return doc;
}

static int record_write(const json_t *doc, struct hc_error *err)
{
    char path[PATH_MAX + 32];
    char *text = hc_json_dump(doc);
    snprintf(path, sizeof(path), "%s/%s", run_args.dir, UPGRADE_FILE);
    int rc = text ? hc_file_write_atomic(path, text, strlen(text), 0644, err)
                  : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(text);
    return rc;
}

/* Ends the recorded upgrade as state with reason; 0 or -1 with err. */
static int record_end(json_t *doc, const char *state, const char *reason, struct hc_error *err)
{
    json_object_set_new(doc, "state", json_string(state));
    json_object_set_new(doc, "ended_ms", json_integer((json_int_t)hc_now_ms()));
    if (reason)
        json_object_set_new(doc, "reason", json_string(reason));
    return record_write(doc, err);
}

void hc_agent_upgrade_confirm(const char *data_dir)
{
    (void)data_dir;
    json_t *doc = record_read();
    struct hc_error err = {0};
    const char *state = hc_json_str(doc, "state", "");
    const char *to = hc_json_str(doc, "to_version", "");
    if (!doc || strcmp(state, "pending") != 0) {
        json_decref(doc);
        return;
    }
    if (!strcmp(to, hc_agent_version())) {
        if (record_end(doc, "confirmed", NULL, &err) < 0)
            HC_ERROR("cannot confirm the agent upgrade: %s", err.message);
        else
            HC_INFO("agent upgrade from %s to %s confirmed", hc_json_str(doc, "from_version", "?"),
                    to);
    } else if (hc_now_ms() > hc_json_int(doc, "deadline_ms", 0) + 5000) {
        /* No guardian ended it: the node restarted meanwhile. */
        record_end(doc, "rolled_back", "found unconfirmed at agent start", &err);
        HC_WARN("the agent upgrade to %s was not confirmed: this agent is %s", to,
                hc_agent_version());
    }
    json_decref(doc);
}

void hc_agent_upgrade_status(const char *data_dir, json_t *status)
{
    (void)data_dir;
    json_object_set_new(status, "agent_version", json_string(hc_agent_version()));
    json_object_set_new(status, "api_version", json_integer(hc_agent_api_version()));
    json_t *doc = record_read();
    json_object_set_new(status, "agent_upgrade", doc ? doc : json_null());
}

/* ---------------------------------------------------------------- the guardian */

/* Alive and not a zombie. */
static int pid_alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* Puts the previous agent back: current, the record, the new agent killed if it hangs, then the
 * previous program started unless a supervisor does that. Never returns. */
static void guardian_rollback(pid_t agent, const char *reason)
{
    struct hc_error err = {0};
    json_t *doc = record_read();
    const char *from = hc_json_str(doc, "from_version", "");
    const char *from_link = hc_json_str(doc, "from_link", "");
    HC_WARN("agent upgrade guardian: %s; rolling back to agent %s", reason, from);
    if (set_current(from_link[0] ? from_link : NULL, &err) < 0 ||
        (doc && record_end(doc, "rolled_back", reason, &err) < 0))
        HC_ERROR("agent upgrade guardian: %s", err.message);
    if (pid_alive(agent)) {
        kill(agent, SIGKILL);
        for (int i = 0; i < 100 && pid_alive(agent); i++)
            hc_sleep_ms(50);
    }
    char program[PATH_MAX];
    snprintf(program, sizeof(program), "%s", hc_json_str(doc, "from_exe", ""));
    json_decref(doc);
    if (run_args.supervised || !program[0])
        _exit(0); /* systemd or the daemon supervisor starts the agent again: the previous one */
    exec_agent(program, 0);
    HC_ERROR("agent upgrade guardian: cannot start %s: %s", program, strerror(errno));
    _exit(1);
}

/* Watches the agent (pid) until its upgrade is confirmed, it dies, or the deadline passes. */
static void guardian(pid_t agent, int64_t deadline_ms)
{
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    setsid();
    for (;;) {
        json_t *doc = record_read();
        int confirmed = !strcmp(hc_json_str(doc, "state", ""), "confirmed");
        json_decref(doc);
        if (confirmed)
            _exit(0);
        if (!pid_alive(agent))
            guardian_rollback(agent, "the new agent exited before it served");
        if (hc_now_ms() > deadline_ms)
            guardian_rollback(agent, "the new agent did not confirm in time");
        hc_sleep_ms(100);
    }
}

int hc_agent_upgrade_exec(void)
{
    if (!run_args.exec_path[0])
        return 0;
    json_t *doc = record_read();
    int64_t deadline = hc_json_int(doc, "deadline_ms", hc_now_ms() + CONFIRM_TIMEOUT_MS_DEFAULT);
    json_decref(doc);
    pid_t agent = getpid(), child = fork();
    if (child == 0) {
        if (fork() == 0)
            guardian(agent, deadline); /* the grandchild: not our zombie to reap */
        _exit(0);
    }
    if (child > 0)
        waitpid(child, NULL, 0);
    else
        HC_ERROR("cannot fork the agent upgrade guardian: %s", strerror(errno));
    HC_INFO("starting agent program %s", run_args.exec_path);
    exec_agent(run_args.exec_path, 0);
    HC_ERROR("cannot start %s: %s", run_args.exec_path, strerror(errno));
    return -1; /* the guardian sees this agent keep running unconfirmed and restarts it */
}

/* ---------------------------------------------------------------- routes */

struct activate {
    struct hc_agent_software *sw;
    struct hc_deferred *d;
    char version[65], program[PATH_MAX + 200];
    int64_t confirm_ms;
    /* the trial's result */
    int failed;
    char output[256];
};

static int activation_running; /* one at a time, and none once an exec is pending */

/* Runs `program version` (a job): it must print "hcagent VERSION". */
static void trial_work(void *arg)
{
    struct activate *a = arg;
    int fds[2];
    a->failed = 1;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(a->output, sizeof(a->output), "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execl(a->program, a->program, "version", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    int64_t end = hc_mono_ms() + TRIAL_TIMEOUT_MS;
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    while (pid > 0 && got < sizeof(a->output) - 1 && hc_mono_ms() < end &&
           poll(&p, 1, (int)(end - hc_mono_ms())) > 0) {
        ssize_t n = read(fds[0], a->output + got, sizeof(a->output) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    a->output[got] = '\0';
    close(fds[0]);
    int status = 0;
    pid_t r = 0;
    while (pid > 0 && (r = waitpid(pid, &status, WNOHANG)) == 0 && hc_mono_ms() < end)
        hc_sleep_ms(10);
    if (pid > 0 && r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        snprintf(a->output, sizeof(a->output), "no answer within %d s", TRIAL_TIMEOUT_MS / 1000);
        return;
    }
    char want[96];
    snprintf(want, sizeof(want), "hcagent %s\n", a->version);
    a->output[strcspn(a->output, "\n") + (a->output[strcspn(a->output, "\n")] ? 1 : 0)] = '\0';
    a->failed =
        pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || strcmp(a->output, want) != 0;
    if (a->failed && pid > 0) {
        char said[256];
        snprintf(said, sizeof(said), "%s", a->output);
        said[strcspn(said, "\n")] = '\0';
        hc_text_clean(a->output, sizeof(a->output), said);
        if (WIFEXITED(status) && WEXITSTATUS(status))
            snprintf(said, sizeof(said), "exit %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
            snprintf(said, sizeof(said), "signal %d", WTERMSIG(status));
        else
            snprintf(said, sizeof(said), "printed '%.180s'", a->output);
        snprintf(a->output, sizeof(a->output), "%s", said);
    }
}

static void exec_soon(evutil_socket_t fd, short what, void *arg)
{
    HC_INFO("stopping to start agent program %s", run_args.exec_path);
    event_base_loopexit(arg, NULL);
}

/* The trial passed: record, switch current, answer, then stop serving (main execs). */
static int activate_commit(struct activate *a, struct hc_error *err)
{
    char from_link[65], self[PATH_MAX], from_exe[PATH_MAX + 200];
    current_version(from_link);
    if (from_link[0]) {
        if (program_of(from_link, from_exe, sizeof(from_exe), err) < 0)
            return -1;
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return hc_error_set(err, HC_E(IO), "cannot read /proc/self/exe: %s", strerror(errno));
        self[n] = '\0';
        snprintf(from_exe, sizeof(from_exe), "%s", self);
    }
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "from_version", hc_agent_version(),
                  "from_link", from_link, "from_exe", from_exe, "to_version", a->version, "to_exe",
                  a->program, "state", "pending", "started_ms", (json_int_t)hc_now_ms(),
                  "deadline_ms", (json_int_t)(hc_now_ms() + a->confirm_ms));
    int rc = record_write(doc, err) < 0 || set_current(a->version, err) < 0 ? -1 : 0;
    json_decref(doc);
    if (rc == 0)
        snprintf(run_args.exec_path, sizeof(run_args.exec_path), "%s", a->program);
    return rc;
}

static void trial_done(void *arg)
{
    struct activate *a = arg;
    struct hc_error err = {0};
    if (a->failed) {
        hc_error_set(&err, HC_E(AGENT_START_FAILED),
                     "agent %s does not start on node %s: '%s version' gave %s; still running %s",
                     a->version, a->sw->cfg.name, a->program, a->output, hc_agent_version());
        hc_error_hint(&err, "the bundle's program must run on this node and print 'hcagent %s'",
                      a->version);
        HC_WARN("%s", err.message);
        hc_deferred_reply_error(a->d, &err);
        activation_running = 0;
    } else if (activate_commit(a, &err) < 0) {
        hc_deferred_reply_error(a->d, &err);
        activation_running = 0;
    } else {
        HC_INFO("agent %s activated: %s restarts as it", a->version, hc_agent_version());
        hc_deferred_reply_json(a->d, 200,
                               json_pack("{s:s, s:s, s:b, s:I}", "from_version", hc_agent_version(),
                                         "to_version", a->version, "restarting", 1,
                                         "confirm_timeout_ms", (json_int_t)a->confirm_ms));
        struct timeval tv = {0, EXEC_DELAY_MS * 1000};
        event_base_once(a->sw->base, -1, EV_TIMEOUT, exec_soon, a->sw->base, &tv);
    }
    free(a);
}

static int activate_parse(struct activate *a, const json_t *body, struct hc_error *err)
{
    const char *version = hc_json_req_str(body, "version", err);
    const json_t *t = json_object_get(body, "confirm_timeout_ms");
    if (!version)
        return -1;
    if (!hc_bundle_version_valid(version))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid version");
    if (t && (!json_is_integer(t) || json_integer_value(t) < 1000 ||
              json_integer_value(t) > CONFIRM_TIMEOUT_MS_MAX))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "confirm_timeout_ms must be an integer from 1000 to %d",
                            CONFIRM_TIMEOUT_MS_MAX);
    snprintf(a->version, sizeof(a->version), "%s", version);
    a->confirm_ms = t ? (int64_t)json_integer_value(t) : CONFIRM_TIMEOUT_MS_DEFAULT;
    return program_of(version, a->program, sizeof(a->program), err);
}

static void activate_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    struct activate *a = calloc(1, sizeof(*a));
    if (!a) {
        hc_error_set(&err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    a->sw = sw;
    const char *version = hc_json_str(body, "version", "");
    if (!strcmp(version, hc_agent_version())) { /* a re-run after the exec: done already */
        hc_reply_json(req, 200,
                      json_pack("{s:s, s:s, s:b}", "from_version", version, "to_version", version,
                                "restarting", 0));
        free(a);
        return;
    }
    if (activate_parse(a, body, &err) < 0)
        goto fail;
    if (activation_running || run_args.exec_path[0]) {
        hc_error_set(&err, HC_E(CONFLICT), "an agent activation is already in progress");
        goto fail;
    }
    if (sw->action || sw->staging[0]) { /* the agent stops half-way through neither */
        hc_error_set(&err, HC_E(CONFLICT), "the agent is busy: a %s is in progress",
                     sw->action ? "service stop, start or activation" : "stage");
        hc_error_hint(&err, "try again once it has finished");
        goto fail;
    }
    if (!(a->d = hc_req_defer(req)) ||
        hc_jobs_start(sw->jobs, trial_work, trial_done, a, &err) < 0) {
        if (!err.code[0])
            hc_error_set(&err, HC_E(INTERNAL), "cannot defer the reply");
        if (a->d) {
            hc_deferred_reply_error(a->d, &err);
            free(a);
            return;
        }
        goto fail;
    }
    activation_running = 1;
    HC_INFO("activating agent %s: trying '%s version'", a->version, a->program);
    return;
fail:
    hc_reply_error(req, &err);
    free(a);
}

static void stage_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    if (hc_mkdir_p(run_args.dir, 0755, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    hc_agent_sw_stage_start(req, sw, run_args.dir, HC_BUNDLE_KIND_AGENT);
}

static void agent_get(struct hc_request *req, void *arg)
{
    char current[65];
    (void)arg;
    current_version(current);
    json_t *body = json_pack("{s:s, s:i, s:s?, s:i}", "agent_version", hc_agent_version(),
                             "api_version", hc_agent_api_version(), "current",
                             current[0] ? current : NULL, "pid", (int)getpid());
    json_t *doc = record_read();
    json_object_set_new(body, "upgrade", doc ? doc : json_null());
    hc_reply_json(req, 200, body);
}

int hc_agent_upgrade_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                            struct hc_error *err)
{
    if (!run_args.dir[0]) /* an agent not started by main (hchollow, unit tests) */
        snprintf(run_args.dir, sizeof(run_args.dir), "%s/%s", sw->data_dir, AGENT_DIR);
    if (hc_http_server_route(srv, "GET", "/v1/agent", 0, agent_get, sw) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/agent/stage", 0, stage_route, sw) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/agent/activate", 0, activate_route, sw) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot register the /v1/agent routes");
    return 0;
}
