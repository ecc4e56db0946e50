/*
 * CPU and memory limits for the storage service through cgroup v2 (docs/bundles.md "Limits").
 *
 * The service gets a child of the agent's own cgroup, BASE/hcservice, with cpu.max (quota per
 * 100 ms period: cpu_percent 50 -> "50000 100000") and memory.max in bytes. The cpu and memory
 * controllers must be enabled in BASE/cgroup.subtree_control; cgroup v2 refuses that while BASE
 * itself holds processes (EBUSY, "no internal processes"), so the agent then moves itself into a
 * leaf BASE/hcagent first, as services do under a systemd Delegate=yes unit.
 *
 * Where the node does not allow it (cgroup v1, a read-only hierarchy, a missing controller) the
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

static int write_limits(struct hc_cgroup *cg)
{
    char path[1300], value[64];
    if (cg->cpu_percent) {
        snprintf(path, sizeof(path), "%s/cpu.max", cg->path);
        snprintf(value, sizeof(value), "%d %d", cg->cpu_percent * (CPU_PERIOD_US / 100),
                 CPU_PERIOD_US);
        if (write_small(path, value) < 0)
            goto fail;
    }
    if (cg->memory_mb) {
        snprintf(path, sizeof(path), "%s/memory.max", cg->path);
        snprintf(value, sizeof(value), "%lld", (long long)cg->memory_mb * 1024 * 1024);
        if (write_small(path, value) < 0)
            goto fail;
    }
    return 0;
fail:
    snprintf(cg->detail, sizeof(cg->detail), "limits not applied: cannot write %s: %s", path,
             strerror(errno));
    return -1;
}

void hc_cgroup_setup(struct hc_cgroup *cg, const char *root, int cpu_percent, int memory_mb)
{
    char needed[32];
    memset(cg, 0, sizeof(*cg));
    cg->cpu_percent = cpu_percent;
    cg->memory_mb = memory_mb;
    if (!root)
        root = getenv("HCAGENT_CGROUP_ROOT") ? getenv("HCAGENT_CGROUP_ROOT") : "/sys/fs/cgroup";
    if (!cpu_percent && !memory_mb) {
        snprintf(cg->detail, sizeof(cg->detail), "the bundle asks for no limits");
        return;
    }
    own_cgroup(root, cg->base, sizeof(cg->base));
    snprintf(needed, sizeof(needed), "%s%s%s", cpu_percent ? "+cpu" : "",
             cpu_percent && memory_mb ? " " : "", memory_mb ? "+memory" : "");
    if (check_hierarchy(cg, root) < 0 || enable_controllers(cg, needed) < 0)
        return;
    snprintf(cg->path, sizeof(cg->path), "%s/hcservice", cg->base);
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
    cg->applied = 1;
    snprintf(cg->detail, sizeof(cg->detail), "cpu %d%%, memory %d MB in %s", cpu_percent, memory_mb,
             cg->path);
}

int hc_cgroup_attach(const struct hc_cgroup *cg, pid_t pid, char *why, size_t len)
{
    char path[1300], text[32];
    if (!cg->applied)
        return 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", cg->path);
    snprintf(text, sizeof(text), "%d", (int)pid);
    if (write_small(path, text) == 0)
        return 0;
    snprintf(why, len, "cannot move pid %d into %s: %s", (int)pid, cg->path, strerror(errno));
    return -1;
}

json_t *hc_cgroup_json(const struct hc_cgroup *cg)
{
    return json_pack("{s:b, s:i, s:i, s:s?, s:s}", "applied", cg->applied, "cpu_percent",
                     cg->cpu_percent, "memory_mb", cg->memory_mb, "cgroup",
                     cg->path[0] ? cg->path : NULL, "detail", cg->detail);
}

void hc_cgroup_release(struct hc_cgroup *cg)
{
    if (cg->applied && cg->path[0])
        rmdir(cg->path); /* fails while a process is in it: then it stays for the next agent */
}
