/*
 * hcctld in HA mode (docs/ha.md): several instances over etcd, one leader at a time.
 *
 * hc_ha_start connects to etcd, registers this instance and starts the election thread, which
 * campaigns for /hcctl/leader with a lease and, once leading, renews it every TTL/4. Until it
 * leads, hc_ha_standby serves the standby API on the controller's address (GET /v1/ha; every
 * other request answers 421 not_leader naming the leader, or 503 no_leader during an election).
 * When it leads, hc_ha_take_over rebuilds the local SQLite cache from etcd's rows and turns
 * replication on (db/replicate.h), and the caller serves as a single controller would, except
 * that every commit goes to etcd first, fenced by the leader key's revision.
 *
 * Leadership ends only with the process: a lost lease, a fenced write etcd refused, or no
 * renewal for 2/3 of the TTL makes the process exit at once (HC_HA_EXIT_LOST) — no worker can
 * outlive it — and the supervisor (the unit's Restart=on-failure) starts it again as a standby.
 */
#ifndef HC_CONTROLLER_HA_HA_H
#define HC_CONTROLLER_HA_HA_H

#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "controller/controller.h"
#include "controller/ha/etcd.h"

#define HC_HA_EXIT_LOST 75 /* EX_TEMPFAIL: leadership lost; restart as a standby */
#define HC_HA_DEFAULT_TTL_S 3
#define HC_HA_PREFIX "/hcctl/"
#define HC_HA_KEY_LEADER "/hcctl/leader"
#define HC_HA_KEY_SCHEMA "/hcctl/meta/schema"
#define HC_HA_KEY_TERM_BASE "/hcctl/meta/term_base"
#define HC_HA_KEY_CLUSTER "/hcctl/meta/cluster_id"
#define HC_HA_PREFIX_ROWS "/hcctl/rows/"
#define HC_HA_PREFIX_MEMBERS "/hcctl/members/"
#define HC_HA_PREFIX_ALIVE "/hcctl/alive/"
#define HC_HA_ROWS_PAGE 2000          /* rows per range page of a rebuild (~0.6 MB) */
#define HC_HA_SECRET_FILE "ha.secret" /* how controllers authenticate to each other */

struct hc_ha;

struct hc_ha_options {
    const char *etcd_urls;
    int64_t ttl_s; /* lease TTL; 0: HC_HA_DEFAULT_TTL_S */
};

/* The etcd client of a data directory: its certificates (DIR/etcd-client.pem, else the
 * controller's client certificate) and the cluster CA. */
struct hc_etcd *hc_ha_etcd_open(const struct hc_controller *ctl, const char *urls, long timeout_ms,
                                struct hc_error *err);

struct hc_ha *hc_ha_start(struct hc_controller *ctl, const struct hc_ha_options *o,
                          struct hc_error *err);
/* Serves the standby API until this instance leads (1) or a signal stops it (0); -1 with err. */
int hc_ha_standby(struct hc_ha *ha, struct hc_error *err);
/* The new leader's cache rebuilt from etcd, replication and the term on. */
int hc_ha_take_over(struct hc_ha *ha, struct hc_error *err);
/* Hands leadership over at a clean stop (revokes the lease) and frees. */
void hc_ha_stop(struct hc_ha *ha);

/* Records urls as DIR/controller.json's "ha_etcd": `hcctld run` is then in HA mode without
 * --ha-etcd, and the commands that write the local database refuse (it is only a cache). */
int hc_ha_mark_data_dir(const struct hc_controller *ctl, const char *urls, struct hc_error *err);
const char *hc_ha_etcd_urls(const struct hc_ha *ha);

/* The process's HA state, NULL in single mode; and GET /v1/ha's body for it. */
struct hc_ha *hc_ha_current(void);
json_t *hc_ha_status(struct hc_ha *ha, const struct hc_controller *ctl);

/* An uploaded bundle's files copied to the live standbys: 0 once a majority of the registered
 * controllers hold verified copies (always 0 in single mode), else -1 with err. */
int hc_ha_bundle_replicate(const struct hc_controller *ctl, const char *version,
                           struct hc_error *err);

/* `hcctld ha init`: the data directory's rows, schema version, term base and member into an
 * empty etcd prefix. Returns the number of rows. */
long hc_ha_init(const struct hc_controller *ctl, const char *urls, struct hc_error *err);
/* `hcctld ha export`: a standalone database at out_path (must not exist) from etcd's rows; its
 * fencing generation above every term used. Returns the number of rows. */
long hc_ha_export(const struct hc_controller *ctl, const char *urls, const char *out_path,
                  struct hc_error *err);

#endif
