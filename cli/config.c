/* Resolution of controller URL, token and CA: flag > environment > config file. */
#include "cli/config.h"

#include "cli/controllers.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hc_cli_config_path(char *buf, size_t len, struct hc_error *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    /* XDG base directory spec: an empty or relative value is ignored. */
    if (xdg && xdg[0] == '/')
        snprintf(buf, len, "%s/hcctl/config.json", xdg);
    else if (home && home[0])
        snprintf(buf, len, "%s/.config/hcctl/config.json", home);
    else
        return hc_error_set(
            err, HC_E(IO),
            "cannot locate the config file: neither XDG_CONFIG_HOME nor HOME is set");
    return 0;
}

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* Takes the flag, else the variable; records the source. */
static int take(char **dst, const char **from, const char *flag, const char *env_name)
{
    const char *env = env_value(env_name);
    const char *v = flag ? flag : env;
    if (!v)
        return 0;
    *dst = strdup(v);
    *from = flag ? "flag" : "env";
    return *dst ? 0 : -1;
}

/* Reads the file at cfg->path into a JSON object; *out stays NULL when the file is missing. */
static int read_file(const char *path, json_t **out, struct hc_error *err)
{
    json_error_t jerr;
    FILE *f = fopen(path, "r");
    *out = NULL;
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return hc_error_set(err, HC_E(IO), "cannot read config file '%s': %s", path,
                            strerror(errno));
    }
    json_t *doc = json_loadf(f, 0, &jerr);
    fclose(f);
    if (!doc) {
        hc_error_set(err, HC_E(INVALID_JSON),
                     "cannot parse config file '%s': line %d column %d: %s", path, jerr.line,
                     jerr.column, jerr.text);
        return hc_error_hint(err, "fix or remove the file; `hcctld init` writes a fresh one");
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        return hc_error_set(err, HC_E(INVALID_JSON),
                            "cannot parse config file '%s': not a JSON object", path);
    }
    *out = doc;
    return 0;
}

/* Copies string member key into *dst unless *dst is already set. */
static int take_file(json_t *doc, const char *key, const char *path, char **dst, const char **from,
                     struct hc_error *err)
{
    json_t *v = json_object_get(doc, key);
    if (*dst || !v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return hc_error_set(err, HC_E(INVALID_JSON),
                            "cannot use config file '%s': \"%s\" is not a string", path, key);
    if (json_string_length(v) == 0)
        return 0;
    *dst = strdup(json_string_value(v));
    *from = "config";
    return *dst ? 0 : hc_error_set(err, HC_E(INTERNAL), "out of memory");
}

/* "controller": one string ("https://a:7443" or "https://a:7443,https://b:7443") or an array of
 * strings (an HA controller's instances), which is joined with commas: the one form the rest of
 * hcctl reads (cli/controllers.h). */
static int take_controllers(json_t *doc, const char *path, struct hc_cli_config *cfg,
                            struct hc_error *err)
{
    json_t *v = json_object_get(doc, "controller"), *item;
    size_t i, len = 1;
    if (cfg->controller || !json_is_array(v))
        return take_file(doc, "controller", path, &cfg->controller, &cfg->controller_from, err);
    json_array_foreach(v, i, item)
    {
        if (!json_is_string(item) || json_string_length(item) == 0 ||
            strchr(json_string_value(item), ','))
            return hc_error_set(err, HC_E(INVALID_JSON),
                                "cannot use config file '%s': \"controller\" item %zu is not a "
                                "URL string",
                                path, i + 1);
        len += json_string_length(item) + 1;
    }
    if (json_array_size(v) == 0)
        return hc_error_set(err, HC_E(INVALID_JSON),
                            "cannot use config file '%s': \"controller\" is an empty list", path);
    char *list = calloc(1, len);
    if (!(cfg->controller = list))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_array_foreach(v, i, item)
    {
        if (i > 0)
            *list++ = ',';
        memcpy(list, json_string_value(item), json_string_length(item));
        list += json_string_length(item);
    }
    cfg->controller_from = "config";
    return 0;
}

static int load_file(struct hc_cli_config *cfg, struct hc_error *err)
{
    json_t *doc = NULL;
    int rc = -1;
    if (hc_cli_config_path(cfg->path, sizeof(cfg->path), err) < 0)
        goto cleanup;
    if (read_file(cfg->path, &doc, err) < 0)
        goto cleanup;
    if (doc && (take_controllers(doc, cfg->path, cfg, err) < 0 ||
                take_file(doc, "token", cfg->path, &cfg->token, &cfg->token_from, err) < 0))
        goto cleanup;
    if (doc && !cfg->ca_file &&
        take_file(doc, "ca_pem", cfg->path, &cfg->ca_pem, &cfg->ca_from, err) < 0)
        goto cleanup;
    /* A pin is about one controller: the file's only when its controller is the one used. */
    const char *pin_from = NULL;
    if (doc && !cfg->controller_pin && cfg->controller_from &&
        !strcmp(cfg->controller_from, "config") &&
        take_file(doc, "controller_pin", cfg->path, &cfg->controller_pin, &pin_from, err) < 0)
        goto cleanup;
    rc = 0;
cleanup:
    json_decref(doc);
    return rc;
}

/* Each URL of the list as hcctl uses it (cli/controllers.h): "host:port" alone means https, a
 * trailing "/" is dropped so paths join cleanly. */
static int normalize_url(struct hc_cli_config *cfg)
{
    if (!cfg->controller)
        return 0;
    char *url = hc_cli_controllers_normalize(cfg->controller);
    if (!url)
        return -1;
    free(cfg->controller);
    cfg->controller = url;
    return 0;
}

int hc_cli_config_load(struct hc_cli_config *cfg, const struct hc_cli_config_flags *flags,
                       struct hc_error *err)
{
    static const struct hc_cli_config_flags none = {0};
    const char *pin_from = NULL;
    if (!flags)
        flags = &none;
    memset(cfg, 0, sizeof(*cfg));
    if (take(&cfg->controller, &cfg->controller_from, flags->controller, "HCCTL_CONTROLLER") < 0 ||
        take(&cfg->token, &cfg->token_from, flags->token, "HCCTL_TOKEN") < 0 ||
        take(&cfg->ca_file, &cfg->ca_from, flags->ca_file, "HCCTL_CA_FILE") < 0 ||
        take(&cfg->controller_pin, &pin_from, NULL, "HCCTL_CONTROLLER_PIN") < 0) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    if ((!cfg->controller || !cfg->token || !cfg->ca_file) && load_file(cfg, err) < 0)
        goto fail;
    if (normalize_url(cfg) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto fail;
    }
    return 0;
fail:
    hc_cli_config_clear(cfg);
    return -1;
}

void hc_cli_config_clear(struct hc_cli_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->controller);
    free(cfg->token);
    free(cfg->ca_file);
    free(cfg->ca_pem);
    free(cfg->controller_pin);
    memset(cfg, 0, sizeof(*cfg));
}

int hc_cli_config_set_token(const char *path, const char *token, struct hc_error *err)
{
    json_t *doc = NULL;
    if (read_file(path, &doc, err) < 0)
        return -1;
    if (!doc)
        return hc_error_set(err, HC_E(IO), "config file '%s' is gone", path);
    json_object_set_new(doc, "token", json_string(token));
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    int rc = hc_file_write_atomic(path, text, strlen(text), 0600, err);
    free(text);
    return rc;
}
