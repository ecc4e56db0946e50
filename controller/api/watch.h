/*
 * GET /v1/watch?since=ID&type=T&node=N (docs/api.md "Watch"): a stream of JSON lines, chunked,
 * one object a line: {"event":EVENT} for each event appended after since (the events missed
 * while disconnected first, so a client resumes from the last id it saw), {"node":NODE} when a
 * node's listed fields change (its new object, as in GET /v1/nodes), {"node_removed":NAME}, and
 * {"heartbeat":TIME,"last_id":N} every HC_WATCH_HEARTBEAT_MS.
 *
 * All on the API thread, never waiting: a timer every HC_WATCH_TICK_MS reads the change
 * counters (controller/api/cache.h) and, when events or nodes changed, queries them once for
 * every watcher. At most HC_WATCH_MAX watchers (503 beyond). A watcher gets no more events
 * while its unsent output is above HC_WATCH_SOFT_PENDING (it catches up as it reads), and is
 * disconnected when that lasts HC_WATCH_STALL_MS or the output passes HC_WATCH_MAX_PENDING;
 * and so is a watcher whose token is revoked.
 */
#ifndef HC_CONTROLLER_API_WATCH_H
#define HC_CONTROLLER_API_WATCH_H

#include "controller/api/api.h"

#define HC_WATCH_MAX 32
#define HC_WATCH_TICK_MS 200
#define HC_WATCH_HEARTBEAT_MS 10000
#define HC_WATCH_SOFT_PENDING (256 * 1024) /* no more events to a watcher above it */
#define HC_WATCH_MAX_PENDING                                                                       \
    (4 * 1024 * 1024)          /* dropped above it (1,000 changed nodes: ~0.5 MB)                  \
                                */
#define HC_WATCH_STALL_MS 5000 /* dropped after this long above the soft bound */
#define HC_WATCH_WRITE_TIMEOUT_S 30
#define HC_WATCH_BATCH 1000 /* events sent to one watcher per tick */

struct hc_watch;
/* The watch of api, on base. NULL when out of memory. Free after the server (its closing
 * connections still report to it). */
struct hc_watch *hc_watch_new(struct hc_api *api, struct event_base *base);
void hc_watch_free(struct hc_watch *w); /* accepts NULL */
int hc_watch_count(const struct hc_watch *w);
/* The route (arg is the struct hc_api). */
void hc_res_watch(struct hc_request *req, void *arg);

#endif
