/*
 * Fuzz target: the bundle reader (common/bundle.c) — libarchive's tar and gzip readers on a
 * memory buffer, the entry checks (types, paths, links that must stay inside the bundle, sizes,
 * counts), the manifest found in the archive — and, for a bundle that opens, its extraction
 * into a fresh directory (libarchive's secure extraction flags plus the bundle's own checks).
 *
 * The signature comes first in hc_bundle_open, and the fuzzer cannot forge one, so this target
 * signs each input with a key it generated and trusts (what a careless or compromised signer
 * could publish): every input reaches the archive reader. An input that does not start with
 * the gzip magic is a plain tar and is gzip-compressed here first, so that the fuzzer mutates
 * tar headers rather than deflate streams; one that does is taken as it is (the gzip layer is
 * fuzzed too). The seeds (corpus/bundle_tar/) are small plain tars.
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bundle.h"
#include "common/util.h"
#include "tests/fuzz/fuzz_util.h"

static struct {
    EVP_PKEY *key;
    struct hc_bundle_keys *keys;
    char *dir;
    unsigned long n;
} g;

static void cleanup(void)
{
    EVP_PKEY_free(g.key);
    hc_bundle_keys_free(g.keys);
    fuzz_rmtree(g.dir);
    free(g.dir);
}

static void setup(void)
{
    struct hc_error err = {0};
    fuzz_quiet_logs();
    g.dir = fuzz_mkdtemp("hcfuzz-bundle");
    char *prefix = hc_path_join(g.dir, "fuzz");
    char *pub = NULL;
    if (asprintf(&pub, "%s.pub", prefix) < 0 || hc_bundle_keygen(prefix, NULL, &err) < 0)
        fuzz_die("keygen: %s", err.message);
    char *key_path = NULL;
    if (asprintf(&key_path, "%s.key", prefix) < 0)
        fuzz_die("out of memory");
    FILE *f = fopen(key_path, "r");
    g.key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    g.keys = hc_bundle_keys_new();
    if (!g.key || !g.keys || hc_bundle_keys_add_file(g.keys, pub, &err) < 0)
        fuzz_die("trusted key: %s", err.message);
    free(prefix);
    free(pub);
    free(key_path);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.keys)
        setup();
    uint8_t *gz = NULL;
    size_t len = size;
    const uint8_t *bundle = data;
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b)) {
        if (fuzz_gzip(data, size, &gz, &len) < 0)
            return 0;
        bundle = gz;
    }
    struct hc_error err = {0};
    char line[HC_BUNDLE_SIG_MAX];
    if (hc_bundle_sign(g.key, bundle, len, line, &err) < 0)
        fuzz_die("sign: %s", err.message);
    struct hc_bundle *b = hc_bundle_open(bundle, len, line, g.keys, &err);
    if (getenv("HC_FUZZ_VERBOSE")) /* what the seeds get */
        fprintf(stderr, "%s\n", b ? "opened" : err.message);
    if (b) {
        char dest[64];
        snprintf(dest, sizeof(dest), "x%lu", g.n++);
        char *path = hc_path_join(g.dir, dest);
        hc_bundle_extract(b, path, &err);
        hc_bundle_rmtree(path);
        free(path);
        hc_bundle_free(b);
    }
    free(gz);
    return 0;
}
