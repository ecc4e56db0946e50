/* hcagent's configuration file (DATA_DIR/agent.json) and node-name rules. */
#include "agents/hcagent/agent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/util.h"

int hc_agent_name_check(const char *name, struct hc_error *err)
{
    if (hc_node_name_valid(name))
        return 0;
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid node name '%s'", name ? name : "");
    return hc_error_hint(err, "use 1-63 lowercase letters, digits, '.', '-' or '_', starting "
                              "with a letter or a digit");
}

int hc_agent_iface_check(const char *iface, struct hc_error *err)
{
    size_t n = iface ? strlen(iface) : 0;
    int ok = n > 0 && n < sizeof(((struct hc_agent_config *)0)->storage_interface) &&
             strcmp(iface, ".") != 0 && strcmp(iface, "..") != 0;
    for (size_t i = 0; ok && i < n; i++)
        ok =
            (unsigned char)iface[i] > ' ' && iface[i] != 0x7f && iface[i] != '/' && iface[i] != ':';
    if (ok)
        return 0;
    hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid storage interface '%s'", iface ? iface : "");
    return hc_error_hint(err, "an interface name as 'ip link' shows it: 1-15 characters, no '/', "
                              "':' or spaces");
}

json_t *hc_agent_config_to_json(const struct hc_agent_config *cfg)
{
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s?, s:s?, s:s*}", "name", cfg->name, "controller", cfg->controller,
        "listen", cfg->listen, "agent_url", cfg->agent_url, "controller_pin",
        cfg->controller_pin[0] ? cfg->controller_pin : NULL, "controller_client_pin",
        cfg->controller_client_pin[0] ? cfg->controller_client_pin : NULL, "storage_interface",
        cfg->storage_interface[0] ? cfg->storage_interface : NULL);
}

/* Copies a required string member into a fixed buffer, refusing truncation. */
static int copy_member(const json_t *obj, const char *key, char *dst, size_t len,
                       struct hc_error *err)
{
    const char *s = hc_json_req_str(obj, key, err);
    if (!s)
        return -1;
    if (strlen(s) >= len)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "field '%s' is too long", key);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* An optional "sha256//..." pin into a 64-byte field ("" when absent). */
static int copy_pin(const json_t *obj, const char *key, char dst[64], struct hc_error *err)
{
    const char *pin = hc_json_str(obj, key, "");
    if (strlen(pin) >= 64 || (*pin && strncmp(pin, "sha256//", 8) != 0))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid field '%s'", key);
    memcpy(dst, pin, strlen(pin) + 1);
    return 0;
}

int hc_agent_config_from_json(const json_t *obj, struct hc_agent_config *cfg, struct hc_error *err)
{
    struct hc_agent_config tmp;
    memset(&tmp, 0, sizeof(tmp));
    if (!json_is_object(obj))
        return hc_error_set(err, HC_E(INVALID_JSON), "configuration is not a JSON object");
    if (copy_member(obj, "name", tmp.name, sizeof(tmp.name), err) < 0 ||
        copy_member(obj, "controller", tmp.controller, sizeof(tmp.controller), err) < 0 ||
        copy_member(obj, "listen", tmp.listen, sizeof(tmp.listen), err) < 0 ||
        copy_member(obj, "agent_url", tmp.agent_url, sizeof(tmp.agent_url), err) < 0)
        return -1;
    if (copy_pin(obj, "controller_pin", tmp.controller_pin, err) < 0 ||
        copy_pin(obj, "controller_client_pin", tmp.controller_client_pin, err) < 0)
        return -1;
    if (hc_agent_name_check(tmp.name, err) < 0)
        return -1;
    /* Optional: configurations from before the storage network have none. */
    const char *iface = hc_json_str(obj, "storage_interface", NULL);
    if (!json_is_null(json_object_get(obj, "storage_interface")) &&
        json_object_get(obj, "storage_interface") && !iface)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "field 'storage_interface' is not a "
                            "string");
    if (iface) {
        if (hc_agent_iface_check(iface, err) < 0)
            return hc_error_prefix(err, "field 'storage_interface'");
        memcpy(tmp.storage_interface, iface, strlen(iface) + 1);
    }
    *cfg = tmp;
    return 0;
}

int hc_agent_config_save(const char *data_dir, const struct hc_agent_config *cfg,
                         struct hc_error *err)
{
    int rc = -1;
    char *path = hc_path_join(data_dir, HC_AGENT_FILE_CONFIG);
    json_t *obj = hc_agent_config_to_json(cfg);
    char *text = obj ? json_dumps(obj, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (!path || !text) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory writing agent configuration");
        goto cleanup;
    }
    /* The NUL is replaced by a newline in the bytes written (the file ends with one). */
    size_t len = strlen(text);
    text[len] = '\n';
    rc = hc_file_write_atomic(path, text, len + 1, 0644, err);
cleanup:
    free(text);
    json_decref(obj);
    free(path);
    return rc;
}

int hc_agent_config_load(const char *data_dir, struct hc_agent_config *cfg, struct hc_error *err)
{
    int rc = -1;
    char *text = NULL;
    size_t len = 0;
    json_t *obj = NULL;
    char *path = hc_path_join(data_dir, HC_AGENT_FILE_CONFIG);
    if (!path) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    if (access(path, F_OK) < 0 && errno == ENOENT) {
        hc_error_set(err, HC_E(NOT_FOUND), "no agent configuration in '%s'", data_dir);
        hc_error_hint(err,
                      "enroll this node first: hcagent join --controller URL "
                      "--token-file FILE --data-dir %s",
                      data_dir);
        goto cleanup;
    }
    if (hc_file_read(path, &text, &len, err) < 0)
        goto cleanup;
    obj = hc_json_parse_object(text, len, err);
    if (!obj || hc_agent_config_from_json(obj, cfg, err) < 0) {
        hc_error_prefix(err, "invalid agent configuration '%s'", path);
        goto cleanup;
    }
    rc = 0;
cleanup:
    json_decref(obj);
    free(text);
    free(path);
    return rc;
}
