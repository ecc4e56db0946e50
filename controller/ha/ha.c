/* hcctld in HA mode: election, standby API, takeover, the replication sender (ha.h). */
#include "controller/ha/ha.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/https_server.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ha/fence.h"
#include "controller/ha/fence_store.h"
#include "controller/ha/ha_internal.h"
#include "db/db.h"
#include "db/replicate.h"

enum ha_role { ROLE_STANDBY, ROLE_LEADER };

struct hc_ha {
    struct hc_controller *ctl;
    struct hc_etcd *elect;  /* the election thread's */
    struct hc_etcd *writes; /* the commits' (replication sender) */
    char name[300];
    char url[300];
    char etcd_urls[1024];
    int64_t ttl_s;
    int64_t term_base;
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    pthread_mutex_t lock; /* guards the fields below */
    enum ha_role role;
    int64_t lease;
    int64_t leader_rev; /* create_revision of our leader key: the fence of every write */
    int64_t term;
    char leader_name[300]; /* "" when no leader is known */
    char leader_url[300];
    int64_t leader_term;
    atomic_llong renewed_mono_ms; /* when the last successful keepalive was sent */
    struct event_base *standby_base;
    atomic_int won;
    /* GET /v1/ha is public: its etcd part (members, each endpoint's status) is asked at most
     * once per HA_STATUS_CACHE_MS, however often anyone calls. Guarded by status_lock. */
    pthread_mutex_t status_lock;
    json_t *status_etcd; /* {"members": [...], "etcd": [...]} */
    int64_t status_mono_ms;
};

#define HA_STATUS_CACHE_MS 1000

static struct hc_ha *current_ha;

struct hc_ha *hc_ha_current(void)
{
    return current_ha;
}

const struct hc_controller *hc_ha_controller(struct hc_ha *ha)
{
    return ha->ctl;
}

const char *hc_ha_etcd_urls(const struct hc_ha *ha)
{
    return ha->etcd_urls;
}

int hc_ha_mark_data_dir(const struct hc_controller *ctl, const char *urls, struct hc_error *err)
{
    char path[1200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/controller.json", ctl->data_dir);
    if (hc_file_read(path, &text, &len, err) < 0)
        return -1;
    json_t *doc = json_loadb(text, len, 0, NULL);
    free(text);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return hc_error_set(err, HC_E(INVALID_JSON), "'%s' is not a JSON object", path);
    }
    json_object_set_new(doc, "ha_etcd", json_string(urls));
    char *out = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    int rc = out ? hc_file_write_atomic(path, out, strlen(out), 0644, err)
                 : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(out);
    return rc;
}

/* Leadership lost: nothing this process does from now on may reach an agent or etcd. */
static void lost(const char *why)
{
    HC_ERROR("leadership lost: %s; exiting (a supervisor restarts hcctld as a standby)", why);
    fflush(NULL);
    _exit(HC_HA_EXIT_LOST);
}

struct hc_etcd *hc_ha_etcd_open(const struct hc_controller *ctl, const char *urls, long timeout_ms,
                                struct hc_error *err)
{
    char cert[1200], key[1200];
    snprintf(cert, sizeof(cert), "%s/etcd-client.pem", ctl->data_dir);
    snprintf(key, sizeof(key), "%s/etcd-client.key", ctl->data_dir);
    int own = access(cert, R_OK) == 0 && access(key, R_OK) == 0;
    struct hc_etcd_tls tls = {.ca_file = ctl->ca_file,
                              .cert_file = own ? cert : ctl->client_cert,
                              .key_file = own ? key : ctl->client_key};
    return hc_etcd_new(urls, &tls, timeout_ms, err);
}

/* ---------------------------------------------------------------- fencing */

static int64_t renew_deadline_ms(const struct hc_ha *ha)
{
    return ha->ttl_s * 1000 * 2 / 3;
}

static int leader_check(struct hc_error *err)
{
    struct hc_ha *ha = current_ha;
    if (!ha)
        return 0;
    int64_t age = hc_mono_ms() - atomic_load(&ha->renewed_mono_ms);
    pthread_mutex_lock(&ha->lock);
    int leading = ha->role == ROLE_LEADER;
    pthread_mutex_unlock(&ha->lock);
    if (leading && age < renew_deadline_ms(ha))
        return 0;
    return hc_error_set(err, HC_E(NOT_LEADER),
                        "this controller's leadership was not renewed for %lld ms: it drives "
                        "nothing",
                        (long long)age);
}

/* ---------------------------------------------------------------- replication sender */

/* Appends op (about payload bytes once encoded) to a transaction being built; 1 when it has
 * reached what one etcd request may carry (etcd.h), so the caller sends this part now. */
static int batch_add(json_t *ops, size_t *bytes, json_t *op, size_t payload)
{
    json_array_append_new(ops, op);
    *bytes += payload * 4 / 3 + 64; /* base64, and the JSON around it */
    return json_array_size(ops) >= HC_ETCD_TXN_MAX_OPS || *bytes >= HC_ETCD_TXN_MAX_BYTES;
}

static int send_part(struct hc_ha *ha, json_t *ops)
{
    struct hc_error err = {0};
    json_t *cmp = json_array();
    json_array_append_new(cmp, hc_etcd_cmp_create(HC_HA_KEY_LEADER, ha->leader_rev));
    int rc = hc_etcd_txn(ha->writes, cmp, ops, NULL, NULL, NULL, &err);
    if (rc == 1)
        return 0;
    /* Refused (another leader) or unknown (etcd unreachable, timed out): either way this
     * cache may now differ from etcd; only a new takeover makes them one again. */
    lost(rc == 0 ? "etcd refused a write fenced by this leader's key (another leader was elected)"
                 : err.message);
    return -1;
}

static int ha_send(void *arg, const struct hc_db_change *ch, size_t n)
{
    struct hc_ha *ha = arg;
    if (leader_check(NULL) < 0)
        lost("a write while the lease was not renewed in time");
    json_t *ops = json_array();
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        char key[400];
        snprintf(key, sizeof(key), HC_HA_PREFIX_ROWS "%s/%lld", ch[i].table,
                 (long long)ch[i].rowid);
        json_t *op = ch[i].image ? hc_etcd_op_put(key, ch[i].image, strlen(ch[i].image), 0)
                                 : hc_etcd_op_delete(key, 0);
        /* A transaction larger than etcd takes goes in parts, in order (docs/ha.md: only a
         * purge of old events is that large, and a part lost with a leader is harmless). */
        if (batch_add(ops, &bytes, op, 2 * strlen(key) + (ch[i].image ? strlen(ch[i].image) : 0))) {
            if (send_part(ha, ops) < 0)
                return -1;
            ops = json_array();
            bytes = 0;
        }
    }
    if (json_array_size(ops) == 0) {
        json_decref(ops);
        return 0;
    }
    return send_part(ha, ops);
}

/* Columns the poller rewrites every cycle: not worth a write to etcd each; a new leader learns
 * them again in its first poll cycle (replicate.h). */
static const char *const local_columns[] = {
    "nodes.last_seen",       "nodes.uptime_s",
    "nodes.poll_latency_ms", "nodes.service_observed_at",
    "nodes.clock_offset_ms", "nodes.data_dir_free_bytes",
    "interfaces.updated_at", NULL,
};

/* ---------------------------------------------------------------- election */

static void set_leader_from(struct hc_ha *ha, const char *value, int64_t create_rev)
{
    json_t *v = value ? json_loads(value, 0, NULL) : NULL;
    pthread_mutex_lock(&ha->lock);
    snprintf(ha->leader_name, sizeof(ha->leader_name), "%s",
             v ? json_string_value(json_object_get(v, "name")) ?: "" : "");
    snprintf(ha->leader_url, sizeof(ha->leader_url), "%s",
             v ? json_string_value(json_object_get(v, "url")) ?: "" : "");
    ha->leader_term = v ? ha->term_base + create_rev : 0;
    pthread_mutex_unlock(&ha->lock);
    json_decref(v);
}

/* One campaign: 1 won, 0 someone else leads (recorded), -1 etcd failed. */
static int campaign(struct hc_ha *ha, struct hc_error *err)
{
    json_t *me = json_pack("{s:s, s:s}", "name", ha->name, "url", ha->url);
    char *value = json_dumps(me, JSON_COMPACT);
    json_decref(me);
    json_t *cmp = json_array(), *ok = json_array(), *fail = json_array();
    json_array_append_new(cmp, hc_etcd_cmp_create(HC_HA_KEY_LEADER, 0));
    json_array_append_new(ok, hc_etcd_op_put(HC_HA_KEY_LEADER, value, strlen(value), ha->lease));
    json_array_append_new(fail, hc_etcd_op_range(HC_HA_KEY_LEADER));
    free(value);
    int64_t rev = 0;
    json_t *resp = NULL;
    int rc = hc_etcd_txn(ha->elect, cmp, ok, fail, &rev, &resp, err);
    if (rc == 1) {
        pthread_mutex_lock(&ha->lock);
        ha->leader_rev = rev;
        ha->term = ha->term_base + rev;
        snprintf(ha->leader_name, sizeof(ha->leader_name), "%s", ha->name);
        snprintf(ha->leader_url, sizeof(ha->leader_url), "%s", ha->url);
        ha->leader_term = ha->term;
        pthread_mutex_unlock(&ha->lock);
    } else if (rc == 0) {
        /* responses[0].response_range.kvs[0]: the leader as it stands */
        json_t *kv = json_array_get(
            json_object_get(json_object_get(json_array_get(json_object_get(resp, "responses"), 0),
                                            "response_range"),
                            "kvs"),
            0);
        const char *v64 = json_string_value(json_object_get(kv, "value"));
        char *v = v64 ? hc_etcd_unb64(v64, NULL) : NULL;
        set_leader_from(ha, v, hc_etcd_int(kv, "create_revision", 0));
        free(v);
    }
    json_decref(resp);
    return rc;
}

/* One unconditional put (lease 0: none). */
static int put_one(struct hc_etcd *etcd, const char *key, const char *value, int64_t lease,
                   struct hc_error *err)
{
    json_t *ops = json_array();
    json_array_append_new(ops, hc_etcd_op_put(key, value, strlen(value), lease));
    return hc_etcd_txn(etcd, NULL, ops, NULL, NULL, NULL, err) == 1 ? 0 : -1;
}

static int put_alive(struct hc_ha *ha, struct hc_error *err)
{
    char key[400];
    snprintf(key, sizeof(key), HC_HA_PREFIX_ALIVE "%s", ha->name);
    return put_one(ha->elect, key, ha->url, ha->lease, err);
}

static int new_lease(struct hc_ha *ha, struct hc_error *err)
{
    int64_t id;
    if (hc_etcd_lease_grant(ha->elect, ha->ttl_s, &id, err) < 0)
        return -1;
    pthread_mutex_lock(&ha->lock);
    ha->lease = id;
    pthread_mutex_unlock(&ha->lock);
    atomic_store(&ha->renewed_mono_ms, hc_mono_ms());
    return put_alive(ha, err);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void *election_thread(void *arg)
{
    struct hc_ha *ha = arg;
    int64_t renew_every = ha->ttl_s * 1000 / 4;
    int have_lease = 0;
    while (!atomic_load(&ha->stop)) {
        struct hc_error err = {0};
        if (!have_lease) {
            if (new_lease(ha, &err) < 0) {
                HC_WARN("ha: cannot get a lease from etcd: %s", err.message);
                sleep_ms(500);
                continue;
            }
            have_lease = 1;
        }
        pthread_mutex_lock(&ha->lock);
        int leading = ha->role == ROLE_LEADER;
        pthread_mutex_unlock(&ha->lock);
        if (!leading) {
            int rc = campaign(ha, &err);
            if (rc == 1) {
                HC_INFO("ha: elected leader, term %lld", (long long)ha->term);
                pthread_mutex_lock(&ha->lock);
                ha->role = ROLE_LEADER;
                pthread_mutex_unlock(&ha->lock);
                atomic_store(&ha->won, 1);
                pthread_mutex_lock(&ha->lock);
                if (ha->standby_base)
                    event_base_loopbreak(ha->standby_base);
                pthread_mutex_unlock(&ha->lock);
            } else if (rc < 0) {
                HC_WARN("ha: campaign failed: %s", err.message);
            }
        }
        int64_t sent = hc_mono_ms();
        int64_t ttl = 0;
        if (hc_etcd_lease_keepalive(ha->elect, ha->lease, &ttl, &err) == 0) {
            if (ttl <= 0) {
                if (leading)
                    lost("the lease expired in etcd");
                have_lease = 0; /* a standby simply takes a new one */
                continue;
            }
            atomic_store(&ha->renewed_mono_ms, sent);
        } else {
            HC_WARN("ha: lease keepalive failed: %s", err.message);
        }
        if (leading && hc_mono_ms() - atomic_load(&ha->renewed_mono_ms) >= renew_deadline_ms(ha))
            lost("the lease could not be renewed for 2/3 of its TTL");
        /* A standby tries for the leader key 10 times a second (a failed compare costs etcd one
         * read); a leader renews every TTL/4. */
        int64_t wait = leading ? renew_every - (hc_mono_ms() - sent) : 100;
        if (wait > 0)
            sleep_ms(wait);
    }
    return NULL;
}

static int read_term_base(struct hc_ha *ha, struct hc_error *err)
{
    int found;
    char *v = hc_etcd_get(ha->elect, HC_HA_KEY_TERM_BASE, &found, NULL, err);
    if (!v && !found && err && err->message[0])
        return -1;
    if (!found) {
        free(v);
        hc_error_set(err, HC_E(ETCD), "etcd holds no hcctl state (no %s)", HC_HA_KEY_TERM_BASE);
        return hc_error_hint(err, "run 'hcctld ha init' on the first controller");
    }
    ha->term_base = strtoll(v, NULL, 10);
    free(v);
    return 0;
}

static int register_member(struct hc_ha *ha, struct hc_error *err)
{
    char key[400];
    snprintf(key, sizeof(key), HC_HA_PREFIX_MEMBERS "%s", ha->name);
    json_t *me = json_pack("{s:s, s:s}", "name", ha->name, "url", ha->url);
    char *value = json_dumps(me, JSON_COMPACT);
    json_decref(me);
    int rc = value ? put_one(ha->elect, key, value, 0, err)
                   : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(value);
    return rc;
}

struct hc_ha *hc_ha_start(struct hc_controller *ctl, const struct hc_ha_options *o,
                          struct hc_error *err)
{
    struct hc_ha *ha = calloc(1, sizeof(*ha));
    if (!ha) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ha->lock, NULL);
    pthread_mutex_init(&ha->status_lock, NULL);
    ha->ctl = ctl;
    ha->ttl_s = o->ttl_s > 0 ? o->ttl_s : HC_HA_DEFAULT_TTL_S;
    /* An etcd call must end well within the lease, so a renewal is tried again in time. */
    long timeout = (long)(ha->ttl_s * 1000 / 3);
    if (hc_controller_url(ctl, ha->url, sizeof(ha->url), err) < 0)
        goto fail;
    snprintf(ha->etcd_urls, sizeof(ha->etcd_urls), "%s", o->etcd_urls);
    snprintf(ha->name, sizeof(ha->name), "%s", ha->url + strlen("https://"));
    if (!(ha->elect = hc_ha_etcd_open(ctl, o->etcd_urls, timeout, err)) ||
        !(ha->writes = hc_ha_etcd_open(ctl, o->etcd_urls, timeout, err)))
        goto fail;
    if (read_term_base(ha, err) < 0 || register_member(ha, err) < 0)
        goto fail;
    int found;
    char *cluster = hc_etcd_get(ha->elect, HC_HA_KEY_CLUSTER, &found, NULL, err);
    if (found && strcmp(cluster, ctl->cluster_id) != 0) {
        hc_error_set(err, HC_E(CONFLICT), "etcd holds cluster %s, this data directory is %s",
                     cluster, ctl->cluster_id);
        free(cluster);
        goto fail;
    }
    free(cluster);
    current_ha = ha;
    if (pthread_create(&ha->thread, NULL, election_thread, ha) != 0) {
        current_ha = NULL;
        hc_error_set(err, HC_E(INTERNAL), "cannot start the election thread");
        goto fail;
    }
    ha->thread_started = 1;
    HC_INFO("ha: member %s of etcd %s, lease TTL %llds", ha->name, o->etcd_urls,
            (long long)ha->ttl_s);
    return ha;
fail:
    hc_etcd_free(ha->elect);
    hc_etcd_free(ha->writes);
    free(ha);
    return NULL;
}

void hc_ha_stop(struct hc_ha *ha)
{
    if (!ha)
        return;
    atomic_store(&ha->stop, 1);
    if (ha->thread_started)
        pthread_join(ha->thread, NULL);
    struct hc_error err = {0};
    /* Revoking the lease deletes the leader key now: a standby takes over without waiting. */
    if (ha->lease && hc_etcd_lease_revoke(ha->elect, ha->lease, &err) < 0)
        HC_WARN("ha: cannot revoke the lease: %s", err.message);
    hc_fence_set_checker(NULL);
    hc_db_replicate_stop();
    current_ha = NULL;
    hc_etcd_free(ha->elect);
    hc_etcd_free(ha->writes);
    pthread_mutex_destroy(&ha->lock);
    pthread_mutex_destroy(&ha->status_lock);
    json_decref(ha->status_etcd);
    free(ha);
}

/* ---------------------------------------------------------------- status */

struct members_acc {
    json_t *members;
    json_t *alive;
};

static int member_kv(void *arg, const char *key, const char *value, size_t len, const json_t *kv,
                     struct hc_error *err)
{
    (void)len;
    (void)kv;
    (void)err;
    struct members_acc *acc = arg;
    if (strncmp(key, HC_HA_PREFIX_ALIVE, strlen(HC_HA_PREFIX_ALIVE)) == 0) {
        json_object_set_new(acc->alive, key + strlen(HC_HA_PREFIX_ALIVE), json_true());
        return 0;
    }
    json_t *m = json_loads(value, 0, NULL);
    if (json_is_object(m))
        json_array_append(acc->members, m);
    json_decref(m);
    return 0;
}

/* The registered controllers, each with "alive" (its key on a live lease): a new array, or
 * NULL with err. */
static json_t *list_members(struct hc_ha *ha, struct hc_error *err)
{
    struct members_acc acc = {.members = json_array(), .alive = json_object()};
    if (hc_etcd_range(ha->elect, HC_HA_PREFIX_MEMBERS, 1, 0, member_kv, &acc, NULL, err) < 0 ||
        hc_etcd_range(ha->elect, HC_HA_PREFIX_ALIVE, 1, 0, member_kv, &acc, NULL, err) < 0) {
        json_decref(acc.members);
        json_decref(acc.alive);
        return NULL;
    }
    size_t i;
    json_t *m;
    json_array_foreach(acc.members, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        json_object_set_new(m, "alive", json_boolean(name && json_object_get(acc.alive, name)));
    }
    json_decref(acc.alive);
    return acc.members;
}

/* The members with their liveness, and each etcd endpoint's own status. */
static json_t *status_from_etcd(struct hc_ha *ha)
{
    struct hc_error err = {0};
    json_t *out = json_object();
    json_t *members = list_members(ha, &err);
    if (!members)
        json_object_set_new(out, "error", json_string(err.message));
    json_object_set_new(out, "members", members ? members : json_array());
    json_t *etcd = json_array();
    const char **eps;
    size_t n = hc_etcd_endpoints(ha->elect, &eps);
    for (size_t k = 0; k < n; k++) {
        struct hc_error e = {0};
        json_t *req = json_object();
        json_t *st = hc_etcd_call_at(ha->elect, eps[k], "/v3/maintenance/status", req, 1000, &e);
        json_decref(req);
        json_t *row = json_pack("{s:s, s:b}", "endpoint", eps[k], "healthy", st != NULL);
        if (st) {
            json_t *hdr = json_object_get(st, "header");
            int64_t id = hc_etcd_int(hdr, "member_id", 0), leader = hc_etcd_int(st, "leader", 0);
            json_object_set_new(row, "leader", json_boolean(id && id == leader));
            json_object_set_new(row, "raft_term",
                                json_integer((json_int_t)hc_etcd_int(st, "raftTerm", 0)));
            json_object_set_new(row, "db_size",
                                json_integer((json_int_t)hc_etcd_int(st, "dbSize", 0)));
            json_object_set(row, "version", json_object_get(st, "version"));
            json_object_set_new(row, "error", json_null());
        } else {
            json_object_set_new(row, "leader", json_false());
            json_object_set_new(row, "error", json_string(e.message));
        }
        json_decref(st);
        json_array_append_new(etcd, row);
    }
    json_object_set_new(out, "etcd", etcd);
    return out;
}

json_t *hc_ha_status(struct hc_ha *ha, const struct hc_controller *ctl)
{
    char url[300] = "";
    struct hc_error err = {0};
    if (!ha) {
        hc_controller_url(ctl, url, sizeof(url), &err);
        return json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:I}, s:[], s:[]}", "role", "single", "name",
                         url + (strncmp(url, "https://", 8) == 0 ? 8 : 0), "url", url, "leader",
                         "name", url + (strncmp(url, "https://", 8) == 0 ? 8 : 0), "url", url,
                         "term", (json_int_t)hc_fence_term(), "members", "etcd");
    }
    pthread_mutex_lock(&ha->lock);
    json_t *body =
        json_pack("{s:s, s:s, s:s}", "role", ha->role == ROLE_LEADER ? "leader" : "standby", "name",
                  ha->name, "url", ha->url);
    json_object_set_new(body, "leader",
                        ha->leader_name[0]
                            ? json_pack("{s:s, s:s, s:I}", "name", ha->leader_name, "url",
                                        ha->leader_url, "term", (json_int_t)ha->leader_term)
                            : json_null());
    json_object_set_new(body, "lease_ttl_seconds", json_integer((json_int_t)ha->ttl_s));
    char leader[300];
    snprintf(leader, sizeof(leader), "%s", ha->leader_name);
    /* Not held across etcd calls: the election thread takes it for every renewal. */
    pthread_mutex_unlock(&ha->lock);
    pthread_mutex_lock(&ha->status_lock);
    if (!ha->status_etcd || hc_mono_ms() - ha->status_mono_ms >= HA_STATUS_CACHE_MS) {
        json_decref(ha->status_etcd);
        ha->status_etcd = status_from_etcd(ha);
        ha->status_mono_ms = hc_mono_ms();
    }
    json_t *members = json_deep_copy(json_object_get(ha->status_etcd, "members"));
    json_object_update(body, ha->status_etcd);
    pthread_mutex_unlock(&ha->status_lock);
    /* Who leads is this instance's current view, not the cached one. */
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        json_object_set_new(m, "role",
                            json_string(name && strcmp(name, leader) == 0 ? "leader" : "standby"));
    }
    json_object_set_new(body, "members", members);
    return body;
}

int hc_ha_peers(struct hc_ha *ha, json_t **urls, size_t *registered, struct hc_error *err)
{
    json_t *members = list_members(ha, err);
    *urls = json_array();
    if (!members)
        return -1;
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *url = json_string_value(json_object_get(m, "url"));
        if (name && url && strcmp(name, ha->name) != 0 && json_is_true(json_object_get(m, "alive")))
            json_array_append_new(*urls, json_string(url));
    }
    *registered = json_array_size(members);
    json_decref(members);
    return 0;
}

/* ---------------------------------------------------------------- standby API */

static void standby_ha(struct hc_request *req, void *arg)
{
    struct hc_ha *ha = arg;
    hc_reply_json(req, 200, hc_ha_status(ha, ha->ctl));
}

static void standby_other(struct hc_request *req, void *arg)
{
    struct hc_ha *ha = arg;
    struct hc_error err = {0};
    pthread_mutex_lock(&ha->lock);
    char leader[300];
    snprintf(leader, sizeof(leader), "%s", ha->leader_url);
    pthread_mutex_unlock(&ha->lock);
    if (!leader[0] || atomic_load(&ha->won)) {
        hc_error_set(&err, HC_E(NO_LEADER), "no controller leads right now (an election)");
        hc_error_hint(&err, "retry in a second");
        hc_reply_header(req, "Retry-After", "1");
        hc_reply_error(req, &err);
        return;
    }
    hc_error_set(&err, HC_E(NOT_LEADER), "this controller is a standby; %s leads", leader);
    hc_error_hint(&err,
                  "send the request to %s (hcctl --controller with every controller's "
                  "URL finds it itself)",
                  leader);
    char location[1300];
    snprintf(location, sizeof(location), "%s%s", leader, hc_req_path(req));
    hc_reply_header(req, "Location", location);
    json_t *body = hc_error_to_json(&err);
    json_object_set_new(json_object_get(body, "error"), "leader", json_string(leader));
    hc_reply_json(req, err.status, body);
}

static void standby_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct hc_ha *ha = arg;
    HC_INFO("received signal %d, stopping", (int)sig);
    hc_stop_request(&ha->ctl->stopping);
    event_base_loopbreak(ha->standby_base);
}

int hc_ha_standby(struct hc_ha *ha, struct hc_error *err)
{
    struct hc_controller *ctl = ha->ctl;
    if (atomic_load(&ha->won))
        return 1;
    struct event_base *base = event_base_new();
    struct hc_http_server *srv = NULL;
    struct event *sigterm = NULL, *sigint = NULL;
    int rc = -1;
    struct hc_tls_server_config tls = {.cert_file = ctl->server_cert, .key_file = ctl->server_key};
    if (!base) {
        hc_error_set(err, HC_E(INTERNAL), "cannot create the event loop");
        goto done;
    }
    if (!(srv = hc_http_server_new(base, &tls, err)) ||
        hc_http_server_route(srv, "GET", "/v1/ha", 0, standby_ha, ha) < 0 ||
        hc_http_server_route(srv, "PUT", "/v1/ha/bundles/{file}", 0, hc_ha_res_bundle_put, ha) <
            0 ||
        hc_http_server_route(srv, "GET", "/v1/ha/bundles/{file}", 0, hc_ha_res_bundle_get, ha) <
            0 ||
        hc_http_server_route_limit(srv, "PUT", "/v1/ha/bundles/{file}",
                                   HC_BUNDLE_MAX_BYTES + 4096) < 0 ||
        hc_http_server_listen(srv, ctl->listen_host, ctl->listen_port, err) < 0) {
        if (!err->message[0])
            hc_error_set(err, HC_E(INTERNAL), "cannot set up the standby API");
        goto done;
    }
    /* Only another controller's bundle copy may be larger than the JSON limit. */
    hc_http_server_set_head_hook(srv, hc_ha_head, ha);
    hc_http_server_set_fallback(srv, standby_other, ha);
    sigterm = evsignal_new(base, SIGTERM, standby_signal, ha);
    sigint = evsignal_new(base, SIGINT, standby_signal, ha);
    if (!sigterm || !sigint || event_add(sigterm, NULL) < 0 || event_add(sigint, NULL) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot install signal handlers");
        goto done;
    }
    pthread_mutex_lock(&ha->lock);
    ha->standby_base = base;
    pthread_mutex_unlock(&ha->lock);
    /* Elected between the check above and now: the thread found no base to break. */
    if (!atomic_load(&ha->won)) {
        HC_INFO("ha: standby on %s", ha->url);
        event_base_dispatch(base);
    }
    pthread_mutex_lock(&ha->lock);
    ha->standby_base = NULL;
    pthread_mutex_unlock(&ha->lock);
    rc = atomic_load(&ha->won) && !hc_stop_requested(&ctl->stopping) ? 1 : 0;
done:
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    hc_http_server_free(srv);
    if (base)
        event_base_free(base);
    return rc;
}

/* ---------------------------------------------------------------- takeover */

struct rebuild {
    struct hc_db *db;
    long rows;
};

static int rebuild_kv(void *arg, const char *key, const char *value, size_t len, const json_t *kv,
                      struct hc_error *err)
{
    (void)kv;
    struct rebuild *rb = arg;
    const char *rest = key + strlen(HC_HA_PREFIX_ROWS);
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest || slash - rest > 100)
        return hc_error_set(err, HC_E(ETCD), "etcd holds a malformed row key '%.200s'", key);
    char table[128];
    snprintf(table, sizeof(table), "%.*s", (int)(slash - rest), rest);
    json_error_t jerr;
    json_t *image = json_loadb(value, len, 0, &jerr);
    if (!json_is_object(image)) {
        json_decref(image);
        return hc_error_set(err, HC_E(ETCD), "etcd row '%.200s' is not a JSON object", key);
    }
    int rc = hc_db_row_insert(rb->db, table, image, err);
    json_decref(image);
    if (rc == 0)
        rb->rows++;
    return rc;
}

/* Empties every replicated table of a fresh database (a migration's seed rows). */
static int empty_tables(struct hc_db *db, struct hc_error *err)
{
    char **names;
    size_t n;
    if (hc_db_replicated_tables(db, &names, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char sql[300];
        snprintf(sql, sizeof(sql), "DELETE FROM \"%s\"", names[i]);
        if (rc == 0 && hc_db_exec(db, sql, err) < 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

/* A new database at path holding etcd's rows; its schema checked against etcd's. */
static long build_from_etcd(struct hc_etcd *etcd, const char *path, struct hc_error *err)
{
    int found;
    char *schema = hc_etcd_get(etcd, HC_HA_KEY_SCHEMA, &found, NULL, err);
    if (!found) {
        free(schema);
        if (!err->message[0])
            hc_error_set(err, HC_E(ETCD), "etcd holds no hcctl schema version");
        return -1;
    }
    int version = atoi(schema);
    free(schema);
    if (version > hc_db_latest_version()) {
        hc_error_set(err, HC_E(SCHEMA_TOO_NEW),
                     "etcd's rows have schema version %d, newer than this binary's %d", version,
                     hc_db_latest_version());
        return hc_error_hint(err, "upgrade this hcctld first");
    }
    /* The rebuild's own writes must not be sent: it runs before replication is turned on. */
    if (hc_db_replicating())
        return hc_error_set(err, HC_E(INTERNAL), "a rebuild from etcd while replicating");
    struct hc_db *db = hc_db_open(path, err);
    if (!db)
        return -1;
    struct rebuild rb = {.db = db};
    long rc = -1;
    if (hc_db_exec(db, "PRAGMA foreign_keys = OFF", err) < 0 || hc_db_begin(db, err) < 0)
        goto done;
    if (empty_tables(db, err) < 0 ||
        hc_etcd_range(etcd, HC_HA_PREFIX_ROWS, 1, HC_HA_ROWS_PAGE, rebuild_kv, &rb, NULL, err) <
            0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        goto done;
    }
    rc = rb.rows;
done:
    hc_db_close(db);
    return rc;
}

static void unlink_wal(const char *path)
{
    char p[1200];
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

static void unlink_db(const char *path)
{
    unlink(path);
    unlink_wal(path);
}

int hc_ha_take_over(struct hc_ha *ha, struct hc_error *err)
{
    struct hc_controller *ctl = ha->ctl;
    int64_t t0 = hc_mono_ms();
    char tmp[1200];
    snprintf(tmp, sizeof(tmp), "%s.takeover", ctl->db_path);
    unlink_db(tmp);
    long rows = build_from_etcd(ha->writes, tmp, err);
    if (rows < 0) {
        unlink_db(tmp);
        return hc_error_prefix(err, "cannot rebuild the database from etcd");
    }
    /* The old cache's WAL goes first: a stale WAL must never be replayed into the new file. */
    unlink_wal(ctl->db_path);
    if (rename(tmp, ctl->db_path) < 0)
        return hc_error_set(err, HC_E(IO), "cannot move '%s' to '%s': %s", tmp, ctl->db_path,
                            strerror(errno));
    hc_db_replicate_start(ha_send, ha, local_columns);
    hc_fence_set_term(ha->term);
    hc_fence_set_checker(leader_check);
    struct hc_error berr = {0};
    if (hc_ha_bundles_fetch_missing(ha, &berr) < 0)
        HC_WARN("ha: cannot fetch missing bundles: %s", berr.message);
    HC_INFO("ha: took over as leader, term %lld: %ld rows from etcd in %lld ms",
            (long long)ha->term, rows, (long long)(hc_mono_ms() - t0));
    return 0;
}

/* ---------------------------------------------------------------- init and export */

struct upload {
    struct hc_etcd *etcd;
    json_t *ops;
    size_t bytes;
    long rows;
};

static int upload_flush(struct upload *u, struct hc_error *err)
{
    if (!json_array_size(u->ops))
        return 0;
    /* Every part checks that no leader exists: init never races a running HA controller. */
    json_t *cmp = json_array();
    json_array_append_new(cmp, hc_etcd_cmp_create(HC_HA_KEY_LEADER, 0));
    int rc = hc_etcd_txn(u->etcd, cmp, u->ops, NULL, NULL, NULL, err);
    u->ops = json_array();
    u->bytes = 0;
    if (rc == 0)
        return hc_error_set(err, HC_E(CONFLICT), "an HA controller leads already");
    return rc == 1 ? 0 : -1;
}

static int upload_put(struct upload *u, const char *key, const char *value, struct hc_error *err)
{
    if (batch_add(u->ops, &u->bytes, hc_etcd_op_put(key, value, strlen(value), 0),
                  2 * strlen(key) + strlen(value)))
        return upload_flush(u, err);
    return 0;
}

long hc_ha_init(const struct hc_controller *ctl, const char *urls, struct hc_error *err)
{
    struct hc_etcd *etcd = hc_ha_etcd_open(ctl, urls, 5000, err);
    if (!etcd)
        return -1;
    struct hc_db *db = NULL;
    struct upload u = {.etcd = etcd, .ops = json_array()};
    long rc = -1;
    long existing = hc_etcd_range(etcd, HC_HA_PREFIX, 1, 1, NULL, NULL, NULL, err);
    if (existing < 0)
        goto done;
    if (existing > 0) {
        hc_error_set(err, HC_E(CONFLICT), "etcd already holds hcctl state under %s", HC_HA_PREFIX);
        hc_error_hint(err,
                      "run 'hcctld ha join' for another controller of that cluster; or "
                      "remove it ('etcdctl del --prefix %s') to start over",
                      HC_HA_PREFIX);
        goto done;
    }
    if (hc_ha_secret_create(ctl, err) < 0 || !(db = hc_db_open(ctl->db_path, err)))
        goto done;
    /* One read transaction: a consistent picture even if something else writes meanwhile. */
    if (hc_db_exec(db, "BEGIN", err) < 0)
        goto done;
    char **names;
    size_t n;
    if (hc_db_replicated_tables(db, &names, &n, err) < 0)
        goto done;
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char sql[300];
        snprintf(sql, sizeof(sql), "SELECT rowid FROM \"%s\" ORDER BY rowid", names[i]);
        sqlite3_stmt *st = failed ? NULL : hc_db_prepare(db, sql, err);
        while (st && sqlite3_step(st) == SQLITE_ROW) {
            int64_t rowid = sqlite3_column_int64(st, 0);
            char *image = hc_db_row_image(db, names[i], rowid, err);
            char key[400];
            snprintf(key, sizeof(key), HC_HA_PREFIX_ROWS "%s/%lld", names[i], (long long)rowid);
            if (!image || upload_put(&u, key, image, err) < 0)
                failed = 1;
            free(image);
            u.rows++;
            if (failed)
                break;
        }
        if (!st)
            failed = 1;
        sqlite3_finalize(st);
        free(names[i]);
    }
    free(names);
    hc_db_rollback(db);
    if (failed)
        goto done;
    /* Every HA term (term_base + the leader key's revision, at least 1) is then above every
     * generation single mode used (fence_store.h). */
    json_t *gen = hc_db_query_json(db, err, "SELECT generation FROM fence_generation", "");
    if (!gen)
        goto done;
    int64_t term_base = json_integer_value(json_object_get(json_array_get(gen, 0), "generation"));
    json_decref(gen);
    char text[64];
    snprintf(text, sizeof(text), "%d", hc_db_schema_version(db));
    if (upload_put(&u, HC_HA_KEY_SCHEMA, text, err) < 0)
        goto done;
    snprintf(text, sizeof(text), "%lld", (long long)term_base);
    if (upload_put(&u, HC_HA_KEY_CLUSTER, ctl->cluster_id, err) < 0 ||
        upload_put(&u, HC_HA_KEY_TERM_BASE, text, err) < 0 || upload_flush(&u, err) < 0)
        goto done;
    rc = u.rows;
done:
    json_decref(u.ops);
    hc_db_close(db);
    hc_etcd_free(etcd);
    return rc;
}

long hc_ha_export(const struct hc_controller *ctl, const char *urls, const char *out_path,
                  struct hc_error *err)
{
    if (access(out_path, F_OK) == 0)
        return hc_error_set(err, HC_E(CONFLICT), "'%s' exists already", out_path);
    struct hc_etcd *etcd = hc_ha_etcd_open(ctl, urls, 5000, err);
    if (!etcd)
        return -1;
    long rows = build_from_etcd(etcd, out_path, err);
    /* Single mode on this file must start above every term the agents have seen: the base
     * plus etcd's revision now is above every leader key's revision so far. */
    int found = 0;
    int64_t revision = 0;
    char *base = rows < 0 ? NULL : hc_etcd_get(etcd, HC_HA_KEY_TERM_BASE, &found, NULL, err);
    if (rows >= 0 && found &&
        hc_etcd_range(etcd, HC_HA_KEY_LEADER, 0, 0, NULL, NULL, &revision, err) >= 0) {
        struct hc_db *db = hc_db_open(out_path, err);
        if (!db || hc_fence_generation_store(db, strtoll(base, NULL, 10) + revision + 1, err) < 0)
            rows = -1;
        hc_db_close(db);
    } else if (rows >= 0) {
        if (!err->message[0])
            hc_error_set(err, HC_E(ETCD), "etcd holds no %s", HC_HA_KEY_TERM_BASE);
        rows = -1;
    }
    free(base);
    hc_etcd_free(etcd);
    if (rows < 0)
        unlink_db(out_path);
    return rows;
}
