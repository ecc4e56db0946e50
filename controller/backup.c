/*
 * hcctld backup and restore (controller/backup.h; docs/hcctld.md "backup", "restore").
 */
#include "controller/backup.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/https_client.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/util.h"
#include "controller/ha/fence_store.h"
#include "controller/init.h"
#include "controller/remote/agent_client.h"
#include "controller/state/nodes.h"
#include "db/db.h"

#define CHUNK 65536

/* The data directory's files a backup holds; admin.token is not among them (a secret the
 * database keeps only the hash of: the token goes on working after a restore), nor crl.pem
 * (run writes it from the database) and hcctld.lock. */
static const char *const backup_files[] = {"hcctld.db",  "ca.pem",         "ca.key",
                                           "server.pem", "server.key",     "client.pem",
                                           "client.key", "controller.json"};
static const char *const backup_trees[] = {"ssh", "trusted-keys", "bundles"};
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int invalid(struct hc_error *err, const char *fmt, const char *what)
{
    hc_error_set(err, HC_E(BACKUP_INVALID), fmt, what);
    return hc_error_hint(err, "the archive is damaged or was not written by 'hcctld backup': "
                              "restore another one");
}

/* 1 when path (already hc_bundle_path_valid) is one a backup may hold. */
static int path_allowed(const char *path)
{
    for (size_t i = 0; i < NELEMS(backup_files); i++)
        if (strcmp(path, backup_files[i]) == 0)
            return 1;
    for (size_t i = 0; i < NELEMS(backup_trees); i++) {
        size_t n = strlen(backup_trees[i]);
        if (strncmp(path, backup_trees[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- backup */

/* SHA-256 and size of a file, read in chunks. */
static int file_digest(const char *path, char hex[65], uint64_t *size, struct hc_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[CHUNK], digest[32];
    unsigned int dlen = 0;
    ssize_t n;
    *size = 0;
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        EVP_DigestUpdate(md, buf, (size_t)n);
        *size += (uint64_t)n;
    }
    int saved = errno;
    EVP_DigestFinal_ex(md, digest, &dlen);
    EVP_MD_CTX_free(md);
    close(fd);
    if (n < 0)
        return hc_error_set(err, HC_E(IO), "cannot read '%s': %s", path, strerror(saved));
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

struct plan {
    json_t *entries; /* the manifest's: {path, type, mode[, size, sha256]} */
    json_t *sources; /* where each file entry's bytes are read from (null for a directory) */
};

static int plan_file(struct plan *p, const char *rel, const char *src, int mode,
                     struct hc_error *err)
{
    char hex[65];
    uint64_t size;
    if (file_digest(src, hex, &size, err) < 0)
        return -1;
    json_array_append_new(p->entries,
                          json_pack("{s:s,s:s,s:i,s:I,s:s}", "path", rel, "type", "file", "mode",
                                    mode, "size", (json_int_t)size, "sha256", hex));
    json_array_append_new(p->sources, json_string(src));
    return 0;
}

/* rel (a directory below data_dir) and everything in it; anything but files and directories
 * is refused (a backup would not bring it back). */
static int plan_tree(struct plan *p, const char *data_dir, const char *rel, struct hc_error *err)
{
    char path[2200];
    snprintf(path, sizeof(path), "%s/%s", data_dir, rel);
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", path, strerror(errno));
    }
    json_array_append_new(p->entries,
                          json_pack("{s:s,s:s,s:i}", "path", rel, "type", "dir", "mode", 0700));
    json_array_append_new(p->sources, json_null());
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char child_rel[1100], child[2200];
        struct stat st;
        snprintf(child_rel, sizeof(child_rel), "%s/%s", rel, de->d_name);
        snprintf(child, sizeof(child), "%s/%s", data_dir, child_rel);
        if (lstat(child, &st) < 0)
            rc = hc_error_set(err, HC_E(IO), "cannot stat '%s': %s", child, strerror(errno));
        else if (!hc_bundle_path_valid(child_rel))
            rc = hc_error_set(err, HC_E(IO), "'%s': a name a backup cannot hold", child);
        else if (S_ISDIR(st.st_mode))
            rc = plan_tree(p, data_dir, child_rel, err);
        else if (S_ISREG(st.st_mode))
            rc = plan_file(p, child_rel, child, (int)(st.st_mode & 0644), err);
        else
            rc = hc_error_set(err, HC_E(IO), "'%s' is not a regular file or directory", child);
    }
    closedir(d);
    return rc;
}

/* A consistent copy of the database into snapshot, while hcctld may be writing it. */
static int snapshot_db(const char *db_path, const char *snapshot, int *schema, struct hc_error *err)
{
    sqlite3 *from = NULL, *to = NULL;
    int rc = -1;
    if (sqlite3_open_v2(db_path, &from, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_open_v2(snapshot, &to, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        hc_error_set(err, HC_E(DB), "cannot open '%s' for the backup: %s", db_path,
                     sqlite3_errmsg(to ? to : from));
        goto cleanup;
    }
    sqlite3_busy_timeout(from, HC_DB_BUSY_TIMEOUT_MS);
    sqlite3_backup *b = sqlite3_backup_init(to, "main", from, "main");
    if (!b) {
        hc_error_set(err, HC_E(DB), "cannot start the backup of '%s': %s", db_path,
                     sqlite3_errmsg(to));
        goto cleanup;
    }
    int step;
    /* All pages in one step: one read transaction, so the copy is one state of the database.
     * A writer holding the lock only delays it. */
    for (int tries = 0; (step = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || step == SQLITE_LOCKED;
         tries++) {
        if (tries > 500)
            break;
        usleep(10000);
    }
    sqlite3_backup_finish(b);
    if (step != SQLITE_DONE) {
        hc_error_set(err, HC_E(DB), "the backup of '%s' failed: %s", db_path, sqlite3_errstr(step));
        goto cleanup;
    }
    /* The copy carries the source's WAL mode; a single file is what the archive wants (run
     * turns WAL on again). */
    if (sqlite3_exec(to, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK) {
        hc_error_set(err, HC_E(DB), "cannot finish the snapshot: %s", sqlite3_errmsg(to));
        goto cleanup;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(to, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        hc_error_set(err, HC_E(DB), "cannot read the snapshot's schema version");
        goto cleanup;
    }
    *schema = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    rc = 0;
cleanup:
    sqlite3_close(from);
    sqlite3_close(to);
    return rc;
}

/* Copies src into the archive as the entry just written, checking it is still the file the
 * manifest describes. */
static int write_file_data(struct archive *a, const char *src, const json_t *entry,
                           struct hc_error *err)
{
    int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", src, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[CHUNK], digest[32];
    unsigned int dlen = 0;
    uint64_t total = 0, want = (uint64_t)json_integer_value(json_object_get(entry, "size"));
    ssize_t n;
    int rc = 0;
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    while (rc == 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
        EVP_DigestUpdate(md, buf, (size_t)n);
        total += (uint64_t)n;
        if (total > want)
            rc = -1;
        else if (archive_write_data(a, buf, (size_t)n) != n)
            rc = -2;
    }
    EVP_DigestFinal_ex(md, digest, &dlen);
    EVP_MD_CTX_free(md);
    close(fd);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    if (rc == 0 &&
        (total != want || strcmp(hex, json_string_value(json_object_get(entry, "sha256"))) != 0))
        rc = -1;
    if (rc == -2)
        return hc_error_set(err, HC_E(IO), "cannot write the archive: %s", archive_error_string(a));
    if (rc < 0)
        return hc_error_set(err, HC_E(IO), "'%s' changed or could not be read during the backup",
                            src);
    return 0;
}

static int write_header(struct archive *a, const char *path, mode_t type, int mode, int64_t size,
                        struct hc_error *err)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, (mode_t)mode);
    archive_entry_set_size(e, size);
    archive_entry_set_mtime(e, time(NULL), 0);
    int r = archive_write_header(a, e);
    archive_entry_free(e);
    if (r != ARCHIVE_OK)
        return hc_error_set(err, HC_E(IO), "cannot write the archive: %s", archive_error_string(a));
    return 0;
}

static int write_archive(int fd, const json_t *manifest, const struct plan *p, struct hc_error *err)
{
    struct archive *a = archive_write_new();
    int rc = -1;
    char *text = json_dumps(manifest, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (!a || !text || archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_open_fd(a, fd) != ARCHIVE_OK) {
        hc_error_set(err, HC_E(IO), "cannot start the archive: %s",
                     a ? archive_error_string(a) : "out of memory");
        goto cleanup;
    }
    size_t len = strlen(text);
    if (write_header(a, HC_BACKUP_MANIFEST, AE_IFREG, 0600, (int64_t)len, err) < 0)
        goto cleanup;
    if (archive_write_data(a, text, len) != (la_ssize_t)len) {
        hc_error_set(err, HC_E(IO), "cannot write the archive: %s", archive_error_string(a));
        goto cleanup;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(p->entries, i, entry)
    {
        const char *path = json_string_value(json_object_get(entry, "path"));
        int mode = (int)json_integer_value(json_object_get(entry, "mode"));
        if (strcmp(json_string_value(json_object_get(entry, "type")), "dir") == 0) {
            if (write_header(a, path, AE_IFDIR, mode, 0, err) < 0)
                goto cleanup;
            continue;
        }
        if (write_header(a, path, AE_IFREG, mode,
                         (int64_t)json_integer_value(json_object_get(entry, "size")), err) < 0 ||
            write_file_data(a, json_string_value(json_array_get(p->sources, i)), entry, err) < 0)
            goto cleanup;
    }
    if (archive_write_close(a) != ARCHIVE_OK) {
        hc_error_set(err, HC_E(IO), "cannot finish the archive: %s", archive_error_string(a));
        goto cleanup;
    }
    rc = 0;
cleanup:
    free(text);
    if (a)
        archive_write_free(a);
    return rc;
}

static void iso_time(char *buf, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* -1 with err when output would land inside data_dir (a later backup would hold it, and
 * this one its own temporary files). */
static int check_output(const char *data_dir, const char *output, struct hc_error *err)
{
    char dir[PATH_MAX], parent[PATH_MAX], out[PATH_MAX];
    snprintf(out, sizeof(out), "%s", output);
    char *slash = strrchr(out, '/');
    if (slash)
        *(slash == out ? slash + 1 : slash) = '\0';
    if (!realpath(data_dir, dir))
        return hc_error_set(err, HC_E(IO), "cannot resolve '%s': %s", data_dir, strerror(errno));
    if (!realpath(slash ? out : ".", parent))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--output '%s': its directory: %s", output,
                            strerror(errno));
    size_t n = strlen(dir);
    if (strncmp(parent, dir, n) == 0 && (parent[n] == '\0' || parent[n] == '/'))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "--output '%s' is inside the data directory '%s'", output, data_dir);
    return 0;
}

int hc_backup_create(const char *data_dir, const char *output, struct hc_backup_info *info,
                     struct hc_error *err)
{
    struct hc_controller ctl = {0};
    if (hc_controller_load(&ctl, data_dir, err) < 0)
        return -1;
    if (ctl.ha_etcd[0]) {
        hc_error_set(err, HC_E(CONFLICT),
                     "'%s' belongs to an HA controller (etcd %s): its database is a cache of etcd",
                     data_dir, ctl.ha_etcd);
        return hc_error_hint(err,
                             "back up etcd's state with 'hcctld ha export --data-dir %s "
                             "--etcd %s --output FILE' (docs/ha.md)",
                             data_dir, ctl.ha_etcd);
    }
    if (check_output(data_dir, output, err) < 0)
        return -1;
    memset(info, 0, sizeof(*info));
    snprintf(info->cluster_id, sizeof(info->cluster_id), "%s", ctl.cluster_id);
    struct plan p = {json_array(), json_array()};
    json_t *manifest = NULL;
    char snap_base[1200], snapshot[1300], tmp[1300];
    int rc = -1, fd = -1;
    snprintf(snap_base, sizeof(snap_base), "%s.db", output);
    int snap_fd = hc_file_tmp_open(snap_base, 0600, snapshot, sizeof(snapshot), err);
    if (snap_fd < 0)
        goto cleanup_plan;
    close(snap_fd);
    if (snapshot_db(ctl.db_path, snapshot, &info->schema, err) < 0 ||
        plan_file(&p, "hcctld.db", snapshot, 0600, err) < 0)
        goto cleanup;
    for (size_t i = 1; i < NELEMS(backup_files); i++) {
        char path[2200];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", data_dir, backup_files[i]);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
            hc_error_set(err, HC_E(IO), "'%s' is missing or not a regular file", path);
            goto cleanup;
        }
        if (plan_file(&p, backup_files[i], path, (int)(st.st_mode & 0644), err) < 0)
            goto cleanup;
    }
    for (size_t i = 0; i < NELEMS(backup_trees); i++)
        if (plan_tree(&p, data_dir, backup_trees[i], err) < 0)
            goto cleanup;
    char created[32];
    iso_time(created, sizeof(created));
    manifest = json_pack("{s:i,s:s,s:i,s:s,s:s,s:O}", "format", HC_BACKUP_FORMAT, "hcctld_version",
                         HC_VERSION, "schema_version", info->schema, "cluster_id", ctl.cluster_id,
                         "created_at", created, "entries", p.entries);
    if ((fd = hc_file_tmp_open(output, 0600, tmp, sizeof(tmp), err)) < 0)
        goto cleanup;
    if (write_archive(fd, manifest, &p, err) < 0) {
        hc_file_tmp_abort(fd, tmp);
        goto cleanup;
    }
    if (hc_file_tmp_commit(fd, tmp, output, err) < 0)
        goto cleanup;
    size_t i;
    json_t *entry;
    json_array_foreach(p.entries, i, entry)
    {
        json_t *size = json_object_get(entry, "size");
        if (size) {
            info->files++;
            info->bytes += (uint64_t)json_integer_value(size);
        }
    }
    rc = 0;
cleanup:
    unlink(snapshot);
cleanup_plan:
    json_decref(manifest);
    json_decref(p.entries);
    json_decref(p.sources);
    return rc;
}

/* ---------------------------------------------------------------- unpack */

/* The entry's path without a leading "./" into buf; NULL when missing or too long. */
static const char *entry_path(struct archive_entry *e, char *buf, size_t len)
{
    const char *p = archive_entry_pathname(e);
    if (!p)
        return NULL;
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    size_t n = strlen(p);
    if (n > 0 && p[n - 1] == '/' && archive_entry_filetype(e) == AE_IFDIR)
        n--;
    if (n >= len)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static int is_hex64(const char *s)
{
    return s && strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* Checks the manifest's fields; fills byp (path -> entry) and info. */
static int check_manifest(const json_t *m, json_t *byp, struct hc_backup_info *info,
                          struct hc_error *err)
{
    json_t *format = json_object_get(m, "format"), *schema = json_object_get(m, "schema_version");
    json_t *entries = json_object_get(m, "entries");
    const char *cluster = json_string_value(json_object_get(m, "cluster_id"));
    if (!json_is_integer(format))
        return invalid(err, "manifest.json has no %s", "integer \"format\"");
    if (json_integer_value(format) != HC_BACKUP_FORMAT) {
        hc_error_set(err, HC_E(SCHEMA_TOO_NEW),
                     "the archive's format is %lld; this hcctld (%s) reads format %d",
                     (long long)json_integer_value(format), HC_VERSION, HC_BACKUP_FORMAT);
        return hc_error_hint(err, "restore with the hcctld that wrote it, or a newer one");
    }
    if (!json_is_integer(schema) || json_integer_value(schema) < 1)
        return invalid(err, "manifest.json has no %s", "valid \"schema_version\"");
    if (json_integer_value(schema) > hc_db_latest_version()) {
        hc_error_set(err, HC_E(SCHEMA_TOO_NEW),
                     "the archive's database has schema %lld, newer than this hcctld's (%d)",
                     (long long)json_integer_value(schema), hc_db_latest_version());
        return hc_error_hint(err, "restore with the hcctld (%s) that wrote it, or a newer one",
                             json_string_value(json_object_get(m, "hcctld_version"))
                                 ? json_string_value(json_object_get(m, "hcctld_version"))
                                 : "?");
    }
    if (!cluster || !*cluster || strlen(cluster) >= sizeof(info->cluster_id))
        return invalid(err, "manifest.json has no %s", "valid \"cluster_id\"");
    if (!json_is_array(entries) || json_array_size(entries) > HC_BACKUP_MAX_ENTRIES)
        return invalid(err, "manifest.json has no %s", "valid \"entries\" array");
    info->schema = (int)json_integer_value(schema);
    snprintf(info->cluster_id, sizeof(info->cluster_id), "%s", cluster);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *type = json_string_value(json_object_get(e, "type"));
        json_t *mode = json_object_get(e, "mode");
        if (!path || !hc_bundle_path_valid(path) || !path_allowed(path) ||
            json_object_get(byp, path))
            return invalid(err, "manifest.json lists an invalid or repeated path '%s'",
                           path ? path : "?");
        if (!type || !json_is_integer(mode) || (json_integer_value(mode) & ~0777))
            return invalid(err, "manifest.json: entry '%s' has no valid type and mode", path);
        if (strcmp(type, "file") == 0) {
            json_t *size = json_object_get(e, "size");
            if (!json_is_integer(size) || json_integer_value(size) < 0 ||
                !is_hex64(json_string_value(json_object_get(e, "sha256"))))
                return invalid(err, "manifest.json: file '%s' has no valid size and sha256", path);
        } else if (strcmp(type, "dir") != 0) {
            return invalid(err, "manifest.json: entry '%s' is neither a file nor a dir", path);
        }
        json_object_set(byp, path, e);
    }
    for (size_t k = 0; k < NELEMS(backup_files); k++) {
        json_t *e2 = json_object_get(byp, backup_files[k]);
        if (!e2 || strcmp(json_string_value(json_object_get(e2, "type")), "file") != 0)
            return invalid(err, "manifest.json does not list '%s'", backup_files[k]);
    }
    return 0;
}

static int read_manifest(struct archive *a, struct archive_entry *e, json_t **out,
                         struct hc_error *err)
{
    char path[1100];
    if (!entry_path(e, path, sizeof(path)) || strcmp(path, HC_BACKUP_MANIFEST) != 0 ||
        archive_entry_filetype(e) != AE_IFREG)
        return invalid(err, "the archive's first entry is not %s", HC_BACKUP_MANIFEST);
    la_int64_t size = archive_entry_size(e);
    if (size <= 0 || size > HC_BACKUP_MANIFEST_MAX) {
        hc_error_set(err, HC_E(BACKUP_INVALID), "manifest.json must hold 1 to %d bytes, not %lld",
                     HC_BACKUP_MANIFEST_MAX, (long long)size);
        return -1;
    }
    char *text = malloc((size_t)size);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    la_ssize_t got = archive_read_data(a, text, (size_t)size);
    if (got != size) {
        free(text);
        return invalid(err, "the archive is truncated or corrupt (in %s)", HC_BACKUP_MANIFEST);
    }
    json_error_t jerr;
    *out = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return invalid(err, "manifest.json is not a JSON object: %s", jerr.text);
    }
    return 0;
}

/* The database, the TLS keys and the SSH private key (ssh/ but *.pub, known_hosts). */
static int secret_path(const char *path)
{
    size_t n = strlen(path);
    if (strcmp(path, "hcctld.db") == 0 || (n > 4 && strcmp(path + n - 4, ".key") == 0))
        return 1;
    return strncmp(path, "ssh/", 4) == 0 && !(n > 4 && strcmp(path + n - 4, ".pub") == 0) &&
           !strstr(path, "known_hosts");
}

/* Writes the entry's data to dest/path, checking its size and SHA-256 against the manifest. */
static int unpack_file(struct archive *a, const char *dest, const char *path, const json_t *want,
                       struct hc_error *err)
{
    char full[2200];
    snprintf(full, sizeof(full), "%s/%s", dest, path);
    /* Nothing group- or world-writable; the database and every private key 0600 whatever the
     * archive says. */
    mode_t mode = (mode_t)json_integer_value(json_object_get(want, "mode")) & 0644;
    if (secret_path(path))
        mode = 0600;
    int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return hc_error_set(err, HC_E(IO), "cannot create '%s': %s", full, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[CHUNK], digest[32];
    unsigned int dlen = 0;
    uint64_t total = 0, size = (uint64_t)json_integer_value(json_object_get(want, "size"));
    la_ssize_t n;
    int rc = 0;
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    while ((n = archive_read_data(a, buf, sizeof(buf))) > 0) {
        EVP_DigestUpdate(md, buf, (size_t)n);
        total += (uint64_t)n;
        if (total > size || write(fd, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    }
    EVP_DigestFinal_ex(md, digest, &dlen);
    EVP_MD_CTX_free(md);
    if (rc == 0 && n < 0)
        rc = invalid(err, "the archive is truncated or corrupt (in '%s')", path);
    else if (rc < 0 && total <= size)
        rc = hc_error_set(err, HC_E(IO), "cannot write '%s': %s", full, strerror(errno));
    if (rc == 0 || total > size) {
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        if (total != size || strcmp(hex, json_string_value(json_object_get(want, "sha256"))) != 0)
            rc = invalid(err, "'%s' is not the file the manifest describes (size or sha256)", path);
    }
    if (rc == 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0))
        rc = hc_error_set(err, HC_E(IO), "cannot finish '%s': %s", full, strerror(errno));
    close(fd);
    return rc;
}

static int unpack_entry(struct archive *a, struct archive_entry *e, const char *dest, json_t *byp,
                        json_t *seen, struct hc_error *err)
{
    char path[1100];
    if (!entry_path(e, path, sizeof(path)) || !hc_bundle_path_valid(path))
        return invalid(err, "archive entry '%s' is refused: absolute path, '.' or '..'",
                       archive_entry_pathname(e) ? archive_entry_pathname(e) : "?");
    mode_t type = archive_entry_filetype(e);
    if (archive_entry_hardlink(e) || (type != AE_IFREG && type != AE_IFDIR))
        return invalid(err, "archive entry '%s' is refused: not a regular file or directory", path);
    json_t *want = json_object_get(byp, path);
    if (!want)
        return invalid(err, "archive entry '%s' is not in the manifest", path);
    if (json_object_get(seen, path))
        return invalid(err, "archive entry '%s' appears twice", path);
    json_object_set_new(seen, path, json_true());
    int is_dir = strcmp(json_string_value(json_object_get(want, "type")), "dir") == 0;
    if (is_dir != (type == AE_IFDIR))
        return invalid(err, "archive entry '%s' is not of the manifest's type", path);
    char full[2200];
    snprintf(full, sizeof(full), "%s/%s", dest, path);
    char *slash = strrchr(full, '/');
    *slash = '\0';
    if (hc_mkdir_p(full, 0700, err) < 0)
        return -1;
    *slash = '/';
    if (is_dir) {
        if (mkdir(full, 0700) < 0 && errno != EEXIST)
            return hc_error_set(err, HC_E(IO), "cannot create '%s': %s", full, strerror(errno));
        return 0;
    }
    if (archive_entry_size(e) != json_integer_value(json_object_get(want, "size")))
        return invalid(err, "'%s' is not the file the manifest describes (size or sha256)", path);
    return unpack_file(a, dest, path, want, err);
}

/* The restored database's own schema version, which the manifest only claims. */
static int check_db_schema(const char *dest, const struct hc_backup_info *info,
                           struct hc_error *err)
{
    char path[2200];
    snprintf(path, sizeof(path), "%s/hcctld.db", dest);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (version < 0)
        return invalid(err, "the archive's %s is not a readable SQLite database", "hcctld.db");
    if (version != info->schema) {
        hc_error_set(err, HC_E(BACKUP_INVALID),
                     "the archive's database has schema %d, the manifest says %d", version,
                     info->schema);
        return -1;
    }
    return 0;
}

int hc_backup_unpack(const char *input, const char *dest, struct hc_backup_info *info,
                     struct hc_error *err)
{
    memset(info, 0, sizeof(*info));
    struct archive *a = archive_read_new();
    struct archive_entry *e;
    json_t *manifest = NULL, *byp = json_object(), *seen = json_object();
    int rc = -1, r;
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    if (access(input, R_OK) < 0) {
        hc_error_set(err, HC_E(IO), "cannot read '%s': %s", input, strerror(errno));
        goto cleanup;
    }
    if (archive_read_open_filename(a, input, CHUNK) != ARCHIVE_OK) {
        invalid(err, "'%s' is not a tar.gz archive, or is truncated", input);
        goto cleanup;
    }
    r = archive_read_next_header(a, &e);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        invalid(err, "'%s' is not a readable tar.gz archive", input);
        goto cleanup;
    }
    if (archive_filter_count(a) < 2 || archive_filter_code(a, 0) != ARCHIVE_FILTER_GZIP) {
        invalid(err, "'%s' is not gzip-compressed", input);
        goto cleanup;
    }
    if (read_manifest(a, e, &manifest, err) < 0 || check_manifest(manifest, byp, info, err) < 0)
        goto cleanup;
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if (unpack_entry(a, e, dest, byp, seen, err) < 0)
            goto cleanup;
        if (archive_entry_filetype(e) == AE_IFREG) {
            info->files++;
            info->bytes += (uint64_t)archive_entry_size(e);
        }
    }
    if (r != ARCHIVE_EOF) {
        invalid(err, "the archive is truncated or corrupt: %s",
                archive_error_string(a) ? archive_error_string(a) : "bad tar or gzip data");
        goto cleanup;
    }
    const char *path;
    json_t *v;
    json_object_foreach(byp, path, v)
    {
        if (!json_object_get(seen, path)) {
            invalid(err, "the archive lacks '%s', which its manifest lists", path);
            goto cleanup;
        }
    }
    rc = check_db_schema(dest, info, err);
cleanup:
    archive_read_free(a);
    json_decref(manifest);
    json_decref(byp);
    json_decref(seen);
    return rc;
}

/* ---------------------------------------------------------------- restore */

/* Holds DIR/hcctld.lock when it exists (-1 with err when an hcctld holds it); *fd receives the
 * descriptor (-1 when there is no lock file). */
static int lock_target(const char *data_dir, int *fd, struct hc_error *err)
{
    char path[1200], text[32];
    snprintf(path, sizeof(path), "%s/hcctld.lock", data_dir);
    *fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return errno == ENOENT
                   ? 0
                   : hc_error_set(err, HC_E(IO), "cannot open '%s': %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    ssize_t n = read(*fd, text, sizeof(text) - 1);
    text[n > 0 ? n : 0] = '\0';
    text[strcspn(text, "\n")] = '\0';
    close(*fd);
    *fd = -1;
    hc_error_set(err, HC_E(CONFLICT), "an hcctld (pid %s) runs on '%s'", text[0] ? text : "unknown",
                 data_dir);
    return hc_error_hint(err, "stop it first (systemctl stop hcctld), then restore");
}

/* 1 when dir holds anything, 0 when empty, -1 with err. */
static int dir_has_entries(const char *dir, struct hc_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return hc_error_set(err, HC_E(IO), "cannot open '%s': %s", dir, strerror(errno));
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)))
        found = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return found;
}

static int write_marker(const char *dest, const char *input, const struct hc_backup_info *info,
                        struct hc_error *err)
{
    char when[32], path[2200];
    iso_time(when, sizeof(when));
    snprintf(path, sizeof(path), "%s/%s", dest, HC_BACKUP_MARKER);
    json_t *m = json_pack("{s:s,s:s,s:s}", "restored_at", when, "from", input, "cluster_id",
                          info->cluster_id);
    char *text = m ? json_dumps(m, JSON_INDENT(1)) : NULL;
    int rc = text ? hc_file_write_atomic(path, text, strlen(text), 0600, err)
                  : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(text);
    json_decref(m);
    return rc;
}

int hc_backup_restore(const char *input, const char *data_dir, int force,
                      struct hc_backup_info *info, struct hc_error *err)
{
    char dir[1024], tmp[1100];
    size_t n = strlen(data_dir);
    while (n > 1 && data_dir[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof(dir) - 32)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--data-dir is empty or too long");
    memcpy(dir, data_dir, n);
    dir[n] = '\0';
    struct stat st;
    int exists = lstat(dir, &st) == 0, lock_fd = -1, rc = -1;
    if (exists && !S_ISDIR(st.st_mode))
        return hc_error_set(err, HC_E(CONFLICT), "'%s' exists and is not a directory", dir);
    if (exists) {
        if (lock_target(dir, &lock_fd, err) < 0)
            return -1;
        int full = dir_has_entries(dir, err);
        if (full < 0)
            goto cleanup;
        if (full && !force) {
            hc_error_set(err, HC_E(CONFLICT), "'%s' is not empty", dir);
            hc_error_hint(err, "restore into a new directory, or give --force to replace "
                               "everything in it");
            goto cleanup;
        }
    }
    snprintf(tmp, sizeof(tmp), "%s.restore-XXXXXX", dir);
    if (!mkdtemp(tmp)) {
        hc_error_set(err, HC_E(IO), "cannot create a directory beside '%s': %s", dir,
                     strerror(errno));
        goto cleanup;
    }
    if (hc_backup_unpack(input, tmp, info, err) < 0 || write_marker(tmp, input, info, err) < 0 ||
        chmod(tmp, 0700) < 0) {
        if (!err->message[0])
            hc_error_set(err, HC_E(IO), "cannot set the mode of '%s': %s", tmp, strerror(errno));
        hc_bundle_rmtree(tmp);
        goto cleanup;
    }
    /* One atomic step: DIR becomes the restored tree and tmp the old one (removed after). */
    if (exists ? renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) < 0
               : rename(tmp, dir) < 0) {
        hc_error_set(err, HC_E(IO), "cannot move the restored directory to '%s': %s", dir,
                     strerror(errno));
        hc_bundle_rmtree(tmp);
        goto cleanup;
    }
    if (exists)
        hc_bundle_rmtree(tmp);
    char parent[1100];
    snprintf(parent, sizeof(parent), "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *(slash == parent ? slash + 1 : slash) = '\0';
    hc_dir_sync(slash ? parent : ".");
    rc = 0;
cleanup:
    if (lock_fd >= 0)
        close(lock_fd);
    return rc;
}

/* ---------------------------------------------------------------- fencing after a restore */

#define CATCH_UP_PARALLEL 32

/* The fan-out over the nodes: per-thread connections and clients (hc_parallel_for's worker),
 * per-node results. */
struct catch_up {
    const struct hc_controller *ctl;
    const struct hc_node_row *nodes;
    int64_t *terms; /* -1: the node did not tell */
    struct hc_db *db[CATCH_UP_PARALLEL];
    struct hc_http_client *client[CATCH_UP_PARALLEL];
};

static int ask_term(void *arg, unsigned worker, size_t i)
{
    struct catch_up *c = arg;
    struct hc_error cerr = {0};
    struct hc_http_response resp = {0};
    c->terms[i] = -1;
    if (!c->db[worker] && (c->db[worker] = hc_db_open(c->ctl->db_path, &cerr)))
        c->client[worker] = hc_agent_client_new(c->ctl, c->db[worker], &cerr);
    if (c->client[worker] &&
        hc_agent_call(c->client[worker], c->nodes[i].agent_url, "GET", "/v1/status", NULL,
                      hc_agent_timeout_ms(c->ctl), &resp, &cerr) == 0 &&
        json_is_integer(json_object_get(resp.body, "controller_term")))
        c->terms[i] = json_integer_value(json_object_get(resp.body, "controller_term"));
    else
        HC_WARN("after the restore: node %s did not tell its controller_term (%s)",
                c->nodes[i].name,
                cerr.message[0] ? cerr.message : "no controller_term in its status");
    hc_http_response_clear(&resp);
    return 0;
}

int hc_backup_fence_catch_up(const struct hc_controller *ctl, struct hc_error *err)
{
    char marker[1200];
    snprintf(marker, sizeof(marker), "%s/%s", ctl->data_dir, HC_BACKUP_MARKER);
    if (access(marker, F_OK) < 0)
        return 0;
    struct hc_db *db = hc_db_open(ctl->db_path, err);
    if (!db)
        return -1;
    int rc = -1;
    struct hc_node_row *nodes = NULL;
    size_t nnodes = 0;
    json_t *gen = NULL;
    struct catch_up c = {.ctl = ctl};
    if (hc_nodes_rows(db, NULL, &nodes, &nnodes, err) < 0 ||
        !(gen = hc_db_query_json(db, err, "SELECT generation FROM fence_generation", "")))
        goto cleanup;
    if (nnodes && !(c.terms = calloc(nnodes, sizeof(*c.terms)))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    c.nodes = nodes;
    /* Before anything else runs, once: a node that does not answer costs one agent timeout,
     * CATCH_UP_PARALLEL of them at a time. */
    hc_parallel_for(nnodes, CATCH_UP_PARALLEL, ask_term, &c);
    int64_t stored = json_integer_value(json_object_get(json_array_get(gen, 0), "generation"));
    int64_t highest = stored;
    size_t missing = 0;
    for (size_t i = 0; i < nnodes; i++) {
        if (c.terms[i] < 0)
            missing++;
        else if (c.terms[i] > highest)
            highest = c.terms[i];
    }
    if (highest > stored && hc_fence_generation_store(db, highest, err) < 0)
        goto cleanup;
    HC_INFO("after the restore: the highest controller_term of %zu nodes is %lld; generation %lld "
            "-> %lld",
            nnodes - missing, (long long)highest, (long long)stored, (long long)highest);
    if (missing)
        HC_WARN("%zu nodes did not answer: %s stays, the next 'hcctld run' asks them again",
                missing, marker);
    else if (unlink(marker) < 0)
        HC_WARN("cannot remove '%s': %s", marker, strerror(errno));
    rc = 0;
cleanup:
    for (int w = 0; w < CATCH_UP_PARALLEL; w++) {
        hc_http_client_free(c.client[w]);
        hc_db_close(c.db[w]);
    }
    free(c.terms);
    hc_node_rows_free(nodes, nnodes);
    json_decref(gen);
    hc_db_close(db);
    return rc;
}
