/*
 * Fuzz target: the probe packet parser (hc_probe_packet_parse, agents/hcagent/probe.c), which
 * decides what the UDP responder on port 7445 answers — the one input of an agent that anyone who
 * can send a datagram reaches. Besides memory safety it checks the rules the responder relies on:
 * a packet is accepted only with a known magic and at least 8 bytes, a reply only with the
 * version 2 mark, the parsed fields match the bytes, and the answer the responder would send
 * (the reply magic on a version 2 probe) parses as a reply, which no responder answers.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/probe.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hc_probe_packet p;
    if (hc_probe_packet_parse(data, size, &p) < 0)
        return 0;
    uint32_t seq;
    if (size < 8 || size > HC_PROBE_MAX_SIZE - HC_IPV4_UDP_HEADERS || p.length != size)
        fuzz_die("accepted a packet of %zu bytes", size);
    memcpy(&seq, data + 4, 4);
    if (p.seq != ntohl(seq))
        fuzz_die("sequence number %u, the bytes say %u", p.seq, ntohl(seq));
    int marked = size >= HC_PROBE_V2_HEADER && memcmp(data + 8, HC_PROBE_V2_MARK, 4) == 0;
    switch (p.type) {
    case HC_PROBE_PKT_PROBE_V1:
        if (memcmp(data, HC_PROBE_MAGIC, 4) != 0 || marked || p.version != 1)
            fuzz_die("not a version 1 probe");
        break;
    case HC_PROBE_PKT_PROBE_V2: {
        if (memcmp(data, HC_PROBE_MAGIC, 4) != 0 || !marked || p.version != 2)
            fuzz_die("not a version 2 probe");
        /* the responder's answer */
        uint8_t *reply = malloc(size);
        struct hc_probe_packet r;
        if (!reply)
            return 0;
        memcpy(reply, data, size);
        memcpy(reply, HC_PROBE_REPLY_MAGIC, 4);
        if (hc_probe_packet_parse(reply, size, &r) < 0 || r.type != HC_PROBE_PKT_REPLY ||
            r.seq != p.seq)
            fuzz_die("the answer to a version 2 probe is not a reply");
        free(reply);
        break;
    }
    case HC_PROBE_PKT_REPLY:
        if (memcmp(data, HC_PROBE_REPLY_MAGIC, 4) != 0 || !marked || p.version != 2)
            fuzz_die("not a reply");
        break;
    default:
        fuzz_die("unknown packet type %d", (int)p.type);
    }
    return 0;
}
