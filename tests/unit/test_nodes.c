/* Unit tests for controller/state/nodes.c: typed rows (NULL columns, by name, id and agent_url,
 * filters and order), the writers (inside the caller's transaction), the counts; and the rule
 * that SQL names the nodes table only there (the allow-list below says where else, and why). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/state/nodes.h"
#include "db/db.h"
#include "tests/unit/testdir.h"

struct fixture {
    char *dir;
    struct hc_db *db;
};

static void add_node(struct hc_db *db, const char *name, const char *address)
{
    struct hc_error err = {0};
    char url[128];
    snprintf(url, sizeof(url), "https://%s:9443", address);
    struct hc_node_new n = {.cluster_id = "c1",
                            .name = name,
                            .address = address,
                            .agent_url = url,
                            .cert_serial = "01",
                            .cert_pem = "PEM",
                            .cert_pin = "sha256//pin"};
    if (hc_node_insert(db, &n, &err) < 0)
        fail_msg("insert %s: %s", name, err.message);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct hc_error err = {0};
    if (!f || !(f->dir = hc_test_mkdtemp("test_nodes")))
        return -1;
    char *path = hc_path_join(f->dir, "hcctld.db");
    f->db = hc_db_open(path, &err);
    free(path);
    if (!f->db || hc_db_run(f->db, &err,
                            "INSERT INTO clusters (id, name, created_at) VALUES "
                            "('c1', 'one', 1)",
                            "") < 0)
        return -1;
    /* Inserted out of order: every list comes back sorted by name. */
    add_node(f->db, "n3", "10.0.0.3");
    add_node(f->db, "n1", "10.0.0.1");
    add_node(f->db, "n2", "10.0.0.2");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void get_ok(struct hc_db *db, const char *name, struct hc_node_row *row)
{
    struct hc_error err = {0};
    if (hc_node_row_get(db, name, row, &err) != 1)
        fail_msg("get %s: %s", name, err.message);
}

static void test_row_columns(void **state)
{
    struct fixture *f = *state;
    struct hc_node_row row;
    get_ok(f->db, "n1", &row);
    assert_true(row.id > 0);
    assert_string_equal(row.cluster_id, "c1");
    assert_string_equal(row.address, "10.0.0.1");
    assert_string_equal(row.agent_url, "https://10.0.0.1:9443");
    assert_string_equal(row.cert_pin, "sha256//pin");
    assert_string_equal(row.health, "unknown"); /* the defaults of the schema */
    assert_string_equal(row.maintenance, "none");
    assert_string_equal(row.state, "joined");
    assert_string_equal(row.desired_state, "member");
    /* NULL columns: NULL text, 0 integers. */
    assert_null(row.hostname);
    assert_null(row.ssh_endpoint);
    assert_null(row.maintenance_op);
    assert_null(row.software_version);
    assert_int_equal(row.last_seen, 0);
    assert_int_equal(row.maintenance_since, 0);
    assert_true(row.joined_at > 0);
    int64_t id = row.id;
    hc_node_row_clear(&row);
    assert_null(row.name);

    struct hc_error err = {0};
    assert_int_equal(hc_node_row_get_id(f->db, id, &row, &err), 1);
    assert_string_equal(row.name, "n1");
    hc_node_row_clear(&row);
    assert_int_equal(hc_node_row_by_url(f->db, "https://10.0.0.2:9443", &row, &err), 1);
    assert_string_equal(row.name, "n2");
    hc_node_row_clear(&row);
    assert_int_equal(hc_node_row_get(f->db, "nope", &row, &err), 0);
    assert_null(row.name);
    assert_int_equal(hc_node_row_get_id(f->db, 999, &row, &err), 0);
    /* the poller's one-column read */
    char health[32] = "";
    assert_int_equal(hc_node_health_get(f->db, id, health, sizeof(health), &err), 1);
    assert_string_equal(health, "unknown");
    assert_int_equal(hc_node_health_get(f->db, 999, health, sizeof(health), &err), 0);
    assert_int_equal(hc_node_row_by_url(f->db, "https://10.0.0.1:9443/", &row, &err), 0);
}

/* The names hc_nodes_rows returns for f, joined by ','. */
static void names(struct hc_db *db, const struct hc_node_filter *f, char *out, size_t len)
{
    struct hc_error err = {0};
    struct hc_node_row *rows;
    size_t n, at = 0;
    if (hc_nodes_rows(db, f, &rows, &n, &err) < 0)
        fail_msg("rows: %s", err.message);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", rows[i].name);
    hc_node_rows_free(rows, n);
}

static void test_rows_filters(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char got[128];
    names(f->db, NULL, got, sizeof(got));
    assert_string_equal(got, "n1,n2,n3");
    names(f->db, &(struct hc_node_filter){.except = "n2"}, got, sizeof(got));
    assert_string_equal(got, "n1,n3");
    names(f->db, &(struct hc_node_filter){.address = "10.0.0.3"}, got, sizeof(got));
    assert_string_equal(got, "n3");
    names(f->db, &(struct hc_node_filter){.address = "10.0.0.3", .except = "n3"}, got, sizeof(got));
    assert_string_equal(got, "");

    assert_int_equal(hc_node_set_removing(f->db, "n1", &err), 0);
    names(f->db, &(struct hc_node_filter){.state = "joined"}, got, sizeof(got));
    assert_string_equal(got, "n2,n3");
    names(f->db, &(struct hc_node_filter){.desired_state = "member"}, got, sizeof(got));
    assert_string_equal(got, "n2,n3");

    assert_int_equal(hc_node_set_software_version(f->db, "n2", "1.1", 5, &err), 0);
    assert_int_equal(hc_node_set_software_version(f->db, "n3", "1.1", 5, &err), 0);
    names(f->db, &(struct hc_node_filter){.software_version = "1.1"}, got, sizeof(got));
    assert_string_equal(got, "n2,n3");
    names(f->db, &(struct hc_node_filter){.previous_software_version = "1.1"}, got, sizeof(got));
    assert_string_equal(got, "");
}

static void test_writers(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_node_row row;

    /* Maintenance: the first since is kept until "none" clears mode, op and since. */
    assert_int_equal(hc_node_set_maintenance(f->db, "n1", "entering", "full", "op-1", &err), 0);
    get_ok(f->db, "n1", &row);
    int64_t since = row.maintenance_since;
    assert_true(since > 0);
    assert_string_equal(row.maintenance_mode, "full");
    assert_string_equal(row.maintenance_op, "op-1");
    hc_node_row_clear(&row);
    assert_int_equal(hc_node_set_maintenance(f->db, "n1", "active", "full", "op-1", &err), 0);
    get_ok(f->db, "n1", &row);
    assert_string_equal(row.maintenance, "active");
    assert_int_equal(row.maintenance_since, since);
    hc_node_row_clear(&row);
    assert_int_equal(hc_node_set_maintenance(f->db, "n1", "none", "full", "op-1", &err), 0);
    get_ok(f->db, "n1", &row);
    assert_string_equal(row.maintenance, "none");
    assert_null(row.maintenance_mode);
    assert_null(row.maintenance_op);
    assert_int_equal(row.maintenance_since, 0);
    hc_node_row_clear(&row);

    /* Bootstrap: install_mode NULL keeps the one stored. */
    assert_int_equal(
        hc_node_set_bootstrap(f->db, "n1", "root@h:22", "SHA256:x", "eth1", "systemd", &err), 0);
    assert_int_equal(hc_node_set_bootstrap(f->db, "n1", "root@h:22", NULL, "eth1", NULL, &err), 0);
    get_ok(f->db, "n1", &row);
    assert_string_equal(row.install_mode, "systemd");
    assert_string_equal(row.storage_interface, "eth1");
    assert_null(row.ssh_host_key);
    hc_node_row_clear(&row);

    /* A poll asked before an operation's observation leaves the service alone. */
    get_ok(f->db, "n2", &row);
    int64_t id = row.id;
    hc_node_row_clear(&row);
    assert_int_equal(hc_node_set_service_state(f->db, "n2", "running", 1000, &err), 0);
    struct hc_node_poll p = {.health = "reachable",
                             .service_state = "stopped",
                             .software_version = "0.9",
                             .asked_at = 999,
                             .agent_version = "a1",
                             .hostname = "host2",
                             .uptime_s = -1,
                             .latency_ms = 7,
                             .now = 2000};
    assert_int_equal(hc_node_store_poll(f->db, id, &p, &err), 0);
    get_ok(f->db, "n2", &row);
    assert_string_equal(row.service_state, "running");
    assert_string_equal(row.health, "reachable");
    assert_string_equal(row.hostname, "host2");
    assert_int_equal(row.last_seen, 2000);
    assert_int_equal(row.uptime_s, 0); /* NULLIF(-1): not reported */
    assert_int_equal(row.poll_latency_ms, 7);
    hc_node_row_clear(&row);
    p.asked_at = 1001;
    p.hostname = NULL; /* keeps host2 */
    assert_int_equal(hc_node_store_poll(f->db, id, &p, &err), 0);
    get_ok(f->db, "n2", &row);
    assert_string_equal(row.service_state, "stopped");
    assert_string_equal(row.hostname, "host2");
    hc_node_row_clear(&row);

    /* A failure learnt before the node last answered changes nothing. */
    assert_int_equal(hc_node_set_unanswered(f->db, id, "unreachable", "gone", 1999, &err), 0);
    assert_int_equal(hc_node_set_unanswered(f->db, id, "unreachable", "gone", 2000, &err), 1);
    get_ok(f->db, "n2", &row);
    assert_string_equal(row.health_detail, "gone");
    assert_int_equal(row.poll_latency_ms, 0);
    hc_node_row_clear(&row);

    assert_int_equal(hc_node_set_cert_pin(f->db, id, "sha256//other", &err), 0);
    get_ok(f->db, "n2", &row);
    assert_string_equal(row.cert_pin, "sha256//other");
    hc_node_row_clear(&row);

    assert_int_equal(hc_node_delete(f->db, "n2", &err), 0);
    assert_int_equal(hc_node_row_get(f->db, "n2", &row, &err), 0);
    assert_int_equal(hc_node_delete(f->db, "n2", &err), 0); /* gone already: not an error */
}

/* Readers and writers run in the caller's transaction: its writes are seen, and undone. */
static void test_in_transaction(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    struct hc_node_row row;
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    assert_int_equal(hc_node_set_maintenance(f->db, "n3", "active", "none", "op-2", &err), 0);
    get_ok(f->db, "n3", &row);
    assert_string_equal(row.maintenance, "active");
    hc_node_row_clear(&row);
    hc_db_rollback(f->db);
    get_ok(f->db, "n3", &row);
    assert_string_equal(row.maintenance, "none");
    hc_node_row_clear(&row);
}

static void test_count_by(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    assert_int_equal(hc_node_set_unanswered(f->db, 1, "unreachable", NULL, 0, &err), 1);
    json_t *rows = hc_nodes_count_by(f->db, "health", &err);
    assert_non_null(rows);
    char *text = json_dumps(rows, JSON_COMPACT);
    assert_string_equal(text, "[{\"v\":\"unknown\",\"n\":2},{\"v\":\"unreachable\",\"n\":1}]");
    free(text);
    json_decref(rows);
    assert_null(hc_nodes_count_by(f->db, "cert_pem", &err));
    assert_int_equal(err.status, 500);
}

/* --- the rule: SQL names the nodes table in controller/state/nodes.c ------------------------ */

/* Statements that stay beside their one purpose: how many each file may have. */
static const struct {
    const char *path;
    int max;
} allowed[] = {
    {"controller/state/nodes.c", -1}, /* the home */
    /* net show: a node's health with its storage interface's addresses (interfaces) */
    {"controller/api/res_net.c", 1},
    /* the upgrade's node list, joined with upgrade_nodes (its own progress) */
    {"controller/ops/op_upgrade.c", 1},
    /* the rolling engine's queue, joined with upgrade_nodes (every rolling kind's progress) */
    {"controller/ops/rolling.c", 1},
    /* a configuration change's nodes, joined with upgrade_nodes (its progress) */
    {"controller/ops/op_config.c", 1},
    /* the poll cycle's targets with each one's management MTU (interfaces) */
    {"controller/remote/poller.c", 1},
};

static char source_root[4096];
static char offenders[4096];

/* Statements naming the table in text: "FROM nodes", "JOIN nodes", "UPDATE nodes" and
 * "INTO nodes", the word ending there (upgrade_nodes and nodes_x are other names). */
static int count_statements(const char *text)
{
    static const char *const verbs[] = {"FROM nodes", "JOIN nodes", "UPDATE nodes", "INTO nodes"};
    int n = 0;
    for (size_t v = 0; v < HC_ARRAY_LEN(verbs); v++)
        for (const char *p = text; (p = strstr(p, verbs[v])); p += strlen(verbs[v])) {
            char after = p[strlen(verbs[v])];
            n += !(isalnum((unsigned char)after) || after == '_');
        }
    return n;
}

static int scan_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    size_t len = strlen(path);
    if (flag != FTW_F || len < 2 || (strcmp(path + len - 2, ".c") && strcmp(path + len - 2, ".h")))
        return 0;
    FILE *fp = fopen(path, "r");
    char *text = fp ? calloc(1, (size_t)st->st_size + 1) : NULL;
    if (!text || fread(text, 1, (size_t)st->st_size, fp) != (size_t)st->st_size) {
        if (fp)
            fclose(fp);
        free(text);
        return -1;
    }
    fclose(fp);
    const char *rel = path + strlen(source_root) + 1;
    int n = count_statements(text), max = 0;
    free(text);
    for (size_t i = 0; i < HC_ARRAY_LEN(allowed); i++)
        if (strcmp(rel, allowed[i].path) == 0)
            max = allowed[i].max;
    if (max >= 0 && n > max) {
        size_t at = strlen(offenders);
        snprintf(offenders + at, sizeof(offenders) - at, " %s (%d, allowed %d)", rel, n, max);
    }
    return 0;
}

static void test_sql_names_nodes_only_at_home(void **state)
{
    (void)state;
    /* This file is tests/unit/test_nodes.c under the source root (CMake compiles it by its
     * absolute path). */
    const char *self = __FILE__, *tail = "/tests/unit/test_nodes.c";
    size_t len = strlen(self), tlen = strlen(tail);
    assert_true(self[0] == '/' && len > tlen && strcmp(self + len - tlen, tail) == 0);
    snprintf(source_root, sizeof(source_root), "%.*s", (int)(len - tlen), self);
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/controller", source_root);
    offenders[0] = '\0';
    assert_int_equal(nftw(dir, scan_file, 16, FTW_PHYS), 0);
    if (offenders[0])
        fail_msg("SQL on the nodes table outside controller/state/nodes.c (give it a typed "
                 "reader or writer there, or say in this test's allow-list why it stays):%s",
                 offenders);
    /* The scan sees what it should: nodes.c itself holds statements. */
    assert_true(count_statements("SELECT id FROM nodes WHERE") == 1);
    assert_true(count_statements("FROM upgrade_nodes un JOIN nodes n") == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_row_columns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_by, setup, teardown),
        cmocka_unit_test(test_sql_names_nodes_only_at_home),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
