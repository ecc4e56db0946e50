/*
 * iperf3 tests through libiperf in child processes (agents/hcagent/bench.h).
 *
 * A child is forked and at once executes the agent's own program again (`hcagent __bench-client
 * ADDRESS PORT SECONDS` / `__bench-server PORT`): the agent has threads, and a forked copy of a
 * threaded process may only call async-signal-safe functions — libiperf's malloc could wait
 * forever on a lock another thread held at the fork (seen as a test that never answered until
 * the watchdog killed it). Between fork and exec the child only moves descriptors: it keeps the
 * result pipe as descriptor 3, closes every other inherited one (an inherited copy of the
 * agent's listening socket would otherwise keep accepting connections nobody serves) and dies
 * with the thread that forked it (PR_SET_PDEATHSIG, kept across exec). The parent only reads
 * the pipe and waits, with a deadline. HC_BENCH_PROGRAM overrides the program executed (unit
 * tests run the agent's code inside a test binary).
 */
#include "agents/hcagent/bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <iperf_api.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

#define LISTEN_WAIT_MS 3000
#define RESULT_MAX (4 * 1024 * 1024)

/* In the child: the descriptor to keep becomes 3, everything else above 2 is closed, stdout
 * goes to /dev/null (iperf prints there) and default signal actions come back. Only
 * async-signal-safe calls: it runs between fork and exec. */
static int child_prepare(int keep)
{
    if (keep >= 0 && keep != 3 && dup2(keep, 3) < 0)
        return -1;
    close_range(keep >= 0 ? 4 : 3, ~0U, 0);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        close(devnull);
    }
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    return keep >= 0 ? 3 : -1;
}

/* A port that was free a moment ago: the server child binds it right away. */
static int free_tcp_port(struct hc_error *err)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
        hc_error_set(err, HC_E(IO), "cannot find a free tcp port: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sin.sin_port);
}

/* 1 when /proc/net/FILE (this network namespace) lists a socket listening on port. */
static int listening_in(const char *file, int port)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/net/%s", file);
    FILE *f = fopen(path, "re");
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f)) {
        char local[128];
        unsigned st;
        if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2)
            continue;
        const char *colon = strrchr(local, ':');
        found = colon && st == 0x0A && strtol(colon + 1, NULL, 16) == port;
    }
    fclose(f);
    return found;
}

/* The program a child executes: this one, unless HC_BENCH_PROGRAM names another. */
static const char *child_program(void)
{
    const char *p = getenv("HC_BENCH_PROGRAM");
    return p && *p ? p : "/proc/self/exe";
}

/* Forks a child that keeps `keep` as descriptor 3 and executes argv (prepared by the caller:
 * nothing is allocated after the fork). Returns the pid, or -1 with errno. */
static pid_t spawn_child(int keep, char *const argv[])
{
    const char *prog = child_program();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_prepare(keep);
    execv(prog, argv);
    _exit(127);
}

/* The executed child's work: spawn_child already moved its descriptors and signals. */
static void run_server_child(int port)
{
    struct iperf_test *t = iperf_new_test();
    if (!t || iperf_defaults(t) < 0)
        _exit(1);
    iperf_set_test_role(t, 's');
    iperf_set_test_server_port(t, port);
    iperf_set_test_one_off(t, 1);
    iperf_set_test_json_output(t, 1);
    int rc = iperf_run_server(t);
    iperf_free_test(t);
    _exit(rc < 0 ? 1 : 0);
}

int hc_bench_server_start(int duration_s, int *port, pid_t *pid, struct hc_error *err)
{
    int p = free_tcp_port(err);
    if (p < 0)
        return -1;
    char port_arg[16];
    snprintf(port_arg, sizeof(port_arg), "%d", p);
    char *const argv[] = {"hcagent", "__bench-server", port_arg, NULL};
    pid_t child = spawn_child(-1, argv);
    if (child < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot start the iperf3 server: %s",
                            strerror(errno));
    int64_t until = hc_mono_ms() + LISTEN_WAIT_MS;
    while (!listening_in("tcp", p) && !listening_in("tcp6", p)) {
        int status;
        if (waitpid(child, &status, WNOHANG) == child)
            return hc_error_set(err, HC_E(INTERNAL),
                                "iperf3 server on port %d exited at start (status %d)", p, status);
        if (hc_mono_ms() >= until) {
            hc_bench_reap(child, 0);
            return hc_error_set(err, HC_E(TIMEOUT),
                                "iperf3 server on port %d did not listen within %d ms", p,
                                LISTEN_WAIT_MS);
        }
        usleep(10 * 1000);
    }
    *port = p;
    *pid = child;
    return 0;
}

int hc_bench_reap(pid_t pid, int64_t deadline_ms)
{
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return status;
        if (hc_mono_ms() >= deadline_ms)
            break;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

static void write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static void run_client_child(int fd, const char *address, int port, int duration_s)
{
    struct iperf_test *t = iperf_new_test();
    if (!t || iperf_defaults(t) < 0)
        _exit(1);
    iperf_set_test_role(t, 'c');
    iperf_set_test_server_hostname(t, address);
    iperf_set_test_server_port(t, port);
    iperf_set_test_duration(t, duration_s);
    iperf_set_test_connect_timeout(t, 3000);
    iperf_set_test_json_output(t, 1);
    int rc = iperf_run_client(t);
    const char *json = iperf_get_test_json_output_string(t);
    if (json) {
        write_all(fd, json, strlen(json));
    } else {
        json_t *e = json_pack("{s:s}", "error", rc < 0 ? iperf_strerror(i_errno) : "no result");
        char *msg = e ? json_dumps(e, 0) : NULL;
        if (msg)
            write_all(fd, msg, strlen(msg));
    }
    iperf_free_test(t);
    _exit(0);
}

/* Reads the pipe until EOF or the deadline; caller frees. */
static char *read_result(int fd, int64_t deadline_ms)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap + 1);
    while (buf) {
        int64_t left = deadline_ms - hc_mono_ms();
        struct pollfd pfd = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            break;
        if (len == cap) {
            char *bigger = cap < RESULT_MAX ? realloc(buf, cap * 2 + 1) : NULL;
            if (!bigger)
                break;
            buf = bigger;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* MTU of the route toward address: IP_MTU of a connected UDP socket (nothing is sent). */
static int route_mtu(const char *address)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9)};
    int mtu = 0;
    socklen_t len = sizeof(mtu);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (inet_pton(AF_INET, address, &sin.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) < 0)
        mtu = 0;
    close(fd);
    return mtu;
}

static int parse_result(const char *text, const char *address, int port,
                        struct hc_bench_result *out, struct hc_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    int rc = -1;
    const char *msg = json_string_value(json_object_get(doc, "error"));
    json_t *end = json_object_get(doc, "end");
    json_t *sent = json_object_get(end, "sum_sent");
    json_t *recv = json_object_get(end, "sum_received");
    if (!doc || msg || !json_is_object(recv)) {
        hc_error_set(err, HC_E(UNREACHABLE), "iperf3 test toward %s:%d failed: %s", address, port,
                     msg   ? msg
                     : doc ? "no result"
                           : "no output (killed by the watchdog?)");
        goto cleanup;
    }
    out->bits_per_second = json_number_value(json_object_get(recv, "bits_per_second"));
    json_t *retr = json_object_get(sent, "retransmits");
    out->retransmits = json_is_integer(retr) ? json_integer_value(retr) : -1;
    out->mtu = route_mtu(address);
    rc = 0;
cleanup:
    json_decref(doc);
    return rc;
}

int hc_bench_client(const char *address, int port, int duration_s, atomic_int *child_pid,
                    struct hc_bench_result *out, struct hc_error *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot create a pipe: %s", strerror(errno));
    int64_t deadline = hc_mono_ms() + (int64_t)(duration_s + HC_BENCH_GRACE_S) * 1000;
    char port_arg[16], duration_arg[16], address_arg[64];
    snprintf(port_arg, sizeof(port_arg), "%d", port);
    snprintf(duration_arg, sizeof(duration_arg), "%d", duration_s);
    snprintf(address_arg, sizeof(address_arg), "%s", address);
    char *const argv[] = {"hcagent", "__bench-client", address_arg, port_arg, duration_arg, NULL};
    pid_t child = spawn_child(fds[1], argv);
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return hc_error_set(err, HC_E(INTERNAL), "cannot start the iperf3 client: %s",
                            strerror(errno));
    }
    if (child_pid)
        atomic_store(child_pid, child);
    close(fds[1]);
    char *text = read_result(fds[0], deadline);
    close(fds[0]);
    hc_bench_reap(child, deadline);
    if (child_pid)
        atomic_store(child_pid, 0);
    int rc = text ? parse_result(text, address, port, out, err)
                  : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(text);
    return rc;
}

int hc_bench_child_main(int argc, char **argv)
{
    /* argv[0] is the command: "__bench-client ADDRESS PORT SECONDS" or "__bench-server PORT";
     * the result pipe (client) is descriptor 3. */
    if (argc == 4 && strstr(argv[0], "__bench-client"))
        run_client_child(3, argv[1], atoi(argv[2]), atoi(argv[3]));
    else if (argc == 2 && strstr(argv[0], "__bench-server"))
        run_server_child(atoi(argv[1]));
    fprintf(stderr, "hcagent: internal command used wrongly\n");
    return 2;
}
