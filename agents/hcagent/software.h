/*
 * Software on a node (docs/bundles.md "On the node", docs/api.md "Agent API: software and
 * service"): bundles staged side by side in DIR/software/VERSION/, the active one named by the
 * `current` symlink and the rollback target by `previous`, the service they run supervised by
 * agents/hcagent/service.c.
 *
 *   DIR/trusted-keys/NAME.pem  bundle signing keys, from the controller at enrollment
 *   DIR/software/VERSION/      an extracted, verified bundle (its presence means "staged")
 *   DIR/software/.meta/VERSION.json  {"version","name","sha256","signed_by","staged_at"}
 *   DIR/software/current, previous   symlinks to VERSION, switched by rename (atomic)
 *   DIR/software/state.json    {"desired":"running"|"stopped"}: survives agent restarts
 *   DIR/software/service.log   the service's stdout and stderr
 *   DIR/software/service.pid   the running service, for the next agent to adopt
 *   DIR/service-data/          the service's own data, shared by every version
 *
 * Exported names are hc_agent_software_* (public) and hc_agent_sw_* (between software.c and
 * software_api.c): the controller's library has hc_software_* and hc_sw_* of its own.
 */
#ifndef HC_AGENTS_SOFTWARE_H
#define HC_AGENTS_SOFTWARE_H

#include <event2/event.h>
#include <jansson.h>

#include "agents/hcagent/agent.h"
#include "agents/hcagent/service.h"
#include "common/bundle.h"
#include "common/error.h"
#include "common/https_server.h"

#define HC_AGENT_DIR_KEYS "trusted-keys"
#define HC_AGENT_DIR_SOFTWARE "software"
#define HC_AGENT_DIR_SERVICE_DATA "service-data"

struct hc_agent_software;

/* ---------------------------------------------------------------- public (agent_api.c, join.c) */

/* Sets up the node's software from data_dir and registers the routes of docs/api.md on srv.
 * Nothing runs yet (see _start). NULL with err. */
struct hc_agent_software *hc_agent_software_new(struct hc_http_server *srv, struct event_base *base,
                                                const char *data_dir,
                                                const struct hc_agent_config *cfg,
                                                struct hc_error *err);
/* Brings the service to its desired state: adopts one left running by an earlier agent, or
 * starts the current version when it should run. */
void hc_agent_software_start(struct hc_agent_software *sw);
/* Answers pending requests, waits for running jobs and frees. The service keeps running unless
 * stop_service (the node leaves the cluster). Accepts NULL. */
void hc_agent_software_free(struct hc_agent_software *sw, int stop_service);
/* Adds "software_version", "previous_software_version" and "service" to a /v1/status body. */
void hc_agent_software_status(const struct hc_agent_software *sw, json_t *status);
/* Writes DIR/trusted-keys/NAME.pem for each {"name","key_id","pem"} of keys (the enrollment
 * answer's trusted_keys), each checked to be an Ed25519 public key. 0 or -1 with err. */
int hc_agent_software_keys_save(const char *data_dir, const json_t *keys, struct hc_error *err);
/* Removes DIR/trusted-keys (a failed join). */
void hc_agent_software_keys_remove(const char *data_dir);

/* ---------------------------------------------------------------- internal (software_api.c) */

struct hc_agent_software {
    struct event_base *base;
    struct hc_agent_config cfg;
    char data_dir[1024]; /* absolute */
    char dir[1100];      /* DIR/software */
    char keys_dir[1100]; /* DIR/trusted-keys */
    char ca_file[1100];  /* DIR/ca.pem: the controller's CA, for downloads */
    char service_host[256];
    struct hc_jobs *jobs;
    struct hc_service *svc;
    int desired_running;
    char staging[65];            /* version being staged, "" when none */
    struct hc_sw_action *action; /* the activate/rollback/stop in progress, NULL when none */
};

/* The version a link (current or previous) names, "" when none. */
void hc_agent_sw_link(const struct hc_agent_software *sw, const char *link, char out[65]);
/* 1 when DIR/software/VERSION exists. */
int hc_agent_sw_staged(const struct hc_agent_software *sw, const char *version);
/* The staged bundle's manifest, validated again (new reference); NULL with err (404 when the
 * version is not staged). */
json_t *hc_agent_sw_manifest(const struct hc_agent_software *sw, const char *version,
                             struct hc_error *err);
void hc_agent_sw_env(const struct hc_agent_software *sw, const char *version,
                     struct hc_service_env *env);
/* Points current at version; previous becomes the old current, or nothing for a rollback. */
int hc_agent_sw_switch(struct hc_agent_software *sw, const char *version, int rollback,
                       struct hc_error *err);
/* Records the desired state (state.json). */
int hc_agent_sw_set_desired(struct hc_agent_software *sw, int running, struct hc_error *err);
/* GET /v1/software's body (new reference). */
json_t *hc_agent_sw_json(const struct hc_agent_software *sw);

/* A stage, run as a job: fetch, verify against DIR/trusted-keys, extract, rename into place. */
struct hc_agent_sw_stage {
    char version[65];
    char url[1024];              /* "" for CONTROLLER/v1/software/VERSION/bundle */
    char token[256];             /* bearer token for the controller (a short-lived read-only one) */
    char sha256[65];             /* expected, "" when not given */
    char sig[HC_BUNDLE_SIG_MAX]; /* signature line, "" to ask the controller */
    char dir[1100], keys_dir[1100], ca_file[1100], controller[512];
    char kind[16];           /* the manifest kind it must be: HC_BUNDLE_KIND_SERVICE or _AGENT */
    char controller_pin[64]; /* pinned on downloads from the controller ("" none) */
    /* results */
    int failed, already;
    struct hc_error err;
    char sha256_out[65], signed_by[128], name[64];
};
void hc_agent_sw_stage_work(void *arg);
/* POST .../stage: parses the body, then stages into dir (DIR/software, or DIR/agent) a bundle
 * of that kind as a job, answering when it is done. One stage at a time for both. */
void hc_agent_sw_stage_start(struct hc_request *req, struct hc_agent_software *sw, const char *dir,
                             const char *kind);

/* Answers (503) a stop, start, activation or rollback still waiting for the service, at
 * shutdown. */
void hc_agent_sw_actions_cancel(struct hc_agent_software *sw);
/* Registers the routes of software_api.c. 0 or -1 with err. */
int hc_agent_sw_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                       struct hc_error *err);

#endif
