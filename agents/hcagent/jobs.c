/*
 * Jobs (agents/hcagent/jobs.h): each job is a thread and a pipe whose read end is an event on
 * the loop. The thread records what happened (notified, finished) under the job's lock and
 * writes a byte; the loop drains the pipe, reads the record under the lock (so what the work
 * wrote before is visible) and runs ready, or joins the thread and runs done. No libevent call
 * happens off the loop thread, so libevent needs no thread support.
 */
#include "agents/hcagent/jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct hc_job {
    struct hc_jobs *owner;
    struct hc_job *next;
    pthread_t thread;
    int pipe[2];
    struct event *ev;
    hc_job_work_fn work;
    hc_job_notify_work_fn notify_work;
    hc_job_done_fn ready, done;
    void *arg;
    pthread_mutex_t lock; /* guards notified and finished */
    int notified, finished;
};

struct hc_jobs {
    struct event_base *base;
    struct hc_job *list;
};

struct hc_jobs *hc_jobs_new(struct event_base *base)
{
    struct hc_jobs *jobs = calloc(1, sizeof(*jobs));
    if (jobs)
        jobs->base = base;
    return jobs;
}

static void job_post(struct hc_job *j, int notified, int finished)
{
    char c = 1;
    pthread_mutex_lock(&j->lock);
    j->notified |= notified;
    j->finished |= finished;
    pthread_mutex_unlock(&j->lock);
    while (write(j->pipe[1], &c, 1) < 0 && errno == EINTR)
        ;
}

void hc_job_notify(struct hc_job *job)
{
    job_post(job, 1, 0);
}

static void *job_thread(void *arg)
{
    struct hc_job *j = arg;
    if (j->notify_work)
        j->notify_work(j, j->arg);
    else
        j->work(j->arg);
    job_post(j, 0, 1);
    return NULL;
}

/* Takes the pending notification (and whether the work ended) under the lock. */
static int job_take(struct hc_job *j, int *finished)
{
    pthread_mutex_lock(&j->lock);
    int notified = j->notified;
    j->notified = 0;
    if (finished)
        *finished = j->finished;
    pthread_mutex_unlock(&j->lock);
    return notified;
}

static void job_unlink(struct hc_job *j)
{
    for (struct hc_job **p = &j->owner->list; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            return;
        }
}

static void job_close(struct hc_job *j)
{
    if (j->ev)
        event_free(j->ev);
    for (int i = 0; i < 2; i++)
        if (j->pipe[i] >= 0)
            close(j->pipe[i]);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static void job_finish(struct hc_job *j)
{
    pthread_join(j->thread, NULL);
    if (job_take(j, NULL) && j->ready)
        j->ready(j->arg);
    job_unlink(j);
    hc_job_done_fn done = j->done;
    void *arg = j->arg;
    job_close(j);
    if (done)
        done(arg);
}

static void job_ready(evutil_socket_t fd, short what, void *arg)
{
    struct hc_job *j = arg;
    char buf[16];
    int finished;
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    if (job_take(j, &finished) && j->ready)
        j->ready(j->arg);
    if (finished)
        job_finish(j);
}

static int job_start(struct hc_jobs *jobs, struct hc_job *j, struct hc_error *err)
{
    j->owner = jobs;
    j->pipe[0] = j->pipe[1] = -1;
    pthread_mutex_init(&j->lock, NULL);
    if (pipe2(j->pipe, O_CLOEXEC) < 0 || fcntl(j->pipe[0], F_SETFL, O_NONBLOCK) < 0 ||
        !(j->ev = event_new(jobs->base, j->pipe[0], EV_READ | EV_PERSIST, job_ready, j)) ||
        event_add(j->ev, NULL) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot start job: %s", strerror(errno));
        goto fail;
    }
    int rc = pthread_create(&j->thread, NULL, job_thread, j);
    if (rc != 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot start job thread: %s", strerror(rc));
        goto fail;
    }
    j->next = jobs->list;
    jobs->list = j;
    return 0;
fail:
    job_close(j);
    return -1;
}

int hc_jobs_start(struct hc_jobs *jobs, hc_job_work_fn work, hc_job_done_fn done, void *arg,
                  struct hc_error *err)
{
    struct hc_job *j = calloc(1, sizeof(*j));
    if (!j)
        return hc_error_set(err, HC_E(INTERNAL), "cannot start job: out of memory");
    *j = (struct hc_job){.work = work, .done = done, .arg = arg};
    return job_start(jobs, j, err);
}

int hc_jobs_start_notify(struct hc_jobs *jobs, hc_job_notify_work_fn work, hc_job_done_fn ready,
                         hc_job_done_fn done, void *arg, struct hc_error *err)
{
    struct hc_job *j = calloc(1, sizeof(*j));
    if (!j)
        return hc_error_set(err, HC_E(INTERNAL), "cannot start job: out of memory");
    *j = (struct hc_job){.notify_work = work, .ready = ready, .done = done, .arg = arg};
    return job_start(jobs, j, err);
}

void hc_jobs_free(struct hc_jobs *jobs)
{
    if (!jobs)
        return;
    while (jobs->list)
        job_finish(jobs->list);
    free(jobs);
}
