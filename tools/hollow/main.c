/*
 * hchollow: many agent identities in one process (hollow.h, docs/hollow.md).
 *
 *   hchollow --controller URL --ca FILE --count N --data-dir DIR [--first-address 127.1.0.1]
 *            [--port 7444] [--control PATH] [--trust-key FILE] [--enroll-parallel K]
 *            [--activate-ms MS] [--mtu N] [--topology FILE]
 *   hchollow ctl --control PATH stats | fault RANGE MODE [MS]
 *
 * The admin API token that mints the join tokens comes from HCHOLLOW_TOKEN, never the command
 * line. SIGTERM/SIGINT stop it.
 */
#include <arpa/inet.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "tools/hollow/hollow.h"

static void usage(void)
{
    fprintf(
        stderr,
        "usage: hchollow --controller URL --ca FILE --count N --data-dir DIR\n"
        "                [--first-address ADDR] [--port N] [--control PATH] [--trust-key FILE]\n"
        "                [--enroll-parallel K] [--activate-ms MS] [--mtu N] [--topology FILE]\n"
        "       hchollow ctl --control PATH stats | fault RANGE MODE [MS]\n"
        "HCHOLLOW_TOKEN: an admin API token (mints one join token per identity)\n");
}

static int int_arg(const char *name, const char *text, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        fprintf(stderr, "hchollow: --%s must be %ld to %ld, not '%s'\n", name, lo, hi, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* --topology FILE: {"mtu": {"NAME or INDEX": MTU, ...}} over the --mtu default. */
static int topology_load(struct hollow *h, const char *path, struct hc_error *err)
{
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr), *v;
    const char *key;
    if (!json_is_object(json_object_get(doc, "mtu"))) {
        json_decref(doc);
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "%s: want {\"mtu\": {NODE: MTU}} (%s)",
                            path, jerr.text);
    }
    json_object_foreach(json_object_get(doc, "mtu"), key, v)
    {
        int lo, hi;
        if (hollow_range_parse(h, key, &lo, &hi) < 0 || !json_is_integer(v) ||
            json_integer_value(v) < 576 || json_integer_value(v) > 65535) {
            json_decref(doc);
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "%s: '%s' is no node range, or its MTU is not 576..65535", path,
                                key);
        }
        for (int i = lo; i <= hi; i++)
            h->nodes[i].mtu = (int)json_integer_value(v);
    }
    json_decref(doc);
    return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    HC_INFO("hchollow: signal %d, stopping", (int)sig);
    event_base_loopexit(arg, NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "ctl"))
        return hollow_ctl_main(argc - 2, argv + 2);
    static struct hollow h = {
        .count = 0, .port = 7444, .enroll_parallel = 32, .activate_ms = 50, .default_mtu = 9000};
    const char *first = "127.1.0.1", *control = NULL, *topology = NULL, *trust_key = NULL;
    static const struct option opts[] = {{"controller", required_argument, NULL, 'c'},
                                         {"ca", required_argument, NULL, 'a'},
                                         {"count", required_argument, NULL, 'n'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {"first-address", required_argument, NULL, 'f'},
                                         {"port", required_argument, NULL, 'p'},
                                         {"control", required_argument, NULL, 's'},
                                         {"trust-key", required_argument, NULL, 'k'},
                                         {"enroll-parallel", required_argument, NULL, 'e'},
                                         {"activate-ms", required_argument, NULL, 'm'},
                                         {"mtu", required_argument, NULL, 'u'},
                                         {"topology", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'c':
            snprintf(h.controller, sizeof(h.controller), "%s", optarg);
            break;
        case 'a':
            snprintf(h.ca_file, sizeof(h.ca_file), "%s", optarg);
            break;
        case 'n':
            bad = int_arg("count", optarg, 1, HOLLOW_MAX_NODES, &h.count);
            break;
        case 'd':
            snprintf(h.data_dir, sizeof(h.data_dir), "%s", optarg);
            break;
        case 'f':
            first = optarg;
            break;
        case 'p':
            bad = int_arg("port", optarg, 1, 65535, &h.port);
            break;
        case 's':
            control = optarg;
            break;
        case 'k':
            trust_key = optarg;
            break;
        case 'e':
            bad = int_arg("enroll-parallel", optarg, 1, 256, &h.enroll_parallel);
            break;
        case 'm':
            bad = int_arg("activate-ms", optarg, 0, 60000, &h.activate_ms);
            break;
        case 'u':
            bad = int_arg("mtu", optarg, 576, 65535, &h.default_mtu);
            break;
        case 't':
            topology = optarg;
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
        if (bad)
            return 2;
    }
    if (optind != argc || !h.controller[0] || !h.ca_file[0] || !h.count || !h.data_dir[0] ||
        inet_pton(AF_INET, first, &h.first) != 1 || strncmp(h.controller, "https://", 8)) {
        usage();
        return 2;
    }
    if ((ntohl(h.first.s_addr) >> 24) != 127 ||
        ((ntohl(h.first.s_addr) + (uint32_t)h.count - 1) >> 24) != 127) {
        fprintf(stderr, "hchollow: the %d addresses from %s must stay inside 127.0.0.0/8\n",
                h.count, first);
        return 2;
    }
    hc_log_set_ident("hchollow");
    const char *tok = getenv("HCHOLLOW_TOKEN");
    snprintf(h.token, sizeof(h.token), "%s", tok ? tok : "");
    long nofile = hc_nofile_raise();
    if (nofile < 4L * h.count + 64)
        HC_WARN("hchollow: %ld open files for %d identities (listeners, the controller's "
                "connections): raise ulimit -n to %d",
                nofile, h.count, 4 * h.count + 64);
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads(); /* stage threads wake the loop with event_active */
    struct hc_error err = {0};
    h.base = event_base_new();
    h.manifests = json_object();
    h.keys = hc_bundle_keys_new();
    pthread_mutex_init(&h.manifests_mu, NULL);
    h.nodes = calloc((size_t)h.count, sizeof(*h.nodes));
    if (!h.base || !h.nodes || !h.manifests || !h.keys)
        return 1;
    if (trust_key && hc_bundle_keys_add_file(h.keys, trust_key, &err) < 0)
        goto fail;
    if (hc_mkdir_p(h.data_dir, 0700, &err) < 0)
        goto fail;
    for (int i = 0; i < h.count; i++) {
        struct hollow_node *n = &h.nodes[i];
        n->h = &h;
        n->index = i;
        n->in.s_addr = htonl(ntohl(h.first.s_addr) + (uint32_t)i);
        inet_ntop(AF_INET, &n->in, n->addr, sizeof(n->addr));
        snprintf(n->name, sizeof(n->name), "hollow-%04d", i);
        snprintf(n->dir, sizeof(n->dir), "%s/%s", h.data_dir, n->name);
        n->echo_fd = -1;
        hollow_node_init(n);
    }
    if (topology && topology_load(&h, topology, &err) < 0)
        goto fail;
    if (hollow_identities(&h, &err) < 0)
        goto fail;
    for (int i = 0; i < h.count; i++)
        if (hollow_serve(&h.nodes[i], &err) < 0)
            goto fail;
    if (hollow_echo_start(&h, &err) < 0)
        HC_WARN("hchollow: %s: the poller's echo probes go unanswered", err.message);
    hc_error_clear(&err);
    if (control && hollow_control_start(&h, control, &err) < 0)
        goto fail;
    struct event *sigterm = evsignal_new(h.base, SIGTERM, on_signal, h.base);
    struct event *sigint = evsignal_new(h.base, SIGINT, on_signal, h.base);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    HC_INFO("hchollow: %d nodes serving on %s..%s port %d", h.count, h.nodes[0].addr,
            h.nodes[h.count - 1].addr, h.port);
    event_base_dispatch(h.base);
    event_free(sigterm);
    event_free(sigint);
    for (int i = 0; i < h.count; i++)
        hollow_node_clear(&h.nodes[i]);
    if (h.control)
        evconnlistener_free(h.control);
    free(h.nodes);
    json_decref(h.manifests);
    hc_bundle_keys_free(h.keys);
    event_base_free(h.base);
    return 0;
fail:
    fprintf(stderr, "hchollow: error: %s\n", err.message);
    if (err.hint[0])
        fprintf(stderr, "hint: %s\n", err.hint);
    return 1;
}
