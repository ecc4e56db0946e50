/*
 * The storage service's network egress bound (agents/hcagent/netlimit.h, docs/bundles.md
 * "Limits").
 *
 * On the storage interface:
 *   tc qdisc replace dev IF root handle 4863: htb default 0
 *   tc class replace dev IF parent 4863: classid 4863:1 htb rate Nmbit ceil Nmbit quantum 65536
 *   tc filter replace dev IF parent 4863: protocol ip prio 1 handle 800::800 u32
 *      match ip src ADDR/32 match ip protocol 6 0xff flowid 4863:1
 * "default 0" sends what no filter classifies (other addresses, UDP, ARP) to HTB's direct
 * queue, unshaped, so only the service's TCP from the storage address is held to the rate. HTB
 * cannot "replace" itself (the kernel has no change operation for it), so the qdisc is only
 * made when the root is still the kernel's default (handle 0:); the class and the filter are
 * replaced in place, which is what a live change of the rate or the address does. A root qdisc
 * with any other handle is someone else's and is left alone.
 *
 * Changes go through /sbin/tc, started with an argv (posix_spawn, no shell) and killed after
 * 5 s; what the kernel holds is read back over rtnetlink (agents/hcagent/rtnl.h) after every
 * change and for every report, so neither says more than the kernel does.
 */
#include "agents/hcagent/netlimit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/gen_stats.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agents/hcagent/rtnl.h"
#include "common/util.h"

#define TC_TIMEOUT_MS 5000
#define QDISC_HANDLE (HC_NETLIMIT_HANDLE << 16)
#define CLASS_HANDLE (QDISC_HANDLE | 1u)
#define MAX_MBIT 1000000

extern char **environ;

/* ---------------------------------------------------------------- what the kernel holds */

struct tc_seen {
    unsigned int ifindex;
    int has_root;
    uint32_t root_handle;
    char root_kind[32];
    int has_class;
    uint64_t rate;  /* bytes per second */
    uint64_t bytes; /* sent through the class */
    uint32_t drops, overlimits;
    int has_filter;      /* the agent's filter: TCP from filter_src into the class */
    char filter_src[16]; /* its address */
};

static void kind_of(const struct nlattr *attr, char *out, size_t len)
{
    if (mnl_attr_get_type(attr) == TCA_KIND && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
        snprintf(out, len, "%s", mnl_attr_get_str(attr));
}

static void class_options(const struct nlattr *opts, struct tc_seen *s)
{
    const struct nlattr *attr;
    mnl_attr_for_each_nested(attr, opts)
    {
        if (mnl_attr_get_type(attr) == TCA_HTB_PARMS &&
            mnl_attr_get_payload_len(attr) >= sizeof(struct tc_htb_opt) && !s->rate)
            s->rate = ((const struct tc_htb_opt *)mnl_attr_get_payload(attr))->rate.rate;
        if (mnl_attr_get_type(attr) == TCA_HTB_RATE64 && mnl_attr_validate(attr, MNL_TYPE_U64) == 0)
            s->rate = mnl_attr_get_u64(attr); /* beyond 4 GB/s; it then wins over the parms */
    }
}

static void class_stats(const struct nlattr *stats, struct tc_seen *s)
{
    const struct nlattr *attr;
    mnl_attr_for_each_nested(attr, stats)
    {
        const void *p = mnl_attr_get_payload(attr);
        size_t n = mnl_attr_get_payload_len(attr);
        if (mnl_attr_get_type(attr) == TCA_STATS_BASIC && n >= sizeof(uint64_t)) {
            struct gnet_stats_basic b = {0};
            memcpy(&b, p, n < sizeof(b) ? n : sizeof(b));
            s->bytes = b.bytes;
        }
        if (mnl_attr_get_type(attr) == TCA_STATS_QUEUE && n >= sizeof(struct gnet_stats_queue)) {
            struct gnet_stats_queue q;
            memcpy(&q, p, sizeof(q));
            s->drops = q.drops;
            s->overlimits = q.overlimits;
        }
    }
}

/* The u32 filter's keys as tc writes them for "match ip src ADDR/32 match ip protocol 6 0xff"
 * (src at offset 12 of the IP header, protocol in the third byte of the word at 8). */
static void filter_options(const struct nlattr *opts, struct tc_seen *s)
{
    const struct nlattr *attr;
    uint32_t classid = 0, src = 0;
    int tcp = 0;
    mnl_attr_for_each_nested(attr, opts)
    {
        size_t n = mnl_attr_get_payload_len(attr);
        if (mnl_attr_get_type(attr) == TCA_U32_CLASSID &&
            mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
            classid = mnl_attr_get_u32(attr);
        if (mnl_attr_get_type(attr) != TCA_U32_SEL || n < sizeof(struct tc_u32_sel))
            continue;
        const struct tc_u32_sel *sel = mnl_attr_get_payload(attr);
        if (n < sizeof(*sel) + sel->nkeys * sizeof(struct tc_u32_key))
            continue;
        for (unsigned int i = 0; i < sel->nkeys; i++) {
            const struct tc_u32_key *k = &sel->keys[i];
            if (k->off == 12 && k->mask == 0xffffffffu)
                src = k->val;
            if (k->off == 8 && k->mask == htonl(0x00ff0000u) && k->val == htonl(0x00060000u))
                tcp = 1;
        }
    }
    if (classid == CLASS_HANDLE && src && tcp) {
        struct in_addr a = {.s_addr = src};
        s->has_filter = inet_ntop(AF_INET, &a, s->filter_src, sizeof(s->filter_src)) != NULL;
    }
}

/* A qdisc, class or filter of the dump: the root qdisc of s->ifindex, or the agent's class on it.
 */
static int tc_cb(const struct nlmsghdr *nlh, void *data)
{
    struct tc_seen *s = data;
    const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
    if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm) ||
        (unsigned int)tcm->tcm_ifindex != s->ifindex)
        return MNL_CB_OK;
    int root = nlh->nlmsg_type == RTM_NEWQDISC && tcm->tcm_parent == TC_H_ROOT;
    int klass = nlh->nlmsg_type == RTM_NEWTCLASS && tcm->tcm_handle == CLASS_HANDLE;
    int filter = nlh->nlmsg_type == RTM_NEWTFILTER && tcm->tcm_parent == QDISC_HANDLE;
    if (!root && !klass && !filter)
        return MNL_CB_OK;
    const struct nlattr *attr;
    char kind[32] = "";
    mnl_attr_for_each(attr, nlh, sizeof(*tcm))
    {
        kind_of(attr, kind, sizeof(kind));
        if (klass && mnl_attr_get_type(attr) == TCA_OPTIONS)
            class_options(attr, s);
        if (klass && mnl_attr_get_type(attr) == TCA_STATS2)
            class_stats(attr, s);
        if (filter && mnl_attr_get_type(attr) == TCA_OPTIONS)
            filter_options(attr, s);
    }
    if (root) {
        s->has_root = 1;
        s->root_handle = tcm->tcm_handle;
        snprintf(s->root_kind, sizeof(s->root_kind), "%s", kind);
    } else if (klass) {
        s->has_class = strcmp(kind, "htb") == 0 && s->rate > 0;
    }
    return MNL_CB_OK;
}

static int dump(int type, uint32_t parent, struct tc_seen *s)
{
    char buf[256];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (uint16_t)type;
    nlh->nlmsg_flags = NLM_F_DUMP;
    struct tcmsg *tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
    tcm->tcm_family = AF_UNSPEC;
    tcm->tcm_ifindex = (int)s->ifindex;
    tcm->tcm_parent = parent;
    return hc_rtnl_transact(nlh, tc_cb, s);
}

/* The root qdisc of ifname and the agent's class on it. 0, or -1 with why (no such interface,
 * netlink refused). */
static int read_kernel(const char *ifname, struct tc_seen *s, char *why, size_t len)
{
    memset(s, 0, sizeof(*s));
    if (!(s->ifindex = if_nametoindex(ifname))) {
        snprintf(why, len, "no interface %s", ifname);
        return -1;
    }
    if (dump(RTM_GETQDISC, 0, s) < 0 ||
        (s->has_root && s->root_handle == QDISC_HANDLE &&
         (dump(RTM_GETTCLASS, 0, s) < 0 || dump(RTM_GETTFILTER, QDISC_HANDLE, s) < 0))) {
        snprintf(why, len, "cannot read the qdiscs of %s: %s", ifname, strerror(errno));
        return -1;
    }
    return 0;
}

static int ours(const struct tc_seen *s)
{
    return s->has_root && s->root_handle == QDISC_HANDLE && strcmp(s->root_kind, "htb") == 0;
}

/* The bound is in place: the agent's qdisc, its class at a rate, its filter into the class. */
static int held(const struct tc_seen *s)
{
    return ours(s) && s->has_class && s->has_filter;
}

/* The kernel's rate in whole Mbit/s (tc stores bytes per second). */
static int mbit_of(const struct tc_seen *s)
{
    return (int)((s->rate * 8 + 500000) / 1000000);
}

/* ---------------------------------------------------------------- running tc */

/* What tc wrote, on one line into out: its lines joined with "; ". */
static void one_line(const char *text, char *out, size_t len)
{
    size_t n = strlen(text), o = 0;
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n && o + 3 < len; i++) {
        if (text[i] == '\n') {
            out[o++] = ';';
            out[o++] = ' ';
        } else {
            out[o++] = text[i];
        }
    }
    out[o] = '\0';
}

/* Runs tc with args (from argv[1], NULL-terminated) within TC_TIMEOUT_MS, stdout and stderr in
 * out. 0 when it exited 0; -1 with out saying why (its words, cannot start, killed late). */
static int run_tc(const char *const *args, char *out, size_t len)
{
    const char *tc = getenv("HCAGENT_TC") ? getenv("HCAGENT_TC") : "/sbin/tc";
    const char *argv[32] = {tc};
    char text[600] = "", said[700];
    size_t used = 0, n = 1;
    int fds[2] = {-1, -1}, rc = -1, status = 0, err;
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(out, len, "cannot run %s: %s", tc, strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    err = posix_spawn(&pid, tc, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err) {
        snprintf(out, len, "cannot run %s: %s", tc, strerror(err));
        goto cleanup;
    }
    int64_t deadline = hc_mono_ms() + TC_TIMEOUT_MS;
    int done = 0, eof = 0;
    while (!done) {
        int64_t left = deadline - hc_mono_ms();
        if (left <= 0)
            break;
        struct pollfd p = {fds[0], POLLIN, 0};
        if (!eof && poll(&p, 1, (int)(left < 50 ? left : 50)) > 0) {
            ssize_t got = read(fds[0], text + used, sizeof(text) - 1 - used);
            if (got > 0)
                used += (size_t)got;
            else if (got == 0 || errno != EINTR)
                eof = 1;
            if (used == sizeof(text) - 1)
                eof = 1; /* enough said; the rest is dropped with the pipe */
        } else if (eof) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        /* ECHILD: reaped elsewhere (SIGCHLD ignored), its status lost; the caller reads back
         * what the kernel holds anyway */
        if (w < 0 && errno == ECHILD) {
            status = 0;
            w = pid;
        }
        done = w == pid;
    }
    while (done && !eof && used < sizeof(text) - 1) { /* what it wrote just before exiting */
        struct pollfd p = {fds[0], POLLIN, 0};
        ssize_t got = poll(&p, 1, 0) > 0 ? read(fds[0], text + used, sizeof(text) - 1 - used) : 0;
        if (got <= 0)
            break;
        used += (size_t)got;
    }
    text[used] = '\0';
    one_line(text, said, sizeof(said));
    if (!done) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        snprintf(out, len, "%s %s did not finish within %d s (killed)%s%s", tc, args[0],
                 TC_TIMEOUT_MS / 1000, said[0] ? ": " : "", said);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !said[0]) {
        snprintf(out, len, "cannot run %s", tc);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(out, len, "%s %s %s failed (%s %d)%s%s", tc, args[0], args[1],
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), said[0] ? ": " : "",
                 said);
    } else {
        rc = 0;
    }
cleanup:
    close(fds[0]);
    return rc;
}

/* ---------------------------------------------------------------- apply and clear */

/* nl from what the kernel holds on ifname now; why (if any) says what did not happen. */
static void record(struct hc_netlimit *nl, const char *name, const char *address, const char *why)
{
    struct tc_seen s;
    char read_why[200] = "", why_copy[600], ifname[sizeof(nl->interface)];
    snprintf(why_copy, sizeof(why_copy), "%s", why ? why : "");
    snprintf(ifname, sizeof(ifname), "%s", name); /* name may be nl->interface itself */
    int known = read_kernel(ifname, &s, read_why, sizeof(read_why)) == 0;
    snprintf(nl->interface, sizeof(nl->interface), "%s", ifname);
    nl->applied = known && held(&s);
    if (nl->applied || address) /* the kernel's filter says which address is bounded */
        snprintf(nl->address, sizeof(nl->address), "%s", nl->applied ? s.filter_src : address);
    nl->mbit = nl->applied ? mbit_of(&s) : 0;
    if (nl->applied)
        snprintf(nl->detail, sizeof(nl->detail),
                 "egress TCP from %s on %s held to %d Mbit/s (htb %x:)%s%s", nl->address, ifname,
                 nl->mbit, HC_NETLIMIT_HANDLE, why_copy[0] ? "; " : "", why_copy);
    else
        snprintf(nl->detail, sizeof(nl->detail), "%s%sthe service's traffic on %s is not bounded",
                 why_copy[0] ? why_copy : (known ? "" : read_why),
                 why_copy[0] || !known ? ": " : "", ifname);
}

/* Why a tc run failed, in words an operator acts on (permission first: tc's own words last). */
static void tc_reason(const char *what, const char *tc_said, char *why, size_t len)
{
    if (strstr(tc_said, "Operation not permitted"))
        snprintf(why, len, "%s not applied: not permitted to change qdiscs (CAP_NET_ADMIN): %s",
                 what, tc_said);
    else
        snprintf(why, len, "%s not applied: %s", what, tc_said);
}

static int valid_name(const char *ifname)
{
    return ifname && ifname[0] && strlen(ifname) < IFNAMSIZ && !strchr(ifname, '/');
}

int hc_netlimit_apply(const char *ifname, const char *src_ipv4, int mbit, struct hc_netlimit *nl)
{
    char what[80], rate[32], src[40], said[500], why[600] = "", old[sizeof(nl->interface)];
    char moved[300] = "";
    struct in_addr a;
    struct tc_seen s;
    int made = 0, rc = -1;
    snprintf(old, sizeof(old), "%s", nl->interface);
    if (!valid_name(ifname) || !src_ipv4 || inet_pton(AF_INET, src_ipv4, &a) != 1 || mbit < 0 ||
        mbit > MAX_MBIT) {
        snprintf(why, sizeof(why),
                 "net bound not applied: needs an interface, an IPv4 address and 0-%d Mbit/s "
                 "(got '%s', '%s', %d)",
                 MAX_MBIT, ifname ? ifname : "", src_ipv4 ? src_ipv4 : "", mbit);
        if (valid_name(old)) { /* what the last apply left there still holds */
            record(nl, old, NULL, why);
        } else {
            memset(nl, 0, sizeof(*nl));
            snprintf(nl->detail, sizeof(nl->detail), "%s: the service's traffic is not bounded",
                     why);
        }
        return -1;
    }
    if (valid_name(old) && strcmp(old, ifname) != 0) { /* the storage interface changed */
        struct hc_netlimit there = {0};
        if (hc_netlimit_clear(old, &there) < 0)
            snprintf(moved, sizeof(moved), "the bound on %s stays: %s", old, there.detail);
    }
    memset(nl, 0, sizeof(*nl));
    if (mbit == 0)
        return hc_netlimit_clear(ifname, nl);
    snprintf(nl->address, sizeof(nl->address), "%s", src_ipv4);
    snprintf(what, sizeof(what), "net bound of %d Mbit/s", mbit);
    if (read_kernel(ifname, &s, said, sizeof(said)) < 0) {
        snprintf(why, sizeof(why), "%s not applied: %s", what, said);
        goto done;
    }
    if (!ours(&s) && s.has_root && (s.root_handle >> 16) != 0) {
        snprintf(why, sizeof(why),
                 "%s not applied: %s has a root qdisc the agent did not put there (%s %x:), "
                 "left alone",
                 what, ifname, s.root_kind, s.root_handle >> 16);
        goto done;
    }
    if (!ours(&s)) {
        const char *args[] = {"qdisc", "replace", "dev",     ifname, "root", "handle",
                              "4863:", "htb",     "default", "0",    NULL};
        if (run_tc(args, said, sizeof(said)) < 0) {
            tc_reason(what, said, why, sizeof(why));
            goto done;
        }
        made = 1;
    }
    snprintf(rate, sizeof(rate), "%dmbit", mbit);
    const char *class_args[] = {
        "class", "replace", "dev", ifname, "parent", "4863:",   "classid", "4863:1",
        "htb",   "rate",    rate,  "ceil", rate,     "quantum", "65536",   NULL};
    snprintf(src, sizeof(src), "%s/32", src_ipv4);
    const char *filter_args[] = {
        "filter", "replace",  "dev",      ifname, "parent", "4863:",  "protocol", "ip", "prio",
        "1",      "handle",   "800::800", "u32",  "match",  "ip",     "src",      src,  "match",
        "ip",     "protocol", "6",        "0xff", "flowid", "4863:1", NULL};
    if (run_tc(class_args, said, sizeof(said)) < 0 || run_tc(filter_args, said, sizeof(said)) < 0) {
        tc_reason(what, said, why, sizeof(why));
        if (made) { /* leave the interface as it was found */
            const char *del[] = {"qdisc", "del", "dev", ifname, "root", NULL};
            run_tc(del, said, sizeof(said));
        }
        goto done;
    }
    rc = 0;
done:
    if (moved[0]) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof(why) - n, "%s%s", n ? "; " : "", moved);
    }
    record(nl, ifname, src_ipv4, why);
    if (rc == 0 && (!nl->applied || nl->mbit != mbit || strcmp(nl->address, src_ipv4) != 0)) {
        snprintf(why, sizeof(why), "%s for %s: tc succeeded but the kernel holds %d Mbit/s%s%s",
                 what, src_ipv4, nl->mbit, nl->applied ? " for " : "",
                 nl->applied ? nl->address : "");
        record(nl, ifname, src_ipv4, why);
        rc = -1;
    }
    return rc;
}

int hc_netlimit_clear(const char *ifname, struct hc_netlimit *nl)
{
    char said[500], why[600] = "";
    struct tc_seen s;
    int rc = 0;
    snprintf(nl->interface, sizeof(nl->interface), "%s", ifname ? ifname : "");
    if (!valid_name(ifname) || read_kernel(ifname, &s, said, sizeof(said)) < 0) {
        nl->applied = nl->mbit = 0;
        snprintf(nl->detail, sizeof(nl->detail), "no net bound to clear: %s",
                 valid_name(ifname) ? said : "no interface named");
        return 0;
    }
    if (ours(&s)) {
        const char *del[] = {"qdisc", "del", "dev", ifname, "root", NULL};
        if (run_tc(del, said, sizeof(said)) < 0) {
            tc_reason("clearing the net bound", said, why, sizeof(why));
            rc = -1;
        }
    }
    record(nl, ifname, NULL, why);
    if (rc == 0 && nl->applied)
        rc = -1; /* still there: record said so */
    return rc;
}

/* ---------------------------------------------------------------- report */

json_t *hc_netlimit_json(const struct hc_netlimit *nl)
{
    struct tc_seen s = {0};
    char why[200] = "", detail[800];
    int on = nl->interface[0] && read_kernel(nl->interface, &s, why, sizeof(why)) == 0 && held(&s);
    const char *address = on ? s.filter_src : nl->address;
    snprintf(detail, sizeof(detail), "%s", nl->detail);
    if (nl->applied && !on)
        snprintf(detail, sizeof(detail),
                 "the net bound of %d Mbit/s on %s is gone (%s): the service's traffic is not "
                 "bounded",
                 nl->mbit, nl->interface, why[0] ? why : "removed outside the agent");
    else if (on && (!nl->applied || mbit_of(&s) != nl->mbit || strcmp(address, nl->address)))
        snprintf(detail, sizeof(detail),
                 "the kernel holds %d Mbit/s for TCP from %s on %s, set outside the agent",
                 mbit_of(&s), address, nl->interface);
    return json_pack("{s:b, s:i, s:s?, s:s?, s:s, s:o, s:o, s:o}", "applied", on, "mbit",
                     on ? mbit_of(&s) : 0, "interface", nl->interface[0] ? nl->interface : NULL,
                     "address", address[0] ? address : NULL, "detail", detail, "sent_bytes",
                     on ? json_integer((json_int_t)s.bytes) : json_null(), "dropped",
                     on ? json_integer(s.drops) : json_null(), "overlimits",
                     on ? json_integer(s.overlimits) : json_null());
}
