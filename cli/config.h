/*
 * Where hcctl finds its controller, token and CA. Each setting is taken, independently, from
 * the first of: a command-line flag, the environment (HCCTL_CONTROLLER, HCCTL_TOKEN,
 * HCCTL_CA_FILE), the config file $XDG_CONFIG_HOME/hcctl/config.json (default
 * ~/.config/hcctl/config.json; keys "controller", "token", "ca_pem", "controller_pin"; written
 * by `hcctld init`). "controller" may list several controllers (an HA controller's instances):
 * comma-separated, or in the file as an array of strings, which is joined with commas here;
 * cli/controllers.h checks the list. The pin (the controller's server key, "sha256//BASE64") goes
 * with the controller: the file's pin is used only when the controller comes from the file too, and
 * HCCTL_CONTROLLER_PIN overrides both.
 * The file is read only when a flag or variable leaves something unset, so a broken file never
 * stands in the way of a fully specified command line.
 */
#ifndef HC_CLI_CONFIG_H
#define HC_CLI_CONFIG_H

#include <stddef.h>

#include "common/error.h"

struct hc_cli_config {
    char *controller;     /* base URLs, comma-separated, each without a trailing "/"
                             ("https://10.0.0.1:7443"); NULL: unset */
    char *token;          /* bearer token; NULL: unset */
    char *ca_file;        /* CA file from --ca or HCCTL_CA_FILE; NULL: unset */
    char *ca_pem;         /* CA PEM text from the config file; used only when ca_file is NULL */
    char *controller_pin; /* the controller's key pin; NULL: only the CA is checked */
    char path[1024];      /* the config file consulted ("" when it was not needed) */
    /* Where each setting came from: "flag", "env", "config" or NULL (unset). */
    const char *controller_from, *token_from, *ca_from;
};

/* Command-line values; NULL when the flag was not given. Borrowed. */
struct hc_cli_config_flags {
    const char *controller;
    const char *token;
    const char *ca_file;
};

/* Replaces the "token" of the config file at path (kept 0600, written atomically, the other
 * keys untouched). 0 or -1 with err. */
int hc_cli_config_set_token(const char *path, const char *token, struct hc_error *err);

/* The config file path: $XDG_CONFIG_HOME/hcctl/config.json, else $HOME/.config/hcctl/
 * config.json. Returns 0, or -1 with err when neither variable is set. */
int hc_cli_config_path(char *buf, size_t len, struct hc_error *err);

/* Resolves cfg from flags, environment and (when needed) the config file. A missing file is not
 * an error; a file that is not a JSON object with string values is (status 0, code io_error or
 * invalid_json, message naming the path and the parse error). On failure cfg is left cleared.
 * Caller clears cfg with hc_cli_config_clear. */
int hc_cli_config_load(struct hc_cli_config *cfg, const struct hc_cli_config_flags *flags,
                       struct hc_error *err);
void hc_cli_config_clear(struct hc_cli_config *cfg);

#endif
