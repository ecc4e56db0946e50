/*
 * The states of a durable operation and of its steps, as the controller stores them and both
 * APIs and hcctl show them: one list, one "is terminal", for the controller and the CLI.
 *   operation: pending -> running -> (paused) -> succeeded | failed | aborted
 *   step:      pending -> running -> succeeded | failed | skipped
 */
#ifndef HC_COMMON_OP_STATE_H
#define HC_COMMON_OP_STATE_H

enum hc_op_state {
    HC_OP_STATE_PENDING,
    HC_OP_STATE_RUNNING,
    HC_OP_STATE_PAUSED,
    HC_OP_STATE_SUCCEEDED,
    HC_OP_STATE_FAILED,
    HC_OP_STATE_ABORTED,
    HC_OP_STATE_COUNT
};

/* The operation states' names in enum order, NULL-terminated (a completion or filter list). */
extern const char *const hc_op_state_names[HC_OP_STATE_COUNT + 1];

/* The state named so, or -1 for a name that is no operation state (NULL included). */
int hc_op_state_parse(const char *name);
/* 1 when an operation in this state will not change again (succeeded, failed, aborted). */
int hc_op_state_terminal(const char *name);
/* 1 when a step in this state is over: a terminal operation state, or skipped. */
int hc_op_step_terminal(const char *name);

#endif
