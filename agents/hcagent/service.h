/*
 * The storage-node service on a node, as the agent runs it (docs/bundles.md "On the node"):
 *   jobs.c     work that may block (downloads, hooks) on a thread, answered on the loop thread
 *              (agents/hcagent/jobs.h: the agent's one job system, also the network tests')
 *   hooks.c    the manifest's hooks: HTTP to the local service, or commands with a timeout
 *   cgroup.c   CPU and memory limits in a child cgroup (v2), or a plain reason why not
 *   service.c  the supervisor: start, stop, restart on crash with backoff, state, adoption of
 *              a service left running by an earlier agent
 *
 * Everything here runs on the agent's event-loop thread except the work functions of jobs and
 * hc_hook_run, which only use their arguments.
 */
#ifndef HC_AGENTS_SERVICE_H
#define HC_AGENTS_SERVICE_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agents/hcagent/jobs.h"
#include "common/error.h"

/* ---------------------------------------------------------------- hooks (hooks.c) */

/* What args and hooks may refer to: {node}, {service_host}, {storage_host}, {data_dir},
 * {version}, {bundle_dir}. */
struct hc_service_env {
    char node[64];
    char service_host[256]; /* the agent's listen host, 127.0.0.1 for a wildcard */
    /* The IPv4 address of the node's storage interface (agent.json storage_interface), read
     * when the environment is made, or service_host on a node configured without one. Empty
     * when the interface has no IPv4 address: storage_problem then says why, and a service or
     * hook that refers to {storage_host} is refused with it (hc_service_env_check). */
    char storage_host[64];
    char storage_problem[200];
    char storage_interface[16]; /* its name ("" without one): where limits.net_mbit applies */
    char data_dir[1024];        /* the service's own data, kept across versions */
    char version[65];
    char bundle_dir[1100];     /* DIR/software/VERSION */
    char settings_file[1100];  /* DIR/service-settings.json: the service's settings, if any */
    char settings_state[1100]; /* DIR/service-settings.state.json (service_settings.h) */
    /* ok-to-stop for a set (GET /v1/service/ok-to-stop?nodes=A,B): the names, comma-separated,
     * "" for this node alone. An http hook gets them as ?nodes=, a command as HC_STOP_SET. */
    char stop_set[1100];
};

/* text with the placeholders replaced (malloc'd), NULL when out of memory. */
char *hc_service_expand(const char *text, const struct hc_service_env *env);
/* -1 with err (env->storage_problem) when the manifest's args or hooks refer to {storage_host}
 * and env has none; 0 otherwise. */
int hc_service_env_check(const json_t *manifest, const struct hc_service_env *env,
                         struct hc_error *err);
/* HC_NODE_NAME, HC_SERVICE_VERSION, HC_SERVICE_DATA_DIR, HC_SERVICE_HOST, HC_STORAGE_HOST,
 * HC_BUNDLE_DIR, HC_STOP_SET plus the agent's environment, NULL-terminated (free with
 * hc_service_env_free). */
char **hc_service_environ(const struct hc_service_env *env);
void hc_service_env_free(char **envp);

enum hc_hook_kind {
    HC_HOOK_HEALTH,
    HC_HOOK_OK_TO_STOP,
    HC_HOOK_DRAIN,
    HC_HOOK_RESYNC,
    HC_HOOK_RELOAD /* settings changed: POST, like drain */
};

struct hc_hook_result {
    int defined;     /* 0: the manifest has no such hook */
    int ok;          /* healthy / ok to stop / drained / resync status known */
    int64_t pending; /* resync: blocks still to fetch */
    long status;     /* HTTP status or exit status; -1 without an answer */
    /* ok-to-stop for a set: the service answered for the set (it echoed "nodes"), and how
     * many of its blocks have every replica in the set ("set_blocks", -1: not said) */
    int set_answered;
    int64_t set_blocks;
    char detail[512];
};
/* Runs a manifest hook (hook may be NULL: res->defined = 0) within its timeout_ms (default 5 s,
 * drain 30 s). Never fails: a service that does not answer is reported in res (ok = 0). Uses
 * only its arguments (safe on a worker thread). GET for health, ok-to-stop and resync; POST
 * for drain and reload. */
void hc_hook_run(enum hc_hook_kind kind, const json_t *hook, const struct hc_service_env *env,
                 struct hc_hook_result *res);

/* ---------------------------------------------------------------- cgroups (cgroup.c) */
/* (The service's network bound, limits.net_mbit, is agents/hcagent/netlimit.h.) */

struct hc_cgroup {
    int version;          /* 2 or 1 once limits are applied; 0 otherwise */
    char root[1024];      /* the hierarchy's root (/sys/fs/cgroup) */
    char name[128];       /* the service's cgroup name, made a safe path component */
    char base[1024];      /* v2: our own cgroup */
    char path[1100];      /* v2: the service's, BASE/NAME; v1: its cpu one; "" when not applied */
    char mem_path[1100];  /* v1: the service's memory cgroup ("" when no memory limit) */
    char acct_path[1100]; /* v1: its cpuacct cgroup, for the accounting ("" when none) */
    int applied;
    int cpu_percent, memory_mb; /* what was asked (0: nothing) */
    char detail[1024];          /* what was applied, or plainly why not */
    char caveat[200]; /* what a bound added live does not count (v1 memory), until a restart */
};
/* Prepares the service's cgroup NAME (e.g. "hcservice-n1": each agent its own, also when several
 * share one host's hierarchy, as the lab's do) under root (default /sys/fs/cgroup, or
 * $HCAGENT_CGROUP_ROOT). cgroup v2: BASE/NAME with cpu.max and memory.max, BASE the agent's own
 * cgroup. cgroup v1: NAME under the agent's own cgroup of each hierarchy, cpu.cfs_quota_us over
 * cpu.cfs_period_us and memory.limit_in_bytes, plus cpuacct for the accounting. Never fails:
 * cg->applied and cg->detail say what happened. */
void hc_cgroup_setup(struct hc_cgroup *cg, const char *root, const char *name, int cpu_percent,
                     int memory_mb);
/* Moves pid into the prepared cgroup(s). 0 or -1 with why. */
int hc_cgroup_attach(const struct hc_cgroup *cg, pid_t pid, char *why, size_t len);
/* Changes the bounds of the running service live (0: unbounded, v2 "max", v1 -1): v2 cpu.max
 * and memory.max, v1 cpu.cfs_quota_us and memory.limit_in_bytes; a v1 cgroup the service was
 * started without (cpu or memory then 0) is made and the service's processes are moved into it
 * from its other one. cg->cpu_percent, cg->memory_mb and cg->detail say what applies now: 0,
 * or -1 when a bound could not be changed (it keeps its old value and the detail says why, e.g.
 * v1's EBUSY for a memory bound below what the service uses and the kernel cannot reclaim; v2
 * reclaims or OOM-kills instead, and the detail says how many it killed). -1 as well when the
 * service runs in no cgroup of the agent (setup was not applied): hc_cgroup_setup and
 * hc_cgroup_attach of its pid put it in one, live. */
int hc_cgroup_update(struct hc_cgroup *cg, int cpu_percent, int memory_mb);

/* What the service's cgroup accounted, read from the kernel's own files; -1 where unknown. */
struct hc_cgroup_usage {
    long long cpu_usec;       /* CPU time used (v2 cpu.stat usage_usec, v1 cpuacct.usage) */
    long long throttled_usec; /* time held back by the CPU bound */
    long long nr_throttled;   /* periods in which it was */
    long long memory_bytes;   /* memory in use now */
    long long memory_peak_bytes;
    long long memory_limit_hits; /* times it reached the bound (v2 memory.events max, v1 failcnt) */
    long long oom_kills;         /* processes killed for going over it */
};
/* 0, or -1 when limits are not applied. */
int hc_cgroup_usage(const struct hc_cgroup *cg, struct hc_cgroup_usage *u);
/* {"applied","version","cpu_percent","memory_mb","cgroup","memory_cgroup","detail","usage"} */
json_t *hc_cgroup_json(const struct hc_cgroup *cg);
/* Removes the service's cgroup when it is empty (best effort). */
void hc_cgroup_release(struct hc_cgroup *cg);

/* ---------------------------------------------------------------- supervisor (service.c) */

enum hc_service_state {
    HC_SVC_NOT_INSTALLED = 0,
    HC_SVC_STARTING, /* the process runs, its health check has not passed yet */
    HC_SVC_RUNNING,
    HC_SVC_STOPPING,
    HC_SVC_STOPPED,
    HC_SVC_CRASHED, /* exited too often in a row: no more restarts until start/activate */
    HC_SVC_BACKOFF, /* exited unexpectedly, restarts when the backoff delay ends */
};
const char *hc_service_state_name(enum hc_service_state s);

struct hc_service;
/* sw_dir holds service.pid, service.log and the history. Frees with hc_service_free. */
struct hc_service *hc_service_new(struct event_base *base, struct hc_jobs *jobs, const char *sw_dir,
                                  struct hc_error *err);
/* Leaves a running process alone unless stop (a later agent adopts it). Accepts NULL. */
void hc_service_free(struct hc_service *svc, int stop);
/* Starts the program of manifest (borrowed, copied) with env. The previous process must be
 * gone (stop first). 0 or -1 with err. */
int hc_service_start(struct hc_service *svc, const json_t *manifest,
                     const struct hc_service_env *env, struct hc_error *err);
/* Takes over a service started by an earlier agent (DIR/software/service.pid, same start time)
 * or returns 0 when there is none (-1 with err only for a broken manifest). */
int hc_service_adopt(struct hc_service *svc, const json_t *manifest,
                     const struct hc_service_env *env, int *adopted, struct hc_error *err);
typedef void (*hc_service_stopped_fn)(void *arg);
/* SIGTERM to the service's process group, SIGKILL after stop_timeout_ms; done(arg) runs on the
 * loop once it is gone, at once when nothing runs. One stop at a time (the caller serialises). */
void hc_service_stop(struct hc_service *svc, hc_service_stopped_fn done, void *arg);
/* Marks what is installed when nothing runs (stopped vs not_installed). */
void hc_service_set_idle(struct hc_service *svc, int installed);
/* A health answer obtained elsewhere (GET /v1/service/health) for the process running
 * version: recorded like the supervisor's own checks (a first pass makes it running). */
void hc_service_note_health(struct hc_service *svc, const char *version, int ok,
                            const char *detail);
enum hc_service_state hc_service_state(const struct hc_service *svc);
/* The version the process runs ("" when none). */
const char *hc_service_version(const struct hc_service *svc);
/* The service's bounds from settings (docs/bundles.md "Limits"): limits.cpu_percent and
 * limits.memory_mb (the cgroup, changed live while it runs) and limits.net_mbit (the egress bound
 * on the storage interface, applied on a job: tc may take seconds), each when values has it;
 * a bound values lacks keeps the manifest's "limits". Called at each start and by a settings
 * change. Never fails: hc_service_bounds_ok says what applies. */
void hc_service_apply_bounds(struct hc_service *svc, const json_t *values);
/* 1 when every bound the settings ask for is in place (or none is asked), else 0 with why. */
int hc_service_bounds_ok(const struct hc_service *svc, char *why, size_t len);

/* {"state","version","pid","restarts","started_at","last_exit","healthy","health_detail",
 * "limits":{...,"net":{...}},"log"} (new reference). */
json_t *hc_service_json(const struct hc_service *svc);

/* The service's history, DIR/software/HC_SERVICE_HISTORY_FILE: one JSON line per change of the
 * process's life, {"ts_ms" (wall-clock, epoch ms),"time" (the same, RFC 3339),"event","node",
 * "version","pid","detail"?}, event one of started (spawned; not healthy yet), running (first
 * health pass), adopted (left running by an earlier agent), stopped (asked to, or killed at
 * adoption), exited (ended unexpectedly; a restart follows), crashed (no more restarts). The
 * last ~1000 lines are kept (docs/hcagent.md "Service history"). */
#define HC_SERVICE_HISTORY_FILE "service-history.jsonl"
/* DIR/software/service.log is moved to service.log.1 when it grows past this (checked with
 * every health check, 5 s apart while running). */
#define HC_SERVICE_LOG_MAX (16 << 20)
/* The recorded events with ts_ms >= since_ms, oldest first (new reference; [] when none). */
json_t *hc_service_history_json(const struct hc_service *svc, int64_t since_ms);

#endif
