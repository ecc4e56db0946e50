/*
 * Fuzz target: the controller API (controller/api/api.c and res_*.c) — route table, the
 * before-hook's token check, the handlers and their JSON bodies, the after-hook's audit record.
 *
 * Set up once: a data directory made by hcctld's own init code (under $TMPDIR), the API with its
 * database connection, and two API tokens with fixed texts so that the corpus can carry them
 * (FUZZ_ADMIN_ID and FUZZ_VIEWER_ID below), a join token likewise (FUZZ_JOIN_ID: POST
 * /v1/enroll reaches the CSR and the certificate it signs), two joined nodes n1 and n2 and a
 * queued operation op-0123456789ab. The
 * controller's database is snapshotted into memory after set-up and copied back before every input
 * (SQLite's backup API): each input starts from the same state, and the events table does not grow
 * over the run. No operation worker pool and no poller run (ctl.ops is NULL), so the routes that
 * start an operation only queue it: nothing reaches the network. Input format:
 * tests/fuzz/fuzz_http.h.
 */
#include <event2/event.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/token.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/controller.h"
#include "controller/init.h"
#include "db/db.h"
#include "tests/fuzz/fuzz_http.h"
#include "tests/fuzz/fuzz_util.h"

#define FUZZ_ADMIN_ID "0123456789abcdef"
#define FUZZ_VIEWER_ID "fedcba9876543210"
#define FUZZ_JOIN_ID "1111222233334444" /* hcj1.<id>.<secret>.<any 64 hex> */
#define FUZZ_SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
/* The texts: hct1.<id>.<secret> */

static struct {
    char *dir;
    struct hc_controller ctl;
    struct event_base *base;
    struct hc_api *api;
    sqlite3 *snapshot;
} g;

/* A token row for id with FUZZ_SECRET; role "join": a one-time join token that never expires
 * (its text carries a CA fingerprint, which consuming it does not compare, so the corpus can
 * hold any), else an API token. */
static void add_token(struct hc_db *db, const char *id, const char *name, const char *role)
{
    struct hc_token t;
    struct hc_error err = {0};
    char hash[65];
    memset(&t, 0, sizeof(t));
    snprintf(t.id, sizeof(t.id), "%s", id);
    snprintf(t.secret, sizeof(t.secret), "%s", FUZZ_SECRET);
    hc_token_hash(&t, hash);
    int join = strcmp(role, "join") == 0;
    if (hc_db_run(db, &err,
                  "INSERT INTO tokens (id, kind, name, role, secret_hash, created_at, expires_at) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)",
                  "sssssii", id, join ? "join" : "api", name, role, hash, hc_now_ms(),
                  join ? INT64_MAX / 2 : (int64_t)0) < 0)
        fuzz_die("token: %s", err.message);
    if (!join)
        hc_db_run(db, &err, "UPDATE tokens SET expires_at = NULL WHERE id = ?", "s", id);
}

/* Two joined nodes, so that the node, maintenance and removal routes get past their 404. */
static void add_nodes(struct hc_db *db)
{
    struct hc_error err = {0};
    for (int i = 1; i <= 2; i++) {
        char name[8], addr[32], url[64];
        snprintf(name, sizeof(name), "n%d", i);
        snprintf(addr, sizeof(addr), "198.18.0.%d", 10 + i);
        snprintf(url, sizeof(url), "https://%s:7444", addr);
        if (hc_db_run(db, &err,
                      "INSERT INTO nodes (cluster_id, name, address, agent_url, hostname, "
                      "cert_serial, cert_pem, health, joined_at) "
                      "VALUES ((SELECT id FROM clusters LIMIT 1), ?, ?, ?, ?, ?, 'PEM', "
                      "'reachable', ?)",
                      "sssssi", name, addr, url, name, "00ff", hc_now_ms()) < 0)
            fuzz_die("node: %s", err.message);
    }
}

/* One queued operation with a fixed id (op-0123456789ab), made the way a client makes one, so
 * that the seeds for /v1/operations/{id}/... reach it. */
static void add_operation(void)
{
    static const char text[] = "POST /v1/net/check\n"
                               "Authorization: Bearer " HC_TOKEN_API_PREFIX "." FUZZ_ADMIN_ID
                               "." FUZZ_SECRET "\n\n{\"mtu\":9000}";
    struct hc_error err = {0};
    struct evhttp_request *ev = fuzz_http_request((const uint8_t *)text, sizeof(text) - 1);
    if (!ev)
        fuzz_die("operation request");
    hc_http_server_handle(g.api->srv, ev);
    if (fuzz_http_status(ev) != 202)
        fuzz_die("operation: status %d", fuzz_http_status(ev));
    fuzz_http_free(ev);
    if (hc_db_run(g.api->db, &err, "UPDATE operations SET id = 'op-0123456789ab'", "") < 0)
        fuzz_die("operation: %s", err.message);
}

static void cleanup(void)
{
    hc_api_free(g.api);
    if (g.base)
        event_base_free(g.base);
    sqlite3_close(g.snapshot);
    fuzz_rmtree(g.dir);
    free(g.dir);
}

static void copy_db(sqlite3 *to, sqlite3 *from)
{
    sqlite3_backup *b = sqlite3_backup_init(to, "main", from, "main");
    if (!b || sqlite3_backup_step(b, -1) != SQLITE_DONE)
        fuzz_die("sqlite backup: %s", sqlite3_errmsg(to));
    sqlite3_backup_finish(b);
}

static void setup(void)
{
    struct hc_error err = {0};
    struct hc_init_result res;
    fuzz_quiet_logs();
    g.dir = fuzz_mkdtemp("hcfuzz-ctl");
    char *data = hc_path_join(g.dir, "ctl"), *cli = hc_path_join(g.dir, "cli.json");
    struct hc_init_options o = {
        .data_dir = data, .listen = "127.0.0.1:7443", .cluster_name = "fuzz", .cli_config = cli};
    if (hc_init_run(&o, &res, &err) < 0 || hc_controller_load(&g.ctl, data, &err) < 0)
        fuzz_die("init: %s", err.message);
    free(data);
    free(cli);
    g.ctl.started_mono_ms = hc_mono_ms();
    g.base = event_base_new();
    g.ctl.base = g.base;
    if (!g.base || !(g.api = hc_api_new(&g.ctl, g.base, &err)))
        fuzz_die("api: %s", err.message);
    add_token(g.api->db, FUZZ_ADMIN_ID, "fuzz-admin", HC_AUTH_ROLE_ADMIN);
    add_token(g.api->db, FUZZ_VIEWER_ID, "fuzz-viewer", HC_AUTH_ROLE_READONLY);
    add_token(g.api->db, FUZZ_JOIN_ID, "fuzz-join", "join");
    add_nodes(g.api->db);
    add_operation();
    if (sqlite3_open(":memory:", &g.snapshot) != SQLITE_OK)
        fuzz_die("sqlite: cannot open a memory database");
    copy_db(g.snapshot, hc_db_handle(g.api->db));
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.api)
        setup();
    struct evhttp_request *ev = fuzz_http_request(data, size);
    if (!ev)
        return 0;
    copy_db(hc_db_handle(g.api->db), g.snapshot);
    hc_http_server_handle(g.api->srv, ev);
    /* Every controller route answers before it returns (none defers). */
    if (fuzz_http_status(ev) < 200)
        fuzz_die("request not answered");
    if (getenv("HC_FUZZ_VERBOSE")) /* what the seeds get: scripts/fuzz.sh --show */
        fprintf(stderr, "%d %s\n", fuzz_http_status(ev), ev->uri);
    fuzz_http_free(ev);
    return 0;
}
