/* CA rotation: the steps that call agents (see ca_rotate.h). */
#include "controller/remote/ca_rotate.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/crl.h"
#include "controller/remote/agent_client.h"
#include "controller/state/ca_rotation.h"
#include "controller/state/nodes.h"

/* Gives reachable agents that do not trust it yet the phase's bundle. Returns how many nodes
 * do not say they trust it (reachable or not). */
static size_t push_bundle(struct hc_controller *ctl, struct hc_db *db,
                          struct hc_http_client *client, const json_t *row,
                          const struct hc_node_row *rows, size_t n)
{
    const char *digest = hc_json_str(row, "bundle_digest", "");
    size_t pending = 0, pushed = 0;
    json_t *body = json_pack("{s:s}", "ca_pem", hc_json_str(row, "bundle_pem", ""));
    for (size_t i = 0; i < n; i++) {
        if (rows[i].agent_ca_digest && strcmp(rows[i].agent_ca_digest, digest) == 0)
            continue;
        pending++;
        if (!rows[i].health || strcmp(rows[i].health, "reachable") != 0 ||
            pushed >= HC_CA_ROTATE_PUSH_PER_CYCLE)
            continue;
        pushed++;
        struct hc_http_response resp = {0};
        struct hc_error err = {0};
        if (hc_agent_call(client, rows[i].agent_url, "PUT", "/v1/cert/ca", body,
                          hc_agent_timeout_ms(ctl), &resp, &err) < 0)
            HC_WARN("CA rotation: node %s does not take the trusted CAs: %s", rows[i].name,
                    err.message);
        hc_http_response_clear(&resp);
    }
    json_decref(body);
    (void)db;
    return pending;
}

/* Phase reissue: every node not on the new CA is made due; returns how many certificates (the
 * nodes' and the controller's two) are not the new CA's yet. */
static size_t reissue(struct hc_controller *ctl, struct hc_db *db, X509 *fresh,
                      const struct hc_node_row *rows, size_t n, int64_t now)
{
    size_t pending = 0;
    for (size_t i = 0; i < n; i++) {
        if (hc_ca_issued(fresh, rows[i].cert_pem))
            continue;
        pending++;
        struct hc_error err = {0};
        if (!rows[i].cert_next_serial && rows[i].cert_renew_at > 0 && rows[i].cert_renew_at > now &&
            hc_node_cert_renew_now(db, rows[i].id, &err) < 0)
            HC_WARN("CA rotation: node %s: %s", rows[i].name, err.message);
    }
    /* the API thread reissues these within its 10 s check (certs.h hc_certs_renew_own) */
    pending += !hc_ca_file_issued(fresh, ctl->server_cert);
    pending += !hc_ca_file_issued(fresh, ctl->client_cert);
    return pending;
}

void hc_ca_rotate_cycle(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client)
{
    struct hc_error err = {0};
    struct hc_node_row *rows = NULL;
    size_t n = 0;
    X509 *fresh = NULL;
    json_t *row = hc_ca_rotation_row(db, &err);
    if (!row || json_is_null(row))
        goto cleanup;
    int changed = hc_ca_rotate_files(ctl, db, &err);
    if (changed < 0 || (changed > 0 && hc_crl_write(ctl, db, &err) < 0))
        goto cleanup;
    struct hc_node_filter joined = {.state = "joined"};
    if (hc_nodes_rows(db, &joined, &rows, &n, &err) < 0 ||
        !(fresh = hc_pki_cert_from_pem(hc_json_str(row, "new_pem", ""), &err)))
        goto cleanup;
    const char *phase = hc_json_str(row, "phase", "");
    if (strcmp(phase, "trust") == 0) {
        if (push_bundle(ctl, db, client, row, rows, n) == 0 &&
            hc_ca_rotation_phase(
                db, "reissue", NULL,
                "every node trusts both CAs; the new CA signs from now on and every "
                "certificate is reissued",
                &err) == 0 &&
            hc_ca_rotate_files(ctl, db, &err) >= 0)
            hc_crl_write(ctl, db, &err);
    } else if (strcmp(phase, "reissue") == 0) {
        if (reissue(ctl, db, fresh, rows, n, hc_now_ms()) == 0 &&
            hc_ca_rotation_phase(
                db, "drop", hc_json_str(row, "new_pem", ""),
                "every certificate is the new CA's; nodes are given the new CA alone", &err) == 0 &&
            hc_ca_rotate_files(ctl, db, &err) >= 0)
            hc_crl_write(ctl, db, &err);
    } else if (strcmp(phase, "drop") == 0) {
        if (push_bundle(ctl, db, client, row, rows, n) == 0)
            hc_ca_rotation_finish(ctl, db, row, &err);
    }
cleanup:
    if (err.message[0])
        HC_WARN("CA rotation: %s", err.message);
    X509_free(fresh);
    hc_node_rows_free(rows, n);
    json_decref(row);
}
