/*
 * GET /v1/events?since=ID&before=ID&limit=N&newest=1&type=T&node=N: the event log, one page,
 * oldest first, for `hcctl events` (newest=1: the newest page, which the CLI shows by default;
 * before=ID pages back from there) and its --follow (which asks again with since = the last_id it
 * got). "more" says whether matching events exist beyond the page.
 */
#include <stdint.h>

#include "controller/api/api.h"
#include "controller/state/events.h"

#define EVENTS_DEFAULT_LIMIT 100
#define EVENTS_MAX_LIMIT 1000 /* hc_events_query's bound: an event weighs more than a node */

void hc_res_events_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    int64_t limit, newest;
    struct hc_events_query q = {0};
    if (hc_api_query_int(req, "since", 0, 0, INT64_MAX, &q.since, &err) < 0 ||
        hc_api_query_int(req, "before", 0, 0, INT64_MAX, &q.before, &err) < 0 ||
        hc_api_query_int(req, "limit", EVENTS_DEFAULT_LIMIT, 1, EVENTS_MAX_LIMIT, &limit, &err) <
            0 ||
        hc_api_query_int(req, "newest", 0, 0, 1, &newest, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    q.limit = (int)limit;
    q.newest = (int)newest;
    q.type = hc_req_query(req, "type");
    q.node = hc_req_query(req, "node");
    if (hc_api_cached(api, req, HC_DEP(EVENTS)))
        return;
    hc_api_reply_etag(api, req, HC_DEP(EVENTS), hc_events_query(api->db, &q, &err), &err);
}
