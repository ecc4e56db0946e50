/*
 * GET /v1/events?since=ID&limit=N&type=T&node=N: the event log, oldest first, for `hcctl events`
 * (and its --follow, which asks again with since = the last_id it got).
 */
#include <stdint.h>

#include "controller/api.h"
#include "controller/events.h"

#define EVENTS_DEFAULT_LIMIT 100
#define EVENTS_MAX_LIMIT 1000

void hc_res_events_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    int64_t since, limit;
    if (hc_api_query_int(req, "since", 0, 0, INT64_MAX, &since, &err) < 0 ||
        hc_api_query_int(req, "limit", EVENTS_DEFAULT_LIMIT, 1, EVENTS_MAX_LIMIT, &limit, &err) <
            0) {
        hc_reply_error(req, &err);
        return;
    }
    json_t *body = hc_events_list(api->db, since, (int)limit, hc_req_query(req, "type"),
                                  hc_req_query(req, "node"), &err);
    hc_api_reply(req, 200, body, &err);
}
