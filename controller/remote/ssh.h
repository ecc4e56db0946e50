/*
 * SSH transport for bootstrapping nodes (libssh 0.10): key authentication, host keys pinned in
 * the controller's own known_hosts store, commands built only from quoted arguments, and SFTP
 * uploads that land atomically.
 *
 * Host keys: the controller's store (read-write) plus an optional file supplied by the admin
 * (read-only, e.g. collected out of band). An unknown key is refused unless accept_new is set; a
 * changed key is always refused, naming both fingerprints. ~/.ssh/config is never read
 * (SSH_OPTIONS_PROCESS_CONFIG=false): what the controller does must not depend on the account
 * it runs under.
 *
 * Every call has a deadline: a host that accepts TCP but never finishes the handshake (an MTU
 * blackhole eats the large key-exchange packets) ends as HC_ERR_TIMEOUT, never as a hang.
 */
#ifndef HC_CONTROLLER_SSH_H
#define HC_CONTROLLER_SSH_H

#include <stddef.h>

#include "common/error.h"
#include "common/ssh_target.h"

struct hc_ssh_opts {
    const char *key_file;          /* private key for public-key authentication */
    const char *known_hosts;       /* the controller's store; new keys are appended here */
    const char *extra_known_hosts; /* admin-supplied, read-only; may be NULL */
    int accept_new;                /* pin a key that neither file knows */
    long timeout_ms;               /* connect/handshake deadline (default 10000) */
};

struct hc_ssh;
/* Connects, verifies the host key and authenticates. fingerprint (at least 80 bytes) receives
 * the server key's "SHA256:..." fingerprint, also on host-key errors. Caller closes. */
struct hc_ssh *hc_ssh_connect(const struct hc_ssh_target *t, const struct hc_ssh_opts *opts,
                              char *fingerprint, size_t fp_len, struct hc_error *err);
void hc_ssh_close(struct hc_ssh *s); /* accepts NULL */

struct hc_ssh_result {
    int exit_status; /* the remote command's exit status (-1 if none was reported) */
    char *out;       /* stdout, NUL-terminated (truncated at 1 MiB) */
    char *err;       /* stderr, NUL-terminated (truncated at 64 KiB) */
};
void hc_ssh_result_clear(struct hc_ssh_result *r);

/* Runs argv[0] with arguments argv[1..] (NULL-terminated) on the host; every element is
 * shell-quoted, so no argument is ever interpreted by the remote shell. Returns 0 when the
 * command ran (check exit_status), -1 on transport failure or timeout. */
int hc_ssh_run(struct hc_ssh *s, const char *const argv[], long timeout_ms,
               struct hc_ssh_result *res, struct hc_error *err);
/* Writes data to remote_path with mode via SFTP: uploads to a fresh temporary name beside it,
 * then `mv -f` over the target (SFTP rename does not overwrite). Parent directories are made. */
int hc_ssh_upload(struct hc_ssh *s, const void *data, size_t len, const char *remote_path, int mode,
                  struct hc_error *err);

/* Several files in one SFTP session, each written to a temporary name and moved into place:
 * directories are made only when creating a file fails, a fresh file lands with an SFTP rename,
 * and `mv -f` runs only for targets that already exist. A file whose move did not happen keeps
 * its old content. */
struct hc_ssh_file {
    const char *remote_path;
    const void *data;
    size_t len;
    int mode;
};
int hc_ssh_upload_files(struct hc_ssh *s, const struct hc_ssh_file *files, size_t n,
                        struct hc_error *err);

/* Single-quotes arg for a POSIX shell. Caller frees. */
char *hc_sh_quote(const char *arg);

/* Generates an Ed25519 key pair at path (0600) and path.pub unless path exists. */
int hc_ssh_keygen(const char *path, struct hc_error *err);

#endif
