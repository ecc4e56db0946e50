/*
 * Jobs: blocking work (a bundle download, a hook that may take seconds) on a thread of its own,
 * so that the agent's event loop keeps answering /v1/status meanwhile (a blocked loop would look
 * like a dead node to the controller's poller). When the work ends the thread writes one byte to
 * the job's pipe; the loop sees it, joins the thread and runs the done callback, which replies.
 * No libevent call happens off the loop thread, so libevent needs no thread support.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/hcagent/service.h"

struct job {
    struct hc_jobs *owner;
    struct job *next;
    pthread_t thread;
    int pipe[2];
    struct event *ev;
    hc_job_work_fn work;
    hc_job_done_fn done;
    void *arg;
};

struct hc_jobs {
    struct event_base *base;
    struct job *list;
};

struct hc_jobs *hc_jobs_new(struct event_base *base)
{
    struct hc_jobs *jobs = calloc(1, sizeof(*jobs));
    if (jobs)
        jobs->base = base;
    return jobs;
}

static void *job_thread(void *arg)
{
    struct job *j = arg;
    char c = 1;
    j->work(j->arg);
    while (write(j->pipe[1], &c, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

static void job_unlink(struct job *j)
{
    for (struct job **p = &j->owner->list; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            return;
        }
}

static void job_finish(struct job *j)
{
    pthread_join(j->thread, NULL);
    job_unlink(j);
    event_free(j->ev);
    close(j->pipe[0]);
    close(j->pipe[1]);
    hc_job_done_fn done = j->done;
    void *arg = j->arg;
    free(j);
    if (done)
        done(arg);
}

static void job_ready(evutil_socket_t fd, short what, void *arg)
{
    job_finish(arg);
}

int hc_jobs_start(struct hc_jobs *jobs, hc_job_work_fn work, hc_job_done_fn done, void *arg,
                  struct hc_error *err)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot start job: out of memory");
    j->owner = jobs;
    j->work = work;
    j->done = done;
    j->arg = arg;
    j->pipe[0] = j->pipe[1] = -1;
    if (pipe2(j->pipe, O_CLOEXEC) < 0 ||
        !(j->ev = event_new(jobs->base, j->pipe[0], EV_READ, job_ready, j)) ||
        event_add(j->ev, NULL) < 0) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot start job: %s", strerror(errno));
        goto fail;
    }
    int rc = pthread_create(&j->thread, NULL, job_thread, j);
    if (rc != 0) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot start job thread: %s", strerror(rc));
        goto fail;
    }
    j->next = jobs->list;
    jobs->list = j;
    return 0;
fail:
    if (j->ev)
        event_free(j->ev);
    if (j->pipe[0] >= 0) {
        close(j->pipe[0]);
        close(j->pipe[1]);
    }
    free(j);
    return -1;
}

void hc_jobs_free(struct hc_jobs *jobs)
{
    if (!jobs)
        return;
    while (jobs->list)
        job_finish(jobs->list);
    free(jobs);
}
