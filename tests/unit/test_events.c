/* Unit tests for controller/state/events.c against a real SQLite file: append, list with since /
 * limit / type / node, the rendering of an EVENT, transactions, the append-only guard, and the
 * retention's pruning (only events older than the cutoff, which only grows). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "controller/state/events.h"
#include "db/db.h"
#include "tests/unit/support/support.h"

static int setup(void **state)
{
    return hc_test_db_setup(state, "test_events");
}

static int teardown(void **state)
{
    return hc_test_db_teardown(state);
}

/* Three events: two about n1 (one api.call), one cluster-wide. */
static void add_three(struct hc_db *db)
{
    struct hc_error err = {0};
    if (hc_event_add(db, "node.joined", "n1", NULL, "n1", json_pack("{s:s}", "agent_url", "u"),
                     &err, "node '%s' joined", "n1") != 0 ||
        hc_event_add(db, "api.call", "n1", NULL, "admin",
                     json_pack("{s:s, s:i}", "method", "DELETE", "status", 202), &err,
                     "DELETE /v1/nodes/n1 -> %d", 202) != 0 ||
        hc_event_add(db, "op.state", NULL, "op-000000000001", NULL, NULL, &err, "operation done") !=
            0)
        fail_msg("add: %s", err.message);
}

static json_t *list_ok(struct hc_db *db, int64_t since, int limit, const char *type,
                       const char *node)
{
    struct hc_error err = {0};
    json_t *out = hc_events_list(db, since, limit, type, node, &err);
    if (!out)
        fail_msg("list: %s", err.message);
    return out;
}

static json_t *events_of(json_t *list)
{
    return json_object_get(list, "events");
}

static int64_t id_at(json_t *list, size_t i)
{
    return json_integer_value(json_object_get(json_array_get(events_of(list), i), "id"));
}

static void test_add_and_render(void **state)
{
    struct hc_test_db *f = *state;
    int64_t before = hc_now_ms();
    add_three(f->db);
    json_t *list = list_ok(f->db, 0, 100, NULL, NULL);
    assert_int_equal(json_array_size(events_of(list)), 3);
    json_t *ev = json_array_get(events_of(list), 0);
    const char *keys[] = {"id", "ts", "type", "node", "op_id", "actor", "message", "details"};
    assert_int_equal(json_object_size(ev), HC_ARRAY_LEN(keys));
    for (size_t i = 0; i < HC_ARRAY_LEN(keys); i++)
        assert_non_null(json_object_get(ev, keys[i]));
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "node.joined");
    assert_string_equal(json_string_value(json_object_get(ev, "message")), "node 'n1' joined");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(ev, "details"), "agent_url")), "u");
    assert_true(json_is_null(json_object_get(ev, "op_id")));
    /* ts: RFC 3339 UTC with milliseconds, not before the test started */
    const char *ts = json_string_value(json_object_get(ev, "ts"));
    assert_int_equal(strlen(ts), 24);
    assert_int_equal(ts[23], 'Z');
    char floor_ts[32];
    hc_time_format(before - before % 1000, floor_ts, sizeof(floor_ts));
    assert_true(strcmp(ts, floor_ts) >= 0);
    /* the third has no node, no actor and no details: nulls and an empty object */
    json_t *third = json_array_get(events_of(list), 2);
    assert_true(json_is_null(json_object_get(third, "node")));
    assert_true(json_is_null(json_object_get(third, "actor")));
    assert_string_equal(json_string_value(json_object_get(third, "op_id")), "op-000000000001");
    assert_int_equal(json_object_size(json_object_get(third, "details")), 0);
    /* oldest first, last_id = the last one returned */
    assert_true(id_at(list, 0) < id_at(list, 1) && id_at(list, 1) < id_at(list, 2));
    assert_int_equal(json_integer_value(json_object_get(list, "last_id")), id_at(list, 2));
    json_decref(list);
}

static void test_since_and_limit(void **state)
{
    struct hc_test_db *f = *state;
    add_three(f->db);
    json_t *all = list_ok(f->db, 0, 100, NULL, NULL);
    int64_t first = id_at(all, 0), last = id_at(all, 2);
    json_decref(all);

    json_t *after_first = list_ok(f->db, first, 100, NULL, NULL);
    assert_int_equal(json_array_size(events_of(after_first)), 2);
    assert_int_equal(id_at(after_first, 0), first + 1);
    json_decref(after_first);

    json_t *one = list_ok(f->db, 0, 1, NULL, NULL);
    assert_int_equal(json_array_size(events_of(one)), 1);
    assert_int_equal(json_integer_value(json_object_get(one, "last_id")), first);
    json_decref(one);

    /* nothing new: an empty list, and last_id stays where the follower asked from */
    json_t *none = list_ok(f->db, last, 100, NULL, NULL);
    assert_int_equal(json_array_size(events_of(none)), 0);
    assert_int_equal(json_integer_value(json_object_get(none, "last_id")), last);
    json_decref(none);

    struct hc_error err = {0};
    assert_null(hc_events_list(f->db, 0, 0, NULL, NULL, &err));
    assert_int_equal(err.status, 400);
    assert_null(hc_events_list(f->db, 0, 1001, NULL, NULL, &err));
    assert_int_equal(err.status, 400);
}

static void test_filters(void **state)
{
    struct hc_test_db *f = *state;
    add_three(f->db);
    json_t *calls = list_ok(f->db, 0, 100, "api.call", NULL);
    assert_int_equal(json_array_size(events_of(calls)), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(events_of(calls), 0), "actor")), "admin");
    json_decref(calls);

    json_t *n1 = list_ok(f->db, 0, 100, NULL, "n1");
    assert_int_equal(json_array_size(events_of(n1)), 2);
    json_decref(n1);

    json_t *both = list_ok(f->db, 0, 100, "node.joined", "n1");
    assert_int_equal(json_array_size(events_of(both)), 1);
    json_decref(both);

    json_t *none = list_ok(f->db, 0, 100, "node.joined", "n2");
    assert_int_equal(json_array_size(events_of(none)), 0);
    json_decref(none);
}

static void test_caller_transaction(void **state)
{
    struct hc_test_db *f = *state;
    struct hc_error err = {0};
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    assert_int_equal(hc_event_add(f->db, "test.rolled_back", NULL, NULL, NULL, NULL, &err, "x"), 0);
    hc_db_rollback(f->db);
    json_t *list = list_ok(f->db, 0, 100, "test.rolled_back", NULL);
    assert_int_equal(json_array_size(events_of(list)), 0);
    json_decref(list);
}

static void test_append_only(void **state)
{
    struct hc_test_db *f = *state;
    add_three(f->db);
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err, "UPDATE events SET message = 'rewritten'", NULL), -1);
    assert_int_equal(hc_db_run(f->db, &err, "DELETE FROM events", NULL), -1);
    json_t *list = list_ok(f->db, 0, 100, NULL, NULL);
    assert_int_equal(json_array_size(events_of(list)), 3);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(events_of(list), 0), "message")),
        "node 'n1' joined");
    json_decref(list);
}

/* `total` events, the first `old` of them a day old (inserted with that ts: UPDATE is refused). */
static void add_aged(struct hc_db *db, int old, int total, int64_t now)
{
    struct hc_error err = {0};
    for (int i = 0; i < total; i++)
        assert_int_equal(hc_db_run(db, &err,
                                   "INSERT INTO events (ts, type, message) VALUES (?, 'test.e', ?)",
                                   "is", i < old ? now - 86400000 : now, "m"),
                         1);
}

static void test_prune(void **state)
{
    struct hc_test_db *f = *state;
    struct hc_error err = {0};
    int64_t now = hc_now_ms();
    int old = HC_EVENTS_PRUNE_BATCH + 7; /* more than one batch */
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    add_aged(f->db, old, old + 3, now);
    assert_int_equal(hc_db_commit(f->db, &err), 0);
    /* one batch allowed: the rest waits for the next call */
    assert_int_equal(hc_events_prune(f->db, now - 3600000, 1, &err), HC_EVENTS_PRUNE_BATCH);
    assert_int_equal(hc_events_prune(f->db, now - 3600000, 4, &err), 7);
    assert_int_equal(hc_events_prune(f->db, now - 3600000, 4, &err), 0);
    json_t *list = list_ok(f->db, 0, 1000, NULL, NULL);
    /* the 3 recent ones and the two events.pruned records */
    assert_int_equal(json_array_size(events_of(list)), 5);
    json_decref(list);
    list = list_ok(f->db, 0, 100, "events.pruned", NULL);
    assert_int_equal(json_array_size(events_of(list)), 2);
    json_t *last = json_array_get(events_of(list), 1);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(last, "details"), "removed")), 7);
    json_decref(list);
    /* recent events stay guarded: no DELETE gets past the cutoff, nor lowers it */
    assert_int_equal(hc_db_run(f->db, &err, "DELETE FROM events", NULL), -1);
    assert_int_equal(
        hc_db_run(f->db, &err, "UPDATE events_retention SET cutoff_ms = ?", "i", (int64_t)0), -1);
    assert_int_equal(hc_events_prune(f->db, now - 7200000, 4, &err), 0);
    list = list_ok(f->db, 0, 1000, NULL, NULL);
    assert_int_equal(json_array_size(events_of(list)), 5);
    json_decref(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_add_and_render, setup, teardown),
        cmocka_unit_test_setup_teardown(test_since_and_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caller_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
