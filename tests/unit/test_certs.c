/* Unit tests of the cluster's certificates (controller/state/certs.c, docs/certificates.md): the
 * thresholds for long and short lifetimes; the controller's own certificates renewed when due
 * (same key, names and usages, a new serial, signed by the CA) and not before; reissued at once
 * when another CA signs now (a rotation); the summary cluster status shows; the expiry warnings
 * given once per certificate and level. A real data directory from hcctld init. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/init.h"
#include "controller/state/certs.h"
#include "db/db.h"
#include "tests/unit/support/support.h"
#include "tests/unit/testdir.h"

#define DAY_MS (86400LL * 1000)

struct fixture {
    char *tmp;
    char data_dir[1100];
    struct hc_controller ctl;
    struct hc_db *db;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    f->tmp = hc_test_mkdtemp("certs");
    assert_non_null(f->tmp);
    snprintf(f->data_dir, sizeof(f->data_dir), "%s/data", f->tmp);
    char cli[1200];
    snprintf(cli, sizeof(cli), "%s/cli.json", f->tmp);
    struct hc_init_options o = {.data_dir = f->data_dir, .cli_config = cli};
    struct hc_init_result res;
    struct hc_error err = {0};
    if (hc_init_run(&o, &res, &err) < 0 || hc_controller_load(&f->ctl, f->data_dir, &err) < 0 ||
        !(f->db = hc_db_open(f->ctl.db_path, &err)))
        fail_msg("init: %s", err.message);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_db_close(f->db);
    hc_test_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static X509 *load(const char *path)
{
    struct hc_error err = {0};
    X509 *x = hc_pki_cert_load(path, &err);
    if (!x)
        fail_msg("%s", err.message);
    return x;
}

static int64_t events(struct hc_db *db, const char *type)
{
    struct hc_error err = {0};
    json_t *rows =
        hc_db_query_json(db, &err, "SELECT COUNT(*) AS n FROM events WHERE type = ?", "s", type);
    assert_non_null(rows);
    int64_t n = hc_json_int(json_array_get(rows, 0), "n", -1);
    json_decref(rows);
    return n;
}

static void test_thresholds(void **state)
{
    (void)state;
    int64_t nb = 1000LL * DAY_MS, year = nb + HC_PKI_BACKDATE_S * 1000LL + 365 * DAY_MS;
    /* a year: renewed with a third left, a warning 30 days before, an error 7 days before */
    assert_int_equal(hc_pki_renew_at_ms(nb, year), year - 365 * DAY_MS / 3);
    assert_int_equal(hc_pki_warn_at_ms(nb, year), year - 30 * DAY_MS);
    assert_int_equal(hc_pki_error_at_ms(nb, year), year - 7 * DAY_MS);
    /* 15 s: a quarter and a twelfth, so that a renewal on time (5 s before) never warns */
    int64_t shortest = nb + HC_PKI_BACKDATE_S * 1000LL + 15000;
    assert_int_equal(hc_pki_renew_at_ms(nb, shortest), shortest - 5000);
    assert_int_equal(hc_pki_warn_at_ms(nb, shortest), shortest - 3750);
    assert_int_equal(hc_pki_error_at_ms(nb, shortest), shortest - 1250);
    assert_true(hc_pki_renew_at_ms(nb, shortest) < hc_pki_warn_at_ms(nb, shortest));
}

static void test_own_not_due(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int server = -1;
    char before[41], after[41];
    X509 *x = load(f->ctl.server_cert);
    hc_pki_cert_serial(x, before);
    X509_free(x);
    assert_int_equal(hc_certs_renew_own(&f->ctl, f->db, hc_now_ms(), &server, &err), 0);
    assert_int_equal(server, 0);
    x = load(f->ctl.server_cert);
    hc_pki_cert_serial(x, after);
    X509_free(x);
    assert_string_equal(before, after);
    assert_int_equal(events(f->db, "cert.renewed"), 0);
}

static void test_own_due(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int server = 0;
    X509 *old = load(f->ctl.server_cert), *old_client = load(f->ctl.client_cert);
    char old_pin[HC_PKI_PIN_LEN], old_client_pin[HC_PKI_PIN_LEN], pin[HC_PKI_PIN_LEN];
    char old_serial[41], serial[41], cn[256];
    hc_pki_cert_pin(old, old_pin);
    hc_pki_cert_pin(old_client, old_client_pin);
    hc_pki_cert_serial(old, old_serial);
    /* past two thirds of ten years */
    assert_int_equal(hc_certs_renew_own(&f->ctl, f->db, hc_now_ms() + 2500 * DAY_MS, &server, &err),
                     2);
    assert_int_equal(server, 1);
    X509 *x = load(f->ctl.server_cert), *ca = load(f->ctl.ca_file);
    hc_pki_cert_serial(x, serial);
    assert_string_not_equal(serial, old_serial);
    hc_pki_cert_pin(x, pin);
    assert_string_equal(pin, old_pin); /* the same key: pins stay true */
    assert_int_equal(hc_pki_cert_cn(x, cn, sizeof(cn)), 0);
    assert_string_equal(cn, "hcctld");
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1); /* the names kept */
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    assert_int_equal(hc_pki_verify(ca, x, &err), 0);
    int64_t nb, na;
    assert_int_equal(hc_pki_cert_validity(x, &nb, &na, &err), 0);
    assert_true(na - hc_now_ms() > 3600 * DAY_MS); /* the same ten years, from now */
    X509 *client = load(f->ctl.client_cert);
    hc_pki_cert_pin(client, pin);
    assert_string_equal(pin, old_client_pin);
    assert_true(X509_get_extended_key_usage(client) & XKU_SSL_CLIENT);
    assert_int_equal(events(f->db, "cert.renewed"), 2);
    X509_free(client);
    X509_free(x);
    X509_free(ca);
    X509_free(old);
    X509_free(old_client);
}

/* A certificate the CA in ca.pem did not sign is reissued at once, whatever its age. */
static void test_own_foreign_ca(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    int server = 0;
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509 *ca = hc_pki_ca_new(key, "another CA", 3650, &err);
    assert_non_null(ca);
    assert_int_equal(hc_pki_cert_save(ca, f->ctl.ca_file, &err), 0);
    assert_int_equal(hc_pki_key_save(key, f->ctl.ca_key_file, &err), 0);
    assert_int_equal(hc_certs_renew_own(&f->ctl, f->db, hc_now_ms(), &server, &err), 2);
    X509 *x = load(f->ctl.server_cert), *client = load(f->ctl.client_cert);
    assert_int_equal(hc_pki_verify(ca, x, &err), 0);
    assert_int_equal(hc_pki_verify(ca, client, &err), 0);
    assert_int_equal(hc_certs_renew_own(&f->ctl, f->db, hc_now_ms(), &server, &err), 0);
    X509_free(x);
    X509_free(client);
    X509_free(ca);
    EVP_PKEY_free(key);
}

static void test_summary(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    json_t *s = hc_certs_summary(&f->ctl, f->db, hc_now_ms(), &err);
    assert_non_null(s);
    assert_string_equal(hc_json_str(json_object_get(s, "ca"), "state", ""), "valid");
    assert_string_equal(hc_json_str(json_object_get(s, "server"), "state", ""), "valid");
    assert_string_equal(hc_json_str(json_object_get(s, "client"), "state", ""), "valid");
    assert_int_equal(hc_json_int(json_object_get(s, "agents"), "total", -1), 0);
    const json_t *e = json_object_get(s, "earliest");
    assert_true(json_is_object(e));
    assert_true(hc_json_int(e, "seconds_left", 0) > 3640 * 86400LL);
    assert_true(json_is_null(json_object_get(e, "node")));
    json_decref(s);
    /* 10 days before the end: critical? no, expiring (error comes at 7) */
    s = hc_certs_summary(&f->ctl, f->db, hc_now_ms() + 3640 * DAY_MS, &err);
    assert_string_equal(hc_json_str(json_object_get(s, "server"), "state", ""), "expiring");
    json_decref(s);
    /* an unreadable file is said, not fatal */
    hc_test_write_text(f->ctl.client_cert, "not a certificate", 0644);
    s = hc_certs_summary(&f->ctl, f->db, hc_now_ms(), &err);
    assert_non_null(s);
    assert_non_null(hc_json_str(json_object_get(s, "client"), "error", NULL));
    json_decref(s);
}

static void test_alerts_once_per_level(void **state)
{
    struct fixture *f = *state;
    int64_t now = hc_now_ms();
    hc_certs_alerts(&f->ctl, f->db, now);
    assert_int_equal(events(f->db, "cert.expiring"), 0);
    hc_certs_alerts(&f->ctl, f->db, now + 3630 * DAY_MS); /* within 30 days: warnings */
    assert_int_equal(events(f->db, "cert.expiring"), 3);
    hc_certs_alerts(&f->ctl, f->db, now + 3631 * DAY_MS);
    assert_int_equal(events(f->db, "cert.expiring"), 3);  /* once */
    hc_certs_alerts(&f->ctl, f->db, now + 3646 * DAY_MS); /* within 7 days: errors */
    assert_int_equal(events(f->db, "cert.expiring"), 6);
    hc_certs_alerts(&f->ctl, f->db, now + 3700 * DAY_MS); /* ended */
    assert_int_equal(events(f->db, "cert.expired"), 3);
    hc_certs_alerts(&f->ctl, f->db, now + 3701 * DAY_MS);
    assert_int_equal(events(f->db, "cert.expired"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thresholds),
        cmocka_unit_test_setup_teardown(test_own_not_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_foreign_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alerts_once_per_level, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
