/*
 * cluster.create and node.add operations: install and enroll hcagent on hosts over SSH, in
 * parallel, idempotently. See op_bootstrap.h for the steps.
 *
 * Threads: the run function spreads hosts over at most `parallel` threads (hc_parallel_for,
 * common/parallel.h); each host is worked on its own forked operation context (its own database
 * connection), so step records and node lookups never share a SQLite connection between threads.
 */
#include "controller/ops/op_bootstrap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agents/hcagent/privilege.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "controller/ops/node_converge.h"
#include "controller/ops/op_net.h"
#include "controller/ops/ops.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/poller.h"
#include "controller/remote/ssh.h"
#include "controller/state/events.h"
#include "controller/state/net.h"
#include "controller/state/nodes.h"

#define BOOT_JOIN_TOKEN_TTL_S 900
#define BOOT_WAIT_DEFAULT_MS 60000
#define BOOT_MAX_CLOCK_SKEW_S 60
#define BOOT_MIN_FREE_KB (64 * 1024)
/* The storage service's uid/gid (agents/hcagent/privilege.h), as a string for the preflight script.
 */
#define BOOT_STR(x) #x
#define BOOT_XSTR(x) BOOT_STR(x)
#define HC_BOOT_SERVICE_ID BOOT_XSTR(HC_SERVICE_ID)

/* Read-only facts about a host, gathered by one constant script with quoted arguments. Shell
 * builtins wherever they do (read from /proc and /sys, test, command -v, kill -0), since every
 * process costs the host a fork and an exec: only date and df run as processes (uname too where
 * /proc/sys/kernel lacks the facts). */
static const char preflight_script[] =
    "iface_arg=$1; addr=$2\n"
    "{ read -r os </proc/sys/kernel/ostype; } 2>/dev/null || os=$(uname -s)\n"
    "{ read -r arch </proc/sys/kernel/arch; } 2>/dev/null || arch=$(uname -m)\n"
    "{ read -r host </proc/sys/kernel/hostname; } 2>/dev/null || host=$(uname -n)\n"
    "echo \"os=$os\"; echo \"arch=$arch\"; echo \"hostname=$host\"\n"
    "echo \"time=$(date +%s)\"\n"
    "[ -d /opt ] || mkdir -p /opt 2>/dev/null\n"
    /* df -P: the space available (KiB) is the word before the capacity ("12%") */
    "set -f; set -- $(df -Pk /opt 2>/dev/null); free=0; prev=\n"
    "for w; do case $w in *%) free=$prev ;; esac; prev=$w; done\n"
    "echo \"free_kb=$free\"\n"
    "missing=; for c in sh mkdir mv ln rm cat uname df ip setsid; do\n"
    "  command -v \"$c\" >/dev/null 2>&1 || missing=\"$missing $c\"; done\n"
    "echo \"missing=$missing\"\n"
    "iface=$iface_arg\n"
    "if [ -z \"$iface\" ]; then iface=$(ip -o -4 addr show | awk -v a=\"$addr\" "
    "'{split($4, p, \"/\"); if (p[1] == a) {print $2; exit}}'); fi\n"
    "echo \"iface=$iface\"\n"
    "if [ -n \"$iface\" ] && [ -e \"/sys/class/net/$iface\" ]; then\n"
    "  mtu=; { read -r mtu <\"/sys/class/net/$iface/mtu\"; } 2>/dev/null\n"
    "  echo iface_ok=1; echo \"iface_mtu=$mtu\"\n"
    "else echo iface_ok=0; fi\n"
    /* systemd can only manage a service that lives in its own mount namespace */
    "if [ -d /run/systemd/system ] && "
    "[ \"$(readlink /proc/1/ns/mnt)\" = \"$(readlink /proc/self/ns/mnt)\" ]; then\n"
    "  echo init=systemd; else echo init=daemon; fi\n"
    "if [ -f " HC_REMOTE_AGENT_DATA "/agent.pem ]; then echo enrolled=1; else echo enrolled=0; fi\n"
    /* what push must clear first: stale credentials would make the agent skip enrollment */
    "if [ -e " HC_REMOTE_AGENT_DATA " ]; then echo data=1; else echo data=0; fi\n"
    "pid=; { read -r pid <" HC_REMOTE_AGENT_RUN "/hcagent.pid; } 2>/dev/null\n"
    "if [ -n \"$pid\" ] && kill -0 \"$pid\" 2>/dev/null; then echo running=1; else echo running=0; "
    "fi\n"
    /* the storage service's uid/gid must not be another account's */
    "for db in /etc/passwd /etc/group; do [ -r $db ] || continue\n"
    "  while IFS=: read -r n _ id _; do [ \"$id\" = " HC_BOOT_SERVICE_ID " ] && "
    "[ \"$n\" != hcsvc ] && echo \"svc_id_owner=$n\"; done <$db; done; :\n";

struct preflight {
    char os[32], arch[32], hostname[128], iface[32], missing[128], init[16], svc_id_owner[64];
    long long time_s, free_kb;
    int iface_ok, iface_mtu, enrolled, data, running;
};

struct boot_job;

struct boot_host {
    struct boot_job *job;
    const char *spec;
    struct hc_ssh_target target;
    char label[300]; /* user@host:port: the node column of this host's steps */
    struct hc_op_ctx *ctx;
    struct hc_ssh *ssh;
    char fingerprint[128];
    struct preflight pf;
    char name[64];
    int joined; /* the controller already has this host as a reachable node */
    enum hc_op_result result;
    struct hc_error err;
};

struct boot_job {
    struct hc_op_ctx *ctx;
    struct hc_controller *ctl;
    int create;
    struct hc_ssh_opts ssh;
    char key[1100], known[1100];
    const char *iface;
    int64_t wait_ms;
    char agent_path[1100];
    char *agent_bin;
    size_t agent_len;
    char ca_fp[65];
    char controller_url[320];
    struct boot_host *hosts;
    size_t nhosts;
};

void hc_bootstrap_ssh_paths(const char *data_dir, char *key, size_t key_len, char *known,
                            size_t known_len)
{
    snprintf(key, key_len, "%s/ssh/id_ed25519", data_dir);
    snprintf(known, known_len, "%s/ssh/known_hosts", data_dir);
}

/* --- preflight ------------------------------------------------------------------------------ */

static void preflight_parse(char *out, struct preflight *pf)
{
    memset(pf, 0, sizeof(*pf));
    pf->data = 1; /* unless the host says there is nothing to clear */
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *k = line, *v = eq + 1;
        if (!strcmp(k, "os"))
            snprintf(pf->os, sizeof(pf->os), "%s", v);
        else if (!strcmp(k, "arch"))
            snprintf(pf->arch, sizeof(pf->arch), "%s", v);
        else if (!strcmp(k, "hostname"))
            snprintf(pf->hostname, sizeof(pf->hostname), "%s", v);
        else if (!strcmp(k, "iface"))
            snprintf(pf->iface, sizeof(pf->iface), "%s", v);
        else if (!strcmp(k, "missing"))
            snprintf(pf->missing, sizeof(pf->missing), "%s", v);
        else if (!strcmp(k, "init"))
            snprintf(pf->init, sizeof(pf->init), "%s", v);
        else if (!strcmp(k, "svc_id_owner"))
            snprintf(pf->svc_id_owner, sizeof(pf->svc_id_owner), "%s", v);
        else if (!strcmp(k, "time"))
            pf->time_s = atoll(v);
        else if (!strcmp(k, "free_kb"))
            pf->free_kb = atoll(v);
        else if (!strcmp(k, "iface_ok"))
            pf->iface_ok = atoi(v);
        else if (!strcmp(k, "iface_mtu"))
            pf->iface_mtu = atoi(v);
        else if (!strcmp(k, "enrolled"))
            pf->enrolled = atoi(v);
        else if (!strcmp(k, "data"))
            pf->data = atoi(v);
        else if (!strcmp(k, "running"))
            pf->running = atoi(v);
    }
}

/* The node name: the host's name, lowercased, with characters a name may not hold dropped. */
static void node_name_from_hostname(const char *hostname, char *name, size_t len)
{
    size_t n = 0;
    for (const char *p = hostname; *p && *p != '.' && n + 1 < len; p++) {
        char c = (char)tolower((unsigned char)*p);
        if (isalnum((unsigned char)c) || ((c == '-' || c == '_') && n > 0))
            name[n++] = c;
    }
    name[n] = '\0';
}

static int preflight_check(struct boot_host *h, struct hc_error *err)
{
    const struct preflight *pf = &h->pf;
    struct utsname u;
    uname(&u);
    long long skew = pf->time_s - hc_now_ms() / 1000;
    if (strcmp(pf->os, "Linux") != 0)
        return hc_error_set(err, HC_E(PREFLIGHT_FAILED), "%s runs '%s', not Linux", h->label,
                            pf->os);
    if (strcmp(pf->arch, u.machine) != 0)
        return hc_error_set(err, HC_E(PREFLIGHT_FAILED),
                            "%s is %s but the controller ships a %s hcagent", h->label, pf->arch,
                            u.machine);
    if (pf->missing[0] && strspn(pf->missing, " ") != strlen(pf->missing))
        return hc_error_set(err, HC_E(PREFLIGHT_FAILED), "%s lacks required commands:%s", h->label,
                            pf->missing);
    if (pf->free_kb < BOOT_MIN_FREE_KB)
        return hc_error_set(err, HC_E(PREFLIGHT_FAILED),
                            "%s has %lld KiB free under /opt, "
                            "needs %d",
                            h->label, pf->free_kb, BOOT_MIN_FREE_KB);
    if (pf->svc_id_owner[0]) {
        hc_error_set(err, HC_E(PREFLIGHT_FAILED),
                     "uid/gid " HC_BOOT_SERVICE_ID " that the "
                     "storage service runs as belongs to '%s' on %s",
                     pf->svc_id_owner, h->label);
        return hc_error_hint(err, "free the id on the node, or join it by hand with "
                                  "HCAGENT_SERVICE_USER=UID:GID set for the agent");
    }
    if (!pf->iface_ok) {
        hc_error_set(err, HC_E(PREFLIGHT_FAILED), "%s has no storage interface '%s'", h->label,
                     pf->iface[0] ? pf->iface : "(none carries the node's address)");
        return hc_error_hint(err, "check --storage-interface against 'ip link' on the node");
    }
    if (skew > BOOT_MAX_CLOCK_SKEW_S || skew < -BOOT_MAX_CLOCK_SKEW_S) {
        hc_error_set(err, HC_E(PREFLIGHT_FAILED),
                     "clock of %s differs from the controller's "
                     "by %lld s",
                     h->label, skew);
        return hc_error_hint(err, "synchronise the clocks (NTP): certificates depend on them");
    }
    node_name_from_hostname(pf->hostname, h->name, sizeof(h->name));
    if (!h->name[0])
        return hc_error_set(err, HC_E(PREFLIGHT_FAILED), "%s has an unusable hostname '%s'",
                            h->label, pf->hostname);
    return 0;
}

/* --- steps ---------------------------------------------------------------------------------- */

static int host_ssh(struct boot_host *h, struct hc_error *err)
{
    if (h->ssh)
        return 0;
    h->ssh = hc_ssh_connect(&h->target, &h->job->ssh, h->fingerprint, sizeof(h->fingerprint), err);
    return h->ssh ? 0 : -1;
}

static int step_connect(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                        struct hc_error *err)
{
    struct boot_host *h = arg;
    if (host_ssh(h, err) < 0)
        return -1;
    snprintf(detail, len, "host key %s", h->fingerprint);
    return 0;
}

static int step_preflight(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                          struct hc_error *err)
{
    struct boot_host *h = arg;
    const char *iface = h->job->iface ? h->job->iface : "";
    const char *argv[] = {"sh", "-c", preflight_script, "preflight", iface, h->target.host, NULL};
    struct hc_ssh_result r;
    if (host_ssh(h, err) < 0 || hc_ssh_run(h->ssh, argv, 20000, &r, err) < 0)
        return -1;
    preflight_parse(r.out, &h->pf);
    hc_ssh_result_clear(&r);
    if (preflight_check(h, err) < 0)
        return -1;
    snprintf(detail, len, "%s %s, %s mtu %d, %lld MiB free, clock skew %lld s, init %s", h->pf.os,
             h->pf.arch, h->pf.iface, h->pf.iface_mtu, h->pf.free_kb / 1024,
             h->pf.time_s - hc_now_ms() / 1000, h->pf.init);
    return 0;
}

/* Is this host already a node here? Sets h->joined; a name held by another host is refused. */
static int check_membership(struct boot_host *h, struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(hc_op_db(h->ctx), h->name, &row, err);
    if (found < 0)
        return -1;
    int rc = 0;
    if (found && strcmp(row.address, h->target.host) != 0) {
        rc = hc_error_set(err, HC_E(CONFLICT), "node name '%s' of %s is taken by %s", h->name,
                          h->label, row.address);
        hc_error_hint(err, "give the host another hostname or remove the other node");
    }
    h->joined = found && rc == 0 && h->pf.enrolled;
    hc_node_row_clear(&row);
    return rc;
}

/* What the agent's `join --config` reads (a new string; caller frees). storage_interface is
 * the one preflight found (--storage-interface, or the interface carrying the node's address),
 * the same that pin records in nodes.storage_interface: the agent serves the storage service on
 * its address, and the storage peers name that address (controller/remote/storage_peers.c). */
static char *join_config(const struct boot_host *h, const char *token_path)
{
    char listen[300];
    snprintf(listen, sizeof(listen), "%s:%d", h->target.host, HC_PORT_AGENT);
    json_t *conf =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?}", "controller", h->job->controller_url, "name",
                  h->name, "listen", listen, "token_file", token_path, "data_dir",
                  HC_REMOTE_AGENT_DATA, "storage_interface", h->pf.iface[0] ? h->pf.iface : NULL);
    char *text = json_dumps(conf, JSON_INDENT(2));
    json_decref(conf);
    return text;
}

static int step_push(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    struct boot_host *h = arg;
    struct hc_join_token tok;
    const char *token_path = HC_REMOTE_AGENT_ETC "/join.token";
    char *token_line = NULL, *config = NULL;
    int rc = -1;
    if (host_ssh(h, err) < 0)
        return -1;
    /* The token fixes the node's address and name: whoever reads it on the host can enroll
     * that node, and only that node. */
    struct hc_join_binding bind = {0};
    snprintf(bind.address, sizeof(bind.address), "%s", h->target.host);
    snprintf(bind.name, sizeof(bind.name), "%s", h->name);
    if (hc_auth_join_create(hc_op_db(ctx), h->job->ca_fp, BOOT_JOIN_TOKEN_TTL_S, hc_op_id(ctx),
                            &bind, &tok, err) < 0)
        return -1;
    if (asprintf(&token_line, "%s\n", tok.text) < 0 || !(config = join_config(h, token_path))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    const struct hc_ssh_file files[] = {
        {HC_REMOTE_AGENT_ROOT "/" HC_VERSION "/hcagent", h->job->agent_bin, h->job->agent_len,
         0755},
        {token_path, token_line, strlen(token_line), 0600},
        {HC_REMOTE_AGENT_ETC "/join.json", config, strlen(config), 0644},
    };
    /* The storage service's data of an earlier membership is set aside in DATA/kept (as node
     * remove does), never deleted and never served again; the rest goes. */
    const char *rm_argv[] = {
        "sh",
        "-c",
        "d=$1; if [ -d \"$d/service-data\" ]; then mkdir -p \"$d/kept\" && "
        "mv \"$d/service-data\" \"$d/kept/service-data.$(date +%s)\" || exit 1; fi; "
        "for f in \"$d\"/* \"$d\"/.[!.]* \"$d\"/..?*; do [ -e \"$f\" ] || [ -L \"$f\" ] || "
        "continue; [ \"$f\" = \"$d/kept\" ] || rm -rf \"$f\" || exit 1; done",
        "clear",
        HC_REMOTE_AGENT_DATA,
        NULL};
    struct hc_ssh_result r = {0};
    /* Stale credentials of an earlier membership would make the agent skip enrollment (a
     * fresh host has none: preflight said so, and nothing runs a command for it). */
    if (h->pf.data) {
        if (hc_ssh_run(h->ssh, rm_argv, 20000, &r, err) < 0)
            goto cleanup;
        int status = r.exit_status;
        hc_ssh_result_clear(&r);
        if (status != 0) {
            hc_error_set(err, HC_E(SSH),
                         "%s: cannot clear %s of an earlier membership "
                         "(exit %d)",
                         h->label, HC_REMOTE_AGENT_DATA, status);
            goto cleanup;
        }
    }
    /* The `current` link is set by start, in the command that starts the agent. */
    if (hc_ssh_upload_files(h->ssh, files, HC_ARRAY_LEN(files), err) < 0)
        goto cleanup;
    snprintf(detail, len, "hcagent %s (%zu bytes) and a join token in %s", HC_VERSION,
             h->job->agent_len, HC_REMOTE_AGENT_ROOT);
    rc = 0;
cleanup:
    free(token_line);
    free(config);
    return rc;
}

/* The unit a systemd node gets: the packaged unit's template (packaging/systemd/
 * hcagent.service.in, embedded at build time), with the pushed agent's command and state
 * directory. The hardening is the package's, line for line. */
#include "hcagent_unit.h"

char *hc_bootstrap_unit_text(void)
{
    static const char *const names[] = {"@HC_AGENT_EXEC@", "@HC_AGENT_STATE@"};
    static const char *const values[] = {
        HC_REMOTE_AGENT_ROOT "/current/hcagent join --config " HC_REMOTE_AGENT_ETC "/join.json",
        HC_REMOTE_AGENT_STATE};
    size_t cap = sizeof(hc_agent_unit_template), len = 0;
    for (size_t i = 0; i < HC_ARRAY_LEN(values); i++)
        cap += 2 * strlen(values[i]); /* room for each value twice; each appears once */
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *t = hc_agent_unit_template; *t;) {
        size_t i = 0;
        while (i < HC_ARRAY_LEN(names) && strncmp(t, names[i], strlen(names[i])) != 0)
            i++;
        const char *piece = i < HC_ARRAY_LEN(names) ? values[i] : t;
        size_t n = i < HC_ARRAY_LEN(names) ? strlen(values[i]) : 1;
        if (len + n + 1 > cap) {
            free(out);
            return NULL;
        }
        memcpy(out + len, piece, n);
        len += n;
        t += i < HC_ARRAY_LEN(names) ? strlen(names[i]) : 1;
    }
    out[len] = '\0';
    return out;
}

/* Points `current` at this version (idempotent), then runs the rest of the arguments: one
 * remote command, so that activating and starting cost one SSH channel. */
static const char activate_script[] = "ln -sfn \"$1\" \"$2\" && shift 2 && exec \"$@\"";

/* The same for the supervised daemon, which is started unless the agent this step started
 * already runs enrolled (push removed any older enrollment): a controller that died during
 * this step runs it again, and a second `hcagent join --daemon` would refuse the pid file.
 * Running: the pid file's process exists and is no zombie (state Z or X in /proc/PID/stat). */
static const char daemon_start_script[] =
    "ln -sfn \"$1\" \"$2\" || exit 1; shift 2\n"
    "pid=; st=; { read -r pid <" HC_REMOTE_AGENT_RUN "/hcagent.pid; } 2>/dev/null\n"
    "case $pid in ''|*[!0-9]*) ;; *) { read -r _ _ st _ </proc/$pid/stat; } 2>/dev/null ;; esac\n"
    "case $st in ''|Z|X) ;; *) if [ -f " HC_REMOTE_AGENT_DATA "/agent.json ]; then\n"
    "  echo already running; exit 0; fi ;; esac\n"
    "exec \"$@\"\n";

static int step_start(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    struct boot_host *h = arg;
    struct hc_ssh_result r = {0};
    const char *bin = HC_REMOTE_AGENT_ROOT "/current/hcagent";
#define LINK "start", HC_VERSION, HC_REMOTE_AGENT_ROOT "/current"
    const char *daemon_argv[] = {"sh",
                                 "-c",
                                 daemon_start_script,
                                 LINK,
                                 bin,
                                 "join",
                                 "--config",
                                 HC_REMOTE_AGENT_ETC "/join.json",
                                 "--daemon",
                                 "--pidfile",
                                 HC_REMOTE_AGENT_RUN "/hcagent.pid",
                                 "--log-file",
                                 HC_REMOTE_AGENT_DATA ".log",
                                 NULL};
    const char *reload_argv[] = {"sh", "-c", activate_script, LINK, "systemctl", "daemon-reload",
                                 NULL};
#undef LINK
    const char *enable_argv[] = {"systemctl", "enable", "--now", "hcagent.service", NULL};
    int systemd = strcmp(h->pf.init, "systemd") == 0;
    if (host_ssh(h, err) < 0)
        return -1;
    if (systemd) {
        char *unit = hc_bootstrap_unit_text();
        if (!unit)
            return hc_error_set(err, HC_E(INTERNAL), "out of memory");
        int up = hc_ssh_upload(h->ssh, unit, strlen(unit), "/etc/systemd/system/hcagent.service",
                               0644, err);
        free(unit);
        if (up < 0 || hc_ssh_run(h->ssh, reload_argv, 30000, &r, err) < 0)
            return -1;
        int status = r.exit_status;
        if (status != 0) {
            r.err[strcspn(r.err, "\n")] = '\0';
            hc_error_set(err, HC_E(AGENT_START_FAILED),
                         "cannot activate hcagent on %s "
                         "(exit %d): %s",
                         h->label, status, r.err);
        }
        hc_ssh_result_clear(&r);
        if (status != 0)
            return -1;
    }
    if (hc_ssh_run(h->ssh, systemd ? enable_argv : daemon_argv, 30000, &r, err) < 0)
        return -1;
    int status = r.exit_status, already = strstr(r.out, "already running") != NULL;
    if (status != 0) {
        r.err[strcspn(r.err, "\n")] = '\0';
        hc_error_set(err, HC_E(AGENT_START_FAILED), "cannot start hcagent on %s (exit %d): %s",
                     h->label, status, r.err);
    }
    hc_ssh_result_clear(&r);
    if (status != 0)
        return -1;
    snprintf(detail, len, "%s as %s", already ? "already running" : "started",
             systemd ? "systemd unit hcagent.service" : "supervised daemon");
    return 0;
}

/* The last lines the agent logged, for an error message when it never came up. */
static void agent_log_tail(struct boot_host *h, char *buf, size_t len)
{
    const char *argv[] = {"tail", "-n", "3", HC_REMOTE_AGENT_DATA ".log", NULL};
    struct hc_ssh_result r;
    struct hc_error ignored;
    buf[0] = '\0';
    if (!h->ssh || hc_ssh_run(h->ssh, argv, 5000, &r, &ignored) < 0)
        return;
    for (char *p = r.out; *p; p++)
        if (*p == '\n')
            *p = ' ';
    snprintf(buf, len, "%s", r.out);
    hc_ssh_result_clear(&r);
}

/* The node row enrollment wrote for this host: 1 with id and agent_url, 0 when absent. */
static int enrolled_node(struct hc_op_ctx *ctx, struct boot_host *h, int64_t *id, char *url,
                         size_t url_len, struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(hc_op_db(ctx), h->name, &row, err);
    if (found < 0)
        return -1;
    found = found && strcmp(row.address, h->target.host) == 0;
    if (found) {
        *id = row.id;
        snprintf(url, url_len, "%s", row.agent_url);
    }
    hc_node_row_clear(&row);
    return found;
}

/* Until the enrolled agent answers. It is asked directly (hc_poller_ask records its status and
 * interfaces as a poll would, which the jumbo check at the end of create needs), so no poll
 * interval is waited. An agent that is still binding its port refuses the connection at once:
 * it is asked again after 10, 20, 40, then every 50 ms (a refused connect costs next to
 * nothing; an agent that accepted is waited for by the request itself). */
#define WAIT_RETRY_MIN_MS 10
#define WAIT_RETRY_MAX_MS 50

static int step_wait(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    struct boot_host *h = arg;
    int64_t start = hc_mono_ms(), deadline = start + h->job->wait_ms, pause = WAIT_RETRY_MIN_MS;
    long timeout = hc_agent_timeout_ms(h->job->ctl);
    char seen[700] = "not enrolled", url[1024];
    int rc = -1;
    struct hc_http_client *client = hc_agent_client_new(h->job->ctl, hc_op_db(ctx), err);
    if (!client)
        return -1;
    hc_op_waiting(ctx, "%s to enroll and answer", h->name);
    for (;;) {
        int64_t id = 0, left = deadline - hc_mono_ms();
        int found = enrolled_node(ctx, h, &id, url, sizeof(url), err);
        if (found < 0)
            goto cleanup;
        if (found) {
            long t = left >= timeout ? timeout : left > 100 ? (long)left : 100;
            rc = hc_poller_ask(hc_op_db(ctx), client, id, h->name, url, t, seen, sizeof(seen), err);
            if (rc != 0)
                break;
        }
        if (hc_mono_ms() > deadline || hc_op_checkpoint(ctx) != HC_OP_SUCCEEDED) {
            char tail[400];
            agent_log_tail(h, tail, sizeof(tail));
            hc_error_set(err, HC_E(TIMEOUT),
                         "agent on %s did not become healthy within "
                         "%lld s (%s)%s%s",
                         h->label, (long long)(h->job->wait_ms / 1000), seen,
                         tail[0] ? "; agent log: " : "", tail);
            hc_error_hint(err, "check that the node reaches the controller at %s",
                          h->job->controller_url);
            rc = -1;
            goto cleanup;
        }
        usleep((useconds_t)pause * 1000);
        pause = pause * 2 > WAIT_RETRY_MAX_MS ? WAIT_RETRY_MAX_MS : pause * 2;
    }
    if (rc > 0)
        snprintf(detail, len, "node %s healthy after %lld ms", h->name,
                 (long long)(hc_mono_ms() - start));
cleanup:
    hc_http_client_free(client);
    return rc > 0 ? 0 : -1;
}

static int step_pin(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                    struct hc_error *err)
{
    struct boot_host *h = arg;
    struct hc_db *db = hc_op_db(ctx);
    if (hc_db_begin(db, err) < 0)
        return -1;
    /* params.failure_domains is keyed by the canonical user@host:port (res_bootstrap.c) */
    const char *domain =
        hc_json_str(json_object_get(hc_op_params(ctx), "failure_domains"), h->label, NULL);
    if (hc_node_set_bootstrap(db, h->name, h->label, h->fingerprint[0] ? h->fingerprint : NULL,
                              h->pf.iface, h->pf.init[0] ? h->pf.init : NULL, err) < 0 ||
        (domain && hc_node_set_failure_domain(db, h->name, domain, err) < 0) ||
        hc_event_add(db, "node.pinned", h->name, hc_op_id(ctx), "controller", NULL, err,
                     "ssh host key of %s pinned: %s", h->label, h->fingerprint) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    snprintf(detail, len, "%s %s%s%s", h->name, h->fingerprint, domain ? " failure domain " : "",
             domain ? domain : "");
    return 0;
}

/* --- per host ------------------------------------------------------------------------------- */

static int host_steps(struct boot_host *h, struct hc_error *err)
{
    struct hc_op_ctx *ctx = h->ctx;
    if (hc_op_step_observe(ctx, h->label, "connect", step_connect, h, err) < 0 ||
        hc_op_step_observe(ctx, h->label, "preflight", step_preflight, h, err) < 0 ||
        check_membership(h, err) < 0)
        return -1;
    if (!h->joined) {
        if (hc_op_checkpoint(ctx) != HC_OP_SUCCEEDED)
            return 1;
        if (hc_op_step(ctx, h->label, "push", step_push, h, err) < 0 ||
            hc_op_step(ctx, h->label, "start", step_start, h, err) < 0)
            return -1;
    }
    if (hc_op_step(ctx, h->label, "wait_healthy", step_wait, h, err) < 0 ||
        hc_op_step_observe(ctx, h->label, "pin", step_pin, h, err) < 0)
        return -1;
    return 0;
}

static void host_run(struct boot_host *h)
{
    h->ctx = hc_op_ctx_fork(h->job->ctx, &h->err);
    if (!h->ctx) {
        h->result = HC_OP_FAILED;
        return;
    }
    int rc = host_steps(h, &h->err);
    if (rc < 0)
        h->result = HC_OP_FAILED;
    else if (rc > 0)
        h->result = hc_op_checkpoint(h->ctx);
    else
        h->result = HC_OP_SUCCEEDED;
    if (rc < 0)
        HC_WARN("operation %s: %s", hc_op_id(h->ctx), h->err.message);
    hc_ssh_close(h->ssh);
    h->ssh = NULL;
    hc_op_ctx_free_fork(h->ctx);
    h->ctx = NULL;
}

/* One host of the parallel-for. Hosts are independent: one failing stops no other. */
static int boot_host_item(void *arg, unsigned worker, size_t i)
{
    struct boot_job *job = arg;
    host_run(&job->hosts[i]);
    return 0;
}

/* --- the operation -------------------------------------------------------------------------- */

static int agent_binary(struct boot_job *job, struct hc_error *err)
{
    const char *env = getenv("HCCTLD_AGENT_BINARY");
    if (env) {
        snprintf(job->agent_path, sizeof(job->agent_path), "%s", env);
    } else {
        char self[1024];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
            return hc_error_set(err, HC_E(IO), "cannot find the controller's executable");
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        *slash = '\0';
        snprintf(job->agent_path, sizeof(job->agent_path), "%s/hcagent", self);
    }
    if (hc_file_read(job->agent_path, &job->agent_bin, &job->agent_len, err) < 0)
        return hc_error_hint(err, "install hcagent beside hcctld or set HCCTLD_AGENT_BINARY");
    return 0;
}

static int job_setup(struct boot_job *job, struct hc_error *err)
{
    const json_t *p = hc_op_params(job->ctx);
    struct hc_controller *ctl = job->ctl;
    hc_bootstrap_ssh_paths(ctl->data_dir, job->key, sizeof(job->key), job->known,
                           sizeof(job->known));
    job->ssh.key_file = hc_json_str(p, "ssh_key", job->key);
    job->ssh.known_hosts = job->known;
    job->ssh.extra_known_hosts = hc_json_str(p, "known_hosts", NULL);
    job->ssh.accept_new = hc_json_bool(p, "accept_new_host_keys", 0);
    job->ssh.timeout_ms = 10000;
    job->iface = hc_json_str(p, "storage_interface", NULL);
    job->wait_ms = hc_json_int(p, "join_timeout_ms", BOOT_WAIT_DEFAULT_MS);
    if (hc_controller_url(ctl, job->controller_url, sizeof(job->controller_url), err) < 0)
        return -1;
    X509 *ca = hc_pki_cert_load(ctl->ca_file, err);
    if (!ca)
        return -1;
    hc_pki_fingerprint(ca, job->ca_fp);
    X509_free(ca);
    return agent_binary(job, err);
}

static int job_hosts(struct boot_job *job, struct hc_error *err)
{
    const json_t *nodes = json_object_get(hc_op_params(job->ctx), "nodes");
    job->nhosts = json_array_size(nodes);
    if (job->nhosts == 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "no nodes given");
    job->hosts = calloc(job->nhosts, sizeof(*job->hosts));
    if (!job->hosts)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t i = 0; i < job->nhosts; i++) {
        struct boot_host *h = &job->hosts[i];
        h->job = job;
        h->spec = json_string_value(json_array_get(nodes, i));
        if (!h->spec || hc_ssh_target_parse(h->spec, &h->target, err) < 0)
            return -1;
        hc_ssh_target_format(&h->target, h->label, sizeof(h->label));
    }
    return 0;
}

/* cluster.create names the cluster (and its MTU) before bringing nodes in. */
static int name_cluster(struct boot_job *job, struct hc_error *err)
{
    const json_t *p = hc_op_params(job->ctx);
    const char *name = hc_json_str(p, "name", NULL);
    struct hc_db *db = hc_op_db(job->ctx);
    json_t *counts = hc_nodes_health_counts(db, err);
    json_t *rows = counts ? hc_db_query_json(db, err, "SELECT name FROM clusters WHERE id = ?", "s",
                                             job->ctl->cluster_id)
                          : NULL;
    int64_t n = hc_json_int(counts, "total", 0);
    json_decref(counts);
    if (!rows)
        return -1;
    json_t *row = json_array_get(rows, 0);
    int rc = 0;
    if (row && n > 0 && strcmp(hc_json_str(row, "name", ""), name) != 0) {
        rc = hc_error_set(err, HC_E(CONFLICT),
                          "this controller's cluster is already "
                          "created as '%s'",
                          hc_json_str(row, "name", ""));
        hc_error_hint(err, "add hosts with 'hcctl node add'");
    }
    json_decref(rows);
    if (rc < 0)
        return -1;
    int64_t mtu = hc_json_int(p, "mtu", 0);
    return hc_db_run(db, err, "UPDATE clusters SET name = ?, mtu = COALESCE(?, mtu) WHERE id = ?",
                     mtu ? "sis" : "sns", name, mtu, job->ctl->cluster_id) < 0
               ? -1
               : 0;
}

/* Folds the per-host outcomes into the operation's. */
static enum hc_op_result job_result(struct boot_job *job, struct hc_error *err)
{
    size_t failed = 0, stopped = 0;
    char list[400] = "";
    const struct boot_host *first = NULL;
    for (size_t i = 0; i < job->nhosts; i++) {
        const struct boot_host *h = &job->hosts[i];
        if (h->result == HC_OP_FAILED) {
            if (!first)
                first = h;
            size_t l = strlen(list);
            snprintf(list + l, sizeof(list) - l, "%s%s", failed ? ", " : "", h->label);
            failed++;
        } else if (h->result != HC_OP_SUCCEEDED) {
            stopped++;
        }
    }
    if (failed == 1) {
        *err = first->err;
        if (!err->hint[0])
            hc_error_hint(err, "fix the cause and re-run the same command: joined nodes are kept");
        return HC_OP_FAILED;
    }
    if (failed > 1) {
        /* One cause everywhere (say, unknown host keys) keeps its code and its advice. */
        int same = 1;
        for (size_t i = 0; i < job->nhosts; i++)
            if (job->hosts[i].result == HC_OP_FAILED &&
                strcmp(job->hosts[i].err.code, first->err.code) != 0)
                same = 0;
        hc_error_set_wire(err, HC_E(NODES_FAILED)->status, same ? first->err.code : "nodes_failed",
                          "%zu of %zu nodes failed (%s): first: %s", failed, job->nhosts, list,
                          first->err.message);
        if (same && first->err.hint[0])
            hc_error_hint(err, "%s; 'hcctl operation show' has the reason per node",
                          first->err.hint);
        else
            hc_error_hint(err, "'hcctl operation show' has the reason per node; fix and re-run "
                               "the same command: joined nodes are kept");
        return HC_OP_FAILED;
    }
    if (stopped)
        return hc_op_checkpoint(job->ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
    return HC_OP_SUCCEEDED;
}

/* node.add: the joined nodes get the cluster's storage version and join its members. */
static enum hc_op_result converge(struct boot_job *job, struct hc_error *err)
{
    const char **names = calloc(job->nhosts, sizeof(*names));
    if (!names) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return HC_OP_FAILED;
    }
    for (size_t i = 0; i < job->nhosts; i++)
        names[i] = job->hosts[i].name;
    enum hc_op_result r = hc_node_converge(job->ctx, names, job->nhosts, err);
    free(names);
    return r;
}

static enum hc_op_result bootstrap_run(struct hc_op_ctx *ctx, int create, struct hc_error *err)
{
    struct boot_job job = {.ctx = ctx, .ctl = hc_op_controller(ctx), .create = create};
    enum hc_op_result result = HC_OP_FAILED;
    if (job_setup(&job, err) < 0 || job_hosts(&job, err) < 0 ||
        (create && name_cluster(&job, err) < 0) || hc_ssh_keygen(job.key, err) < 0)
        goto cleanup;
    int64_t parallel = hc_json_int(hc_op_params(ctx), "parallel", HC_BOOTSTRAP_DEFAULT_PARALLEL);
    if (parallel < 1 || parallel > HC_BOOTSTRAP_MAX_PARALLEL)
        parallel = HC_BOOTSTRAP_DEFAULT_PARALLEL;
    hc_op_waiting(ctx, "%zu node(s) to join, %lld at a time", job.nhosts, (long long)parallel);
    hc_parallel_for(job.nhosts, (unsigned)parallel, boot_host_item, &job);
    result = job_result(&job, err);
    /* A node that cannot carry the cluster's MTU stays joined, but never silently. */
    if (result == HC_OP_SUCCEEDED && hc_net_check_after_join(ctx, err) < 0)
        result = HC_OP_FAILED;
    if (result == HC_OP_SUCCEEDED && !create)
        result = converge(&job, err);
    hc_op_waiting(ctx, NULL);
cleanup:
    free(job.hosts);
    free(job.agent_bin);
    return result;
}

static enum hc_op_result cluster_create_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    return bootstrap_run(ctx, 1, err);
}

static enum hc_op_result node_add_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    return bootstrap_run(ctx, 0, err);
}

const struct hc_op_kind hc_op_kind_cluster_create = {"cluster.create", 0, cluster_create_run};
const struct hc_op_kind hc_op_kind_node_add = {"node.add", 0, node_add_run};
