/*
 * hcstor's view of the cluster: who the members are, where each block lives, what state each
 * peer is in, and the resync that brings this node back in sync after it was down.
 *
 * Membership is the peers file DATA/peers.json, written by hcagent when the controller sends the
 * node list ({"epoch", "replication"?, "nodes": [{"name", "host"}]}); every member's hcstor
 * listens on the same port as this one. It is re-read when it changes. A change that may place
 * blocks here (a member left, the replication factor grew) starts a resync; one that only adds
 * members leaves a serving node serving (rendezvous hashing moves blocks only to the new
 * members). Until every peer has the new list (their /health says its epoch) the change is
 * unsettled: writes coordinated here also go to the replicas of the previous list, which a
 * member still on it serves from. Once settled, the copies held here that the list places
 * elsewhere are dropped, each only when every one of its owners says it holds it (drops).
 *
 * Placement is rendezvous hashing: a block's replicas are the `rf` members with the highest
 * hash(member, key), rf = min(--replication, members). Every node computes the same sets.
 *
 * Peer states come from three sources: a /health probe every tick, the messages peers send
 * (hello when they start a resync, their state when it changes, e.g. draining), and failed
 * requests (down at once). A probe that was sent before the last message arrived is ignored, so
 * a stale "down" cannot hide a peer that has just said hello.
 *
 * Resync (this node missed writes): for each peer that must be listed, say hello (from then on
 * the peer sends us its replica writes), then list the blocks it holds that are placed here with
 * their versions, and fetch those newer than ours, resync_parallelism at once, each on a
 * connection of its own. Writes that race with the fetches are safe:
 * a block is stored only over an older version. When nothing is left to list or fetch the node
 * is serving again and tells its peers. A peer unreachable for HCSTOR_RESYNC_GIVE_UP_MS is
 * skipped: waiting for a dead node would keep this one out of service forever. A node that
 * missed writes while it kept running (told so by a peer, or its own loop stalled past the
 * peers' timeout) lists every peer, not only the one that noticed: they all wrote around it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "agents/hcstor/hcstor.h"
#include "common/util.h"

const char *hcstor_state_name(enum hcstor_state s)
{
    static const char *const names[] = {"down", "resyncing", "serving", "draining"};
    return (unsigned)s < HC_ARRAY_LEN(names) ? names[s] : "unknown";
}

static enum hcstor_state state_parse(const char *text)
{
    for (int i = HCSTOR_RESYNCING; i <= HCSTOR_DRAINING; i++)
        if (text && !strcmp(text, hcstor_state_name(i)))
            return i;
    return HCSTOR_DOWN;
}

/* ---- placement ------------------------------------------------------------------------- */

static uint64_t mix_hash(const char *member, const char *key)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, then a splitmix64 finaliser */
    for (const char *p = member; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

int hcstor_effective_rf(const struct hcstor *s)
{
    int members = (int)s->npeers + 1;
    return s->replication < members ? s->replication : members;
}

/* Members a and b are in one failure domain: both have one and it is the same ("": a domain of
 * its own). */
static int same_domain(const char *a, const char *b)
{
    return a[0] && b[0] && !strcmp(a, b);
}

/* The rf replicas of key among names[0..n) (domains[i] the failure domain of names[i]), best
 * first, as indexes into names. Rendezvous hashing ranks every member by hash(name, key); the
 * replicas are the best-ranked member of each domain, best domains first, as long as there are
 * domains left; only when there are fewer domains than rf are the remaining places filled by
 * the best-ranked members not yet taken. Without domains this is the plain top rf. */
static size_t rank(const char *const *names, const char *const *domains, size_t n, size_t rf,
                   const char *key, int *out)
{
    uint64_t score[HCSTOR_PEERS_MAX + 1];
    int order[HCSTOR_PEERS_MAX + 1];
    unsigned char taken[HCSTOR_PEERS_MAX + 1] = {0};
    size_t got = 0;
    for (size_t m = 0; m < n; m++) { /* insertion sort of every member, best first */
        uint64_t h = mix_hash(names[m], key);
        size_t at = m;
        while (at > 0 && score[at - 1] < h) {
            score[at] = score[at - 1];
            order[at] = order[at - 1];
            at--;
        }
        score[at] = h;
        order[at] = (int)m;
    }
    for (size_t i = 0; i < n && got < rf; i++) { /* one a domain */
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = taken[j] && same_domain(domains[order[i]], domains[order[j]]);
        if (!dup)
            taken[i] = 1, got++;
    }
    for (size_t i = 0; i < n && got < rf; i++) /* fewer domains than rf: the best of the rest */
        if (!taken[i])
            taken[i] = 1, got++;
    got = 0;
    for (size_t i = 0; i < n; i++)
        if (taken[i])
            out[got++] = order[i];
    return got;
}

size_t hcstor_domain_count(const struct hcstor *s)
{
    size_t count = 0;
    for (size_t i = 0; i <= s->npeers; i++) {
        const char *d = i == 0 ? s->domain : s->peers[i - 1].domain;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = same_domain(d, j == 0 ? s->domain : s->peers[j - 1].domain);
        count += !seen;
    }
    return count;
}

/* The index of the peer named name, -1 when it is this node or no member. */
static int peer_index(const struct hcstor *s, const char *name)
{
    for (size_t i = 0; i < s->npeers; i++)
        if (!strcmp(s->peers[i].name, name))
            return (int)i;
    return -1;
}

/* Fills out[] with the replicas of key, best first: -1 is this node, i >= 0 is peers[i]. */
size_t hcstor_replicas(const struct hcstor *s, const char *key, int *out, size_t max)
{
    const char *names[HCSTOR_PEERS_MAX + 1], *domains[HCSTOR_PEERS_MAX + 1];
    size_t rf = (size_t)hcstor_effective_rf(s), n;
    names[0] = s->node;
    domains[0] = s->domain;
    for (size_t i = 0; i < s->npeers; i++) {
        names[i + 1] = s->peers[i].name;
        domains[i + 1] = s->peers[i].domain;
    }
    n = rank(names, domains, s->npeers + 1, rf < max ? rf : max, key, out);
    for (size_t i = 0; i < n; i++)
        out[i] -= 1; /* names[0] is this node (-1), names[i] is peers[i - 1] */
    return n;
}

int hcstor_members_settled(const struct hcstor *s)
{
    for (size_t i = 0; i < s->npeers; i++)
        if (s->peers[i].epoch < s->peers_epoch)
            return 0;
    return 1;
}

size_t hcstor_write_targets(const struct hcstor *s, const char *key, int *out, size_t max)
{
    const char *names[HCSTOR_PEERS_MAX + 1], *domains[HCSTOR_PEERS_MAX + 1];
    int old[HCSTOR_PEERS_MAX + 1];
    size_t n = hcstor_replicas(s, key, out, max);
    if (s->nprev == 0 || hcstor_members_settled(s))
        return n;
    for (size_t i = 0; i < s->nprev; i++) {
        names[i] = s->prev[i];
        domains[i] = s->prev_domain[i];
    }
    size_t k = rank(names, domains, s->nprev, (size_t)s->prev_rf, key, old);
    for (size_t i = 0; i < k && n < max; i++) {
        int idx = peer_index(s, s->prev[old[i]]), known = idx < 0;
        for (size_t j = 0; j < n && !known; j++)
            known = out[j] == idx;
        if (!known)
            out[n++] = idx; /* an old replica that still serves the block by the old list */
    }
    return n;
}

int hcstor_in_sync_for(const struct hcstor *s, const char *key)
{
    int r[HCSTOR_PEERS_MAX + 1], mine = 0, skipped = 0;
    size_t n = hcstor_replicas(s, key, r, HC_ARRAY_LEN(r));
    for (size_t i = 0; i < n; i++) {
        mine |= r[i] < 0;
        skipped |= r[i] >= 0 && (s->peers[r[i]].skipped || s->peers[r[i]].behind);
    }
    return s->state == HCSTOR_SERVING && mine && !skipped;
}

int hcstor_is_replica(const struct hcstor *s, const char *key)
{
    int r[HCSTOR_PEERS_MAX + 1];
    size_t n = hcstor_replicas(s, key, r, HC_ARRAY_LEN(r));
    for (size_t i = 0; i < n; i++)
        if (r[i] < 0)
            return 1;
    return 0;
}

/* ---- peers and requests ---------------------------------------------------------------- */

struct hcstor_peer *hcstor_peer_by_name(struct hcstor *s, const char *name)
{
    for (size_t i = 0; name && i < s->npeers; i++)
        if (!strcmp(s->peers[i].name, name))
            return &s->peers[i];
    return NULL;
}

static struct evhttp_connection *conn_new(struct hcstor *s, struct hcstor_peer *p, int timeout_ms)
{
    struct evhttp_connection *c =
        evhttp_connection_base_new(s->base, NULL, p->host, (ev_uint16_t)p->port);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (c) {
        evhttp_connection_set_timeout_tv(c, &tv);
        evhttp_connection_set_retries(c, 0);
        /* Replication leaves from the address clients reach this node on (the storage
         * network's), not whichever the routing table would pick. */
        if (strcmp(s->host, "0.0.0.0") && strcmp(s->host, "::") && s->host[0])
            evhttp_connection_set_local_address(c, s->host);
    }
    return c;
}

struct evhttp_connection *hcstor_peer_conn(struct hcstor_peer *p)
{
    return p->data[p->next_data++ % HCSTOR_DATA_CONNS];
}

struct evhttp_connection *hcstor_peer_fwd_conn(struct hcstor_peer *p)
{
    return p->fwd[p->next_fwd++ % HCSTOR_DATA_CONNS];
}

void hcstor_peer_mark_down(struct hcstor *s, struct hcstor_peer *p)
{
    if (p->state != HCSTOR_DOWN)
        hcstor_log(s, HCSTOR_WARN, "peer %s is down (was %s)", p->name,
                   hcstor_state_name(p->state));
    p->state = HCSTOR_DOWN;
    if (!p->unreachable_since)
        p->unreachable_since = hc_mono_ms();
}

static void peer_seen(struct hcstor_peer *p, enum hcstor_state st, const char *incarnation)
{
    p->state = st;
    p->unreachable_since = 0;
    p->heard_ms = hc_mono_ms();
    if (incarnation)
        snprintf(p->incarnation, sizeof(p->incarnation), "%s", incarnation);
}

int hcstor_peer_request(struct hcstor *s, struct evhttp_connection *conn, enum evhttp_cmd_type type,
                        const char *uri, const void *body, size_t body_len,
                        const char *version_header,
                        void (*cb)(struct evhttp_request *res, void *arg), void *arg)
{
    struct evhttp_request *req = conn ? evhttp_request_new(cb, arg) : NULL;
    if (!req)
        return -1;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", "hcstor");
    evhttp_add_header(h, "X-Hcstor-From", s->node);
    if (version_header)
        evhttp_add_header(h, "X-Hcstor-Version", version_header);
    if (body) {
        evhttp_add_header(h, "Content-Type", "application/octet-stream");
        evbuffer_add(evhttp_request_get_output_buffer(req), body, body_len);
    }
    /* on failure evhttp_make_request frees req itself */
    return evhttp_make_request(conn, req, type, uri) == 0 ? 0 : -1;
}

static json_t *response_json(struct evhttp_request *res)
{
    if (!res)
        return NULL;
    struct evbuffer *b = evhttp_request_get_input_buffer(res);
    size_t n = evbuffer_get_length(b);
    return json_loadb((const char *)evbuffer_pullup(b, -1), n, 0, NULL);
}

static int response_code(struct evhttp_request *res)
{
    return res ? evhttp_request_get_response_code(res) : 0;
}

/* ---- messages: hello, state, resync request, probes ------------------------------------ */

static json_t *my_state(const struct hcstor *s)
{
    return json_pack("{s:s, s:s, s:s}", "node", s->node, "incarnation", s->incarnation, "state",
                     hcstor_state_name(s->state));
}

struct msg {
    struct hcstor *s;
    char peer[HCSTOR_NAME_MAX];
    int64_t sent_ms;
    void (*then)(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                 int64_t sent_ms);
    struct batch *batch;
};

struct batch {
    int remaining;
    void (*done)(struct hcstor *s, void *arg);
    void *arg;
};

static void batch_step(struct hcstor *s, struct batch *b)
{
    if (b && --b->remaining == 0) {
        if (b->done)
            b->done(s, b->arg);
        free(b);
    }
}

static void msg_done(struct evhttp_request *res, void *arg)
{
    struct msg *m = arg;
    struct hcstor_peer *p = hcstor_peer_by_name(m->s, m->peer);
    if (p)
        m->then(m->s, p, response_code(res) == 200 ? res : NULL, m->sent_ms);
    batch_step(m->s, m->batch);
    free(m);
}

/* Sends a control message (JSON body, or none for GET) to peer p; then(s, p, res or NULL). */
static int send_msg(struct hcstor *s, struct hcstor_peer *p, enum evhttp_cmd_type type,
                    const char *uri, json_t *body, struct batch *b,
                    void (*then)(struct hcstor *, struct hcstor_peer *, struct evhttp_request *,
                                 int64_t))
{
    struct msg *m = calloc(1, sizeof(*m));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc = -1;
    json_decref(body);
    if (m) {
        *m = (struct msg){s, "", hc_mono_ms(), then, b};
        snprintf(m->peer, sizeof(m->peer), "%s", p->name);
        rc = hcstor_peer_request(s, p->ctl, type, uri, text, text ? strlen(text) : 0, NULL,
                                 msg_done, m);
    }
    free(text);
    if (rc < 0) {
        free(m);
        hcstor_peer_mark_down(s, p);
        return -1;
    }
    if (b)
        b->remaining++;
    return 0;
}

static void state_from_answer(struct hcstor_peer *p, struct evhttp_request *res, int64_t sent_ms)
{
    json_t *j = response_json(res), *epoch = json_object_get(j, "epoch");
    if (sent_ms >= p->changed_ms && j)
        peer_seen(p, state_parse(json_string_value(json_object_get(j, "state"))),
                  json_string_value(json_object_get(j, "incarnation")));
    if (json_is_integer(epoch)) /* /health says it; the answers to messages do not */
        p->epoch = json_integer_value(epoch);
    json_decref(j);
}

static void after_resync_request(struct hcstor *s, struct hcstor_peer *p,
                                 struct evhttp_request *res, int64_t sent_ms)
{
    if (res) {
        p->suspect = 0;
        hcstor_log(s, HCSTOR_INFO, "told %s to resync the writes it missed", p->name);
    }
}

static void after_probe(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                        int64_t sent_ms)
{
    p->probing = 0;
    if (!res) {
        if (sent_ms >= p->changed_ms)
            hcstor_peer_mark_down(s, p);
        return;
    }
    state_from_answer(p, res, sent_ms);
    if (p->skipped && !p->need_list && !p->listing && p->state != HCSTOR_DOWN) {
        hcstor_log(s, HCSTOR_INFO, "%s answers again: listing the blocks this node skipped",
                   p->name);
        p->need_list = 1;
        hcstor_resync_kick(s);
    }
    if (p->suspect && p->state != HCSTOR_DOWN && p->state != HCSTOR_DRAINING)
        send_msg(s, p, EVHTTP_REQ_POST, "/internal/resync", my_state(s), NULL,
                 after_resync_request);
}

static void probe(struct hcstor *s, struct hcstor_peer *p, struct batch *b)
{
    p->probing = 1;
    if (send_msg(s, p, EVHTTP_REQ_GET, "/health", NULL, b, after_probe) < 0)
        p->probing = 0;
}

void hcstor_probe_all(struct hcstor *s, void (*done)(struct hcstor *s, void *arg), void *arg)
{
    struct batch *b = calloc(1, sizeof(*b));
    if (!b) {
        done(s, arg);
        return;
    }
    *b = (struct batch){1, done, arg}; /* the extra count is released below */
    for (size_t i = 0; i < s->npeers; i++)
        probe(s, &s->peers[i], b);
    batch_step(s, b);
}

static void after_announce(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                           int64_t sent_ms)
{
    if (!res)
        hcstor_peer_mark_down(s, p);
}

struct announce_done {
    void (*done)(struct hcstor *s);
};

static void announce_finished(struct hcstor *s, void *arg)
{
    struct announce_done *a = arg;
    if (a->done)
        a->done(s);
    free(a);
}

void hcstor_announce(struct hcstor *s, void (*done)(struct hcstor *s))
{
    struct announce_done *a = calloc(1, sizeof(*a));
    struct batch *b = calloc(1, sizeof(*b));
    if (!a || !b) {
        free(a);
        free(b);
        if (done)
            done(s);
        return;
    }
    a->done = done;
    *b = (struct batch){1, announce_finished, a};
    for (size_t i = 0; i < s->npeers; i++)
        if (s->peers[i].state != HCSTOR_DOWN)
            send_msg(s, &s->peers[i], EVHTTP_REQ_POST, "/internal/state", my_state(s), b,
                     after_announce);
    batch_step(s, b);
}

void hcstor_set_state(struct hcstor *s, enum hcstor_state st)
{
    if (s->state == st)
        return;
    hcstor_log(s, HCSTOR_INFO, "state %s -> %s", hcstor_state_name(s->state),
               hcstor_state_name(st));
    s->state = st;
}

/* ---- resync ---------------------------------------------------------------------------- */

int64_t hcstor_resync_pending(const struct hcstor *s)
{
    int64_t n = (int64_t)json_array_size(s->fetch_queue) + s->fetching;
    for (size_t i = 0; i < s->npeers; i++)
        n += s->peers[i].need_list || s->peers[i].listing;
    return n;
}

static void resync_check_done(struct hcstor *s)
{
    if (s->state != HCSTOR_RESYNCING || hcstor_resync_pending(s) > 0)
        return;
    hcstor_log(s, HCSTOR_INFO,
               "resync done: %" PRId64 " blocks fetched in %" PRId64
               " ms, at most %d at once (resync_parallelism %d)",
               s->resynced_keys, hc_mono_ms() - s->resync_started_ms, s->fetch_peak,
               s->set.resync_parallelism);
    hcstor_set_state(s, HCSTOR_SERVING);
    hcstor_announce(s, NULL);
}

struct fetch {
    struct hcstor *s;
    char key[HCSTOR_KEY_MAX + 1];
    char peer[HCSTOR_NAME_MAX];
    struct evhttp_connection *conn; /* the peer's fetch[slot], busy until the answer */
    int slot;
};

/* An idle fetch connection of p (opened when first needed, then kept like the data
 * connections): each in-flight fetch has its own, so the resync's parallelism is the number of
 * requests on the wire, not requests queued behind each other on a few connections. There is
 * always one: fewer than resync_parallelism <= HCSTOR_RESYNC_PARALLEL_MAX fetches are busy. */
static int fetch_slot(struct hcstor *s, struct hcstor_peer *p)
{
    for (int i = 0; i < HCSTOR_RESYNC_PARALLEL_MAX; i++) {
        if (p->fetch_busy[i])
            continue;
        if (!p->fetch[i] && !(p->fetch[i] = conn_new(s, p, HCSTOR_PEER_TIMEOUT_MS)))
            return -1;
        return i;
    }
    return -1;
}

static void fetch_next(struct hcstor *s);

static void fetch_done(struct evhttp_request *res, void *arg)
{
    struct fetch *f = arg;
    struct hcstor *s = f->s;
    struct hcstor_peer *p = hcstor_peer_by_name(s, f->peer);
    const char *vh =
        res ? evhttp_find_header(evhttp_request_get_input_headers(res), "X-Hcstor-Version") : NULL;
    int64_t v = vh ? strtoll(vh, NULL, 10) : 0;
    char why[300];
    s->fetching--;
    if (p && p->fetch[f->slot] == f->conn)
        p->fetch_busy[f->slot] = 0;
    if (response_code(res) == 200 && v > hcstor_store_version(s, f->key)) {
        struct evbuffer *b = evhttp_request_get_input_buffer(res);
        size_t n = evbuffer_get_length(b);
        if (hcstor_store_put(s, f->key, v, n ? evbuffer_pullup(b, -1) : (void *)"", n, why,
                             sizeof(why)) < 0)
            hcstor_log(s, HCSTOR_ERROR, "resync: %s", why);
        else {
            s->resynced_keys++;
            hcstor_log(s, HCSTOR_DEBUG, "resync: fetched '%s' version %" PRId64 " from %s", f->key,
                       v, f->peer);
        }
    } else if (!res && p) {
        hcstor_peer_mark_down(s, p);
        p->need_list = 1; /* list it again when it is back (or give up on it) */
    }
    free(f);
    fetch_next(s);
    resync_check_done(s);
}

static void fetch_next(struct hcstor *s)
{
    while (s->fetching < s->set.resync_parallelism && json_array_size(s->fetch_queue) > 0) {
        size_t last = json_array_size(s->fetch_queue) - 1;
        json_t *item = json_array_get(s->fetch_queue, last);
        const char *key = json_string_value(json_array_get(item, 0));
        struct hcstor_peer *p = hcstor_peer_by_name(s, json_string_value(json_array_get(item, 2)));
        int slot = p ? fetch_slot(s, p) : -1;
        struct fetch *f = key && slot >= 0 ? calloc(1, sizeof(*f)) : NULL;
        char uri[HCSTOR_KEY_MAX + 40];
        if (f) {
            *f = (struct fetch){s, "", "", p->fetch[slot], slot};
            snprintf(f->key, sizeof(f->key), "%s", key);
            snprintf(f->peer, sizeof(f->peer), "%s", p->name);
        }
        json_array_remove(s->fetch_queue, last); /* frees item */
        if (!f) {
            if (p)
                p->need_list = 1; /* out of memory: listed again later */
            continue;
        }
        snprintf(uri, sizeof(uri), "/internal/blocks/%s", f->key);
        if (hcstor_peer_request(s, f->conn, EVHTTP_REQ_GET, uri, NULL, 0, NULL, fetch_done, f) <
            0) {
            free(f);
            p->need_list = 1;
            continue;
        }
        p->fetch_busy[slot] = 1;
        if (++s->fetching > s->fetch_peak)
            s->fetch_peak = s->fetching;
    }
}

static void after_list(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                       int64_t sent_ms)
{
    json_t *j, *item;
    size_t i, queued = 0;
    int64_t now = hc_mono_ms();
    p->listing = 0;
    if (response_code(res) == 409) {
        /* It places blocks by an older members list than ours (the controller's new list has
         * not reached it yet): what it would list for us is incomplete. Ask again until it
         * has the list; give up after a while, and serve nothing shared with it until then. */
        if (!p->behind_since) {
            p->behind_since = now;
            hcstor_log(s, HCSTOR_INFO,
                       "resync from %s: its members list is older than ours, waiting", p->name);
        }
        if (now - p->behind_since < HCSTOR_BEHIND_GIVE_UP_MS) {
            p->need_list = 1;
        } else if (!p->behind) {
            p->behind = 1;
            hcstor_log(s, HCSTOR_WARN,
                       "resync: %s still has an older members list after %d ms; the blocks "
                       "it shares with this node are not served here until it is current",
                       p->name, HCSTOR_BEHIND_GIVE_UP_MS);
        }
        resync_check_done(s);
        return;
    }
    j = response_json(res);
    if (j)
        p->behind_since = p->behind = 0;
    if (!j) {
        hcstor_peer_mark_down(s, p);
        p->need_list = 1;
    } else {
        p->skipped = 0; /* its newer blocks are queued: the node serves once they are here */
    }
    json_array_foreach(json_object_get(j, "keys"), i, item)
    {
        const char *key = json_string_value(json_array_get(item, 0));
        int64_t v = json_integer_value(json_array_get(item, 1));
        if (key && hcstor_key_valid(key) && v > hcstor_store_version(s, key)) {
            json_array_append_new(s->fetch_queue,
                                  json_pack("[s, I, s]", key, (json_int_t)v, p->name));
            queued++;
        }
    }
    if (j)
        hcstor_log(s, HCSTOR_INFO, "resync from %s: %zu blocks listed, %zu to fetch", p->name,
                   json_array_size(json_object_get(j, "keys")), queued);
    json_decref(j);
    fetch_next(s);
    resync_check_done(s);
}

static void after_hello(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                        int64_t sent_ms)
{
    char uri[HCSTOR_NAME_MAX + 80];
    if (!res) {
        p->listing = 0;
        p->need_list = 1;
        hcstor_peer_mark_down(s, p);
        resync_check_done(s);
        return;
    }
    state_from_answer(p, res, INT64_MAX);
    snprintf(uri, sizeof(uri), "/internal/keys?for=%s&epoch=%" PRId64, s->node, s->peers_epoch);
    if (send_msg(s, p, EVHTTP_REQ_GET, uri, NULL, NULL, after_list) < 0) {
        p->listing = 0;
        p->need_list = 1;
    }
}

/* Starts listing every peer that must be listed and answers; skips those down too long. */
static void resync_step(struct hcstor *s)
{
    int64_t now = hc_mono_ms();
    for (size_t i = 0; i < s->npeers; i++) {
        struct hcstor_peer *p = &s->peers[i];
        if (!p->need_list || p->listing)
            continue;
        if (p->unreachable_since && now - p->unreachable_since > HCSTOR_RESYNC_GIVE_UP_MS) {
            hcstor_log(s, HCSTOR_WARN,
                       "resync: skipping %s, unreachable for %" PRId64 " ms; the blocks it "
                       "shares with this node are not served here until it is back",
                       p->name, now - p->unreachable_since);
            p->need_list = 0;
            p->skipped = 1;
            continue;
        }
        p->need_list = 0;
        p->listing = 1;
        if (send_msg(s, p, EVHTTP_REQ_POST, "/internal/hello", my_state(s), NULL, after_hello) <
            0) {
            p->listing = 0;
            p->need_list = 1;
        }
    }
    fetch_next(s);
    resync_check_done(s);
}

void hcstor_resync_kick(struct hcstor *s)
{
    if (s->state == HCSTOR_DRAINING)
        return;
    if (s->state != HCSTOR_RESYNCING) {
        s->resync_started_ms = hc_mono_ms();
        s->resynced_keys = 0;
        s->fetch_peak = 0;
    }
    hcstor_set_state(s, HCSTOR_RESYNCING);
    resync_step(s);
}

void hcstor_resync_all(struct hcstor *s)
{
    if (s->state == HCSTOR_DRAINING)
        return;
    for (size_t i = 0; i < s->npeers; i++)
        s->peers[i].need_list = 1; /* a listing in flight may predate what was missed: again */
    hcstor_resync_kick(s);
}

void hcstor_check_stall(struct hcstor *s)
{
    int64_t now = hc_mono_ms(), gap = now - s->loop_seen_ms;
    s->loop_seen_ms = now;
    if (gap < HCSTOR_STALL_MS || s->npeers == 0)
        return;
    /* Its peers' requests timed out meanwhile: they marked it down and wrote around it. It
     * cannot know which writes it missed, nor wait to be told (a peer tells it only after its
     * next probe): its copies may be stale, so it serves nothing before it has listed them. */
    hcstor_log(s, HCSTOR_WARN,
               "this node stalled for %" PRId64 " ms (stopped or starved): its peers may have "
               "written around it; resyncing from every peer",
               gap);
    hcstor_resync_all(s);
}

/* ---- the peers file -------------------------------------------------------------------- */

/* Freed once their pending requests completed: callbacks still run and find no peer. */
static void conn_close(struct evhttp_connection *c)
{
    if (c)
        evhttp_connection_free_on_completion(c);
}

static void peer_close(struct hcstor_peer *p)
{
    conn_close(p->ctl);
    for (int i = 0; i < HCSTOR_DATA_CONNS; i++) {
        conn_close(p->data[i]);
        conn_close(p->fwd[i]);
    }
    for (int i = 0; i < HCSTOR_RESYNC_PARALLEL_MAX; i++)
        conn_close(p->fetch[i]);
}

static int peer_open(struct hcstor *s, struct hcstor_peer *p)
{
    p->ctl = conn_new(s, p, HCSTOR_PEER_TIMEOUT_MS);
    for (int i = 0; i < HCSTOR_DATA_CONNS; i++) {
        p->data[i] = conn_new(s, p, HCSTOR_PEER_TIMEOUT_MS);
        p->fwd[i] = conn_new(s, p, HCSTOR_FORWARD_TIMEOUT_MS);
    }
    for (int i = 0; i < HCSTOR_DATA_CONNS; i++)
        if (!p->data[i] || !p->fwd[i])
            return -1;
    return p->ctl ? 0 : -1;
}

/* The members as they are now (this node first) become the previous members. */
static void members_save(struct hcstor *s)
{
    snprintf(s->prev[0], sizeof(s->prev[0]), "%s", s->node);
    snprintf(s->prev_domain[0], sizeof(s->prev_domain[0]), "%s", s->domain);
    for (size_t i = 0; i < s->npeers; i++) {
        snprintf(s->prev[i + 1], sizeof(s->prev[i + 1]), "%s", s->peers[i].name);
        snprintf(s->prev_domain[i + 1], sizeof(s->prev_domain[i + 1]), "%s", s->peers[i].domain);
    }
    s->nprev = s->npeers + 1;
    s->prev_rf = hcstor_effective_rf(s);
}

/* 1 when any member has a failure domain, now or before the latest change. */
static int domains_used(const struct hcstor *s)
{
    for (size_t i = 0; i < s->nprev; i++)
        if (s->prev_domain[i][0])
            return 1;
    for (size_t i = 0; i < s->npeers; i++)
        if (s->peers[i].domain[0])
            return 1;
    return s->domain[0] != '\0';
}

/* 1 when the latest change may have placed blocks here that were placed elsewhere before: a
 * member left, the replication factor grew, or a failure domain changed (the one-a-domain rule
 * can then pick any member). When members were only added and no member has a domain,
 * rendezvous hashing moves blocks to the new members and to no node that stays: what this node
 * serves is still all here. With domains, any change of members counts (a new member can make
 * its domain rank higher, which moves a block between members that stay). */
static int members_gain(const struct hcstor *s)
{
    if (hcstor_effective_rf(s) > s->prev_rf)
        return 1;
    if (strcmp(s->domain, s->prev_domain[0]) != 0)
        return 1;
    for (size_t i = 1; i < s->nprev; i++) {
        int at = peer_index(s, s->prev[i]);
        if (at < 0 || strcmp(s->peers[at].domain, s->prev_domain[i]) != 0)
            return 1;
    }
    return domains_used(s) && s->npeers + 1 != s->nprev;
}

static void relist_all(struct hcstor *s)
{
    for (size_t i = 0; i < s->npeers; i++)
        s->peers[i].need_list = 1;
}

/* Builds the new peer table, keeping what is known about peers that stay (same host). */
static int apply_members(struct hcstor *s, json_t *nodes)
{
    static struct hcstor_peer next[HCSTOR_PEERS_MAX];
    size_t n = 0, i;
    json_t *node;
    int kept[HCSTOR_PEERS_MAX] = {0};
    json_array_foreach(nodes, i, node)
    {
        const char *name = json_string_value(json_object_get(node, "name"));
        const char *host = json_string_value(json_object_get(node, "host"));
        const char *domain = json_string_value(json_object_get(node, "domain"));
        if (!domain || strlen(domain) >= HCSTOR_NAME_MAX)
            domain = "";
        if (name && !strcmp(name, s->node))
            snprintf(s->domain, sizeof(s->domain), "%s", domain);
        if (!name || !host || !strcmp(name, s->node) || strlen(name) >= HCSTOR_NAME_MAX ||
            n == HCSTOR_PEERS_MAX)
            continue;
        struct hcstor_peer *old = hcstor_peer_by_name(s, name);
        if (old && !strcmp(old->host, host)) {
            next[n] = *old; /* with its resync flags: members_reload decides what is listed */
            kept[old - s->peers] = 1;
        } else {
            memset(&next[n], 0, sizeof(next[n]));
            snprintf(next[n].name, sizeof(next[n].name), "%s", name);
            snprintf(next[n].host, sizeof(next[n].host), "%s", host);
            next[n].port = s->port;
            if (peer_open(s, &next[n]) < 0)
                return -1;
        }
        snprintf(next[n].domain, sizeof(next[n].domain), "%s", domain);
        n++;
    }
    for (i = 0; i < s->npeers; i++)
        if (!kept[i])
            peer_close(&s->peers[i]);
    memcpy(s->peers, next, n * sizeof(next[0]));
    s->npeers = n;
    return 0;
}

/* Re-reads the peers file when it changed; returns 1 when the membership was (re)loaded. */
static int load_peers(struct hcstor *s)
{
    struct stat st;
    json_error_t jerr;
    if (stat(s->peers_path, &st) < 0 || (st.st_mtim.tv_sec == s->peers_mtime.tv_sec &&
                                         st.st_mtim.tv_nsec == s->peers_mtime.tv_nsec))
        return 0;
    s->peers_mtime = st.st_mtim;
    json_t *j = json_load_file(s->peers_path, 0, &jerr);
    json_t *nodes = json_object_get(j, "nodes");
    if (!json_is_array(nodes)) {
        hcstor_log(s, HCSTOR_WARN, "ignoring %s: %s", s->peers_path,
                   j ? "no \"nodes\" array" : jerr.text);
        json_decref(j);
        return 0;
    }
    if (json_integer_value(json_object_get(j, "replication")) > 0)
        s->replication = (int)json_integer_value(json_object_get(j, "replication"));
    s->peers_epoch = json_integer_value(json_object_get(j, "epoch"));
    members_save(s);
    s->domain[0] = '\0'; /* this node's entry in the list sets it again */
    int rc = apply_members(s, nodes);
    json_decref(j);
    if (rc < 0) {
        hcstor_log(s, HCSTOR_ERROR, "cannot apply %s: out of memory", s->peers_path);
        return 0;
    }
    hcstor_log(s, HCSTOR_INFO,
               "members (epoch %" PRId64 "): this node and %zu peers in %zu failure domain(s), "
               "replication %d",
               s->peers_epoch, s->npeers, hcstor_domain_count(s), hcstor_effective_rf(s));
    return 1;
}

int hcstor_members_reload(struct hcstor *s)
{
    if (!load_peers(s))
        return 0;
    if (members_gain(s) || s->state != HCSTOR_SERVING) {
        relist_all(s);
        hcstor_resync_kick(s);
    } else {
        /* Nothing to fetch: the new members resync from us, and the copies that moved to them
         * are dropped here once they hold them (drops below). */
        hcstor_log(s, HCSTOR_INFO, "%s: no block is newly placed on this node, serving on",
                   s->npeers + 1 > s->nprev ? "members added" : "the same members");
    }
    return 1;
}

/* ---- drops: copies this node no longer owns ---------------------------------------------- */

int64_t hcstor_stale_copies(const struct hcstor *s)
{
    const char *key;
    json_t *v;
    int64_t n = 0;
    json_object_foreach(s->index, key, v) n += !hcstor_is_replica(s, key);
    return n;
}

/* 1 when p is one of key's replicas. */
static int owns(const struct hcstor *s, const struct hcstor_peer *p, const char *key)
{
    int r[HCSTOR_PEERS_MAX + 1];
    size_t n = hcstor_replicas(s, key, r, HC_ARRAY_LEN(r));
    for (size_t i = 0; i < n; i++)
        if (r[i] >= 0 && &s->peers[r[i]] == p)
            return 1;
    return 0;
}

/* An owner's answer: each key it holds at our version or newer counts once, and only from a
 * node that owns the key (no other's word makes a copy safe to drop). */
static void after_holds(struct hcstor *s, struct hcstor_peer *p, struct evhttp_request *res,
                        int64_t sent_ms)
{
    json_t *j = response_json(res), *seen = json_object(), *k, *e;
    size_t i;
    json_array_foreach(json_object_get(j, "held"), i, k)
    {
        const char *key = json_string_value(k);
        if (!key || !s->drop_round || !(e = json_object_get(s->drop_round, key)) ||
            json_object_get(seen, key) || !owns(s, p, key))
            continue;
        json_object_set_new(seen, key, json_true());
        json_array_set_new(e, 2, json_integer(json_integer_value(json_array_get(e, 2)) + 1));
    }
    json_decref(seen);
    json_decref(j);
}

/* Every owner answered (or failed): drops each copy that all of its owners hold, unless the
 * members changed meanwhile or a newer version arrived here since the question. */
static void drop_finish(struct hcstor *s, void *arg)
{
    json_t *round = s->drop_round, *e;
    const char *key;
    char why[300];
    int64_t n = 0;
    (void)arg;
    s->drop_round = NULL;
    if (s->drop_epoch != s->peers_epoch || s->state != HCSTOR_SERVING) {
        json_decref(round);
        return;
    }
    json_object_foreach(round, key, e)
    {
        int64_t v = json_integer_value(json_array_get(e, 0));
        if (json_integer_value(json_array_get(e, 1)) != json_integer_value(json_array_get(e, 2)) ||
            hcstor_store_version(s, key) != v || hcstor_is_replica(s, key))
            continue;
        if (hcstor_store_drop(s, key, why, sizeof(why)) < 0) {
            hcstor_log(s, HCSTOR_ERROR, "drop: %s", why);
            continue;
        }
        n++;
        hcstor_log(s, HCSTOR_DEBUG, "dropped '%s' version %" PRId64 ": every owner holds it", key,
                   v);
    }
    s->dropped += n;
    if (n)
        hcstor_log(s, HCSTOR_INFO,
                   "dropped %" PRId64 " copies placed on other members, each held by all of "
                   "its owners (%" PRId64 " stale left, %" PRId64 " dropped in all)",
                   n, hcstor_stale_copies(s), s->dropped);
    json_decref(round);
}

/* The next round: up to HCSTOR_DROP_BATCH copies held here that the members place elsewhere,
 * each owner asked which of them it holds. Only while serving, and only once every peer has
 * our members list: until then a peer may still serve the block from here by the old list. */
static void drop_stale(struct hcstor *s)
{
    json_t *ask[HCSTOR_PEERS_MAX] = {0}, *v;
    const char *key;
    int r[HCSTOR_PEERS_MAX + 1];
    size_t total = 0, at = 0, start, taken = 0;
    if (s->drop_round || s->state != HCSTOR_SERVING || !hcstor_members_settled(s) ||
        (total = (size_t)hcstor_stale_copies(s)) == 0)
        return;
    start = s->drop_cursor % total; /* rounds move on: a copy no owner confirms starves none */
    s->drop_round = json_object();
    s->drop_epoch = s->peers_epoch;
    json_object_foreach(s->index, key, v)
    {
        size_t n, down = 0;
        if (hcstor_is_replica(s, key) || at++ < start || taken == HCSTOR_DROP_BATCH)
            continue;
        taken++;
        n = hcstor_replicas(s, key, r, HC_ARRAY_LEN(r));
        for (size_t i = 0; i < n; i++)
            down += s->peers[r[i]].state == HCSTOR_DOWN;
        if (down)
            continue; /* an owner that does not answer cannot say it holds it */
        json_object_set_new(s->drop_round, key, json_pack("[O, I, i]", v, (json_int_t)n, 0));
        for (size_t i = 0; i < n; i++) {
            if (!ask[r[i]])
                ask[r[i]] = json_array();
            json_array_append_new(ask[r[i]], json_pack("[s, O]", key, v));
        }
    }
    s->drop_cursor = start + taken;
    struct batch *b = calloc(1, sizeof(*b));
    if (!b) {
        for (size_t i = 0; i < s->npeers; i++)
            json_decref(ask[i]);
        json_decref(s->drop_round);
        s->drop_round = NULL;
        return;
    }
    *b = (struct batch){1, drop_finish, NULL}; /* the extra count is released below */
    for (size_t i = 0; i < s->npeers; i++)
        if (ask[i])
            send_msg(s, &s->peers[i], EVHTTP_REQ_POST, "/internal/holds",
                     json_pack("{s:s, s:I, s:o}", "node", s->node, "epoch",
                               (json_int_t)s->peers_epoch, "keys", ask[i]),
                     b, after_holds);
    batch_step(s, b);
}

void hcstor_holds_answer(struct hcstor *s, struct evhttp_request *req, json_t *body)
{
    json_t *held, *item;
    size_t i;
    int64_t epoch = json_integer_value(json_object_get(body, "epoch"));
    if (epoch != s->peers_epoch) {
        /* Placed by another list, the asker may be asking the wrong owners. */
        hcstor_reply_error(req, HC_E(MEMBERS_BEHIND),
                           "the asker's members list (epoch %" PRId64
                           ") is not this node's (%" PRId64 ")",
                           epoch, s->peers_epoch);
        return;
    }
    hcstor_store_flush(s); /* "holds" means durably, with fsync=batch too */
    held = json_array();
    json_array_foreach(json_object_get(body, "keys"), i, item)
    {
        const char *key = json_string_value(json_array_get(item, 0));
        int64_t v = json_integer_value(json_array_get(item, 1));
        if (key && v > 0 && hcstor_store_version(s, key) >= v)
            json_array_append_new(held, json_string(key));
    }
    hcstor_reply_json(req, 200, json_pack("{s:s, s:o}", "node", s->node, "held", held));
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct hcstor *s = arg;
    (void)fd;
    (void)what;
    hcstor_check_stall(s);
    hcstor_members_reload(s);
    for (size_t i = 0; i < s->npeers; i++)
        if (!s->peers[i].probing)
            probe(s, &s->peers[i], NULL);
    if (s->state == HCSTOR_RESYNCING)
        resync_step(s);
    drop_stale(s);
}

int hcstor_cluster_init(struct hcstor *s)
{
    struct timeval tv = {0, HCSTOR_TICK_MS * 1000};
    s->fetch_queue = json_array();
    s->tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
    if (!s->fetch_queue || !s->tick || event_add(s->tick, &tv) < 0)
        return -1;
    load_peers(s);
    relist_all(s);
    s->state = HCSTOR_RESYNCING;
    s->resync_started_ms = s->loop_seen_ms = hc_mono_ms();
    resync_step(s); /* with no peers this is done at once */
    return 0;
}
