/*
 * Unit-test support: an agent stand-in, an hc_http_server with mutual TLS on 127.0.0.1 serving
 * the routes a test gives it (tests/unit/support/support.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <event2/event.h>
#include <unistd.h>

#include "tests/unit/support/support.h"

static void standin_on_stop(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(arg);
}

static int standin_listen(struct hc_test_standin *s, struct hc_http_server *srv)
{
    if (hc_http_server_listen(srv, "127.0.0.1", 0, &s->err) != 0)
        return -1;
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct hc_test_route *r = &s->routes[i];
        if (hc_http_server_route(srv, r->method, r->path, 0, r->fn, s->arg) != 0)
            return -1;
    }
    return 0;
}

/* The stand-in's own thread: its own event_base; the main thread stops it through a pipe. */
static void *standin_main(void *arg)
{
    struct hc_test_standin *s = arg;
    struct event_base *base = event_base_new();
    struct hc_http_server *srv = hc_http_server_new(base, &s->tls, &s->err);
    struct event *stop = event_new(base, s->stop_pipe[0], EV_READ, standin_on_stop, base);
    if (srv && standin_listen(s, srv) == 0) {
        s->port = hc_http_server_port(srv);
        event_add(stop, NULL);
        sem_post(&s->ready);
        event_base_dispatch(base);
    } else {
        sem_post(&s->ready);
    }
    event_free(stop);
    hc_http_server_free(srv);
    /* Connections freed by the server finish their teardown in deferred callbacks. */
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
    return NULL;
}

void hc_test_standin_start(struct hc_test_standin *s, const char *cert, const char *key,
                           const char *ca_file, const struct hc_test_route *routes, size_t nroutes,
                           void *arg)
{
    s->tls = (struct hc_tls_server_config){.cert_file = cert,
                                           .key_file = key,
                                           .client_ca_file = ca_file,
                                           .required_client_cn = HC_CONTROLLER_CLIENT_CN};
    s->routes = routes;
    s->nroutes = nroutes;
    s->arg = arg;
    s->port = 0;
    assert_int_equal(pipe(s->stop_pipe), 0);
    sem_init(&s->ready, 0, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, standin_main, s), 0);
    s->running = 1;
    sem_wait(&s->ready);
    if (s->port == 0)
        fail_msg("agent stand-in: %s", s->err.message);
}

void hc_test_standin_stop(struct hc_test_standin *s)
{
    if (!s->running)
        return;
    s->running = 0;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    assert_int_equal(w, 1);
    pthread_join(s->thread, NULL);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    sem_destroy(&s->ready);
}
