/*
 * Node queries for the API: list, get (with interfaces), insert at enrollment, and the rendering
 * of rows as the API's NODE and IFACE objects (docs/api.md). Times leave the database as epoch
 * milliseconds and leave here as RFC 3339 strings.
 */
#ifndef HC_CONTROLLER_NODES_H
#define HC_CONTROLLER_NODES_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "db/db.h"

/* A node as recorded at enrollment; every string is borrowed. */
struct hc_node_new {
    const char *cluster_id;
    const char *name;
    const char *address;
    const char *agent_url;
    const char *hostname; /* may be NULL */
    const char *cert_serial;
    const char *cert_pem;
    const char *cert_pin; /* hc_pki_cert_pin of cert_pem: what calls to agent_url pin */
};

/* {"nodes":[NODE...]} sorted by name (new reference), or NULL with err. */
json_t *hc_nodes_list(struct hc_db *db, struct hc_error *err);
/* {"node":NODE,"interfaces":[IFACE...]} or NULL with err (404 naming the node). */
json_t *hc_node_get(struct hc_db *db, const char *name, struct hc_error *err);
/* NODE alone, or NULL with err (404). */
json_t *hc_node_json(struct hc_db *db, const char *name, struct hc_error *err);
/* 1 when a node of that name exists, 0 when not, -1 with err. */
int hc_node_exists(struct hc_db *db, const char *name, struct hc_error *err);
/* Inserts a node with health 'unknown' and joined_at now. Runs in the caller's transaction.
 * 409 conflict when the name exists. Returns 0 or -1 with err. */
int hc_node_insert(struct hc_db *db, const struct hc_node_new *n, struct hc_error *err);
/* {"total","reachable","unreachable","unknown"}: 'stalled' nodes count as unreachable (they
 * answer nothing useful). New reference or NULL with err. */
json_t *hc_nodes_health_counts(struct hc_db *db, struct hc_error *err);

#endif
