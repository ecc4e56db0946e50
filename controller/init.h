/*
 * Setting up and loading a controller's data directory: `hcctld init` (database, cluster row,
 * CA and certificates, controller.json, the first admin token and the local CLI config) and the
 * loading of that directory by `hcctld run`. The file layout is in docs/architecture.md "Files".
 */
#ifndef HC_CONTROLLER_INIT_H
#define HC_CONTROLLER_INIT_H

#include <stddef.h>

#include "common/error.h"
#include "controller/api/auth.h"
#include "controller/controller.h"

#define HC_INIT_DEFAULT_LISTEN "127.0.0.1:7443"
#define HC_INIT_DEFAULT_CLUSTER_NAME "default"
#define HC_INIT_CA_DAYS 3650
#define HC_INIT_CERT_DAYS 3650 /* the controller's own certificates (renewed: certs.h) */

/* Every string is borrowed. */
struct hc_init_options {
    const char *data_dir;
    const char *listen;      /* ADDR:PORT; NULL for HC_INIT_DEFAULT_LISTEN */
    const char *advertise;   /* ADDR:PORT nodes and the CLI use; NULL: the listen address */
    const char *const *sans; /* extra server certificate names (DNS names or IPs) */
    size_t nsans;
    const char *cluster_name;      /* NULL for HC_INIT_DEFAULT_CLUSTER_NAME */
    const char *cli_config;        /* NULL for the default path (hc_init_cli_config_path) */
    int force;                     /* start over in an initialised directory */
    const char *const *trust_keys; /* Ed25519 public keys (PEM files) trusted to sign bundles */
    size_t ntrust_keys;
    int64_t admin_token_ttl_ms; /* the first admin token's life; 0: until revoked */
};

struct hc_init_result {
    char cluster_id[64];
    char admin_token[HC_AUTH_TOKEN_TEXT_MAX]; /* the only copy besides DIR/admin.token */
    char controller_url[320];
    char cli_config[1100];
    int cli_config_kept; /* an existing CLI config was moved to cli_config + ".bak" */
    char ca_fingerprint[65];
};

/* Initialises opts->data_dir. Refuses (409 conflict) a directory that already has a database or
 * controller.json unless force, in which case the old database and settings are removed first.
 * Returns 0 or -1 with err. */
int hc_init_run(const struct hc_init_options *opts, struct hc_init_result *res,
                struct hc_error *err);

/* $XDG_CONFIG_HOME/hcctl/config.json, else ~/.config/hcctl/config.json. 0 or -1 with err. */
int hc_init_cli_config_path(char *buf, size_t len, struct hc_error *err);

/* Fills ctl's paths and the settings in DIR/controller.json (listen and advertised addresses,
 * cluster id), and
 * the defaults of the other settings. Returns 0 or -1 with err (e.g. not initialised). */
int hc_controller_load(struct hc_controller *ctl, const char *data_dir, struct hc_error *err);

#endif
