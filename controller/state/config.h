/*
 * The storage service's configuration as the controller keeps it (docs/config.md): revisions of
 * the settings operators set (table config_revisions), checked against the schema of every
 * version the nodes run, and what each node reports it applied (nodes.config_*).
 *
 * A revision stores overrides (what someone set), never defaults: a node's effective values are
 * its version's defaults under the overrides (common/settings.h), so the desired digest is per
 * version. Revision 0 is "every default"; the desired revision is the highest one recorded.
 *
 * Every function runs in the caller's transaction when one is open.
 */
#ifndef HC_CONTROLLER_CONFIG_H
#define HC_CONTROLLER_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"
#include "db/db.h"

/* The overrides of revision (0: {}), new reference in *overrides: 1, 0 when there is no such
 * revision, -1 with err. */
int hc_config_revision(struct hc_db *db, int64_t revision, json_t **overrides,
                       struct hc_error *err);
/* The desired revision (the highest, 0 when none) and its overrides. 0 or -1 with err. */
int hc_config_desired(struct hc_db *db, int64_t *revision, json_t **overrides,
                      struct hc_error *err);

/* The schema version declares (the uploaded bundle's manifest; an empty schema when it declares
 * none). NULL with err: 404 when the controller has no bundle of that version. */
struct hc_settings_schema *hc_config_schema(struct hc_db *db, const char *version,
                                            struct hc_error *err);
/* Checks overrides (text or JSON values) against the schema of every version the nodes run and
 * returns them normalized (new reference), or NULL with err: invalid_setting naming the first
 * bad key and what it may be ("fsync: 'x' is not one of always, batch"), "no such setting" with
 * the version that lacks it, or 409 when no node runs a version that declares settings. */
json_t *hc_config_check(struct hc_db *db, const json_t *overrides, struct hc_error *err);

/* What changes from overrides a to overrides b (effective values under the schema of every
 * version the nodes run): the diff of common/settings.h of the first version that declares
 * settings (new reference), *restart 1 when a restart setting changes under any of them. NULL
 * with err. */
json_t *hc_config_changes(struct hc_db *db, const json_t *a, const json_t *b, int *restart,
                          struct hc_error *err);

/* Records a new revision (the next number) in the caller's transaction, with its event
 * config.revision. action: set | unset | revert (reverted_to > 0 then). 0 with *revision, or -1
 * with err. */
int hc_config_record(struct hc_db *db, const json_t *overrides, const char *action,
                     int64_t reverted_to, const char *author, const char *message,
                     int64_t *revision, struct hc_error *err);
/* Links a revision to the operation that applies it. */
int hc_config_set_op(struct hc_db *db, int64_t revision, const char *op_id, struct hc_error *err);

/* {"revisions": [{"revision","action","reverted_to","author","message","created_at","values",
 * "operation_id"}]}, newest first (GET /v1/config/history). */
json_t *hc_config_history(struct hc_db *db, struct hc_error *err);

/* The desired state as a judge of what nodes report, with the desired digest of each version
 * seen (computed once per version: a poll cycle judges every node with one). */
struct hc_config_judge {
    struct hc_db *db;
    int64_t revision;
    json_t *overrides;
    struct {
        char version[65];
        char digest[65];
        char error[256]; /* why there is no digest for this version */
    } seen[8];
    size_t n_seen;
};
/* 0 or -1 with err. */
int hc_config_judge_init(struct hc_config_judge *j, struct hc_db *db, struct hc_error *err);
void hc_config_judge_clear(struct hc_config_judge *j);
/* The desired digest under version's schema; "" with why in *error. */
const char *hc_config_judge_digest(struct hc_config_judge *j, const char *version,
                                   const char **error);
/* The detail of not_applied for a version without settings: nothing to apply, which the
 * pre-flight checks (controller/state/checks.c) count as in sync. */
#define HC_CONFIG_NO_SETTINGS "the version the node runs declares no settings"
/* The state of a node from the "settings" of its /v1/status (NULL or null: its version declares
 * no settings): in_sync | drift | pending_restart | not_applied, with why in detail. */
const char *hc_config_judge_node(struct hc_config_judge *j, const json_t *reported, char *detail,
                                 size_t len);
/* The effective values of the desired revision under version's schema, and their digest. New
 * reference or NULL with err. */
json_t *hc_config_effective(struct hc_db *db, const char *version, const json_t *overrides,
                            char digest[65], struct hc_error *err);

/* Stores what a node reported (the poller) and the state judged from it. */
int hc_config_node_store(struct hc_db *db, const char *node, const json_t *reported,
                         const char *state, const char *detail, struct hc_error *err);
/* The state of an unanswering node: unreachable (its last report is kept). */
int hc_config_node_unreachable(struct hc_db *db, const char *node, struct hc_error *err);

/* `config status`: {"revision": N, "nodes": [{"name","software_version","applied_revision",
 * "state","detail","pending_restart"}], "counts": {STATE: n}}. */
json_t *hc_config_status(struct hc_db *db, struct hc_error *err);

#endif
