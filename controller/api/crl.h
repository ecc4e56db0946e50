/*
 * The cluster's certificate revocation list, DATA_DIR/crl.pem: every serial in revoked_certs,
 * signed by the cluster CA (by each of the two during a CA rotation). It is rebuilt from the table
 * at every controller start and after every revocation (node remove), so the file always says what
 * the database says. Every HTTPS client the controller makes toward agents
 * (controller/remote/agent_client.c) refuses an agent whose certificate is listed.
 */
#ifndef HC_CONTROLLER_CRL_H
#define HC_CONTROLLER_CRL_H

#include <stddef.h>

#include "common/error.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_CRL_FILE "crl.pem"

/* DATA_DIR/crl.pem into buf, or "" when ctl has no data dir (a context filled by hand in unit
 * tests: such a controller checks no CRL). */
void hc_crl_path(const struct hc_controller *ctl, char *buf, size_t len);

/* Rebuilds the list from revoked_certs (CA and key from ctl's files) and replaces the file
 * atomically, mode 0644. A stored serial that cannot be a certificate serial is left out with a
 * warning (no certificate this CA issued has it). Serialised within the process, so that a
 * writer that read the table earlier never replaces a newer list. 0 or -1 with err. */
int hc_crl_write(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err);

#endif
