/*
 * Unit-test support: the cluster's certificates as the tests need them
 * (tests/unit/support/support.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/support/support.h"

void hc_test_cert_write(X509 *ca, EVP_PKEY *ca_key, const struct hc_cert_spec *spec,
                        const char *cert_path, const char *key_path)
{
    struct hc_error err = {0};
    char serial[33];
    EVP_PKEY *key = hc_pki_key_new(&err);
    assert_non_null(key);
    X509 *cert = hc_pki_issue(ca, ca_key, key, spec, serial, &err);
    if (!cert)
        fail_msg("issue %s: %s", spec->cn, err.message);
    assert_int_equal(hc_pki_cert_save(cert, cert_path, &err), 0);
    assert_int_equal(hc_pki_key_save(key, key_path, &err), 0);
    X509_free(cert);
    EVP_PKEY_free(key);
}

void hc_test_cluster_pki(const struct hc_controller *ctl, const char *agent_cert,
                         const char *agent_key)
{
    struct hc_error err = {0};
    static const char *const sans[] = {"127.0.0.1", "localhost"};
    EVP_PKEY *ca_key = hc_pki_key_new(&err);
    assert_non_null(ca_key);
    X509 *ca = hc_pki_ca_new(ca_key, "test cluster ca", 1, &err);
    assert_non_null(ca);
    assert_int_equal(hc_pki_cert_save(ca, ctl->ca_file, &err), 0);
    assert_int_equal(hc_pki_key_save(ca_key, ctl->ca_key_file, &err), 0); /* signs crl.pem */
    if (agent_cert) {
        struct hc_cert_spec agent = {
            .cn = "n1", .sans = sans, .nsans = 2, .server_auth = 1, .days = 1};
        hc_test_cert_write(ca, ca_key, &agent, agent_cert, agent_key);
    }
    struct hc_cert_spec client = {.cn = HC_CONTROLLER_CLIENT_CN, .client_auth = 1, .days = 1};
    hc_test_cert_write(ca, ca_key, &client, ctl->client_cert, ctl->client_key);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
}

char *hc_test_file_text(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *text = calloc(1, 16384);
    if (!fp)
        fail_msg("cannot open %s", path);
    assert_non_null(text);
    size_t n = fread(text, 1, 16383, fp);
    fclose(fp);
    assert_true(n > 0 && n < 16383);
    return text;
}
