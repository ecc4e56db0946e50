/*
 * The nodes table's one home: typed rows (struct hc_node_row) and the few reads and writes the
 * controller makes of it, the insert at enrollment, and the rendering of rows as the API's NODE
 * and IFACE objects (docs/api.md). Times leave the database as epoch milliseconds and leave the
 * renderers as RFC 3339 strings. Outside this file's .c, SQL names the table only where it is
 * joined with another for one purpose (the allow-list of tests/unit/test_nodes.c).
 *
 * Every function runs in the caller's transaction when one is open (none opens its own).
 */
#ifndef HC_CONTROLLER_NODES_H
#define HC_CONTROLLER_NODES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/constants.h"
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
    const char *cert_pin;   /* hc_pki_cert_pin of cert_pem: what calls to agent_url pin */
    int64_t cert_not_after; /* of cert_pem, epoch ms */
    int64_t cert_renew_at;  /* hc_pki_renew_at_ms of it */
    int64_t cert_warn_at;   /* hc_pki_warn_at_ms of it */
};

/* One row of nodes (db/migrations). Text is owned (hc_node_row_clear frees it); a NULL column
 * is a NULL pointer. An INTEGER column that is NULL reads as 0 (last_seen 0: never answered). */
struct hc_node_row {
    int64_t id;
    char *cluster_id;
    char *name;
    char *address;   /* management address */
    char *agent_url; /* without a trailing '/' */
    char *hostname;
    char *ssh_endpoint; /* user@host:port when pushed over SSH */
    char *ssh_host_key; /* pinned SHA256 fingerprint */
    char *install_mode; /* systemd | daemon | manual */
    char *storage_interface;
    char *cert_serial;
    char *cert_pem;
    char *cert_pin;         /* "sha256//BASE64" of the certificate's key; NULL before backfill */
    char *cert_next_serial; /* a renewal under way (controller/remote/cert_renew.h), else NULL */
    char *cert_next_pem;
    char *cert_next_pin;
    char *agent_cert_serial;  /* the serial the agent last said it serves */
    char *agent_ca_digest;    /* sha256 of the CAs it last said it trusts */
    int64_t cert_not_after;   /* of cert_pem, epoch ms; 0 before backfill */
    int64_t cert_renew_at;    /* when the poller renews it; 0 before backfill */
    int64_t cert_warn_at;     /* when it counts as expiring (hc_pki_warn_at_ms); 0 likewise */
    int64_t cert_renew_asked; /* `hcctl node renew-cert` asked at; 0 when not */
    char *desired_state;      /* member | removed */
    char *state;              /* joined | removing */
    char *health;             /* unknown | reachable | unreachable | stalled */
    char *health_detail;
    char *maintenance; /* none | entering | active | exiting */
    char *maintenance_mode;
    char *maintenance_op;
    char *agent_version;
    char *software_version;
    char *previous_software_version;
    char *service_state;
    int64_t uptime_s;
    int64_t poll_latency_ms;
    int64_t last_seen;
    int64_t joined_at;
    int64_t maintenance_since;
    int64_t service_observed_at;
    int64_t config_revision; /* what the agent reported (controller/state/config.h) */
    char *config_state;      /* in_sync | drift | pending_restart | unreachable | not_applied */
    char *config_detail;
    char *failure_domain; /* NULL: the node is a domain of its own (migration 0013) */
};

/* Which rows hc_nodes_rows returns: every non-NULL field must match (NULL: any). */
struct hc_node_filter {
    const char *except; /* every node but the one of this name */
    const char *address;
    const char *state;
    const char *desired_state;
    const char *software_version;
    const char *previous_software_version;
};

void hc_node_row_clear(struct hc_node_row *row); /* frees the text; the row reads as zero */
void hc_node_rows_free(struct hc_node_row *rows, size_t n); /* accepts NULL */

/* The node of that name (by id; by agent_url): 1 with *row filled, 0 when there is none (row
 * zeroed), -1 with err. The caller clears the row. */
int hc_node_row_get(struct hc_db *db, const char *name, struct hc_node_row *row,
                    struct hc_error *err);
int hc_node_row_get_id(struct hc_db *db, int64_t id, struct hc_node_row *row, struct hc_error *err);
/* Node id's health into buf (the poller, once per node per cycle: one column, not the row):
 * 1 found, 0 no such node, -1 with err. */
int hc_node_health_get(struct hc_db *db, int64_t id, char *buf, size_t len, struct hc_error *err);
int hc_node_row_by_url(struct hc_db *db, const char *agent_url, struct hc_node_row *row,
                       struct hc_error *err);
/* The nodes filter lets through (NULL: every node), sorted by name: 0 with *rows (NULL when
 * none; free with hc_node_rows_free) and *n, or -1 with err. */
int hc_nodes_rows(struct hc_db *db, const struct hc_node_filter *filter, struct hc_node_row **rows,
                  size_t *n, struct hc_error *err);
/* [{"v": value, "n": count}] of one column, "health", "state", "maintenance" or "cert_state"
 * (valid, renewing, expiring, expired, unknown: docs/certificates.md) (grouped, in
 * the order of the values). New reference or NULL with err. */
json_t *hc_nodes_count_by(struct hc_db *db, const char *column, struct hc_error *err);

/* What a poll learnt from an agent that answered (hc_node_store_poll). */
struct hc_node_poll {
    const char *health; /* reachable | stalled */
    const char *health_detail;
    const char *service_state; /* these three replace what is stored... */
    const char *software_version;
    const char *previous_software_version;
    int64_t asked_at; /* ...unless an operation learnt them after this (service_observed_at) */
    const char *agent_version;
    int64_t agent_api_version; /* HC_NODE_UNREPORTED: none (an agent of API 1) */
    const char *hostname;      /* NULL keeps the stored one */
    int64_t uptime_s;          /* -1: not reported */
    int64_t latency_ms;
    int64_t now; /* last_seen */
    /* For the pre-flight checks (migration 0011); HC_NODE_UNREPORTED stores NULL. */
    int64_t clock_offset_ms; /* the agent's time minus the controller's */
    int64_t data_dir_free_bytes;
    int64_t data_dir_total_bytes;
    int service_healthy; /* SERVICE "healthy": 1, 0, or -1 not reported; kept with the service
                            state (asked_at), and NULL again when an operation sets the state */
    const char *agent_cert_serial; /* the certificate the agent serves (migration 0012), NULL
                                      when not reported */
    const char *agent_ca_digest;   /* sha256 of the CAs it trusts, NULL likewise */
};
#define HC_NODE_UNREPORTED INT64_MIN

/* Certificates (controller/remote/cert_renew.h, controller/state/certs.h). Readers: the node
 * whose certificate ends first ({"name", "cert_not_after"}, or JSON null when none);
 * [{"name", "cert_serial", "cert_pem"}] of those past their warning time; [{"name", "asked"}]
 * due for renewal (asked, pending, or past cert_renew_at and reachable; asked first), at most
 * limit. Writers: cert_not_after/renew_at/warn_at of a row (cert_renew_at kept when set); a
 * renewal asked (the rows changed: 0 when no joined node has that name) or failed (why kept
 * in cert_renew_error); a pending certificate recorded beside current_serial (rows changed: 0
 * when the node's certificate changed meanwhile or one is pending), dropped, or promoted to
 * be the node's (only while serial is the pending one). */
json_t *hc_nodes_cert_earliest(struct hc_db *db, struct hc_error *err);
json_t *hc_nodes_cert_warned(struct hc_db *db, int64_t now_ms, struct hc_error *err);
json_t *hc_nodes_cert_due(struct hc_db *db, int64_t now_ms, int limit, struct hc_error *err);
int hc_node_set_cert_validity(struct hc_db *db, int64_t id, int64_t not_after, int64_t renew_at,
                              int64_t warn_at, struct hc_error *err);
int hc_node_cert_ask(struct hc_db *db, const char *name, int64_t now_ms, struct hc_error *err);
int hc_node_cert_failed(struct hc_db *db, const char *name, const char *why, struct hc_error *err);
int hc_node_cert_pending_set(struct hc_db *db, int64_t id, const char *current_serial,
                             const char *serial, const char *pem, const char *pin,
                             struct hc_error *err);
int hc_node_cert_pending_drop(struct hc_db *db, int64_t id, const char *serial,
                              struct hc_error *err);
/* Makes the node's certificate due for renewal now (a CA rotation reissues every one). */
int hc_node_cert_renew_now(struct hc_db *db, int64_t id, struct hc_error *err);
int hc_node_cert_promote(struct hc_db *db, int64_t id, const char *serial, int64_t not_after,
                         int64_t renew_at, int64_t warn_at, struct hc_error *err);

/* The writers: each returns 0 (or the rows changed, where said) or -1 with err. A node that is
 * not there is not an error (nothing changes). */
int hc_node_store_poll(struct hc_db *db, int64_t id, const struct hc_node_poll *p,
                       struct hc_error *err);
/* Health unreachable/... with its detail, poll latency NULL, unless the node answered after
 * `before` (last_seen > before). Returns the rows changed (0 or 1). */
int hc_node_set_unanswered(struct hc_db *db, int64_t id, const char *health, const char *detail,
                           int64_t before, struct hc_error *err);
/* What bootstrap learnt of the host; install_mode NULL keeps the stored one. */
int hc_node_set_bootstrap(struct hc_db *db, const char *name, const char *ssh_endpoint,
                          const char *ssh_host_key, const char *storage_interface,
                          const char *install_mode, struct hc_error *err);
/* Maintenance state; "none" clears mode, op and since, any other keeps the first since. */
int hc_node_set_maintenance(struct hc_db *db, const char *name, const char *state, const char *mode,
                            const char *op_id, struct hc_error *err);
/* What an operation learnt of the service at `observed_at`: the service state, or the version
 * (the poller does not overwrite it with an older observation). */
int hc_node_set_service_state(struct hc_db *db, const char *name, const char *service_state,
                              int64_t observed_at, struct hc_error *err);
int hc_node_set_software_version(struct hc_db *db, const char *name, const char *version,
                                 int64_t observed_at, struct hc_error *err);
int hc_node_set_removing(struct hc_db *db, const char *name, struct hc_error *err);
/* The node's failure domain (NULL or "": none, the node is its own domain). The caller has
 * validated the name (hc_failure_domain_valid). */
int hc_node_set_failure_domain(struct hc_db *db, const char *name, const char *domain,
                               struct hc_error *err);
/* The failure domains the member nodes span (a node without one is a domain of its own), or
 * -1 with err. */
int64_t hc_nodes_domain_count(struct hc_db *db, struct hc_error *err);
/* The domain a node counts in, into buf: its failure domain, or "node/NAME" when it has none
 * (a domain of its own; '/' is in no domain name, so it never meets a named one). Returns buf. */
const char *hc_node_domain_key(const char *name, const char *domain, char *buf, size_t len);
int hc_node_set_cert_pin(struct hc_db *db, int64_t id, const char *pin, struct hc_error *err);
int hc_node_delete(struct hc_db *db, const char *name, struct hc_error *err);

/* The configuration a node reported (controller/state/config.h): revision -1 stores none (the
 * version declares no settings), digest NULL likewise. A drift whose digest has not changed
 * keeps its detail (what the repair learnt says more than the judge). */
struct hc_node_config {
    int64_t revision;
    const char *digest;
    int pending_restart;
    const char *state; /* in_sync | drift | pending_restart | unreachable | not_applied */
    const char *detail;
};
int hc_node_set_config(struct hc_db *db, const char *name, const struct hc_node_config *c,
                       struct hc_error *err);
/* Only the state and detail (unreachable: the last report is kept; a repair's finding). NULL
 * state keeps it. */
int hc_node_set_config_state(struct hc_db *db, const char *name, const char *state,
                             const char *detail, struct hc_error *err);
/* [{"name","software_version","applied_revision","state","detail","pending_restart"}] sorted
 * by name (state "unknown" before the first report). New reference or NULL with err. */
json_t *hc_nodes_config_list(struct hc_db *db, struct hc_error *err);
/* The versions the nodes run, sorted, without duplicates or empty ones ([] when none). */
json_t *hc_nodes_versions(struct hc_db *db, struct hc_error *err);

/* What the pre-flight checks judge (controller/state/checks.h), one object a node sorted by
 * name: {"name","health","health_detail","last_seen","maintenance","service_state",
 * "software_version","service_healthy","cert_pem","config_state","config_detail",
 * "clock_offset_ms",
 * "data_dir_free_bytes","data_dir_total_bytes","storage_interface","storage_mtu"} with null for
 * what is not known (storage_mtu: the MTU of the interface of role storage, else of the one
 * named storage_interface, else, without one, of the one carrying the node's address, as
 * bootstrap chooses it). New reference or NULL with err. */
json_t *hc_nodes_check_facts(struct hc_db *db, struct hc_error *err);

/* {"nodes":[{name, maintenance, mode, since_ms, operation_id, health, service_state}...]}
 * sorted by name (GET /v1/maintenance). New reference or NULL with err. */
json_t *hc_nodes_maintenance_list(struct hc_db *db, struct hc_error *err);

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

/* Agent API skew (docs/agent-upgrade.md). The version a node's agent speaks (an agent that
 * reported none speaks 1; NULL when never heard from), and its compatibility with this
 * controller: ok | behind (one version older, still driven) | too_old | too_new | unknown. */
#define HC_NODE_API_VERSION_SQL                                                                    \
    "(CASE WHEN agent_version IS NULL THEN NULL ELSE COALESCE(agent_api_version, 1) END)"
#define HC_NODE_API_COMPAT_SQL                                                                     \
    "(CASE WHEN agent_version IS NULL THEN 'unknown' "                                             \
    "WHEN COALESCE(agent_api_version, 1) = " HC_STR(                                               \
        HC_AGENT_API_VERSION) " THEN 'ok' "                                                        \
                              "WHEN COALESCE(agent_api_version, 1) > " HC_STR(                     \
                                  HC_AGENT_API_VERSION) " THEN 'too_new' "                         \
                                                        "WHEN COALESCE(agent_api_version, 1) "     \
                                                        ">= " HC_STR(                              \
                                                            HC_AGENT_API_OLDEST_SUPPORTED) " THEN" \
                                                                                           " "     \
                                                                                           "'behi" \
                                                                                           "nd' "  \
                                                                                           "ELSE " \
                                                                                           "'too_" \
                                                                                           "old' " \
                                                                                           "END)"
/* Refuses (409 agent_api_unsupported, naming the node and the remedy) disruptive work that
 * would drive an agent whose API this controller does not speak: node's (NULL: every node's).
 * what completes "cannot %s". 0 when none is, -1 with err. */
/* What an agent upgrade saw the node's agent report (the poller records it again anyway). */
int hc_node_set_agent_version(struct hc_db *db, const char *name, const char *version,
                              int api_version, struct hc_error *err);
/* Every node's agent, by name: [{"name","agent_url","from_version" (its agent version),
 * "api_version","api_compat"}] (new reference) or NULL with err. */
json_t *hc_nodes_agents(struct hc_db *db, struct hc_error *err);
int hc_nodes_api_gate(struct hc_db *db, const char *node, const char *what, struct hc_error *err);

#endif
