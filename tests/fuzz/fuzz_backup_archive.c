/*
 * Fuzz target: the backup archive reader that `hcctld restore` runs on whatever file it is
 * given (controller/backup.c hc_backup_unpack): libarchive's gzip and tar readers, the manifest
 * (the first entry: size bounds, JSON, format, schema, cluster id, the entries and their paths,
 * types, modes, sizes and digests), every later entry checked against it (paths, types, links,
 * repeats, sizes, SHA-256) and written into a fresh directory, then the database's own schema.
 *
 * An input that does not start with the gzip magic is a plain tar and is gzip-compressed here
 * first, so that the fuzzer mutates tar headers and the manifest rather than deflate streams;
 * one that does is taken as it is. The seeds (corpus/backup_archive/) are small plain tars: a
 * whole archive whose digests match, a manifest alone, and entries that must be refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "controller/backup.h"
#include "tests/fuzz/fuzz_util.h"

static struct {
    char *dir;
    unsigned long n;
} g;

static void cleanup(void)
{
    fuzz_rmtree(g.dir);
    free(g.dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.dir) {
        fuzz_quiet_logs();
        g.dir = fuzz_mkdtemp("hcfuzz-backup");
        atexit(cleanup);
    }
    uint8_t *gz = NULL;
    size_t len = size;
    const uint8_t *archive = data;
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b)) {
        if (fuzz_gzip(data, size, &gz, &len) < 0)
            return 0;
        archive = gz;
    }
    char name[64];
    snprintf(name, sizeof(name), "in%lu.tar.gz", g.n);
    char *input = hc_path_join(g.dir, name);
    snprintf(name, sizeof(name), "x%lu", g.n++);
    char *dest = hc_path_join(g.dir, name);
    struct hc_error err = {0};
    if (hc_file_write_atomic(input, archive, len, 0600, &err) < 0 ||
        hc_mkdir_p(dest, 0700, &err) < 0)
        fuzz_die("%s", err.message);
    struct hc_backup_info info;
    int rc = hc_backup_unpack(input, dest, &info, &err);
    if (getenv("HC_FUZZ_VERBOSE")) /* what the seeds get */
        fprintf(stderr, "%s\n", rc == 0 ? "unpacked" : err.message);
    unlink(input);
    fuzz_rmtree(dest);
    free(input);
    free(dest);
    free(gz);
    return 0;
}
