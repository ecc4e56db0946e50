/* The kernel's IPv4 neighbour table over rtnetlink (agents/hcagent/neigh.h). */
#include "agents/hcagent/neigh.h"

#include <errno.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agents/hcagent/rtnl.h"

/* ================================================================ the table */

static int table_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(attr);
    if (mnl_attr_type_valid(attr, NDTA_MAX) < 0)
        return MNL_CB_OK;
    tb[type] = attr;
    return MNL_CB_OK;
}

static int table_cb(const struct nlmsghdr *nlh, void *data)
{
    struct hc_neigh_table *t = data;
    const struct nlattr *tb[NDTA_MAX + 1] = {0};
    mnl_attr_parse(nlh, sizeof(struct ndtmsg), table_attr_cb, tb);
    if (!tb[NDTA_NAME] || mnl_attr_validate(tb[NDTA_NAME], MNL_TYPE_STRING) < 0 ||
        strcmp(mnl_attr_get_str(tb[NDTA_NAME]), "arp_cache") != 0)
        return MNL_CB_OK;
    /* The table's own message carries NDTA_CONFIG; per-device ones (NDTA_PARMS only) do not. */
    if (!tb[NDTA_CONFIG] || mnl_attr_get_payload_len(tb[NDTA_CONFIG]) < sizeof(struct ndt_config))
        return MNL_CB_OK;
    const struct ndt_config *cfg = mnl_attr_get_payload(tb[NDTA_CONFIG]);
    t->entries = (long)cfg->ndtc_entries;
    const struct nlattr *th[3] = {tb[NDTA_THRESH1], tb[NDTA_THRESH2], tb[NDTA_THRESH3]};
    long *out[3] = {&t->thresh1, &t->thresh2, &t->thresh3};
    for (int i = 0; i < 3; i++)
        if (th[i] && mnl_attr_validate(th[i], MNL_TYPE_U32) >= 0)
            *out[i] = (long)mnl_attr_get_u32(th[i]);
    if (tb[NDTA_STATS] && mnl_attr_get_payload_len(tb[NDTA_STATS]) >= sizeof(struct ndt_stats)) {
        struct ndt_stats st;
        memcpy(&st, mnl_attr_get_payload(tb[NDTA_STATS]), sizeof(st));
        t->fulls = st.ndts_table_fulls;
    }
    t->known = t->thresh3 > 0;
    return MNL_CB_OK;
}

int hc_neigh_table_read(struct hc_neigh_table *out, struct hc_error *err)
{
    char buf[256] = {0};
    struct hc_neigh_table t = {0};
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETNEIGHTBL;
    nlh->nlmsg_flags = NLM_F_DUMP;
    struct ndtmsg *ndtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ndtm));
    ndtm->ndtm_family = AF_INET;
    if (hc_rtnl_transact(nlh, table_cb, &t) < 0)
        return hc_error_set(err, HC_E(IO), "cannot read the neighbour table: %s", strerror(errno));
    if (!t.known)
        return hc_error_set(err, HC_E(IO), "the kernel did not describe its arp_cache table");
    *out = t;
    return 0;
}

int hc_neigh_table_full(const struct hc_neigh_table *before, const struct hc_neigh_table *after)
{
    if (!after->known)
        return 0;
    return (before->known && after->fulls > before->fulls) || after->entries >= after->thresh3;
}

/* ================================================================ entries */

const char *hc_neigh_state_name(enum hc_neigh_state s)
{
    static const char *const names[] = {"unknown", "none", "incomplete", "failed", "resolved"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

struct lookup {
    const struct in_addr *addrs;
    size_t n;
    enum hc_neigh_state *states;
};

static enum hc_neigh_state nud_state(uint16_t nud)
{
    if (nud & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP))
        return HC_NEIGH_RESOLVED;
    if (nud & NUD_FAILED)
        return HC_NEIGH_FAILED;
    if (nud & NUD_INCOMPLETE)
        return HC_NEIGH_INCOMPLETE;
    return HC_NEIGH_NONE;
}

static int entry_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **tb = data;
    if (mnl_attr_get_type(attr) == NDA_DST)
        tb[NDA_DST] = attr;
    return MNL_CB_OK;
}

static int entry_cb(const struct nlmsghdr *nlh, void *data)
{
    struct lookup *l = data;
    const struct ndmsg *ndm = mnl_nlmsg_get_payload(nlh);
    const struct nlattr *tb[NDA_MAX + 1] = {0};
    if (ndm->ndm_family != AF_INET)
        return MNL_CB_OK;
    mnl_attr_parse(nlh, sizeof(*ndm), entry_attr_cb, tb);
    if (!tb[NDA_DST] || mnl_attr_get_payload_len(tb[NDA_DST]) != sizeof(struct in_addr))
        return MNL_CB_OK;
    struct in_addr dst;
    memcpy(&dst, mnl_attr_get_payload(tb[NDA_DST]), sizeof(dst));
    enum hc_neigh_state s = nud_state(ndm->ndm_state);
    /* At most HC_PROBE_MAX_TARGETS addresses against the namespace's entries: a scan is fine. */
    for (size_t i = 0; i < l->n; i++)
        if (l->addrs[i].s_addr == dst.s_addr &&
            (l->states[i] <= HC_NEIGH_NONE || s == HC_NEIGH_RESOLVED))
            l->states[i] = s;
    return MNL_CB_OK;
}

int hc_neigh_lookup(const struct in_addr *addrs, size_t n, enum hc_neigh_state *states,
                    struct hc_error *err)
{
    char buf[256] = {0};
    enum hc_neigh_state *found = calloc(n ? n : 1, sizeof(*found));
    if (!found)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t i = 0; i < n; i++)
        found[i] = HC_NEIGH_NONE;
    struct lookup l = {.addrs = addrs, .n = n, .states = found};
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_GETNEIGH;
    nlh->nlmsg_flags = NLM_F_DUMP;
    struct ndmsg *ndm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ndm));
    ndm->ndm_family = AF_INET;
    if (hc_rtnl_transact(nlh, entry_cb, &l) < 0) {
        free(found);
        return hc_error_set(err, HC_E(IO), "cannot read the neighbour entries: %s",
                            strerror(errno));
    }
    memcpy(states, found, n * sizeof(*states));
    free(found);
    return 0;
}
