/*
 * Jobs: the agent's one way to run blocking work (a bundle download, a hook, a DF probe, an
 * iperf bench) off its event loop, so that the loop keeps answering /v1/status meanwhile (a
 * blocked loop would look like a dead node to the controller's poller). Every thread the agent
 * starts is a job's.
 *
 * A job's work runs on a thread of its own; its callbacks run on the loop thread of the
 * hc_jobs' event base, which alone may touch requests and libevent. The work writes its
 * results into arg before it returns (or before hc_job_notify): the loop reads them in the
 * callbacks, after the handover (a lock, or the thread's join), never during the work.
 */
#ifndef HC_AGENTS_JOBS_H
#define HC_AGENTS_JOBS_H

#include <event2/event.h>

#include "common/error.h"

typedef void (*hc_job_work_fn)(void *arg); /* on a worker thread */
typedef void (*hc_job_done_fn)(void *arg); /* then on the loop thread */
struct hc_jobs;
struct hc_job;

struct hc_jobs *hc_jobs_new(struct event_base *base);
/* Runs work(arg) on a new thread, then done(arg) on base's loop. 0 or -1 with err. */
int hc_jobs_start(struct hc_jobs *jobs, hc_job_work_fn work, hc_job_done_fn done, void *arg,
                  struct hc_error *err);

/* For work with an answer before its end (a bench server's port, sent while the server waits
 * for its client): work gets its job, and after each hc_job_notify(job) it makes, ready(arg)
 * runs on the loop (notifications not yet seen run ready once; one still pending when the work
 * returns runs ready before done). ready may be NULL. 0 or -1 with err. */
typedef void (*hc_job_notify_work_fn)(struct hc_job *job, void *arg); /* on a worker thread */
int hc_jobs_start_notify(struct hc_jobs *jobs, hc_job_notify_work_fn work, hc_job_done_fn ready,
                         hc_job_done_fn done, void *arg, struct hc_error *err);
/* From the job's work: what arg holds so far can be answered (ready runs on the loop). */
void hc_job_notify(struct hc_job *job);

/* Waits for every running job and runs its callbacks (ready if pending, then done), then
 * frees. Accepts NULL. Loop thread. */
void hc_jobs_free(struct hc_jobs *jobs);

#endif
