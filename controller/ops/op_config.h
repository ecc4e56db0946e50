/*
 * The operations that apply a configuration revision to the nodes (op_config.c): config.apply
 * (live settings only, every node at once, not disruptive) and config.rolling (a restart setting
 * changes: node by node through the rolling engine, disruptive).
 */
#ifndef HC_CONTROLLER_OP_CONFIG_H
#define HC_CONTROLLER_OP_CONFIG_H

#include "controller/ops/ops.h"

#define HC_CONFIG_APPLY_KIND "config.apply"
#define HC_CONFIG_ROLLING_KIND "config.rolling"

extern const struct hc_op_kind hc_op_kind_config_apply;
extern const struct hc_op_kind hc_op_kind_config_rolling;

#endif
