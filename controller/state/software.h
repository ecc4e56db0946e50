/*
 * Software bundles on the controller (docs/bundles.md, docs/api.md "Software"): verified on
 * upload against the trusted keys of DATA_DIR/trusted-keys (given to `hcctld init --trust-key`),
 * stored as DATA_DIR/bundles/VERSION.tar.gz and .sig with a row in the bundles table, listed
 * with the nodes that run them, served to agents for staging, and removed unless a node runs
 * one or may roll back to it.
 *
 * BUNDLE (the API object): {"name","version","description","sha256","size","signed_by",
 * "min_upgrade_from","uploaded_at","uploaded_by","nodes_running":[NAME],"nodes_rollback":[NAME]}
 */
#ifndef HC_CONTROLLER_SOFTWARE_H
#define HC_CONTROLLER_SOFTWARE_H

#include <jansson.h>
#include <stddef.h>

#include "common/bundle.h"
#include "common/error.h"
#include "controller/controller.h"
#include "db/db.h"

#define HC_SOFTWARE_KEYS_DIR "trusted-keys"
#define HC_SOFTWARE_BUNDLES_DIR "bundles"
/* Header of an upload carrying the signature line. */
#define HC_SOFTWARE_SIG_HEADER "X-HC-Signature"

/* The trusted bundle keys of a data directory (DATA_DIR/trusted-keys/ *.pem). NULL with err.
 * Caller frees with hc_bundle_keys_free. */
struct hc_bundle_keys *hc_software_keys_load(const char *data_dir, struct hc_error *err);
/* Copies each key file into DATA_DIR/trusted-keys/NAME.pem after checking it is an Ed25519
 * public key; two files with the same name are refused. For `hcctld init --trust-key`. */
int hc_software_keys_install(const char *data_dir, const char *const *files, size_t n,
                             struct hc_error *err);

/* Verifies and stores an uploaded bundle, records it and a software.uploaded event (actor).
 * Nothing is written before every check passed. The same version uploaded again with the same
 * sha256 is not an error: *already is set and the stored bundle returned. Returns
 * {"bundle":BUNDLE} (new reference) or NULL with err (400 for a refused bundle, 409 for another
 * bundle under a version already taken). */
json_t *hc_software_store(const struct hc_controller *ctl, struct hc_db *db, const void *data,
                          size_t len, const char *sig_line, const char *actor, int *already,
                          struct hc_error *err);
/* {"bundles":[BUNDLE...]} in version order (new reference), or NULL with err. */
json_t *hc_software_list(struct hc_db *db, struct hc_error *err);
/* The bundles row of version (name, version, sha256, signature, signed_by, manifest_json, size,
 * uploaded_at, uploaded_by), or NULL with err (404 not_found: "not uploaded"). */
json_t *hc_software_row(struct hc_db *db, const char *version, struct hc_error *err);
/* {"bundle":BUNDLE,"manifest":{...},"signature":"hcsig1 ..."} or NULL with err (404). */
json_t *hc_software_get(struct hc_db *db, const char *version, struct hc_error *err);
/* The stored .tar.gz, checked against the recorded sha256 (a file damaged on disk is refused
 * rather than sent). *data is malloc'd. 0 or -1 with err (404 unknown version). */
int hc_software_read(const struct hc_controller *ctl, struct hc_db *db, const char *version,
                     char **data, size_t *len, struct hc_error *err);
/* Removes a bundle: 409 while a node runs it, may roll back to it, or an active operation
 * targets it (the message names them). Row and event in one transaction, then the files.
 * 0 or -1 with err. */
int hc_software_remove(const struct hc_controller *ctl, struct hc_db *db, const char *version,
                       const char *actor, struct hc_error *err);

#endif
