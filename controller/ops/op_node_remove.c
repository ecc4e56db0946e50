/*
 * Operation "node.remove": first the gates every planned outage passes
 * (controller/ops/op_maintenance.c: the availability budget, nodes already down counting, and the
 * storage service's ok-to-stop for this node), unless forced with a reason; then the service is
 * drained; the agent is asked to leave (it deletes its credentials and installed software and
 * exits); a node brought in over SSH is then stopped and uninstalled over SSH; then, in one
 * transaction, the node's certificate serial goes into revoked_certs and the node row is deleted
 * (its interfaces cascade) with a node.removed event, and the revocation list (crl.pem) is issued
 * again so that the controller refuses that certificate from now on.
 *
 * The storage service's data stays on the node unless purge: it is moved to DATA/kept/NODE.OP
 * (the agent's data directory, agents/hcagent/agent.h), out of the way of a later join, and the
 * step "service_data" says where. A removal is not a way to lose the last copy of a block by
 * accident.
 *
 * Leaving the cluster never depends on reaching the node: an uninstall that fails does not stop
 * the revocation. But the operation is truthful: it then ends failed, saying what was not done
 * and how to finish it by hand.
 *
 * Idempotent at every point: a restarted controller skips recorded steps (the gates are asked
 * again until the agent has been asked to leave), and a node that is already gone with its
 * certificate revoked means an earlier run finished the work.
 */
#include "controller/ops/op_node_remove.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/ops/op_bootstrap.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/remote/ssh.h"
#include "controller/remote/storage_peers.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define SERVICE_DATA HC_REMOTE_AGENT_DATA "/service-data"
#define KEPT_IN "the service's data kept in "
#define PURGED "the service's data deleted (--purge)"

struct node_remove {
    char name[256];
    char agent_url[1024];
    char cert_serial[128];
    char ssh_endpoint[400]; /* "" when the agent was joined by hand */
    char install_mode[16];  /* "systemd", "daemon", or "" when unknown */
    int force;              /* the gates were skipped: reason says why */
    const char *reason;     /* NULL unless force */
    int purge;              /* the service's data is deleted too */
    char keep_as[160];      /* the kept copy's name under DATA/kept: NODE.OP */
};

json_t *hc_node_remove_params(const char *name, const json_t *body, struct hc_error *err)
{
    const json_t *force = json_object_get(body, "force"), *purge = json_object_get(body, "purge");
    const json_t *reason = json_object_get(body, "reason"),
                 *max = json_object_get(body, "max_unavailable");
    if (!json_is_object(body)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "the body must be a JSON object");
        return NULL;
    }
    if ((force && !json_is_boolean(force)) || (purge && !json_is_boolean(purge))) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "'force' and 'purge' must be booleans");
        return NULL;
    }
    if (max &&
        (!json_is_integer(max) || json_integer_value(max) < 1 || json_integer_value(max) > 1000)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "'max_unavailable' must be an integer from 1 to 1000");
        return NULL;
    }
    const char *why = json_is_string(reason) ? json_string_value(reason) : NULL;
    size_t len = why ? strlen(why) : 0;
    if (reason && (!why || len == 0 || len > HC_NODE_REMOVE_REASON_MAX)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "'reason' must be a text of 1 to %d "
                     "bytes",
                     HC_NODE_REMOVE_REASON_MAX);
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)why[i] < 0x20 || why[i] == 0x7f) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "'reason' must not hold control "
                         "characters (byte %zu)",
                         i);
            return NULL;
        }
    }
    if (json_is_true(force) && !why) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "force skips the availability budget "
                     "and the storage service's ok-to-stop for '%s': a reason is required",
                     name);
        hc_error_hint(err, "add --reason TEXT: it is recorded with the operation and the "
                           "node.removed event");
        return NULL;
    }
    if (why && !json_is_true(force)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "'reason' is the reason for 'force', "
                     "which is not set");
        hc_error_hint(err, "without --force the removal passes the gates and needs no reason");
        return NULL;
    }
    json_t *p = json_pack("{s:s, s:b, s:b, s:I}", "node", name, "force", json_is_true(force),
                          "purge", json_is_true(purge), "max_unavailable",
                          (json_int_t)(max ? json_integer_value(max) : 1));
    if (p && why)
        json_object_set_new(p, "reason", json_string(why));
    if (!p)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    return p;
}

/* Loads the node. Returns 1 when found, 0 when absent, -1 with err. */
static int node_remove_load(struct hc_db *db, const char *name, struct node_remove *nr,
                            struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(db, name, &row, err);
    if (found < 0)
        return -1;
    snprintf(nr->name, sizeof(nr->name), "%s", name);
    snprintf(nr->agent_url, sizeof(nr->agent_url), "%s", found ? row.agent_url : "");
    snprintf(nr->cert_serial, sizeof(nr->cert_serial), "%s", found ? row.cert_serial : "");
    snprintf(nr->ssh_endpoint, sizeof(nr->ssh_endpoint), "%s",
             row.ssh_endpoint ? row.ssh_endpoint : "");
    snprintf(nr->install_mode, sizeof(nr->install_mode), "%s",
             row.install_mode ? row.install_mode : "");
    hc_node_row_clear(&row);
    return found;
}

/* What the uninstall step would have done, as one command line for the admin (the hint of the
 * failed operation): stop the agent the way it was started, delete what bootstrap installed,
 * and the rotated log too; of the data directory only the private key unless purge (the
 * service's data stays, and a later join over SSH sets it aside). endpoint is the SSH endpoint,
 * or NULL when unknown; mode "" when unknown: both ways then. The host alone keeps the hint
 * within its 255 characters. */
static void cleanup_hint(struct hc_error *err, const char *endpoint, const char *mode, int purge)
{
    static const char installed[] =
        HC_REMOTE_AGENT_ROOT " " HC_REMOTE_AGENT_ETC " " HC_REMOTE_AGENT_DATA ".log*";
    static const char pidfile[] = HC_REMOTE_AGENT_RUN "/hcagent.pid";
    static const char unit[] = "/etc/systemd/system/hcagent.service";
    static const char stop_unit[] = "systemctl disable --now hcagent.service";
    const char *data = purge ? HC_REMOTE_AGENT_DATA : HC_REMOTE_AGENT_DATA "/agent.key";
    struct hc_ssh_target t;
    struct hc_error ignored;
    const char *on = "the node's host";
    if (endpoint && hc_ssh_target_parse(endpoint, &t, &ignored) == 0)
        on = t.host;
    if (strcmp(mode, "systemd") == 0)
        hc_error_hint(err, "on %s, as root: %s; rm -rf %s %s %s; systemctl daemon-reload", on,
                      stop_unit, unit, installed, data);
    else if (strcmp(mode, "daemon") == 0)
        hc_error_hint(err, "on %s, as root: pkill -x hcagent; rm -rf %s %s %s", on, installed, data,
                      pidfile);
    else
        hc_error_hint(err, "on %s, as root: %s; pkill -x hcagent; rm -rf %s %s %s %s", on,
                      stop_unit, unit, installed, data, pidfile);
}

/* The operation's outcome when the node left the cluster but its host kept the agent. where is
 * the SSH endpoint, or NULL when unknown. */
static void cleanup_failed(struct hc_error *err, const char *name, const char *where,
                           const char *mode, int purge, const struct hc_error *why)
{
    char reason[sizeof(why->message)];
    snprintf(reason, sizeof(reason), "%s", why->message);
    hc_error_set_wire(err, HC_E(SSH)->status, why->code[0] ? why->code : HC_ERR_SSH,
                      "node '%s' left the cluster (certificate revoked) but its host%s%s was not "
                      "cleaned up, the agent may still run there and its files remain%s: %s",
                      name, where ? " " : "", where ? where : "",
                      purge ? "" : " (the service's data in " SERVICE_DATA ")", reason);
    cleanup_hint(err, where, mode, purge);
}

/* The uninstall step of this operation failed: a run resumed after the revocation must end as
 * the first one would have. Returns 1 (err set), 0, or -1 with err. */
static int uninstall_failed_before(struct hc_op_ctx *ctx, const char *name, int purge,
                                   struct hc_error *err)
{
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT detail FROM operation_steps WHERE op_id = ? AND "
                                    "node = ? AND step = 'uninstall' AND state = 'failed'",
                                    "ss", hc_op_id(ctx), name);
    if (!rows)
        return -1;
    json_t *row = json_array_get(rows, 0);
    if (row) {
        struct hc_error why = {0};
        snprintf(why.message, sizeof(why.message), "%s", hc_json_str(row, "detail", "?"));
        cleanup_failed(err, name, NULL, "", purge, &why);
    }
    json_decref(rows);
    return row ? 1 : 0;
}

/* A node that no longer exists: done if its certificate was revoked, else it never was. The
 * revocation list is issued again, in case an earlier run could not write it. */
static int node_remove_service_data(struct hc_op_ctx *ctx, void *arg, char *detail,
                                    size_t detail_len, struct hc_error *err);

static enum hc_op_result node_remove_absent(struct hc_op_ctx *ctx, struct node_remove *nr,
                                            struct hc_error *err)
{
    const char *name = nr->name;
    int purge = nr->purge;
    struct hc_db *db = hc_op_db(ctx);
    json_t *rows = hc_db_query_json(db, err, "SELECT serial FROM revoked_certs WHERE node_name = ?",
                                    "s", name);
    if (!rows)
        return HC_OP_FAILED;
    size_t n = json_array_size(rows);
    json_decref(rows);
    if (n == 0) {
        hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
        hc_error_hint(err, "see 'hcctl node list'");
        return HC_OP_FAILED;
    }
    if (hc_crl_write(hc_op_controller(ctx), db, err) < 0)
        return HC_OP_FAILED;
    /* a run that stopped right after the revocation has not said what became of the data */
    if (hc_op_step(ctx, name, "service_data", node_remove_service_data, nr, err) != 0 ||
        uninstall_failed_before(ctx, name, purge, err) != 0)
        return HC_OP_FAILED;
    HC_INFO("node %s is already removed: nothing to do", name);
    return HC_OP_SUCCEEDED;
}

/* The detail recorded for (node, step) in this operation when it succeeded, "" otherwise. */
static void recorded_detail(struct hc_op_ctx *ctx, const char *node, const char *step, char *out,
                            size_t len)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(hc_op_db(ctx), &err,
                                    "SELECT detail FROM operation_steps WHERE op_id = ? AND "
                                    "node = ? AND step = ? AND state = 'succeeded'",
                                    "sss", hc_op_id(ctx), node, step);
    snprintf(out, len, "%s", hc_json_str(json_array_get(rows, 0), "detail", ""));
    json_decref(rows);
}

/* Forced: the gates are recorded as skipped, with the reason. */
static int node_remove_skipped(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                               struct hc_error *err)
{
    const struct node_remove *nr = arg;
    snprintf(detail, detail_len, "skipped (--force): %s", nr->reason);
    return 0;
}

/* The gates of maintenance enter (one place: controller/ops/op_maintenance.c), refused at once: a
 * removal does not wait for a slot. The node goes down for good, so the hint is --force. */
static int node_remove_gates(struct hc_op_ctx *ctx, struct hc_http_client *client,
                             struct node_remove *nr, struct hc_error *err)
{
    char hint[200];
    if (nr->force) {
        HC_WARN("node %s: removal forced, the gates are skipped: %s", nr->name, nr->reason);
        if (hc_op_step(ctx, nr->name, "budget", node_remove_skipped, nr, err) < 0 ||
            hc_op_step(ctx, nr->name, "ok_to_stop", node_remove_skipped, nr, err) < 0)
            return -1;
        return 0;
    }
    snprintf(hint, sizeof(hint),
             "'hcctl node remove %s --force --reason TEXT' removes it "
             "regardless (its service's data stays on the node)",
             nr->name);
    struct hc_maint_params mp = {
        .mode = "ensure-accessibility",
        .max_unavailable = (int)hc_json_int(hc_op_params(ctx), "max_unavailable", 1),
        .timeout_ms = HC_MAINT_DEFAULT_TIMEOUT_MS,
        .force_hint = hint,
        .unreachable_ok = 1,
    };
    return hc_maint_gate_steps(ctx, client, nr->name, &mp, err);
}

/* Clients of the service stop being served here before it stops (they go to the other
 * replicas), as in maintenance. A node that cannot drain does not stay in the cluster for it:
 * the gates said its data is served elsewhere. */
static int node_remove_drain(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                             struct hc_error *err)
{
    struct node_remove *nr = arg;
    struct hc_controller *ctl = hc_op_controller(ctx);
    struct hc_error call_err = {0};
    char asked[600];
    /* an agent that did not answer ok-to-stop a moment ago costs no second timeout here */
    recorded_detail(ctx, nr->name, "ok_to_stop", asked, sizeof(asked));
    if (!strncmp(asked, HC_MAINT_NOT_ASKED, strlen(HC_MAINT_NOT_ASKED))) {
        snprintf(detail, detail_len, "not drained: the agent does not answer");
        return 0;
    }
    struct hc_http_client *client = hc_agent_client_new(ctl, hc_op_db(ctx), err);
    if (!client)
        return -1;
    struct hc_svc_node n = {client, nr->name, nr->agent_url, hc_agent_timeout_ms(ctl)};
    hc_op_waiting(ctx, "%s to drain its storage service", nr->name);
    if (hc_svc_drain(&n, &call_err) == 0)
        snprintf(detail, detail_len, "drained");
    else if (hc_agent_err_is_transport(&call_err))
        snprintf(detail, detail_len, "not drained: the agent does not answer");
    else
        snprintf(detail, detail_len, "not drained: %s", call_err.message);
    hc_op_waiting(ctx, NULL);
    hc_http_client_free(client);
    return 0;
}

static int node_remove_leave(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                             struct hc_error *err)
{
    const struct node_remove *nr = arg;
    struct hc_controller *ctl = hc_op_controller(ctx);
    struct hc_http_response resp = {0};
    struct hc_error call_err = {0};
    struct hc_http_client *client = hc_agent_client_new(ctl, hc_op_db(ctx), err);
    if (!client)
        return -1;
    json_t *body = json_pack("{s:b, s:s}", "purge", nr->purge, "keep_as", nr->keep_as);
    hc_op_waiting(ctx, "agent %s to answer POST /v1/leave", nr->name);
    int rc = hc_agent_call(client, nr->agent_url, "POST", "/v1/leave", body,
                           hc_agent_timeout_ms(ctl), &resp, &call_err);
    hc_op_waiting(ctx, NULL);
    json_decref(body);
    if (rc == 0) {
        const char *kept = hc_json_str(resp.body, "service_data", NULL);
        if (nr->purge)
            snprintf(detail, detail_len, "agent left; " PURGED);
        else if (kept)
            snprintf(detail, detail_len, "agent left; " KEPT_IN "%s", kept);
        else
            snprintf(detail, detail_len, "agent left");
    } else {
        /* The node may be dead for good, which is often why it is removed: revoking its
         * certificate is what matters; the uninstall step tries SSH next. */
        HC_WARN("node %s did not leave: %s", nr->name, call_err.message);
        if (hc_agent_err_is_transport(&call_err))
            snprintf(detail, detail_len, "agent unreachable, credentials revoked only");
        else
            snprintf(detail, detail_len, "agent refused to leave (%s), credentials revoked only",
                     call_err.message);
    }
    hc_http_response_clear(&resp);
    hc_http_client_free(client);
    return 0;
}

/* Stops the agent however it was started and deletes what bootstrap installed. $1 is the name
 * of the kept copy of the service's data, "" to delete it (purge): unless the agent has moved it
 * already (it leaves first when it answers), DATA/service-data goes to DATA/kept/$1, and the
 * rest of DATA goes; a later join over SSH starts without it (op_bootstrap.c keeps DATA/kept).
 * Prints kept=PATH when the copy is there. */
static const char uninstall_script[] =
    "keep=$1; d=" HC_REMOTE_AGENT_DATA "\n"
    "if [ -f /etc/systemd/system/hcagent.service ]; then\n"
    "  systemctl disable --now hcagent.service >/dev/null 2>&1\n"
    "  rm -f /etc/systemd/system/hcagent.service; systemctl daemon-reload >/dev/null 2>&1; fi\n"
    /* the supervisor and its agent share a process group: stop both, even a hung agent */
    "pid=$(cat " HC_REMOTE_AGENT_RUN "/hcagent.pid 2>/dev/null)\n"
    "if [ -n \"$pid\" ] && [ -r \"/proc/$pid/stat\" ]; then\n"
    "  pg=$(cut -d' ' -f5 \"/proc/$pid/stat\")\n"
    "  kill -TERM \"-$pg\" 2>/dev/null; kill -CONT \"-$pg\" 2>/dev/null\n"
    "  i=0; while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n"
    "  kill -KILL \"-$pg\" 2>/dev/null; fi\n"
    "rm -rf " HC_REMOTE_AGENT_ROOT " " HC_REMOTE_AGENT_ETC " " HC_REMOTE_AGENT_DATA
    ".log " HC_REMOTE_AGENT_DATA ".log.1 " HC_REMOTE_AGENT_RUN "/hcagent.pid || exit 1\n"
    "if [ -z \"$keep\" ]; then rm -rf \"$d\" || exit 1; exit 0; fi\n"
    "if [ -d \"$d/service-data\" ]; then\n"
    "  mkdir -p \"$d/kept\" && mv \"$d/service-data\" \"$d/kept/$keep\" || exit 1; fi\n"
    "for f in \"$d\"/* \"$d\"/.[!.]* \"$d\"/..?*; do\n"
    "  [ -e \"$f\" ] || [ -L \"$f\" ] || continue\n"
    "  [ \"$f\" = \"$d/kept\" ] || rm -rf \"$f\" || exit 1; done\n"
    "if [ -d \"$d/kept/$keep\" ]; then echo \"kept=$d/kept/$keep\"; fi\n";

/* Over SSH to the endpoint pinned at bootstrap: the uninstall script. kept receives the path of
 * the kept copy ("" when none). 0 or -1 with err. */
static int uninstall_over_ssh(const struct hc_controller *ctl, const struct node_remove *nr,
                              char *kept, size_t kept_len, struct hc_error *err)
{
    struct hc_ssh_target t;
    char key[1100], known[1100];
    hc_bootstrap_ssh_paths(ctl->data_dir, key, sizeof(key), known, sizeof(known));
    struct hc_ssh_opts o = {.key_file = key, .known_hosts = known, .timeout_ms = 10000};
    kept[0] = '\0';
    if (hc_ssh_target_parse(nr->ssh_endpoint, &t, err) < 0)
        return -1;
    struct hc_ssh *s = hc_ssh_connect(&t, &o, NULL, 0, err);
    if (!s)
        return -1;
    const char *argv[] = {"sh", "-c", uninstall_script, "uninstall", nr->purge ? "" : nr->keep_as,
                          NULL};
    struct hc_ssh_result r;
    int rc = hc_ssh_run(s, argv, 30000, &r, err);
    if (rc == 0 && r.exit_status != 0) {
        r.err[strcspn(r.err, "\n")] = '\0';
        rc = hc_error_set(err, HC_E(SSH), "uninstall on %s failed (exit %d): %s", nr->ssh_endpoint,
                          r.exit_status, r.err);
    } else if (rc == 0) {
        const char *k = strstr(r.out, "kept=");
        if (k) {
            k += strlen("kept=");
            snprintf(kept, kept_len, "%.*s", (int)strcspn(k, "\n"), k);
        }
    }
    hc_ssh_result_clear(&r); /* safe after a failed run too: it left r empty */
    hc_ssh_close(s);
    return rc;
}

/* Nodes brought in over SSH are also cleaned up over SSH: that stops an agent that could not
 * be asked to leave, and removes the installed files. A host that cannot be reached fails this
 * step but not the removal (revocation is what protects the cluster): the run goes on and ends
 * failed with what is left to do by hand. */
static int node_remove_uninstall(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                                 struct hc_error *err)
{
    const struct node_remove *nr = arg;
    char kept[600];
    int rc = 0;
    if (!nr->ssh_endpoint[0]) {
        snprintf(detail, detail_len, "joined by hand: nothing was installed over ssh");
        return 0;
    }
    hc_op_waiting(ctx, "ssh to %s to stop and remove the agent", nr->ssh_endpoint);
    if (uninstall_over_ssh(hc_op_controller(ctx), nr, kept, sizeof(kept), err) == 0) {
        snprintf(detail, detail_len, "agent stopped and removed over ssh (%s)%s%s%s",
                 nr->ssh_endpoint, nr->purge || kept[0] ? "; " : "",
                 nr->purge ? PURGED
                 : kept[0] ? KEPT_IN
                           : "",
                 nr->purge ? "" : kept);
    } else {
        HC_WARN("node %s: %s", nr->name, err->message);
        snprintf(detail, detail_len, "could not stop and remove the agent over ssh (%s): %s",
                 nr->ssh_endpoint, err->message);
        rc = -1;
    }
    hc_op_waiting(ctx, NULL);
    return rc;
}

/* What became of the service's data, from what the leave and uninstall steps recorded (so that
 * a resumed run says the same): the uninstall over SSH has the last word. */
static void service_data_outcome(struct hc_op_ctx *ctx, const struct node_remove *nr, char *out,
                                 size_t len)
{
    char leave[600], uninstall[600];
    const char *k;
    recorded_detail(ctx, nr->name, "leave", leave, sizeof(leave));
    recorded_detail(ctx, nr->name, "uninstall", uninstall, sizeof(uninstall));
    if (strstr(uninstall, PURGED) || strstr(leave, PURGED))
        snprintf(out, len, "deleted (--purge)");
    else if ((k = strstr(uninstall, KEPT_IN)) || (k = strstr(leave, KEPT_IN)))
        snprintf(out, len, "kept on the node in %s", k + strlen(KEPT_IN));
    else if (!strncmp(uninstall, "agent stopped and removed", 25) || !strcmp(leave, "agent left"))
        snprintf(out, len, "none on the node");
    else
        snprintf(out, len, "left untouched on the node: it could not be reached");
}

static int node_remove_service_data(struct hc_op_ctx *ctx, void *arg, char *detail,
                                    size_t detail_len, struct hc_error *err)
{
    service_data_outcome(ctx, arg, detail, detail_len);
    return 0;
}

/* The node.removed event's details: the reason only when forced. */
static json_t *removed_details(const struct node_remove *nr, const char *outcome)
{
    json_t *d = json_pack("{s:s, s:b, s:b, s:s}", "cert_serial", nr->cert_serial, "force",
                          nr->force, "purge", nr->purge, "service_data", outcome);
    if (d && nr->force)
        json_object_set_new(d, "reason", json_string(nr->reason));
    return d;
}

static int node_remove_revoke(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                              struct hc_error *err)
{
    const struct node_remove *nr = arg;
    struct hc_db *db = hc_op_db(ctx);
    char outcome[700];
    int rc = -1;
    service_data_outcome(ctx, nr, outcome, sizeof(outcome));
    if (hc_db_begin(db, err) != 0)
        return -1;
    if (hc_db_run(db, err,
                  "INSERT OR IGNORE INTO revoked_certs (serial, node_name, revoked_at) "
                  "VALUES (?, ?, ?)",
                  "ssi", nr->cert_serial, nr->name, hc_now_ms()) < 0 ||
        hc_node_delete(db, nr->name, err) < 0 ||
        hc_event_add(db, "node.removed", nr->name, hc_op_id(ctx), "controller",
                     removed_details(nr, outcome), err,
                     "node %s removed, certificate %s revoked; service data %s%s%s", nr->name,
                     nr->cert_serial, outcome, nr->force ? "; forced: " : "",
                     nr->force ? nr->reason : "") != 0)
        goto cleanup;
    if ((rc = hc_db_commit(db, err)) != 0)
        goto cleanup;
    /* The database says revoked; the list makes it so for every later TLS connection. A failed
     * write fails the step (and the operation): hcctld writes the list again at its next start,
     * and so does a new 'hcctl node remove' of the same node. */
    if ((rc = hc_crl_write(hc_op_controller(ctx), db, err)) != 0) {
        hc_error_hint(err,
                      "the node is removed but the controller still accepts its "
                      "certificate: fix the cause, then run 'hcctl node remove %s' again",
                      nr->name);
        return rc;
    }
    snprintf(detail, detail_len, "certificate %s revoked", nr->cert_serial);
cleanup:
    if (rc != 0)
        hc_db_rollback(db);
    return rc;
}

/* The remaining members place blocks without the removed node from now on. The node is gone
 * whatever they answer: a member that missed the list gets it with the next change or upgrade
 * (the step records which). */
static void tell_storage_peers(struct hc_op_ctx *ctx)
{
    struct hc_error err = {0};
    struct hc_http_client *client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), &err);
    if (!client || hc_storage_peers_step(ctx, client, &err) < 0)
        hc_log(HC_LOG_WARN, "storage peers not updated after the removal: %s", err.message);
    hc_http_client_free(client);
}

static enum hc_op_result node_remove_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    const json_t *p = hc_op_params(ctx);
    const char *name = hc_json_req_str(p, "node", err);
    struct node_remove nr;
    enum hc_op_result r;
    char left[600];
    if (!name)
        return HC_OP_FAILED;
    int found = node_remove_load(db, name, &nr, err);
    if (found < 0)
        return HC_OP_FAILED;
    nr.force = hc_json_bool(p, "force", 0);
    nr.reason = hc_json_str(p, "reason", NULL);
    nr.purge = hc_json_bool(p, "purge", 0);
    snprintf(nr.keep_as, sizeof(nr.keep_as), "%s.%s", name, hc_op_id(ctx));
    if (nr.force && !nr.reason) { /* the API refuses it: an operation from elsewhere */
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "a forced removal needs a reason");
        return HC_OP_FAILED;
    }
    if (!found)
        return node_remove_absent(ctx, &nr, err);
    /* The gates hold until the agent has been asked to leave: after that the node is on its
     * way out, and a resumed run goes on. A refusal leaves the node as it was. */
    recorded_detail(ctx, name, "leave", left, sizeof(left));
    if (!left[0]) {
        struct hc_http_client *client =
            hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err);
        int rc = client ? node_remove_gates(ctx, client, &nr, err) : -1;
        hc_http_client_free(client);
        if (rc < 0)
            return HC_OP_FAILED;
    }
    if (hc_node_set_removing(db, name, err) < 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    if (hc_op_step(ctx, name, "drain", node_remove_drain, &nr, err) != 0 ||
        hc_op_step(ctx, name, "leave", node_remove_leave, &nr, err) != 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    struct hc_error unclean = {0}; /* why the host was not cleaned up */
    int cleaned = hc_op_step(ctx, name, "uninstall", node_remove_uninstall, &nr, &unclean) == 0;
    if (hc_op_step(ctx, name, "revoke", node_remove_revoke, &nr, err) != 0 ||
        hc_op_step(ctx, name, "service_data", node_remove_service_data, &nr, err) != 0)
        return HC_OP_FAILED;
    tell_storage_peers(ctx);
    if (!cleaned) {
        cleanup_failed(err, name, nr.ssh_endpoint, nr.install_mode, nr.purge, &unclean);
        return HC_OP_FAILED;
    }
    return HC_OP_SUCCEEDED;
}

const struct hc_op_kind hc_op_kind_node_remove = {
    .name = HC_OP_NODE_REMOVE,
    .disruptive = 1, /* a storage member leaves: not while an upgrade or maintenance runs */
    .run = node_remove_run,
};
