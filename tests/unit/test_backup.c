/* Unit tests of hcctld backup and restore (controller/backup.c): a round trip keeps every file
 * and mode; hostile archives (truncated, a flipped byte, a newer schema or format, a traversal
 * or absolute entry, a symlink, a device, an extra or missing entry, a huge manifest, plain tar)
 * are refused with their own message and leave the target as it was; a non-empty target needs
 * --force, one an hcctld holds is refused; an HA data directory is refused with the way to back
 * it up. Hostile archives are made by repacking a real backup with one change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"
#include "controller/backup.h"
#include "controller/init.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

struct fixture {
    char *tmp;
    char data_dir[1100];
    char archive[1100];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    f->tmp = hc_test_mkdtemp("backup");
    assert_non_null(f->tmp);
    snprintf(f->data_dir, sizeof(f->data_dir), "%s/data", f->tmp);
    snprintf(f->archive, sizeof(f->archive), "%s/backup.tgz", f->tmp);
    char cli[1200], bundles[1200];
    snprintf(cli, sizeof(cli), "%s/cli.json", f->tmp);
    struct hc_init_options o = {.data_dir = f->data_dir, .cli_config = cli};
    struct hc_init_result res;
    struct hc_error err = {0};
    if (hc_init_run(&o, &res, &err) < 0)
        fail_msg("init: %s", err.message);
    /* An uploaded bundle, so that bundles/ is backed up with something in it. */
    snprintf(bundles, sizeof(bundles), "%s/bundles/ab", f->data_dir);
    assert_int_equal(hc_mkdir_p(bundles, 0700, NULL), 0);
    strcat(bundles, "/x.tar.gz");
    hc_test_write_text(bundles, "bundle bytes", 0600);
    struct hc_backup_info info;
    if (hc_backup_create(f->data_dir, f->archive, &info, &err) < 0)
        fail_msg("backup: %s", err.message);
    assert_string_equal(info.cluster_id, res.cluster_id);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_test_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

/* ---------------------------------------------------------------- repacking */

struct item {
    char path[1100];
    mode_t type;
    int perm;
    char *data;
    size_t len;
    char link[256];
};

struct pack {
    struct item items[64];
    size_t n;
};

static void pack_read(const char *path, struct pack *p)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e;
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
    p->n = 0;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        assert_true(p->n < 64);
        struct item *it = &p->items[p->n++];
        memset(it, 0, sizeof(*it));
        snprintf(it->path, sizeof(it->path), "%s", archive_entry_pathname(e));
        it->type = archive_entry_filetype(e);
        it->perm = (int)archive_entry_perm(e);
        it->len = (size_t)archive_entry_size(e);
        it->data = malloc(it->len + 1);
        assert_int_equal(archive_read_data(a, it->data, it->len), (la_ssize_t)it->len);
        it->data[it->len] = '\0';
    }
    archive_read_free(a);
}

static void pack_write(const char *path, const struct pack *p, int gzip)
{
    struct archive *a = archive_write_new();
    if (gzip)
        archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (size_t i = 0; i < p->n; i++) {
        const struct item *it = &p->items[i];
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, it->path);
        archive_entry_set_filetype(e, it->type);
        archive_entry_set_perm(e, (mode_t)it->perm);
        archive_entry_set_size(e, it->type == AE_IFREG ? (la_int64_t)it->len : 0);
        if (it->type == AE_IFLNK)
            archive_entry_set_symlink(e, it->link);
        if (it->type == AE_IFCHR)
            archive_entry_set_rdev(e, makedev(1, 3));
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        if (it->type == AE_IFREG && it->len)
            assert_int_equal(archive_write_data(a, it->data, it->len), (la_ssize_t)it->len);
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static void pack_free(struct pack *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i].data);
}

static void item_set(struct item *it, const char *data, size_t len)
{
    free(it->data);
    it->data = malloc(len + 1);
    memcpy(it->data, data, len);
    it->data[len] = '\0';
    it->len = len;
}

static struct item *pack_find(struct pack *p, const char *path)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->items[i].path, path) == 0)
            return &p->items[i];
    fail_msg("no entry '%s'", path);
    return NULL;
}

static struct item *pack_add(struct pack *p, const char *path, mode_t type, const char *data)
{
    struct item *it = &p->items[p->n++];
    memset(it, 0, sizeof(*it));
    snprintf(it->path, sizeof(it->path), "%s", path);
    it->type = type;
    it->perm = type == AE_IFDIR ? 0700 : 0600;
    item_set(it, data ? data : "", data ? strlen(data) : 0);
    return it;
}

/* The manifest as JSON (the caller changes it and puts it back with manifest_set). */
static json_t *manifest_get(struct pack *p)
{
    json_t *m = json_loads(pack_find(p, HC_BACKUP_MANIFEST)->data, 0, NULL);
    assert_non_null(m);
    return m;
}

static void manifest_set(struct pack *p, json_t *m)
{
    char *text = json_dumps(m, 0);
    item_set(pack_find(p, HC_BACKUP_MANIFEST), text, strlen(text));
    free(text);
    json_decref(m);
}

/* Lists path in the manifest as a file with data's size and sha256. */
static void manifest_add_file(struct pack *p, const char *path, const char *data)
{
    json_t *m = manifest_get(p);
    char hex[65];
    hc_sha256_hex(data, strlen(data), hex);
    json_array_append_new(json_object_get(m, "entries"),
                          json_pack("{s:s,s:s,s:i,s:I,s:s}", "path", path, "type", "file", "mode",
                                    0600, "size", (json_int_t)strlen(data), "sha256", hex));
    manifest_set(p, m);
}

/* Restores `hostile` into a fresh target: it must fail with code and a message holding
 * expect, and leave neither the target nor a temporary directory beside it. */
static void assert_refused(struct fixture *f, const char *hostile, const char *code,
                           const char *expect)
{
    char target[1200];
    snprintf(target, sizeof(target), "%s/target", f->tmp);
    struct hc_backup_info info;
    struct hc_error err = {0};
    assert_int_equal(hc_backup_restore(hostile, target, 0, &info, &err), -1);
    if (strcmp(err.code, code) != 0 || !strstr(err.message, expect))
        fail_msg("wanted %s '%s', got %s '%s'", code, expect, err.code, err.message);
    assert_int_not_equal(access(target, F_OK), 0);
    DIR *d = opendir(f->tmp);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "target.restore-", 15) == 0)
            fail_msg("left behind: %s", de->d_name);
    closedir(d);
}

static void write_bytes(const char *path, const char *data, size_t len)
{
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, data, len, 0600, &err), 0);
}

static void hostile_path(struct fixture *f, char *buf, size_t len)
{
    snprintf(buf, len, "%s/hostile.tgz", f->tmp);
}

/* ---------------------------------------------------------------- tests */

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    assert_int_equal(stat(f->archive, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char target[1200], a[1300], b[1300];
    snprintf(target, sizeof(target), "%s/restored", f->tmp);
    struct hc_backup_info info;
    struct hc_error err = {0};
    if (hc_backup_restore(f->archive, target, 0, &info, &err) < 0)
        fail_msg("restore: %s", err.message);
    assert_int_equal(info.schema, hc_db_latest_version());
    const char *same[] = {"ca.pem",          "ca.key",         "server.key",         "client.key",
                          "controller.json", "ssh/id_ed25519", "bundles/ab/x.tar.gz"};
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        snprintf(a, sizeof(a), "%s/%s", f->data_dir, same[i]);
        snprintf(b, sizeof(b), "%s/%s", target, same[i]);
        char *ta = hc_test_file_text(a), *tb = hc_test_file_text(b);
        assert_non_null(tb);
        assert_string_equal(ta, tb);
        struct stat sa, sb;
        assert_int_equal(stat(a, &sa), 0);
        assert_int_equal(stat(b, &sb), 0);
        assert_int_equal(sa.st_mode & 0777, sb.st_mode & 0777);
        free(ta);
        free(tb);
    }
    snprintf(b, sizeof(b), "%s/ca.key", target);
    assert_int_equal(stat(b, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(b, sizeof(b), "%s/admin.token", target);
    assert_int_not_equal(access(b, F_OK), 0); /* never in a backup */
    snprintf(b, sizeof(b), "%s/%s", target, HC_BACKUP_MARKER);
    assert_int_equal(access(b, F_OK), 0);
    /* The database opens and is the cluster's. */
    snprintf(b, sizeof(b), "%s/hcctld.db", target);
    struct hc_db *db = hc_db_open(b, &err);
    assert_non_null(db);
    assert_int_equal(
        hc_test_db_count(db, "SELECT count(*) AS n FROM clusters WHERE id = ?", info.cluster_id),
        1);
    hc_db_close(db);
}

/* An archive that says 0644 for a private key restores it 0600 all the same; 0666 is never
 * restored world-writable. */
static void test_modes_forced(void **state)
{
    struct fixture *f = *state;
    char hostile[1200], target[1200], path[1300];
    struct pack p;
    pack_read(f->archive, &p);
    json_t *m = manifest_get(&p);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(m, "entries"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "path"));
        if (strcmp(name, "ca.key") == 0 || strcmp(name, "ssh/id_ed25519") == 0)
            json_object_set_new(e, "mode", json_integer(0644));
        if (strcmp(name, "ca.pem") == 0)
            json_object_set_new(e, "mode", json_integer(0666));
    }
    manifest_set(&p, m);
    hostile_path(f, hostile, sizeof(hostile));
    pack_write(hostile, &p, 1);
    pack_free(&p);
    snprintf(target, sizeof(target), "%s/modes", f->tmp);
    struct hc_backup_info info;
    struct hc_error err = {0};
    if (hc_backup_restore(hostile, target, 0, &info, &err) < 0)
        fail_msg("restore: %s", err.message);
    const char *files[] = {"ca.key", "ssh/id_ed25519", "ca.pem"};
    const int want[] = {0600, 0600, 0644};
    for (int k = 0; k < 3; k++) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", target, files[k]);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, want[k]);
    }
}

static void test_truncated(void **state)
{
    struct fixture *f = *state;
    char *data = NULL, hostile[1200];
    size_t len = 0;
    assert_int_equal(hc_file_read(f->archive, &data, &len, NULL), 0);
    hostile_path(f, hostile, sizeof(hostile));
    size_t cuts[] = {10, len / 2, len - 10};
    for (size_t i = 0; i < 3; i++) {
        write_bytes(hostile, data, cuts[i]);
        assert_refused(f, hostile, "backup_invalid", "truncated");
    }
    free(data);
}

static void test_flipped_byte(void **state)
{
    struct fixture *f = *state;
    char *data = NULL, hostile[1200];
    size_t len = 0;
    assert_int_equal(hc_file_read(f->archive, &data, &len, NULL), 0);
    hostile_path(f, hostile, sizeof(hostile));
    /* Every eighth byte flipped, one at a time: the gzip CRC or the sha256 catches each. */
    for (size_t at = 20; at < len; at += len / 8) {
        data[at] ^= 0x40;
        write_bytes(hostile, data, len);
        char target[1200];
        snprintf(target, sizeof(target), "%s/target", f->tmp);
        struct hc_backup_info info;
        struct hc_error err = {0};
        if (hc_backup_restore(hostile, target, 0, &info, &err) == 0)
            fail_msg("a byte flipped at %zu was restored", at);
        assert_string_equal(err.code, "backup_invalid");
        assert_int_not_equal(access(target, F_OK), 0);
        data[at] ^= 0x40;
    }
    free(data);
}

/* A file's content changed with the manifest left as it was: the sha256 catches it. */
static void test_content_differs(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    struct pack p;
    pack_read(f->archive, &p);
    struct item *it = pack_find(&p, "ca.key");
    it->data[10] ^= 1;
    hostile_path(f, hostile, sizeof(hostile));
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "'ca.key' is not the file the manifest");
    pack_free(&p);
}

static void test_newer_schema(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    struct pack p;
    pack_read(f->archive, &p);
    json_t *m = manifest_get(&p);
    json_object_set_new(m, "schema_version", json_integer(hc_db_latest_version() + 1));
    manifest_set(&p, m);
    hostile_path(f, hostile, sizeof(hostile));
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "schema_too_new", "newer than this hcctld's");
    pack_free(&p);

    pack_read(f->archive, &p);
    m = manifest_get(&p);
    json_object_set_new(m, "format", json_integer(HC_BACKUP_FORMAT + 1));
    manifest_set(&p, m);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "schema_too_new", "the archive's format is 2");
    pack_free(&p);
}

/* The manifest claims the current schema, the database holds a lower one. */
static void test_schema_lie(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    struct pack p;
    pack_read(f->archive, &p);
    json_t *m = manifest_get(&p);
    json_object_set_new(m, "schema_version", json_integer(hc_db_latest_version() - 1));
    manifest_set(&p, m);
    hostile_path(f, hostile, sizeof(hostile));
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "the manifest says");
    pack_free(&p);
}

static void test_unsafe_entries(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    hostile_path(f, hostile, sizeof(hostile));
    const char *paths[] = {"../evil", "/etc/evil", "bundles/../../evil", "./../evil"};
    for (size_t i = 0; i < 4; i++) {
        struct pack p;
        pack_read(f->archive, &p);
        pack_add(&p, paths[i], AE_IFREG, "x");
        pack_write(hostile, &p, 1);
        assert_refused(f, hostile, "backup_invalid", "absolute path, '.' or '..'");
        pack_free(&p);
    }
    /* A symlink and a device, even listed in the manifest. */
    struct pack p;
    pack_read(f->archive, &p);
    manifest_add_file(&p, "bundles/link", "");
    snprintf(pack_add(&p, "bundles/link", AE_IFLNK, NULL)->link, 256, "/etc/passwd");
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "not a regular file or directory");
    pack_free(&p);
    pack_read(f->archive, &p);
    pack_add(&p, "bundles/null", AE_IFCHR, NULL);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "not a regular file or directory");
    pack_free(&p);
    /* The manifest itself naming a path outside the allowed set. */
    pack_read(f->archive, &p);
    manifest_add_file(&p, "hcctld.lock", "1");
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "invalid or repeated path 'hcctld.lock'");
    pack_free(&p);
}

static void test_extra_and_missing(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    hostile_path(f, hostile, sizeof(hostile));
    struct pack p;
    pack_read(f->archive, &p);
    pack_add(&p, "bundles/extra", AE_IFREG, "more");
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "'bundles/extra' is not in the manifest");
    pack_free(&p);

    pack_read(f->archive, &p);
    manifest_add_file(&p, "bundles/gone", "gone");
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "lacks 'bundles/gone'");
    pack_free(&p);

    /* An entry twice. */
    pack_read(f->archive, &p);
    struct item *ca = pack_find(&p, "ca.pem");
    pack_add(&p, "ca.pem", AE_IFREG, NULL);
    item_set(&p.items[p.n - 1], ca->data, ca->len);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "'ca.pem' appears twice");
    pack_free(&p);

    /* A manifest without the database. */
    pack_read(f->archive, &p);
    json_t *m = manifest_get(&p);
    json_t *entries = json_object_get(m, "entries");
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "path")), "hcctld.db") == 0) {
            json_array_remove(entries, i);
            break;
        }
    }
    manifest_set(&p, m);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "does not list 'hcctld.db'");
    pack_free(&p);
}

static void test_bad_manifest(void **state)
{
    struct fixture *f = *state;
    char hostile[1200];
    hostile_path(f, hostile, sizeof(hostile));
    struct pack p;
    /* Huge. */
    pack_read(f->archive, &p);
    size_t big = HC_BACKUP_MANIFEST_MAX + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    item_set(pack_find(&p, HC_BACKUP_MANIFEST), text, big);
    free(text);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "manifest.json must hold 1 to");
    pack_free(&p);
    /* Not JSON. */
    pack_read(f->archive, &p);
    item_set(pack_find(&p, HC_BACKUP_MANIFEST), "{nope", 5);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "manifest.json is not a JSON object");
    pack_free(&p);
    /* Not first. */
    pack_read(f->archive, &p);
    struct item first = p.items[0];
    p.items[0] = p.items[1];
    p.items[1] = first;
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "first entry is not manifest.json");
    pack_free(&p);
    /* A bad sha256. */
    pack_read(f->archive, &p);
    json_t *m = manifest_get(&p);
    json_object_set_new(json_array_get(json_object_get(m, "entries"), 0), "sha256",
                        json_string("zz"));
    manifest_set(&p, m);
    pack_write(hostile, &p, 1);
    assert_refused(f, hostile, "backup_invalid", "has no valid size and sha256");
    pack_free(&p);
    /* Plain tar, no gzip. */
    pack_read(f->archive, &p);
    pack_write(hostile, &p, 0);
    assert_refused(f, hostile, "backup_invalid", "not gzip-compressed");
    pack_free(&p);
    /* Not an archive at all; missing. */
    hc_test_write_text(hostile, "hello", 0600);
    assert_refused(f, hostile, "backup_invalid", "not a tar.gz archive");
    unlink(hostile);
    assert_refused(f, hostile, "io_error", "cannot read");
}

static void test_target_rules(void **state)
{
    struct fixture *f = *state;
    struct hc_backup_info info;
    struct hc_error err = {0};
    char target[1200], file[1300];
    snprintf(target, sizeof(target), "%s/busy", f->tmp);
    assert_int_equal(mkdir(target, 0700), 0);
    snprintf(file, sizeof(file), "%s/keep", target);
    hc_test_write_text(file, "old", 0600);
    assert_int_equal(hc_backup_restore(f->archive, target, 0, &info, &err), -1);
    assert_string_equal(err.code, "conflict");
    assert_non_null(strstr(err.message, "is not empty"));
    assert_int_equal(access(file, F_OK), 0);
    /* A running hcctld (its lock held) is refused even with --force. */
    snprintf(file, sizeof(file), "%s/hcctld.lock", target);
    hc_test_write_text(file, "4242\n", 0644);
    int fd = open(file, O_RDWR);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    memset(&err, 0, sizeof(err));
    assert_int_equal(hc_backup_restore(f->archive, target, 1, &info, &err), -1);
    assert_string_equal(err.code, "conflict");
    assert_non_null(strstr(err.message, "an hcctld (pid 4242) runs on"));
    close(fd);
    /* A bad archive with --force leaves the old directory as it was. */
    char hostile[1200];
    hostile_path(f, hostile, sizeof(hostile));
    hc_test_write_text(hostile, "hello", 0600);
    memset(&err, 0, sizeof(err));
    assert_int_equal(hc_backup_restore(hostile, target, 1, &info, &err), -1);
    snprintf(file, sizeof(file), "%s/keep", target);
    assert_int_equal(access(file, F_OK), 0);
    /* --force replaces everything. */
    memset(&err, 0, sizeof(err));
    if (hc_backup_restore(f->archive, target, 1, &info, &err) < 0)
        fail_msg("restore --force: %s", err.message);
    assert_int_not_equal(access(file, F_OK), 0);
    snprintf(file, sizeof(file), "%s/ca.key", target);
    assert_int_equal(access(file, F_OK), 0);
}

static void test_ha_refused(void **state)
{
    struct fixture *f = *state;
    char path[1200];
    snprintf(path, sizeof(path), "%s/controller.json", f->data_dir);
    char *text = hc_test_file_text(path);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    json_object_set_new(j, "ha_etcd", json_string("https://127.0.0.1:2379"));
    text = json_dumps(j, 0);
    hc_test_write_text(path, text, 0644);
    free(text);
    json_decref(j);
    char out[1200];
    snprintf(out, sizeof(out), "%s/ha.tgz", f->tmp);
    struct hc_backup_info info;
    struct hc_error err = {0};
    assert_int_equal(hc_backup_create(f->data_dir, out, &info, &err), -1);
    assert_non_null(strstr(err.message, "HA controller"));
    assert_non_null(strstr(err.hint, "hcctld ha export"));
    assert_int_not_equal(access(out, F_OK), 0);
}

static void test_output_refused(void **state)
{
    struct fixture *f = *state;
    struct hc_backup_info info;
    char out[1300];
    const char *inside[] = {"/b.tgz", "/bundles/b.tgz", "/ssh/../b.tgz"};
    for (int i = 0; i < 3; i++) {
        struct hc_error err = {0};
        snprintf(out, sizeof(out), "%s%s", f->data_dir, inside[i]);
        assert_int_equal(hc_backup_create(f->data_dir, out, &info, &err), -1);
        assert_string_equal(err.code, "invalid_argument");
        assert_non_null(strstr(err.message, "is inside the data directory"));
        assert_int_not_equal(access(out, F_OK), 0);
    }
    struct hc_error err = {0};
    snprintf(out, sizeof(out), "%s/no/such/dir/b.tgz", f->tmp);
    assert_int_equal(hc_backup_create(f->data_dir, out, &info, &err), -1);
    assert_non_null(strstr(err.message, "its directory"));
    /* Nothing left behind beside the good archive either. */
    DIR *d = opendir(f->tmp);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp."))
            fail_msg("left behind: %s", de->d_name);
    closedir(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_forced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_content_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_lie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsafe_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extra_and_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_manifest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_target_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ha_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
