/*
 * The manifest's hooks (docs/bundles.md "Hooks"): an HTTP request to the local service
 * (libcurl, plain http, with the hook's timeout) or a command run from the bundle directory
 * with the hook's timeout (its process group is killed when it runs over), as the service's
 * user with no capability (agents/hcagent/privilege.c). The answer is read the same way for both: a
 * JSON object with the hook's field when there is one ("ok_to_stop", "pending"), otherwise the
 * HTTP status (2xx) or the exit status (0).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/hcagent/privilege.h"
#include "agents/hcagent/service.h"
#include "common/json_util.h"
#include "common/util.h"

#define HOOK_DEFAULT_TIMEOUT_MS 5000
#define DRAIN_DEFAULT_TIMEOUT_MS 30000
#define OUTPUT_MAX 4096

extern char **environ;

/* ---------------------------------------------------------------- environment */

char *hc_service_expand(const char *text, const struct hc_service_env *env)
{
    static const char *const names[] = {"{node}",     "{service_host}", "{storage_host}",
                                        "{data_dir}", "{version}",      "{bundle_dir}"};
    const char *values[] = {env->node,     env->service_host, env->storage_host,
                            env->data_dir, env->version,      env->bundle_dir};
    size_t cap = strlen(text) + 1, len = 0;
    for (size_t i = 0; i < HC_ARRAY_LEN(values); i++)
        for (const char *p = text; (p = strstr(p, names[i])); p++)
            cap += strlen(values[i]);
    char *out = malloc(cap);
    if (!out)
        return NULL;
    while (*text) {
        size_t i = 0;
        while (i < HC_ARRAY_LEN(names) && strncmp(text, names[i], strlen(names[i])) != 0)
            i++;
        if (i < HC_ARRAY_LEN(names)) {
            memcpy(out + len, values[i], strlen(values[i]));
            len += strlen(values[i]);
            text += strlen(names[i]);
        } else {
            out[len++] = *text++;
        }
    }
    out[len] = '\0';
    return out;
}

/* 1 when a string of v (a string, or the strings of an array or an object, any depth) contains
 * needle. */
static int json_mentions(const json_t *v, const char *needle)
{
    size_t i;
    const char *key;
    const json_t *it;
    if (json_is_string(v))
        return strstr(json_string_value(v), needle) != NULL;
    json_array_foreach(v, i, it)
    {
        if (json_mentions(it, needle))
            return 1;
    }
    json_object_foreach((json_t *)v, key, it)
    {
        if (json_mentions(it, needle))
            return 1;
    }
    return 0;
}

/* -1 with err when v refers to {storage_host} and env has no storage address. */
static int refuse_storage_host(const json_t *v, const struct hc_service_env *env,
                               struct hc_error *err)
{
    if (env->storage_host[0] || !json_mentions(v, "{storage_host}"))
        return 0;
    hc_error_set(err, HC_E(PRECONDITION_FAILED), "%s: the service serves on {storage_host}",
                 env->storage_problem[0] ? env->storage_problem : "no storage address is known");
    return hc_error_hint(err, "give the storage interface an IPv4 address (ip addr add ADDR/LEN "
                              "dev IFACE), then start the service again");
}

int hc_service_env_check(const json_t *manifest, const struct hc_service_env *env,
                         struct hc_error *err)
{
    /* The manifest's members placeholders are expanded in (docs/bundles.md "Placeholders"). */
    static const char *const members[] = {"args",  "health",        "ok_to_stop",
                                          "drain", "resync_status", "reload"};
    for (size_t i = 0; i < HC_ARRAY_LEN(members); i++)
        if (refuse_storage_host(json_object_get(manifest, members[i]), env, err) < 0)
            return -1;
    return 0;
}

char **hc_service_environ(const struct hc_service_env *env)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **out = calloc(n + 8, sizeof(*out));
    if (!out)
        return NULL;
    size_t k = 0;
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "HC_", 3) != 0)
            failed |= !(out[k++] = strdup(environ[i]));
    const char *const keys[] = {"HC_NODE_NAME",    "HC_SERVICE_VERSION", "HC_SERVICE_DATA_DIR",
                                "HC_SERVICE_HOST", "HC_STORAGE_HOST",    "HC_BUNDLE_DIR",
                                "HC_STOP_SET"};
    const char *values[] = {env->node,         env->version,    env->data_dir, env->service_host,
                            env->storage_host, env->bundle_dir, env->stop_set};
    for (size_t i = 0; i < HC_ARRAY_LEN(keys); i++)
        if (asprintf(&out[k++], "%s=%s", keys[i], values[i]) < 0) {
            out[k - 1] = NULL;
            failed = 1;
        }
    if (failed) {
        for (size_t i = 0; i < k; i++)
            free(out[i]);
        free(out);
        return NULL;
    }
    return out;
}

void hc_service_env_free(char **envp)
{
    for (size_t i = 0; envp && envp[i]; i++)
        free(envp[i]);
    free(envp);
}

/* ---------------------------------------------------------------- reading answers */

static const char *kind_field(enum hc_hook_kind kind)
{
    switch (kind) {
    case HC_HOOK_OK_TO_STOP:
        return "ok_to_stop";
    case HC_HOOK_RESYNC:
        return "pending";
    default:
        return NULL;
    }
}

/* The first line of text, trimmed, as detail. */
static void first_line(char *detail, size_t len, const char *text)
{
    while (*text == ' ' || *text == '\n' || *text == '\r' || *text == '\t')
        text++;
    snprintf(detail, len, "%.*s", (int)strcspn(text, "\r\n"), text);
}

/* Interprets an answer: ok says whether status alone counts as success. */
static void read_answer(enum hc_hook_kind kind, int ok, const char *out, struct hc_hook_result *res)
{
    json_t *doc = json_loads(out, 0, NULL);
    const char *field = kind_field(kind);
    const json_t *v = field ? json_object_get(doc, field) : NULL;
    const char *reason = hc_json_str(doc, "reason", hc_json_str(doc, "detail", NULL));
    res->ok = ok;
    if (kind == HC_HOOK_OK_TO_STOP && json_is_boolean(v))
        res->ok = ok && json_is_true(v);
    if (kind == HC_HOOK_OK_TO_STOP) {
        res->set_answered = json_is_array(json_object_get(doc, "nodes"));
        res->set_blocks = json_is_integer(json_object_get(doc, "set_blocks"))
                              ? json_integer_value(json_object_get(doc, "set_blocks"))
                              : -1;
    }
    if (kind == HC_HOOK_RESYNC) {
        char *end = NULL;
        long long n = strtoll(out, &end, 10);
        if (json_is_integer(v))
            res->pending = json_integer_value(v);
        else if (end != out && (*end == '\0' || *end == '\n'))
            res->pending = n;
        else if (ok)
            snprintf(res->detail, sizeof(res->detail), "resync hook answered no pending count");
        res->ok = ok && (json_is_integer(v) || (end != out && (*end == '\0' || *end == '\n')));
    }
    if (reason)
        snprintf(res->detail, sizeof(res->detail), "%s", reason);
    else if (!res->detail[0] && !json_is_object(doc))
        first_line(res->detail, sizeof(res->detail), out);
    json_decref(doc);
}

/* ---------------------------------------------------------------- http */

struct body {
    char buf[OUTPUT_MAX];
    size_t len;
};

static size_t body_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct body *b = arg;
    size_t n = size * nmemb, room = sizeof(b->buf) - 1 - b->len;
    memcpy(b->buf + b->len, data, n < room ? n : room);
    b->len += n < room ? n : room;
    b->buf[b->len] = '\0';
    return n;
}

static void hook_http(enum hc_hook_kind kind, const char *url, long timeout_ms,
                      struct hc_hook_result *res)
{
    struct body b = {.len = 0};
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(res->detail, sizeof(res->detail), "cannot create an http request");
        return;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (kind == HC_HOOK_DRAIN || kind == HC_HOOK_RELOAD) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        snprintf(res->detail, sizeof(res->detail), "no answer from %s: %s", url,
                 errbuf[0] ? errbuf : curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->status);
        read_answer(kind, res->status >= 200 && res->status < 300, b.buf, res);
        if (!res->ok && !res->detail[0])
            snprintf(res->detail, sizeof(res->detail), "%s answered HTTP %ld", url, res->status);
    }
    curl_easy_cleanup(c);
}

/* ---------------------------------------------------------------- commands */

/* argv of the command, expanded; a relative program is taken from the bundle directory. */
static char **command_argv(const json_t *cmd, const struct hc_service_env *env)
{
    size_t n = json_array_size(cmd);
    char **argv = calloc(n + 1, sizeof(*argv));
    for (size_t i = 0; argv && i < n; i++) {
        char *arg = hc_service_expand(json_string_value(json_array_get(cmd, i)), env);
        if (i == 0 && arg && arg[0] != '/') {
            char *full = hc_path_join(env->bundle_dir, arg);
            free(arg);
            arg = full;
        }
        if (!(argv[i] = arg)) {
            hc_service_env_free(argv);
            return NULL;
        }
    }
    return argv;
}

/* Reads the child's output until it closes it or the deadline passes. Returns 0 on time. */
static int collect(int fd, int64_t deadline, struct body *b)
{
    for (;;) {
        int64_t left = deadline - hc_mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        char buf[1024];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        body_write(buf, 1, (size_t)n, b);
    }
}

/* The command runs as the service does (service.c): its user, no capability, no_new_privs. */
static pid_t spawn_command(char **argv, char **envp, const char *dir, int out,
                           const struct hc_service_user *user)
{
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        if (hc_privilege_drop_child(user) < 0 || chdir(dir) < 0 || dup2(devnull, 0) < 0 ||
            dup2(out, 1) < 0 || dup2(out, 2) < 0 || close_range(3, ~0U, 0) < 0)
            _exit(126);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    if (devnull >= 0)
        close(devnull);
    return pid;
}

static void hook_command(enum hc_hook_kind kind, const json_t *cmd, long timeout_ms,
                         const struct hc_service_env *env, struct hc_hook_result *res)
{
    char **argv = command_argv(cmd, env), **envp = hc_service_environ(env);
    int fds[2] = {-1, -1}, status = 0;
    struct body b = {.len = 0};
    struct hc_service_user user;
    struct hc_error uerr = {0};
    if (hc_privilege_service_user(&user, &uerr) < 0) {
        snprintf(res->detail, sizeof(res->detail), "cannot run hook: %s", uerr.message);
        goto cleanup;
    }
    if (!argv || !envp || pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(res->detail, sizeof(res->detail), "cannot run hook: %s", strerror(errno));
        goto cleanup;
    }
    pid_t pid = spawn_command(argv, envp, env->bundle_dir, fds[1], &user);
    close(fds[1]);
    fds[1] = -1;
    if (pid < 0) {
        snprintf(res->detail, sizeof(res->detail), "cannot run '%s': %s", argv[0], strerror(errno));
        goto cleanup;
    }
    int on_time = collect(fds[0], hc_mono_ms() + timeout_ms, &b) == 0;
    if (!on_time)
        kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!on_time) {
        snprintf(res->detail, sizeof(res->detail), "'%s' did not finish within %ld ms", argv[0],
                 timeout_ms);
        goto cleanup;
    }
    res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    read_answer(kind, res->status == 0, b.buf, res);
    if (!res->ok && !res->detail[0])
        snprintf(res->detail, sizeof(res->detail), "'%s' exited with status %ld", argv[0],
                 res->status);
cleanup:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    hc_service_env_free(argv);
    hc_service_env_free(envp);
}

void hc_hook_run(enum hc_hook_kind kind, const json_t *hook, const struct hc_service_env *env,
                 struct hc_hook_result *res)
{
    memset(res, 0, sizeof(*res));
    res->status = -1;
    if (!json_is_object(hook))
        return;
    res->defined = 1;
    /* A hook toward {storage_host} on a node with no storage address would ask "http://:PORT":
     * the answer is the reason instead. */
    struct hc_error why = {0};
    if (refuse_storage_host(hook, env, &why) < 0) {
        snprintf(res->detail, sizeof(res->detail), "%s", why.message);
        return;
    }
    long timeout = (long)hc_json_int(hook, "timeout_ms",
                                     kind == HC_HOOK_DRAIN ? DRAIN_DEFAULT_TIMEOUT_MS
                                                           : HOOK_DEFAULT_TIMEOUT_MS);
    const char *http = hc_json_str(hook, "http", NULL);
    if (!http) {
        hook_command(kind, json_object_get(hook, "command"), timeout, env, res);
        return;
    }
    char *url = hc_service_expand(http, env), *full = NULL;
    /* the set travels as a query (names are [a-z0-9._-] and commas: nothing to escape) */
    if (url && kind == HC_HOOK_OK_TO_STOP && env->stop_set[0] &&
        asprintf(&full, "%s%cnodes=%s", url, strchr(url, '?') ? '&' : '?', env->stop_set) >= 0) {
        free(url);
        url = full;
    }
    if (url)
        hook_http(kind, url, timeout, res);
    else
        snprintf(res->detail, sizeof(res->detail), "out of memory");
    free(url);
}
