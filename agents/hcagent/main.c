/*
 * hcagent command line: `join` (enroll, then serve), `run` (serve), `version`.
 *
 * Exit codes: 0 ok, 1 failed, 2 usage. The join token is a secret, so the documented ways to
 * pass it are a file (--token-file) or the environment (HCAGENT_TOKEN); --token exists for
 * convenience and its argv copy is scrubbed as soon as it is read.
 */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/bench.h"
#include "agents/hcagent/daemon.h"
#include "agents/hcagent/net_api.h"
#include "agents/hcagent/privilege.h"
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

static const char main_usage[] =
    "usage: hcagent COMMAND [OPTIONS]\n"
    "\n"
    "The hcctl node agent: serves the node's API to the controller over mutual TLS.\n"
    "\n"
    "commands:\n"
    "  join      enroll this node with a controller (one-time join token), then serve\n"
    "  run       serve the agent API from an enrolled data directory\n"
    "  version   print the version\n"
    "\n"
    "Run 'hcagent COMMAND --help' for the options of a command.\n";

#define DAEMON_USAGE                                                                       \
    "  --daemon              detach and run supervised: restarted with backoff if it crashes\n" \
    "  --pidfile FILE        with --daemon: the supervisor's pid\n"                             \
    "  --log-file FILE       with --daemon: where the agent logs (default /dev/null)\n"

#define GUARD_USAGE                                                                        \
    "  --max-connections N   agent API connections at once (default 64)\n"                  \
    "  --request-deadline DUR  time for a connection's TLS handshake and request head (and\n" \
    "                        body), from accept or the previous reply (default 10s)\n"

static const char join_usage[] =
    "usage: hcagent join --controller URL --data-dir DIR [--token-file FILE]\n"
    "                    [--listen ADDR:PORT] [--name NAME] [--log-level LEVEL]\n"
    "                    [--config FILE] [--daemon [--pidfile FILE] [--log-file FILE]]\n"
    "                    [--max-connections N] [--request-deadline DUR]\n"
    "\n"
    "Enrolls this node with the controller, writes its credentials into DIR, then serves the\n"
    "agent API (like 'hcagent run'). The controller is trusted only if its CA matches the\n"
    "fingerprint inside the join token. A data directory that is already enrolled is served\n"
    "as it is, so the same command line can start the agent at every boot.\n"
    "\n"
    "The join token (from 'hcctl cluster join-token') is a secret; pass it with one of:\n"
    "  --token-file FILE     a file holding the token (keep it 0600)\n"
    "  HCAGENT_TOKEN         the environment variable (used when no token option is given)\n"
    "  --token TOKEN         the command line (visible to other users in ps: avoid)\n"
    "\n"
    "options:\n"
    "  --controller URL      controller API, e.g. https://10.0.0.1:7443\n"
    "  --data-dir DIR        where the agent keeps its key, certificates and config (0700)\n"
    "  --listen ADDR:PORT    address of the agent API (default " HC_AGENT_DEFAULT_LISTEN ")\n"
    "  --name NAME           node name (default: the hostname)\n"
    "  --config FILE         JSON with any of controller, data_dir, listen, name, token_file\n"
    "                        (what 'hcctl cluster create' installs); options override it\n"
    "  --log-level LEVEL     debug, info, warn or error (default info)\n"
    DAEMON_USAGE
    GUARD_USAGE
    "  -h, --help            show this help\n";

static const char run_usage[] =
    "usage: hcagent run --data-dir DIR [--log-level LEVEL]\n"
    "                   [--daemon [--pidfile FILE] [--log-file FILE]]\n"
    "                   [--max-connections N] [--request-deadline DUR]\n"
    "\n"
    "Serves the agent API with the credentials written by 'hcagent join'. Stops on SIGTERM or\n"
    "SIGINT, or after the controller asks it to leave the cluster.\n"
    "\n"
    "options:\n"
    "  --data-dir DIR        the agent's data directory\n"
    "  --log-level LEVEL     debug, info, warn or error (default info)\n"
    DAEMON_USAGE
    GUARD_USAGE
    "  -h, --help            show this help\n";

enum {
    OPT_CONTROLLER = 256,
    OPT_TOKEN,
    OPT_TOKEN_FILE,
    OPT_DATA_DIR,
    OPT_LISTEN,
    OPT_NAME,
    OPT_LOG_LEVEL,
    OPT_CONFIG,
    OPT_DAEMON,
    OPT_PIDFILE,
    OPT_LOG_FILE,
    OPT_MAX_CONNECTIONS,
    OPT_REQUEST_DEADLINE
};

struct cli {
    const char *controller, *token, *token_file, *data_dir, *listen, *name;
    const char *config, *pidfile, *log_file;
    const char *max_connections, *request_deadline;
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

/* Parses the options of cmd into cli. Returns 0, EXIT_USAGE, or -1 after printing help. */
static int parse_options(const char *cmd, int argc, char **argv, const struct option *opts,
                         const char *usage, struct cli *cli)
{
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            return -1;
        case OPT_CONTROLLER:
            cli->controller = optarg;
            break;
        case OPT_TOKEN_FILE:
            cli->token_file = optarg;
            break;
        case OPT_DATA_DIR:
            cli->data_dir = optarg;
            break;
        case OPT_LISTEN:
            cli->listen = optarg;
            break;
        case OPT_NAME:
            cli->name = optarg;
            break;
        case OPT_TOKEN:
            /* Keep a copy and scrub argv so that ps shows less of the secret. */
            free(cli->token_buf);
            cli->token_buf = strdup(optarg);
            cli->token = cli->token_buf;
            memset(optarg, 'x', strlen(optarg));
            break;
        case OPT_LOG_LEVEL:
            if (set_log_level(cmd, optarg))
                return EXIT_USAGE;
            break;
        case OPT_CONFIG:
            cli->config = optarg;
            break;
        case OPT_DAEMON:
            cli->daemon = 1;
            break;
        case OPT_PIDFILE:
            cli->pidfile = optarg;
            break;
        case OPT_LOG_FILE:
            cli->log_file = optarg;
            break;
        case OPT_MAX_CONNECTIONS:
            cli->max_connections = optarg;
            break;
        case OPT_REQUEST_DEADLINE:
            cli->request_deadline = optarg;
            break;
        default: /* getopt has named the bad option */
            fprintf(stderr, "see 'hcagent %s --help'\n", cmd);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return usage_error(cmd, "unexpected argument '%s'", argv[optind]);
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
        return hc_error_set(err, 500, HC_ERR_INTERNAL, "out of memory");
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

static int cmd_join(int argc, char **argv)
{
    static const struct option opts[] = {
        {"controller", required_argument, NULL, OPT_CONTROLLER},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"data-dir", required_argument, NULL, OPT_DATA_DIR},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"name", required_argument, NULL, OPT_NAME},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"daemon", no_argument, NULL, OPT_DAEMON},
        {"pidfile", required_argument, NULL, OPT_PIDFILE},
        {"log-file", required_argument, NULL, OPT_LOG_FILE},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"request-deadline", required_argument, NULL, OPT_REQUEST_DEADLINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli cli = {0};
    struct hc_error err = {0};
    int rc = parse_options("join", argc, argv, opts, join_usage, &cli);
    if (rc != 0)
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
                                 .name = cli.name};
    if (hc_join(&jo, &err) < 0) {
        report(&err);
        goto cleanup;
    }
serve:
    if (maybe_daemonize(&cli, &err) < 0) {
        report(&err);
        goto cleanup;
    }
    if (hc_agent_serve(cli.data_dir, &err) < 0) {
        /* The node is enrolled by now: say how to start it once the cause is fixed. */
        if (!err.hint[0])
            hc_error_hint(&err, "this node is enrolled; start it with 'hcagent run --data-dir %s'",
                          cli.data_dir);
        report(&err);
        goto cleanup;
    }
    rc = EXIT_SUCCESS;
cleanup:
    free(cli.token_buf);
    json_decref(cli.config_doc);
    return rc < 0 ? EXIT_SUCCESS : rc;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, NULL, OPT_DATA_DIR},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"daemon", no_argument, NULL, OPT_DAEMON},
        {"pidfile", required_argument, NULL, OPT_PIDFILE},
        {"log-file", required_argument, NULL, OPT_LOG_FILE},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"request-deadline", required_argument, NULL, OPT_REQUEST_DEADLINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli cli = {0};
    struct hc_error err = {0};
    int rc = parse_options("run", argc, argv, opts, run_usage, &cli);
    if (rc != 0)
        return rc < 0 ? EXIT_SUCCESS : rc;
    if (!cli.data_dir)
        return usage_error("run", "%s", "missing --data-dir DIR");
    if (!cli.daemon && (cli.pidfile || cli.log_file))
        return usage_error("run", "%s", "--pidfile and --log-file go with --daemon");
    if (maybe_daemonize(&cli, &err) < 0 || hc_agent_serve(cli.data_dir, &err) < 0)
        return report(&err);
    return EXIT_SUCCESS;
}

static int cmd_version(int argc, char **argv)
{
    if (argc > 1)
        return usage_error(NULL, "%s", "'version' takes no arguments");
    printf("hcagent %s\n", HC_VERSION);
    return EXIT_SUCCESS;
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"join", cmd_join},
    {"run", cmd_run},
    {"version", cmd_version},
    /* hidden: for tests and the namespace lab (agents/hcagent/net_cmd.c) */
    {"probe", hc_net_cmd_probe},
    {"probe-responder", hc_net_cmd_probe_responder},
    /* hidden: the iperf3 children of `net bench` (agents/hcagent/bench.c) */
    {"__bench-client", hc_bench_child_main},
    {"__bench-server", hc_bench_child_main},
};

int main(int argc, char **argv)
{
    hc_log_set_ident("hcagent");
    /* A controller that hangs up mid-reply must not kill the agent. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2)
        return usage_error(NULL, "%s", "missing command");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(main_usage, stdout);
        return EXIT_SUCCESS;
    }
    if (strcmp(cmd, "--version") == 0)
        return cmd_version(1, argv);
    /* Before any thread exists (capabilities are per thread): the agent keeps only what it
     * needs, however it was started (agents/hcagent/privilege.h). */
    struct hc_error perr = {0};
    if (hc_privilege_restrict_agent(&perr) < 0)
        return report(&perr);
    for (size_t i = 0; i < HC_ARRAY_LEN(commands); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            char prog[32];
            snprintf(prog, sizeof(prog), "hcagent %s", cmd);
            argv[1] = prog; /* getopt's own messages then name the command */
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    return usage_error(NULL, "unknown command '%s'", cmd);
}
