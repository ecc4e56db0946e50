/*
 * Software bundles: trusted keys, signature lines, opening (verify, then read the whole archive
 * with libarchive and validate it) and safe extraction. See bundle.h for the format and the
 * order of the checks, docs/bundles.md for the reference.
 */
#include "common/bundle.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define KEYS_MAX 64

/* ---------------------------------------------------------------- trusted keys */

struct bundle_key {
    char name[128];
    char id[HC_BUNDLE_KEY_ID_LEN + 1];
    EVP_PKEY *pub;
    char *pem;
};

struct hc_bundle_keys {
    size_t count;
    struct bundle_key keys[KEYS_MAX];
};

struct hc_bundle_keys *hc_bundle_keys_new(void)
{
    return calloc(1, sizeof(struct hc_bundle_keys));
}

void hc_bundle_keys_free(struct hc_bundle_keys *keys)
{
    if (!keys)
        return;
    for (size_t i = 0; i < keys->count; i++) {
        EVP_PKEY_free(keys->keys[i].pub);
        free(keys->keys[i].pem);
    }
    free(keys);
}

int hc_bundle_key_id(EVP_PKEY *pub, char out[HC_BUNDLE_KEY_ID_LEN + 1])
{
    unsigned char *der = NULL;
    int len = i2d_PUBKEY(pub, &der);
    if (len <= 0)
        return -1;
    char hex[65];
    hc_sha256_hex(der, (size_t)len, hex);
    OPENSSL_free(der);
    snprintf(out, HC_BUNDLE_KEY_ID_LEN + 1, "%.*s", HC_BUNDLE_KEY_ID_LEN, hex);
    return 0;
}

int hc_bundle_keys_add_pem(struct hc_bundle_keys *keys, const char *name, const char *pem,
                           struct hc_error *err)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *pub = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    char id[HC_BUNDLE_KEY_ID_LEN + 1];
    int rc = -1;
    BIO_free(bio);
    ERR_clear_error();
    if (!pub) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "key '%s' is not a PEM public key", name);
        goto cleanup;
    }
    if (EVP_PKEY_id(pub) != EVP_PKEY_ED25519) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "key '%s' is not an Ed25519 key", name);
        hc_error_hint(err, "create signing keys with 'hcctl software keygen'");
        goto cleanup;
    }
    if (hc_bundle_key_id(pub, id) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot encode key '%s'", name);
        goto cleanup;
    }
    for (size_t i = 0; i < keys->count; i++)
        if (strcmp(keys->keys[i].id, id) == 0) {
            rc = 0; /* the same key under another name: one entry is enough */
            goto cleanup;
        }
    if (keys->count == KEYS_MAX) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "too many trusted keys (max %d)", KEYS_MAX);
        goto cleanup;
    }
    struct bundle_key *k = &keys->keys[keys->count];
    if (!(k->pem = strdup(pem))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    snprintf(k->name, sizeof(k->name), "%s", name);
    snprintf(k->id, sizeof(k->id), "%s", id);
    k->pub = pub;
    pub = NULL;
    keys->count++;
    rc = 0;
cleanup:
    EVP_PKEY_free(pub);
    return rc;
}

int hc_bundle_keys_add_file(struct hc_bundle_keys *keys, const char *path, struct hc_error *err)
{
    char *text = NULL, name[128];
    size_t len;
    if (hc_file_read(path, &text, &len, err) < 0)
        return -1;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    if (n > 4 && (strcmp(base + n - 4, ".pem") == 0 || strcmp(base + n - 4, ".pub") == 0))
        n -= 4;
    snprintf(name, sizeof(name), "%.*s", (int)n, base);
    int rc = hc_bundle_keys_add_pem(keys, name, text, err);
    free(text);
    if (rc < 0)
        hc_error_prefix(err, "cannot use '%s'", path);
    return rc;
}

static int pem_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 4 && strcmp(d->d_name + n - 4, ".pem") == 0;
}

int hc_bundle_keys_load_dir(struct hc_bundle_keys *keys, const char *dir, struct hc_error *err)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, pem_filter, alphasort), rc = 0;
    if (n < 0)
        return errno == ENOENT
                   ? 0
                   : hc_error_set(err, HC_E(IO), "cannot read '%s': %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        char *path = hc_path_join(dir, list[i]->d_name);
        if (rc == 0 && (!path || hc_bundle_keys_add_file(keys, path, err) < 0))
            rc = -1;
        free(path);
        free(list[i]);
    }
    free(list);
    return rc;
}

size_t hc_bundle_keys_count(const struct hc_bundle_keys *keys)
{
    return keys ? keys->count : 0;
}

json_t *hc_bundle_keys_to_json(const struct hc_bundle_keys *keys)
{
    json_t *out = json_array();
    for (size_t i = 0; keys && i < keys->count; i++)
        json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "name", keys->keys[i].name,
                                             "key_id", keys->keys[i].id, "pem", keys->keys[i].pem));
    return out;
}

/* ---------------------------------------------------------------- signatures */

static int sig_invalid(struct hc_error *err, const char *what)
{
    hc_error_set(err, HC_E(BUNDLE_SIGNATURE), "signature is malformed: %s", what);
    return hc_error_hint(err, "a signature file holds one line 'hcsig1 KEYID SHA256 BASE64' "
                              "written by 'hcctl software build'");
}

static int is_hex(const char *s, size_t n)
{
    return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

int hc_bundle_sig_parse(const char *text, struct hc_bundle_sig *out, struct hc_error *err)
{
    char prefix[16], id[32], sha[80], b64[128], extra[2];
    unsigned char raw[96];
    if (!text)
        return sig_invalid(err, "no signature given");
    if (sscanf(text, " %15s %31s %79s %127s %1s", prefix, id, sha, b64, extra) != 4)
        return sig_invalid(err, "expected four fields");
    if (strcmp(prefix, HC_BUNDLE_SIG_PREFIX) != 0)
        return sig_invalid(err, "unknown format (expected 'hcsig1')");
    if (!is_hex(id, HC_BUNDLE_KEY_ID_LEN))
        return sig_invalid(err, "key id is not 16 lowercase hex characters");
    if (!is_hex(sha, 64))
        return sig_invalid(err, "sha256 is not 64 lowercase hex characters");
    /* 64 bytes are 88 base64 characters ending in "=="; EVP_DecodeBlock counts the padding. */
    if (strlen(b64) != 88 || strcmp(b64 + 86, "==") != 0 ||
        EVP_DecodeBlock(raw, (const unsigned char *)b64, 88) != 66)
        return sig_invalid(err, "signature is not 64 bytes of base64");
    snprintf(out->key_id, sizeof(out->key_id), "%s", id);
    snprintf(out->sha256, sizeof(out->sha256), "%s", sha);
    memcpy(out->sig, raw, 64);
    return 0;
}

int hc_bundle_sign(EVP_PKEY *key, const void *data, size_t len, char line[HC_BUNDLE_SIG_MAX],
                   struct hc_error *err)
{
    unsigned char digest[SHA256_DIGEST_LENGTH], sig[64], b64[100];
    size_t siglen = sizeof(sig);
    char id[HC_BUNDLE_KEY_ID_LEN + 1], hex[65];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = -1;
    SHA256(data, len, digest);
    if (!ctx || EVP_PKEY_id(key) != EVP_PKEY_ED25519 || hc_bundle_key_id(key, id) < 0 ||
        EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) != 1 ||
        EVP_DigestSign(ctx, sig, &siglen, digest, sizeof(digest)) != 1 || siglen != 64) {
        hc_error_set(err, HC_E(INTERNAL), "cannot sign: the key is not a usable Ed25519 key");
        goto cleanup;
    }
    EVP_EncodeBlock(b64, sig, 64);
    hc_sha256_hex(data, len, hex);
    snprintf(line, HC_BUNDLE_SIG_MAX, "%s %s %s %s", HC_BUNDLE_SIG_PREFIX, id, hex, (char *)b64);
    rc = 0;
cleanup:
    ERR_clear_error();
    EVP_MD_CTX_free(ctx);
    return rc;
}

static const struct bundle_key *key_by_id(const struct hc_bundle_keys *keys, const char *id)
{
    for (size_t i = 0; keys && i < keys->count; i++)
        if (strcmp(keys->keys[i].id, id) == 0)
            return &keys->keys[i];
    return NULL;
}

static int ed25519_verify(EVP_PKEY *pub, const unsigned char *sig, const unsigned char *msg,
                          size_t len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pub) == 1 &&
             EVP_DigestVerify(ctx, sig, 64, msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
}

int hc_bundle_verify(const struct hc_bundle_keys *keys, const void *data, size_t len,
                     const char *sig_line, char *signer, size_t signer_len, struct hc_error *err)
{
    struct hc_bundle_sig sig;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    char hex[65];
    if (hc_bundle_keys_count(keys) == 0) {
        hc_error_set(err, HC_E(NO_TRUSTED_KEYS),
                     "no trusted bundle signing keys are "
                     "configured");
        return hc_error_hint(err, "the signing keys are fixed when the cluster is created "
                                  "('hcctld init --trust-key FILE'): sign bundles with one of "
                                  "those");
    }
    if (hc_bundle_sig_parse(sig_line, &sig, err) < 0)
        return -1;
    SHA256(data, len, digest);
    hc_sha256_hex(data, len, hex);
    if (strcmp(hex, sig.sha256) != 0) {
        hc_error_set(err, HC_E(BUNDLE_CHECKSUM),
                     "bundle checksum mismatch: the file's sha256 is %s but it was signed as %s",
                     hex, sig.sha256);
        return hc_error_hint(err, "the file is corrupt, truncated or altered, or the signature "
                                  "belongs to another file");
    }
    const struct bundle_key *k = key_by_id(keys, sig.key_id);
    if (!k) {
        hc_error_set(err, HC_E(BUNDLE_SIGNATURE),
                     "bundle is signed by key %s, which is not trusted", sig.key_id);
        return hc_error_hint(err, "sign it with a key given to 'hcctld init --trust-key' when the "
                                  "cluster was created: only those are trusted, on the "
                                  "controller and on every node");
    }
    if (!ed25519_verify(k->pub, sig.sig, digest, sizeof(digest))) {
        hc_error_set(err, HC_E(BUNDLE_SIGNATURE),
                     "bundle signature does not verify with trusted key '%s' (%s)", k->name, k->id);
        return hc_error_hint(err, "the signature was forged or damaged: sign the bundle again");
    }
    if (signer)
        snprintf(signer, signer_len, "%s", k->name);
    return 0;
}

/* ---------------------------------------------------------------- paths */

int hc_bundle_path_valid(const char *path)
{
    if (!path || !*path || path[0] == '/' || strlen(path) >= 1024)
        return 0;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n;
        if (*p == '/')
            p++;
        if (*p == '\0' && p[-1] == '/')
            return 0;
    }
    return 1;
}

/* The entry's path without leading "./" and trailing "/" into buf; "" for the top directory.
 * Returns buf, or NULL when it does not fit or is missing. */
static const char *entry_path(struct archive_entry *e, char *buf, size_t len)
{
    const char *p = archive_entry_pathname(e);
    if (!p)
        return NULL;
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    if (strcmp(p, ".") == 0)
        p = "";
    size_t n = strlen(p);
    while (n > 0 && p[n - 1] == '/')
        n--;
    if (n >= len)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* A symlink at path pointing to target stays inside the bundle: target is relative and, taken
 * from path's directory, never climbs above the top. */
static int symlink_inside(const char *path, const char *target)
{
    if (!target || !*target || target[0] == '/')
        return 0;
    int depth = 0;
    for (const char *p = path; (p = strchr(p, '/')); p++)
        depth++;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            depth--;
        else if (n > 0 && !(n == 1 && p[0] == '.'))
            depth++;
        if (depth < 0)
            return 0;
        p += n;
        if (*p == '/')
            p++;
    }
    return 1;
}

/*
 * Where path (relative to the top) ends up once the bundle is on disk: resolved lexically as the
 * kernel would, component by component, following the bundle's own symbolic links (links:
 * path -> target) wherever one is met, the last component included. A target that goes through
 * other links is thus judged by where it really lands: with a/b -> "..", "a/b/.." is the top's
 * parent, not "a". Components the bundle does not hold are taken as plain names. Returns 0, or
 * -1 with why set: a ".." above the top, an absolute target, more than BUNDLE_LINK_HOPS links, or
 * a path longer than the buffers.
 */
#define BUNDLE_LINK_HOPS 40 /* the kernel's limit on nested symbolic links */
#define BUNDLE_RESOLVE_MAX 8192

static int resolve_inside(const json_t *links, const char *path, const char **why)
{
    char cur[BUNDLE_RESOLVE_MAX] = "", rest[BUNDLE_RESOLVE_MAX], next[BUNDLE_RESOLVE_MAX];
    int hops = 0;
    if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
        goto too_long;
    for (size_t off = 0; rest[off];) {
        size_t n = strcspn(rest + off, "/"), at = off;
        off += n;
        if (rest[off] == '/')
            off++;
        if (n == 0 || (n == 1 && rest[at] == '.'))
            continue;
        if (n == 2 && rest[at] == '.' && rest[at + 1] == '.') {
            char *slash = strrchr(cur, '/');
            if (!cur[0]) {
                *why = "symbolic link pointing outside the bundle";
                return -1;
            }
            if (slash)
                *slash = '\0';
            else
                cur[0] = '\0';
            continue;
        }
        size_t clen = strlen(cur);
        if (clen + 1 + n + 1 > sizeof(cur))
            goto too_long;
        snprintf(cur + clen, sizeof(cur) - clen, "%s%.*s", clen ? "/" : "", (int)n, rest + at);
        const char *target = json_string_value(json_object_get(links, cur));
        if (!target)
            continue;
        if (++hops > BUNDLE_LINK_HOPS) {
            *why = "too many levels of symbolic links (a loop?)";
            return -1;
        }
        if (target[0] == '/') {
            *why = "symbolic link pointing outside the bundle";
            return -1;
        }
        /* The link is replaced by its target, read from the link's directory. */
        cur[clen] = '\0';
        if (snprintf(next, sizeof(next), "%s/%s", target, rest + off) >= (int)sizeof(next))
            goto too_long;
        memcpy(rest, next, strlen(next) + 1);
        off = 0;
    }
    return 0;
too_long:
    *why = "symbolic links resolve to a path too long";
    return -1;
}

/* ---------------------------------------------------------------- opening */

struct hc_bundle {
    unsigned char *data;
    size_t len;
    char *sig_line;
    json_t *manifest;
    json_t *files; /* path -> archive mode (type and permission bits) */
    json_t *links; /* symbolic links: path -> target (while opening) */
    struct hc_bundle_info info;
};

void hc_bundle_free(struct hc_bundle *b)
{
    if (!b)
        return;
    free(b->data);
    free(b->sig_line);
    json_decref(b->manifest);
    json_decref(b->files);
    json_decref(b->links);
    free(b);
}

static struct archive *archive_reader(const struct hc_bundle *b)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    /* Only what the format allows: tar inside gzip. */
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    if (archive_read_open_memory(a, b->data, b->len) != ARCHIVE_OK) {
        archive_read_free(a);
        return NULL;
    }
    return a;
}

static int corrupt(struct hc_error *err, struct archive *a, const char *fallback)
{
    const char *why = a ? archive_error_string(a) : NULL;
    hc_error_set(err, HC_E(BUNDLE_CORRUPT), "bundle is not a valid tar.gz archive: %s",
                 why ? why : fallback);
    return hc_error_hint(err, "build bundles with 'hcctl software build'");
}

static int unsafe(struct hc_error *err, const char *path, const char *why)
{
    hc_error_set(err, HC_E(BUNDLE_UNSAFE), "bundle entry '%s' is refused: %s", path, why);
    return hc_error_hint(err, "a bundle holds only regular files, directories and links that "
                              "stay inside it, with relative paths");
}

static int read_manifest(struct hc_bundle *b, struct archive *a, struct archive_entry *e,
                         struct hc_error *err)
{
    la_int64_t size = archive_entry_size(e);
    if (size <= 0 || size > HC_BUNDLE_MANIFEST_MAX)
        return hc_error_set(err, HC_E(BUNDLE_MANIFEST), "manifest.json must hold 1 to %d bytes",
                            HC_BUNDLE_MANIFEST_MAX);
    char *text = malloc((size_t)size);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    la_ssize_t got = archive_read_data(a, text, (size_t)size);
    int rc = -1;
    if (got != size) {
        corrupt(err, got < 0 ? a : NULL, "manifest.json is truncated");
        goto cleanup;
    }
    json_error_t jerr;
    b->manifest = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(b->manifest)) {
        hc_error_set(err, HC_E(BUNDLE_MANIFEST), "manifest.json is not a JSON object%s%s",
                     b->manifest ? "" : ": ", b->manifest ? "" : jerr.text);
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(text);
    return rc;
}

/* Checks one entry's type and path and records it. */
static int scan_entry(struct hc_bundle *b, struct archive *a, struct archive_entry *e,
                      struct hc_error *err)
{
    char path[1024];
    if (!entry_path(e, path, sizeof(path)))
        return unsafe(err, "?", "path missing or too long");
    mode_t type = archive_entry_filetype(e);
    if (!path[0] && type == AE_IFDIR)
        return 0; /* the top directory itself */
    if (!hc_bundle_path_valid(path))
        return unsafe(err, path, "absolute path, '.' or '..' component");
    const char *hard = archive_entry_hardlink(e);
    if (hard) {
        while (hard[0] == '.' && hard[1] == '/')
            hard += 2;
        json_t *target = json_object_get(b->files, hard);
        if (!target || !S_ISREG((mode_t)json_integer_value(target)))
            return unsafe(err, path, "hard link to a file outside the bundle");
        type = AE_IFREG;
    } else if (type == AE_IFLNK && !symlink_inside(path, archive_entry_symlink(e))) {
        return unsafe(err, path, "symbolic link pointing outside the bundle");
    } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
        return unsafe(err, path, "not a regular file, directory or link");
    }
    json_t *seen = json_object_get(b->files, path);
    if (seen && !(type == AE_IFDIR && S_ISDIR((mode_t)json_integer_value(seen))))
        return unsafe(err, path, "the path appears twice");
    if (++b->info.entries > HC_BUNDLE_MAX_ENTRIES)
        return hc_error_set(err, HC_E(BUNDLE_TOO_LARGE), "bundle has more than %d entries",
                            HC_BUNDLE_MAX_ENTRIES);
    if (type == AE_IFREG && !hard && archive_entry_size(e) > 0)
        b->info.unpacked_bytes += (uint64_t)archive_entry_size(e);
    if (b->info.unpacked_bytes > HC_BUNDLE_MAX_UNPACKED)
        return hc_error_set(err, HC_E(BUNDLE_TOO_LARGE), "bundle unpacks to more than %llu bytes",
                            HC_BUNDLE_MAX_UNPACKED);
    json_object_set_new(b->files, path, json_integer((json_int_t)(type | archive_entry_perm(e))));
    if (type == AE_IFLNK && !hard)
        json_object_set_new(b->links, path, json_string(archive_entry_symlink(e)));
    if (strcmp(path, HC_BUNDLE_MANIFEST) == 0) {
        if (type != AE_IFREG || hard)
            return unsafe(err, path, "manifest.json must be a regular file");
        return read_manifest(b, a, e, err);
    }
    return 0;
}

/* Reads the whole archive: the gzip and tar layers must be intact to the end. */
static int scan_archive(struct hc_bundle *b, struct hc_error *err)
{
    struct archive *a = archive_reader(b);
    struct archive_entry *e;
    int r, rc = -1, first = 1;
    if (!a)
        return corrupt(err, NULL, "cannot be opened");
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if (first &&
            (archive_filter_count(a) < 2 || archive_filter_code(a, 0) != ARCHIVE_FILTER_GZIP)) {
            corrupt(err, NULL, "it is not gzip-compressed");
            goto cleanup;
        }
        first = 0;
        if (scan_entry(b, a, e, err) < 0)
            goto cleanup;
    }
    if (r != ARCHIVE_EOF) {
        corrupt(err, a, "unreadable");
        goto cleanup;
    }
    rc = 0;
cleanup:
    archive_read_free(a);
    return rc;
}

/* Once every entry is known (a link may come before what it goes through): each link must land
 * inside the bundle when followed through the bundle's other links, and no entry may be written
 * through a link (a/b -> .. then a/b/x): its place on disk would not be its path. */
static int check_links(const struct hc_bundle *b, struct hc_error *err)
{
    const char *path, *why = NULL;
    json_t *v;
    char buf[2 * 1024 + 2];
    json_object_foreach(b->files, path, v)
    {
        for (const char *p = path; (p = strchr(p, '/')); p++) {
            char prefix[1024];
            snprintf(prefix, sizeof(prefix), "%.*s", (int)(p - path), path);
            if (json_object_get(b->links, prefix)) {
                hc_error_set(err, HC_E(BUNDLE_UNSAFE),
                             "bundle entry '%s' is refused: its path goes through the link '%s'",
                             path, prefix);
                return hc_error_hint(err, "a bundle holds only regular files, directories and "
                                          "links that stay inside it, with relative paths");
            }
        }
    }
    json_object_foreach(b->links, path, v)
    {
        const char *slash = strrchr(path, '/');
        /* The target is read from the link's own directory. */
        snprintf(buf, sizeof(buf), "%.*s%s%s", slash ? (int)(slash - path) : 0, path,
                 slash ? "/" : "", json_string_value(v));
        if (resolve_inside(b->links, buf, &why) < 0)
            return unsafe(err, path, why);
    }
    return 0;
}

/* The manifest's entrypoint must be an executable regular file of the bundle. */
static int check_contents(struct hc_bundle *b, struct hc_error *err)
{
    if (!b->manifest) {
        hc_error_set(err, HC_E(BUNDLE_MANIFEST), "bundle has no manifest.json at its top");
        return hc_error_hint(err, "build bundles with 'hcctl software build --manifest FILE'");
    }
    if (hc_bundle_manifest_check(b->manifest, err) < 0)
        return -1;
    const char *entry = json_string_value(json_object_get(b->manifest, "entrypoint"));
    json_t *mode = json_object_get(b->files, entry);
    if (!mode)
        return hc_error_set(err, HC_E(BUNDLE_MANIFEST),
                            "manifest.json: entrypoint '%s' is not in the bundle", entry);
    mode_t m = (mode_t)json_integer_value(mode);
    if (!S_ISREG(m) || !(m & 0111))
        return hc_error_set(err, HC_E(BUNDLE_MANIFEST),
                            "manifest.json: entrypoint '%s' is not an executable file", entry);
    snprintf(b->info.name, sizeof(b->info.name), "%s",
             json_string_value(json_object_get(b->manifest, "name")));
    snprintf(b->info.version, sizeof(b->info.version), "%s",
             json_string_value(json_object_get(b->manifest, "version")));
    return 0;
}

struct hc_bundle *hc_bundle_open(const void *data, size_t len, const char *sig_line,
                                 const struct hc_bundle_keys *keys, struct hc_error *err)
{
    struct hc_bundle *b = NULL;
    if (len > HC_BUNDLE_MAX_BYTES) {
        hc_error_set(err, HC_E(BUNDLE_TOO_LARGE), "bundle of %zu bytes exceeds %u bytes", len,
                     HC_BUNDLE_MAX_BYTES);
        return NULL;
    }
    char signer[128];
    if (hc_bundle_verify(keys, data, len, sig_line, signer, sizeof(signer), err) < 0)
        return NULL;
    b = calloc(1, sizeof(*b));
    if (!b || !(b->data = malloc(len ? len : 1)) || !(b->sig_line = strdup(sig_line)) ||
        !(b->files = json_object()) || !(b->links = json_object())) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    memcpy(b->data, data, len);
    b->len = len;
    /* The signature line may carry a newline; keep the line alone. */
    b->sig_line[strcspn(b->sig_line, "\r\n")] = '\0';
    b->info.size = len;
    hc_sha256_hex(data, len, b->info.sha256);
    snprintf(b->info.signed_by, sizeof(b->info.signed_by), "%s", signer);
    if (scan_archive(b, err) < 0 || check_links(b, err) < 0 || check_contents(b, err) < 0)
        goto fail;
    json_decref(b->links); /* only needed for the check */
    b->links = NULL;
    return b;
fail:
    hc_bundle_free(b);
    return NULL;
}

struct hc_bundle *hc_bundle_open_file(const char *path, const char *sig_path,
                                      const struct hc_bundle_keys *keys, struct hc_error *err)
{
    char *data = NULL, *sig = NULL, *sig_alloc = NULL;
    size_t len = 0, slen = 0;
    struct hc_bundle *b = NULL;
    struct stat st;
    if (!sig_path && asprintf(&sig_alloc, "%s.sig", path) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    sig_path = sig_path ? sig_path : sig_alloc;
    if (stat(path, &st) == 0 && (uint64_t)st.st_size > HC_BUNDLE_MAX_BYTES) {
        hc_error_set(err, HC_E(BUNDLE_TOO_LARGE), "bundle '%s' exceeds %u bytes", path,
                     HC_BUNDLE_MAX_BYTES);
        goto cleanup;
    }
    if (hc_file_read(path, &data, &len, err) < 0 || hc_file_read(sig_path, &sig, &slen, err) < 0)
        goto cleanup;
    b = hc_bundle_open(data, len, sig, keys, err);
    if (!b)
        hc_error_prefix(err, "'%s'", path);
cleanup:
    free(data);
    free(sig);
    free(sig_alloc);
    return b;
}

const struct hc_bundle_info *hc_bundle_info(const struct hc_bundle *b)
{
    return &b->info;
}

const json_t *hc_bundle_manifest(const struct hc_bundle *b)
{
    return b->manifest;
}

const char *hc_bundle_signature(const struct hc_bundle *b)
{
    return b->sig_line;
}

const void *hc_bundle_data(const struct hc_bundle *b, size_t *len)
{
    *len = b->len;
    return b->data;
}

/* ---------------------------------------------------------------- extraction */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int hc_bundle_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

/* Makes dest absolute without symlinks in its parent (libarchive's SECURE_SYMLINKS refuses to
 * write through any symlink on the way) and creates it. *out is malloc'd. */
static int make_dest(const char *dest, char **out, struct hc_error *err)
{
    char *copy1 = strdup(dest), *copy2 = strdup(dest), parent[PATH_MAX];
    int rc = -1;
    if (!copy1 || !copy2) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (!realpath(dirname(copy1), parent)) {
        hc_error_set(err, HC_E(IO), "cannot extract into '%s': %s", dest, strerror(errno));
        goto cleanup;
    }
    if (asprintf(out, "%s/%s", strcmp(parent, "/") ? parent : "", basename(copy2)) < 0) {
        *out = NULL;
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (mkdir(*out, 0755) < 0) {
        hc_error_set(err, HC_E(IO), "cannot create '%s': %s", *out, strerror(errno));
        free(*out);
        *out = NULL;
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(copy1);
    free(copy2);
    return rc;
}

static int copy_data(struct archive *in, struct archive *out, struct hc_error *err)
{
    const void *buf;
    size_t size;
    la_int64_t offset;
    int r;
    while ((r = archive_read_data_block(in, &buf, &size, &offset)) == ARCHIVE_OK)
        if (archive_write_data_block(out, buf, size, offset) != ARCHIVE_OK)
            return hc_error_set(err, HC_E(IO), "cannot write bundle file: %s",
                                archive_error_string(out));
    return r == ARCHIVE_EOF ? 0 : corrupt(err, in, "unreadable");
}

/* Rewrites one entry's paths under root and drops dangerous permission bits. 1 to skip. */
static int extract_prepare(struct archive_entry *e, const char *root, struct hc_error *err)
{
    char path[1024], full[PATH_MAX];
    if (!entry_path(e, path, sizeof(path)))
        return unsafe(err, "?", "path missing or too long");
    if (!path[0])
        return 1;
    if (!hc_bundle_path_valid(path))
        return unsafe(err, path, "absolute path, '.' or '..' component");
    snprintf(full, sizeof(full), "%s/%s", root, path);
    archive_entry_set_pathname(e, full);
    const char *hard = archive_entry_hardlink(e);
    if (hard) {
        while (hard[0] == '.' && hard[1] == '/')
            hard += 2;
        if (!hc_bundle_path_valid(hard))
            return unsafe(err, path, "hard link to a file outside the bundle");
        snprintf(full, sizeof(full), "%s/%s", root, hard);
        archive_entry_set_hardlink(e, full);
    }
    archive_entry_set_perm(e, archive_entry_filetype(e) == AE_IFDIR ? 0755
                                                                    : archive_entry_perm(e) & 0755);
    return 0;
}

static int extract_all(const struct hc_bundle *b, const char *root, struct hc_error *err)
{
    struct archive *in = archive_reader(b), *out = archive_write_disk_new();
    struct archive_entry *e;
    int r, rc = -1;
    if (!in || !out) {
        corrupt(err, NULL, "cannot be opened");
        goto cleanup;
    }
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                            ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        int skip = extract_prepare(e, root, err);
        if (skip < 0)
            goto cleanup;
        if (skip)
            continue;
        if (archive_write_header(out, e) != ARCHIVE_OK) {
            unsafe(err, archive_entry_pathname(e) + strlen(root) + 1, archive_error_string(out));
            goto cleanup;
        }
        if (archive_entry_size(e) > 0 && copy_data(in, out, err) < 0)
            goto cleanup;
        if (archive_write_finish_entry(out) != ARCHIVE_OK) {
            hc_error_set(err, HC_E(IO), "cannot finish bundle file: %s", archive_error_string(out));
            goto cleanup;
        }
    }
    if (r != ARCHIVE_EOF) {
        corrupt(err, in, "unreadable");
        goto cleanup;
    }
    if (archive_write_close(out) != ARCHIVE_OK) {
        hc_error_set(err, HC_E(IO), "cannot finish extraction: %s", archive_error_string(out));
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (in)
        archive_read_free(in);
    if (out)
        archive_write_free(out);
    return rc;
}

int hc_bundle_extract(const struct hc_bundle *b, const char *dest, struct hc_error *err)
{
    char *root = NULL;
    if (make_dest(dest, &root, err) < 0)
        return -1;
    int rc = extract_all(b, root, err);
    if (rc < 0) {
        hc_error_prefix(err, "cannot extract bundle %s into '%s'", b->info.version, dest);
        hc_bundle_rmtree(root);
    }
    free(root);
    return rc;
}
