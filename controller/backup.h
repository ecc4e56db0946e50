/*
 * Backup and restore of a single-mode data directory (docs/hcctld.md "backup", "restore"): one
 * tar.gz holding manifest.json first, then a consistent snapshot of the database (SQLite's
 * online backup API, taken while hcctld runs), the CA and keys, ssh/, trusted-keys/, bundles/
 * and controller.json. The manifest names every entry with its size and SHA-256, so a restore
 * refuses any archive that is truncated, damaged, padded or from a newer hcctld before DIR is
 * touched. A restore writes DIR/restored: the next `hcctld run` raises its fencing generation
 * above every agent's controller_term (hc_backup_fence_catch_up), which a restored database
 * would otherwise be below.
 */
#ifndef HC_CONTROLLER_BACKUP_H
#define HC_CONTROLLER_BACKUP_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "controller/controller.h"

#define HC_BACKUP_FORMAT 1
#define HC_BACKUP_MANIFEST "manifest.json"
#define HC_BACKUP_MANIFEST_MAX (1024 * 1024)
#define HC_BACKUP_MAX_ENTRIES 100000
#define HC_BACKUP_MARKER "restored" /* DIR/restored: written by restore, removed by run */

struct hc_backup_info {
    size_t files;   /* regular files in the archive, the manifest not counted */
    uint64_t bytes; /* their total size */
    int schema;     /* the database's schema version */
    char cluster_id[64];
};

/* Writes the archive of data_dir to output (mode 0600, a temporary file renamed into place).
 * Refuses an HA data directory (`hcctld ha export` is its backup). 0, or -1 with err. */
int hc_backup_create(const char *data_dir, const char *output, struct hc_backup_info *info,
                     struct hc_error *err);

/* Checks input entirely and unpacks it into dest (an empty directory), applying the modes; on
 * failure dest may hold part of it. 0, or -1 with err: backup_invalid for a corrupt, truncated
 * or unsafe archive, schema_too_new for one from a newer hcctld. */
int hc_backup_unpack(const char *input, const char *dest, struct hc_backup_info *info,
                     struct hc_error *err);

/* Restores input as data_dir: unpacks into a temporary directory beside it, then renames it
 * into place (with force, over a non-empty data_dir, which is removed), and writes the marker.
 * Refuses a non-empty data_dir without force and one an hcctld runs on. 0, or -1 with err. */
int hc_backup_restore(const char *input, const char *data_dir, int force,
                      struct hc_backup_info *info, struct hc_error *err);

/* For `hcctld run` (single mode), before it takes its start generation: without the marker,
 * nothing. With it, asks every node's agent (32 at a time) for GET /v1/status controller_term and
 * stores the highest seen as the generation (so that run's next one is above it), then removes the
 * marker; an agent that does not answer keeps the marker (the next run asks again) and is logged.
 * 0, or -1 with err. */
int hc_backup_fence_catch_up(const struct hc_controller *ctl, struct hc_error *err);

#endif
