/* Helpers shared by the fuzz targets: fatal set-up errors, a private temp directory. */
#ifndef HC_TESTS_FUZZ_UTIL_H
#define HC_TESTS_FUZZ_UTIL_H

#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/log.h"

static void fuzz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A set-up failure, or a broken invariant the target checks: abort, which libFuzzer reports as
 * a crash with the input that caused it. */
static void fuzz_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

/* Handlers log every refusal; at millions of inputs that is all the output would be. Past
 * HC_LOG_ERROR nothing is written (the messages are still formatted by the callers' checks). */
static inline void fuzz_quiet_logs(void)
{
    hc_log_set_level((enum hc_log_level)(HC_LOG_ERROR + 1));
}

/* $TMPDIR/NAME.XXXXXX (default /tmp); the caller frees the path. */
static inline char *fuzz_mkdtemp(const char *name)
{
    const char *tmp = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name) < 0 || !mkdtemp(path))
        fuzz_die("cannot create a temp directory for %s", name);
    return path;
}

static inline int fuzz_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static inline void fuzz_rmtree(const char *path)
{
    if (path)
        nftw(path, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* gzip of data (a malloc'd buffer in *out), or -1: the archive targets compress a plain tar
 * input so that the mutations hit tar headers rather than deflate streams. */
static inline int fuzz_gzip(const uint8_t *data, size_t size, uint8_t **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    size_t cap = deflateBound(&z, size) + 64;
    *out = malloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)size;
    z.next_out = *out;
    z.avail_out = (uInt)cap;
    int rc = *out ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(*out);
        return -1;
    }
    return 0;
}

#endif
