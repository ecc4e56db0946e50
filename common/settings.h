/*
 * A service's settings (docs/bundles.md "Settings"): the schema a bundle's manifest declares
 * under "settings", and the value sets the controller records as revisions and the agent applies.
 *
 * Pure: no I/O, no clock, no globals. The controller and the agent use the same code, so that a
 * value one accepts the other accepts, and the digest one computes the other reproduces.
 *
 * Values come in two forms. The JSON form is what a revision stores and the settings file holds
 * (normalized: int and size and duration as JSON integers — bytes, milliseconds —, bool as
 * true/false, string and enum as strings). The text form is what an operator types
 * ("512M", "30s", "true") and what {setting:NAME} turns into (canonical: "512M", not
 * "536870912"). Every function that takes values accepts both on input and hands back the JSON
 * form.
 *
 * Value sets are of two kinds and the functions say which they want: *overrides* (only the
 * settings an operator set: what a revision records, so that a new version's default applies to
 * whatever nobody set) and *effective* values (every setting of the schema, defaults filled:
 * what a node applies, diffs and digests).
 *
 * Ownership: schemas are freed with hc_settings_schema_free (NULL accepted); json_t results are
 * new references for the caller; strings are malloc'd for the caller. Errors fill struct
 * hc_error: a schema's are bundle_manifest_invalid ("manifest.json: 'settings.fsync.default'
 * must be one of always, batch"), a value's invalid_argument in one line naming the key and what
 * it may be ("fsync: 'sometimes' is not one of always, batch").
 */
#ifndef HC_COMMON_SETTINGS_H
#define HC_COMMON_SETTINGS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define HC_SETTINGS_MAX 128                      /* settings in a schema, keys in a value set */
#define HC_SETTING_NAME_MAX 64                   /* [a-z][a-z0-9_.]{0,63} */
#define HC_SETTING_VALUE_MAX 4096                /* bytes of a value's text */
#define HC_SETTING_HELP_MAX 200                  /* bytes of the one-line help */
#define HC_SETTING_ENUM_MAX 64                   /* values of an enum, and bytes of each */
#define HC_SETTINGS_RENDER_MAX 65536             /* bytes of a string after its placeholders */
#define HC_SETTINGS_FILE "service-settings.json" /* DIR/service-settings.json on a node */

enum hc_setting_type {
    HC_SETTING_INT,
    HC_SETTING_BOOL,
    HC_SETTING_STRING,
    HC_SETTING_ENUM,
    HC_SETTING_SIZE,    /* bytes; text with K, M, G, T = 1024^n */
    HC_SETTING_DURATION /* milliseconds; text with ms, s, m, h */
};

/* One setting of a schema. Read-only for users of the schema, which owns it. */
struct hc_setting {
    char name[HC_SETTING_NAME_MAX + 1];
    enum hc_setting_type type;
    int live;          /* "apply": 1 live (the reload hook applies it), 0 restart */
    int64_t min, max;  /* int, size, duration (bytes, milliseconds): inclusive bounds */
    size_t max_length; /* string: bytes, at most HC_SETTING_VALUE_MAX */
    char **values;     /* enum: the allowed values, in the manifest's order */
    size_t n_values;
    json_t *def; /* the default, in the normalized JSON form */
    char help[HC_SETTING_HELP_MAX + 1];
};

struct hc_settings_schema;

/* ---------------------------------------------------------------- schemas */

/* "int", "bool", "string", "enum", "size", "duration". */
const char *hc_setting_type_name(enum hc_setting_type type);
/* Setting names: 1-64 of [a-z0-9_.], starting with a letter. Returns 1 when valid. */
int hc_setting_name_valid(const char *name);
/* Parses the manifest's "settings" object into a schema, checking all of it (docs/bundles.md
 * "Settings"). NULL or JSON null settings is the empty schema. NULL with err
 * (bundle_manifest_invalid, the key named). */
struct hc_settings_schema *hc_settings_schema_parse(const json_t *settings, struct hc_error *err);
/* The same for a whole manifest (its "settings" member). */
struct hc_settings_schema *hc_settings_schema_of(const json_t *manifest, struct hc_error *err);
void hc_settings_schema_free(struct hc_settings_schema *schema);
size_t hc_settings_schema_count(const struct hc_settings_schema *schema);
/* The i-th setting in name order (strcmp), NULL past the end. */
const struct hc_setting *hc_settings_schema_at(const struct hc_settings_schema *schema, size_t i);
/* The setting called name, or NULL. */
const struct hc_setting *hc_settings_schema_find(const struct hc_settings_schema *schema,
                                                 const char *name);
/* 1 when some setting is live (the manifest then needs a reload hook). */
int hc_settings_schema_has_live(const struct hc_settings_schema *schema);

/* ---------------------------------------------------------------- values */

/* One value (JSON form or text form as a JSON string) checked against s; the normalized JSON
 * form, or NULL with err: "NAME: 'VALUE' is not WHAT". */
json_t *hc_setting_value_parse(const struct hc_setting *s, const json_t *value,
                               struct hc_error *err);
/* The canonical text form of a normalized value into buf ("512M", "30s", "true", "8", the
 * string itself). Returns its length, or -1 when value is not of s's normalized form or does
 * not fit in len bytes. */
int hc_setting_value_text(const struct hc_setting *s, const json_t *value, char *buf, size_t len);
/* What s accepts, for messages and help: "one of always, batch", "an integer from 1 to 64",
 * "a size from 16M to 1T (bytes, or K, M, G, T = 1024^n)". Clipped to len bytes. */
void hc_setting_describe(const struct hc_setting *s, char *buf, size_t len);

enum hc_settings_flags {
    HC_SETTINGS_DEFAULTS = 1, /* fill every setting values lacks with its default */
};
/* Checks a value set {"NAME": value|text...} (at most HC_SETTINGS_MAX keys) against schema:
 * every key a setting, every value valid. Returns the normalized set (the same keys; with
 * HC_SETTINGS_DEFAULTS every setting of schema), or NULL with err naming the first bad key in
 * name order. NULL values is the empty set. */
json_t *hc_settings_normalize(const struct hc_settings_schema *schema, const json_t *values,
                              unsigned flags, struct hc_error *err);
/* The effective values of the schema alone: every default. */
json_t *hc_settings_defaults(const struct hc_settings_schema *schema);

/* An upgrade: may the overrides recorded under the running version's schema stay under next?
 * 0 when every override that next still has is valid there: *normalized (may be NULL) receives
 * those overrides in next's normalized form, *vanished (may be NULL) the sorted array of the
 * names next no longer has (allowed: they are dropped, and reported). -1 with err (409
 * conflict: the state refuses the upgrade) naming the first setting, in name order, whose
 * current value next rejects, with the reason: "the new version refuses the current value of
 * fsync: 'batch' is not one of always". */
int hc_settings_upgrade_check(const struct hc_settings_schema *next, const json_t *overrides,
                              json_t **normalized, json_t **vanished, struct hc_error *err);

/* What differs between two value sets (give effective values, so that setting a value to its
 * default is no change): an array, in name order, of
 *   {"name": NAME, "old": value|null, "new": value|null, "apply": "live"|"restart"}
 * for every key whose value differs or that only one set has. *restart (may be NULL) is 1 when
 * some changed setting is restart, or is not in schema (unknown: the safe assumption). NULL
 * sets are empty. NULL only when out of memory. */
json_t *hc_settings_diff(const struct hc_settings_schema *schema, const json_t *a, const json_t *b,
                         int *restart);

/* SHA-256 (lowercase hex) of a canonical serialization of a value set, so that an agent and the
 * controller compare what is applied with what is desired without sending it: the order of the
 * keys does not matter, types do (8 and "8" differ). Only integer, true/false, string and null
 * values have a digest (the normalized forms). 0, or -1 with err. */
int hc_settings_digest(const json_t *values, char out[65], struct hc_error *err);

/* ---------------------------------------------------------------- placeholders */

/* Replaces {setting:NAME} with the canonical text of NAME's value in values (effective values;
 * a setting values lacks, or NULL values, takes its default) and {settings_file} with
 * settings_file (NULL leaves it as it is). Anything else in braces stays. A malformed
 * {setting:...} or a NAME that schema does not have is an error, as is a result longer than
 * HC_SETTINGS_RENDER_MAX. Returns a new string (caller frees), or NULL with err. */
char *hc_settings_render(const char *text, const struct hc_settings_schema *schema,
                         const json_t *values, const char *settings_file, struct hc_error *err);

#endif
