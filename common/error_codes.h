/*
 * The one table of error codes: every code the project sends (HTTP APIs of hcctld, hcagent and
 * hcstor) or reports (hcctl's own errors), each with the one HTTP status it goes out with and
 * hcctl's exit codes for it. A call site names a code and nothing else:
 *   hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
 * so one code never goes out with two statuses. Add a row here, never rename a wire string
 * (they are API). docs/api.md lists this table; tests/unit/test_error_codes.c checks both.
 */
#ifndef HC_COMMON_ERROR_CODES_H
#define HC_COMMON_ERROR_CODES_H

/* hcctl's exit codes: the contract scripts branch on (DESIGN.md "CLI contract", docs/hcctl.md).
 * Never renumber. */
enum hc_exit {
    HC_EXIT_OK = 0,
    HC_EXIT_FAILED = 1,      /* the command or the operation failed */
    HC_EXIT_USAGE = 2,       /* bad command line, or a disruptive command without --yes */
    HC_EXIT_UNAVAILABLE = 3, /* controller unreachable, TLS failure, 401, 403 */
    HC_EXIT_CHECK = 4,       /* a check ran and found problems */
    HC_EXIT_REFUSED = 5,     /* 409 conflict or an unsafe precondition */
    HC_EXIT_TIMEOUT = 6,     /* transport timeout, or an operation wait that ran out */
};

/* Wire strings that code compares or tests name (the table below is the list of all codes). */
#define HC_ERR_INTERNAL "internal"
#define HC_ERR_INVALID_ARGUMENT "invalid_argument"
#define HC_ERR_INVALID_JSON "invalid_json"
#define HC_ERR_INVALID_SETTING "invalid_setting"
#define HC_ERR_INVALID_DOMAIN "invalid_failure_domain"
#define HC_ERR_BODY_TOO_LARGE "body_too_large"
#define HC_ERR_NOT_FOUND "not_found"
#define HC_ERR_METHOD_NOT_ALLOWED "method_not_allowed"
#define HC_ERR_UNAUTHORIZED "unauthorized"
#define HC_ERR_FORBIDDEN "forbidden"
#define HC_ERR_CONFLICT "conflict"
#define HC_ERR_TOKEN_INVALID "token_invalid"
#define HC_ERR_UNREACHABLE "unreachable"
#define HC_ERR_TIMEOUT "timeout"
#define HC_ERR_TLS "tls_error"
#define HC_ERR_DB "db_error"
#define HC_ERR_SCHEMA_TOO_NEW "schema_too_new"
#define HC_ERR_IO "io_error"
#define HC_ERR_RESPONSE_TOO_LARGE "response_too_large"
#define HC_ERR_NOT_OK_TO_STOP "not_ok_to_stop"
#define HC_ERR_BUDGET "unavailable_budget"
#define HC_ERR_OTHER_UNREACHABLE "other_node_unreachable"
#define HC_ERR_HOST_KEY_UNKNOWN "host_key_unknown"
#define HC_ERR_HOST_KEY_CHANGED "host_key_changed"
#define HC_ERR_SSH_AUTH "ssh_auth_failed"
#define HC_ERR_SSH "ssh_error"
#define HC_ERR_STALE_TERM "stale_term"
#define HC_ERR_NOT_LEADER "not_leader"
#define HC_ERR_NO_LEADER "no_leader"
#define HC_ERR_ETCD "etcd_error"
#define HC_BUNDLE_ERR_SIGNATURE "bundle_signature_invalid" /* bad, malformed or untrusted */
#define HC_BUNDLE_ERR_CHECKSUM "bundle_checksum_mismatch"  /* the file is not what was signed */
#define HC_BUNDLE_ERR_CORRUPT "bundle_corrupt"             /* not a readable tar.gz */
#define HC_BUNDLE_ERR_UNSAFE "bundle_unsafe_entry"         /* path escapes, special file */
#define HC_BUNDLE_ERR_MANIFEST "bundle_manifest_invalid"
#define HC_BUNDLE_ERR_TOO_LARGE "bundle_too_large"
#define HC_BUNDLE_ERR_NO_KEYS "no_trusted_keys"
/* Command-line mistakes found by hcctl itself, and a check that found problems (never sent by
 * a server). */
#define HC_CLI_ERR_USAGE "usage"
#define HC_CLI_ERR_CHECK "check_failed"

/*
 * X(NAME, wire, HTTP status, exit code of hcctl when a request answers it, exit code of hcctl
 * when an operation ends with it, meaning). The answer's exit code follows the status (401/403
 * -> 3, 409 -> 5) except where the code says more (transport, usage, check); an operation's is 5
 * only for the refusals an operation makes to stay safe (DESIGN.md exit code 5), else 1.
 */
#define HC_ERROR_CODES(X)                                                                          \
    X(INTERNAL, HC_ERR_INTERNAL, 500, 1, 1, "a bug or an exhausted resource (out of memory)")      \
    X(INVALID_ARGUMENT, HC_ERR_INVALID_ARGUMENT, 400, 1, 1, "a field or parameter is invalid")     \
    X(INVALID_SETTING, HC_ERR_INVALID_SETTING, 400, 2, 1,                                          \
      "a setting's name or value is not what the service's schema allows")                         \
    X(INVALID_DOMAIN, HC_ERR_INVALID_DOMAIN, 400, 2, 1,                                            \
      "a failure domain name, or a count of domains, the cluster cannot take")                     \
    X(INVALID_JSON, HC_ERR_INVALID_JSON, 400, 1, 1,                                                \
      "the body (or a file) is not the JSON expected")                                             \
    X(BODY_TOO_LARGE, HC_ERR_BODY_TOO_LARGE, 413, 1, 1,                                            \
      "the request body exceeds the route's limit")                                                \
    X(NOT_FOUND, HC_ERR_NOT_FOUND, 404, 1, 1, "no such object or route")                           \
    X(METHOD_NOT_ALLOWED, HC_ERR_METHOD_NOT_ALLOWED, 405, 1, 1, "the route has no such method")    \
    X(UNAUTHORIZED, HC_ERR_UNAUTHORIZED, 401, 3, 1, "no or an unknown credential")                 \
    X(FORBIDDEN, HC_ERR_FORBIDDEN, 403, 3, 1, "the credential lacks the permission")               \
    X(CONFLICT, HC_ERR_CONFLICT, 409, 5, 5,                                                        \
      "the state does not allow it now (already runs, exists)")                                    \
    X(TOKEN_INVALID, HC_ERR_TOKEN_INVALID, 401, 3, 1,                                              \
      "a join or API token is malformed, expired or used")                                         \
    X(UNREACHABLE, HC_ERR_UNREACHABLE, 502, 3, 1,                                                  \
      "a peer (controller, agent, service) cannot be reached")                                     \
    X(TIMEOUT, HC_ERR_TIMEOUT, 504, 6, 1, "a peer or a wait did not answer in time")               \
    X(TLS, HC_ERR_TLS, 500, 3, 1, "a TLS handshake, certificate or pin failed")                    \
    X(DB, HC_ERR_DB, 500, 1, 1, "the controller's database failed")                                \
    X(SCHEMA_TOO_NEW, HC_ERR_SCHEMA_TOO_NEW, 500, 1, 1,                                            \
      "the database was written by a newer hcctld")                                                \
    X(IO, HC_ERR_IO, 500, 1, 1, "a file, socket or process call failed")                           \
    X(BACKUP_INVALID, "backup_invalid", 422, 1, 1,                                                 \
      "a backup archive is corrupt, truncated or holds an unsafe entry")                           \
    X(RESPONSE_TOO_LARGE, HC_ERR_RESPONSE_TOO_LARGE, 502, 1, 1,                                    \
      "a peer's answer exceeds the client's limit")                                                \
    X(NOT_OK_TO_STOP, HC_ERR_NOT_OK_TO_STOP, 409, 5, 5,                                            \
      "the service refused to let the node stop")                                                  \
    X(BUDGET, HC_ERR_BUDGET, 409, 5, 5,                                                            \
      "taking the node down would exceed the availability budget")                                 \
    X(OTHER_UNREACHABLE, HC_ERR_OTHER_UNREACHABLE, 503, 1, 1,                                      \
      "another node is unreachable; the operation waits")                                          \
    X(HOST_KEY_UNKNOWN, HC_ERR_HOST_KEY_UNKNOWN, 409, 5, 1,                                        \
      "the node's ssh host key is not known yet")                                                  \
    X(HOST_KEY_CHANGED, HC_ERR_HOST_KEY_CHANGED, 409, 5, 1,                                        \
      "the node's ssh host key differs from the known one")                                        \
    X(SSH_AUTH, HC_ERR_SSH_AUTH, 401, 3, 1, "the ssh key cannot be loaded or was refused")         \
    X(SSH, HC_ERR_SSH, 502, 1, 1, "an ssh session or remote command failed")                       \
    X(BUNDLE_SIGNATURE, HC_BUNDLE_ERR_SIGNATURE, 400, 1, 1,                                        \
      "a bundle's signature is bad, malformed or untrusted")                                       \
    X(BUNDLE_CHECKSUM, HC_BUNDLE_ERR_CHECKSUM, 400, 1, 1,                                          \
      "a bundle is not the file that was signed or stored")                                        \
    X(BUNDLE_CORRUPT, HC_BUNDLE_ERR_CORRUPT, 400, 1, 1, "a bundle is not a readable tar.gz")       \
    X(BUNDLE_UNSAFE, HC_BUNDLE_ERR_UNSAFE, 400, 1, 1,                                              \
      "a bundle entry escapes its root or is a special file")                                      \
    X(BUNDLE_MANIFEST, HC_BUNDLE_ERR_MANIFEST, 400, 1, 1, "a bundle's manifest.json is invalid")   \
    X(BUNDLE_TOO_LARGE, HC_BUNDLE_ERR_TOO_LARGE, 400, 1, 1,                                        \
      "a bundle exceeds the size or entry limits")                                                 \
    X(NO_TRUSTED_KEYS, HC_BUNDLE_ERR_NO_KEYS, 400, 1, 1, "no trusted bundle keys to verify with")  \
    X(USAGE, HC_CLI_ERR_USAGE, 400, 2, 1, "hcctl: a bad command line (never sent by a server)")    \
    X(CHECK_FAILED, HC_CLI_ERR_CHECK, 422, 4, 1, "hcctl: a check ran and found problems")          \
    X(NOT_CONFIRMED, "not_confirmed", 400, 1, 1, "hcctl: a disruptive command was not confirmed")  \
    X(NOT_CONFIGURED, "not_configured", 400, 1, 1, "hcctl: no controller is configured")           \
    X(OPERATION_FAILED, "operation_failed", 500, 1, 1,                                             \
      "hcctl: an operation failed without a code")                                                 \
    X(AGENT_ERROR, "agent_error", 502, 1, 1, "an agent answered with an error")                    \
    X(AGENT_START_FAILED, "agent_start_failed", 502, 1, 1, "the agent did not start on the node")  \
    X(NODES_FAILED, "nodes_failed", 502, 1, 1, "several nodes failed, each for its own reason")    \
    X(DOWNLOAD_FAILED, "download_failed", 502, 1, 1, "the agent could not download the bundle")    \
    X(DRAIN_FAILED, "drain_failed", 502, 1, 1, "the service did not drain")                        \
    X(RELOAD_FAILED, "reload_failed", 502, 1, 1, "the service did not reload its settings")        \
    X(CONFIG_ROLLED_BACK, "config_failed_rolled_back", 502, 1, 1,                                  \
      "a configuration change failed on a node, which was put back on the previous revision")      \
    X(HEALTH_TIMEOUT, "health_timeout", 504, 1, 1, "the service did not turn healthy in time")     \
    X(RESYNC_TIMEOUT, "resync_timeout", 504, 1, 1,                                                 \
      "the service did not finish its resync in time")                                             \
    X(RESYNC_UNKNOWN, "resync_unknown", 502, 1, 1, "the service did not say how its resync goes")  \
    X(INTERRUPTED, "interrupted", 409, 5, 1, "the controller stopped while the operation ran")     \
    X(MTU_CHANGE_FAILED, "mtu_change_failed", 422, 1, 1,                                           \
      "an MTU change was not applied or not kept")                                                 \
    X(MTU_CHECK_FAILED, "mtu_check_failed", 422, 1, 1,                                             \
      "the path check after an MTU change failed")                                                 \
    X(NO_ROLLBACK_TARGET, "no_rollback_target", 409, 5, 1, "no earlier version to roll back to")   \
    X(NOT_STAGED, "not_staged", 404, 1, 1, "the version is not staged on the node")                \
    X(NOT_INSTALLED, "not_installed", 409, 5, 1, "no service is installed on the node")            \
    X(SERVICE_NOT_RUNNING, "service_not_running", 409, 5, 1, "the service is not running")         \
    X(PRECONDITION_FAILED, "precondition_failed", 412, 1, 1,                                       \
      "a precondition of the request does not hold")                                               \
    X(PREFLIGHT_FAILED, "preflight_failed", 412, 1, 1, "a preflight check on a node failed")       \
    X(CHECKS_FAILED, "checks_failed", 409, 5, 5,                                                   \
      "the cluster's pre-flight checks found errors (hcctl cluster check)")                        \
    X(ROLLBACK_FAILED, "rollback_failed", 502, 1, 1, "an upgrade failed and so did its rollback")  \
    X(UPGRADE_ROLLED_BACK, "upgrade_failed_rolled_back", 502, 1, 1,                                \
      "an upgrade failed and was rolled back")                                                     \
    X(VERSION_INCOMPATIBLE, "version_incompatible", 409, 5, 5,                                     \
      "the versions cannot run side by side")                                                      \
    X(AGENT_API_UNSUPPORTED, "agent_api_unsupported", 409, 5, 5,                                   \
      "the controller does not speak the agent's API version (docs/agent-upgrade.md)")             \
    X(AGENT_UPGRADE_ROLLED_BACK, "agent_upgrade_failed_rolled_back", 502, 1, 1,                    \
      "an agent upgrade failed on a node, which runs its previous agent again")                    \
    X(BUNDLE_KIND, "bundle_kind_mismatch", 400, 1, 1,                                              \
      "an agent bundle where a service bundle is expected, or the reverse")                        \
    X(SHUTTING_DOWN, "shutting_down", 503, 1, 1, "the program is stopping")                        \
    X(TOO_MANY_WATCHERS, "too_many_watchers", 503, 1, 1, "the controller serves no more watchers") \
    X(UNKNOWN_KIND, "unknown_kind", 500, 1, 1, "an operation of a kind this hcctld does not know") \
    X(UNAVAILABLE, "unavailable", 503, 1, 1, "hcstor: no in-sync replica can take the request")    \
    X(UNHEALTHY, "unhealthy", 503, 1, 1, "hcstor: the service reports itself unhealthy")           \
    X(DRAINING, "draining", 503, 1, 1, "hcstor: the node drains and refuses writes")               \
    X(MEMBERS_BEHIND, "members_behind", 409, 5, 1, "hcstor: this node's members list is older")    \
    X(UNKNOWN_PEER, "unknown_peer", 404, 1, 1,                                                     \
      "hcstor: the caller is not a member of the cluster")                                         \
    X(STALE_TERM, HC_ERR_STALE_TERM, 409, 5, 1,                                                    \
      "an agent refused a controller whose fencing term is older than one it has seen")            \
    X(NOT_LEADER, HC_ERR_NOT_LEADER, 421, 3, 1,                                                    \
      "HA: this controller is a standby; the error names the leader")                              \
    X(NO_LEADER, HC_ERR_NO_LEADER, 503, 3, 1, "HA: no controller leads right now (an election)")   \
    X(ETCD, HC_ERR_ETCD, 503, 1, 1, "HA: etcd cannot be reached or refused the write")

enum hc_code_id {
#define HC_CODE_ENUM(name, wire, status, exit_answer, exit_op, meaning) HC_CODE_##name,
    HC_ERROR_CODES(HC_CODE_ENUM)
#undef HC_CODE_ENUM
        HC_CODE_COUNT
};

/* One row of the table. */
struct hc_code {
    const char *name; /* the C name, without HC_E_ */
    const char *wire; /* the snake_case string of the JSON error shape */
    int status;       /* the HTTP status it goes out with */
    int exit_answer;  /* hcctl's exit code when a request is answered with it */
    int exit_op;      /* hcctl's exit code when an operation ends with it */
    const char *meaning;
};

extern const struct hc_code hc_codes[HC_CODE_COUNT];

/* The code to name at a call site: HC_E(NOT_FOUND) is the row of "not_found". */
#define HC_E(name) (&hc_codes[HC_CODE_##name])

/* The row of a wire string, or NULL for a code this build does not know (a newer peer's). */
const struct hc_code *hc_code_find(const char *wire);

#endif
