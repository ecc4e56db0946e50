/*
 * The controller's view of one node's storage service and software, through its agent
 * (docs/api.md "Agent API: software and service"). One function per question or action, so
 * that maintenance and the rolling upgrade read as the steps they are, and so that the agent's
 * wire format is known in this one file.
 *
 * Every call has the agent timeout; transport failures keep their codes (unreachable, timeout,
 * tls_error: test with hc_agent_err_is_transport) so that callers can tell "the node is gone"
 * from "the node said no".
 */
#ifndef HC_CONTROLLER_SERVICE_CLIENT_H
#define HC_CONTROLLER_SERVICE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"
#include "common/https_client.h"

struct hc_svc_node {
    struct hc_http_client *client; /* the caller's agent client (one per thread) */
    const char *name;
    const char *agent_url;
    long timeout_ms;
};

/* The service's own answer to "may this node stop?". *ok receives 1 or 0, reason (when not
 * ok) the service's words. A node without an installed service is ok (it serves nothing). */
int hc_svc_ok_to_stop(const struct hc_svc_node *n, int *ok, char *reason, size_t len,
                      struct hc_error *err);
/* The service's answer to "may this node stop together with the set?" (set: node names,
 * comma-separated; GET /v1/service/ok-to-stop?nodes=SET). answered is 0 when the service
 * answered for this node alone (a version that knows no sets): the answer then says nothing
 * about the set. set_blocks counts the blocks held here whose every replica is in the set. */
struct hc_svc_set_answer {
    int ok;
    int answered;
    int64_t set_blocks;
    char reason[600];
};
int hc_svc_ok_to_stop_set(const struct hc_svc_node *n, const char *set, struct hc_svc_set_answer *a,
                          struct hc_error *err);
int hc_svc_drain(const struct hc_svc_node *n, struct hc_error *err);
/* Stop/start persist on the agent: a stopped service stays stopped across agent restarts
 * (that is what keeps a node in maintenance). */
int hc_svc_stop(const struct hc_svc_node *n, struct hc_error *err);
int hc_svc_start(const struct hc_svc_node *n, struct hc_error *err);
/* Runs the manifest's health check now. *healthy 1/0, detail says why not. */
int hc_svc_health(const struct hc_svc_node *n, int *healthy, char *detail, size_t len,
                  struct hc_error *err);
/* Blocks still to fetch from peers after a restart (0: in sync). */
int hc_svc_resync_pending(const struct hc_svc_node *n, int64_t *pending, struct hc_error *err);

/* Software. */
struct hc_sw_state {
    char current[64];  /* "" when nothing is active */
    char previous[64]; /* rollback target, "" when none */
    char service[32];  /* supervisor state: running, stopped, crashed, ... */
};
int hc_sw_state(const struct hc_svc_node *n, struct hc_sw_state *st, struct hc_error *err);
/* The agent fetches the bundle from url (NULL: from the controller it enrolled with) with token
 * and verifies sha256 and signature again. */
int hc_sw_stage(const struct hc_svc_node *n, const char *version, const char *url,
                const char *token, const char *sha256, const char *signature, struct hc_error *err);
/* Switches `current` to version atomically; start says whether the service is (re)started. */
int hc_sw_activate(const struct hc_svc_node *n, const char *version, int start,
                   struct hc_error *err);
int hc_sw_rollback(const struct hc_svc_node *n, struct hc_error *err);

/* The agent itself (docs/agent-upgrade.md): what GET /v1/status says of it, its service's pid,
 * and its last self-upgrade. */
struct hc_agent_state {
    char version[64];
    int api_version;  /* 1 when it reports none */
    long service_pid; /* 0 when no service runs */
    char service_state[32];
    char upgrade_to[64], upgrade_state[16], upgrade_reason[160]; /* "" when none */
};
int hc_agent_sw_status(const struct hc_svc_node *n, struct hc_agent_state *st,
                       struct hc_error *err);
/* POST /v1/agent/stage: as hc_sw_stage, for an agent bundle. */
int hc_agent_sw_stage_agent(const struct hc_svc_node *n, const char *version, const char *url,
                            const char *token, const char *sha256, const char *signature,
                            struct hc_error *err);
/* POST /v1/agent/activate: the agent tries the staged program, then execs it; it answers before
 * it goes, and is back (or rolled back by its guardian) within confirm_timeout_ms. */
int hc_agent_sw_activate_agent(const struct hc_svc_node *n, const char *version,
                               long confirm_timeout_ms, struct hc_error *err);

/* Settings (docs/api.md "PUT /v1/service/settings"): hands the node a revision and its
 * overrides; *answer (new reference) {"version","revision","digest","changed","reloaded",
 * "pending_restart"}. A reload the service refused is reload_failed (502), and the node keeps its
 * old values. */
int hc_cfg_push(const struct hc_svc_node *n, int64_t revision, const json_t *overrides,
                json_t **answer, struct hc_error *err);
/* The same for a staged version that is not active yet (node add: before the service's first
 * start, so that its restart settings apply from the start). */
int hc_cfg_push_for(const struct hc_svc_node *n, const char *version, int64_t revision,
                    const json_t *overrides, json_t **answer, struct hc_error *err);
/* GET /v1/service/settings: {"version","revision","overrides","values","digest",...}. */
int hc_cfg_get(const struct hc_svc_node *n, json_t **answer, struct hc_error *err);

#endif
