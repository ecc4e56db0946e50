/*
 * Cached path MTUs for unit tests that run in a private network namespace (root): a route
 * exception is made the way a router makes one, by an ICMP "fragmentation needed" quoting a
 * datagram of ours (sent to ourselves over loopback with a raw socket), and `ip route get`
 * tells whether it is still cached; and a link's MTU as `ip` shows it. Header-only, like
 * testdir.h. Needs cmocka.h first.
 */
#ifndef HC_TESTS_UNIT_PMTU_LEARN_H
#define HC_TESTS_UNIT_PMTU_LEARN_H

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The MTU of a link as `ip` reports it (this process's namespace; /sys is still the host's),
 * or -1. */
static inline int hc_test_link_mtu(const char *ifname)
{
    char cmd[128], line[1024] = "";
    snprintf(cmd, sizeof(cmd), "ip -o link show dev %s 2>/dev/null", ifname);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(line, 1, sizeof(line) - 1, p);
    line[n] = '\0';
    pclose(p);
    const char *m = strstr(line, " mtu ");
    return m ? atoi(m + 5) : -1;
}

/* `ip route get PEER`: a cached exception shows on its second line ("cache ... mtu ..."). */
static inline void hc_test_route_get(const char *peer, char *out, size_t len)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "ip route get %s 2>&1", peer);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, len - 1, p) : 0;
    out[n] = '\0';
    if (p)
        pclose(p);
}

static inline int hc_test_route_cached(const char *peer)
{
    char out[1024];
    hc_test_route_get(peer, out, sizeof(out));
    return strstr(out, " mtu ") != NULL;
}

static inline uint16_t hc_test_csum(const void *data, size_t len)
{
    const uint8_t *b = data;
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(b[i] << 8 | b[i + 1]);
    if (len & 1)
        sum += (uint32_t)(b[len - 1] << 8);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return htons((uint16_t)~sum);
}

/* Makes the kernel learn path MTU `mtu` toward peer (reached from the local address self): an
 * ICMP "fragmentation needed" naming it, about a datagram of a connected UDP socket of ours.
 * Below 552 the kernel clamps and locks the exception ("mtu lock 552"), as after a node ran at
 * MTU 68. */
static inline void hc_test_learn_pmtu(const char *self_addr, const char *peer_addr, int mtu)
{
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_port = htons(40000)};
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(7445)};
    unsigned char pkt[sizeof(struct icmphdr) + sizeof(struct iphdr) + sizeof(struct udphdr)];
    struct icmphdr *ic = (struct icmphdr *)pkt;
    struct iphdr *ip = (struct iphdr *)(pkt + sizeof(*ic));
    struct udphdr *uh = (struct udphdr *)(pkt + sizeof(*ic) + sizeof(*ip));
    inet_pton(AF_INET, self_addr, &self.sin_addr);
    inet_pton(AF_INET, peer_addr, &peer.sin_addr);
    int u = socket(AF_INET, SOCK_DGRAM, 0), r = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    assert_true(u >= 0 && r >= 0);
    assert_int_equal(bind(u, (struct sockaddr *)&self, sizeof(self)), 0);
    assert_int_equal(connect(u, (struct sockaddr *)&peer, sizeof(peer)), 0);
    memset(pkt, 0, sizeof(pkt));
    ip->version = 4;
    ip->ihl = 5;
    ip->tot_len = htons(1500);
    ip->frag_off = htons(IP_DF);
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->saddr = self.sin_addr.s_addr;
    ip->daddr = peer.sin_addr.s_addr;
    ip->check = hc_test_csum(ip, sizeof(*ip));
    uh->source = self.sin_port;
    uh->dest = peer.sin_port;
    uh->len = htons(1480);
    ic->type = ICMP_DEST_UNREACH;
    ic->code = ICMP_FRAG_NEEDED;
    ic->un.frag.mtu = htons((uint16_t)mtu);
    ic->checksum = hc_test_csum(pkt, sizeof(pkt));
    self.sin_port = 0;
    assert_int_equal(sendto(r, pkt, sizeof(pkt), 0, (struct sockaddr *)&self, sizeof(self)),
                     (ssize_t)sizeof(pkt));
    for (int i = 0; i < 50 && !hc_test_route_cached(peer_addr); i++)
        usleep(10 * 1000);
    close(r);
    close(u);
}

#endif
