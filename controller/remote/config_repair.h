/*
 * Drift of the configuration, seen and repaired by the poller (docs/config.md "Drift"): each poll
 * judges the "settings" a node's /v1/status reports against the desired revision, and a node in
 * drift whose difference is in live settings only is handed the desired revision again (event
 * config.repaired). A difference in a restart setting is left for `hcctl config apply` (it needs
 * the rolling path), and said so in the node's config detail. Nothing is repaired while a
 * configuration operation or a disruptive one runs: those hand out revisions themselves.
 *
 * Runs on the poller's thread with its database connection and agent client.
 */
#ifndef HC_CONTROLLER_CONFIG_REPAIR_H
#define HC_CONTROLLER_CONFIG_REPAIR_H

#include <jansson.h>

#include "common/error.h"
#include "common/https_client.h"
#include "controller/state/config.h"
#include "db/db.h"

#define HC_CONFIG_REPAIRS_PER_CYCLE 16 /* nodes repaired in one poll cycle at most */

/* One poll cycle's view: the judge and the nodes found in drift. */
struct hc_config_cycle {
    struct hc_config_judge judge;
    int ready; /* the judge could be made */
    size_t n_drift;
    struct {
        char name[64];
        char agent_url[512];
    } drift[HC_CONFIG_REPAIRS_PER_CYCLE];
};

/* Starts a cycle (in the poller's transaction). Never fails: without a judge (a database error,
 * logged) nodes are not judged this cycle. */
void hc_config_cycle_begin(struct hc_config_cycle *c, struct hc_db *db);
void hc_config_cycle_end(struct hc_config_cycle *c);
/* Judges and stores what an answering node reported (its /v1/status body). 0 or -1 with err. */
int hc_config_cycle_node(struct hc_config_cycle *c, struct hc_db *db, const char *name,
                         const char *agent_url, const json_t *status, struct hc_error *err);
/* After the cycle's commit: repairs the live drift found, unless an operation hands out
 * revisions now. */
void hc_config_cycle_repair(struct hc_config_cycle *c, struct hc_db *db,
                            struct hc_http_client *client, long timeout_ms);

#endif
