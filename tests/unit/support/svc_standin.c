/*
 * The maintenance stand-in agent's routes and start (tests/unit/support/svc_standin.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/init.h"
#include "tests/unit/support/svc_standin.h"

static void svc_count(struct svc_standin *s, enum svc_route r)
{
    atomic_fetch_add(&s->calls[r], 1);
}

static void svc_ok_to_stop(struct hc_request *req, void *arg)
{
    struct svc_standin *s = arg;
    svc_count(s, SVC_OK_TO_STOP);
    int ok = atomic_load(&s->ok_to_stop);
    hc_reply_json(req, 200,
                  json_pack("{s:b, s:s}", "ok_to_stop", ok, "reason", ok ? "" : s->refusal));
}

#define SVC_ACTION(fn, route)                                                                      \
    static void fn(struct hc_request *req, void *arg)                                              \
    {                                                                                              \
        svc_count(arg, route);                                                                     \
        hc_reply_json(req, 200, json_pack("{s:b}", "ok", 1));                                      \
    }
SVC_ACTION(svc_drain, SVC_DRAIN)
SVC_ACTION(svc_stop, SVC_STOP)
SVC_ACTION(svc_start, SVC_START)

static void svc_health(struct hc_request *req, void *arg)
{
    svc_count(arg, SVC_HEALTH);
    hc_reply_json(req, 200, json_pack("{s:b}", "healthy", 1));
}

static void svc_resync(struct hc_request *req, void *arg)
{
    svc_count(arg, SVC_RESYNC);
    hc_reply_json(req, 200, json_pack("{s:i}", "pending", 0));
}

static void svc_software(struct hc_request *req, void *arg)
{
    svc_count(arg, SVC_SOFTWARE);
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:n, s:{s:s}}", "current", "1.0", "previous", "service", "state",
                            "running"));
}

static const struct hc_test_route svc_routes[] = {
    {"GET", "/v1/service/ok-to-stop", svc_ok_to_stop},
    {"POST", "/v1/service/drain", svc_drain},
    {"POST", "/v1/service/stop", svc_stop},
    {"POST", "/v1/service/start", svc_start},
    {"GET", "/v1/service/health", svc_health},
    {"GET", "/v1/service/resync", svc_resync},
    {"GET", "/v1/software", svc_software},
};

void svc_standin_start(struct svc_standin *s, struct hc_controller *ctl, const char *dir)
{
    hc_controller_paths(ctl, dir);
    snprintf(s->cert, sizeof(s->cert), "%s/agent.pem", dir);
    snprintf(s->key, sizeof(s->key), "%s/agent.key", dir);
    hc_test_cluster_pki(ctl, s->cert, s->key);
    atomic_store(&s->ok_to_stop, 1);
    hc_test_standin_start(&s->srv, s->cert, s->key, ctl->ca_file, svc_routes,
                          HC_ARRAY_LEN(svc_routes), s);
    s->port = s->srv.port;
}

char *svc_standin_pem(const struct svc_standin *s)
{
    return hc_test_file_text(s->cert);
}

void svc_standin_stop(struct svc_standin *s)
{
    hc_test_standin_stop(&s->srv);
}
