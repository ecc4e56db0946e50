/*
 * CA rotation (`hcctld ca rotate`, docs/certificates.md "CA rotation"): a new cluster CA
 * replaces the old one without any node ever unreachable. Driven by the poller, one step per
 * cycle, from the ca_rotation row (so a controller killed at any point carries on where it was):
 *
 *   trust    every agent is given old + new to trust (PUT /v1/cert/ca) and says so (its
 *            GET /v1/status ca_digest); the controller trusts both; the old CA still signs.
 *   reissue  the new CA signs (ca.key is its key, ca.pem starts with it); the controller's own
 *            certificates are reissued (certs.h) and every agent's renewed (cert_renew.h); the
 *            revocation list has one list per CA.
 *   drop     once every certificate is the new CA's: agents are given the new CA alone; when
 *            every one says so, the rotation ends (event ca.rotated) and the old key is deleted.
 *
 * A node that does not answer holds the rotation in its phase (it would lose the controller
 * otherwise); `hcctld ca status` and cluster status name what is waited for. Both CAs' keys are
 * kept as DIR/ca-keys/FINGERPRINT.key while it runs. Single mode only: in HA mode each
 * controller holds its own copy of the CA files.
 */
#ifndef HC_CONTROLLER_CA_ROTATE_H
#define HC_CONTROLLER_CA_ROTATE_H

#include <jansson.h>

#include "common/error.h"
#include "common/https_client.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_CA_ROTATE_PUSH_PER_CYCLE 64 /* agents given a new trust bundle in one cycle */

/* Starts a rotation: a new CA (and key) beside the old in DIR, the row in phase trust. 409
 * conflict when one runs already; refused in HA mode. 0 or -1 with err. */
int hc_ca_rotate_start(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err);

/* {"phase", "started_at", "old_fingerprint", "new_fingerprint", "bundle_pem",
 *  "nodes": {"total", "trusting", "on_new_ca"}, "waiting_on": [names]} or JSON null when no
 * rotation runs. NULL with err. */
json_t *hc_ca_rotation_status(struct hc_db *db, struct hc_error *err);

/* One step (see above); logged, never fails. */
void hc_ca_rotate_cycle(struct hc_controller *ctl, struct hc_db *db, struct hc_http_client *client);

/* Puts ca.pem and ca.key in the state the row's phase wants (a crash may have left them half
 * way). 0 when there is nothing to do or it is done, -1 with err. */
int hc_ca_rotate_files(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err);

#endif
