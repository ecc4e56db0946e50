/*
 * Parallel for: the one way an operation fans blocking work out over nodes (cluster.create and
 * node.add over hosts, upgrade.rolling's slots). Event-driven fan-outs of HTTP calls use
 * hc_http_fanout (common/https_client.h) instead, on the caller's thread.
 *
 * hc_parallel_for runs fn(arg, worker, i) once for each i in 0 .. n-1, on at most max_parallel
 * threads, and returns when every one has returned (every thread is joined):
 *
 * - Items are handed out in order: 0 first, then 1, ...; a thread that finishes an item takes
 *   the next one left. Two items run at once only on two different threads.
 * - `worker` (0 .. threads-1) names the thread running the item: items with the same worker
 *   never overlap, so a caller keeps per-thread state (a database connection, an HTTP client)
 *   in an array indexed by it, made at the worker's first item and freed after the call.
 * - Results and errors are the caller's: fn writes them into its own per-item slots (or into
 *   shared state under its own lock). Returning non-zero from fn stops the hand-out: no item is
 *   started after that (those running finish). A pause or abort the caller honours at a safe
 *   point inside the item is the caller's business; the helper never interrupts an item.
 * - When a thread cannot be created it runs with the threads it has; with none at all, the
 *   items run on the calling thread (worker 0), one after the other (so does max_parallel 0).
 *
 * Returns how many items were handed out: n, unless fn stopped the hand-out.
 */
#ifndef HC_COMMON_PARALLEL_H
#define HC_COMMON_PARALLEL_H

#include <stddef.h>

typedef int (*hc_parallel_fn)(void *arg, unsigned worker, size_t i);

size_t hc_parallel_for(size_t n, unsigned max_parallel, hc_parallel_fn fn, void *arg);

/* For unit tests: the next calls create at most `threads` threads (as if pthread_create failed
 * after that many); -1 restores normal creation. */
void hc_parallel_test_thread_limit(int threads);

#endif
