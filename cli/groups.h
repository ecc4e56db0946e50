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
extern const struct hc_cmd_group hc_cmd_group_agent;
extern const struct hc_cmd_group hc_cmd_group_config;
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
int hc_cmd_bootstrap(struct hc_cmd_ctx *ctx, const char *name, const char *const *nodes, size_t n);
/* The options of cluster create and node add, after their own. */
#define HC_BOOTSTRAP_OPTS                                                                          \
    HC_OPT(.name = "ssh-key", .type = HC_OPT_STRING,                                               \
           .help = "private key the controller logs in with (default: its own, "                   \
                   "DATA_DIR/ssh/id_ed25519)",                                                     \
           .value_name = "FILE", .completer = HC_COMPLETE_FILE),                                   \
        HC_OPT(.name = "known-hosts", .type = HC_OPT_STRING,                                       \
               .help = "known_hosts file of trusted host keys (read-only)", .value_name = "FILE",  \
               .completer = HC_COMPLETE_FILE),                                                     \
        HC_OPT(.name = "accept-new-host-keys", .type = HC_OPT_BOOL,                                \
               .help = "pin host keys seen for the first time (a changed key is always refused)"), \
        HC_OPT(.name = "storage-interface", .type = HC_OPT_STRING,                                 \
               .help = "storage network interface (default: the one carrying the node's address)", \
               .value_name = "IFACE"),                                                             \
        HC_OPT(.name = "failure-domain", .type = HC_OPT_LIST,                                      \
               .help = "HOST=DOMAIN: the host's failure domain (rack, chassis, power feed); a "    \
                       "bare DOMAIN is every host's (repeat for each host)",                       \
               .value_name = "[HOST=]DOMAIN"),                                                     \
        HC_OPT(.name = "mtu", .type = HC_OPT_INT, .help = "the cluster's storage MTU",             \
               .value_name = "N"),                                                                 \
        HC_OPT(.name = "parallel", .type = HC_OPT_INT, .help = "nodes bootstrapped at once",       \
               .value_name = "N", .def = "16"),                                                    \
        HC_OPT(.name = "join-timeout", .type = HC_OPT_DURATION,                                    \
               .help = "how long each agent may take to enroll", .value_name = "DUR",              \
               .def = "60s"),                                                                      \
        HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,                                             \
               .help = "return once the operation is accepted (prints its id)"),                   \
    {                                                                                              \
        .name = "timeout", .type = HC_OPT_DURATION,                                                \
        .help = "how long to wait for the operation to end", .value_name = "DUR", .def = "30m"     \
    }

/* The pre-flight checks (docs/api.md "Checks"), shared by cluster check, upgrade and config set
 * (cmd_cluster.c). hc_cmd_skip_checks puts --skip-checks=ID,... into body's "skip_checks" and
 * returns 0, or reports an unknown or empty id as a usage error and returns its exit code. */
int hc_cmd_skip_checks(struct hc_cmd_ctx *ctx, json_t *body);
/* One line per check that is not ok, with its remedy, then the summary (text output). */
void hc_cmd_checks_render(struct hc_cmd_ctx *ctx, const json_t *report);
#define HC_SKIP_CHECKS_OPT                                                                         \
    HC_OPT(.name = "skip-checks", .type = HC_OPT_STRING,                                           \
           .help = "go on despite these pre-flight checks at error (comma-separated ids; "         \
                   "see 'hcctl cluster check')",                                                   \
           .value_name = "ID,...")

/* --batch node|domain of the rolling operations (upgrade, config set/apply): "batch" into body
 * when given; a usage error (exit 2) for any other word. Returns the exit code. */
int hc_cmd_batch(struct hc_cmd_ctx *ctx, json_t *body);
#define HC_BATCH_OPT                                                                               \
    HC_OPT(.name = "batch", .type = HC_OPT_STRING,                                                 \
           .help =                                                                                 \
               "node (default) or domain: whole failure domains at a time, --max-unavailable "     \
               "then counting domains (one node at a time where the storage refuses a domain)",    \
           .value_name = "node|domain")

/* After a request that started an operation (doc has "operation"): with --no-wait (the verb
 * must declare it) prints the id (or doc with -o json) and returns 0; otherwise says what
 * started ("<fmt>: operation ID") and follows it with hc_cmd_op_wait. */
int hc_cmd_follow(struct hc_cmd_ctx *ctx, const json_t *doc, int64_t timeout_ms, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
/* "/v1/nodes/" + escaped name into buf. Returns 0, or -1 when it does not fit. */
int hc_cmd_path(char *buf, size_t len, const char *prefix, const char *name);

#endif
