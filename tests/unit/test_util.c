/* Unit tests for common/util.c: durations, host:port, atomic 0600 files, randomness, compare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/unit/testdir.h"

/* A fresh directory under $HC_TEST_TMP (or /tmp); removed by teardown. */
static int setup_tmp(void **state)
{
    return (*state = hc_test_mkdtemp("test_util")) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    hc_test_rmtree(*state);
    free(*state);
    return 0;
}

static void test_duration_valid(void **state)
{
    static const struct {
        const char *text;
        int64_t ms;
    } cases[] = {
        {"500ms", 500}, {"30s", 30000},   {"5m", 300000}, {"2h", 7200000},        {"1d", 86400000},
        {"90", 90000},  {"1m30s", 90000}, {"0s", 0},      {"1h1m1s1ms", 3661001}, {"1ms", 1},
    };
    for (size_t i = 0; i < HC_ARRAY_LEN(cases); i++) {
        struct hc_error err = {0};
        int64_t ms = -7;
        if (hc_duration_parse(cases[i].text, &ms, &err) != 0)
            fail_msg("'%s' rejected: %s", cases[i].text, err.message);
        if (ms != cases[i].ms)
            fail_msg("'%s' parsed as %lld, want %lld", cases[i].text, (long long)ms,
                     (long long)cases[i].ms);
    }
}

static void test_duration_invalid(void **state)
{
    static const char *const bad[] = {"",  "abc", "5x",   "-1s", "1.5s", " 5s", "5s ",
                                      "s", "5mm", "1m30", "5 s", "+5s",  "5S"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        struct hc_error err = {0};
        int64_t ms = -7;
        if (hc_duration_parse(bad[i], &ms, &err) != -1)
            fail_msg("'%s' accepted as %lld", bad[i], (long long)ms);
        assert_int_equal(ms, -7); /* out-parameter untouched on failure */
        assert_int_equal(err.status, 400);
        assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "invalid duration"));
        assert_true(err.hint[0] != '\0');
    }
    struct hc_error err = {0};
    int64_t ms = 0;
    assert_int_equal(hc_duration_parse(NULL, &ms, &err), -1);

    /* Large parts summed past INT64_MAX are refused (not signed overflow, which UBSan traps). */
    char big[2048] = "";
    for (int i = 0; i < 120; i++)
        strcat(big, "1000000000d");
    assert_int_equal(hc_duration_parse(big, &ms, &err), -1);
    assert_int_equal(hc_duration_parse("1000000000d", &ms, &err), 0);
    assert_int_equal(ms, 1000000000LL * 86400000LL);
}

static void test_host_port(void **state)
{
    char host[256];
    int port = 0;
    struct hc_error err = {0};
    assert_int_equal(hc_split_host_port("10.0.0.1:7443", host, sizeof(host), &port, &err), 0);
    assert_string_equal(host, "10.0.0.1");
    assert_int_equal(port, 7443);
    assert_int_equal(hc_split_host_port("[::1]:443", host, sizeof(host), &port, &err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 443);
    assert_int_equal(hc_split_host_port("node-1.example:22", host, sizeof(host), &port, &err), 0);
    assert_string_equal(host, "node-1.example");
    assert_int_equal(port, 22);
    assert_int_equal(hc_split_host_port("[fe80::1%eth0]:7444", host, sizeof(host), &port, &err), 0);
    assert_string_equal(host, "fe80::1%eth0");
    assert_int_equal(hc_split_host_port("h:0", host, sizeof(host), &port, &err), 0);
    assert_int_equal(port, 0); /* "any port" for listeners */
    assert_int_equal(hc_split_host_port("h:65535", host, sizeof(host), &port, &err), 0);
    assert_int_equal(port, 65535);
}

static void test_host_port_invalid(void **state)
{
    static const char *const bad[] = {
        "10.0.0.1",     "10.0.0.1:", ":443",      "host:abc", "host:70000", "host:65536",
        "host:-1",      "[::1]",     "[::1]443",  "[]:443",   "host:12x",   "[::1:443",
        "host: 80",     "host:+80",  "host:-0",   "fe80::1",  "::1:443",    "host:080000",
        "300.1.1.1:80", "10.0.0:80", "[host]:80", ""};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        char host[256] = "untouched";
        int port = -7;
        struct hc_error err = {0};
        if (hc_split_host_port(bad[i], host, sizeof(host), &port, &err) != -1)
            fail_msg("'%s' accepted as host '%s' port %d", bad[i], host, port);
        assert_int_equal(port, -7);
        assert_string_equal(host, "untouched");
        assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, bad[i]));
    }
    /* A host that does not fit the buffer is refused, not truncated. */
    char small[4];
    int port = 0;
    assert_int_equal(hc_split_host_port("longhost:80", small, sizeof(small), &port, NULL), -1);
}

/* How many entries dir holds (hidden ones included). */
static int dir_entries(const char *dir)
{
    int entries = 0;
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "ls -A '%s' | wc -l", dir) > 0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%d", &entries), 1);
    pclose(p);
    free(cmd);
    return entries;
}

static void test_file_write_atomic(void **state)
{
    const char *dir = *state;
    char *path = hc_path_join(dir, "secret.txt");
    static const char data[] = "line one\nline two\0binary\xff tail";
    struct hc_error err = {0};
    mode_t old = umask(0); /* the mode must not depend on the caller's umask */
    assert_int_equal(hc_file_write_atomic(path, data, sizeof(data), 0600, &err), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    char *back = NULL;
    size_t len = 0;
    assert_int_equal(hc_file_read(path, &back, &len, &err), 0);
    assert_int_equal(len, sizeof(data));
    assert_memory_equal(back, data, sizeof(data));
    free(back);

    /* Overwriting replaces the content entirely (a shorter file leaves no tail). */
    assert_int_equal(hc_file_write_atomic(path, "xy", 2, 0600, &err), 0);
    assert_int_equal(hc_file_read(path, &back, &len, &err), 0);
    assert_int_equal(len, 2);
    assert_string_equal(back, "xy");
    free(back);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* No temporary file is left next to it. */
    assert_int_equal(dir_entries(dir), 1);
    free(path);
}

static void test_file_write_missing_dir(void **state)
{
    char *path = hc_path_join(*state, "no/such/dir/file");
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, "x", 1, 0600, &err), -1);
    assert_string_equal(err.code, HC_ERR_IO);
    char *back = NULL;
    assert_int_equal(hc_file_read(path, &back, NULL, &err), -1);
    assert_string_equal(err.code, HC_ERR_IO);
    free(path);
}

/* A log under the limit stays; over it, its content moves to .1 and a writer holding it open
 * with O_APPEND carries on at the start of the emptied file. */
static void test_file_cap(void **state)
{
    char *path = hc_path_join(*state, "service.log");
    char *old = NULL;
    struct hc_error err = {0};
    assert_true(asprintf(&old, "%s.1", path) > 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    assert_int_equal(hc_file_cap(path, 10, &err), 0);
    assert_int_equal(access(old, F_OK), -1);

    assert_int_equal(write(fd, "abc", 3), 3);
    assert_int_equal(hc_file_cap(path, 10, &err), 1);
    char *back = NULL;
    size_t len = 0;
    assert_int_equal(hc_file_read(old, &back, &len, &err), 0);
    assert_string_equal(back, "0123456789abc");
    free(back);
    assert_int_equal(write(fd, "new", 3), 3);
    assert_int_equal(hc_file_read(path, &back, &len, &err), 0);
    assert_string_equal(back, "new");
    free(back);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    close(fd);

    /* A missing file needs nothing; an unwritable .1 is an error that names the file. */
    assert_int_equal(hc_file_cap("/nonexistent/x.log", 1, &err), 0);
    unlink(old);
    assert_int_equal(mkdir(old, 0755), 0);
    assert_int_equal(write(fd = open(path, O_WRONLY | O_APPEND), "0123456789ab", 12), 12);
    close(fd);
    assert_int_equal(hc_file_cap(path, 10, &err), -1);
    assert_string_equal(err.code, HC_ERR_IO);
    assert_non_null(strstr(err.message, "service.log"));
    assert_int_equal(hc_file_read(path, &back, &len, &err), 0);
    assert_int_equal(len, 3 + 12); /* nothing lost */
    free(back);
    rmdir(old);
    free(old);
    free(path);
}

/* What a local attacker plants at the temporary name the helper used to pick (PATH.tmp.PID,
 * predictable), before a secret is written in a directory they can write to. */
static char *old_tmp_name(const char *path)
{
    char *tmp = NULL;
    assert_true(asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) > 0);
    return tmp;
}

/* Runs hc_file_write_atomic in a child so that a helper blocking on a FIFO fails the test
 * instead of hanging it. Returns the child's exit status (0: written), or -1 when it had to be
 * killed. */
static int write_in_child(const char *path, const char *data, int mode)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct hc_error err = {0};
        alarm(5);
        _exit(hc_file_write_atomic(path, data, strlen(data), mode, &err) == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The private key must neither land in a file someone else prepared nor follow their link. */
static void test_file_write_atomic_planted(void **state)
{
    const char *dir = *state;
    static const char key[] = "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n";
    char *path = hc_path_join(dir, "signing.key");
    char *stolen = hc_path_join(dir, "stolen");
    char *tmp = old_tmp_name(path);
    struct hc_error err = {0};
    struct stat st;
    char buf[256];

    /* 1. A symbolic link at the old name, to a file the attacker can read. */
    int afd = open(stolen, O_RDWR | O_CREAT | O_EXCL, 0666);
    assert_true(afd >= 0);
    fchmod(afd, 0666);
    assert_int_equal(symlink(stolen, tmp), 0);
    assert_int_equal(hc_file_write_atomic(path, key, strlen(key), 0600, &err), 0);
    assert_int_equal(read(afd, buf, sizeof(buf)), 0); /* nothing was written through the link */
    assert_int_equal(fstat(afd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666); /* and its target was not touched */
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    unlink(tmp);
    unlink(path);

    /* 2. A regular file at the old name that the attacker keeps open: truncating and reusing it
     * would hand them the key through their descriptor, whatever mode it gets afterwards. */
    int pfd = open(tmp, O_RDWR | O_CREAT | O_EXCL, 0666);
    assert_true(pfd >= 0);
    assert_int_equal(hc_file_write_atomic(path, key, strlen(key), 0600, &err), 0);
    assert_int_equal(pread(pfd, buf, sizeof(buf), 0), 0);
    close(pfd);
    unlink(tmp);

    /* 3. A FIFO at the old name: opening it for writing would block forever. */
    unlink(path);
    assert_int_equal(mkfifo(tmp, 0666), 0);
    assert_int_equal(write_in_child(path, key, 0600), 0);
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    unlink(tmp);

    /* The key as written: exactly 0600 whatever the umask, unreadable by another user. */
    mode_t old = umask(0);
    assert_int_equal(hc_file_write_atomic(path, key, strlen(key), 0600, &err), 0);
    umask(old);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    if (geteuid() == 0) {
        /* As root (the CI and lab runs), check it for real as nobody. */
        assert_int_equal(chmod(dir, 0755), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(2);
            int fd = open(path, O_RDONLY);
            _exit(fd < 0 && errno == EACCES ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    /* Only the key, the attacker's file and nothing else is left in the directory. */
    assert_int_equal(dir_entries(dir), 2);
    close(afd);
    free(tmp);
    free(stolen);
    free(path);
}

/* The rotation's copy (PATH.1.tmp before) is made the same way. */
static void test_file_cap_planted(void **state)
{
    char *path = hc_path_join(*state, "service.log");
    char *tmp = NULL, *stolen = hc_path_join(*state, "stolen");
    struct hc_error err = {0};
    char buf[64];
    assert_true(asprintf(&tmp, "%s.1.tmp", path) > 0);
    int afd = open(stolen, O_RDWR | O_CREAT | O_EXCL, 0666);
    assert_true(afd >= 0);
    assert_int_equal(symlink(stolen, tmp), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_int_equal(write(fd, "private log line\n", 17), 17);
    close(fd);
    assert_int_equal(hc_file_cap(path, 4, &err), 1);
    assert_int_equal(read(afd, buf, sizeof(buf)), 0);
    char *old = NULL, *back = NULL;
    assert_true(asprintf(&old, "%s.1", path) > 0);
    assert_int_equal(hc_file_read(old, &back, NULL, &err), 0);
    assert_string_equal(back, "private log line\n");
    struct stat st;
    assert_int_equal(stat(old, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    close(afd);
    free(back);
    free(old);
    free(tmp);
    free(stolen);
    free(path);
}

static void test_random_hex(void **state)
{
    char a[65], b[65];
    assert_int_equal(hc_random_hex(a, 32), 0);
    assert_int_equal(hc_random_hex(b, 32), 0);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdef"), 64);
    assert_string_not_equal(a, b);
    char empty[1] = "z";
    assert_int_equal(hc_random_hex(empty, 0), 0);
    assert_string_equal(empty, "");
    assert_int_equal(hc_random_hex(a, 65), -1); /* more than it can produce at once */
    char small[3] = "zz";
    assert_int_equal(hc_random_hex(small, 1), 0);
    assert_int_equal(strlen(small), 2);
    assert_int_equal(strspn(small, "0123456789abcdef"), 2);
    /* Over many draws every hex digit shows up: the charset is all of [0-9a-f], nothing else. */
    int seen[256] = {0};
    for (int i = 0; i < 64; i++) {
        assert_int_equal(hc_random_hex(a, 32), 0);
        for (const char *p = a; *p; p++)
            seen[(unsigned char)*p]++;
    }
    for (const char *d = "0123456789abcdef"; *d; d++)
        assert_true(seen[(unsigned char)*d] > 0);
}

static void test_sha256_and_ct_equal(void **state)
{
    char out[65];
    hc_sha256_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_true(hc_ct_equal("abc", "abc"));
    assert_true(hc_ct_equal("", ""));
    assert_false(hc_ct_equal("abc", "abd"));
    assert_false(hc_ct_equal("abc", "abcd"));
    assert_false(hc_ct_equal("abcd", "abc"));
    assert_false(hc_ct_equal("", "a"));
}

static void test_mkdir_p_and_join(void **state)
{
    char *deep = hc_path_join(*state, "a/b/c");
    struct hc_error err = {0};
    assert_int_equal(hc_mkdir_p(deep, 0700, &err), 0);
    assert_int_equal(hc_mkdir_p(deep, 0700, &err), 0); /* existing is fine */
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(hc_mkdir_p("", 0700, &err), -1);
    free(deep);
}

static void test_time_format(void **state)
{
    char buf[32];
    assert_string_equal(hc_time_format(1795978476123LL, buf, sizeof(buf)),
                        "2026-11-29T18:54:36.123Z");
    assert_string_equal(hc_time_format(0, buf, sizeof(buf)), "1970-01-01T00:00:00.000Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_valid),
        cmocka_unit_test(test_duration_invalid),
        cmocka_unit_test(test_host_port),
        cmocka_unit_test(test_host_port_invalid),
        cmocka_unit_test_setup_teardown(test_file_write_atomic, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_file_write_missing_dir, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_file_cap, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_file_write_atomic_planted, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_file_cap_planted, setup_tmp, teardown_tmp),
        cmocka_unit_test(test_random_hex),
        cmocka_unit_test(test_sha256_and_ct_equal),
        cmocka_unit_test_setup_teardown(test_mkdir_p_and_join, setup_tmp, teardown_tmp),
        cmocka_unit_test(test_time_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
