/*
 * hcagent command line: `join` (enroll, then serve), `run` (serve), `version`.
 *
 * Exit codes: 0 ok, 1 failed, 2 usage. The join token is a secret, so the documented ways to
 * pass it are a file (--token-file) or the environment (HCAGENT_TOKEN); --token exists for
 * convenience and its argv copy is scrubbed as soon as it is read. The command line is the
 * table at the end of this file, read by the shared engine (common/cmdline.h), which also
 * generates --help and the man page.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/agent_upgrade.h"
#include "agents/hcagent/bench.h"
#include "agents/hcagent/daemon.h"
#include "agents/hcagent/net_api.h"
#include "agents/hcagent/privilege.h"
#include "common/cmdline.h"
#include "common/https_server.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

#define EXIT_USAGE 2
/* Connections to the agent API at once: only the controller gets past the TLS handshake, with a
 * handful (poller, operations, checks); the rest of the unit's LimitNOFILE=65536 is the storage
 * service's, which inherits it. */
#define AGENT_MAX_CONNECTIONS 64
#define AGENT_MAX_CONNECTIONS_MAX 65536

/* What the handlers read: the parsed command line (common/cmdline.h). */
struct hc_cmd_ctx {
    struct hc_cmdline cl;
};

struct cli {
    const char *controller, *token, *token_file, *data_dir, *listen, *name, *storage_interface;
    const char *config, *pidfile, *log_file;
    const char *max_connections, *request_deadline, *log_level;
    int daemon;
    char *token_buf;    /* owned copy of the token */
    json_t *config_doc; /* --config; the strings above may point into it */
};

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hcagent: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nsee 'hcagent %s%s--help'\n", cmd ? cmd : "", cmd ? " " : "");
    return EXIT_USAGE;
}

static int report(const struct hc_error *err)
{
    fprintf(stderr, "hcagent: %s\n", err->message);
    if (err->hint[0])
        fprintf(stderr, "hint: %s\n", err->hint);
    return EXIT_FAILURE;
}

static int set_log_level(const char *cmd, const char *name)
{
    enum hc_log_level level;
    if (hc_log_parse_level(name, &level) < 0)
        return usage_error(cmd, "unknown log level '%s' (use debug, info, warn or error)", name);
    hc_log_set_level(level);
    return 0;
}

/* --max-connections and --request-deadline: the defaults of the agent API server. */
static int guard_options(const char *cmd, const struct cli *cli)
{
    long conns = AGENT_MAX_CONNECTIONS;
    int64_t deadline_ms = HC_HTTP_DEFAULT_DEADLINE_MS;
    struct hc_error err = {0};
    if (cli->max_connections) {
        char *end;
        conns = strtol(cli->max_connections, &end, 10);
        if (*end || conns < 1 || conns > AGENT_MAX_CONNECTIONS_MAX)
            return usage_error(cmd, "--max-connections must be from 1 to %d, not '%s'",
                               AGENT_MAX_CONNECTIONS_MAX, cli->max_connections);
    }
    if (cli->request_deadline && hc_duration_parse(cli->request_deadline, &deadline_ms, &err) < 0)
        return usage_error(cmd, "--request-deadline: %s", err.message);
    if (deadline_ms < 100 || deadline_ms > 600000)
        return usage_error(cmd, "%s", "--request-deadline must be from 100ms to 10m");
    hc_http_server_guard_defaults((int)conns, (int)deadline_ms);
    return 0;
}

/* The options of cmd into cli, checked as they were when read by hand: the log level, then
 * the connection guards. Returns 0 or EXIT_USAGE. */
static int read_options(const char *cmd, const struct hc_cmdline *cl, struct cli *cli)
{
    const char *level = hc_cmdline_opt_str(cl, "log-level");
    size_t ntokens = 0;
    char *const *tokens;
    cli->data_dir = hc_cmdline_opt_str(cl, "data-dir");
    cli->log_level = level;
    cli->daemon = hc_cmdline_opt_set(cl, "daemon");
    cli->pidfile = hc_cmdline_opt_str(cl, "pidfile");
    cli->log_file = hc_cmdline_opt_str(cl, "log-file");
    cli->max_connections = hc_cmdline_opt_str(cl, "max-connections");
    cli->request_deadline = hc_cmdline_opt_str(cl, "request-deadline");
    if (strcmp(cmd, "join") == 0) {
        cli->controller = hc_cmdline_opt_str(cl, "controller");
        cli->token_file = hc_cmdline_opt_str(cl, "token-file");
        cli->listen = hc_cmdline_opt_str(cl, "listen");
        cli->storage_interface = hc_cmdline_opt_str(cl, "storage-interface");
        cli->name = hc_cmdline_opt_str(cl, "name");
        cli->config = hc_cmdline_opt_str(cl, "config");
        tokens = (char *const *)hc_cmdline_opt_list(cl, "token", &ntokens);
        if (ntokens) {
            /* Keep a copy of the last and scrub argv so that ps shows less of the secret. */
            cli->token_buf = strdup(tokens[ntokens - 1]);
            cli->token = cli->token_buf;
            for (size_t i = 0; i < ntokens; i++)
                memset(tokens[i], 'x', strlen(tokens[i]));
        }
    }
    if (level && set_log_level(cmd, level))
        return EXIT_USAGE;
    return guard_options(cmd, cli);
}

/* Token from --token-file or --token, else HCAGENT_TOKEN; surrounding whitespace dropped. */
static int read_token(struct cli *cli, struct hc_error *err)
{
    char *text = NULL;
    if (cli->token_file) {
        struct stat st;
        if (hc_file_read(cli->token_file, &text, NULL, err) < 0)
            return hc_error_prefix(err, "cannot read the join token");
        if (stat(cli->token_file, &st) == 0 && (st.st_mode & 077))
            HC_WARN("token file '%s' is readable by other users: keep secrets 0600",
                    cli->token_file);
    } else if (cli->token) {
        text = strdup(cli->token);
    } else {
        text = strdup(getenv("HCAGENT_TOKEN"));
    }
    unsetenv("HCAGENT_TOKEN"); /* the agent keeps running: do not leave it in environ */
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    char *start = text + strspn(text, " \t\r\n");
    size_t n = strlen(start);
    while (n > 0 && strchr(" \t\r\n", start[n - 1]))
        start[--n] = '\0';
    memmove(text, start, n + 1);
    free(cli->token_buf);
    cli->token_buf = text;
    cli->token = text;
    return 0;
}

/* Fills what the command line left unset from the --config file. */
static int load_config_file(struct cli *cli, struct hc_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (!cli->config)
        return 0;
    if (hc_file_read(cli->config, &text, &len, err) < 0)
        return -1;
    cli->config_doc = hc_json_parse_object(text, len, err);
    free(text);
    if (!cli->config_doc)
        return hc_error_prefix(err, "config file '%s'", cli->config);
    const json_t *c = cli->config_doc;
    cli->controller = cli->controller ? cli->controller : hc_json_str(c, "controller", NULL);
    cli->data_dir = cli->data_dir ? cli->data_dir : hc_json_str(c, "data_dir", NULL);
    cli->listen = cli->listen ? cli->listen : hc_json_str(c, "listen", NULL);
    cli->name = cli->name ? cli->name : hc_json_str(c, "name", NULL);
    cli->storage_interface =
        cli->storage_interface ? cli->storage_interface : hc_json_str(c, "storage_interface", NULL);
    if (!cli->token && !cli->token_file)
        cli->token_file = hc_json_str(c, "token_file", NULL);
    return 0;
}

/* 1 when DIR already holds an enrolled agent (agent.json is written last by join). */
static int already_enrolled(const char *data_dir)
{
    struct hc_agent_config cfg;
    struct hc_error ignored;
    return hc_agent_config_load(data_dir, &cfg, &ignored) == 0;
}

/* --daemon: detach and supervise; returns in the worker. */
static int maybe_daemonize(const struct cli *cli, struct hc_error *err)
{
    if (!cli->daemon)
        return 0;
    struct hc_daemon_options d = {.pidfile = cli->pidfile, .log_file = cli->log_file};
    return hc_daemon_start(&d, err);
}

/* Serving from now: how an upgrade starts the agent again, and the agent DIR/agent/current
 * names (docs/agent-upgrade.md) instead of this program when they differ. */
static void start_as_current(const struct cli *cli)
{
    hc_agent_upgrade_set_args(cli->data_dir, cli->log_level, cli->max_connections,
                              cli->request_deadline, cli->daemon);
    hc_agent_upgrade_launch(cli->data_dir);
}

static int check_join_args(const struct cli *cli)
{
    if (!cli->controller)
        return usage_error("join", "%s", "missing --controller URL");
    if (!cli->data_dir)
        return usage_error("join", "%s", "missing --data-dir DIR");
    if (cli->token && cli->token_file)
        return usage_error("join", "%s", "give the token once: --token-file or --token, not both");
    if (!cli->token && !cli->token_file && !getenv("HCAGENT_TOKEN") &&
        !already_enrolled(cli->data_dir))
        return usage_error("join", "%s",
                           "missing join token: use --token-file FILE or set HCAGENT_TOKEN");
    if (!cli->daemon && (cli->pidfile || cli->log_file))
        return usage_error("join", "%s", "--pidfile and --log-file go with --daemon");
    return 0;
}

/* Before any thread exists (capabilities are per thread): the agent keeps only what it needs,
 * however it was started (agents/hcagent/privilege.h). */
static int restrict_privileges(void)
{
    struct hc_error perr = {0};
    return hc_privilege_restrict_agent(&perr) < 0 ? report(&perr) : 0;
}

static int cmd_join(struct hc_cmd_ctx *ctx)
{
    struct cli cli = {0};
    struct hc_error err = {0};
    int rc = restrict_privileges();
    if (rc != 0 || (rc = read_options("join", &ctx->cl, &cli)) != 0)
        goto cleanup;
    if (load_config_file(&cli, &err) < 0) {
        rc = report(&err);
        goto cleanup;
    }
    if ((rc = check_join_args(&cli)) != 0)
        goto cleanup;
    rc = EXIT_FAILURE;
    if (already_enrolled(cli.data_dir)) {
        HC_INFO("'%s' is already enrolled: serving it", cli.data_dir);
        goto serve;
    }
    if (read_token(&cli, &err) < 0) {
        report(&err);
        goto cleanup;
    }
    struct hc_join_options jo = {.controller = cli.controller,
                                 .token = cli.token,
                                 .data_dir = cli.data_dir,
                                 .listen = cli.listen,
                                 .name = cli.name,
                                 .storage_interface = cli.storage_interface};
    if (hc_join(&jo, &err) < 0) {
        report(&err);
        goto cleanup;
    }
serve:
    if (maybe_daemonize(&cli, &err) < 0) {
        report(&err);
        goto cleanup;
    }
    start_as_current(&cli);
    if (hc_agent_serve(cli.data_dir, &err) < 0) {
        /* The node is enrolled by now: say how to start it once the cause is fixed. */
        if (!err.hint[0])
            hc_error_hint(&err, "this node is enrolled; start it with 'hcagent run --data-dir %s'",
                          cli.data_dir);
        report(&err);
        goto cleanup;
    }
    hc_agent_upgrade_exec(); /* returns when no upgrade asked for it */
    rc = EXIT_SUCCESS;
cleanup:
    free(cli.token_buf);
    json_decref(cli.config_doc);
    return rc;
}

static int cmd_run(struct hc_cmd_ctx *ctx)
{
    struct cli cli = {0};
    struct hc_error err = {0};
    int rc = restrict_privileges();
    if (rc != 0 || (rc = read_options("run", &ctx->cl, &cli)) != 0)
        return rc;
    if (!cli.data_dir)
        return usage_error("run", "%s", "missing --data-dir DIR");
    if (!cli.daemon && (cli.pidfile || cli.log_file))
        return usage_error("run", "%s", "--pidfile and --log-file go with --daemon");
    if (maybe_daemonize(&cli, &err) < 0)
        return report(&err);
    start_as_current(&cli);
    if (hc_agent_serve(cli.data_dir, &err) < 0)
        return report(&err);
    hc_agent_upgrade_exec(); /* returns when no upgrade asked for it */
    return EXIT_SUCCESS;
}

static int cmd_version(struct hc_cmd_ctx *ctx)
{
    (void)ctx;
    int rc = restrict_privileges();
    if (rc == 0)
        printf("hcagent %s\n", hc_agent_version());
    return rc;
}

/* The internal commands read their own words (argv[0] names the command). */
static int run_raw(struct hc_cmd_ctx *ctx, int (*fn)(int argc, char **argv))
{
    char prog[32];
    int rc = restrict_privileges();
    if (rc != 0)
        return rc;
    snprintf(prog, sizeof(prog), "hcagent %s", ctx->cl.argv[0]);
    ctx->cl.argv[0] = prog; /* getopt's own messages then name the command */
    return fn(ctx->cl.argc, ctx->cl.argv);
}

static int cmd_probe(struct hc_cmd_ctx *ctx)
{
    return run_raw(ctx, hc_net_cmd_probe);
}

static int cmd_probe_responder(struct hc_cmd_ctx *ctx)
{
    return run_raw(ctx, hc_net_cmd_probe_responder);
}

static int cmd_bench_child(struct hc_cmd_ctx *ctx)
{
    return run_raw(ctx, hc_bench_child_main);
}

/* `hcagent help`, as `hcagent --help`. */
static int cmd_help(struct hc_cmd_ctx *ctx)
{
    hc_cmdline_help_top(stdout, ctx->cl.prog);
    return EXIT_SUCCESS;
}

/* ---------------------------------------------------------------- the command line */

#define LOG_LEVEL_OPT                                                                              \
    {                                                                                              \
        .name = "log-level", .type = HC_OPT_STRING, .value_name = "LEVEL",                         \
        .help = "debug, info, warn or error (default info)"                                        \
    }
/* --daemon and its companions, and the agent API server's guards. */
#define DAEMON_OPTS                                                                                \
    {.name = "daemon",                                                                             \
     .type = HC_OPT_BOOL,                                                                          \
     .help = "detach and run supervised: restarted with backoff if it crashes"},                   \
        {.name = "pidfile",                                                                        \
         .type = HC_OPT_STRING,                                                                    \
         .value_name = "FILE",                                                                     \
         .help = "with --daemon: the supervisor's pid",                                            \
         .completer = HC_COMPLETE_FILE},                                                           \
        {.name = "log-file",                                                                       \
         .type = HC_OPT_STRING,                                                                    \
         .value_name = "FILE",                                                                     \
         .help = "with --daemon: where the agent logs (default /dev/null)",                        \
         .completer = HC_COMPLETE_FILE},                                                           \
        {.name = "max-connections",                                                                \
         .type = HC_OPT_STRING,                                                                    \
         .value_name = "N",                                                                        \
         .help = "agent API connections at once (default 64)"},                                    \
    {                                                                                              \
        .name = "request-deadline", .type = HC_OPT_STRING, .value_name = "DUR",                    \
        .help = "time for a connection's TLS handshake and request head (and body), from accept "  \
                "or the previous reply (default 10s)"                                              \
    }

static const struct hc_cmd_opt join_opts[] = {
    HC_OPT(.name = "controller", .type = HC_OPT_STRING, .value_name = "URL",
           .help = "controller API, e.g. https://10.0.0.1:7443"),
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .value_name = "DIR",
           .help = "where the agent keeps its key, certificates and config (0700)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "token-file", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "a file holding the join token (keep it 0600; else HCAGENT_TOKEN)",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "token", .type = HC_OPT_LIST, .value_name = "TOKEN",
           .help = "the join token on the command line (visible to other users in ps: avoid)"),
    HC_OPT(.name = "listen", .type = HC_OPT_STRING, .value_name = "ADDR:PORT",
           .help = "address of the agent API (default " HC_AGENT_DEFAULT_LISTEN ")"),
    HC_OPT(.name = "name", .type = HC_OPT_STRING, .value_name = "NAME",
           .help = "node name (default: the hostname)"),
    HC_OPT(.name = "storage-interface", .type = HC_OPT_STRING, .value_name = "IFACE",
           .help = "the storage network's interface: the storage service serves on its IPv4 "
                   "address (default: the listen address)"),
    HC_OPT(.name = "config", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "JSON with any of controller, data_dir, listen, name, storage_interface, "
                   "token_file (what 'hcctl cluster create' installs); options override it",
           .completer = HC_COMPLETE_FILE),
    LOG_LEVEL_OPT,
    DAEMON_OPTS,
    {.name = NULL},
};

static const struct hc_cmd_opt run_opts[] = {
    HC_OPT(.name = "data-dir", .type = HC_OPT_STRING, .value_name = "DIR",
           .help = "the agent's data directory", .completer = HC_COMPLETE_FILE),
    LOG_LEVEL_OPT,
    DAEMON_OPTS,
    {.name = NULL},
};

static const struct hc_cmd_verb join_verbs[] = {
    HC_VERB(.name = "join", .handler = cmd_join, .opts = join_opts,
            .summary = "enroll this node with a controller (one-time join token), then serve"),
    {.name = NULL},
};
static const struct hc_cmd_verb run_verbs[] = {
    HC_VERB(.name = "run", .handler = cmd_run, .opts = run_opts,
            .summary = "serve the agent API from an enrolled data directory"),
    {.name = NULL},
};
static const struct hc_cmd_verb version_verbs[] = {
    HC_VERB(.name = "version", .handler = cmd_version, .summary = "print the version"),
    {.name = NULL},
};
static const struct hc_cmd_verb help_verbs[] = {
    HC_VERB(.name = "help", .handler = cmd_help, .summary = "show help", .flags = HC_CMD_HIDDEN),
    {.name = NULL},
};
/* Hidden: for tests and the namespace lab (agents/hcagent/net_cmd.c), and the iperf3 children
 * of `net bench` (agents/hcagent/bench.c). */
static const struct hc_cmd_verb probe_verbs[] = {
    HC_VERB(.name = "probe", .handler = cmd_probe, .flags = HC_CMD_HIDDEN | HC_CMD_RAW),
    {.name = NULL},
};
static const struct hc_cmd_verb probe_responder_verbs[] = {
    HC_VERB(.name = "probe-responder", .handler = cmd_probe_responder,
            .flags = HC_CMD_HIDDEN | HC_CMD_RAW),
    {.name = NULL},
};
static const struct hc_cmd_verb bench_client_verbs[] = {
    HC_VERB(.name = "__bench-client", .handler = cmd_bench_child,
            .flags = HC_CMD_HIDDEN | HC_CMD_RAW),
    {.name = NULL},
};
static const struct hc_cmd_verb bench_server_verbs[] = {
    HC_VERB(.name = "__bench-server", .handler = cmd_bench_child,
            .flags = HC_CMD_HIDDEN | HC_CMD_RAW),
    {.name = NULL},
};

static const struct hc_cmd_group join_group = {
    .name = "join", .verbs = join_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group run_group = {
    .name = "run", .verbs = run_verbs, .flags = HC_GROUP_STANDALONE};
static const struct hc_cmd_group version_group = {
    .name = "version", .verbs = version_verbs, .flags = HC_GROUP_STANDALONE};
#define HIDDEN_GROUP(group_name, group_verbs)                                                      \
    {                                                                                              \
        .name = group_name, .verbs = group_verbs, .flags = HC_GROUP_STANDALONE | HC_CMD_HIDDEN     \
    }
static const struct hc_cmd_group hidden_groups[] = {
    HIDDEN_GROUP("help", help_verbs),
    HIDDEN_GROUP("probe", probe_verbs),
    HIDDEN_GROUP("probe-responder", probe_responder_verbs),
    HIDDEN_GROUP("__bench-client", bench_client_verbs),
    HIDDEN_GROUP("__bench-server", bench_server_verbs),
};
static const struct hc_cmd_group *const groups[] = {
    &join_group,       &run_group,        &version_group,
    &hidden_groups[0], &hidden_groups[1], &hidden_groups[2],
    &hidden_groups[3], &hidden_groups[4], NULL,
};

static const struct hc_cmdline_text command_texts[] = {
    {.name = "join",
     .text =
         "Enrolls this node with the controller, writes its credentials into DIR, then serves\n"
         "the agent API (like 'hcagent run'). The controller is trusted only if its CA matches\n"
         "the fingerprint inside the join token. A data directory that is already enrolled is\n"
         "served as it is, so the same command line can start the agent at every boot.\n"
         "\n"
         "The join token (from 'hcctl cluster join-token') is a secret; pass it with one of:\n"
         "  --token-file FILE     a file holding the token (keep it 0600)\n"
         "  HCAGENT_TOKEN         the environment variable (used when no token option is given)\n"
         "  --token TOKEN         the command line (visible to other users in ps: avoid)\n"},
    {.name = "run",
     .text = "Serves the agent API with the credentials written by 'hcagent join'. Stops on\n"
             "SIGTERM or SIGINT, or after the controller asks it to leave the cluster.\n"},
    {.name = NULL},
};

static const struct hc_cmdline_text man_sections[] = {
    {.name = "DESCRIPTION",
     .text =
         "One hcagent runs on every node of the cluster. It serves a small HTTPS API that only\n"
         "the controller, hcctld(8), may call (mutual TLS: a client certificate from the\n"
         "cluster CA with CN hcctld-client): it reports the node (versions, interfaces, MTUs),\n"
         "changes the storage interface's MTU with an automatic revert unless confirmed,\n"
         "answers path-MTU probes on UDP port 7445, runs iperf3 tests, and installs,\n"
         "supervises and upgrades the storage-node service.\n"},
    {.name = "COMMANDS"},
    {.name = "FILES",
     .text = "  DIR/agent.key            the agent's private key (mode 0600)\n"
             "  DIR/agent.pem, DIR/ca.pem  its certificate and the cluster CA\n"
             "  DIR/agent.json           name, controller, listen address; its presence means\n"
             "                           \"enrolled\"\n"
             "  DIR/software/            staged bundles, the active storage service, its log and\n"
             "                           pid file\n"
             "  DIR/service-data/        the storage service's data: mode 0700, owned by the\n"
             "                           service user\n"},
    {.name = "PRIVILEGE",
     .text = "Started as root, however it is started, the agent keeps only CAP_NET_ADMIN (MTU\n"
             "changes), CAP_SETUID and CAP_SETGID (to start the service as its user), CAP_KILL\n"
             "(to stop and watch it) and CAP_CHOWN (to give it its data directory), in its\n"
             "bounding set too, and sets no_new_privs. The storage service and its command hooks\n"
             "run as the service user, uid and gid 60600 (named hcsvc by the package; no account\n"
             "is needed), with no capability, no supplementary group and no_new_privs; they may\n"
             "write only their data directory.\n"},
    {.name = "ENVIRONMENT",
     .text = "HCAGENT_TOKEN is the join token when no token option is given.\n"
             "HCAGENT_SERVICE_USER is the user the storage service runs as instead of\n"
             "60600:60600: a user name or UID:GID (never uid or gid 0). Ignored when the agent is\n"
             "not root: the service then runs as the agent's own user.\n"},
    {.name = "SYSTEMD",
     .text = "The package installs hcagent.service, which runs 'hcagent run --data-dir\n"
             "/var/lib/hcagent' bounded to the capabilities above, with no new privileges, the\n"
             "file system read-only but for /var/lib/hcagent, the system calls of\n"
             "@system-service, LimitNOFILE=65536, and a delegated cgroup for the storage\n"
             "service's limits. Stopping the unit stops the agent only: the storage service keeps\n"
             "running and the next agent adopts it. Join once, then enable it:\n"
             "\n"
             "  HCAGENT_TOKEN=hcj1... hcagent join --controller https://10.0.0.1:7443 \\\n"
             "      --data-dir /var/lib/hcagent      # Ctrl-C once it serves\n"
             "  systemctl enable --now hcagent\n"
             "\n"
             "Nodes brought in by 'hcctl cluster create' or 'hcctl node add' get the agent and a\n"
             "unit pushed over SSH instead, made from the same template: the same hardening.\n"},
    {.name = "EXIT STATUS",
     .text = "0 ok, 1 failed (the message and a hint are on stderr), 2 usage error.\n"},
    {.name = "SEE ALSO", .text = "hcctl(1), hcctld(8)\n"},
    {.name = NULL},
};

const struct hc_cmdline_prog hcagent_prog = {
    .name = "hcagent",
    .summary = "The hcctl node agent: serves the node's API to the controller over mutual TLS.",
    .man_name = "the hcctl node agent",
    .groups = groups,
    .globals = hc_cmdline_help_only,
    .commands = command_texts,
    .man = man_sections,
    .epilog = "The join token (from 'hcctl cluster join-token') is a secret: pass it with\n"
              "--token-file FILE or the HCAGENT_TOKEN environment variable.\n"
              "Exit codes: 0 ok, 1 failed, 2 usage.\n",
    .usage_exit = EXIT_USAGE,
    .man_section = 8,
};

int main(int argc, char **argv)
{
    struct hc_cmd_ctx ctx;
    hc_log_set_ident("hcagent");
    hc_agent_identity_init(); /* the test knobs, out of the environment */
    /* A controller that hangs up mid-reply must not kill the agent. */
    signal(SIGPIPE, SIG_IGN);
    if (argc == 2 && strcmp(argv[1], "--version") == 0)
        argv[1] = "version"; /* a spelling of the version command it always accepted */
    return hc_cmdline_main(&hcagent_prog, &ctx.cl, &ctx, argc, argv);
}
