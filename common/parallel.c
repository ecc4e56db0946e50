/*
 * The parallel-for of common/parallel.h: a counter under a lock hands out the items, a stop
 * flag under the same lock ends the hand-out, and the calling thread joins every thread it
 * started.
 */
#include "common/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct parallel_run {
    pthread_mutex_t lock; /* guards next and stopped */
    size_t n, next, handed;
    int stopped;
    hc_parallel_fn fn;
    void *arg;
};

struct parallel_thread {
    struct parallel_run *run;
    unsigned worker;
    pthread_t thread;
};

static atomic_int thread_limit = -1;

void hc_parallel_test_thread_limit(int threads)
{
    atomic_store(&thread_limit, threads);
}

/* The next item for a thread: 1 with *i, or 0 when none is left or the hand-out stopped. */
static int parallel_take(struct parallel_run *run, size_t *i)
{
    pthread_mutex_lock(&run->lock);
    int ok = !run->stopped && run->next < run->n;
    if (ok) {
        *i = run->next++;
        run->handed++;
    }
    pthread_mutex_unlock(&run->lock);
    return ok;
}

static void parallel_work(struct parallel_run *run, unsigned worker)
{
    size_t i;
    while (parallel_take(run, &i)) {
        if (run->fn(run->arg, worker, i) != 0) {
            pthread_mutex_lock(&run->lock);
            run->stopped = 1;
            pthread_mutex_unlock(&run->lock);
        }
    }
}

static void *parallel_thread_main(void *arg)
{
    struct parallel_thread *t = arg;
    parallel_work(t->run, t->worker);
    return NULL;
}

static int parallel_spawn(struct parallel_thread *t)
{
    int limit = atomic_load(&thread_limit);
    if (limit >= 0 && t->worker >= (unsigned)limit)
        return -1;
    return pthread_create(&t->thread, NULL, parallel_thread_main, t) == 0 ? 0 : -1;
}

size_t hc_parallel_for(size_t n, unsigned max_parallel, hc_parallel_fn fn, void *arg)
{
    struct parallel_run run = {.n = n, .fn = fn, .arg = arg};
    size_t want = max_parallel < n ? max_parallel : n, started = 0;
    pthread_mutex_init(&run.lock, NULL);
    /* Threads even for one item: the items run as they would with more (own stack, own
     * thread-locals), and the calling thread only waits. */
    struct parallel_thread *threads = want > 0 ? calloc(want, sizeof(*threads)) : NULL;
    for (; threads && started < want; started++) {
        threads[started] = (struct parallel_thread){.run = &run, .worker = (unsigned)started};
        if (parallel_spawn(&threads[started]) < 0)
            break;
    }
    if (started == 0)
        parallel_work(&run, 0);
    for (size_t t = 0; t < started; t++)
        pthread_join(threads[t].thread, NULL);
    free(threads);
    pthread_mutex_destroy(&run.lock);
    return run.handed;
}
