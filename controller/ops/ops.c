/*
 * Operations: finding kinds in their table, submission under the cluster lease, user control
 * (pause, resume, abort), rendering for the API, and the worker pool that runs operations as
 * durable, resumable state machines (see controller/ops/ops.h and docs/operations.md).
 *
 * Invariants kept here:
 * - a terminal state (succeeded, failed, aborted) is never overwritten: every UPDATE of
 *   operations.state is guarded by "state NOT IN terminal";
 * - the cluster_lease row of a disruptive operation exists from submit until the operation
 *   reaches a terminal state, and is deleted in the same transaction that writes that state;
 * - a terminal operation has no step 'running' (that transaction ends the steps left so);
 * - every state change writes an event in the same transaction.
 */
#include "controller/ops/ops.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/op_state.h"
#include "common/util.h"
#include "controller/ops/op_agent_upgrade.h"
#include "controller/ops/test_hooks.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define HC_OPS_WAKE_MS 500
#define HC_OPS_COMPLETE_BACKOFF_MS 5000
#define HC_OPS_TERMINAL "('succeeded','failed','aborted')"

/* --- kinds --------------------------------------------------------------------------------- */

/* Set by unit tests before the pool starts, read-only afterwards: no lock needed. */
static const struct hc_op_kind *const *ops_test_kinds;

void hc_ops_test_kinds(const struct hc_op_kind *const *kinds)
{
    ops_test_kinds = kinds;
}

static const struct hc_op_kind *kind_in(const struct hc_op_kind *const *kinds, const char *name)
{
    for (size_t i = 0; kinds && kinds[i]; i++) {
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    }
    return NULL;
}

const struct hc_op_kind *hc_ops_kind(const char *name)
{
    if (!name)
        return NULL;
    const struct hc_op_kind *kind = kind_in(hc_op_kinds, name);
    return kind ? kind : kind_in(ops_test_kinds, name);
}

/* --- shared helpers ------------------------------------------------------------------------ */

/* The one row of a query, as a new reference; NULL with err (404 when absent and what given). */
static json_t *ops_row(json_t *rows, const char *what, struct hc_error *err)
{
    json_t *row = json_incref(json_array_get(rows, 0));
    if (rows && !row && what) {
        hc_error_set(err, HC_E(NOT_FOUND), "operation '%s' not found", what);
        hc_error_hint(err, "see 'hcctl operation list'");
    }
    json_decref(rows);
    return row;
}

/* Moves op id from state `from` to terminal state `to` inside the caller's transaction:
 * records the error (may be NULL), finished_at, releases the cluster lease and writes op.state.
 * Does nothing (returns 0) when the operation is already terminal. */
static int ops_finish_locked(struct hc_db *db, const char *id, const char *kind, const char *from,
                             const char *to, const struct hc_error *fail, struct hc_error *err)
{
    int64_t now = hc_now_ms();
    const char *code = fail ? (fail->code[0] ? fail->code : HC_ERR_INTERNAL) : NULL;
    const char *message = fail ? fail->message : NULL;
    const char *hint = fail && fail->hint[0] ? fail->hint : NULL;
    int n = hc_db_run(db, err,
                      "UPDATE operations SET state = ?, finished_at = ?, updated_at = ?, "
                      "control = NULL, waiting_on = NULL, lease_holder = NULL, error_code = ?, "
                      "error_message = ?, error_hint = ?, "
                      /* the last step stays on record only where it says where things stopped */
                      "progress_json = CASE WHEN ? = 'succeeded' "
                      "THEN '{\"node\":null,\"step\":null}' ELSE progress_json END "
                      "WHERE id = ? AND state NOT IN " HC_OPS_TERMINAL,
                      "siisssss", to, now, now, code, message, hint, to, id);
    if (n <= 0)
        return n < 0 ? -1 : 0;
    if (hc_db_run(db, err, "DELETE FROM cluster_lease WHERE op_id = ?", "s", id) < 0)
        return -1;
    /* A step still 'running' here is one whose end could not be recorded (the database refused
     * the write: the run then fails with that error) or one a dead controller left before an
     * abort: an ended operation has no step running. */
    if (hc_db_run(db, err,
                  "UPDATE operation_steps SET state = 'failed', finished_at = ?, detail = "
                  "COALESCE(detail, 'its end was not recorded: the operation ended first') "
                  "WHERE op_id = ? AND state = 'running'",
                  "is", now, id) < 0)
        return -1;
    json_t *details = json_pack("{s:s, s:s, s:s}", "kind", kind, "from", from, "to", to);
    if (fail) {
        json_object_set_new(
            details, "error",
            json_pack("{s:s, s:s, s:s?}", "code", code, "message", message, "hint", hint));
        return hc_event_add(db, "op.state", NULL, id, "controller", details, err,
                            "operation %s (%s) failed: %s", id, kind, message);
    }
    return hc_event_add(db, "op.state", NULL, id, "controller", details, err,
                        "operation %s (%s) %s", id, kind, to);
}

/* Moves op id between two non-terminal states inside the caller's transaction. */
static int ops_move_locked(struct hc_db *db, const char *id, const char *kind, const char *from,
                           const char *to, const char *actor, struct hc_error *err)
{
    int n = hc_db_run(db, err,
                      "UPDATE operations SET state = ?, control = NULL, lease_holder = NULL, "
                      "updated_at = ? WHERE id = ? AND state = ?",
                      "siss", to, hc_now_ms(), id, from);
    if (n <= 0)
        return n < 0 ? -1 : 0;
    return hc_event_add(db, "op.state", NULL, id, actor,
                        json_pack("{s:s, s:s, s:s}", "kind", kind, "from", from, "to", to), err,
                        "operation %s (%s) is %s", id, kind, to);
}

/* --- submit -------------------------------------------------------------------------------- */

/* 409 when the cluster lease is held by an operation that has not ended. A lease left by a
 * terminal operation (which should not happen, but a hand-edited database might) is stale. */
static int ops_lease_check(struct hc_db *db, const char *cluster_id, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT l.op_id AS op_id, o.kind AS kind, o.state AS state "
                                    "FROM cluster_lease l LEFT JOIN operations o ON o.id = l.op_id "
                                    "WHERE l.cluster_id = ?",
                                    "s", cluster_id);
    if (!rows)
        return -1;
    json_t *row = json_array_get(rows, 0);
    const char *state = hc_json_str(row, "state", NULL);
    int rc = 0;
    if (row && state && !hc_op_state_terminal(state)) {
        const char *op = hc_json_str(row, "op_id", "?");
        rc = hc_error_set(err, HC_E(CONFLICT), "operation %s (%s) is %s", op,
                          hc_json_str(row, "kind", "?"), state);
        hc_error_hint(err, "wait for it ('hcctl operation wait %s') or abort it", op);
    }
    json_decref(rows);
    return rc;
}

static int ops_insert(struct hc_db *db, const char *id, const char *cluster_id,
                      const struct hc_op_kind *kind, const char *params_text,
                      const char *requested_by, struct hc_error *err)
{
    int64_t now = hc_now_ms();
    if (hc_db_run(
            db, err,
            "INSERT INTO operations (id, cluster_id, kind, params_json, state, disruptive, "
            "requested_by, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
            "ssssisii", id, cluster_id, kind->name, params_text, (int64_t)kind->disruptive,
            requested_by, now, now) < 0)
        return -1;
    if (kind->disruptive &&
        hc_db_run(db, err,
                  "INSERT OR REPLACE INTO cluster_lease (cluster_id, op_id, acquired_at) "
                  "VALUES (?, ?, ?)",
                  "ssi", cluster_id, id, now) < 0)
        return -1;
    return hc_event_add(db, "op.created", NULL, id, requested_by,
                        json_pack("{s:s, s:b}", "kind", kind->name, "disruptive", kind->disruptive),
                        err, "operation %s (%s) created", id, kind->name);
}

/* Disruptive work is refused while an agent it would drive speaks an API this controller does
 * not: the node the parameters name ("node"), else every node (docs/agent-upgrade.md). Not the
 * agent upgrade, the way out, which speaks to agents of any API version; nor a forced node
 * removal, the other way out (its leave step copes with an agent that does not answer). */
static int ops_api_gate(struct hc_db *db, const struct hc_op_kind *kind, const json_t *params,
                        struct hc_error *err)
{
    char what[96];
    if (!kind->disruptive || !strcmp(kind->name, HC_AGENT_UPGRADE_KIND) ||
        (!strcmp(kind->name, "node.remove") && hc_json_bool(params, "force", 0)))
        return 0;
    snprintf(what, sizeof(what), "run %s", kind->name);
    return hc_nodes_api_gate(db, hc_json_str(params, "node", NULL), what, err);
}

int hc_ops_submit(struct hc_db *db, const char *cluster_id, const char *kind_name,
                  const json_t *params, const char *requested_by, char id_out[32],
                  struct hc_error *err)
{
    const struct hc_op_kind *kind = hc_ops_kind(kind_name);
    char hex[13], id[32];
    char *params_text = NULL;
    int rc = -1;

    if (!kind)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "operation kind '%s' is unknown",
                            kind_name ? kind_name : "");
    if (params && !json_is_object(params))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "operation parameters must be a JSON object");
    if (hc_random_hex(hex, 6) != 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot generate an operation id");
    snprintf(id, sizeof(id), "op-%s", hex);
    params_text = params ? hc_json_dump(params) : strdup("{}");
    if (!params_text) {
        hc_error_set(err, HC_E(INTERNAL), "cannot serialise operation parameters");
        goto cleanup;
    }
    if (hc_db_begin(db, err) != 0)
        goto cleanup;
    if (kind->disruptive && ops_lease_check(db, cluster_id, err) != 0)
        goto cleanup;
    if (ops_api_gate(db, kind, params, err) != 0)
        goto cleanup;
    if (ops_insert(db, id, cluster_id, kind, params_text, requested_by, err) != 0)
        goto cleanup;
    if (hc_db_commit(db, err) != 0)
        goto cleanup;
    hc_test_crash_point(id, "created");
    snprintf(id_out, 32, "%s", id);
    rc = 0;
cleanup:
    if (rc != 0)
        hc_db_rollback(db);
    free(params_text);
    return rc;
}

/* --- control ------------------------------------------------------------------------------- */

static int ops_refuse(const char *action, const char *id, const char *state, struct hc_error *err)
{
    hc_error_set(err, HC_E(CONFLICT), "cannot %s operation %s: it is %s", action, id, state);
    return hc_error_hint(err, "see 'hcctl operation show %s'", id);
}

static int ops_request(struct hc_db *db, const char *id, const char *kind, const char *control,
                       struct hc_error *err)
{
    if (hc_db_run(db, err,
                  "UPDATE operations SET control = ?, updated_at = ? WHERE id = ? "
                  "AND state = 'running'",
                  "sis", control, hc_now_ms(), id) < 0)
        return -1;
    const char *what = control ? control : "resume";
    return hc_event_add(db, "op.control", NULL, id, NULL,
                        json_pack("{s:s, s:s}", "kind", kind, "action", what), err,
                        "%s of operation %s (%s) requested", what, id, kind);
}

static int ops_pause(struct hc_db *db, const char *id, const char *kind, const char *state,
                     const char *control, struct hc_error *err)
{
    if (strcmp(state, "pending") == 0)
        return ops_move_locked(db, id, kind, "pending", "paused", NULL, err);
    if (strcmp(state, "running") != 0)
        return ops_refuse("pause", id, state, err);
    if (control && strcmp(control, "abort") == 0)
        return ops_refuse("pause", id, "being aborted", err);
    return ops_request(db, id, kind, "pause", err);
}

/* Resume of a running operation whose pause was requested but not yet honoured withdraws the
 * request: the user gets what they asked for without waiting for the checkpoint. */
static int ops_resume(struct hc_db *db, const char *id, const char *kind, const char *state,
                      const char *control, struct hc_error *err)
{
    if (strcmp(state, "paused") == 0)
        return ops_move_locked(db, id, kind, "paused", "pending", NULL, err);
    if (strcmp(state, "running") == 0 && control && strcmp(control, "pause") == 0)
        return ops_request(db, id, kind, NULL, err);
    return ops_refuse("resume", id, state, err);
}

static int ops_abort(struct hc_db *db, const char *id, const char *kind, const char *state,
                     struct hc_error *err)
{
    if (strcmp(state, "pending") == 0 || strcmp(state, "paused") == 0)
        return ops_finish_locked(db, id, kind, state, "aborted", NULL, err);
    if (strcmp(state, "running") == 0)
        return ops_request(db, id, kind, "abort", err);
    return ops_refuse("abort", id, state, err);
}

int hc_ops_control(struct hc_db *db, const char *id, const char *action, struct hc_error *err)
{
    json_t *row = NULL;
    int rc = -1;
    if (!action || (strcmp(action, "pause") && strcmp(action, "resume") && strcmp(action, "abort")))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "operation action '%s' is unknown",
                            action ? action : "");
    if (hc_db_begin(db, err) != 0)
        return -1;
    row = ops_row(hc_db_query_json(
                      db, err, "SELECT state, control, kind FROM operations WHERE id = ?", "s", id),
                  id, err);
    if (!row)
        goto cleanup;
    const char *state = hc_json_str(row, "state", "");
    const char *control = hc_json_str(row, "control", NULL);
    const char *kind = hc_json_str(row, "kind", "");
    if (strcmp(action, "pause") == 0)
        rc = ops_pause(db, id, kind, state, control, err);
    else if (strcmp(action, "resume") == 0)
        rc = ops_resume(db, id, kind, state, control, err);
    else
        rc = ops_abort(db, id, kind, state, err);
    if (rc == 0)
        rc = hc_db_commit(db, err);
cleanup:
    if (rc != 0)
        hc_db_rollback(db);
    json_decref(row);
    return rc;
}

/* --- rendering ----------------------------------------------------------------------------- */

#define HC_OPS_COLUMNS                                                                             \
    "id, kind, state, disruptive, params_json, requested_by, waiting_on, progress_json, "          \
    "error_code, error_message, error_hint, created_at, started_at, finished_at"

static json_t *ops_time(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    char buf[40];
    if (!json_is_integer(v))
        return json_null();
    return json_string(hc_time_format(json_integer_value(v), buf, sizeof(buf)));
}

/* New reference to row[key], or JSON null when absent. */
static json_t *ops_copy(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* New reference to the JSON object in row[key] (a parsed *_json column), or {}. */
static json_t *ops_object(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return json_is_object(v) ? json_incref(v) : json_object();
}

static json_t *ops_render_error(const json_t *row)
{
    if (!json_is_string(json_object_get(row, "error_code")))
        return json_null();
    return json_pack("{s:o, s:o, s:o}", "code", ops_copy(row, "error_code"), "message",
                     ops_copy(row, "error_message"), "hint", ops_copy(row, "error_hint"));
}

/* OP of docs/api.md from a row of HC_OPS_COLUMNS. */
static json_t *ops_render_op(const json_t *row)
{
    return json_pack("{s:o, s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
                     ops_copy(row, "id"), "kind", ops_copy(row, "kind"), "state",
                     ops_copy(row, "state"), "disruptive", (int)hc_json_int(row, "disruptive", 0),
                     "params", ops_object(row, "params_json"), "requested_by",
                     ops_copy(row, "requested_by"), "waiting_on", ops_copy(row, "waiting_on"),
                     "progress", ops_object(row, "progress_json"), "error", ops_render_error(row),
                     "created_at", ops_time(row, "created_at"), "started_at",
                     ops_time(row, "started_at"), "finished_at", ops_time(row, "finished_at"));
}

static json_t *ops_render_step(const json_t *row)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "seq", ops_copy(row, "seq"),
                     "node", ops_copy(row, "node"), "step", ops_copy(row, "step"), "state",
                     ops_copy(row, "state"), "attempts", ops_copy(row, "attempts"), "started_at",
                     ops_time(row, "started_at"), "finished_at", ops_time(row, "finished_at"),
                     "detail", ops_copy(row, "detail"));
}

/* Renders every row of rows with fn into a new array; steals rows. */
static json_t *ops_render_all(json_t *rows, json_t *(*fn)(const json_t *))
{
    json_t *out = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) json_array_append_new(out, fn(row));
    json_decref(rows);
    return out;
}

json_t *hc_ops_show(struct hc_db *db, const char *id, struct hc_error *err)
{
    json_t *row =
        ops_row(hc_db_query_json(db, err, "SELECT " HC_OPS_COLUMNS " FROM operations WHERE id = ?",
                                 "s", id),
                id, err);
    if (!row)
        return NULL;
    json_t *steps = hc_db_query_json(db, err,
                                     "SELECT seq, node, step, state, attempts, started_at, "
                                     "finished_at, detail FROM operation_steps WHERE op_id = ? "
                                     "ORDER BY seq",
                                     "s", id);
    json_t *out = NULL;
    if (steps)
        out = json_pack("{s:o, s:o}", "operation", ops_render_op(row), "steps",
                        ops_render_all(steps, ops_render_step));
    json_decref(row);
    return out;
}

json_t *hc_ops_list(struct hc_db *db, const char *state, struct hc_error *err)
{
    json_t *rows;
    if (state && hc_op_state_parse(state) < 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "operation state '%s' is unknown", state);
        hc_error_hint(err, "use pending, running, paused, succeeded, failed or aborted");
        return NULL;
    }
    if (state)
        rows = hc_db_query_json(db, err,
                                "SELECT " HC_OPS_COLUMNS " FROM operations WHERE state = ? "
                                "ORDER BY created_at DESC, rowid DESC",
                                "s", state);
    else
        rows = hc_db_query_json(db, err,
                                "SELECT " HC_OPS_COLUMNS " FROM operations "
                                "ORDER BY created_at DESC, rowid DESC",
                                "");
    if (!rows)
        return NULL;
    return json_pack("{s:o}", "operations", ops_render_all(rows, ops_render_op));
}

json_t *hc_ops_active(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT " HC_OPS_COLUMNS " FROM operations WHERE state IN "
                                    "('pending', 'running', 'paused') ORDER BY created_at, rowid",
                                    "");
    return rows ? ops_render_all(rows, ops_render_op) : NULL;
}

/* --- worker pool --------------------------------------------------------------------------- */

struct hc_ops_worker {
    struct hc_ops_pool *pool;
    struct hc_db *db; /* this thread's own connection */
    pthread_t thread;
    int started;
    unsigned seen_kicks;
    char name[64]; /* lease_holder */
};

struct hc_ops_pool {
    struct hc_controller *ctl;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned kicks;          /* guarded by mu: bumped by hc_ops_pool_kick so no wake-up is lost */
    struct hc_stop stopping; /* hc_ops_pool_stop was called */
    int nworkers;
    struct hc_ops_worker *workers;
};

struct hc_op_ctx {
    struct hc_ops_pool *pool;
    struct hc_db *db;
    char id[32];
    char kind[64];
    json_t *params;
};

static int ops_stopping(const struct hc_ops_pool *pool)
{
    return hc_stop_requested(&pool->stopping) || hc_stop_requested(&pool->ctl->stopping);
}

/* Operations left 'running' by a controller that died (or stopped at a checkpoint) go back to
 * 'pending', or straight to the state a pending control asked for. */
static int ops_recover(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = NULL, *row;
    size_t i;
    int rc = -1;
    if (hc_db_begin(db, err) != 0)
        return -1;
    rows = hc_db_query_json(db, err,
                            "SELECT id, kind, control FROM operations WHERE state = 'running'", "");
    if (!rows)
        goto cleanup;
    json_array_foreach(rows, i, row)
    {
        const char *id = hc_json_str(row, "id", ""), *kind = hc_json_str(row, "kind", "");
        const char *control = hc_json_str(row, "control", "");
        const char *to = strcmp(control, "abort") == 0   ? "aborted"
                         : strcmp(control, "pause") == 0 ? "paused"
                                                         : "pending";
        int r;
        if (strcmp(to, "aborted") == 0)
            r = ops_finish_locked(db, id, kind, "running", "aborted", NULL, err);
        else if (strcmp(to, "paused") == 0)
            r = ops_move_locked(db, id, kind, "running", "paused", "controller", err);
        else
            r = ops_move_locked(db, id, kind, "running", "pending", "controller", err) ||
                hc_event_add(db, "op.resumed", NULL, id, "controller",
                             json_pack("{s:s}", "kind", kind), err,
                             "operation %s (%s) resumed after a controller restart", id, kind);
        if (r != 0)
            goto cleanup;
        HC_INFO("operation %s (%s) was running when the controller stopped: now %s", id, kind, to);
    }
    rc = hc_db_commit(db, err);
cleanup:
    if (rc != 0)
        hc_db_rollback(db);
    json_decref(rows);
    return rc;
}

/* Claims the oldest pending operation. Returns its row {id, kind, params_json} (new reference),
 * or NULL when there is none or on error (logged). */
static json_t *ops_claim(struct hc_ops_worker *w)
{
    struct hc_error err = {0};
    json_t *row = NULL;
    int64_t now = hc_now_ms();
    int ok = 0;
    /* A plain read first: idle workers then never queue for the write lock (which the poller
     * holds while it records a cycle). */
    json_t *any = hc_db_query_json(
        w->db, &err, "SELECT 1 AS n FROM operations WHERE state = 'pending' LIMIT 1", "");
    size_t pending = json_array_size(any);
    json_decref(any);
    if (pending == 0) {
        ok = err.code[0] == '\0';
        goto cleanup;
    }
    if (hc_db_begin(w->db, &err) != 0)
        goto cleanup;
    row = ops_row(hc_db_query_json(w->db, &err,
                                   "SELECT id, kind, params_json FROM operations "
                                   "WHERE state = 'pending' ORDER BY created_at, rowid LIMIT 1",
                                   ""),
                  NULL, &err);
    if (!row) {
        ok = err.code[0] == '\0';
        goto cleanup;
    }
    const char *id = hc_json_str(row, "id", ""), *kind = hc_json_str(row, "kind", "");
    if (hc_db_run(w->db, &err,
                  "UPDATE operations SET state = 'running', lease_holder = ?, "
                  "resume_on_node = NULL, started_at = COALESCE(started_at, ?), updated_at = ? "
                  "WHERE id = ? AND state = 'pending'",
                  "siis", w->name, now, now, id) != 1 ||
        hc_event_add(w->db, "op.state", NULL, id, "controller",
                     json_pack("{s:s, s:s, s:s}", "kind", kind, "from", "pending", "to", "running"),
                     &err, "operation %s (%s) is running", id, kind) != 0 ||
        hc_db_commit(w->db, &err) != 0)
        goto cleanup;
    hc_test_crash_point(id, "running");
    ok = 1;
cleanup:
    if (!ok || !row) {
        hc_db_rollback(w->db);
        if (err.code[0])
            HC_WARN("%s cannot claim an operation: %s", w->name, err.message);
        json_decref(row);
        return NULL;
    }
    return row;
}

/* Writes the outcome of a run, once. PAUSED leaves the operation 'running' when the controller
 * is stopping and nobody asked for a pause, so that the next start resumes it. */
static int ops_complete_once(struct hc_op_ctx *ctx, enum hc_op_result r,
                             const struct hc_error *fail, struct hc_error *errp)
{
    struct hc_error err = {0};
    json_t *row = NULL;
    int rc = -1;
    if (hc_db_begin(ctx->db, &err) != 0)
        goto cleanup;
    row = ops_row(hc_db_query_json(ctx->db, &err, "SELECT control FROM operations WHERE id = ?",
                                   "s", ctx->id),
                  ctx->id, &err);
    if (!row)
        goto cleanup;
    const char *control = hc_json_str(row, "control", "");
    if (r == HC_OP_PAUSED && strcmp(control, "abort") == 0)
        r = HC_OP_ABORTED; /* an abort that arrived after the pause was honoured */
    if (r == HC_OP_SUCCEEDED)
        rc = ops_finish_locked(ctx->db, ctx->id, ctx->kind, "running", "succeeded", NULL, &err);
    else if (r == HC_OP_FAILED)
        rc = ops_finish_locked(ctx->db, ctx->id, ctx->kind, "running", "failed", fail, &err);
    else if (r == HC_OP_ABORTED)
        rc = ops_finish_locked(ctx->db, ctx->id, ctx->kind, "running", "aborted", NULL, &err);
    else if (strcmp(control, "pause") != 0 && ops_stopping(ctx->pool))
        rc = hc_db_run(ctx->db, &err,
                       "UPDATE operations SET lease_holder = NULL, updated_at = ? "
                       "WHERE id = ? AND state = 'running'",
                       "is", hc_now_ms(), ctx->id) < 0;
    else
        rc = ops_move_locked(ctx->db, ctx->id, ctx->kind, "running", "paused", "controller", &err);
    if (rc == 0)
        rc = hc_db_commit(ctx->db, &err);
    if (rc == 0)
        hc_test_crash_point(ctx->id, r == HC_OP_SUCCEEDED ? "succeeded"
                                     : r == HC_OP_FAILED  ? "failed"
                                     : r == HC_OP_ABORTED ? "aborted"
                                                          : "stopped or paused");
cleanup:
    if (rc != 0) {
        hc_db_rollback(ctx->db);
        *errp = err;
    }
    json_decref(row);
    return rc != 0 ? -1 : 0;
}

/* Writes the outcome of a run. A database that refuses the write (disk full, I/O error, busy)
 * is asked again, backing off up to HC_OPS_COMPLETE_BACKOFF_MS, for as long as the pool runs:
 * given up, the operation would stay 'running' with no worker until the next start. */
static void ops_complete(struct hc_op_ctx *ctx, enum hc_op_result r, const struct hc_error *fail)
{
    int64_t backoff = 100;
    for (int attempt = 1;; attempt++) {
        struct hc_error err = {0};
        if (ops_complete_once(ctx, r, fail, &err) == 0)
            return;
        if (err.status == 404) {
            HC_ERROR("cannot record the outcome of operation %s: %s", ctx->id, err.message);
            return;
        }
        if (ops_stopping(ctx->pool)) {
            HC_ERROR("cannot record the outcome of operation %s: %s; it stays running and the "
                     "next start runs it again",
                     ctx->id, err.message);
            return;
        }
        HC_ERROR("cannot record the outcome of operation %s (attempt %d, again in %lld ms): %s",
                 ctx->id, attempt, (long long)backoff, err.message);
        for (int64_t slept = 0; slept < backoff && !ops_stopping(ctx->pool); slept += 50)
            usleep(50 * 1000);
        backoff =
            backoff * 2 < HC_OPS_COMPLETE_BACKOFF_MS ? backoff * 2 : HC_OPS_COMPLETE_BACKOFF_MS;
    }
}

static void ops_run(struct hc_ops_worker *w, const json_t *row)
{
    struct hc_op_ctx ctx = {.pool = w->pool, .db = w->db};
    struct hc_error err = {0};
    enum hc_op_result r;
    snprintf(ctx.id, sizeof(ctx.id), "%s", hc_json_str(row, "id", ""));
    snprintf(ctx.kind, sizeof(ctx.kind), "%s", hc_json_str(row, "kind", ""));
    json_t *params = json_object_get(row, "params_json");
    ctx.params = json_is_object(params) ? json_incref(params) : json_object();
    const struct hc_op_kind *kind = hc_ops_kind(ctx.kind);
    int64_t t0 = hc_mono_ms();
    if (!kind) {
        hc_error_set(&err, HC_E(UNKNOWN_KIND),
                     "operation kind '%s' is not known to this controller", ctx.kind);
        r = HC_OP_FAILED;
    } else {
        HC_INFO("operation %s (%s) running on %s", ctx.id, ctx.kind, w->name);
        r = kind->run(&ctx, &err);
    }
    if (r == HC_OP_FAILED && !err.message[0])
        hc_error_set(&err, HC_E(INTERNAL), "operation %s failed without a reason", ctx.id);
    HC_INFO("operation %s (%s) returned %s after %lld ms", ctx.id, ctx.kind,
            r == HC_OP_SUCCEEDED ? "succeeded"
            : r == HC_OP_FAILED  ? "failed"
            : r == HC_OP_PAUSED  ? "paused"
                                 : "aborted",
            (long long)(hc_mono_ms() - t0));
    ops_complete(&ctx, r, &err);
    json_decref(ctx.params);
}

/* Sleeps until kicked, stopped, or HC_OPS_WAKE_MS passed (the periodic wake finds work that
 * another process or connection queued without kicking). */
static void ops_wait(struct hc_ops_worker *w)
{
    struct hc_ops_pool *pool = w->pool;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)HC_OPS_WAKE_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&pool->mu);
    while (pool->kicks == w->seen_kicks && !hc_stop_requested(&pool->stopping)) {
        if (pthread_cond_timedwait(&pool->cv, &pool->mu, &until) != 0)
            break;
    }
    w->seen_kicks = pool->kicks;
    pthread_mutex_unlock(&pool->mu);
}

static void *ops_worker_main(void *arg)
{
    struct hc_ops_worker *w = arg;
    while (!ops_stopping(w->pool)) {
        json_t *row = ops_claim(w);
        if (row) {
            ops_run(w, row);
            json_decref(row);
            continue;
        }
        ops_wait(w);
    }
    return NULL;
}

void hc_ops_pool_kick(struct hc_ops_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->kicks++;
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
}

void hc_ops_pool_stop(struct hc_ops_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    hc_stop_request(&pool->stopping);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->nworkers; i++) {
        if (pool->workers[i].started)
            pthread_join(pool->workers[i].thread, NULL);
        hc_db_close(pool->workers[i].db);
    }
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool);
}

static struct hc_ops_pool *ops_pool_new(struct hc_controller *ctl, int nworkers)
{
    struct hc_ops_pool *pool = calloc(1, sizeof(*pool));
    pthread_condattr_t attr;
    if (!pool)
        return NULL;
    pool->workers = calloc((size_t)nworkers, sizeof(*pool->workers));
    if (!pool->workers) {
        free(pool);
        return NULL;
    }
    pool->ctl = ctl;
    pool->nworkers = nworkers;
    hc_stop_reset(&pool->stopping);
    pthread_mutex_init(&pool->mu, NULL);
    /* Monotonic, so that a wall-clock jump neither stalls nor spins the workers. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->cv, &attr);
    pthread_condattr_destroy(&attr);
    return pool;
}

struct hc_ops_pool *hc_ops_pool_start(struct hc_controller *ctl, int nworkers, struct hc_error *err)
{
    struct hc_ops_pool *pool = ops_pool_new(ctl, nworkers > 0 ? nworkers : 1);
    int ok = 0;
    hc_test_hooks_init(); /* the environment is read once, before any operation runs */
    if (!pool) {
        hc_error_set(err, HC_E(INTERNAL), "cannot allocate the operation pool");
        return NULL;
    }
    for (int i = 0; i < pool->nworkers; i++) {
        struct hc_ops_worker *w = &pool->workers[i];
        w->pool = pool;
        snprintf(w->name, sizeof(w->name), "hcctld-%ld/worker-%d", (long)getpid(), i);
        if (!(w->db = hc_db_open(ctl->db_path, err)))
            goto cleanup;
    }
    /* Before any worker runs, so that no worker can claim what recovery is still moving. */
    if (ops_recover(pool->workers[0].db, err) != 0)
        goto cleanup;
    for (int i = 0; i < pool->nworkers; i++)
        hc_test_watch_db(pool->workers[i].db); /* the operations' writes, not the recovery's */
    for (int i = 0; i < pool->nworkers; i++) {
        struct hc_ops_worker *w = &pool->workers[i];
        if (pthread_create(&w->thread, NULL, ops_worker_main, w) != 0) {
            hc_error_set(err, HC_E(INTERNAL), "cannot start operation worker %d", i);
            goto cleanup;
        }
        w->started = 1;
    }
    HC_DEBUG("operation pool started with %d workers", pool->nworkers);
    ok = 1;
cleanup:
    if (!ok) {
        hc_ops_pool_stop(pool);
        return NULL;
    }
    return pool;
}

/* --- inside a run function ----------------------------------------------------------------- */

struct hc_db *hc_op_db(struct hc_op_ctx *ctx)
{
    return ctx->db;
}

struct hc_controller *hc_op_controller(struct hc_op_ctx *ctx)
{
    return ctx->pool->ctl;
}

const char *hc_op_id(const struct hc_op_ctx *ctx)
{
    return ctx->id;
}

const json_t *hc_op_params(const struct hc_op_ctx *ctx)
{
    return ctx->params;
}

void hc_op_waiting(struct hc_op_ctx *ctx, const char *fmt, ...)
{
    struct hc_error err = {0};
    char text[512];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
    }
    hc_test_quiet(1);
    int rc = hc_db_run(ctx->db, &err,
                       "UPDATE operations SET waiting_on = ?, updated_at = ? WHERE id = ?", "sis",
                       fmt ? text : NULL, hc_now_ms(), ctx->id);
    hc_test_quiet(0);
    if (rc < 0)
        HC_WARN("cannot record what operation %s waits on: %s", ctx->id, err.message);
}

enum hc_op_result hc_op_checkpoint(struct hc_op_ctx *ctx)
{
    struct hc_error err = {0};
    enum hc_op_result r = HC_OP_SUCCEEDED;
    if (ops_stopping(ctx->pool))
        return HC_OP_PAUSED;
    json_t *rows = hc_db_query_json(
        ctx->db, &err, "SELECT state, control FROM operations WHERE id = ?", "s", ctx->id);
    if (!rows) {
        /* A busy database is no reason to stop work: the next checkpoint reads it again. */
        HC_WARN("cannot read the controls of operation %s: %s", ctx->id, err.message);
        return HC_OP_SUCCEEDED;
    }
    json_t *row = json_array_get(rows, 0);
    const char *control = hc_json_str(row, "control", "");
    if (!row || hc_op_state_terminal(hc_json_str(row, "state", "")) ||
        strcmp(control, "abort") == 0)
        r = HC_OP_ABORTED; /* gone or ended behind our back: stop touching the cluster */
    else if (strcmp(control, "pause") == 0)
        r = HC_OP_PAUSED;
    json_decref(rows);
    return r;
}

/* State of step (node, step) of the operation, or "" when not recorded; NULL on error. */
static char *ops_step_state(struct hc_op_ctx *ctx, const char *node, const char *step,
                            struct hc_error *err)
{
    json_t *rows = hc_db_query_json(ctx->db, err,
                                    "SELECT state FROM operation_steps WHERE op_id = ? "
                                    "AND node IS ? AND step = ?",
                                    "sss", ctx->id, node, step);
    if (!rows)
        return NULL;
    char *state = strdup(hc_json_str(json_array_get(rows, 0), "state", ""));
    json_decref(rows);
    return state;
}

/* A step's state change is a durable step of the crash test hook (controller/ops/test_hooks.h). */
static void ops_step_crash_point(struct hc_op_ctx *ctx, const char *node, const char *step,
                                 const char *state)
{
    char what[192];
    snprintf(what, sizeof(what), "%s%s%s %s", node ? node : "", node ? "/" : "", step, state);
    hc_test_crash_point(ctx->id, what);
}

/* Marks the step running (a new row, or attempts + 1 on an existing one) and the operation's
 * progress, in one transaction. */
static int ops_step_begin(struct hc_op_ctx *ctx, const char *node, const char *step, int exists,
                          struct hc_error *err)
{
    int64_t now = hc_now_ms();
    int rc = -1;
    if (hc_db_begin(ctx->db, err) != 0)
        return -1;
    if (exists)
        rc = hc_db_run(ctx->db, err,
                       "UPDATE operation_steps SET state = 'running', attempts = attempts + 1, "
                       "started_at = ?, finished_at = NULL, detail = NULL "
                       "WHERE op_id = ? AND node IS ? AND step = ?",
                       "isss", now, ctx->id, node, step);
    else
        rc = hc_db_run(ctx->db, err,
                       "INSERT INTO operation_steps (op_id, seq, node, step, state, attempts, "
                       "started_at) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, 'running', 1, ? "
                       "FROM operation_steps WHERE op_id = ?",
                       "sssis", ctx->id, node, step, now, ctx->id);
    if (rc < 0)
        goto cleanup;
    json_t *progress = json_pack("{s:s?, s:s}", "node", node, "step", step);
    char *text = hc_json_dump(progress);
    json_decref(progress);
    rc = hc_db_run(ctx->db, err,
                   "UPDATE operations SET progress_json = ?, updated_at = ? WHERE id = ?", "sis",
                   text, now, ctx->id);
    free(text);
    if (rc >= 0)
        rc = hc_db_commit(ctx->db, err);
    if (rc >= 0)
        ops_step_crash_point(ctx, node, step, "running");
cleanup:
    if (rc < 0)
        hc_db_rollback(ctx->db);
    return rc < 0 ? -1 : 0;
}

static int ops_step_end(struct hc_op_ctx *ctx, const char *node, const char *step, int ok,
                        const char *detail, struct hc_error *err)
{
    if (hc_db_run(ctx->db, err,
                  "UPDATE operation_steps SET state = ?, finished_at = ?, detail = ? "
                  "WHERE op_id = ? AND node IS ? AND step = ?",
                  "sissss", ok ? "succeeded" : "failed", hc_now_ms(), detail[0] ? detail : NULL,
                  ctx->id, node, step) < 0)
        return -1;
    ops_step_crash_point(ctx, node, step, ok ? "succeeded" : "failed");
    return 0;
}

/* Runs a step; skip_done: a step that already succeeded is not run again. */
static int ops_step_run(struct hc_op_ctx *ctx, const char *node, const char *step, hc_step_fn fn,
                        void *arg, int skip_done, struct hc_error *err)
{
    char detail[512] = "";
    struct hc_error record_err = {0};
    char *state = ops_step_state(ctx, node, step, err);
    int rc = -1;
    if (!state)
        return -1;
    if (skip_done && (strcmp(state, "succeeded") == 0 || strcmp(state, "skipped") == 0)) {
        HC_DEBUG("operation %s: step %s%s%s already %s", ctx->id, step, node ? " on " : "",
                 node ? node : "", state);
        rc = 0;
        goto cleanup;
    }
    if (ops_step_begin(ctx, node, step, state[0] != '\0', err) != 0)
        goto cleanup;
    rc = fn(ctx, arg, detail, sizeof(detail), err);
    if (rc != 0 && !detail[0])
        snprintf(detail, sizeof(detail), "%s", err->message);
    if (ops_step_end(ctx, node, step, rc == 0, detail, &record_err) != 0) {
        if (rc == 0)
            *err = record_err;
        rc = -1;
    }
cleanup:
    free(state);
    return rc;
}

int hc_op_step(struct hc_op_ctx *ctx, const char *node, const char *step, hc_step_fn fn, void *arg,
               struct hc_error *err)
{
    return ops_step_run(ctx, node, step, fn, arg, 1, err);
}

int hc_op_step_observe(struct hc_op_ctx *ctx, const char *node, const char *step, hc_step_fn fn,
                       void *arg, struct hc_error *err)
{
    return ops_step_run(ctx, node, step, fn, arg, 0, err);
}

struct hc_op_ctx *hc_op_ctx_fork(struct hc_op_ctx *ctx, struct hc_error *err)
{
    struct hc_op_ctx *fork = calloc(1, sizeof(*fork));
    if (!fork) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    *fork = *ctx;
    fork->db = hc_db_open(ctx->pool->ctl->db_path, err);
    if (!fork->db) {
        free(fork);
        return NULL;
    }
    hc_test_watch_db(fork->db);
    json_incref(fork->params);
    return fork;
}

void hc_op_ctx_free_fork(struct hc_op_ctx *fork)
{
    if (!fork)
        return;
    hc_db_close(fork->db);
    json_decref(fork->params);
    free(fork);
}

void hc_op_pause_until_reachable(struct hc_op_ctx *ctx, const char *node, const char *reason)
{
    struct hc_error err = {0};
    char text[768];
    snprintf(text, sizeof(text),
             "paused: node %s stopped answering (%s); resumes by itself when "
             "it is reachable again, or: hcctl operation resume/abort %s",
             node, reason, ctx->id);
    if (hc_db_run(ctx->db, &err,
                  "UPDATE operations SET resume_on_node = ?, waiting_on = ?, "
                  "updated_at = ? WHERE id = ?",
                  "ssis", node, text, hc_now_ms(), ctx->id) < 0)
        HC_WARN("operation %s: cannot record why it pauses: %s", ctx->id, err.message);
    HC_WARN("operation %s: %s", ctx->id, text);
}

int hc_ops_resume_for_node(struct hc_db *db, const char *node, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT id, kind FROM operations WHERE state = "
                                    "'paused' AND resume_on_node = ?",
                                    "s", node);
    if (!rows)
        return -1;
    size_t i;
    json_t *row;
    int rc = 0;
    json_array_foreach(rows, i, row)
    {
        const char *id = hc_json_str(row, "id", "");
        if (hc_db_run(db, err,
                      "UPDATE operations SET state = 'pending', resume_on_node = NULL, "
                      "waiting_on = NULL, updated_at = ? WHERE id = ? AND state = 'paused'",
                      "is", hc_now_ms(), id) < 0 ||
            hc_event_add(db, "op.state", node, id, "controller",
                         json_pack("{s:s, s:s, s:s}", "kind", hc_json_str(row, "kind", ""), "from",
                                   "paused", "to", "pending"),
                         err, "operation %s resumes: node %s is reachable again", id, node) < 0) {
            rc = -1;
            break;
        }
    }
    json_decref(rows);
    return rc;
}

int hc_ops_store_result(struct hc_db *db, const char *op_id, const json_t *result,
                        struct hc_error *err)
{
    char *text = hc_json_dump(result);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "cannot serialise the result of %s", op_id);
    int rc = hc_db_run(db, err,
                       "UPDATE operations SET result_json = ?, updated_at = ? "
                       "WHERE id = ?",
                       "sis", text, hc_now_ms(), op_id);
    free(text);
    return rc < 0 ? -1 : 0;
}
