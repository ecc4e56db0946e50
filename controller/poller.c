/*
 * The health poller (see poller.h). Each cycle: read the nodes, fan out GET /v1/status and
 * GET /v1/interfaces to all agents at once, then record every answer in one transaction.
 *
 * A node is 'reachable' when /v1/status answered 200 with a JSON object; anything else is
 * 'unreachable' with the reason in health_detail. The thread owns its database connection and
 * its agent client; nothing else touches them.
 */
#include "controller/poller.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/agent_client.h"
#include "controller/events.h"
#include "db/db.h"

struct hc_poller {
    struct hc_controller *ctl;
    struct hc_db *db;
    struct hc_http_client *client;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping; /* guarded by mu */
    atomic_uint_fast64_t cycles;
};

/* What one poll learnt about one node. */
struct poller_verdict {
    const char *health; /* reachable | unreachable (later: stalled) */
    char detail[640];   /* why, when not reachable */
};

/* Judges the /v1/status call. */
static void poller_judge(const struct hc_http_call *status, struct poller_verdict *v)
{
    v->detail[0] = '\0';
    v->health = "unreachable";
    if (!status->ok && strcmp(status->err.code, HC_ERR_TIMEOUT) == 0) {
        /* The peer did not answer within the timeout. When the TCP connection was accepted
         * but the TLS handshake or the answer never arrived, this is the signature of an MTU
         * blackhole (small packets pass, full-size segments vanish): a later issue reports
         * that as health 'stalled' with the suspected MTU named. Until then: unreachable,
         * with the timeout named. */
        snprintf(v->detail, sizeof(v->detail), "no answer within %ld ms: %s", status->timeout_ms,
                 status->err.message);
    } else if (!status->ok) {
        snprintf(v->detail, sizeof(v->detail), "%s", status->err.message);
    } else if (status->resp.status != 200 || !json_is_object(status->resp.body)) {
        snprintf(v->detail, sizeof(v->detail), "agent answered GET /v1/status with HTTP %ld%s",
                 status->resp.status, json_is_object(status->resp.body) ? "" : " and no JSON");
    } else {
        v->health = "reachable";
    }
}

static int poller_store_status(struct hc_db *db, int64_t node_id, const struct hc_http_call *st,
                               int64_t now, struct hc_error *err)
{
    const json_t *b = st->resp.body;
    const char *service = hc_json_str(json_object_get(b, "service"), "state", NULL);
    return hc_db_run(db, err,
                     "UPDATE nodes SET health = 'reachable', health_detail = NULL, last_seen = ?, "
                     "agent_version = ?, hostname = COALESCE(?, hostname), service_state = ?, "
                     "uptime_s = NULLIF(?, -1), poll_latency_ms = ? WHERE id = ?",
                     "isssiii", now, hc_json_str(b, "agent_version", NULL),
                     hc_json_str(b, "hostname", NULL), service,
                     hc_json_int(b, "uptime_seconds", -1), (int64_t)st->elapsed_ms, node_id);
}

static int poller_store_iface(struct hc_db *db, int64_t node_id, const json_t *iface, int64_t now,
                              struct hc_error *err)
{
    const char *name = hc_json_str(iface, "name", NULL);
    const json_t *addrs = json_object_get(iface, "addresses");
    if (!name)
        return 0; /* nothing to key it by: skip rather than fail the node */
    json_t *list = json_is_array(addrs) ? json_incref((json_t *)addrs) : json_array();
    char *addresses = hc_json_dump(list);
    json_decref(list);
    int rc = hc_db_run(db, err,
                       "INSERT INTO interfaces (node_id, name, mtu, state, kind, master, "
                       "addresses_json, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT (node_id, name) DO UPDATE SET mtu = excluded.mtu, "
                       "state = excluded.state, kind = excluded.kind, master = excluded.master, "
                       "addresses_json = excluded.addresses_json, updated_at = excluded.updated_at",
                       "isissssi", node_id, name, hc_json_int(iface, "mtu", 0),
                       hc_json_str(iface, "state", "unknown"), hc_json_str(iface, "kind", NULL),
                       hc_json_str(iface, "master", NULL), addresses ? addresses : "[]", now);
    free(addresses);
    return rc < 0 ? -1 : 0;
}

/* Replaces the node's interfaces with the agent's list. Upsert, then delete the rows this
 * cycle did not touch, so that columns the poller does not own (role) survive. */
static int poller_store_ifaces(struct hc_db *db, int64_t node_id, const struct hc_http_call *ifc,
                               int64_t now, struct hc_error *err)
{
    const json_t *list = json_object_get(ifc->resp.body, "interfaces");
    const json_t *iface;
    size_t i;
    if (!ifc->ok || ifc->resp.status != 200 || !json_is_array(list))
        return 0; /* keep what we knew; status decides health */
    json_array_foreach(list, i, iface)
    {
        if (poller_store_iface(db, node_id, iface, now, err) != 0)
            return -1;
    }
    return hc_db_run(db, err, "DELETE FROM interfaces WHERE node_id = ? AND updated_at <> ?", "ii",
                     node_id, now) < 0
               ? -1
               : 0;
}

static int poller_health_event(struct hc_db *db, const char *node, const char *from,
                               const struct poller_verdict *v, struct hc_error *err)
{
    json_t *details = json_pack("{s:s, s:s}", "from", from, "to", v->health);
    if (v->detail[0]) {
        json_object_set_new(details, "detail", json_string(v->detail));
        return hc_event_add(db, "node.health", node, NULL, "controller", details, err,
                            "node %s is %s: %s", node, v->health, v->detail);
    }
    return hc_event_add(db, "node.health", node, NULL, "controller", details, err, "node %s is %s",
                        node, v->health);
}

/* Records one node's poll inside the cycle's transaction. */
static int poller_record(struct hc_db *db, const json_t *node, const struct hc_http_call *calls,
                         int64_t now, struct hc_error *err)
{
    int64_t id = hc_json_int(node, "id", 0);
    const char *name = hc_json_str(node, "name", "?");
    struct poller_verdict v;
    int rc = -1;
    poller_judge(&calls[0], &v);
    /* Read the old health inside the transaction: the node may have been removed or changed
     * since the cycle started. */
    json_t *rows = hc_db_query_json(db, err, "SELECT health FROM nodes WHERE id = ?", "i", id);
    if (!rows)
        return -1;
    if (json_array_size(rows) == 0) {
        rc = 0; /* removed while we polled */
        goto cleanup;
    }
    const char *from = hc_json_str(json_array_get(rows, 0), "health", "unknown");
    if (strcmp(v.health, "reachable") == 0)
        rc = poller_store_status(db, id, &calls[0], now, err) < 0 ||
                     poller_store_ifaces(db, id, &calls[1], now, err) != 0
                 ? -1
                 : 0;
    else
        rc = hc_db_run(db, err,
                       "UPDATE nodes SET health = ?, health_detail = ?, poll_latency_ms = NULL "
                       "WHERE id = ?",
                       "ssi", v.health, v.detail, id) < 0
                 ? -1
                 : 0;
    if (rc == 0 && strcmp(from, v.health) != 0) {
        HC_INFO("node %s: %s -> %s%s%s", name, from, v.health, v.detail[0] ? ": " : "", v.detail);
        rc = poller_health_event(db, name, from, &v, err);
    }
cleanup:
    json_decref(rows);
    return rc;
}

static void poller_store(struct hc_poller *p, const json_t *nodes, struct hc_http_call *calls)
{
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    const json_t *node;
    size_t i;
    if (hc_db_begin(p->db, &err) != 0) {
        HC_WARN("poller cannot record the poll: %s", err.message);
        return;
    }
    json_array_foreach(nodes, i, node)
    {
        /* SQLite undoes only the failed statement: one bad answer does not lose the others. */
        if (poller_record(p->db, node, &calls[2 * i], now, &err) != 0)
            HC_WARN("poller cannot record node %s: %s", hc_json_str(node, "name", "?"),
                    err.message);
    }
    if (hc_db_commit(p->db, &err) != 0) {
        HC_WARN("poller cannot record the poll: %s", err.message);
        hc_db_rollback(p->db);
    }
}

/* Fills the two calls (status, interfaces) of every node; urls holds 2 * n strings. */
static int poller_prepare(struct hc_poller *p, const json_t *nodes, struct hc_http_call *calls,
                          char **urls)
{
    static const char *const paths[2] = {"/v1/status", "/v1/interfaces"};
    long timeout = hc_agent_timeout_ms(p->ctl);
    const json_t *node;
    size_t i;
    json_array_foreach(nodes, i, node)
    {
        for (size_t k = 0; k < 2; k++) {
            struct hc_error err = {0};
            char url[2048];
            if (hc_agent_url(url, sizeof(url), hc_json_str(node, "agent_url", ""), paths[k],
                             &err) != 0 ||
                !(urls[2 * i + k] = strdup(url)))
                return -1;
            calls[2 * i + k] = (struct hc_http_call){
                .method = "GET", .url = urls[2 * i + k], .timeout_ms = timeout};
        }
    }
    return 0;
}

static void poller_cycle(struct hc_poller *p)
{
    struct hc_error err = {0};
    json_t *nodes =
        hc_db_query_json(p->db, &err, "SELECT id, name, agent_url FROM nodes ORDER BY name", "");
    size_t n = json_array_size(nodes);
    struct hc_http_call *calls = NULL;
    char **urls = NULL;
    if (!nodes) {
        HC_WARN("poller cannot read the nodes: %s", err.message);
        return;
    }
    if (n == 0)
        goto cleanup;
    calls = calloc(2 * n, sizeof(*calls));
    urls = calloc(2 * n, sizeof(*urls));
    if (!calls || !urls || poller_prepare(p, nodes, calls, urls) != 0) {
        HC_WARN("poller cannot prepare the calls to %zu agents", n);
        goto cleanup;
    }
    int64_t t0 = hc_mono_ms();
    size_t answered = hc_http_fanout(p->client, calls, 2 * n, HC_POLLER_MAX_PARALLEL);
    HC_DEBUG("poller: fan-out to %zu agents took %lld ms (%zu of %zu calls answered)", n,
             (long long)(hc_mono_ms() - t0), answered, 2 * n);
    poller_store(p, nodes, calls);
cleanup:
    for (size_t i = 0; calls && urls && i < 2 * n; i++) {
        hc_http_response_clear(&calls[i].resp);
        free(urls[i]);
    }
    free(calls);
    free(urls);
    json_decref(nodes);
}

/* Waits until deadline (monotonic ms) or a stop. Returns 1 when stopping. */
static int poller_wait(struct hc_poller *p, int64_t deadline_ms)
{
    struct timespec until = {.tv_sec = deadline_ms / 1000,
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    int stopping;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && !p->ctl->stopping && hc_mono_ms() < deadline_ms) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0)
            break;
    }
    stopping = p->stopping || p->ctl->stopping;
    pthread_mutex_unlock(&p->mu);
    return stopping;
}

static void *poller_main(void *arg)
{
    struct hc_poller *p = arg;
    int64_t interval =
        p->ctl->poll_interval_ms > 0 ? p->ctl->poll_interval_ms : HC_CONTROLLER_DEFAULT_POLL_MS;
    int stopping = 0;
    while (!stopping) {
        int64_t start = hc_mono_ms();
        poller_cycle(p);
        atomic_fetch_add(&p->cycles, 1);
        stopping = poller_wait(p, start + interval);
    }
    return NULL;
}

uint64_t hc_poller_cycles(const struct hc_poller *p)
{
    return p ? (uint64_t)atomic_load(&p->cycles) : 0;
}

static void poller_free(struct hc_poller *p)
{
    hc_http_client_free(p->client);
    hc_db_close(p->db);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

struct hc_poller *hc_poller_start(struct hc_controller *ctl, struct hc_error *err)
{
    struct hc_poller *p = calloc(1, sizeof(*p));
    pthread_condattr_t attr;
    int ok = 0;
    if (!p) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot allocate the poller");
        return NULL;
    }
    p->ctl = ctl;
    atomic_init(&p->cycles, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* deadlines come from hc_mono_ms */
    pthread_cond_init(&p->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (!(p->db = hc_db_open(ctl->db_path, err)) || !(p->client = hc_agent_client_new(ctl, err)))
        goto cleanup;
    if (pthread_create(&p->thread, NULL, poller_main, p) != 0) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot start the poller thread");
        goto cleanup;
    }
    ok = 1;
cleanup:
    if (!ok) {
        poller_free(p);
        return NULL;
    }
    return p;
}

void hc_poller_stop(struct hc_poller *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    poller_free(p);
}
