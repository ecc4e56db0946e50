/*
 * Unit tests of privilege (agents/hcagent/privilege.c and its use by the supervisor and the hooks):
 * - a service started through the supervisor runs as the service user (not root), with no
 *   capability, no supplementary group and no_new_privs, owns its data directory and cannot
 *   write its bundle, the software directory or the agent's data directory;
 * - a command hook runs the same way;
 * - a data directory left by a root-run service is handed over whole, symbolic links not
 *   followed;
 * - the agent's own restriction: bounding set and permitted set HC_AGENT_CAPS, no_new_privs;
 * - HCAGENT_SERVICE_USER: a name, UID:GID, refusals;
 * - the unit pushed over SSH carries the packaged unit's hardening and the capability list the
 *   agent keeps by itself.
 * As root (how the suite runs) the switch to the service user is asserted; otherwise that the
 * service runs as the agent's own user, still without capabilities and with no_new_privs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/hcagent/privilege.h"
#include "agents/hcagent/service.h"
#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/op_bootstrap.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    unsetenv("HCAGENT_SERVICE_USER");
    dir = hc_test_mkdtemp("privilege");
    if (!dir)
        return -1;
    /* Like any directory above an agent's data directory: others may pass (the scratch root
     * too, which another test may have made 0700). */
    char base[4096];
    struct stat st;
    snprintf(base, sizeof(base), "%s", dir);
    *strrchr(base, '/') = '\0';
    if (stat(base, &st) < 0 || chmod(base, (st.st_mode & 07777) | 0011) < 0)
        return -1;
    return chmod(dir, 0711) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hc_test_rmtree(dir);
    free(dir);
    return 0;
}

static void write_text(const char *path, const char *text, int mode)
{
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, text, strlen(text), mode, &err), 0);
}

/* The value after "Key:" in a /proc/PID/status text (trimmed), "" when absent. */
static void status_field(const char *status, const char *key, char *out, size_t len)
{
    char k[64];
    snprintf(k, sizeof(k), "\n%s:", key);
    const char *p = strstr(status, k);
    out[0] = '\0';
    if (!p)
        return;
    p += strlen(k);
    p += strspn(p, " \t");
    snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/* What every confined process must show. */
static void assert_confined(const char *status)
{
    char v[200], want[64];
    uid_t uid = geteuid() == 0 ? HC_SERVICE_ID : getuid();
    gid_t gid = geteuid() == 0 ? HC_SERVICE_ID : getgid();
    status_field(status, "Uid", v, sizeof(v));
    snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", uid, uid, uid, uid);
    assert_string_equal(v, want);
    status_field(status, "Gid", v, sizeof(v));
    snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", gid, gid, gid, gid);
    assert_string_equal(v, want);
    if (geteuid() == 0) {
        status_field(status, "Groups", v, sizeof(v));
        assert_string_equal(v, "");
    }
    status_field(status, "CapEff", v, sizeof(v));
    assert_string_equal(v, "0000000000000000");
    status_field(status, "CapPrm", v, sizeof(v));
    assert_string_equal(v, "0000000000000000");
    status_field(status, "CapInh", v, sizeof(v));
    assert_string_equal(v, "0000000000000000");
    status_field(status, "CapAmb", v, sizeof(v));
    assert_string_equal(v, "0000000000000000");
    status_field(status, "NoNewPrivs", v, sizeof(v));
    assert_string_equal(v, "1");
}

/* The service: records its /proc status, then tries to write where it must not and where it
 * may, and stays up until stopped. */
static const char service_script[] =
    "#!/bin/sh\n"
    "d=$HC_SERVICE_DATA_DIR\n"
    "cat /proc/self/status >\"$d/status\" || exit 3\n"
    "for p in \"$HC_BUNDLE_DIR/evil\" \"$HC_BUNDLE_DIR/../evil\" \"$HC_BUNDLE_DIR/../../evil\" "
    "\"$HC_BUNDLE_DIR/bin/svc.sh\"; do\n"
    "  if (echo x >>\"$p\") 2>/dev/null; then echo \"$p\" >>\"$d/wrote\"; fi\n"
    "done\n"
    "echo ok >\"$d/mine\" && touch \"$d/done\"\n"
    "exec sleep 60\n";

struct agent_tree {
    char data[1100], sw[1100], bundle[1100], svc_data[1100];
};

/* DIR/ (0700 as join makes it), DIR/software/1.0/bin/svc.sh; data in DIR/service-data. */
static void make_tree(struct agent_tree *t)
{
    struct hc_error err = {0};
    char path[1300];
    snprintf(t->data, sizeof(t->data), "%s/agent", dir);
    snprintf(t->sw, sizeof(t->sw), "%s/software", t->data);
    snprintf(t->bundle, sizeof(t->bundle), "%s/1.0", t->sw);
    snprintf(t->svc_data, sizeof(t->svc_data), "%s/service-data", t->data);
    assert_int_equal(hc_mkdir_p(t->data, 0700, &err), 0);
    assert_int_equal(chmod(t->data, 0700), 0);
    snprintf(path, sizeof(path), "%s/bin", t->bundle);
    assert_int_equal(hc_mkdir_p(path, 0755, &err), 0);
    snprintf(path, sizeof(path), "%s/bin/svc.sh", t->bundle);
    write_text(path, service_script, 0755);
}

static void wait_file(struct event_base *base, const char *path)
{
    int64_t deadline = hc_mono_ms() + 10000;
    while (access(path, F_OK) < 0 && hc_mono_ms() < deadline) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(20000);
    }
    assert_int_equal(access(path, F_OK), 0);
}

static void on_stopped(void *arg)
{
    *(int *)arg = 1;
}

static char *read_in(const char *d, const char *name)
{
    char path[1300], *text = NULL;
    struct hc_error err = {0};
    snprintf(path, sizeof(path), "%s/%s", d, name);
    if (hc_file_read(path, &text, NULL, &err) < 0)
        return NULL;
    return text;
}

static void test_service_runs_confined(void **state)
{
    (void)state;
    struct agent_tree t;
    struct hc_error err = {0};
    make_tree(&t);
    /* Limits in a fake cgroup v2 tree: the child must be placed there (while still root)
     * before it drops privilege, as with a real one. */
    char root[1100], base_cg[2300], path[2400];
    snprintf(root, sizeof(root), "%s/cg", dir);
    hc_test_fake_cgroup(root, "cpu memory\n", base_cg, sizeof(base_cg));
    setenv("HCAGENT_CGROUP_ROOT", root, 1);
    struct event_base *base = event_base_new();
    struct hc_jobs *jobs = hc_jobs_new(base);
    struct hc_service *svc = hc_service_new(base, jobs, t.sw, &err);
    assert_non_null(svc);
    json_t *manifest =
        json_pack("{s:s, s:s, s:[], s:i, s:{s:i}}", "name", "svc", "entrypoint", "bin/svc.sh",
                  "args", "stop_timeout_ms", 2000, "limits", "memory_mb", 64);
    struct hc_service_env env = {0};
    snprintf(env.node, sizeof(env.node), "n1");
    snprintf(env.service_host, sizeof(env.service_host), "127.0.0.1");
    snprintf(env.data_dir, sizeof(env.data_dir), "%s", t.svc_data);
    snprintf(env.version, sizeof(env.version), "1.0");
    snprintf(env.bundle_dir, sizeof(env.bundle_dir), "%s", t.bundle);
    assert_int_equal(hc_service_start(svc, manifest, &env, &err), 0);
    char done[1300];
    snprintf(done, sizeof(done), "%s/done", t.svc_data);
    wait_file(base, done);

    char *status = read_in(t.svc_data, "status");
    assert_non_null(status);
    assert_confined(status);
    free(status);
    json_t *sj = hc_service_json(svc);
    assert_true(json_is_true(json_object_get(json_object_get(sj, "limits"), "applied")));
    char pid[32];
    snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(json_object_get(sj, "pid")));
    json_decref(sj);
    snprintf(path, sizeof(path), "%s/hcservice-n1", base_cg); /* hcservice-NODE */
    char *procs = read_in(path, "cgroup.procs");
    assert_non_null(procs);
    assert_string_equal(procs, pid);
    free(procs);
    unsetenv("HCAGENT_CGROUP_ROOT");
    /* Nothing outside its data directory took a write; inside, its files are its own. (An
     * agent that is not root runs the service as itself: the same user owns both.) */
    char *wrote = read_in(t.svc_data, "wrote");
    if (wrote && geteuid() == 0)
        fail_msg("the service wrote outside its data directory: %s", wrote);
    free(wrote);
    struct stat st;
    snprintf(path, sizeof(path), "%s/mine", t.svc_data);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, geteuid() == 0 ? HC_SERVICE_ID : getuid());
    assert_int_equal(stat(t.svc_data, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(st.st_uid, geteuid() == 0 ? HC_SERVICE_ID : getuid());
    snprintf(path, sizeof(path), "%s/bin/svc.sh", t.bundle);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, geteuid()); /* the bundle stays the agent's */

    /* The agent can still stop it (a process of another uid: CAP_KILL). */
    int stopped = 0;
    hc_service_stop(svc, on_stopped, &stopped);
    int64_t deadline = hc_mono_ms() + 5000;
    while (!stopped && hc_mono_ms() < deadline) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(20000);
    }
    assert_true(stopped);
    assert_string_equal(hc_service_state_name(hc_service_state(svc)), "stopped");
    hc_service_free(svc, 0);
    hc_jobs_free(jobs);
    event_base_free(base);
    json_decref(manifest);
}

static void test_command_hook_confined(void **state)
{
    (void)state;
    struct agent_tree t;
    struct hc_error err = {0};
    struct hc_service_user u;
    make_tree(&t);
    char path[1300];
    snprintf(path, sizeof(path), "%s/bin/health.sh", t.bundle);
    write_text(path, "#!/bin/sh\ncat /proc/self/status >\"$HC_SERVICE_DATA_DIR/hook\"\n", 0755);
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_int_equal(hc_privilege_service_dir(t.svc_data, NULL, &u, &err), 0);
    struct hc_service_env env = {0};
    snprintf(env.data_dir, sizeof(env.data_dir), "%s", t.svc_data);
    snprintf(env.bundle_dir, sizeof(env.bundle_dir), "%s", t.bundle);
    json_t *hook = json_pack("{s:[s]}", "command", "bin/health.sh");
    struct hc_hook_result res;
    hc_hook_run(HC_HOOK_HEALTH, hook, &env, &res);
    json_decref(hook);
    assert_true(res.ok);
    char *status = read_in(t.svc_data, "hook");
    assert_non_null(status);
    assert_confined(status);
    free(status);
}

static void test_data_dir_handover(void **state)
{
    (void)state;
    struct hc_error err = {0};
    struct hc_service_user u;
    struct stat st;
    char data[600], sub[700], file[800], link[700], outside[600];
    if (geteuid() != 0) {
        /* Not root: nothing to hand over, the directory is simply made. */
        assert_int_equal(hc_privilege_service_user(&u, &err), 0);
        assert_false(u.switch_user);
        snprintf(data, sizeof(data), "%s/d", dir);
        assert_int_equal(hc_privilege_service_dir(data, NULL, &u, &err), 0);
        assert_int_equal(stat(data, &st), 0);
        return;
    }
    snprintf(data, sizeof(data), "%s/agent/service-data", dir);
    snprintf(sub, sizeof(sub), "%s/blocks/ab", data);
    snprintf(file, sizeof(file), "%s/blk1", sub);
    snprintf(link, sizeof(link), "%s/escape", data);
    snprintf(outside, sizeof(outside), "%s/outside", dir);
    snprintf(sub, sizeof(sub), "%s/agent", dir);
    assert_int_equal(mkdir(sub, 0700), 0); /* as join makes it */
    snprintf(sub, sizeof(sub), "%s/blocks/ab", data);
    assert_int_equal(hc_mkdir_p(sub, 0755, &err), 0);
    write_text(file, "data", 0644);
    write_text(outside, "not yours", 0600);
    assert_int_equal(symlink(outside, link), 0);
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_true(u.switch_user);
    assert_int_equal(hc_privilege_service_dir(data, NULL, &u, &err), 0);
    const char *mine[] = {data, sub, file};
    for (size_t i = 0; i < HC_ARRAY_LEN(mine); i++) {
        assert_int_equal(lstat(mine[i], &st), 0);
        assert_int_equal(st.st_uid, HC_SERVICE_ID);
        assert_int_equal(st.st_gid, HC_SERVICE_ID);
    }
    assert_int_equal(lstat(link, &st), 0);
    assert_int_equal(st.st_uid, HC_SERVICE_ID); /* the link itself */
    assert_int_equal(stat(outside, &st), 0);
    assert_int_equal(st.st_uid, 0); /* not what it points at */
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* The agent's data directory now lets the service pass (not list). */
    snprintf(sub, sizeof(sub), "%s/agent", dir);
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);

    /* A path the service user cannot reach is refused at once, with the culprit named. */
    char closed[600], inner[700];
    snprintf(closed, sizeof(closed), "%s/closed", dir);
    snprintf(inner, sizeof(inner), "%s/x/bundle", closed);
    assert_int_equal(hc_mkdir_p(inner, 0755, &err), 0);
    assert_int_equal(chmod(closed, 0700), 0);
    const char *reach[] = {inner, NULL};
    assert_int_equal(hc_privilege_service_dir(data, reach, &u, &err), -1);
    assert_non_null(strstr(err.message, "cannot reach"));
    assert_non_null(strstr(err.message, closed));
}

/* The agent writes into the service's directory as the service: the file is the service's,
 * and a link the service planted cannot redirect the write to a file of the agent's. */
static void test_service_write(void **state)
{
    (void)state;
    struct agent_tree t;
    struct hc_error err = {0};
    struct stat st;
    char path[1300], secret[1300], tmp[1400];
    make_tree(&t);
    assert_int_equal(hc_privilege_service_write(t.svc_data, "peers.json", "{}", 2, 0644, &err), 0);
    snprintf(path, sizeof(path), "%s/peers.json", t.svc_data);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, geteuid() == 0 ? HC_SERVICE_ID : getuid());
    if (geteuid() != 0)
        return;
    snprintf(secret, sizeof(secret), "%s/agent.key", t.data);
    write_text(secret, "KEY", 0600);
    /* Whatever temporary name the write uses next to the file, each is a trap. */
    snprintf(tmp, sizeof(tmp), "%s/peers.json.tmp.%d", t.svc_data, (int)getpid());
    assert_int_equal(symlink(secret, tmp), 0);
    hc_privilege_service_write(t.svc_data, "peers.json", "{\"x\":1}", 7, 0644, &err);
    char *text = read_in(t.data, "agent.key");
    assert_non_null(text);
    assert_string_equal(text, "KEY");
    free(text);
    assert_int_equal(stat(secret, &st), 0);
    assert_int_equal(st.st_uid, 0);
    /* The agent's own fs ids are back: it can write its files again. */
    write_text(secret, "KEY2", 0600);
}

/* A purge as the restricted agent does it (no CAP_DAC_OVERRIDE): in a child, after
 * hc_privilege_restrict_agent, what the service left in 0700 directories of its own goes too. */
static void test_service_remove(void **state)
{
    (void)state;
    struct agent_tree t;
    struct hc_error err = {0};
    struct hc_service_user u;
    char sub[1300], file[1400], link[1300], outside[1300];
    make_tree(&t);
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_int_equal(hc_privilege_service_dir(t.svc_data, NULL, &u, &err), 0);
    snprintf(outside, sizeof(outside), "%s/keep", dir);
    write_text(outside, "keep", 0600);
    /* What the service would make: its own 0700 directory, a file, a link out. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (hc_privilege_drop_child(&u) < 0)
            _exit(1);
        snprintf(sub, sizeof(sub), "%s/blocks", t.svc_data);
        snprintf(file, sizeof(file), "%s/blk", sub);
        snprintf(link, sizeof(link), "%s/out", t.svc_data);
        FILE *f = NULL;
        _exit(mkdir(sub, 0700) == 0 && (f = fopen(file, "w")) && fclose(f) == 0 &&
                      chmod(file, 0600) == 0 && symlink(outside, link) == 0
                  ? 0
                  : 2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct hc_error e = {0};
        if (hc_privilege_restrict_agent(&e) < 0)
            _exit(1);
        _exit(hc_privilege_service_remove(t.svc_data, &e) == 0 ? 0 : 2);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(access(t.svc_data, F_OK), -1);
    assert_int_equal(access(outside, F_OK), 0); /* the link went, not its target */
    assert_int_equal(hc_privilege_service_remove(t.svc_data, &err), 0); /* missing: fine */
}

/* In a child (the restriction is for good): the agent keeps HC_AGENT_CAPS and nothing else. */
static void test_restrict_agent(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct hc_error err = {0};
        uint64_t eff, prm, bnd;
        if (hc_privilege_restrict_agent(&err) < 0 || hc_privilege_caps(&eff, &prm, &bnd) < 0)
            _exit(10);
        if (prm & ~HC_AGENT_CAPS || eff & ~HC_AGENT_CAPS)
            _exit(11);
        if (geteuid() == 0 && (bnd != HC_AGENT_CAPS || prm != HC_AGENT_CAPS))
            _exit(12);
        char *status = NULL;
        if (hc_file_read("/proc/self/status", &status, NULL, &err) < 0 ||
            !strstr(status, "\nNoNewPrivs:\t1\n"))
            _exit(13);
        free(status);
        /* Still able to do what it is for: become the service user in a child. */
        struct hc_service_user u;
        if (hc_privilege_service_user(&u, &err) < 0)
            _exit(14);
        pid_t c = fork();
        if (c == 0)
            _exit(hc_privilege_drop_child(&u) == 0 && getuid() == u.uid ? 0 : 1);
        int st = 0;
        waitpid(c, &st, 0);
        _exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 15);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_service_user_choice(void **state)
{
    (void)state;
    struct hc_service_user u;
    struct hc_error err = {0};
    if (geteuid() != 0) {
        assert_int_equal(hc_privilege_service_user(&u, &err), 0);
        assert_false(u.switch_user);
        assert_int_equal(u.uid, getuid());
        assert_non_null(strstr(u.detail, "not root"));
        return;
    }
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_true(u.switch_user);
    assert_int_equal(u.uid, HC_SERVICE_ID);
    assert_int_equal(u.gid, HC_SERVICE_ID);
    setenv("HCAGENT_SERVICE_USER", "4242:4343", 1);
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_int_equal(u.uid, 4242);
    assert_int_equal(u.gid, 4343);
    setenv("HCAGENT_SERVICE_USER", "nobody", 1);
    assert_int_equal(hc_privilege_service_user(&u, &err), 0);
    assert_int_equal(u.uid, 65534);
    const char *bad[] = {
        "0:0", "4242:0", "root", "4242:", ":1", "no-such-user-hc", "1:2:3", "99999999999:1"};
    for (size_t i = 0; i < HC_ARRAY_LEN(bad); i++) {
        setenv("HCAGENT_SERVICE_USER", bad[i], 1);
        memset(&err, 0, sizeof(err));
        if (hc_privilege_service_user(&u, &err) == 0)
            fail_msg("HCAGENT_SERVICE_USER=%s accepted", bad[i]);
        assert_true(err.message[0] != '\0');
    }
    unsetenv("HCAGENT_SERVICE_USER");
}

/* 1 when text has line as one whole line. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

static void test_pushed_unit(void **state)
{
    (void)state;
    char *unit = hc_bootstrap_unit_text();
    assert_non_null(unit);
    assert_null(strstr(unit, "@HC_")); /* every placeholder filled */
    const char *want[] = {
        "ExecStart=" HC_REMOTE_AGENT_ROOT "/current/hcagent join --config " HC_REMOTE_AGENT_ETC
        "/join.json",
        "StateDirectory=" HC_REMOTE_AGENT_STATE,
        "CapabilityBoundingSet=" HC_AGENT_CAPS_NAMES,
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_NETLINK AF_UNIX",
        "SystemCallFilter=@system-service",
        "LimitNOFILE=65536",
        "KillMode=process",
        "Delegate=cpu memory",
    };
    for (size_t i = 0; i < HC_ARRAY_LEN(want); i++)
        if (!has_line(unit, want[i]))
            fail_msg("the pushed unit lacks '%s'", want[i]);
    assert_null(strstr(unit, "AmbientCapabilities=CAP"));
    /* /var/lib + StateDirectory is where the agent's data is. */
    assert_string_equal("/var/lib/" HC_REMOTE_AGENT_STATE, HC_REMOTE_AGENT_DATA);
    free(unit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_service_runs_confined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_hook_confined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_dir_handover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restrict_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_user_choice, setup, teardown),
        cmocka_unit_test(test_pushed_unit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
