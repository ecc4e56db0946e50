/*
 * TCP throughput between two nodes with libiperf (iperf3), for `hcctl net bench`.
 *
 * libiperf may call exit() and keeps global state, so each test runs in a child process (the
 * agent's program executed again, see bench.c): the
 * server child serves exactly one test and exits; the client child writes iperf's JSON result
 * into a pipe. The parent kills a child that outlives its watchdog (the test's duration plus
 * 5 s; a server also gets HC_BENCH_START_WINDOW_S for the client to connect).
 */
#ifndef HC_AGENTS_BENCH_H
#define HC_AGENTS_BENCH_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define HC_BENCH_MIN_DURATION_S 1
#define HC_BENCH_MAX_DURATION_S 60
#define HC_BENCH_GRACE_S 5
#define HC_BENCH_START_WINDOW_S 15

struct hc_bench_result {
    double bits_per_second; /* as the receiver counted it */
    int64_t retransmits;    /* TCP retransmissions of the sender; -1 when unknown */
    int mtu;                /* MTU of the route toward the server */
};

/* Starts a one-test iperf3 server child on a free TCP port and waits until it listens.
 * *port and *pid are set on success; the caller must reap the child with hc_bench_reap.
 * -1 with err. */
int hc_bench_server_start(int duration_s, int *port, pid_t *pid, struct hc_error *err);
/* Waits for child pid until deadline_ms (hc_mono_ms clock), then kills it (SIGKILL) and
 * reaps it. Returns the exit status as waitpid reports it. Blocks: call it off the loop. */
int hc_bench_reap(pid_t pid, int64_t deadline_ms);
/* Runs one client test toward address:port for duration_s in a child with a watchdog. Blocks
 * for about duration_s. While the child runs its pid is in *child (if not NULL; 0 otherwise),
 * so that another thread can kill it to cancel the test. -1 with err (server unreachable, test
 * failed, watchdog fired). */
int hc_bench_client(const char *address, int port, int duration_s, atomic_int *child,
                    struct hc_bench_result *out, struct hc_error *err);
/* The children's side: `hcagent __bench-client ADDRESS PORT SECONDS` (result on descriptor 3)
 * and `hcagent __bench-server PORT`. Does not return on proper use. */
int hc_bench_child_main(int argc, char **argv);

#endif
