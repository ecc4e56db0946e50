/*
 * Replication of the controller's database for HA mode (docs/ha.md "Write path"): every row a
 * write transaction changes is handed, as a JSON image, to a sender (the HA layer puts them into
 * etcd in one fenced transaction) inside SQLite's commit, while the write lock is held; the
 * commit happens only if the sender says they are stored, else it turns into a rollback. So no
 * write is visible locally, let alone acknowledged, before it is in etcd, and etcd receives the
 * transactions in the order SQLite commits them.
 *
 * Rows are found with SQLite's pre-update hook (Debian's libsqlite3 is built with it). In a
 * transaction ended by hc_db_commit, the images are read from the database just before COMMIT
 * (exact, whatever statements failed on the way); a single statement in autocommit mode sends
 * the values the hook saw. Tables without a rowid (change_counters: local caches), the
 * single-mode fence generation and SQLite's own tables are not replicated, nor an UPDATE that
 * changes only "local" columns (those the poller rewrites every cycle: a new leader learns them
 * again in its first cycle).
 *
 * An image is a JSON object: "rowid" and every column by name (INTEGER, REAL, TEXT, NULL; a BLOB
 * as {"blob_b64": ...}).
 */
#ifndef HC_DB_REPLICATE_H
#define HC_DB_REPLICATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "db/db.h"

struct hc_db_change {
    const char *table;
    int64_t rowid;
    const char *image; /* NULL: the row was deleted */
};

/* Returns 0 when every change is stored; anything else makes the commit a rollback. */
typedef int (*hc_db_send_fn)(void *arg, const struct hc_db_change *changes, size_t n);

/* Process-wide, before the connections to replicate are opened: every connection hc_db_open
 * makes from now on reports its commits to send. local_columns: NULL-terminated
 * "table.column" names whose changes alone are not sent. */
void hc_db_replicate_start(hc_db_send_fn send, void *arg, const char *const *local_columns);
void hc_db_replicate_stop(void);
int hc_db_replicating(void);

/* The image of one row (caller frees), NULL when it does not exist or with err. */
char *hc_db_row_image(struct hc_db *db, const char *table, int64_t rowid, struct hc_error *err);
/* Inserts an image into table with its rowid (INSERT OR REPLACE). */
int hc_db_row_insert(struct hc_db *db, const char *table, const json_t *image,
                     struct hc_error *err);
/* The tables that are replicated (rowid tables of the schema, not sqlite_*), in schema order;
 * the caller frees the array and each name. */
int hc_db_replicated_tables(struct hc_db *db, char ***names, size_t *n, struct hc_error *err);

#endif
