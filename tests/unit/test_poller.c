/*
 * Unit tests of the controller's agent-facing code against a real agent stand-in: an
 * hc_http_server with mutual TLS on 127.0.0.1 (certificates from common/pki.h) serving
 * /v1/status, /v1/interfaces and /v1/leave, plus a closed port (refused) and a socket that
 * accepts TCP but never answers (timeout).
 * - the health poller (controller/remote/poller.c): health, last_seen, interfaces rows, and exactly
 *   one node.health event per change;
 * - the node.remove operation (controller/ops/op_node_remove.c) through the operations pool.
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
#include <stdatomic.h>
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
#include "controller/ops/op_node_remove.h"
#include "controller/ops/ops.h"
#include "controller/remote/poller.h"
#include "db/db.h"
#include "tests/unit/ports.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 15000
#define AGENT_TIMEOUT_MS 1000

/* --- agent stand-in ------------------------------------------------------------------------ */

struct standin {
    struct hc_test_standin srv;
    int port;
    atomic_int status_calls;
    atomic_int leave_calls;
    atomic_int without_lo; /* serve only eth0 from now on */
};

static void standin_status(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    atomic_fetch_add(&s->status_calls, 1);
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:s, s:s, s:i, s:{s:s}}", "agent_version", "0.1.0-test",
                            "node_name", "n1", "hostname", "standin-host", "uptime_seconds", 42,
                            "service", "state", "not_installed"));
}

static void standin_interfaces(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    json_t *list = json_array();
    if (!atomic_load(&s->without_lo))
        json_array_append_new(list, json_pack("{s:s, s:i, s:i, s:s, s:n, s:n, s:[s]}", "name", "lo",
                                              "index", 1, "mtu", 65536, "state", "up", "kind",
                                              "master", "addresses", "127.0.0.1/8"));
    json_array_append_new(list, json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:[s]}", "name", "eth0",
                                          "index", 2, "mtu", 9000, "state", "up", "kind", "veth",
                                          "master", "br0", "addresses", "198.18.0.1/24"));
    hc_reply_json(req, 200, json_pack("{s:o}", "interfaces", list));
}

static void standin_leave(struct hc_request *req, void *arg)
{
    struct standin *s = arg;
    atomic_fetch_add(&s->leave_calls, 1);
    hc_reply_json(req, 202, json_pack("{s:b}", "leaving", 1));
}

/* No service installed: nothing held here, so ok to stop (node.remove asks). */
static void standin_ok_to_stop(struct hc_request *req, void *arg)
{
    hc_reply_json(
        req, 200,
        json_pack("{s:b, s:s}", "ok_to_stop", 1, "reason", "the service is not_installed"));
}

static const struct hc_test_route standin_routes[] = {
    {"GET", "/v1/status", standin_status},
    {"GET", "/v1/interfaces", standin_interfaces},
    {"POST", "/v1/leave", standin_leave},
    {"GET", "/v1/service/ok-to-stop", standin_ok_to_stop},
};

static void standin_stop(struct standin *s)
{
    hc_test_standin_stop(&s->srv);
}

/* --- fixture ------------------------------------------------------------------------------- */

struct fixture {
    char dir[512];
    char agent_cert[600], agent_key[600];
    struct hc_controller ctl;
    struct hc_db *db;
    struct standin agent;
    struct hc_poller *poller; /* stopped by teardown when a test fails midway */
    struct hc_ops_pool *pool;
    int silent_fd; /* listens, never accepts: TCP connects, TLS never answers */
};

static void insert_node(struct fixture *f, const char *name, int port)
{
    struct hc_error err = {0};
    char url[128];
    char pin[HC_PKI_PIN_LEN];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port);
    /* the key the stand-in agents serve with: what the poller pins */
    assert_int_equal(hc_pki_file_pin(f->agent_cert, pin, &err), 0);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, cert_pin, joined_at) VALUES ('c-test', ?, "
                               "'127.0.0.1', ?, ?, 'PEM', ?, ?)",
                               "ssssi", name, url, name, pin, hc_now_ms()),
                     1);
}

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    /* The poller needs the certificate paths and node.remove the CA key and the data dir, for
     * crl.pem. */
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_poller");
    snprintf(f.agent_cert, sizeof(f.agent_cert), "%s/agent.pem", f.dir);
    snprintf(f.agent_key, sizeof(f.agent_key), "%s/agent.key", f.dir);
    f.ctl.poll_interval_ms = 200;
    f.ctl.agent_timeout_ms = AGENT_TIMEOUT_MS;
    hc_test_cluster_pki(&f.ctl, f.agent_cert, f.agent_key);
    f.db = hc_test_ctl_db_crl(&f.ctl); /* crl.pem as hcctld does at start */
    hc_test_standin_start(&f.agent.srv, f.agent_cert, f.agent_key, f.ctl.ca_file, standin_routes,
                          HC_ARRAY_LEN(standin_routes), &f.agent);
    f.agent.port = f.agent.srv.port;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_poller_stop(f->poller);
    hc_ops_pool_stop(f->pool);
    standin_stop(&f->agent);
    hc_db_close(f->db);
    if (f->silent_fd > 0)
        close(f->silent_fd);
    hc_test_rmtree(f->dir);
    return 0;
}

/* --- helpers ------------------------------------------------------------------------------- */

static json_t *node_row(struct fixture *f, const char *name)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err, "SELECT * FROM nodes WHERE name = ?", "s", name);
    assert_non_null(rows);
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    assert_non_null(row);
    return row;
}

static int64_t health_events(struct fixture *f, const char *name)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT COUNT(*) AS n FROM events WHERE type = 'node.health' "
                                    "AND node = ?",
                                    "s", name);
    assert_non_null(rows);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}

/* Checks that the node.health events of node form a chain of real changes (unknown -> ... ->
 * final, each one's from = the previous one's to, never from = to) and returns their number. */
static int64_t check_event_chain(struct fixture *f, const char *name, const char *final)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT details_json FROM events WHERE type = 'node.health' "
                                    "AND node = ? ORDER BY id",
                                    "s", name);
    const char *prev = "unknown";
    size_t i;
    json_t *row;
    assert_non_null(rows);
    assert_true(json_array_size(rows) > 0);
    json_array_foreach(rows, i, row)
    {
        json_t *d = json_object_get(row, "details_json");
        assert_string_equal(hc_json_str(d, "from", ""), prev);
        assert_string_not_equal(hc_json_str(d, "to", ""), prev);
        prev = hc_json_str(d, "to", "");
    }
    assert_string_equal(prev, final);
    int64_t n = (int64_t)json_array_size(rows);
    json_decref(rows);
    return n;
}

static void wait_cycles(struct hc_poller *p, uint64_t n)
{
    uint64_t want = hc_poller_cycles(p) + n;
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    while (hc_poller_cycles(p) < want && hc_mono_ms() < deadline)
        usleep(10 * 1000);
    assert_true(hc_poller_cycles(p) >= want);
}

static void wait_health(struct fixture *f, const char *name, const char *want)
{
    int64_t deadline = hc_mono_ms() + WAIT_MS;
    char have[32] = "";
    while (hc_mono_ms() < deadline) {
        json_t *row = node_row(f, name);
        snprintf(have, sizeof(have), "%s", hc_json_str(row, "health", ""));
        json_decref(row);
        if (strcmp(have, want) == 0)
            return;
        usleep(10 * 1000);
    }
    fail_msg("node %s is %s, not %s", name, have, want);
}

static json_t *interfaces(struct fixture *f, const char *node)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT i.name AS name, i.mtu AS mtu, i.master AS master, "
                                    "i.role AS role, i.addresses_json AS addresses_json "
                                    "FROM interfaces i JOIN nodes n ON n.id = i.node_id "
                                    "WHERE n.name = ? ORDER BY i.name",
                                    "s", node);
    assert_non_null(rows);
    return rows;
}

/* --- tests --------------------------------------------------------------------------------- */

static void check_reachable(struct fixture *f)
{
    json_t *n1 = node_row(f, "n1");
    assert_string_equal(hc_json_str(n1, "health", ""), "reachable");
    assert_true(json_is_null(json_object_get(n1, "health_detail")));
    assert_true(hc_json_int(n1, "last_seen", 0) > 0);
    assert_string_equal(hc_json_str(n1, "agent_version", ""), "0.1.0-test");
    assert_string_equal(hc_json_str(n1, "hostname", ""), "standin-host");
    assert_string_equal(hc_json_str(n1, "service_state", ""), "not_installed");
    assert_int_equal(hc_json_int(n1, "uptime_s", 0), 42);
    assert_true(json_is_integer(json_object_get(n1, "poll_latency_ms")));
    json_decref(n1);

    json_t *ifs = interfaces(f, "n1");
    assert_int_equal(json_array_size(ifs), 2);
    json_t *eth0 = json_array_get(ifs, 0);
    assert_string_equal(hc_json_str(eth0, "name", ""), "eth0");
    assert_int_equal(hc_json_int(eth0, "mtu", 0), 9000);
    assert_string_equal(hc_json_str(eth0, "master", ""), "br0");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(eth0, "addresses_json"), 0)),
        "198.18.0.1/24");
    assert_true(json_is_null(json_object_get(json_array_get(ifs, 1), "master")));
    json_decref(ifs);
}

static void check_unreachable(struct fixture *f, const char *name, const char *detail_has)
{
    json_t *row = node_row(f, name);
    const char *detail = hc_json_str(row, "health_detail", "");
    if (strcmp(hc_json_str(row, "health", ""), "unreachable") != 0)
        fail_msg("node %s: %s (%s), expected unreachable", name, hc_json_str(row, "health", ""),
                 detail);
    if (!strstr(detail, detail_has))
        fail_msg("node %s: health_detail '%s' lacks '%s'", name, detail, detail_has);
    assert_true(json_is_null(json_object_get(row, "last_seen")));
    json_decref(row);
}

/* A node whose agent_url answers with another key (the CA-signed certificate of someone else
 * at the same address), and a node whose URL reaches an agent that says it is another node:
 * neither is reachable, and nothing either says is recorded. */
static void test_poller_pins_node_identity(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char url[128], wrong[HC_PKI_PIN_LEN], right[HC_PKI_PIN_LEN];
    assert_int_equal(hc_pki_file_pin(f->ctl.client_cert, wrong, &err), 0);
    assert_int_equal(hc_pki_file_pin(f->agent_cert, right, &err), 0);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->agent.port);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, "
                               "agent_url, cert_serial, cert_pem, cert_pin, joined_at) VALUES "
                               "('c-test', 'n1', '127.0.0.1', ?, 's1', 'PEM', ?, 0)",
                               "ss", url, wrong),
                     1);
    snprintf(url, sizeof(url), "https://localhost:%d", f->agent.port);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, "
                               "agent_url, cert_serial, cert_pem, cert_pin, joined_at) VALUES "
                               "('c-test', 'n2', 'localhost', ?, 's2', 'PEM', ?, 0)",
                               "ss", url, right),
                     1);
    f->poller = hc_poller_start(&f->ctl, &err);
    if (!f->poller)
        fail_msg("poller start: %s", err.message);
    wait_cycles(f->poller, 3);
    check_unreachable(f, "n1", "public key does not match pinned public key");
    check_unreachable(f, "n2", "says it is node 'n1'");
    json_t *n2 = node_row(f, "n2");
    assert_true(json_is_null(json_object_get(n2, "agent_version")));
    json_decref(n2);
}

/* A failure a call learnt before the node's last answer changes nothing: cluster create's own
 * call saw the agent enrolled and answering while a poll cycle sent before it was still out
 * (seen once as a node 'unreachable' right after a successful create). */
static void test_poller_stale_failure_is_ignored(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    insert_node(f, "n1", f->agent.port);
    int64_t now = hc_now_ms();
    assert_int_equal(hc_db_run(f->db, &err,
                               "UPDATE nodes SET health = 'reachable', "
                               "last_seen = ? WHERE name = 'n1'",
                               "i", now - 100),
                     1);
    json_t *row = node_row(f, "n1");
    int64_t id = hc_json_int(row, "id", 0);
    json_decref(row);
    struct hc_http_call stale = {.ok = 0, .elapsed_ms = 500};
    hc_error_set_transport(&stale.err, HC_E(UNREACHABLE), "connection refused");
    assert_int_equal(hc_poller_record(f->db, id, "n1", &stale, NULL, now, &err), 0);
    row = node_row(f, "n1");
    assert_string_equal(hc_json_str(row, "health", ""), "reachable");
    json_decref(row);
    assert_int_equal(health_events(f, "n1"), 0);
    /* sent after the last answer: it counts */
    struct hc_http_call fresh = {.ok = 0, .elapsed_ms = 50};
    hc_error_set_transport(&fresh.err, HC_E(UNREACHABLE), "connection refused");
    assert_int_equal(hc_poller_record(f->db, id, "n1", &fresh, NULL, now, &err), 0);
    row = node_row(f, "n1");
    assert_string_equal(hc_json_str(row, "health", ""), "unreachable");
    json_decref(row);
}

static void test_poller_health_and_interfaces(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int silent_port;
    char timeout_text[64];
    f->silent_fd = hc_test_silent_listener(&silent_port);
    insert_node(f, "n1", f->agent.port);
    insert_node(f, "n2", hc_test_closed_port());
    insert_node(f, "n3", silent_port);

    struct hc_poller *p = f->poller = hc_poller_start(&f->ctl, &err);
    if (!p)
        fail_msg("poller start: %s", err.message);
    /* A loaded machine may miss the first handshake's deadline: wait for the state, then
     * check that the events describe exactly the changes that happened. */
    wait_health(f, "n1", "reachable");
    wait_cycles(p, 3);
    check_reachable(f);
    check_unreachable(f, "n2", "127.0.0.1");
    snprintf(timeout_text, sizeof(timeout_text), "no answer within %d ms", AGENT_TIMEOUT_MS);
    check_unreachable(f, "n3", timeout_text);
    assert_true(atomic_load(&f->agent.status_calls) >= 3);
    /* refused and silent every time: one change (unknown -> unreachable), so one event */
    assert_int_equal(health_events(f, "n2"), 1);
    assert_int_equal(health_events(f, "n3"), 1);
    int64_t n1_events = check_event_chain(f, "n1", "reachable");

    /* A vanished interface goes; a role set on a kept one survives the replacement. */
    assert_int_equal(hc_db_run(f->db, &err,
                               "UPDATE interfaces SET role = 'storage' "
                               "WHERE name = 'eth0'",
                               ""),
                     1);
    atomic_store(&f->agent.without_lo, 1);
    wait_cycles(p, 2);
    json_t *ifs = interfaces(f, "n1");
    assert_int_equal(json_array_size(ifs), 1);
    assert_string_equal(hc_json_str(json_array_get(ifs, 0), "role", ""), "storage");
    json_decref(ifs);

    /* The agent goes away: one more event for n1, none for the others. */
    standin_stop(&f->agent);
    wait_health(f, "n1", "unreachable");
    wait_cycles(p, 2);
    assert_int_equal(check_event_chain(f, "n1", "unreachable"), n1_events + 1);
    assert_int_equal(health_events(f, "n2"), 1);
    assert_int_equal(health_events(f, "n3"), 1);
    json_t *n1 = node_row(f, "n1");
    assert_true(hc_json_int(n1, "last_seen", 0) > 0); /* kept: when it was last seen */
    assert_true(json_is_null(json_object_get(n1, "poll_latency_ms")));
    json_decref(n1);

    int64_t t0 = hc_mono_ms();
    hc_poller_stop(p);
    f->poller = NULL;
    int64_t took = hc_mono_ms() - t0;
    if (took > 2 * AGENT_TIMEOUT_MS + 500)
        fail_msg("poller took %lld ms to stop", (long long)took);
}

static void test_poller_event_names_change(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    insert_node(f, "n2", hc_test_closed_port());
    struct hc_poller *p = f->poller = hc_poller_start(&f->ctl, &err);
    assert_non_null(p);
    wait_health(f, "n2", "unreachable");
    hc_poller_stop(p);
    f->poller = NULL;
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT message, details_json FROM events "
                                    "WHERE type = 'node.health' AND node = 'n2'",
                                    "");
    assert_int_equal(json_array_size(rows), 1);
    json_t *ev = json_array_get(rows, 0);
    assert_int_equal(strncmp(hc_json_str(ev, "message", ""), "node n2 is unreachable: ", 24), 0);
    json_t *details = json_object_get(ev, "details_json");
    assert_string_equal(hc_json_str(details, "from", ""), "unknown");
    assert_string_equal(hc_json_str(details, "to", ""), "unreachable");
    json_decref(rows);
}

/* --- node.remove --------------------------------------------------------------------------- */

static char *remove_node(struct fixture *f, struct hc_ops_pool *pool, const char *name,
                         const char *want_state)
{
    struct hc_error err = {0};
    char id[32], state_now[32] = "";
    json_t *params = json_pack("{s:s}", "node", name);
    assert_int_equal(hc_ops_submit(f->db, "c-test", HC_OP_NODE_REMOVE, params, "test", id, &err),
                     0);
    json_decref(params);
    hc_ops_pool_kick(pool);
    for (int64_t deadline = hc_mono_ms() + WAIT_MS; hc_mono_ms() < deadline; usleep(10 * 1000)) {
        json_t *rows =
            hc_db_query_json(f->db, &err, "SELECT state FROM operations WHERE id = ?", "s", id);
        snprintf(state_now, sizeof(state_now), "%s",
                 hc_json_str(json_array_get(rows, 0), "state", ""));
        json_decref(rows);
        if (strcmp(state_now, want_state) == 0)
            return strdup(id);
    }
    fail_msg("node.remove of %s is %s, not %s", name, state_now, want_state);
    return NULL;
}

static const char *step_detail(json_t *show, const char *step)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(show, "steps"), i, s)
    {
        if (strcmp(hc_json_str(s, "step", ""), step) == 0)
            return hc_json_str(s, "detail", "");
    }
    return "";
}

static void test_node_remove(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    insert_node(f, "n1", f->agent.port);
    insert_node(f, "n2", hc_test_closed_port());
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO interfaces (node_id, name, mtu, state, updated_at) "
                               "SELECT id, 'eth0', 9000, 'up', 0 FROM nodes WHERE name = 'n1'",
                               ""),
                     1);
    /* Both up as far as the availability budget of node.remove is concerned. */
    assert_int_equal(hc_db_run(f->db, &err, "UPDATE nodes SET health = 'reachable'", ""), 2);
    struct hc_ops_pool *pool = f->pool = hc_ops_pool_start(&f->ctl, 1, &err);
    assert_non_null(pool);

    char *id = remove_node(f, pool, "n1", "succeeded");
    assert_int_equal(atomic_load(&f->agent.leave_calls), 1);
    json_t *show = hc_ops_show(f->db, id, &err);
    assert_string_equal(step_detail(show, "leave"), "agent left");
    assert_non_null(strstr(step_detail(show, "revoke"), "n1")); /* cert serial is the name */
    json_decref(show);
    assert_int_equal(
        hc_test_db_count(f->db, "SELECT COUNT(*) AS n FROM nodes WHERE name = ?", "n1"), 0);
    assert_int_equal(
        hc_test_db_count(f->db, "SELECT COUNT(*) AS n FROM interfaces WHERE name = ?", "eth0"), 0);
    assert_int_equal(
        hc_test_db_count(f->db, "SELECT COUNT(*) AS n FROM revoked_certs WHERE serial = ?", "n1"),
        1);
    assert_int_equal(hc_test_db_count(f->db,
                                      "SELECT COUNT(*) AS n FROM events WHERE type = "
                                      "'node.removed' AND op_id = ?",
                                      id),
                     1);
    free(id);

    /* Dead agent: credentials are revoked all the same, and the step says so. */
    id = remove_node(f, pool, "n2", "succeeded");
    show = hc_ops_show(f->db, id, &err);
    assert_string_equal(step_detail(show, "leave"), "agent unreachable, credentials revoked only");
    json_decref(show);
    assert_int_equal(hc_test_db_count(f->db,
                                      "SELECT COUNT(*) AS n FROM revoked_certs WHERE node_name = ?",
                                      "n2"),
                     1);
    free(id);

    /* Already removed: nothing to do. Never existed: failed with not_found. */
    free(remove_node(f, pool, "n1", "succeeded"));
    assert_int_equal(atomic_load(&f->agent.leave_calls), 1);
    id = remove_node(f, pool, "n9", "failed");
    show = hc_ops_show(f->db, id, &err);
    json_t *e = json_object_get(json_object_get(show, "operation"), "error");
    assert_string_equal(hc_json_str(e, "code", ""), HC_ERR_NOT_FOUND);
    assert_string_equal(hc_json_str(e, "message", ""), "node 'n9' not found");
    json_decref(show);
    free(id);
    hc_ops_pool_stop(pool);
    f->pool = NULL;
}

int main(void)
{
    /* As in hcctld and hcagent: a peer that closes first must not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_poller_health_and_interfaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poller_event_names_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poller_pins_node_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poller_stale_failure_is_ignored, setup, teardown),
    };
    /* Before any thread exists: a network namespace of its own with only lo. The poller sends
     * its echo probes to port 7445 of each node's address, 127.0.0.1 here; an hcagent of a test
     * running beside this one answers them on the host's lo, and the node that never answers
     * HTTPS is then judged 'stalled' (an MTU blackhole), not 'unreachable'. Without root the
     * host's network it is (the test then fails whenever something else answers on 7445). */
    char why[128] = "ip link set lo up failed";
    if (hc_test_unshare_net(why, sizeof(why)) != 0 || system("ip link set lo up") != 0)
        fprintf(stderr, "no network namespace of its own (%s): port 7445 is the host's\n", why);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
