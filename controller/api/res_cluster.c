/*
 * GET /v1/version and GET /v1/cluster: what the controller is, and the cluster at a glance
 * (node health counts, active operations, controller uptime and poll interval); GET /v1/checks,
 * the pre-flight checks (controller/state/checks.h).
 */
#include <stdio.h>

#include "common/util.h"
#include "controller/api/api.h"
#include "controller/ops/ops.h"
#include "controller/state/ca_rotation.h"
#include "controller/state/certs.h"
#include "controller/state/checks.h"
#include "controller/state/nodes.h"

void hc_res_version(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, json_pack("{s:s, s:s}", "version", HC_VERSION, "api", "v1"));
}

/* The clusters row as the API's cluster object. */
static json_t *cluster_object(struct hc_db *db, const char *id, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err, "SELECT id, name, mtu, created_at FROM clusters WHERE id = ?", "s", id);
    if (!rows)
        return NULL;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row) {
        hc_error_set(err, HC_E(INTERNAL), "cluster '%s' is missing from the database", id);
        hc_error_hint(err, "the data dir and its database do not belong together");
        return NULL;
    }
    char ts[32];
    hc_time_format(json_integer_value(json_object_get(row, "created_at")), ts, sizeof(ts));
    json_object_set_new(row, "created_at", json_string(ts));
    return row;
}

static json_t *controller_object(const struct hc_controller *ctl)
{
    int64_t uptime_s = (hc_mono_ms() - ctl->started_mono_ms) / 1000;
    return json_pack("{s:s, s:I, s:I}", "version", HC_VERSION, "uptime_seconds",
                     (json_int_t)uptime_s, "poll_interval_ms", (json_int_t)ctl->poll_interval_ms);
}

void hc_res_cluster_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = NULL;
    json_t *cluster = cluster_object(api->db, api->ctl->cluster_id, &err);
    json_t *counts = cluster ? hc_nodes_health_counts(api->db, &err) : NULL;
    json_t *active = counts ? hc_ops_active(api->db, &err) : NULL;
    json_t *certs = active ? hc_certs_summary(api->ctl, api->db, hc_now_ms(), &err) : NULL;
    json_t *rotation = certs ? hc_ca_rotation_status(api->db, &err) : NULL;
    if (rotation) {
        json_object_del(rotation, "bundle_pem");
        json_object_set_new(certs, "rotation", rotation);
    } else if (certs) {
        json_decref(certs);
        certs = NULL;
    }
    if (certs)
        body = json_pack("{s:O, s:O, s:{s:O}, s:o, s:O}", "cluster", cluster, "nodes", counts,
                         "operations", "active", active, "controller", controller_object(api->ctl),
                         "certificates", certs);
    json_decref(cluster);
    json_decref(counts);
    json_decref(active);
    json_decref(certs);
    hc_api_reply(req, 200, body, &err);
}

static size_t controller_certs(const struct hc_api *api, struct hc_check_cert certs[3])
{
    hc_certs_own(api->ctl, certs);
    return 3;
}

json_t *hc_api_checks(struct hc_api *api, struct hc_error *err)
{
    struct hc_check_cert certs[3];
    size_t n = controller_certs(api, certs);
    return hc_checks_run(api->db, certs, n, hc_now_ms(), err);
}

int hc_api_checks_gate(struct hc_api *api, const json_t *skip, json_t **report,
                       struct hc_error *err)
{
    struct hc_check_cert certs[3];
    size_t n = controller_certs(api, certs);
    return hc_checks_gate(api->db, certs, n, hc_now_ms(), skip, report, err);
}

void hc_res_checks_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    hc_api_reply(req, 200, hc_api_checks(api, &err), &err);
}
