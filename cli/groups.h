/*
 * The command groups (one file each, cli/cmd_<group>.c) and the few helpers they share.
 * cli/groups.c lists them in hc_cmd_groups.
 */
#ifndef HC_CLI_GROUPS_H
#define HC_CLI_GROUPS_H

#include <stdint.h>

#include "cli/cmd.h"

extern const struct hc_cmd_group hc_cmd_group_cluster;
extern const struct hc_cmd_group hc_cmd_group_node;
extern const struct hc_cmd_group hc_cmd_group_operation;
extern const struct hc_cmd_group hc_cmd_group_events;
extern const struct hc_cmd_group hc_cmd_group_version;
extern const struct hc_cmd_group hc_cmd_group_self_test;

/* Follows operation id (polling GET /v1/operations/ID every 250 ms to 1 s) until it ends or
 * timeout_ms passes; progress lines on stderr unless -q. Returns the exit code: 0 succeeded,
 * 1 failed or aborted (the operation's error and hint are reported), 6 timed out. With -o json
 * the final {"operation","steps"} document (or the error shape plus those keys) is printed. */
int hc_cmd_op_wait(struct hc_cmd_ctx *ctx, const char *id, int64_t timeout_ms);

/* "/v1/nodes/" + escaped name into buf. Returns 0, or -1 when it does not fit. */
int hc_cmd_path(char *buf, size_t len, const char *prefix, const char *name);

#endif
