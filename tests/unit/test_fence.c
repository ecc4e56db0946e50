/* Unit tests of fencing (issue 17): the agent's rule and its term file (agents/hcagent/fence.c)
 * with every hostile header and file, a failed write, concurrent raises; the controller's
 * start generation in the database (controller/ha/fence_store.c) with its guards and injected
 * write faults; and the controller's agent client carrying the term to a stand-in agent that
 * judges it with the real rule, a mutating call refused unsent while the leader check fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/fence.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ha/fence.h"
#include "controller/ha/fence_store.h"
#include "controller/remote/agent_client.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

static char *term_file_text(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, HC_AGENT_FILE_TERM);
    return hc_test_file_text(path);
}

static void write_term_file(const char *dir, const char *data, size_t len)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, HC_AGENT_FILE_TERM);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

static struct hc_agent_fence *fence_ok(const char *dir)
{
    struct hc_error err = {0};
    struct hc_agent_fence *f = hc_agent_fence_new(dir, "", &err);
    if (!f)
        fail_msg("fence: %s", err.message);
    return f;
}

/* admit with one header value (NULL: none); the error code, "" when served. */
static const char *admit1(struct hc_agent_fence *f, int mutating, const char *value,
                          struct hc_error *err)
{
    memset(err, 0, sizeof(*err));
    const char *values[1] = {value};
    return hc_agent_fence_admit(f, mutating, values, value ? 1 : 0, err) == 0 ? "" : err->code;
}

/* ---------------------------------------------------------------- parsing */

static void test_parse(void **state)
{
    (void)state;
    /* the agent names the header itself (it does not include the controller's headers) */
    assert_string_equal(HC_AGENT_FENCE_HEADER, HC_FENCE_HEADER);
    static const struct {
        const char *text;
        int64_t want;
    } good[] = {{"0", 0}, {"7", 7}, {"007", 7}, {"9223372036854775807", INT64_MAX}};
    static const char *const bad[] = {
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1a",
        "0x10",
        "1.0",
        "1e3",
        "9223372036854775808",
        "99999999999999999999",
        "18446744073709551616",
        "00000000000000000001",
        "\t1",
        "١",
    };
    for (size_t i = 0; i < HC_ARRAY_LEN(good); i++) {
        int64_t v = -1;
        assert_int_equal(hc_agent_fence_parse(good[i].text, &v), 0);
        assert_true(v == good[i].want);
    }
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        int64_t v = 12345;
        if (hc_agent_fence_parse(bad[i], &v) == 0)
            fail_msg("'%s' parsed as %" PRId64, bad[i], v);
        assert_true(v == 12345); /* untouched */
    }
}

/* ---------------------------------------------------------------- the rule */

static void test_rule(void **state)
{
    (void)state;
    char *dir = hc_test_mkdtemp("test_fence");
    struct hc_error err;
    struct hc_agent_fence *f = fence_ok(dir);
    /* no term yet: anything goes, nothing is written */
    assert_true(hc_agent_fence_highest(f) == 0);
    assert_string_equal(admit1(f, 1, NULL, &err), "");
    assert_string_equal(admit1(f, 0, NULL, &err), "");
    assert_string_equal(admit1(f, 1, "0", &err), "");
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, HC_AGENT_FILE_TERM);
    assert_int_not_equal(access(path, F_OK), 0);

    /* a higher term is recorded before the request is served */
    assert_string_equal(admit1(f, 0, "5", &err), "");
    assert_true(hc_agent_fence_highest(f) == 5);
    char *text = term_file_text(dir);
    assert_string_equal(text, "5\n");
    free(text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_string_equal(admit1(f, 1, "7", &err), "");
    assert_string_equal(admit1(f, 1, "7", &err), ""); /* the same term again */

    /* a lower term: reads are served and lower nothing, changes are refused */
    assert_string_equal(admit1(f, 0, "5", &err), "");
    assert_string_equal(admit1(f, 1, "5", &err), HC_ERR_STALE_TERM);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.message, "controller term 5 is older than term 7 seen from another "
                                     "controller");
    assert_string_equal(admit1(f, 1, "0", &err), HC_ERR_STALE_TERM);
    /* no term at all once one was seen */
    assert_string_equal(admit1(f, 1, NULL, &err), HC_ERR_STALE_TERM);
    assert_non_null(strstr(err.message, "without a controller term"));
    assert_non_null(strstr(err.message, "term 7"));
    assert_string_equal(admit1(f, 0, NULL, &err), "");
    assert_true(hc_agent_fence_highest(f) == 7);
    text = term_file_text(dir);
    assert_string_equal(text, "7\n");
    free(text);

    /* a restart keeps it */
    hc_agent_fence_free(f);
    f = fence_ok(dir);
    assert_true(hc_agent_fence_highest(f) == 7);
    assert_string_equal(admit1(f, 1, "6", &err), HC_ERR_STALE_TERM);
    hc_agent_fence_free(f);

    /* leaving or joining again forgets it; forgetting twice is no error */
    assert_int_equal(hc_agent_fence_forget(dir, &err), 0);
    assert_int_equal(hc_agent_fence_forget(dir, &err), 0);
    f = fence_ok(dir);
    assert_true(hc_agent_fence_highest(f) == 0);
    hc_agent_fence_free(f);
    hc_test_rmtree(dir);
    free(dir);
}

/* Every malformed header is refused on reads and changes alike, and changes nothing. */
static void test_hostile_headers(void **state)
{
    (void)state;
    char *dir = hc_test_mkdtemp("test_fence");
    struct hc_error err;
    struct hc_agent_fence *f = fence_ok(dir);
    assert_string_equal(admit1(f, 1, "3", &err), "");
    static const char *const bad[] = {"",
                                      "-1",
                                      "abc",
                                      "3 ",
                                      "3,4",
                                      "9223372036854775808",
                                      "1e9",
                                      "0x9",
                                      "+4",
                                      "4;",
                                      "99999999999999999999999"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++)
        for (int mutating = 0; mutating <= 1; mutating++) {
            assert_string_equal(admit1(f, mutating, bad[i], &err), HC_ERR_INVALID_ARGUMENT);
            assert_int_equal(err.status, 400);
            assert_non_null(strstr(err.message, HC_AGENT_FENCE_HEADER));
        }
    /* a very long value is quoted cut short */
    char longv[4096];
    memset(longv, '9', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    assert_string_equal(admit1(f, 0, longv, &err), HC_ERR_INVALID_ARGUMENT);
    assert_true(strlen(err.message) < 200);

    /* repeated: equal values are one term, different ones are refused */
    const char *same[] = {"9", "9", "9"};
    assert_int_equal(hc_agent_fence_admit(f, 1, same, 3, &err), 0);
    assert_true(hc_agent_fence_highest(f) == 9);
    const char *differ[] = {"9", "10"};
    assert_int_equal(hc_agent_fence_admit(f, 0, differ, 2, &err), -1);
    assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "different values (9 and 10)"));
    const char *lower_then_higher[] = {"1", "12"};
    assert_int_equal(hc_agent_fence_admit(f, 1, lower_then_higher, 2, &err), -1);
    const char *one_bad[] = {"12", "x"};
    assert_int_equal(hc_agent_fence_admit(f, 1, one_bad, 2, &err), -1);
    /* more headers than the agent looks at: refused whatever they say */
    const char *many[HC_AGENT_FENCE_MAX_HEADERS] = {0};
    for (size_t i = 0; i < HC_ARRAY_LEN(many); i++)
        many[i] = "20";
    assert_int_equal(hc_agent_fence_admit(f, 0, many, HC_AGENT_FENCE_MAX_HEADERS, &err), 0);
    assert_int_equal(hc_agent_fence_admit(f, 0, many, HC_AGENT_FENCE_MAX_HEADERS + 1, &err), -1);
    assert_non_null(strstr(err.message, "repeated"));
    assert_true(hc_agent_fence_highest(f) == 20);
    hc_agent_fence_free(f);
    hc_test_rmtree(dir);
    free(dir);
}

/* A term file that is not one term stops the agent, naming the file and how to recover. */
static void test_corrupt_file(void **state)
{
    (void)state;
    static const struct {
        const char *data;
        size_t len;
    } bad[] = {
        {"", 0},
        {"\n", 1},
        {"abc\n", 4},
        {"-3\n", 3},
        {"5 5\n", 4},
        {"5\n\n", 3},
        {" 5\n", 3},
        {"5\r\n", 3},
        {"5\0", 2},
        {"0x10", 4},
        {"9223372036854775808\n", 20},
        {"123456789012345678901234567890123456789012345678901234567890123456789", 69},
    };
    char *dir = hc_test_mkdtemp("test_fence");
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        struct hc_error err = {0};
        write_term_file(dir, bad[i].data, bad[i].len);
        struct hc_agent_fence *f = hc_agent_fence_new(dir, "", &err);
        if (f)
            fail_msg("case %zu: a corrupt term file was accepted", i);
        assert_non_null(strstr(err.message, HC_AGENT_FILE_TERM));
        assert_non_null(strstr(err.message, "corrupt"));
        assert_non_null(strstr(err.hint, "remove it"));
    }
    /* a good file, with or without its newline */
    write_term_file(dir, "41", 2);
    struct hc_agent_fence *f = fence_ok(dir);
    assert_true(hc_agent_fence_highest(f) == 41);
    hc_agent_fence_free(f);
    write_term_file(dir, "9223372036854775807\n", 20);
    f = fence_ok(dir);
    assert_true(hc_agent_fence_highest(f) == INT64_MAX);
    hc_agent_fence_free(f);
    /* a directory where the file should be is no term either */
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, HC_AGENT_FILE_TERM);
    unlink(path);
    assert_int_equal(mkdir(path, 0700), 0);
    struct hc_error err = {0};
    assert_null(hc_agent_fence_new(dir, "", &err));
    assert_non_null(strstr(err.message, "cannot read the controller term file"));
    assert_non_null(strstr(err.hint, "remove it"));
    hc_test_rmtree(dir);
    free(dir);
}

/* The term cannot be recorded: 500 io_error, the request is not served, nothing is raised. */
static void test_write_fails(void **state)
{
    (void)state;
    char *dir = hc_test_mkdtemp("test_fence");
    struct hc_error err;
    struct hc_agent_fence *f = fence_ok(dir);
    assert_string_equal(admit1(f, 1, "2", &err), "");
    hc_test_rmtree(dir); /* the data directory is gone */
    assert_string_equal(admit1(f, 0, "3", &err), HC_ERR_IO);
    assert_int_equal(err.status, 500);
    assert_non_null(strstr(err.message, "cannot record controller term 3"));
    assert_true(hc_agent_fence_highest(f) == 2);
    /* still judged by the term it has */
    assert_string_equal(admit1(f, 1, "1", &err), HC_ERR_STALE_TERM);
    hc_agent_fence_free(f);
    free(dir);
}

/* Concurrent raises: the highest term wins, in memory and in the file, whatever the order. */
#define RACE_THREADS 8
#define RACE_ROUNDS 150

struct race {
    struct hc_agent_fence *f;
    int index;
    atomic_int refused, failed;
};

static void *race_thread(void *arg)
{
    struct race *r = arg;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        char term[32];
        snprintf(term, sizeof(term), "%d", i * RACE_THREADS + r->index + 1);
        struct hc_error err = {0};
        const char *values[1] = {term};
        int64_t before = hc_agent_fence_highest(r->f);
        if (hc_agent_fence_admit(r->f, 1, values, 1, &err) < 0) {
            if (strcmp(err.code, HC_ERR_STALE_TERM) != 0)
                atomic_fetch_add(&r->failed, 1);
            else
                atomic_fetch_add(&r->refused, 1);
        }
        if (hc_agent_fence_highest(r->f) < before) /* never goes back */
            atomic_fetch_add(&r->failed, 1);
    }
    return NULL;
}

static void test_concurrent_raises(void **state)
{
    (void)state;
    char *dir = hc_test_mkdtemp("test_fence");
    struct hc_agent_fence *f = fence_ok(dir);
    pthread_t threads[RACE_THREADS];
    struct race races[RACE_THREADS];
    hc_log_set_level(HC_LOG_WARN); /* every raise logs at info */
    for (int i = 0; i < RACE_THREADS; i++) {
        races[i] = (struct race){.f = f, .index = i};
        assert_int_equal(pthread_create(&threads[i], NULL, race_thread, &races[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(threads[i], NULL);
    hc_log_set_level(HC_LOG_INFO);
    for (int i = 0; i < RACE_THREADS; i++)
        assert_int_equal(atomic_load(&races[i].failed), 0);
    int64_t max = (int64_t)RACE_ROUNDS * RACE_THREADS;
    assert_true(hc_agent_fence_highest(f) == max);
    char *text = term_file_text(dir), want[32];
    snprintf(want, sizeof(want), "%" PRId64 "\n", max);
    assert_string_equal(text, want);
    free(text);
    hc_agent_fence_free(f);
    hc_test_rmtree(dir);
    free(dir);
}

/* ---------------------------------------------------------------- the start generation */

static int db_setup(void **state)
{
    return hc_test_db_setup(state, "test_fence");
}

static int db_teardown(void **state)
{
    hc_db_fault_set(-1, 0);
    return hc_test_db_teardown(state);
}

static int64_t stored(struct hc_db *db)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(db, &err, "SELECT generation FROM fence_generation", "");
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 1);
    int64_t v = json_integer_value(json_object_get(json_array_get(rows, 0), "generation"));
    json_decref(rows);
    return v;
}

static void test_generation(void **state)
{
    struct hc_db *db = ((struct hc_test_db *)*state)->db;
    struct hc_error err = {0};
    int64_t g = -1;
    assert_true(stored(db) == 0);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
    assert_true(g == 1);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
    assert_true(g == 2);
    /* the HA code stores the term it reached; the next start goes above it */
    assert_int_equal(hc_fence_generation_store(db, 40, &err), 0);
    assert_int_equal(hc_fence_generation_store(db, 40, &err), 0);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
    assert_true(g == 41);
    /* never lower */
    assert_int_equal(hc_fence_generation_store(db, 7, &err), -1);
    assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "lower than the stored 41"));
    assert_int_equal(hc_fence_generation_store(db, -1, &err), -1);
    assert_true(stored(db) == 41);
    /* at the top there is no next */
    assert_int_equal(hc_fence_generation_store(db, INT64_MAX, &err), 0);
    g = 5;
    assert_int_equal(hc_fence_generation_next(db, &g, &err), -1);
    assert_non_null(strstr(err.message, "maximum"));
    assert_true(g == 5); /* out only on success */
    assert_true(stored(db) == INT64_MAX);
}

/* The schema keeps one row that only grows, whoever writes to it. */
static void test_generation_guards(void **state)
{
    struct hc_db *db = ((struct hc_test_db *)*state)->db;
    struct hc_error err = {0};
    int64_t g = 0;
    assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
    assert_int_equal(hc_db_exec(db, "INSERT INTO fence_generation VALUES (9)", &err), -1);
    assert_int_equal(hc_db_exec(db, "DELETE FROM fence_generation", &err), -1);
    assert_int_equal(hc_db_exec(db, "UPDATE fence_generation SET generation = 0", &err), -1);
    assert_non_null(strstr(err.message, "only grows"));
    assert_int_equal(hc_db_exec(db, "UPDATE fence_generation SET generation = NULL", &err), -1);
    assert_true(stored(db) == 1);
    /* a database edited by hand past the guards is refused, not guessed at */
    assert_int_equal(hc_db_exec(db,
                                "DROP TRIGGER fence_generation_kept; "
                                "DROP TRIGGER fence_generation_one_row; "
                                "INSERT INTO fence_generation VALUES (4)",
                                &err),
                     0);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), -1);
    assert_non_null(strstr(err.message, "one row"));
    assert_int_equal(hc_db_exec(db, "DELETE FROM fence_generation", &err), 0);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), -1);
    assert_non_null(strstr(err.message, "one row"));
    assert_int_equal(hc_fence_generation_store(db, 3, &err), -1);
}

/* Every write of a next generation failed in turn: nothing changes, and the error says so. */
static void test_generation_faults(void **state)
{
    struct hc_db *db = ((struct hc_test_db *)*state)->db;
    struct hc_error err = {0};
    int64_t g = 0;
    hc_db_fault_set(0, 0);
    assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
    long writes = hc_db_fault_writes();
    assert_true(writes >= 2); /* the UPDATE and the COMMIT */
    int codes[] = {SQLITE_FULL, SQLITE_IOERR};
    for (size_t c = 0; c < HC_ARRAY_LEN(codes); c++)
        for (long n = 1; n <= writes; n++) {
            int64_t before = stored(db);
            g = -7;
            hc_db_fault_set(n, codes[c]);
            assert_int_equal(hc_fence_generation_next(db, &g, &err), -1);
            assert_true(hc_db_fault_fired());
            hc_db_fault_set(-1, 0);
            assert_true(g == -7);
            assert_non_null(strstr(err.message, "cannot take the next fence generation"));
            assert_true(stored(db) == before);
            assert_int_equal(hc_fence_generation_next(db, &g, &err), 0);
            assert_true(g == before + 1);
        }
}

/* ---------------------------------------------------------------- the controller's client */

/* A stand-in agent whose every route first passes the real fence. */
struct judged {
    struct hc_agent_fence *f;
    pthread_mutex_t mu;
    char last_term[64]; /* the X-HC-Term the last request carried, "" without */
    int served, refused;
};

static void judged_route(struct hc_request *req, void *arg)
{
    struct judged *j = arg;
    const char *term = hc_req_header(req, HC_AGENT_FENCE_HEADER);
    pthread_mutex_lock(&j->mu);
    snprintf(j->last_term, sizeof(j->last_term), "%s", term ? term : "");
    pthread_mutex_unlock(&j->mu);
    int refused = hc_agent_fence_request(j->f, req);
    pthread_mutex_lock(&j->mu);
    refused ? j->refused++ : j->served++;
    pthread_mutex_unlock(&j->mu);
    if (!refused)
        hc_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

static const struct hc_test_route judged_routes[] = {
    {"GET", "/v1/status", judged_route},
    {"POST", "/v1/service/stop", judged_route},
};

static int not_leader_now(struct hc_error *err)
{
    return hc_error_set(err, HC_E(NOT_LEADER), "this controller's lease has lapsed");
}

struct client_fixture {
    char dir[512], agent_cert[600], agent_key[600], agent_dir[600], url[64];
    struct hc_controller ctl;
    struct hc_db *db;
    struct hc_http_client *client;
    struct hc_test_standin standin;
    struct judged judged;
};

static void judged_counts(struct client_fixture *f, int *served, int *refused, char *term)
{
    pthread_mutex_lock(&f->judged.mu);
    *served = f->judged.served;
    *refused = f->judged.refused;
    snprintf(term, 64, "%s", f->judged.last_term);
    pthread_mutex_unlock(&f->judged.mu);
}

static int client_setup(void **state)
{
    static struct client_fixture f;
    memset(&f, 0, sizeof(f));
    struct hc_error err = {0};
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_fence");
    snprintf(f.agent_cert, sizeof(f.agent_cert), "%s/agent.pem", f.dir);
    snprintf(f.agent_key, sizeof(f.agent_key), "%s/agent.key", f.dir);
    snprintf(f.agent_dir, sizeof(f.agent_dir), "%s/agent", f.dir);
    assert_int_equal(mkdir(f.agent_dir, 0700), 0);
    hc_test_cluster_pki(&f.ctl, f.agent_cert, f.agent_key);
    f.db = hc_test_ctl_db_crl(&f.ctl);
    pthread_mutex_init(&f.judged.mu, NULL);
    f.judged.f = fence_ok(f.agent_dir);
    hc_test_standin_start(&f.standin, f.agent_cert, f.agent_key, f.ctl.ca_file, judged_routes,
                          HC_ARRAY_LEN(judged_routes), &f.judged);
    snprintf(f.url, sizeof(f.url), "https://127.0.0.1:%d", f.standin.port);
    char pin[HC_PKI_PIN_LEN];
    assert_int_equal(hc_pki_file_pin(f.agent_cert, pin, &err), 0);
    assert_int_equal(
        hc_db_run(f.db, &err,
                  "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                  "cert_serial, cert_pem, cert_pin, joined_at) VALUES ('c-test', 'n1', "
                  "'127.0.0.1', ?, 'n1', 'PEM', ?, ?)",
                  "ssi", f.url, pin, hc_now_ms()),
        1);
    f.client = hc_agent_client_new(&f.ctl, f.db, &err);
    if (!f.client)
        fail_msg("client: %s", err.message);
    *state = &f;
    return 0;
}

static int client_teardown(void **state)
{
    struct client_fixture *f = *state;
    hc_fence_set_term(0);
    hc_fence_set_checker(NULL);
    hc_http_client_free(f->client);
    hc_test_standin_stop(&f->standin);
    hc_agent_fence_free(f->judged.f);
    pthread_mutex_destroy(&f->judged.mu);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    return 0;
}

/* One call; its error code ("" when it succeeded). */
static const char *call(struct client_fixture *f, const char *method, const char *path,
                        struct hc_error *err)
{
    struct hc_http_response resp = {0};
    memset(err, 0, sizeof(*err));
    int rc = hc_agent_call(f->client, f->url, method, path, NULL, 5000, &resp, err);
    hc_http_response_clear(&resp);
    return rc == 0 ? "" : err->code;
}

static void test_client_carries_term(void **state)
{
    struct client_fixture *f = *state;
    struct hc_error err;
    int served, refused;
    char term[64];
    /* no term yet: no header */
    hc_fence_set_term(0);
    assert_string_equal(call(f, "GET", "/v1/status", &err), "");
    judged_counts(f, &served, &refused, term);
    assert_string_equal(term, "");
    /* a term: every call carries it, the agent records it */
    hc_fence_set_term(12);
    assert_string_equal(call(f, "POST", "/v1/service/stop", &err), "");
    judged_counts(f, &served, &refused, term);
    assert_string_equal(term, "12");
    assert_true(hc_agent_fence_highest(f->judged.f) == 12);
    /* a fan-out's calls too */
    char url[128];
    snprintf(url, sizeof(url), "%s/v1/status", f->url);
    struct hc_http_call calls[2] = {{.method = NULL, .url = url, .timeout_ms = 5000},
                                    {.method = "GET", .url = url, .timeout_ms = 5000}};
    hc_fence_set_term(13);
    assert_int_equal(hc_http_fanout(f->client, calls, 2, 0), 2);
    for (int i = 0; i < 2; i++)
        hc_http_response_clear(&calls[i].resp);
    assert_true(hc_agent_fence_highest(f->judged.f) == 13);
    /* an older controller: its reads pass, its changes come back as 409 stale_term */
    hc_fence_set_term(11);
    assert_string_equal(call(f, "GET", "/v1/status", &err), "");
    assert_string_equal(call(f, "POST", "/v1/service/stop", &err), HC_ERR_STALE_TERM);
    assert_non_null(strstr(err.message, "controller term 11 is older than term 13"));
    judged_counts(f, &served, &refused, term);
    assert_int_equal(refused, 1);
}

/* A leader that may not drive agents sends no change at all; its reads still go. */
static void test_client_checks_leader(void **state)
{
    struct client_fixture *f = *state;
    struct hc_error err;
    int served, refused, served_after, refused_after;
    char term[64];
    hc_fence_set_term(3);
    hc_fence_set_checker(not_leader_now);
    judged_counts(f, &served, &refused, term);
    assert_string_equal(call(f, "POST", "/v1/service/stop", &err), HC_ERR_NOT_LEADER);
    assert_non_null(strstr(err.message, "lease has lapsed"));
    assert_non_null(strstr(err.message, "not sent"));
    judged_counts(f, &served_after, &refused_after, term);
    assert_int_equal(served_after + refused_after, served + refused); /* nothing arrived */
    assert_false(hc_agent_err_is_transport(&err));
    assert_string_equal(call(f, "GET", "/v1/status", &err), "");
    judged_counts(f, &served_after, &refused_after, term);
    assert_int_equal(served_after, served + 1);
    assert_string_equal(term, "3");
    hc_fence_set_checker(NULL);
    assert_string_equal(call(f, "POST", "/v1/service/stop", &err), "");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as in hcctld and hcagent: a peer that closes first */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_hostile_headers),
        cmocka_unit_test(test_corrupt_file),
        cmocka_unit_test(test_write_fails),
        cmocka_unit_test(test_concurrent_raises),
        cmocka_unit_test_setup_teardown(test_generation, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_generation_guards, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_generation_faults, db_setup, db_teardown),
        cmocka_unit_test_setup_teardown(test_client_carries_term, client_setup, client_teardown),
        cmocka_unit_test_setup_teardown(test_client_checks_leader, client_setup, client_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
