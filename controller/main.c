/*
 * hcctld: the controller daemon. `init` sets up a data directory, `token create` mints API
 * tokens, `run` serves the API and runs the poller and the operation workers until SIGTERM or
 * SIGINT, `version` prints the version. Exit codes: 0 ok, 1 failed, 2 usage.
 */
#include <event2/event.h>
#include <event2/thread.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/https_server.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/controller.h"
#include "controller/state/events.h"
#include "controller/init.h"
#include "controller/ops/ops.h"
#include "controller/remote/poller.h"
#include "db/db.h"

#define EXIT_USAGE 2
#define MAX_SANS 16
#define MAX_TRUST_KEYS 16
#define AGENT_TIMEOUT_MAX_MS 5000
#define AGENT_TIMEOUT_MIN_MS 500
/* API connections at once (docs/hcctld.md "Connection limits"): admins, agents enrolling and
 * fetching bundles, Prometheus; well under the unit's LimitNOFILE=16384. */
#define API_MAX_CONNECTIONS 512
#define API_MAX_CONNECTIONS_MAX 65536

static void usage(FILE *out)
{
    fputs("usage: hcctld init --data-dir DIR [--listen ADDR:PORT] [--advertise ADDR:PORT]\n"
          "                   [--san NAME]...\n"
          "                   [--cluster-name NAME] [--cli-config PATH] [--force]\n"
          "                   [--trust-key FILE]...  (Ed25519 public keys that sign bundles)\n"
          "                   [--admin-token-ttl DUR]  (default: the admin token never expires)\n"
          "       hcctld token create --data-dir DIR --name NAME [--role admin|readonly]\n"
          "                   [--ttl DUR]\n"
          "       hcctld run --data-dir DIR [--listen ADDR:PORT] [--advertise ADDR:PORT]\n"
          "                   [--poll-interval DUR]\n"
          "                   [--workers N] [--log-level debug|info|warn|error]\n"
          "                   [--max-connections N] [--request-deadline DUR]\n"
          "       hcctld version\n",
          out);
}

/* Prints err; exit 2 when the command line was at fault (a bad value: 400), else 1. */
static int fail(const struct hc_error *err)
{
    fprintf(stderr, "hcctld: %s\n", err->message);
    if (err->hint[0])
        fprintf(stderr, "hint: %s\n", err->hint);
    return err->status == 400 ? EXIT_USAGE : 1;
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hcctld: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    return EXIT_USAGE;
}

static int cmd_init(int argc, char **argv)
{
    static const struct option opts[] = {{"data-dir", required_argument, NULL, 'd'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"advertise", required_argument, NULL, 'a'},
                                         {"san", required_argument, NULL, 's'},
                                         {"cluster-name", required_argument, NULL, 'n'},
                                         {"cli-config", required_argument, NULL, 'c'},
                                         {"force", no_argument, NULL, 'f'},
                                         {"trust-key", required_argument, NULL, 'k'},
                                         {"admin-token-ttl", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sans[MAX_SANS], *keys[MAX_TRUST_KEYS];
    struct hc_init_options o = {.sans = sans, .trust_keys = keys};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o.data_dir = optarg;
            break;
        case 'l':
            o.listen = optarg;
            break;
        case 'a':
            o.advertise = optarg;
            break;
        case 'n':
            o.cluster_name = optarg;
            break;
        case 'c':
            o.cli_config = optarg;
            break;
        case 'f':
            o.force = 1;
            break;
        case 's':
            if (o.nsans == MAX_SANS)
                return usage_error("too many --san values (max %d)", MAX_SANS);
            sans[o.nsans++] = optarg;
            break;
        case 'k':
            if (o.ntrust_keys == MAX_TRUST_KEYS)
                return usage_error("too many --trust-key values (max %d)", MAX_TRUST_KEYS);
            keys[o.ntrust_keys++] = optarg;
            break;
        case 't': {
            struct hc_error terr = {0};
            if (hc_duration_parse(optarg, &o.admin_token_ttl_ms, &terr) < 0 ||
                o.admin_token_ttl_ms < 1000)
                return usage_error("invalid --admin-token-ttl '%s'", optarg);
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            return usage_error("invalid option");
        }
    }
    if (optind != argc || !o.data_dir)
        return usage_error("init needs --data-dir DIR and no other arguments");
    struct hc_init_result res;
    struct hc_error err = {0};
    if (hc_init_run(&o, &res, &err) < 0)
        return fail(&err);
    printf("admin token: %s\n", res.admin_token);
    printf("data dir: %s\n", o.data_dir);
    printf("cli config: %s\n", res.cli_config);
    if (res.cli_config_kept)
        fprintf(stderr, "hcctld: the CLI config that was there is kept as %s.bak\n",
                res.cli_config);
    printf("controller: %s\n", res.controller_url);
    printf("cluster id: %s\n", res.cluster_id);
    printf("ca fingerprint: %s\n", res.ca_fingerprint);
    printf("ssh public key: %s/ssh/id_ed25519.pub\n", o.data_dir);
    printf("trusted bundle keys: %zu\n", o.ntrust_keys);
    fprintf(stderr, "the admin token is shown once; it is also in %s/admin.token\n", o.data_dir);
    return 0;
}

/* Creates the token and its event in one transaction. */
static int token_create(const char *data_dir, const char *name, const char *role, int64_t ttl_ms,
                        char text[HC_AUTH_TOKEN_TEXT_MAX], struct hc_error *err)
{
    struct hc_controller ctl = {0};
    if (hc_controller_load(&ctl, data_dir, err) < 0)
        return -1;
    struct hc_db *db = hc_db_open(ctl.db_path, err);
    if (!db)
        return -1;
    int rc = -1;
    if (hc_db_begin(db, err) < 0)
        goto cleanup;
    if (hc_auth_token_create(db, name, role, ttl_ms ? hc_now_ms() + ttl_ms : 0, text, err) < 0 ||
        hc_event_add(db, "token.api_created", NULL, NULL, "hcctld", NULL, err,
                     "api token '%s' created with role %s", name, role) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        goto cleanup;
    }
    rc = 0;
cleanup:
    hc_db_close(db);
    return rc;
}

static int cmd_token(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, NULL, 'd'}, {"name", required_argument, NULL, 'n'},
        {"role", required_argument, NULL, 'r'},     {"ttl", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *data_dir = NULL, *name = NULL, *role = HC_AUTH_ROLE_ADMIN;
    int64_t ttl_ms = 0;
    struct hc_error err = {0};
    if (argc < 2 || strcmp(argv[1], "create") != 0)
        return usage_error("token needs the verb 'create'");
    argc--, argv++;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            data_dir = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'r':
            role = optarg;
            break;
        case 't':
            if (hc_duration_parse(optarg, &ttl_ms, &err) < 0 || ttl_ms <= 0)
                return usage_error("invalid --ttl '%s'", optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return usage_error("invalid option");
        }
    }
    if (optind != argc || !data_dir || !name)
        return usage_error("token create needs --data-dir DIR and --name NAME");
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    if (token_create(data_dir, name, role, ttl_ms, text, &err) < 0)
        return fail(&err);
    printf("%s\n", text);
    return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct hc_controller *ctl = arg;
    HC_INFO("received signal %d, stopping", (int)sig);
    hc_stop_request(&ctl->stopping);
    event_base_loopexit(ctl->base, NULL);
}

/* One hcctld per data directory: DIR/hcctld.lock is held (flock) for the whole run and holds
 * the pid. The descriptor stays open until the process ends. */
static int lock_data_dir(const struct hc_controller *ctl, struct hc_error *err)
{
    char path[1100], text[32];
    snprintf(path, sizeof(path), "%s/hcctld.lock", ctl->data_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return hc_error_set(err, 500, HC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        ssize_t n = read(fd, text, sizeof(text) - 1);
        text[n > 0 ? n : 0] = '\0';
        text[strcspn(text, "\n")] = '\0';
        close(fd);
        hc_error_set(err, 409, HC_ERR_CONFLICT, "another hcctld (pid %s) already runs on '%s'",
                     text[0] ? text : "unknown", ctl->data_dir);
        return hc_error_hint(err, "stop it first, or give this one another --data-dir");
    }
    int len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)len, 0) != len)
        HC_WARN("cannot write the pid into '%s': %s", path, strerror(errno));
    return 0;
}

/* Serves until a signal; every piece started here is stopped and freed here. */
static int serve(struct hc_controller *ctl, struct hc_error *err)
{
    int rc = -1;
    struct hc_api *api = NULL;
    struct event *sigterm = NULL, *sigint = NULL;
    ctl->base = event_base_new();
    if (!ctl->base) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot create the event loop");
        goto cleanup;
    }
    /* Listen first: a busy port fails before any worker thread starts. */
    api = hc_api_new(ctl, ctl->base, err);
    if (!api || hc_api_listen(api, ctl->listen_host, ctl->listen_port, err) < 0)
        goto cleanup;
    if (!(ctl->ops = hc_ops_pool_start(ctl, ctl->workers, err)) ||
        !(ctl->poller = hc_poller_start(ctl, err)))
        goto cleanup;
    sigterm = evsignal_new(ctl->base, SIGTERM, on_signal, ctl);
    sigint = evsignal_new(ctl->base, SIGINT, on_signal, ctl);
    if (!sigterm || !sigint || event_add(sigterm, NULL) < 0 || event_add(sigint, NULL) < 0) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot install signal handlers");
        goto cleanup;
    }
    HC_INFO("hcctld serving on https://%s%s%s:%d (cluster %s, poll every %lld ms)",
            strchr(ctl->listen_host, ':') ? "[" : "", ctl->listen_host,
            strchr(ctl->listen_host, ':') ? "]" : "", hc_api_port(api), ctl->cluster_id,
            (long long)ctl->poll_interval_ms);
    event_base_dispatch(ctl->base);
    rc = 0;
cleanup:
    hc_stop_request(&ctl->stopping);
    if (ctl->poller)
        hc_poller_stop(ctl->poller);
    if (ctl->ops)
        hc_ops_pool_stop(ctl->ops);
    ctl->poller = NULL;
    ctl->ops = NULL;
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    hc_api_free(api);
    if (ctl->base)
        event_base_free(ctl->base);
    ctl->base = NULL;
    return rc;
}

struct run_options {
    const char *data_dir;
    const char *listen;
    const char *advertise;
    const char *poll;
    const char *workers;
    const char *log_level;
    const char *max_connections;
    const char *request_deadline;
};

/* --max-connections and --request-deadline, for the API server made later. */
static int guard_settings(const struct run_options *o, struct hc_error *err)
{
    long conns = API_MAX_CONNECTIONS;
    int64_t deadline_ms = HC_HTTP_DEFAULT_DEADLINE_MS;
    if (o->max_connections) {
        char *end;
        conns = strtol(o->max_connections, &end, 10);
        if (*end || conns < 1 || conns > API_MAX_CONNECTIONS_MAX)
            return hc_error_set(err, 400, HC_ERR_INVALID_ARGUMENT,
                                "--max-connections must be from 1 to %d, not '%s'",
                                API_MAX_CONNECTIONS_MAX, o->max_connections);
    }
    if (o->request_deadline && hc_duration_parse(o->request_deadline, &deadline_ms, err) < 0)
        return -1;
    if (deadline_ms < 100 || deadline_ms > 600000)
        return hc_error_set(err, 400, HC_ERR_INVALID_ARGUMENT,
                            "--request-deadline must be from 100ms to 10m");
    hc_http_server_guard_defaults((int)conns, (int)deadline_ms);
    return 0;
}

/* Applies the command line on top of DIR/controller.json. */
static int run_settings(const struct run_options *o, struct hc_controller *ctl,
                        struct hc_error *err)
{
    if (hc_controller_load(ctl, o->data_dir, err) < 0)
        return -1;
    if (o->listen && hc_split_host_port(o->listen, ctl->listen_host, sizeof(ctl->listen_host),
                                        &ctl->listen_port, err) < 0)
        return -1;
    if (o->advertise &&
        hc_controller_parse_advertise(o->advertise, ctl->advertise_host,
                                      sizeof(ctl->advertise_host), &ctl->advertise_port, err) < 0)
        return -1;
    if (hc_controller_check_advertise(ctl, err) < 0)
        return -1;
    if (o->poll && hc_duration_parse(o->poll, &ctl->poll_interval_ms, err) < 0)
        return -1;
    if (guard_settings(o, err) < 0)
        return -1;
    if (ctl->poll_interval_ms < 100)
        return hc_error_set(err, 400, HC_ERR_INVALID_ARGUMENT, "--poll-interval must be >= 100ms");
    if (o->workers) {
        char *end;
        long n = strtol(o->workers, &end, 10);
        if (*end || n < 1 || n > 64)
            return hc_error_set(err, 400, HC_ERR_INVALID_ARGUMENT,
                                "--workers must be from 1 to 64, not '%s'", o->workers);
        ctl->workers = (int)n;
    }
    /* An agent request must end before the next poll round starts. */
    ctl->agent_timeout_ms =
        ctl->poll_interval_ms < AGENT_TIMEOUT_MAX_MS ? ctl->poll_interval_ms : AGENT_TIMEOUT_MAX_MS;
    if (ctl->agent_timeout_ms < AGENT_TIMEOUT_MIN_MS)
        ctl->agent_timeout_ms = AGENT_TIMEOUT_MIN_MS;
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {{"data-dir", required_argument, NULL, 'd'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"advertise", required_argument, NULL, 'a'},
                                         {"poll-interval", required_argument, NULL, 'p'},
                                         {"workers", required_argument, NULL, 'w'},
                                         {"log-level", required_argument, NULL, 'L'},
                                         {"max-connections", required_argument, NULL, 'm'},
                                         {"request-deadline", required_argument, NULL, 'D'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct run_options o = {0};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o.data_dir = optarg;
            break;
        case 'l':
            o.listen = optarg;
            break;
        case 'a':
            o.advertise = optarg;
            break;
        case 'p':
            o.poll = optarg;
            break;
        case 'w':
            o.workers = optarg;
            break;
        case 'L':
            o.log_level = optarg;
            break;
        case 'm':
            o.max_connections = optarg;
            break;
        case 'D':
            o.request_deadline = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return usage_error("invalid option");
        }
    }
    if (optind != argc || !o.data_dir)
        return usage_error("run needs --data-dir DIR and no other arguments");
    enum hc_log_level level = HC_LOG_INFO;
    if (o.log_level && hc_log_parse_level(o.log_level, &level) < 0)
        return usage_error("unknown --log-level '%s'", o.log_level);
    hc_log_set_level(level);
    static struct hc_controller ctl; /* large; lives for the whole run */
    struct hc_error err = {0};
    if (run_settings(&o, &ctl, &err) < 0 || lock_data_dir(&ctl, &err) < 0)
        return fail(&err);
    ctl.started_mono_ms = hc_mono_ms();
    signal(SIGPIPE, SIG_IGN);
    /* The worker and poller threads may touch libevent objects of their own. */
    evthread_use_pthreads();
    int rc = serve(&ctl, &err);
    libevent_global_shutdown();
    if (rc < 0)
        return fail(&err);
    HC_INFO("hcctld stopped");
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    printf("hcctld %s\n", HC_VERSION);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
    } cmds[] = {
        {"init", cmd_init}, {"token", cmd_token}, {"run", cmd_run}, {"version", cmd_version}};
    hc_log_set_ident("hcctld");
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    for (size_t i = 0; i < HC_ARRAY_LEN(cmds); i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            return cmds[i].fn(argc - 1, argv + 1);
    return usage_error("unknown command '%s'", argv[1]);
}
