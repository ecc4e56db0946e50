/* The embedded schema migrations (generated from db/migrations/NNNN_name.sql at build time). */
#ifndef HC_DB_MIGRATIONS_H
#define HC_DB_MIGRATIONS_H

struct hc_migration {
    int version;      /* NNNN from the file name; migrations are applied in order */
    const char *name; /* file name without .sql */
    const char *sql;
};
extern const struct hc_migration hc_migrations[];
extern const int hc_migrations_count;

#endif
