/*
 * hchollow: one process serving many agent identities on loopback addresses, for the controller's
 * scale tests and benchmarks (kubemark-style; docs/hollow.md). Each identity enrolls through the
 * real join flow and answers the real agent API from an in-memory model of a node.
 */
#ifndef HC_TOOLS_HOLLOW_H
#define HC_TOOLS_HOLLOW_H

#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>

#include "agents/hcagent/cert.h"
#include "agents/hcagent/fence.h"
#include "common/bundle.h"
#include "common/error.h"
#include "common/https_server.h"

#define HOLLOW_MAX_NODES 20000
#define HOLLOW_HISTORY_KEEP 64
#define HOLLOW_MAX_STAGED 8
#define HOLLOW_MAX_STALLED 64
#define HOLLOW_DISK_TOTAL (100LL * 1024 * 1024 * 1024) /* the data directory's size it reports */

enum hollow_fault {
    FAULT_NONE = 0,
    FAULT_UNREACHABLE, /* listener closed, connections dropped, no echoes */
    FAULT_STALLED,     /* TCP accepted, never answered; big UDP echoes dropped */
    FAULT_SLOW,        /* every reply delayed by slow_ms */
    FAULT_FAILING,     /* the service fails its health check */
};

struct hollow;

/* One node: its identity and the model of its agent and storage service. */
struct hollow_node {
    struct hollow *h;
    int index;
    char name[64];
    char addr[INET_ADDRSTRLEN];
    struct in_addr in;
    char dir[1100]; /* DATA_DIR/NAME: agent.key, agent.pem, ca.pem, node.json, controller-term */
    char client_pin[128];
    int enrolled;
    struct hc_agent_fence *fence; /* the highest controller term seen (agents/hcagent/fence.h) */
    struct hc_http_server *srv;   /* NULL while unreachable or stalled */
    struct hc_agent_cert *cert;   /* its certificate routes, hcagent's code (cert.h); with srv */
    struct evconnlistener *stall_lev;
    int stalled_fds[HOLLOW_MAX_STALLED]; /* connections a stalled node holds without reading */
    int nstalled;
    enum hollow_fault fault;
    int slow_ms;
    int mtu;
    int64_t clock_offset_ms; /* added to the time /v1/status reports (control "clock") */
    int disk_free_percent;   /* of HOLLOW_DISK_TOTAL, what /v1/status reports (control "disk") */
    int echo_fd;             /* the UDP echo responder on ADDR:7445, -1 without */
    struct event *echo_ev;
    /* software */
    char current[65], previous[65], staging[65];
    char staged[HOLLOW_MAX_STAGED][65];
    int nstaged;
    int busy; /* an activation or rollback is running */
    /* service */
    int running;
    long pid;
    int64_t started_wall;
    int restarts;
    int drained;
    json_t *history; /* array of the last HOLLOW_HISTORY_KEEP transitions */
    int64_t peers_epoch;
    /* settings (revision 0: none handed) */
    int64_t revision;
    json_t *overrides; /* object */
    json_t *values;    /* effective values of the current version, NULL without a schema */
    json_t *started;   /* values the running service started with */
    char digest[65];
    int restart_pending; /* judged when the values or the running service change */
};

struct hollow {
    struct event_base *base;
    char controller[512];
    char ca_file[1024];
    char ca_pem_path[1100];
    char *ca_pem;
    char data_dir[1024];
    char token[512]; /* admin API token: mints one join token per identity */
    int count;
    int port;
    int enroll_parallel;
    int activate_ms;
    int default_mtu;
    struct in_addr first;
    struct hollow_node *nodes;
    struct hc_bundle_keys *keys; /* --trust-key: what staged bundles are verified with */
    json_t *manifests;           /* version -> manifest, shared by every node */
    pthread_mutex_t manifests_mu;
    struct evconnlistener *control;
    long pid_seq;
    uint64_t requests, echoes, staged_bytes, stage_failures;
};

/* tools/hollow/enroll.c: loads DIR/NAME's identity, or enrolls it. 0 or -1 with err. */
int hollow_identities(struct hollow *h, struct hc_error *err);

/* tools/hollow/model.c: the agent API of one node. */
int hollow_serve(struct hollow_node *n, struct hc_error *err);
void hollow_unserve(struct hollow_node *n);
void hollow_node_init(struct hollow_node *n);
void hollow_node_clear(struct hollow_node *n);
int hollow_set_fault(struct hollow_node *n, enum hollow_fault f, int arg, struct hc_error *err);
const char *hollow_fault_name(enum hollow_fault f);
int hollow_fault_parse(const char *s, enum hollow_fault *out);

/* tools/hollow/control.c: the UDP echo responder and the control socket. */
int hollow_echo_start(struct hollow *h, struct hc_error *err);
int hollow_control_start(struct hollow *h, const char *path, struct hc_error *err);
/* Parses a RANGE (all | I | I-J | a node name) into [*lo, *hi]. 0 or -1. */
int hollow_range_parse(const struct hollow *h, const char *text, int *lo, int *hi);
/* One control line; the answer (one JSON line, new reference). */
json_t *hollow_control_line(struct hollow *h, const char *line);
/* `hchollow ctl --control PATH WORDS...` */
int hollow_ctl_main(int argc, char **argv);

#endif
