/*
 * The bundle manifest's schema (docs/bundles.md "manifest.json"), versions and bundle paths.
 *
 * Unknown keys are refused, so that a typo ("helth") is an error naming the key instead of a
 * hook silently missing on a node in the middle of an upgrade. The "settings" schema is checked
 * by common/settings.c (the same parser the controller and the agent use); here, what ties it to
 * the rest of the manifest: a live setting needs the reload hook, and every {setting:NAME} in the
 * args and the hooks must name a setting.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bundle.h"
#include "common/settings.h"

#define HOOK_TIMEOUT_MAX_MS 600000
#define ARGS_MAX 64
#define ARG_LEN_MAX 1024
#define COMMAND_MAX 32

__attribute__((format(printf, 2, 3))) static int bad(struct hc_error *err, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hc_error_set(err, HC_E(BUNDLE_MANIFEST), "manifest.json: %s", msg);
    return hc_error_hint(err, "see docs/bundles.md for the manifest's fields");
}

/* Every key of obj must be in allowed (NULL-terminated); prefix names the object. */
static int only_keys(const json_t *obj, const char *prefix, const char *const *allowed,
                     struct hc_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (!allowed[i])
            return bad(err, "unknown key '%s%s'", prefix, key);
    }
    return 0;
}

static int int_in(const json_t *obj, const char *key, const char *prefix, long long min,
                  long long max, struct hc_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return bad(err, "'%s%s' must be an integer from %lld to %lld", prefix, key, min, max);
    return 0;
}

static int string_array(const json_t *v, const char *what, size_t min, size_t max,
                        struct hc_error *err)
{
    size_t i;
    const json_t *item;
    if (!json_is_array(v) || json_array_size(v) < min || json_array_size(v) > max)
        return bad(err, "'%s' must be an array of %zu to %zu strings", what, min, max);
    json_array_foreach(v, i, item)
    {
        const char *s = json_string_value(item);
        if (!s || strlen(s) > ARG_LEN_MAX || (min > 0 && i == 0 && !*s))
            return bad(err, "'%s[%zu]' must be a string of at most %d characters%s", what, i,
                       ARG_LEN_MAX, i == 0 && min > 0 ? ", not empty" : "");
    }
    return 0;
}

static int check_http_url(const char *url, const char *key, struct hc_error *err)
{
    if (!url || strncmp(url, "http://", 7) != 0 || strlen(url) > 512 || strlen(url) < 8)
        return bad(err, "'%s.http' must be an http:// URL of at most 512 characters", key);
    for (const char *p = url; *p; p++)
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
            return bad(err, "'%s.http' must not contain spaces or control characters", key);
    return 0;
}

/* A hook: {"http": URL} or {"command": [ARGV...]}, with an optional timeout_ms. */
static int check_hook(const json_t *m, const char *key, int required, struct hc_error *err)
{
    static const char *const allowed[] = {"http", "command", "timeout_ms", NULL};
    const json_t *h = json_object_get(m, key);
    char prefix[64], what[64];
    if (!h || json_is_null(h))
        return required ? bad(err,
                              "'%s' is missing (a hook: {\"http\": URL} or "
                              "{\"command\": [PROGRAM, ARGS...]})",
                              key)
                        : 0;
    if (!json_is_object(h))
        return bad(err, "'%s' must be an object with \"http\" or \"command\"", key);
    snprintf(prefix, sizeof(prefix), "%s.", key);
    if (only_keys(h, prefix, allowed, err) < 0 ||
        int_in(h, "timeout_ms", prefix, 1, HOOK_TIMEOUT_MAX_MS, err) < 0)
        return -1;
    const json_t *http = json_object_get(h, "http"), *cmd = json_object_get(h, "command");
    if ((http != NULL) == (cmd != NULL))
        return bad(err, "'%s' needs exactly one of \"http\" and \"command\"", key);
    if (http)
        return check_http_url(json_string_value(http), key, err);
    snprintf(what, sizeof(what), "%s.command", key);
    return string_array(cmd, what, 1, COMMAND_MAX, err);
}

static int check_limits(const json_t *m, struct hc_error *err)
{
    static const char *const allowed[] = {"cpu_percent", "memory_mb", NULL};
    const json_t *l = json_object_get(m, "limits");
    if (!l || json_is_null(l))
        return 0;
    if (!json_is_object(l))
        return bad(err, "'limits' must be an object with cpu_percent and/or memory_mb");
    if (only_keys(l, "limits.", allowed, err) < 0 ||
        int_in(l, "cpu_percent", "limits.", 1, 10000, err) < 0 ||
        int_in(l, "memory_mb", "limits.", 16, 1048576, err) < 0)
        return -1;
    return 0;
}

static int check_identity(const json_t *m, struct hc_error *err)
{
    const char *name = json_string_value(json_object_get(m, "name"));
    const char *version = json_string_value(json_object_get(m, "version"));
    const json_t *from = json_object_get(m, "min_upgrade_from");
    const json_t *desc = json_object_get(m, "description");
    size_t n = name ? strlen(name) : 0;
    if (!name || n < 1 || n > 63 || !isalnum((unsigned char)name[0]) ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return bad(err, "'name' must be 1-63 characters of a-z, 0-9, '.', '_', '-', starting "
                        "with a letter or digit");
    if (!version || !hc_bundle_version_valid(version))
        return bad(err, "'version' must be 1-64 characters of 0-9, A-Z, a-z, '.', '+', '_', "
                        "'-', starting with a digit");
    if (from && !json_is_null(from) &&
        (!json_is_string(from) || !hc_bundle_version_valid(json_string_value(from))))
        return bad(err, "'min_upgrade_from' must be a version or null");
    if (desc && (!json_is_string(desc) || strlen(json_string_value(desc)) > 512))
        return bad(err, "'description' must be a string of at most 512 characters");
    return 0;
}

static int check_program(const json_t *m, struct hc_error *err)
{
    const char *entry = json_string_value(json_object_get(m, "entrypoint"));
    const json_t *args = json_object_get(m, "args");
    if (!entry)
        return bad(err, "'entrypoint' is missing (the program to run, relative to the bundle)");
    if (!hc_bundle_path_valid(entry))
        return bad(err, "'entrypoint' must be a relative path inside the bundle, without '..'");
    if (args && string_array(args, "args", 0, ARGS_MAX, err) < 0)
        return -1;
    return 0;
}

static const char *const hook_keys[] = {"health", "ok_to_stop", "drain", "resync_status", "reload"};

/* Every {setting:NAME} of the string at where must name a setting of schema. */
static int check_placeholders(const char *text, const char *where,
                              const struct hc_settings_schema *schema, struct hc_error *err)
{
    struct hc_error why = {0};
    char *out = hc_settings_render(text, schema, NULL, NULL, &why);
    free(out);
    return out ? 0 : bad(err, "'%s': %s", where, why.message);
}

static int check_strings(const json_t *arr, const char *what,
                         const struct hc_settings_schema *schema, struct hc_error *err)
{
    size_t i;
    const json_t *item;
    json_array_foreach(arr, i, item)
    {
        char where[64];
        snprintf(where, sizeof(where), "%s[%zu]", what, i);
        if (check_placeholders(json_string_value(item), where, schema, err) < 0)
            return -1;
    }
    return 0;
}

/* The settings schema, its reload hook, and the placeholders that refer to it. */
static int check_settings(const json_t *m, struct hc_error *err)
{
    struct hc_settings_schema *schema = hc_settings_schema_of(m, err);
    int rc = -1;
    if (!schema)
        return -1;
    const json_t *reload = json_object_get(m, "reload");
    for (size_t i = 0; (!reload || json_is_null(reload)) && i < hc_settings_schema_count(schema);
         i++)
        if (hc_settings_schema_at(schema, i)->live) {
            bad(err, "'settings.%s' is live, but there is no 'reload' hook to apply it",
                hc_settings_schema_at(schema, i)->name);
            goto cleanup;
        }
    if (check_strings(json_object_get(m, "args"), "args", schema, err) < 0)
        goto cleanup;
    for (size_t i = 0; i < sizeof(hook_keys) / sizeof(hook_keys[0]); i++) {
        const json_t *h = json_object_get(m, hook_keys[i]);
        const char *http = json_string_value(json_object_get(h, "http"));
        char where[64];
        snprintf(where, sizeof(where), "%s.http", hook_keys[i]);
        if (http && check_placeholders(http, where, schema, err) < 0)
            goto cleanup;
        snprintf(where, sizeof(where), "%s.command", hook_keys[i]);
        if (check_strings(json_object_get(h, "command"), where, schema, err) < 0)
            goto cleanup;
    }
    rc = 0;
cleanup:
    hc_settings_schema_free(schema);
    return rc;
}

const char *hc_bundle_kind(const json_t *m)
{
    const char *kind = json_string_value(json_object_get(m, "kind"));
    return kind && !strcmp(kind, HC_BUNDLE_KIND_AGENT) ? HC_BUNDLE_KIND_AGENT
                                                       : HC_BUNDLE_KIND_SERVICE;
}

/* An agent bundle (docs/agent-upgrade.md): the hcagent program and nothing to supervise, so
 * none of the service's hooks, limits or settings. */
static int check_agent(const json_t *m, struct hc_error *err)
{
    static const char *const allowed[] = {
        "format", "kind", "name", "version", "description", "entrypoint", "min_upgrade_from", NULL};
    if (only_keys(m, "", allowed, err) < 0 || check_identity(m, err) < 0)
        return -1;
    const char *entry = json_string_value(json_object_get(m, "entrypoint"));
    if (!entry || !hc_bundle_path_valid(entry))
        return bad(err, "'entrypoint' must name the hcagent program, a relative path inside the "
                        "bundle without '..'");
    return 0;
}

int hc_bundle_manifest_check(const json_t *m, struct hc_error *err)
{
    static const char *const allowed[] = {"format",
                                          "kind",
                                          "name",
                                          "version",
                                          "min_upgrade_from",
                                          "description",
                                          "entrypoint",
                                          "args",
                                          "health",
                                          "ok_to_stop",
                                          "drain",
                                          "resync_status",
                                          "reload",
                                          "limits",
                                          "settings",
                                          "stop_timeout_ms",
                                          NULL};
    if (!json_is_object(m))
        return bad(err, "must be a JSON object");
    const json_t *format = json_object_get(m, "format");
    if (format && !(json_is_integer(format) && json_integer_value(format) == 1))
        return bad(err, "'format' must be 1 (this is format 1 of bundles)");
    const json_t *kind = json_object_get(m, "kind");
    if (kind &&
        !(json_is_string(kind) && (!strcmp(json_string_value(kind), HC_BUNDLE_KIND_AGENT) ||
                                   !strcmp(json_string_value(kind), HC_BUNDLE_KIND_SERVICE))))
        return bad(err, "'kind' must be \"service\" (the default) or \"agent\"");
    if (kind && !strcmp(json_string_value(kind), HC_BUNDLE_KIND_AGENT))
        return check_agent(m, err);
    if (only_keys(m, "", allowed, err) < 0 || check_identity(m, err) < 0 ||
        check_program(m, err) < 0 || check_hook(m, "health", 1, err) < 0 ||
        check_hook(m, "ok_to_stop", 1, err) < 0 || check_hook(m, "drain", 0, err) < 0 ||
        check_hook(m, "resync_status", 0, err) < 0 || check_hook(m, "reload", 0, err) < 0 ||
        check_limits(m, err) < 0 ||
        int_in(m, "stop_timeout_ms", "", 100, HOOK_TIMEOUT_MAX_MS, err) < 0 ||
        check_settings(m, err) < 0)
        return -1;
    return 0;
}

int hc_bundle_version_valid(const char *v)
{
    size_t n = v ? strlen(v) : 0;
    if (n < 1 || n > 64 || !isdigit((unsigned char)v[0]) || strstr(v, ".."))
        return 0;
    return strspn(v, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.+_-") == n;
}

/* Compares one part (up to a separator) of each version. */
static int part_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int anum = an > 0 && strspn(a, "0123456789") >= an;
    int bnum = bn > 0 && strspn(b, "0123456789") >= bn;
    if (anum && bnum) {
        while (an > 1 && *a == '0')
            a++, an--;
        while (bn > 1 && *b == '0')
            b++, bn--;
        if (an != bn)
            return an < bn ? -1 : 1;
    }
    int c = strncmp(a, b, an < bn ? an : bn);
    if (c)
        return c < 0 ? -1 : 1;
    return an == bn ? 0 : (an < bn ? -1 : 1);
}

int hc_bundle_version_cmp(const char *a, const char *b)
{
    static const char seps[] = ".-+_";
    while (*a || *b) {
        if (!*a || !*b)
            return *a ? 1 : -1;
        size_t an = strcspn(a, seps), bn = strcspn(b, seps);
        int c = part_cmp(a, an, b, bn);
        if (c)
            return c;
        a += an;
        b += bn;
        if (*a)
            a++;
        if (*b)
            b++;
    }
    return 0;
}
