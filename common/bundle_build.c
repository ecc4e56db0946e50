/*
 * Making bundles: Ed25519 signing keys and `hcctl software build` (a manifest plus a directory
 * written as a signed tar.gz with libarchive). The built bundle is opened and verified with the
 * signing key's public half before it is renamed into place, so a build never leaves behind a
 * bundle that a controller would refuse.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/util.h"

#define COPY_BLOCK 65536

/* PEM of key (private or public half) into a malloc'd string. */
static char *key_pem(EVP_PKEY *key, int private_part)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (bio && (private_part ? PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL)
                             : PEM_write_bio_PUBKEY(bio, key)) == 1) {
        long len = BIO_get_mem_data(bio, &data);
        out = len > 0 ? strndup(data, (size_t)len) : NULL;
    }
    BIO_free(bio);
    return out;
}

int hc_bundle_keygen(const char *prefix, char key_id[HC_BUNDLE_KEY_ID_LEN + 1],
                     struct hc_error *err)
{
    char *key_path = NULL, *pub_path = NULL, *priv = NULL, *pub = NULL;
    EVP_PKEY *key = NULL;
    int rc = -1;
    if (asprintf(&key_path, "%s.key", prefix) < 0 || asprintf(&pub_path, "%s.pub", prefix) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (access(key_path, F_OK) == 0) {
        hc_error_set(err, HC_E(CONFLICT), "key file '%s' already exists", key_path);
        hc_error_hint(err, "a signing key is never overwritten: choose another --out");
        goto cleanup;
    }
    key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (!key || !(priv = key_pem(key, 1)) || !(pub = key_pem(key, 0))) {
        hc_error_set(err, HC_E(INTERNAL), "cannot generate an Ed25519 key");
        goto cleanup;
    }
    if (hc_file_write_atomic(key_path, priv, strlen(priv), 0600, err) < 0 ||
        hc_file_write_atomic(pub_path, pub, strlen(pub), 0644, err) < 0)
        goto cleanup;
    if (key_id)
        hc_bundle_key_id(key, key_id);
    rc = 0;
cleanup:
    ERR_clear_error();
    if (priv)
        OPENSSL_cleanse(priv, strlen(priv));
    free(priv);
    free(pub);
    free(key_path);
    free(pub_path);
    EVP_PKEY_free(key);
    return rc;
}

EVP_PKEY *hc_bundle_private_key_load(const char *path, struct hc_error *err)
{
    char *text = NULL;
    size_t len;
    if (hc_file_read(path, &text, &len, err) < 0)
        return NULL;
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    OPENSSL_cleanse(text, len);
    free(text);
    ERR_clear_error();
    if (!key || EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "'%s' is not an Ed25519 private key", path);
        hc_error_hint(err, "create one with 'hcctl software keygen --out PREFIX'");
        return NULL;
    }
    return key;
}

/* ---------------------------------------------------------------- writing the archive */

static int archive_fail(struct archive *a, const char *what, const char *path, struct hc_error *err)
{
    return hc_error_set(err, HC_E(IO), "cannot %s '%s': %s", what, path,
                        archive_error_string(a) ? archive_error_string(a) : "unknown error");
}

static int write_manifest(struct archive *w, const char *text, struct hc_error *err)
{
    struct archive_entry *e = archive_entry_new();
    int rc = -1;
    if (!e)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    archive_entry_set_pathname(e, HC_BUNDLE_MANIFEST);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)strlen(text));
    archive_entry_set_mtime(e, time(NULL), 0);
    if (archive_write_header(w, e) != ARCHIVE_OK ||
        archive_write_data(w, text, strlen(text)) != (la_ssize_t)strlen(text))
        archive_fail(w, "write", HC_BUNDLE_MANIFEST, err);
    else
        rc = 0;
    archive_entry_free(e);
    return rc;
}

/* Copies the current file of the disk reader into the archive. */
static int write_file_data(struct archive *disk, struct archive *w, const char *path,
                           struct hc_error *err)
{
    char *buf = malloc(COPY_BLOCK);
    la_ssize_t n;
    int rc = 0;
    if (!buf)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    while ((n = archive_read_data(disk, buf, COPY_BLOCK)) > 0)
        if (archive_write_data(w, buf, (size_t)n) != n) {
            rc = archive_fail(w, "write", path, err);
            break;
        }
    if (rc == 0 && n < 0)
        rc = archive_fail(disk, "read", path, err);
    free(buf);
    return rc;
}

/* One entry of the walk: its path relative to dir, owner dropped, data copied. */
static int write_entry(struct archive *disk, struct archive *w, struct archive_entry *e,
                       const char *dir, struct hc_error *err)
{
    const char *path = archive_entry_pathname(e);
    size_t dlen = strlen(dir);
    if (strcmp(path, dir) == 0)
        return 0;
    if (strncmp(path, dir, dlen) != 0 || path[dlen] != '/')
        return hc_error_set(err, HC_E(INTERNAL), "unexpected path '%s' under '%s'", path, dir);
    const char *rel = path + dlen + 1;
    mode_t type = archive_entry_filetype(e);
    if (strcmp(rel, HC_BUNDLE_MANIFEST) == 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "'%s' already holds a manifest.json", dir);
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "cannot bundle '%s': not a regular file, directory or link", path);
    char *copy = strdup(rel);
    if (!copy)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    archive_entry_set_pathname(e, copy);
    free(copy);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, NULL);
    archive_entry_set_gname(e, NULL);
    if (archive_write_header(w, e) != ARCHIVE_OK)
        return archive_fail(w, "write", path, err);
    if (type == AE_IFREG && archive_entry_size(e) > 0)
        return write_file_data(disk, w, path, err);
    return 0;
}

static int write_tree(struct archive *w, const char *dir, struct hc_error *err)
{
    struct archive *disk = archive_read_disk_new();
    struct archive_entry *e = archive_entry_new();
    int r, rc = -1;
    if (!disk || !e) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    archive_read_disk_set_symlink_physical(disk);
    archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
                                             ARCHIVE_READDISK_NO_FFLAGS);
    if (archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
        archive_fail(disk, "read", dir, err);
        goto cleanup;
    }
    while ((r = archive_read_next_header2(disk, e)) == ARCHIVE_OK) {
        archive_read_disk_descend(disk);
        if (write_entry(disk, w, e, dir, err) < 0)
            goto cleanup;
        archive_entry_clear(e);
    }
    if (r != ARCHIVE_EOF) {
        archive_fail(disk, "read", dir, err);
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (disk)
        archive_read_free(disk);
    archive_entry_free(e);
    return rc;
}

/* Writes the archive to fd (a temporary file named path, from hc_file_tmp_open). */
static int write_archive(int fd, const char *path, const char *manifest, const char *dir,
                         struct hc_error *err)
{
    struct archive *w = archive_write_new();
    int rc = -1;
    if (!w)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    if (archive_write_add_filter_gzip(w) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
        archive_write_open_fd(w, fd) != ARCHIVE_OK) {
        archive_fail(w, "create", path, err);
        goto cleanup;
    }
    if (write_manifest(w, manifest, err) < 0 || write_tree(w, dir, err) < 0)
        goto cleanup;
    if (archive_write_close(w) != ARCHIVE_OK) {
        archive_fail(w, "finish", path, err);
        goto cleanup;
    }
    rc = 0;
cleanup:
    archive_write_free(w);
    return rc;
}

/* ---------------------------------------------------------------- build */

/* The manifest file, validated, and its entrypoint present in dir. *text is malloc'd. */
static int load_manifest(const char *manifest_path, const char *dir, char **text,
                         struct hc_error *err)
{
    size_t len;
    struct stat st;
    if (hc_file_read(manifest_path, text, &len, err) < 0)
        return -1;
    json_error_t jerr;
    json_t *m = json_loadb(*text, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!m) {
        hc_error_set(err, HC_E(BUNDLE_MANIFEST), "'%s' is not valid JSON: %s at line %d",
                     manifest_path, jerr.text, jerr.line);
        goto cleanup;
    }
    if (hc_bundle_manifest_check(m, err) < 0)
        goto cleanup;
    char *entry = hc_path_join(dir, json_string_value(json_object_get(m, "entrypoint")));
    if (!entry || lstat(entry, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
        hc_error_set(err, HC_E(BUNDLE_MANIFEST),
                     "entrypoint '%s' is not an executable regular file", entry ? entry : "?");
    else
        rc = 0;
    free(entry);
cleanup:
    json_decref(m);
    return rc;
}

/* Reads the written archive back, signs it and opens it as a controller would. */
static int sign_and_check(EVP_PKEY *key, const char *tmp, char line[HC_BUNDLE_SIG_MAX],
                          struct hc_bundle_info *info, struct hc_error *err)
{
    char *data = NULL, *pub = key_pem(key, 0);
    size_t len;
    struct hc_bundle_keys *keys = hc_bundle_keys_new();
    struct hc_bundle *b = NULL;
    int rc = -1;
    if (!pub || !keys) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (hc_file_read(tmp, &data, &len, err) < 0 || hc_bundle_sign(key, data, len, line, err) < 0 ||
        hc_bundle_keys_add_pem(keys, "signing key", pub, err) < 0)
        goto cleanup;
    if (!(b = hc_bundle_open(data, len, line, keys, err))) {
        hc_error_prefix(err, "the built bundle does not verify");
        goto cleanup;
    }
    if (info)
        *info = *hc_bundle_info(b);
    rc = 0;
cleanup:
    hc_bundle_free(b);
    hc_bundle_keys_free(keys);
    free(data);
    free(pub);
    return rc;
}

static int write_sig(const char *out, const char *line, struct hc_error *err)
{
    char *path = NULL, *text = NULL;
    int rc = -1;
    if (asprintf(&path, "%s.sig", out) < 0 || asprintf(&text, "%s\n", line) < 0)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    else
        rc = hc_file_write_atomic(path, text, strlen(text), 0644, err);
    free(path);
    free(text);
    return rc;
}

int hc_bundle_build(const char *manifest_path, const char *dir_arg, const char *key_path,
                    const char *out, struct hc_bundle_info *info, struct hc_error *err)
{
    char *manifest = NULL, *dir = strdup(dir_arg), line[HC_BUNDLE_SIG_MAX], tmp[4096] = "";
    EVP_PKEY *key = NULL;
    struct stat st;
    int rc = -1, fd = -1;
    if (!dir) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
        dir[n - 1] = '\0';
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "'%s' is not a directory", dir);
        goto cleanup;
    }
    if (!(key = hc_bundle_private_key_load(key_path, err)) ||
        load_manifest(manifest_path, dir, &manifest, err) < 0 ||
        (fd = hc_file_tmp_open(out, 0644, tmp, sizeof(tmp), err)) < 0 ||
        write_archive(fd, tmp, manifest, dir, err) < 0 ||
        sign_and_check(key, tmp, line, info, err) < 0)
        goto cleanup;
    rc = hc_file_tmp_commit(fd, tmp, out, err);
    fd = -1;
    tmp[0] = '\0'; /* renamed, or removed by the commit */
    if (rc == 0)
        rc = write_sig(out, line, err);
cleanup:
    if (fd >= 0)
        hc_file_tmp_abort(fd, tmp);
    EVP_PKEY_free(key);
    free(manifest);
    free(dir);
    return rc;
}
