/*
 * SSH transport against a real OpenSSH sshd started on 127.0.0.1 for the test: host-key
 * pinning (unknown, accepted, changed), key authentication, quoting of hostile arguments,
 * atomic uploads, and deadlines against a peer that never speaks. Needs root (sshd); outside
 * CI, without root, the sshd cases skip with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "controller/remote/ssh.h"

static char dir[512];
static int port;
static pid_t sshd_pid;

static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void sshd_stop(void)
{
    if (sshd_pid > 0) {
        kill(sshd_pid, SIGTERM);
        waitpid(sshd_pid, NULL, 0);
        sshd_pid = 0;
    }
}

/* Starts sshd with host key DIR/<hostkey>; waits until it accepts connections. */
static void sshd_start(const char *hostkey)
{
    FILE *f;
    char path[600];
    snprintf(path, sizeof(path), "%s/sshd_config", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(
        f,
        "Port %d\nListenAddress 127.0.0.1\nHostKey %s/%s\nAuthorizedKeysFile %s/authorized_keys\n"
        "PidFile %s/sshd.pid\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nSubsystem sftp "
        "internal-sftp\n",
        port, dir, hostkey, dir, dir);
    fclose(f);
    sshd_pid = fork();
    if (sshd_pid == 0) {
        execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", path, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        int ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(s);
        if (ok)
            return;
        usleep(50000);
    }
    fail_msg("sshd did not start");
}

static int setup(void **state)
{
    if (geteuid() != 0)
        return 0;
    const char *base = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    mkdir(base, 0755);
    snprintf(dir, sizeof(dir), "%s/ssh.XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    port = 30000 + (getpid() % 20000);
    mkdir("/run/sshd", 0755);
    if (sh("ssh-keygen -q -t ed25519 -N '' -f %s/hostkey1 && ssh-keygen -q -t ed25519 -N '' -f "
           "%s/hostkey2 && ssh-keygen -q -t ed25519 -N '' -f %s/client && ssh-keygen -q -t "
           "ed25519 -N '' -f %s/stranger && cp %s/client.pub %s/authorized_keys",
           dir, dir, dir, dir, dir, dir) != 0)
        return -1;
    sshd_start("hostkey1");
    return 0;
}

static int teardown(void **state)
{
    sshd_stop();
    if (dir[0])
        sh("rm -rf %s", dir);
    return 0;
}

static void need_root(void)
{
    if (geteuid() != 0)
        skip();
}

static struct hc_ssh_opts opts(const char *key, const char *known, int accept)
{
    static char keyp[600], knownp[600];
    snprintf(keyp, sizeof(keyp), "%s/%s", dir, key);
    snprintf(knownp, sizeof(knownp), "%s/%s", dir, known);
    return (struct hc_ssh_opts){
        .key_file = keyp, .known_hosts = knownp, .accept_new = accept, .timeout_ms = 3000};
}

static struct hc_ssh_target target(void)
{
    struct hc_ssh_target t = {.port = port};
    snprintf(t.user, sizeof(t.user), "root");
    snprintf(t.host, sizeof(t.host), "127.0.0.1");
    return t;
}

static void test_target_parse(void **state)
{
    struct hc_ssh_target t;
    struct hc_error err;
    assert_int_equal(hc_ssh_target_parse("198.18.0.11", &t, &err), 0);
    assert_string_equal(t.user, "root");
    assert_string_equal(t.host, "198.18.0.11");
    assert_int_equal(t.port, 22);
    assert_int_equal(hc_ssh_target_parse("admin@node1:2222", &t, &err), 0);
    assert_string_equal(t.user, "admin");
    assert_string_equal(t.host, "node1");
    assert_int_equal(t.port, 2222);
    assert_int_equal(hc_ssh_target_parse("[::1]:22", &t, &err), 0);
    assert_string_equal(t.host, "::1");
    const char *bad[] = {"",    "@host",      "host:",   "host:0", "host:99999",
                         "a b", "h;rm -rf /", "$(id)@h", "user@"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        assert_int_equal(hc_ssh_target_parse(bad[i], &t, &err), -1);
        assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    }
}

static void test_unknown_key_refused_then_pinned(void **state)
{
    need_root();
    struct hc_error err;
    char fp[128];
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = opts("client", "known1", 0);
    struct hc_ssh *s = hc_ssh_connect(&t, &o, fp, sizeof(fp), &err);
    assert_null(s);
    assert_string_equal(err.code, HC_ERR_HOST_KEY_UNKNOWN);
    assert_non_null(strstr(err.message, "SHA256:"));
    assert_non_null(strstr(err.hint, "--accept-new-host-keys"));
    assert_int_equal(strncmp(fp, "SHA256:", 7), 0);

    o.accept_new = 1;
    s = hc_ssh_connect(&t, &o, fp, sizeof(fp), &err);
    assert_non_null(s);
    hc_ssh_close(s);
    o.accept_new = 0; /* pinned now: no flag needed */
    s = hc_ssh_connect(&t, &o, fp, sizeof(fp), &err);
    assert_non_null(s);
    hc_ssh_close(s);
}

static void test_changed_key_always_refused(void **state)
{
    need_root();
    struct hc_error err;
    char fp1[128], fp2[128];
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = opts("client", "known2", 1);
    struct hc_ssh *s = hc_ssh_connect(&t, &o, fp1, sizeof(fp1), &err);
    assert_non_null(s);
    hc_ssh_close(s);
    sshd_stop();
    sshd_start("hostkey2");
    s = hc_ssh_connect(&t, &o, fp2, sizeof(fp2), &err); /* even with accept_new */
    assert_null(s);
    assert_string_equal(err.code, HC_ERR_HOST_KEY_CHANGED);
    assert_non_null(strstr(err.message, fp1));
    assert_non_null(strstr(err.message, fp2));
    sshd_stop();
    sshd_start("hostkey1");
}

static void test_wrong_key_refused(void **state)
{
    need_root();
    struct hc_error err;
    char fp[128];
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = opts("stranger", "known3", 1);
    assert_null(hc_ssh_connect(&t, &o, fp, sizeof(fp), &err));
    assert_string_equal(err.code, HC_ERR_SSH_AUTH);
    o = opts("no-such-key", "known3", 1);
    assert_null(hc_ssh_connect(&t, &o, fp, sizeof(fp), &err));
    assert_string_equal(err.code, HC_ERR_SSH_AUTH);
}

static void test_hostile_arguments_stay_arguments(void **state)
{
    need_root();
    struct hc_error err;
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = opts("client", "known4", 1);
    struct hc_ssh *s = hc_ssh_connect(&t, &o, NULL, 0, &err);
    assert_non_null(s);
    char marker[700];
    snprintf(marker, sizeof(marker), "%s/pwned", dir);
    char evil1[800];
    snprintf(evil1, sizeof(evil1), "'; touch %s; echo '", marker);
    const char *evil[] = {evil1, "$(touch /tmp/hc-pwned)", "`id`", "a\nb", "x\"y\\z", "*", ""};
    for (size_t i = 0; i < HC_ARRAY_LEN(evil); i++) {
        const char *argv[] = {"printf", "%s", evil[i], NULL};
        struct hc_ssh_result r;
        assert_int_equal(hc_ssh_run(s, argv, 5000, &r, &err), 0);
        assert_int_equal(r.exit_status, 0);
        assert_string_equal(r.out, evil[i]);
        hc_ssh_result_clear(&r);
    }
    assert_int_not_equal(access(marker, F_OK), 0);
    assert_int_not_equal(access("/tmp/hc-pwned", F_OK), 0);

    const char *failing[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
    struct hc_ssh_result r;
    assert_int_equal(hc_ssh_run(s, failing, 5000, &r, &err), 0);
    assert_int_equal(r.exit_status, 3);
    assert_string_equal(r.err, "oops\n");
    hc_ssh_result_clear(&r);

    const char *slow[] = {"sleep", "5", NULL};
    int64_t t0 = hc_mono_ms();
    assert_int_equal(hc_ssh_run(s, slow, 300, &r, &err), -1);
    assert_string_equal(err.code, HC_ERR_TIMEOUT);
    assert_true(hc_mono_ms() - t0 < 2000);
    hc_ssh_close(s);
}

static void test_upload_atomic_and_overwrites(void **state)
{
    need_root();
    struct hc_error err;
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = opts("client", "known5", 1);
    struct hc_ssh *s = hc_ssh_connect(&t, &o, NULL, 0, &err);
    assert_non_null(s);
    char remote[700];
    snprintf(remote, sizeof(remote), "%s/up/deep/file.bin", dir);
    if (hc_ssh_upload(s, "first", 5, remote, 0600, &err) < 0)
        fail_msg("%s", err.message);
    assert_int_equal(hc_ssh_upload(s, "second!", 7, remote, 0755, &err), 0);
    char *data;
    size_t len;
    assert_int_equal(hc_file_read(remote, &data, &len, &err), 0);
    assert_int_equal(len, 7);
    assert_memory_equal(data, "second!", 7);
    free(data);
    struct stat st;
    assert_int_equal(stat(remote, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    assert_int_equal(sh("ls %s/up/deep | grep -q upload", dir) == 0, 0); /* no temp left */
    hc_ssh_close(s);
}

static void test_closed_port_and_silent_peer(void **state)
{
    struct hc_error err;
    struct hc_ssh_target t = target();
    struct hc_ssh_opts o = {
        .key_file = "/nonexistent", .known_hosts = "/dev/null", .timeout_ms = 1000};
    /* A listener that accepts and never speaks: the deadline must end the attempt. */
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t al = sizeof(a);
    getsockname(ls, (struct sockaddr *)&a, &al);
    t.port = ntohs(a.sin_port);
    int64_t t0 = hc_mono_ms();
    assert_null(hc_ssh_connect(&t, &o, NULL, 0, &err));
    assert_true(hc_mono_ms() - t0 < 5000);
    assert_true(strcmp(err.code, HC_ERR_TIMEOUT) == 0 || strcmp(err.code, HC_ERR_UNREACHABLE) == 0);
    close(ls);
    /* Nobody listens now. */
    assert_null(hc_ssh_connect(&t, &o, NULL, 0, &err));
    assert_string_equal(err.code, HC_ERR_UNREACHABLE);
}

static void test_quote(void **state)
{
    char *q = hc_sh_quote("it's");
    assert_string_equal(q, "'it'\\''s'");
    free(q);
    q = hc_sh_quote("");
    assert_string_equal(q, "''");
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_parse),
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_unknown_key_refused_then_pinned),
        cmocka_unit_test(test_changed_key_always_refused),
        cmocka_unit_test(test_wrong_key_refused),
        cmocka_unit_test(test_hostile_arguments_stay_arguments),
        cmocka_unit_test(test_upload_atomic_and_overwrites),
        cmocka_unit_test(test_closed_port_and_silent_peer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
