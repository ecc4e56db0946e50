/*
 * The probe responder and the DF prober (agents/hcagent/probe.h).
 *
 * Responder: one UDP socket on port 7445 with IP_PKTINFO, read from the agent's event loop. A
 * probe (hc_probe_packet_parse) sent to a unicast address of this node, from an unprivileged port
 * that is not a responder's, within its source's rate, is echoed with the same length, from
 * that address (ipi_spec_dst), with DF set: a version 2 probe as a reply ("HCR1"), a version 1
 * probe byte for byte. Everything else is dropped and counted.
 *
 * Prober: one connected, non-blocking UDP socket per target with IP_MTU_DISCOVER =
 * IP_PMTUDISC_DO (DF, and the kernel refuses what exceeds its path MTU with EMSGSIZE) and
 * IP_RECVERR (ICMP errors arrive on the socket's error queue with the MTU they name). All
 * targets advance together in one poll loop, round by round:
 *   classify  the full-size probe and a small one (576) at once: echo of the full size -> ok;
 *             too big -> frag_needed; full size lost but small echoed -> blackhole; small
 *             lost too, or ICMP unreachable / refused -> unreachable;
 *   search    for failing targets: up to 16 sizes strictly between the largest echoed size and
 *             the smallest failed one, at once (a k-ary search: 3 to 5 rounds from 576..9000
 *             where a binary search needs 14), until they are adjacent.
 * Each round lasts until every probe of the target is answered or failed, at most timeout_ms;
 * each probe is sent `attempts` times spread over that time.
 *
 * What the kernel does, and therefore what is measured:
 *   - Linux caches a path MTU learnt from ICMP "fragmentation needed" per destination (a route
 *     exception, about 10 minutes). A later probe bigger than that fails locally with EMSGSIZE:
 *     it is reported as frag_needed with path_mtu = the cached value (IP_MTU of the connected
 *     socket), which is also what TCP toward that node uses until the entry expires.
 *   - veth and bridge ports accept up to 4 bytes over their MTU on receive (is_skb_forwardable
 *     allows mtu + hard_header_len + VLAN_HLEN): behind a 1500 port a 1504-byte packet passes.
 *     The search reports the largest size that was echoed (1504 there), not a configured MTU.
 */
#include "agents/hcagent/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* Socket buffers: a search round sends up to 16 jumbo probes at once, several times. The kernel
 * caps the request at net.core.[rw]mem_max; retries cover what is still dropped. */
#define PROBE_SOCKBUF (1024 * 1024)
#define RESPONDER_BATCH 64
#define MAX_SLOTS 16
#define SEARCH_FANOUT 15 /* sizes per search round, besides the one just below the failure */
#define MAX_ATTEMPTS 10
#define WINDOW 256 /* targets (sockets) in flight at once */
#define CANCEL_MS 100

union cmsg_buf {
    char buf[512];
    struct cmsghdr align;
};

const char *hc_probe_verdict_name(enum hc_probe_verdict v)
{
    static const char *const names[] = {"ok", "frag_needed", "blackhole", "unreachable",
                                        "neighbor_unresolved"};
    return (unsigned)v < HC_ARRAY_LEN(names) ? names[v] : "unreachable";
}

static int set_int_opt(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof(value));
}

/* ================================================================ packets */

int hc_probe_packet_parse(const uint8_t *buf, size_t len, struct hc_probe_packet *out)
{
    if (!buf || len < 8 || len > HC_PROBE_MAX_SIZE - HC_IPV4_UDP_HEADERS)
        return -1;
    int marked = len >= HC_PROBE_V2_HEADER && memcmp(buf + 8, HC_PROBE_V2_MARK, 4) == 0;
    if (memcmp(buf, HC_PROBE_MAGIC, 4) == 0)
        out->type = marked ? HC_PROBE_PKT_PROBE_V2 : HC_PROBE_PKT_PROBE_V1;
    else if (memcmp(buf, HC_PROBE_REPLY_MAGIC, 4) == 0 && marked)
        out->type = HC_PROBE_PKT_REPLY;
    else
        return -1;
    out->version = out->type == HC_PROBE_PKT_PROBE_V1 ? 1 : 2;
    uint32_t seq;
    memcpy(&seq, buf + 4, 4);
    out->seq = ntohl(seq);
    out->length = len;
    return 0;
}

/* ================================================================ responder */

/* One source address's token bucket; tokens in thousandths of a probe. */
struct rate_entry {
    uint32_t addr; /* network order; 0: free */
    int64_t tokens;
    int64_t last_ms;
};

struct rate_bucket {
    int64_t tokens;
    int64_t last_ms;
};

#define RATE_SCALE 1000
#define RATE_PROBE_WINDOW 8 /* slots looked at from an address's hash before evicting */

struct hc_probe_responder {
    int fd;
    int port;
    struct event *ev;
    uint64_t echoes;
    uint64_t ignored;
    uint64_t limited;
    struct rate_bucket global;
    struct rate_entry sources[HC_PROBE_RATE_SOURCES];
    unsigned char buf[HC_PROBE_MAX_SIZE];
};

/* Refills b at per_s probes a second up to burst, then takes one probe. 1 when there was one. */
static int bucket_take(int64_t *tokens, int64_t *last_ms, int64_t now, int64_t per_s, int64_t burst)
{
    int64_t elapsed = now - *last_ms;
    if (elapsed > 0) {
        /* capped first: a bucket idle for days must not overflow the product */
        int64_t full_ms = burst * 1000 / per_s + 1;
        *tokens += (elapsed < full_ms ? elapsed : full_ms) * per_s;
        if (*tokens > burst * RATE_SCALE)
            *tokens = burst * RATE_SCALE;
        *last_ms = now;
    }
    if (*tokens < RATE_SCALE)
        return 0;
    *tokens -= RATE_SCALE;
    return 1;
}

/* The source's entry: found, a free slot, or the least recently seen one of its window
 * (evicted, starting with a full bucket). The table never grows. */
static struct rate_entry *rate_entry(struct hc_probe_responder *r, uint32_t addr, int64_t now)
{
    uint32_t h = ntohl(addr) * 2654435761u; /* Knuth's multiplicative hash */
    struct rate_entry *victim = NULL;
    for (unsigned i = 0; i < RATE_PROBE_WINDOW; i++) {
        struct rate_entry *e = &r->sources[(h + i) % HC_PROBE_RATE_SOURCES];
        if (e->addr == addr)
            return e;
        if (!victim || (victim->addr && (!e->addr || e->last_ms < victim->last_ms)))
            victim = e;
    }
    victim->addr = addr;
    victim->tokens = (int64_t)HC_PROBE_RATE_BURST * RATE_SCALE;
    victim->last_ms = now;
    return victim;
}

/* 1 when a probe from addr may be answered now. */
static int rate_admit(struct hc_probe_responder *r, uint32_t addr)
{
    int64_t now = hc_mono_ms();
    struct rate_entry *e = rate_entry(r, addr, now);
    if (!bucket_take(&e->tokens, &e->last_ms, now, HC_PROBE_RATE_PER_S, HC_PROBE_RATE_BURST))
        return 0;
    if (!bucket_take(&r->global.tokens, &r->global.last_ms, now, HC_PROBE_RATE_GLOBAL_PER_S,
                     HC_PROBE_RATE_GLOBAL_BURST)) {
        e->tokens += RATE_SCALE; /* not this source's fault */
        return 0;
    }
    return 1;
}

static const struct in_pktinfo *find_pktinfo(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c))
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)
            return (const struct in_pktinfo *)CMSG_DATA(c);
    return NULL;
}

/* Only probes are answered, never replies, and only probes sent to one of our unicast addresses:
 * for a broadcast the kernel's "specific destination" (our interface address) differs from the
 * header's destination, and answering broadcasts would turn the responder into an amplifier.
 * Nothing from a responder's port (HC_PORT_PROBE, or ours) is answered: probers send from
 * ephemeral ports, so such a datagram is an echo (of a version 1 probe, which carries no reply
 * mark) or forged to start a ping-pong. Privileged ports are refused too: no loops with the
 * echo or chargen services, nor answers aimed at DNS or NTP servers; and sources that cannot be
 * a prober's address. */
static int is_echoable(const struct hc_probe_responder *r, size_t n, const struct sockaddr_in *peer,
                       const struct in_pktinfo *pi, struct hc_probe_packet *pkt)
{
    if (hc_probe_packet_parse(r->buf, n, pkt) < 0 || pkt->type == HC_PROBE_PKT_REPLY || !pi ||
        peer->sin_family != AF_INET)
        return 0;
    int port = ntohs(peer->sin_port);
    if (port < 1024 || port == HC_PORT_PROBE || port == r->port)
        return 0;
    /* a source no prober has: "this network" (an answer would come back to us), multicast,
     * broadcast */
    uint32_t src = ntohl(peer->sin_addr.s_addr);
    if ((src >> 24) == 0 || IN_MULTICAST(src) || src == INADDR_BROADCAST)
        return 0;
    return pi->ipi_addr.s_addr == pi->ipi_spec_dst.s_addr &&
           !IN_MULTICAST(ntohl(pi->ipi_addr.s_addr));
}

static void responder_echo(struct hc_probe_responder *r, size_t len, struct sockaddr_in *peer,
                           const struct in_pktinfo *pi)
{
    union cmsg_buf cbuf;
    memset(&cbuf, 0, sizeof(cbuf));
    struct iovec iov = {r->buf, len};
    struct msghdr msg = {.msg_name = peer,
                         .msg_namelen = sizeof(*peer),
                         .msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cbuf.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
    /* The source address of the reply: the address the probe was sent to. ipi_ifindex 0
     * leaves the outgoing interface to the routing table. */
    struct in_pktinfo out = {.ipi_ifindex = 0, .ipi_spec_dst = pi->ipi_addr};
    memcpy(CMSG_DATA(c), &out, sizeof(out));
    if (sendmsg(r->fd, &msg, MSG_DONTWAIT) < 0) {
        /* EMSGSIZE: the way back is narrower than the probe; the prober sees the loss. */
        char addr[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &peer->sin_addr, addr, sizeof(addr));
        HC_DEBUG("probe responder: cannot echo %zu bytes to %s: %s", len + HC_IPV4_UDP_HEADERS,
                 addr, strerror(errno));
        return;
    }
    r->echoes++;
}

static void responder_read(evutil_socket_t fd, short what, void *arg)
{
    struct hc_probe_responder *r = arg;
    for (int i = 0; i < RESPONDER_BATCH; i++) {
        struct sockaddr_in peer;
        union cmsg_buf cbuf;
        struct iovec iov = {r->buf, sizeof(r->buf)};
        struct msghdr msg = {.msg_name = &peer,
                             .msg_namelen = sizeof(peer),
                             .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cbuf.buf,
                             .msg_controllen = sizeof(cbuf.buf)};
        ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                HC_DEBUG("probe responder: recvmsg: %s", strerror(errno));
            return;
        }
        const struct in_pktinfo *pi = find_pktinfo(&msg);
        struct hc_probe_packet pkt;
        if (!is_echoable(r, (size_t)n, &peer, pi, &pkt)) {
            r->ignored++;
            continue;
        }
        if (!rate_admit(r, peer.sin_addr.s_addr)) {
            r->limited++;
            continue;
        }
        /* A version 1 prober only takes "HCP1" back; a version 2 one knows the reply magic. */
        if (pkt.type == HC_PROBE_PKT_PROBE_V2)
            memcpy(r->buf, HC_PROBE_REPLY_MAGIC, 4);
        responder_echo(r, (size_t)n, &peer, pi);
    }
}

static int responder_socket(const char *addr, int port, struct hc_error *err)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (addr && inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "invalid probe responder address '%s': expected an IPv4 address", addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot open the probe responder socket: %s",
                            strerror(errno));
    if (set_int_opt(fd, IPPROTO_IP, IP_PKTINFO, 1) < 0 ||
        set_int_opt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO) < 0) {
        hc_error_set(err, HC_E(IO), "cannot set up the probe responder socket: %s",
                     strerror(errno));
        close(fd);
        return -1;
    }
    set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, PROBE_SOCKBUF);
    set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, PROBE_SOCKBUF);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        hc_error_set(err, HC_E(IO), "cannot bind the probe responder to %s:%d (udp): %s",
                     addr ? addr : "0.0.0.0", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

struct hc_probe_responder *hc_probe_responder_new(struct event_base *base, const char *addr,
                                                  int port, struct hc_error *err)
{
    struct hc_probe_responder *r = calloc(1, sizeof(*r));
    if (!r) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    r->fd = responder_socket(addr, port == 0 ? HC_PORT_PROBE : port < 0 ? 0 : port, err);
    if (r->fd < 0)
        goto fail;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    if (getsockname(r->fd, (struct sockaddr *)&sin, &len) < 0) {
        hc_error_set(err, HC_E(IO), "probe responder: getsockname: %s", strerror(errno));
        goto fail;
    }
    r->port = ntohs(sin.sin_port);
    r->global.tokens = (int64_t)HC_PROBE_RATE_GLOBAL_BURST * RATE_SCALE;
    r->global.last_ms = hc_mono_ms();
    r->ev = event_new(base, r->fd, EV_READ | EV_PERSIST, responder_read, r);
    if (!r->ev || event_add(r->ev, NULL) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot add the probe responder to the loop");
        goto fail;
    }
    return r;
fail:
    hc_probe_responder_free(r);
    return NULL;
}

void hc_probe_responder_free(struct hc_probe_responder *r)
{
    if (!r)
        return;
    if (r->ev)
        event_free(r->ev);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

int hc_probe_responder_port(const struct hc_probe_responder *r)
{
    return r->port;
}

uint64_t hc_probe_responder_echoes(const struct hc_probe_responder *r)
{
    return r->echoes;
}

uint64_t hc_probe_responder_ignored(const struct hc_probe_responder *r)
{
    return r->ignored;
}

uint64_t hc_probe_responder_limited(const struct hc_probe_responder *r)
{
    return r->limited;
}

/* ================================================================ prober */

enum slot_state { SLOT_WAIT = 0, SLOT_OK, SLOT_LOST, SLOT_TOOBIG };
enum phase { PHASE_CLASSIFY, PHASE_SEARCH, PHASE_DONE };

/* One probe size in the current round. */
struct slot {
    int size;
    enum slot_state state;
    int sent;
    int64_t sent_us[MAX_ATTEMPTS];
    double rtt_ms;
};

/* One target's progress. lo/hi bound the search: lo was echoed (or is HC_PROBE_MIN_SIZE - 1
 * when nothing was), hi failed. */
struct tstate {
    struct hc_probe_target *t;
    int fd;
    enum phase phase;
    uint16_t round;
    int64_t round_start;
    int nslots;
    struct slot slots[MAX_SLOTS];
    int lo, hi;
    int small_ok;
    int mtu_hint;                    /* MTU named by ICMP or the kernel's path MTU; 0 = none */
    char icmp_from[INET_ADDRSTRLEN]; /* the hop that named mtu_hint; "" = the local kernel */
    int unreachable;                 /* ICMP unreachable, refused, no route: stop */
    char why[200];
};

struct prober {
    int port;
    int timeout_ms;
    int attempts;
    int interval_ms;
    int small;
    int search;
    struct in_addr source;
    const struct hc_stop *cancel;
    unsigned char *buf; /* payload scratch, HC_PROBE_MAX_SIZE */
};

static const char *addr_text(struct in_addr a, char *buf)
{
    return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static void mark_unreachable(struct tstate *ts, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mark_unreachable(struct tstate *ts, const char *fmt, ...)
{
    if (ts->unreachable)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ts->why, sizeof(ts->why), fmt, ap);
    va_end(ap);
    ts->unreachable = 1;
}

/* The kernel's path MTU toward the connected destination (the route's MTU, or a value cached
 * from an earlier ICMP). 0 when unknown. */
static int sock_mtu(int fd)
{
    int mtu = 0;
    socklen_t len = sizeof(mtu);
    if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) < 0)
        return 0;
    return mtu;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Records the MTU that a failure named. What a hop said (ICMP, icmp_from non-empty) wins over
 * the local kernel's path MTU, which may just repeat it from its cache. */
static void set_mtu_hint(struct tstate *ts, int mtu, const char *icmp_from)
{
    if (mtu <= 0 || (ts->mtu_hint && !icmp_from[0] && (ts->icmp_from[0] || ts->mtu_hint <= mtu)))
        return;
    ts->mtu_hint = mtu;
    snprintf(ts->icmp_from, sizeof(ts->icmp_from), "%s", icmp_from);
}

/* Every waiting probe bigger than mtu is bound to fail: the kernel refuses it or a hop named
 * that MTU. */
static void fail_above(struct tstate *ts, int mtu)
{
    for (int i = 0; i < ts->nslots; i++)
        if (ts->slots[i].state == SLOT_WAIT && ts->slots[i].size > mtu)
            ts->slots[i].state = SLOT_TOOBIG;
}

/* An old router may name no MTU (0): the kernel's estimate is then the best we have. */
static void on_frag_needed(struct tstate *ts, int mtu, const char *offender)
{
    if (mtu <= 0)
        mtu = sock_mtu(ts->fd);
    set_mtu_hint(ts, mtu, offender);
    if (mtu > 0)
        fail_above(ts, mtu);
}

static const char *icmp_unreach_name(int code)
{
    switch (code) {
    case ICMP_NET_UNREACH:
        return "network unreachable";
    case ICMP_HOST_UNREACH:
        return "host unreachable";
    case ICMP_PROT_UNREACH:
        return "protocol unreachable";
    case ICMP_NET_ANO:
    case ICMP_HOST_ANO:
    case ICMP_PKT_FILTERED:
        return "administratively prohibited";
    default:
        return "destination unreachable";
    }
}

/* One queued error: ICMP from the path, or a local error (EMSGSIZE with the MTU in ee_info). */
static void on_ext_err(struct prober *p, struct tstate *ts, const struct sock_extended_err *ee)
{
    char off[INET_ADDRSTRLEN] = "?";
    const struct sockaddr_in *o = (const struct sockaddr_in *)SO_EE_OFFENDER(ee);
    if (o->sin_family == AF_INET)
        addr_text(o->sin_addr, off);
    if (ee->ee_origin == SO_EE_ORIGIN_LOCAL) {
        if (ee->ee_errno == EMSGSIZE) {
            set_mtu_hint(ts, (int)ee->ee_info, "");
            fail_above(ts, (int)ee->ee_info);
        } else if (ee->ee_errno != EAGAIN && ee->ee_errno != ENOBUFS)
            mark_unreachable(ts, "%s", strerror((int)ee->ee_errno));
        return;
    }
    if (ee->ee_origin != SO_EE_ORIGIN_ICMP)
        return;
    if (ee->ee_type == ICMP_DEST_UNREACH && ee->ee_code == ICMP_FRAG_NEEDED)
        on_frag_needed(ts, (int)ee->ee_info, off);
    else if (ee->ee_type == ICMP_DEST_UNREACH && ee->ee_code == ICMP_PORT_UNREACH)
        mark_unreachable(ts, "connection refused: no probe responder on port %d (ICMP from %s)",
                         p->port, off);
    else if (ee->ee_type == ICMP_DEST_UNREACH)
        mark_unreachable(ts, "ICMP %s from %s", icmp_unreach_name(ee->ee_code), off);
    else if (ee->ee_type == ICMP_TIME_EXCEEDED)
        mark_unreachable(ts, "ICMP time exceeded from %s (routing loop?)", off);
}

/* Reads the socket's error queue, then clears the pending socket error so that it does not
 * fail the next send (the kernel reports it once more through SO_ERROR otherwise). */
static void drain_errors(struct prober *p, struct tstate *ts)
{
    for (int i = 0; i < 64; i++) {
        unsigned char data[64];
        union cmsg_buf cbuf;
        struct sockaddr_in from;
        struct iovec iov = {data, sizeof(data)};
        struct msghdr msg = {.msg_name = &from,
                             .msg_namelen = sizeof(from),
                             .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cbuf.buf,
                             .msg_controllen = sizeof(cbuf.buf)};
        if (recvmsg(ts->fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            break;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR)
                on_ext_err(p, ts, (const struct sock_extended_err *)CMSG_DATA(c));
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    getsockopt(ts->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
}

static void on_send_error(struct prober *p, struct tstate *ts, struct slot *s, int e)
{
    switch (e) {
    case EMSGSIZE:
        s->state = SLOT_TOOBIG;
        set_mtu_hint(ts, sock_mtu(ts->fd), "");
        break;
    case ECONNREFUSED:
        mark_unreachable(ts, "connection refused: no probe responder on port %d", p->port);
        break;
    case EAGAIN:
    case ENOBUFS:
    case EINTR:
        break; /* counted as a lost attempt: the next one retries */
    default:
        mark_unreachable(ts, "cannot send a probe: %s", strerror(e));
    }
}

static void send_slot(struct prober *p, struct tstate *ts, int idx)
{
    struct slot *s = &ts->slots[idx];
    uint32_t seq = htonl(((uint32_t)ts->round << 16) | ((uint32_t)idx << 8) | (uint32_t)s->sent);
    size_t len = (size_t)(s->size - HC_IPV4_UDP_HEADERS);
    memcpy(p->buf, HC_PROBE_MAGIC, 4);
    memcpy(p->buf + 4, &seq, 4);
    /* The version 2 mark where it fits (a current responder then answers "HCR1"); in the
     * smallest probes the padding byte pattern stays, and they go out as version 1. */
    if (len >= HC_PROBE_V2_HEADER)
        memcpy(p->buf + 8, HC_PROBE_V2_MARK, 4);
    else
        for (size_t i = 8; i < HC_PROBE_V2_HEADER; i++)
            p->buf[i] = (unsigned char)(i * 31 + 7);
    s->sent_us[s->sent++] = mono_us();
    ts->t->sent++;
    if (send(ts->fd, p->buf, len, MSG_DONTWAIT) >= 0)
        return;
    /* A socket error left by an earlier ICMP fails the next send with that error: read the
     * queue (which records what the ICMP said) and try once more. */
    drain_errors(p, ts);
    if (s->state != SLOT_WAIT || ts->unreachable)
        return;
    s->sent_us[s->sent - 1] = mono_us();
    if (send(ts->fd, p->buf, len, MSG_DONTWAIT) < 0)
        on_send_error(p, ts, s, errno);
}

/* Sends the attempts that are due: attempt k of a round goes out at round_start + k * interval. */
static void send_due(struct prober *p, struct tstate *ts, int64_t now)
{
    for (int i = 0; i < ts->nslots && !ts->unreachable; i++) {
        struct slot *s = &ts->slots[i];
        if (s->state == SLOT_WAIT && s->sent < p->attempts &&
            now >= ts->round_start + (int64_t)s->sent * p->interval_ms)
            send_slot(p, ts, i);
    }
}

static int64_t next_event(const struct prober *p, const struct tstate *ts)
{
    int64_t next = ts->round_start + p->timeout_ms;
    for (int i = 0; i < ts->nslots; i++) {
        const struct slot *s = &ts->slots[i];
        int64_t at = ts->round_start + (int64_t)s->sent * p->interval_ms;
        if (s->state == SLOT_WAIT && s->sent < p->attempts && at < next)
            next = at;
    }
    return next;
}

static void read_replies(struct prober *p, struct tstate *ts)
{
    for (;;) {
        ssize_t n = recv(ts->fd, p->buf, HC_PROBE_MAX_SIZE, MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                drain_errors(p, ts); /* a pending socket error surfaced here */
            return;
        }
        /* A current responder answers "HCR1"; a version 1 one sends the probe back as it was:
         * both are the echo (the sequence number and the length tell whose). */
        struct hc_probe_packet pkt;
        if (hc_probe_packet_parse(p->buf, (size_t)n, &pkt) < 0)
            continue;
        uint32_t seq = pkt.seq;
        unsigned idx = (seq >> 8) & 0xff, attempt = seq & 0xff;
        if ((seq >> 16) != ts->round || idx >= (unsigned)ts->nslots)
            continue; /* an echo from an earlier round */
        struct slot *s = &ts->slots[idx];
        if (n != s->size - HC_IPV4_UDP_HEADERS || attempt >= (unsigned)s->sent ||
            s->state == SLOT_OK)
            continue;
        s->state = SLOT_OK;
        s->rtt_ms = (double)(mono_us() - s->sent_us[attempt]) / 1000.0;
    }
}

static void start_round(struct tstate *ts, const int *sizes, int n)
{
    ts->round++;
    ts->round_start = hc_mono_ms();
    ts->nslots = n;
    memset(ts->slots, 0, sizeof(ts->slots));
    for (int i = 0; i < n; i++)
        ts->slots[i].size = sizes[i];
}

/* Up to MAX_SLOTS sizes strictly between lo and hi: hi - 1 first (right at once when a hop named
 * its MTU), then SEARCH_FANOUT evenly spaced ones. */
static int search_sizes(int lo, int hi, int *out)
{
    int n = 0, span = hi - lo;
    int k = span - 1 < SEARCH_FANOUT ? span - 1 : SEARCH_FANOUT;
    out[n++] = hi - 1;
    for (int i = 1; i <= k && n < MAX_SLOTS; i++) {
        int s = lo + (int)((int64_t)span * i / (k + 1));
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= out[j] == s;
        if (s > lo && s < hi && !dup)
            out[n++] = s;
    }
    return n;
}

/* 1 when the round has an answer for every probe (or the full size passed in classify). */
static int round_done(const struct prober *p, struct tstate *ts, int64_t now)
{
    if (ts->unreachable)
        return 1;
    if (ts->phase == PHASE_CLASSIFY && ts->slots[0].state == SLOT_OK)
        return 1;
    int waiting = 0;
    for (int i = 0; i < ts->nslots; i++)
        waiting += ts->slots[i].state == SLOT_WAIT;
    if (waiting && now < ts->round_start + p->timeout_ms)
        return 0;
    for (int i = 0; i < ts->nslots; i++)
        if (ts->slots[i].state == SLOT_WAIT)
            ts->slots[i].state = SLOT_LOST;
    return 1;
}

static void finish(struct tstate *ts, enum hc_probe_verdict v)
{
    ts->t->result = v;
    ts->phase = PHASE_DONE;
}

/* The final verdict of a target whose full-size probe failed. */
static void finish_failed(const struct prober *p, struct tstate *ts)
{
    struct hc_probe_target *t = ts->t;
    char a[INET_ADDRSTRLEN];
    addr_text(t->addr, a);
    t->largest_ok = ts->lo >= HC_PROBE_MIN_SIZE && p->search ? ts->lo : 0;
    if (ts->mtu_hint) {
        t->path_mtu = ts->mtu_hint;
        if (ts->icmp_from[0])
            snprintf(t->detail, sizeof(t->detail),
                     "%d bytes do not fit: ICMP fragmentation needed from %s names mtu %d", t->size,
                     ts->icmp_from, ts->mtu_hint);
        else
            snprintf(t->detail, sizeof(t->detail),
                     "%d bytes do not fit: the kernel's path mtu toward %s is %d (EMSGSIZE; the "
                     "outgoing interface's mtu, or one learnt from ICMP and cached)",
                     t->size, a, ts->mtu_hint);
        finish(ts, HC_PROBE_FRAG_NEEDED);
        return;
    }
    snprintf(t->detail, sizeof(t->detail),
             "no echo for %d bytes within %d ms (%d tries) while %d bytes pass: a hop with a "
             "smaller MTU drops big frames silently",
             t->size, p->timeout_ms, p->attempts, p->small);
    finish(ts, HC_PROBE_BLACKHOLE);
}

static void begin_search(const struct prober *p, struct tstate *ts)
{
    ts->lo = ts->small_ok ? p->small : HC_PROBE_MIN_SIZE - 1;
    ts->hi = ts->t->size;
    if (ts->mtu_hint && ts->mtu_hint + 1 < ts->hi)
        ts->hi = ts->mtu_hint + 1;
    if (!p->search || ts->hi - ts->lo <= 1) {
        finish_failed(p, ts);
        return;
    }
    int sizes[MAX_SLOTS];
    ts->phase = PHASE_SEARCH;
    start_round(ts, sizes, search_sizes(ts->lo, ts->hi, sizes));
}

static void after_classify(const struct prober *p, struct tstate *ts)
{
    struct hc_probe_target *t = ts->t;
    const struct slot *big = &ts->slots[0];
    if (big->state == SLOT_OK) {
        t->rtt_ms = big->rtt_ms;
        t->largest_ok = t->size;
        snprintf(t->detail, sizeof(t->detail), "echo of %d bytes in %.3f ms", t->size, big->rtt_ms);
        finish(ts, HC_PROBE_OK);
        return;
    }
    const struct slot *small = ts->nslots > 1 ? &ts->slots[1] : big;
    ts->small_ok = ts->nslots > 1 && small->state == SLOT_OK;
    if (ts->unreachable || (!ts->small_ok && small->state != SLOT_TOOBIG)) {
        if (!ts->unreachable)
            snprintf(ts->why, sizeof(ts->why), "no echo for %d bytes within %d ms (%d tries)",
                     small->size, p->timeout_ms, p->attempts);
        snprintf(t->detail, sizeof(t->detail), "%s", ts->why);
        finish(ts, HC_PROBE_UNREACHABLE);
        return;
    }
    begin_search(p, ts);
}

/* Narrows lo/hi with the round's answers. A failure below an echoed size (a lost retry) does
 * not count: the echo proves the size passes. */
static void after_search_round(const struct prober *p, struct tstate *ts)
{
    for (int i = 0; i < ts->nslots; i++)
        if (ts->slots[i].state == SLOT_OK && ts->slots[i].size > ts->lo)
            ts->lo = ts->slots[i].size;
    for (int i = 0; i < ts->nslots; i++)
        if (ts->slots[i].state != SLOT_OK && ts->slots[i].size > ts->lo &&
            ts->slots[i].size < ts->hi)
            ts->hi = ts->slots[i].size;
    if (ts->unreachable || ts->hi - ts->lo <= 1) {
        finish_failed(p, ts);
        return;
    }
    int sizes[MAX_SLOTS];
    start_round(ts, sizes, search_sizes(ts->lo, ts->hi, sizes));
}

static void advance(const struct prober *p, struct tstate *ts)
{
    if (ts->phase == PHASE_CLASSIFY)
        after_classify(p, ts);
    else
        after_search_round(p, ts);
}

/* Opens and connects the target's socket. -1 with err only for a bad source address or when
 * out of sockets; a destination without a route is the target's result. */
static int open_target(const struct prober *p, struct tstate *ts, struct hc_error *err)
{
    char a[INET_ADDRSTRLEN];
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot open a probe socket: %s", strerror(errno));
    ts->fd = fd;
    set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, PROBE_SOCKBUF);
    set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, PROBE_SOCKBUF);
    if (set_int_opt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO) < 0 ||
        set_int_opt(fd, IPPROTO_IP, IP_RECVERR, 1) < 0)
        return hc_error_set(err, HC_E(IO), "cannot set up a probe socket: %s", strerror(errno));
    if (p->source.s_addr != htonl(INADDR_ANY)) {
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = p->source};
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "cannot probe from source address %s: %s", addr_text(p->source, a),
                                strerror(errno));
    }
    struct sockaddr_in dst = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)p->port), .sin_addr = ts->t->addr};
    if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0)
        mark_unreachable(ts, "cannot reach %s: %s", addr_text(ts->t->addr, a), strerror(errno));
    return 0;
}

static void init_target(const struct prober *p, struct tstate *ts, struct hc_probe_target *t)
{
    memset(ts, 0, sizeof(*ts));
    ts->fd = -1;
    ts->t = t;
    t->result = HC_PROBE_UNREACHABLE;
    t->path_mtu = 0;
    t->largest_ok = 0;
    t->rtt_ms = -1;
    t->sent = 0;
    t->neighbor = HC_NEIGH_UNKNOWN;
    t->detail[0] = '\0';
    int sizes[2] = {t->size, p->small};
    start_round(ts, sizes, t->size > p->small ? 2 : 1);
}

/* One pass of the poll loop over the window: rounds that ended advance, due probes go out. The
 * time to wait for the next event goes to *next; returns the number of targets still active. */
static size_t step_targets(struct prober *p, struct tstate *ts, struct pollfd *pfd, size_t n,
                           int64_t *next)
{
    size_t active = 0;
    int64_t now = hc_mono_ms();
    for (size_t i = 0; i < n; i++) {
        pfd[i].fd = -1;
        pfd[i].revents = 0;
        if (ts[i].phase != PHASE_DONE && round_done(p, &ts[i], now))
            advance(p, &ts[i]);
        if (ts[i].phase == PHASE_DONE)
            continue;
        send_due(p, &ts[i], now);
        pfd[i].fd = ts[i].fd;
        pfd[i].events = POLLIN;
        int64_t at = next_event(p, &ts[i]);
        *next = at < *next ? at : *next;
        active++;
    }
    return active;
}

static void cancel_targets(struct tstate *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ts[i].phase == PHASE_DONE)
            continue;
        snprintf(ts[i].t->detail, sizeof(ts[i].t->detail), "probe cancelled");
        finish(&ts[i], HC_PROBE_UNREACHABLE);
    }
}

static int probe_window(struct prober *p, struct hc_probe_target *targets, size_t n,
                        struct hc_error *err)
{
    int rc = -1;
    struct tstate *ts = calloc(n, sizeof(*ts));
    struct pollfd *pfd = calloc(n, sizeof(*pfd));
    if (!ts || !pfd) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++)
        init_target(p, &ts[i], &targets[i]);
    for (size_t i = 0; i < n; i++)
        if (open_target(p, &ts[i], err) < 0)
            goto cleanup;
    for (;;) {
        int64_t next = INT64_MAX;
        if (p->cancel && hc_stop_requested(p->cancel)) {
            cancel_targets(ts, n);
            break;
        }
        if (step_targets(p, ts, pfd, n, &next) == 0)
            break;
        /* Short waits at most, so that a cancel (agent shutdown) is seen within CANCEL_MS. */
        int64_t wait = next - hc_mono_ms();
        if (poll(pfd, n, wait < 0 ? 0 : (int)(wait > CANCEL_MS ? CANCEL_MS : wait)) < 0 &&
            errno != EINTR) {
            hc_error_set(err, HC_E(IO), "probe: poll: %s", strerror(errno));
            goto cleanup;
        }
        for (size_t i = 0; i < n; i++) {
            if (pfd[i].fd < 0 || !pfd[i].revents)
                continue;
            if (pfd[i].revents & POLLERR)
                drain_errors(p, &ts[i]);
            if (pfd[i].revents & POLLIN)
                read_replies(p, &ts[i]);
        }
    }
    rc = 0;
cleanup:
    for (size_t i = 0; ts && i < n; i++)
        if (ts[i].fd >= 0)
            close(ts[i].fd);
    free(ts);
    free(pfd);
    return rc;
}

static int prober_init(struct prober *p, const struct hc_probe_options *opt, struct hc_error *err)
{
    memset(p, 0, sizeof(*p));
    p->port = opt->port > 0 ? opt->port : HC_PORT_PROBE;
    p->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : HC_PROBE_DEFAULT_TIMEOUT_MS;
    p->attempts = opt->attempts > 0 ? opt->attempts : HC_PROBE_DEFAULT_ATTEMPTS;
    if (p->attempts > MAX_ATTEMPTS)
        p->attempts = MAX_ATTEMPTS;
    p->interval_ms = p->timeout_ms / p->attempts;
    p->small = opt->small_size >= HC_PROBE_MIN_SIZE ? opt->small_size : HC_PROBE_SMALL_SIZE;
    p->search = opt->search;
    p->source = opt->source;
    p->cancel = opt->cancel;
    p->buf = calloc(1, HC_PROBE_MAX_SIZE);
    if (!p->buf)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    /* Padding that is not all zeros, so that nothing on the path compresses it away. */
    for (size_t i = 8; i < HC_PROBE_MAX_SIZE; i++)
        p->buf[i] = (unsigned char)(i * 31 + 7);
    return 0;
}

int hc_probe_run(const struct hc_probe_options *opt, struct hc_probe_target *targets, size_t n,
                 struct hc_error *err)
{
    struct prober p;
    for (size_t i = 0; i < n; i++)
        if (targets[i].size < HC_PROBE_MIN_SIZE || targets[i].size > HC_PROBE_MAX_SIZE)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT), "probe size %d is outside %d..%d",
                                targets[i].size, HC_PROBE_MIN_SIZE, HC_PROBE_MAX_SIZE);
    if (prober_init(&p, opt, err) < 0)
        return -1;
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += WINDOW)
        rc = probe_window(&p, targets + off, n - off < WINDOW ? n - off : WINDOW, err);
    free(p.buf);
    return rc;
}

/* ================================================================ neighbours */

void hc_probe_explain_neighbors(struct hc_probe_target *targets, size_t n,
                                const enum hc_neigh_state *states,
                                const struct hc_neigh_table *before,
                                const struct hc_neigh_table *after)
{
    int full = hc_neigh_table_full(before, after);
    for (size_t i = 0; i < n; i++) {
        struct hc_probe_target *t = &targets[i];
        char a[INET_ADDRSTRLEN], why[sizeof(t->detail)];
        if (t->result != HC_PROBE_UNREACHABLE)
            continue;
        t->neighbor = states[i];
        if (states[i] == HC_NEIGH_RESOLVED || states[i] == HC_NEIGH_UNKNOWN)
            continue;
        addr_text(t->addr, a);
        snprintf(why, sizeof(why), "%s", t->detail);
        if (full) {
            t->result = HC_PROBE_NEIGHBOR_UNRESOLVED;
            snprintf(t->detail, sizeof(t->detail),
                     "no neighbour (ARP) entry for %s (%s) while this host's neighbour table is "
                     "full: %ld entries, gc_thresh3 %ld, %llu new entries refused during the probe",
                     a, hc_neigh_state_name(states[i]), after->entries, after->thresh3,
                     before->known ? (unsigned long long)(after->fulls - before->fulls) : 0ULL);
        } else if (states[i] != HC_NEIGH_NONE) {
            snprintf(t->detail, sizeof(t->detail), "%s; the ARP request for %s got no answer (%s)",
                     why, a, hc_neigh_state_name(states[i]));
        }
    }
}

int hc_probe_run_explained(const struct hc_probe_options *opt, struct hc_probe_target *targets,
                           size_t n, struct hc_probe_neighbors *nb, struct hc_error *err)
{
    static atomic_int warned;
    struct hc_error nerr = {0};
    enum hc_neigh_state *states = NULL;
    struct in_addr *addrs = NULL;
    memset(nb, 0, sizeof(*nb));
    hc_neigh_table_read(&nb->before, &nerr);
    if (hc_probe_run(opt, targets, n, err) < 0)
        return -1;
    size_t nfail = 0;
    for (size_t i = 0; i < n; i++)
        nfail += targets[i].result == HC_PROBE_UNREACHABLE;
    if (hc_neigh_table_read(&nb->after, &nerr) < 0 || nfail == 0)
        goto done;
    states = calloc(n, sizeof(*states));
    addrs = calloc(n, sizeof(*addrs));
    if (!states || !addrs) {
        hc_error_set(&nerr, HC_E(INTERNAL), "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        addrs[i] = targets[i].addr;
    if (hc_neigh_lookup(addrs, n, states, &nerr) == 0)
        hc_probe_explain_neighbors(targets, n, states, &nb->before, &nb->after);
done:
    if (nerr.message[0] && atomic_exchange(&warned, 1) == 0)
        HC_WARN("%s: unreachable peers are reported without their neighbour entries", nerr.message);
    free(states);
    free(addrs);
    return 0;
}

/* ================================================================ JSON */

static json_t *probe_result_json(const struct hc_probe_target *t)
{
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &t->addr, a, sizeof(a));
    return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:s}", "address", a, "size", t->size, "result",
                     hc_probe_verdict_name(t->result), "path_mtu",
                     t->path_mtu > 0 ? json_integer(t->path_mtu) : json_null(), "largest_ok",
                     t->largest_ok > 0 ? json_integer(t->largest_ok) : json_null(), "rtt_ms",
                     t->rtt_ms >= 0 ? json_real((double)(int64_t)(t->rtt_ms * 1000) / 1000)
                                    : json_null(),
                     "detail", t->detail);
}

json_t *hc_probe_results_json(const struct hc_probe_target *t, size_t n,
                              const struct hc_neigh_table *before,
                              const struct hc_neigh_table *after, int compact)
{
    json_t *list = json_array(), *passed = compact ? json_array() : NULL, *table = json_null();
    for (size_t i = 0; list && i < n; i++) {
        if (passed && t[i].result == HC_PROBE_OK) {
            json_array_append_new(passed, json_integer((json_int_t)i));
            continue;
        }
        json_t *r = probe_result_json(&t[i]);
        if (r && t[i].neighbor != HC_NEIGH_UNKNOWN)
            json_object_set_new(r, "neighbor", json_string(hc_neigh_state_name(t[i].neighbor)));
        if (r && passed)
            json_object_set_new(r, "index", json_integer((json_int_t)i));
        json_array_append_new(list, r);
    }
    if (after && after->known)
        table = json_pack("{s:I, s:I, s:I, s:I, s:I}", "entries", (json_int_t)after->entries,
                          "gc_thresh1", (json_int_t)after->thresh1, "gc_thresh2",
                          (json_int_t)after->thresh2, "gc_thresh3", (json_int_t)after->thresh3,
                          "table_fulls",
                          (json_int_t)(before && before->known ? after->fulls - before->fulls : 0));
    json_t *doc = json_pack("{s:o, s:o}", "results", list, "neighbors", table);
    if (doc && passed)
        json_object_set_new(doc, "passed", passed);
    return doc;
}
