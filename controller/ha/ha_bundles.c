/*
 * Bundles in HA mode (docs/ha.md "Bundles"): the files stay files on each controller (etcd holds
 * the bundles rows, not the archives). An upload is acknowledged only once a majority of the
 * registered controllers hold a verified copy: the leader PUTs the signature and then the archive
 * to every live standby, which checks the archive against the signature and its own trusted keys
 * before it keeps it. A new leader fetches any bundle its rows name and its disk lacks from a
 * standby. Controllers authenticate to each other with the cluster's shared secret
 * (DIR/ha.secret, made by `hcctld ha init`, copied by `hcctld ha join`).
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/https_client.h"
#include "common/https_server.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ha/ha.h"
#include "controller/ha/ha_internal.h"
#include "controller/state/software.h"
#include "db/db.h"

#define PEER_TIMEOUT_MS 60000
#define SIG_SUFFIX ".tar.gz.sig"
#define TAR_SUFFIX ".tar.gz"

int hc_ha_secret_path(const struct hc_controller *ctl, char *buf, size_t len)
{
    return snprintf(buf, len, "%s/" HC_HA_SECRET_FILE, ctl->data_dir) >= (int)len ? -1 : 0;
}

int hc_ha_secret_create(const struct hc_controller *ctl, struct hc_error *err)
{
    char path[1200], hex[65];
    hc_ha_secret_path(ctl, path, sizeof(path));
    if (access(path, F_OK) == 0)
        return 0;
    if (hc_random_hex(hex, 32) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "no randomness for the HA secret");
    return hc_file_write_atomic(path, hex, strlen(hex), 0600, err);
}

/* "Bearer hcha1.SECRET" for this data directory, or -1. */
static int bearer(const struct hc_controller *ctl, char *buf, size_t len)
{
    char path[1200], *text = NULL;
    size_t n = 0;
    struct hc_error err = {0};
    hc_ha_secret_path(ctl, path, sizeof(path));
    if (hc_file_read(path, &text, &n, &err) < 0)
        return -1;
    text[strcspn(text, "\r\n")] = '\0';
    int rc = strlen(text) == 64 ? 0 : -1;
    snprintf(buf, len, "hcha1.%s", text);
    free(text);
    return rc;
}

static int authorized(const struct hc_controller *ctl, const char *authorization)
{
    char want[128], got[128];
    if (!authorization || bearer(ctl, want, sizeof(want)) < 0)
        return 0;
    snprintf(got, sizeof(got), "%s", authorization);
    if (strncmp(got, "Bearer ", 7) != 0)
        return 0;
    return strlen(got + 7) == strlen(want) && CRYPTO_memcmp(got + 7, want, strlen(want)) == 0;
}

/* A bundle file's name as the peers exchange it: VERSION.tar.gz or VERSION.tar.gz.sig, with a
 * version of the characters bundles allow. Returns 1 (archive), 2 (signature) or 0. */
static int file_kind(const char *name, char *version, size_t len)
{
    size_t n = strlen(name);
    int kind = 0;
    size_t cut = 0;
    if (n > strlen(SIG_SUFFIX) && strcmp(name + n - strlen(SIG_SUFFIX), SIG_SUFFIX) == 0) {
        kind = 2;
        cut = n - strlen(SIG_SUFFIX);
    } else if (n > strlen(TAR_SUFFIX) && strcmp(name + n - strlen(TAR_SUFFIX), TAR_SUFFIX) == 0) {
        kind = 1;
        cut = n - strlen(TAR_SUFFIX);
    }
    if (!kind || cut >= len || cut > 64)
        return 0;
    snprintf(version, len, "%.*s", (int)cut, name);
    if (version[0] == '.' || strspn(version, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789.+-_") != cut)
        return 0;
    return kind;
}

static void bundle_file_path(const struct hc_controller *ctl, const char *name, char *buf,
                             size_t len)
{
    snprintf(buf, len, "%s/%s/%s", ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR, name);
}

/* Checks an archive against its stored signature and the trusted keys, then keeps it. */
static int keep_verified(const struct hc_controller *ctl, const char *version, const void *data,
                         size_t len, struct hc_error *err)
{
    char sig_path[1400], path[1400], name[200], *sig = NULL;
    size_t sig_len;
    snprintf(name, sizeof(name), "%s" SIG_SUFFIX, version);
    bundle_file_path(ctl, name, sig_path, sizeof(sig_path));
    if (hc_file_read(sig_path, &sig, &sig_len, err) < 0)
        return hc_error_set(err, HC_E(CONFLICT), "no signature of %s here: send it first", version);
    struct hc_bundle_keys *keys = hc_software_keys_load(ctl->data_dir, err);
    int rc = keys ? hc_bundle_verify(keys, data, len, sig, NULL, 0, err) : -1;
    hc_bundle_keys_free(keys);
    free(sig);
    if (rc < 0)
        return -1;
    snprintf(name, sizeof(name), "%s" TAR_SUFFIX, version);
    bundle_file_path(ctl, name, path, sizeof(path));
    return hc_file_write_atomic(path, data, len, 0644, err);
}

/* PUT /v1/ha/bundles/{file} on a standby: the leader's copy of a bundle file. */
void hc_ha_res_bundle_put(struct hc_request *req, void *arg)
{
    struct hc_ha *ha = arg;
    const struct hc_controller *ctl = hc_ha_controller(ha);
    struct hc_error err = {0};
    char version[80], dir[1200], path[1400];
    const char *name = hc_req_param(req, "file");
    int kind = name ? file_kind(name, version, sizeof(version)) : 0;
    size_t len = 0;
    const unsigned char *body = hc_req_body(req, &len);
    if (!authorized(ctl, hc_req_header(req, "Authorization"))) {
        hc_error_set(&err, HC_E(UNAUTHORIZED),
                     "only another controller of the cluster may do this");
    } else if (!kind) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "'%.100s' is not a bundle file name",
                     name ? name : "");
    } else {
        snprintf(dir, sizeof(dir), "%s/%s", ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR);
        if (hc_mkdir_p(dir, 0700, &err) == 0) {
            if (kind == 2) {
                struct hc_bundle_sig sig;
                char *text = strndup((const char *)body, len);
                bundle_file_path(ctl, name, path, sizeof(path));
                if (text && hc_bundle_sig_parse(text, &sig, &err) == 0)
                    hc_file_write_atomic(path, text, len, 0644, &err);
                free(text);
            } else {
                keep_verified(ctl, version, body, len, &err);
            }
        }
    }
    if (err.message[0]) {
        hc_reply_error(req, &err);
        return;
    }
    HC_INFO("ha: kept %s from the leader (%zu bytes)", name, len);
    hc_reply_json(req, 200, json_pack("{s:s, s:I}", "stored", name, "bytes", (json_int_t)len));
}

/* GET /v1/ha/bundles/{file} on a standby: a new leader fetching what it lacks. */
void hc_ha_res_bundle_get(struct hc_request *req, void *arg)
{
    struct hc_ha *ha = arg;
    const struct hc_controller *ctl = hc_ha_controller(ha);
    struct hc_error err = {0};
    char version[80], path[1400], *data = NULL;
    size_t len = 0;
    const char *name = hc_req_param(req, "file");
    if (!authorized(ctl, hc_req_header(req, "Authorization"))) {
        hc_error_set(&err, HC_E(UNAUTHORIZED),
                     "only another controller of the cluster may do this");
    } else if (!name || !file_kind(name, version, sizeof(version))) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "not a bundle file name");
    } else {
        bundle_file_path(ctl, name, path, sizeof(path));
        if (hc_file_read(path, &data, &len, &err) < 0)
            hc_error_set(&err, HC_E(NOT_FOUND), "no %s here", name);
    }
    if (err.message[0])
        hc_reply_error(req, &err);
    else
        hc_reply_data(req, 200, "application/octet-stream", data, len);
    free(data);
}

/* The head hook of the standby server: only a peer's bundle upload may be larger than 1 MiB. */
int hc_ha_head(const struct hc_route *route, const char *authorization, void *arg)
{
    (void)route;
    return authorized(hc_ha_controller(arg), authorization);
}

static struct hc_http_client *peer_client(const struct hc_controller *ctl, struct hc_error *err)
{
    struct hc_tls_client_config tls = {.ca_file = ctl->ca_file,
                                       .max_response = HC_BUNDLE_MAX_BYTES + 4096};
    return hc_http_client_new(&tls, err);
}

static int put_file(struct hc_http_client *c, const char *auth, const char *peer_url,
                    const char *name, const void *data, size_t len, struct hc_error *err)
{
    char url[1400];
    snprintf(url, sizeof(url), "%s/v1/ha/bundles/%s", peer_url, name);
    struct hc_http_response resp = {0};
    if (hc_http_request_raw(c, "PUT", url, auth, data, len, NULL, NULL, PEER_TIMEOUT_MS, &resp,
                            err) < 0)
        return -1;
    int rc = resp.status == 200 ? 0 : -1;
    if (rc < 0) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(resp.body, "error"), "message"));
        hc_error_set(err, HC_E(UNREACHABLE), "%s answered %ld: %s", url, resp.status,
                     msg ? msg : "");
    }
    hc_http_response_clear(&resp);
    return rc;
}

int hc_ha_bundle_replicate(const struct hc_controller *ctl, const char *version,
                           struct hc_error *err)
{
    struct hc_ha *ha = hc_ha_current();
    if (!ha)
        return 0;
    char auth[128], names[2][200], path[1400];
    if (bearer(ctl, auth, sizeof(auth)) < 0)
        return hc_error_set(err, HC_E(IO), "no HA secret in '%s'", ctl->data_dir);
    snprintf(names[0], sizeof(names[0]), "%s" SIG_SUFFIX, version);
    snprintf(names[1], sizeof(names[1]), "%s" TAR_SUFFIX, version);
    char *files[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        bundle_file_path(ctl, names[i], path, sizeof(path));
        if (hc_file_read(path, &files[i], &lens[i], err) < 0) {
            free(files[0]);
            return -1;
        }
    }
    json_t *peers = NULL;
    size_t registered = 0;
    int rc = -1;
    if (hc_ha_peers(ha, &peers, &registered, err) < 0)
        goto done;
    struct hc_http_client *c = peer_client(ctl, err);
    if (!c)
        goto done;
    size_t held = 1, i; /* this controller's copy */
    json_t *peer;
    char why[600] = "";
    json_array_foreach(peers, i, peer)
    {
        struct hc_error perr = {0};
        const char *url = json_string_value(peer);
        if (put_file(c, auth, url, names[0], files[0], lens[0], &perr) < 0 ||
            put_file(c, auth, url, names[1], files[1], lens[1], &perr) < 0) {
            HC_WARN("ha: bundle %s not copied to %s: %s", version, url, perr.message);
            snprintf(why, sizeof(why), "%s", perr.message);
            continue;
        }
        held++;
    }
    hc_http_client_free(c);
    size_t majority = registered / 2 + 1;
    if (held < majority) {
        hc_error_set(err, HC_E(UNREACHABLE),
                     "bundle %s reached %zu of %zu controllers; a majority (%zu) must hold it%s%s",
                     version, held, registered, majority, why[0] ? ": " : "", why);
        hc_error_hint(err, "bring the standbys back ('hcctl cluster status'), then upload again");
        goto done;
    }
    HC_INFO("ha: bundle %s held by %zu of %zu controllers", version, held, registered);
    rc = 0;
done:
    json_decref(peers);
    free(files[0]);
    free(files[1]);
    return rc;
}

int hc_ha_bundles_fetch_missing(struct hc_ha *ha, struct hc_error *err)
{
    const struct hc_controller *ctl = hc_ha_controller(ha);
    struct hc_db *db = hc_db_open(ctl->db_path, err);
    if (!db)
        return -1;
    json_t *rows = hc_db_query_json(db, err, "SELECT version FROM bundles", "");
    hc_db_close(db);
    if (!rows)
        return -1;
    json_t *peers = NULL;
    size_t registered = 0, i;
    char auth[128];
    struct hc_http_client *c = NULL;
    json_t *row;
    int rc = 0;
    json_array_foreach(rows, i, row)
    {
        const char *version = json_string_value(json_object_get(row, "version"));
        char names[2][200], path[1400];
        snprintf(names[0], sizeof(names[0]), "%s" SIG_SUFFIX, version);
        snprintf(names[1], sizeof(names[1]), "%s" TAR_SUFFIX, version);
        bundle_file_path(ctl, names[1], path, sizeof(path));
        if (access(path, R_OK) == 0)
            continue;
        if (!c && (bearer(ctl, auth, sizeof(auth)) < 0 || !(c = peer_client(ctl, err)) ||
                   hc_ha_peers(ha, &peers, &registered, err) < 0)) {
            rc = -1;
            break;
        }
        int got = 0;
        size_t k;
        json_t *peer;
        json_array_foreach(peers, k, peer)
        {
            char *data[2] = {NULL, NULL};
            size_t lens[2] = {0, 0};
            struct hc_error perr = {0};
            for (int f = 0; f < 2; f++) {
                char url[1400];
                snprintf(url, sizeof(url), "%s/v1/ha/bundles/%s", json_string_value(peer),
                         names[f]);
                struct hc_http_response resp = {0};
                if (hc_http_request(c, "GET", url, auth, NULL, PEER_TIMEOUT_MS, &resp, &perr) ==
                        0 &&
                    resp.status == 200) {
                    data[f] = resp.raw;
                    lens[f] = resp.raw_len;
                    resp.raw = NULL;
                }
                hc_http_response_clear(&resp);
            }
            if (data[0] && data[1]) {
                char dir[1200];
                snprintf(dir, sizeof(dir), "%s/%s", ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR);
                bundle_file_path(ctl, names[0], path, sizeof(path));
                got = hc_mkdir_p(dir, 0700, &perr) == 0 &&
                      hc_file_write_atomic(path, data[0], lens[0], 0644, &perr) == 0 &&
                      keep_verified(ctl, version, data[1], lens[1], &perr) == 0;
            }
            free(data[0]);
            free(data[1]);
            if (got) {
                HC_INFO("ha: bundle %s fetched from %s", version, json_string_value(peer));
                break;
            }
        }
        if (!got)
            HC_WARN("ha: no standby has bundle %s: an upgrade to it fails until it is uploaded "
                    "again",
                    version);
    }
    hc_http_client_free(c);
    json_decref(peers);
    json_decref(rows);
    return rc;
}
