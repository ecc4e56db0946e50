/*
 * The agent's own version and its self-upgrade (docs/agent-upgrade.md).
 *
 *   DIR/agent/VERSION/           an extracted, verified agent bundle (manifest kind "agent")
 *   DIR/agent/.meta/VERSION.json what the stage recorded (as for service bundles)
 *   DIR/agent/current            symlink to the VERSION that runs; absent: the installed program
 *   DIR/agent/upgrade.json       the last self-upgrade: {"from_version","from_exe","to_version",
 *                                "to_exe","state":"pending"|"confirmed"|"rolled_back",
 *                                "deadline_ms","reason"}
 *
 * An activation execs the new program in place (same pid: systemd's main pid, the daemon
 * supervisor's worker and the storage service's parent stay what they were), after the agent
 * has shut down as for SIGTERM, which leaves the service running for the new agent to adopt.
 * A guardian process forked just before watches the new agent: unless it confirms (it has
 * started serving and reports the version it was activated as) before the deadline, the
 * guardian points `current` back, kills it if it still runs, and starts the previous program
 * (or leaves that to the supervisor: systemd or the daemon mode's).
 */
#ifndef HC_AGENTS_AGENT_UPGRADE_H
#define HC_AGENTS_AGENT_UPGRADE_H

#include <event2/event.h>
#include <jansson.h>

#include "common/error.h"
#include "common/https_server.h"

struct hc_agent_software;

/* Reads the test knobs HCAGENT_TEST_VERSION and HCAGENT_TEST_API_VERSION (documented as test
 * knobs: the version and agent API version this process reports instead of its own). An agent
 * it upgrades or rolls back to does not inherit them. Call first in main. */
void hc_agent_identity_init(void);
/* The version this agent reports (HC_VERSION unless the test knob says otherwise). */
const char *hc_agent_version(void);
/* The agent API version it speaks (HC_AGENT_API_VERSION unless the test knob says otherwise). */
int hc_agent_api_version(void);

/* How to start the agent again from another program (an upgrade, a rollback): the options of
 * `hcagent run` this process was given (borrowed, they must live as long as the process), and
 * whether a supervisor (systemd, the daemon mode's) restarts the agent when it exits. */
void hc_agent_upgrade_set_args(const char *data_dir, const char *log_level,
                               const char *max_connections, const char *request_deadline,
                               int supervised);
/* At start, before serving: runs the agent program DIR/agent/current names instead of this one
 * (exec), unless this process was started as that program. Returns when it did not exec. */
void hc_agent_upgrade_launch(const char *data_dir);
/* Once serving: a pending upgrade to this agent's version is confirmed (its guardian ends).
 * A pending upgrade to another version past its deadline whose guardian did not survive (a
 * reboot) is recorded rolled back. */
void hc_agent_upgrade_confirm(const char *data_dir);
/* After hc_agent_serve returned: when an activation asked for it, forks the guardian and execs
 * the new agent program (does not return then). Returns 0 when nothing was asked. */
int hc_agent_upgrade_exec(void);
/* Adds "agent_version", "api_version" and "agent_upgrade" (the last upgrade.json, or null) to
 * a /v1/status body. */
void hc_agent_upgrade_status(const char *data_dir, json_t *status);
/* Registers POST /v1/agent/stage and /v1/agent/activate, GET /v1/agent. 0 or -1 with err. */
int hc_agent_upgrade_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                            struct hc_error *err);

#endif
