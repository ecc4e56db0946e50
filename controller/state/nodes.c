/*
 * The nodes table (controller/state/nodes.h). Typed rows are read through one column list
 * (ROW_COLUMNS), so that a column is named once for every reader. Rows become API objects
 * through one converter driven by the column names the queries choose: "<x>_json" columns are
 * parsed into "<x>", and the time columns are rendered as RFC 3339, so the SQL aliases are the
 * API keys.
 */
#include "controller/state/nodes.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"

/* A node's "cert_state" in the API (docs/certificates.md): expired, renewing (a renewal under
 * way), expiring (past hc_pki_warn_at_ms: its renewal is overdue), valid, or unknown (no expiry
 * recorded). */
#define HC_NODE_CERT_STATE_SQL                                                                     \
    "(CASE WHEN cert_not_after IS NULL THEN 'unknown' "                                            \
    "WHEN cert_not_after <= unixepoch() * 1000 THEN 'expired' "                                    \
    "WHEN cert_next_serial IS NOT NULL THEN 'renewing' "                                           \
    "WHEN cert_warn_at <= unixepoch() * 1000 THEN 'expiring' "                                     \
    "ELSE 'valid' END)"

#define NODE_SELECT                                                                                \
    "SELECT name, address, agent_url, hostname, state, health, health_detail, maintenance, "       \
    "agent_version, software_version, service_state, uptime_s AS uptime_seconds, "                 \
    "poll_latency_ms, last_seen, joined_at, cert_serial, config_revision, "                        \
    "COALESCE(config_state, 'unknown') AS config_state, config_detail, "                           \
    "cert_not_after, " HC_NODE_CERT_STATE_SQL                                                      \
    " AS cert_state, cert_renew_error, " HC_NODE_API_VERSION_SQL                                   \
    " AS api_version, " HC_NODE_API_COMPAT_SQL " AS api_compat, failure_domain FROM nodes "

#define IFACE_SELECT                                                                               \
    "SELECT i.name AS name, i.mtu AS mtu, i.state AS state, i.kind AS kind, "                      \
    "i.master AS master, i.addresses_json AS addresses_json, i.updated_at AS updated_at "          \
    "FROM interfaces i JOIN nodes n ON n.id = i.node_id WHERE n.name = ? ORDER BY i.name"

static int is_time_column(const char *name)
{
    static const char *const times[] = {"last_seen", "joined_at", "updated_at", "created_at",
                                        "cert_not_after"};
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
    hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
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
    hc_error_set(err, HC_E(CONFLICT), "node '%s' already exists", name);
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
                                     "joined_at, cert_not_after, cert_renew_at, cert_warn_at) "
                                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'unknown', ?, ?, ?, ?)",
                                     err);
    if (!st)
        return -1;
    const char *texts[] = {n->cluster_id, n->name,        n->address,  n->agent_url,
                           n->hostname,   n->cert_serial, n->cert_pem, n->cert_pin};
    for (int i = 0; i < (int)HC_ARRAY_LEN(texts); i++)
        sqlite3_bind_text(st, i + 1, texts[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, hc_now_ms());
    sqlite3_bind_int64(st, 10, n->cert_not_after);
    sqlite3_bind_int64(st, 11, n->cert_renew_at);
    sqlite3_bind_int64(st, 12, n->cert_warn_at);
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

/* --- typed rows ------------------------------------------------------------------------------ */

/* The columns of struct hc_node_row after id, in the order of ROW_SELECT: T text, I integer. */
/* clang-format off: clang-format 14 lays a macro of juxtaposed calls out differently on every
 * pass; one column a line. */
#define ROW_COLUMNS(T, I)                                                                          \
    T(cluster_id)                                                                                  \
    T(name)                                                                                        \
    T(address)                                                                                     \
    T(agent_url)                                                                                   \
    T(hostname)                                                                                    \
    T(ssh_endpoint)                                                                                \
    T(ssh_host_key)                                                                                \
    T(install_mode)                                                                                \
    T(storage_interface)                                                                           \
    T(cert_serial)                                                                                 \
    T(cert_pem)                                                                                    \
    T(cert_pin)                                                                                    \
    T(cert_next_serial)                                                                            \
    T(cert_next_pem)                                                                               \
    T(cert_next_pin)                                                                               \
    T(agent_cert_serial)                                                                           \
    T(agent_ca_digest)                                                                             \
    I(cert_not_after)                                                                              \
    I(cert_renew_at)                                                                               \
    I(cert_warn_at)                                                                                \
    I(cert_renew_asked)                                                                            \
    T(desired_state)                                                                               \
    T(state)                                                                                       \
    T(health)                                                                                      \
    T(health_detail)                                                                               \
    T(maintenance)                                                                                 \
    T(maintenance_mode)                                                                            \
    T(maintenance_op)                                                                              \
    T(agent_version)                                                                               \
    T(software_version)                                                                            \
    T(previous_software_version)                                                                   \
    T(service_state)                                                                               \
    I(uptime_s)                                                                                    \
    I(poll_latency_ms)                                                                             \
    I(last_seen)                                                                                   \
    I(joined_at)                                                                                   \
    I(maintenance_since)                                                                           \
    I(service_observed_at)                                                                         \
    I(config_revision)                                                                             \
    T(config_state)                                                                                \
    T(config_detail)                                                                               \
    T(failure_domain)
/* clang-format on */

#define ROW_SQL_NAME(c) ", " #c
#define ROW_SELECT "SELECT id" ROW_COLUMNS(ROW_SQL_NAME, ROW_SQL_NAME) " FROM nodes "

struct row_column {
    size_t offset;
    int text;
};

#define ROW_TEXT(c) {offsetof(struct hc_node_row, c), 1},
#define ROW_INT(c) {offsetof(struct hc_node_row, c), 0},
static const struct row_column row_columns[] = {{offsetof(struct hc_node_row, id), 0},
                                                ROW_COLUMNS(ROW_TEXT, ROW_INT)};

void hc_node_row_clear(struct hc_node_row *row)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(row_columns); i++)
        if (row_columns[i].text)
            free(*(char **)((char *)row + row_columns[i].offset));
    memset(row, 0, sizeof(*row));
}

void hc_node_rows_free(struct hc_node_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++)
        hc_node_row_clear(&rows[i]);
    free(rows);
}

/* The statement's current row into *row (zeroed first); -1 when out of memory. */
static int row_read(sqlite3_stmt *st, struct hc_node_row *row)
{
    memset(row, 0, sizeof(*row));
    for (size_t i = 0; i < HC_ARRAY_LEN(row_columns); i++) {
        void *field = (char *)row + row_columns[i].offset;
        if (!row_columns[i].text) {
            *(int64_t *)field = sqlite3_column_int64(st, (int)i); /* NULL reads as 0 */
            continue;
        }
        const char *text = (const char *)sqlite3_column_text(st, (int)i);
        if (text && !(*(char **)field = strdup(text))) {
            hc_node_row_clear(row);
            return -1;
        }
    }
    return 0;
}

/* Steps a prepared ROW_SELECT (finalizing it) into a growing array: 0 or -1 with err. */
static int rows_collect(struct hc_db *db, sqlite3_stmt *st, struct hc_node_row **rows, size_t *n,
                        struct hc_error *err)
{
    size_t cap = 0;
    int rc;
    *rows = NULL;
    *n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            struct hc_node_row *more = realloc(*rows, (cap ? cap * 2 : 8) * sizeof(**rows));
            if (!more)
                break;
            *rows = more;
            cap = cap ? cap * 2 : 8;
        }
        if (row_read(st, &(*rows)[*n]) < 0)
            break;
        (*n)++;
    }
    if (rc == SQLITE_ROW)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    else if (rc != SQLITE_DONE)
        hc_db_error(db, err, "cannot query nodes");
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return 0;
    hc_node_rows_free(*rows, *n);
    *rows = NULL;
    *n = 0;
    return -1;
}

/* The one row of a prepared ROW_SELECT with a unique key: 1, 0 (none) or -1 with err. */
static int row_one(struct hc_db *db, sqlite3_stmt *st, struct hc_node_row *row,
                   struct hc_error *err)
{
    struct hc_node_row *rows;
    size_t n;
    memset(row, 0, sizeof(*row));
    if (rows_collect(db, st, &rows, &n, err) < 0)
        return -1;
    if (n)
        *row = rows[0];
    for (size_t i = 1; i < n; i++)
        hc_node_row_clear(&rows[i]);
    free(rows);
    return n > 0;
}

static int row_by_text(struct hc_db *db, const char *sql, const char *key, struct hc_node_row *row,
                       struct hc_error *err)
{
    sqlite3_stmt *st = hc_db_prepare(db, sql, err);
    if (!st) {
        memset(row, 0, sizeof(*row));
        return -1;
    }
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    return row_one(db, st, row, err);
}

int hc_node_row_get(struct hc_db *db, const char *name, struct hc_node_row *row,
                    struct hc_error *err)
{
    return row_by_text(db, ROW_SELECT "WHERE name = ?", name, row, err);
}

int hc_node_row_by_url(struct hc_db *db, const char *agent_url, struct hc_node_row *row,
                       struct hc_error *err)
{
    return row_by_text(db, ROW_SELECT "WHERE agent_url = ?", agent_url, row, err);
}

int hc_node_row_get_id(struct hc_db *db, int64_t id, struct hc_node_row *row, struct hc_error *err)
{
    sqlite3_stmt *st = hc_db_prepare(db, ROW_SELECT "WHERE id = ?", err);
    if (!st) {
        memset(row, 0, sizeof(*row));
        return -1;
    }
    sqlite3_bind_int64(st, 1, id);
    return row_one(db, st, row, err);
}

int hc_node_health_get(struct hc_db *db, int64_t id, char *buf, size_t len, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, "SELECT health FROM nodes WHERE id = ?", "i", id);
    if (!rows)
        return -1;
    const json_t *row = json_array_get(rows, 0);
    if (row)
        snprintf(buf, len, "%s", hc_json_str(row, "health", "unknown"));
    json_decref(rows);
    return row ? 1 : 0;
}

int hc_nodes_rows(struct hc_db *db, const struct hc_node_filter *filter, struct hc_node_row **rows,
                  size_t *n, struct hc_error *err)
{
    static const struct hc_node_filter all = {0};
    const struct hc_node_filter *f = filter ? filter : &all;
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = hc_db_prepare(db,
                                     ROW_SELECT "WHERE (?1 IS NULL OR name IS NOT ?1) AND "
                                                "(?2 IS NULL OR address = ?2) AND "
                                                "(?3 IS NULL OR state = ?3) AND "
                                                "(?4 IS NULL OR desired_state = ?4) AND "
                                                "(?5 IS NULL OR software_version = ?5) AND "
                                                "(?6 IS NULL OR previous_software_version = ?6) "
                                                "ORDER BY name",
                                     err);
    if (!st)
        return -1;
    const char *binds[] = {f->except,        f->address,          f->state,
                           f->desired_state, f->software_version, f->previous_software_version};
    for (int i = 0; i < (int)HC_ARRAY_LEN(binds); i++)
        sqlite3_bind_text(st, i + 1, binds[i], -1, SQLITE_STATIC); /* NULL binds NULL */
    return rows_collect(db, st, rows, n, err);
}

json_t *hc_nodes_count_by(struct hc_db *db, const char *column, struct hc_error *err)
{
    static const char *const columns[][2] = {{"health", "health"},
                                             {"state", "state"},
                                             {"maintenance", "maintenance"},
                                             {"cert_state", HC_NODE_CERT_STATE_SQL}};
    for (size_t i = 0; i < HC_ARRAY_LEN(columns); i++) {
        if (strcmp(column, columns[i][0]) != 0)
            continue;
        char sql[1024];
        snprintf(sql, sizeof(sql), "SELECT %s AS v, COUNT(*) AS n FROM nodes GROUP BY v",
                 columns[i][1]);
        return hc_db_query_json(db, err, sql, "");
    }
    hc_error_set(err, HC_E(INTERNAL), "nodes are not counted by '%s'", column);
    return NULL;
}

/* --- writers --------------------------------------------------------------------------------- */

int hc_node_store_poll(struct hc_db *db, int64_t id, const struct hc_node_poll *p,
                       struct hc_error *err)
{
    if (hc_db_run(db, err,
                  "UPDATE nodes SET service_state = ?, software_version = ?, "
                  "previous_software_version = ?, service_observed_at = ?, service_healthy = "
                  "NULLIF(?, -1) WHERE id = ? AND COALESCE(service_observed_at, 0) <= ?",
                  "sssiiii", p->service_state, p->software_version, p->previous_software_version,
                  p->asked_at, (int64_t)p->service_healthy, id, p->asked_at) < 0)
        return -1;
    return hc_db_run(db, err,
                     "UPDATE nodes SET health = ?, health_detail = ?, last_seen = ?, "
                     "agent_version = ?, agent_api_version = NULLIF(?, ?), "
                     "hostname = COALESCE(?, hostname), "
                     "uptime_s = NULLIF(?, -1), poll_latency_ms = ?, clock_offset_ms = "
                     "NULLIF(?, ?), data_dir_free_bytes = NULLIF(?, ?), data_dir_total_bytes = "
                     "NULLIF(?, ?), agent_cert_serial = ?, agent_ca_digest = ? WHERE id = ?",
                     "ssisiisiiiiiiiissi", p->health, p->health_detail, p->now, p->agent_version,
                     p->agent_api_version, (int64_t)HC_NODE_UNREPORTED, p->hostname, p->uptime_s,
                     p->latency_ms, p->clock_offset_ms, (int64_t)HC_NODE_UNREPORTED,
                     p->data_dir_free_bytes, (int64_t)HC_NODE_UNREPORTED, p->data_dir_total_bytes,
                     (int64_t)HC_NODE_UNREPORTED, p->agent_cert_serial, p->agent_ca_digest, id) < 0
               ? -1
               : 0;
}

int hc_node_set_unanswered(struct hc_db *db, int64_t id, const char *health, const char *detail,
                           int64_t before, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET health = ?, health_detail = ?, "
                     "poll_latency_ms = NULL WHERE id = ? AND COALESCE(last_seen, 0) "
                     "<= ?",
                     "ssii", health, detail, id, before);
}

int hc_node_set_bootstrap(struct hc_db *db, const char *name, const char *ssh_endpoint,
                          const char *ssh_host_key, const char *storage_interface,
                          const char *install_mode, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET ssh_endpoint = ?, ssh_host_key = ?, "
                     "storage_interface = ?, install_mode = COALESCE(?, install_mode) "
                     "WHERE name = ?",
                     "sssss", ssh_endpoint, ssh_host_key, storage_interface, install_mode, name) < 0
               ? -1
               : 0;
}

int hc_node_set_maintenance(struct hc_db *db, const char *name, const char *state, const char *mode,
                            const char *op_id, struct hc_error *err)
{
    int none = strcmp(state, "none") == 0;
    return hc_db_run(db, err,
                     "UPDATE nodes SET maintenance = ?, maintenance_mode = ?, "
                     "maintenance_since = CASE WHEN ? THEN NULL "
                     "ELSE COALESCE(maintenance_since, ?) END, maintenance_op = ? WHERE name = ?",
                     "ssiiss", state, none ? NULL : mode, (int64_t)none, hc_now_ms(),
                     none ? NULL : op_id, name) < 0
               ? -1
               : 0;
}

int hc_node_set_service_state(struct hc_db *db, const char *name, const char *service_state,
                              int64_t observed_at, struct hc_error *err)
{
    return hc_db_run(db, err,
                     /* the health the poller saw belongs to the state before: unknown
                      * until the next poll (the checks must not judge a new state by it) */
                     "UPDATE nodes SET service_state = ?, service_observed_at = ?, "
                     "service_healthy = NULL WHERE name = ?",
                     "sis", service_state, observed_at, name) < 0
               ? -1
               : 0;
}

int hc_node_set_software_version(struct hc_db *db, const char *name, const char *version,
                                 int64_t observed_at, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET software_version = ?, service_observed_at = ? "
                     "WHERE name = ?",
                     "sis", version, observed_at, name) < 0
               ? -1
               : 0;
}

int hc_node_set_removing(struct hc_db *db, const char *name, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET desired_state = 'removed', state = 'removing' "
                     "WHERE name = ?",
                     "s", name) < 0
               ? -1
               : 0;
}

int hc_node_set_failure_domain(struct hc_db *db, const char *name, const char *domain,
                               struct hc_error *err)
{
    return hc_db_run(db, err, "UPDATE nodes SET failure_domain = ? WHERE name = ?", "ss",
                     domain && *domain ? domain : NULL, name) < 0
               ? -1
               : 0;
}

int64_t hc_nodes_domain_count(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT COUNT(DISTINCT COALESCE(failure_domain, 'node/' || "
                                    "name)) AS n FROM nodes WHERE desired_state = 'member'",
                                    "");
    if (!rows)
        return -1;
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", 0);
    json_decref(rows);
    return n;
}

const char *hc_node_domain_key(const char *name, const char *domain, char *buf, size_t len)
{
    if (domain && *domain)
        snprintf(buf, len, "%s", domain);
    else
        snprintf(buf, len, "node/%s", name);
    return buf;
}

int hc_node_set_cert_pin(struct hc_db *db, int64_t id, const char *pin, struct hc_error *err)
{
    return hc_db_run(db, err, "UPDATE nodes SET cert_pin = ? WHERE id = ?", "si", pin, id) < 0 ? -1
                                                                                               : 0;
}

/* ---------------------------------------------------------------- certificates */

int hc_node_set_cert_validity(struct hc_db *db, int64_t id, int64_t not_after, int64_t renew_at,
                              int64_t warn_at, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_not_after = ?, cert_renew_at = COALESCE(cert_renew_at, "
                     "?), cert_warn_at = ? WHERE id = ?",
                     "iiii", not_after, renew_at, warn_at, id) < 0
               ? -1
               : 0;
}

json_t *hc_nodes_cert_earliest(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT name, cert_not_after FROM nodes WHERE cert_not_after "
                                    "IS NOT NULL ORDER BY cert_not_after LIMIT 1",
                                    "");
    if (!rows)
        return NULL;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return row ? row : json_null();
}

json_t *hc_nodes_cert_warned(struct hc_db *db, int64_t now_ms, struct hc_error *err)
{
    return hc_db_query_json(db, err,
                            "SELECT name, cert_serial, cert_pem FROM nodes WHERE cert_warn_at IS "
                            "NOT NULL AND cert_warn_at <= ?",
                            "i", now_ms);
}

json_t *hc_nodes_cert_due(struct hc_db *db, int64_t now_ms, int limit, struct hc_error *err)
{
    return hc_db_query_json(db, err,
                            "SELECT name, cert_renew_asked IS NOT NULL AS asked FROM nodes WHERE "
                            "state = 'joined' AND (cert_renew_asked IS NOT NULL OR (health = "
                            "'reachable' AND (cert_next_serial IS NOT NULL OR cert_renew_at <= ?)))"
                            " ORDER BY cert_renew_asked IS NULL, cert_renew_at LIMIT ?",
                            "ii", now_ms, (int64_t)limit);
}

int hc_node_cert_ask(struct hc_db *db, const char *name, int64_t now_ms, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_renew_asked = ?, cert_renew_error = NULL WHERE name = "
                     "? AND state = 'joined'",
                     "is", now_ms, name);
}

int hc_node_cert_failed(struct hc_db *db, const char *name, const char *why, struct hc_error *err)
{
    return hc_db_run(
               db, err,
               "UPDATE nodes SET cert_renew_asked = NULL, cert_renew_error = ? WHERE name = ?",
               "ss", why, name) < 0
               ? -1
               : 0;
}

int hc_node_cert_pending_set(struct hc_db *db, int64_t id, const char *current_serial,
                             const char *serial, const char *pem, const char *pin,
                             struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_next_serial = ?, cert_next_pem = ?, cert_next_pin = ? "
                     "WHERE id = ? AND cert_serial = ? AND cert_next_serial IS NULL",
                     "sssis", serial, pem, pin, id, current_serial);
}

int hc_node_cert_pending_drop(struct hc_db *db, int64_t id, const char *serial,
                              struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_next_serial = NULL, cert_next_pem = NULL, "
                     "cert_next_pin = NULL WHERE id = ? AND cert_next_serial = ?",
                     "is", id, serial) < 0
               ? -1
               : 0;
}

int hc_node_cert_renew_now(struct hc_db *db, int64_t id, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_renew_at = 0 WHERE id = ? AND cert_renew_at != 0", "i",
                     id) < 0
               ? -1
               : 0;
}

int hc_node_cert_promote(struct hc_db *db, int64_t id, const char *serial, int64_t not_after,
                         int64_t renew_at, int64_t warn_at, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET cert_serial = cert_next_serial, cert_pem = cert_next_pem, "
                     "cert_pin = cert_next_pin, cert_not_after = ?, cert_renew_at = ?, "
                     "cert_warn_at = ?, cert_renew_asked = NULL, cert_renew_error = NULL, "
                     "cert_next_serial = NULL, cert_next_pem = NULL, cert_next_pin = NULL WHERE "
                     "id = ? AND cert_next_serial = ?",
                     "iiiis", not_after, renew_at, warn_at, id, serial) < 0
               ? -1
               : 0;
}

int hc_node_delete(struct hc_db *db, const char *name, struct hc_error *err)
{
    return hc_db_run(db, err, "DELETE FROM nodes WHERE name = ?", "s", name) < 0 ? -1 : 0;
}

json_t *hc_nodes_maintenance_list(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT name, maintenance, maintenance_mode "
                                    "AS mode, maintenance_since AS since_ms, maintenance_op AS "
                                    "operation_id, health, service_state FROM nodes ORDER BY name",
                                    "");
    return rows ? json_pack("{s:o}", "nodes", rows) : NULL;
}

/* --- configuration (controller/state/config.h) ------------------------------------------ */

int hc_node_set_config(struct hc_db *db, const char *name, const struct hc_node_config *c,
                       struct hc_error *err)
{
    const char *detail = c->detail && *c->detail ? c->detail : NULL;
    if (c->revision < 0)
        return hc_db_run(db, err,
                         "UPDATE nodes SET config_revision = NULL, config_digest = NULL, "
                         "config_pending_restart = 0, config_state = ?, config_detail = ? "
                         "WHERE name = ?",
                         "sss", c->state, detail, name);
    return hc_db_run(db, err,
                     "UPDATE nodes SET config_detail = CASE WHEN ? = 'drift' AND config_state = "
                     "'drift' AND config_digest IS ? AND config_detail IS NOT NULL THEN "
                     "config_detail ELSE ? END, config_revision = ?, config_digest = ?, "
                     "config_pending_restart = ?, config_state = ? WHERE name = ?",
                     "sssisiss", c->state, c->digest, detail, c->revision, c->digest,
                     (int64_t)(c->pending_restart != 0), c->state, name);
}

int hc_node_set_config_state(struct hc_db *db, const char *name, const char *state,
                             const char *detail, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET config_state = COALESCE(?, config_state), config_detail = ? "
                     "WHERE name = ?",
                     "sss", state, detail, name);
}

json_t *hc_nodes_config_list(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT name, software_version, config_revision AS "
                                    "applied_revision, COALESCE(config_state, 'unknown') AS "
                                    "state, config_detail AS detail, config_pending_restart AS "
                                    "pending_restart FROM nodes ORDER BY name",
                                    "");
    json_t *row;
    size_t i;
    json_array_foreach(rows, i, row) json_object_set_new(
        row, "pending_restart",
        json_boolean(json_integer_value(json_object_get(row, "pending_restart"))));
    return rows;
}

json_t *hc_nodes_check_facts(struct hc_db *db, struct hc_error *err)
{
    return hc_db_query_json(
        db, err,
        "SELECT n.name, n.health, n.health_detail, n.last_seen, n.maintenance, n.service_state, "
        "n.software_version, n.service_healthy, n.cert_pem, n.config_state, n.config_detail, "
        "n.clock_offset_ms, "
        "n.data_dir_free_bytes, n.data_dir_total_bytes, n.storage_interface, "
        "COALESCE((SELECT i.mtu FROM interfaces i WHERE i.node_id = n.id AND i.role = 'storage' "
        "LIMIT 1), (SELECT i.mtu FROM interfaces i WHERE i.node_id = n.id AND i.name = "
        "n.storage_interface), (SELECT MIN(i.mtu) FROM interfaces i WHERE i.node_id = n.id AND "
        "n.storage_interface IS NULL AND i.addresses_json LIKE '%\"' || n.address || '/%')) AS "
        "storage_mtu "
        "FROM nodes n WHERE n.desired_state = 'member' ORDER BY n.name",
        "");
}

json_t *hc_nodes_versions(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT DISTINCT software_version AS v FROM nodes WHERE "
                                    "software_version IS NOT NULL AND software_version != '' "
                                    "ORDER BY software_version",
                                    "");
    if (!rows)
        return NULL;
    json_t *out = json_array(), *row;
    size_t i;
    json_array_foreach(rows, i, row) json_array_append(out, json_object_get(row, "v"));
    json_decref(rows);
    return out;
}

/* --- agent API skew (docs/agent-upgrade.md) -------------------------------------------------- */

int hc_nodes_api_gate(struct hc_db *db, const char *node, const char *what, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err,
        "SELECT name, agent_version, " HC_NODE_API_VERSION_SQL
        " AS api_version, " HC_NODE_API_COMPAT_SQL
        " AS api_compat FROM nodes WHERE (?1 IS NULL OR name = ?1) AND " HC_NODE_API_COMPAT_SQL
        " IN ('too_old', 'too_new') ORDER BY name",
        "s", node);
    if (!rows)
        return -1;
    const json_t *first = json_array_get(rows, 0);
    int rc = 0;
    if (first) {
        const char *name = hc_json_str(first, "name", "?");
        int old = !strcmp(hc_json_str(first, "api_compat", ""), "too_old");
        size_t more = json_array_size(rows) - 1;
        rc = hc_error_set(err, HC_E(AGENT_API_UNSUPPORTED),
                          "cannot %s: the agent on node '%s' speaks agent API %lld, this "
                          "controller drives %d to %d%s",
                          what, name, (long long)hc_json_int(first, "api_version", 0),
                          HC_AGENT_API_OLDEST_SUPPORTED, HC_AGENT_API_VERSION,
                          more ? " (and other nodes: see 'hcctl node list')" : "");
        if (old)
            hc_error_hint(err, "upgrade its agent first: 'hcctl agent upgrade --to VERSION' "
                               "(an uploaded agent bundle: see the kind column of 'hcctl software "
                               "list')");
        else
            hc_error_hint(err, "the agent is newer than this controller: upgrade hcctld first "
                               "(docs/agent-upgrade.md)");
    }
    json_decref(rows);
    return rc;
}

int hc_node_set_agent_version(struct hc_db *db, const char *name, const char *version,
                              int api_version, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "UPDATE nodes SET agent_version = ?, agent_api_version = ? "
                     "WHERE name = ?",
                     "sis", version, (int64_t)api_version, name) < 0
               ? -1
               : 0;
}

json_t *hc_nodes_agents(struct hc_db *db, struct hc_error *err)
{
    return hc_db_query_json(
        db, err,
        "SELECT name, agent_url, agent_version AS from_version, " HC_NODE_API_VERSION_SQL
        " AS api_version, " HC_NODE_API_COMPAT_SQL " AS api_compat FROM nodes ORDER BY name",
        "");
}
