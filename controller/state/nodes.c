/*
 * Node queries (controller/state/nodes.h). Rows become API objects through one converter driven by
 * the column names the queries choose: "<x>_json" columns are parsed into "<x>", and the time
 * columns are rendered as RFC 3339, so the SQL aliases are the API keys.
 */
#include "controller/state/nodes.h"

#include <string.h>

#include "common/util.h"

#define NODE_SELECT                                                                                \
    "SELECT name, address, agent_url, hostname, state, health, health_detail, maintenance, "       \
    "agent_version, software_version, service_state, uptime_s AS uptime_seconds, "                 \
    "poll_latency_ms, last_seen, joined_at, cert_serial FROM nodes "

#define IFACE_SELECT                                                                               \
    "SELECT i.name AS name, i.mtu AS mtu, i.state AS state, i.kind AS kind, "                      \
    "i.master AS master, i.addresses_json AS addresses_json, i.updated_at AS updated_at "          \
    "FROM interfaces i JOIN nodes n ON n.id = i.node_id WHERE n.name = ? ORDER BY i.name"

static int is_time_column(const char *name)
{
    static const char *const times[] = {"last_seen", "joined_at", "updated_at", "created_at"};
    for (size_t i = 0; i < HC_ARRAY_LEN(times); i++)
        if (strcmp(name, times[i]) == 0)
            return 1;
    return 0;
}

static json_t *column_value(sqlite3_stmt *st, int col, const char *name)
{
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL)
        return json_null();
    if (is_time_column(name)) {
        char buf[32];
        return json_string(hc_time_format(sqlite3_column_int64(st, col), buf, sizeof(buf)));
    }
    if (type == SQLITE_INTEGER)
        return json_integer(sqlite3_column_int64(st, col));
    if (type == SQLITE_FLOAT)
        return json_real(sqlite3_column_double(st, col));
    return json_string((const char *)sqlite3_column_text(st, col));
}

/* The current row as an object keyed by column names (see the file comment). */
static json_t *row_to_json(sqlite3_stmt *st)
{
    json_t *obj = json_object();
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
        const char *name = sqlite3_column_name(st, i);
        size_t len = strlen(name);
        if (len > 5 && strcmp(name + len - 5, "_json") == 0) {
            const char *text = (const char *)sqlite3_column_text(st, i);
            json_t *v = text ? json_loads(text, 0, NULL) : NULL;
            json_object_setn_new(obj, name, len - 5, v ? v : json_null());
            continue;
        }
        json_object_set_new(obj, name, column_value(st, i, name));
    }
    return obj;
}

/* Runs sql (one optional text parameter) and returns the rows as an array, or NULL with err. */
static json_t *query_rows(struct hc_db *db, const char *sql, const char *param,
                          struct hc_error *err)
{
    sqlite3_stmt *st = hc_db_prepare(db, sql, err);
    if (!st)
        return NULL;
    if (param)
        sqlite3_bind_text(st, 1, param, -1, SQLITE_STATIC);
    json_t *rows = json_array();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_array_append_new(rows, row_to_json(st));
    if (rc != SQLITE_DONE) {
        hc_db_error(db, err, "cannot query nodes");
        json_decref(rows);
        rows = NULL;
    }
    sqlite3_finalize(st);
    return rows;
}

json_t *hc_nodes_list(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = query_rows(db, NODE_SELECT "ORDER BY name", NULL, err);
    return rows ? json_pack("{s:o}", "nodes", rows) : NULL;
}

static int not_found(const char *name, struct hc_error *err)
{
    hc_error_set(err, 404, HC_ERR_NOT_FOUND, "node '%s' not found", name);
    return hc_error_hint(err, "see 'hcctl node list'");
}

json_t *hc_node_json(struct hc_db *db, const char *name, struct hc_error *err)
{
    json_t *rows = query_rows(db, NODE_SELECT "WHERE name = ?", name, err);
    if (!rows)
        return NULL;
    json_t *node = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!node)
        not_found(name, err);
    return node;
}

json_t *hc_node_get(struct hc_db *db, const char *name, struct hc_error *err)
{
    json_t *node = hc_node_json(db, name, err);
    if (!node)
        return NULL;
    json_t *ifaces = query_rows(db, IFACE_SELECT, name, err);
    if (!ifaces) {
        json_decref(node);
        return NULL;
    }
    return json_pack("{s:o, s:o}", "node", node, "interfaces", ifaces);
}

int hc_node_exists(struct hc_db *db, const char *name, struct hc_error *err)
{
    json_t *rows =
        hc_db_query_json(db, err, "SELECT 1 AS one FROM nodes WHERE name = ?", "s", name);
    if (!rows)
        return -1;
    int found = json_array_size(rows) > 0;
    json_decref(rows);
    return found;
}

static int conflict(const char *name, struct hc_error *err)
{
    hc_error_set(err, 409, HC_ERR_CONFLICT, "node '%s' already exists", name);
    return hc_error_hint(err, "choose another --name or remove the node first");
}

int hc_node_insert(struct hc_db *db, const struct hc_node_new *n, struct hc_error *err)
{
    int found = hc_node_exists(db, n->name, err);
    if (found < 0)
        return -1;
    if (found)
        return conflict(n->name, err);
    int rc = -1;
    sqlite3_stmt *st = hc_db_prepare(db,
                                     "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                                     "hostname, cert_serial, cert_pem, cert_pin, health, "
                                     "joined_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'unknown', ?)",
                                     err);
    if (!st)
        return -1;
    const char *texts[] = {n->cluster_id, n->name,        n->address, n->agent_url,
                           n->hostname,   n->cert_serial, n->cert_pem, n->cert_pin};
    for (int i = 0; i < (int)HC_ARRAY_LEN(texts); i++)
        sqlite3_bind_text(st, i + 1, texts[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, hc_now_ms());
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE)
        rc = 0;
    else if ((sqlite3_extended_errcode(hc_db_handle(db)) & 0xff) == SQLITE_CONSTRAINT)
        rc = conflict(n->name, err); /* a racing writer took the name after our check */
    else
        rc = hc_db_error(db, err, "cannot insert node");
    sqlite3_finalize(st);
    return rc;
}

json_t *hc_nodes_health_counts(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT COUNT(*) AS total, "
                                    "COALESCE(SUM(health = 'reachable'), 0) AS reachable, "
                                    "COALESCE(SUM(health IN ('unreachable', 'stalled')), 0) "
                                    "AS unreachable, "
                                    "COALESCE(SUM(health = 'unknown'), 0) AS unknown FROM nodes",
                                    "");
    if (!rows)
        return NULL;
    json_t *counts = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return counts;
}
