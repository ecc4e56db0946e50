/*
 * GET /v1/ha (public: which controller leads, docs/ha.md) and GET /v1/ha/join (admin: what
 * `hcctld ha join` copies to a new controller of the cluster — the CA and its key, the shared
 * server and client keys, the SSH key, the trusted bundle keys).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "controller/api/api.h"
#include "controller/ha/ha.h"
#include "controller/state/software.h"

void hc_res_ha(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    hc_reply_json(req, 200, hc_ha_status(hc_ha_current(), api->ctl));
}

/* The data directory's files a joining controller gets, by their path under DIR. */
static const char *const join_files[] = {
    "ca.pem",     "ca.key",         "server.key",         "client.pem",
    "client.key", "ssh/id_ed25519", "ssh/id_ed25519.pub", HC_HA_SECRET_FILE,
};

/* Adds DIR/sub/NAME for every NAME ending in suffix. */
static int add_dir(json_t *files, const char *data_dir, const char *sub, const char *suffix,
                   struct hc_error *err)
{
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, sub);
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* none yet */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (e->d_name[0] == '.' || n <= k || strcmp(e->d_name + n - k, suffix) != 0)
            continue;
        char path[1500], name[600], *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        snprintf(name, sizeof(name), "%s/%s", sub, e->d_name);
        if ((rc = hc_file_read(path, &text, &len, err)) == 0)
            json_object_set_new(files, name, json_stringn(text, len));
        free(text);
    }
    closedir(d);
    return rc;
}

void hc_res_ha_join(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *files = json_object();
    for (size_t i = 0; i < HC_ARRAY_LEN(join_files); i++) {
        char path[1300], *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof(path), "%s/%s", api->ctl->data_dir, join_files[i]);
        if (hc_file_read(path, &text, &len, &err) < 0) {
            json_decref(files);
            hc_reply_error(req, &err);
            return;
        }
        json_object_set_new(files, join_files[i], json_stringn(text, len));
        free(text);
    }
    /* The bundles' signatures: the joiner downloads each bundle and checks it against its own. */
    if (add_dir(files, api->ctl->data_dir, HC_SOFTWARE_KEYS_DIR, ".pem", &err) < 0 ||
        add_dir(files, api->ctl->data_dir, HC_SOFTWARE_BUNDLES_DIR, ".sig", &err) < 0) {
        json_decref(files);
        hc_reply_error(req, &err);
        return;
    }
    struct hc_ha *ha = hc_ha_current();
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:o, s:s?}", "cluster_id", api->ctl->cluster_id, "files", files,
                            "ha_etcd", ha ? hc_ha_etcd_urls(ha) : NULL));
}
