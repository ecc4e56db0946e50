/* One rtnetlink request and its replies (agents/hcagent/rtnl.h). */
#include "agents/hcagent/rtnl.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* Bigger than a page: a dump fills what the first read offers. */
#define NL_BUF_SIZE 32768

int hc_rtnl_transact(struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
    int rc = -1, saved = 0;
    char *buf = malloc(NL_BUF_SIZE);
    struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
    if (!buf || !nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
        goto cleanup;
    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = (unsigned int)time(NULL);
    unsigned int portid = mnl_socket_get_portid(nl);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
        goto cleanup;
    int ret;
    do {
        ssize_t n = mnl_socket_recvfrom(nl, buf, NL_BUF_SIZE);
        if (n < 0)
            goto cleanup;
        ret = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, portid, cb, data);
    } while (ret > MNL_CB_STOP);
    rc = ret < 0 ? -1 : 0;
cleanup:
    saved = errno;
    if (nl)
        mnl_socket_close(nl);
    free(buf);
    errno = saved;
    return rc;
}
