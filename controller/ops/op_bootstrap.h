/*
 * cluster.create and node.add: from bare hosts reachable over SSH to enrolled, healthy agents.
 *
 * Per host, in parallel (at most params.parallel hosts at once, default 16), each step recorded
 * per host in operation_steps and each one idempotent: connect (host key pinned in the
 * controller's known_hosts) -> preflight (OS, architecture, free disk, storage interface, clock
 * skew, required commands) -> push (hcagent binary into /opt/hcctl/agent/VERSION/ and a fresh
 * one-time join token, by SFTP) -> start (systemd unit where systemd manages the host's mount
 * namespace, else hcagent's own supervised daemon) -> wait until the agent enrolled and answers
 * the poller -> pin (host key, SSH endpoint, storage interface on the node record).
 * A host that already runs an enrolled agent skips push and start, so re-running a partly failed
 * create finishes the rest. The operation succeeds only if every host joined.
 */
#ifndef HC_CONTROLLER_OP_BOOTSTRAP_H
#define HC_CONTROLLER_OP_BOOTSTRAP_H

#include <stddef.h>

#include "common/constants.h"
#include "common/error.h"
#include "controller/controller.h"

#define HC_BOOTSTRAP_DEFAULT_PARALLEL 16
#define HC_BOOTSTRAP_MAX_PARALLEL 64
#define HC_REMOTE_AGENT_ROOT "/opt/hcctl/agent"
#define HC_REMOTE_AGENT_ETC "/etc/hcctl/agent"
#define HC_REMOTE_AGENT_DATA "/var/lib/hcctl/agent"
/* HC_REMOTE_AGENT_DATA as systemd's StateDirectory= names it (relative to /var/lib). */
#define HC_REMOTE_AGENT_STATE "hcctl/agent"
#define HC_REMOTE_AGENT_RUN "/run/hcctl"

/* The hcagent.service pushed to a systemd node: the packaged unit's template with the pushed
 * agent's ExecStart and StateDirectory (malloc'd; NULL when out of memory). */
char *hc_bootstrap_unit_text(void);

/* The kinds "cluster.create" and "node.add" (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_cluster_create;
extern const struct hc_op_kind hc_op_kind_node_add;

/* The controller's SSH key and known_hosts store inside its data dir. */
void hc_bootstrap_ssh_paths(const char *data_dir, char *key, size_t key_len, char *known,
                            size_t known_len);

#endif
