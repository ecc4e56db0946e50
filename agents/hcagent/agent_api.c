/*
 * The agent API (docs/api.md "Agent API") and `hcagent run`.
 *
 * One libevent thread serves HTTPS with mutual TLS: the TLS layer itself refuses any client
 * without a certificate signed by the cluster CA whose CN is the controller's client CN, so the
 * handlers below never see anyone but the controller and do no further authentication.
 */
#include "agents/hcagent/agent.h"
#include "agents/hcagent/cert.h"
#include "agents/hcagent/fence.h"
#include "agents/hcagent/privilege.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agents/hcagent/agent_upgrade.h"
#include "agents/hcagent/net_api.h"
#include "agents/hcagent/netinfo.h"
#include "agents/hcagent/software.h"
#include "common/bundle.h"
#include "common/https_server.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"

/* Time between the 202 of POST /v1/leave and the removal of the credentials, so that the reply
 * is flushed to the controller before the loop stops. */
#define LEAVE_DELAY_MS 100

struct hc_agent {
    struct event_base *base;
    struct hc_http_server *srv;
    struct event *leave_timer;
    struct hc_agent_config cfg;
    char *data_dir;
    char hostname[256];
    int64_t started_ms; /* monotonic */
    int leaving;        /* leave requested: the timer is armed */
    int left;           /* credentials removed */
    int purge;          /* leave: the service's data goes too */
    char kept[1200];    /* leave: where the service's data is kept ("" when purged or none) */
    struct hc_agent_software *sw; /* software and the storage service (agents/hcagent/software.c) */
    struct hc_agent_fence *fence; /* the highest controller term seen (agents/hcagent/fence.h) */
    struct hc_agent_cert *cert;   /* its certificate and renewal (agents/hcagent/cert.h) */
};

static void status_route(struct hc_request *req, void *arg)
{
    struct hc_agent *agent = arg;
    json_int_t uptime = (json_int_t)((hc_mono_ms() - agent->started_ms) / 1000);
    json_t *body = json_pack("{s:s, s:s, s:I, s:I}", "node_name", agent->cfg.name, "hostname",
                             agent->hostname, "uptime_seconds", uptime, "controller_term",
                             (json_int_t)hc_agent_fence_highest(agent->fence));
    hc_agent_upgrade_status(agent->data_dir, body); /* agent_version, api_version */
    hc_agent_software_status(agent->sw, body);      /* service, software_version */
    hc_agent_cert_status(agent->cert, body);        /* cert_serial, cert_not_after_ms, ca_digest */
    /* For the controller's pre-flight checks (docs/api.md "Checks"): the node's wall clock, to
     * tell its skew from the controller's, and the room left where the agent and the service
     * keep their data. Null when statvfs fails: the controller then says unknown, not ok. */
    json_object_set_new(body, "time_ms", json_integer((json_int_t)hc_now_ms()));
    struct statvfs vfs;
    int have_vfs = statvfs(agent->data_dir, &vfs) == 0;
    json_object_set_new(body, "data_dir_free_bytes",
                        have_vfs ? json_integer((json_int_t)vfs.f_bavail * (json_int_t)vfs.f_frsize)
                                 : json_null());
    json_object_set_new(body, "data_dir_total_bytes",
                        have_vfs ? json_integer((json_int_t)vfs.f_blocks * (json_int_t)vfs.f_frsize)
                                 : json_null());
    hc_reply_json(req, 200, body);
}

static void interfaces_route(struct hc_request *req, void *arg)
{
    struct hc_error err = {0};
    json_t *list = hc_netinfo_interfaces(&err);
    if (!list) {
        HC_ERROR("%s", err.message);
        hc_reply_error(req, &err);
        return;
    }
    hc_reply_json(req, 200, json_pack("{s:o}", "interfaces", list));
}

/* Credentials go, ca.pem stays: it holds no secret, and a later join replaces it. The
 * controller term goes too: the next cluster's controller starts its terms anew. */
static void leave_now(evutil_socket_t fd, short what, void *arg)
{
    struct hc_agent *agent = arg;
    static const char *const names[] = {HC_AGENT_FILE_KEY, HC_AGENT_FILE_CERT,
                                        HC_AGENT_FILE_CONFIG};
    for (size_t i = 0; i < HC_ARRAY_LEN(names); i++) {
        char *path = hc_path_join(agent->data_dir, names[i]);
        if (path && unlink(path) < 0 && errno != ENOENT)
            HC_ERROR("cannot remove '%s': %s", path, strerror(errno));
        free(path);
    }
    struct hc_error err = {0};
    if (hc_agent_fence_forget(agent->data_dir, &err) < 0)
        HC_ERROR("%s", err.message);
    agent->left = 1;
    HC_INFO("left the cluster: credentials removed from %s, stopping", agent->data_dir);
    event_base_loopexit(agent->base, NULL);
}

/* A name for the kept copy chosen by the controller: one path segment, nothing to escape. */
static int keep_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || name[0] == '.')
        return 0;
    return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* Where the service's data goes when the node leaves: DIR/kept/NAME (absolute), or "" when
 * there is none. */
static void keep_path(const struct hc_agent *agent, const char *name, char *out, size_t len)
{
    char abs[PATH_MAX], data[PATH_MAX + 32];
    struct stat st;
    const char *dir = realpath(agent->data_dir, abs) ? abs : agent->data_dir;
    snprintf(data, sizeof(data), "%s/%s", dir, HC_AGENT_DIR_SERVICE_DATA);
    out[0] = '\0';
    if (stat(data, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(out, len, "%s/%s/%s", dir, HC_AGENT_DIR_KEPT, name);
}

/* Body (optional): {"purge"?: bool, "keep_as"?: NAME}. Answers where the service's data will
 * be: the controller records it for the operator. A second request while leaving answers the
 * first one's terms. */
static void leave_route(struct hc_request *req, void *arg)
{
    struct hc_agent *agent = arg;
    if (!agent->leaving) {
        json_t *body = NULL;
        const char *len = hc_req_header(req, "Content-Length");
        int has_body = hc_req_header(req, "Transfer-Encoding") || (len && strcmp(len, "0"));
        if (has_body && !(body = hc_req_json(req)))
            return; /* answered 400 */
        const json_t *purge = json_object_get(body, "purge");
        const char *keep_as = hc_json_str(body, "keep_as", NULL);
        char name[64];
        if ((purge && !json_is_boolean(purge)) || (keep_as && !keep_name_valid(keep_as))) {
            struct hc_error err = {0};
            hc_error_set(&err, HC_E(INVALID_ARGUMENT),
                         "leave: 'purge' must be a boolean "
                         "and 'keep_as' 1 to 128 of [A-Za-z0-9._-], not starting with '.'");
            hc_reply_error(req, &err);
            return;
        }
        if (!keep_as) {
            snprintf(name, sizeof(name), "service-data.%lld", (long long)hc_now_ms());
            keep_as = name;
        }
        agent->purge = json_is_true(purge);
        if (!agent->purge)
            keep_path(agent, keep_as, agent->kept, sizeof(agent->kept));
        struct timeval tv = {0, LEAVE_DELAY_MS * 1000};
        HC_INFO("leave requested by the controller (%s)%s", hc_req_peer_addr(req),
                agent->purge ? ", the service's data to be deleted" : "");
        agent->leaving = 1;
        evtimer_add(agent->leave_timer, &tv);
    }
    hc_reply_json(req, 202,
                  json_pack("{s:b, s:b, s:s?}", "leaving", 1, "purge", agent->purge, "service_data",
                            agent->kept[0] ? agent->kept : NULL));
}

/* After the service has stopped, a node that left keeps nothing of the cluster's but the
 * service's data, moved out of the way of a later join (which starts with none) unless purged:
 * the installed software and the trusted keys go. */
static void leave_cleanup(struct hc_agent *agent)
{
    static const char *const gone[] = {HC_AGENT_DIR_SOFTWARE, HC_AGENT_DIR_KEYS};
    char *data = hc_path_join(agent->data_dir, HC_AGENT_DIR_SERVICE_DATA);
    char *kept = hc_path_join(agent->data_dir, HC_AGENT_DIR_KEPT);
    for (size_t i = 0; i < HC_ARRAY_LEN(gone); i++) {
        char *path = hc_path_join(agent->data_dir, gone[i]);
        if (path && hc_bundle_rmtree(path) < 0)
            HC_ERROR("cannot remove '%s': %s", path, strerror(errno));
        free(path);
    }
    if (!data || !kept) {
        HC_ERROR("out of memory: the service's data stays in '%s'", agent->data_dir);
    } else if (agent->purge) {
        /* What the service made is its own (0700, uid 60600): the agent, without
         * CAP_DAC_OVERRIDE, deletes it as the service user. */
        struct hc_error err = {0};
        if (hc_privilege_service_remove(data, &err) < 0 ||
            hc_privilege_service_remove(kept, &err) < 0)
            HC_ERROR("cannot delete the service's data under '%s': %s", agent->data_dir,
                     err.message);
        else
            HC_INFO("the service's data under %s is deleted (purge)", agent->data_dir);
    } else if (agent->kept[0]) {
        struct hc_error err = {0};
        int moved = hc_privilege_service_keep(data, kept, agent->kept, &err);
        if (moved < 0)
            HC_ERROR("%s (it stays where it is)", err.message);
        else if (moved)
            HC_INFO("the service's data is kept in %s", agent->kept);
    }
    free(data);
    free(kept);
}

/* Warns when the private key is readable by others: it should have been written 0600. */
static void check_key_mode(const char *key_path)
{
    struct stat st;
    if (stat(key_path, &st) == 0 && (st.st_mode & 077))
        HC_WARN("private key '%s' is accessible by other users (mode %03o): chmod 600 it", key_path,
                (unsigned)(st.st_mode & 0777));
}

/* Every request passes the fence before its route (agents/hcagent/fence.h). */
static int fence_before(struct hc_request *req, const struct hc_route *route, void *arg)
{
    struct hc_agent *agent = arg;
    return hc_agent_fence_request(agent->fence, req);
}

static int agent_routes(struct hc_agent *agent, struct hc_error *err)
{
    if (hc_http_server_route(agent->srv, "GET", "/v1/status", 0, status_route, agent) < 0 ||
        hc_http_server_route(agent->srv, "GET", "/v1/interfaces", 0, interfaces_route, agent) < 0 ||
        hc_http_server_route(agent->srv, "POST", "/v1/leave", 0, leave_route, agent) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot register agent API routes");
    hc_http_server_set_hooks(agent->srv, fence_before, NULL, agent);
    if (hc_agent_net_routes(agent, agent->srv, agent->base, err) < 0)
        return -1;
    if (!(agent->sw =
              hc_agent_software_new(agent->srv, agent->base, agent->data_dir, &agent->cfg, err)))
        return -1;
    if (!(agent->cert = hc_agent_cert_new(agent->srv, agent->data_dir, agent->cfg.name,
                                          agent->cfg.controller_client_pin, err)))
        return -1;
    return hc_agent_upgrade_routes(agent->srv, agent->sw, err);
}

static int agent_server(struct hc_agent *agent, struct hc_error *err)
{
    struct hc_agent_tls t;
    if (hc_agent_cert_recover(agent->data_dir, err) < 0 ||
        hc_agent_tls_config(&t, agent->data_dir, agent->cfg.controller_client_pin, err) < 0)
        return -1;
    check_key_mode(t.key);
    agent->srv = hc_http_server_new(agent->base, &t.tls, err);
    if (!agent->srv)
        return hc_error_prefix(err, "cannot start the agent API from '%s'", agent->data_dir);
    return agent_routes(agent, err);
}

struct hc_agent *hc_agent_new(struct event_base *base, const char *data_dir, struct hc_error *err)
{
    struct hc_agent *agent = calloc(1, sizeof(*agent));
    if (!agent || !(agent->data_dir = strdup(data_dir))) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    agent->base = base;
    agent->started_ms = hc_mono_ms();
    if (gethostname(agent->hostname, sizeof(agent->hostname) - 1) < 0)
        snprintf(agent->hostname, sizeof(agent->hostname), "unknown");
    if (hc_agent_config_load(data_dir, &agent->cfg, err) < 0 ||
        !(agent->fence = hc_agent_fence_new(data_dir, "", err)) || agent_server(agent, err) < 0)
        goto fail;
    agent->leave_timer = evtimer_new(base, leave_now, agent);
    if (!agent->leave_timer) {
        hc_error_set(err, HC_E(INTERNAL), "cannot create timer");
        goto fail;
    }
    return agent;
fail:
    hc_agent_free(agent);
    return NULL;
}

void hc_agent_free(struct hc_agent *agent)
{
    if (!agent)
        return;
    if (agent->leave_timer)
        event_free(agent->leave_timer);
    hc_agent_net_free(agent); /* answers its pending requests: before the server goes */
    hc_agent_software_free(agent->sw, agent->left); /* the service goes only with the node */
    if (agent->left)
        leave_cleanup(agent);
    hc_http_server_free(agent->srv);
    hc_agent_cert_free(agent->cert);
    hc_agent_fence_free(agent->fence);
    free(agent->data_dir);
    free(agent);
}

int hc_agent_listen(struct hc_agent *agent, const char *listen, struct hc_error *err)
{
    char host[256];
    int port;
    const char *addr = listen ? listen : agent->cfg.listen;
    if (hc_split_host_port(addr, host, sizeof(host), &port, err) < 0)
        return hc_error_prefix(err, "invalid listen address");
    if (hc_http_server_listen(agent->srv, host, port, err) < 0)
        return hc_error_prefix(err, "agent API");
    return 0;
}

int hc_agent_port(const struct hc_agent *agent)
{
    return hc_http_server_port(agent->srv);
}

const struct hc_agent_config *hc_agent_config(const struct hc_agent *agent)
{
    return &agent->cfg;
}

const char *hc_agent_data_dir(const struct hc_agent *agent)
{
    return agent->data_dir;
}

struct hc_http_server *hc_agent_http_server(struct hc_agent *agent)
{
    return agent->srv;
}

int hc_agent_has_left(const struct hc_agent *agent)
{
    return agent->left;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    HC_INFO("received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    event_base_loopexit(arg, NULL);
}

int hc_agent_serve(const char *data_dir, struct hc_error *err)
{
    int rc = -1;
    struct hc_agent *agent = NULL;
    struct event *sigterm = NULL, *sigint = NULL;
    struct event_base *base = event_base_new();
    if (!base) {
        hc_error_set(err, HC_E(INTERNAL), "cannot create event loop");
        goto cleanup;
    }
    if (!(agent = hc_agent_new(base, data_dir, err)) || hc_agent_listen(agent, NULL, err) < 0)
        goto cleanup;
    if (hc_agent_net_start_responder(agent, err) < 0) /* probes to this node then fail, named */
        HC_WARN("%s", err->message);
    hc_agent_software_start(agent->sw); /* the storage service, as it should be */
    hc_agent_upgrade_confirm(data_dir); /* serving: a pending upgrade to this agent holds */
    sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    sigint = evsignal_new(base, SIGINT, on_signal, base);
    if (!sigterm || !sigint || evsignal_add(sigterm, NULL) < 0 || evsignal_add(sigint, NULL) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot install signal handlers");
        goto cleanup;
    }
    HC_INFO("hcagent %s serving on %s (listen %s, controller %s)", agent->cfg.name,
            agent->cfg.agent_url, agent->cfg.listen, agent->cfg.controller);
    if (event_base_dispatch(base) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "event loop failed");
        goto cleanup;
    }
    HC_INFO("hcagent %s stopped", agent->cfg.name);
    rc = 0;
cleanup:
    if (sigterm)
        event_free(sigterm);
    if (sigint)
        event_free(sigint);
    hc_agent_free(agent);
    if (base)
        event_base_free(base);
    return rc;
}
