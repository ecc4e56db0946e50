/* Unit tests for controller/state/checks.c: each check's judgement on a real database (db/),
 * filled through the nodes writers the poller uses, with real certificates: ok, warning, error
 * and unknown for each id (what the controller could not learn is never ok); the gate's refusal
 * and skip_checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/checks.h"
#include "controller/state/config.h"
#include "controller/state/nodes.h"
#include "db/db.h"
#include "tests/unit/testdir.h"

#define DAY_MS (86400LL * 1000)

struct fixture {
    char *dir;
    struct hc_db *db;
    char *cert_pem; /* a 365-day certificate issued now */
    char cert_path[1100];
    int64_t now;
};

static char *issue_pem(int days)
{
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509 *ca = hc_pki_ca_new(key, "test CA", days, &err);
    assert_non_null(ca);
    char *pem = hc_pki_cert_to_pem(ca);
    X509_free(ca);
    EVP_PKEY_free(key);
    return pem;
}

static void add_node(struct hc_db *db, const char *name, const char *pem)
{
    struct hc_error err = {0};
    char url[128], address[32];
    snprintf(address, sizeof(address), "10.0.0.%d", name[1] - '0');
    snprintf(url, sizeof(url), "https://%s:9443", address);
    struct hc_node_new n = {.cluster_id = "c1",
                            .name = name,
                            .address = address,
                            .agent_url = url,
                            .cert_serial = "01",
                            .cert_pem = pem,
                            .cert_pin = "sha256//pin"};
    if (hc_node_insert(db, &n, &err) < 0)
        fail_msg("insert %s: %s", name, err.message);
}

/* A healthy poll, as the poller stores it; the caller changes what the case needs. */
static struct hc_node_poll healthy_poll(int64_t now)
{
    return (struct hc_node_poll){.health = "reachable",
                                 .service_state = "running",
                                 .software_version = "1.0",
                                 .asked_at = now,
                                 .agent_version = "a",
                                 .uptime_s = 10,
                                 .latency_ms = 1,
                                 .now = now,
                                 .clock_offset_ms = 10,
                                 .data_dir_free_bytes = 50,
                                 .data_dir_total_bytes = 100,
                                 .service_healthy = 1};
}

static int64_t node_id(struct hc_db *db, const char *name)
{
    struct hc_error err = {0};
    struct hc_node_row row;
    assert_int_equal(hc_node_row_get(db, name, &row, &err), 1);
    int64_t id = row.id;
    hc_node_row_clear(&row);
    return id;
}

static void store(struct fixture *f, const char *name, const struct hc_node_poll *p)
{
    struct hc_error err = {0};
    if (hc_node_store_poll(f->db, node_id(f->db, name), p, &err) < 0)
        fail_msg("store %s: %s", name, err.message);
}

static void in_sync(struct fixture *f, const char *name)
{
    struct hc_error err = {0};
    struct hc_node_config c = {.revision = 0, .digest = "d", .state = "in_sync"};
    assert_true(hc_node_set_config(f->db, name, &c, &err) >= 0);
}

/* A storage interface of that MTU on the node. */
static void storage_iface(struct fixture *f, const char *name, int mtu)
{
    struct hc_error err = {0};
    assert_true(hc_db_run(f->db, &err,
                          "INSERT OR REPLACE INTO interfaces (node_id, name, mtu, state, role, "
                          "updated_at) VALUES (?, 'eth1', ?, 'up', 'storage', 1)",
                          "ii", node_id(f->db, name), (int64_t)mtu) >= 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct hc_error err = {0};
    if (!f || !(f->dir = hc_test_mkdtemp("test_checks")))
        return -1;
    char *path = hc_path_join(f->dir, "hcctld.db");
    f->db = hc_db_open(path, &err);
    free(path);
    if (!f->db || hc_db_run(f->db, &err,
                            "INSERT INTO clusters (id, name, mtu, created_at) VALUES "
                            "('c1', 'one', 9000, 1)",
                            "") < 0)
        return -1;
    f->now = hc_now_ms();
    f->cert_pem = issue_pem(365);
    snprintf(f->cert_path, sizeof(f->cert_path), "%s/server.pem", f->dir);
    if (hc_file_write_atomic(f->cert_path, f->cert_pem, strlen(f->cert_pem), 0644, &err) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    free(f->cert_pem);
    free(f->dir);
    free(f);
    return 0;
}

/* Adds n1 with every fact healthy. */
static void healthy_node(struct fixture *f, const char *name)
{
    add_node(f->db, name, f->cert_pem);
    struct hc_node_poll p = healthy_poll(f->now);
    store(f, name, &p);
    in_sync(f, name);
    storage_iface(f, name, 9000);
}

static json_t *run_at(struct fixture *f, int64_t now)
{
    struct hc_error err = {0};
    struct hc_check_cert certs[] = {{.what = "controller's server", .path = f->cert_path}};
    json_t *r = hc_checks_run(f->db, certs, 1, now, &err);
    if (!r)
        fail_msg("checks: %s", err.message);
    return r;
}

/* The severity of check id on node (NULL: the cluster's, or the controller's certificate). */
static const char *severity(const json_t *report, const char *id, const char *node)
{
    const json_t *c;
    size_t i;
    static char found[32];
    json_array_foreach(json_object_get(report, "checks"), i, c)
    {
        const char *n = hc_json_str(c, "node", NULL);
        if (strcmp(hc_json_str(c, "id", ""), id) == 0 &&
            (node ? n && strcmp(n, node) == 0 : n == NULL)) {
            snprintf(found, sizeof(found), "%s", hc_json_str(c, "severity", "?"));
            return found;
        }
    }
    return "missing";
}

static void test_all_ok(void **state)
{
    struct fixture *f = *state;
    healthy_node(f, "n1");
    healthy_node(f, "n2");
    json_t *r = run_at(f, f->now);
    const json_t *c;
    size_t i;
    json_array_foreach(json_object_get(r, "checks"), i, c)
    {
        if (strcmp(hc_json_str(c, "severity", ""), "ok") != 0)
            fail_msg("%s on %s: %s (%s)", hc_json_str(c, "id", ""), hc_json_str(c, "node", "-"),
                     hc_json_str(c, "severity", ""), hc_json_str(c, "message", ""));
        assert_non_null(json_object_get(c, "remedy"));
    }
    /* every id, per node where it concerns one: 2 nodes x 7 + version_skew + the server cert */
    assert_int_equal(json_array_size(json_object_get(r, "checks")), 16);
    assert_int_equal(hc_json_int(json_object_get(r, "summary"), "ok", 0), 16);
    assert_int_equal(hc_json_int(json_object_get(r, "summary"), "error", -1), 0);
    json_decref(r);
}

/* Never polled: every per-node check is unknown, never ok. */
static void test_never_polled_is_unknown(void **state)
{
    struct fixture *f = *state;
    add_node(f->db, "n1", f->cert_pem);
    json_t *r = run_at(f, f->now);
    static const char *const ids[] = {"node_unreachable", "service_unhealthy", "mtu_mismatch",
                                      "clock_skew",       "disk_low",          "config_drift"};
    for (size_t i = 0; i < HC_ARRAY_LEN(ids); i++)
        assert_string_equal(severity(r, ids[i], "n1"), "unknown");
    assert_string_equal(severity(r, "cert_expiring", "n1"), "ok"); /* the row has it */
    json_decref(r);
}

/* An agent too old to report time, disk or health: unknown, not ok. */
static void test_old_agent_is_unknown(void **state)
{
    struct fixture *f = *state;
    healthy_node(f, "n1");
    struct hc_node_poll p = healthy_poll(f->now);
    p.clock_offset_ms = p.data_dir_free_bytes = p.data_dir_total_bytes = HC_NODE_UNREPORTED;
    p.service_healthy = -1;
    store(f, "n1", &p);
    json_t *r = run_at(f, f->now);
    assert_string_equal(severity(r, "clock_skew", "n1"), "unknown");
    assert_string_equal(severity(r, "disk_low", "n1"), "unknown");
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "unknown");
    assert_string_equal(severity(r, "node_unreachable", "n1"), "ok");
    json_decref(r);
}

static void test_unreachable(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    healthy_node(f, "n1");
    assert_int_equal(hc_node_set_unanswered(f->db, node_id(f->db, "n1"), "unreachable",
                                            "connection refused", f->now + 1, &err),
                     1);
    json_t *r = run_at(f, f->now);
    assert_string_equal(severity(r, "node_unreachable", "n1"), "error");
    /* what it last said is stale: unknown */
    assert_string_equal(severity(r, "clock_skew", "n1"), "unknown");
    assert_string_equal(severity(r, "disk_low", "n1"), "unknown");
    char failed[256];
    assert_int_equal(hc_checks_errors(r, NULL, failed, sizeof(failed)), 1);
    assert_string_equal(failed, "node_unreachable on n1");
    json_decref(r);
    /* in maintenance, expected: a warning */
    assert_true(hc_node_set_maintenance(f->db, "n1", "active", "full", "op-1", &err) >= 0);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "node_unreachable", "n1"), "warning");
    json_decref(r);
}

static void test_service(void **state)
{
    struct fixture *f = *state;
    healthy_node(f, "n1");
    struct hc_node_poll p = healthy_poll(f->now + 1);
    p.asked_at = f->now + 1;
    p.service_healthy = 0;
    store(f, "n1", &p);
    json_t *r = run_at(f, f->now);
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "error");
    json_decref(r);
    p.service_state = "crashed";
    p.asked_at = f->now + 2;
    store(f, "n1", &p);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "error");
    json_decref(r);
    /* an operation's newer observation of the state: the health seen before is unknown */
    struct hc_error err = {0};
    assert_int_equal(hc_node_set_service_state(f->db, "n1", "running", f->now + 2, &err), 0);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "unknown");
    json_decref(r);
    p.service_state = "stopped";
    p.asked_at = f->now + 3;
    store(f, "n1", &p);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "warning");
    json_decref(r);
    p.service_state = "starting";
    p.asked_at = f->now + 4;
    store(f, "n1", &p);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "service_unhealthy", "n1"), "warning");
    json_decref(r);
}

static void test_mtu(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    healthy_node(f, "n1");
    storage_iface(f, "n1", 1500);
    json_t *r = run_at(f, f->now);
    assert_string_equal(severity(r, "mtu_mismatch", "n1"), "error");
    json_decref(r);
    assert_true(hc_db_run(f->db, &err, "UPDATE clusters SET mtu = NULL", "") >= 0);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "mtu_mismatch", "n1"), "unknown");
    json_decref(r);
    assert_true(hc_db_run(f->db, &err, "UPDATE clusters SET mtu = 1500", "") >= 0);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "mtu_mismatch", "n1"), "ok");
    json_decref(r);
    assert_true(hc_db_run(f->db, &err, "DELETE FROM interfaces", "") >= 0);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "mtu_mismatch", "n1"), "unknown");
    json_decref(r);
}

/* 365-day certificates judged later: 25 days left warn, 3 days left and expired are errors. */
static void test_cert(void **state)
{
    struct fixture *f = *state;
    healthy_node(f, "n1");
    json_t *r = run_at(f, f->now + 340 * DAY_MS);
    assert_string_equal(severity(r, "cert_expiring", "n1"), "warning");
    assert_string_equal(severity(r, "cert_expiring", NULL), "warning");
    json_decref(r);
    r = run_at(f, f->now + 362 * DAY_MS);
    assert_string_equal(severity(r, "cert_expiring", "n1"), "error");
    json_decref(r);
    r = run_at(f, f->now + 400 * DAY_MS);
    assert_string_equal(severity(r, "cert_expiring", NULL), "error");
    json_decref(r);
    /* an unreadable certificate file: unknown */
    unlink(f->cert_path);
    r = run_at(f, f->now);
    assert_string_equal(severity(r, "cert_expiring", NULL), "unknown");
    assert_string_equal(severity(r, "cert_expiring", "n1"), "ok");
    json_decref(r);
}

static void test_clock_and_disk(void **state)
{
    struct fixture *f = *state;
    static const struct {
        int64_t offset, free_bytes;
        const char *clock, *disk;
    } cases[] = {
        {2000, 10, "ok", "ok"},           {-2001, 9, "warning", "warning"},
        {30000, 5, "warning", "warning"}, {-30001, 4, "error", "error"},
        {45000, 0, "error", "error"},
    };
    healthy_node(f, "n1");
    for (size_t i = 0; i < HC_ARRAY_LEN(cases); i++) {
        struct hc_node_poll p = healthy_poll(f->now);
        p.clock_offset_ms = cases[i].offset;
        p.data_dir_free_bytes = cases[i].free_bytes;
        store(f, "n1", &p);
        json_t *r = run_at(f, f->now);
        assert_string_equal(severity(r, "clock_skew", "n1"), cases[i].clock);
        assert_string_equal(severity(r, "disk_low", "n1"), cases[i].disk);
        json_decref(r);
    }
}

static void test_versions_and_config(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    healthy_node(f, "n1");
    healthy_node(f, "n2");
    struct hc_node_poll p = healthy_poll(f->now + 1);
    p.software_version = "1.1";
    store(f, "n2", &p);
    struct hc_node_config drift = {
        .revision = 1, .digest = "x", .state = "drift", .detail = "changed on the node"};
    assert_true(hc_node_set_config(f->db, "n1", &drift, &err) >= 0);
    struct hc_node_config none = {
        .revision = -1, .state = "not_applied", .detail = HC_CONFIG_NO_SETTINGS};
    assert_true(hc_node_set_config(f->db, "n2", &none, &err) >= 0);
    json_t *r = run_at(f, f->now);
    assert_string_equal(severity(r, "version_skew", NULL), "warning");
    assert_string_equal(severity(r, "config_drift", "n1"), "warning");
    assert_string_equal(severity(r, "config_drift", "n2"), "ok"); /* nothing to apply */
    json_decref(r);
}

static void test_gate_and_skip(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    healthy_node(f, "n1");
    struct hc_node_poll p = healthy_poll(f->now);
    p.clock_offset_ms = 60000;
    store(f, "n1", &p);
    assert_int_equal(hc_checks_gate(f->db, NULL, 0, f->now, NULL, NULL, &err), -1);
    assert_string_equal(err.code, "checks_failed");
    assert_non_null(strstr(err.message, "clock_skew on n1"));
    json_t *body = json_loads("{\"skip_checks\":[\"clock_skew\"]}", 0, NULL);
    const json_t *skip;
    assert_int_equal(hc_checks_skip_arg(body, &skip, &err), 0);
    memset(&err, 0, sizeof(err));
    assert_int_equal(hc_checks_gate(f->db, NULL, 0, f->now, skip, NULL, &err), 0);
    json_decref(body);
    /* warnings pass */
    p.clock_offset_ms = 5000;
    store(f, "n1", &p);
    assert_int_equal(hc_checks_gate(f->db, NULL, 0, f->now, NULL, NULL, &err), 0);
    /* hostile skip_checks */
    static const char *const bad[] = {"{\"skip_checks\":\"clock_skew\"}",
                                      "{\"skip_checks\":[\"nope\"]}", "{\"skip_checks\":[1]}"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        body = json_loads(bad[i], 0, NULL);
        memset(&err, 0, sizeof(err));
        assert_int_equal(hc_checks_skip_arg(body, &skip, &err), -1);
        assert_string_equal(err.code, "invalid_argument");
        json_decref(body);
    }
    assert_true(hc_check_id_valid("disk_low"));
    assert_false(hc_check_id_valid("disk"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_polled_is_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_agent_is_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mtu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clock_and_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_and_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_and_skip, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
