/*
 * CA rotation, the steps that call agents (controller/state/ca_rotation.h has the phases, the
 * files and the state; docs/certificates.md "CA rotation"): run by the poller after each cycle.
 */
#ifndef HC_CONTROLLER_CA_ROTATE_H
#define HC_CONTROLLER_CA_ROTATE_H

#include "common/https_client.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_CA_ROTATE_PUSH_PER_CYCLE 64 /* agents given a new trust bundle in one cycle */

/* One step of the rotation under way, if any; logged, never fails. */
void hc_ca_rotate_cycle(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client);

#endif
