/*
 * hcload's private header: the state shared by the program (hcload.c: options, the run, the
 * timeline, the shared counters and the report) and its workers (hcload_worker.c: the block
 * format, requests with failover, the load and verification loops). docs/hcload.md.
 */
#ifndef HC_AGENTS_HCLOAD_H
#define HC_AGENTS_HCLOAD_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/stop.h"

#define HCLOAD_KEY_MAX 128
#define HCLOAD_PREFIX_MAX 64
#define HCLOAD_BLOCK_MIN 256 /* room for the longest header: docs/hcload.md */
#define HCLOAD_BLOCK_MAX (1024 * 1024)
#define HCLOAD_HIST_SUB 64 /* sub-buckets per power of two: percentiles within 1/64 */
#define HCLOAD_HIST_BUCKETS (HCLOAD_HIST_SUB * 40)

struct hcload_opts {
    double duration_s;
    long workers, keys, block_size, request_timeout_ms, op_timeout_ms;
    double read_ratio;
    char prefix[HCLOAD_PREFIX_MAX + 1];
    const char *timeline;
    int json, quiet;
};

/* Latencies in microseconds, log-linear buckets: fixed memory however long the run. */
struct hcload_hist {
    uint64_t n[HCLOAD_HIST_BUCKETS];
    uint64_t count;
    int64_t max_us;
};

/* Everything shared between threads, under mu. tick is the current second of the timeline. */
struct hcload_stats {
    pthread_mutex_t mu;
    uint64_t writes, reads, errors, failovers, stale, corrupt, shown;
    struct hcload_hist all, tick;
    uint64_t tick_errors;
    int64_t start_us, last_ok_us, stall_us, load_end_us;
    uint64_t v_checked, v_lost, v_unreachable; /* unreachable keys are lost too */
};

/* acked: the last acknowledged sequence number (0: none); attempted: the last one sent. */
struct hcload_key {
    uint64_t acked, attempted;
};

struct hcload_worker {
    struct hcload *L;
    int id, home, cur;
    int64_t moved_us; /* when the worker last failed over */
    uint64_t rng;
    CURL **easy; /* one per node, each keeping its connection open */
    struct curl_slist *headers;
    struct hcload_key *keys;
    uint32_t *acked; /* indices of the keys with an acknowledged write, for reads */
    size_t n_acked;
    unsigned char *block; /* the block being written, or the expected one of a read */
    unsigned char *in;    /* the response body */
    size_t in_len, in_cap;
    int in_overflow;
    char errbuf[CURL_ERROR_SIZE];
};

struct hcload {
    struct hcload_opts o;
    char (*nodes)[300]; /* base URLs, "http://host:port" */
    int n_nodes;
    struct hcload_stats st;
    struct hcload_worker *workers;
    FILE *timeline;
    struct hc_stop stop;      /* the load ends: set by --duration or the first signal */
    struct hc_stop abort_run; /* the second signal: the operations in flight are abandoned */
    atomic_int loading, verifying;
};

/* Monotonic microseconds. */
int64_t hcload_mono_us(void);
/* Progress and chatter: "hcload: ..." on stderr, nothing with --quiet. */
void hcload_say(const struct hcload *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The shared counters (each takes L->st.mu): a successful operation and its latency; a failed
 * operation or data error counted in *counter (a field of L->st) and shown on stderr while
 * fewer than a few have been; n added to a counter; the end of one worker's load. */
void hcload_stats_ok(struct hcload *L, int write, int64_t lat_us);
void hcload_stats_bad(struct hcload *L, uint64_t *counter, const char *what);
void hcload_stats_add(struct hcload *L, uint64_t *counter, uint64_t n);
void hcload_stats_load_done(struct hcload *L);

/* A worker's buffers and one curl handle per node; 0 or -1 (out of memory). hcload_worker_free
 * releases what init allocated, also after a failed init, and accepts a zeroed worker. */
int hcload_worker_init(struct hcload *L, struct hcload_worker *w, int id);
void hcload_worker_free(struct hcload_worker *w);
/* The thread: load until L->stop, then verify; arg is the struct hcload_worker. */
void *hcload_worker_main(void *arg);

#endif
