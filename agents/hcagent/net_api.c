/*
 * The /v1/net/... routes of the agent API (docs/api.md "Agent API: network").
 *
 * The loop thread must keep answering /v1/status while a probe (seconds) or a bench (up to a
 * minute) runs, so those run as jobs (agents/hcagent/jobs.h) and their requests are answered
 * later through the HTTP server's deferred replies. A worker never touches a request: it stores
 * its result in the job and returns (a bench server notifies once its port is known, and keeps
 * waiting for its client); the job's callbacks answer on the loop. MTU routes are quick netlink
 * calls and run on the loop, where the revert timer lives too.
 *
 * A probe starts by flushing the namespace's route cache (agents/hcagent/mtu.h): a path MTU learnt
 * earlier (a routed hop since fixed, an MTU since raised) would otherwise be reported as the path
 * for ~10 minutes. The check measures the path as it is now, and what it learns (an ICMP
 * "fragmentation needed" from a hop still there) is cached again by the probe itself.
 *
 * The network state belongs to one agent. The agent's struct is private to agent_api.c, so the
 * state is found through a small registry keyed by the agent pointer.
 */
#include "agents/hcagent/net_api.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/bench.h"
#include "agents/hcagent/jobs.h"
#include "agents/hcagent/mtu.h"
#include "agents/hcagent/probe.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/stop.h"
#include "common/util.h"

#define MAX_JOBS 8
#define MIN_TIMEOUT_MS 10
#define MAX_TIMEOUT_MS 10000

enum job_kind { JOB_PROBE, JOB_BENCH_SERVER, JOB_BENCH_CLIENT };

struct net_ctx;

/* A probe or bench running as a job. Inputs are set before it starts; the outputs belong to
 * the worker until it notifies (a bench server) or returns. */
struct job {
    struct net_ctx *ctx;
    enum job_kind kind;
    struct hc_deferred *def; /* loop thread only */
    struct hc_probe_options popt;
    struct hc_probe_target *targets;
    size_t ntargets;
    struct hc_probe_neighbors neighbors;
    int compact; /* the probe answer lists passing targets by index */
    char address[INET_ADDRSTRLEN];
    int port;
    int duration_s;
    atomic_int child; /* bench child pid while it runs */
    struct hc_bench_result bench;
    struct hc_error err;
    int rc;
    struct job *next; /* ctx->running; loop thread only */
};

struct net_ctx {
    struct hc_agent *agent;
    struct event_base *base;
    struct hc_mtu_mgr *mtu;
    struct hc_probe_responder *responder;
    struct hc_jobs *jobs;
    struct job *running; /* the jobs not done yet; loop thread only */
    int njobs;
    struct hc_stop cancel; /* the agent stops: probes end, bench servers are killed */
    struct net_ctx *next;  /* registry */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_ctx *registry;

static struct net_ctx *ctx_of(const struct hc_agent *agent)
{
    pthread_mutex_lock(&registry_lock);
    struct net_ctx *c = registry;
    while (c && c->agent != agent)
        c = c->next;
    pthread_mutex_unlock(&registry_lock);
    return c;
}

/* ================================================================ results */

static json_t *job_answer(struct job *job, int *status)
{
    *status = 200;
    if (job->rc < 0) {
        *status = job->err.status ? job->err.status : 500;
        return hc_error_to_json(&job->err);
    }
    switch (job->kind) {
    case JOB_PROBE:
        return hc_probe_results_json(job->targets, job->ntargets, &job->neighbors.before,
                                     &job->neighbors.after, job->compact);
    case JOB_BENCH_SERVER:
        return json_pack("{s:i}", "port", job->port);
    default:
        return json_pack("{s:f, s:I, s:i}", "bits_per_second", job->bench.bits_per_second,
                         "retransmits", (json_int_t)job->bench.retransmits, "mtu", job->bench.mtu);
    }
}

/* ================================================================ jobs */

static void job_free(struct job *job)
{
    free(job->targets);
    free(job);
}

/* Before a probe: what is cached is not measured. Failing (no CAP_NET_ADMIN) is logged once:
 * the probe then reports cached path MTUs as the kernel applies them. */
static void probe_flush_routes(void)
{
    static atomic_int warned;
    struct hc_error err = {0};
    if (hc_mtu_route_flush(&err) == 0)
        return;
    if (atomic_exchange(&warned, 1) == 0)
        HC_WARN("%s; probes report path MTUs cached by the kernel (~10 min) as they are",
                err.message);
}

static void job_main(struct hc_job *hj, void *arg)
{
    struct job *job = arg;
    switch (job->kind) {
    case JOB_PROBE:
        probe_flush_routes();
        job->rc = hc_probe_run_explained(&job->popt, job->targets, job->ntargets, &job->neighbors,
                                         &job->err);
        break;
    case JOB_BENCH_CLIENT:
        job->rc = hc_bench_client(job->address, job->port, job->duration_s, &job->child,
                                  &job->bench, &job->err);
        break;
    case JOB_BENCH_SERVER: {
        pid_t pid = 0;
        job->rc = hc_bench_server_start(job->duration_s, &job->port, &pid, &job->err);
        if (job->rc < 0)
            break;
        atomic_store(&job->child, pid);
        if (hc_stop_requested(&job->ctx->cancel))
            kill(pid, SIGKILL);
        hc_job_notify(hj); /* the port can go out while the server waits for its client */
        int64_t limit = job->duration_s + HC_BENCH_GRACE_S + HC_BENCH_START_WINDOW_S;
        hc_bench_reap(pid, hc_mono_ms() + limit * 1000);
        atomic_store(&job->child, 0);
        break;
    }
    }
}

/* The job's ready callback: answers the request once (loop thread). */
static void job_reply(void *arg)
{
    struct job *job = arg;
    if (!job->def)
        return;
    int status;
    json_t *body = job_answer(job, &status);
    hc_deferred_reply_json(job->def, status, body);
    job->def = NULL;
}

/* The job's done callback: answers if not yet done, then forgets and frees the job. */
static void job_done(void *arg)
{
    struct job *job = arg;
    struct net_ctx *ctx = job->ctx;
    job_reply(job);
    for (struct job **pp = &ctx->running; *pp; pp = &(*pp)->next)
        if (*pp == job) {
            *pp = job->next;
            break;
        }
    ctx->njobs--;
    job_free(job);
}

/* Takes over job and the request: the reply comes from the job's callbacks. On failure answers
 * the request itself and frees job. */
static void job_start(struct net_ctx *ctx, struct hc_request *req, struct job *job)
{
    struct hc_error err = {0};
    job->ctx = ctx;
    if (ctx->njobs >= MAX_JOBS) {
        hc_error_set(&err, HC_E(CONFLICT), "%d network tests are already running on this agent",
                     ctx->njobs);
        hc_error_hint(&err, "retry when they have finished");
        goto fail;
    }
    if (!(job->def = hc_req_defer(req))) {
        hc_error_set(&err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    if (hc_jobs_start_notify(ctx->jobs, job_main, job_reply, job_done, job, &err) < 0) {
        hc_error_set(&err, HC_E(INTERNAL), "cannot start a worker thread");
        hc_deferred_reply_error(job->def, &err);
        job_free(job);
        return;
    }
    /* done runs on this (the loop) thread, later: the job is listed before it can end */
    job->next = ctx->running;
    ctx->running = job;
    ctx->njobs++;
    return;
fail:
    hc_reply_error(req, &err);
    job_free(job);
}

static struct job *job_new(enum job_kind kind)
{
    struct job *job = calloc(1, sizeof(*job));
    if (job)
        job->kind = kind;
    return job;
}

/* ================================================================ probe route */

static int parse_target(const json_t *item, size_t i, struct hc_probe_target *t,
                        struct hc_error *err)
{
    const char *addr = hc_json_str(item, "address", NULL);
    const json_t *size = json_object_get(item, "size");
    if (!addr || inet_pton(AF_INET, addr, &t->addr) != 1)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "targets[%zu].address must be an IPv4 address", i);
    if (!json_is_integer(size) || json_integer_value(size) < HC_PROBE_MIN_SIZE ||
        json_integer_value(size) > HC_PROBE_MAX_SIZE)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "targets[%zu].size must be an integer from %d to %d (the whole IPv4 "
                            "packet)",
                            i, HC_PROBE_MIN_SIZE, HC_PROBE_MAX_SIZE);
    t->size = (int)json_integer_value(size);
    return 0;
}

static int parse_probe(const json_t *body, struct job *job, struct hc_error *err)
{
    const json_t *targets = json_object_get(body, "targets");
    const char *source = hc_json_str(body, "source", NULL);
    size_t n = json_array_size(targets);
    int64_t timeout = hc_json_int(body, "timeout_ms", HC_PROBE_DEFAULT_TIMEOUT_MS);
    if (!json_is_array(targets) || n == 0 || n > HC_PROBE_MAX_TARGETS)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "targets must be an array of 1 to %d {\"address\",\"size\"} objects",
                            HC_PROBE_MAX_TARGETS);
    if (timeout < MIN_TIMEOUT_MS || timeout > MAX_TIMEOUT_MS)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "timeout_ms must be from %d to %d",
                            MIN_TIMEOUT_MS, MAX_TIMEOUT_MS);
    if (source && inet_pton(AF_INET, source, &job->popt.source) != 1)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "source '%s' is not an IPv4 address",
                            source);
    if (!(job->targets = calloc(n, sizeof(*job->targets))))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    job->ntargets = n;
    for (size_t i = 0; i < n; i++)
        if (parse_target(json_array_get(targets, i), i, &job->targets[i], err) < 0)
            return -1;
    job->popt.timeout_ms = (int)timeout;
    job->popt.search = hc_json_bool(body, "search", 1);
    job->compact = hc_json_bool(body, "compact", 0);
    return 0;
}

static void probe_route(struct hc_request *req, void *arg)
{
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    struct job *job = job_new(JOB_PROBE);
    if (!body || !job) {
        if (!job)
            hc_reply_error(req, &(struct hc_error){500, HC_ERR_INTERNAL, "out of memory", ""});
        free(job);
        return;
    }
    if (parse_probe(body, job, &err) < 0) {
        hc_reply_error(req, &err);
        job_free(job);
        return;
    }
    struct net_ctx *ctx = arg;
    job->popt.cancel = &ctx->cancel;
    HC_DEBUG("probe of %zu target(s) requested by %s", job->ntargets, hc_req_peer_addr(req));
    job_start(ctx, req, job);
}

/* ================================================================ bench routes */

static int parse_duration(const json_t *body, int *out, struct hc_error *err)
{
    const json_t *d = json_object_get(body, "duration_s");
    int64_t v = d ? (json_is_integer(d) ? json_integer_value(d) : -1) : 5;
    if (v < HC_BENCH_MIN_DURATION_S || v > HC_BENCH_MAX_DURATION_S)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "duration_s must be an integer from %d to %d", HC_BENCH_MIN_DURATION_S,
                            HC_BENCH_MAX_DURATION_S);
    *out = (int)v;
    return 0;
}

static void bench_route(struct hc_request *req, struct net_ctx *ctx, enum job_kind kind)
{
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    struct job *job = job_new(kind);
    if (!job) {
        hc_reply_error(req, &(struct hc_error){500, HC_ERR_INTERNAL, "out of memory", ""});
        return;
    }
    const char *addr = hc_json_str(body, "address", NULL);
    int64_t port = hc_json_int(body, "port", 0);
    struct in_addr ignored;
    if (parse_duration(body, &job->duration_s, &err) < 0)
        goto fail;
    if (kind == JOB_BENCH_CLIENT) {
        if (!addr || inet_pton(AF_INET, addr, &ignored) != 1 || port < 1 || port > 65535) {
            hc_error_set(&err, HC_E(INVALID_ARGUMENT),
                         "address (IPv4) and port (1-65535) of the bench server are required");
            goto fail;
        }
        snprintf(job->address, sizeof(job->address), "%s", addr);
        job->port = (int)port;
    }
    job_start(ctx, req, job);
    return;
fail:
    hc_reply_error(req, &err);
    job_free(job);
}

static void bench_server_route(struct hc_request *req, void *arg)
{
    bench_route(req, arg, JOB_BENCH_SERVER);
}

static void bench_client_route(struct hc_request *req, void *arg)
{
    bench_route(req, arg, JOB_BENCH_CLIENT);
}

/* ================================================================ mtu routes */

static void mtu_get_route(struct hc_request *req, void *arg)
{
    struct net_ctx *ctx = arg;
    hc_reply_json(req, 200, hc_mtu_state_json(ctx->mtu));
}

static void mtu_set_route(struct hc_request *req, void *arg)
{
    struct net_ctx *ctx = arg;
    struct hc_error err = {0};
    struct hc_mtu_change change;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const char *ifname = hc_json_req_str(body, "interface", &err);
    const json_t *mtu = json_object_get(body, "mtu");
    const json_t *after = json_object_get(body, "revert_after_ms");
    if (!ifname) {
        hc_reply_error(req, &err);
        return;
    }
    if (!json_is_integer(mtu) || !json_is_integer(after)) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "mtu and revert_after_ms must be integers");
        hc_reply_error(req, &err);
        return;
    }
    json_int_t v = json_integer_value(mtu);
    if (hc_mtu_apply(ctx->mtu, ifname, v < INT32_MIN || v > INT32_MAX ? -1 : (int)v,
                     json_integer_value(after), &change, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    hc_reply_json(req, 200, hc_mtu_change_json(&change));
}

static void mtu_confirm_route(struct hc_request *req, void *arg)
{
    struct net_ctx *ctx = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const char *id = hc_json_req_str(body, "change_id", &err);
    if (!id || hc_mtu_confirm(ctx->mtu, id, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    hc_reply_json(req, 200, json_pack("{s:b}", "confirmed", 1));
}

/* The counterpart of confirm: the controller's verification failed, so the change goes now
 * instead of at its deadline. */
static void mtu_revert_route(struct hc_request *req, void *arg)
{
    struct net_ctx *ctx = arg;
    struct hc_error err = {0};
    struct hc_mtu_change reverted;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const char *id = hc_json_req_str(body, "change_id", &err);
    if (!id || hc_mtu_revert(ctx->mtu, id, &reverted, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    hc_reply_json(req, 200, hc_mtu_revert_json(&reverted));
}

/* ================================================================ lifetime */

static void ctx_free(struct net_ctx *ctx)
{
    hc_stop_request(&ctx->cancel);
    for (struct job *j = ctx->running; j; j = j->next)
        if (atomic_load(&j->child) > 0)
            kill(atomic_load(&j->child), SIGKILL);
    /* Cancelled workers end quickly; their answers still go out before the server closes. */
    hc_jobs_free(ctx->jobs);
    hc_probe_responder_free(ctx->responder);
    hc_mtu_mgr_free(ctx->mtu);
    free(ctx);
}

static int ctx_routes(struct net_ctx *ctx, struct hc_http_server *srv, struct hc_error *err)
{
    if (hc_http_server_route(srv, "POST", "/v1/net/probe", 0, probe_route, ctx) < 0 ||
        hc_http_server_route(srv, "GET", "/v1/net/mtu", 0, mtu_get_route, ctx) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/net/mtu", 0, mtu_set_route, ctx) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/net/mtu/confirm", 0, mtu_confirm_route, ctx) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/net/mtu/revert", 0, mtu_revert_route, ctx) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/net/bench/server", 0, bench_server_route, ctx) < 0 ||
        hc_http_server_route(srv, "POST", "/v1/net/bench/client", 0, bench_client_route, ctx) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot register the network routes");
    return 0;
}

int hc_agent_net_routes(struct hc_agent *agent, struct hc_http_server *srv, struct event_base *base,
                        struct hc_error *err)
{
    struct net_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    ctx->agent = agent;
    ctx->base = base;
    if (!(ctx->jobs = hc_jobs_new(base))) {
        hc_error_set(err, HC_E(INTERNAL), "cannot set up the network worker wakeup");
        goto fail;
    }
    if (!(ctx->mtu = hc_mtu_mgr_new(base, hc_agent_data_dir(agent), err)) ||
        ctx_routes(ctx, srv, err) < 0)
        goto fail;
    pthread_mutex_lock(&registry_lock);
    ctx->next = registry;
    registry = ctx;
    pthread_mutex_unlock(&registry_lock);
    return 0;
fail:
    ctx_free(ctx);
    return -1;
}

int hc_agent_net_start_responder(struct hc_agent *agent, struct hc_error *err)
{
    struct net_ctx *ctx = ctx_of(agent);
    if (!ctx)
        return hc_error_set(err, HC_E(INTERNAL), "agent has no network state");
    if (ctx->responder)
        return 0;
    ctx->responder = hc_probe_responder_new(ctx->base, NULL, HC_PORT_PROBE, err);
    if (!ctx->responder)
        return -1;
    HC_INFO("probe responder listening on udp port %d", hc_probe_responder_port(ctx->responder));
    return 0;
}

void hc_agent_net_free(struct hc_agent *agent)
{
    pthread_mutex_lock(&registry_lock);
    struct net_ctx **pp = &registry;
    while (*pp && (*pp)->agent != agent)
        pp = &(*pp)->next;
    struct net_ctx *ctx = *pp;
    if (ctx)
        *pp = ctx->next;
    pthread_mutex_unlock(&registry_lock);
    if (ctx)
        ctx_free(ctx);
}
