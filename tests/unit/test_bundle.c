/*
 * Unit tests for software bundles (common/bundle*.c): keys, signature lines, opening with every
 * kind of refusal (bad signature, untrusted key, checksum, corrupt gzip, truncation, missing or
 * invalid manifest, unsafe entries), safe extraction, building, and the manifest schema with its
 * settings (what ties them to the reload hook and the placeholders; the settings' own schema is
 * test_settings.c's).
 *
 * Archives with hostile contents are written here with libarchive directly (the builder would
 * refuse to make them) and signed with the trusted key, so that each test reaches the check it
 * is about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/pki.h"
#include "common/settings.h"
#include "common/util.h"

struct env {
    char dir[512];
    char key[600], pub[600], other_key[600], other_pub[600];
    char src[600];      /* a bundle directory */
    char manifest[600]; /* a valid manifest file */
    char out[600];      /* the built bundle */
    struct hc_bundle_keys *keys;
};

static const char good_manifest[] =
    "{\"name\":\"svc\",\"version\":\"1.0\",\"min_upgrade_from\":null,"
    "\"entrypoint\":\"bin/svc\",\"args\":[\"--port\",\"7480\"],"
    "\"health\":{\"http\":\"http://127.0.0.1:7480/health\",\"timeout_ms\":2000},"
    "\"ok_to_stop\":{\"command\":[\"bin/svc\",\"--ok\"]},"
    "\"drain\":{\"http\":\"http://127.0.0.1:7480/drain\"},"
    "\"resync_status\":{\"http\":\"http://127.0.0.1:7480/resync\"},"
    "\"limits\":{\"cpu_percent\":50,\"memory_mb\":256}}";

static void write_text(const char *path, const char *text, int mode)
{
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, text, strlen(text), mode, &err), 0);
}

static void path_in(char *out, size_t len, const struct env *e, const char *name)
{
    snprintf(out, len, "%s/%s", e->dir, name);
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    struct hc_error err = {0};
    const char *tmp = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    char prefix[600], bin[700];
    mkdir(tmp, 0755);
    snprintf(e->dir, sizeof(e->dir), "%s/bundle.XXXXXX", tmp);
    assert_non_null(mkdtemp(e->dir));
    path_in(prefix, sizeof(prefix), e, "dev");
    assert_int_equal(hc_bundle_keygen(prefix, NULL, &err), 0);
    snprintf(e->key, sizeof(e->key), "%s.key", prefix);
    snprintf(e->pub, sizeof(e->pub), "%s.pub", prefix);
    path_in(prefix, sizeof(prefix), e, "other");
    assert_int_equal(hc_bundle_keygen(prefix, NULL, &err), 0);
    snprintf(e->other_key, sizeof(e->other_key), "%s.key", prefix);
    snprintf(e->other_pub, sizeof(e->other_pub), "%s.pub", prefix);
    path_in(e->src, sizeof(e->src), e, "src");
    snprintf(bin, sizeof(bin), "%s/bin", e->src);
    assert_int_equal(hc_mkdir_p(bin, 0755, &err), 0);
    snprintf(bin, sizeof(bin), "%s/bin/svc", e->src);
    write_text(bin, "#!/bin/sh\necho hello\n", 0755);
    snprintf(bin, sizeof(bin), "%s/README", e->src);
    write_text(bin, "a service\n", 0644);
    path_in(e->manifest, sizeof(e->manifest), e, "manifest.json");
    write_text(e->manifest, good_manifest, 0644);
    path_in(e->out, sizeof(e->out), e, "svc-1.0.tar.gz");
    assert_int_equal(hc_bundle_build(e->manifest, e->src, e->key, e->out, NULL, &err), 0);
    e->keys = hc_bundle_keys_new();
    assert_int_equal(hc_bundle_keys_add_file(e->keys, e->pub, &err), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    hc_bundle_keys_free(e->keys);
    hc_bundle_rmtree(e->dir);
    free(e);
    return 0;
}

/* noinline: inlined, GCC 12 at -O2 takes the returned buffer for the local `data` itself and
 * warns of a dangling pointer (-Wdangling-pointer false positive). */
static __attribute__((noinline)) char *read_all(const char *path, size_t *len)
{
    char *data = NULL;
    struct hc_error err = {0};
    assert_int_equal(hc_file_read(path, &data, len, &err), 0);
    return data;
}

/* Signs data with the trusted key and opens it; returns the bundle or NULL with err. */
static struct hc_bundle *open_signed(struct env *e, const void *data, size_t len,
                                     struct hc_error *err)
{
    struct hc_error kerr = {0};
    char line[HC_BUNDLE_SIG_MAX];
    EVP_PKEY *key = hc_bundle_private_key_load(e->key, &kerr);
    assert_non_null(key);
    assert_int_equal(hc_bundle_sign(key, data, len, line, &kerr), 0);
    EVP_PKEY_free(key);
    return hc_bundle_open(data, len, line, e->keys, err);
}

/* ---------------------------------------------------------------- hand-made archives */

struct entry {
    const char *path;
    mode_t type;
    const char *data;   /* regular files */
    const char *target; /* symlinks */
    const char *hard;   /* hard links */
};

static unsigned char *make_archive(const struct entry *entries, int gzip, size_t *len)
{
    size_t cap = 1 << 20;
    unsigned char *buf = malloc(cap);
    struct archive *w = archive_write_new();
    if (gzip)
        archive_write_add_filter_gzip(w);
    archive_write_set_format_pax_restricted(w);
    assert_int_equal(archive_write_open_memory(w, buf, cap, len), ARCHIVE_OK);
    for (const struct entry *x = entries; x->path; x++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, x->path);
        archive_entry_set_filetype(ae, x->type);
        archive_entry_set_perm(ae, x->type == AE_IFDIR ? 0755 : 04777);
        if (x->target)
            archive_entry_set_symlink(ae, x->target);
        if (x->hard)
            archive_entry_set_hardlink(ae, x->hard);
        archive_entry_set_size(ae, x->data ? (la_int64_t)strlen(x->data) : 0);
        assert_int_equal(archive_write_header(w, ae), ARCHIVE_OK);
        if (x->data)
            archive_write_data(w, x->data, strlen(x->data));
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(w), ARCHIVE_OK);
    archive_write_free(w);
    return buf;
}

#define MANIFEST_ENTRY                                                                             \
    {                                                                                              \
        "manifest.json", AE_IFREG, good_manifest, NULL, NULL                                       \
    }
#define SVC_ENTRY                                                                                  \
    {                                                                                              \
        "bin/svc", AE_IFREG, "#!/bin/sh\n", NULL, NULL                                             \
    }
#define END_ENTRY                                                                                  \
    {                                                                                              \
        NULL, 0, NULL, NULL, NULL                                                                  \
    }

/* Opens a hand-made, correctly signed archive and expects the refusal code (and a message
 * fragment); NULL code means it must open. */
static void expect_open(struct env *e, const struct entry *entries, int gzip, const char *code,
                        const char *fragment)
{
    size_t len = 0;
    unsigned char *data = make_archive(entries, gzip, &len);
    struct hc_error err = {0};
    struct hc_bundle *b = open_signed(e, data, len, &err);
    if (!code) {
        assert_non_null(b);
    } else {
        assert_null(b);
        assert_string_equal(err.code, code);
        assert_int_equal(err.status, 400);
        if (!strstr(err.message, fragment))
            fail_msg("message '%s' lacks '%s'", err.message, fragment);
    }
    hc_bundle_free(b);
    free(data);
}

/* ---------------------------------------------------------------- tests */

static void test_good_bundle(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    struct hc_bundle *b = hc_bundle_open_file(e->out, NULL, e->keys, &err);
    assert_non_null(b);
    const struct hc_bundle_info *info = hc_bundle_info(b);
    assert_string_equal(info->name, "svc");
    assert_string_equal(info->version, "1.0");
    assert_string_equal(info->signed_by, "dev");
    assert_int_equal(info->entries, 4); /* manifest.json, bin, bin/svc, README */
    size_t len;
    char *raw = read_all(e->out, &len), hex[65];
    hc_sha256_hex(raw, len, hex);
    assert_string_equal(info->sha256, hex);
    assert_int_equal(info->size, len);
    free(raw);
    assert_string_equal(json_string_value(json_object_get(hc_bundle_manifest(b), "entrypoint")),
                        "bin/svc");
    char dest[700], file[800];
    struct stat st;
    path_in(dest, sizeof(dest), e, "extract");
    assert_int_equal(hc_bundle_extract(b, dest, &err), 0);
    snprintf(file, sizeof(file), "%s/bin/svc", dest);
    assert_int_equal(stat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode) && (st.st_mode & 0100));
    snprintf(file, sizeof(file), "%s/manifest.json", dest);
    assert_int_equal(stat(file, &st), 0);
    /* Extracting over an existing directory is refused. */
    assert_int_equal(hc_bundle_extract(b, dest, &err), -1);
    hc_bundle_free(b);
}

/* The built bundle (e->out) and its signature line, both malloc'd. */
static char *read_signed(struct env *e, size_t *dlen, char **sig)
{
    size_t slen;
    char sigpath[700];
    snprintf(sigpath, sizeof(sigpath), "%s.sig", e->out);
    *sig = read_all(sigpath, &slen);
    return read_all(e->out, dlen);
}

static void test_bad_signature(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    size_t dlen;
    char *sig = NULL;
    char *data = read_signed(e, &dlen, &sig);
    /* Change one base64 character of the signature (not the padding). */
    char *b64 = strrchr(sig, ' ') + 1;
    b64[10] = b64[10] == 'A' ? 'B' : 'A';
    assert_null(hc_bundle_open(data, dlen, sig, e->keys, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_SIGNATURE);
    assert_non_null(strstr(err.message, "does not verify"));
    /* Malformed lines are refused as such. */
    assert_null(hc_bundle_open(data, dlen, "hcsig1 nonsense", e->keys, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_SIGNATURE);
    assert_non_null(strstr(err.message, "malformed"));
    assert_null(hc_bundle_open(data, dlen, NULL, e->keys, &err));
    free(data);
    free(sig);
}

static void test_untrusted_key(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    char out[700];
    path_in(out, sizeof(out), e, "other.tar.gz");
    assert_int_equal(hc_bundle_build(e->manifest, e->src, e->other_key, out, NULL, &err), 0);
    assert_null(hc_bundle_open_file(out, NULL, e->keys, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_SIGNATURE);
    assert_non_null(strstr(err.message, "not trusted"));
    /* Trusting that key too makes it open. */
    assert_int_equal(hc_bundle_keys_add_file(e->keys, e->other_pub, &err), 0);
    assert_int_equal(hc_bundle_keys_count(e->keys), 2);
    struct hc_bundle *b = hc_bundle_open_file(out, NULL, e->keys, &err);
    assert_non_null(b);
    assert_string_equal(hc_bundle_info(b)->signed_by, "other");
    hc_bundle_free(b);
    /* No keys at all: refused with its own code. */
    struct hc_bundle_keys *none = hc_bundle_keys_new();
    assert_null(hc_bundle_open_file(out, NULL, none, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_NO_KEYS);
    hc_bundle_keys_free(none);
}

static void test_truncated(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    size_t dlen;
    char *sig = NULL;
    char *data = read_signed(e, &dlen, &sig);
    /* With its original signature: the checksum no longer matches. */
    assert_null(hc_bundle_open(data, dlen / 2, sig, e->keys, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_CHECKSUM);
    assert_non_null(strstr(err.message, "checksum mismatch"));
    /* Signed as it is: libarchive finds the truncation. */
    assert_null(open_signed(e, data, dlen / 2, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_CORRUPT);
    free(data);
    free(sig);
}

static void test_corrupt_gzip(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    size_t dlen;
    char *data = read_all(e->out, &dlen);
    for (size_t i = 20; i < 60 && i < dlen; i++)
        data[i] ^= 0x5a;
    assert_null(open_signed(e, data, dlen, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_CORRUPT);
    /* Not compressed at all. */
    memcpy(data, "not a tarball at all", 20);
    assert_null(open_signed(e, data, 20, &err));
    assert_string_equal(err.code, HC_BUNDLE_ERR_CORRUPT);
    free(data);
    const struct entry plain[] = {MANIFEST_ENTRY, SVC_ENTRY, END_ENTRY};
    expect_open(e, plain, 0, HC_BUNDLE_ERR_CORRUPT, "not gzip");
}

static void test_missing_manifest(void **state)
{
    const struct entry none[] = {SVC_ENTRY, END_ENTRY};
    expect_open(*state, none, 1, HC_BUNDLE_ERR_MANIFEST, "no manifest.json");
    const struct entry nested[] = {
        {"sub/manifest.json", AE_IFREG, good_manifest, NULL, NULL}, SVC_ENTRY, END_ENTRY};
    expect_open(*state, nested, 1, HC_BUNDLE_ERR_MANIFEST, "no manifest.json");
    const struct entry notjson[] = {
        {"manifest.json", AE_IFREG, "{name", NULL, NULL}, SVC_ENTRY, END_ENTRY};
    expect_open(*state, notjson, 1, HC_BUNDLE_ERR_MANIFEST, "not a JSON object");
    const struct entry noentry[] = {MANIFEST_ENTRY, END_ENTRY};
    expect_open(*state, noentry, 1, HC_BUNDLE_ERR_MANIFEST, "entrypoint 'bin/svc' is not in");
    /* "./"-prefixed paths (tar -C dir .) are the same bundle. */
    const struct entry dotted[] = {{"./", AE_IFDIR, NULL, NULL, NULL},
                                   {"./manifest.json", AE_IFREG, good_manifest, NULL, NULL},
                                   {"./bin/svc", AE_IFREG, "#!/bin/sh\n", NULL, NULL},
                                   END_ENTRY};
    expect_open(*state, dotted, 1, NULL, NULL);
}

static void test_manifest_missing_fields(void **state)
{
    static const struct {
        const char *json;
        const char *fragment;
    } cases[] = {
        {"{\"version\":\"1.0\",\"entrypoint\":\"bin/svc\",\"health\":{\"http\":\"http://x\"},"
         "\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'name'"},
        {"{\"name\":\"svc\",\"entrypoint\":\"bin/svc\",\"health\":{\"http\":\"http://x\"},"
         "\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'version'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"health\":{\"http\":\"http://x\"},"
         "\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'entrypoint' is missing"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
         "\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'health' is missing"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
         "\"health\":{\"http\":\"http://x\"}}",
         "'ok_to_stop' is missing"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\",\"helth\":1,"
         "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "unknown key 'helth'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
         "\"health\":{\"http\":\"http://x\",\"timeout_ms\":0},\"ok_to_stop\":{\"http\":\"http://"
         "x\"}}",
         "'health.timeout_ms'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
         "\"health\":{\"http\":\"http://x\",\"command\":[\"a\"]},\"ok_to_stop\":{\"http\":\"http://"
         "x\"}}",
         "exactly one"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"../svc\","
         "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'entrypoint' must be a relative path"},
        {"{\"name\":\"svc\",\"version\":\"../1\",\"entrypoint\":\"bin/svc\","
         "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'version'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\",\"limits\":{\"cpu\":1},"
         "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "unknown key 'limits.cpu'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\",\"args\":[1],"
         "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'args[0]'"},
        {"{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
         "\"health\":{\"http\":\"ftp://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
         "'health.http'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hc_error err = {0};
        json_t *m = json_loads(cases[i].json, 0, NULL);
        assert_non_null(m);
        assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
        assert_string_equal(err.code, HC_BUNDLE_ERR_MANIFEST);
        if (!strstr(err.message, cases[i].fragment))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.message, cases[i].fragment);
        json_decref(m);
    }
    /* The same refusal inside a signed bundle, naming the field. */
    const struct entry bad[] = {
        {"manifest.json", AE_IFREG, cases[3].json, NULL, NULL}, SVC_ENTRY, END_ENTRY};
    expect_open(*state, bad, 1, HC_BUNDLE_ERR_MANIFEST, "'health' is missing");
}

/* A manifest with settings: a reload hook for the live ones, placeholders naming them. */
static const char settings_manifest[] =
    "{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"bin/svc\","
    "\"args\":[\"--log\",\"{setting:log_level}\",\"--config\",\"{settings_file}\","
    "\"--par={setting:resync_parallelism}\",\"{node}\"],"
    "\"health\":{\"http\":\"http://127.0.0.1:7480/health?v={setting:log_level}\"},"
    "\"ok_to_stop\":{\"command\":[\"bin/svc\",\"--ok\",\"{setting:fsync}\"]},"
    "\"reload\":{\"http\":\"http://127.0.0.1:7480/reload\",\"timeout_ms\":5000},"
    "\"settings\":{"
    "\"log_level\":{\"type\":\"enum\",\"values\":[\"debug\",\"info\",\"warn\",\"error\"],"
    "\"default\":\"info\",\"help\":\"what the service logs\",\"apply\":\"live\"},"
    "\"resync_parallelism\":{\"type\":\"int\",\"min\":1,\"max\":64,\"default\":8,"
    "\"help\":\"blocks fetched at once\",\"apply\":\"live\"},"
    "\"fsync\":{\"type\":\"enum\",\"values\":[\"always\",\"batch\"],\"default\":\"always\","
    "\"help\":\"when writes reach the disk\",\"apply\":\"restart\"}}}";

/* settings_manifest with one change: path is "key" or "key.sub" (objects) or "key[i]" (an
 * array's item), value the JSON put there, or NULL to delete it. */
static json_t *settings_variant(const char *path, const char *value)
{
    json_t *m = json_loads(settings_manifest, 0, NULL), *parent = m;
    char key[128];
    assert_non_null(m);
    snprintf(key, sizeof(key), "%s", path);
    char *dot = strchr(key, '.'), *bracket = strchr(key, '[');
    if (dot) {
        *dot = '\0';
        parent = json_object_get(m, key);
        memmove(key, dot + 1, strlen(dot + 1) + 1);
    }
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
    if (bracket && !dot) {
        *bracket = '\0';
        json_array_set_new(json_object_get(m, key), (size_t)atoi(bracket + 1), v);
    } else if (v) {
        json_object_set_new(parent, key, v);
    } else {
        json_object_del(parent, key);
    }
    return m;
}

static void test_manifest_settings(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    json_t *m = json_loads(settings_manifest, 0, NULL);
    assert_int_equal(hc_bundle_manifest_check(m, &err), 0);
    json_decref(m);
    /* Only restart settings: no reload hook needed. */
    m = settings_variant("settings.log_level", NULL);
    json_t *settings = json_object_get(m, "settings");
    json_object_del(settings, "resync_parallelism");
    json_object_del(m, "reload");
    json_array_set_new(json_object_get(m, "args"), 1, json_string("info"));
    json_array_set_new(json_object_get(m, "args"), 4, json_string("--par=8"));
    json_object_set_new(json_object_get(m, "health"), "http",
                        json_string("http://127.0.0.1:7480/health"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), 0);
    json_decref(m);
    /* A reload hook without settings is fine too (a service that rereads its own files). */
    m = settings_variant("settings", NULL);
    json_array_set_new(json_object_get(m, "args"), 1, json_string("info"));
    json_array_set_new(json_object_get(m, "args"), 4, json_string("--par=8"));
    json_object_set_new(json_object_get(m, "health"), "http",
                        json_string("http://127.0.0.1:7480/health"));
    json_object_set_new(json_object_get(m, "ok_to_stop"), "command", json_pack("[s]", "bin/svc"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), 0);
    json_decref(m);

    static const struct {
        const char *path, *value, *message;
    } cases[] = {
        {"reload", NULL,
         "manifest.json: 'settings.log_level' is live, but there is no 'reload' hook to apply it"},
        {"reload", "null", "'settings.log_level' is live, but there is no 'reload' hook"},
        {"args[1]", "\"{setting:fsnc}\"",
         "manifest.json: 'args[1]': {setting:fsnc} names no "
         "setting"},
        {"args[5]", "\"{setting:Log}\"", "'args[5]': a malformed {setting:NAME}"},
        {"health.http", "\"http://h/{setting:nope}\"", "'health.http': {setting:nope} names no"},
        {"ok_to_stop.command", "[\"bin/svc\",\"{setting:log_level\"]",
         "'ok_to_stop.command[1]': a malformed"},
        {"reload.command", "[\"bin/svc\",\"{setting:x}\"]", "'reload' needs exactly one"},
        {"reload.http", NULL, "'reload' needs exactly one of \"http\" and \"command\""},
        {"reload.timeout_ms", "0", "'reload.timeout_ms' must be an integer from 1 to 600000"},
        {"reload.http", "\"ftp://x\"", "'reload.http' must be an http:// URL"},
        {"settings", "[]", "manifest.json: 'settings' must be an object"},
        {"settings.fsync",
         "{\"type\":\"enum\",\"values\":[\"always\",\"batch\"],\"default\":\"sometimes\","
         "\"help\":\"h\",\"apply\":\"restart\"}",
         "manifest.json: 'settings.fsync.default' must be one of always, batch"},
        {"settings.fsync", "{\"type\":\"enum\"}", "'settings.fsync.help'"},
        {"setings", "{}", "unknown key 'setings'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        m = settings_variant(cases[i].path, cases[i].value);
        assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
        assert_string_equal(err.code, HC_BUNDLE_ERR_MANIFEST);
        if (!strstr(err.message, cases[i].message))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.message, cases[i].message);
        json_decref(m);
    }
    /* A hook command may name a setting too, and the whole reload command is checked. */
    m = settings_variant("reload.http", NULL);
    json_object_set_new(json_object_get(m, "reload"), "command",
                        json_pack("[s,s]", "bin/svc", "--level={setting:log_level}"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), 0);
    json_array_set_new(json_object_get(json_object_get(m, "reload"), "command"), 1,
                       json_string("{setting:nope}"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
    assert_non_null(strstr(err.message, "'reload.command[1]': {setting:nope} names no setting"));
    json_decref(m);

    /* Built and opened like any bundle: the schema is read back from the verified manifest. */
    char manifest[700], out[700];
    path_in(manifest, sizeof(manifest), e, "settings.json");
    path_in(out, sizeof(out), e, "svc-settings.tar.gz");
    write_text(manifest, settings_manifest, 0644);
    assert_int_equal(hc_bundle_build(manifest, e->src, e->key, out, NULL, &err), 0);
    struct hc_bundle *b = hc_bundle_open_file(out, NULL, e->keys, &err);
    assert_non_null(b);
    struct hc_settings_schema *schema = hc_settings_schema_of(hc_bundle_manifest(b), &err);
    assert_non_null(schema);
    assert_int_equal(hc_settings_schema_count(schema), 3);
    assert_true(hc_settings_schema_has_live(schema));
    char *arg = hc_settings_render(
        json_string_value(json_array_get(json_object_get(hc_bundle_manifest(b), "args"), 3)),
        schema, NULL, "/d/" HC_SETTINGS_FILE, &err);
    assert_string_equal(arg, "/d/service-settings.json");
    free(arg);
    hc_settings_schema_free(schema);
    hc_bundle_free(b);
    /* The manifest of a bundle without settings has the empty schema. */
    b = hc_bundle_open_file(e->out, NULL, e->keys, &err);
    schema = hc_settings_schema_of(hc_bundle_manifest(b), &err);
    assert_int_equal(hc_settings_schema_count(schema), 0);
    hc_settings_schema_free(schema);
    hc_bundle_free(b);
}

/* Agent bundles (docs/agent-upgrade.md): the hcagent program, none of a service's hooks. */
static void test_manifest_kinds(void **state)
{
    (void)state;
    struct hc_error err = {0};
    json_t *m = json_pack("{s:i, s:s, s:s, s:s, s:s}", "format", 1, "kind", "agent", "name",
                          "hcagent", "version", "0.2.0", "entrypoint", "bin/hcagent");
    assert_int_equal(hc_bundle_manifest_check(m, &err), 0);
    assert_string_equal(hc_bundle_kind(m), HC_BUNDLE_KIND_AGENT);
    json_object_set_new(m, "health", json_pack("{s:s}", "http", "http://x:1/"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
    assert_non_null(strstr(err.message, "unknown key 'health'"));
    json_object_del(m, "health");
    json_object_set_new(m, "entrypoint", json_string("../hcagent"));
    assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
    assert_non_null(strstr(err.message, "'entrypoint'"));
    json_object_set_new(m, "entrypoint", json_string("bin/hcagent"));
    const char *bad[] = {"Agent", "", "services"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_object_set_new(m, "kind", json_string(bad[i]));
        memset(&err, 0, sizeof(err));
        assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
        assert_non_null(strstr(err.message, "'kind' must be"));
    }
    json_object_set_new(m, "kind", json_integer(1));
    assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
    json_object_del(m, "kind"); /* without kind: a service, which needs its hooks */
    assert_string_equal(hc_bundle_kind(m), HC_BUNDLE_KIND_SERVICE);
    assert_int_equal(hc_bundle_manifest_check(m, &err), -1);
    assert_non_null(strstr(err.message, "'health' is missing"));
    json_decref(m);
}

static void test_path_traversal(void **state)
{
    struct env *e = *state;
    const struct entry dotdot[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"../evil", AE_IFREG, "x", NULL, NULL}, END_ENTRY};
    expect_open(e, dotdot, 1, HC_BUNDLE_ERR_UNSAFE, "'../evil'");
    const struct entry inner[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"bin/../../evil", AE_IFREG, "x", NULL, NULL}, END_ENTRY};
    expect_open(e, inner, 1, HC_BUNDLE_ERR_UNSAFE, "evil");
    const struct entry abs[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"/etc/evil", AE_IFREG, "x", NULL, NULL}, END_ENTRY};
    expect_open(e, abs, 1, HC_BUNDLE_ERR_UNSAFE, "/etc/evil");
    const struct entry link[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"lib", AE_IFLNK, NULL, "../../etc", NULL}, END_ENTRY};
    expect_open(e, link, 1, HC_BUNDLE_ERR_UNSAFE, "outside");
    const struct entry abslink[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"lib", AE_IFLNK, NULL, "/etc", NULL}, END_ENTRY};
    expect_open(e, abslink, 1, HC_BUNDLE_ERR_UNSAFE, "outside");
    const struct entry hard[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"pw", AE_IFREG, NULL, NULL, "/etc/passwd"}, END_ENTRY};
    expect_open(e, hard, 1, HC_BUNDLE_ERR_UNSAFE, "hard link");
    const struct entry fifo[] = {
        MANIFEST_ENTRY, SVC_ENTRY, {"fifo", AE_IFIFO, NULL, NULL, NULL}, END_ENTRY};
    expect_open(e, fifo, 1, HC_BUNDLE_ERR_UNSAFE, "not a regular file");
    const struct entry twice[] = {MANIFEST_ENTRY, SVC_ENTRY, MANIFEST_ENTRY, END_ENTRY};
    expect_open(e, twice, 1, HC_BUNDLE_ERR_UNSAFE, "twice");
    /* Links that stay inside are fine. */
    const struct entry ok[] = {MANIFEST_ENTRY,
                               SVC_ENTRY,
                               {"bin/svc2", AE_IFLNK, NULL, "../bin/svc", NULL},
                               {"svc3", AE_IFREG, NULL, NULL, "bin/svc"},
                               END_ENTRY};
    expect_open(e, ok, 1, NULL, NULL);
}

/* Issue 12: each link of a chain stays inside on its own, but links whose targets go through
 * other links leave the bundle: a/b -> .. is the top, so c -> a/b/.. is the top's parent. Shown
 * first on disk with the archive written as it is (what the old check let through), then
 * refused at open. */
static void test_symlink_chain(void **state)
{
    struct env *e = *state;
    const struct entry chain[] = {MANIFEST_ENTRY,
                                  SVC_ENTRY,
                                  {"a", AE_IFDIR, NULL, NULL, NULL},
                                  {"a/b", AE_IFLNK, NULL, "..", NULL},
                                  {"c", AE_IFLNK, NULL, "a/b/..", NULL},
                                  END_ENTRY};
    /* What the escape would be: extracted as plain tar does, c is the top's parent. */
    char dest[700], cmd[1600], real[4096], parent[4096];
    size_t len = 0;
    unsigned char *data = make_archive(chain, 1, &len);
    char *tgz = NULL;
    path_in(dest, sizeof(dest), e, "plain");
    assert_true(asprintf(&tgz, "%s.tgz", dest) > 0);
    FILE *f = fopen(tgz, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "mkdir '%s' && tar -xzf '%s' -C '%s'", dest, tgz, dest);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/c", dest);
    assert_non_null(realpath(cmd, real));
    assert_non_null(realpath(e->dir, parent));
    assert_string_equal(real, parent); /* outside the extracted bundle */
    free(tgz);
    free(data);

    expect_open(e, chain, 1, HC_BUNDLE_ERR_UNSAFE, "'c'");
    /* Each refused at open with the message naming why. */
    const struct {
        const char *what;
        struct entry entries[8];
        const char *fragment;
    } unsafe[] = {
        /* The same with the links in the other order (c is read before what it goes through). */
        {"reversed",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"c", AE_IFLNK, NULL, "a/b/..", NULL},
          {"a", AE_IFDIR, NULL, NULL, NULL},
          {"a/b", AE_IFLNK, NULL, "..", NULL},
          END_ENTRY},
         "'c'"},
        /* Deeper: each hop climbs one level through another link. */
        {"deep",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"x", AE_IFDIR, NULL, NULL, NULL},
          {"x/y", AE_IFDIR, NULL, NULL, NULL},
          {"x/y/up", AE_IFLNK, NULL, "../..", NULL},
          {"x/top", AE_IFLNK, NULL, "y/up", NULL},
          {"out", AE_IFLNK, NULL, "x/top/../etc", NULL},
          END_ENTRY},
         "'out'"},
        /* A link to a link that is itself fine but whose target, taken from the second link's
         * directory, climbs out. */
        {"relink",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"d", AE_IFDIR, NULL, NULL, NULL},
          {"d/self", AE_IFLNK, NULL, ".", NULL},
          {"d/esc", AE_IFLNK, NULL, "self/self/..", NULL},
          {"d/esc2", AE_IFLNK, NULL, "esc/..", NULL},
          END_ENTRY},
         "'d/esc2'"},
        /* Loops never resolve: refused rather than left to ELOOP at run time. */
        {"loop",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"l1", AE_IFLNK, NULL, "l2", NULL},
          {"l2", AE_IFLNK, NULL, "l1", NULL},
          END_ENTRY},
         "links"},
        /* A file (or a hard link) whose path goes through a link of the bundle. */
        {"file via a link",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"a", AE_IFDIR, NULL, NULL, NULL},
          {"a/b", AE_IFLNK, NULL, "..", NULL},
          {"a/b/x", AE_IFREG, "x", NULL, NULL},
          END_ENTRY},
         "through the link"},
        {"hard link via a link",
         {MANIFEST_ENTRY,
          SVC_ENTRY,
          {"b", AE_IFLNK, NULL, ".", NULL},
          {"h", AE_IFREG, NULL, NULL, "b/bin/svc"},
          END_ENTRY},
         "hard link"},
        /* Device files of either kind. */
        {"char device",
         {MANIFEST_ENTRY, SVC_ENTRY, {"null", AE_IFCHR, NULL, NULL, NULL}, END_ENTRY},
         "not a regular file"},
        {"block device",
         {MANIFEST_ENTRY, SVC_ENTRY, {"sda", AE_IFBLK, NULL, NULL, NULL}, END_ENTRY},
         "not a regular file"},
    };
    for (size_t i = 0; i < HC_ARRAY_LEN(unsafe); i++) {
        print_message("unsafe: %s\n", unsafe[i].what);
        expect_open(e, unsafe[i].entries, 1, HC_BUNDLE_ERR_UNSAFE, unsafe[i].fragment);
    }

    /* Chains that stay inside are fine, and extract. */
    const struct entry fine[] = {MANIFEST_ENTRY,
                                 SVC_ENTRY,
                                 {"a", AE_IFDIR, NULL, NULL, NULL},
                                 {"a/b", AE_IFLNK, NULL, "..", NULL},
                                 {"tool", AE_IFLNK, NULL, "a/b/bin/svc", NULL},
                                 {"a/up", AE_IFLNK, NULL, "b/a", NULL},
                                 {"dangling", AE_IFLNK, NULL, "not/there/..", NULL},
                                 END_ENTRY};
    expect_open(e, fine, 1, NULL, NULL);
    struct hc_error err = {0};
    data = make_archive(fine, 1, &len);
    struct hc_bundle *b = open_signed(e, data, len, &err);
    assert_non_null(b);
    path_in(dest, sizeof(dest), e, "fine");
    assert_int_equal(hc_bundle_extract(b, dest, &err), 0);
    snprintf(cmd, sizeof(cmd), "%s/tool", dest);
    assert_non_null(realpath(cmd, real));
    assert_non_null(realpath(dest, parent));
    strcat(parent, "/bin/svc");
    assert_string_equal(real, parent);
    hc_bundle_free(b);
    free(data);
}

/* A link inside the bundle followed by a file written through it: refused when the bundle is
 * opened (the file's place on disk would not be its path). Extraction keeps libarchive's
 * SECURE_SYMLINKS as a second guard. */
static void test_extract_through_symlink(void **state)
{
    struct env *e = *state;
    const struct entry through[] = {MANIFEST_ENTRY,
                                    SVC_ENTRY,
                                    {"data", AE_IFDIR, NULL, NULL, NULL},
                                    {"link", AE_IFLNK, NULL, "data", NULL},
                                    {"link/x", AE_IFREG, "x", NULL, NULL},
                                    END_ENTRY};
    expect_open(e, through, 1, HC_BUNDLE_ERR_UNSAFE,
                "'link/x' is refused: its path goes "
                "through the link 'link'");
}

/* Setuid and world-writable bits from the archive are not restored. */
static void test_extract_drops_bits(void **state)
{
    struct env *e = *state;
    const struct entry entries[] = {MANIFEST_ENTRY, SVC_ENTRY, END_ENTRY};
    size_t len = 0;
    unsigned char *data = make_archive(entries, 1, &len);
    struct hc_error err = {0};
    struct hc_bundle *b = open_signed(e, data, len, &err);
    assert_non_null(b);
    char dest[700], file[800];
    struct stat st;
    path_in(dest, sizeof(dest), e, "bits");
    assert_int_equal(hc_bundle_extract(b, dest, &err), 0);
    snprintf(file, sizeof(file), "%s/bin/svc", dest);
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    hc_bundle_free(b);
    free(data);
}

static void test_build_refusals(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    char out[700], m[700];
    path_in(out, sizeof(out), e, "x.tar.gz");
    path_in(m, sizeof(m), e, "noexec.json");
    write_text(m,
               "{\"name\":\"svc\",\"version\":\"1.0\",\"entrypoint\":\"README\","
               "\"health\":{\"http\":\"http://x\"},\"ok_to_stop\":{\"http\":\"http://x\"}}",
               0644);
    assert_int_equal(hc_bundle_build(m, e->src, e->key, out, NULL, &err), -1);
    assert_non_null(strstr(err.message, "executable"));
    assert_int_equal(access(out, F_OK), -1);
    /* A public key is not a signing key. */
    assert_int_equal(hc_bundle_build(e->manifest, e->src, e->pub, out, NULL, &err), -1);
    assert_non_null(strstr(err.message, "private key"));
    /* keygen never overwrites. */
    char prefix[700];
    path_in(prefix, sizeof(prefix), e, "dev");
    assert_int_equal(hc_bundle_keygen(prefix, NULL, &err), -1);
    assert_string_equal(err.code, HC_ERR_CONFLICT);
    struct stat st;
    assert_int_equal(stat(e->key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_keys(void **state)
{
    struct env *e = *state;
    struct hc_error err = {0};
    struct hc_bundle_keys *k = hc_bundle_keys_new();
    /* An EC key is not an Ed25519 key. */
    EVP_PKEY *ec = hc_pki_key_new(&err);
    char ecpath[700];
    path_in(ecpath, sizeof(ecpath), e, "ec.pem");
    X509 *self = hc_pki_ca_new(ec, "x", 1, &err);
    char *pem = hc_pki_cert_to_pem(self);
    assert_int_equal(hc_bundle_keys_add_pem(k, "ec", pem, &err), -1);
    assert_int_equal(hc_bundle_keys_add_pem(k, "junk", "junk", &err), -1);
    free(pem);
    X509_free(self);
    EVP_PKEY_free(ec);
    /* A directory of keys; the same key twice counts once. */
    char kdir[700], copy[800];
    path_in(kdir, sizeof(kdir), e, "trusted");
    assert_int_equal(hc_mkdir_p(kdir, 0755, &err), 0);
    size_t len;
    char *pub = read_all(e->pub, &len);
    snprintf(copy, sizeof(copy), "%s/a.pem", kdir);
    write_text(copy, pub, 0644);
    snprintf(copy, sizeof(copy), "%s/b.pem", kdir);
    write_text(copy, pub, 0644);
    free(pub);
    assert_int_equal(hc_bundle_keys_load_dir(k, kdir, &err), 0);
    assert_int_equal(hc_bundle_keys_count(k), 1);
    json_t *list = hc_bundle_keys_to_json(k);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")), "a");
    json_decref(list);
    assert_int_equal(hc_bundle_keys_load_dir(k, "/nonexistent/dir", &err), 0);
    hc_bundle_keys_free(k);
}

static void test_versions(void **state)
{
    assert_true(hc_bundle_version_valid("1.0"));
    assert_true(hc_bundle_version_valid("2.3.1-rc1+b7"));
    assert_false(hc_bundle_version_valid(""));
    assert_false(hc_bundle_version_valid("v1"));
    assert_false(hc_bundle_version_valid("1/2"));
    assert_false(hc_bundle_version_valid("1..2"));
    assert_false(hc_bundle_version_valid("1 2"));
    assert_true(hc_bundle_version_cmp("1.0", "1.1") < 0);
    assert_true(hc_bundle_version_cmp("1.10", "1.9") > 0);
    assert_true(hc_bundle_version_cmp("1.0", "1.0") == 0);
    assert_true(hc_bundle_version_cmp("1.0", "1.0.1") < 0);
    assert_true(hc_bundle_version_cmp("2", "10") < 0);
    assert_true(hc_bundle_version_cmp("1.2-broken", "1.2") > 0);
    assert_true(hc_bundle_path_valid("bin/svc"));
    assert_false(hc_bundle_path_valid("bin//svc"));
    assert_false(hc_bundle_path_valid("./svc"));
    assert_false(hc_bundle_path_valid("bin/"));
    assert_false(hc_bundle_path_valid("/svc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_bundle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_signature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_manifest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_missing_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manifest_settings, setup, teardown),
        cmocka_unit_test(test_manifest_kinds),
        cmocka_unit_test_setup_teardown(test_path_traversal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_through_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_drops_bits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
        cmocka_unit_test(test_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
