/* SSH transport for node bootstrap: libssh sessions with pinned host keys, quoted commands
 * and atomic SFTP uploads. See ssh.h for the rules. */
#include "controller/remote/ssh.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define HC_SSH_OUT_MAX (1024 * 1024)
#define HC_SSH_ERR_MAX (64 * 1024)

struct hc_ssh {
    ssh_session session;
    char target[400];       /* user@host:port, for messages */
    char host_pattern[300]; /* how known_hosts names this host */
    long timeout_s;         /* libssh's limit on each wait for the server */
};

/* An error of an established session about `what`. libssh leaves its message empty when a
 * wait ran out: say so, and name the usual cause (large packets lost on the path while the
 * handshake's small ones passed). */
static int session_error(const struct hc_ssh *s, const char *what, struct hc_error *err)
{
    const char *msg = ssh_get_error(s->session);
    if (msg && msg[0])
        return hc_error_set(err, HC_E(SSH), "%s on '%s': %s", what, s->target, msg);
    hc_error_set(err, HC_E(TIMEOUT), "%s on '%s': no answer within %ld s", what, s->target,
                 s->timeout_s);
    return hc_error_hint(err, "the ssh session was up, so large packets may be lost on the way "
                              "(an MTU blackhole): check 'hcctl net check-jumbo', or the host "
                              "is overloaded");
}

static pthread_once_t ssh_once = PTHREAD_ONCE_INIT;

static void ssh_global_init(void)
{
    ssh_init();
}

char *hc_sh_quote(const char *arg)
{
    size_t n = 2;
    for (const char *p = arg; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    *o++ = '\'';
    for (const char *p = arg; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4); /* close, escaped quote, reopen */
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

static void key_fingerprint(ssh_key key, char *out, size_t len)
{
    unsigned char *hash = NULL;
    size_t hlen = 0;
    snprintf(out, len, "unknown");
    if (!key || ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) < 0)
        return;
    char *fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    if (fp)
        snprintf(out, len, "%s", fp);
    ssh_string_free_char(fp);
    ssh_clean_pubkey_hash(&hash);
}

/* Finds the pinned key for host_pattern ("host" or "[host]:port", as known_hosts writes it) in
 * a known_hosts file and writes its fingerprint. libssh reports CHANGED without the old key, and
 * the admin needs both fingerprints to decide. Returns 0 when found. */
static int pinned_fingerprint(const char *file, const char *host_pattern, char *out, size_t len)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    char line[8192];
    int found = -1;
    while (found < 0 && fgets(line, sizeof(line), f)) {
        char *save = NULL, *hosts = strtok_r(line, " \t", &save);
        char *type = strtok_r(NULL, " \t", &save), *b64 = strtok_r(NULL, " \t\n", &save);
        if (!hosts || !type || !b64 || hosts[0] == '#')
            continue;
        int match = 0;
        char *hsave = NULL;
        for (char *h = strtok_r(hosts, ",", &hsave); h && !match; h = strtok_r(NULL, ",", &hsave))
            match = strcmp(h, host_pattern) == 0;
        ssh_key key = NULL;
        if (match && ssh_pki_import_pubkey_base64(b64, ssh_key_type_from_name(type), &key) == 0) {
            key_fingerprint(key, out, len);
            found = 0;
        }
        ssh_key_free(key);
    }
    fclose(f);
    return found;
}

/* Decides on the server's key: known and equal -> 0; unknown -> pin if allowed; changed ->
 * refuse with both fingerprints. */
static int check_host_key(struct hc_ssh *s, const struct hc_ssh_opts *opts, char *fp, size_t fp_len,
                          struct hc_error *err)
{
    ssh_key server_key = NULL;
    if (ssh_get_server_publickey(s->session, &server_key) < 0)
        return hc_error_set(err, HC_E(SSH), "cannot read the host key of '%s': %s", s->target,
                            ssh_get_error(s->session));
    key_fingerprint(server_key, fp, fp_len);
    ssh_key_free(server_key);

    enum ssh_known_hosts_e state = ssh_session_is_known_server(s->session);
    char old_fp[128] = "unknown";
    const char *holder = opts->known_hosts; /* the file whose key differs */
    if (state == SSH_KNOWN_HOSTS_CHANGED || state == SSH_KNOWN_HOSTS_OTHER) {
        if (pinned_fingerprint(opts->known_hosts, s->host_pattern, old_fp, sizeof(old_fp)) < 0 &&
            opts->extra_known_hosts &&
            pinned_fingerprint(opts->extra_known_hosts, s->host_pattern, old_fp, sizeof(old_fp)) ==
                0)
            holder = opts->extra_known_hosts;
    }

    switch (state) {
    case SSH_KNOWN_HOSTS_OK:
        return 0;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
        hc_error_set(err, HC_E(HOST_KEY_CHANGED), "host key of '%s' changed: %s %s, offered %s",
                     s->target, holder == opts->known_hosts ? "pinned" : "--known-hosts file has",
                     old_fp, fp);
        return hc_error_hint(err,
                             "refusing to connect (possible man-in-the-middle); if the host "
                             "was reinstalled, delete its line from %s and add it again",
                             holder);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
        if (!opts->accept_new) {
            hc_error_set(err, HC_E(HOST_KEY_UNKNOWN), "host key of '%s' is not known: %s",
                         s->target, fp);
            return hc_error_hint(err, "check the fingerprint on the host (ssh-keygen -lf "
                                      "/etc/ssh/ssh_host_ed25519_key.pub) and pass "
                                      "--accept-new-host-keys, or give --known-hosts FILE");
        }
        if (ssh_session_update_known_hosts(s->session) < 0)
            return hc_error_set(err, HC_E(IO), "cannot pin the host key of '%s' in '%s': %s",
                                s->target, opts->known_hosts, ssh_get_error(s->session));
        return 0;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
        return hc_error_set(err, HC_E(SSH), "cannot check the host key of '%s': %s", s->target,
                            ssh_get_error(s->session));
    }
}

static int set_options(struct hc_ssh *s, const struct hc_ssh_target *t,
                       const struct hc_ssh_opts *opts, struct hc_error *err)
{
    int no = 0, yes = 1;
    long timeout_s = (opts->timeout_ms > 0 ? opts->timeout_ms : 10000) / 1000;
    if (timeout_s < 1)
        timeout_s = 1;
    s->timeout_s = timeout_s;
    unsigned int port = (unsigned int)t->port;
    if (ssh_options_set(s->session, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_HOST, t->host) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_PORT, &port) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_USER, t->user) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_TIMEOUT, &timeout_s) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_NODELAY, &yes) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_KNOWNHOSTS, opts->known_hosts) < 0 ||
        ssh_options_set(s->session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS,
                        opts->extra_known_hosts ? opts->extra_known_hosts : "/dev/null") < 0)
        return hc_error_set(err, HC_E(SSH), "cannot configure ssh for '%s': %s", s->target,
                            ssh_get_error(s->session));
    return 0;
}

static int authenticate(struct hc_ssh *s, const struct hc_ssh_opts *opts, struct hc_error *err)
{
    ssh_key key = NULL;
    if (ssh_pki_import_privkey_file(opts->key_file, NULL, NULL, NULL, &key) != SSH_OK) {
        hc_error_set(err, HC_E(SSH_AUTH), "cannot load ssh key '%s'", opts->key_file);
        return hc_error_hint(err, "give an unencrypted private key with --ssh-key");
    }
    int rc = ssh_userauth_publickey(s->session, NULL, key);
    ssh_key_free(key);
    if (rc != SSH_AUTH_SUCCESS) {
        hc_error_set(err, HC_E(SSH_AUTH), "ssh key '%s' was refused by '%s'", opts->key_file,
                     s->target);
        return hc_error_hint(err,
                             "add its public key (%s.pub) to the user's authorized_keys "
                             "on the node, or pass another --ssh-key",
                             opts->key_file);
    }
    return 0;
}

struct hc_ssh *hc_ssh_connect(const struct hc_ssh_target *t, const struct hc_ssh_opts *opts,
                              char *fingerprint, size_t fp_len, struct hc_error *err)
{
    pthread_once(&ssh_once, ssh_global_init);
    if (fingerprint && fp_len)
        fingerprint[0] = '\0';
    struct hc_ssh *s = calloc(1, sizeof(*s));
    if (!s || !(s->session = ssh_new())) {
        free(s);
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    hc_ssh_target_format(t, s->target, sizeof(s->target));
    if (t->port == 22)
        snprintf(s->host_pattern, sizeof(s->host_pattern), "%s", t->host);
    else
        snprintf(s->host_pattern, sizeof(s->host_pattern), "[%s]:%d", t->host, t->port);
    char fp[128] = "";
    if (set_options(s, t, opts, err) < 0)
        goto fail;
    if (ssh_connect(s->session) != SSH_OK) {
        const char *msg = ssh_get_error(s->session);
        int timed_out = strstr(msg, "imeout") || strstr(msg, "timed out");
        hc_error_set(err, timed_out ? HC_E(TIMEOUT) : HC_E(UNREACHABLE),
                     "cannot connect to '%s': %s", s->target, msg);
        if (timed_out)
            hc_error_hint(err, "the host accepts connections but the ssh handshake never "
                               "completed: check the path MTU toward it");
        goto fail;
    }
    if (check_host_key(s, opts, fp, sizeof(fp), err) < 0 || authenticate(s, opts, err) < 0)
        goto fail;
    if (fingerprint)
        snprintf(fingerprint, fp_len, "%s", fp);
    return s;
fail:
    if (fingerprint)
        snprintf(fingerprint, fp_len, "%s", fp);
    hc_ssh_close(s);
    return NULL;
}

void hc_ssh_close(struct hc_ssh *s)
{
    if (!s)
        return;
    if (s->session) {
        if (ssh_is_connected(s->session))
            ssh_disconnect(s->session);
        ssh_free(s->session);
    }
    free(s);
}

void hc_ssh_result_clear(struct hc_ssh_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static char *build_command(const char *const argv[])
{
    size_t cap = 256, len = 0;
    char *cmd = malloc(cap);
    if (!cmd)
        return NULL;
    cmd[0] = '\0';
    for (size_t i = 0; argv[i]; i++) {
        char *q = hc_sh_quote(argv[i]);
        if (!q)
            goto oom;
        size_t ql = strlen(q);
        if (len + ql + 2 > cap) {
            cap = (len + ql + 2) * 2;
            char *n = realloc(cmd, cap);
            if (!n) {
                free(q);
                goto oom;
            }
            cmd = n;
        }
        if (i)
            cmd[len++] = ' ';
        memcpy(cmd + len, q, ql + 1);
        len += ql;
        free(q);
    }
    return cmd;
oom:
    free(cmd);
    return NULL;
}

/* Appends what the channel has on one stream into *buf (bounded by max). Returns bytes read,
 * 0 when nothing was ready, -1 on error. */
static int drain_stream(ssh_channel ch, int is_stderr, char **buf, size_t *len, size_t max,
                        int timeout_ms)
{
    char chunk[16384];
    int n = ssh_channel_read_timeout(ch, chunk, sizeof(chunk), is_stderr, timeout_ms);
    if (n <= 0)
        return n == SSH_ERROR ? -1 : 0;
    size_t take = *len + (size_t)n > max ? max - *len : (size_t)n;
    char *nb = realloc(*buf, *len + take + 1);
    if (!nb)
        return -1;
    *buf = nb;
    memcpy(*buf + *len, chunk, take);
    *len += take;
    (*buf)[*len] = '\0';
    return n;
}

int hc_ssh_run(struct hc_ssh *s, const char *const argv[], long timeout_ms,
               struct hc_ssh_result *res, struct hc_error *err)
{
    memset(res, 0, sizeof(*res));
    res->exit_status = -1;
    res->out = calloc(1, 1);
    res->err = calloc(1, 1);
    size_t out_len = 0, err_len = 0;
    int rc = -1;
    char *cmd = build_command(argv);
    ssh_channel ch = ssh_channel_new(s->session);
    if (!cmd || !ch || !res->out || !res->err) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, cmd) != SSH_OK) {
        char what[300];
        snprintf(what, sizeof(what), "cannot run '%s'", argv[0]);
        session_error(s, what, err);
        goto cleanup;
    }
    int64_t deadline = hc_mono_ms() + (timeout_ms > 0 ? timeout_ms : 30000);
    while (!ssh_channel_is_eof(ch)) {
        if (hc_mono_ms() > deadline) {
            hc_error_set(err, HC_E(TIMEOUT), "'%s' on '%s' did not finish in %ld ms", argv[0],
                         s->target, timeout_ms);
            goto cleanup;
        }
        if (drain_stream(ch, 0, &res->out, &out_len, HC_SSH_OUT_MAX, 100) < 0 ||
            drain_stream(ch, 1, &res->err, &err_len, HC_SSH_ERR_MAX, 0) < 0) {
            hc_error_set(err, HC_E(SSH), "lost the ssh session to '%s' while running '%s'",
                         s->target, argv[0]);
            goto cleanup;
        }
    }
    /* Whatever arrived together with EOF. */
    while (drain_stream(ch, 0, &res->out, &out_len, HC_SSH_OUT_MAX, 0) > 0)
        ;
    while (drain_stream(ch, 1, &res->err, &err_len, HC_SSH_ERR_MAX, 0) > 0)
        ;
    ssh_channel_send_eof(ch);
    res->exit_status = ssh_channel_get_exit_status(ch);
    rc = 0;
cleanup:
    if (ch) {
        ssh_channel_close(ch);
        ssh_channel_free(ch);
    }
    free(cmd);
    if (rc < 0)
        hc_ssh_result_clear(res);
    return rc;
}

/* Runs argv and turns a non-zero exit status into an error quoting stderr. */
static int run_checked(struct hc_ssh *s, const char *const argv[], struct hc_error *err)
{
    struct hc_ssh_result r;
    if (hc_ssh_run(s, argv, 30000, &r, err) < 0)
        return -1;
    int rc = 0;
    if (r.exit_status != 0) {
        r.err[strcspn(r.err, "\n")] = '\0';
        rc = hc_error_set(err, HC_E(SSH), "'%s' failed on '%s' (exit %d): %s", argv[0], s->target,
                          r.exit_status, r.err);
    }
    hc_ssh_result_clear(&r);
    return rc;
}

/* Data per SFTP write request, each one a round trip. 32 KiB is what every server takes;
 * OpenSSH's sftp-server (it announces posix-rename@openssh.com) takes messages up to 256 KiB. */
#define SFTP_CHUNK_PORTABLE (32 * 1024)
#define SFTP_CHUNK_OPENSSH (192 * 1024)

static int sftp_write_all(sftp_file f, const char *p, size_t len, size_t chunk_max)
{
    while (len > 0) {
        size_t chunk = len > chunk_max ? chunk_max : len;
        ssize_t w = sftp_write(f, p, chunk);
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Moves each temporary name over its target in one remote command (argv: tmp1 dst1 tmp2 ...):
 * what SFTP's rename cannot do (replace an existing file). */
static const char move_script[] =
    "while [ $# -gt 1 ]; do mv -f -- \"$1\" \"$2\" || exit 1; shift 2; done";

static int temp_name(const struct hc_ssh_file *f, char *tmp, size_t len, struct hc_error *err)
{
    char suffix[17];
    const char *slash = strrchr(f->remote_path, '/');
    if (f->remote_path[0] != '/' || !slash || slash == f->remote_path)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "remote path '%s' must be absolute "
                            "and below /",
                            f->remote_path);
    hc_random_hex(suffix, 8);
    snprintf(tmp, len, "%s.upload-%s", f->remote_path, suffix);
    return 0;
}

/* argv of the fallback move: the prefix words, then tmp and target of each file not yet in
 * place. */
static const char **move_argv(const char *const *prefix, size_t np, const struct hc_ssh_file *files,
                              size_t n, char (*tmps)[1200], const int *moved)
{
    const char **argv = calloc(np + 2 * n + 1, sizeof(*argv));
    size_t k = 0;
    if (!argv)
        return NULL;
    for (size_t i = 0; i < np; i++)
        argv[k++] = prefix[i];
    for (size_t i = 0; i < n; i++) {
        if (moved[i])
            continue;
        argv[k++] = tmps[i];
        argv[k++] = files[i].remote_path;
    }
    return argv;
}

/* mkdir -p over SFTP: dir and its missing parents (0755), asking only as far up as needed.
 * 0, or -1 with err. */
static int sftp_mkdir_p(struct hc_ssh *s, sftp_session sftp, const char *dir, struct hc_error *err)
{
    if (sftp_mkdir(sftp, dir, 0755) == 0)
        return 0;
    if (sftp_get_error(sftp) == SSH_FX_NO_SUCH_FILE) {
        char parent[1024];
        snprintf(parent, sizeof(parent), "%s", dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = '\0';
            if (sftp_mkdir_p(s, sftp, parent, err) < 0)
                return -1;
        }
        if (sftp_mkdir(sftp, dir, 0755) == 0)
            return 0;
    }
    /* SFTP 3 has no "already exists": look whether a directory is there. */
    sftp_attributes a = sftp_stat(sftp, dir);
    int is_dir = a && a->type == SSH_FILEXFER_TYPE_DIRECTORY;
    sftp_attributes_free(a);
    return is_dir ? 0
                  : hc_error_set(err, HC_E(SSH),
                                 "cannot create directory '%s' on '%s': "
                                 "sftp error %d",
                                 dir, s->target, sftp_get_error(sftp));
}

/* Opens tmp for writing, making its directory first when it is missing. NULL with err. */
static sftp_file sftp_create(struct hc_ssh *s, sftp_session sftp, const char *tmp, const char *dir,
                             int mode, struct hc_error *err)
{
    sftp_file f = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, (mode_t)mode);
    if (!f && sftp_get_error(sftp) == SSH_FX_NO_SUCH_FILE) {
        if (sftp_mkdir_p(s, sftp, dir, err) < 0)
            return NULL;
        f = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, (mode_t)mode);
    }
    if (!f)
        hc_error_set(err, HC_E(SSH), "cannot create '%s' on '%s': sftp error %d", tmp, s->target,
                     sftp_get_error(sftp));
    return f;
}

/* Everything goes through one SFTP session, in as few round trips as it takes: directories
 * are made only when creating a file in them fails, and no remote process is started unless a
 * target already exists. SFTP (version 3, as OpenSSH speaks it) renames only onto a free name,
 * so a fresh file lands with a rename and an existing one is replaced by `mv -f` (atomic either
 * way). */
int hc_ssh_upload_files(struct hc_ssh *s, const struct hc_ssh_file *files, size_t n,
                        struct hc_error *err)
{
    char(*tmps)[1200] = calloc(n, sizeof(*tmps));
    char(*dirs)[1024] = calloc(n, sizeof(*dirs));
    int *moved = calloc(n, sizeof(*moved));
    const char **argv = NULL;
    sftp_session sftp = NULL;
    size_t written = 0, pending = 0;
    int rc = -1;
    if (!tmps || !dirs || !moved) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        if (temp_name(&files[i], tmps[i], sizeof(tmps[i]), err) < 0)
            goto cleanup;
        snprintf(dirs[i], sizeof(dirs[i]), "%s", files[i].remote_path);
        *strrchr(dirs[i], '/') = '\0';
    }
    sftp = sftp_new(s->session);
    if (!sftp || sftp_init(sftp) != SSH_OK) {
        session_error(s, "cannot start sftp", err);
        goto cleanup;
    }
    size_t chunk = sftp_extension_supported(sftp, "posix-rename@openssh.com", "1")
                       ? SFTP_CHUNK_OPENSSH
                       : SFTP_CHUNK_PORTABLE;
    for (; written < n; written++) {
        sftp_file f = sftp_create(s, sftp, tmps[written], dirs[written], files[written].mode, err);
        if (!f)
            goto cleanup;
        int ok = sftp_write_all(f, files[written].data, files[written].len, chunk) == 0;
        sftp_close(f);
        if (!ok) {
            hc_error_set(err, HC_E(SSH), "cannot write '%s' on '%s': sftp error %d", tmps[written],
                         s->target, sftp_get_error(sftp));
            written++; /* its temporary file exists: remove it below */
            goto cleanup;
        }
    }
    for (size_t i = 0; i < n; i++) {
        moved[i] = sftp_rename(sftp, tmps[i], files[i].remote_path) == 0;
        pending += !moved[i];
    }
    if (pending) {
        static const char *const mv_prefix[] = {"sh", "-c", move_script, "move"};
        argv = move_argv(mv_prefix, 4, files, n, tmps, moved);
        if (!argv || run_checked(s, argv, err) < 0)
            goto cleanup;
    }
    rc = 0;
cleanup:
    for (size_t i = 0; rc < 0 && sftp && i < written; i++)
        if (!moved[i])
            sftp_unlink(sftp, tmps[i]);
    if (sftp)
        sftp_free(sftp);
    free(argv);
    free(tmps);
    free(dirs);
    free(moved);
    return rc;
}

int hc_ssh_upload(struct hc_ssh *s, const void *data, size_t len, const char *remote_path, int mode,
                  struct hc_error *err)
{
    struct hc_ssh_file f = {remote_path, data, len, mode};
    return hc_ssh_upload_files(s, &f, 1, err);
}

int hc_ssh_keygen(const char *path, struct hc_error *err)
{
    if (access(path, F_OK) == 0)
        return 0;
    pthread_once(&ssh_once, ssh_global_init);
    ssh_key key = NULL;
    char *b64 = NULL, *priv = NULL;
    int rc = -1;
    if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) {
        hc_error_set(err, HC_E(INTERNAL), "cannot generate an ssh key");
        goto cleanup;
    }
    /* Through the atomic helper: created 0600 under a name nobody can predict, never written
     * with the umask's mode first and narrowed afterwards. */
    if (ssh_pki_export_privkey_base64(key, NULL, NULL, NULL, &priv) != SSH_OK) {
        hc_error_set(err, HC_E(INTERNAL), "cannot export the ssh private key");
        goto cleanup;
    }
    if (hc_file_write_atomic(path, priv, strlen(priv), 0600, err) < 0) {
        hc_error_prefix(err, "cannot write ssh key '%s'", path);
        goto cleanup;
    }
    if (ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
        hc_error_set(err, HC_E(INTERNAL), "cannot export the ssh public key");
        goto cleanup;
    }
    char line[1024], pub[1100];
    snprintf(line, sizeof(line), "ssh-ed25519 %s hcctld\n", b64);
    snprintf(pub, sizeof(pub), "%s.pub", path);
    rc = hc_file_write_atomic(pub, line, strlen(line), 0644, err);
cleanup:
    if (priv)
        explicit_bzero(priv, strlen(priv));
    ssh_string_free_char(priv);
    ssh_string_free_char(b64);
    ssh_key_free(key);
    return rc;
}
