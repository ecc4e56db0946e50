/*
 * The operations that apply a configuration revision to the nodes (op_config.c): config.apply
 * (live settings only, every node at once, not disruptive) and config.rolling (a restart setting
 * changes: node by node through the rolling engine, disruptive).
 */
#ifndef HC_CONTROLLER_OP_CONFIG_H
#define HC_CONTROLLER_OP_CONFIG_H

#include "common/error.h"
#include "controller/ops/ops.h"
#include "db/db.h"

#define HC_CONFIG_APPLY_KIND "config.apply"
#define HC_CONFIG_ROLLING_KIND "config.rolling"

/* 0 when nothing stops a configuration change now, else -1 with err: 409 naming the operation
 * that does (a disruptive one, a config.apply, or one of a kind this controller does not know),
 * or the database's error. The API refuses a change then; the poller's repair waits. */
int hc_config_blocked(struct hc_db *db, struct hc_error *err);

extern const struct hc_op_kind hc_op_kind_config_apply;
extern const struct hc_op_kind hc_op_kind_config_rolling;

#endif
