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
#ifndef HC_CONTROLLER_CA_ROTATION_H
#define HC_CONTROLLER_CA_ROTATION_H

#include <jansson.h>
#include <openssl/x509.h>

#include "common/error.h"
#include "controller/controller.h"
#include "db/db.h"

/* Starts a rotation: a new CA (and key) beside the old in DIR, the row in phase trust. 409
 * conflict when one runs already; refused in HA mode. 0 or -1 with err. */
int hc_ca_rotate_start(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err);

/* {"phase", "started_at", "old_fingerprint", "new_fingerprint", "bundle_pem",
 *  "nodes": {"total", "trusting", "on_new_ca"}, "waiting_on": [names]} or JSON null when no
 * rotation runs. NULL with err. */
json_t *hc_ca_rotation_status(struct hc_db *db, struct hc_error *err);

/* Puts ca.pem and ca.key in the state the row's phase wants (a crash may have left them half
 * way). 1 when it changed them, 0 when there was nothing to do, -1 with err. */
int hc_ca_rotate_files(const struct hc_controller *ctl, struct hc_db *db, struct hc_error *err);

/* For the steps (controller/remote/ca_rotate.c): the row (JSON null when none; NULL with
 * err); whether a PEM certificate or a certificate file was signed by ca; the move to phase
 * next with its bundle (NULL: the same) and its event; the end (row deleted, kept keys
 * deleted, event ca.rotated, the revocation list written). 0 or -1 with err. */
json_t *hc_ca_rotation_row(struct hc_db *db, struct hc_error *err);
int hc_ca_issued(X509 *ca, const char *pem);
int hc_ca_file_issued(X509 *ca, const char *path);
int hc_ca_rotation_phase(struct hc_db *db, const char *next, const char *bundle,
                         const char *message, struct hc_error *err);
int hc_ca_rotation_finish(const struct hc_controller *ctl, struct hc_db *db, const json_t *row,
                          struct hc_error *err);

#endif
