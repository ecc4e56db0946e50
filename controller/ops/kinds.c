/*
 * The operation kinds this controller runs: one static table, like the route table
 * (controller/api/api.c) and the CLI's command groups (cli/groups.c). Each op_*.c defines its
 * kinds; the framework (ops.c) finds a kind here by the name stored with the operation, and an
 * operation whose kind is not listed fails as unknown_kind (an operation recorded by another
 * version of the controller).
 */
#include "controller/ops/ops.h"

#include <stddef.h>

#include "controller/ops/op_agent_upgrade.h"
#include "controller/ops/op_bootstrap.h"
#include "controller/ops/op_config.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/op_net.h"
#include "controller/ops/op_node_remove.h"
#include "controller/ops/op_node_set.h"
#include "controller/ops/op_upgrade.h"

/* Packed by hand: clang-format puts one item a line when the count is not a multiple of 3. */
/* clang-format off */
const struct hc_op_kind *const hc_op_kinds[] = {
    &hc_op_kind_cluster_create,
    &hc_op_kind_node_add,
    &hc_op_kind_node_remove,
    &hc_op_kind_maintenance_enter,
    &hc_op_kind_maintenance_exit,
    &hc_op_kind_upgrade,
    &hc_op_kind_net_check,
    &hc_op_kind_net_set_mtu,
    &hc_op_kind_net_bench,
    &hc_op_kind_config_apply,
    &hc_op_kind_config_rolling,
    &hc_op_kind_node_set,
    &hc_op_kind_agent_upgrade,
    NULL,
};
/* clang-format on */
