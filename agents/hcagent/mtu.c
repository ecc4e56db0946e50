/*
 * MTU changes with a revert timer (agents/hcagent/mtu.h): rtnetlink get/set of one link's MTU, and
 * the commit-confirmed manager whose pending change survives an agent restart.
 *
 * Order of a change, so that a crash at any point still ends in a revert: the pending change is
 * written to the state file first, then the MTU is set, then the timer is armed. A restart finds
 * the change in the file and reverts it (or re-arms the timer). Reverting and confirming rewrite
 * the file.
 *
 * After the link's MTU changed (a change or a revert), the namespace's route cache is flushed:
 * Linux keeps path MTUs learnt from ICMP (or clamped at 552 and locked when something named a
 * smaller one) for ~10 minutes, and a raise would otherwise go on failing with EMSGSIZE toward
 * exactly the peers the node talked to at the old MTU. IPv4 cannot drop one destination's cached
 * path MTU, so the flush is namespace-wide: other destinations only relearn theirs.
 */
#include "agents/hcagent/mtu.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agents/hcagent/rtnl.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

/* ================================================================ links */

static int link_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(attr);
    if ((type == IFLA_MTU || type == IFLA_MIN_MTU || type == IFLA_MAX_MTU) &&
        mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
        tb[type] = attr;
    return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
    struct hc_mtu_link *link = data;
    const struct nlattr *tb[IFLA_MAX + 1];
    memset(tb, 0, sizeof(tb));
    const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, tb);
    link->index = ifm->ifi_index;
    link->mtu = tb[IFLA_MTU] ? (int)mnl_attr_get_u32(tb[IFLA_MTU]) : 0;
    /* Devices that do not state bounds (older kernels, some drivers) get the IPv4 range. */
    link->min_mtu = tb[IFLA_MIN_MTU] ? (int)mnl_attr_get_u32(tb[IFLA_MIN_MTU]) : 0;
    link->max_mtu = tb[IFLA_MAX_MTU] ? (int)mnl_attr_get_u32(tb[IFLA_MAX_MTU]) : 0;
    if (link->min_mtu < HC_MTU_MIN)
        link->min_mtu = HC_MTU_MIN;
    if (link->max_mtu <= 0 || link->max_mtu > HC_MTU_MAX)
        link->max_mtu = HC_MTU_MAX;
    return MNL_CB_OK;
}

static int check_ifname(const char *ifname, struct hc_error *err)
{
    if (!ifname || !ifname[0] || strlen(ifname) >= IFNAMSIZ || strchr(ifname, '/'))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid interface name '%s'",
                            ifname ? ifname : "");
    return 0;
}

int hc_mtu_link_get(const char *ifname, struct hc_mtu_link *out, struct hc_error *err)
{
    char buf[256];
    if (check_ifname(ifname, err) < 0)
        return -1;
    memset(buf, 0, sizeof(buf));
    memset(out, 0, sizeof(*out));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETLINK;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
    if (hc_rtnl_transact(nlh, link_cb, out) < 0) {
        if (errno == ENODEV)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "interface '%s' not found on this node", ifname);
        return hc_error_set(err, HC_E(IO), "cannot read interface '%s': %s", ifname,
                            strerror(errno));
    }
    if (out->index <= 0)
        return hc_error_set(err, HC_E(IO), "cannot read interface '%s': no reply", ifname);
    return 0;
}

int hc_mtu_link_set(const char *ifname, int mtu, struct hc_error *err)
{
    char buf[256];
    struct hc_mtu_link link;
    if (hc_mtu_link_get(ifname, &link, err) < 0)
        return -1;
    memset(buf, 0, sizeof(buf));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = link.index;
    mnl_attr_put_u32(nlh, IFLA_MTU, (uint32_t)mtu);
    if (hc_rtnl_transact(nlh, NULL, NULL) < 0) {
        hc_error_set(err, errno == EINVAL ? HC_E(INVALID_ARGUMENT) : HC_E(IO),
                     "cannot set the mtu of '%s' to %d: %s", ifname, mtu, strerror(errno));
        if (errno == EPERM)
            hc_error_hint(err, "the agent needs CAP_NET_ADMIN to change MTUs");
        return -1;
    }
    return 0;
}

/* ================================================================ route cache */

/* Writes "1" to one flush sysctl. 0, or 1 when it does not exist (IPv6 disabled), -1 with err. */
static int flush_write(const char *path, struct hc_error *err)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 1;
    if (fd < 0 || write(fd, "1\n", 2) != 2) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        hc_error_set(err, HC_E(IO), "cannot flush the route cache ('%s'): %s", path, strerror(e));
        if (e == EACCES || e == EPERM)
            hc_error_hint(err, "the agent needs CAP_NET_ADMIN in its network namespace");
        return -1;
    }
    close(fd);
    return 0;
}

int hc_mtu_route_flush(struct hc_error *err)
{
    struct hc_error v6 = {0};
    int rc4 = flush_write("/proc/sys/net/ipv4/route/flush", err);
    int rc6 = flush_write("/proc/sys/net/ipv6/route/flush", &v6);
    if (rc4 >= 0 && rc6 < 0)
        *err = v6;
    return rc4 < 0 || rc6 < 0 ? -1 : 0;
}

/* After the MTU of a link changed: drop what was learnt at the old one. Failing is not fatal:
 * the cached values expire by themselves. */
static void flush_after_change(const struct hc_mtu_change *c)
{
    struct hc_error err = {0};
    if (hc_mtu_route_flush(&err) < 0)
        HC_WARN("mtu change %s on %s: %s; path MTUs cached at the old MTU stay until they expire "
                "(~10 min)",
                c->change_id, c->interface, err.message);
}

/* ================================================================ manager */

struct hc_mtu_mgr {
    struct event_base *base;
    struct event *timer;
    char *path;
    int has_pending;
    struct hc_mtu_change pending;
    int has_last_revert;
    struct hc_mtu_change last_revert;
    char last_confirmed[33];
};

json_t *hc_mtu_change_json(const struct hc_mtu_change *c)
{
    char at[40];
    return json_pack("{s:s, s:s, s:i, s:i, s:s}", "change_id", c->change_id, "interface",
                     c->interface, "previous_mtu", c->previous_mtu, "mtu", c->mtu, "revert_at",
                     hc_time_format(c->revert_at_ms, at, sizeof(at)));
}

json_t *hc_mtu_revert_json(const struct hc_mtu_change *c)
{
    char at[40];
    json_t *o = hc_mtu_change_json(c);
    json_object_set_new(o, "reverted_at",
                        json_string(hc_time_format(c->reverted_at_ms, at, sizeof(at))));
    json_object_set_new(o, "reverted_by", json_string(c->requested ? "request" : "timer"));
    if (c->revert_error[0])
        json_object_set_new(o, "error", json_string(c->revert_error));
    return o;
}

json_t *hc_mtu_state_json(const struct hc_mtu_mgr *m)
{
    return json_pack("{s:o, s:o}", "pending",
                     m->has_pending ? hc_mtu_change_json(&m->pending) : json_null(), "last_revert",
                     m->has_last_revert ? hc_mtu_revert_json(&m->last_revert) : json_null());
}

/* The state file keeps the times as epoch milliseconds too, so that parsing back is exact. */
static json_t *file_change_json(const struct hc_mtu_change *c, int reverted)
{
    json_t *o = reverted ? hc_mtu_revert_json(c) : hc_mtu_change_json(c);
    json_object_set_new(o, "revert_at_ms", json_integer(c->revert_at_ms));
    if (reverted)
        json_object_set_new(o, "reverted_at_ms", json_integer(c->reverted_at_ms));
    return o;
}

static int save_state(struct hc_mtu_mgr *m, struct hc_error *err)
{
    json_t *doc =
        json_pack("{s:o, s:o, s:s?}", "pending",
                  m->has_pending ? file_change_json(&m->pending, 0) : json_null(), "last_revert",
                  m->has_last_revert ? file_change_json(&m->last_revert, 1) : json_null(),
                  "last_confirmed", m->last_confirmed[0] ? m->last_confirmed : NULL);
    char *text = doc ? hc_json_dump(doc) : NULL;
    json_decref(doc);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    int rc = hc_file_write_atomic(m->path, text, strlen(text), 0644, err);
    free(text);
    if (rc < 0)
        hc_error_prefix(err, "cannot record the mtu change");
    return rc;
}

static int change_from_json(const json_t *o, struct hc_mtu_change *c)
{
    const char *id = hc_json_str(o, "change_id", NULL);
    const char *ifname = hc_json_str(o, "interface", NULL);
    memset(c, 0, sizeof(*c));
    if (!id || !ifname || strlen(id) >= sizeof(c->change_id) || strlen(ifname) >= IFNAMSIZ)
        return -1;
    snprintf(c->change_id, sizeof(c->change_id), "%s", id);
    snprintf(c->interface, sizeof(c->interface), "%s", ifname);
    c->previous_mtu = (int)hc_json_int(o, "previous_mtu", 0);
    c->mtu = (int)hc_json_int(o, "mtu", 0);
    c->revert_at_ms = hc_json_int(o, "revert_at_ms", 0);
    c->reverted_at_ms = hc_json_int(o, "reverted_at_ms", 0);
    c->requested = strcmp(hc_json_str(o, "reverted_by", ""), "request") == 0;
    snprintf(c->revert_error, sizeof(c->revert_error), "%s", hc_json_str(o, "error", ""));
    return c->previous_mtu >= HC_MTU_MIN ? 0 : -1;
}

/* A missing file is a fresh agent. A damaged one is set aside (and logged): refusing to start
 * would leave the node without the agent that can repair it. */
static void load_state(struct hc_mtu_mgr *m)
{
    char *text = NULL;
    size_t len = 0;
    struct hc_error err = {0};
    if (hc_file_read(m->path, &text, &len, &err) < 0)
        return;
    json_t *doc = hc_json_parse_object(text, len, &err);
    free(text);
    const json_t *p = json_object_get(doc, "pending"), *r = json_object_get(doc, "last_revert");
    int bad = !doc || (json_is_object(p) && change_from_json(p, &m->pending) < 0) ||
              (json_is_object(r) && change_from_json(r, &m->last_revert) < 0);
    if (bad) {
        char aside[4096];
        snprintf(aside, sizeof(aside), "%s.bad", m->path);
        HC_ERROR("mtu state file '%s' is damaged: moved to '%s', no pending change recovered",
                 m->path, aside);
        rename(m->path, aside);
        memset(&m->pending, 0, sizeof(m->pending));
        memset(&m->last_revert, 0, sizeof(m->last_revert));
    } else {
        m->has_pending = json_is_object(p);
        m->has_last_revert = json_is_object(r);
        snprintf(m->last_confirmed, sizeof(m->last_confirmed), "%s",
                 hc_json_str(doc, "last_confirmed", ""));
    }
    json_decref(doc);
}

/* Puts the pending change's previous MTU back (requested: on the controller's request, else the
 * timer) and records it as the last revert. 0, or -1 when the link could not be set. */
static int revert_pending(struct hc_mtu_mgr *m, int requested)
{
    struct hc_error err = {0};
    if (!m->has_pending)
        return 0;
    evtimer_del(m->timer);
    struct hc_mtu_change c = m->pending;
    c.reverted_at_ms = hc_now_ms();
    c.requested = requested;
    if (hc_mtu_link_set(c.interface, c.previous_mtu, &err) < 0) {
        snprintf(c.revert_error, sizeof(c.revert_error), "%s", err.message);
        HC_ERROR("mtu change %s: revert of %s to %d failed: %s", c.change_id, c.interface,
                 c.previous_mtu, err.message);
    } else {
        if (requested)
            HC_WARN("mtu change %s reverted at the controller's request: %s from %d to %d",
                    c.change_id, c.interface, c.mtu, c.previous_mtu);
        else
            HC_WARN("mtu change %s not confirmed in time: %s reverted from %d to %d", c.change_id,
                    c.interface, c.mtu, c.previous_mtu);
        flush_after_change(&c);
    }
    m->last_revert = c;
    m->has_last_revert = 1;
    m->has_pending = 0;
    if (save_state(m, &err) < 0)
        HC_ERROR("%s", err.message);
    return c.revert_error[0] ? -1 : 0;
}

int hc_mtu_revert_now(struct hc_mtu_mgr *m)
{
    return revert_pending(m, 0);
}

int hc_mtu_revert(struct hc_mtu_mgr *m, const char *change_id, struct hc_mtu_change *out,
                  struct hc_error *err)
{
    const struct hc_mtu_change *r = &m->last_revert;
    if (!change_id || !change_id[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "missing change_id");
    if (m->has_pending && strcmp(m->pending.change_id, change_id) == 0) {
        revert_pending(m, 1);
    } else if (!m->has_last_revert || strcmp(r->change_id, change_id) != 0) {
        if (strcmp(m->last_confirmed, change_id) == 0) {
            hc_error_set(err, HC_E(CONFLICT), "mtu change %s was confirmed: it stays", change_id);
            return hc_error_hint(err, "set the old MTU back with a new change");
        }
        return hc_error_set(err, HC_E(NOT_FOUND), "mtu change '%s' not found", change_id);
    }
    if (out)
        *out = *r;
    if (r->revert_error[0])
        return hc_error_set(err, HC_E(IO),
                            "mtu change %s: %s could not be set back to %d: "
                            "%s",
                            change_id, r->interface, r->previous_mtu, r->revert_error);
    return 0;
}

static void on_revert_timer(evutil_socket_t fd, short what, void *arg)
{
    hc_mtu_revert_now(arg);
}

static void arm_timer(struct hc_mtu_mgr *m, int64_t delay_ms)
{
    if (delay_ms < 0)
        delay_ms = 0;
    struct timeval tv = {(time_t)(delay_ms / 1000), (suseconds_t)((delay_ms % 1000) * 1000)};
    evtimer_add(m->timer, &tv);
}

struct hc_mtu_mgr *hc_mtu_mgr_new(struct event_base *base, const char *data_dir,
                                  struct hc_error *err)
{
    struct hc_mtu_mgr *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = hc_path_join(data_dir, HC_MTU_STATE_FILE)) ||
        !(m->timer = evtimer_new(base, on_revert_timer, m))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        hc_mtu_mgr_free(m);
        return NULL;
    }
    m->base = base;
    load_state(m);
    if (!m->has_pending)
        return m;
    int64_t left = m->pending.revert_at_ms - hc_now_ms();
    if (left <= 0) {
        HC_WARN("mtu change %s on %s was left pending by an earlier run and its time is up",
                m->pending.change_id, m->pending.interface);
        hc_mtu_revert_now(m);
    } else {
        HC_INFO("mtu change %s on %s (%d -> %d) is still pending: reverts in %lld ms unless "
                "confirmed",
                m->pending.change_id, m->pending.interface, m->pending.previous_mtu, m->pending.mtu,
                (long long)left);
        arm_timer(m, left);
    }
    return m;
}

void hc_mtu_mgr_free(struct hc_mtu_mgr *m)
{
    if (!m)
        return;
    if (m->timer)
        event_free(m->timer);
    free(m->path);
    free(m);
}

static int check_apply(struct hc_mtu_mgr *m, const char *ifname, int mtu, int64_t revert_after_ms,
                       struct hc_mtu_link *link, struct hc_error *err)
{
    char at[40];
    if (m->has_pending) {
        hc_error_set(err, HC_E(CONFLICT),
                     "mtu change %s on %s is pending (reverts at %s unless confirmed)",
                     m->pending.change_id, m->pending.interface,
                     hc_time_format(m->pending.revert_at_ms, at, sizeof(at)));
        return hc_error_hint(err, "confirm it or wait for its revert");
    }
    if (revert_after_ms < HC_MTU_MIN_REVERT_MS || revert_after_ms > HC_MTU_MAX_REVERT_MS)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "revert_after_ms %lld is outside %d..%lld",
                            (long long)revert_after_ms, HC_MTU_MIN_REVERT_MS,
                            (long long)HC_MTU_MAX_REVERT_MS);
    if (hc_mtu_link_get(ifname, link, err) < 0)
        return -1;
    if (mtu < link->min_mtu || mtu > link->max_mtu)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "mtu %d for '%s' is outside %d..%d (what the interface accepts)", mtu,
                            ifname, link->min_mtu, link->max_mtu);
    return 0;
}

int hc_mtu_apply(struct hc_mtu_mgr *m, const char *ifname, int mtu, int64_t revert_after_ms,
                 struct hc_mtu_change *out, struct hc_error *err)
{
    struct hc_mtu_link link;
    char at[40];
    if (check_apply(m, ifname, mtu, revert_after_ms, &link, err) < 0)
        return -1;
    struct hc_mtu_change c = {.previous_mtu = link.mtu, .mtu = mtu};
    if (hc_random_hex(c.change_id, 16) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot generate a change id");
    snprintf(c.interface, sizeof(c.interface), "%s", ifname);
    c.revert_at_ms = hc_now_ms() + revert_after_ms;
    m->pending = c;
    m->has_pending = 1;
    if (save_state(m, err) < 0 || hc_mtu_link_set(ifname, mtu, err) < 0) {
        m->has_pending = 0;
        struct hc_error ignored;
        save_state(m, &ignored);
        return -1;
    }
    arm_timer(m, revert_after_ms);
    flush_after_change(&c);
    HC_INFO("mtu change %s: %s %d -> %d, reverts at %s unless confirmed", c.change_id, ifname,
            c.previous_mtu, mtu, hc_time_format(c.revert_at_ms, at, sizeof(at)));
    if (out)
        *out = c;
    return 0;
}

int hc_mtu_confirm(struct hc_mtu_mgr *m, const char *change_id, struct hc_error *err)
{
    char at[40];
    if (!change_id || !change_id[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "missing change_id");
    if (m->has_pending && strcmp(m->pending.change_id, change_id) == 0) {
        char previous[sizeof(m->last_confirmed)];
        snprintf(previous, sizeof(previous), "%s", m->last_confirmed);
        snprintf(m->last_confirmed, sizeof(m->last_confirmed), "%s", change_id);
        m->has_pending = 0;
        if (save_state(m, err) < 0) { /* still pending on disk: stay pending here too */
            m->has_pending = 1;
            snprintf(m->last_confirmed, sizeof(m->last_confirmed), "%s", previous);
            return -1;
        }
        evtimer_del(m->timer);
        HC_INFO("mtu change %s confirmed: %s stays at %d", change_id, m->pending.interface,
                m->pending.mtu);
        return 0;
    }
    if (strcmp(m->last_confirmed, change_id) == 0)
        return 0;
    if (m->has_last_revert && strcmp(m->last_revert.change_id, change_id) == 0)
        return hc_error_set(err, HC_E(CONFLICT),
                            "mtu change %s was already reverted at %s (%s back to %d)", change_id,
                            hc_time_format(m->last_revert.reverted_at_ms, at, sizeof(at)),
                            m->last_revert.interface, m->last_revert.previous_mtu);
    return hc_error_set(err, HC_E(NOT_FOUND), "mtu change '%s' not found", change_id);
}
