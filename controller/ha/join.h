/* `hcctld ha join`: a second or third controller's data directory, from the leader (join.c). */
#ifndef HC_CONTROLLER_HA_JOIN_H
#define HC_CONTROLLER_HA_JOIN_H

#include <stddef.h>

#include "common/error.h"
#include "controller/controller.h"

struct hc_join_options {
    const char *data_dir;  /* created; must not exist */
    const char *from;      /* https://HOST:PORT of a running controller of the cluster */
    const char *token;     /* an admin API token */
    const char *ca_file;   /* the cluster CA (DIR/ca.pem of the first controller) */
    const char *listen;    /* this controller's ADDR:PORT */
    const char *advertise; /* or NULL */
    const char *const *sans;
    size_t nsans;
};

struct hc_join_result {
    char cluster_id[64];
    size_t files, bundles;
};

int hc_ha_join(const struct hc_join_options *o, struct hc_join_result *res, struct hc_error *err);

#endif
