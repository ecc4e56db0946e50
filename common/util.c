/* Small helpers: clocks, durations, randomness, hashing and files written safely. */
#include "common/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t hc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hc_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int64_t hc_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *hc_time_format(int64_t epoch_ms, char *buf, size_t len)
{
    time_t secs = (time_t)(epoch_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[24];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", base, (int)(epoch_ms % 1000));
    return buf;
}

int hc_duration_parse(const char *text, int64_t *out_ms, struct hc_error *err)
{
    static const struct {
        const char *suffix;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    const char *p = text;
    int64_t total = 0;
    if (!p || !*p)
        goto bad;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            goto bad;
        errno = 0;
        char *end;
        long long n = strtoll(p, &end, 10);
        if (errno || n > 1000000000LL)
            goto bad;
        p = end;
        int64_t mult = 0;
        if (!*p && p != text && total == 0) {
            mult = 1000; /* a bare number means seconds */
        } else {
            for (size_t i = 0; i < HC_ARRAY_LEN(units); i++) {
                size_t sl = strlen(units[i].suffix);
                if (strncmp(p, units[i].suffix, sl) == 0 && !isalpha((unsigned char)p[sl])) {
                    mult = units[i].ms;
                    p += sl;
                    break;
                }
            }
        }
        /* Many large parts ("1000000000d1000000000d...") must not overflow the sum. */
        if (!mult || n * mult > INT64_MAX - total)
            goto bad;
        total += n * mult;
    }
    *out_ms = total;
    return 0;
bad:
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid duration '%s'", text ? text : "");
    return hc_error_hint(err, "use a number with a unit: 500ms, 30s, 5m, 2h, 1d");
}

int hc_random_hex(char *buf, size_t nbytes)
{
    unsigned char raw[64];
    if (nbytes > sizeof(raw) || RAND_bytes(raw, (int)nbytes) != 1)
        return -1;
    buf[0] = '\0'; /* nbytes == 0 still yields a string */
    for (size_t i = 0; i < nbytes; i++)
        snprintf(buf + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

void hc_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int hc_ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return 0;
    return CRYPTO_memcmp(a, b, la) == 0;
}

int hc_file_read(const char *path, char **out, size_t *len, struct hc_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return hc_error_set(err, HC_E(INTERNAL), "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return hc_error_set(err, HC_E(IO), "cannot read '%s'", path);
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

int hc_file_tmp_open(const char *path, int mode, char *tmp, size_t len, struct hc_error *err)
{
    int n = snprintf(tmp, len, "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= len)
        return hc_error_set(err, HC_E(IO), "cannot create a file next to '%s': path too long",
                            path);
    /* O_CREAT | O_EXCL with a random name: never an existing file, FIFO or symbolic link that
     * someone placed there, and the file starts as 0600 (narrowed further by the umask). */
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot create a file next to '%s': %s", path,
                            strerror(errno));
    /* The exact mode, set on the descriptor before a byte is written: a secret (0600) is never
     * readable by anyone else at any moment; a public file (0644) widens here. */
    if (fchmod(fd, (mode_t)mode & 07777) < 0) {
        int e = errno;
        hc_file_tmp_abort(fd, tmp);
        return hc_error_set(err, HC_E(IO), "cannot set the mode of '%s': %s", tmp, strerror(e));
    }
    return fd;
}

void hc_file_tmp_abort(int fd, const char *tmp)
{
    if (fd >= 0)
        close(fd);
    if (tmp && tmp[0])
        unlink(tmp);
}

int hc_dir_sync(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* fsync of the directory that holds path, so that a rename survives a crash. */
static int sync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return hc_dir_sync(dir);
}

int hc_file_tmp_commit(int fd, const char *tmp, const char *path, struct hc_error *err)
{
    if (fsync(fd) < 0) {
        int e = errno;
        hc_file_tmp_abort(fd, tmp);
        return hc_error_set(err, HC_E(IO), "cannot write '%s': %s", tmp, strerror(e));
    }
    if (close(fd) < 0) {
        int e = errno;
        unlink(tmp);
        return hc_error_set(err, HC_E(IO), "cannot write '%s': %s", tmp, strerror(e));
    }
    /* rename() replaces whatever is at path, a symbolic link included, without following it. */
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return hc_error_set(err, HC_E(IO), "cannot rename to '%s': %s", path, strerror(e));
    }
    /* EINVAL: a file system that cannot sync a directory (the rename stands all the same). */
    if (sync_parent(path) < 0 && errno != EINVAL)
        return hc_error_set(err, HC_E(IO), "cannot sync the directory of '%s': %s", path,
                            strerror(errno));
    return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int hc_file_cap(const char *path, long long max, struct hc_error *err)
{
    struct stat st;
    char old[1100], tmp[1200], buf[65536];
    if (stat(path, &st) < 0 || st.st_size <= max)
        return 0;
    snprintf(old, sizeof(old), "%s.1", path);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return hc_error_set(err, HC_E(IO), "cannot rotate '%s': %s", path, strerror(errno));
    int out = hc_file_tmp_open(old, (int)(st.st_mode & 0777), tmp, sizeof(tmp), err);
    if (out < 0) {
        close(in);
        return hc_error_prefix(err, "cannot rotate '%s'", path);
    }
    ssize_t n = 0;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write_all(out, buf, (size_t)n) < 0) {
            n = -1;
            break;
        }
    int e = errno;
    close(in);
    if (n != 0) {
        hc_file_tmp_abort(out, tmp);
        return hc_error_set(err, HC_E(IO), "cannot rotate '%s': %s", path, strerror(e));
    }
    if (hc_file_tmp_commit(out, tmp, old, err) < 0)
        return hc_error_prefix(err, "cannot rotate '%s'", path);
    if (truncate(path, 0) < 0)
        return hc_error_set(err, HC_E(IO), "cannot rotate '%s': %s", path, strerror(errno));
    return 1;
}

int hc_file_write_atomic(const char *path, const void *data, size_t len, int mode,
                         struct hc_error *err)
{
    char tmp[4096];
    int fd = hc_file_tmp_open(path, mode, tmp, sizeof(tmp), err);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) < 0) {
        int e = errno;
        hc_file_tmp_abort(fd, tmp);
        return hc_error_set(err, HC_E(IO), "cannot write '%s': %s", tmp, strerror(e));
    }
    return hc_file_tmp_commit(fd, tmp, path, err);
}

size_t hc_utf8_seq(const unsigned char *s, uint32_t *cp)
{
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (n == 0 || s[0] > 0xf4)
        return 0;
    uint32_t v = s[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* the NUL ends a short sequence here too */
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

char *hc_text_clean(char *dst, size_t len, const char *src)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t used = 0;
    if (!src)
        return NULL;
    while (*s) {
        uint32_t cp = 0;
        size_t n = hc_utf8_seq(s, &cp);
        int bad = n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
        size_t out = bad ? 1 : n;
        if (used + out >= len)
            break; /* whole characters only */
        if (bad)
            dst[used] = '?';
        else
            memmove(dst + used, s, n); /* dst may be src: cleaning in place */
        used += out;
        s += n ? n : 1;
    }
    dst[used] = '\0';
    return dst;
}

int hc_mkdir_p(const char *path, int mode, struct hc_error *err)
{
    char buf[4096];
    if (!path[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "cannot create directory ''");
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
                return hc_error_set(err, HC_E(IO), "cannot create directory '%s': %s", buf,
                                    strerror(errno));
            *p = saved;
            if (!saved)
                break;
        }
    }
    return 0;
}

char *hc_path_join(const char *dir, const char *name)
{
    char *out = NULL;
    if (asprintf(&out, "%s/%s", dir, name) < 0)
        return NULL;
    return out;
}

int hc_split_host_port(const char *text, char *host, size_t host_len, int *port,
                       struct hc_error *err)
{
    const char *colon;
    const char *hstart = text;
    size_t hlen;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            goto bad;
        hstart = text + 1;
        hlen = (size_t)(close - hstart);
        colon = close + 1;
    } else {
        /* One colon only: an unbracketed IPv6 address ("fe80::1") has no unambiguous port. */
        colon = strchr(text, ':');
        if (!colon || strchr(colon + 1, ':'))
            goto bad;
        hlen = (size_t)(colon - text);
    }
    if (hlen == 0 || hlen >= host_len)
        goto bad;
    /* Digits only: strtol alone would also take " 80", "+80" and "-0". */
    size_t ndigits = strspn(colon + 1, "0123456789");
    if (ndigits == 0 || ndigits > 5 || colon[1 + ndigits] != '\0')
        goto bad;
    long p = strtol(colon + 1, NULL, 10);
    if (p > 65535)
        goto bad;
    /* What looks like an IPv4 address must be one ("300.1.1.1" is no host name either); a
     * bracketed host must be an IPv6 address. */
    char literal[64];
    unsigned char addr[16];
    int dotted = strspn(hstart, "0123456789.") >= hlen;
    if (dotted || text[0] == '[') {
        if (hlen >= sizeof(literal))
            goto bad;
        memcpy(literal, hstart, hlen);
        literal[hlen] = '\0';
        literal[strcspn(literal, "%")] = '\0'; /* an IPv6 zone: fe80::1%eth0 */
        if (inet_pton(dotted ? AF_INET : AF_INET6, literal, addr) != 1)
            goto bad;
    }
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
bad:
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid address '%s'", text);
    return hc_error_hint(err, "use HOST:PORT, e.g. 127.0.0.1:7443");
}

int hc_node_name_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len < 1 || len > 63)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

int hc_failure_domain_valid(const char *name)
{
    return hc_node_name_valid(name);
}

long hc_nofile_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
}

size_t hc_nofile_share(unsigned divisor, size_t floor)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || divisor == 0)
        return floor;
    if (rl.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX / 2;
    size_t share = (size_t)(rl.rlim_cur / divisor);
    return share > floor ? share : floor;
}
