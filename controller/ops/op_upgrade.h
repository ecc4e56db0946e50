/*
 * The rolling upgrade of the storage software (operation "upgrade.rolling", disruptive: it holds
 * the cluster lease from start to end).
 *
 * verify (bundle uploaded, every node's version >= the bundle's min_upgrade_from) -> send the
 * storage peers -> pre-stage the bundle on every node (no disruption) -> up to max_unavailable
 * nodes at a time, in name order (docs/upgrade.md): budget and ok-to-stop -> drain -> stop
 * (maintenance) -> activate -> health (on failure: rollback to the previous version, health,
 * exit maintenance, and no further node goes down) -> start/health/resync (exit maintenance) ->
 * the next node. Every step is recorded per node and
 * idempotent, so a controller killed at any instant carries on after restart. An agent that
 * stops answering pauses the operation with the reason; it resumes by itself once the node is
 * reachable again (or by `hcctl upgrade resume`). Abort leaves every node on a working version:
 * a node caught half-way is finished or rolled back first.
 */
#ifndef HC_CONTROLLER_OP_UPGRADE_H
#define HC_CONTROLLER_OP_UPGRADE_H

#include <jansson.h>

#include "common/error.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_UPGRADE_KIND "upgrade.rolling"
#define HC_UPGRADE_NODE_TIMEOUT_MS (5 * 60 * 1000)

/* Compares dotted numeric versions ("1.10" > "1.9"); non-numeric parts compare as text. */
int hc_version_cmp(const char *a, const char *b);

/* The plan for params {"to_version","max_unavailable"?}: {"to_version","from_versions",
 * "max_unavailable","nodes":[{"name","from_version","action","steps":[...]}]} or NULL with err
 * (404 unknown version, 409 a node below min_upgrade_from). Changes nothing. */
json_t *hc_upgrade_plan(struct hc_db *db, const json_t *params, struct hc_error *err);
/* 0 when no node is in maintenance, else -1 with a 409 naming one: a new upgrade is refused
 * rather than bringing back (or counting around) a node the admin or a failed operation left
 * down. */
int hc_upgrade_check_nodes_up(struct hc_db *db, struct hc_error *err);

/* `upgrade status`: the latest upgrade operation with per-node progress; when none ever ran,
 * the same keys with state "none" (operation_id, to_version, error, waiting_on null, no nodes).
 * NULL with err only on a database error. */
json_t *hc_upgrade_status(struct hc_db *db, struct hc_error *err);

/* The kind HC_UPGRADE_KIND (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_upgrade;

#endif
