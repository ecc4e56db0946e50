/*
 * Test hooks of hcctld: compiled in always, inert unless the environment of the hcctld process
 * enables them when it starts (only tests set these variables; nothing an API client sends can
 * reach them). See docs/hcctld.md "Test hooks" and docs/operations.md "Crash points".
 *
 * HCCTLD_TEST_CRASH_AFTER_STEP=N  counts the durable steps of operations (hc_test_crash_point)
 *                                 and logs each one; the N-th is followed by raise(SIGKILL).
 *                                 N = 0 counts and logs only (how a test learns the total).
 * HCCTLD_TEST_CRASH_AT_WRITE=N    finer: counts every write transaction the operation workers
 *                                 commit (but the waiting_on text), and raises SIGKILL just
 *                                 before the N-th commits, so that the database keeps the N-1
 *                                 before it. N = 0 counts and logs only.
 * HCCTLD_TEST_NET_LARGE_CHECK_PAIRS=N
 *                                 a storage network check of more than N pairs runs as a large
 *                                 one (more than HC_NET_LIST_ALL_PAIRS) does: compact answers, a
 *                                 sample of its blackholes searched (controller/remote/
 *                                 net_probe.h), so that a small lab runs what a large cluster
 *                                 does.
 * HCCTLD_TEST_DB_FAIL_AT=N[,full|ioerr]
 *                                 the N-th write to the database fails as if the disk were full
 *                                 (the default) or broken (db/db.h hc_db_fault_set).
 */
#ifndef HC_CONTROLLER_TEST_HOOKS_H
#define HC_CONTROLLER_TEST_HOOKS_H

struct hc_db;

/* Reads the environment, once per process (later calls do nothing). Called when the operation
 * pool starts. */
void hc_test_hooks_init(void);

/* A durable step of operation op_id has just been committed; what says which ("n2/activate
 * succeeded"). With the crash hook enabled: counted, logged as
 * "test hook: durable step N: OP WHAT", and the process is killed when N is the one asked for.
 * Without it: nothing. */
void hc_test_crash_point(const char *op_id, const char *what);

/* Watches db (an operation worker's connection) for the write-level crash hook: installs the
 * commit hook when HCCTLD_TEST_CRASH_AT_WRITE is set, else does nothing. */
void hc_test_watch_db(struct hc_db *db);
/* Writes of this thread between hc_test_quiet(1) and hc_test_quiet(0) are not counted (what the
 * operation waits on is informative, and written a varying number of times). */
void hc_test_quiet(int on);

/* HCCTLD_TEST_NET_LARGE_CHECK_PAIRS when set, else dflt. */
long hc_test_net_large_check_pairs(long dflt);

/* For unit tests: enables the crash hook without the environment (crash_at as the variable;
 * -1 disables it) and resets the count. */
void hc_test_crash_set(long crash_at);
/* Durable steps counted since the hook was enabled. */
long hc_test_crash_count(void);

#endif
