/*
 * The controller's REST API (docs/api.md "Controller API"): server setup on the API thread's
 * event_base, the route table, authentication (before-hook) and the audit of every mutating
 * call (after-hook), plus the handlers implemented by the res_*.c files.
 *
 * Threading: everything here runs on the one API thread, with its own database connection.
 * Every handler replies before it returns (there are no deferred replies); the per-request
 * caller record in struct hc_api relies on that.
 */
#ifndef HC_CONTROLLER_API_H
#define HC_CONTROLLER_API_H

#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/https_server.h"
#include "controller/api/cache.h"
#include "controller/controller.h"
#include "db/db.h"

/* Route flags: who may call a route. */
#define HC_API_PUBLIC 0x1 /* no token (version, CA, enroll: the join token is in the body) */
#define HC_API_READ 0x2   /* any valid API token */
#define HC_API_ADMIN 0x4  /* an admin token */

/* Who made the current request, for the audit event. */
struct hc_api_caller {
    char actor[128]; /* token name, or the node name for a successful enroll */
    char node[64];   /* node the call was about, "" when none */
};

struct hc_api {
    struct hc_controller *ctl; /* borrowed */
    struct hc_db *db;          /* owned: the API thread's connection */
    struct hc_http_server *srv;
    X509 *ca;
    EVP_PKEY *ca_key;
    char *ca_pem;
    char ca_fingerprint[65];
    X509 *server_cert;   /* its names are the controller's: no node certificate gets them */
    char server_pin[64]; /* hc_pki_cert_pin of the server and client certificates */
    char client_pin[64];
    struct hc_api_caller caller; /* the request being served (see the file comment) */
    /* Audit records of anonymous calls, limited per minute (anyone reaching the port could
     * otherwise grow the events table without end). */
    int64_t anon_window_ms;
    int anon_recorded, anon_suppressed;
    struct hc_api_cache *cache; /* replies and verified tokens (controller/api/cache.h) */
    struct hc_watch *watch;     /* GET /v1/watch (controller/api/watch.h) */
    struct event *cert_timer;   /* renews the controller's own certificates (certs.h) */
    struct stat ca_seen[2];     /* ca.pem and ca.key as last loaded (hc_api_ca_refresh) */
};

/* Opens the API's database connection, loads the CA and its key, and creates the server with
 * every route on base (not yet listening). Returns NULL with err. Free with hc_api_free. */
struct hc_api *hc_api_new(struct hc_controller *ctl, struct event_base *base, struct hc_error *err);
void hc_api_free(struct hc_api *api); /* accepts NULL */
/* Binds host:port (port 0 picks one). Returns 0 or -1 with err. */
int hc_api_listen(struct hc_api *api, const char *host, int port, struct hc_error *err);
int hc_api_port(const struct hc_api *api);

/* Loads the CA again when ca.pem or ca.key changed since (a CA rotation swaps them): called
 * before the CA is used (join tokens, enrollment, GET /v1/ca) and every 10 s. A CA that cannot
 * be loaded leaves the previous one, logged. */
void hc_api_ca_refresh(struct hc_api *api);

/* Helpers for the handlers. */
/* The authenticated caller's name ("anonymous" on public routes). */
const char *hc_api_actor(const struct hc_request *req);
/* Names the actor (and node, may be NULL) of a public call, e.g. an enrolling node. */
void hc_api_set_actor(struct hc_api *api, struct hc_request *req, const char *actor,
                      const char *node);
/* Replies body with status, or err when body is NULL. body is stolen. */
void hc_api_reply(struct hc_request *req, int status, json_t *body, const struct hc_error *err);
/* Integer query parameter within [min, max], def when absent; 0, or -1 with err (400). */
int hc_api_query_int(struct hc_request *req, const char *name, int64_t def, int64_t min,
                     int64_t max, int64_t *out, struct hc_error *err);
/* Integer member key of a request body within [min, max] into out (may be NULL: only checked),
 * def when absent or null; 0, or -1 with err (400). */
int hc_api_body_int(const json_t *body, const char *key, int64_t min, int64_t max, int64_t def,
                    int64_t *out, struct hc_error *err);
/* The request body as an object (new reference, caller decrefs); an empty body counts as {}.
 * NULL after having replied 400 invalid_json itself. */
json_t *hc_api_body(struct hc_request *req);

/* Lists (docs/api.md "Pagination"): ?limit=N&after=CURSOR. The default page holds
 * HC_API_LIST_DEFAULT items, at most HC_API_LIST_MAX; the cursor is the sort key of the last item
 * of the previous page (the reply's "next_after"), printable ASCII of at most HC_API_CURSOR_MAX
 * bytes. */
#define HC_API_LIST_DEFAULT 1000
#define HC_API_LIST_MAX 5000
#define HC_API_CURSOR_MAX 128
struct hc_api_page {
    int64_t limit;
    const char *after; /* NULL: from the start; owned by the request */
};
/* How a list is ordered, for finding where the page after a cursor starts. */
enum hc_api_order {
    HC_API_ORDER_BYTES, /* ascending by the key's bytes (SQL ORDER BY name): the page starts at
                           the first key above the cursor, whether or not that item still exists */
    HC_API_ORDER_LIST   /* another stable order: the page starts after the item with that key,
                           and a cursor naming no item is refused (400) */
};
/* Reads limit and after; 0, or -1 with err (400). */
int hc_api_page_parse(struct hc_request *req, struct hc_api_page *page, struct hc_error *err);
/* Cuts body[list_key] (an array of objects, in order) to the page, and sets body["next_after"]
 * to the key of its last item when more follow, else null. Returns body, or NULL with err (the
 * body released). */
json_t *hc_api_page_apply(json_t *body, const char *list_key, const char *item_key,
                          enum hc_api_order order, const struct hc_api_page *page,
                          struct hc_error *err);
/* Cached replies (controller/api/cache.h): when the data behind mask has not changed since the
 * reply to this request target was cached, replies it (304 when If-None-Match matches) and
 * returns 1; else 0, and the handler builds the body and replies with hc_api_reply_etag. */
int hc_api_cached(struct hc_api *api, struct hc_request *req, unsigned mask);
/* Replies 200 body (stolen) with its ETag, or 304 when If-None-Match matches it, and keeps it
 * for hc_api_cached (mask 0: never kept, e.g. a reply that depends on the time); or err when
 * body is NULL. */
void hc_api_reply_etag(struct hc_api *api, struct hc_request *req, unsigned mask, json_t *body,
                       const struct hc_error *err);

/* The pre-flight checks (controller/state/checks.h) on the API's database and the controller's
 * own certificates, now; skip (an array of ids, may be NULL) as hc_checks_gate. GET /v1/checks
 * and the routes that refuse on errors (POST /v1/upgrade, POST /v1/config) share it. */
json_t *hc_api_checks(struct hc_api *api, struct hc_error *err);
int hc_api_checks_gate(struct hc_api *api, const json_t *skip, json_t **report,
                       struct hc_error *err);

/* Handlers (arg is the struct hc_api). */
void hc_res_version(struct hc_request *req, void *arg); /* res_cluster.c */
void hc_res_ha(struct hc_request *req, void *arg);      /* res_ha.c */
void hc_res_ha_join(struct hc_request *req, void *arg);
void hc_res_cluster_get(struct hc_request *req, void *arg);       /* res_cluster.c */
void hc_res_checks_get(struct hc_request *req, void *arg);        /* res_cluster.c */
void hc_res_nodes_list(struct hc_request *req, void *arg);        /* res_nodes.c */
void hc_res_node_get(struct hc_request *req, void *arg);          /* res_nodes.c */
void hc_res_node_delete(struct hc_request *req, void *arg);       /* res_nodes.c */
void hc_res_node_renew_cert(struct hc_request *req, void *arg);   /* res_nodes.c */
void hc_res_node_set_domain(struct hc_request *req, void *arg);   /* res_nodes.c */
void hc_res_cluster_create(struct hc_request *req, void *arg);    /* res_bootstrap.c */
void hc_res_maintenance_enter(struct hc_request *req, void *arg); /* res_maintenance.c */
void hc_res_maintenance_exit(struct hc_request *req, void *arg);  /* res_maintenance.c */
void hc_res_maintenance_list(struct hc_request *req, void *arg);  /* res_maintenance.c */
void hc_res_upgrade_start(struct hc_request *req, void *arg);     /* res_upgrade.c */
void hc_res_upgrade_status(struct hc_request *req, void *arg);    /* res_upgrade.c */
void hc_res_agent_upgrade(struct hc_request *req, void *arg);     /* res_agent.c */
void hc_res_nodes_add(struct hc_request *req, void *arg);         /* res_bootstrap.c */
void hc_res_ca_get(struct hc_request *req, void *arg);            /* res_enroll.c */
void hc_res_enroll(struct hc_request *req, void *arg);            /* res_enroll.c */
void hc_res_join_token_create(struct hc_request *req, void *arg); /* res_enroll.c */
void hc_res_ops_list(struct hc_request *req, void *arg);          /* res_operations.c */
void hc_res_op_get(struct hc_request *req, void *arg);            /* res_operations.c */
void hc_res_op_pause(struct hc_request *req, void *arg);          /* res_operations.c */
void hc_res_op_resume(struct hc_request *req, void *arg);         /* res_operations.c */
void hc_res_op_abort(struct hc_request *req, void *arg);          /* res_operations.c */
void hc_res_op_result(struct hc_request *req, void *arg);         /* res_operations.c */
void hc_res_events_list(struct hc_request *req, void *arg);       /* res_events.c */
void hc_res_net_show(struct hc_request *req, void *arg);          /* res_net.c */
void hc_res_net_check(struct hc_request *req, void *arg);         /* res_net.c */
void hc_res_net_mtu(struct hc_request *req, void *arg);           /* res_net.c */
void hc_res_net_bench(struct hc_request *req, void *arg);         /* res_net.c */
void hc_res_config_show(struct hc_request *req, void *arg);       /* res_config.c */
void hc_res_config_set(struct hc_request *req, void *arg);        /* res_config.c */
void hc_res_config_apply(struct hc_request *req, void *arg);      /* res_config.c */
void hc_res_config_history(struct hc_request *req, void *arg);    /* res_config.c */
void hc_res_config_diff(struct hc_request *req, void *arg);       /* res_config.c */
void hc_res_config_status(struct hc_request *req, void *arg);     /* res_config.c */
void hc_res_software_upload(struct hc_request *req, void *arg);   /* res_software.c */
void hc_res_software_list(struct hc_request *req, void *arg);     /* res_software.c */
void hc_res_software_get(struct hc_request *req, void *arg);      /* res_software.c */
void hc_res_software_remove(struct hc_request *req, void *arg);   /* res_software.c */
void hc_res_software_bundle(struct hc_request *req, void *arg);   /* res_software.c */
void hc_res_tokens_list(struct hc_request *req, void *arg);       /* res_tokens.c */
void hc_res_token_create(struct hc_request *req, void *arg);      /* res_tokens.c */
void hc_res_token_revoke(struct hc_request *req, void *arg);      /* res_tokens.c */
void hc_res_token_rotate(struct hc_request *req, void *arg);      /* res_tokens.c */
/* {"operation":OP} for an operation id (new reference), or NULL with err (404). res_operations.c */
json_t *hc_res_operation_body(struct hc_db *db, const char *id, struct hc_error *err);
/* Unless err is set already, submits an operation of kind with params (borrowed; may be NULL)
 * and wakes a worker; replies 202 {"operation":OP}, or err. res_operations.c */
void hc_res_operation_submit(struct hc_request *req, struct hc_api *api, const char *kind,
                             const json_t *params, struct hc_error *err);

#endif
