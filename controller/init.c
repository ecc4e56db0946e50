/*
 * `hcctld init` and the loading of a data directory (controller/init.h).
 *
 * init writes the certificates first, then the database (cluster row, PKI rows and the admin
 * token in one transaction), then the files that point at them; both the database and
 * controller.json mark a directory as initialised, so an interrupted init is refused like a
 * finished one and needs --force.
 */
#include "controller/init.h"
#include "controller/ops/op_bootstrap.h"
#include "controller/remote/ssh.h"

#include <errno.h>
#include <libgen.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/events.h"
#include "controller/state/software.h"
#include "db/db.h"

#define MAX_SANS 32

static void path_in(char *dst, size_t len, const char *dir, const char *name)
{
    snprintf(dst, len, "%s/%s", dir, name);
}

void hc_controller_paths(struct hc_controller *ctl, const char *data_dir)
{
    snprintf(ctl->data_dir, sizeof(ctl->data_dir), "%s", data_dir);
    path_in(ctl->db_path, sizeof(ctl->db_path), data_dir, "hcctld.db");
    path_in(ctl->ca_file, sizeof(ctl->ca_file), data_dir, "ca.pem");
    path_in(ctl->ca_key_file, sizeof(ctl->ca_key_file), data_dir, "ca.key");
    path_in(ctl->server_cert, sizeof(ctl->server_cert), data_dir, "server.pem");
    path_in(ctl->server_key, sizeof(ctl->server_key), data_dir, "server.key");
    path_in(ctl->client_cert, sizeof(ctl->client_cert), data_dir, "client.pem");
    path_in(ctl->client_key, sizeof(ctl->client_key), data_dir, "client.key");
}

static int is_wildcard(const char *host)
{
    return !*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

static void format_url(char *buf, size_t len, const char *host, int port)
{
    snprintf(buf, len, strchr(host, ':') ? "https://[%s]:%d" : "https://%s:%d", host, port);
}

int hc_controller_parse_advertise(const char *text, char *host, size_t len, int *port,
                                  struct hc_error *err)
{
    if (hc_split_host_port(text, host, len, port, err) < 0)
        return hc_error_prefix(err, "--advertise");
    if (is_wildcard(host) || *port < 1 || *port > 65535)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "--advertise '%s' is not an address and port nodes can reach", text);
    return 0;
}

int hc_controller_check_advertise(const struct hc_controller *ctl, struct hc_error *err)
{
    const char *host = ctl->advertise_host;
    if (!host[0])
        return 0;
    X509 *cert = hc_pki_cert_load(ctl->server_cert, err);
    if (!cert)
        return -1;
    int named =
        X509_check_ip_asc(cert, host, 0) == 1 || X509_check_host(cert, host, 0, 0, NULL) == 1;
    X509_free(cert);
    if (named)
        return 0;
    hc_error_set(err, HC_E(INVALID_ARGUMENT),
                 "--advertise %s: the controller's certificate does not name that address, so "
                 "agents would refuse it",
                 host);
    return hc_error_hint(err, "advertise an address given to 'hcctld init' (--listen, --advertise "
                              "or --san)");
}

int hc_controller_url(const struct hc_controller *ctl, char *buf, size_t len, struct hc_error *err)
{
    const char *host = ctl->advertise_host[0] ? ctl->advertise_host : ctl->listen_host;
    int port = ctl->advertise_host[0] ? ctl->advertise_port : ctl->listen_port;
    if (is_wildcard(host)) {
        hc_error_set(err, HC_E(PREFLIGHT_FAILED),
                     "the controller listens on %s and advertises no address: nodes cannot be "
                     "told where to reach it",
                     host[0] ? host : "every address");
        return hc_error_hint(err, "give hcctld an address the nodes reach: 'hcctld run "
                                  "--advertise ADDR:PORT' (or --listen ADDR:PORT)");
    }
    format_url(buf, len, host, port);
    return 0;
}

/* Work state of one init, so the steps can share it without long argument lists. */
struct init_state {
    const struct hc_init_options *opts;
    struct hc_init_result *res;
    struct hc_controller ctl;
    char host[256];
    int port;
    char adv_host[256]; /* "" without --advertise */
    int adv_port;
    X509 *ca;
    EVP_PKEY *ca_key;
    char *ca_pem;
    char *server_pem;
    char *client_pem;
};

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Refuses an initialised directory, or clears it with --force. */
static int check_fresh(struct init_state *s, struct hc_error *err)
{
    char json_path[1100];
    path_in(json_path, sizeof(json_path), s->ctl.data_dir, "controller.json");
    if (!file_exists(json_path) && !file_exists(s->ctl.db_path))
        return 0;
    if (!s->opts->force) {
        hc_error_set(err, HC_E(CONFLICT), "data dir '%s' is already initialised", s->ctl.data_dir);
        return hc_error_hint(err, "pass --force to start over (this destroys the cluster's state)");
    }
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < HC_ARRAY_LEN(suffixes); i++) {
        char p[1200];
        snprintf(p, sizeof(p), "%s%s", s->ctl.db_path, suffixes[i]);
        if (unlink(p) < 0 && errno != ENOENT)
            return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", p, strerror(errno));
    }
    if (unlink(json_path) < 0 && errno != ENOENT)
        return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", json_path, strerror(errno));
    return 0;
}

/* Issues a certificate for a new key and writes both; *pem_out receives the certificate PEM. */
static int issue_pair(struct init_state *s, const struct hc_cert_spec *spec, const char *cert_path,
                      const char *key_path, char **pem_out, struct hc_error *err)
{
    int rc = -1;
    X509 *cert = NULL;
    EVP_PKEY *key = hc_pki_key_new(err);
    if (!key)
        goto cleanup;
    char serial[33];
    cert = hc_pki_issue(s->ca, s->ca_key, key, spec, serial, err);
    if (!cert || hc_pki_key_save(key, key_path, err) < 0 ||
        hc_pki_cert_save(cert, cert_path, err) < 0)
        goto cleanup;
    *pem_out = hc_pki_cert_to_pem(cert);
    rc = *pem_out ? 0 : hc_error_set(err, HC_E(INTERNAL), "cannot encode '%s'", cert_path);
cleanup:
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

static int make_ca(struct init_state *s, struct hc_error *err)
{
    char cn[128];
    snprintf(cn, sizeof(cn), "hcctl cluster CA %.8s", s->res->cluster_id);
    s->ca_key = hc_pki_key_new(err);
    if (!s->ca_key)
        return -1;
    s->ca = hc_pki_ca_new(s->ca_key, cn, HC_INIT_CA_DAYS, err);
    if (!s->ca || hc_pki_key_save(s->ca_key, s->ctl.ca_key_file, err) < 0 ||
        hc_pki_cert_save(s->ca, s->ctl.ca_file, err) < 0)
        return -1;
    s->ca_pem = hc_pki_cert_to_pem(s->ca);
    if (!s->ca_pem)
        return hc_error_set(err, HC_E(INTERNAL), "cannot encode the cluster CA");
    hc_pki_fingerprint(s->ca, s->res->ca_fingerprint);
    return 0;
}

static size_t add_san(const char **sans, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(sans[i], name) == 0)
            return n;
    if (n < MAX_SANS)
        sans[n++] = name;
    return n;
}

static int make_certs(struct init_state *s, struct hc_error *err)
{
    if (make_ca(s, err) < 0)
        return -1;
    const char *sans[MAX_SANS];
    size_t n = 0;
    if (!is_wildcard(s->host))
        n = add_san(sans, n, s->host);
    if (s->adv_host[0])
        n = add_san(sans, n, s->adv_host);
    for (size_t i = 0; i < s->opts->nsans; i++)
        n = add_san(sans, n, s->opts->sans[i]);
    n = add_san(sans, n, "localhost");
    n = add_san(sans, n, "127.0.0.1");
    struct hc_cert_spec server = {
        .cn = "hcctld", .sans = sans, .nsans = n, .server_auth = 1, .days = HC_INIT_CERT_DAYS};
    struct hc_cert_spec client = {
        .cn = HC_CONTROLLER_CLIENT_CN, .client_auth = 1, .days = HC_INIT_CERT_DAYS};
    if (issue_pair(s, &server, s->ctl.server_cert, s->ctl.server_key, &s->server_pem, err) < 0)
        return -1;
    return issue_pair(s, &client, s->ctl.client_cert, s->ctl.client_key, &s->client_pem, err);
}

static int insert_pki_row(struct hc_db *db, const char *name, const char *value, int64_t now,
                          struct hc_error *err)
{
    return hc_db_run(db, err, "INSERT INTO pki (name, value, created_at) VALUES (?, ?, ?)", "ssi",
                     name, value, now) < 0
               ? -1
               : 0;
}

/* The cluster row, the PKI rows and the admin token, in one transaction. */
static int fill_db(struct init_state *s, struct hc_db *db, struct hc_error *err)
{
    int64_t now = hc_now_ms();
    const char *name = s->opts->cluster_name ? s->opts->cluster_name : HC_INIT_DEFAULT_CLUSTER_NAME;
    if (hc_db_begin(db, err) < 0)
        return -1;
    if (hc_db_run(db, err, "INSERT INTO clusters (id, name, created_at) VALUES (?, ?, ?)", "ssi",
                  s->res->cluster_id, name, now) < 0 ||
        insert_pki_row(db, "ca_cert", s->ca_pem, now, err) < 0 ||
        insert_pki_row(db, "ca_fingerprint", s->res->ca_fingerprint, now, err) < 0 ||
        insert_pki_row(db, "ca_key_path", s->ctl.ca_key_file, now, err) < 0 ||
        insert_pki_row(db, "server_cert", s->server_pem, now, err) < 0 ||
        insert_pki_row(db, "client_cert", s->client_pem, now, err) < 0 ||
        hc_auth_token_create(db, "admin", HC_AUTH_ROLE_ADMIN,
                             s->opts->admin_token_ttl_ms ? hc_now_ms() + s->opts->admin_token_ttl_ms
                                                         : 0,
                             s->res->admin_token, err) < 0 ||
        hc_event_add(db, "cluster.initialised", NULL, NULL, "hcctld", NULL, err,
                     "cluster '%s' (%s) initialised", name, s->res->cluster_id) < 0 ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    return 0;
}

static int write_json(const char *path, json_t *doc, int mode, struct hc_error *err)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    char *line = NULL;
    if (!text || asprintf(&line, "%s\n", text) < 0) {
        free(text);
        return hc_error_set(err, HC_E(INTERNAL), "cannot encode '%s'", path);
    }
    int rc = hc_file_write_atomic(path, line, strlen(line), mode, err);
    free(text);
    free(line);
    return rc;
}

static int write_files(struct init_state *s, struct hc_error *err)
{
    char path[1100];
    char listen[300];
    snprintf(listen, sizeof(listen), strchr(s->host, ':') ? "[%s]:%d" : "%s:%d", s->host, s->port);
    path_in(path, sizeof(path), s->ctl.data_dir, "admin.token");
    char token_line[HC_AUTH_TOKEN_TEXT_MAX + 2];
    snprintf(token_line, sizeof(token_line), "%s\n", s->res->admin_token);
    if (hc_file_write_atomic(path, token_line, strlen(token_line), 0600, err) < 0)
        return -1;
    /* The key the controller bootstraps nodes with over SSH (cluster create, node add). */
    char key[1100], known[1100];
    hc_bootstrap_ssh_paths(s->ctl.data_dir, key, sizeof(key), known, sizeof(known));
    path_in(path, sizeof(path), s->ctl.data_dir, "ssh");
    if (hc_mkdir_p(path, 0700, err) < 0 || hc_ssh_keygen(key, err) < 0)
        return -1;
    path_in(path, sizeof(path), s->ctl.data_dir, "controller.json");
    json_t *settings = json_pack("{s:s, s:s}", "listen", listen, "cluster_id", s->res->cluster_id);
    if (settings && s->opts->advertise)
        json_object_set_new(settings, "advertise", json_string(s->opts->advertise));
    return write_json(path, settings, 0644, err);
}

int hc_init_cli_config_path(char *buf, size_t len, struct hc_error *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg) {
        snprintf(buf, len, "%s/hcctl/config.json", xdg);
        return 0;
    }
    if (!home || !*home) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "cannot find the CLI config location");
        return hc_error_hint(err, "set HOME or XDG_CONFIG_HOME, or pass --cli-config PATH");
    }
    snprintf(buf, len, "%s/.config/hcctl/config.json", home);
    return 0;
}

/* The CLI config: where the controller is, the admin token, and the CA to trust. */
static int write_cli_config(struct init_state *s, struct hc_error *err)
{
    struct hc_init_result *res = s->res;
    if (s->opts->cli_config)
        snprintf(res->cli_config, sizeof(res->cli_config), "%s", s->opts->cli_config);
    else if (hc_init_cli_config_path(res->cli_config, sizeof(res->cli_config), err) < 0)
        return -1;
    const char *host = s->adv_host[0] ? s->adv_host : s->host;
    int port = s->adv_host[0] ? s->adv_port : s->port;
    if (is_wildcard(host))
        host = s->opts->nsans ? s->opts->sans[0] : "127.0.0.1";
    format_url(res->controller_url, sizeof(res->controller_url), host, port);
    char dir[1100], bak[1200];
    snprintf(dir, sizeof(dir), "%s", res->cli_config);
    if (hc_mkdir_p(dirname(dir), 0700, err) < 0)
        return -1;
    /* Another cluster's config (or this one's before a forced init) is kept, not lost. */
    snprintf(bak, sizeof(bak), "%s.bak", res->cli_config);
    if (access(res->cli_config, F_OK) == 0) {
        if (rename(res->cli_config, bak) < 0)
            return hc_error_set(err, HC_E(IO), "cannot keep the old CLI config as '%s': %s", bak,
                                strerror(errno));
        res->cli_config_kept = 1;
    }
    char pin[HC_PKI_PIN_LEN];
    if (hc_pki_pem_pin(s->server_pem, pin, err) < 0)
        return -1;
    return write_json(res->cli_config,
                      json_pack("{s:s, s:s, s:s, s:s}", "controller", res->controller_url, "token",
                                res->admin_token, "ca_pem", s->ca_pem, "controller_pin", pin),
                      0600, err);
}

/* Bundle signing keys are checked before anything is written. */
static int check_trust_keys(const struct hc_init_options *o, struct hc_error *err)
{
    struct hc_bundle_keys *keys = hc_bundle_keys_new();
    int rc = keys ? 0 : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t i = 0; rc == 0 && i < o->ntrust_keys; i++)
        rc = hc_bundle_keys_add_file(keys, o->trust_keys[i], err);
    hc_bundle_keys_free(keys);
    return rc;
}

/* DATA_DIR/trusted-keys: exactly the keys of this init (a forced init drops the old ones). */
static int write_trust_keys(struct init_state *s, struct hc_error *err)
{
    char path[1100];
    path_in(path, sizeof(path), s->ctl.data_dir, HC_SOFTWARE_KEYS_DIR);
    if (hc_bundle_rmtree(path) < 0)
        return hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", path, strerror(errno));
    return hc_software_keys_install(s->ctl.data_dir, s->opts->trust_keys, s->opts->ntrust_keys,
                                    err);
}

static int check_options(struct init_state *s, struct hc_error *err)
{
    const struct hc_init_options *o = s->opts;
    if (!o->data_dir || !*o->data_dir)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "--data-dir is required");
    if (hc_split_host_port(o->listen ? o->listen : HC_INIT_DEFAULT_LISTEN, s->host, sizeof(s->host),
                           &s->port, err) < 0)
        return -1;
    if (s->port < 1 || s->port > 65535)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "listen port %d is out of range", s->port);
    if (o->advertise && hc_controller_parse_advertise(o->advertise, s->adv_host,
                                                      sizeof(s->adv_host), &s->adv_port, err) < 0)
        return -1;
    if (o->nsans > MAX_SANS - 3)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "too many --san values (max %d)",
                            MAX_SANS - 3);
    const char *name = o->cluster_name ? o->cluster_name : HC_INIT_DEFAULT_CLUSTER_NAME;
    if (!*name || strlen(name) > 63)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "cluster name must be 1-63 characters");
    return check_trust_keys(o, err);
}

static int make_data_dir(struct init_state *s, struct hc_error *err)
{
    if (hc_mkdir_p(s->opts->data_dir, 0700, err) < 0)
        return -1;
    /* An existing directory gets the same mode: it is about to hold private keys. */
    if (chmod(s->opts->data_dir, 0700) < 0)
        return hc_error_set(err, HC_E(IO), "cannot chmod '%s': %s", s->opts->data_dir,
                            strerror(errno));
    return 0;
}

int hc_init_run(const struct hc_init_options *opts, struct hc_init_result *res,
                struct hc_error *err)
{
    struct init_state s = {.opts = opts, .res = res};
    struct hc_db *db = NULL;
    int rc = -1;
    memset(res, 0, sizeof(*res));
    if (check_options(&s, err) < 0)
        goto cleanup;
    hc_controller_paths(&s.ctl, opts->data_dir);
    if (check_fresh(&s, err) < 0 || make_data_dir(&s, err) < 0)
        goto cleanup;
    if (hc_random_hex(res->cluster_id, 8) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot generate a cluster id");
        goto cleanup;
    }
    if (make_certs(&s, err) < 0 || write_trust_keys(&s, err) < 0)
        goto cleanup;
    db = hc_db_open(s.ctl.db_path, err);
    if (!db || fill_db(&s, db, err) < 0 || write_files(&s, err) < 0 ||
        write_cli_config(&s, err) < 0)
        goto cleanup;
    rc = 0;
cleanup:
    hc_db_close(db);
    X509_free(s.ca);
    EVP_PKEY_free(s.ca_key);
    free(s.ca_pem);
    free(s.server_pem);
    free(s.client_pem);
    return rc;
}

/* Reads DIR/controller.json into ctl. */
static int load_settings(struct hc_controller *ctl, struct hc_error *err)
{
    char path[1100];
    path_in(path, sizeof(path), ctl->data_dir, "controller.json");
    char *text = NULL;
    size_t len = 0;
    if (hc_file_read(path, &text, &len, err) < 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "data dir '%s' is not initialised",
                     ctl->data_dir);
        return hc_error_hint(err, "run 'hcctld init --data-dir %s' first", ctl->data_dir);
    }
    json_t *doc = hc_json_parse_object(text, len, err);
    free(text);
    if (!doc)
        return hc_error_prefix(err, "reading '%s'", path);
    const char *listen = hc_json_str(doc, "listen", HC_INIT_DEFAULT_LISTEN);
    const char *advertise = hc_json_str(doc, "advertise", NULL);
    snprintf(ctl->ha_etcd, sizeof(ctl->ha_etcd), "%s", hc_json_str(doc, "ha_etcd", ""));
    snprintf(ctl->cluster_id, sizeof(ctl->cluster_id), "%s", hc_json_str(doc, "cluster_id", ""));
    int rc = hc_split_host_port(listen, ctl->listen_host, sizeof(ctl->listen_host),
                                &ctl->listen_port, err);
    if (rc == 0 && advertise)
        rc = hc_controller_parse_advertise(advertise, ctl->advertise_host,
                                           sizeof(ctl->advertise_host), &ctl->advertise_port, err);
    json_decref(doc);
    if (rc < 0)
        return hc_error_prefix(err, "reading '%s'", path);
    if (!ctl->cluster_id[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "'%s' has no cluster_id", path);
    return 0;
}

int hc_controller_load(struct hc_controller *ctl, const char *data_dir, struct hc_error *err)
{
    hc_controller_paths(ctl, data_dir);
    ctl->poll_interval_ms = HC_CONTROLLER_DEFAULT_POLL_MS;
    ctl->agent_timeout_ms = HC_CONTROLLER_DEFAULT_POLL_MS;
    ctl->workers = HC_CONTROLLER_DEFAULT_WORKERS;
    return load_settings(ctl, err);
}
