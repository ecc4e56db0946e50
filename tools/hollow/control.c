/*
 * hchollow's small sockets (hollow.h): the UDP echo responder every node runs on port 7445
 * (the controller's poller sends each node small and full-size probes every cycle; see
 * agents/hcagent/probe.h for the packets), faults applied; and the control socket, a unix
 * stream socket (mode 0600) with one command a line and one JSON answer a line (docs/hollow.md
 * "Control"), and its client `hchollow ctl`.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agents/hcagent/probe.h"
#include "common/constants.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "tools/hollow/hollow.h"

#define CONTROL_LINE_MAX 512

/* ---------------------------------------------------------------- echo responder */

/* One socket per node, bound to its address (a wildcard socket would take port 7445 from every
 * real agent on loopback beside it, in the e2e suite). */
static void echo_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct hollow_node *n = arg;
    static uint8_t buf[HC_PROBE_MAX_SIZE];
    for (int burst = 0; burst < 16; burst++) {
        struct sockaddr_in from;
        socklen_t flen = sizeof(from);
        ssize_t len = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (len < 0)
            return;
        struct hc_probe_packet p;
        /* never a reply, nor a datagram from a responder's or a privileged port (no loops);
         * the node's MTU is for POST /v1/net/probe's topology: the poller probes the path the
         * kernel gives it, which on loopback carries any size */
        if (hc_probe_packet_parse(buf, (size_t)len, &p) < 0 || p.type == HC_PROBE_PKT_REPLY ||
            ntohs(from.sin_port) < 1024 || ntohs(from.sin_port) == HC_PORT_PROBE ||
            n->fault == FAULT_UNREACHABLE ||
            (n->fault == FAULT_STALLED && (size_t)len + 28 > HC_PROBE_SMALL_SIZE))
            continue;
        if (p.type == HC_PROBE_PKT_PROBE_V2)
            memcpy(buf, HC_PROBE_REPLY_MAGIC, 4);
        if (sendto(fd, buf, (size_t)len, MSG_DONTWAIT, (struct sockaddr *)&from, flen) >= 0)
            n->h->echoes++;
    }
}

int hollow_echo_start(struct hollow *h, struct hc_error *err)
{
    for (int i = 0; i < h->count; i++) {
        struct hollow_node *n = &h->nodes[i];
        struct sockaddr_in sin = {
            .sin_family = AF_INET, .sin_port = htons(HC_PORT_PROBE), .sin_addr = n->in};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
            if (fd >= 0)
                close(fd);
            return hc_error_set(err, HC_E(INTERNAL), "cannot bind the echo responder on %s:%d: %s",
                                n->addr, HC_PORT_PROBE, strerror(errno));
        }
        n->echo_fd = fd;
        n->echo_ev = event_new(h->base, fd, EV_READ | EV_PERSIST, echo_cb, n);
        if (!n->echo_ev || event_add(n->echo_ev, NULL) != 0)
            return hc_error_set(err, HC_E(INTERNAL), "cannot watch the echo responder");
    }
    return 0;
}

/* ---------------------------------------------------------------- commands */

int hollow_range_parse(const struct hollow *h, const char *text, int *lo, int *hi)
{
    char *end;
    if (!strcmp(text, "all")) {
        *lo = 0;
        *hi = h->count - 1;
        return 0;
    }
    for (int i = 0; i < h->count; i++)
        if (!strcmp(h->nodes[i].name, text)) {
            *lo = *hi = i;
            return 0;
        }
    if (!isdigit((unsigned char)text[0]))
        return -1;
    long a = strtol(text, &end, 10), b = a;
    if (*end == '-') {
        if (!isdigit((unsigned char)end[1]))
            return -1;
        b = strtol(end + 1, &end, 10);
    }
    if (*end || a < 0 || b < a || b >= h->count)
        return -1;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static json_t *stats(struct hollow *h)
{
    json_t *faults = json_object();
    int enrolled = 0;
    for (int i = 0; i < h->count; i++) {
        enrolled += h->nodes[i].enrolled;
        if (h->nodes[i].fault != FAULT_NONE)
            json_object_set_new(faults, h->nodes[i].name,
                                json_string(hollow_fault_name(h->nodes[i].fault)));
    }
    return json_pack("{s:b, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "ok", 1, "identities",
                     h->count, "enrolled", enrolled, "requests", (json_int_t)h->requests, "echoes",
                     (json_int_t)h->echoes, "staged_bytes", (json_int_t)h->staged_bytes,
                     "stage_failures", (json_int_t)h->stage_failures, "rss_kb",
                     (json_int_t)rss_kb(), "faults", faults);
}

static json_t *fail(const char *fmt, const char *arg)
{
    char msg[CONTROL_LINE_MAX + 128];
    snprintf(msg, sizeof(msg), fmt, arg);
    return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

/* What /v1/status and /v1/interfaces report, for the controller's checks to find faults in:
 * "clock" the offset of the reported time from the real one (ms, may be negative), "disk" the
 * data directory's free space (percent), "mtu" the storage interface's MTU. */
static json_t *control_status_knob(struct hollow *h, const char *knob, const char *range,
                                   const char *value)
{
    int lo, hi;
    char *end;
    long long v = strtoll(value, &end, 10);
    if (hollow_range_parse(h, range, &lo, &hi) < 0)
        return fail("bad range '%s': all, I, I-J (0-based) or a node name", range);
    int is_clock = !strcmp(knob, "clock"), is_disk = !strcmp(knob, "disk");
    long long min = is_clock  ? -86400000LL
                    : is_disk ? 0
                              : 576,
              max = is_clock  ? 86400000LL
                    : is_disk ? 100
                              : 65535;
    if (*end || end == value || v < min || v > max) {
        char why[CONTROL_LINE_MAX + 64];
        snprintf(why, sizeof(why), "%s needs an integer from %lld to %lld, not '%s'", knob, min,
                 max, value);
        return fail("%s", why);
    }
    for (int i = lo; i <= hi; i++) {
        if (is_clock)
            h->nodes[i].clock_offset_ms = v;
        else if (is_disk)
            h->nodes[i].disk_free_percent = (int)v;
        else
            h->nodes[i].mtu = (int)v;
    }
    HC_INFO("hchollow: nodes %d-%d: %s %lld", lo, hi, knob, v);
    return json_pack("{s:b, s:i, s:I}", "ok", 1, "nodes", hi - lo + 1, knob, (json_int_t)v);
}

json_t *hollow_control_line(struct hollow *h, const char *line)
{
    char words[4][CONTROL_LINE_MAX];
    int n = 0;
    const char *p = line;
    while (*p && n < 4) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, " \t");
        snprintf(words[n++], sizeof(words[0]), "%.*s", (int)len, p);
        p += len;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (n == 0)
        return fail("empty command%s", "");
    if (*p)
        return fail("too many words in '%s'", line);
    if (!strcmp(words[0], "stats") && n == 1)
        return stats(h);
    if (n == 3 &&
        (!strcmp(words[0], "clock") || !strcmp(words[0], "disk") || !strcmp(words[0], "mtu")))
        return control_status_knob(h, words[0], words[1], words[2]);
    if (strcmp(words[0], "fault") != 0 || n < 3)
        return fail("unknown command '%s': use 'stats', 'fault RANGE MODE [MS]', 'clock RANGE MS', "
                    "'disk RANGE PERCENT' or 'mtu RANGE MTU'",
                    words[0]);
    int lo, hi, ms = 0;
    enum hollow_fault f;
    if (hollow_range_parse(h, words[1], &lo, &hi) < 0)
        return fail("bad range '%s': all, I, I-J (0-based) or a node name", words[1]);
    if (hollow_fault_parse(words[2], &f) < 0)
        return fail("unknown fault '%s': none, unreachable, stalled, slow MS, failing", words[2]);
    if ((f == FAULT_SLOW) != (n == 4))
        return fail("'%s' takes a delay in ms only for slow", words[2]);
    if (f == FAULT_SLOW) {
        char *end;
        long v = strtol(words[3], &end, 10);
        if (*end || v < 1 || v > 600000)
            return fail("slow needs 1 to 600000 ms, not '%s'", words[3]);
        ms = (int)v;
    }
    for (int i = lo; i <= hi; i++) {
        struct hc_error err = {0};
        if (hollow_set_fault(&h->nodes[i], f, ms, &err) < 0)
            return fail("%s", err.message);
    }
    HC_INFO("hchollow: nodes %d-%d: fault %s", lo, hi, hollow_fault_name(f));
    return json_pack("{s:b, s:i, s:s}", "ok", 1, "nodes", hi - lo + 1, "fault",
                     hollow_fault_name(f));
}

static void control_read(struct bufferevent *bev, void *arg)
{
    struct hollow *h = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;
    char *line;
    while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF))) {
        json_t *answer = len > CONTROL_LINE_MAX ? fail("line longer than %s bytes", "512")
                                                : hollow_control_line(h, line);
        char *text = json_dumps(answer, JSON_COMPACT);
        bufferevent_write(bev, text, strlen(text));
        bufferevent_write(bev, "\n", 1);
        free(text);
        json_decref(answer);
        free(line);
    }
    if (evbuffer_get_length(in) > CONTROL_LINE_MAX) {
        const char msg[] = "{\"ok\":false,\"error\":\"line longer than 512 bytes\"}\n";
        evbuffer_drain(in, evbuffer_get_length(in));
        bufferevent_write(bev, msg, sizeof(msg) - 1);
    }
}

static void control_event(struct bufferevent *bev, short what, void *arg)
{
    (void)what;
    (void)arg;
    bufferevent_free(bev);
}

static void control_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *a,
                           int len, void *arg)
{
    (void)l;
    (void)a;
    (void)len;
    struct hollow *h = arg;
    struct bufferevent *bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        close(fd);
        return;
    }
    bufferevent_setcb(bev, control_read, NULL, control_event, h);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int hollow_control_start(struct hollow *h, const char *path, struct hc_error *err)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--control path too long");
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    unlink(path);
    mode_t old = umask(077);
    h->control = evconnlistener_new_bind(h->base, control_accept, h,
                                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
                                         (struct sockaddr *)&sun, sizeof(sun));
    umask(old);
    return h->control ? 0
                      : hc_error_set(err, HC_E(INTERNAL), "cannot listen on '%s': %s", path,
                                     strerror(errno));
}

/* ---------------------------------------------------------------- hchollow ctl */

int hollow_ctl_main(int argc, char **argv)
{
    const char *path = NULL;
    int i = 0;
    if (argc >= 2 && !strcmp(argv[0], "--control")) {
        path = argv[1];
        i = 2;
    }
    if (!path || i >= argc) {
        fprintf(stderr, "usage: hchollow ctl --control PATH stats | fault RANGE MODE [MS]\n");
        return 2;
    }
    char line[CONTROL_LINE_MAX + 2] = "";
    size_t used = 0;
    for (; i < argc; i++)
        used +=
            (size_t)snprintf(line + used, sizeof(line) - used, "%s%s", used ? " " : "", argv[i]);
    if (used >= CONTROL_LINE_MAX) {
        fprintf(stderr, "hchollow ctl: command too long\n");
        return 2;
    }
    strcat(line, "\n");
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        fprintf(stderr, "hchollow ctl: cannot connect to %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 3;
    }
    if (write(fd, line, strlen(line)) < 0) {
        close(fd);
        return 3;
    }
    char answer[65536];
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof(answer) && (r = read(fd, answer + got, sizeof(answer) - 1 - got)) > 0) {
        got += (size_t)r;
        if (memchr(answer, '\n', got))
            break;
    }
    close(fd);
    answer[got] = '\0';
    fputs(answer, stdout);
    json_t *doc = json_loads(answer, JSON_DISABLE_EOF_CHECK, NULL);
    int ok = json_is_true(json_object_get(doc, "ok"));
    json_decref(doc);
    return ok ? 0 : 1;
}
