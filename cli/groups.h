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
extern const struct hc_cmd_group hc_cmd_group_maintenance;
extern const struct hc_cmd_group hc_cmd_group_upgrade;
extern const struct hc_cmd_group hc_cmd_group_net;
extern const struct hc_cmd_group hc_cmd_group_software;
extern const struct hc_cmd_group hc_cmd_group_operation;
extern const struct hc_cmd_group hc_cmd_group_token;
extern const struct hc_cmd_group hc_cmd_group_events;
extern const struct hc_cmd_group hc_cmd_group_version;
extern const struct hc_cmd_group hc_cmd_group_self_test;
extern const struct hc_cmd_group hc_cmd_group_shell;      /* cmd_shell.c */
extern const struct hc_cmd_group hc_cmd_group_completion; /* cmd_completion.c */
extern const struct hc_cmd_group hc_cmd_group_complete;   /* cmd_completion.c (hidden) */
extern const struct hc_cmd_group hc_cmd_group_help;       /* cmd_help.c */
extern const struct hc_cmd_group hc_cmd_group_man;        /* cmd_man.c (hidden) */

/* Follows operation id (polling GET /v1/operations/ID every 250 ms to 1 s) until it ends or
 * timeout_ms passes; progress lines on stderr unless -q. Returns the exit code: 0 succeeded,
 * 1 failed or aborted (the operation's error and hint are reported), 6 timed out. With -o json
 * the final {"operation","steps"} document (or the error shape plus those keys) is printed. */
int hc_cmd_op_wait(struct hc_cmd_ctx *ctx, const char *id, int64_t timeout_ms);

/* Starts cluster.create (name set) or node.add for nodes ([USER@]HOST[:PORT]) with the verb's
 * HC_BOOTSTRAP_OPTS, and follows the operation. Returns the exit code. */
int hc_cmd_bootstrap(struct hc_cmd_ctx *ctx, const char *name, const char *const *nodes,
                     size_t n);
/* The options of cluster create and node add, after their own. */
#define HC_BOOTSTRAP_OPTS                                                                          \
    {"ssh-key", 0, HC_OPT_STRING, 0,                                                               \
     "private key the controller logs in with (default: its own, DATA_DIR/ssh/id_ed25519)",      \
     "FILE", HC_COMPLETE_FILE, NULL, NULL},                                                        \
    {"known-hosts", 0, HC_OPT_STRING, 0, "known_hosts file of trusted host keys (read-only)",     \
     "FILE", HC_COMPLETE_FILE, NULL, NULL},                                                        \
    {"accept-new-host-keys", 0, HC_OPT_BOOL, 0,                                                    \
     "pin host keys seen for the first time (a changed key is always refused)", NULL,             \
     HC_COMPLETE_NONE, NULL, NULL},                                                                \
    {"storage-interface", 0, HC_OPT_STRING, 0,                                                     \
     "storage network interface (default: the one carrying the node's address)", "IFACE",         \
     HC_COMPLETE_NONE, NULL, NULL},                                                                \
    {"mtu", 0, HC_OPT_INT, 0, "the cluster's storage MTU", "N", HC_COMPLETE_NONE, NULL, NULL},   \
    {"parallel", 0, HC_OPT_INT, 0, "nodes bootstrapped at once", "N", HC_COMPLETE_NONE, "16",     \
     NULL},                                                                                        \
    {"join-timeout", 0, HC_OPT_DURATION, 0, "how long each agent may take to enroll", "DUR",      \
     HC_COMPLETE_NONE, "60s", NULL},                                                               \
    {"no-wait", 0, HC_OPT_BOOL, 0, "return once the operation is accepted (prints its id)", NULL, \
     HC_COMPLETE_NONE, NULL, NULL},                                                                \
    {"timeout", 0, HC_OPT_DURATION, 0, "how long to wait for the operation to end", "DUR",        \
     HC_COMPLETE_NONE, "30m", NULL}

/* After a request that started an operation (doc has "operation"): with --no-wait (the verb
 * must declare it) prints the id (or doc with -o json) and returns 0; otherwise says what
 * started ("<fmt>: operation ID") and follows it with hc_cmd_op_wait. */
int hc_cmd_follow(struct hc_cmd_ctx *ctx, const json_t *doc, int64_t timeout_ms,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "/v1/nodes/" + escaped name into buf. Returns 0, or -1 when it does not fit. */
int hc_cmd_path(char *buf, size_t len, const char *prefix, const char *name);

#endif
