/* The states of operations and steps: names, parsing and "is terminal" (common/op_state.h). */
#include "common/op_state.h"

#include <stddef.h>
#include <string.h>

const char *const hc_op_state_names[HC_OP_STATE_COUNT + 1] = {
    [HC_OP_STATE_PENDING] = "pending", [HC_OP_STATE_RUNNING] = "running",
    [HC_OP_STATE_PAUSED] = "paused",   [HC_OP_STATE_SUCCEEDED] = "succeeded",
    [HC_OP_STATE_FAILED] = "failed",   [HC_OP_STATE_ABORTED] = "aborted",
    [HC_OP_STATE_COUNT] = NULL,
};

int hc_op_state_parse(const char *name)
{
    for (int i = 0; name && i < HC_OP_STATE_COUNT; i++)
        if (strcmp(name, hc_op_state_names[i]) == 0)
            return i;
    return -1;
}

int hc_op_state_terminal(const char *name)
{
    int s = hc_op_state_parse(name);
    return s == HC_OP_STATE_SUCCEEDED || s == HC_OP_STATE_FAILED || s == HC_OP_STATE_ABORTED;
}

int hc_op_step_terminal(const char *name)
{
    return hc_op_state_terminal(name) || (name && strcmp(name, "skipped") == 0);
}
