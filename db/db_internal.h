/* What db.c and replicate.c share about a connection (not for other users of db.h). */
#ifndef HC_DB_DB_INTERNAL_H
#define HC_DB_DB_INTERNAL_H

#include <sqlite3.h>

struct hc_db_repl;

struct hc_db {
    sqlite3 *h;
    char *path;
    struct hc_db_repl *repl;    /* HA mode (replicate.c), NULL otherwise */
    struct hc_db_repl *schema;  /* the tables' columns for hc_db_row_insert without repl, read
                                   once per connection (replicate.c) */
    int (*test_commit)(void *); /* hc_db_set_commit_hook */
    void *test_commit_arg;
};

/* replicate.c: a connection opened by hc_db_open joins replication when it is on. */
int hc_db_repl_attach(struct hc_db *db);
void hc_db_repl_detach(struct hc_db *db);
/* Called by hc_db_commit before COMMIT: reads the changed rows' images. */
int hc_db_repl_resolve(struct hc_db *db);
/* SQLite's commit hook of every connection: the test hook, then the sender. */
int hc_db_commit_hook(void *db);

#endif
