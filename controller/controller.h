/*
 * The controller's shared context: paths, settings and the pieces every subsystem reaches.
 * Owned by main (controller/main.c); subsystems hold a pointer and never free it.
 */
#ifndef HC_CONTROLLER_CONTROLLER_H
#define HC_CONTROLLER_CONTROLLER_H

#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>

#include "common/constants.h"
#include "common/error.h"
#include "common/stop.h"

#define HC_CONTROLLER_DEFAULT_POLL_MS 2000
#define HC_CONTROLLER_DEFAULT_WORKERS 4
/* How long events are kept (hcctld run --events-retention; docs/hcctld.md "Events retention") */
#define HC_CONTROLLER_DEFAULT_EVENTS_RETENTION_MS (30LL * 24 * 3600 * 1000)

struct hc_ops_pool;
struct hc_poller;

struct hc_controller {
    char data_dir[1024];
    char db_path[1100];
    char ca_file[1100];     /* DIR/ca.pem */
    char ca_key_file[1100]; /* DIR/ca.key */
    char server_cert[1100]; /* DIR/server.pem */
    char server_key[1100];  /* DIR/server.key */
    char client_cert[1100]; /* DIR/client.pem: the controller's identity toward agents */
    char client_key[1100];
    char listen_host[256];
    int listen_port;
    char advertise_host[256]; /* where nodes reach the controller; "" = the listen address */
    int advertise_port;
    char cluster_id[64];
    char ha_etcd[1024]; /* HA mode: etcd's client URLs (controller.json "ha_etcd", written by
                           `hcctld ha init` and `ha join`); "" in single mode */
    int64_t poll_interval_ms;
    int64_t agent_timeout_ms; /* per request to an agent; below the poll interval */
    int workers;
    int64_t events_retention_ms;   /* 0: keep every event */
    int64_t agent_cert_lifetime_s; /* of the certificates issued to agents (hcctld run
                                      --agent-cert-lifetime); 0: the default */
    int64_t started_mono_ms;
    struct event_base *base; /* the API thread's loop */
    struct hc_ops_pool *ops;
    struct hc_poller *poller;
    struct hc_stop stopping; /* set on the API thread (SIGTERM/SIGINT), read by every thread */
};

/* Agents' certificates are valid this long unless told otherwise (docs/certificates.md). */
#define HC_AGENT_CERT_DEFAULT_LIFETIME_S (365LL * 86400)
static inline int64_t hc_agent_cert_lifetime_s(const struct hc_controller *ctl)
{
    return ctl->agent_cert_lifetime_s > 0 ? ctl->agent_cert_lifetime_s
                                          : HC_AGENT_CERT_DEFAULT_LIFETIME_S;
}

/* During a CA rotation both CAs' keys are kept as DIR/ca-keys/FINGERPRINT.key (ca.key is a
 * copy of the one that signs): controller/remote/ca_rotate.h. */
#define HC_CA_KEYS_DIR "ca-keys"
static inline void hc_ca_key_path(const struct hc_controller *ctl, const char *fingerprint,
                                  char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%s.key", ctl->data_dir, HC_CA_KEYS_DIR, fingerprint);
}

/* Fills the path fields from data_dir. */
void hc_controller_paths(struct hc_controller *ctl, const char *data_dir);
/* The URL nodes are given to reach the controller: https://ADVERTISE, else https://LISTEN.
 * Returns 0, or -1 with err when that is a wildcard address nodes cannot be told. */
int hc_controller_url(const struct hc_controller *ctl, char *buf, size_t len, struct hc_error *err);
/* 0 when the server certificate names the advertised host (or none is set), else -1 with err:
 * agents check the name, so an address the certificate lacks could never be joined. */
int hc_controller_check_advertise(const struct hc_controller *ctl, struct hc_error *err);
/* Parses an --advertise ADDR:PORT (no wildcard, a real port). 0 or -1 with err. */
int hc_controller_parse_advertise(const char *text, char *host, size_t len, int *port,
                                  struct hc_error *err);

/* Number of completed poll cycles (for tests and /metrics), 0 for NULL: a counter the poller
 * (controller/remote/poller.c) publishes, read without waiting on anything, so that the API
 * thread needs no node-talking header for it. */
uint64_t hc_poller_cycles(const struct hc_poller *p);
/* The durations of the last cycles (at most HC_POLLER_CYCLE_WINDOW): median, 99th percentile,
 * their sum, and the last one, in ms; all 0 before the first cycle. Returns how many cycles they
 * cover. */
#define HC_POLLER_CYCLE_WINDOW 256
struct hc_poller_cycle_stats {
    int64_t p50_ms, p99_ms, sum_ms, last_ms;
};
int hc_poller_cycle_stats(struct hc_poller *p, struct hc_poller_cycle_stats *out);

#endif
