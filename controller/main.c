/*
 * hcctld: the controller daemon. `init` sets up a data directory, `token create` mints API
 * tokens, `run` serves the API and runs the poller and the operation workers until SIGTERM or
 * SIGINT, `version` prints the version. Exit codes: 0 ok, 1 failed, 2 usage. The command line
 * is the table at the end of this file, read by the shared engine (common/cmdline.h), which
 * also generates --help and the man page.
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "common/https_server.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/backup.h"
#include "controller/controller.h"
#include "controller/ha/fence.h"
#include "controller/ha/fence_store.h"
#include "controller/ha/ha.h"
#include "controller/ha/join.h"
#include "controller/init.h"
#include "controller/ops/ops.h"
#include "controller/remote/poller.h"
#include "controller/state/ca_rotation.h"
#include "controller/state/events.h"
#include "db/db.h"

#define EXIT_USAGE 2
#define MAX_SANS 16
#define MAX_TRUST_KEYS 16
#define AGENT_TIMEOUT_MAX_MS 5000
#define AGENT_TIMEOUT_MIN_MS 500
/* API connections at once (docs/hcctld.md "Connection limits"): admins, agents enrolling and
 * fetching bundles, Prometheus; well under the unit's LimitNOFILE=16384. */
#define API_MAX_CONNECTIONS 512
#define EVENTS_RETENTION_MIN_MS (3600LL * 1000)
#define HC_NOFILE_WANTED 16384 /* what the unit's LimitNOFILE= gives */
#define API_MAX_CONNECTIONS_MAX 65536

/* What the handlers read: the parsed command line (common/cmdline.h). */
struct hc_cmd_ctx {
    struct hc_cmdline cl;
};

/* Prints err; exit 2 when the command line was at fault (a bad value: 400), else 1. */
static int fail(const struct hc_error *err)
{
    fprintf(stderr, "hcctld: %s\n", err->message);
    if (err->hint[0])
        fprintf(stderr, "hint: %s\n", err->hint);
    return err->status == 400 ? EXIT_USAGE : 1;
}

static int cmd_init(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct hc_init_options o = {0};
    const char *ttl = hc_cmdline_opt_str(cl, "admin-token-ttl");
    o.data_dir = hc_cmdline_opt_str(cl, "data-dir");
    o.listen = hc_cmdline_opt_str(cl, "listen");
    o.advertise = hc_cmdline_opt_str(cl, "advertise");
    o.cluster_name = hc_cmdline_opt_str(cl, "cluster-name");
    o.cli_config = hc_cmdline_opt_str(cl, "cli-config");
    o.force = hc_cmdline_opt_set(cl, "force");
    o.sans = hc_cmdline_opt_list(cl, "san", &o.nsans);
    o.trust_keys = hc_cmdline_opt_list(cl, "trust-key", &o.ntrust_keys);
    if (o.nsans > MAX_SANS)
        return hc_cmdline_usage(cl, "too many --san values (max %d)", MAX_SANS);
    if (o.ntrust_keys > MAX_TRUST_KEYS)
        return hc_cmdline_usage(cl, "too many --trust-key values (max %d)", MAX_TRUST_KEYS);
    if (ttl) {
        struct hc_error terr = {0};
        if (hc_duration_parse(ttl, &o.admin_token_ttl_ms, &terr) < 0 || o.admin_token_ttl_ms < 1000)
            return hc_cmdline_usage(cl, "invalid --admin-token-ttl '%s'", ttl);
    }
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
    if (ctl.ha_etcd[0]) {
        /* Its database is a cache that the next takeover replaces: a token written here would
         * vanish. */
        hc_error_set(err, HC_E(CONFLICT), "'%s' belongs to an HA controller (etcd %s)", data_dir,
                     ctl.ha_etcd);
        return hc_error_hint(err, "create it through the leader: 'hcctl token create %s'", name);
    }
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

static int cmd_token_create(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    const char *data_dir = hc_cmdline_opt_str(cl, "data-dir");
    const char *name = hc_cmdline_opt_str(cl, "name");
    const char *role = hc_cmdline_opt_str(cl, "role"), *ttl = hc_cmdline_opt_str(cl, "ttl");
    int64_t ttl_ms = 0;
    struct hc_error err = {0};
    if (ttl && (hc_duration_parse(ttl, &ttl_ms, &err) < 0 || ttl_ms <= 0))
        return hc_cmdline_usage(cl, "invalid --ttl '%s'", ttl);
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
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        ssize_t n = read(fd, text, sizeof(text) - 1);
        text[n > 0 ? n : 0] = '\0';
        text[strcspn(text, "\n")] = '\0';
        close(fd);
        hc_error_set(err, HC_E(CONFLICT), "another hcctld (pid %s) already runs on '%s'",
                     text[0] ? text : "unknown", ctl->data_dir);
        return hc_error_hint(err, "stop it first, or give this one another --data-dir");
    }
    int len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)len, 0) != len)
        HC_WARN("cannot write the pid into '%s': %s", path, strerror(errno));
    return 0;
}

/* Single mode's fencing term (controller/ha/fence.h): one more start generation than the last
 * run's, set before any thread may call an agent, so that agents refuse every earlier run of
 * this controller (one paused and woken, one started on a copy of the database). */
static int fence_start(const struct hc_controller *ctl, struct hc_error *err)
{
    int64_t generation = 0;
    /* After `hcctld restore` only (its marker, DIR/restored): the restored generation is below
     * what the agents have seen; it is raised above their controller_term first. */
    if (hc_backup_fence_catch_up(ctl, err) < 0)
        return -1;
    struct hc_db *db = hc_db_open(ctl->db_path, err);
    int rc = db ? hc_fence_generation_next(db, &generation, err) : -1;
    hc_db_close(db);
    if (rc < 0)
        return -1;
    hc_fence_set_term(generation);
    HC_INFO("fencing term %lld (start generation)", (long long)generation);
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
        hc_error_set(err, HC_E(INTERNAL), "cannot create the event loop");
        goto cleanup;
    }
    /* Listen first: a busy port fails before any worker thread starts. */
    api = hc_api_new(ctl, ctl->base, err);
    /* In HA mode the term is the leader key's (hc_ha_take_over set it). */
    if (!api || hc_api_listen(api, ctl->listen_host, ctl->listen_port, err) < 0 ||
        (!hc_ha_current() && fence_start(ctl, err) < 0))
        goto cleanup;
    if (hc_ha_current()) {
        /* A new leader polls every agent once before any worker runs: the polls carry its term,
         * so an agent refuses the old leader's calls from then on (docs/ha.md "Fencing"). */
        if (!(ctl->poller = hc_poller_start(ctl, err)))
            goto cleanup;
        int64_t until = hc_mono_ms() + 2 * ctl->poll_interval_ms + ctl->agent_timeout_ms;
        while (hc_poller_cycles(ctl->poller) < 1 && hc_mono_ms() < until)
            usleep(10000);
        if (!(ctl->ops = hc_ops_pool_start(ctl, ctl->workers, err)))
            goto cleanup;
    } else if (!(ctl->ops = hc_ops_pool_start(ctl, ctl->workers, err)) ||
               !(ctl->poller = hc_poller_start(ctl, err))) {
        goto cleanup;
    }
    sigterm = evsignal_new(ctl->base, SIGTERM, on_signal, ctl);
    sigint = evsignal_new(ctl->base, SIGINT, on_signal, ctl);
    if (!sigterm || !sigint || event_add(sigterm, NULL) < 0 || event_add(sigint, NULL) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot install signal handlers");
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
    const char *events_retention;
    const char *agent_cert_lifetime;
    const char *ha_etcd;
    const char *ha_lease_ttl;
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
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "--max-connections must be from 1 to %d, not '%s'",
                                API_MAX_CONNECTIONS_MAX, o->max_connections);
    }
    if (o->request_deadline && hc_duration_parse(o->request_deadline, &deadline_ms, err) < 0)
        return -1;
    if (deadline_ms < 100 || deadline_ms > 600000)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
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
    ctl->events_retention_ms = HC_CONTROLLER_DEFAULT_EVENTS_RETENTION_MS;
    if (o->events_retention && strcmp(o->events_retention, "0") != 0 &&
        (hc_duration_parse(o->events_retention, &ctl->events_retention_ms, err) < 0 ||
         ctl->events_retention_ms < EVENTS_RETENTION_MIN_MS))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "--events-retention must be a duration of at least 1h (e.g. 30d), "
                            "or 0 to keep every event, not '%s'",
                            o->events_retention);
    if (o->events_retention && strcmp(o->events_retention, "0") == 0)
        ctl->events_retention_ms = 0;
    if (ctl->poll_interval_ms < 100)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--poll-interval must be >= 100ms");
    if (o->agent_cert_lifetime) {
        int64_t ms;
        /* short lifetimes are for tests: a third of 15 s still spans a few poll cycles */
        if (hc_duration_parse(o->agent_cert_lifetime, &ms, err) < 0 || ms < 15000 ||
            ms > 3650LL * 86400 * 1000 || ms % 1000)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "--agent-cert-lifetime must be whole seconds from 15s to 3650d, "
                                "not '%s'",
                                o->agent_cert_lifetime);
        ctl->agent_cert_lifetime_s = ms / 1000;
    }
    if (o->workers) {
        char *end;
        long n = strtol(o->workers, &end, 10);
        if (*end || n < 1 || n > 64)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
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

/* HA mode: a standby until elected, then the leader until the process ends (docs/ha.md). */
static int run_ha(const struct run_options *o, struct hc_controller *ctl, struct hc_error *err)
{
    struct hc_ha_options ho = {.etcd_urls = o->ha_etcd};
    if (o->ha_lease_ttl) {
        int64_t ms;
        if (hc_duration_parse(o->ha_lease_ttl, &ms, err) < 0 || ms < 1000 || ms > 60000 ||
            ms % 1000)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "--ha-lease-ttl must be whole seconds from 1s to 60s, not '%s'",
                                o->ha_lease_ttl);
        ho.ttl_s = ms / 1000;
    }
    struct hc_ha *ha = hc_ha_start(ctl, &ho, err);
    if (!ha)
        return -1;
    int rc = hc_ha_standby(ha, err);
    if (rc == 1)
        rc = hc_ha_take_over(ha, err) < 0 ? -1 : serve(ctl, err);
    hc_ha_stop(ha);
    return rc;
}

static int cmd_run(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct run_options o = {
        .data_dir = hc_cmdline_opt_str(cl, "data-dir"),
        .listen = hc_cmdline_opt_str(cl, "listen"),
        .advertise = hc_cmdline_opt_str(cl, "advertise"),
        .poll = hc_cmdline_opt_str(cl, "poll-interval"),
        .workers = hc_cmdline_opt_str(cl, "workers"),
        .log_level = hc_cmdline_opt_str(cl, "log-level"),
        .max_connections = hc_cmdline_opt_str(cl, "max-connections"),
        .request_deadline = hc_cmdline_opt_str(cl, "request-deadline"),
        .events_retention = hc_cmdline_opt_str(cl, "events-retention"),
        .agent_cert_lifetime = hc_cmdline_opt_str(cl, "agent-cert-lifetime"),
        .ha_etcd = hc_cmdline_opt_str(cl, "ha-etcd"),
        .ha_lease_ttl = hc_cmdline_opt_str(cl, "ha-lease-ttl"),
    };
    enum hc_log_level level = HC_LOG_INFO;
    if (o.log_level && hc_log_parse_level(o.log_level, &level) < 0)
        return hc_cmdline_usage(cl, "unknown --log-level '%s'", o.log_level);
    hc_log_set_level(level);
    static struct hc_controller ctl; /* large; lives for the whole run */
    struct hc_error err = {0};
    if (run_settings(&o, &ctl, &err) < 0 || lock_data_dir(&ctl, &err) < 0)
        return fail(&err);
    ctl.started_mono_ms = hc_mono_ms();
    /* 1,000 agents' connections, the API's and the database's: the soft default of 1,024 is
     * not enough (docs/hcctld.md "Open files"). */
    long nofile = hc_nofile_raise();
    if (nofile < HC_NOFILE_WANTED)
        HC_WARN("open files are limited to %ld (ulimit -n; LimitNOFILE= in the unit): a cluster "
                "of more than %ld nodes polls in waves; %d is what 1,000 nodes need",
                nofile, nofile / 8, HC_NOFILE_WANTED);
    signal(SIGPIPE, SIG_IGN);
    /* The worker and poller threads may touch libevent objects of their own. */
    evthread_use_pthreads();
    /* HA mode by --ha-etcd, or by the data directory ("ha_etcd" in controller.json). */
    if (!o.ha_etcd && ctl.ha_etcd[0])
        o.ha_etcd = ctl.ha_etcd;
    int rc = o.ha_etcd ? run_ha(&o, &ctl, &err) : serve(&ctl, &err);
    libevent_global_shutdown();
    if (rc < 0)
        return fail(&err);
    HC_INFO("hcctld stopped");
    return 0;
}

static int cmd_ha_init(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct hc_controller ctl = {0};
    struct hc_error err = {0};
    if (hc_controller_load(&ctl, hc_cmdline_opt_str(cl, "data-dir"), &err) < 0 ||
        lock_data_dir(&ctl, &err) < 0)
        return fail(&err);
    long rows = hc_ha_init(&ctl, hc_cmdline_opt_str(cl, "etcd"), &err);
    if (rows < 0 || hc_ha_mark_data_dir(&ctl, hc_cmdline_opt_str(cl, "etcd"), &err) < 0)
        return fail(&err);
    printf("%ld rows of %s moved into etcd; 'hcctld run --data-dir %s' now runs in HA mode\n", rows,
           ctl.db_path, ctl.data_dir);
    return 0;
}

static int cmd_ha_join(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct hc_join_options o = {
        .data_dir = hc_cmdline_opt_str(cl, "data-dir"),
        .from = hc_cmdline_opt_str(cl, "from"),
        .ca_file = hc_cmdline_opt_str(cl, "ca-file"),
        .listen = hc_cmdline_opt_str(cl, "listen"),
        .advertise = hc_cmdline_opt_str(cl, "advertise"),
    };
    o.sans = hc_cmdline_opt_list(cl, "san", &o.nsans);
    if (o.nsans > MAX_SANS)
        return hc_cmdline_usage(cl, "too many --san values (max %d)", MAX_SANS);
    struct hc_error err = {0};
    char *token = NULL;
    size_t len = 0;
    if (hc_file_read(hc_cmdline_opt_str(cl, "token-file"), &token, &len, &err) < 0)
        return fail(&err);
    token[strcspn(token, "\r\n")] = '\0';
    o.token = token;
    struct hc_join_result res;
    int rc = hc_ha_join(&o, &res, &err);
    free(token);
    if (rc < 0)
        return fail(&err);
    printf("data dir: %s\ncluster id: %s\nfiles: %zu\nbundles: %zu\n", o.data_dir, res.cluster_id,
           res.files, res.bundles);
    return 0;
}

static int cmd_ha_export(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct hc_controller ctl = {0};
    struct hc_error err = {0};
    if (hc_controller_load(&ctl, hc_cmdline_opt_str(cl, "data-dir"), &err) < 0)
        return fail(&err);
    const char *out = hc_cmdline_opt_str(cl, "output");
    long rows = hc_ha_export(&ctl, hc_cmdline_opt_str(cl, "etcd"), out, &err);
    if (rows < 0)
        return fail(&err);
    printf("%ld rows written to %s\n", rows, out);
    return 0;
}

/* An etcd member's certificate from the cluster CA: server and client auth (etcd's peers use
 * it both ways), the member's addresses as SANs. */
static int cmd_ha_etcd_cert(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    struct hc_controller ctl = {0};
    struct hc_error err = {0};
    const char *name = hc_cmdline_opt_str(cl, "name"), *out = hc_cmdline_opt_str(cl, "out-dir");
    size_t nsans = 0;
    const char *const *sans = hc_cmdline_opt_list(cl, "san", &nsans);
    if (nsans > MAX_SANS)
        return hc_cmdline_usage(cl, "too many --san values (max %d)", MAX_SANS);
    if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name) || strlen(name) > 63)
        return hc_cmdline_usage(cl, "--name must be lowercase letters, digits and '-'");
    if (hc_controller_load(&ctl, hc_cmdline_opt_str(cl, "data-dir"), &err) < 0)
        return fail(&err);
    X509 *ca = hc_pki_cert_load(ctl.ca_file, &err), *cert = NULL;
    EVP_PKEY *ca_key = ca ? hc_pki_key_load(ctl.ca_key_file, &err) : NULL;
    EVP_PKEY *key = ca_key ? hc_pki_key_new(&err) : NULL;
    char cert_path[1200], key_path[1200], serial[33];
    snprintf(cert_path, sizeof(cert_path), "%s/%s.pem", out, name);
    snprintf(key_path, sizeof(key_path), "%s/%s.key", out, name);
    struct hc_cert_spec spec = {.cn = name,
                                .sans = sans,
                                .nsans = nsans,
                                .server_auth = 1,
                                .client_auth = 1,
                                .days = HC_INIT_CERT_DAYS};
    int rc = key && hc_mkdir_p(out, 0700, &err) == 0 &&
                     (cert = hc_pki_issue(ca, ca_key, key, &spec, serial, &err)) &&
                     hc_pki_key_save(key, key_path, &err) == 0 &&
                     hc_pki_cert_save(cert, cert_path, &err) == 0
                 ? 0
                 : -1;
    X509_free(cert);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    if (rc < 0)
        return fail(&err);
    printf("%s\n%s\n", cert_path, key_path);
    return 0;
}

static int cmd_backup(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    const char *out = hc_cmdline_opt_str(cl, "output");
    struct hc_backup_info info;
    struct hc_error err = {0};
    if (hc_backup_create(hc_cmdline_opt_str(cl, "data-dir"), out, &info, &err) < 0)
        return fail(&err);
    printf("backup: %s\ncluster id: %s\nschema: %d\nfiles: %zu\nbytes: %llu\n", out,
           info.cluster_id, info.schema, info.files, (unsigned long long)info.bytes);
    return 0;
}

static int cmd_restore(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    const char *dir = hc_cmdline_opt_str(cl, "data-dir");
    struct hc_backup_info info;
    struct hc_error err = {0};
    if (hc_backup_restore(hc_cmdline_opt_str(cl, "input"), dir, hc_cmdline_opt_set(cl, "force"),
                          &info, &err) < 0)
        return fail(&err);
    printf("data dir: %s\ncluster id: %s\nschema: %d\nfiles: %zu\n", dir, info.cluster_id,
           info.schema, info.files);
    fprintf(stderr,
            "hcctld: the next 'hcctld run' raises its fencing term above every agent's "
            "(DIR/%s)\n",
            HC_BACKUP_MARKER);
    return 0;
}

/* ---------------------------------------------------------------- ca */

/* Opens DIR's settings and database. */
static struct hc_db *ca_open(const struct hc_cmdline *cl, struct hc_controller *ctl,
                             struct hc_error *err)
{
    if (hc_controller_load(ctl, hc_cmdline_opt_str(cl, "data-dir"), err) < 0)
        return NULL;
    return hc_db_open(ctl->db_path, err);
}

/* The CLI config written by init (or --cli-config) trusts ca_pem from now on, when it is this
 * cluster's (its "ca_pem" holds the CA in was_pem). Said on stderr either way. */
static void ca_cli_config(const struct hc_cmdline *cl, const char *was_pem, const char *ca_pem)
{
    char path[1100];
    struct hc_error err = {0};
    const char *given = hc_cmdline_opt_str(cl, "cli-config");
    if (given)
        snprintf(path, sizeof(path), "%s", given);
    else if (hc_init_cli_config_path(path, sizeof(path), &err) < 0)
        return;
    json_t *doc = json_load_file(path, 0, NULL);
    const char *have = hc_json_str(doc, "ca_pem", NULL);
    if (!have || !strstr(have, was_pem)) {
        fprintf(stderr,
                "hcctld: %s is not this cluster's CLI config: give hcctl the new CA "
                "yourself (GET /v1/ca, or 'hcctld ca status')\n",
                path);
    } else {
        json_object_set_new(doc, "ca_pem", json_string(ca_pem));
        char *text = json_dumps(doc, JSON_INDENT(2));
        if (!text || hc_file_write_atomic(path, text, strlen(text), 0600, &err) < 0)
            fprintf(stderr, "hcctld: cannot update %s: %s\n", path, err.message);
        else
            fprintf(stderr, "hcctld: %s trusts the %s now\n", path,
                    strcmp(ca_pem, was_pem) ? "new CA" : "old and new CAs");
        free(text);
    }
    json_decref(doc);
}

static void ca_print_status(const json_t *st)
{
    const json_t *nodes = json_object_get(st, "nodes");
    printf("phase: %s\nstarted: %s\nold CA: %s\nnew CA: %s\nnodes: %lld (trusting this "
           "phase's CAs: %lld, on the new CA: %lld)\n",
           hc_json_str(st, "phase", "?"), hc_json_str(st, "started_at", "?"),
           hc_json_str(st, "old_fingerprint", "?"), hc_json_str(st, "new_fingerprint", "?"),
           (long long)hc_json_int(nodes, "total", 0), (long long)hc_json_int(nodes, "trusting", 0),
           (long long)hc_json_int(nodes, "on_new_ca", 0));
    const json_t *w;
    size_t i;
    json_array_foreach(json_object_get(st, "waiting_on"), i, w)
        printf("waiting on: %s\n", json_string_value(w));
}

static int cmd_ca_status(struct hc_cmd_ctx *ctx)
{
    static struct hc_controller ctl;
    struct hc_error err = {0};
    struct hc_db *db = ca_open(&ctx->cl, &ctl, &err);
    json_t *st = db ? hc_ca_rotation_status(db, &err) : NULL;
    hc_db_close(db);
    if (!st)
        return fail(&err);
    if (json_is_null(st))
        printf("no CA rotation is under way\n");
    else
        ca_print_status(st);
    json_decref(st);
    return 0;
}

/* Starts a rotation, then (unless --no-wait) follows it to its end: the running hcctld does
 * the work (controller/remote/ca_rotate.h). */
static int cmd_ca_rotate(struct hc_cmd_ctx *ctx)
{
    const struct hc_cmdline *cl = &ctx->cl;
    static struct hc_controller ctl;
    struct hc_error err = {0};
    int64_t timeout_ms = 10 * 60 * 1000;
    const char *timeout = hc_cmdline_opt_str(cl, "timeout");
    if (timeout && hc_duration_parse(timeout, &timeout_ms, &err) < 0)
        return fail(&err);
    struct hc_db *db = ca_open(cl, &ctl, &err);
    json_t *st = NULL;
    if (!db || hc_ca_rotate_start(&ctl, db, &err) < 0 || !(st = hc_ca_rotation_status(db, &err))) {
        hc_db_close(db);
        return fail(&err);
    }
    json_t *row = hc_db_query_json(db, &err, "SELECT old_pem, new_pem FROM ca_rotation", "");
    char *old_pem = strdup(hc_json_str(json_array_get(row, 0), "old_pem", ""));
    char *new_pem = strdup(hc_json_str(json_array_get(row, 0), "new_pem", ""));
    json_decref(row);
    printf("CA rotation started: new CA %s\n", hc_json_str(st, "new_fingerprint", "?"));
    ca_cli_config(cl, old_pem, hc_json_str(st, "bundle_pem", ""));
    json_decref(st);
    int rc = 0;
    if (!hc_cmdline_opt_set(cl, "no-wait")) {
        int64_t deadline = hc_mono_ms() + timeout_ms;
        char phase[32] = "trust";
        for (;;) {
            st = hc_ca_rotation_status(db, &err);
            if (!st) {
                rc = fail(&err);
                break;
            }
            if (json_is_null(st)) {
                printf("CA rotation done: every certificate is the new CA's\n");
                ca_cli_config(cl, old_pem, new_pem);
                break;
            }
            if (strcmp(phase, hc_json_str(st, "phase", phase)) != 0) {
                snprintf(phase, sizeof(phase), "%s", hc_json_str(st, "phase", ""));
                printf("phase: %s\n", phase);
            }
            if (hc_mono_ms() >= deadline) {
                ca_print_status(st);
                hc_error_set(&err, HC_E(TIMEOUT), "the CA rotation has not ended in %s",
                             timeout ? timeout : "10m");
                hc_error_hint(&err, "hcctld must run on the data directory; every node must "
                                    "answer ('hcctld ca status')");
                rc = fail(&err);
                json_decref(st);
                break;
            }
            json_decref(st);
            fflush(stdout);
            hc_sleep_ms(500);
        }
    }
    free(old_pem);
    free(new_pem);
    hc_db_close(db);
    return rc;
}

static int cmd_version(struct hc_cmd_ctx *ctx)
{
    (void)ctx;
    printf("hcctld %s\n", HC_VERSION);
    return 0;
}

/* ---------------------------------------------------------------- the command line */

static const struct hc_cmd_opt init_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (created; must not hold a controller yet)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "listen", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address the API listens on (default " HC_INIT_DEFAULT_LISTEN ")"),
    HC_OPT(.name = "advertise", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address agents and hcctl reach the API at (default: --listen)"),
    HC_OPT(.name = "san", .type = HC_OPT_LIST, .value_name = "NAME",
           .help = "extra DNS name or IP address in the API certificate (repeatable)"),
    HC_OPT(.name = "cluster-name", .type = HC_OPT_STRING, .value_name = "NAME",
           .help = "the cluster's name (default " HC_INIT_DEFAULT_CLUSTER_NAME ")"),
    HC_OPT(.name = "cli-config", .type = HC_OPT_STRING, .value_name = "PATH",
           .help = "where to write hcctl's config (default: $XDG_CONFIG_HOME/hcctl/config.json)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "force", .type = HC_OPT_BOOL,
           .help = "start over in an initialised directory (a CLI config there is kept as .bak)"),
    HC_OPT(.name = "trust-key", .type = HC_OPT_LIST, .value_name = "FILE",
           .help = "Ed25519 public key (PEM) that signs bundles (repeatable)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "admin-token-ttl", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "lifetime of the admin token (default: it never expires)"),
    {.name = NULL},
};

static const struct hc_cmd_opt token_create_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "name", .type = HC_OPT_STRING, .required = 1, .value_name = "NAME",
           .help = "the token's name (unique)"),
    HC_OPT(.name = "role", .type = HC_OPT_STRING, .value_name = "ROLE",
           .help = "what the token may do: " HC_AUTH_ROLE_ADMIN " or " HC_AUTH_ROLE_READONLY,
           .def = HC_AUTH_ROLE_ADMIN),
    HC_OPT(.name = "ttl", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "lifetime of the token (default: it never expires)"),
    {.name = NULL},
};

static const struct hc_cmd_opt run_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (made by 'hcctld init')",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "listen", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address the API listens on (default: the one init stored)"),
    HC_OPT(.name = "advertise", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address agents and hcctl reach the API at (default: the one init stored)"),
    HC_OPT(.name = "poll-interval", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "how often the poller asks every agent for its state (default 2s)"),
    HC_OPT(.name = "workers", .type = HC_OPT_STRING, .value_name = "N",
           .help = "operation worker threads, 1 to 64 (default 4)"),
    HC_OPT(.name = "log-level", .type = HC_OPT_STRING, .value_name = "LEVEL",
           .help = "debug, info, warn or error (default info)"),
    HC_OPT(.name = "max-connections", .type = HC_OPT_STRING, .value_name = "N",
           .help = "API connections at once, 1 to 65536 (default 512)"),
    HC_OPT(.name = "request-deadline", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "time a client has to send one whole request"),
    HC_OPT(.name = "events-retention", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "how long events are kept, at least 1h, or 0 to keep them all (default 30d)"),
    HC_OPT(.name = "agent-cert-lifetime", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "validity of the certificates issued to agents, renewed after two thirds "
                   "of it (default 365d)"),
    HC_OPT(.name = "ha-etcd", .type = HC_OPT_STRING, .value_name = "URLS",
           .help = "HA mode: etcd's client URLs, comma-separated (after 'hcctld ha init')"),
    HC_OPT(.name = "ha-lease-ttl", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "HA mode: the leader lease's TTL, whole seconds (default 3s)"),
    {.name = NULL},
};

static const struct hc_cmd_opt ha_init_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (hcctld must not run on it)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "etcd", .type = HC_OPT_STRING, .required = 1, .value_name = "URLS",
           .help = "etcd's client URLs, comma-separated (https)"),
    {.name = NULL},
};

static const struct hc_cmd_opt ha_join_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the new controller's data directory (created)", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "from", .type = HC_OPT_STRING, .required = 1, .value_name = "URL",
           .help = "a running controller of the cluster (https://HOST:PORT)"),
    HC_OPT(.name = "token-file", .type = HC_OPT_STRING, .required = 1, .value_name = "FILE",
           .help = "file holding an admin API token", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "ca-file", .type = HC_OPT_STRING, .required = 1, .value_name = "FILE",
           .help = "the cluster CA (ca.pem of the first controller)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "listen", .type = HC_OPT_STRING, .required = 1, .value_name = "ADDR:PORT",
           .help = "address this controller's API listens on"),
    HC_OPT(.name = "advertise", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address agents and hcctl reach it at (default: --listen)"),
    HC_OPT(.name = "san", .type = HC_OPT_LIST, .value_name = "NAME",
           .help = "extra DNS name or IP address in its API certificate (repeatable)"),
    {.name = NULL},
};

static const struct hc_cmd_opt ha_export_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "a controller's data directory (its certificates reach etcd)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "etcd", .type = HC_OPT_STRING, .required = 1, .value_name = "URLS",
           .help = "etcd's client URLs, comma-separated"),
    HC_OPT(.name = "output", .type = HC_OPT_STRING, .required = 1, .value_name = "FILE",
           .help = "the SQLite file to write (must not exist)", .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_opt ha_etcd_cert_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (its CA signs)", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "name", .type = HC_OPT_STRING, .required = 1, .value_name = "NAME",
           .help = "the etcd member's name (the certificate's CN and file names)"),
    HC_OPT(.name = "san", .type = HC_OPT_LIST, .value_name = "ADDR",
           .help = "an address or DNS name of the member (repeatable)"),
    HC_OPT(.name = "out-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "where NAME.pem and NAME.key are written", .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_opt backup_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (hcctld may run on it)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "output", .type = HC_OPT_STRING, .required = 1, .value_name = "FILE",
           .help = "the archive to write (tar.gz, mode 0600; replaced atomically)",
           .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_opt restore_opts[] = {
    HC_OPT(.name = "input", .type = HC_OPT_STRING, .required = 1, .value_name = "FILE",
           .help = "an archive written by 'hcctld backup'", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the data directory to restore (empty or new; hcctld must not run on it)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "force", .type = HC_OPT_BOOL,
           .help = "replace a data directory that is not empty (everything in it)"),
    {.name = NULL},
};

static const struct hc_cmd_opt ca_rotate_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory (hcctld runs on it and does the work)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "cli-config", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "the CLI config to keep trusting the controller (default: the one init "
                   "wrote)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once started ('hcctld ca status' follows it)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_STRING, .value_name = "DUR",
           .help = "how long to wait for the end (default 10m)"),
    {.name = NULL},
};

static const struct hc_cmd_opt ca_status_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "the controller's data directory", .completer = HC_COMPLETE_FILE),
    {.name = NULL},
};

static const struct hc_cmd_verb ca_verbs[] = {
    HC_VERB(.name = "rotate", .handler = cmd_ca_rotate, .opts = ca_rotate_opts,
            .summary = "replace the cluster CA with a new one, no node ever unreachable"),
    HC_VERB(.name = "status", .handler = cmd_ca_status, .opts = ca_status_opts,
            .summary = "the CA rotation under way, and what it waits for"),
    {.name = NULL},
};

static const struct hc_cmd_verb backup_verbs[] = {
    HC_VERB(.name = "backup", .handler = cmd_backup, .opts = backup_opts,
            .summary = "write the database, CA, keys and bundles into one archive"),
    {.name = NULL},
};

static const struct hc_cmd_verb restore_verbs[] = {
    HC_VERB(.name = "restore", .handler = cmd_restore, .opts = restore_opts,
            .summary = "check an archive of 'hcctld backup' and make the data directory of it"),
    {.name = NULL},
};

static const struct hc_cmd_verb ha_verbs[] = {
    HC_VERB(.name = "etcd-cert", .handler = cmd_ha_etcd_cert, .opts = ha_etcd_cert_opts,
            .summary = "issue an etcd member's certificate from the cluster CA"),
    HC_VERB(.name = "init", .handler = cmd_ha_init, .opts = ha_init_opts,
            .summary = "move a controller's state into etcd (the first HA controller)"),
    HC_VERB(.name = "join", .handler = cmd_ha_join, .opts = ha_join_opts,
            .summary = "make the data directory of another controller of the cluster"),
    HC_VERB(.name = "export", .handler = cmd_ha_export, .opts = ha_export_opts,
            .summary = "write etcd's state as a standalone database (backup, back to single mode)"),
    {.name = NULL},
};

static const struct hc_cmd_verb init_verbs[] = {
    HC_VERB(.name = "init", .handler = cmd_init, .opts = init_opts,
            .summary =
                "set up a data directory: CA, API certificate, database, admin token, CLI config"),
    {.name = NULL},
};

static const struct hc_cmd_verb token_verbs[] = {
    HC_VERB(.name = "create", .handler = cmd_token_create, .opts = token_create_opts,
            .summary = "mint an API token and print it (shown once)"),
    {.name = NULL},
};

static const struct hc_cmd_verb run_verbs[] = {
    HC_VERB(.name = "run", .handler = cmd_run, .opts = run_opts,
            .summary = "serve the API, poll the agents and run operations until SIGTERM or SIGINT"),
    {.name = NULL},
};

static const struct hc_cmd_verb version_verbs[] = {
    HC_VERB(.name = "version", .handler = cmd_version, .summary = "print the version"),
    {.name = NULL},
};

static const struct hc_cmd_group init_group = {
    .name = "init", .verbs = init_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group token_group = {
    .name = "token", .summary = "API tokens", .verbs = token_verbs};
static const struct hc_cmd_group run_group = {
    .name = "run", .verbs = run_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group backup_group = {
    .name = "backup", .verbs = backup_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group restore_group = {
    .name = "restore", .verbs = restore_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group version_group = {
    .name = "version", .verbs = version_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group ha_group = {
    .name = "ha", .summary = "high availability on etcd (docs/ha.md)", .verbs = ha_verbs};
static const struct hc_cmd_group ca_group = {
    .name = "ca", .summary = "the cluster CA (docs/certificates.md)", .verbs = ca_verbs};
static const struct hc_cmd_group *const groups[] = {&init_group,   &token_group,   &run_group,
                                                    &backup_group, &restore_group, &ca_group,
                                                    &ha_group,     &version_group, NULL};

/* The prose of the man page and of each command's --help (plain text: paragraphs, blocks
 * indented by two spaces). */
static const struct hc_cmdline_text command_texts[] = {
    {.name = "init",
     .text =
         "Creates DIR (mode 0700) with the database, the cluster CA, the API server\n"
         "certificate, the controller's client certificate for agents, controller.json and the\n"
         "first admin API token (admin.token, mode 0600, also printed once), and writes the\n"
         "local admin's CLI config ($XDG_CONFIG_HOME/hcctl/config.json, or --cli-config).\n"
         "--advertise is the address nodes and the CLI are given when the controller listens\n"
         "on a wildcard; --san adds names or addresses to the server certificate;\n"
         "--trust-key adds an Ed25519 public key that signs software bundles;\n"
         "--admin-token-ttl makes the first admin token expire (default: it lasts until\n"
         "revoked; 'hcctl token rotate admin' renews it); --force starts over in an\n"
         "initialised directory. The CLI config carries the server key's pin\n"
         "(controller_pin).\n"},
    {.name = "token create",
     .text = "Prints a new API token. Roles: admin (everything, the default) and readonly (GET\n"
             "only). --ttl makes it expire. Run on the controller host, it is the way back in\n"
             "when no admin token is left (every other token command is 'hcctl token').\n"},
    {.name = "run",
     .text = "Opens the database (applying migrations; a database written by a newer hcctld is\n"
             "refused), starts the operation workers, the poller and the HTTPS API, and serves\n"
             "until SIGTERM or SIGINT; then it lets running operations reach a safe point and\n"
             "exits 0. --poll-interval (at least 100ms) is how often every agent is polled.\n"
             "--max-connections caps the API connections open at once (the listener pauses\n"
             "beyond, and also backs off after an accept error such as EMFILE);\n"
             "--request-deadline (default 10s) is the time a connection has, from accept or from\n"
             "its previous reply, for the TLS handshake and a complete request (the body too,\n"
             "except an admin's bundle upload). Bodies are held to 1 MiB before any of them is\n"
             "read, unless the request is an admin token's POST /v1/software (60 MiB).\n"},
    {.name = "backup",
     .text = "Writes one tar.gz (mode 0600, renamed into place when complete): manifest.json\n"
             "(versions, cluster id, every entry's size and SHA-256), a consistent snapshot of\n"
             "the database taken with SQLite's online backup API (hcctld may be running), the CA\n"
             "and keys, controller.json, ssh/, trusted-keys/ and bundles/. Not admin.token: the\n"
             "database holds the hash of every token, which goes on working. An HA data\n"
             "directory is refused: its backup is 'hcctld ha export'.\n"},
    {.name = "ca rotate",
     .text = "Starts a CA rotation that the hcctld running on DIR carries out, one step per poll\n"
             "cycle: every node is given the old and the new CA to trust; then the new CA signs,\n"
             "the controller's certificates are reissued and every agent's renewed; then every\n"
             "node is given the new CA alone and the old key is deleted. No node is unreachable\n"
             "at any point; a node that does not answer holds the rotation in its phase. Prints\n"
             "each phase and waits for the end (--no-wait: returns once started); keeps the CLI\n"
             "config init wrote (or --cli-config) trusting the controller. Refused while a\n"
             "rotation runs and in HA mode. docs/certificates.md.\n"},
    {.name = "ca status",
     .text = "The rotation under way: its phase, when it started, both CAs' fingerprints, how\n"
             "many nodes trust this phase's CAs and hold a certificate of the new one, and the\n"
             "nodes it waits on; or 'no CA rotation is under way'.\n"},
    {.name = "restore",
     .text = "Checks the whole archive (gzip, manifest, every entry's size and SHA-256, no\n"
             "entry outside the data directory's files, no link or device, no schema newer than\n"
             "this hcctld's) while unpacking it beside DIR, then swaps it in with one rename: a\n"
             "refused restore leaves DIR as it was. DIR must be empty or new unless --force; an\n"
             "hcctld running on DIR is always refused. The first 'hcctld run' afterwards asks\n"
             "every agent for its controller term and starts above the highest (DIR/restored).\n"},
    {.name = NULL},
};

static const struct hc_cmdline_text man_sections[] = {
    {.name = "DESCRIPTION",
     .text = "hcctld owns one cluster: its SQLite database, its certificate authority, the REST\n"
             "API that hcctl(1) talks to, the poller that watches every hcagent(8), and the\n"
             "workers that run operations (cluster create, node add and remove, rolling upgrades,\n"
             "MTU changes, maintenance). Everything it knows is in the database, so a restarted\n"
             "or killed hcctld carries on where it stopped: operations are durable and resume.\n"},
    {.name = "COMMANDS"},
    {.name = "API",
     .text = "HTTPS with bearer tokens (Authorization: Bearer hct1...), JSON bodies, one JSON\n"
             "error shape; the contract is docs/api.md. GET /metrics serves Prometheus metrics in\n"
             "the text format (any valid API token, e.g. a readonly one): nodes by health, state\n"
             "and maintenance, operations by state, the agent poll latency histogram, agent polls\n"
             "by result, API requests by method and status code, build info, uptime and poll\n"
             "cycles.\n"},
    {.name = "FILES",
     .text = "  DIR/hcctld.db                  the database (SQLite, WAL), mode 0600\n"
             "  DIR/ca.pem, DIR/ca.key         the cluster CA\n"
             "  DIR/server.pem, DIR/server.key the API server certificate\n"
             "  DIR/client.pem, DIR/client.key the controller's client certificate toward agents\n"
             "                                 (CN hcctld-client)\n"
             "  DIR/ssh/id_ed25519             the key the controller logs in to nodes with\n"
             "  DIR/controller.json            listen address and settings\n"
             "  DIR/admin.token                the first admin API token, mode 0600\n"
             "  DIR/restored                   left by 'hcctld restore' for the next run\n"},
    {.name = "SYSTEMD",
     .text = "The package installs hcctld.service, which runs 'hcctld run --data-dir\n"
             "/var/lib/hcctld' hardened: no capabilities at all, no new privileges, the file\n"
             "system read-only but for /var/lib/hcctld, no home directories (keep SSH keys given\n"
             "to 'hcctl cluster create' under /var/lib/hcctld or /etc), a private /tmp.\n"
             "Initialise once, then enable it:\n"
             "\n"
             "  hcctld init --data-dir /var/lib/hcctld --listen 10.0.0.1:7443 --cluster-name prod\n"
             "  systemctl enable --now hcctld\n"},
    {.name = "EXIT STATUS",
     .text = "0 ok, 1 failed (the message and a hint are on stderr), 2 usage error.\n"},
    {.name = "SEE ALSO", .text = "hcctl(1), hcagent(8)\n"},
    {.name = NULL},
};

const struct hc_cmdline_prog hcctld_prog = {
    .name = "hcctld",
    .summary = "The controller of a hyperconverged cluster's storage layer: the REST API hcctl\n"
               "and the agents talk to, the operations, the poller.",
    .man_name = "the hcctl controller daemon",
    .groups = groups,
    .globals = hc_cmdline_help_only,
    .commands = command_texts,
    .man = man_sections,
    .epilog = "Exit codes: 0 ok, 1 failed, 2 usage.\n",
    .usage_exit = EXIT_USAGE,
    .man_section = 8,
};

int main(int argc, char **argv)
{
    struct hc_cmd_ctx ctx;
    hc_log_set_ident("hcctld");
    return hc_cmdline_main(&hcctld_prog, &ctx.cl, &ctx, argc, argv);
}
