/*
 * hcstor's settings (docs/hcstor.md "Settings"): one table says each setting's name, its range
 * or words, its default and whether it applies live or at the next start. Three layers, each
 * over the one before: the built-in defaults, the command-line flags (--log-level ...), the
 * settings file (--settings FILE, a JSON object written by the agent). The file is read at
 * start (a bad or unknown key: exit 2) and again on SIGHUP and POST /reload, where the whole
 * file is checked before anything changes: one bad key refuses it and every old value stays.
 * A restart setting whose value changed is not applied by a reload: it is pending until the
 * next start, and /health and /settings say so. Keys limits.* in the file are the bounds the agent
 * applies around the service (docs/bundles.md "Limits"): hcstor leaves them alone.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcstor/hcstor.h"
#include "common/util.h"

static const char *const log_words[] = {"debug", "info", "warn", "error", NULL};
static const char *const fsync_words[] = {"always", "batch", NULL};

struct setting {
    const char *name;
    int restart;              /* 0: applied by a reload; 1: at the next start */
    const char *const *words; /* an enum: its words (the value is the index); NULL: integer */
    int min, max, def;        /* integer range and default; an enum's default index */
    size_t offset;            /* of the int in struct hcstor_settings */
};

#define FIELD(f) offsetof(struct hcstor_settings, f)
static const struct setting settings[] = {
    {.name = "log_level", .words = log_words, .def = HCSTOR_INFO, .offset = FIELD(log_level)},
    {.name = "resync_parallelism",
     .min = 1,
     .max = HCSTOR_RESYNC_PARALLEL_MAX,
     .def = 8,
     .offset = FIELD(resync_parallelism)},
    {.name = "fsync",
     .restart = 1,
     .words = fsync_words,
     .def = HCSTOR_FSYNC_ALWAYS,
     .offset = FIELD(fsync)},
    {.name = "fsync_interval_ms",
     .restart = 1,
     .min = 1,
     .max = 10000,
     .def = 100,
     .offset = FIELD(fsync_interval_ms)},
    {.name = "min_free_mb",
     .restart = 1,
     .min = 0,
     .max = HCSTOR_MIN_FREE_MB_MAX,
     .def = 0,
     .offset = FIELD(min_free_mb)},
};

static int *field(struct hcstor_settings *set, const struct setting *d)
{
    return (int *)((char *)set + d->offset);
}

static int value_of(const struct hcstor_settings *set, const struct setting *d)
{
    return *(const int *)((const char *)set + d->offset);
}

static const struct setting *setting_find(const char *name)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(settings); i++)
        if (!strcmp(settings[i].name, name))
            return &settings[i];
    return NULL;
}

const char *hcstor_fsync_name(int mode)
{
    return (unsigned)mode < 2 ? fsync_words[mode] : "unknown";
}

void hcstor_settings_defaults(struct hcstor_settings *set)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(settings); i++)
        *field(set, &settings[i]) = settings[i].def;
}

/* "debug|info|warn|error" or "1-64": what a setting accepts, for the error messages. */
static void allowed(const struct setting *d, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    if (!d->words) {
        snprintf(out, len, "an integer %d-%d", d->min, d->max);
        return;
    }
    for (int i = 0; d->words[i] && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "|" : "", d->words[i]);
}

static void unknown(const char *name, char *why, size_t len)
{
    size_t at = (size_t)snprintf(why, len, "unknown setting '%s' (known:", name);
    for (size_t i = 0; i < HC_ARRAY_LEN(settings) && at < len; i++)
        at += (size_t)snprintf(why + at, len - at, "%s %s", i ? "," : "", settings[i].name);
    if (at < len)
        snprintf(why + at, len - at, ")");
}

/* One value (a JSON string for an enum, an integer otherwise) into set. */
static int setting_set(struct hcstor_settings *set, const char *name, json_t *value, char *why,
                       size_t len)
{
    const struct setting *d = setting_find(name);
    char ok[80];
    if (!d) {
        unknown(name, why, len);
        return -1;
    }
    allowed(d, ok, sizeof(ok));
    if (d->words) {
        const char *word = json_string_value(value);
        for (int i = 0; word && d->words[i]; i++)
            if (!strcmp(word, d->words[i])) {
                *field(set, d) = i;
                return 0;
            }
        if (word)
            snprintf(why, len, "setting '%s': '%s' is not one of %s", name, word, ok);
        else
            snprintf(why, len, "setting '%s': expected a string, one of %s", name, ok);
        return -1;
    }
    if (!json_is_integer(value)) {
        snprintf(why, len, "setting '%s': expected %s", name, ok);
        return -1;
    }
    json_int_t v = json_integer_value(value);
    if (v < d->min || v > d->max) {
        snprintf(why, len, "setting '%s': %lld is out of range (%s)", name, (long long)v, ok);
        return -1;
    }
    *field(set, d) = (int)v;
    return 0;
}

int hcstor_setting_from_text(struct hcstor_settings *set, const char *name, const char *text,
                             char *why, size_t len)
{
    const struct setting *d = setting_find(name);
    json_t *value = NULL;
    char *end;
    if (d && !d->words) {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        value = *text && !*end && !errno ? json_integer(v) : json_string(text);
    } else {
        value = json_string(text);
    }
    int rc = value ? setting_set(set, name, value, why, len) : -1;
    if (!value)
        snprintf(why, len, "out of memory");
    json_decref(value);
    return rc;
}

/* The file's settings over base into out; -1 with why when the file or one of its keys is bad
 * (out is then partly written: the caller keeps its old values). */
static int settings_read(const char *path, const struct hcstor_settings *base,
                         struct hcstor_settings *out, char *why, size_t len)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr), *value;
    const char *key;
    int rc = -1;
    *out = *base;
    if (!j) {
        snprintf(why, len, "cannot read settings file %s: %s", path, jerr.text);
        goto cleanup;
    }
    if (!json_is_object(j)) {
        snprintf(why, len, "settings file %s: expected a JSON object of settings", path);
        goto cleanup;
    }
    json_object_foreach(j, key, value)
    {
        char one[300];
        /* limits.*: the resource bounds the agent applies around the service, not its own */
        if (!strncmp(key, "limits.", 7))
            continue;
        if (setting_set(out, key, value, one, sizeof(one)) < 0) {
            snprintf(why, len, "settings file %s: %s", path, one);
            goto cleanup;
        }
    }
    rc = 0;
cleanup:
    json_decref(j);
    return rc;
}

int hcstor_settings_load(struct hcstor *s, char *why, size_t len)
{
    if (!s->settings_path[0])
        s->wanted = s->flags;
    else if (settings_read(s->settings_path, &s->flags, &s->wanted, why, len) < 0)
        return -1;
    s->set = s->wanted;
    return 0;
}

static json_t *setting_json(const struct hcstor_settings *set, const struct setting *d)
{
    int v = value_of(set, d);
    return d->words ? json_string(d->words[v]) : json_integer(v);
}

json_t *hcstor_settings_json(const struct hcstor_settings *set)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < HC_ARRAY_LEN(settings); i++)
        json_object_set_new(o, settings[i].name, setting_json(set, &settings[i]));
    return o;
}

json_t *hcstor_settings_pending(const struct hcstor *s)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < HC_ARRAY_LEN(settings); i++)
        if (value_of(&s->wanted, &settings[i]) != value_of(&s->set, &settings[i]))
            json_object_set_new(o, settings[i].name, setting_json(&s->wanted, &settings[i]));
    return o;
}

json_t *hcstor_settings_reload(struct hcstor *s, char *why, size_t len)
{
    struct hcstor_settings next;
    if (!s->settings_path[0]) {
        snprintf(why, len, "started without --settings: there is no file to reload");
        return NULL;
    }
    if (settings_read(s->settings_path, &s->flags, &next, why, len) < 0)
        return NULL;
    json_t *changed = json_array();
    s->wanted = next;
    for (size_t i = 0; changed && i < HC_ARRAY_LEN(settings); i++) {
        const struct setting *d = &settings[i];
        if (d->restart || value_of(&next, d) == value_of(&s->set, d))
            continue;
        *field(&s->set, d) = value_of(&next, d);
        json_array_append_new(changed, json_string(d->name));
    }
    json_t *pending = hcstor_settings_pending(s);
    char *c = json_dumps(changed, JSON_COMPACT), *p = json_dumps(pending, JSON_COMPACT);
    hcstor_log(s, HCSTOR_INFO, "settings reloaded from %s: changed %s, pending restart %s",
               s->settings_path, c ? c : "?", p ? p : "?");
    free(c);
    free(p);
    return json_pack("{s:o, s:o, s:o}", "settings", hcstor_settings_json(&s->set), "changed",
                     changed, "pending_restart", pending);
}
