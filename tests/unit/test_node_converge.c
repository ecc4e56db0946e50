/*
 * Unit tests of node add's convergence (controller/ops/node_converge.c) against a real database,
 * through the operations pool, without agents: which storage version the new nodes are given.
 * - no other node runs one: the add ends succeeded after the decision ("none"), no node step is
 *   taken, and the result says the new nodes are no storage members;
 * - every other node runs 1.1 (a new node's own version does not count): 1.1, and an
 *   unuploaded 1.1 fails the run with not_found and the upload hint;
 * - the nodes differ: the latest rolling upgrade's target when it is uploaded (not the highest
 *   version run), else the highest one run;
 * - a second pass in the same operation (a resumed run) reads the decision back from its step
 *   even after the nodes' versions changed.
 * The stage, activate, peers and resync steps are the lab's (tests/lab/t52).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/node_converge.h"
#include "controller/ops/ops.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define WAIT_MS 15000

struct fixture {
    char dir[512];
    struct hc_controller ctl;
    struct hc_db *db;
    struct hc_ops_pool *pool;
};

/* The test kind: node.add's convergence of params.nodes; with params.twice the nodes all turn
 * 2.0 after a first pass and a second pass runs (what a resumed run does). */
static enum hc_op_result converge_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *nodes = json_object_get(hc_op_params(ctx), "nodes");
    const char *names[8];
    size_t n = json_array_size(nodes) < 8 ? json_array_size(nodes) : 8;
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_array_get(nodes, i));
    enum hc_op_result r = hc_node_converge(ctx, names, n, err);
    if (!hc_json_bool(hc_op_params(ctx), "twice", 0))
        return r;
    *err = (struct hc_error){0};
    if (hc_db_run(hc_op_db(ctx), err, "UPDATE nodes SET software_version = '2.0'", "") < 0)
        return HC_OP_FAILED; /* the test sees the database's error instead of the version's */
    return hc_node_converge(ctx, names, n, err);
}

static const struct hc_op_kind converge_kind = {"test.converge", 0, converge_run};
static const struct hc_op_kind *const kinds[] = {&converge_kind, NULL};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_node_converge");
    f.db = hc_test_ctl_db(&f.ctl);
    hc_ops_test_kinds(kinds);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_ops_pool_stop(f->pool);
    hc_ops_test_kinds(NULL);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    return 0;
}

static void add_node(struct fixture *f, const char *name, const char *version)
{
    struct hc_error err = {0};
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.%d:7444", 100 + name[1] - '0');
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, joined_at, health, software_version) "
                               "VALUES ('c-test', ?, '127.0.0.1', ?, ?, 'PEM', ?, 'reachable', ?)",
                               version ? "sssis" : "sssin", name, url, name, hc_now_ms(), version),
                     1);
}

static void upload(struct fixture *f, const char *version)
{
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO bundles (name, version, sha256, signature, signed_by, "
                               "manifest_json, size, uploaded_at) VALUES ('hcstor', ?, 'ab', "
                               "'sig', 'dev', '{}', 1, 1)",
                               "s", version),
                     1);
}

/* An earlier rolling upgrade to `to` (ended: only its params matter here). */
static void upgraded_to(struct fixture *f, const char *to)
{
    struct hc_error err = {0};
    char params[128];
    snprintf(params, sizeof(params), "{\"to_version\": \"%s\"}", to);
    assert_int_equal(hc_db_run(f->db, &err,
                               "INSERT INTO operations (id, cluster_id, kind, params_json, state, "
                               "created_at, updated_at) VALUES ('op-upgrade', 'c-test', "
                               "'upgrade.rolling', ?, 'aborted', ?, ?)",
                               "sii", params, hc_now_ms(), hc_now_ms()),
                     1);
}

/* Runs the test kind on `nodes` until it ends; the shown operation (caller frees). */
static json_t *run(struct fixture *f, json_t *params, const char *want_state)
{
    struct hc_error err = {0};
    char id[32];
    assert_int_equal(hc_ops_submit(f->db, "c-test", "test.converge", params, "test", id, &err), 0);
    json_decref(params);
    if (!f->pool)
        assert_non_null(f->pool = hc_ops_pool_start(&f->ctl, 1, &err));
    hc_ops_pool_kick(f->pool);
    for (int64_t deadline = hc_mono_ms() + WAIT_MS;; usleep(20 * 1000)) {
        json_t *show = hc_ops_show(f->db, id, &err);
        assert_non_null(show);
        const char *st = hc_json_str(json_object_get(show, "operation"), "state", "");
        if (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "aborted")) {
            if (strcmp(st, want_state) != 0)
                fail_msg("test.converge ended %s, want %s", st, want_state);
            return show;
        }
        json_decref(show);
        if (hc_mono_ms() > deadline)
            fail_msg("test.converge did not end");
    }
}

/* The detail of step `step` (with no node), "" when not taken; the number of steps too. */
static const char *detail(const json_t *show, const char *step, size_t *steps)
{
    size_t i;
    json_t *s;
    const char *d = "";
    *steps = json_array_size(json_object_get(show, "steps"));
    json_array_foreach(json_object_get(show, "steps"), i,
                       s) if (!strcmp(hc_json_str(s, "step", ""), step)) d =
        hc_json_str(s, "detail", "");
    return d;
}

/* Runs the convergence of n4 (params by default) to want_state; its decision must be want. */
static json_t *decide(struct fixture *f, json_t *params, const char *want_state, const char *want)
{
    size_t steps;
    json_t *show = run(f, params ? params : json_pack("{s:[s]}", "nodes", "n4"), want_state);
    assert_string_equal(detail(show, "storage_version", &steps), want);
    return show;
}

static void test_no_version_yet_stops_after_enrollment(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    size_t steps;
    add_node(f, "n1", NULL);
    add_node(f, "n2", NULL);
    add_node(f, "n4", "0.9"); /* the new node: what it runs does not count */
    json_t *show = decide(f, NULL, "succeeded", "none: no node runs a storage version yet");
    detail(show, "storage_version", &steps);
    assert_int_equal(steps, 1); /* no stage, activate, peers or resync */
    json_t *rows = hc_db_query_json(f->db, &err, "SELECT result_json FROM operations WHERE id = ?",
                                    "s", hc_json_str(json_object_get(show, "operation"), "id", ""));
    const json_t *res =
        json_object_get(json_object_get(json_array_get(rows, 0), "result_json"), "storage");
    assert_true(json_is_null(json_object_get(res, "version")));
    assert_true(json_is_false(json_object_get(res, "members")));
    assert_non_null(strstr(hc_json_str(res, "note", ""), "not storage members"));
    json_decref(rows);
    json_decref(show);
}

static void test_the_version_every_other_node_runs(void **state)
{
    struct fixture *f = *state;
    add_node(f, "n1", "1.1");
    add_node(f, "n2", "1.1");
    add_node(f, "n4", NULL);
    json_t *show = decide(f, NULL, "failed", "1.1: the version every other node runs");
    const json_t *e = json_object_get(json_object_get(show, "operation"), "error");
    assert_string_equal(hc_json_str(e, "code", ""), "not_found");
    assert_non_null(strstr(hc_json_str(e, "message", ""), "'1.1'"));
    assert_non_null(strstr(hc_json_str(e, "hint", ""), "hcctl software upload"));
    json_decref(show);
}

static void test_versions_differ_latest_upgrade_target(void **state)
{
    struct fixture *f = *state;
    add_node(f, "n1", "1.0");
    add_node(f, "n2", "1.1");
    add_node(f, "n4", NULL);
    upgraded_to(f, "1.0"); /* rolled back half-way from 1.1, say */
    upload(f, "1.0");
    json_decref(decide(f, NULL, "failed",
                       "1.0: the nodes run different versions; the latest upgrade's target"));
}

static void test_versions_differ_target_gone_highest(void **state)
{
    struct fixture *f = *state;
    add_node(f, "n1", "1.9");
    add_node(f, "n2", "1.10");
    add_node(f, "n3", "1.2");
    add_node(f, "n4", NULL);
    upgraded_to(f, "1.2"); /* its bundle since removed */
    json_decref(
        decide(f, NULL, "failed", "1.10: the nodes run different versions; the highest one run"));
}

static void test_a_resumed_run_keeps_the_decision(void **state)
{
    struct fixture *f = *state;
    add_node(f, "n1", "1.1");
    add_node(f, "n4", NULL);
    json_t *show = decide(f, json_pack("{s:[s], s:b}", "nodes", "n4", "twice", 1), "failed",
                          "1.1: the version every other node runs");
    /* the second pass looked for 1.1 again, not for the 2.0 every node now runs */
    const json_t *e = json_object_get(json_object_get(show, "operation"), "error");
    assert_non_null(strstr(hc_json_str(e, "message", ""), "'1.1'"));
    json_decref(show);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_version_yet_stops_after_enrollment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_version_every_other_node_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_differ_latest_upgrade_target, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_versions_differ_target_gone_highest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_resumed_run_keeps_the_decision, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
