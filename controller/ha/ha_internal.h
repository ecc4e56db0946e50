/* What ha.c and ha_bundles.c share (not for the rest of the controller). */
#ifndef HC_CONTROLLER_HA_HA_INTERNAL_H
#define HC_CONTROLLER_HA_HA_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "common/https_server.h"
#include "controller/ha/ha.h"

const struct hc_controller *hc_ha_controller(struct hc_ha *ha);
/* The URLs of the other live controllers, and how many are registered (this one too). */
int hc_ha_peers(struct hc_ha *ha, json_t **urls, size_t *registered, struct hc_error *err);

int hc_ha_secret_path(const struct hc_controller *ctl, char *buf, size_t len);
/* DIR/ha.secret, made once (hcctld ha init). */
int hc_ha_secret_create(const struct hc_controller *ctl, struct hc_error *err);

/* The standby server's bundle routes and head hook (arg: the struct hc_ha). */
void hc_ha_res_bundle_put(struct hc_request *req, void *arg);
void hc_ha_res_bundle_get(struct hc_request *req, void *arg);
int hc_ha_head(const struct hc_route *route, const char *authorization, void *arg);
/* A new leader's missing bundle files, from a standby. */
int hc_ha_bundles_fetch_missing(struct hc_ha *ha, struct hc_error *err);

#endif
