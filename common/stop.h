/*
 * One stop flag for every program: set by a signal handler or by one thread, read by others.
 *
 * `volatile sig_atomic_t` is safe only between a signal handler and the thread it interrupts;
 * read from another thread it is a data race (C11 5.1.2.4). An atomic_int is both: its loads
 * and stores are atomic across threads, and a lock-free atomic is async-signal-safe (C11
 * 7.14.1.1), which the static assertion below makes sure of. So a handler may call
 * hc_stop_request and any thread hc_stop_requested, with no lock.
 *
 * A flag is zero-initialised (static storage, calloc, `= {0}`) or set with hc_stop_reset.
 */
#ifndef HC_COMMON_STOP_H
#define HC_COMMON_STOP_H

#include <stdatomic.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a stop flag must be lock-free to be set by a signal");

struct hc_stop {
    atomic_int requested;
};

/* Asks to stop (async-signal-safe). Returns 1 when this call was the first request since the
 * flag was reset, 0 when a stop was already asked for (a second Ctrl-C). */
static inline int hc_stop_request(struct hc_stop *s)
{
    return atomic_exchange(&s->requested, 1) == 0;
}

/* 1 once a stop was asked for (async-signal-safe; any thread). */
static inline int hc_stop_requested(const struct hc_stop *s)
{
    return atomic_load(&s->requested) != 0;
}

/* Clears the flag: before a handler that sets it is installed. */
static inline void hc_stop_reset(struct hc_stop *s)
{
    atomic_store(&s->requested, 0);
}

#endif
