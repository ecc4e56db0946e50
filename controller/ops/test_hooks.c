/*
 * Test hooks (see test_hooks.h): the crash-after-step-N hook of the operations framework and the
 * environment switch of the database fault hook. Both are read from the environment once, when
 * the operation pool starts, so they are fixed for the life of the process.
 */
#include "controller/ops/test_hooks.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "db/db.h"

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static atomic_long crash_at = -1; /* -1: hook off; 0: count only; N: SIGKILL after the N-th */
static atomic_long crash_count;
static atomic_long write_at = -1; /* the same for HCCTLD_TEST_CRASH_AT_WRITE */
static atomic_long write_count;
static _Thread_local int write_quiet;
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_step[160]; /* the last durable step of any thread, for the write log; last_mu */
static atomic_long net_large_check = -1; /* HCCTLD_TEST_NET_LARGE_CHECK_PAIRS; -1: not set */

/* A decimal in [0, LONG_MAX) or -1. */
static long parse_count(const char *text)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || v < 0)
        return -1;
    if (*end && *end != ',')
        return -1;
    return v;
}

static void hooks_read_env(void)
{
    const char *crash = getenv("HCCTLD_TEST_CRASH_AFTER_STEP");
    const char *dbfail = getenv("HCCTLD_TEST_DB_FAIL_AT");
    const char *write = getenv("HCCTLD_TEST_CRASH_AT_WRITE");
    const char *search = getenv("HCCTLD_TEST_NET_LARGE_CHECK_PAIRS");
    if (search && search[0]) {
        long n = parse_count(search);
        if (n < 0) {
            HC_ERROR("test hook: HCCTLD_TEST_NET_LARGE_CHECK_PAIRS='%s' is not a count: ignored",
                     search);
        } else {
            atomic_store(&net_large_check, n);
            HC_WARN("test hook: HCCTLD_TEST_NET_LARGE_CHECK_PAIRS=%ld: checks of more pairs "
                    "search a sample of their blackholes",
                    n);
        }
    }
    if (write && write[0]) {
        long n = parse_count(write);
        if (n < 0) {
            HC_ERROR("test hook: HCCTLD_TEST_CRASH_AT_WRITE='%s' is not a count: ignored", write);
        } else {
            atomic_store(&write_at, n);
            HC_WARN("test hook: HCCTLD_TEST_CRASH_AT_WRITE=%ld: %s", n,
                    n ? "hcctld kills itself as that write of an operation commits"
                      : "the writes of operations are counted and logged");
        }
    }
    if (crash && crash[0]) {
        long n = parse_count(crash);
        if (n < 0) {
            HC_ERROR("test hook: HCCTLD_TEST_CRASH_AFTER_STEP='%s' is not a count: ignored", crash);
        } else {
            atomic_store(&crash_at, n);
            HC_WARN("test hook: HCCTLD_TEST_CRASH_AFTER_STEP=%ld: %s", n,
                    n ? "hcctld kills itself after that durable step"
                      : "durable steps are counted and logged");
        }
    }
    if (dbfail && dbfail[0]) {
        long n = parse_count(dbfail);
        const char *how = strchr(dbfail, ',');
        int code = SQLITE_FULL;
        if (how && !strcmp(how + 1, "ioerr"))
            code = SQLITE_IOERR;
        else if (how && strcmp(how + 1, "full") != 0)
            n = -1;
        if (n <= 0) {
            HC_ERROR("test hook: HCCTLD_TEST_DB_FAIL_AT='%s' is not N[,full|ioerr]: ignored",
                     dbfail);
        } else {
            hc_db_fault_set(n, code);
            HC_WARN("test hook: HCCTLD_TEST_DB_FAIL_AT=%s: database write %ld fails (%s)", dbfail,
                    n, sqlite3_errstr(code));
        }
    }
}

void hc_test_hooks_init(void)
{
    pthread_once(&hooks_once, hooks_read_env);
}

void hc_test_crash_set(long n)
{
    atomic_store(&crash_count, 0);
    atomic_store(&crash_at, n);
}

long hc_test_crash_count(void)
{
    return atomic_load(&crash_count);
}

/* The commit hook of a watched connection: runs before the write transaction commits. */
static int write_point(void *arg)
{
    long at = atomic_load(&write_at);
    if (at < 0 || write_quiet)
        return 0;
    long n = atomic_fetch_add(&write_count, 1) + 1;
    pthread_mutex_lock(&last_mu);
    HC_INFO("test hook: write %ld: after %s", n, last_step[0] ? last_step : "nothing yet");
    pthread_mutex_unlock(&last_mu);
    if (n == at) {
        HC_WARN("test hook: killing hcctld as write %ld commits", n);
        raise(SIGKILL);
    }
    return 0;
}

void hc_test_watch_db(struct hc_db *db)
{
    if (db && atomic_load(&write_at) >= 0)
        hc_db_set_commit_hook(db, write_point, NULL);
}

void hc_test_quiet(int on)
{
    write_quiet = on;
}

void hc_test_crash_point(const char *op_id, const char *what)
{
    long at = atomic_load(&crash_at);
    if (atomic_load(&write_at) >= 0) {
        pthread_mutex_lock(&last_mu);
        snprintf(last_step, sizeof(last_step), "%s", what);
        pthread_mutex_unlock(&last_mu);
    }
    if (at < 0)
        return;
    long n = atomic_fetch_add(&crash_count, 1) + 1;
    HC_INFO("test hook: durable step %ld: %s %s", n, op_id, what);
    if (n == at) {
        HC_WARN("test hook: killing hcctld after durable step %ld", n);
        raise(SIGKILL);
    }
}

long hc_test_net_large_check_pairs(long dflt)
{
    long n = atomic_load(&net_large_check);
    return n >= 0 ? n : dflt;
}
