/*
 * `hcctld ha join`: a new controller's data directory made from a running one (docs/ha.md
 * "Adding a controller"). The leader's GET /v1/ha/join (admin token, the server checked against
 * the cluster CA the operator copied) hands over the CA and its key, the server key (every
 * controller serves with the same key, so the key pin agents and hcctl hold fits each), the
 * controller's client identity toward agents, the SSH key and the trusted bundle keys; this
 * controller's server certificate is issued here for its own address. Bundles are downloaded
 * and checked against their signature files' digests.
 */
#include "controller/ha/join.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/init.h"
#include "controller/state/software.h"
#include "db/db.h"

#define JOIN_MAX_SANS 16
#define JOIN_TIMEOUT_MS 30000

/* A relative path a join answer may name: one of ours, nothing that climbs out. */
static int safe_name(const char *name)
{
    return name[0] && name[0] != '/' && !strstr(name, "..") && strlen(name) < 200 &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+") ==
               strlen(name);
}

static int write_file(const char *dir, const char *name, const char *text, size_t len,
                      struct hc_error *err)
{
    char path[1400];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (hc_mkdir_p(path, 0700, err) < 0)
        return -1;
    *slash = '/';
    size_t n = strlen(name);
    int secret = (n > 4 && strcmp(name + n - 4, ".key") == 0) ||
                 (strstr(name, "id_ed25519") && !strstr(name, ".pub"));
    return hc_file_write_atomic(path, text, len, secret ? 0600 : 0644, err);
}

static int issue_server_cert(const struct hc_controller *ctl, const struct hc_join_options *o,
                             struct hc_error *err)
{
    X509 *ca = hc_pki_cert_load(ctl->ca_file, err), *cert = NULL;
    EVP_PKEY *ca_key = ca ? hc_pki_key_load(ctl->ca_key_file, err) : NULL;
    EVP_PKEY *key = ca_key ? hc_pki_key_load(ctl->server_key, err) : NULL;
    int rc = -1;
    if (!key)
        goto done;
    const char *sans[JOIN_MAX_SANS + 4];
    size_t n = 0;
    if (strcmp(ctl->listen_host, "0.0.0.0") != 0 && strcmp(ctl->listen_host, "::") != 0)
        sans[n++] = ctl->listen_host;
    if (ctl->advertise_host[0])
        sans[n++] = ctl->advertise_host;
    for (size_t i = 0; i < o->nsans && n < JOIN_MAX_SANS; i++)
        sans[n++] = o->sans[i];
    sans[n++] = "localhost";
    sans[n++] = "127.0.0.1";
    struct hc_cert_spec spec = {
        .cn = "hcctld", .sans = sans, .nsans = n, .server_auth = 1, .days = HC_INIT_CERT_DAYS};
    char serial[33];
    if (!(cert = hc_pki_issue(ca, ca_key, key, &spec, serial, err)) ||
        hc_pki_cert_save(cert, ctl->server_cert, err) < 0)
        goto done;
    rc = 0;
done:
    X509_free(cert);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    return rc;
}

/* Downloads the bundle a signature file names and checks its digest (field 3 of the line). */
static int fetch_bundle(struct hc_http_client *c, const struct hc_join_options *o,
                        const char *data_dir, const char *sig_name, const char *sig,
                        struct hc_error *err)
{
    const char *base = strrchr(sig_name, '/') + 1;
    size_t n = strlen(base);
    if (n <= strlen(".tar.gz.sig") || strcmp(base + n - strlen(".tar.gz.sig"), ".tar.gz.sig") != 0)
        return 0;
    char version[200], want[65] = "", url[1200];
    snprintf(version, sizeof(version), "%.*s", (int)(n - strlen(".tar.gz.sig")), base);
    if (sscanf(sig, "hcsig1 %*s %64s", want) != 1 || strlen(want) != 64)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "signature of '%s' is malformed", version);
    snprintf(url, sizeof(url), "%s/v1/software/%s/bundle", o->from, version);
    struct hc_http_response resp = {0};
    if (hc_http_request(c, "GET", url, o->token, NULL, JOIN_TIMEOUT_MS, &resp, err) < 0)
        return -1;
    int rc = -1;
    char got[65];
    if (resp.status != 200) {
        hc_error_set(err, HC_E(UNREACHABLE), "GET %s answered %ld", url, resp.status);
        goto done;
    }
    hc_sha256_hex(resp.raw, resp.raw_len, got);
    if (strcmp(got, want) != 0) {
        hc_error_set(err, HC_E(BUNDLE_CHECKSUM), "bundle %s from %s is not the signed file",
                     version, o->from);
        goto done;
    }
    char name[300];
    snprintf(name, sizeof(name), "%s/%s.tar.gz", HC_SOFTWARE_BUNDLES_DIR, version);
    rc = write_file(data_dir, name, resp.raw, resp.raw_len, err);
done:
    hc_http_response_clear(&resp);
    return rc;
}

int hc_ha_join(const struct hc_join_options *o, struct hc_join_result *res, struct hc_error *err)
{
    memset(res, 0, sizeof(*res));
    struct stat st;
    if (stat(o->data_dir, &st) == 0)
        return hc_error_set(err, HC_E(CONFLICT), "'%s' exists already", o->data_dir);
    if (strncmp(o->from, "https://", 8) != 0 || strpbrk(o->from + 8, "/?#@ "))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--from '%s' is not https://HOST:PORT",
                            o->from);
    struct hc_controller ctl = {0};
    hc_controller_paths(&ctl, o->data_dir);
    if (hc_split_host_port(o->listen, ctl.listen_host, sizeof(ctl.listen_host), &ctl.listen_port,
                           err) < 0 ||
        (o->advertise &&
         hc_controller_parse_advertise(o->advertise, ctl.advertise_host, sizeof(ctl.advertise_host),
                                       &ctl.advertise_port, err) < 0))
        return -1;
    struct hc_tls_client_config tls = {.ca_file = o->ca_file,
                                       .max_response = HC_BUNDLE_MAX_BYTES + 4096};
    struct hc_http_client *c = hc_http_client_new(&tls, err);
    if (!c)
        return -1;
    char url[1200];
    snprintf(url, sizeof(url), "%s/v1/ha/join", o->from);
    struct hc_http_response resp = {0};
    int rc = -1;
    if (hc_http_request(c, "GET", url, o->token, NULL, JOIN_TIMEOUT_MS, &resp, err) < 0)
        goto done;
    json_t *files = json_object_get(resp.body, "files");
    const char *cluster = json_string_value(json_object_get(resp.body, "cluster_id"));
    if (resp.status != 200 || !json_is_object(files) || !cluster) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(resp.body, "error"), "message"));
        hc_error_set(
            err, resp.status == 401 || resp.status == 403 ? HC_E(UNAUTHORIZED) : HC_E(UNREACHABLE),
            "GET %s answered %ld: %s", url, resp.status, msg ? msg : "no join data");
        goto done;
    }
    if (hc_mkdir_p(o->data_dir, 0700, err) < 0)
        goto done;
    const char *name;
    json_t *v;
    json_object_foreach(files, name, v)
    {
        if (!json_is_string(v) || !safe_name(name)) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "the join answer names a bad file '%.100s'",
                         name);
            goto done;
        }
        if (write_file(o->data_dir, name, json_string_value(v), json_string_length(v), err) < 0)
            goto done;
    }
    json_t *settings = json_pack("{s:s, s:s}", "cluster_id", cluster, "listen", o->listen);
    /* The etcd the leader runs on: `hcctld run` on this directory is in HA mode by itself. */
    const char *etcd = json_string_value(json_object_get(resp.body, "ha_etcd"));
    if (etcd && strlen(etcd) < sizeof(ctl.ha_etcd))
        json_object_set_new(settings, "ha_etcd", json_string(etcd));
    if (o->advertise)
        json_object_set_new(settings, "advertise", json_string(o->advertise));
    char *text = json_dumps(settings, JSON_INDENT(2));
    json_decref(settings);
    char path[1300];
    snprintf(path, sizeof(path), "%s/controller.json", o->data_dir);
    int wrc = text ? hc_file_write_atomic(path, text, strlen(text), 0644, err) : -1;
    free(text);
    if (wrc < 0 || issue_server_cert(&ctl, o, err) < 0)
        goto done;
    struct hc_db *db = hc_db_open(ctl.db_path, err); /* an empty cache until it leads */
    if (!db)
        goto done;
    hc_db_close(db);
    json_object_foreach(files, name, v)
    {
        if (strncmp(name, HC_SOFTWARE_BUNDLES_DIR "/", strlen(HC_SOFTWARE_BUNDLES_DIR) + 1) == 0) {
            if (fetch_bundle(c, o, o->data_dir, name, json_string_value(v), err) < 0)
                goto done;
            res->bundles++;
        }
    }
    snprintf(res->cluster_id, sizeof(res->cluster_id), "%s", cluster);
    res->files = json_object_size(files);
    rc = 0;
done:
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    return rc;
}
