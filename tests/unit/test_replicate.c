/*
 * The replication hooks of the database (db/replicate.h) on real SQLite files: what a commit
 * hands the sender (inserts, updates, deletes, cascades, autocommit statements, a statement that
 * failed inside a transaction), what it does not (local-only columns, WITHOUT ROWID tables, the
 * fence generation, a rolled-back transaction), a sender that refuses (the commit becomes a
 * rollback: nothing is visible), and the rebuild's insert of images, hostile ones included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "db/replicate.h"
#include "tests/unit/testdir.h"

#define MAX_SEEN 256

struct seen {
    int commits;
    int refuse;
    size_t n;
    char table[MAX_SEEN][64];
    int64_t rowid[MAX_SEEN];
    char *image[MAX_SEEN];
};

static struct seen S;

static void seen_reset(void)
{
    for (size_t i = 0; i < S.n; i++)
        free(S.image[i]);
    memset(&S, 0, sizeof(S));
}

static int sender(void *arg, const struct hc_db_change *ch, size_t n)
{
    (void)arg;
    S.commits++;
    for (size_t i = 0; i < n && S.n < MAX_SEEN; i++, S.n++) {
        snprintf(S.table[S.n], sizeof(S.table[S.n]), "%s", ch[i].table);
        S.rowid[S.n] = ch[i].rowid;
        S.image[S.n] = ch[i].image ? strdup(ch[i].image) : NULL;
    }
    return S.refuse ? -1 : 0;
}

/* The change to table's row rowid, or NULL; *deleted when it was a delete. */
static const char *change_of(const char *table, int64_t rowid, int *found)
{
    *found = 0;
    for (size_t i = 0; i < S.n; i++)
        if (strcmp(S.table[i], table) == 0 && S.rowid[i] == rowid) {
            *found = 1;
            return S.image[i];
        }
    return NULL;
}

static const char *const local_columns[] = {"nodes.last_seen", "nodes.uptime_s", NULL};

struct fx {
    char *dir;
    char path[4200];
    struct hc_db *db;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = hc_test_mkdtemp("replicate");
    snprintf(f->path, sizeof(f->path), "%s/hcctld.db", f->dir);
    hc_db_replicate_start(sender, NULL, local_columns);
    struct hc_error err = {0};
    f->db = hc_db_open(f->path, &err);
    if (!f->db)
        fail_msg("%s", err.message);
    seen_reset();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    hc_db_close(f->db);
    hc_db_replicate_stop();
    hc_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    seen_reset();
    return 0;
}

static void add_cluster_and_node(struct hc_db *db)
{
    struct hc_error err = {0};
    assert_int_equal(hc_db_begin(db, &err), 0);
    assert_true(hc_db_run(db, &err,
                          "INSERT INTO clusters (id, name, created_at) VALUES ('c', 'x', 1)",
                          "") >= 0);
    assert_true(
        hc_db_run(db, &err,
                  "INSERT INTO nodes (id, cluster_id, name, address, agent_url, cert_serial, "
                  "cert_pem, joined_at) VALUES (7, 'c', 'n1', '10.0.0.1', 'https://a', 's', "
                  "'pem', 1)",
                  "") >= 0);
    assert_int_equal(hc_db_commit(db, &err), 0);
}

static void test_commit_sends_row_images(void **state)
{
    struct fx *f = *state;
    add_cluster_and_node(f->db);
    assert_int_equal(S.commits, 1);
    int found;
    const char *img = change_of("nodes", 7, &found);
    assert_true(found);
    assert_non_null(img);
    json_t *j = json_loads(img, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "rowid")), 7);
    assert_int_equal(json_integer_value(json_object_get(j, "id")), 7);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "n1");
    json_decref(j);
    assert_true(change_of("clusters", 1, &found) && found);
    /* change_counters (WITHOUT ROWID) moved with the triggers: never sent */
    for (size_t i = 0; i < S.n; i++)
        assert_string_not_equal(S.table[i], "change_counters");
}

static void test_local_columns_alone_are_not_sent(void **state)
{
    struct fx *f = *state;
    struct hc_error err = {0};
    add_cluster_and_node(f->db);
    seen_reset();
    assert_true(hc_db_run(f->db, &err, "UPDATE nodes SET last_seen = 5, uptime_s = 9 WHERE id = 7",
                          "") == 1);
    assert_int_equal(S.n, 0); /* autocommit, only local columns: nothing to send */
    assert_true(
        hc_db_run(f->db, &err, "UPDATE nodes SET health = 'reachable', last_seen = 6", "") == 1);
    int found;
    const char *img = change_of("nodes", 7, &found);
    assert_true(found && img && strstr(img, "\"health\":\"reachable\"") &&
                strstr(img, "\"last_seen\":6"));
}

static void test_deletes_cascades_and_failed_statements(void **state)
{
    struct fx *f = *state;
    struct hc_error err = {0};
    add_cluster_and_node(f->db);
    assert_true(hc_db_run(f->db, &err,
                          "INSERT INTO nodes (id, cluster_id, name, address, agent_url, "
                          "cert_serial, cert_pem, joined_at) VALUES (8, 'c', 'n2', 'x', 'y', 's', "
                          "'p', 1)",
                          "") == 1);
    assert_true(hc_db_run(f->db, &err,
                          "INSERT INTO interfaces (node_id, name, mtu, state, updated_at) VALUES "
                          "(8, 'eth0', 9000, 'up', 1)",
                          "") == 1);
    seen_reset();
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    /* A statement that fails half-way inside the transaction: row 7 is renamed, then row 8's
     * rename breaks UNIQUE(name) and SQLite undoes the statement. The pre-update hook saw row
     * 7 renamed; the image read at commit must say what is really there. */
    assert_true(hc_db_run(f->db, &err, "UPDATE nodes SET name = 'same' WHERE id IN (7, 8)", "") <
                0);
    assert_true(hc_db_run(f->db, &err, "DELETE FROM nodes WHERE id = 8", "") == 1);
    assert_int_equal(hc_db_commit(f->db, &err), 0);
    int found;
    const char *img7 = change_of("nodes", 7, &found);
    assert_true(found && img7);
    assert_non_null(strstr(img7, "\"name\":\"n1\"")); /* not 'same' */
    assert_null(change_of("nodes", 8, &found));
    assert_true(found); /* deleted */
    assert_null(change_of("interfaces", 1, &found));
    assert_true(found); /* the cascade's delete too */
}

static void test_rollback_and_fence_generation_send_nothing(void **state)
{
    struct fx *f = *state;
    struct hc_error err = {0};
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    assert_true(hc_db_run(f->db, &err,
                          "INSERT INTO clusters (id, name, created_at) VALUES ('z', 'z', 1)",
                          "") == 1);
    hc_db_rollback(f->db);
    assert_true(
        hc_db_run(f->db, &err, "UPDATE fence_generation SET generation = generation + 1", "") == 1);
    assert_int_equal(S.n, 0);
    assert_int_equal(S.commits, 0);
}

static void test_refusing_sender_rolls_back(void **state)
{
    struct fx *f = *state;
    struct hc_error err = {0};
    S.refuse = 1;
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    assert_true(hc_db_run(f->db, &err,
                          "INSERT INTO clusters (id, name, created_at) VALUES ('r', 'r', 1)",
                          "") == 1);
    assert_true(hc_db_commit(f->db, &err) < 0);
    hc_db_rollback(f->db);
    assert_true(hc_db_run(f->db, &err,
                          "INSERT INTO clusters (id, name, created_at) VALUES ('q', 'q', 1)",
                          "") < 0); /* autocommit refused too */
    S.refuse = 0;
    json_t *rows = hc_db_query_json(f->db, &err, "SELECT id FROM clusters", "");
    assert_int_equal(json_array_size(rows), 0); /* neither is visible */
    json_decref(rows);
}

static void test_rebuild_inserts_images_and_refuses_hostile_ones(void **state)
{
    struct fx *f = *state;
    struct hc_error err = {0};
    add_cluster_and_node(f->db);
    char *img = hc_db_row_image(f->db, "nodes", 7, &err);
    assert_non_null(img);
    char *cimg = hc_db_row_image(f->db, "clusters", 1, &err);
    assert_non_null(cimg);
    /* another, unreplicated database receives them */
    hc_db_replicate_stop();
    char path[4300];
    snprintf(path, sizeof(path), "%s/copy.db", f->dir);
    struct hc_db *copy = hc_db_open(path, &err);
    assert_non_null(copy);
    json_t *j = json_loads(img, 0, NULL), *cj = json_loads(cimg, 0, NULL);
    assert_int_equal(hc_db_row_insert(copy, "clusters", cj, &err), 0);
    assert_int_equal(hc_db_row_insert(copy, "nodes", j, &err), 0);
    char *again = hc_db_row_image(copy, "nodes", 7, &err);
    assert_string_equal(again, img);
    free(again);
    /* hostile: unknown table, a table never replicated, a column this schema lacks, no rowid */
    assert_true(hc_db_row_insert(copy, "no_such_table", j, &err) < 0);
    assert_true(hc_db_row_insert(copy, "change_counters", j, &err) < 0);
    assert_true(hc_db_row_insert(copy, "fence_generation", j, &err) < 0);
    json_object_set_new(j, "evil", json_string("x"));
    assert_true(hc_db_row_insert(copy, "nodes", j, &err) < 0);
    assert_non_null(strstr(err.message, "evil"));
    json_object_del(j, "evil");
    json_object_del(j, "rowid");
    assert_true(hc_db_row_insert(copy, "nodes", j, &err) < 0);
    json_decref(j);
    json_decref(cj);
    free(img);
    free(cimg);
    hc_db_close(copy);
    hc_db_replicate_start(sender, NULL, local_columns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_sends_row_images, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_columns_alone_are_not_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deletes_cascades_and_failed_statements, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rollback_and_fence_generation_send_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refusing_sender_rolls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_inserts_images_and_refuses_hostile_ones, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
