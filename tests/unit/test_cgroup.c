/* Unit tests of the storage service's resource bounds on cgroup v1 (agents/hcagent/cgroup.c;
 * v2 is in test_software.c on a fake tree):
 * - a fake v1 tree (one hierarchy per controller, the agent's own cgroup of each from
 *   /proc/self/cgroup): the leaves made and the values written;
 * - the real hierarchy of this machine (root, cgroup v1 with cpu, cpuacct and memory writable;
 *   on a cgroup v2 machine the same checks run against v2): a busy process held to 20% of a CPU,
 *   measured from the cgroup's own accounting over 2 s, and a process that goes over a 32 MB
 *   bound killed by the kernel and reported as such. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agents/hcagent/service.h"
#include "common/util.h"
#include "support/support.h"

/* This process's cgroup of a v1 controller ("" for the root), from /proc/self/cgroup. */
static void own_of(const char *controller, char *out, size_t len)
{
    char line[1024];
    FILE *f = fopen("/proc/self/cgroup", "r");
    out[0] = '\0';
    while (f && fgets(line, sizeof(line), f)) {
        char *list = strchr(line, ':'), *path = list ? strchr(list + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        char want[64];
        snprintf(want, sizeof(want), ",%s,", controller);
        char have[512];
        snprintf(have, sizeof(have), ",%s,", list + 1);
        if (strstr(have, want))
            snprintf(out, len, "%s", strcmp(path, "/") ? path : "");
    }
    if (f)
        fclose(f);
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static void touch(const char *dir, const char *file)
{
    char path[2400];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* A fake v1 tree: cpu, cpuacct and memory apart, each with this process's own cgroup. */
static void test_v1_fake(void **state)
{
    char root[600], dirs[3][1800], own[1024], path[2400];
    const char *ctl[3] = {"cpu", "cpuacct", "memory"};
    struct hc_error err = {0};
    snprintf(root, sizeof(root), "%s/cgv1-%d",
             getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp", (int)getpid());
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", root, ctl[i]);
        assert_int_equal(hc_mkdir_p(path, 0755, &err), 0);
        touch(path, "tasks");
        own_of(ctl[i], own, sizeof(own));
        snprintf(dirs[i], sizeof(dirs[i]), "%s%s", path, own);
        assert_int_equal(hc_mkdir_p(dirs[i], 0755, &err), 0);
    }
    struct hc_cgroup cg;
    hc_cgroup_setup(&cg, root, "hcservice-n1", 50, 256);
    assert_true(cg.applied);
    assert_int_equal(cg.version, 1);
    snprintf(path, sizeof(path), "%s/hcservice-n1/cpu.cfs_quota_us", dirs[0]);
    assert_string_equal(slurp(path), "50000");
    snprintf(path, sizeof(path), "%s/hcservice-n1/cpu.cfs_period_us", dirs[0]);
    assert_string_equal(slurp(path), "100000");
    snprintf(path, sizeof(path), "%s/hcservice-n1/memory.limit_in_bytes", dirs[2]);
    assert_string_equal(slurp(path), "268435456");
    char why[300];
    assert_int_equal(hc_cgroup_attach(&cg, 4242, why, sizeof(why)), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/hcservice-n1/cgroup.procs", dirs[i]);
        assert_string_equal(slurp(path), "4242");
    }
    /* the accounting it reports, from the files a kernel would keep */
    snprintf(path, sizeof(path), "%s/hcservice-n1/cpuacct.usage", dirs[1]);
    hc_test_write_text(path, "1500000000\n", 0644);
    snprintf(path, sizeof(path), "%s/hcservice-n1/cpu.stat", dirs[0]);
    hc_test_write_text(path, "nr_periods 40\nnr_throttled 12\nthrottled_time 3000000\n", 0644);
    snprintf(path, sizeof(path), "%s/hcservice-n1/memory.failcnt", dirs[2]);
    hc_test_write_text(path, "7\n", 0644);
    snprintf(path, sizeof(path), "%s/hcservice-n1/memory.oom_control", dirs[2]);
    hc_test_write_text(path, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", 0644);
    struct hc_cgroup_usage u;
    assert_int_equal(hc_cgroup_usage(&cg, &u), 0);
    assert_int_equal(u.cpu_usec, 1500000);
    assert_int_equal(u.nr_throttled, 12);
    assert_int_equal(u.throttled_usec, 3000);
    assert_int_equal(u.memory_limit_hits, 7);
    assert_int_equal(u.oom_kills, 2);
    assert_true(u.memory_bytes == -1); /* no such file: unknown, not 0 */
    json_t *j = hc_cgroup_json(&cg);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "oom_kills")),
                     2);
    assert_true(json_is_null(json_object_get(json_object_get(j, "usage"), "memory_bytes")));
    json_decref(j);

    /* A memory bound only: no cpu hierarchy needed. A node name that is not a safe path
     * component is made one. */
    hc_cgroup_setup(&cg, root, "../../etc", 0, 64);
    assert_true(cg.applied);
    assert_null(strstr(cg.mem_path, ".."));
    assert_non_null(strstr(cg.mem_path, "/______etc"));
    /* No memory hierarchy: plainly not applied. */
    snprintf(path, sizeof(path), "%s/memory/tasks", root);
    unlink(path);
    hc_cgroup_setup(&cg, root, "hcservice-n1", 50, 64);
    assert_false(cg.applied);
    assert_non_null(strstr(cg.detail, "no cgroup v1 hierarchy holds the memory controller"));
    hc_test_sh("rm -rf '%s'", root);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A child that waits for a byte on fd, then runs work(). */
static pid_t child(int *go, void (*work)(void))
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(p[1]);
        if (read(p[0], &c, 1) != 1)
            _exit(3);
        work();
        _exit(0);
    }
    close(p[0]);
    *go = p[1];
    return pid;
}

static void spin(void)
{
    volatile unsigned long x = 0;
    for (;;)
        x++;
}

static void hog(void)
{
    size_t size = 96u << 20;
    char *m = malloc(size);
    if (!m)
        _exit(4);
    for (size_t i = 0; i < size; i += 4096)
        m[i] = 1;
    _exit(0);
}

static int real_cgroups(void)
{
    return geteuid() == 0 && (access("/sys/fs/cgroup/cpu/tasks", W_OK) == 0 ||
                              access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0);
}

/* 20% of a CPU asked: a spinning process gets 20% by the cgroup's own accounting. */
static void test_real_cpu_bound(void **state)
{
    if (!real_cgroups())
        fail_msg("needs root and a writable cgroup hierarchy at /sys/fs/cgroup");
    char name[64], why[300];
    snprintf(name, sizeof(name), "hctest-cpu-%d", (int)getpid());
    struct hc_cgroup cg;
    hc_cgroup_setup(&cg, "/sys/fs/cgroup", name, 20, 0);
    if (!cg.applied)
        fail_msg("%s", cg.detail);
    int go;
    pid_t pid = child(&go, spin);
    assert_int_equal(hc_cgroup_attach(&cg, pid, why, sizeof(why)), 0);
    assert_int_equal(write(go, "x", 1), 1);
    usleep(300 * 1000);
    struct hc_cgroup_usage a, b;
    assert_int_equal(hc_cgroup_usage(&cg, &a), 0);
    double t0 = now_s();
    sleep(2);
    assert_int_equal(hc_cgroup_usage(&cg, &b), 0);
    double elapsed = now_s() - t0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(go);
    double pct = (double)(b.cpu_usec - a.cpu_usec) / (elapsed * 1e6) * 100;
    printf("# cgroup v%d: asked 20%% of a CPU, measured %.1f%% over %.2f s; throttled %lld "
           "periods\n",
           cg.version, pct, elapsed, b.nr_throttled);
    hc_cgroup_release(&cg);
    assert_true(a.cpu_usec >= 0);
    assert_true(pct >= 14 && pct <= 26);
    assert_true(b.nr_throttled > 0);
}

/* 32 MB asked: a process that touches 96 MB is killed by the kernel, and the agent's report
 * says the bound was hit and a process was killed for it. */
static void test_real_memory_bound(void **state)
{
    if (!real_cgroups())
        fail_msg("needs root and a writable cgroup hierarchy at /sys/fs/cgroup");
    char name[64], why[300];
    snprintf(name, sizeof(name), "hctest-mem-%d", (int)getpid());
    struct hc_cgroup cg;
    hc_cgroup_setup(&cg, "/sys/fs/cgroup", name, 0, 32);
    if (!cg.applied)
        fail_msg("%s", cg.detail);
    int go, status = 0;
    pid_t pid = child(&go, hog);
    assert_int_equal(hc_cgroup_attach(&cg, pid, why, sizeof(why)), 0);
    assert_int_equal(write(go, "x", 1), 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(go);
    struct hc_cgroup_usage u;
    assert_int_equal(hc_cgroup_usage(&cg, &u), 0);
    json_t *j = hc_cgroup_json(&cg);
    char *text = json_dumps(json_object_get(j, "usage"), JSON_COMPACT);
    printf("# cgroup v%d: 32 MB asked, a 96 MB process: %s; reported %s\n", cg.version,
           WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited", text);
    free(text);
    json_decref(j);
    hc_cgroup_release(&cg);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_true(u.memory_limit_hits > 0);
    assert_true(u.oom_kills >= 1);
    assert_true(u.memory_peak_bytes > 0 && u.memory_peak_bytes <= 32ll << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_fake),
        cmocka_unit_test(test_real_cpu_bound),
        cmocka_unit_test(test_real_memory_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
