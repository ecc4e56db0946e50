/*
 * Unit tests of the software plumbing around bundles:
 * - common/https_server + https_client: a per-route body limit (an upload larger than the JSON
 *   limit), raw bodies with extra headers, raw replies (downloads), on real TLS over loopback;
 * - controller/state/software.c: verified storage, idempotent re-upload, conflicts, refusals that
 *   store nothing, listing, reading with an on-disk checksum check, guarded removal;
 * - agents/hcagent/hooks.c: command hooks (exit status, JSON answers, pending counts, timeouts,
 *   placeholders) and an HTTP hook without a service;
 * - agents/hcagent/cgroup.c: limits written into a fake cgroup v2 tree, and the plain reasons when
 * the hierarchy or a controller is missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/hcagent/service.h"
#include "common/bundle.h"
#include "common/https_client.h"
#include "common/https_server.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/software.h"
#include "db/db.h"
#include "tests/unit/support/support.h"

static char dir[512];

static void path_in(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text, int mode)
{
    struct hc_error err = {0};
    assert_int_equal(hc_file_write_atomic(path, text, strlen(text), mode, &err), 0);
}

static char *read_text(const char *path)
{
    char *text = NULL;
    size_t len;
    struct hc_error err = {0};
    assert_int_equal(hc_file_read(path, &text, &len, &err), 0);
    return text;
}

static int setup(void **state)
{
    const char *tmp = getenv("HC_TEST_TMP") ? getenv("HC_TEST_TMP") : "/tmp";
    mkdir(tmp, 0755);
    snprintf(dir, sizeof(dir), "%s/software.XXXXXX", tmp);
    /* Command hooks run as the service user (agents/hcagent/privilege.c): it must pass through. */
    struct stat st;
    if (stat(tmp, &st) < 0 || chmod(tmp, (st.st_mode & 07777) | 0011) < 0)
        return -1;
    return mkdtemp(dir) && chmod(dir, 0711) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    return hc_bundle_rmtree(dir);
}

/* ---------------------------------------------------------------- server: limits and raw data */

struct server {
    struct event_base *base;
    struct hc_http_server *srv;
    pthread_t thread;
    char url[64];
    unsigned char *file;
    size_t file_len;
};

/* Answers the body's length and sha256, and the X-Test header. */
static void on_upload(struct hc_request *req, void *arg)
{
    size_t len;
    const unsigned char *body = hc_req_body(req, &len);
    char hex[65];
    hc_sha256_hex(body, len, hex);
    const char *h = hc_req_header(req, "X-Test");
    hc_reply_json(
        req, 200,
        json_pack("{s:I, s:s, s:s}", "len", (json_int_t)len, "sha256", hex, "header", h ? h : ""));
}

static void on_file(struct hc_request *req, void *arg)
{
    struct server *s = arg;
    hc_reply_data(req, 200, "application/gzip", s->file, s->file_len);
}

static void *loop(void *arg)
{
    struct server *s = arg;
    event_base_loop(s->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* A CA and a server certificate for 127.0.0.1 from common/pki.h. */
static void make_cert(char *ca_path, char *cert_path, char *key_path, size_t len)
{
    struct hc_error err = {0};
    char serial[33];
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {
        .cn = "server", .sans = sans, .nsans = 1, .server_auth = 1, .days = 1};
    EVP_PKEY *ca_key = hc_pki_key_new(&err), *key = hc_pki_key_new(&err);
    X509 *ca = hc_pki_ca_new(ca_key, "test ca", 1, &err);
    X509 *cert = hc_pki_issue(ca, ca_key, key, &spec, serial, &err);
    snprintf(ca_path, len, "%s/ca.pem", dir);
    snprintf(cert_path, len, "%s/server.pem", dir);
    snprintf(key_path, len, "%s/server.key", dir);
    assert_int_equal(hc_pki_cert_save(ca, ca_path, &err), 0);
    assert_int_equal(hc_pki_cert_save(cert, cert_path, &err), 0);
    assert_int_equal(hc_pki_key_save(key, key_path, &err), 0);
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
}

static unsigned char *pattern(size_t len)
{
    unsigned char *p = malloc(len);
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 7 + i / 251);
    return p;
}

/* The head hook of the route limit: grants every request (the controller checks the token). */
static int grant_all(const struct hc_route *route, const char *authorization, void *arg)
{
    return 1;
}

static void test_route_limit_and_raw(void **state)
{
    char ca[600], cert[600], key[600], url[128], hex[65];
    struct hc_error err = {0};
    make_cert(ca, cert, key, sizeof(ca));
    struct server s = {.base = event_base_new()};
    struct hc_tls_server_config tls = {.cert_file = cert, .key_file = key};
    s.srv = hc_http_server_new(s.base, &tls, &err);
    assert_non_null(s.srv);
    s.file_len = 3 * 1024 * 1024 + 17;
    s.file = pattern(s.file_len);
    assert_int_equal(hc_http_server_route(s.srv, "POST", "/up", 0, on_upload, &s), 0);
    assert_int_equal(hc_http_server_route(s.srv, "POST", "/small", 0, on_upload, &s), 0);
    assert_int_equal(hc_http_server_route(s.srv, "GET", "/file", 0, on_file, &s), 0);
    assert_int_equal(hc_http_server_route_limit(s.srv, "POST", "/up", 4 * 1024 * 1024), 0);
    assert_int_equal(hc_http_server_route_limit(s.srv, "POST", "/none", 1), -1);
    hc_http_server_set_head_hook(s.srv, grant_all, NULL);
    assert_int_equal(hc_http_server_listen(s.srv, "127.0.0.1", 0, &err), 0);
    assert_int_equal(pthread_create(&s.thread, NULL, loop, &s), 0);

    /* A file download asks for more than the client's default (as the agent's staging does). */
    struct hc_tls_client_config ctls = {.ca_file = ca, .max_response = 8 * 1024 * 1024};
    struct hc_http_client *c = hc_http_client_new(&ctls, &err);
    struct hc_http_response resp = {0};
    size_t big = 2 * 1024 * 1024 + 3;
    unsigned char *body = pattern(big);
    const char *headers[] = {"X-Test: hello", NULL};
    hc_sha256_hex(body, big, hex);
    /* Over the server's 1 MiB JSON limit, under the route's 4 MiB. */
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/up", hc_http_server_port(s.srv));
    assert_int_equal(hc_http_request_raw(c, "POST", url, NULL, body, big, "application/gzip",
                                         headers, 10000, &resp, &err),
                     0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(hc_json_int(resp.body, "len", 0), (int64_t)big);
    assert_string_equal(hc_json_str(resp.body, "sha256", ""), hex);
    assert_string_equal(hc_json_str(resp.body, "header", ""), "hello");
    hc_http_response_clear(&resp);
    /* Just over the default limit to a route without one of its own: the JSON 413. */
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/small", hc_http_server_port(s.srv));
    assert_int_equal(hc_http_request_raw(c, "POST", url, NULL, body, 1024 * 1024 + 3, NULL, NULL,
                                         10000, &resp, &err),
                     0);
    assert_int_equal(resp.status, 413);
    assert_string_equal(hc_json_str(json_object_get(resp.body, "error"), "code", ""),
                        HC_ERR_BODY_TOO_LARGE);
    hc_http_response_clear(&resp);
    /* A raw reply: the bytes arrive unchanged. */
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/file", hc_http_server_port(s.srv));
    assert_int_equal(hc_http_request(c, "GET", url, NULL, NULL, 10000, &resp, &err), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.raw_len, s.file_len);
    assert_memory_equal(resp.raw, s.file, s.file_len);
    hc_http_response_clear(&resp);
    free(body);
    hc_http_client_free(c);
    event_base_loopbreak(s.base);
    pthread_join(s.thread, NULL);
    hc_http_server_free(s.srv);
    event_base_free(s.base);
    free(s.file);
}

/* ---------------------------------------------------------------- controller storage */

static const char manifest_fmt[] =
    "{\"name\":\"svc\",\"version\":\"%s\",\"entrypoint\":\"run\","
    "\"health\":{\"command\":[\"run\"]},\"ok_to_stop\":{\"command\":[\"run\"]}}";

/* Builds DIR/NAME.tar.gz with version and a payload file of the given text. */
static void build(const char *name, const char *version, const char *payload, const char *key)
{
    char src[700], m[700], out[700], file[800], text[512];
    struct hc_error err = {0};
    snprintf(src, sizeof(src), "%s/src-%s", dir, name);
    assert_int_equal(hc_mkdir_p(src, 0755, &err), 0);
    snprintf(file, sizeof(file), "%s/run", src);
    write_text(file, "#!/bin/sh\nexit 0\n", 0755);
    snprintf(file, sizeof(file), "%s/payload", src);
    write_text(file, payload, 0644);
    snprintf(m, sizeof(m), "%s/%s.json", dir, name);
    snprintf(text, sizeof(text), manifest_fmt, version);
    write_text(m, text, 0644);
    snprintf(out, sizeof(out), "%s/%s.tar.gz", dir, name);
    assert_int_equal(hc_bundle_build(m, src, key, out, NULL, &err), 0);
}

static json_t *store(struct hc_controller *ctl, struct hc_db *db, const char *name, int *already,
                     struct hc_error *err)
{
    char path[700], *data, *sig;
    size_t len, slen;
    snprintf(path, sizeof(path), "%s/%s.tar.gz", dir, name);
    assert_int_equal(hc_file_read(path, &data, &len, err), 0);
    snprintf(path, sizeof(path), "%s/%s.tar.gz.sig", dir, name);
    assert_int_equal(hc_file_read(path, &sig, &slen, err), 0);
    json_t *out = hc_software_store(ctl, db, data, len, sig, "tester", already, err);
    free(data);
    free(sig);
    return out;
}

static int count_files(const char *sub)
{
    char cmd[800];
    snprintf(cmd, sizeof(cmd), "exit $(ls '%s/%s' 2>/dev/null | grep -c 'tar.gz$')", dir, sub);
    return WEXITSTATUS(system(cmd));
}

static void test_controller_store(void **state)
{
    struct hc_controller ctl = {0};
    struct hc_error err = {0};
    char prefix[600], key[700], other[700], dbpath[700], *files[1], path[800];
    int already = 0;
    snprintf(ctl.data_dir, sizeof(ctl.data_dir), "%s/ctl", dir);
    assert_int_equal(hc_mkdir_p(ctl.data_dir, 0700, &err), 0);
    path_in(prefix, sizeof(prefix), "dev");
    assert_int_equal(hc_bundle_keygen(prefix, NULL, &err), 0);
    snprintf(key, sizeof(key), "%s.key", prefix);
    path_in(prefix, sizeof(prefix), "other");
    assert_int_equal(hc_bundle_keygen(prefix, NULL, &err), 0);
    snprintf(other, sizeof(other), "%s.key", prefix);
    snprintf(path, sizeof(path), "%s/dev.pub", dir);
    files[0] = path;
    assert_int_equal(hc_software_keys_install(ctl.data_dir, (const char *const *)files, 1, &err),
                     0);
    snprintf(dbpath, sizeof(dbpath), "%s/hcctld.db", ctl.data_dir);
    struct hc_db *db = hc_db_open(dbpath, &err);
    assert_non_null(db);
    build("a10", "1.0", "one", key);
    build("a9", "0.9", "nine", key);
    build("b10", "1.0", "another one", key);
    build("o11", "1.1", "eleven", other);

    json_t *b = store(&ctl, db, "a10", &already, &err);
    assert_non_null(b);
    assert_int_equal(already, 0);
    assert_string_equal(hc_json_str(json_object_get(b, "bundle"), "signed_by", ""), "dev");
    json_decref(b);
    b = store(&ctl, db, "a10", &already, &err); /* the same file again */
    assert_non_null(b);
    assert_int_equal(already, 1);
    json_decref(b);
    assert_null(store(&ctl, db, "b10", &already, &err)); /* another file as 1.0 */
    assert_int_equal(err.status, 409);
    assert_null(store(&ctl, db, "o11", &already, &err)); /* untrusted signer */
    assert_string_equal(err.code, HC_BUNDLE_ERR_SIGNATURE);
    assert_int_equal(count_files("ctl/bundles"), 1);
    b = store(&ctl, db, "a9", &already, &err);
    json_decref(b);

    json_t *list = hc_software_list(db, &err);
    json_t *bundles = json_object_get(list, "bundles");
    assert_int_equal(json_array_size(bundles), 2);
    assert_string_equal(hc_json_str(json_array_get(bundles, 0), "version", ""), "0.9");
    json_decref(list);
    json_t *got = hc_software_get(db, "1.0", &err);
    assert_non_null(got);
    assert_string_equal(hc_json_str(json_object_get(got, "manifest"), "entrypoint", ""), "run");
    assert_true(strncmp(hc_json_str(got, "signature", ""), "hcsig1 ", 7) == 0);
    json_decref(got);
    assert_null(hc_software_get(db, "7.7", &err));
    assert_int_equal(err.status, 404);

    /* Reading checks the stored file against the recorded sha256. */
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(hc_software_read(&ctl, db, "1.0", &data, &len, &err), 0);
    free(data);
    snprintf(path, sizeof(path), "%s/bundles/0.9.tar.gz", ctl.data_dir);
    write_text(path, "damaged", 0644);
    assert_int_equal(hc_software_read(&ctl, db, "0.9", &data, &len, &err), -1);
    assert_string_equal(err.code, HC_BUNDLE_ERR_CHECKSUM);

    /* Removal: refused while a node runs the version or may roll back to it. */
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO clusters (id, name, created_at) VALUES "
                               "('c1', 'c', 0)",
                               ""),
                     1);
    assert_int_equal(hc_db_run(db, &err,
                               "INSERT INTO nodes (cluster_id, name, address, agent_url, "
                               "cert_serial, cert_pem, joined_at, software_version) VALUES "
                               "('c1', 'n1', 'a', 'u', 's', 'p', 0, '1.0')",
                               ""),
                     1);
    assert_int_equal(hc_software_remove(&ctl, db, "1.0", "tester", &err), -1);
    assert_int_equal(err.status, 409);
    assert_non_null(strstr(err.message, "n1"));
    hc_db_run(db, &err,
              "UPDATE nodes SET software_version = '0.9', "
              "previous_software_version = '1.0'",
              "");
    assert_int_equal(hc_software_remove(&ctl, db, "1.0", "tester", &err), -1);
    assert_non_null(strstr(err.message, "rollback target"));
    hc_db_run(db, &err, "UPDATE nodes SET previous_software_version = NULL", "");
    assert_int_equal(hc_software_remove(&ctl, db, "1.0", "tester", &err), 0);
    assert_int_equal(count_files("ctl/bundles"), 1);
    assert_int_equal(hc_software_remove(&ctl, db, "1.0", "tester", &err), -1);
    assert_int_equal(err.status, 404);
    json_t *ev =
        hc_db_query_json(db, &err, "SELECT type FROM events WHERE type LIKE 'software.%'", "");
    assert_int_equal(json_array_size(ev), 3); /* two uploads, one removal */
    json_decref(ev);
    hc_db_close(db);
}

/* ---------------------------------------------------------------- hooks */

static void env_for(struct hc_service_env *env)
{
    memset(env, 0, sizeof(*env));
    snprintf(env->node, sizeof(env->node), "n1");
    snprintf(env->service_host, sizeof(env->service_host), "127.0.0.1");
    snprintf(env->data_dir, sizeof(env->data_dir), "%s/data", dir);
    snprintf(env->version, sizeof(env->version), "1.0");
    snprintf(env->bundle_dir, sizeof(env->bundle_dir), "%s", dir);
}

static void run_hook(enum hc_hook_kind kind, const char *json, struct hc_hook_result *res)
{
    struct hc_service_env env;
    env_for(&env);
    json_t *hook = json_loads(json, 0, NULL);
    assert_non_null(hook);
    hc_hook_run(kind, hook, &env, res);
    json_decref(hook);
}

static void test_hooks(void **state)
{
    char path[700];
    struct hc_hook_result r;
    path_in(path, sizeof(path), "ok.sh");
    write_text(path, "#!/bin/sh\necho \"$1 $HC_NODE_NAME $PWD\"\n", 0755);
    path_in(path, sizeof(path), "no.sh");
    write_text(path, "#!/bin/sh\necho '{\"ok_to_stop\":false,\"reason\":\"pinned here\"}'\n", 0755);
    path_in(path, sizeof(path), "pending.sh");
    write_text(path, "#!/bin/sh\necho 3\n", 0755);
    path_in(path, sizeof(path), "fail.sh");
    write_text(path, "#!/bin/sh\necho broken >&2\nexit 2\n", 0755);
    path_in(path, sizeof(path), "slow.sh");
    write_text(path, "#!/bin/sh\nsleep 5\n", 0755);

    run_hook(HC_HOOK_HEALTH, "{\"command\":[\"ok.sh\",\"{version}\"]}", &r);
    assert_true(r.defined && r.ok);
    char want[700];
    snprintf(want, sizeof(want), "1.0 n1 %s", dir);
    assert_string_equal(r.detail, want);
    run_hook(HC_HOOK_OK_TO_STOP, "{\"command\":[\"no.sh\"]}", &r);
    assert_false(r.ok);
    assert_string_equal(r.detail, "pinned here");
    run_hook(HC_HOOK_RESYNC, "{\"command\":[\"pending.sh\"]}", &r);
    assert_true(r.ok);
    assert_int_equal(r.pending, 3);
    run_hook(HC_HOOK_HEALTH, "{\"command\":[\"fail.sh\"]}", &r);
    assert_false(r.ok);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.detail, "broken");
    int64_t t0 = hc_mono_ms();
    run_hook(HC_HOOK_DRAIN, "{\"command\":[\"slow.sh\"],\"timeout_ms\":300}", &r);
    assert_false(r.ok);
    assert_true(hc_mono_ms() - t0 < 3000);
    assert_non_null(strstr(r.detail, "did not finish within 300 ms"));
    run_hook(HC_HOOK_HEALTH, "{\"command\":[\"missing.sh\"]}", &r);
    assert_false(r.ok);
    run_hook(HC_HOOK_HEALTH, "{\"http\":\"http://{service_host}:1/health\",\"timeout_ms\":500}",
             &r);
    assert_false(r.ok);
    assert_non_null(strstr(r.detail, "no answer from http://127.0.0.1:1/health"));
    struct hc_service_env env;
    env_for(&env);
    hc_hook_run(HC_HOOK_DRAIN, NULL, &env, &r);
    assert_false(r.defined);
    char *x = hc_service_expand("{node}:{unknown}:{version}", &env);
    assert_string_equal(x, "n1:{unknown}:1.0");
    free(x);
}

/* ---------------------------------------------------------------- cgroups */

static void test_cgroup(void **state)
{
    char root[600], base[1200], path[1400], *text;
    struct hc_cgroup cg;
    path_in(root, sizeof(root), "cg");
    hc_test_fake_cgroup(root, "cpuset cpu io memory pids\n", base, sizeof(base));
    hc_cgroup_setup(&cg, root, "hcservice", 50, 256);
    assert_true(cg.applied);
    snprintf(path, sizeof(path), "%s/hcservice/cpu.max", base);
    text = read_text(path);
    assert_string_equal(text, "50000 100000");
    free(text);
    snprintf(path, sizeof(path), "%s/hcservice/memory.max", base);
    text = read_text(path);
    assert_string_equal(text, "268435456");
    free(text);
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", base);
    text = read_text(path);
    assert_string_equal(text, "+cpu +memory");
    free(text);
    char why[200];
    assert_int_equal(hc_cgroup_attach(&cg, 4242, why, sizeof(why)), 0);
    snprintf(path, sizeof(path), "%s/hcservice/cgroup.procs", base);
    text = read_text(path);
    assert_string_equal(text, "4242");
    free(text);
    json_t *j = hc_cgroup_json(&cg);
    assert_true(json_is_true(json_object_get(j, "applied")));
    json_decref(j);

    /* Only the memory limit asked: only that controller is needed. */
    path_in(root, sizeof(root), "cg2");
    hc_test_fake_cgroup(root, "io memory\n", base, sizeof(base));
    hc_cgroup_setup(&cg, root, "hcservice", 0, 64);
    assert_true(cg.applied);
    hc_cgroup_setup(&cg, root, "hcservice", 20, 64);
    assert_false(cg.applied);
    assert_non_null(strstr(cg.detail, "limits not applied: the cpu controller is not available"));
    assert_int_equal(hc_cgroup_attach(&cg, 4242, why, sizeof(why)), 0); /* nothing to do */

    /* Neither a cgroup v2 hierarchy nor v1 ones (tests/unit/test_cgroup.c has v1). */
    path_in(root, sizeof(root), "plain");
    mkdir(root, 0755);
    hc_cgroup_setup(&cg, root, "hcservice", 50, 256);
    assert_false(cg.applied);
    assert_non_null(strstr(cg.detail, "no cgroup v1 hierarchy holds the cpu controller"));
    hc_cgroup_setup(&cg, root, "hcservice", 0, 0);
    assert_false(cg.applied);
    assert_string_equal(cg.detail, "the bundle asks for no limits");
}

int main(void)
{
    evthread_use_pthreads(); /* the test thread stops the server thread's loop */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_route_limit_and_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_controller_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hooks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
