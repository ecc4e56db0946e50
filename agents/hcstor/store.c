/*
 * hcstor's blocks on disk. One file per block, DATA/blocks/KEY: a fixed 26-byte header
 * "HCB1 <20-digit version>\n", then the bytes. A write: a temporary file, renamed over the
 * block. With fsync=always (the default) it is answered only once durable: the file is fsynced
 * before the rename and the directory after it. With fsync=batch it is answered after write(2)
 * and rename(2); the file's descriptor is kept, and every fsync_interval_ms (or as soon as
 * HCSTOR_DIRTY_MAX writes wait) the batch is made durable: each file fsynced, then the
 * directory once (docs/hcstor.md says what a power loss can take). The index (key -> version)
 * is rebuilt from the headers at start-up and kept in memory.
 *
 * A copy this node no longer owns (the members changed) is deleted only when cluster.c has made
 * sure every owner holds it: the file is unlinked and the directory fsynced, in both modes (a
 * drop is rare, and a dropped copy coming back after a power loss would be served as current).
 *
 * Versions come from a hybrid clock: wall-clock microseconds, but always above the last version
 * handed out and above the block's current version, so a block's versions only grow even when
 * the clock steps back. Only an in-sync replica coordinates a write (main.c), so "above the
 * current version" is above every acknowledged write of that block.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcstor/hcstor.h"
#include "common/util.h"

#define HDR_LEN 26

int hcstor_key_valid(const char *key)
{
    size_t n = strlen(key);
    return n > 0 && n <= HCSTOR_KEY_MAX && key[0] != '.' &&
           strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int sync_fd(struct hcstor *s, int fd)
{
    if (fsync(fd) < 0)
        return -1;
    s->syncs++;
    return 0;
}

void hcstor_store_flush(struct hcstor *s)
{
    int dfd = -1, failed = 0;
    if (s->ndirty == 0)
        return;
    for (size_t i = 0; i < s->ndirty; i++) {
        if (sync_fd(s, s->dirty[i]) < 0)
            failed = errno;
        close(s->dirty[i]);
    }
    if ((dfd = open(s->blocks, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || sync_fd(s, dfd) < 0)
        failed = errno;
    if (dfd >= 0)
        close(dfd);
    /* Already acknowledged: nothing to answer with. The error says the copies here may be lost;
     * the other replicas hold them, and a restart resyncs them from there. */
    if (failed)
        hcstor_log(s, HCSTOR_ERROR, "fsync of a batch of %zu writes failed: %s", s->ndirty,
                   strerror(failed));
    else
        hcstor_log(s, HCSTOR_DEBUG, "fsync batch: %zu writes durable", s->ndirty);
    s->ndirty = 0;
    s->flushes++;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hcstor_store_flush(arg);
}

static int read_header(int fd, int64_t *version)
{
    char hdr[HDR_LEN + 1];
    ssize_t n = pread(fd, hdr, HDR_LEN, 0);
    if (n != HDR_LEN || memcmp(hdr, "HCB1 ", 5) != 0 || hdr[HDR_LEN - 1] != '\n')
        return -1;
    hdr[HDR_LEN - 1] = '\0';
    char *end;
    long long v = strtoll(hdr + 5, &end, 10);
    if (*end || v <= 0)
        return -1;
    *version = v;
    return 0;
}

/* Loads the index; leftovers of interrupted writes are removed, unreadable files reported. */
int hcstor_store_open(struct hcstor *s, char *why, size_t len)
{
    struct hc_error err = {0};
    if (!(s->flush_timer = evtimer_new(s->base, on_flush, s))) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    if (hc_mkdir_p(s->blocks, 0755, &err) < 0) {
        snprintf(why, len, "%s", err.message);
        return -1;
    }
    DIR *d = opendir(s->blocks);
    if (!d) {
        snprintf(why, len, "cannot open %s: %s", s->blocks, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') {
            if (!strncmp(e->d_name, ".tmp-", 5))
                unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
        int64_t v = 0;
        if (fd < 0 || read_header(fd, &v) < 0 || !hcstor_key_valid(e->d_name))
            hcstor_log(s, HCSTOR_WARN, "ignoring %s/%s: not a block file", s->blocks, e->d_name);
        else
            json_object_set_new(s->index, e->d_name, json_integer(v));
        if (fd >= 0)
            close(fd);
    }
    closedir(d);
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Batch mode: fd (a written, renamed block) waits for the next flush, due at most
 * fsync_interval_ms from now; made durable at once when the batch is full. */
static void batch_add(struct hcstor *s, int fd)
{
    struct timeval tv = {s->set.fsync_interval_ms / 1000, (s->set.fsync_interval_ms % 1000) * 1000};
    s->dirty[s->ndirty++] = fd;
    if (s->ndirty == HCSTOR_DIRTY_MAX || (s->ndirty == 1 && evtimer_add(s->flush_timer, &tv) < 0))
        hcstor_store_flush(s);
}

int hcstor_store_put(struct hcstor *s, const char *key, int64_t version, const void *data,
                     size_t len, char *why, size_t why_len)
{
    char tmp[1400], final[1400], hdr[HDR_LEN + 1];
    int batch = s->set.fsync == HCSTOR_FSYNC_BATCH;
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", s->blocks, key);
    snprintf(final, sizeof(final), "%s/%s", s->blocks, key);
    snprintf(hdr, sizeof(hdr), "HCB1 %020" PRId64 "\n", version);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), dfd = -1, rc = -1;
    if (fd < 0 || write_all(fd, hdr, HDR_LEN) < 0 || write_all(fd, data, len) < 0 ||
        (!batch && sync_fd(s, fd) < 0)) {
        snprintf(why, why_len, "cannot write block '%s': %s", key, strerror(errno));
        goto cleanup;
    }
    if (rename(tmp, final) < 0 ||
        (!batch && ((dfd = open(s->blocks, O_RDONLY | O_DIRECTORY)) < 0 || sync_fd(s, dfd) < 0))) {
        snprintf(why, why_len, "cannot commit block '%s': %s", key, strerror(errno));
        goto cleanup;
    }
    json_object_set_new(s->index, key, json_integer(version));
    rc = 0;
    if (batch) {
        batch_add(s, fd);
        fd = -1; /* closed by the flush */
    }
cleanup:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (rc < 0)
        unlink(tmp);
    return rc;
}

int hcstor_store_open_block(const struct hcstor *s, const char *key, off_t *offset, size_t *len,
                            int64_t *version)
{
    char path[1400];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", s->blocks, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || st.st_size < HDR_LEN || read_header(fd, version) < 0) {
        close(fd);
        errno = EIO;
        return -1;
    }
    *offset = HDR_LEN;
    *len = (size_t)st.st_size - HDR_LEN;
    return fd;
}

int64_t hcstor_store_version(const struct hcstor *s, const char *key)
{
    return json_integer_value(json_object_get(s->index, key));
}

int hcstor_store_drop(struct hcstor *s, const char *key, char *why, size_t why_len)
{
    char path[1400];
    int dfd = -1, rc = -1;
    snprintf(path, sizeof(path), "%s/%s", s->blocks, key);
    if (unlink(path) < 0 && errno != ENOENT) {
        snprintf(why, why_len, "cannot delete block '%s': %s", key, strerror(errno));
        return -1;
    }
    json_object_del(s->index, key);
    if ((dfd = open(s->blocks, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || sync_fd(s, dfd) < 0)
        snprintf(why, why_len, "block '%s' deleted, but not durably: %s", key, strerror(errno));
    else
        rc = 0;
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int64_t hcstor_next_version(struct hcstor *s, const char *key)
{
    int64_t v = hc_now_ms() * 1000;
    if (v <= s->hlc)
        v = s->hlc + 1;
    if (v <= hcstor_store_version(s, key))
        v = hcstor_store_version(s, key) + 1;
    s->hlc = v;
    return v;
}
