/*
 * Privilege of the agent and of the service it runs (docs/hcagent.md "Privilege").
 *
 * The agent, when it runs as root, keeps only HC_AGENT_CAPS in its bounding, permitted and
 * effective sets and sets no_new_privs, however it was started (systemd unit, supervised
 * daemon, a shell). The storage service and its command hooks run as the service user (by
 * default uid and gid HC_SERVICE_ID, no passwd entry needed), with no capability, no
 * supplementary group and no_new_privs; the only place they may write is their data directory,
 * which the agent creates owned by that user.
 */
#ifndef HC_AGENTS_PRIVILEGE_H
#define HC_AGENTS_PRIVILEGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* The capabilities the agent keeps (numbers from linux/capability.h):
 *   CAP_NET_ADMIN (12)  MTU changes over rtnetlink, the route-cache flush after them, the
 *                       service's network bound (tc, which inherits it: netlimit.c)
 *   CAP_SETUID (7), CAP_SETGID (6)  to become the service user before exec
 *   CAP_KILL (5)        to signal, stop and watch (kill 0) the service, which runs as another uid
 *   CAP_CHOWN (0)       to give the service its data directory
 * Everything else (reading interfaces, UDP path-MTU probes with IP_MTU_DISCOVER, iperf3, the
 * API on 7444, cgroup files the agent owns) needs none. */
#define HC_AGENT_CAPS                                                                              \
    ((UINT64_C(1) << 0) | (UINT64_C(1) << 5) | (UINT64_C(1) << 6) | (UINT64_C(1) << 7) |           \
     (UINT64_C(1) << 12))
/* The same list as systemd spells it: the units' CapabilityBoundingSet= (packaging/systemd). */
#define HC_AGENT_CAPS_NAMES "CAP_CHOWN CAP_KILL CAP_SETGID CAP_SETUID CAP_NET_ADMIN"

/* The service user's uid and gid when $HCAGENT_SERVICE_USER does not name another: in the
 * range systemd leaves unused (60578-61183), so it collides neither with regular users nor with
 * systemd's dynamic users. packaging/sysusers.d/hcagent.conf gives it the name hcsvc. */
#define HC_SERVICE_ID 60600
#define HC_SERVICE_USER_NAME "hcsvc"

struct hc_service_user {
    int switch_user; /* 1: become uid/gid before exec (the agent is root) */
    uid_t uid;
    gid_t gid;
    char name[64];    /* for messages: "hcsvc (60600:60600)", or the agent's own user */
    char detail[200]; /* why this user (for the status and the log) */
};

/* Who runs the service. As root: $HCAGENT_SERVICE_USER (a user name from the passwd database,
 * or UID:GID), else HC_SERVICE_ID; uid 0 or gid 0 is refused, and so is the default id when the
 * passwd or group database gives it to an account other than hcsvc. Not root: the agent's own
 * user (switch_user 0; said in detail). Thread-safe. 0 or -1 with err. */
int hc_privilege_service_user(struct hc_service_user *u, struct hc_error *err);

/* In a child between fork and exec (async-signal-safe: system calls only): no supplementary
 * groups, then gid, then uid (when u->switch_user), no ambient, inheritable, permitted or
 * effective capability, no_new_privs, and a check that uid 0 cannot be regained. 0, or -1 with
 * errno (the child must then not exec). */
int hc_privilege_drop_child(const struct hc_service_user *u);

/* Creates dir (0700) for the service: owned by the service user, the only place it writes. A
 * directory left by an earlier agent that ran the service as another user is handed over whole
 * (lchown of every entry, symbolic links not followed, other file systems not entered, the
 * top last, so an interruption is finished next time). Also lets the service user pass through
 * dir's parent (the agent's data directory, 0700 from join: 0711, others may pass, not list) and
 * checks that it can reach each path of reach (NULL-terminated: the bundle directory). 0 or -1 with
 * err. */
int hc_privilege_service_dir(const char *dir, const char *const *reach,
                             const struct hc_service_user *u, struct hc_error *err);

/* Writes NAME in the service's data directory dir (made as hc_privilege_service_dir does)
 * atomically, as the service user: the calling thread's filesystem ids are the service's for
 * the write (setfsuid/setfsgid), so the file is the service's and a link the service planted
 * there cannot turn the write against a file of the agent's. 0 or -1 with err. */
int hc_privilege_service_write(const char *dir, const char *name, const void *data, size_t len,
                               int mode, struct hc_error *err);

/* Sets the service's data directory data aside as to (inside kept_dir, made 0700 when
 * missing), never serving or deleting it. Moving a directory to another parent needs write
 * access to it (its ".."), and the agent holds no CAP_DAC_OVERRIDE: the top directory is the
 * agent's again first (CAP_CHOWN); what is inside stays the service's. Returns 1 when moved, 0
 * when there was no data, -1 with err. */
int hc_privilege_service_keep(const char *data, const char *kept_dir, const char *to,
                              struct hc_error *err);

/* Deletes the service's data directory dir and everything in it (a purge). The agent holds no
 * CAP_DAC_OVERRIDE, so what the service made is removed as the service user (setfsuid), the
 * rest and dir itself as the agent; symbolic links are removed, never followed. A missing dir
 * is no error. 0 or -1 with err. */
int hc_privilege_service_remove(const char *dir, struct hc_error *err);

/* At agent start: as root, drops every capability outside HC_AGENT_CAPS from the bounding set
 * (when the agent may: with CAP_SETPCAP, i.e. not already bounded by systemd), keeps only
 * HC_AGENT_CAPS permitted and effective, clears the inheritable and ambient sets and sets
 * no_new_privs. Not root: sets no_new_privs only. 0 or -1 with err. */
int hc_privilege_restrict_agent(struct hc_error *err);

/* The capability sets of the calling process (bits of /proc/self/status): for tests and the
 * status. 0 or -1. */
int hc_privilege_caps(uint64_t *eff, uint64_t *prm, uint64_t *bnd);

#endif
