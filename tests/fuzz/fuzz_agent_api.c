/*
 * Fuzz target: the agent API (agents/hcagent/agent_api.c, net_api.c, software_api.c) — the agent's
 * real route table and handlers with their JSON bodies, through hc_http_server_handle.
 *
 * Set up once: an enrolled data directory (a throw-away cluster CA, the node's certificate and
 * agent.json) and a real hc_agent on it. Run as root, the target first moves into a private,
 * empty network namespace (loopback down, no routes): what a handler does to the network (an
 * MTU change, a probe's datagrams, a stage's download from the controller) stays there and
 * fails fast. Requests whose handler would block for seconds or end the agent are answered 403
 * by this target's before-hook instead of reaching the handler (listed in `excluded` below and
 * in docs/fuzzing.md; the hook replaces the agent's fence, agents/hcagent/fence.c, so that a
 * term raised by one input does not refuse the changes of every later one); without a private
 * namespace, the routes that touch the host's network or start processes are excluded too. A
 * handler that defers its reply (a probe, a stage, a hook) is waited for on the event loop, at most
 * 10 s, and a request never answered is a crash. The agent's own state (a pending MTU change, the
 * service's peers) lives on between inputs, as in a running agent. Input format:
 * tests/fuzz/fuzz_http.h.
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/software.h"
#include "common/bundle.h"
#include "common/https_server.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "tests/fuzz/fuzz_http.h"
#include "tests/fuzz/fuzz_util.h"

#define WAIT_MS 10000

static struct {
    char *dir;
    struct event_base *base;
    struct hc_agent *agent;
    int private_netns;
    int replies;
} g;

/* Routes whose handler is not run. */
static const struct {
    const char *method, *path;
    int always; /* 0: only without a private network namespace */
} excluded[] = {
    {"POST", "/v1/leave", 1},            /* removes the credentials, stops the loop */
    {"POST", "/v1/net/bench/server", 1}, /* iperf3 for 1-60 s */
    {"POST", "/v1/net/bench/client", 1},
    {"POST", "/v1/net/mtu", 0}, /* changes an interface's MTU */
    {"POST", "/v1/net/probe", 0},
    {"POST", "/v1/software/stage", 0}, /* downloads from the controller */
    {"POST", "/v1/software/activate", 0},
    {"POST", "/v1/software/rollback", 0},
    {"POST", "/v1/service/start", 0},
};

static int before(struct hc_request *req, const struct hc_route *route, void *arg)
{
    for (size_t i = 0; i < sizeof(excluded) / sizeof(excluded[0]); i++)
        if ((excluded[i].always || !g.private_netns) &&
            strcmp(route->method, excluded[i].method) == 0 &&
            strcmp(route->pattern, excluded[i].path) == 0) {
            struct hc_error err;
            hc_error_set(&err, HC_E(FORBIDDEN), "excluded from fuzzing");
            hc_reply_error(req, &err);
            return 1;
        }
    return 0;
}

static void after(struct hc_request *req, int status, void *arg)
{
    g.replies++;
}

static void issue(X509 *ca, EVP_PKEY *ca_key, const char *dir)
{
    struct hc_error err = {0};
    char serial[33];
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {.cn = "n1", .sans = sans, .nsans = 1, .server_auth = 1, .days = 2};
    char *cert_path = hc_path_join(dir, HC_AGENT_FILE_CERT);
    char *key_path = hc_path_join(dir, HC_AGENT_FILE_KEY);
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509 *cert = key ? hc_pki_issue(ca, ca_key, key, &spec, serial, &err) : NULL;
    if (!cert || hc_pki_cert_save(cert, cert_path, &err) < 0 ||
        hc_pki_key_save(key, key_path, &err) < 0)
        fuzz_die("agent certificate: %s", err.message);
    X509_free(cert);
    EVP_PKEY_free(key);
    free(cert_path);
    free(key_path);
}

static void make_data_dir(const char *dir)
{
    struct hc_error err = {0};
    EVP_PKEY *ca_key = hc_pki_key_new(&err);
    X509 *ca = ca_key ? hc_pki_ca_new(ca_key, "fuzz cluster ca", 2, &err) : NULL;
    char *ca_path = hc_path_join(dir, HC_AGENT_FILE_CA);
    struct hc_agent_config cfg = {.name = "n1",
                                  .controller = "https://127.0.0.1:7443",
                                  .listen = "127.0.0.1:0",
                                  .agent_url = "https://127.0.0.1:7444"};
    if (!ca || hc_pki_cert_save(ca, ca_path, &err) < 0)
        fuzz_die("cluster ca: %s", err.message);
    issue(ca, ca_key, dir);
    if (hc_agent_config_save(dir, &cfg, &err) < 0)
        fuzz_die("agent.json: %s", err.message);
    /* a trusted bundle key, as enrollment leaves one: a stage gets as far as its download */
    char *keys = hc_path_join(dir, HC_AGENT_DIR_KEYS);
    char *prefix = keys ? hc_path_join(keys, "fuzz") : NULL;
    char *pub = NULL, *pem = NULL, *priv = NULL;
    if (!prefix || hc_mkdir_p(keys, 0700, &err) < 0 || hc_bundle_keygen(prefix, NULL, &err) < 0)
        fuzz_die("trusted key: %s", err.message);
    if (asprintf(&pub, "%s.pub", prefix) < 0 || asprintf(&pem, "%s.pem", prefix) < 0 ||
        asprintf(&priv, "%s.key", prefix) < 0 || rename(pub, pem) < 0 || unlink(priv) < 0)
        fuzz_die("trusted key: cannot install it");
    free(keys);
    free(prefix);
    free(pub);
    free(pem);
    free(priv);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    free(ca_path);
}

static void cleanup(void)
{
    hc_agent_free(g.agent);
    if (g.base)
        event_base_free(g.base);
    fuzz_rmtree(g.dir);
    free(g.dir);
}

static void setup(void)
{
    struct hc_error err = {0};
    fuzz_quiet_logs();
    g.private_netns = geteuid() == 0 && unshare(CLONE_NEWNET) == 0;
    if (!g.private_netns)
        fprintf(stderr,
                "fuzz_agent_api: no private network namespace (%s): the routes that "
                "change the network or start processes are excluded\n",
                geteuid() ? "not root" : strerror(errno));
    g.dir = fuzz_mkdtemp("hcfuzz-agent");
    make_data_dir(g.dir);
    evthread_use_pthreads(); /* the probe and software workers wake the loop from threads */
    g.base = event_base_new();
    if (!g.base || !(g.agent = hc_agent_new(g.base, g.dir, &err)))
        fuzz_die("agent: %s", err.message);
    hc_http_server_set_hooks(hc_agent_http_server(g.agent), before, after, NULL);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.agent)
        setup();
    struct evhttp_request *ev = fuzz_http_request(data, size);
    if (!ev)
        return 0;
    g.replies = 0;
    hc_http_server_handle(hc_agent_http_server(g.agent), ev);
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    while (g.replies == 0) {
        if (hc_mono_ms() > deadline)
            fuzz_die("request not answered within %d ms", WAIT_MS);
        event_base_loop(g.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (g.replies == 0)
            usleep(200);
    }
    if (g.replies != 1 || fuzz_http_status(ev) < 200)
        fuzz_die("%d replies to one request", g.replies);
    /* timers the request armed (an MTU change's revert) run when due, as in the agent */
    event_base_loop(g.base, EVLOOP_NONBLOCK);
    if (getenv("HC_FUZZ_VERBOSE")) /* what the seeds get: scripts/fuzz.sh --show */
        fprintf(stderr, "%d %s\n", fuzz_http_status(ev), ev->uri);
    fuzz_http_free(ev);
    return 0;
}
