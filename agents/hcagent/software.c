/*
 * Software on a node: the versions staged side by side, the current and previous links, the
 * desired state, trusted keys, and staging (download from the controller, verification against
 * the node's own trusted keys, extraction). See software.h for the files.
 */
#include "agents/hcagent/software.h"

#include "agents/hcagent/service_settings.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/netinfo.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"

#define DOWNLOAD_TIMEOUT_MS 120000

/* ---------------------------------------------------------------- trusted keys */

/* A file name for a key: its name when that is plain, else its id. */
static void key_file_name(const json_t *key, char *out, size_t len)
{
    const char *name = hc_json_str(key, "name", "");
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.' ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        name = hc_json_str(key, "key_id", "key");
    snprintf(out, len, "%s.pem", name);
}

int hc_agent_software_keys_save(const char *data_dir, const json_t *keys, struct hc_error *err)
{
    char dir[1100], path[1300], name[80];
    size_t i;
    const json_t *key;
    struct hc_bundle_keys *check = hc_bundle_keys_new();
    int rc = -1;
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, HC_AGENT_DIR_KEYS);
    if (!check || hc_mkdir_p(dir, 0755, err) < 0)
        goto cleanup;
    json_array_foreach(keys, i, key)
    {
        const char *pem = hc_json_str(key, "pem", "");
        key_file_name(key, name, sizeof(name));
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (hc_bundle_keys_add_pem(check, name, pem, err) < 0 ||
            hc_file_write_atomic(path, pem, strlen(pem), 0644, err) < 0) {
            hc_error_prefix(err, "trusted key from the controller");
            goto cleanup;
        }
    }
    rc = 0;
cleanup:
    hc_bundle_keys_free(check);
    return rc;
}

void hc_agent_software_keys_remove(const char *data_dir)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, HC_AGENT_DIR_KEYS);
    hc_bundle_rmtree(dir);
}

/* ---------------------------------------------------------------- links and state */

void hc_agent_sw_link(const struct hc_agent_software *sw, const char *link, char out[65])
{
    char path[1200], target[256];
    snprintf(path, sizeof(path), "%s/%s", sw->dir, link);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    target[n] = '\0';
    if (hc_bundle_version_valid(target))
        snprintf(out, 65, "%s", target);
}

int hc_agent_sw_staged(const struct hc_agent_software *sw, const char *version)
{
    char path[1200];
    struct stat st;
    if (!hc_bundle_version_valid(version))
        return 0;
    snprintf(path, sizeof(path), "%s/%s", sw->dir, version);
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

json_t *hc_agent_sw_manifest(const struct hc_agent_software *sw, const char *version,
                             struct hc_error *err)
{
    char path[1300], *text = NULL;
    size_t len;
    if (!hc_agent_sw_staged(sw, version)) {
        hc_error_set(err, HC_E(NOT_STAGED), "version '%s' is not staged on node %s", version,
                     sw->cfg.name);
        hc_error_hint(err, "stage it first (POST /v1/software/stage)");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s/%s", sw->dir, version, HC_BUNDLE_MANIFEST);
    if (hc_file_read(path, &text, &len, err) < 0)
        return NULL;
    json_t *m = hc_json_parse_object(text, len, err);
    free(text);
    if (!m || hc_bundle_manifest_check(m, err) < 0) {
        json_decref(m);
        hc_error_prefix(err, "staged version %s", version);
        return NULL;
    }
    return m;
}

/* {storage_host}: the first IPv4 address of the storage interface, in the kernel's order (the
 * one the controller records from GET /v1/interfaces and sends to the peers,
 * controller/remote/storage_peers.c), read now so that a re-addressed interface is followed at
 * the next start; the listen host on a node configured without one (said once, at agent
 * start). */
static void storage_host(const struct hc_agent_software *sw, struct hc_service_env *env)
{
    const char *iface = sw->cfg.storage_interface;
    struct hc_error err = {0};
    size_t i, j;
    const json_t *it, *a;
    if (!iface[0]) {
        snprintf(env->storage_host, sizeof(env->storage_host), "%s", sw->service_host);
        return;
    }
    json_t *ifaces = hc_netinfo_interfaces(&err);
    int found = 0;
    json_array_foreach(ifaces, i, it)
    {
        if (strcmp(hc_json_str(it, "name", ""), iface) != 0)
            continue;
        found = 1;
        json_array_foreach(json_object_get(it, "addresses"), j, a)
        {
            const char *s = json_string_value(a);
            if (s && strchr(s, '.') && !strchr(s, ':')) {
                snprintf(env->storage_host, sizeof(env->storage_host), "%.*s", (int)strcspn(s, "/"),
                         s);
                break;
            }
        }
        break;
    }
    json_decref(ifaces);
    if (env->storage_host[0])
        return;
    if (!ifaces)
        snprintf(env->storage_problem, sizeof(env->storage_problem),
                 "cannot read the address of storage interface %s: %s", iface, err.message);
    else
        snprintf(env->storage_problem, sizeof(env->storage_problem),
                 found ? "storage interface %s has no IPv4 address"
                       : "storage interface %s does not exist",
                 iface);
}

void hc_agent_sw_env(const struct hc_agent_software *sw, const char *version,
                     struct hc_service_env *env)
{
    memset(env, 0, sizeof(*env));
    snprintf(env->node, sizeof(env->node), "%s", sw->cfg.name);
    snprintf(env->service_host, sizeof(env->service_host), "%s", sw->service_host);
    storage_host(sw, env);
    snprintf(env->storage_interface, sizeof(env->storage_interface), "%s",
             sw->cfg.storage_interface);
    snprintf(env->data_dir, sizeof(env->data_dir), "%s/%s", sw->data_dir,
             HC_AGENT_DIR_SERVICE_DATA);
    snprintf(env->version, sizeof(env->version), "%s", version);
    snprintf(env->bundle_dir, sizeof(env->bundle_dir), "%s/%s", sw->dir, version);
    snprintf(env->settings_file, sizeof(env->settings_file), "%s/%s", sw->data_dir,
             HC_SETTINGS_FILE);
    snprintf(env->settings_state, sizeof(env->settings_state), "%s/%s", sw->data_dir,
             HC_SETTINGS_STATE_FILE);
}

/* Points link at target (NULL: removes it): a new symlink renamed over the old one. */
static int set_link(const struct hc_agent_software *sw, const char *link, const char *target,
                    struct hc_error *err)
{
    char path[1200], tmp[1250];
    snprintf(path, sizeof(path), "%s/%s", sw->dir, link);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", sw->dir, link);
    if (!target) {
        if (unlink(path) < 0 && errno != ENOENT)
            return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", path, strerror(errno));
        return hc_dir_sync(sw->dir) < 0
                   ? hc_error_set(err, HC_E(IO), "cannot sync '%s': %s", sw->dir, strerror(errno))
                   : 0;
    }
    unlink(tmp);
    if (symlink(target, tmp) < 0 || rename(tmp, path) < 0 || hc_dir_sync(sw->dir) < 0)
        return hc_error_set(err, HC_E(IO), "cannot point '%s' at %s: %s", path, target,
                            strerror(errno));
    return 0;
}

/* A field of the record written when version was staged ("sha256", "staged_at"), "" when
 * unknown. */
static void meta_field(const char *dir, const char *version, const char *field, char *out,
                       size_t len)
{
    char path[1300], *text = NULL;
    size_t n;
    struct hc_error err = {0};
    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/.meta/%s.json", dir, version);
    if (hc_file_read(path, &text, &n, &err) < 0)
        return;
    json_t *doc = json_loads(text, 0, NULL);
    snprintf(out, len, "%s", hc_json_str(doc, field, ""));
    json_decref(doc);
    free(text);
}

/* ---------------------------------------------------------------- pruning */

/* Besides current and previous, the most recently staged versions kept on a node (one
 * pre-staged for a later activation survives); older ones are deleted after an activation. */
#define KEEP_OTHER_VERSIONS 2
#define PRUNE_SCAN_MAX 256

struct staged_version {
    char version[65];
    char staged_at[32];
};

static int newest_first(const void *a, const void *b)
{
    return strcmp(((const struct staged_version *)b)->staged_at,
                  ((const struct staged_version *)a)->staged_at);
}

static void delete_version(const struct hc_agent_software *sw, const struct staged_version *v)
{
    char path[1300];
    snprintf(path, sizeof(path), "%s/%s", sw->dir, v->version);
    if (hc_bundle_rmtree(path) < 0) {
        HC_WARN("software: cannot delete old version %s: %s", v->version, strerror(errno));
        return;
    }
    snprintf(path, sizeof(path), "%s/.meta/%s.json", sw->dir, v->version);
    unlink(path);
    HC_INFO("software: deleted old version %s (staged %s)", v->version,
            v->staged_at[0] ? v->staged_at : "at an unknown time");
}

/* Deletes staged versions beyond current, previous and the KEEP_OTHER_VERSIONS newest others,
 * and the leftovers of an interrupted staging (with_stage_dirs: its extraction directories too,
 * only when no staging can be running). */
static void prune_versions(const struct hc_agent_software *sw, int with_stage_dirs)
{
    char current[65], previous[65], path[1300];
    struct staged_version *others = calloc(PRUNE_SCAN_MAX, sizeof(*others));
    size_t n = 0;
    hc_agent_sw_link(sw, "current", current);
    hc_agent_sw_link(sw, "previous", previous);
    DIR *d = others ? opendir(sw->dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < PRUNE_SCAN_MAX) {
        if (strncmp(e->d_name, ".old-", 5) == 0 ||
            (with_stage_dirs && strncmp(e->d_name, ".stage-", 7) == 0)) {
            snprintf(path, sizeof(path), "%s/%s", sw->dir, e->d_name);
            hc_bundle_rmtree(path);
            continue;
        }
        if (!hc_agent_sw_staged(sw, e->d_name) || strcmp(e->d_name, current) == 0 ||
            strcmp(e->d_name, previous) == 0)
            continue;
        snprintf(others[n].version, sizeof(others[n].version), "%s", e->d_name);
        meta_field(sw->dir, e->d_name, "staged_at", others[n].staged_at,
                   sizeof(others[n].staged_at));
        n++;
    }
    if (d)
        closedir(d);
    if (n > KEEP_OTHER_VERSIONS) {
        qsort(others, n, sizeof(*others), newest_first);
        for (size_t i = KEEP_OTHER_VERSIONS; i < n; i++)
            delete_version(sw, &others[i]);
    }
    free(others);
}

int hc_agent_sw_switch(struct hc_agent_software *sw, const char *version, int rollback,
                       struct hc_error *err)
{
    char current[65];
    hc_agent_sw_link(sw, "current", current);
    if (rollback) {
        /* Rolling back leaves no rollback target: "back" to the version that failed is not
         * a rollback. current first, so that a crash in between leaves both on the old one. */
        if (set_link(sw, "current", version, err) < 0 || set_link(sw, "previous", NULL, err) < 0)
            return -1;
    } else if (strcmp(current, version) != 0) {
        if ((current[0] && set_link(sw, "previous", current, err) < 0) ||
            set_link(sw, "current", version, err) < 0)
            return -1;
    }
    HC_INFO("software: current is %s%s%s", version, rollback ? " (rolled back from " : "",
            rollback ? (current[0] ? current : "none") : "");
    if (rollback)
        HC_INFO("software: rollback done, no rollback target left");
    else
        prune_versions(sw, 0);
    return 0;
}

int hc_agent_sw_set_desired(struct hc_agent_software *sw, int running, struct hc_error *err)
{
    char path[1200];
    const char *text = running ? "{\"desired\":\"running\"}\n" : "{\"desired\":\"stopped\"}\n";
    snprintf(path, sizeof(path), "%s/state.json", sw->dir);
    if (hc_file_write_atomic(path, text, strlen(text), 0644, err) < 0)
        return -1;
    sw->desired_running = running;
    return 0;
}

static int load_desired(const struct hc_agent_software *sw)
{
    char path[1200], *text = NULL;
    size_t len;
    struct hc_error err = {0};
    snprintf(path, sizeof(path), "%s/state.json", sw->dir);
    if (hc_file_read(path, &text, &len, &err) < 0)
        return 1; /* never stopped on purpose: it should run */
    json_t *doc = json_loads(text, 0, NULL);
    int running = strcmp(hc_json_str(doc, "desired", "running"), "stopped") != 0;
    json_decref(doc);
    free(text);
    return running;
}

static json_t *installed_list(const struct hc_agent_software *sw)
{
    char meta_dir[1200];
    json_t *list = json_array();
    snprintf(meta_dir, sizeof(meta_dir), "%s/.meta", sw->dir);
    DIR *d = opendir(sw->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!hc_agent_sw_staged(sw, e->d_name))
            continue;
        char path[1500], *text = NULL;
        size_t len;
        struct hc_error err = {0};
        snprintf(path, sizeof(path), "%s/%s.json", meta_dir, e->d_name);
        json_t *meta =
            hc_file_read(path, &text, &len, &err) == 0 ? json_loads(text, 0, NULL) : NULL;
        free(text);
        json_array_append_new(list, meta ? meta : json_pack("{s:s}", "version", e->d_name));
    }
    if (d)
        closedir(d);
    return list;
}

json_t *hc_agent_sw_json(const struct hc_agent_software *sw)
{
    char current[65], previous[65];
    hc_agent_sw_link(sw, "current", current);
    hc_agent_sw_link(sw, "previous", previous);
    json_t *o =
        json_pack("{s:o, s:s, s:o}", "installed", installed_list(sw), "desired",
                  sw->desired_running ? "running" : "stopped", "service", hc_service_json(sw->svc));
    json_object_set_new(o, "current", current[0] ? json_string(current) : json_null());
    json_object_set_new(o, "previous", previous[0] ? json_string(previous) : json_null());
    json_object_set_new(o, "staging", sw->staging[0] ? json_string(sw->staging) : json_null());
    return o;
}

void hc_agent_software_status(const struct hc_agent_software *sw, json_t *status)
{
    char current[65], previous[65];
    hc_agent_sw_link(sw, "current", current);
    hc_agent_sw_link(sw, "previous", previous);
    json_object_set_new(status, "software_version",
                        current[0] ? json_string(current) : json_null());
    json_object_set_new(status, "previous_software_version",
                        previous[0] ? json_string(previous) : json_null());
    json_object_set_new(status, "service", hc_service_json(sw->svc));
    json_object_set_new(status, "settings", hc_agent_sw_settings_status(sw));
    /* Where the service serves ({storage_host}): the controller names this address in the
     * storage peers (controller/remote/storage_peers.c). */
    struct hc_service_env env;
    hc_agent_sw_env(sw, current, &env);
    json_object_set_new(status, "storage_interface",
                        sw->cfg.storage_interface[0] ? json_string(sw->cfg.storage_interface)
                                                     : json_null());
    json_object_set_new(status, "storage_host",
                        env.storage_host[0] ? json_string(env.storage_host) : json_null());
    if (env.storage_problem[0])
        json_object_set_new(status, "storage_problem", json_string(env.storage_problem));
}

/* ---------------------------------------------------------------- staging (a job) */

static int http_fail(const struct hc_http_response *resp, const char *what, const char *url,
                     struct hc_error *err)
{
    if (hc_error_from_json(err, resp->body, 502) < 0)
        hc_error_set(err, HC_E(DOWNLOAD_FAILED), "HTTP %ld", resp->status);
    return hc_error_prefix(err, "cannot %s from %s", what, url);
}

/* Without a signature in the request, the controller's record of the bundle gives it. */
static int fetch_signature(struct hc_agent_sw_stage *st, struct hc_http_client *c,
                           struct hc_error *err)
{
    char url[1200];
    struct hc_http_response resp = {0};
    int rc = -1;
    snprintf(url, sizeof(url), "%s/v1/software/%s", st->controller, st->version);
    if (hc_http_request(c, "GET", url, st->token[0] ? st->token : NULL, NULL, DOWNLOAD_TIMEOUT_MS,
                        &resp, err) < 0) {
        hc_error_prefix(err, "cannot ask the controller for bundle %s", st->version);
        goto cleanup;
    }
    if (resp.status != 200) {
        http_fail(&resp, "read the bundle's signature", url, err);
        goto cleanup;
    }
    snprintf(st->sig, sizeof(st->sig), "%s", hc_json_str(resp.body, "signature", ""));
    rc = 0;
cleanup:
    hc_http_response_clear(&resp);
    return rc;
}

static int download(struct hc_agent_sw_stage *st, struct hc_http_client *c,
                    struct hc_http_response *resp, struct hc_error *err)
{
    char url[1200];
    if (st->url[0])
        snprintf(url, sizeof(url), "%s", st->url);
    else
        snprintf(url, sizeof(url), "%s/v1/software/%s/bundle", st->controller, st->version);
    if (hc_http_request(c, "GET", url, st->token[0] ? st->token : NULL, NULL, DOWNLOAD_TIMEOUT_MS,
                        resp, err) < 0)
        return hc_error_prefix(err, "cannot download bundle %s", st->version);
    if (resp->status != 200)
        return http_fail(resp, "download the bundle", url, err);
    return 0;
}

static int write_meta(const struct hc_agent_sw_stage *st, const struct hc_bundle_info *info,
                      struct hc_error *err)
{
    char dir[1200], path[1300], when[32];
    snprintf(dir, sizeof(dir), "%s/.meta", st->dir);
    snprintf(path, sizeof(path), "%s/%s.json", dir, st->version);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:s}", "version", info->version, "name",
                            info->name, "sha256", info->sha256, "signed_by", info->signed_by,
                            "staged_at", hc_time_format(hc_now_ms(), when, sizeof(when)));
    char *text = hc_json_dump(doc);
    json_decref(doc);
    int rc = !text ? hc_error_set(err, HC_E(INTERNAL), "out of memory")
             : hc_mkdir_p(dir, 0755, err) < 0
                 ? -1
                 : hc_file_write_atomic(path, text, strlen(text), 0644, err);
    free(text);
    return rc;
}

/* Extracts next to the versions, then renames into place: a version directory is complete or
 * absent. A staged copy with another sha256 is replaced unless it is the active one. */
static int place(struct hc_agent_sw_stage *st, const struct hc_bundle *b, struct hc_error *err)
{
    char tmp[1300], final[1200], old[1300], rnd[9], current[65];
    hc_random_hex(rnd, 4);
    snprintf(tmp, sizeof(tmp), "%s/.stage-%s-%s", st->dir, st->version, rnd);
    snprintf(old, sizeof(old), "%s/.old-%s-%s", st->dir, st->version, rnd);
    snprintf(final, sizeof(final), "%s/%s", st->dir, st->version);
    if (hc_bundle_extract(b, tmp, err) < 0 || write_meta(st, hc_bundle_info(b), err) < 0)
        goto fail;
    if (access(final, F_OK) == 0) {
        struct hc_agent_software probe = {0};
        snprintf(probe.dir, sizeof(probe.dir), "%s", st->dir);
        hc_agent_sw_link(&probe, "current", current);
        if (strcmp(current, st->version) == 0) {
            hc_error_set(err, HC_E(CONFLICT), "version %s is active here with another sha256",
                         st->version);
            hc_error_hint(err, "activate another version before staging this one again");
            goto fail;
        }
        if (rename(final, old) < 0)
            goto io;
        hc_bundle_rmtree(old);
    }
    if (rename(tmp, final) < 0 || hc_dir_sync(st->dir) < 0)
        goto io;
    return 0;
io:
    hc_error_set(err, HC_E(IO), "cannot move bundle %s into '%s': %s", st->version, final,
                 strerror(errno));
fail:
    hc_bundle_rmtree(tmp);
    return -1;
}

static int verify_and_place(struct hc_agent_sw_stage *st, const struct hc_http_response *resp,
                            const struct hc_bundle_keys *keys, struct hc_error *err)
{
    char hex[65];
    hc_sha256_hex(resp->raw, resp->raw_len, hex);
    if (st->sha256[0] && strcmp(hex, st->sha256) != 0) {
        hc_error_set(err, HC_E(BUNDLE_CHECKSUM),
                     "downloaded bundle %s has sha256 %s, the controller announced %s", st->version,
                     hex, st->sha256);
        return hc_error_hint(err, "the download was damaged or altered: stage it again");
    }
    struct hc_bundle *b = hc_bundle_open(resp->raw, resp->raw_len, st->sig, keys, err);
    if (!b)
        return hc_error_prefix(err, "bundle %s refused by node", st->version);
    const struct hc_bundle_info *info = hc_bundle_info(b);
    int rc = -1;
    const char *kind = hc_bundle_kind(hc_bundle_manifest(b));
    if (strcmp(info->version, st->version) != 0)
        hc_error_set(err, HC_E(BUNDLE_MANIFEST), "the bundle served as %s is version %s",
                     st->version, info->version);
    else if (strcmp(kind, st->kind[0] ? st->kind : HC_BUNDLE_KIND_SERVICE) != 0)
        hc_error_set(err, HC_E(BUNDLE_KIND), "bundle %s is %s bundle, not %s bundle", st->version,
                     strcmp(kind, HC_BUNDLE_KIND_AGENT) ? "a service" : "an agent",
                     strcmp(kind, HC_BUNDLE_KIND_AGENT) ? "an agent" : "a service");
    else if (place(st, b, err) == 0)
        rc = 0;
    if (rc == 0) {
        snprintf(st->sha256_out, sizeof(st->sha256_out), "%s", info->sha256);
        snprintf(st->signed_by, sizeof(st->signed_by), "%s", info->signed_by);
        snprintf(st->name, sizeof(st->name), "%s", info->name);
    }
    hc_bundle_free(b);
    return rc;
}

void hc_agent_sw_stage_work(void *arg)
{
    struct hc_agent_sw_stage *st = arg;
    struct hc_error *err = &st->err;
    struct hc_http_response resp = {0};
    /* The controller is the only server that holds its key: another holder of a certificate
     * from the cluster CA (a node) never receives the staging token. The one answer larger
     * than the client's default: the bundle itself (a few bytes of headroom over the largest
     * the controller accepts). */
    struct hc_tls_client_config tls = {
        .ca_file = st->ca_file,
        .pinned_pubkey = !st->url[0] && st->controller_pin[0] ? st->controller_pin : NULL,
        .max_response = HC_BUNDLE_MAX_BYTES + 1024 * 1024};
    struct hc_http_client *c = NULL;
    struct hc_bundle_keys *keys = NULL;
    char have[65], path[1200];
    snprintf(path, sizeof(path), "%s/%s", st->dir, st->version);
    meta_field(st->dir, st->version, "sha256", have, sizeof(have));
    if (access(path, F_OK) == 0 && have[0] && (!st->sha256[0] || !strcmp(have, st->sha256))) {
        st->already = 1; /* staging is idempotent */
        snprintf(st->sha256_out, sizeof(st->sha256_out), "%s", have);
        return;
    }
    st->failed = 1;
    if (!(keys = hc_bundle_keys_new()) || hc_bundle_keys_load_dir(keys, st->keys_dir, err) < 0)
        goto cleanup;
    if (hc_bundle_keys_count(keys) == 0) {
        hc_error_set(err, HC_E(NO_TRUSTED_KEYS), "no trusted bundle keys on this node (%s)",
                     st->keys_dir);
        hc_error_hint(err, "nodes get the keys given to 'hcctld init --trust-key' when they join");
        goto cleanup;
    }
    if (!(c = hc_http_client_new(&tls, err)) || (!st->sig[0] && fetch_signature(st, c, err) < 0) ||
        download(st, c, &resp, err) < 0 || verify_and_place(st, &resp, keys, err) < 0)
        goto cleanup;
    st->failed = 0;
cleanup:
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    hc_bundle_keys_free(keys);
}

/* ---------------------------------------------------------------- life cycle */

static void service_host(const struct hc_agent_config *cfg, char *out, size_t len)
{
    char host[256];
    int port;
    if (hc_split_host_port(cfg->listen, host, sizeof(host), &port, NULL) < 0 || !host[0] ||
        !strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
        snprintf(host, sizeof(host), "127.0.0.1");
    snprintf(out, len, "%s", host);
}

struct hc_agent_software *hc_agent_software_new(struct hc_http_server *srv, struct event_base *base,
                                                const char *data_dir,
                                                const struct hc_agent_config *cfg,
                                                struct hc_error *err)
{
    char abs[PATH_MAX], current[65];
    struct hc_agent_software *sw = calloc(1, sizeof(*sw));
    if (!sw) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    sw->base = base;
    sw->cfg = *cfg;
    snprintf(sw->data_dir, sizeof(sw->data_dir), "%s", realpath(data_dir, abs) ? abs : data_dir);
    snprintf(sw->dir, sizeof(sw->dir), "%s/%s", sw->data_dir, HC_AGENT_DIR_SOFTWARE);
    snprintf(sw->keys_dir, sizeof(sw->keys_dir), "%s/%s", sw->data_dir, HC_AGENT_DIR_KEYS);
    snprintf(sw->ca_file, sizeof(sw->ca_file), "%s/%s", sw->data_dir, HC_AGENT_FILE_CA);
    service_host(cfg, sw->service_host, sizeof(sw->service_host));
    if (!cfg->storage_interface[0])
        HC_INFO("software: agent.json names no storage_interface: {storage_host} is the listen "
                "host %s",
                sw->service_host);
    /* Hooks use libcurl from job threads: initialise it here, on the main thread. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (hc_mkdir_p(sw->dir, 0755, err) < 0 || !(sw->jobs = hc_jobs_new(base)) ||
        !(sw->svc = hc_service_new(base, sw->jobs, sw->dir, err)) ||
        hc_agent_sw_routes(srv, sw, err) < 0) {
        if (!err->code[0])
            hc_error_set(err, HC_E(INTERNAL), "out of memory");
        hc_agent_software_free(sw, 0);
        return NULL;
    }
    sw->desired_running = load_desired(sw);
    hc_agent_sw_link(sw, "current", current);
    hc_service_set_idle(sw->svc, current[0] != 0);
    prune_versions(sw, 1); /* no staging job runs yet */
    return sw;
}

void hc_agent_software_start(struct hc_agent_software *sw)
{
    char current[65];
    struct hc_error err = {0};
    struct hc_service_env env;
    int adopted = 0;
    hc_agent_sw_link(sw, "current", current);
    if (!current[0])
        return;
    json_t *m = hc_agent_sw_manifest(sw, current, &err);
    hc_agent_sw_env(sw, current, &env);
    if (!m || hc_service_adopt(sw->svc, m, &env, &adopted, &err) < 0) {
        HC_ERROR("software %s cannot run: %s", current, err.message);
    } else if (adopted && !sw->desired_running) {
        HC_INFO("service %s runs but should be stopped: stopping it", current);
        hc_service_stop(sw->svc, NULL, NULL);
    } else if (!adopted && sw->desired_running && hc_service_start(sw->svc, m, &env, &err) < 0) {
        HC_ERROR("cannot start service %s: %s", current, err.message);
    }
    json_decref(m);
}

void hc_agent_software_free(struct hc_agent_software *sw, int stop_service)
{
    if (!sw)
        return;
    hc_jobs_free(sw->jobs); /* their callbacks answer the requests waiting on them */
    sw->jobs = NULL;
    hc_agent_sw_actions_cancel(sw);
    hc_service_free(sw->svc, stop_service);
    free(sw);
}
