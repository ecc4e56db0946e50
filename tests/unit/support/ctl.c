/*
 * Unit-test support: a scratch controller data dir and its database, and the operation kinds
 * the tests register (tests/unit/support/support.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/init.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

void hc_test_ctl_dir(struct hc_controller *ctl, char *dir, size_t len, const char *name)
{
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    struct hc_error err = {0};
    assert_int_equal(hc_mkdir_p(base, 0700, &err), 0);
    snprintf(dir, len, "%s/%s.XXXXXX", base, name);
    assert_non_null(mkdtemp(dir));
    hc_controller_paths(ctl, dir);
    snprintf(ctl->cluster_id, sizeof(ctl->cluster_id), "c-test");
}

struct hc_db *hc_test_ctl_db(const struct hc_controller *ctl)
{
    struct hc_error err = {0};
    struct hc_db *db = hc_db_open(ctl->db_path, &err);
    if (!db)
        fail_msg("open %s: %s", ctl->db_path, err.message);
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO clusters (id, name, created_at) VALUES "
                               "('c-test', 'test', ?)",
                               "i", hc_now_ms()),
                     1);
    return db;
}

struct hc_db *hc_test_ctl_db_crl(const struct hc_controller *ctl)
{
    struct hc_error err = {0};
    struct hc_db *db = hc_test_ctl_db(ctl);
    assert_int_equal(hc_crl_write(ctl, db, &err), 0);
    return db;
}

int hc_test_db_setup(void **state, const char *name)
{
    struct hc_test_db *f = calloc(1, sizeof(*f));
    if (!f || !(f->dir = hc_test_mkdtemp(name))) {
        free(f);
        return -1;
    }
    char *path = hc_path_join(f->dir, "hcctld.db");
    struct hc_error err = {0};
    f->db = hc_db_open(path, &err);
    free(path);
    if (!f->db) {
        fprintf(stderr, "open: %s\n", err.message);
        hc_test_rmtree(f->dir);
        free(f->dir);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int hc_test_db_teardown(void **state)
{
    struct hc_test_db *f = *state;
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

int64_t hc_test_db_count(struct hc_db *db, const char *sql, const char *arg)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(db, &err, sql, "s", arg);
    assert_non_null(rows);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}
