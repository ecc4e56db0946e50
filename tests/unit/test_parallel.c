/* Unit tests for common/parallel.c: every item once, never more than max_parallel at once,
 * in order, the stop honoured, and thread creation failing (fewer threads, or none: inline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/parallel.h"

#define ITEMS 200
#define MAX_WORKERS 64

struct probe {
    atomic_int runs[ITEMS];              /* how often each item ran */
    atomic_int busy_worker[MAX_WORKERS]; /* items of one worker running at once */
    atomic_int active, peak;             /* items running now, and the most at once */
    atomic_int order_broken;             /* a thread took an item below one it took before */
    long long last[MAX_WORKERS]; /* the last item of each worker (its own thread writes it) */
    atomic_int bad_worker;       /* a worker index out of range, or two items on one at once */
    atomic_size_t started;       /* items started so far */
    pthread_t caller;
    atomic_int on_caller;   /* items that ran on the calling thread */
    atomic_int workers_max; /* highest worker index seen */
    size_t stop_at;         /* fn returns 1 for this item (ITEMS: never) */
    useconds_t pause_us;
};

static void probe_init(struct probe *p, size_t stop_at, useconds_t pause_us)
{
    memset(p, 0, sizeof(*p));
    for (size_t w = 0; w < MAX_WORKERS; w++)
        p->last[w] = -1;
    p->caller = pthread_self();
    p->stop_at = stop_at;
    p->pause_us = pause_us;
}

static int probe_item(void *arg, unsigned worker, size_t i)
{
    struct probe *p = arg;
    atomic_fetch_add(&p->started, 1);
    int now = atomic_fetch_add(&p->active, 1) + 1;
    for (int peak = atomic_load(&p->peak); now > peak;)
        if (atomic_compare_exchange_weak(&p->peak, &peak, now))
            break;
    /* cmocka's asserts may not run off the main thread: what is wrong is noted, checked after */
    if (worker >= MAX_WORKERS) {
        atomic_store(&p->bad_worker, 1);
        worker = 0;
    }
    if (atomic_fetch_add(&p->busy_worker[worker], 1) != 0)
        atomic_store(&p->bad_worker, 1);
    /* Handed out in order: each thread's items go up. */
    if ((long long)i <= p->last[worker])
        atomic_store(&p->order_broken, 1);
    p->last[worker] = (long long)i;
    for (int w = atomic_load(&p->workers_max); (int)worker > w;)
        if (atomic_compare_exchange_weak(&p->workers_max, &w, (int)worker))
            break;
    if (pthread_equal(pthread_self(), p->caller))
        atomic_fetch_add(&p->on_caller, 1);
    atomic_fetch_add(&p->runs[i], 1);
    if (i != p->stop_at)
        usleep(p->pause_us);
    atomic_fetch_sub(&p->busy_worker[worker], 1);
    atomic_fetch_sub(&p->active, 1);
    return i == p->stop_at;
}

static void assert_each_once(struct probe *p, size_t n)
{
    assert_int_equal(atomic_load(&p->bad_worker), 0);
    for (size_t i = 0; i < ITEMS; i++)
        assert_int_equal(atomic_load(&p->runs[i]), i < n ? 1 : 0);
}

static void test_each_item_once_within_limit(void **state)
{
    static const unsigned limits[] = {1, 2, 3, 8, 32};
    for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
        struct probe p;
        probe_init(&p, ITEMS, 200);
        assert_int_equal(hc_parallel_for(ITEMS, limits[k], probe_item, &p), ITEMS);
        assert_each_once(&p, ITEMS);
        assert_true(atomic_load(&p.peak) <= (int)limits[k]);
        assert_true(atomic_load(&p.workers_max) < (int)limits[k]);
        assert_int_equal(atomic_load(&p.order_broken), 0);
        assert_int_equal(atomic_load(&p.on_caller), 0);
        if (limits[k] > 1)
            assert_true(atomic_load(&p.peak) > 1); /* it did run in parallel */
    }
}

static void test_fewer_items_than_threads(void **state)
{
    struct probe p;
    probe_init(&p, ITEMS, 100000);
    assert_int_equal(hc_parallel_for(3, 16, probe_item, &p), 3);
    assert_each_once(&p, 3);
    assert_true(atomic_load(&p.workers_max) < 3); /* no thread beyond the items */
    assert_int_equal(atomic_load(&p.peak), 3);
}

static void test_no_items(void **state)
{
    struct probe p;
    probe_init(&p, ITEMS, 0);
    assert_int_equal(hc_parallel_for(0, 4, probe_item, &p), 0);
    assert_each_once(&p, 0);
}

/* A non-zero return stops the hand-out: the items running finish, no later one starts. */
static void test_stop_honoured(void **state)
{
    struct probe p;
    probe_init(&p, 10, 50000);
    size_t handed = hc_parallel_for(ITEMS, 4, probe_item, &p);
    /* Item 10 returns at once; the other threads, each in a 50 ms item, took at most one more
     * each meanwhile. */
    assert_true(handed >= 11 && handed <= 11 + 3);
    assert_int_equal(atomic_load(&p.started), handed);
    for (size_t i = 0; i < ITEMS; i++)
        assert_int_equal(atomic_load(&p.runs[i]), i < handed ? 1 : 0);
    /* One thread: exactly up to the stopping item. */
    probe_init(&p, 10, 0);
    assert_int_equal(hc_parallel_for(ITEMS, 1, probe_item, &p), 11);
    assert_each_once(&p, 11);
}

/* pthread_create failing after two threads: the run goes on with those two. */
static void test_thread_creation_fails_partly(void **state)
{
    struct probe p;
    probe_init(&p, ITEMS, 200);
    hc_parallel_test_thread_limit(2);
    size_t handed = hc_parallel_for(ITEMS, 8, probe_item, &p);
    hc_parallel_test_thread_limit(-1);
    assert_int_equal(handed, ITEMS);
    assert_each_once(&p, ITEMS);
    assert_true(atomic_load(&p.peak) <= 2);
    assert_true(atomic_load(&p.workers_max) <= 1);
    assert_int_equal(atomic_load(&p.on_caller), 0);
}

/* No thread at all: every item runs on the calling thread, in order, as worker 0. */
static void test_thread_creation_fails_entirely(void **state)
{
    struct probe p;
    probe_init(&p, ITEMS, 0);
    hc_parallel_test_thread_limit(0);
    size_t handed = hc_parallel_for(ITEMS, 8, probe_item, &p);
    hc_parallel_test_thread_limit(-1);
    assert_int_equal(handed, ITEMS);
    assert_each_once(&p, ITEMS);
    assert_int_equal(atomic_load(&p.on_caller), ITEMS);
    assert_int_equal(atomic_load(&p.peak), 1);
    assert_int_equal(atomic_load(&p.workers_max), 0);
    assert_int_equal(atomic_load(&p.order_broken), 0);
    /* and the stop still holds inline */
    probe_init(&p, 5, 0);
    hc_parallel_test_thread_limit(0);
    handed = hc_parallel_for(ITEMS, 8, probe_item, &p);
    hc_parallel_test_thread_limit(-1);
    assert_int_equal(handed, 6);
    assert_each_once(&p, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_item_once_within_limit),
        cmocka_unit_test(test_fewer_items_than_threads),
        cmocka_unit_test(test_no_items),
        cmocka_unit_test(test_stop_honoured),
        cmocka_unit_test(test_thread_creation_fails_partly),
        cmocka_unit_test(test_thread_creation_fails_entirely),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
