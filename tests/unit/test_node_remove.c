/*
 * Unit tests of the node.remove operation (controller/op_node_remove.c) where the node cannot
 * be reached at all: its agent's port and its SSH port are closed on 127.0.0.1.
 * - the node leaves the cluster all the same: row deleted, certificate serial in revoked_certs,
 *   and crl.pem (controller/crl.c) lists the certificate, so that it no longer verifies;
 * - a node brought in over SSH that could not be cleaned up ends the operation failed, with
 *   what was not done and the exact cleanup left to do (per install mode) as the hint, also
 *   when the run resumes after the revocation;
 * - a node joined by hand (nothing installed over SSH) is removed with success.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/crl.h"
#include "controller/init.h"
#include "controller/op_node_remove.h"
#include "controller/ops.h"
#include "db/db.h"
#include "tests/unit/ports.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 15000

struct fixture {
    char *dir;
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
    f.dir = hc_test_mkdtemp("test_node_remove");
    assert_non_null(f.dir);
    hc_controller_paths(&f.ctl, f.dir);
    snprintf(f.ctl.cluster_id, sizeof(f.ctl.cluster_id), "c-test");
    f.ctl.agent_timeout_ms = 1000;
    f.ca_key = hc_pki_key_new(&err);
    assert_non_null(f.ca_key);
    f.ca = hc_pki_ca_new(f.ca_key, "test cluster ca", 1, &err);
    assert_non_null(f.ca);
    assert_int_equal(hc_pki_cert_save(f.ca, f.ctl.ca_file, &err), 0);
    assert_int_equal(hc_pki_key_save(f.ca_key, f.ctl.ca_key_file, &err), 0);
    X509_free(issue(&f, "hcctld-client", 1, serial));
    f.db = hc_db_open(f.ctl.db_path, &err);
    assert_non_null(f.db);
    assert_int_equal(hc_db_run(f.db, &err,
                               "INSERT INTO clusters (id, name, created_at) VALUES "
                               "('c-test', 'test', ?)",
                               "i", hc_now_ms()),
                     1);
    assert_int_equal(hc_crl_write(&f.ctl, f.db, &err), 0);
    f.closed_port = hc_test_closed_port();
    hc_op_node_remove_register();
    f.pool = hc_ops_pool_start(&f.ctl, 1, &err);
    if (!f.pool)
        fail_msg("pool: %s", err.message);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_ops_pool_stop(f->pool);
    hc_db_close(f->db);
    X509_free(f->ca);
    EVP_PKEY_free(f->ca_key);
    hc_test_rmtree(f->dir);
    free(f->dir);
    return 0;
}

/* A node whose agent and SSH ports are closed. ssh NULL: joined by hand. Returns its
 * certificate (caller frees). */
static X509 *insert_node(struct fixture *f, const char *name, const char *ssh, const char *mode)
{
    struct hc_error err = {0};
    char url[128], serial[33];
    X509 *x = issue(f, name, 0, serial);
    char *pem = hc_pki_cert_to_pem(x);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->closed_port);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, joined_at, ssh_endpoint, install_mode) "
                               "VALUES ('c-test', ?, '127.0.0.1', ?, ?, ?, ?, ?, ?)",
                               "ssssiss", name, url, serial, pem, hc_now_ms(), ssh, mode),
                     1);
    free(pem);
    return x;
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

/* Submits node.remove and waits for want; returns the operation as hc_ops_show has it. */
static json_t *remove_node(struct fixture *f, const char *name, const char *want, char id[32])
{
    struct hc_error err = {0};
    json_t *params = json_pack("{s:s}", "node", name);
    assert_int_equal(hc_ops_submit(f->db, "c-test", HC_OP_NODE_REMOVE, params, "test", id, &err),
                     0);
    json_decref(params);
    hc_ops_pool_kick(f->pool);
    wait_state(f, id, want);
    json_t *show = hc_ops_show(f->db, id, &err);
    assert_non_null(show);
    return show;
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
             "up, the agent may still run there and its files remain: ",
             ssh);
    assert_int_equal(strncmp(op_error(show, "message"), want, strlen(want)), 0);
    assert_true(strlen(op_error(show, "message")) > strlen(want)); /* and why */
    snprintf(want, sizeof(want),
             "on 127.0.0.1, as root: pkill -x hcagent; rm -rf /opt/hcctl/agent /etc/hcctl/agent "
             "/var/lib/hcctl/agent /var/lib/hcctl/agent.log* /run/hcctl/hcagent.pid");
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
                        "/opt/hcctl/agent /etc/hcctl/agent /var/lib/hcctl/agent "
                        "/var/lib/hcctl/agent.log* /run/hcctl/hcagent.pid");
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
             "/var/lib/hcctl/agent /var/lib/hcctl/agent.log*; systemctl daemon-reload");
    assert_string_equal(op_error(show, "hint"), want);
    json_decref(show);
    assert_revoked(f, "b2", cert);
    X509_free(cert);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
