/*
 * `hcagent join`: enrollment with the controller (docs/architecture.md "Enrollment").
 *
 * 1. GET /v1/ca without verification, then pin it: the SHA-256 of the CA certificate must equal
 *    the fingerprint carried by the join token. Until that check passes nothing the controller
 *    said is trusted and the token is not sent.
 * 2. With that CA as the only trust anchor (and host verification on), POST /v1/enroll with the
 *    token and a CSR for a key generated here (the key never leaves the node).
 * 3. Check the returned certificate (signed by the pinned CA, matches our key) and only then
 *    write the data directory; agent.json goes last so that its presence means "enrolled".
 */
#include "agents/hcagent/agent.h"
#include "agents/hcagent/fence.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/hcagent/privilege.h"
#include "agents/hcagent/software.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/token.h"
#include "common/util.h"

#define JOIN_TIMEOUT_MS 15000

/* Splits an https:// controller URL into host (IPv6 without brackets) and port. */
static int controller_host_port(const char *url, char *host, size_t hlen, char *port, size_t plen,
                                struct hc_error *err)
{
    int rc = -1;
    char *scheme = NULL, *h = NULL, *p = NULL;
    CURLU *u = curl_url();
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid controller URL '%s'", url);
        hc_error_hint(err, "use https://HOST:PORT, e.g. https://10.0.0.1:7443");
        goto cleanup;
    }
    if (strcmp(scheme, "https") != 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "controller URL '%s' must use https", url);
        hc_error_hint(err, "the join token may only travel over TLS: use https://HOST:PORT");
        goto cleanup;
    }
    size_t n = strlen(h);
    const char *start = h;
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        start = h + 1;
        n -= 2;
    }
    snprintf(host, hlen, "%.*s", (int)n, start);
    snprintf(port, plen, "%s", p);
    rc = 0;
cleanup:
    curl_free(scheme);
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
    return rc;
}

/* The local address the kernel would use as source toward host:port: connecting a UDP socket
 * sends nothing but runs the route lookup, and getsockname reports the chosen address. */
static int source_address(const char *host, const char *port, int family, char *out, size_t len,
                          struct hc_error *err)
{
    struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_DGRAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0)
        return hc_error_set(err, HC_E(UNREACHABLE), "cannot resolve controller host '%s': %s", host,
                            gai_strerror(gai));
    int rc = -1, fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        hc_error_set(err, HC_E(UNREACHABLE), "no route to controller host '%s': %s", host,
                     strerror(errno));
        goto cleanup;
    }
    const void *addr = ss.ss_family == AF_INET6
                           ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                           : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    if (!inet_ntop(ss.ss_family, addr, out, (socklen_t)len)) {
        hc_error_set(err, HC_E(INTERNAL), "cannot format local address: %s", strerror(errno));
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return rc;
}

int hc_join_agent_url(const char *controller, const char *listen, char *out, size_t len,
                      struct hc_error *err)
{
    char host[256], ip[INET6_ADDRSTRLEN], chost[256], cport[16];
    int port;
    if (hc_split_host_port(listen, host, sizeof(host), &port, err) < 0)
        return hc_error_prefix(err, "invalid listen address");
    if (port == 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "listen address '%s' needs a fixed port",
                            listen);
    const char *adv = host;
    int v4_any = strcmp(host, "0.0.0.0") == 0, v6_any = strcmp(host, "::") == 0;
    if (v4_any || v6_any) {
        if (controller_host_port(controller, chost, sizeof(chost), cport, sizeof(cport), err) < 0 ||
            source_address(chost, cport, v4_any ? AF_INET : AF_UNSPEC, ip, sizeof(ip), err) < 0)
            return -1;
        adv = ip;
    }
    const char *lb = strchr(adv, ':') ? "[" : "", *rb = strchr(adv, ':') ? "]" : "";
    if ((size_t)snprintf(out, len, "https://%s%s%s:%d", lb, adv, rb, port) >= len)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "agent URL too long");
    return 0;
}

int hc_join_pin_ca(const char *controller, const char *ca_pem, const char *pinned_fp,
                   struct hc_error *err)
{
    char fp[65], pinned[65];
    X509 *ca = hc_pki_cert_from_pem(ca_pem, err);
    if (!ca)
        return hc_error_prefix(err, "controller at %s sent an unreadable CA", controller);
    hc_pki_fingerprint(ca, fp);
    X509_free(ca);
    /* Fingerprints are hex; accept an upper-case copy of the token's without caring. */
    size_t i;
    for (i = 0; pinned_fp[i] && i < sizeof(pinned) - 1; i++)
        pinned[i] = (char)tolower((unsigned char)pinned_fp[i]);
    pinned[i] = '\0';
    if (!hc_ct_equal(fp, pinned)) {
        hc_error_set(err, HC_E(TLS),
                     "controller at %s presented CA sha256:%s but the join token pins sha256:%s",
                     controller, fp, pinned);
        return hc_error_hint(err, "check --controller, or ask the controller's admin for a new "
                                  "token ('hcctl cluster join-token'); a join never trusts an "
                                  "unverified controller");
    }
    return 0;
}

/* Turns a non-success response into err: the controller's own error when it sent one. */
static int response_error(const struct hc_http_response *resp, const char *what,
                          struct hc_error *err)
{
    if (hc_error_from_json(err, resp->body, (int)resp->status) < 0)
        hc_error_set_wire(err, (int)resp->status, HC_ERR_INTERNAL, "unexpected HTTP status %ld",
                          resp->status);
    return hc_error_prefix(err, "%s", what);
}

/* GET /v1/ca without verifying the peer; the caller pins the result. *ca_pem is malloc'd. */
static int fetch_ca(const char *controller, char **ca_pem, struct hc_error *err)
{
    int rc = -1;
    char url[600];
    struct hc_http_response resp = {0};
    struct hc_tls_client_config tls = {.insecure = 1};
    struct hc_http_client *client = hc_http_client_new(&tls, err);
    snprintf(url, sizeof(url), "%s/v1/ca", controller);
    if (!client ||
        hc_http_request(client, "GET", url, NULL, NULL, JOIN_TIMEOUT_MS, &resp, err) < 0) {
        hc_error_prefix(err, "cannot fetch the CA from %s", controller);
        goto cleanup;
    }
    if (resp.status != 200) {
        response_error(&resp, "cannot fetch the CA", err);
        goto cleanup;
    }
    const char *pem = hc_json_req_str(resp.body, "ca_pem", err);
    if (!pem) {
        hc_error_prefix(err, "controller at %s answered GET /v1/ca without a CA", controller);
        goto cleanup;
    }
    *ca_pem = strdup(pem);
    rc = *ca_pem ? 0 : hc_error_set(err, HC_E(INTERNAL), "out of memory");
cleanup:
    hc_http_response_clear(&resp);
    hc_http_client_free(client);
    return rc;
}

/* Everything a join carries between its steps. */
struct join {
    const struct hc_join_options *opt;
    struct hc_token token;
    struct hc_agent_config cfg;
    char hostname[256];
    char *ca_pem;
    EVP_PKEY *key;
    X509 *cert;
    X509 *ca;
    json_t *trusted_keys; /* bundle signing keys the controller trusts (enrollment answer) */
};

/* POST /v1/enroll with the pinned CA as the only trust anchor. On 201 keeps the body. */
static int enroll(struct join *j, json_t **reply, struct hc_error *err)
{
    int rc = -1;
    char url[600];
    struct hc_http_response resp = {0};
    char host[256];
    int port;
    /* The controller issues the certificate for the address the request comes from (unless the
     * token names one), so connect from the address the agent will listen on. */
    if (hc_split_host_port(j->cfg.agent_url + strlen("https://"), host, sizeof(host), &port, err) <
        0)
        return hc_error_prefix(err, "agent URL '%s'", j->cfg.agent_url);
    struct hc_tls_client_config tls = {.ca_pem = j->ca_pem, .source_address = host};
    struct hc_http_client *client = NULL;
    json_t *body = NULL;
    X509_REQ *csr = hc_pki_csr_new(j->key, j->cfg.name, err);
    char *csr_pem = csr ? hc_pki_csr_to_pem(csr) : NULL;
    if (!csr_pem)
        goto cleanup;
    body = json_pack("{s:s, s:s, s:s, s:s, s:s}", "token", j->opt->token, "csr_pem", csr_pem,
                     "name", j->cfg.name, "agent_url", j->cfg.agent_url, "hostname", j->hostname);
    client = hc_http_client_new(&tls, err);
    snprintf(url, sizeof(url), "%s/v1/enroll", j->cfg.controller);
    if (!client ||
        hc_http_request(client, "POST", url, NULL, body, JOIN_TIMEOUT_MS, &resp, err) < 0) {
        hc_error_prefix(err, "cannot enroll with %s", j->cfg.controller);
        goto cleanup;
    }
    if (resp.status != 201) {
        response_error(&resp, "controller refused the join", err);
        goto cleanup;
    }
    *reply = json_incref(resp.body);
    rc = 0;
cleanup:
    hc_http_response_clear(&resp);
    hc_http_client_free(client);
    json_decref(body);
    free(csr_pem);
    X509_REQ_free(csr);
    return rc;
}

/* The enrollment answer must hold a certificate for our key, signed by the pinned CA. */
static int check_enrollment(struct join *j, const json_t *reply, struct hc_error *err)
{
    const char *cert_pem = hc_json_req_str(reply, "cert_pem", err);
    const char *cn = hc_json_str(reply, "controller_client_cn", HC_CONTROLLER_CLIENT_CN);
    if (!cert_pem || !(j->cert = hc_pki_cert_from_pem(cert_pem, err)))
        return hc_error_prefix(err, "controller's enrollment answer");
    if (hc_pki_verify(j->ca, j->cert, err) < 0)
        return hc_error_prefix(err, "certificate from the controller is not signed by the "
                                    "pinned CA");
    if (X509_check_private_key(j->cert, j->key) != 1)
        return hc_error_set(err, HC_E(TLS),
                            "certificate from the controller does not match this agent's key");
    if (strcmp(cn, HC_CONTROLLER_CLIENT_CN) != 0)
        HC_WARN("controller announces client CN '%s', this agent accepts only '%s'", cn,
                HC_CONTROLLER_CLIENT_CN);
    const char *pin = hc_json_str(reply, "controller_pin", "");
    if (strncmp(pin, "sha256//", 8) != 0 || strlen(pin) >= sizeof(j->cfg.controller_pin))
        return hc_error_set(err, HC_E(TLS),
                            "controller's enrollment answer has no valid "
                            "controller_pin");
    snprintf(j->cfg.controller_pin, sizeof(j->cfg.controller_pin), "%s", pin);
    const char *client_pin = hc_json_str(reply, "controller_client_pin", "");
    if (strncmp(client_pin, "sha256//", 8) != 0 ||
        strlen(client_pin) >= sizeof(j->cfg.controller_client_pin))
        return hc_error_set(err, HC_E(TLS),
                            "controller's enrollment answer has no valid "
                            "controller_client_pin");
    snprintf(j->cfg.controller_client_pin, sizeof(j->cfg.controller_client_pin), "%s", client_pin);
    const json_t *node = json_object_get(reply, "node");
    HC_INFO("enrolled as node '%s' (certificate serial %s)", j->cfg.name,
            hc_json_str(node, "cert_serial", "?"));
    return 0;
}

/* Removes what write_files may have written; best effort. */
static void remove_files(const char *dir)
{
    static const char *const names[] = {HC_AGENT_FILE_CONFIG, HC_AGENT_FILE_CERT, HC_AGENT_FILE_KEY,
                                        HC_AGENT_FILE_CA};
    for (size_t i = 0; i < HC_ARRAY_LEN(names); i++) {
        char *p = hc_path_join(dir, names[i]);
        if (p)
            unlink(p);
        free(p);
    }
}

static int write_files(const struct join *j, struct hc_error *err)
{
    const char *dir = j->opt->data_dir;
    char *ca = hc_path_join(dir, HC_AGENT_FILE_CA), *key = hc_path_join(dir, HC_AGENT_FILE_KEY);
    char *cert = hc_path_join(dir, HC_AGENT_FILE_CERT);
    int rc = -1;
    if (!ca || !key || !cert)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    else if (hc_pki_cert_save(j->ca, ca, err) == 0 && hc_pki_key_save(j->key, key, err) == 0 &&
             hc_pki_cert_save(j->cert, cert, err) == 0 &&
             hc_agent_software_keys_save(dir, j->trusted_keys, err) == 0 &&
             hc_agent_config_save(dir, &j->cfg, err) == 0)
        rc = 0;
    if (rc < 0) {
        remove_files(dir);
        hc_agent_software_keys_remove(dir);
    }
    free(ca);
    free(key);
    free(cert);
    return rc;
}

/* Creates the data directory (0700) or checks that an existing one is usable and not already
 * enrolled. *created tells the caller to remove it again if the join fails. */
static int prepare_data_dir(const char *dir, int *created, struct hc_error *err)
{
    struct stat st;
    *created = 0;
    if (stat(dir, &st) < 0) {
        if (errno != ENOENT)
            return hc_error_set(err, HC_E(IO), "cannot use data directory '%s': %s", dir,
                                strerror(errno));
        if (hc_mkdir_p(dir, 0700, err) < 0)
            return -1;
        *created = 1;
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "data directory '%s' is not a directory",
                            dir);
    char *cfg = hc_path_join(dir, HC_AGENT_FILE_CONFIG);
    int enrolled = cfg && access(cfg, F_OK) == 0;
    free(cfg);
    if (enrolled) {
        hc_error_set(err, HC_E(CONFLICT),
                     "data directory '%s' already holds an enrolled "
                     "agent",
                     dir);
        return hc_error_hint(err,
                             "start it with 'hcagent run --data-dir %s', or use an empty "
                             "directory to join again",
                             dir);
    }
    if (access(dir, W_OK) < 0)
        return hc_error_set(err, HC_E(IO), "cannot write data directory '%s': %s", dir,
                            strerror(errno));
    return 0;
}

/* A new membership starts with no service data: what an earlier one left in DIR/service-data
 * (a node removed while its agent did not answer, so nobody set it aside) moves to
 * DIR/kept/earlier.TIME, never served again and never deleted here. */
static int set_aside_old_data(const char *dir, struct hc_error *err)
{
    char *data = hc_path_join(dir, HC_AGENT_DIR_SERVICE_DATA);
    char *kept = hc_path_join(dir, HC_AGENT_DIR_KEPT);
    char to[1400];
    int rc = -1;
    if (!data || !kept) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    snprintf(to, sizeof(to), "%s/earlier.%lld", kept, (long long)hc_now_ms());
    rc = hc_privilege_service_keep(data, kept, to, err);
    if (rc < 0)
        hc_error_hint(err, "move or delete '%s' by hand, then join again", data);
    else if (rc > 0)
        HC_INFO("the service data of an earlier membership is kept in %s, unused", to);
cleanup:
    free(data);
    free(kept);
    return rc < 0 ? -1 : 0;
}

/* Fills the configuration (name, controller without trailing '/', listen, agent_url,
 * storage_interface). */
static int join_config(struct join *j, struct hc_error *err)
{
    const struct hc_join_options *opt = j->opt;
    if (gethostname(j->hostname, sizeof(j->hostname) - 1) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot read hostname: %s", strerror(errno));
    /* Host names are case-insensitive; node names are lowercase. */
    for (char *c = j->hostname; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    const char *name = opt->name ? opt->name : j->hostname;
    if (hc_agent_name_check(name, err) < 0)
        return opt->name ? -1
                         : hc_error_hint(err, "the hostname is not a valid node name: "
                                              "pass --name NAME");
    snprintf(j->cfg.name, sizeof(j->cfg.name), "%s", name);
    size_t n = strlen(opt->controller);
    while (n > 0 && opt->controller[n - 1] == '/')
        n--;
    if (n >= sizeof(j->cfg.controller))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "controller URL too long");
    snprintf(j->cfg.controller, sizeof(j->cfg.controller), "%.*s", (int)n, opt->controller);
    snprintf(j->cfg.listen, sizeof(j->cfg.listen), "%s",
             opt->listen ? opt->listen : HC_AGENT_DEFAULT_LISTEN);
    if (opt->storage_interface) {
        if (hc_agent_iface_check(opt->storage_interface, err) < 0)
            return -1;
        snprintf(j->cfg.storage_interface, sizeof(j->cfg.storage_interface), "%s",
                 opt->storage_interface);
    }
    char host[256], port[16];
    if (controller_host_port(j->cfg.controller, host, sizeof(host), port, sizeof(port), err) < 0)
        return -1;
    return hc_join_agent_url(j->cfg.controller, j->cfg.listen, j->cfg.agent_url,
                             sizeof(j->cfg.agent_url), err);
}

/* The network part: pin the CA, enroll, check the answer. */
static int join_controller(struct join *j, struct hc_error *err)
{
    json_t *reply = NULL;
    HC_INFO("fetching the cluster CA from %s", j->cfg.controller);
    if (fetch_ca(j->cfg.controller, &j->ca_pem, err) < 0 ||
        hc_join_pin_ca(j->cfg.controller, j->ca_pem, j->token.ca_fingerprint, err) < 0 ||
        !(j->ca = hc_pki_cert_from_pem(j->ca_pem, err)))
        return -1;
    HC_INFO("controller CA matches the join token (sha256:%s)", j->token.ca_fingerprint);
    if (!(j->key = hc_pki_key_new(err)))
        return -1;
    HC_INFO("enrolling as '%s', agent URL %s", j->cfg.name, j->cfg.agent_url);
    int rc = enroll(j, &reply, err);
    if (rc == 0)
        rc = check_enrollment(j, reply, err);
    if (rc == 0)
        j->trusted_keys = json_incref(json_object_get(reply, "trusted_keys"));
    json_decref(reply);
    return rc;
}

int hc_join(const struct hc_join_options *opt, struct hc_error *err)
{
    struct join j;
    memset(&j, 0, sizeof(j));
    j.opt = opt;
    int created = 0, rc = -1;
    if (hc_token_parse(opt->token, HC_TOKEN_JOIN_PREFIX, &j.token, err) < 0) {
        hc_error_prefix(err, "invalid join token");
        hc_error_hint(err, "get one with 'hcctl cluster join-token'");
        goto cleanup;
    }
    if (join_config(&j, err) < 0 || prepare_data_dir(opt->data_dir, &created, err) < 0)
        goto cleanup;
    /* An earlier membership's controller term means nothing to this cluster's controller,
     * whose terms start anew: it would refuse it. */
    if (join_controller(&j, err) < 0 || set_aside_old_data(opt->data_dir, err) < 0 ||
        hc_agent_fence_forget(opt->data_dir, err) < 0 || write_files(&j, err) < 0)
        goto cleanup;
    HC_INFO("wrote credentials to %s", opt->data_dir);
    rc = 0;
cleanup:
    if (rc < 0 && created)
        rmdir(opt->data_dir);
    free(j.ca_pem);
    EVP_PKEY_free(j.key);
    X509_free(j.cert);
    X509_free(j.ca);
    json_decref(j.trusted_keys);
    return rc;
}
