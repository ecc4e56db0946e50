/*
 * /v1/software (docs/api.md "Software"): upload (the raw .tar.gz as the body, the signature line
 * in the X-HC-Signature header, a body limit of its own), list, show, remove, and the bundle
 * download agents stage from.
 */
#include <stdio.h>
#include <stdlib.h>

#include "controller/api/api.h"
#include "controller/state/software.h"

void hc_res_software_upload(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    size_t len;
    int already = 0;
    const unsigned char *data = hc_req_body(req, &len);
    const char *sig = hc_req_header(req, HC_SOFTWARE_SIG_HEADER);
    if (!sig) {
        hc_error_set(&err, HC_E(BUNDLE_SIGNATURE),
                     "upload has no signature (header " HC_SOFTWARE_SIG_HEADER ")");
        hc_error_hint(&err, "send the .sig line of the bundle: 'hcctl software upload FILE'");
        hc_reply_error(req, &err);
        return;
    }
    json_t *body =
        hc_software_store(api->ctl, api->db, data, len, sig, hc_api_actor(req), &already, &err);
    if (body && already)
        json_object_set_new(body, "already_uploaded", json_true());
    hc_api_reply(req, already ? 200 : 201, body, &err);
}

/* What a bundle's object reads: the bundle, and which nodes run it or operations use it. */
#define SOFTWARE_DEPS (HC_DEP(BUNDLES) | HC_DEP(NODES) | HC_DEP(OPERATIONS) | HC_DEP(CLUSTERS))

void hc_res_software_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    struct hc_api_page page;
    if (hc_api_page_parse(req, &page, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    if (hc_api_cached(api, req, SOFTWARE_DEPS))
        return;
    /* ordered by version (hc_software_list): the cursor is the last bundle's version */
    json_t *body = hc_api_page_apply(hc_software_list(api->db, &err), "bundles", "version",
                                     HC_API_ORDER_LIST, &page, &err);
    hc_api_reply_etag(api, req, SOFTWARE_DEPS, body, &err);
}

void hc_res_software_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    if (hc_api_cached(api, req, SOFTWARE_DEPS))
        return;
    hc_api_reply_etag(api, req, SOFTWARE_DEPS,
                      hc_software_get(api->db, hc_req_param(req, "version"), &err), &err);
}

void hc_res_software_remove(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *version = hc_req_param(req, "version");
    json_t *body = NULL;
    if (hc_software_remove(api->ctl, api->db, version, hc_api_actor(req), &err) == 0)
        body = json_pack("{s:b, s:s}", "removed", 1, "version", version);
    hc_api_reply(req, 200, body, &err);
}

void hc_res_software_bundle(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    char *data = NULL;
    size_t len = 0;
    if (hc_software_read(api->ctl, api->db, hc_req_param(req, "version"), &data, &len, &err) < 0)
        hc_reply_error(req, &err);
    else
        hc_reply_data(req, 200, "application/gzip", data, len);
    free(data);
}
