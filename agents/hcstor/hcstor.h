/*
 * hcstor: the reference storage-node service (docs/hcstor.md). One process per node, a single
 * libevent loop: the HTTP server for clients and peers, the asynchronous HTTP client it uses to
 * talk to peers, and a periodic tick. Everything below runs on that one thread, so no locks.
 *
 * The four parts:
 *   store.c    blocks on disk, each with a version; the in-memory index key -> version; the
 *              fsync policy (every write, or batched)
 *   settings.c the settings (--settings FILE, the flags, built-in defaults), their validation
 *              and reload
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
#define HCSTOR_DATA_CONNS 4         /* data connections per peer (each carries one request) */
#define HCSTOR_PEER_TIMEOUT_MS 2000 /* any request to a peer, except a forwarded one */
/* A forwarded client request: the coordinator answers a write only once each replica answered
 * or timed out (HCSTOR_PEER_TIMEOUT_MS, in parallel), so a slower answer than that is a healthy
 * coordinator waiting on a hung replica; only past this is the coordinator itself not well. */
#define HCSTOR_FORWARD_TIMEOUT_MS (2 * HCSTOR_PEER_TIMEOUT_MS + 1000)
#define HCSTOR_TICK_MS 250                /* peer probes, peers-file reload, resync progress */
#define HCSTOR_RESYNC_GIVE_UP_MS 1000     /* a peer unreachable this long is skipped by a resync */
#define HCSTOR_BEHIND_GIVE_UP_MS 5000     /* a peer with an older members list, as long */
#define HCSTOR_RESYNC_PARALLEL_MAX 64     /* the top of resync_parallelism's range */
#define HCSTOR_MIN_FREE_MB_MAX (16 << 20) /* the top of min_free_mb's range: 16 TiB */
#define HCSTOR_DIRTY_MAX 256 /* fsync batch: at most this many writes await their fsync */
/* The event loop did not run this long (SIGSTOP, starved): its peers' requests to it timed out,
 * so they marked it down and wrote around it, and it resyncs before it serves again. */
#define HCSTOR_STALL_MS HCSTOR_PEER_TIMEOUT_MS
#define HCSTOR_OK_TO_STOP_MS 300 /* a peer silent this long during ok-to-stop is not counted */
#define HCSTOR_DROP_BATCH 512    /* stale copies asked about in one round (cluster.c "drops") */

/* This node's state, and a peer's state as this node last saw it. */
enum hcstor_state {
    HCSTOR_DOWN = 0,  /* peers only: not answering */
    HCSTOR_RESYNCING, /* up, takes replica writes, not yet in sync: serves no reads */
    HCSTOR_SERVING,   /* up and in sync */
    HCSTOR_DRAINING,  /* refusing client requests, about to stop */
};
const char *hcstor_state_name(enum hcstor_state s);

enum hcstor_log_level { HCSTOR_DEBUG, HCSTOR_INFO, HCSTOR_WARN, HCSTOR_ERROR };
enum hcstor_fsync { HCSTOR_FSYNC_ALWAYS, HCSTOR_FSYNC_BATCH };

/* The settings (settings.c has the table: names, ranges, which apply live). An enum setting is
 * stored as the index of its word. */
struct hcstor_settings {
    int log_level;          /* live: enum hcstor_log_level */
    int resync_parallelism; /* live: block fetches a resync runs at once */
    int fsync;              /* restart: enum hcstor_fsync */
    int fsync_interval_ms;  /* restart: batch mode, the longest a write waits for its fsync */
    int min_free_mb;        /* restart: /health fails while the data directory has less free */
};

struct hcstor_peer {
    char name[HCSTOR_NAME_MAX];
    char domain[HCSTOR_NAME_MAX]; /* its failure domain, "" when none (a domain of its own) */
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
    /* The epoch of its members list, from its last /health answer (0: not known yet). Until
     * every peer is known to have ours the membership change is unsettled (cluster.c). */
    int64_t epoch;
    int64_t heard_ms;              /* monotonic ms of its last answer or message */
    struct evhttp_connection *ctl; /* probes and control messages */
    struct evhttp_connection *data[HCSTOR_DATA_CONNS]; /* block traffic, round-robin */
    unsigned next_data;
    struct evhttp_connection *fwd[HCSTOR_DATA_CONNS]; /* forwarded client requests, as long */
    unsigned next_fwd;
    /* A resync's fetches from this peer, one request per connection so that resync_parallelism
     * fetches are really on the wire at once; opened when needed, closed when the resync ends. */
    struct evhttp_connection *fetch[HCSTOR_RESYNC_PARALLEL_MAX];
    unsigned char fetch_busy[HCSTOR_RESYNC_PARALLEL_MAX];
};

struct hcstor {
    struct event_base *base;
    char node[HCSTOR_NAME_MAX];
    char domain[HCSTOR_NAME_MAX]; /* this node's failure domain from the peers file, "" none */
    char data[1024];
    char blocks[1100];
    char version[65];
    char peers_path[1100];
    char incarnation[33];
    char host[256];
    int port;
    int fail_health;
    /* settings: flags = built-in defaults overridden by the flags; wanted = flags overridden by
     * the settings file; set = in effect (wanted, except restart settings changed since start) */
    struct hcstor_settings flags, wanted, set;
    char settings_path[1100]; /* empty: started without --settings */
    int replication;          /* wanted; the effective factor is capped by the member count */
    enum hcstor_state state;
    json_t *index; /* key -> version (integer); the blocks this node holds */
    int64_t hlc;   /* last version handed out (hybrid clock, microseconds) */
    /* membership from the peers file; peers excludes this node */
    struct hcstor_peer peers[HCSTOR_PEERS_MAX];
    size_t npeers;
    int64_t peers_epoch;
    struct timespec peers_mtime;
    /* The members before the latest change (this node included) and their replication factor:
     * while the change is unsettled, a coordinated write goes to the replicas of both, because
     * a member still on the old list serves the block by the old placement. */
    char prev[HCSTOR_PEERS_MAX + 1][HCSTOR_NAME_MAX];
    char prev_domain[HCSTOR_PEERS_MAX + 1][HCSTOR_NAME_MAX]; /* their failure domains then */
    size_t nprev;
    int prev_rf;
    /* Copies held here that the members no longer place here: dropped once every owner said it
     * holds the block at this version or newer (a round of /internal/holds at a time). */
    json_t *drop_round; /* key -> [version, owners asked, owners that hold it]; NULL: none */
    int64_t drop_epoch; /* the members epoch the round was asked under */
    size_t drop_cursor; /* where the next round starts among the stale copies */
    int64_t dropped;    /* stale copies dropped since start */
    /* requests being served asynchronously; drain answers once this reaches 0 */
    int in_flight;
    struct evhttp_request *drain_reply;
    int drain_notices; /* draining notices to peers not yet answered */
    /* resync: keys to fetch as a JSON array of [key, version, peer index] */
    json_t *fetch_queue;
    int fetching;
    int fetch_peak; /* the most fetches in flight at once during this resync */
    int64_t resync_started_ms;
    int64_t resynced_keys;
    struct event *tick;
    int64_t loop_seen_ms; /* monotonic: the loop last ran a tick or a request (stall check) */
    /* fsync batch: written and renamed, not yet fsynced (descriptors kept open until then) */
    int dirty[HCSTOR_DIRTY_MAX];
    size_t ndirty;
    struct event *flush_timer;
    int64_t syncs;   /* fsync calls that succeeded */
    int64_t flushes; /* batches made durable */
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
/* Deletes this node's copy of key (file, then the directory made durable); the index forgets
 * it. -1 with why. */
int hcstor_store_drop(struct hcstor *s, const char *key, char *why, size_t why_len);
int64_t hcstor_next_version(struct hcstor *s, const char *key);
int hcstor_key_valid(const char *key);
/* fsync batch: makes every write not yet durable so (no-op in mode always or when none is). */
void hcstor_store_flush(struct hcstor *s);

/* settings.c */
void hcstor_settings_defaults(struct hcstor_settings *set);
/* A flag's text for setting name into set; -1 with why (naming the setting) when bad. */
int hcstor_setting_from_text(struct hcstor_settings *set, const char *name, const char *text,
                             char *why, size_t len);
/* At start: s->flags overridden by the settings file (if any) into s->wanted and s->set. */
int hcstor_settings_load(struct hcstor *s, char *why, size_t len);
/* SIGHUP and POST /reload: re-reads the file; on success applies the live settings, keeps the
 * changed restart ones pending and returns the answer (the caller owns it); NULL with why
 * (naming the bad key) when the file is refused, every old value kept. */
json_t *hcstor_settings_reload(struct hcstor *s, char *why, size_t len);
/* New references: the settings in effect {name: value}, and the pending restart ones. */
json_t *hcstor_settings_json(const struct hcstor_settings *set);
json_t *hcstor_settings_pending(const struct hcstor *s);
const char *hcstor_fsync_name(int mode);

/* cluster.c */
int hcstor_cluster_init(struct hcstor *s);
/* The number of distinct failure domains among the members (a member without one counts as
 * one of its own). */
size_t hcstor_domain_count(const struct hcstor *s);
size_t hcstor_replicas(const struct hcstor *s, const char *key, int *out, size_t max);
int hcstor_is_replica(const struct hcstor *s, const char *key);
/* Where a coordinated write of key goes besides this node: its replicas (as hcstor_replicas)
 * and, while the latest membership change is unsettled, the replicas the previous members
 * placed it on that are still members. */
size_t hcstor_write_targets(const struct hcstor *s, const char *key, int *out, size_t max);
/* 1 once every peer is known to hold this node's members list (or a newer one). */
int hcstor_members_settled(const struct hcstor *s);
/* Re-reads the peers file now when it changed, and acts on a membership change (resync, or
 * serving on when only members were added). 1 when the membership changed. */
int hcstor_members_reload(struct hcstor *s);
/* Copies held here that this node is no longer a replica of (not yet dropped). */
int64_t hcstor_stale_copies(const struct hcstor *s);
/* POST /internal/holds {"epoch", "keys": [[key, version]...]}: which of them this node holds at
 * that version or newer, durably: {"node", "held": [key...]}; 409 members_behind when the
 * asker's members epoch is not this node's. */
void hcstor_holds_answer(struct hcstor *s, struct evhttp_request *req, json_t *body);
/* 1 when this node may serve key from its own copy: it is serving, a replica of key, and shares
 * key with no peer its resync skipped. */
int hcstor_in_sync_for(const struct hcstor *s, const char *key);
int hcstor_effective_rf(const struct hcstor *s);
struct hcstor_peer *hcstor_peer_by_name(struct hcstor *s, const char *name);
struct evhttp_connection *hcstor_peer_conn(struct hcstor_peer *p);
/* For a forwarded client request: HCSTOR_FORWARD_TIMEOUT_MS, not HCSTOR_PEER_TIMEOUT_MS. */
struct evhttp_connection *hcstor_peer_fwd_conn(struct hcstor_peer *p);
void hcstor_peer_mark_down(struct hcstor *s, struct hcstor_peer *p);
void hcstor_set_state(struct hcstor *s, enum hcstor_state st);
/* The resync: begins on start-up and when a peer says we missed writes. */
void hcstor_resync_kick(struct hcstor *s);
int64_t hcstor_resync_pending(const struct hcstor *s);
/* Every peer is listed again: this node may have missed writes coordinated by any of them. */
void hcstor_resync_all(struct hcstor *s);
/* Called by every tick and request: after a stall of the loop, resyncs from every peer. */
void hcstor_check_stall(struct hcstor *s);
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
/* One line on stderr when level is at or above the log_level in effect. */
void hcstor_log(const struct hcstor *s, enum hcstor_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
