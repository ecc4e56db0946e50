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
 * Live changes (hc_cgroup_update, the limits.* settings): the same knobs rewritten while the
 * service runs, 0 meaning unbounded ("max" on v2, -1 on v1); on v1 a cgroup of a controller the
 * service was started without is made then and its processes are moved in. Lowering memory
 * below what the service uses is the kernel's call: v1 refuses it (EBUSY) and the old bound
 * stays, v2 reclaims or OOM-kills; either is said in the detail as it happened.
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
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_CREAT | O_TRUNC, 0644), saved;
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

/* Enables the needed controllers ("+cpu", "+memory" or both) for BASE's children. */
static int enable_controllers(struct hc_cgroup *cg, const char *needed)
{
    char path[1200], have[512] = "";
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg->base);
    read_small(path, have, sizeof(have));
    int missing = (strstr(needed, "+cpu") && !has_word(have, "cpu")) ||
                  (strstr(needed, "+memory") && !has_word(have, "memory"));
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
    int saved = errno; /* the caller may tell the kernel's refusals apart */
    snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot write %s: %s", path,
             strerror(saved));
    errno = saved;
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

/* cg->detail: the bounds that apply now and where ("cpu 20%, memory unbounded in ..."), then
 * note ("; ...") and the caveat, if any. */
static void describe(struct hc_cgroup *cg, const char *note)
{
    char cpu[32] = "unbounded", mem[32] = "unbounded", note_copy[1024];
    snprintf(note_copy, sizeof(note_copy), "%s%s%s", note ? note : "",
             note && note[0] && cg->caveat[0] ? "; " : "", cg->caveat);
    if (cg->cpu_percent)
        snprintf(cpu, sizeof(cpu), "%d%%", cg->cpu_percent);
    if (cg->memory_mb)
        snprintf(mem, sizeof(mem), "%d MB", cg->memory_mb);
    int v1_both = cg->version == 1 && cg->path[0] && cg->mem_path[0];
    snprintf(cg->detail, sizeof(cg->detail), "cpu %s, memory %s in %s%s%s%s%s%s", cpu, mem,
             cg->version == 1 ? "cgroup v1 " : "", cg->path[0] ? cg->path : cg->mem_path,
             v1_both ? " and " : "", v1_both ? cg->mem_path : "", note_copy[0] ? "; " : "",
             note_copy);
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
    describe(cg, NULL);
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
    char needed[32], v2[1200];
    memset(cg, 0, sizeof(*cg));
    cg->cpu_percent = cpu_percent;
    cg->memory_mb = memory_mb;
    safe_name(name, cg->name, sizeof(cg->name));
    if (!root)
        root = getenv("HCAGENT_CGROUP_ROOT") ? getenv("HCAGENT_CGROUP_ROOT") : "/sys/fs/cgroup";
    snprintf(cg->root, sizeof(cg->root), "%s", root);
    if (!cpu_percent && !memory_mb) {
        snprintf(cg->detail, sizeof(cg->detail), "the bundle asks for no limits");
        return;
    }
    snprintf(v2, sizeof(v2), "%s/cgroup.controllers", root);
    if (access(v2, F_OK) < 0) {
        setup_v1(cg, root, cg->name);
        return;
    }
    own_cgroup(root, cg->base, sizeof(cg->base));
    snprintf(needed, sizeof(needed), "%s%s%s", cpu_percent ? "+cpu" : "",
             cpu_percent && memory_mb ? " " : "", memory_mb ? "+memory" : "");
    if (check_hierarchy(cg, root) < 0 || enable_controllers(cg, needed) < 0)
        return;
    snprintf(cg->path, sizeof(cg->path), "%s/%s", cg->base, cg->name);
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
    describe(cg, NULL);
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

/* ---------------------------------------------------------------- live changes */

/* Every pid of FROM/cgroup.procs written into TO/cgroup.procs: a v1 cgroup made while the
 * service runs gets its processes from one it is already in. */
static int move_procs(struct hc_cgroup *cg, const char *from, const char *to)
{
    char path[1300], line[32];
    int moved = 0, rc = 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", from);
    FILE *f = from[0] ? fopen(path, "r") : NULL;
    while (f && rc == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        rc = write_knob(cg, to, "cgroup.procs", line);
        moved++;
    }
    if (f)
        fclose(f);
    if (rc == 0 && !moved) {
        snprintf(cg->detail, sizeof(cg->detail), "no process of the service in %s to move into %s",
                 from[0] ? from : "any cgroup", to);
        rc = -1;
    }
    return rc;
}

/* v1: the cgroup of controller made live at out, knob set, the service's processes moved in
 * from its other cgroups; undone on failure. cg->caveat says what a memory bound does not
 * count. */
static int v1_add(struct hc_cgroup *cg, const char *controller, char *out, size_t len,
                  const char *knob, long long value)
{
    int is_memory = strcmp(controller, "memory") == 0;
    const char *from = out != cg->path && cg->path[0]           ? cg->path
                       : out != cg->mem_path && cg->mem_path[0] ? cg->mem_path
                                                                : cg->acct_path;
    if (v1_leaf(cg, cg->root, controller, cg->name, out, len) < 0)
        goto fail;
    if (strcmp(controller, "cpu") == 0 &&
        write_number(cg, out, "cpu.cfs_period_us", CPU_PERIOD_US) < 0)
        goto fail;
    /* v1 leaves a moved process's memory charged to its old cgroup unless told to move it
     * too (anon and file pages: 3); kernels since 6.x refuse that (EINVAL, deprecated), and
     * the new bound then counts only what the service allocates from now on */
    if (is_memory && write_number(cg, out, "memory.move_charge_at_immigrate", 3) < 0)
        snprintf(cg->caveat, sizeof(cg->caveat),
                 "the memory the service held before the bound stays charged where it was (this "
                 "kernel moves no v1 charges): it counts what it allocated since, all of it "
                 "after a restart");
    if (write_number(cg, out, knob, value) < 0 || move_procs(cg, from, out) < 0)
        goto fail;
    return 0;
fail:
    if (out[0])
        rmdir(out);
    out[0] = '\0';
    return -1;
}

static int update_cpu(struct hc_cgroup *cg, int cpu_percent)
{
    long long quota = cpu_percent ? (long long)cpu_percent * (CPU_PERIOD_US / 100) : -1;
    char cpu_max[64], file[1200];
    if (cg->version == 1) {
        if (!cg->path[0])
            return cpu_percent
                       ? v1_add(cg, "cpu", cg->path, sizeof(cg->path), "cpu.cfs_quota_us", quota)
                       : 0;
        return write_number(cg, cg->path, "cpu.cfs_quota_us", quota);
    }
    snprintf(file, sizeof(file), "%s/cpu.max", cg->path);
    if (!cpu_percent && access(file, F_OK) < 0)
        return 0; /* the cpu controller was never enabled: unbounded already */
    if (cpu_percent && enable_controllers(cg, "+cpu") < 0)
        return -1;
    if (cpu_percent)
        snprintf(cpu_max, sizeof(cpu_max), "%lld %d", quota, CPU_PERIOD_US);
    else
        snprintf(cpu_max, sizeof(cpu_max), "max %d", CPU_PERIOD_US);
    return write_knob(cg, cg->path, "cpu.max", cpu_max);
}

/* The memory bound changed; note receives what the kernel did beyond it (v2's OOM kills). */
static int update_memory(struct hc_cgroup *cg, int memory_mb, char *note, size_t len)
{
    long long bytes = memory_mb ? (long long)memory_mb * 1024 * 1024 : -1;
    char file[1200];
    if (cg->version == 1) {
        if (!cg->mem_path[0])
            return memory_mb ? v1_add(cg, "memory", cg->mem_path, sizeof(cg->mem_path),
                                      "memory.limit_in_bytes", bytes)
                             : 0;
        if (write_number(cg, cg->mem_path, "memory.limit_in_bytes", bytes) == 0)
            return 0;
        if (errno == EBUSY) {
            long long used = number(cg->mem_path, "memory.usage_in_bytes");
            snprintf(cg->detail, sizeof(cg->detail),
                     "the kernel refused to lower the bound (EBUSY): the service uses %lld MB "
                     "that it could not reclaim",
                     used >= 0 ? used >> 20 : -1);
        }
        return -1;
    }
    snprintf(file, sizeof(file), "%s/memory.max", cg->path);
    if (!memory_mb && access(file, F_OK) < 0)
        return 0; /* the memory controller was never enabled: unbounded already */
    if (memory_mb && enable_controllers(cg, "+memory") < 0)
        return -1;
    long long kills = keyed(cg->path, "memory.events", "oom_kill");
    if ((memory_mb ? write_number(cg, cg->path, "memory.max", bytes)
                   : write_knob(cg, cg->path, "memory.max", "max")) < 0)
        return -1;
    long long after = keyed(cg->path, "memory.events", "oom_kill");
    if (after > kills && kills >= 0)
        snprintf(note, len,
                 "the service used more than %d MB: the kernel killed %lld of its processes "
                 "(memory.events oom_kill)",
                 memory_mb, after - kills);
    return 0;
}

/* cg->detail of a failed step without setup's "limits not applied: " */
static const char *reason(const struct hc_cgroup *cg)
{
    const char *prefix = "limits not applied: ";
    size_t n = strlen(prefix);
    return strncmp(cg->detail, prefix, n) == 0 ? cg->detail + n : cg->detail;
}

int hc_cgroup_update(struct hc_cgroup *cg, int cpu_percent, int memory_mb)
{
    char why[800] = "", note[300] = "";
    int rc = 0;
    if (!cg->applied) {
        const char *prefix = "limits not changed live: ";
        if (!cpu_percent && !memory_mb) { /* unbounded, as it runs */
            if (cg->cpu_percent || cg->memory_mb ||
                strncmp(cg->detail, prefix, strlen(prefix)) == 0)
                snprintf(cg->detail, sizeof(cg->detail), "no limits asked"); /* withdrawn */
            cg->cpu_percent = cg->memory_mb = 0;
            return 0;
        }
        if (strncmp(cg->detail, prefix, strlen(prefix)) == 0)
            return -1; /* said already, with the reason */
        snprintf(why, sizeof(why), "%s", cg->detail);
        snprintf(cg->detail, sizeof(cg->detail),
                 "%sthe service runs in no cgroup of the agent (%s); they apply when it is put "
                 "in one",
                 prefix, why);
        return -1;
    }
    if (cpu_percent != cg->cpu_percent) {
        if (update_cpu(cg, cpu_percent) == 0)
            cg->cpu_percent = cpu_percent;
        else {
            snprintf(why, sizeof(why), "cpu %d%% not applied: %s", cpu_percent, reason(cg));
            rc = -1;
        }
    }
    if (memory_mb != cg->memory_mb) {
        if (update_memory(cg, memory_mb, note, sizeof(note)) == 0)
            cg->memory_mb = memory_mb;
        else {
            size_t n = strlen(why);
            snprintf(why + n, sizeof(why) - n, "%smemory %d MB not applied: %s", n ? "; " : "",
                     memory_mb, reason(cg));
            rc = -1;
        }
    }
    if (note[0]) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof(why) - n, "%s%s", n ? "; " : "", note);
    }
    describe(cg, why);
    return rc;
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
