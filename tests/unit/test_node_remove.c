/*
 * Unit tests of the node.remove operation (controller/ops/op_node_remove.c).
 *
 * Where the node cannot be reached at all (its agent's port and its SSH port closed on
 * 127.0.0.1):
 * - the node leaves the cluster all the same: row deleted, certificate serial in revoked_certs,
 *   and crl.pem (controller/api/crl.c) lists the certificate, so that it no longer verifies;
 * - a node brought in over SSH that could not be cleaned up ends the operation failed, with
 *   what was not done and the exact cleanup left to do (per install mode, keeping the service's
 *   data unless purge) as the hint, also when the run resumes after the revocation;
 * - a node joined by hand (nothing installed over SSH) is removed with success.
 *
 * With an agent stand-in (mutual TLS on 127.0.0.1, answering ok-to-stop as told, drain, leave
 * and the storage peers), the gates of maintenance enter:
 * - over the availability budget (another node down): refused, unavailable_budget naming it,
 *   the node untouched and never asked to leave;
 * - ok-to-stop false: refused, not_ok_to_stop with the service's reason;
 * - --force with a reason passes both, and the reason is in the steps and the node.removed
 *   event; force without a reason is refused by hc_node_remove_params (400);
 * - the service's data is kept (leave asks keep_as NODE.OP; step service_data names the path),
 *   or deleted with purge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/https_server.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/init.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/op_node_remove.h"
#include "controller/ops/ops.h"
#include "db/db.h"
#include "tests/unit/ports.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 15000

/* --- agent stand-in ------------------------------------------------------------------------ */

struct standin {
    struct hc_test_standin srv;
    int port;
    pthread_mutex_t lock; /* the fields below */
    int ok_to_stop;
    char reason[200];
    int ok_calls, drain_calls, leave_calls;
    char leave_body[512];
};

static void standin_ok(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    pthread_mutex_lock(&s->lock);
    s->ok_calls++;
    json_t *b = json_pack("{s:b, s:s}", "ok_to_stop", s->ok_to_stop, "reason", s->reason);
    pthread_mutex_unlock(&s->lock);
    hc_reply_json(req, 200, b);
}

static void standin_drain(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    pthread_mutex_lock(&s->lock);
    s->drain_calls++;
    pthread_mutex_unlock(&s->lock);
    hc_reply_json(req, 200, json_pack("{s:b}", "drained", 1));
}

/* As hcagent answers: where the service's data will be kept, from keep_as. */
static void standin_leave(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    char kept[300];
    snprintf(kept, sizeof(kept), "/standin/kept/%s", hc_json_str(body, "keep_as", "?"));
    int purge = hc_json_bool(body, "purge", 0);
    char *text = json_dumps(body, JSON_SORT_KEYS | JSON_COMPACT);
    pthread_mutex_lock(&s->lock);
    s->leave_calls++;
    snprintf(s->leave_body, sizeof(s->leave_body), "%s", text ? text : "");
    pthread_mutex_unlock(&s->lock);
    free(text);
    hc_reply_json(req, 202,
                  json_pack("{s:b, s:b, s:s?}", "leaving", 1, "purge", purge, "service_data",
                            purge ? NULL : kept));
}

static void standin_peers(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, json_pack("{s:b}", "written", 1));
}

static const struct hc_test_route standin_routes[] = {
    {"GET", "/v1/service/ok-to-stop", standin_ok},
    {"POST", "/v1/service/drain", standin_drain},
    {"POST", "/v1/leave", standin_leave},
    {"PUT", "/v1/service/peers", standin_peers},
};

/* --- fixture ------------------------------------------------------------------------------- */

struct fixture {
    char dir[512];
    char agent_cert[600], agent_key[600];
    struct standin agent;
    int agent_started;
    struct hc_controller ctl;
    struct hc_db *db;
    struct hc_ops_pool *pool;
    X509 *ca;
    EVP_PKEY *ca_key;
    int closed_port;
};

static X509 *issue(struct fixture *f, const char *cn, int client, char serial[33])
{
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    assert_non_null(key);
    struct hc_cert_spec spec = {.cn = cn, .server_auth = !client, .client_auth = client, .days = 1};
    X509 *x = hc_pki_issue(f->ca, f->ca_key, key, &spec, serial, &err);
    if (!x)
        fail_msg("issue %s: %s", cn, err.message);
    if (client) {
        assert_int_equal(hc_pki_cert_save(x, f->ctl.client_cert, &err), 0);
        assert_int_equal(hc_pki_key_save(key, f->ctl.client_key, &err), 0);
    }
    EVP_PKEY_free(key);
    return x;
}

/* A data dir as hcctld init leaves it, as far as node.remove needs: CA, client certificate,
 * database with the cluster, and crl.pem as hcctld run writes it at start. */
static int setup(void **state)
{
    static struct fixture f;
    struct hc_error err = {0};
    char serial[33];
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_node_remove");
    f.ctl.agent_timeout_ms = 1000;
    f.ca_key = hc_pki_key_new(&err);
    assert_non_null(f.ca_key);
    f.ca = hc_pki_ca_new(f.ca_key, "test cluster ca", 1, &err);
    assert_non_null(f.ca);
    assert_int_equal(hc_pki_cert_save(f.ca, f.ctl.ca_file, &err), 0);
    assert_int_equal(hc_pki_key_save(f.ca_key, f.ctl.ca_key_file, &err), 0);
    X509_free(issue(&f, "hcctld-client", 1, serial));
    f.db = hc_test_ctl_db_crl(&f.ctl);
    f.closed_port = hc_test_closed_port();
    f.pool = hc_ops_pool_start(&f.ctl, 1, &err);
    if (!f.pool)
        fail_msg("pool: %s", err.message);
    *state = &f;
    return 0;
}

/* Starts the stand-in with a server certificate for 127.0.0.1 from the cluster CA. */
static void standin_start(struct fixture *f, int ok_to_stop, const char *reason)
{
    static const char *const sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {.cn = "s1", .sans = sans, .nsans = 1, .server_auth = 1, .days = 1};
    struct standin *s = &f->agent;
    snprintf(f->agent_cert, sizeof(f->agent_cert), "%s/standin.pem", f->dir);
    snprintf(f->agent_key, sizeof(f->agent_key), "%s/standin.key", f->dir);
    hc_test_cert_write(f->ca, f->ca_key, &spec, f->agent_cert, f->agent_key);
    s->ok_to_stop = ok_to_stop;
    snprintf(s->reason, sizeof(s->reason), "%s", reason);
    pthread_mutex_init(&s->lock, NULL);
    hc_test_standin_start(&s->srv, f->agent_cert, f->agent_key, f->ctl.ca_file, standin_routes,
                          HC_ARRAY_LEN(standin_routes), s);
    s->port = s->srv.port;
    f->agent_started = 1;
}

static void standin_stop(struct fixture *f)
{
    if (!f->agent_started)
        return;
    f->agent_started = 0;
    hc_test_standin_stop(&f->agent.srv);
    pthread_mutex_destroy(&f->agent.lock);
}

static int standin_count(struct fixture *f, const int *field)
{
    pthread_mutex_lock(&f->agent.lock);
    int n = *field;
    pthread_mutex_unlock(&f->agent.lock);
    return n;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_ops_pool_stop(f->pool);
    standin_stop(f);
    hc_db_close(f->db);
    X509_free(f->ca);
    EVP_PKEY_free(f->ca_key);
    hc_test_rmtree(f->dir);
    return 0;
}

/* A node whose agent answers at port (0: closed) with the given health in the database. ssh
 * NULL: joined by hand. Returns its certificate (caller frees). */
static X509 *insert_node_at(struct fixture *f, const char *name, const char *ssh, const char *mode,
                            int port, const char *health)
{
    struct hc_error err = {0};
    char url[128], serial[33];
    X509 *x = issue(f, name, 0, serial);
    char *pem = hc_pki_cert_to_pem(x);
    char pin[HC_PKI_PIN_LEN];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port ? port : f->closed_port);
    /* the controller pins the key that answers there: the stand-in's when one runs */
    if (!f->agent_started || hc_pki_file_pin(f->agent_cert, pin, &err) < 0)
        assert_int_equal(hc_pki_cert_pin(x, pin), 0);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, cert_pin, joined_at, ssh_endpoint, "
                               "install_mode, health) VALUES ('c-test', ?, '127.0.0.1', ?, ?, ?, "
                               "?, ?, ?, ?, ?)",
                               "sssssisss", name, url, serial, pem, pin, hc_now_ms(), ssh, mode,
                               health),
                     1);
    free(pem);
    return x;
}

/* A node whose agent and SSH ports are closed. */
static X509 *insert_node(struct fixture *f, const char *name, const char *ssh, const char *mode)
{
    return insert_node_at(f, name, ssh, mode, 0, "unknown");
}

static void wait_state(struct fixture *f, const char *id, const char *want)
{
    struct hc_error err = {0};
    char now[32] = "";
    for (int64_t deadline = hc_mono_ms() + WAIT_MS; hc_mono_ms() < deadline; usleep(10 * 1000)) {
        json_t *rows =
            hc_db_query_json(f->db, &err, "SELECT state FROM operations WHERE id = ?", "s", id);
        snprintf(now, sizeof(now), "%s", hc_json_str(json_array_get(rows, 0), "state", ""));
        json_decref(rows);
        if (strcmp(now, want) == 0)
            return;
    }
    fail_msg("operation %s is %s, not %s", id, now, want);
}

/* Submits node.remove with the params of the API body `body` (NULL: {}) and waits for want;
 * returns the operation as hc_ops_show has it. */
static json_t *remove_node_with(struct fixture *f, const char *name, const char *body,
                                const char *want, char id[32])
{
    struct hc_error err = {0};
    json_t *in = json_loads(body ? body : "{}", 0, NULL);
    json_t *params = hc_node_remove_params(name, in, &err);
    if (!params)
        fail_msg("params %s: %s", body, err.message);
    json_decref(in);
    assert_int_equal(hc_ops_submit(f->db, "c-test", HC_OP_NODE_REMOVE, params, "test", id, &err),
                     0);
    json_decref(params);
    hc_ops_pool_kick(f->pool);
    wait_state(f, id, want);
    json_t *show = hc_ops_show(f->db, id, &err);
    assert_non_null(show);
    return show;
}

static json_t *remove_node(struct fixture *f, const char *name, const char *want, char id[32])
{
    return remove_node_with(f, name, NULL, want, id);
}

static json_t *step(json_t *show, const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(show, "steps"), i, s)
    {
        if (strcmp(hc_json_str(s, "step", ""), name) == 0)
            return s;
    }
    fail_msg("no step %s", name);
    return NULL;
}

static const char *op_error(json_t *show, const char *field)
{
    json_t *e = json_object_get(json_object_get(show, "operation"), "error");
    return hc_json_str(e, field, "");
}

/* The node is gone, its serial revoked, and crl.pem makes its certificate fail verification. */
static void assert_revoked(struct fixture *f, const char *name, X509 *cert)
{
    struct hc_error err = {0};
    json_t *rows =
        hc_db_query_json(f->db, &err, "SELECT name FROM nodes WHERE name = ?", "s", name);
    assert_int_equal(json_array_size(rows), 0);
    json_decref(rows);
    rows = hc_db_query_json(f->db, &err, "SELECT node_name FROM revoked_certs WHERE node_name = ?",
                            "s", name);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    char path[1200];
    hc_crl_path(&f->ctl, path, sizeof(path));
    X509_CRL *crl = hc_pki_crl_load(path, &err);
    assert_non_null(crl);
    assert_int_equal(hc_pki_verify(f->ca, cert, &err), 0);
    assert_int_equal(hc_pki_verify_crl(f->ca, crl, cert, &err), -1);
    assert_non_null(strstr(err.message, "certificate revoked"));
    X509_CRL_free(crl);
}

static void test_unreachable_host_fails_truthfully(void **state)
{
    struct fixture *f = *state;
    char ssh[64], id[32], want[512];
    snprintf(ssh, sizeof(ssh), "root@127.0.0.1:%d", f->closed_port);
    X509 *cert = insert_node(f, "b1", ssh, "daemon");
    json_t *show = remove_node(f, "b1", "failed", id);

    assert_string_equal(hc_json_str(step(show, "leave"), "state", ""), "succeeded");
    assert_string_equal(hc_json_str(step(show, "leave"), "detail", ""),
                        "agent unreachable, credentials revoked only");
    assert_string_equal(hc_json_str(step(show, "uninstall"), "state", ""), "failed");
    snprintf(want, sizeof(want), "could not stop and remove the agent over ssh (%s): ", ssh);
    assert_int_equal(
        strncmp(hc_json_str(step(show, "uninstall"), "detail", ""), want, strlen(want)), 0);
    assert_string_equal(hc_json_str(step(show, "revoke"), "state", ""), "succeeded");

    snprintf(want, sizeof(want),
             "node 'b1' left the cluster (certificate revoked) but its host %s was not cleaned "
             "up, the agent may still run there and its files remain (the service's data in "
             "/var/lib/hcctl/agent/service-data): ",
             ssh);
    assert_int_equal(strncmp(op_error(show, "message"), want, strlen(want)), 0);
    assert_true(strlen(op_error(show, "message")) > strlen(want)); /* and why */
    snprintf(want, sizeof(want),
             "on 127.0.0.1, as root: pkill -x hcagent; rm -rf /opt/hcctl/agent /etc/hcctl/agent "
             "/var/lib/hcctl/agent.log* /var/lib/hcctl/agent/agent.key /run/hcctl/hcagent.pid");
    assert_string_equal(op_error(show, "hint"), want);
    json_decref(show);
    assert_revoked(f, "b1", cert);

    /* A controller killed after the revocation runs the operation again: the node is gone by
     * then, and the run still ends failed for the same reason. */
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err,
                               "UPDATE operations SET state = 'pending', finished_at = NULL, "
                               "error_code = NULL, error_message = NULL, error_hint = NULL "
                               "WHERE id = ?",
                               "s", id),
                     1);
    hc_ops_pool_kick(f->pool);
    wait_state(f, id, "failed");
    show = hc_ops_show(f->db, id, &err);
    assert_non_null(strstr(op_error(show, "message"), "node 'b1' left the cluster (certificate "
                                                      "revoked) but its host was not cleaned up"));
    assert_non_null(strstr(op_error(show, "message"), ssh)); /* from the step's detail */
    assert_string_equal(op_error(show, "hint"),
                        "on the node's host, as root: systemctl disable --now hcagent.service; "
                        "pkill -x hcagent; rm -rf /etc/systemd/system/hcagent.service "
                        "/opt/hcctl/agent /etc/hcctl/agent /var/lib/hcctl/agent.log* "
                        "/var/lib/hcctl/agent/agent.key /run/hcctl/hcagent.pid");
    json_decref(show);

    /* A new removal of the same node has nothing left to do in the cluster. */
    json_decref(remove_node(f, "b1", "succeeded", id));
    X509_free(cert);
}

static void test_systemd_hint(void **state)
{
    struct fixture *f = *state;
    char ssh[64], id[32], want[256];
    snprintf(ssh, sizeof(ssh), "admin@127.0.0.1:%d", f->closed_port);
    X509 *cert = insert_node(f, "b2", ssh, "systemd");
    json_t *show = remove_node(f, "b2", "failed", id);
    snprintf(want, sizeof(want),
             "on 127.0.0.1, as root: systemctl disable --now hcagent.service; rm -rf "
             "/etc/systemd/system/hcagent.service /opt/hcctl/agent /etc/hcctl/agent "
             "/var/lib/hcctl/agent.log* /var/lib/hcctl/agent/agent.key; systemctl daemon-reload");
    assert_string_equal(op_error(show, "hint"), want);
    json_decref(show);
    assert_revoked(f, "b2", cert);
    X509_free(cert);
}

/* Purge: the hand cleanup deletes the whole data directory, the service's data with it. */
static void test_purge_hint(void **state)
{
    struct fixture *f = *state;
    char ssh[64], id[32];
    snprintf(ssh, sizeof(ssh), "root@127.0.0.1:%d", f->closed_port);
    X509 *cert = insert_node(f, "b3", ssh, "daemon");
    json_t *show = remove_node_with(f, "b3", "{\"purge\": true}", "failed", id);
    assert_null(strstr(op_error(show, "message"), "service-data"));
    assert_string_equal(op_error(show, "hint"),
                        "on 127.0.0.1, as root: pkill -x hcagent; rm -rf /opt/hcctl/agent "
                        "/etc/hcctl/agent /var/lib/hcctl/agent.log* /var/lib/hcctl/agent "
                        "/run/hcctl/hcagent.pid");
    assert_string_equal(hc_json_str(step(show, "service_data"), "detail", ""),
                        "left untouched on the node: it could not be reached");
    json_decref(show);
    assert_revoked(f, "b3", cert);
    X509_free(cert);
}

/* --- the gates ----------------------------------------------------------------------------- */

/* A refused removal leaves the node as it was: a member, never asked to drain or leave. */
static void assert_untouched(struct fixture *f, const char *name)
{
    assert_int_equal(hc_test_db_count(f->db,
                                      "SELECT COUNT(*) AS n FROM nodes WHERE name = ? AND "
                                      "state = 'joined' AND desired_state = 'member'",
                                      name),
                     1);
    assert_int_equal(hc_test_db_count(f->db,
                                      "SELECT COUNT(*) AS n FROM revoked_certs WHERE node_name = ?",
                                      name),
                     0);
    assert_int_equal(standin_count(f, &f->agent.drain_calls), 0);
    assert_int_equal(standin_count(f, &f->agent.leave_calls), 0);
}

/* Another node is down already: taking this one out too is more than max_unavailable 1. */
static void test_over_budget_refused(void **state)
{
    struct fixture *f = *state;
    char id[32];
    standin_start(f, 1, "");
    X509 *a = insert_node_at(f, "s1", NULL, NULL, f->agent.port, "reachable");
    X509 *b = insert_node_at(f, "d1", NULL, NULL, 0, "unreachable");
    json_t *show = remove_node(f, "s1", "failed", id);
    assert_string_equal(op_error(show, "code"), HC_ERR_BUDGET);
    assert_non_null(strstr(op_error(show, "message"), "taking 's1' down would leave 2 node(s) "
                                                      "down, more than max_unavailable 1"));
    assert_non_null(strstr(op_error(show, "message"), "already down: d1 (unreachable)"));
    assert_non_null(strstr(op_error(show, "hint"), "'hcctl node remove s1 --force --reason "
                                                   "TEXT' removes it regardless"));
    assert_string_equal(hc_json_str(step(show, "budget"), "state", ""), "failed");
    json_decref(show);
    assert_untouched(f, "s1");
    assert_int_equal(standin_count(f, &f->agent.ok_calls), 0);
    X509_free(a);
    X509_free(b);
}

/* The node holds the only in-sync copy of a block: the service's own words are the refusal. */
static void test_not_ok_to_stop_refused(void **state)
{
    struct fixture *f = *state;
    char id[32];
    static const char why[] = "block 'k7' has no other in-sync serving replica (n2 is down)";
    standin_start(f, 0, why);
    X509 *a = insert_node_at(f, "s1", NULL, NULL, f->agent.port, "reachable");
    X509 *b = insert_node_at(f, "n2", NULL, NULL, 0, "reachable");
    json_t *show = remove_node(f, "s1", "failed", id);
    assert_string_equal(op_error(show, "code"), HC_ERR_NOT_OK_TO_STOP);
    assert_non_null(strstr(op_error(show, "message"), "cannot take 's1' down: ok-to-stop "
                                                      "refused: "));
    assert_non_null(strstr(op_error(show, "message"), why));
    assert_non_null(strstr(op_error(show, "hint"), "--force --reason TEXT"));
    assert_string_equal(hc_json_str(step(show, "budget"), "state", ""), "succeeded");
    assert_string_equal(hc_json_str(step(show, "ok_to_stop"), "state", ""), "failed");
    json_decref(show);
    assert_int_equal(standin_count(f, &f->agent.ok_calls), 1);
    assert_untouched(f, "s1");
    X509_free(a);
    X509_free(b);
}

/* Forced with a reason: both gates skipped (they would both refuse), the reason recorded. */
static void test_force_with_reason(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32];
    static const char reason[] = "disk of s1 failing, blocks copied by hand (ticket 4711)";
    standin_start(f, 0, "block 'k7' has no other in-sync serving replica (d1 is down)");
    X509 *a = insert_node_at(f, "s1", NULL, NULL, f->agent.port, "reachable");
    X509 *b = insert_node_at(f, "d1", NULL, NULL, 0, "unreachable");
    json_t *show = remove_node_with(
        f, "s1",
        "{\"force\": true, \"reason\": \"disk of s1 failing, blocks copied by hand "
        "(ticket 4711)\"}",
        "succeeded", id);
    char want[300];
    snprintf(want, sizeof(want), "skipped (--force): %s", reason);
    assert_string_equal(hc_json_str(step(show, "budget"), "detail", ""), want);
    assert_string_equal(hc_json_str(step(show, "ok_to_stop"), "detail", ""), want);
    json_t *params = json_object_get(json_object_get(show, "operation"), "params");
    assert_true(hc_json_bool(params, "force", 0));
    assert_string_equal(hc_json_str(params, "reason", ""), reason);
    json_decref(show);
    assert_int_equal(standin_count(f, &f->agent.ok_calls), 0);
    assert_int_equal(standin_count(f, &f->agent.leave_calls), 1);
    json_t *ev = hc_db_query_json(f->db, &err,
                                  "SELECT message, details_json FROM events WHERE "
                                  "type = 'node.removed' AND op_id = ?",
                                  "s", id);
    assert_int_equal(json_array_size(ev), 1);
    json_t *row = json_array_get(ev, 0);
    assert_non_null(strstr(hc_json_str(row, "message", ""), "; forced: disk of s1 failing"));
    json_t *details = json_object_get(row, "details_json"); /* parsed by hc_db_query_json */
    assert_true(hc_json_bool(details, "force", 0));
    assert_string_equal(hc_json_str(details, "reason", ""), reason);
    json_decref(ev);
    assert_revoked(f, "s1", a);
    X509_free(a);
    X509_free(b);
}

/* What DELETE /v1/nodes/{name} accepts as the operation's params. */
static void test_params(void **state)
{
    static const char *const bad[] = {
        "{\"force\": true}",                               /* no reason */
        "{\"force\": true, \"reason\": \"\"}",             /* empty reason */
        "{\"reason\": \"why not\"}",                       /* reason without force */
        "{\"force\": true, \"reason\": \"a\\u001b[2Jb\"}", /* control characters */
        "{\"force\": \"yes\", \"reason\": \"x\"}",         /* not a boolean */
        "{\"purge\": 1}",
        "{\"force\": true, \"reason\": 7}",
        "{\"max_unavailable\": 0}",
        "[]",
    };
    struct hc_error err = {0};
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *in = json_loads(bad[i], 0, NULL);
        assert_non_null(in);
        memset(&err, 0, sizeof(err));
        json_t *p = hc_node_remove_params("n1", in, &err);
        if (p)
            fail_msg("accepted %s", bad[i]);
        assert_int_equal(err.status, 400);
        assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
        json_decref(in);
    }
    json_t *in = json_pack("{s:b}", "force", 1);
    memset(&err, 0, sizeof(err));
    assert_null(hc_node_remove_params("n1", in, &err));
    assert_string_equal(err.message, "force skips the availability budget and the storage "
                                     "service's ok-to-stop for 'n1': a reason is required");
    assert_non_null(strstr(err.hint, "--reason TEXT"));
    json_decref(in);
    char longer[HC_NODE_REMOVE_REASON_MAX + 2];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    in = json_pack("{s:b, s:s}", "force", 1, "reason", longer);
    assert_null(hc_node_remove_params("n1", in, &err));
    json_decref(in);
    in = json_pack("{s:b, s:s, s:b, s:i}", "force", 1, "reason", "dead disk", "purge", 1,
                   "max_unavailable", 2);
    json_t *p = hc_node_remove_params("n1", in, &err);
    assert_non_null(p);
    assert_string_equal(hc_json_str(p, "node", ""), "n1");
    assert_true(hc_json_bool(p, "force", 0) && hc_json_bool(p, "purge", 0));
    assert_string_equal(hc_json_str(p, "reason", ""), "dead disk");
    assert_int_equal(hc_json_int(p, "max_unavailable", 0), 2);
    json_decref(p);
    json_decref(in);
    in = json_object();
    p = hc_node_remove_params("n1", in, &err);
    assert_false(hc_json_bool(p, "force", 1) || hc_json_bool(p, "purge", 1));
    assert_null(json_object_get(p, "reason"));
    json_decref(p);
    json_decref(in);
}

/* The gates pass: drained, the agent asked to leave keeping the data as NODE.OP, and the
 * operation says where it is; with purge, deleted. */
static void test_keep_and_purge(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char id[32], want[300], body[512];
    standin_start(f, 1, "");
    X509 *a = insert_node_at(f, "s1", NULL, NULL, f->agent.port, "reachable");
    json_t *show = remove_node(f, "s1", "succeeded", id);
    assert_string_equal(hc_json_str(step(show, "budget"), "detail", ""),
                        "within max_unavailable 1");
    assert_string_equal(hc_json_str(step(show, "ok_to_stop"), "detail", ""), "ok-to-stop");
    assert_string_equal(hc_json_str(step(show, "drain"), "detail", ""), "drained");
    snprintf(want, sizeof(want), "kept on the node in /standin/kept/s1.%s", id);
    assert_string_equal(hc_json_str(step(show, "service_data"), "detail", ""), want);
    json_decref(show);
    pthread_mutex_lock(&f->agent.lock);
    snprintf(body, sizeof(body), "%s", f->agent.leave_body);
    pthread_mutex_unlock(&f->agent.lock);
    snprintf(want, sizeof(want), "{\"keep_as\":\"s1.%s\",\"purge\":false}", id);
    assert_string_equal(body, want);
    json_t *ev = hc_db_query_json(f->db, &err,
                                  "SELECT details_json FROM events WHERE type = "
                                  "'node.removed' AND op_id = ?",
                                  "s", id);
    json_t *details = json_object_get(json_array_get(ev, 0), "details_json");
    assert_false(hc_json_bool(details, "force", 1));
    assert_null(json_object_get(details, "reason"));
    snprintf(want, sizeof(want), "kept on the node in /standin/kept/s1.%s", id);
    assert_string_equal(hc_json_str(details, "service_data", ""), want);
    json_decref(ev);
    assert_revoked(f, "s1", a);
    X509_free(a);

    /* The same stand-in as another node, removed with purge. */
    a = insert_node_at(f, "s2", NULL, NULL, f->agent.port, "reachable");
    show = remove_node_with(f, "s2", "{\"purge\": true}", "succeeded", id);
    assert_string_equal(hc_json_str(step(show, "service_data"), "detail", ""), "deleted (--purge)");
    assert_string_equal(hc_json_str(step(show, "leave"), "detail", ""),
                        "agent left; the service's data deleted (--purge)");
    json_decref(show);
    pthread_mutex_lock(&f->agent.lock);
    snprintf(body, sizeof(body), "%s", f->agent.leave_body);
    pthread_mutex_unlock(&f->agent.lock);
    snprintf(want, sizeof(want), "{\"keep_as\":\"s2.%s\",\"purge\":true}", id);
    assert_string_equal(body, want);
    assert_int_equal(standin_count(f, &f->agent.drain_calls), 2);
    X509_free(a);
}

/* Nothing was installed over SSH: leaving the cluster is all there is to do. */
static void test_joined_by_hand(void **state)
{
    struct fixture *f = *state;
    char id[32];
    X509 *cert = insert_node(f, "h1", NULL, NULL);
    json_t *show = remove_node(f, "h1", "succeeded", id);
    assert_string_equal(hc_json_str(step(show, "uninstall"), "detail", ""),
                        "joined by hand: nothing was installed over ssh");
    /* down already: the budget (no other node) decided, and no second timeout for the drain */
    assert_string_equal(hc_json_str(step(show, "budget"), "detail", ""),
                        "within max_unavailable 1");
    assert_int_equal(strncmp(hc_json_str(step(show, "ok_to_stop"), "detail", ""),
                             HC_MAINT_NOT_ASKED " (", strlen(HC_MAINT_NOT_ASKED) + 2),
                     0);
    assert_string_equal(hc_json_str(step(show, "drain"), "detail", ""),
                        "not drained: the agent does not answer");
    assert_string_equal(hc_json_str(step(show, "service_data"), "detail", ""),
                        "left untouched on the node: it could not be reached");
    json_decref(show);
    assert_revoked(f, "h1", cert);
    X509_free(cert);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unreachable_host_fails_truthfully, setup, teardown),
        cmocka_unit_test_setup_teardown(test_systemd_hint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_joined_by_hand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_purge_hint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_over_budget_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_ok_to_stop_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_force_with_reason, setup, teardown),
        cmocka_unit_test(test_params),
        cmocka_unit_test_setup_teardown(test_keep_and_purge, setup, teardown),
    };
    signal(SIGPIPE, SIG_IGN); /* as in hcctld: a peer that closes first must not kill us */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
