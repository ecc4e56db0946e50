/*
 * Small helpers used everywhere: time, durations, random identifiers, files with safe modes.
 */
#ifndef HC_COMMON_UTIL_H
#define HC_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"

#define HC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Wall-clock milliseconds since the epoch, and a monotonic clock in milliseconds. */
int64_t hc_now_ms(void);
int64_t hc_mono_ms(void);
/* Sleeps ms milliseconds (a signal may cut it short). */
void hc_sleep_ms(int64_t ms);
/* Formats epoch milliseconds as RFC 3339 UTC with milliseconds ("2026-11-29T18:54:36.123Z").
 * buf must hold at least 32 bytes. Returns buf. */
char *hc_time_format(int64_t epoch_ms, char *buf, size_t len);

/* Parses a duration: "250ms", "30s", "5m", "2h", "1d", or a bare number of seconds.
 * Combined forms ("1m30s") are accepted. Returns 0 and writes milliseconds, or -1 with err. */
int hc_duration_parse(const char *text, int64_t *out_ms, struct hc_error *err);

/* Fills buf with 2*nbytes lowercase hex characters of cryptographic randomness + NUL.
 * buf must hold 2*nbytes+1 bytes. Returns 0 or -1. */
int hc_random_hex(char *buf, size_t nbytes);

/* Lowercase hex SHA-256 of data into out (65 bytes). */
void hc_sha256_hex(const void *data, size_t len, char out[65]);
/* Constant-time string comparison; returns 1 if equal. */
int hc_ct_equal(const char *a, const char *b);

/* Reads a whole file (NUL-terminated). Caller frees *out. Returns 0 or -1 with err. */
int hc_file_read(const char *path, char **out, size_t *len, struct hc_error *err);
/* Writes data atomically with the given mode (e.g. 0600): a new temporary file next to path
 * (hc_file_tmp_open), fsync, rename over path, fsync of the directory. Returns 0 or -1 with err.
 * Whatever sits at path (a symbolic link included) is replaced, never followed. */
int hc_file_write_atomic(const char *path, const void *data, size_t len, int mode,
                         struct hc_error *err);
/* The one way to create a file that is then renamed into place. Creates "PATH.tmp.XXXXXX"
 * (mkostemp: random name, O_CREAT | O_EXCL, so never a file, FIFO or symbolic link someone put
 * there in advance) with exactly mode (fchmod on the descriptor before any data: a 0600 secret
 * is never readable by others, whatever the umask). tmp (len bytes) receives the name. Returns
 * the descriptor, or -1 with err. */
int hc_file_tmp_open(const char *path, int mode, char *tmp, size_t len, struct hc_error *err);
/* fsyncs and closes fd, renames tmp over path and fsyncs the directory. On failure the temporary
 * file is removed. Returns 0 or -1 with err. */
int hc_file_tmp_commit(int fd, const char *tmp, const char *path, struct hc_error *err);
/* fsync of a directory (a rename in it then survives a crash). 0, or -1 with errno. */
int hc_dir_sync(const char *dir);
/* Closes fd (when >= 0) and removes tmp: for a write that is given up. */
void hc_file_tmp_abort(int fd, const char *tmp);
/* Keeps an append-only log file within max bytes: when it is larger, its content moves to
 * PATH.1 (replacing the older one) and PATH is truncated in place, so that a process appending
 * to it (O_APPEND) carries on from the start. A line written between the copy and the
 * truncation is lost (as with logrotate's copytruncate). Returns 1 when it rotated, 0 when it
 * did not need to, -1 with err. */
int hc_file_cap(const char *path, long long max, struct hc_error *err);
/* mkdir -p with mode for created directories. Returns 0 or -1 with err. */
int hc_mkdir_p(const char *path, int mode, struct hc_error *err);
/* Joins dir and name into a newly allocated string. Caller frees. */
char *hc_path_join(const char *dir, const char *name);

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), 0 when s does not start one (a stray
 * continuation byte, an overlong form, a surrogate, beyond U+10FFFF, or cut short by the NUL).
 * *cp receives the code point. */
size_t hc_utf8_seq(const unsigned char *s, uint32_t *cp);
/* Copies src into dst (len > 0 bytes) as text fit to store and show: valid UTF-8 only, cut at a
 * character boundary when it does not fit, every control character (C0, DEL, C1) and every
 * invalid byte replaced by '?'. For strings a peer reports (an agent's hostname). dst may be
 * src (in place). Returns dst, or NULL when src is NULL. */
char *hc_text_clean(char *dst, size_t len, const char *src);

/* Node names, the same for agents and the controller: ^[a-z0-9][a-z0-9._-]{0,62}$.
 * Returns 1 when valid. */
int hc_node_name_valid(const char *name);
/* Failure domain names (a rack, a chassis, a power feed): the same rule as node names,
 * ^[a-z0-9][a-z0-9._-]{0,62}$, so that they travel in URLs, peers files and tables unquoted.
 * Returns 1 when valid. */
int hc_failure_domain_valid(const char *name);

/* Raises the soft limit of open files (RLIMIT_NOFILE) to the hard limit, which the unit sets
 * (LimitNOFILE=) or the shell's ulimit -Hn: a 1,000-node fan-out needs thousands of sockets and
 * the soft default is 1,024. Returns the soft limit now in force (LONG_MAX when unlimited). */
long hc_nofile_raise(void);
/* A share of the open-files limit for one part of a process: limit / divisor, at least floor
 * (a fan-out sizes its parallelism with it, leaving the rest to the other parts). */
size_t hc_nofile_share(unsigned divisor, size_t floor);

/* Splits "HOST:PORT" (IPv4, name, or [IPv6]). host must hold 256 bytes. Returns 0 or -1. */
int hc_split_host_port(const char *text, char *host, size_t host_len, int *port,
                       struct hc_error *err);

#endif
