/*
 * Operation "node.remove": the agent is asked to leave (it deletes its credentials and exits);
 * a node brought in over SSH is then stopped and uninstalled over SSH; then, in one
 * transaction, the node's certificate serial goes into revoked_certs and the node row is deleted
 * (its interfaces cascade) with a node.removed event, and the revocation list (crl.pem) is
 * issued again so that the controller refuses that certificate from now on.
 *
 * Leaving the cluster never depends on reaching the node: an uninstall that fails does not stop
 * the revocation. But the operation is truthful: it then ends failed, saying what was not done
 * and how to finish it by hand.
 *
 * Idempotent at every point: a restarted controller skips recorded steps, and a node that is
 * already gone with its certificate revoked means an earlier run finished the work.
 */
#include "controller/op_node_remove.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/agent_client.h"
#include "controller/crl.h"
#include "controller/events.h"
#include "controller/op_bootstrap.h"
#include "controller/ops.h"
#include "controller/ssh.h"
#include "controller/storage_peers.h"

struct node_remove {
    char name[256];
    char agent_url[1024];
    char cert_serial[128];
    char ssh_endpoint[400]; /* "" when the agent was joined by hand */
    char install_mode[16];  /* "systemd", "daemon", or "" when unknown */
};

/* Loads the node. Returns 1 when found, 0 when absent, -1 with err. */
static int node_remove_load(struct hc_db *db, const char *name, struct node_remove *nr,
                            struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err,
        "SELECT agent_url, cert_serial, ssh_endpoint, install_mode FROM nodes WHERE name = ?", "s",
        name);
    if (!rows)
        return -1;
    json_t *row = json_array_get(rows, 0);
    snprintf(nr->name, sizeof(nr->name), "%s", name);
    snprintf(nr->agent_url, sizeof(nr->agent_url), "%s", hc_json_str(row, "agent_url", ""));
    snprintf(nr->cert_serial, sizeof(nr->cert_serial), "%s", hc_json_str(row, "cert_serial", ""));
    snprintf(nr->ssh_endpoint, sizeof(nr->ssh_endpoint), "%s",
             hc_json_str(row, "ssh_endpoint", ""));
    snprintf(nr->install_mode, sizeof(nr->install_mode), "%s",
             hc_json_str(row, "install_mode", ""));
    json_decref(rows);
    return row ? 1 : 0;
}

/* What the uninstall step would have done, as one command line for the admin (the hint of the
 * failed operation): stop the agent the way it was started, delete what bootstrap installed,
 * and the rotated log too. endpoint is the SSH endpoint, or NULL when unknown; mode "" when
 * unknown: both ways then. The host alone keeps the hint within its 255 characters. */
static void cleanup_hint(struct hc_error *err, const char *endpoint, const char *mode)
{
    static const char installed[] = HC_REMOTE_AGENT_ROOT
        " " HC_REMOTE_AGENT_ETC " " HC_REMOTE_AGENT_DATA " " HC_REMOTE_AGENT_DATA ".log*";
    static const char pidfile[] = HC_REMOTE_AGENT_RUN "/hcagent.pid";
    static const char unit[] = "/etc/systemd/system/hcagent.service";
    static const char stop_unit[] = "systemctl disable --now hcagent.service";
    struct hc_ssh_target t;
    struct hc_error ignored;
    const char *on = "the node's host";
    if (endpoint && hc_ssh_target_parse(endpoint, &t, &ignored) == 0)
        on = t.host;
    if (strcmp(mode, "systemd") == 0)
        hc_error_hint(err, "on %s, as root: %s; rm -rf %s %s; systemctl daemon-reload", on,
                      stop_unit, unit, installed);
    else if (strcmp(mode, "daemon") == 0)
        hc_error_hint(err, "on %s, as root: pkill -x hcagent; rm -rf %s %s", on, installed,
                      pidfile);
    else
        hc_error_hint(err, "on %s, as root: %s; pkill -x hcagent; rm -rf %s %s %s", on, stop_unit,
                      unit, installed, pidfile);
}

/* The operation's outcome when the node left the cluster but its host kept the agent. where is
 * the SSH endpoint, or NULL when unknown. */
static void cleanup_failed(struct hc_error *err, const char *name, const char *where,
                           const char *mode, const struct hc_error *why)
{
    char reason[sizeof(why->message)];
    snprintf(reason, sizeof(reason), "%s", why->message);
    hc_error_set(err, 502, why->code[0] ? why->code : HC_ERR_SSH,
                 "node '%s' left the cluster (certificate revoked) but its host%s%s was not "
                 "cleaned up, the agent may still run there and its files remain: %s",
                 name, where ? " " : "", where ? where : "", reason);
    cleanup_hint(err, where, mode);
}

/* The uninstall step of this operation failed: a run resumed after the revocation must end as
 * the first one would have. Returns 1 (err set), 0, or -1 with err. */
static int uninstall_failed_before(struct hc_op_ctx *ctx, const char *name, struct hc_error *err)
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
        cleanup_failed(err, name, NULL, "", &why);
    }
    json_decref(rows);
    return row ? 1 : 0;
}

/* A node that no longer exists: done if its certificate was revoked, else it never was. The
 * revocation list is issued again, in case an earlier run could not write it. */
static enum hc_op_result node_remove_absent(struct hc_op_ctx *ctx, const char *name,
                                            struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    json_t *rows = hc_db_query_json(db, err, "SELECT serial FROM revoked_certs WHERE node_name = ?",
                                    "s", name);
    if (!rows)
        return HC_OP_FAILED;
    size_t n = json_array_size(rows);
    json_decref(rows);
    if (n == 0) {
        hc_error_set(err, 404, HC_ERR_NOT_FOUND, "node '%s' not found", name);
        hc_error_hint(err, "see 'hcctl node list'");
        return HC_OP_FAILED;
    }
    if (hc_crl_write(hc_op_controller(ctx), db, err) < 0)
        return HC_OP_FAILED;
    if (uninstall_failed_before(ctx, name, err) != 0)
        return HC_OP_FAILED;
    HC_INFO("node %s is already removed: nothing to do", name);
    return HC_OP_SUCCEEDED;
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
    hc_op_waiting(ctx, "agent %s to answer POST /v1/leave", nr->name);
    int rc = hc_agent_call(client, nr->agent_url, "POST", "/v1/leave", NULL,
                           hc_agent_timeout_ms(ctl), &resp, &call_err);
    hc_op_waiting(ctx, NULL);
    if (rc == 0) {
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

/* Nodes brought in over SSH are also cleaned up over SSH: that stops an agent that could not
 * be asked to leave, and removes the installed files. A host that cannot be reached fails this
 * step but not the removal (revocation is what protects the cluster): the run goes on and ends
 * failed with what is left to do by hand. */
static int node_remove_uninstall(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                                 struct hc_error *err)
{
    const struct node_remove *nr = arg;
    int rc = 0;
    if (!nr->ssh_endpoint[0]) {
        snprintf(detail, detail_len, "joined by hand: nothing was installed over ssh");
        return 0;
    }
    hc_op_waiting(ctx, "ssh to %s to stop and remove the agent", nr->ssh_endpoint);
    if (hc_bootstrap_uninstall(hc_op_controller(ctx), nr->ssh_endpoint, err) == 0) {
        snprintf(detail, detail_len, "agent stopped and removed over ssh (%s)", nr->ssh_endpoint);
    } else {
        HC_WARN("node %s: %s", nr->name, err->message);
        snprintf(detail, detail_len, "could not stop and remove the agent over ssh (%s): %s",
                 nr->ssh_endpoint, err->message);
        rc = -1;
    }
    hc_op_waiting(ctx, NULL);
    return rc;
}

static int node_remove_revoke(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                              struct hc_error *err)
{
    const struct node_remove *nr = arg;
    struct hc_db *db = hc_op_db(ctx);
    int rc = -1;
    if (hc_db_begin(db, err) != 0)
        return -1;
    if (hc_db_run(db, err,
                  "INSERT OR IGNORE INTO revoked_certs (serial, node_name, revoked_at) "
                  "VALUES (?, ?, ?)",
                  "ssi", nr->cert_serial, nr->name, hc_now_ms()) < 0 ||
        hc_db_run(db, err, "DELETE FROM nodes WHERE name = ?", "s", nr->name) < 0 ||
        hc_event_add(db, "node.removed", nr->name, hc_op_id(ctx), "controller",
                     json_pack("{s:s}", "cert_serial", nr->cert_serial), err,
                     "node %s removed, certificate %s revoked", nr->name, nr->cert_serial) != 0)
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
    const char *name = hc_json_req_str(hc_op_params(ctx), "node", err);
    struct node_remove nr;
    enum hc_op_result r;
    if (!name)
        return HC_OP_FAILED;
    int found = node_remove_load(db, name, &nr, err);
    if (found < 0)
        return HC_OP_FAILED;
    if (!found)
        return node_remove_absent(ctx, name, err);
    if (hc_db_run(db, err,
                  "UPDATE nodes SET desired_state = 'removed', state = 'removing' WHERE name = ?",
                  "s", name) < 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    if (hc_op_step(ctx, name, "leave", node_remove_leave, &nr, err) != 0)
        return HC_OP_FAILED;
    if ((r = hc_op_checkpoint(ctx)) != HC_OP_SUCCEEDED)
        return r;
    struct hc_error left = {0}; /* why the host was not cleaned up */
    int cleaned = hc_op_step(ctx, name, "uninstall", node_remove_uninstall, &nr, &left) == 0;
    if (hc_op_step(ctx, name, "revoke", node_remove_revoke, &nr, err) != 0)
        return HC_OP_FAILED;
    tell_storage_peers(ctx);
    if (!cleaned) {
        cleanup_failed(err, name, nr.ssh_endpoint, nr.install_mode, &left);
        return HC_OP_FAILED;
    }
    return HC_OP_SUCCEEDED;
}

static const struct hc_op_kind node_remove_kind = {
    .name = HC_OP_NODE_REMOVE,
    .disruptive = 1, /* a storage member leaves: not while an upgrade or maintenance runs */
    .run = node_remove_run,
};

void hc_op_node_remove_register(void)
{
    hc_ops_register(&node_remove_kind);
}
