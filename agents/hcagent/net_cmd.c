/*
 * Hidden hcagent commands for tests and the namespace lab (not in `hcagent --help`):
 *
 *   hcagent probe-responder [--listen ADDR] [--port N]
 *       the agent's UDP echo responder alone, until SIGTERM/SIGINT; prints "ready PORT" on
 *       stdout once it listens, so that a script can wait for it
 *   hcagent probe [--source ADDR] [--port N] [--timeout-ms N] [--no-search] [--size N]
 *                 ADDR[:SIZE]...
 *       the prober of POST /v1/net/probe from the command line; prints the same JSON plus
 *       "elapsed_ms"; exit 0 when every target passed, 4 otherwise
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/net_api.h"
#include "agents/hcagent/probe.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

#define EXIT_USAGE 2
#define EXIT_CHECK_FAILED 4

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
    event_base_loopexit(arg, NULL);
}

static int serve_responder(const char *listen, int port)
{
    struct hc_error err = {0};
    int rc = EXIT_FAILURE;
    struct event_base *base = event_base_new();
    struct hc_probe_responder *r = NULL;
    struct event *term = NULL, *intr = NULL;
    if (!base || !(r = hc_probe_responder_new(base, listen, port, &err))) {
        fprintf(stderr, "hcagent: %s\n", base ? err.message : "cannot create event loop");
        goto cleanup;
    }
    term = evsignal_new(base, SIGTERM, on_stop, base);
    intr = evsignal_new(base, SIGINT, on_stop, base);
    if (!term || !intr || evsignal_add(term, NULL) < 0 || evsignal_add(intr, NULL) < 0)
        goto cleanup;
    printf("ready %d\n", hc_probe_responder_port(r));
    fflush(stdout);
    event_base_dispatch(base);
    HC_INFO("probe responder: %llu echoes, %llu datagrams ignored",
            (unsigned long long)hc_probe_responder_echoes(r),
            (unsigned long long)hc_probe_responder_ignored(r));
    rc = EXIT_SUCCESS;
cleanup:
    if (term)
        event_free(term);
    if (intr)
        event_free(intr);
    hc_probe_responder_free(r);
    if (base)
        event_base_free(base);
    return rc;
}

int hc_net_cmd_probe_responder(int argc, char **argv)
{
    static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                         {"port", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *listen = NULL;
    int port = HC_PORT_PROBE, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'l')
            listen = optarg;
        else if (c == 'p')
            port = atoi(optarg);
        else {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: hcagent probe-responder [--listen ADDR] [--port N]\n");
            return c == 'h' ? EXIT_SUCCESS : EXIT_USAGE;
        }
    }
    if (optind < argc || port < 0 || port > 65535) {
        fprintf(stderr, "hcagent: probe-responder takes --listen ADDR and --port 0-65535\n");
        return EXIT_USAGE;
    }
    return serve_responder(listen, port == 0 ? -1 : port);
}

/* ADDR or ADDR:SIZE. */
static int parse_target_arg(const char *arg, int size, struct hc_probe_target *t)
{
    char addr[INET_ADDRSTRLEN + 8];
    snprintf(addr, sizeof(addr), "%s", arg);
    char *colon = strchr(addr, ':');
    if (colon) {
        *colon = '\0';
        size = atoi(colon + 1);
    }
    t->size = size;
    return inet_pton(AF_INET, addr, &t->addr) == 1 && size >= HC_PROBE_MIN_SIZE &&
                   size <= HC_PROBE_MAX_SIZE
               ? 0
               : -1;
}

static int parse_probe_options(int argc, char **argv, struct hc_probe_options *opt, int *size)
{
    static const struct option opts[] = {{"source", required_argument, NULL, 's'},
                                         {"port", required_argument, NULL, 'p'},
                                         {"timeout-ms", required_argument, NULL, 't'},
                                         {"size", required_argument, NULL, 'S'},
                                         {"no-search", no_argument, NULL, 'n'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (inet_pton(AF_INET, optarg, &opt->source) != 1)
                return -1;
            break;
        case 'p':
            opt->port = atoi(optarg);
            break;
        case 't':
            opt->timeout_ms = atoi(optarg);
            break;
        case 'S':
            *size = atoi(optarg);
            break;
        case 'n':
            opt->search = 0;
            break;
        default:
            return -1;
        }
    }
    return optind < argc ? 0 : -1;
}

static int print_results(const struct hc_probe_target *t, size_t n,
                         const struct hc_probe_neighbors *nb, int64_t elapsed_ms)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++)
        failed |= t[i].result != HC_PROBE_OK;
    json_t *doc = hc_probe_results_json(t, n, &nb->before, &nb->after, 0);
    json_object_set_new(doc, "elapsed_ms", json_integer(elapsed_ms));
    json_dumpf(doc, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(doc);
    return failed ? EXIT_CHECK_FAILED : EXIT_SUCCESS;
}

int hc_net_cmd_probe(int argc, char **argv)
{
    struct hc_probe_options opt = {.search = 1};
    struct hc_error err = {0};
    int size = 9000;
    if (parse_probe_options(argc, argv, &opt, &size) < 0) {
        fprintf(stderr, "usage: hcagent probe [--source ADDR] [--port N] [--timeout-ms N] "
                        "[--no-search] [--size N] ADDR[:SIZE]...\n");
        return EXIT_USAGE;
    }
    size_t n = (size_t)(argc - optind);
    struct hc_probe_target *t = calloc(n, sizeof(*t));
    if (!t)
        return EXIT_FAILURE;
    int rc = EXIT_USAGE;
    for (size_t i = 0; i < n; i++) {
        if (parse_target_arg(argv[optind + (int)i], size, &t[i]) < 0) {
            fprintf(stderr, "hcagent: invalid target '%s': expected IPV4[:SIZE], size %d-%d\n",
                    argv[optind + (int)i], HC_PROBE_MIN_SIZE, HC_PROBE_MAX_SIZE);
            goto cleanup;
        }
    }
    int64_t start = hc_mono_ms();
    struct hc_probe_neighbors nb;
    if (hc_probe_run_explained(&opt, t, n, &nb, &err) < 0) {
        fprintf(stderr, "hcagent: %s\n", err.message);
        rc = EXIT_FAILURE;
        goto cleanup;
    }
    rc = print_results(t, n, &nb, hc_mono_ms() - start);
cleanup:
    free(t);
    return rc;
}
