/*
 * The health poller (see poller.h). Each cycle: read the nodes, fan out GET /v1/status and
 * GET /v1/interfaces to all agents at once, then record every answer in one transaction.
 *
 * A node is 'reachable' when /v1/status answered 200 with a JSON object; anything else is
 * 'unreachable' with the reason in health_detail, except the MTU stall (issue 4): each cycle
 * also sends every agent's UDP echo responder (port 7445, management address) one small probe
 * and two DF probes of the path's MTU, from one non-blocking socket, before the fan-out, and
 * reads the echoes after it (waiting at most POLLER_ECHO_WAIT_MS more, only for echoes a verdict
 * depends on). A node whose HTTPS request times out while the small probe is echoed and the big
 * ones are not, or whose big probes vanish while the rest answers, is 'stalled': small packets
 * pass, full-size TCP segments vanish, and new SSH and HTTPS sessions to it hang. The thread owns
 * its database connection, its agent client and its echo socket; nothing else touches them.
 */
#include "controller/remote/poller.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/constants.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/api/metrics.h"
#include "controller/ops/ops.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/ca_rotate.h"
#include "controller/remote/cert_renew.h"
#include "controller/remote/config_repair.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"
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
    int echo_fd;             /* UDP socket of the echo probes; -1 when it could not be made */
    uint32_t echo_base;      /* sequence number of this cycle's first probe */
    unsigned char *echo_buf; /* POLLER_ECHO_MAX bytes */
    int64_t
        cycle_ms[HC_POLLER_CYCLE_WINDOW]; /* the last cycles' durations, a ring; guarded by mu */
    uint64_t cycle_count;                 /* guarded by mu */
    int64_t pruned_mono_ms;               /* when the events were last pruned */
    long echo_room;                       /* receive buffer asked for the echo socket */
    long echo_room_warned;
};

/* What one poll learnt about one node. */
struct poller_verdict {
    const char *health; /* reachable | unreachable | stalled */
    char detail[640];   /* why, when not reachable */
};

/* --- UDP echo probes: the MTU stall ---------------------------------------------------------- */

#define POLLER_ECHO_MAGIC "HCP1" /* + 4-byte sequence number, network order */
#define POLLER_ECHO_SMALL 64     /* IPv4 packet size of the small probe */
#define POLLER_ECHO_BIG_MIN 1280 /* a smaller path MTU leaves nothing to tell apart */
#define POLLER_ECHO_MAX 65535
#define POLLER_ECHO_KINDS 3       /* per node: one small probe, two big ones */
#define POLLER_ECHO_WAIT_MS 200   /* after the fan-out, only for echoes a verdict depends on */
#define POLLER_ECHO_TRUESIZE 1024 /* the kernel's bookkeeping of one datagram, beyond its bytes */
#define POLLER_ECHO_ROOM_MAX (256L * 1024 * 1024)

/* One node's echo probes in this cycle. */
struct poller_echo {
    struct in_addr addr;
    int valid;     /* the management address is IPv4: probes were sent */
    int big_size;  /* IPv4 packet size of the big probes; 0 when none went out */
    int mtu_known; /* big_size is bounded by the node's own interface MTU */
    int small_ok, big_ok;
};

static int poller_echo_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int df = IP_PMTUDISC_DO;
    if (fd < 0)
        return -1;
    /* DF: the big probes must arrive whole or not at all, exactly as a TCP segment would. */
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The MTU of the controller's route toward addr (its PMTU cache included), 0 when unknown. */
static int poller_route_mtu(struct in_addr addr)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(HC_PORT_PROBE), .sin_addr = addr};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), mtu = 0;
    socklen_t len = sizeof(mtu);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0)
        mtu = 0;
    close(fd);
    return mtu;
}

static int poller_echo_send1(struct hc_poller *p, struct in_addr addr, uint32_t seq, int size)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(HC_PORT_PROBE), .sin_addr = addr};
    uint32_t net = htonl(seq);
    memcpy(p->echo_buf, POLLER_ECHO_MAGIC, 4);
    memcpy(p->echo_buf + 4, &net, 4);
    return sendto(p->echo_fd, p->echo_buf, (size_t)(size - HC_IPV4_UDP_HEADERS), MSG_DONTWAIT,
                  (struct sockaddr *)&sa, sizeof(sa)) < 0
               ? -1
               : 0;
}

/* The big probes' size: the path MTU, which is the smaller of the controller's route MTU and
 * the node's own management interface MTU (when the poller has learnt it). */
static void poller_echo_size(struct poller_echo *e, int64_t node_mtu)
{
    int big = poller_route_mtu(e->addr);
    e->mtu_known = node_mtu > 0;
    if (node_mtu > 0 && (big == 0 || node_mtu < big))
        big = (int)node_mtu;
    if (big > POLLER_ECHO_MAX)
        big = POLLER_ECHO_MAX;
    e->big_size = big >= POLLER_ECHO_BIG_MIN ? big : 0;
}

/* Reads every echo waiting on the socket and marks the node and probe it answers. */
static void poller_echo_drain(struct hc_poller *p, struct poller_echo *echo, size_t n)
{
    for (;;) {
        struct sockaddr_in from;
        socklen_t flen = sizeof(from);
        uint32_t seq;
        ssize_t len = recvfrom(p->echo_fd, p->echo_buf, POLLER_ECHO_MAX, MSG_DONTWAIT,
                               (struct sockaddr *)&from, &flen);
        if (len < 0 && errno == EINTR)
            continue;
        if (len < 0)
            return;
        if (len < 8 || memcmp(p->echo_buf, POLLER_ECHO_MAGIC, 4) != 0)
            continue;
        memcpy(&seq, p->echo_buf + 4, 4);
        uint32_t off = ntohl(seq) - p->echo_base; /* echoes of earlier cycles fall outside */
        if (off >= POLLER_ECHO_KINDS * n)
            continue;
        struct poller_echo *e = &echo[off / POLLER_ECHO_KINDS];
        int big = off % POLLER_ECHO_KINDS != 0;
        int size = big ? e->big_size : POLLER_ECHO_SMALL;
        if (!e->valid || from.sin_addr.s_addr != e->addr.s_addr ||
            len != size - HC_IPV4_UDP_HEADERS)
            continue;
        if (big)
            e->big_ok = 1;
        else
            e->small_ok = 1;
    }
}

/* Sends this cycle's probes; echo has one entry per node. */
/* The echoes are read after the fan-out, so the socket must hold a whole cycle's: a small and
 * two full-size datagrams a node (at 1,000 nodes and MTU 9000, ~36 MB as the kernel counts them,
 * far beyond the default net.core.rmem_max of 208 KB, where all but a few dozen nodes' big
 * echoes were lost and the nodes judged stalled). SO_RCVBUFFORCE as root, else as much as
 * rmem_max allows, with a warning naming the sysctl. */
static void poller_echo_room(struct hc_poller *p, const json_t *nodes)
{
    const json_t *node;
    size_t i;
    long need = 64 * 1024;
    json_array_foreach(nodes, i, node)
    {
        long mtu = hc_json_int(node, "mgmt_mtu", 0);
        need += 3 * POLLER_ECHO_TRUESIZE + 2 * (mtu > 0 && mtu < POLLER_ECHO_MAX ? mtu : 9000);
    }
    if (need > POLLER_ECHO_ROOM_MAX)
        need = POLLER_ECHO_ROOM_MAX;
    if (need <= p->echo_room)
        return;
    int want = (int)need, have = 0;
    socklen_t len = sizeof(have);
    if (setsockopt(p->echo_fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) != 0)
        setsockopt(p->echo_fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
    getsockopt(p->echo_fd, SOL_SOCKET, SO_RCVBUF, &have, &len);
    /* the kernel reports twice what was set (its bookkeeping share) */
    if (have / 2 < want && p->echo_room_warned < want) {
        HC_WARN("poller: the echo socket holds %d bytes, a cycle of %zu nodes needs %d: big "
                "echoes will be lost and nodes judged stalled; raise net.core.rmem_max",
                have / 2, json_array_size(nodes), want);
        p->echo_room_warned = want;
    }
    p->echo_room = have / 2 > want ? have / 2 : want;
}

static void poller_echo_send(struct hc_poller *p, const json_t *nodes, struct poller_echo *echo)
{
    const json_t *node;
    size_t i, n = json_array_size(nodes);
    if (p->echo_fd < 0)
        return;
    poller_echo_drain(p, echo, 0); /* late echoes of the previous cycle */
    p->echo_base += (uint32_t)(POLLER_ECHO_KINDS * (n + 1));
    poller_echo_room(p, nodes);
    json_array_foreach(nodes, i, node)
    {
        struct poller_echo *e = &echo[i];
        if (inet_pton(AF_INET, hc_json_str(node, "address", ""), &e->addr) != 1)
            continue; /* a name or IPv6: no echo probes (the stall then shows as unreachable) */
        e->valid = 1;
        poller_echo_size(e, hc_json_int(node, "mgmt_mtu", 0));
        uint32_t seq = p->echo_base + (uint32_t)(POLLER_ECHO_KINDS * i);
        poller_echo_send1(p, e->addr, seq, POLLER_ECHO_SMALL);
        for (uint32_t k = 1; k < POLLER_ECHO_KINDS && e->big_size; k++)
            if (poller_echo_send1(p, e->addr, seq + k, e->big_size) < 0)
                e->big_size = 0; /* EMSGSIZE: a PMTU cache entry knows better */
    }
}

static int poller_timed_out(const struct hc_http_call *status)
{
    return !status->ok && strcmp(status->err.code, HC_ERR_TIMEOUT) == 0;
}

/* 1 while node i's verdict still depends on an echo that has not arrived. */
static int poller_echo_pending(const struct poller_echo *e, const struct hc_http_call *status)
{
    if (!e->valid)
        return 0;
    if (poller_timed_out(status) && !e->small_ok)
        return 1;
    return e->small_ok && e->big_size && !e->big_ok && (poller_timed_out(status) || e->mtu_known);
}

static void poller_echo_collect(struct hc_poller *p, struct poller_echo *echo,
                                const struct hc_http_call *calls, size_t n, int64_t sent_ms)
{
    if (p->echo_fd < 0)
        return;
    for (;;) {
        int pending = 0;
        poller_echo_drain(p, echo, n);
        for (size_t i = 0; i < n && !pending; i++)
            pending = poller_echo_pending(&echo[i], &calls[2 * i]);
        int64_t left = sent_ms + POLLER_ECHO_WAIT_MS - hc_mono_ms();
        if (!pending || left <= 0)
            return;
        struct pollfd pfd = {.fd = p->echo_fd, .events = POLLIN};
        poll(&pfd, 1, (int)left);
    }
}

/* HTTPS answered but full-size packets vanish: judged only when the probes' size came from the
 * node's own interface MTU (a probe bigger than its NIC is no evidence). */
static int poller_big_lost(const struct poller_echo *e)
{
    return e && e->valid && e->small_ok && e->big_size && !e->big_ok && e->mtu_known;
}

static void poller_judge_timeout(const struct hc_http_call *status, const struct poller_echo *e,
                                 struct poller_verdict *v)
{
    if (e && e->valid && e->small_ok && !e->big_ok) {
        v->health = "stalled";
        if (e->big_size)
            snprintf(v->detail, sizeof(v->detail),
                     "answers small packets but large TCP segments "
                     "vanish: suspected MTU blackhole on the path (UDP echo: %d bytes answered, "
                     "%d bytes lost; HTTPS: no answer within %ld ms)",
                     POLLER_ECHO_SMALL, e->big_size, status->timeout_ms);
        else
            snprintf(v->detail, sizeof(v->detail),
                     "answers small packets but large TCP segments "
                     "vanish: suspected MTU blackhole on the path (UDP echo answered; HTTPS: no "
                     "answer within %ld ms)",
                     status->timeout_ms);
        return;
    }
    snprintf(v->detail, sizeof(v->detail), "no answer within %ld ms: %s%s", status->timeout_ms,
             status->err.message,
             e && e->small_ok ? " (it answers UDP echo even at full size: "
                                "its agent is hung or overloaded)"
                              : "");
}

/* Judges the /v1/status call and the echo probes (e may be NULL) of node name. */
static void poller_judge(const char *name, const struct hc_http_call *status,
                         const struct poller_echo *e, struct poller_verdict *v)
{
    const char *reported = status->ok ? hc_json_str(status->resp.body, "node_name", NULL) : NULL;
    v->detail[0] = '\0';
    v->health = "unreachable";
    if (poller_timed_out(status)) {
        poller_judge_timeout(status, e, v);
    } else if (!status->ok) {
        snprintf(v->detail, sizeof(v->detail), "%s", status->err.message);
    } else if (status->resp.status != 200 || !json_is_object(status->resp.body)) {
        snprintf(v->detail, sizeof(v->detail), "agent answered GET /v1/status with HTTP %ld%s",
                 status->resp.status, json_is_object(status->resp.body) ? "" : " and no JSON");
    } else if (reported && strcmp(reported, name) != 0) {
        /* The TLS pin already refuses any other key; this catches an agent that holds this
         * node's key but was configured as another node. */
        snprintf(v->detail, sizeof(v->detail),
                 "the agent answering at this node's address says "
                 "it is node '%.64s': nothing it reports is recorded",
                 reported);
    } else if (poller_big_lost(e)) {
        v->health = "stalled";
        snprintf(v->detail, sizeof(v->detail),
                 "answers small packets but %d-byte packets vanish: "
                 "suspected MTU blackhole on the path (HTTPS still answers on an open connection; "
                 "new SSH and HTTPS sessions to it will hang)",
                 e->big_size);
    } else {
        v->health = "reachable";
    }
}

/* A TLS failure toward a node whose certificate has ended: the detail says so, and how to
 * recover (docs/certificates.md "Expired"). */
static void poller_cert_expired(struct hc_db *db, int64_t id, const char *name, int64_t now,
                                struct poller_verdict *v)
{
    struct hc_node_row row;
    int64_t not_after = 0;
    if (hc_node_row_get_id(db, id, &row, &(struct hc_error){0}) == 1)
        not_after = row.cert_not_after;
    hc_node_row_clear(&row);
    if (!not_after || not_after > now)
        return;
    char when[40];
    hc_time_format(not_after, when, sizeof(when));
    snprintf(v->detail, sizeof(v->detail),
             "its certificate expired at %s: renew it with 'hcctl node renew-cert %s'", when, name);
}

/* The agent answered: record what it said, with health reachable or (big packets lost)
 * stalled. */
/* A string the agent reported, as stored: no control characters (an escape sequence would
 * reach every terminal that shows it), valid UTF-8 cut to the column's size; NULL stays NULL. */
#define POLLER_CLEAN(buf, obj, key) hc_text_clean(buf, sizeof(buf), hc_json_str(obj, key, NULL))

/* A non-negative integer the agent reported, HC_NODE_UNREPORTED when it did not (an older
 * agent) or sent something else. */
static int64_t poller_reported(const json_t *body, const char *key)
{
    const json_t *v = json_object_get(body, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v)
                                                            : HC_NODE_UNREPORTED;
}

/* The agent's clock minus the controller's: its time_ms was read somewhere between the request
 * and the answer, so it is compared with their midpoint (the error is at most half the poll's
 * latency, far below the checks' 2 s threshold). */
static int64_t poller_clock_offset(const json_t *body, const struct hc_http_call *st)
{
    int64_t t = poller_reported(body, "time_ms");
    return t == HC_NODE_UNREPORTED ? t : t - (st->finished_wall_ms - st->elapsed_ms / 2);
}

static int poller_store_status(struct hc_db *db, int64_t node_id, const struct hc_http_call *st,
                               const struct poller_verdict *v, int64_t now, struct hc_error *err)
{
    const json_t *b = st->resp.body;
    char service_buf[32], version[128], previous[128], agent_version[128], hostname[256],
        cert_serial[48], ca_digest[72];
    const char *service = POLLER_CLEAN(service_buf, json_object_get(b, "service"), "state");
    const json_t *healthy = json_object_get(json_object_get(b, "service"), "healthy");
    if (!json_is_boolean(healthy))
        healthy = NULL;
    /* The agent is the truth about what runs: its current and rollback versions (null when
     * none) replace whatever an operation wrote. */
    /* ...unless an operation learnt something newer after this poll was sent. */
    struct hc_node_poll p = {.health = v->health,
                             .health_detail = v->detail[0] ? v->detail : NULL,
                             .service_state = service,
                             .software_version = POLLER_CLEAN(version, b, "software_version"),
                             .previous_software_version =
                                 POLLER_CLEAN(previous, b, "previous_software_version"),
                             .asked_at = now - st->elapsed_ms,
                             .agent_version = POLLER_CLEAN(agent_version, b, "agent_version"),
                             .agent_api_version = poller_reported(b, "api_version"),
                             .hostname = POLLER_CLEAN(hostname, b, "hostname"),
                             .uptime_s = hc_json_int(b, "uptime_seconds", -1),
                             .latency_ms = (int64_t)st->elapsed_ms,
                             .now = now,
                             .clock_offset_ms = poller_clock_offset(b, st),
                             .data_dir_free_bytes = poller_reported(b, "data_dir_free_bytes"),
                             .data_dir_total_bytes = poller_reported(b, "data_dir_total_bytes"),
                             .service_healthy = healthy ? json_is_true(healthy) : -1,
                             .agent_cert_serial = POLLER_CLEAN(cert_serial, b, "cert_serial"),
                             .agent_ca_digest = POLLER_CLEAN(ca_digest, b, "ca_digest")};
    return hc_node_store_poll(db, node_id, &p, err);
}

static int poller_store_iface(struct hc_db *db, int64_t node_id, const json_t *iface, int64_t now,
                              struct hc_error *err)
{
    char name_buf[64], state[32], kind[32], master[64];
    const char *name = POLLER_CLEAN(name_buf, iface, "name");
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
                       POLLER_CLEAN(state, iface, "state") ? state : "unknown",
                       POLLER_CLEAN(kind, iface, "kind"), POLLER_CLEAN(master, iface, "master"),
                       addresses ? addresses : "[]", now);
    free(addresses);
    return rc < 0 ? -1 : 0;
}

/* Replaces the node's interfaces with the agent's list. Upsert, then delete the rows this
 * cycle did not touch, so that columns the poller does not own (role) survive. */
static int poller_store_ifaces(struct hc_db *db, int64_t node_id, const struct hc_http_call *ifc,
                               int64_t now, struct hc_error *err)
{
    const json_t *list = ifc ? json_object_get(ifc->resp.body, "interfaces") : NULL;
    const json_t *iface;
    size_t i;
    if (!ifc || !ifc->ok || ifc->resp.status != 200 || !json_is_array(list))
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

/* Records one node's answers (status, interfaces) inside the caller's transaction; echo may be
 * NULL (no echo probes: no stall verdict). */
static int poller_record(struct hc_db *db, int64_t id, const char *name, const char *agent_url,
                         const struct hc_http_call *status, const struct hc_http_call *ifaces,
                         const struct poller_echo *echo, struct hc_config_cycle *cfg, int64_t now,
                         struct hc_error *err)
{
    struct poller_verdict v;
    int rc = -1;
    poller_judge(name, status, echo, &v);
    hc_text_clean(v.detail, sizeof(v.detail), v.detail); /* may quote the agent's words */
    if (!status->ok && strcmp(status->err.code, HC_ERR_TLS) == 0)
        poller_cert_expired(db, id, name, now, &v);
    /* Read the old health inside the transaction: the node may have been removed or changed
     * since the cycle started. */
    char from[32];
    int found = hc_node_health_get(db, id, from, sizeof(from), err);
    if (found <= 0)
        return found;                         /* 0: removed while we polled */
    if (strcmp(v.health, "unreachable") != 0) /* answered, and as this node */
        rc = poller_store_status(db, id, status, &v, now, err) < 0 ||
                     poller_store_ifaces(db, id, ifaces, now, err) != 0 ||
                     hc_config_cycle_node(cfg, db, name, agent_url, status->resp.body, err) < 0
                 ? -1
                 : 0;
    else {
        /* A failure learnt by a call sent before the node last answered (a cycle that began
         * while cluster create's own call saw it enroll) is old news: it changes nothing. */
        int changed =
            hc_node_set_unanswered(db, id, v.health, v.detail, now - status->elapsed_ms, err);
        rc = changed < 0 || hc_config_node_unreachable(db, name, err) < 0 ? -1 : 0;
        if (changed == 0)
            return 0;
    }
    if (rc == 0 && strcmp(from, v.health) != 0) {
        HC_INFO("node %s: %s -> %s%s%s", name, from, v.health, v.detail[0] ? ": " : "", v.detail);
        rc = poller_health_event(db, name, from, &v, err);
    }
    /* An operation that paused until this node answers carries on now: also when the poller
     * never saw it unreachable (the call that paused it timed out while /v1/status answered). */
    if (rc == 0 && strcmp(v.health, "reachable") == 0)
        rc = hc_ops_resume_for_node(db, name, err);
    return rc;
}

int hc_poller_record(struct hc_db *db, int64_t node_id, const char *node_name,
                     const struct hc_http_call *status, const struct hc_http_call *ifaces,
                     int64_t now_ms, struct hc_error *err)
{
    struct hc_config_cycle cfg;
    hc_config_cycle_begin(&cfg, db);
    int rc = poller_record(db, node_id, node_name, "", status, ifaces, NULL, &cfg, now_ms, err);
    hc_config_cycle_end(&cfg);
    return rc;
}

/* One call of hc_poller_ask; 0 when the URL could not be made (why says so). */
static int poller_ask1(struct hc_http_client *client, const char *agent_url, const char *path,
                       long timeout_ms, char *url, size_t url_len, struct hc_http_call *call,
                       char *why, size_t why_len)
{
    struct hc_error e = {0};
    if (hc_agent_url(url, url_len, agent_url, path, &e) != 0) {
        snprintf(why, why_len, "%s", e.message);
        return 0;
    }
    *call = (struct hc_http_call){.method = "GET", .url = url, .timeout_ms = timeout_ms};
    hc_http_fanout(client, call, 1, 1);
    return 1;
}

int hc_poller_ask(struct hc_db *db, struct hc_http_client *client, int64_t node_id,
                  const char *node_name, const char *agent_url, long timeout_ms, char *why,
                  size_t why_len, struct hc_error *err)
{
    struct hc_http_call status = {0}, ifaces = {0};
    char url[2048];
    int rc = 0;
    why[0] = '\0';
    if (!poller_ask1(client, agent_url, "/v1/status", timeout_ms, url, sizeof(url), &status, why,
                     why_len))
        return 0;
    if (!status.ok) {
        snprintf(why, why_len, "%s", status.err.message);
    } else if (status.resp.status != 200 || !json_is_object(status.resp.body)) {
        snprintf(why, why_len, "agent answered GET /v1/status with HTTP %ld", status.resp.status);
    } else {
        /* Second request on the connection the first one opened (the client keeps it). */
        char url2[2048], ignored[8];
        poller_ask1(client, agent_url, "/v1/interfaces", timeout_ms, url2, sizeof(url2), &ifaces,
                    ignored, sizeof(ignored));
        int listed = ifaces.ok && ifaces.resp.status == 200 &&
                     json_is_array(json_object_get(ifaces.resp.body, "interfaces"));
        if (hc_db_begin(db, err) != 0) {
            rc = -1;
        } else {
            struct hc_config_cycle cfg;
            hc_config_cycle_begin(&cfg, db);
            if (poller_record(db, node_id, node_name, agent_url, &status, &ifaces, NULL, &cfg,
                              hc_now_ms(), err) != 0 ||
                hc_db_commit(db, err) != 0) {
                hc_db_rollback(db);
                rc = -1;
            }
            hc_config_cycle_end(&cfg);
        }
        if (rc == 0 && !listed) {
            snprintf(why, why_len, "no interface list: %s",
                     ifaces.ok ? "unexpected answer to "
                                 "GET /v1/interfaces"
                               : ifaces.err.message);
        } else if (rc == 0) {
            rc = 1;
        }
    }
    hc_http_response_clear(&status.resp);
    hc_http_response_clear(&ifaces.resp);
    return rc;
}

static void poller_store(struct hc_poller *p, const json_t *nodes, struct hc_http_call *calls,
                         const struct poller_echo *echo)
{
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    const json_t *node;
    size_t i;
    struct hc_config_cycle cfg;
    if (hc_db_begin(p->db, &err) != 0) {
        HC_WARN("poller cannot record the poll: %s", err.message);
        return;
    }
    hc_config_cycle_begin(&cfg, p->db);
    json_array_foreach(nodes, i, node)
    {
        hc_metrics_agent_poll(calls[2 * i].ok && calls[2 * i].resp.status == 200,
                              (int64_t)calls[2 * i].elapsed_ms); /* for /metrics */
        /* SQLite undoes only the failed statement: one bad answer does not lose the others. */
        if (poller_record(p->db, hc_json_int(node, "id", 0), hc_json_str(node, "name", "?"),
                          hc_json_str(node, "agent_url", ""), &calls[2 * i], &calls[2 * i + 1],
                          echo ? &echo[i] : NULL, &cfg, now, &err) != 0)
            HC_WARN("poller cannot record node %s: %s", hc_json_str(node, "name", "?"),
                    err.message);
    }
    if (hc_db_commit(p->db, &err) != 0) {
        HC_WARN("poller cannot record the poll: %s", err.message);
        hc_db_rollback(p->db);
    } else {
        hc_config_cycle_repair(&cfg, p->db, p->client, hc_agent_timeout_ms(p->ctl));
    }
    hc_config_cycle_end(&cfg);
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
    /* mgmt_mtu: the MTU of the node's interface that carries its management address. */
    json_t *nodes = hc_db_query_json(
        p->db, &err,
        "SELECT n.id, n.name, n.agent_url, n.address, (SELECT MIN(i.mtu) FROM interfaces i "
        "WHERE i.node_id = n.id AND i.addresses_json LIKE '%\"' || n.address || '/%') AS mgmt_mtu "
        "FROM nodes n ORDER BY n.name",
        "");
    size_t n = json_array_size(nodes);
    struct hc_http_call *calls = NULL;
    struct poller_echo *echo = NULL;
    char **urls = NULL;
    if (!nodes) {
        HC_WARN("poller cannot read the nodes: %s", err.message);
        return;
    }
    if (n == 0)
        goto cleanup;
    calls = calloc(2 * n, sizeof(*calls));
    urls = calloc(2 * n, sizeof(*urls));
    echo = calloc(n, sizeof(*echo));
    if (!calls || !urls || !echo || poller_prepare(p, nodes, calls, urls) != 0) {
        HC_WARN("poller cannot prepare the calls to %zu agents", n);
        goto cleanup;
    }
    int64_t t0 = hc_mono_ms();
    poller_echo_send(p, nodes, echo);
    size_t parallel = hc_nofile_share(4, HC_POLLER_MIN_PARALLEL);
    size_t answered =
        hc_http_fanout(p->client, calls, 2 * n,
                       parallel < HC_POLLER_MAX_PARALLEL ? parallel : HC_POLLER_MAX_PARALLEL);
    poller_echo_collect(p, echo, calls, n, t0);
    HC_DEBUG("poller: fan-out to %zu agents took %lld ms (%zu of %zu calls answered)", n,
             (long long)(hc_mono_ms() - t0), answered, 2 * n);
    poller_store(p, nodes, calls, echo);
cleanup:
    for (size_t i = 0; calls && urls && i < 2 * n; i++) {
        hc_http_response_clear(&calls[i].resp);
        free(urls[i]);
    }
    free(calls);
    free(urls);
    free(echo);
    json_decref(nodes);
}

/* Waits until deadline (monotonic ms) or a stop. Returns 1 when stopping. */
static int poller_wait(struct hc_poller *p, int64_t deadline_ms)
{
    struct timespec until = {.tv_sec = deadline_ms / 1000,
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    int stopping;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && !hc_stop_requested(&p->ctl->stopping) && hc_mono_ms() < deadline_ms) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0)
            break;
    }
    stopping = p->stopping || hc_stop_requested(&p->ctl->stopping);
    pthread_mutex_unlock(&p->mu);
    return stopping;
}

/* Every HC_POLLER_PRUNE_EVERY_MS: the events older than the retention go (a bounded number
 * per pass, so that a first prune of a large log does not hold a cycle back for long). */
static void poller_prune_events(struct hc_poller *p)
{
    int64_t now = hc_mono_ms();
    if (p->ctl->events_retention_ms <= 0 ||
        (p->pruned_mono_ms && now - p->pruned_mono_ms < HC_POLLER_PRUNE_EVERY_MS))
        return;
    p->pruned_mono_ms = now;
    struct hc_error err = {0};
    int64_t removed = hc_events_prune(p->db, hc_now_ms() - p->ctl->events_retention_ms,
                                      HC_POLLER_PRUNE_BATCHES, &err);
    if (removed < 0)
        HC_WARN("poller cannot prune the events: %s", err.message);
    else if (removed > 0)
        HC_INFO("events retention: %lld events removed", (long long)removed);
}

static void poller_cycle_done(struct hc_poller *p, int64_t ms)
{
    pthread_mutex_lock(&p->mu);
    p->cycle_ms[p->cycle_count % HC_POLLER_CYCLE_WINDOW] = ms;
    p->cycle_count++;
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_add(&p->cycles, 1);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int hc_poller_cycle_stats(struct hc_poller *p, struct hc_poller_cycle_stats *out)
{
    int64_t v[HC_POLLER_CYCLE_WINDOW];
    memset(out, 0, sizeof(*out));
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    size_t n =
        p->cycle_count < HC_POLLER_CYCLE_WINDOW ? (size_t)p->cycle_count : HC_POLLER_CYCLE_WINDOW;
    memcpy(v, p->cycle_ms, n * sizeof(v[0]));
    if (n)
        out->last_ms = p->cycle_ms[(p->cycle_count - 1) % HC_POLLER_CYCLE_WINDOW];
    pthread_mutex_unlock(&p->mu);
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        out->sum_ms += v[i];
    qsort(v, n, sizeof(v[0]), cmp_i64);
    out->p50_ms = v[(n - 1) / 2];
    out->p99_ms = v[(n * 99 + 99) / 100 - 1];
    return (int)n;
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
        poller_cycle_done(p, hc_mono_ms() - start);
        /* a CA rotation's step, renewals and expiry warnings, from what this cycle learnt
         * (ca_rotate.h, cert_renew.h) */
        hc_ca_rotate_cycle(p->ctl, p->db, p->client);
        hc_cert_renew_cycle(p->ctl, p->db, p->client);
        poller_prune_events(p);
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
    if (p->echo_fd >= 0)
        close(p->echo_fd);
    free(p->echo_buf);
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
        hc_error_set(err, HC_E(INTERNAL), "cannot allocate the poller");
        return NULL;
    }
    p->ctl = ctl;
    p->echo_fd = -1;
    atomic_init(&p->cycles, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* deadlines come from hc_mono_ms */
    pthread_cond_init(&p->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (!(p->db = hc_db_open(ctl->db_path, err)) ||
        !(p->client = hc_agent_client_new(ctl, p->db, err)))
        goto cleanup;
    /* Without the echo socket the poller still works; the MTU stall then shows as unreachable. */
    if (!(p->echo_buf = calloc(1, POLLER_ECHO_MAX)) || (p->echo_fd = poller_echo_socket()) < 0)
        HC_WARN("poller: no UDP echo probes (%s): MTU stalls show as 'unreachable'",
                strerror(errno));
    if (pthread_create(&p->thread, NULL, poller_main, p) != 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot start the poller thread");
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
