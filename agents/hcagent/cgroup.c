/*
 * CPU and memory limits for the storage service through cgroups (docs/bundles.md "Limits"), v2
 * and v1, and what the kernel accounted for it.
 *
 * cgroup v2: the service gets a child of the agent's own cgroup, BASE/NAME, with cpu.max (quota
 * per 100 ms period: cpu_percent 50 -> "50000 100000") and memory.max in bytes. The cpu and
 * memory controllers must be enabled in BASE/cgroup.subtree_control; cgroup v2 refuses that
 * while BASE itself holds processes (EBUSY, "no internal processes"), so the agent then moves
 * itself into a leaf BASE/hcagent first, as services do under a systemd Delegate=yes unit.
 *
 * cgroup v1 (one hierarchy per controller, /sys/fs/cgroup/cpu, .../memory, ...; or cpu,cpuacct
 * mounted together): NAME is made under the agent's own cgroup of each hierarchy it needs (the
 * line "N:cpu:/path" of /proc/self/cgroup), with cpu.cfs_period_us 100000 and cpu.cfs_quota_us
 * (the same quota), memory.limit_in_bytes, and in cpuacct (when mounted apart) a cgroup for the
 * accounting only. v1 has no internal-process rule, so the agent stays where it is.
 *
 * NAME is per agent ("hcservice-NODE"): agents that share a host's hierarchy (the namespace lab)
 * each bound their own service, not all of them together.
 *
 * Where the node does not allow it (no hierarchy, a read-only one, a missing controller) the
 * service runs without limits and the reason is reported as it is; nothing fails because of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/service.h"

#define CPU_PERIOD_US 100000

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int write_small(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_CREAT, 0644), saved;
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The agent's cgroup of a v1 controller from /proc/self/cgroup ("N:cpu,cpuacct:/path"): 0 with
 * the path, -1 when no hierarchy holds that controller. */
static int own_v1_cgroup(const char *controller, char *out, size_t len)
{
    char line[1024];
    int found = -1;
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && found < 0 && fgets(line, sizeof(line), f)) {
        char *list = strchr(line, ':'), *path = list ? strchr(list + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        for (char *tok = strtok(list + 1, ","); tok; tok = strtok(NULL, ","))
            if (strcmp(tok, controller) == 0) {
                snprintf(out, len, "%s", strcmp(path, "/") == 0 ? "" : path);
                found = 0;
            }
    }
    if (f)
        fclose(f);
    return found;
}

/* The agent's cgroup from /proc/self/cgroup ("0::/path"). */
static void own_cgroup(const char *root, char *base, size_t len)
{
    char line[1024] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    const char *path = "/";
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            path = line + 3;
            break;
        }
    }
    if (f)
        fclose(f);
    snprintf(base, len, "%s%s", root, strcmp(path, "/") == 0 ? "" : path);
}

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == '+') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    return 0;
}

/* Moves the agent into BASE/hcagent so that BASE may delegate controllers. */
static int move_self(const struct hc_cgroup *cg)
{
    char path[1200], pid[32];
    snprintf(path, sizeof(path), "%s/hcagent", cg->base);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof(path), "%s/hcagent/cgroup.procs", cg->base);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    return write_small(path, pid);
}

/* Enables the needed controllers for BASE's children. */
static int enable_controllers(struct hc_cgroup *cg, const char *needed)
{
    char path[1200], have[512] = "";
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg->base);
    read_small(path, have, sizeof(have));
    int missing =
        (cg->cpu_percent && !has_word(have, "cpu")) || (cg->memory_mb && !has_word(have, "memory"));
    if (!missing)
        return 0;
    if (write_small(path, needed) == 0)
        return 0;
    if (errno == EBUSY && move_self(cg) == 0 && write_small(path, needed) == 0)
        return 0;
    snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot enable '%s' in %s: %s",
             needed, path, strerror(errno));
    return -1;
}

/* Checks the hierarchy and the controllers BASE offers. */
static int check_hierarchy(struct hc_cgroup *cg, const char *root)
{
    char path[1200], controllers[512] = "";
    snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
    if (access(path, F_OK) < 0) {
        snprintf(cg->detail, sizeof(cg->detail),
                 "limits not applied: %s is not a cgroup v2 hierarchy (no cgroup.controllers)",
                 root);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/cgroup.controllers", cg->base);
    if (read_small(path, controllers, sizeof(controllers)) < 0 || access(cg->base, W_OK) < 0) {
        snprintf(cg->detail, sizeof(cg->detail),
                 "limits not applied: %s is not a writable cgroup v2 hierarchy", cg->base);
        return -1;
    }
    const char *lack = cg->cpu_percent && !has_word(controllers, "cpu")    ? "cpu"
                       : cg->memory_mb && !has_word(controllers, "memory") ? "memory"
                                                                           : NULL;
    if (lack) {
        snprintf(cg->detail, sizeof(cg->detail),
                 "limits not applied: the %s controller is not available in %s", lack, cg->base);
        return -1;
    }
    return 0;
}

/* Writes text into DIR/FILE, a cgroup's knob; on failure cg->detail says which and why. */
static int write_knob(struct hc_cgroup *cg, const char *dir, const char *file, const char *text)
{
    char path[1300];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (write_small(path, text) == 0)
        return 0;
    snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot write %s: %s", path,
             strerror(errno));
    return -1;
}

static int write_number(struct hc_cgroup *cg, const char *dir, const char *file, long long value)
{
    char text[32];
    snprintf(text, sizeof(text), "%lld", value);
    return write_knob(cg, dir, file, text);
}

static int write_limits(struct hc_cgroup *cg)
{
    char cpu_max[64];
    snprintf(cpu_max, sizeof(cpu_max), "%d %d", cg->cpu_percent * (CPU_PERIOD_US / 100),
             CPU_PERIOD_US);
    if (cg->cpu_percent && write_knob(cg, cg->path, "cpu.max", cpu_max) < 0)
        return -1;
    if (cg->memory_mb &&
        write_number(cg, cg->path, "memory.max", (long long)cg->memory_mb * 1024 * 1024) < 0)
        return -1;
    return 0;
}

/* The directory of a v1 controller's hierarchy under root: ROOT/cpu, or ROOT/cpu,cpuacct when
 * mounted together (with its "tasks" file, which only v1 has). */
static int v1_mount(const char *root, const char *controller, char *out, size_t len)
{
    const char *names[] = {controller, strcmp(controller, "memory") ? "cpu,cpuacct" : NULL,
                           strcmp(controller, "memory") ? "cpuacct,cpu" : NULL};
    char tasks[1200];
    for (size_t i = 0; i < 3 && names[i]; i++) {
        snprintf(tasks, sizeof(tasks), "%s/%s/tasks", root, names[i]);
        if (access(tasks, F_OK) == 0) {
            snprintf(out, len, "%s/%s", root, names[i]);
            return 0;
        }
    }
    return -1;
}

/* v1: NAME made under the agent's own cgroup of the controller's hierarchy, into out. */
static int v1_leaf(struct hc_cgroup *cg, const char *root, const char *controller, const char *name,
                   char *out, size_t len)
{
    char mount[1100], own[1024];
    if (v1_mount(root, controller, mount, sizeof(mount)) < 0 ||
        own_v1_cgroup(controller, own, sizeof(own)) < 0) {
        snprintf(cg->detail, sizeof(cg->detail),
                 "limits not applied: no cgroup v1 hierarchy holds the %s controller under %s",
                 controller, root);
        return -1;
    }
    snprintf(out, len, "%s%s/%s", mount, own, name);
    if (mkdir(out, 0755) < 0 && errno != EEXIST) {
        snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot create %s: %s", out,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void setup_v1(struct hc_cgroup *cg, const char *root, const char *name)
{
    if (cg->cpu_percent && (v1_leaf(cg, root, "cpu", name, cg->path, sizeof(cg->path)) < 0 ||
                            write_number(cg, cg->path, "cpu.cfs_period_us", CPU_PERIOD_US) < 0 ||
                            write_number(cg, cg->path, "cpu.cfs_quota_us",
                                         (long long)cg->cpu_percent * (CPU_PERIOD_US / 100)) < 0))
        goto fail;
    if (cg->memory_mb &&
        (v1_leaf(cg, root, "memory", name, cg->mem_path, sizeof(cg->mem_path)) < 0 ||
         write_number(cg, cg->mem_path, "memory.limit_in_bytes",
                      (long long)cg->memory_mb * 1024 * 1024) < 0))
        goto fail;
    /* cpuacct for the accounting: the cpu cgroup itself when mounted together, else its own */
    char mount[1100];
    if (v1_mount(root, "cpuacct", mount, sizeof(mount)) == 0 &&
        v1_leaf(cg, root, "cpuacct", name, cg->acct_path, sizeof(cg->acct_path)) < 0)
        cg->acct_path[0] = '\0';
    cg->version = 1;
    cg->applied = 1;
    snprintf(cg->detail, sizeof(cg->detail), "cpu %d%%, memory %d MB in cgroup v1 %s%s%s",
             cg->cpu_percent, cg->memory_mb, cg->path[0] ? cg->path : cg->mem_path,
             cg->path[0] && cg->mem_path[0] ? " and " : "", cg->path[0] ? cg->mem_path : "");
    return;
fail:
    hc_cgroup_release(cg);
    cg->path[0] = cg->mem_path[0] = cg->acct_path[0] = '\0';
}

/* A cgroup name of [A-Za-z0-9_-] only (a node name could hold anything else, "../x" too). */
static void safe_name(const char *name, char *out, size_t len)
{
    size_t i = 0;
    for (; name && name[i] && i + 1 < len; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
    if (i == 0)
        snprintf(out, len, "hcservice");
}

void hc_cgroup_setup(struct hc_cgroup *cg, const char *root, const char *name, int cpu_percent,
                     int memory_mb)
{
    char needed[32], leaf[128], v2[1200];
    memset(cg, 0, sizeof(*cg));
    cg->cpu_percent = cpu_percent;
    cg->memory_mb = memory_mb;
    safe_name(name, leaf, sizeof(leaf));
    if (!root)
        root = getenv("HCAGENT_CGROUP_ROOT") ? getenv("HCAGENT_CGROUP_ROOT") : "/sys/fs/cgroup";
    if (!cpu_percent && !memory_mb) {
        snprintf(cg->detail, sizeof(cg->detail), "the bundle asks for no limits");
        return;
    }
    snprintf(v2, sizeof(v2), "%s/cgroup.controllers", root);
    if (access(v2, F_OK) < 0) {
        setup_v1(cg, root, leaf);
        return;
    }
    own_cgroup(root, cg->base, sizeof(cg->base));
    snprintf(needed, sizeof(needed), "%s%s%s", cpu_percent ? "+cpu" : "",
             cpu_percent && memory_mb ? " " : "", memory_mb ? "+memory" : "");
    if (check_hierarchy(cg, root) < 0 || enable_controllers(cg, needed) < 0)
        return;
    snprintf(cg->path, sizeof(cg->path), "%s/%s", cg->base, leaf);
    if (mkdir(cg->path, 0755) < 0 && errno != EEXIST) {
        snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot create %s: %s",
                 cg->path, strerror(errno));
        cg->path[0] = '\0';
        return;
    }
    if (write_limits(cg) < 0) {
        cg->path[0] = '\0';
        return;
    }
    cg->version = 2;
    cg->applied = 1;
    snprintf(cg->detail, sizeof(cg->detail), "cpu %d%%, memory %d MB in %s", cpu_percent, memory_mb,
             cg->path);
}

static int attach_one(const char *dir, pid_t pid, char *why, size_t len)
{
    char path[1300], text[32];
    if (!dir[0])
        return 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    snprintf(text, sizeof(text), "%d", (int)pid);
    if (write_small(path, text) == 0)
        return 0;
    snprintf(why, len, "cannot move pid %d into %s: %s", (int)pid, dir, strerror(errno));
    return -1;
}

int hc_cgroup_attach(const struct hc_cgroup *cg, pid_t pid, char *why, size_t len)
{
    if (!cg->applied)
        return 0;
    if (attach_one(cg->path, pid, why, len) < 0 || attach_one(cg->mem_path, pid, why, len) < 0)
        return -1;
    /* the accounting is a figure, not a bound: a failure leaves the service running */
    char ignored[200];
    attach_one(cg->acct_path, pid, ignored, sizeof(ignored));
    return 0;
}

/* The number after "key " in a "key value" file (cpu.stat, memory.events, oom_control); -1. */
static long long keyed(const char *dir, const char *file, const char *key)
{
    char path[1300], line[256];
    long long v = -1;
    size_t n = strlen(key);
    if (!dir[0])
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ' ') {
            v = strtoll(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

/* A file holding one number; -1. */
static long long number(const char *dir, const char *file)
{
    char path[1300], text[64];
    if (!dir[0])
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (read_small(path, text, sizeof(text)) < 0 || !text[0] || strcmp(text, "max") == 0)
        return -1;
    return strtoll(text, NULL, 10);
}

int hc_cgroup_usage(const struct hc_cgroup *cg, struct hc_cgroup_usage *u)
{
    memset(u, 0xff, sizeof(*u)); /* every field -1 */
    if (!cg->applied)
        return -1;
    if (cg->version == 2) {
        u->cpu_usec = keyed(cg->path, "cpu.stat", "usage_usec");
        u->throttled_usec = keyed(cg->path, "cpu.stat", "throttled_usec");
        u->nr_throttled = keyed(cg->path, "cpu.stat", "nr_throttled");
        u->memory_bytes = number(cg->path, "memory.current");
        u->memory_peak_bytes = number(cg->path, "memory.peak");
        u->memory_limit_hits = keyed(cg->path, "memory.events", "max");
        u->oom_kills = keyed(cg->path, "memory.events", "oom_kill");
        return 0;
    }
    long long ns = number(cg->acct_path[0] ? cg->acct_path : cg->path, "cpuacct.usage");
    u->cpu_usec = ns >= 0 ? ns / 1000 : -1;
    ns = keyed(cg->path, "cpu.stat", "throttled_time");
    u->throttled_usec = ns >= 0 ? ns / 1000 : -1;
    u->nr_throttled = keyed(cg->path, "cpu.stat", "nr_throttled");
    u->memory_bytes = number(cg->mem_path, "memory.usage_in_bytes");
    u->memory_peak_bytes = number(cg->mem_path, "memory.max_usage_in_bytes");
    u->memory_limit_hits = number(cg->mem_path, "memory.failcnt");
    u->oom_kills = keyed(cg->mem_path, "memory.oom_control", "oom_kill");
    return 0;
}

static json_t *count_or_null(long long v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

json_t *hc_cgroup_json(const struct hc_cgroup *cg)
{
    struct hc_cgroup_usage u;
    json_t *usage = json_null();
    if (hc_cgroup_usage(cg, &u) == 0)
        usage =
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "cpu_usec", count_or_null(u.cpu_usec),
                      "throttled_usec", count_or_null(u.throttled_usec), "nr_throttled",
                      count_or_null(u.nr_throttled), "memory_bytes", count_or_null(u.memory_bytes),
                      "memory_peak_bytes", count_or_null(u.memory_peak_bytes), "memory_limit_hits",
                      count_or_null(u.memory_limit_hits), "oom_kills", count_or_null(u.oom_kills));
    return json_pack("{s:b, s:i, s:i, s:i, s:s?, s:s?, s:s, s:o}", "applied", cg->applied,
                     "version", cg->version, "cpu_percent", cg->cpu_percent, "memory_mb",
                     cg->memory_mb, "cgroup", cg->path[0] ? cg->path : NULL, "memory_cgroup",
                     cg->mem_path[0] ? cg->mem_path : NULL, "detail", cg->detail, "usage", usage);
}

void hc_cgroup_release(struct hc_cgroup *cg)
{
    /* rmdir fails while a process is in it: then it stays for the next agent */
    if (cg->path[0])
        rmdir(cg->path);
    if (cg->mem_path[0])
        rmdir(cg->mem_path);
    if (cg->acct_path[0])
        rmdir(cg->acct_path);
}
