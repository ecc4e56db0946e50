/*
 * Software bundles (docs/bundles.md): a gzip-compressed tar archive holding manifest.json and the
 * service's files, plus a detached Ed25519 signature over the SHA-256 of the .tar.gz file.
 *
 * The signature file (FILE.tar.gz.sig) is one line of text:
 *   hcsig1 <key id: 16 hex> <sha256 of the .tar.gz: 64 hex> <Ed25519 signature: base64>
 * The signed message is the 32-byte SHA-256 digest of the .tar.gz file. The key id (the first 16
 * hex characters of the SHA-256 of the public key's DER) and the sha256 are not signed: they
 * only let a refusal say precisely what is wrong (a corrupt file, an untrusted key, a bad
 * signature).
 *
 * Opening a bundle checks, in this order and before libarchive reads a byte of it: size, the
 * checksum against the signature line, that the key is trusted, and the signature (OpenSSL
 * EVP_DigestVerify). Then the archive (tar + gzip only) is read in full: every entry must be a
 * regular file, a directory, or a link staying inside the bundle (followed through the bundle's
 * other links, as the kernel will), without absolute paths or "..", none written through a link,
 * and manifest.json must pass the schema. Only then is the bundle returned, and only such
 * a bundle can be extracted (with libarchive's ARCHIVE_EXTRACT_SECURE_* flags on top).
 *
 * Ownership: functions returning struct pointers give the caller an object to free with the
 * matching _free (which accept NULL). Errors fill struct hc_error (status 400 for a bad bundle).
 */
#ifndef HC_COMMON_BUNDLE_H
#define HC_COMMON_BUNDLE_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define HC_BUNDLE_MAX_BYTES (60u * 1024 * 1024)        /* a .tar.gz, compressed */
#define HC_BUNDLE_MAX_UNPACKED (1024ull * 1024 * 1024) /* sum of the entries' sizes */
#define HC_BUNDLE_MAX_ENTRIES 10000
#define HC_BUNDLE_MANIFEST "manifest.json"
#define HC_BUNDLE_MANIFEST_MAX (256 * 1024)
#define HC_BUNDLE_SIG_PREFIX "hcsig1"
#define HC_BUNDLE_SIG_MAX 256 /* one signature line, NUL included */
#define HC_BUNDLE_KEY_ID_LEN 16

/* Error codes of refused bundles: HC_BUNDLE_ERR_* in common/error_codes.h. */

/* ---------------------------------------------------------------- trusted keys */

struct hc_bundle_keys;
struct hc_bundle_keys *hc_bundle_keys_new(void);
void hc_bundle_keys_free(struct hc_bundle_keys *keys);
/* Adds an Ed25519 public key in PEM ("PUBLIC KEY"); name identifies it in messages (e.g. the
 * file's base name). Other key types are refused. A key already present is not added twice.
 * Returns 0 or -1 with err. */
int hc_bundle_keys_add_pem(struct hc_bundle_keys *keys, const char *name, const char *pem,
                           struct hc_error *err);
/* Adds the key in a PEM file, named after the file (without directory and ".pem"/".pub"). */
int hc_bundle_keys_add_file(struct hc_bundle_keys *keys, const char *path, struct hc_error *err);
/* Adds every DIR/ *.pem in name order. A missing directory adds nothing and is not an error. */
int hc_bundle_keys_load_dir(struct hc_bundle_keys *keys, const char *dir, struct hc_error *err);
size_t hc_bundle_keys_count(const struct hc_bundle_keys *keys);
/* [{"name","key_id","pem"}...] (new reference), for handing the keys to agents. */
json_t *hc_bundle_keys_to_json(const struct hc_bundle_keys *keys);
/* Key id of an Ed25519 public key: first 16 hex chars of SHA-256(DER SubjectPublicKeyInfo). */
int hc_bundle_key_id(EVP_PKEY *pub, char out[HC_BUNDLE_KEY_ID_LEN + 1]);

/* ---------------------------------------------------------------- signatures */

/* Parsed signature line. */
struct hc_bundle_sig {
    char key_id[HC_BUNDLE_KEY_ID_LEN + 1];
    char sha256[65];
    unsigned char sig[64];
};
/* Parses a signature line (surrounding whitespace allowed). 0 or -1 with err (400
 * bundle_signature_invalid naming what is malformed). */
int hc_bundle_sig_parse(const char *text, struct hc_bundle_sig *out, struct hc_error *err);
/* Signs data's SHA-256 with an Ed25519 private key; line (HC_BUNDLE_SIG_MAX bytes) receives the
 * signature line without a newline. 0 or -1 with err. */
int hc_bundle_sign(EVP_PKEY *key, const void *data, size_t len, char line[HC_BUNDLE_SIG_MAX],
                   struct hc_error *err);
/* Checks data against the signature line and the trusted keys (the checks of hc_bundle_open
 * before the archive is read). signer (may be NULL, 128 bytes) receives the key's name.
 * 0 or -1 with err. */
int hc_bundle_verify(const struct hc_bundle_keys *keys, const void *data, size_t len,
                     const char *sig_line, char *signer, size_t signer_len, struct hc_error *err);

/* ---------------------------------------------------------------- bundles */

struct hc_bundle_info {
    char name[64];
    char version[65];
    char sha256[65];
    char signed_by[128]; /* name of the trusted key that verified it */
    size_t size;         /* bytes of the .tar.gz */
    size_t entries;
    uint64_t unpacked_bytes;
};

struct hc_bundle;
/* Verifies a bundle held in memory (copied) against the signature line and the trusted keys,
 * reads the whole archive and validates the manifest. NULL with err. */
struct hc_bundle *hc_bundle_open(const void *data, size_t len, const char *sig_line,
                                 const struct hc_bundle_keys *keys, struct hc_error *err);
/* Same for files; sig_path NULL means path + ".sig". */
struct hc_bundle *hc_bundle_open_file(const char *path, const char *sig_path,
                                      const struct hc_bundle_keys *keys, struct hc_error *err);
void hc_bundle_free(struct hc_bundle *b);
const struct hc_bundle_info *hc_bundle_info(const struct hc_bundle *b);
/* The validated manifest (owned by b). */
const json_t *hc_bundle_manifest(const struct hc_bundle *b);
/* The signature line it was verified with (owned by b). */
const char *hc_bundle_signature(const struct hc_bundle *b);
/* The .tar.gz bytes (owned by b). */
const void *hc_bundle_data(const struct hc_bundle *b, size_t *len);
/* Extracts into dest, which must not exist yet (its parent must); on failure dest is removed
 * again. Directories 0755, files keep their mode without setuid/setgid/sticky or group/other
 * write. 0 or -1 with err. */
int hc_bundle_extract(const struct hc_bundle *b, const char *dest, struct hc_error *err);
/* rm -rf without following symlinks; a missing path is fine. 0 or -1 (errno set). */
int hc_bundle_rmtree(const char *path);

/* ---------------------------------------------------------------- manifest (bundle_manifest.c) */

/* Validates a manifest against the schema of docs/bundles.md. Errors (400
 * bundle_manifest_invalid) name the field: "manifest.json: 'health.timeout_ms' must be ...". */
int hc_bundle_manifest_check(const json_t *manifest, struct hc_error *err);
/* A bundle's kind (manifest "kind"): HC_BUNDLE_KIND_SERVICE (the default: a storage-node
 * service the agent supervises) or HC_BUNDLE_KIND_AGENT (the hcagent program itself,
 * docs/agent-upgrade.md). Each is refused where the other is expected (400
 * bundle_kind_mismatch). Returns a static string. */
#define HC_BUNDLE_KIND_SERVICE "service"
#define HC_BUNDLE_KIND_AGENT "agent"
const char *hc_bundle_kind(const json_t *manifest);
/* Versions: 1-64 characters of [0-9A-Za-z.+_-], starting with a digit, without "..". They are
 * directory names on the nodes and path segments in the API. Returns 1 when valid. */
int hc_bundle_version_valid(const char *version);
/* Orders versions: dot/dash-separated parts, numeric parts numerically ("1.10" > "1.9"). */
int hc_bundle_version_cmp(const char *a, const char *b);
/* A path inside a bundle: relative, non-empty components, none "." or "..". Returns 1 when
 * valid. */
int hc_bundle_path_valid(const char *path);

/* ---------------------------------------------------------------- building (bundle_build.c) */

/* Writes a new Ed25519 key pair: PREFIX.key (PKCS#8 PEM, 0600, refused if it exists) and
 * PREFIX.pub (PEM). key_id (may be NULL) receives the key id. 0 or -1 with err. */
int hc_bundle_keygen(const char *prefix, char key_id[HC_BUNDLE_KEY_ID_LEN + 1],
                     struct hc_error *err);
/* Loads an Ed25519 private key (PEM). NULL with err. */
EVP_PKEY *hc_bundle_private_key_load(const char *path, struct hc_error *err);
/* Builds out (a .tar.gz: manifest.json first, then the files of dir) and out + ".sig", signed
 * with the private key at key_path. The manifest is validated first, and the entrypoint must be
 * an executable regular file in dir. The result is opened and verified before it is renamed into
 * place. info (may be NULL) receives its description. 0 or -1 with err. */
int hc_bundle_build(const char *manifest_path, const char *dir, const char *key_path,
                    const char *out, struct hc_bundle_info *info, struct hc_error *err);

#endif
