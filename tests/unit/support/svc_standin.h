/*
 * A stand-in agent for unit tests of maintenance and the availability budget: the shared
 * stand-in (support.h) serving the software and service routes the controller calls
 * (docs/api.md "Agent API: software and service"), with answers the test sets and a counter per
 * route, its certificates written into the fixture's controller paths.
 */
#ifndef HC_TESTS_UNIT_SVC_STANDIN_H
#define HC_TESTS_UNIT_SVC_STANDIN_H

#include <stdatomic.h>

#include "tests/unit/support/support.h"

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
    struct hc_test_standin srv;
    char cert[600], key[600];
    int port;
    atomic_int ok_to_stop; /* the answer to ok-to-stop (1 at start) */
    char refusal[128];     /* its reason when 0 (set before the calls) */
    atomic_int calls[SVC_NROUTES];
};

/* Fills ctl's certificate paths under dir, writes the cluster CA, the controller's client
 * certificate and the stand-in's server certificate, and starts the stand-in. */
void svc_standin_start(struct svc_standin *s, struct hc_controller *ctl, const char *dir);
/* The stand-in's certificate as PEM text (malloc'd): what a node row's cert_pem holds for the
 * node served by it (the controller pins the key of the node enrolled at an agent URL). */
char *svc_standin_pem(const struct svc_standin *s);
void svc_standin_stop(struct svc_standin *s);

#endif
