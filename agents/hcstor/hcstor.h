/*
 * hcstor: the reference storage-node service (docs/hcstor.md). One process per node, a single
 * libevent loop: the HTTP server for clients and peers, the asynchronous HTTP client it uses to
 * talk to peers, and a periodic tick. Everything below runs on that one thread, so no locks.
 *
 * The three parts:
 *   store.c    blocks on disk, each with a version; the in-memory index key -> version
 *   cluster.c  membership (the peers file the agent writes), placement (rendezvous hashing),
 *              each peer's state as this node sees it, resync
 *   main.c     the HTTP API: client requests (coordinated or forwarded), peer requests, hooks
 */
#ifndef HC_HCSTOR_H
#define HC_HCSTOR_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error_codes.h"

#define HCSTOR_KEY_MAX 128
#define HCSTOR_BLOCK_MAX (16 * 1024 * 1024)
#define HCSTOR_PEERS_MAX 64
#define HCSTOR_NAME_MAX 64
#define HCSTOR_DATA_CONNS 4           /* data connections per peer (each carries one request) */
#define HCSTOR_PEER_TIMEOUT_MS 2000   /* any request to a peer */
#define HCSTOR_TICK_MS 250            /* peer probes, peers-file reload, resync progress */
#define HCSTOR_RESYNC_GIVE_UP_MS 1000 /* a peer unreachable this long is skipped by a resync */
#define HCSTOR_BEHIND_GIVE_UP_MS 5000 /* a peer with an older members list, as long */
#define HCSTOR_FETCH_PARALLEL 8
#define HCSTOR_OK_TO_STOP_MS 300 /* a peer silent this long during ok-to-stop is not counted */

/* This node's state, and a peer's state as this node last saw it. */
enum hcstor_state {
    HCSTOR_DOWN = 0,  /* peers only: not answering */
    HCSTOR_RESYNCING, /* up, takes replica writes, not yet in sync: serves no reads */
    HCSTOR_SERVING,   /* up and in sync */
    HCSTOR_DRAINING,  /* refusing client requests, about to stop */
};
const char *hcstor_state_name(enum hcstor_state s);

struct hcstor_peer {
    char name[HCSTOR_NAME_MAX];
    char host[256];
    int port;
    enum hcstor_state state;
    char incarnation[33];
    int64_t changed_ms; /* monotonic: when a message from the peer last set its state */
    int probing;        /* a /health probe is in flight */
    /* Set when a replica write to this peer was skipped or failed: it missed data, and is told
     * to resync from us once it answers again (cleared by its hello or that request). */
    int suspect;
    /* Resync of this node from the peer: must list the peer's keys (again). */
    int need_list;
    int listing;
    /* A resync gave up on this peer (unreachable): it may hold writes this node missed, so
     * this node serves no read of a block the two share until it has listed the peer. */
    int skipped;
    /* Its members list is older than ours (it answered the listing 409 members_behind): the
     * listing is retried until it has ours, for up to HCSTOR_BEHIND_GIVE_UP_MS from
     * behind_since; after that it counts as skipped until its hello (it loaded a list). */
    int64_t behind_since;
    int behind;
    int64_t unreachable_since; /* monotonic ms, 0 while reachable; resync gives up after a while */
    int64_t heard_ms;          /* monotonic ms of its last answer or message */
    struct evhttp_connection *ctl;                     /* probes and control messages */
    struct evhttp_connection *data[HCSTOR_DATA_CONNS]; /* block traffic, round-robin */
    unsigned next_data;
};

struct hcstor {
    struct event_base *base;
    char node[HCSTOR_NAME_MAX];
    char data[1024];
    char blocks[1100];
    char version[65];
    char peers_path[1100];
    char incarnation[33];
    char host[256];
    int port;
    int fail_health;
    int replication; /* wanted; the effective factor is capped by the member count */
    enum hcstor_state state;
    json_t *index; /* key -> version (integer); the blocks this node holds */
    int64_t hlc;   /* last version handed out (hybrid clock, microseconds) */
    /* membership from the peers file; peers excludes this node */
    struct hcstor_peer peers[HCSTOR_PEERS_MAX];
    size_t npeers;
    int64_t peers_epoch;
    struct timespec peers_mtime;
    /* requests being served asynchronously; drain answers once this reaches 0 */
    int in_flight;
    struct evhttp_request *drain_reply;
    int drain_notices; /* draining notices to peers not yet answered */
    /* resync: keys to fetch as a JSON array of [key, version, peer index] */
    json_t *fetch_queue;
    int fetching;
    int64_t resync_started_ms;
    int64_t resynced_keys;
    struct event *tick;
};

/* store.c */
int hcstor_store_open(struct hcstor *s, char *why, size_t len);
/* Writes a block durably (data, rename, directory) with its version; updates the index. */
int hcstor_store_put(struct hcstor *s, const char *key, int64_t version, const void *data,
                     size_t len, char *why, size_t why_len);
/* Opens a block for reading: returns a descriptor positioned at its data, its length and
 * version, or -1 (errno ENOENT for an unknown key). The caller closes the descriptor. */
int hcstor_store_open_block(const struct hcstor *s, const char *key, off_t *offset, size_t *len,
                            int64_t *version);
int64_t hcstor_store_version(const struct hcstor *s, const char *key); /* 0: not held */
int64_t hcstor_next_version(struct hcstor *s, const char *key);
int hcstor_key_valid(const char *key);

/* cluster.c */
int hcstor_cluster_init(struct hcstor *s);
size_t hcstor_replicas(const struct hcstor *s, const char *key, int *out, size_t max);
int hcstor_is_replica(const struct hcstor *s, const char *key);
/* 1 when this node may serve key from its own copy: it is serving, a replica of key, and shares
 * key with no peer its resync skipped. */
int hcstor_in_sync_for(const struct hcstor *s, const char *key);
int hcstor_effective_rf(const struct hcstor *s);
struct hcstor_peer *hcstor_peer_by_name(struct hcstor *s, const char *name);
struct evhttp_connection *hcstor_peer_conn(struct hcstor_peer *p);
void hcstor_peer_mark_down(struct hcstor *s, struct hcstor_peer *p);
void hcstor_set_state(struct hcstor *s, enum hcstor_state st);
/* The resync: begins on start-up and when a peer says we missed writes. */
void hcstor_resync_kick(struct hcstor *s);
int64_t hcstor_resync_pending(const struct hcstor *s);
/* Tells every peer this node's state; calls done(s) once all answered or failed. */
void hcstor_announce(struct hcstor *s, void (*done)(struct hcstor *s));
/* Probes every peer now; calls done(s, arg) once every probe finished. */
void hcstor_probe_all(struct hcstor *s, void (*done)(struct hcstor *s, void *arg), void *arg);
/* Sends an HTTP request to a peer; cb gets the response (NULL on failure) and arg. */
int hcstor_peer_request(struct hcstor *s, struct evhttp_connection *conn, enum evhttp_cmd_type type,
                        const char *uri, const void *body, size_t body_len,
                        const char *version_header,
                        void (*cb)(struct evhttp_request *res, void *arg), void *arg);

/* main.c: the reply helpers shared by the parts */
void hcstor_reply_json(struct evhttp_request *req, int status, json_t *body);
/* The error shape with code's status (a row of common/error_codes.h: HC_E(NOT_FOUND)). */
void hcstor_reply_error(struct evhttp_request *req, const struct hc_code *code, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));
void hcstor_log(const struct hcstor *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
