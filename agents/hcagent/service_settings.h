/*
 * The storage service's settings on a node (docs/hcagent.md "Settings", docs/bundles.md
 * "Settings"): what the controller handed (a revision and its overrides), the effective values
 * the service reads, and whether the running process has them.
 *
 *   DIR/service-settings.json        the effective values (every setting of the running
 *                                    version's schema, defaults filled), 0644: what the service
 *                                    reads (--settings {settings_file}); its digest is what the
 *                                    agent reports, so a value edited on the node shows as drift
 *   DIR/service-settings.state.json  {"revision": N, "overrides": {...}, "started": {...}|null}:
 *                                    the controller's revision, its overrides, and the values the
 *                                    running process was started with (for pending_restart, also
 *                                    after an agent restart adopted the process), 0600
 *
 * Revision 0 is "nothing handed yet": every default.
 */
#ifndef HC_AGENTS_SERVICE_SETTINGS_H
#define HC_AGENTS_SERVICE_SETTINGS_H

#include <jansson.h>
#include <stdint.h>

#include "agents/hcagent/service.h"
#include "common/error.h"
#include "common/https_server.h"

#define HC_SETTINGS_STATE_FILE "service-settings.state.json"

/* At each start of the service of manifest (which declares settings): the stored overrides
 * under its schema (a setting it no longer has is dropped and logged; a value it refuses is an
 * error naming it), written to env->settings_file and recorded as what the process starts
 * with. The effective values (new reference), or NULL with err. */
json_t *hc_service_settings_prepare(const json_t *manifest, const struct hc_service_env *env,
                                    struct hc_error *err);

struct hc_agent_software;
/* /v1/status's "settings" for the version the service runs (or the current one):
 * {"revision","digest","pending_restart","version"}, {"error"} when the file cannot be read,
 * or null when that version declares no settings. New reference. */
json_t *hc_agent_sw_settings_status(const struct hc_agent_software *sw);
/* Registers GET and PUT /v1/service/settings. 0 or -1 with err. */
int hc_agent_sw_settings_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                                struct hc_error *err);

#endif
