/*
 * Network interfaces from the kernel over rtnetlink (libmnl): one RTM_GETLINK dump for the
 * links (name, MTU, operational state, kind, master) and one RTM_GETADDR dump for their IPv4
 * and IPv6 addresses. Reading the kernel directly (not `ip` output) keeps the agent free of
 * external tools and gives exactly what the controller compares against the cluster's MTU.
 */
#include "agents/hcagent/netinfo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* Dumps come in datagrams of up to 32 KiB on current kernels; a smaller buffer truncates. */
#define NL_BUF_SIZE 32768

/* State shared by the dump callbacks. by_index maps "<ifindex>" to the interface object (the
 * same reference as in list), so that addresses and masters find their link. */
struct scan {
    json_t *list;
    json_t *by_index;
};

const char *hc_netinfo_operstate_name(unsigned int operstate)
{
    static const char *const names[] = {
        [IF_OPER_UNKNOWN] = "unknown", [IF_OPER_NOTPRESENT] = "notpresent",
        [IF_OPER_DOWN] = "down",       [IF_OPER_LOWERLAYERDOWN] = "lowerlayerdown",
        [IF_OPER_TESTING] = "testing", [IF_OPER_DORMANT] = "dormant",
        [IF_OPER_UP] = "up",
    };
    if (operstate < HC_ARRAY_LEN(names) && names[operstate])
        return names[operstate];
    return "unknown";
}

/* Sends one dump request (family-specific header of hdr_len bytes) and feeds every reply
 * message to cb until NLMSG_DONE. */
static int nl_dump(struct mnl_socket *nl, int type, size_t hdr_len, mnl_cb_t cb, void *data,
                   struct hc_error *err)
{
    int rc = -1;
    char *buf = calloc(1, NL_BUF_SIZE);
    if (!buf)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory reading interfaces");
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (unsigned short)type;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    unsigned int seq = (unsigned int)time(NULL);
    nlh->nlmsg_seq = seq;
    unsigned char *family = mnl_nlmsg_put_extra_header(nlh, hdr_len);
    family[0] = AF_UNSPEC; /* ifi_family and ifa_family are both the first byte */
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot send netlink request: %s", strerror(errno));
        goto cleanup;
    }
    unsigned int portid = mnl_socket_get_portid(nl);
    int ret;
    do {
        ssize_t n = mnl_socket_recvfrom(nl, buf, NL_BUF_SIZE);
        if (n < 0) {
            hc_error_set(err, HC_E(INTERNAL), "cannot read netlink reply: %s", strerror(errno));
            goto cleanup;
        }
        ret = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
    } while (ret > MNL_CB_STOP);
    if (ret < 0) {
        hc_error_set(err, HC_E(INTERNAL), "netlink dump failed: %s", strerror(errno));
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(buf);
    return rc;
}

/* Keeps the attributes of a link that we read, after checking their payload type, so a
 * malformed attribute is ignored instead of read out of bounds. */
static int link_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(attr);
    int ok;
    switch (type) {
    case IFLA_IFNAME:
        ok = mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0;
        break;
    case IFLA_MTU:
    case IFLA_MASTER:
        ok = mnl_attr_validate(attr, MNL_TYPE_U32) >= 0;
        break;
    case IFLA_OPERSTATE:
        ok = mnl_attr_validate(attr, MNL_TYPE_U8) >= 0;
        break;
    case IFLA_LINKINFO:
        ok = mnl_attr_validate(attr, MNL_TYPE_NESTED) >= 0;
        break;
    default:
        ok = 0;
    }
    if (ok)
        tb[type] = attr;
    return MNL_CB_OK;
}

static int linkinfo_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **kind = data;
    if (mnl_attr_get_type(attr) == IFLA_INFO_KIND &&
        mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
        *kind = attr;
    return MNL_CB_OK;
}

static json_t *link_kind(const struct nlattr *linkinfo)
{
    const struct nlattr *kind = NULL;
    if (linkinfo)
        mnl_attr_parse_nested(linkinfo, linkinfo_attr_cb, &kind);
    return kind ? json_string(mnl_attr_get_str(kind)) : json_null();
}

/* One RTM_NEWLINK message -> one interface object. "master" holds the master's index until
 * resolve_masters replaces it with the name. */
static int link_cb(const struct nlmsghdr *nlh, void *data)
{
    struct scan *scan = data;
    const struct nlattr *tb[IFLA_MAX + 1];
    memset(tb, 0, sizeof(tb));
    const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, tb);
    if (!tb[IFLA_IFNAME])
        return MNL_CB_OK;
    json_t *master =
        tb[IFLA_MASTER] ? json_integer(mnl_attr_get_u32(tb[IFLA_MASTER])) : json_null();
    json_t *iface =
        json_pack("{s:s, s:i, s:I, s:s, s:o, s:o, s:[]}", "name", mnl_attr_get_str(tb[IFLA_IFNAME]),
                  "index", ifm->ifi_index, "mtu",
                  (json_int_t)(tb[IFLA_MTU] ? mnl_attr_get_u32(tb[IFLA_MTU]) : 0), "state",
                  hc_netinfo_operstate_name(tb[IFLA_OPERSTATE] ? mnl_attr_get_u8(tb[IFLA_OPERSTATE])
                                                               : IF_OPER_UNKNOWN),
                  "kind", link_kind(tb[IFLA_LINKINFO]), "master", master, "addresses");
    if (!iface)
        return MNL_CB_ERROR;
    char key[16];
    snprintf(key, sizeof(key), "%d", ifm->ifi_index);
    json_object_set(scan->by_index, key, iface);
    json_array_append_new(scan->list, iface);
    return MNL_CB_OK;
}

static int addr_attr_cb(const struct nlattr *attr, void *data)
{
    const struct nlattr **tb = data;
    int type = mnl_attr_get_type(attr);
    if ((type == IFA_ADDRESS || type == IFA_LOCAL) && mnl_attr_get_payload_len(attr) >= 4)
        tb[type] = attr;
    return MNL_CB_OK;
}

/* One RTM_NEWADDR message -> "addr/prefixlen" appended to its interface. IFA_LOCAL is the
 * interface's own address (IFA_ADDRESS is the peer on point-to-point IPv4 links). */
static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
    struct scan *scan = data;
    const struct nlattr *tb[IFA_MAX + 1];
    memset(tb, 0, sizeof(tb));
    const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
    if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
        return MNL_CB_OK;
    mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
    const struct nlattr *a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    size_t need = ifa->ifa_family == AF_INET ? 4 : 16;
    if (!a || mnl_attr_get_payload_len(a) < need)
        return MNL_CB_OK;
    char key[16], text[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 8];
    snprintf(key, sizeof(key), "%u", ifa->ifa_index);
    json_t *iface = json_object_get(scan->by_index, key);
    if (!iface || !inet_ntop(ifa->ifa_family, mnl_attr_get_payload(a), text, sizeof(text)))
        return MNL_CB_OK;
    snprintf(cidr, sizeof(cidr), "%s/%u", text, ifa->ifa_prefixlen);
    json_array_append_new(json_object_get(iface, "addresses"), json_string(cidr));
    return MNL_CB_OK;
}

static void resolve_masters(struct scan *scan)
{
    size_t i;
    json_t *iface;
    json_array_foreach(scan->list, i, iface)
    {
        json_t *m = json_object_get(iface, "master");
        if (!json_is_integer(m))
            continue;
        char key[24];
        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT, json_integer_value(m));
        json_t *master = json_object_get(scan->by_index, key);
        const char *name = json_string_value(json_object_get(master, "name"));
        json_object_set_new(iface, "master", name ? json_string(name) : json_null());
    }
}

static int by_index(const void *a, const void *b)
{
    json_int_t ia = json_integer_value(json_object_get(*(json_t *const *)a, "index"));
    json_int_t ib = json_integer_value(json_object_get(*(json_t *const *)b, "index"));
    return (ia > ib) - (ia < ib);
}

/* Kernels before 6.x dump links in hash order; the API promises index order. */
static json_t *sorted_by_index(const json_t *list)
{
    size_t n = json_array_size(list);
    json_t **items = calloc(n ? n : 1, sizeof(*items));
    json_t *out = json_array();
    if (!items || !out) {
        free(items);
        json_decref(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        items[i] = json_array_get(list, i);
    qsort(items, n, sizeof(*items), by_index);
    for (size_t i = 0; i < n; i++)
        json_array_append(out, items[i]);
    free(items);
    return out;
}

json_t *hc_netinfo_interfaces(struct hc_error *err)
{
    json_t *result = NULL;
    struct scan scan = {json_array(), json_object()};
    struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
    if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot open rtnetlink socket: %s", strerror(errno));
        goto cleanup;
    }
    if (!scan.list || !scan.by_index) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory reading interfaces");
        goto cleanup;
    }
    if (nl_dump(nl, RTM_GETLINK, sizeof(struct ifinfomsg), link_cb, &scan, err) < 0 ||
        nl_dump(nl, RTM_GETADDR, sizeof(struct ifaddrmsg), addr_cb, &scan, err) < 0) {
        hc_error_prefix(err, "cannot list network interfaces");
        goto cleanup;
    }
    resolve_masters(&scan);
    result = sorted_by_index(scan.list);
    if (!result)
        hc_error_set(err, HC_E(INTERNAL), "out of memory reading interfaces");
cleanup:
    if (nl)
        mnl_socket_close(nl);
    json_decref(scan.by_index);
    json_decref(scan.list);
    return result;
}
