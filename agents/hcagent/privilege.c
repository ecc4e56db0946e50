/*
 * Privilege of the agent and of the service it runs (see privilege.h, docs/hcagent.md
 * "Privilege").
 *
 * Why a fixed id rather than an account created on the node: nothing has to be created on the
 * node (no useradd, which minimal hosts lack, no edit of /etc/passwd), every node uses the same
 * id (a data directory means the same thing everywhere), and the agent can check at each start
 * that no other account holds it. The package gives the id the name hcsvc (sysusers.d) so that
 * ps and ls show a name; nodes brought in over SSH simply show the number.
 *
 * Why not a user named in the bundle's manifest: the manifest comes from whoever signed the
 * bundle; which identity a node lends to the software it runs is the node's decision, so it is
 * the agent's ($HCAGENT_SERVICE_USER), never the bundle's.
 *
 * Capabilities are changed with the raw capget/capset and prctl system calls (no libcap): they
 * apply to the calling thread only, so hc_privilege_restrict_agent runs before the agent starts
 * any thread, and hc_privilege_drop_child in a freshly forked (single-threaded) child.
 */
#include "agents/hcagent/privilege.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define CAP_SETPCAP_BIT 8
#define CAP_LAST_FALLBACK 40
#define NSS_BUF 16384

/* ---------------------------------------------------------------- capability sets */

static int caps_get(uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    *eff = d[0].effective | (uint64_t)d[1].effective << 32;
    *prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
    *inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
    return 0;
}

/* Async-signal-safe (a system call). */
static int caps_set(uint64_t eff, uint64_t prm, uint64_t inh)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {
        {(uint32_t)eff, (uint32_t)prm, (uint32_t)inh},
        {(uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32)},
    };
    return (int)syscall(SYS_capset, &h, d);
}

static int cap_last(void)
{
    char *text = NULL;
    struct hc_error ignored;
    int last = CAP_LAST_FALLBACK;
    if (hc_file_read("/proc/sys/kernel/cap_last_cap", &text, NULL, &ignored) == 0) {
        int n = atoi(text);
        if (n > 0 && n < 64)
            last = n;
    }
    free(text);
    return last;
}

/* Reads one "Cap???:\t<hex>" line of /proc/self/status. */
static int status_caps(const char *text, const char *key, uint64_t *out)
{
    const char *p = strstr(text, key);
    if (!p)
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p + strlen(key), &end, 16);
    if (errno || end == p + strlen(key))
        return -1;
    *out = v;
    return 0;
}

int hc_privilege_caps(uint64_t *eff, uint64_t *prm, uint64_t *bnd)
{
    char *text = NULL;
    struct hc_error ignored;
    int rc = -1;
    if (hc_file_read("/proc/self/status", &text, NULL, &ignored) == 0 &&
        status_caps(text, "\nCapEff:", eff) == 0 && status_caps(text, "\nCapPrm:", prm) == 0 &&
        status_caps(text, "\nCapBnd:", bnd) == 0)
        rc = 0;
    free(text);
    return rc;
}

/* "CAP_KILL CAP_CHOWN" or "cap 38" for the bits of mask. */
static void caps_names(uint64_t mask, char *buf, size_t len)
{
    static const struct {
        int bit;
        const char *name;
    } known[] = {{0, "CAP_CHOWN"},
                 {5, "CAP_KILL"},
                 {6, "CAP_SETGID"},
                 {7, "CAP_SETUID"},
                 {12, "CAP_NET_ADMIN"}};
    size_t n = 0;
    buf[0] = '\0';
    for (int bit = 0; bit < 64; bit++) {
        if (!(mask & (UINT64_C(1) << bit)))
            continue;
        const char *name = NULL;
        for (size_t i = 0; i < HC_ARRAY_LEN(known); i++)
            if (known[i].bit == bit)
                name = known[i].name;
        int w = name ? snprintf(buf + n, len - n, "%s%s", n ? " " : "", name)
                     : snprintf(buf + n, len - n, "%scap %d", n ? " " : "", bit);
        if (w < 0 || (size_t)w >= len - n)
            return;
        n += (size_t)w;
    }
}

int hc_privilege_restrict_agent(struct hc_error *err)
{
    uint64_t eff, prm, inh;
    if (caps_get(&eff, &prm, &inh) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot read the agent's capabilities: %s",
                            strerror(errno));
    if (eff & (UINT64_C(1) << CAP_SETPCAP_BIT)) {
        /* Started with a full set (a shell, the SSH bootstrap's daemon): bound it for good, so
         * that nothing the agent starts (iperf3, a service) can ever hold more. */
        int last = cap_last();
        for (int c = 0; c <= last; c++)
            if (!(HC_AGENT_CAPS & (UINT64_C(1) << c)) && prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 &&
                prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                return hc_error_set(err, HC_E(INTERNAL),
                                    "cannot drop capability %d from the bounding set: %s", c,
                                    strerror(errno));
    }
    if (caps_set(eff & HC_AGENT_CAPS, prm & HC_AGENT_CAPS, 0) < 0)
        return hc_error_set(err, HC_E(INTERNAL),
                            "cannot restrict the agent's capabilities to %s: %s",
                            HC_AGENT_CAPS_NAMES, strerror(errno));
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return hc_error_set(err, HC_E(INTERNAL), "cannot clear the ambient capabilities: %s",
                            strerror(errno));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot set no_new_privs: %s", strerror(errno));
    if (geteuid() == 0 && (prm & HC_AGENT_CAPS) != HC_AGENT_CAPS) {
        char missing[200];
        caps_names(HC_AGENT_CAPS & ~prm, missing, sizeof(missing));
        HC_WARN("the agent runs without %s (its unit's CapabilityBoundingSet= should be '%s'): "
                "what needs them will fail",
                missing, HC_AGENT_CAPS_NAMES);
    }
    return 0;
}

/* ---------------------------------------------------------------- the service user */

/* "UID:GID" with both in 1..INT_MAX-ish: 1, else 0. */
static int parse_ids(const char *s, uid_t *uid, gid_t *gid)
{
    char *end = NULL;
    if (!*s || strspn(s, "0123456789:") != strlen(s))
        return 0;
    errno = 0;
    unsigned long u = strtoul(s, &end, 10);
    if (errno || *end != ':' || end == s || u > 0x7fffffff)
        return 0;
    const char *g = end + 1;
    unsigned long v = strtoul(g, &end, 10);
    if (errno || *end || end == g || v > 0x7fffffff)
        return 0;
    *uid = (uid_t)u;
    *gid = (gid_t)v;
    return 1;
}

/* The account holding uid / the group holding gid in the databases ("" when none). */
static void account_of(uid_t uid, gid_t gid, char *user, char *group, size_t len)
{
    char *buf = malloc(NSS_BUF);
    struct passwd pw, *pwp = NULL;
    struct group gr, *grp = NULL;
    user[0] = group[0] = '\0';
    if (!buf)
        return;
    if (getpwuid_r(uid, &pw, buf, NSS_BUF, &pwp) == 0 && pwp)
        snprintf(user, len, "%s", pw.pw_name);
    if (getgrgid_r(gid, &gr, buf, NSS_BUF, &grp) == 0 && grp)
        snprintf(group, len, "%s", gr.gr_name);
    free(buf);
}

/* "hcsvc (60600:60600)", or "60600:60600" for an id without an account. */
static void user_name(struct hc_service_user *u, const char *user)
{
    if (user[0])
        snprintf(u->name, sizeof(u->name), "%.40s (%u:%u)", user, (unsigned)u->uid,
                 (unsigned)u->gid);
    else
        snprintf(u->name, sizeof(u->name), "%u:%u", (unsigned)u->uid, (unsigned)u->gid);
}

int hc_privilege_service_user(struct hc_service_user *u, struct hc_error *err)
{
    char user[64], group[64];
    memset(u, 0, sizeof(*u));
    if (geteuid() != 0) {
        u->uid = getuid();
        u->gid = getgid();
        account_of(u->uid, u->gid, user, group, sizeof(user));
        user_name(u, user);
        snprintf(u->detail, sizeof(u->detail),
                 "the agent is not root: the service runs as the agent's own user %s", u->name);
        return 0;
    }
    u->switch_user = 1;
    const char *want = getenv("HCAGENT_SERVICE_USER");
    if (want && *want) {
        if (!parse_ids(want, &u->uid, &u->gid)) {
            char *buf = malloc(NSS_BUF);
            struct passwd pw, *pwp = NULL;
            int found = buf && getpwnam_r(want, &pw, buf, NSS_BUF, &pwp) == 0 && pwp;
            if (found) {
                u->uid = pw.pw_uid;
                u->gid = pw.pw_gid;
            }
            free(buf);
            if (!found) {
                hc_error_set(err, HC_E(INVALID_ARGUMENT),
                             "HCAGENT_SERVICE_USER '%.64s' is neither UID:GID nor a known user",
                             want);
                return hc_error_hint(err, "unset it to use uid/gid %d", HC_SERVICE_ID);
            }
        }
        snprintf(u->detail, sizeof(u->detail), "from HCAGENT_SERVICE_USER");
    } else {
        u->uid = HC_SERVICE_ID;
        u->gid = HC_SERVICE_ID;
        snprintf(u->detail, sizeof(u->detail), "the default service user");
    }
    if (u->uid == 0 || u->gid == 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "the service may not run as uid 0 or gid 0 (HCAGENT_SERVICE_USER)");
    account_of(u->uid, u->gid, user, group, sizeof(user));
    if (!(want && *want) && ((user[0] && strcmp(user, HC_SERVICE_USER_NAME) != 0) ||
                             (group[0] && strcmp(group, HC_SERVICE_USER_NAME) != 0))) {
        hc_error_set(err, HC_E(CONFLICT),
                     "uid/gid %d of the storage service belongs to '%s' on this node",
                     HC_SERVICE_ID, user[0] && strcmp(user, HC_SERVICE_USER_NAME) ? user : group);
        return hc_error_hint(err, "set HCAGENT_SERVICE_USER=UID:GID (unused ids) for the agent");
    }
    user_name(u, user);
    return 0;
}

int hc_privilege_drop_child(const struct hc_service_user *u)
{
    if (u->switch_user) {
        /* The order matters: groups and gid need the privilege that setuid gives up. */
        if (setgroups(0, NULL) < 0 || setgid(u->gid) < 0 || setuid(u->uid) < 0)
            return -1;
        if (getuid() != u->uid || geteuid() != u->uid || getgid() != u->gid ||
            getegid() != u->gid) {
            errno = EPERM;
            return -1;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    if (caps_set(0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    if (u->switch_user && setuid(0) == 0) { /* must be impossible now */
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the service's directory */

/* nftw has no argument for its callback: the walk's target ids (one walk per thread). */
static _Thread_local uid_t walk_uid;
static _Thread_local gid_t walk_gid;
static _Thread_local int walk_failed, walk_unreadable;

/* Every entry but the top, which is handed over last, once all below it is (so that a failed
 * walk is tried again at the next start: the top's owner is what says "done"). */
static int hand_over(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    if (flag == FTW_DNR)
        walk_unreadable++;
    if (ftw->level > 0 && lchown(path, walk_uid, walk_gid) < 0)
        walk_failed = errno;
    return 0;
}

/* 1 when u may search (pass through) a directory with st. */
static int can_search(const struct stat *st, const struct hc_service_user *u)
{
    if (st->st_uid == u->uid)
        return (st->st_mode & S_IXUSR) != 0;
    if (st->st_gid == u->gid)
        return (st->st_mode & S_IXGRP) != 0;
    return (st->st_mode & S_IXOTH) != 0;
}

/* Every directory from / down to path must let u pass. */
static int check_reach(const char *path, const struct hc_service_user *u, struct hc_error *err)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return hc_error_set(err, HC_E(IO), "cannot resolve '%s': %s", path, strerror(errno));
    size_t len = strlen(real);
    for (size_t i = 1; i <= len; i++) {
        if (real[i] != '/' && real[i] != '\0')
            continue;
        char c = real[i];
        struct stat st;
        real[i] = '\0';
        if (stat(real, &st) < 0) {
            hc_error_set(err, HC_E(IO), "cannot use '%s': %s", real, strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode) && !can_search(&st, u)) {
            hc_error_set(err, HC_E(IO),
                         "the service user %s cannot reach '%s': '%s' (mode %04o, owner %u:%u) "
                         "does not let it pass",
                         u->name, path, real, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                         (unsigned)st.st_gid);
            return hc_error_hint(err, "give the directories above the agent's data directory "
                                      "search permission for others (chmod o+x)");
        }
        real[i] = c;
    }
    return 0;
}

/* The agent's data directory is 0700 from join: the service user may pass, not list it. */
static int open_parent(const char *dir, struct hc_error *err)
{
    char parent[PATH_MAX];
    struct stat st;
    snprintf(parent, sizeof(parent), "%s", dir);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent)
        return 0;
    *slash = '\0';
    if (stat(parent, &st) < 0)
        return hc_error_set(err, HC_E(IO), "cannot use '%s': %s", parent, strerror(errno));
    if (st.st_uid == geteuid() && (st.st_mode & 0011) != 0011 &&
        chmod(parent, (st.st_mode & 07777) | 0011) < 0)
        return hc_error_set(err, HC_E(IO), "cannot let the service pass '%s': %s", parent,
                            strerror(errno));
    return 0;
}

int hc_privilege_service_dir(const char *dir, const char *const *reach,
                             const struct hc_service_user *u, struct hc_error *err)
{
    struct stat st;
    if (hc_mkdir_p(dir, 0700, err) < 0)
        return -1;
    if (!u->switch_user)
        return 0;
    if (open_parent(dir, err) < 0)
        return -1;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return hc_error_set(err, HC_E(IO), "the service's data directory '%s' is not a directory",
                            dir);
    if (st.st_uid != u->uid || st.st_gid != u->gid) {
        if (st.st_uid == geteuid() && chmod(dir, 0700) < 0)
            return hc_error_set(err, HC_E(IO), "cannot chmod '%s': %s", dir, strerror(errno));
        walk_uid = u->uid;
        walk_gid = u->gid;
        walk_failed = walk_unreadable = 0;
        if (nftw(dir, hand_over, 32, FTW_PHYS | FTW_DEPTH | FTW_MOUNT) < 0 || walk_failed ||
            lchown(dir, u->uid, u->gid) < 0) {
            int e = walk_failed ? walk_failed : errno;
            return hc_error_set(err, HC_E(IO), "cannot give '%s' to the service user %s: %s", dir,
                                u->name, strerror(e));
        }
        HC_INFO("service data '%s' now belongs to the service user %s (was %u:%u)%s", dir, u->name,
                (unsigned)st.st_uid, (unsigned)st.st_gid,
                walk_unreadable
                    ? "; some directories could not be read: their content kept its owner"
                    : "");
    }
    if (check_reach(dir, u, err) < 0)
        return -1;
    for (size_t i = 0; reach && reach[i]; i++)
        if (check_reach(reach[i], u, err) < 0)
            return -1;
    return 0;
}

int hc_privilege_service_write(const char *dir, const char *name, const void *data, size_t len,
                               int mode, struct hc_error *err)
{
    struct hc_service_user u;
    char path[PATH_MAX];
    if (hc_privilege_service_user(&u, err) < 0 || hc_privilege_service_dir(dir, NULL, &u, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!u.switch_user)
        return hc_file_write_atomic(path, data, len, mode, err);
    uid_t old_uid = (uid_t)setfsuid((uid_t)-1);
    gid_t old_gid = (gid_t)setfsgid((gid_t)-1);
    setfsgid(u.gid);
    setfsuid(u.uid);
    int rc;
    if ((uid_t)setfsuid((uid_t)-1) != u.uid || (gid_t)setfsgid((gid_t)-1) != u.gid)
        rc = hc_error_set(err, HC_E(INTERNAL), "cannot write '%s' as the service user %s", path,
                          u.name);
    else
        rc = hc_file_write_atomic(path, data, len, mode, err);
    setfsuid(old_uid);
    setfsgid(old_gid);
    return rc;
}

static _Thread_local int remove_failed;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (ftw->level > 0 && remove(path) < 0 && errno != ENOENT)
        remove_failed = errno;
    return 0;
}

/* One pass over dir's content with the calling thread's current filesystem ids. */
static int remove_pass(const char *dir)
{
    remove_failed = 0;
    if (nftw(dir, remove_entry, 32, FTW_PHYS | FTW_DEPTH | FTW_MOUNT) < 0)
        return errno == ENOENT ? 0 : -1;
    return remove_failed ? -1 : 0;
}

int hc_privilege_service_keep(const char *data, const char *kept_dir, const char *to,
                              struct hc_error *err)
{
    struct stat st;
    if (lstat(data, &st) < 0 && errno == ENOENT)
        return 0;
    if (chown(data, geteuid(), getegid()) < 0 && errno != EPERM)
        HC_WARN("cannot take back '%s': %s", data, strerror(errno));
    if ((mkdir(kept_dir, 0700) < 0 && errno != EEXIST) || rename(data, to) < 0)
        return hc_error_set(err, HC_E(IO), "cannot move '%s' to '%s': %s", data, to,
                            strerror(errno));
    return 1;
}

int hc_privilege_service_remove(const char *dir, struct hc_error *err)
{
    struct hc_service_user u;
    struct stat st;
    if (lstat(dir, &st) < 0)
        return errno == ENOENT
                   ? 0
                   : hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hc_error_set(err, HC_E(IO), "'%s' is not a directory", dir);
    if (hc_privilege_service_user(&u, err) < 0)
        return -1;
    if (u.switch_user) {
        uid_t old_uid = (uid_t)setfsuid((uid_t)-1);
        gid_t old_gid = (gid_t)setfsgid((gid_t)-1);
        setfsgid(u.gid);
        setfsuid(u.uid);
        if ((uid_t)setfsuid((uid_t)-1) == u.uid)
            remove_pass(dir); /* what is left (not the service's) goes in the next pass */
        setfsuid(old_uid);
        setfsgid(old_gid);
    }
    if (remove_pass(dir) < 0 || rmdir(dir) < 0) {
        int e = remove_failed ? remove_failed : errno;
        return hc_error_set(err, HC_E(IO), "cannot remove the service's data '%s': %s", dir,
                            strerror(e));
    }
    return 0;
}
