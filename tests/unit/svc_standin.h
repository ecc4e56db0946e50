/*
 * A stand-in agent for unit tests of maintenance and the availability budget: an hc_http_server
 * with mutual TLS on 127.0.0.1 (certificates from common/pki.h, written into the fixture's
 * controller paths) serving the software and service routes the controller calls
 * (docs/api.md "Agent API: software and service"), with answers the test sets and a counter per
 * route. Runs its own event loop in its own thread; the test stops it through a pipe.
 * Header-only, like ports.h: each test is one executable.
 */
#ifndef HC_TESTS_UNIT_SVC_STANDIN_H
#define HC_TESTS_UNIT_SVC_STANDIN_H

#include <event2/event.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/https_server.h"
#include "common/pki.h"
#include "controller/controller.h"
#include "controller/api/crl.h"

enum svc_route {
    SVC_OK_TO_STOP,
    SVC_DRAIN,
    SVC_STOP,
    SVC_START,
    SVC_HEALTH,
    SVC_RESYNC,
    SVC_SOFTWARE,
    SVC_NROUTES
};

struct svc_standin {
    struct hc_tls_server_config tls;
    char cert[600], key[600];
    pthread_t thread;
    sem_t ready;
    int stop_pipe[2];
    int port;
    struct hc_error err;
    atomic_int ok_to_stop; /* the answer to ok-to-stop (1 at start) */
    char refusal[128];     /* its reason when 0 (set before the calls) */
    atomic_int calls[SVC_NROUTES];
    int stopped;
};

static void svc_count(struct hc_request *req, struct svc_standin *s, enum svc_route r)
{
    atomic_fetch_add(&s->calls[r], 1);
}

static void svc_ok_to_stop(struct hc_request *req, void *arg)
{
    struct svc_standin *s = arg;
    svc_count(req, s, SVC_OK_TO_STOP);
    int ok = atomic_load(&s->ok_to_stop);
    hc_reply_json(req, 200,
                  json_pack("{s:b, s:s}", "ok_to_stop", ok, "reason", ok ? "" : s->refusal));
}

#define SVC_ACTION(fn, route)                                                                      \
    static void fn(struct hc_request *req, void *arg)                                              \
    {                                                                                              \
        svc_count(req, arg, route);                                                                \
        hc_reply_json(req, 200, json_pack("{s:b}", "ok", 1));                                      \
    }
SVC_ACTION(svc_drain, SVC_DRAIN)
SVC_ACTION(svc_stop, SVC_STOP)
SVC_ACTION(svc_start, SVC_START)

static void svc_health(struct hc_request *req, void *arg)
{
    svc_count(req, arg, SVC_HEALTH);
    hc_reply_json(req, 200, json_pack("{s:b}", "healthy", 1));
}

static void svc_resync(struct hc_request *req, void *arg)
{
    svc_count(req, arg, SVC_RESYNC);
    hc_reply_json(req, 200, json_pack("{s:i}", "pending", 0));
}

static void svc_software(struct hc_request *req, void *arg)
{
    svc_count(req, arg, SVC_SOFTWARE);
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:n, s:{s:s}}", "current", "1.0", "previous", "service", "state",
                            "running"));
}

static void svc_on_stop(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(arg);
}

static void *svc_main(void *arg)
{
    struct svc_standin *s = arg;
    struct event_base *base = event_base_new();
    struct hc_http_server *srv = hc_http_server_new(base, &s->tls, &s->err);
    struct event *stop = event_new(base, s->stop_pipe[0], EV_READ, svc_on_stop, base);
    if (srv && hc_http_server_listen(srv, "127.0.0.1", 0, &s->err) == 0 &&
        hc_http_server_route(srv, "GET", "/v1/service/ok-to-stop", 0, svc_ok_to_stop, s) == 0 &&
        hc_http_server_route(srv, "POST", "/v1/service/drain", 0, svc_drain, s) == 0 &&
        hc_http_server_route(srv, "POST", "/v1/service/stop", 0, svc_stop, s) == 0 &&
        hc_http_server_route(srv, "POST", "/v1/service/start", 0, svc_start, s) == 0 &&
        hc_http_server_route(srv, "GET", "/v1/service/health", 0, svc_health, s) == 0 &&
        hc_http_server_route(srv, "GET", "/v1/service/resync", 0, svc_resync, s) == 0 &&
        hc_http_server_route(srv, "GET", "/v1/software", 0, svc_software, s) == 0) {
        s->port = hc_http_server_port(srv);
        event_add(stop, NULL);
        sem_post(&s->ready);
        event_base_dispatch(base);
    } else {
        sem_post(&s->ready);
    }
    event_free(stop);
    hc_http_server_free(srv);
    event_base_loop(base, EVLOOP_NONBLOCK); /* deferred teardown of freed connections */
    event_base_free(base);
    return NULL;
}

static void svc_write_cert(X509 *ca, EVP_PKEY *ca_key, const struct hc_cert_spec *spec,
                           const char *cert_path, const char *key_path)
{
    struct hc_error err = {0};
    char serial[33];
    EVP_PKEY *key = hc_pki_key_new(&err);
    assert_non_null(key);
    X509 *cert = hc_pki_issue(ca, ca_key, key, spec, serial, &err);
    if (!cert)
        fail_msg("issue %s: %s", spec->cn, err.message);
    assert_int_equal(hc_pki_cert_save(cert, cert_path, &err), 0);
    assert_int_equal(hc_pki_key_save(key, key_path, &err), 0);
    X509_free(cert);
    EVP_PKEY_free(key);
}

/* Fills ctl's certificate paths under dir, writes the cluster CA, the controller's client
 * certificate and the stand-in's server certificate, and starts the stand-in. */
static void svc_standin_start(struct svc_standin *s, struct hc_controller *ctl, const char *dir)
{
    struct hc_error err = {0};
    static const char *const sans[] = {"127.0.0.1", "localhost"};
    snprintf(ctl->data_dir, sizeof(ctl->data_dir), "%s", dir);
    snprintf(ctl->ca_file, sizeof(ctl->ca_file), "%s/ca.pem", dir);
    snprintf(ctl->ca_key_file, sizeof(ctl->ca_key_file), "%s/ca.key", dir);
    snprintf(ctl->client_cert, sizeof(ctl->client_cert), "%s/client.pem", dir);
    snprintf(ctl->client_key, sizeof(ctl->client_key), "%s/client.key", dir);
    snprintf(s->cert, sizeof(s->cert), "%s/agent.pem", dir);
    snprintf(s->key, sizeof(s->key), "%s/agent.key", dir);
    EVP_PKEY *ca_key = hc_pki_key_new(&err);
    assert_non_null(ca_key);
    X509 *ca = hc_pki_ca_new(ca_key, "test cluster ca", 1, &err);
    assert_non_null(ca);
    assert_int_equal(hc_pki_cert_save(ca, ctl->ca_file, &err), 0);
    assert_int_equal(hc_pki_key_save(ca_key, ctl->ca_key_file, &err), 0);
    struct hc_cert_spec agent = {.cn = "n1", .sans = sans, .nsans = 2, .server_auth = 1, .days = 1};
    svc_write_cert(ca, ca_key, &agent, s->cert, s->key);
    struct hc_cert_spec client = {.cn = HC_CONTROLLER_CLIENT_CN, .client_auth = 1, .days = 1};
    svc_write_cert(ca, ca_key, &client, ctl->client_cert, ctl->client_key);
    X509_free(ca);
    EVP_PKEY_free(ca_key);

    atomic_store(&s->ok_to_stop, 1);
    s->tls = (struct hc_tls_server_config){.cert_file = s->cert,
                                           .key_file = s->key,
                                           .client_ca_file = ctl->ca_file,
                                           .required_client_cn = HC_CONTROLLER_CLIENT_CN};
    assert_int_equal(pipe(s->stop_pipe), 0);
    sem_init(&s->ready, 0, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, svc_main, s), 0);
    sem_wait(&s->ready);
    if (s->port == 0)
        fail_msg("agent stand-in: %s", s->err.message);
}

/* The stand-in's certificate as PEM text (malloc'd): what a node row's cert_pem holds for the
 * node served by it (the controller pins the key of the node enrolled at an agent URL). */
static char *svc_standin_pem(const struct svc_standin *s)
{
    FILE *fp = fopen(s->cert, "r");
    char *pem = calloc(1, 16384);
    assert_non_null(fp);
    assert_non_null(pem);
    size_t n = fread(pem, 1, 16383, fp);
    fclose(fp);
    assert_true(n > 0 && n < 16383);
    return pem;
}

static void svc_standin_stop(struct svc_standin *s)
{
    if (s->stopped || s->port == 0)
        return;
    s->stopped = 1;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    assert_int_equal(w, 1);
    pthread_join(s->thread, NULL);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    sem_destroy(&s->ready);
}

#endif
