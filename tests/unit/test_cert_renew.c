/* Unit tests of the controller's side of agent certificate renewal
 * (controller/remote/cert_renew.c) against a stand-in agent that may be hostile: a good
 * renewal makes the new certificate the node's with the name and address the controller
 * records (not what the CSR asks), revokes the old serial and records cert.renewed; a garbage
 * CSR, no CSR, or a CSR without a usable key change nothing; an agent that refuses the install
 * leaves the old certificate and the issued serial revoked; an unknown node is 404; an agent
 * that answers the install but keeps serving its old certificate is refused from then on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/x509v3.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/cert_renew.h"
#include "controller/state/nodes.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

enum mode { GOOD, GARBAGE_CSR, NO_CSR, REFUSE_INSTALL };
static _Atomic int mode;

static void standin_csr(struct hc_request *req, void *arg)
{
    (void)arg;
    struct hc_error err = {0};
    if (mode == GARBAGE_CSR) {
        hc_reply_json(req, 200, json_pack("{s:s}", "csr_pem", "-----BEGIN CERTIFICATE REQUEST"));
        return;
    }
    if (mode == NO_CSR) {
        hc_reply_json(req, 200, json_pack("{s:i}", "csr_pem", 7));
        return;
    }
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509_REQ *csr = hc_pki_csr_new(key, "evil.example", &err); /* asks for another name */
    char *pem = hc_pki_csr_to_pem(csr);
    hc_reply_json(req, 200, json_pack("{s:s}", "csr_pem", pem));
    free(pem);
    X509_REQ_free(csr);
    EVP_PKEY_free(key);
}

static void standin_install(struct hc_request *req, void *arg)
{
    (void)arg;
    if (mode == REFUSE_INSTALL) {
        hc_reply_json(req, 400,
                      json_pack("{s:{s:s, s:s}}", "error", "code", "invalid_argument", "message",
                                "not for the key of the last request"));
        return;
    }
    hc_reply_json(req, 200, json_pack("{s:s}", "cert_serial", "x"));
}

static const struct hc_test_route routes[] = {
    {"POST", "/v1/cert/csr", standin_csr},
    {"POST", "/v1/cert/install", standin_install},
};

struct fixture {
    char dir[512], agent_cert[600], agent_key[600];
    struct hc_controller ctl;
    struct hc_db *db;
    struct hc_test_standin srv;
    struct hc_http_client *client;
    char serial[64];
};

static int setup(void **state)
{
    static struct fixture f;
    struct hc_error err = {0};
    char url[128], pin[HC_PKI_PIN_LEN], serial[41];
    memset(&f, 0, sizeof(f));
    hc_test_ctl_dir(&f.ctl, f.dir, sizeof(f.dir), "test_cert_renew");
    snprintf(f.agent_cert, sizeof(f.agent_cert), "%s/agent.pem", f.dir);
    snprintf(f.agent_key, sizeof(f.agent_key), "%s/agent.key", f.dir);
    f.ctl.agent_timeout_ms = 3000;
    f.ctl.agent_cert_lifetime_s = 3600;
    hc_test_cluster_pki(&f.ctl, f.agent_cert, f.agent_key);
    f.db = hc_test_ctl_db_crl(&f.ctl);
    hc_test_standin_start(&f.srv, f.agent_cert, f.agent_key, f.ctl.ca_file, routes,
                          HC_ARRAY_LEN(routes), NULL);
    char *pem = hc_test_file_text(f.agent_cert);
    X509 *cert = hc_pki_cert_from_pem(pem, &err);
    assert_non_null(cert);
    hc_pki_cert_pin(cert, pin);
    hc_pki_cert_serial(cert, serial);
    snprintf(f.serial, sizeof(f.serial), "%s", serial);
    X509_free(cert);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", f.srv.port);
    struct hc_node_new n = {.cluster_id = "c-test",
                            .name = "n1",
                            .address = "127.0.0.1",
                            .agent_url = url,
                            .hostname = "h1",
                            .cert_serial = serial,
                            .cert_pem = pem,
                            .cert_pin = pin,
                            .cert_not_after = hc_now_ms() + 3600000,
                            .cert_renew_at = hc_now_ms() + 2400000,
                            .cert_warn_at = hc_now_ms() + 2700000};
    assert_int_equal(hc_node_insert(f.db, &n, &err), 0);
    free(pem);
    f.client = hc_agent_client_new(&f.ctl, f.db, &err);
    assert_non_null(f.client);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_http_client_free(f->client);
    hc_test_standin_stop(&f->srv);
    hc_db_close(f->db);
    hc_test_rmtree(f->dir);
    return 0;
}

static struct hc_node_row row_of(struct fixture *f)
{
    struct hc_node_row row;
    struct hc_error err = {0};
    assert_int_equal(hc_node_row_get(f->db, "n1", &row, &err), 1);
    return row;
}

static int64_t count(struct fixture *f, const char *sql, const char *arg)
{
    return hc_test_db_count(f->db, sql, arg);
}

static void test_good_renewal(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    mode = GOOD;
    assert_int_equal(hc_cert_renew_node(&f->ctl, f->db, f->client, "n1", 0, &err), 0);
    struct hc_node_row row = row_of(f);
    assert_string_not_equal(row.cert_serial, f->serial);
    assert_null(row.cert_next_serial);
    X509 *x = hc_pki_cert_from_pem(row.cert_pem, &err);
    char cn[64];
    assert_int_equal(hc_pki_cert_cn(x, cn, sizeof(cn)), 0);
    assert_string_equal(cn, "n1"); /* the recorded name, not the CSR's */
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_host(x, "evil.example", 0, 0, NULL), 0);
    int64_t nb, na;
    assert_int_equal(hc_pki_cert_validity(x, &nb, &na, &err), 0);
    assert_true(na - hc_now_ms() <= 3600 * 1000 && na - hc_now_ms() > 3500 * 1000);
    assert_int_equal(row.cert_not_after, na);
    assert_int_equal(row.cert_renew_at, hc_pki_renew_at_ms(nb, na));
    X509_free(x);
    hc_node_row_clear(&row);
    assert_int_equal(
        count(f, "SELECT COUNT(*) AS n FROM revoked_certs WHERE serial = ?", f->serial), 1);
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM events WHERE type = ?", "cert.renewed"),
                     1);
    /* This stand-in answered the install but kept serving the old certificate (as a lying or
     * broken agent would): the controller no longer talks to it, now or on a later try (its pin
     * names the new key, and the old serial is revoked). */
    struct hc_http_response resp = {0};
    for (int i = 0; i < 2; i++) {
        char url[128];
        snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->srv.port);
        assert_int_equal(
            hc_agent_call(f->client, url, "POST", "/v1/cert/csr", NULL, 3000, &resp, &err), -1);
        assert_string_equal(err.code, HC_ERR_TLS);
    }
}

/* A hostile CSR: nothing issued, nothing recorded, the node keeps its certificate. */
static void test_bad_csr_changes_nothing(void **state)
{
    struct fixture *f = *state;
    const int modes[] = {GARBAGE_CSR, NO_CSR};
    for (size_t i = 0; i < HC_ARRAY_LEN(modes); i++) {
        struct hc_error err = {0};
        mode = modes[i];
        assert_int_equal(hc_cert_renew_node(&f->ctl, f->db, f->client, "n1", 0, &err), -1);
        assert_non_null(strstr(err.message, "cannot renew the certificate of node 'n1'"));
        struct hc_node_row row = row_of(f);
        assert_string_equal(row.cert_serial, f->serial);
        assert_null(row.cert_next_serial);
        hc_node_row_clear(&row);
    }
    assert_int_equal(count(f, "SELECT COUNT(*) AS n FROM revoked_certs WHERE serial != ?", ""), 0);
}

/* The agent refuses the install: it serves the old certificate; the issued one is revoked. */
static void test_refused_install(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    mode = REFUSE_INSTALL;
    assert_int_equal(hc_cert_renew_node(&f->ctl, f->db, f->client, "n1", 0, &err), -1);
    struct hc_node_row row = row_of(f);
    assert_string_equal(row.cert_serial, f->serial);
    assert_null(row.cert_next_serial);
    hc_node_row_clear(&row);
    assert_int_equal(
        count(f, "SELECT COUNT(*) AS n FROM revoked_certs WHERE serial != ?", f->serial), 1);
}

static void test_unknown_node(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    assert_int_equal(hc_cert_renew_node(&f->ctl, f->db, f->client, "nope", 0, &err), -1);
    assert_int_equal(err.status, 404);
}

int main(void)
{
    /* As in hcctld and hcagent: a peer that closes first must not kill the process (the client
     * closes a connection whose peer is revoked while the stand-in may still write to it). */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_renewal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_csr_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_install, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_node, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
