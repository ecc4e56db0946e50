/* Unit tests for common/pki.c: CA, issuing, CSRs, PEM files, fingerprints, verification and
 * revocation lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/pki.h"
#include "common/util.h"
#include "tests/unit/testdir.h"

struct fixture {
    char *dir;
    EVP_PKEY *ca_key;
    X509 *ca;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f || !(f->dir = hc_test_mkdtemp("test_pki")))
        return -1;
    struct hc_error err = {0};
    f->ca_key = hc_pki_key_new(&err);
    f->ca = f->ca_key ? hc_pki_ca_new(f->ca_key, "hcctl test ca", 30, &err) : NULL;
    if (!f->ca) {
        fprintf(stderr, "setup: %s\n", err.message);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    hc_test_rmtree(f->dir);
    free(f->dir);
    X509_free(f->ca);
    EVP_PKEY_free(f->ca_key);
    free(f);
    return 0;
}

static X509 *issue(struct fixture *f, EVP_PKEY *key, const struct hc_cert_spec *spec,
                   char serial[33])
{
    struct hc_error err = {0};
    X509 *x = hc_pki_issue(f->ca, f->ca_key, key, spec, serial, &err);
    if (!x)
        fail_msg("issue '%s': %s", spec->cn, err.message);
    return x;
}

/* 1 if the certificate's SANs contain the given DNS name (or IP, when ip_len > 0). */
static int has_san(X509 *x, int type, const void *value, size_t len)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int found = 0;
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
        GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);
        int t;
        ASN1_STRING *s = GENERAL_NAME_get0_value(gn, &t);
        if (t == type && (size_t)ASN1_STRING_length(s) == len &&
            memcmp(ASN1_STRING_get0_data(s), value, len) == 0)
            found = 1;
    }
    GENERAL_NAMES_free(names);
    return found;
}

static void test_ca_properties(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(X509_check_ca(f->ca), 1);
    uint32_t ku = X509_get_key_usage(f->ca);
    assert_true(ku & KU_KEY_CERT_SIGN);
    assert_true(ku & KU_CRL_SIGN);
    assert_non_null(X509_get0_subject_key_id(f->ca));
    int crit = -1;
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(f->ca, NID_basic_constraints, &crit, NULL);
    assert_non_null(bc);
    assert_true(bc->ca);
    assert_int_equal(crit, 1);
    BASIC_CONSTRAINTS_free(bc);
    assert_int_equal(X509_get_signature_nid(f->ca), NID_ecdsa_with_SHA256);
    char cn[64];
    assert_int_equal(hc_pki_cert_cn(f->ca, cn, sizeof(cn)), 0);
    assert_string_equal(cn, "hcctl test ca");
    struct hc_error err = {0};
    assert_int_equal(hc_pki_verify(f->ca, f->ca, &err), 0);
}

static void test_issue_server_cert(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    assert_non_null(key);
    const char *sans[] = {"127.0.0.1", "localhost", "::1"};
    struct hc_cert_spec spec = {
        .cn = "node-1", .sans = sans, .nsans = 3, .server_auth = 1, .days = 10};
    char serial[33] = "";
    X509 *x = issue(f, key, &spec, serial);

    assert_int_equal(hc_pki_verify(f->ca, x, &err), 0);
    char cn[64];
    assert_int_equal(hc_pki_cert_cn(x, cn, sizeof(cn)), 0);
    assert_string_equal(cn, "node-1");
    assert_int_equal(X509_check_ca(x), 0);
    assert_true(X509_get_key_usage(x) & KU_DIGITAL_SIGNATURE);
    assert_false(X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    assert_false(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT);
    assert_non_null(X509_get0_authority_key_id(x));
    assert_int_equal(
        ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x), X509_get0_subject_key_id(f->ca)), 0);
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), key), 1);

    unsigned char v4[4], v6[16];
    inet_pton(AF_INET, "127.0.0.1", v4);
    inet_pton(AF_INET6, "::1", v6);
    assert_true(has_san(x, GEN_IPADD, v4, 4));
    assert_true(has_san(x, GEN_IPADD, v6, 16));
    assert_true(has_san(x, GEN_DNS, "localhost", 9));
    assert_false(has_san(x, GEN_DNS, "127.0.0.1", 9)); /* the IP is not also a DNS name */
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);

    /* The returned serial is the certificate's: 32 lowercase hex digits of a positive number. */
    assert_int_equal(strlen(serial), 32);
    assert_int_equal(strspn(serial, "0123456789abcdef"), 32);
    BIGNUM *want = NULL, *have = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    assert_true(BN_hex2bn(&want, serial) > 0);
    assert_int_equal(BN_cmp(want, have), 0);
    assert_false(BN_is_negative(have));
    BN_free(want);
    BN_free(have);

    /* notBefore is backdated about five minutes; notAfter is days ahead. */
    time_t now = time(NULL);
    int day = 0, sec = 0;
    assert_int_equal(ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(x), NULL), 1);
    assert_int_equal(day, 0);
    assert_true(sec >= 295 && sec <= 330);
    assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &(time_t){now + 9 * 86400}), 1);
    assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &(time_t){now + 11 * 86400}), -1);

    char serial2[33];
    X509 *y = issue(f, key, &spec, serial2);
    assert_string_not_equal(serial, serial2);
    X509_free(y);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void test_verify_other_ca_refused(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    EVP_PKEY *other_key = hc_pki_key_new(&err);
    /* Same CN on purpose: only the signature tells the two CAs apart. */
    X509 *other = hc_pki_ca_new(other_key, "hcctl test ca", 30, &err);
    assert_non_null(other);
    EVP_PKEY *key = hc_pki_key_new(&err);
    const char *sans[] = {"10.1.2.3"};
    struct hc_cert_spec spec = {
        .cn = "node-2", .sans = sans, .nsans = 1, .server_auth = 1, .client_auth = 1, .days = 1};
    char serial[33];
    X509 *x = issue(f, key, &spec, serial);
    assert_int_equal(hc_pki_verify(f->ca, x, &err), 0);
    assert_int_equal(hc_pki_verify(other, x, &err), -1);
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, "node-2"));
    assert_int_equal(hc_pki_verify(f->ca, other, &err), -1);

    /* Issuing with a CA key that does not belong to the CA certificate is refused. */
    assert_null(hc_pki_issue(f->ca, other_key, key, &spec, serial, &err));
    X509_free(x);
    X509_free(other);
    EVP_PKEY_free(key);
    EVP_PKEY_free(other_key);
}

static void test_client_cert_eku(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    struct hc_cert_spec spec = {.cn = HC_CONTROLLER_CLIENT_CN, .client_auth = 1, .days = 5};
    char serial[33];
    X509 *x = issue(f, key, &spec, serial);
    char cn[64];
    assert_int_equal(hc_pki_cert_cn(x, cn, sizeof(cn)), 0);
    assert_string_equal(cn, "hcctld-client");
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_CLIENT);
    assert_false(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0), 1);
    assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 0);
    assert_int_equal(X509_get_ext_by_NID(x, NID_subject_alt_name, -1), -1); /* no SANs asked */
    assert_int_equal(hc_pki_cert_cn(x, cn, 5), -1); /* does not fit: refused, not truncated */
    X509_free(x);

    /* Bad specs are refused with 400. */
    const char *bad_sans[] = {"a b"};
    struct hc_cert_spec bad = {.cn = "n", .sans = bad_sans, .nsans = 1, .days = 1};
    assert_null(hc_pki_issue(f->ca, f->ca_key, key, &bad, serial, &err));
    assert_int_equal(err.status, 400);
    struct hc_cert_spec nocn = {.cn = "", .days = 1};
    assert_null(hc_pki_issue(f->ca, f->ca_key, key, &nocn, serial, &err));
    struct hc_cert_spec nodays = {.cn = "n", .days = 0};
    assert_null(hc_pki_issue(f->ca, f->ca_key, key, &nodays, serial, &err));
    EVP_PKEY_free(key);
}

static void test_csr_roundtrip_and_issue(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509_REQ *req = hc_pki_csr_new(key, "node-7", &err);
    assert_non_null(req);
    char *pem = hc_pki_csr_to_pem(req);
    assert_non_null(pem);
    assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE REQUEST-----"));
    X509_REQ *back = hc_pki_csr_from_pem(pem, &err);
    assert_non_null(back);
    EVP_PKEY *pub = hc_pki_csr_pubkey(back);
    assert_int_equal(EVP_PKEY_eq(pub, key), 1);
    char cn[64];
    X509_NAME_get_text_by_NID(X509_REQ_get_subject_name(back), NID_commonName, cn, sizeof(cn));
    assert_string_equal(cn, "node-7");

    /* The enrollment path: the certificate carries the CSR's key. */
    const char *sans[] = {"192.0.2.7"};
    struct hc_cert_spec spec = {
        .cn = "node-7", .sans = sans, .nsans = 1, .server_auth = 1, .days = 3};
    char serial[33];
    X509 *x = issue(f, pub, &spec, serial);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), key), 1);
    assert_int_equal(hc_pki_verify(f->ca, x, &err), 0);
    X509_free(x);
    EVP_PKEY_free(pub);
    X509_REQ_free(back);
    X509_REQ_free(req);
    free(pem);
    EVP_PKEY_free(key);
}

/* The CSR's DER re-wrapped as PEM by hand, optionally with its last byte (the end of the
 * signature value) flipped. */
static char *der_pem(X509_REQ *req, int flip)
{
    unsigned char *der = NULL;
    int len = i2d_X509_REQ(req, &der);
    assert_true(len > 0);
    if (flip)
        der[len - 1] ^= 0x01;
    BIO *bio = BIO_new(BIO_s_mem());
    assert_true(PEM_write_bio(bio, "CERTIFICATE REQUEST", "", der, len) > 0);
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    char *out = strndup(data, (size_t)n);
    BIO_free(bio);
    OPENSSL_free(der);
    return out;
}

static void test_csr_tampered_refused(void **state)
{
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    X509_REQ *req = hc_pki_csr_new(key, "node-8", &err);

    /* Control: the same hand-made encoding without the flip is accepted. */
    char *plain = der_pem(req, 0);
    X509_REQ *r = hc_pki_csr_from_pem(plain, &err);
    assert_non_null(r);
    X509_REQ_free(r);
    free(plain);

    char *pem = der_pem(req, 1);
    assert_null(hc_pki_csr_from_pem(pem, &err));
    assert_int_equal(err.status, 400);
    assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "signature"));
    free(pem);

    assert_null(hc_pki_csr_from_pem("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"
                                    "-----END CERTIFICATE REQUEST-----\n",
                                    &err));
    assert_int_equal(err.status, 400);
    assert_null(hc_pki_csr_from_pem("not a pem", &err));
    assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);

    /* A well-signed CSR with a key type we do not issue for (P-384) is refused too. */
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    X509_REQ *req384 = hc_pki_csr_new(p384, "node-9", &err);
    char *pem384 = hc_pki_csr_to_pem(req384);
    assert_null(hc_pki_csr_from_pem(pem384, &err));
    assert_int_equal(err.status, 400);
    free(pem384);
    X509_REQ_free(req384);
    EVP_PKEY_free(p384);
    X509_REQ_free(req);
    EVP_PKEY_free(key);
}

static void test_fingerprint(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char a[65], b[65], c[65];
    hc_pki_fingerprint(f->ca, a);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdef"), 64);

    /* Independent computation: SHA-256 over the DER encoding. */
    unsigned char md[32];
    unsigned int mdlen = 0;
    assert_int_equal(X509_digest(f->ca, EVP_sha256(), md, &mdlen), 1);
    char want[65];
    for (int i = 0; i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", md[i]);
    assert_string_equal(a, want);

    char *pem = hc_pki_cert_to_pem(f->ca);
    X509 *back = hc_pki_cert_from_pem(pem, &err);
    assert_non_null(back);
    hc_pki_fingerprint(back, b);
    assert_string_equal(a, b);

    EVP_PKEY *key = hc_pki_key_new(&err);
    struct hc_cert_spec spec = {.cn = "x", .server_auth = 1, .days = 1};
    char serial[33];
    X509 *x = issue(f, key, &spec, serial);
    hc_pki_fingerprint(x, c);
    assert_string_not_equal(a, c);

    assert_null(hc_pki_cert_from_pem("garbage", &err));
    assert_int_equal(err.status, 400);
    X509_free(x);
    EVP_PKEY_free(key);
    X509_free(back);
    free(pem);
}

static void test_files(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char *kpath = hc_path_join(f->dir, "ca.key");
    char *cpath = hc_path_join(f->dir, "ca.pem");
    mode_t old = umask(0); /* the modes must not depend on the umask */
    assert_int_equal(hc_pki_key_save(f->ca_key, kpath, &err), 0);
    assert_int_equal(hc_pki_cert_save(f->ca, cpath, &err), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(kpath, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(stat(cpath, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);

    EVP_PKEY *key = hc_pki_key_load(kpath, &err);
    assert_non_null(key);
    assert_int_equal(EVP_PKEY_eq(key, f->ca_key), 1);
    assert_int_equal(EVP_PKEY_get_bits(key), 256);
    X509 *ca = hc_pki_cert_load(cpath, &err);
    assert_non_null(ca);
    assert_int_equal(X509_cmp(ca, f->ca), 0);

    /* The reloaded pair still signs certificates that verify. */
    struct hc_cert_spec spec = {.cn = "reloaded", .client_auth = 1, .days = 1};
    char serial[33];
    X509 *x = hc_pki_issue(ca, key, key, &spec, serial, &err);
    assert_non_null(x);
    assert_int_equal(hc_pki_verify(f->ca, x, &err), 0);
    X509_free(x);

    char *missing = hc_path_join(f->dir, "missing.key");
    assert_null(hc_pki_key_load(missing, &err));
    assert_string_equal(err.code, HC_ERR_IO);
    assert_null(hc_pki_key_load(cpath, &err)); /* a certificate is not a key */
    assert_null(hc_pki_cert_load(missing, &err));
    free(missing);
    X509_free(ca);
    EVP_PKEY_free(key);
    free(kpath);
    free(cpath);
}

/* ---------------------------------------------------------------- revocation lists */

/* X509_verify_cert as a TLS client with a CRL file does it: the CA as trust anchor, the CRL in
 * the store, CRL_CHECK (the leaf only). Returns the verification error (X509_V_OK on success). */
static int verify_with_crl(X509 *ca, X509_CRL *crl, X509 *cert)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_non_null(store);
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    if (crl)
        assert_int_equal(X509_STORE_add_crl(store, crl), 1);
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, cert, NULL), 1);
    int ok = X509_verify_cert(ctx);
    int e = X509_STORE_CTX_get_error(ctx);
    assert_true((ok == 1) == (e == X509_V_OK));
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return e;
}

static X509 *agent_cert(struct fixture *f, const char *cn, char serial[33])
{
    struct hc_error err = {0};
    EVP_PKEY *key = hc_pki_key_new(&err);
    assert_non_null(key);
    const char *sans[] = {"127.0.0.1"};
    struct hc_cert_spec spec = {.cn = cn, .sans = sans, .nsans = 1, .server_auth = 1, .days = 1};
    X509 *x = issue(f, key, &spec, serial);
    EVP_PKEY_free(key);
    return x;
}

static void test_crl_revokes_one_of_two(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char good_serial[33], bad_serial[33];
    X509 *good = agent_cert(f, "node-good", good_serial);
    X509 *bad = agent_cert(f, "node-bad", bad_serial);
    int64_t revoked_at = (int64_t)time(NULL) - 3600;
    struct hc_pki_revoked list[] = {{bad_serial, revoked_at}};
    X509_CRL *made = hc_pki_crl_new(f->ca, f->ca_key, list, 1, &err);
    if (!made)
        fail_msg("crl: %s", err.message);
    char *path = hc_path_join(f->dir, "crl.pem");
    mode_t old = umask(0);
    assert_int_equal(hc_pki_crl_save(made, path, &err), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    X509_CRL *crl = hc_pki_crl_load(path, &err);
    assert_non_null(crl);
    X509_CRL_free(made);

    /* (a) the revoked certificate is refused as revoked, the other one verifies. */
    assert_int_equal(verify_with_crl(f->ca, crl, bad), X509_V_ERR_CERT_REVOKED);
    assert_int_equal(verify_with_crl(f->ca, crl, good), X509_V_OK);
    assert_int_equal(hc_pki_verify_crl(f->ca, crl, good, &err), 0);
    assert_int_equal(hc_pki_verify_crl(f->ca, crl, bad, &err), -1);
    assert_string_equal(err.code, HC_ERR_TLS);
    assert_non_null(strstr(err.message, "'node-bad'"));
    assert_non_null(strstr(err.message, "certificate revoked"));
    assert_int_equal(hc_pki_verify(f->ca, bad, &err), 0); /* without the list it still verifies */

    /* The list itself: v2, issued and signed by the CA, current, with the entry. */
    assert_int_equal(X509_CRL_get_version(crl), X509_CRL_VERSION_2);
    assert_int_equal(X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_subject_name(f->ca)), 0);
    assert_int_equal(X509_CRL_verify(crl, X509_get0_pubkey(f->ca)), 1);
    assert_int_equal(ASN1_TIME_compare(X509_CRL_get0_nextUpdate(crl), X509_get0_notAfter(f->ca)),
                     0);
    int day = 0, sec = 0;
    assert_int_equal(ASN1_TIME_diff(&day, &sec, X509_CRL_get0_lastUpdate(crl), NULL), 1);
    assert_true(day == 0 && sec >= 0 && sec <= 60);
    ASN1_INTEGER *number = X509_CRL_get_ext_d2i(crl, NID_crl_number, NULL, NULL);
    assert_non_null(number);
    ASN1_INTEGER_free(number);
    AUTHORITY_KEYID *akid = X509_CRL_get_ext_d2i(crl, NID_authority_key_identifier, NULL, NULL);
    assert_non_null(akid);
    assert_int_equal(ASN1_OCTET_STRING_cmp(akid->keyid, X509_get0_subject_key_id(f->ca)), 0);
    AUTHORITY_KEYID_free(akid);
    assert_int_equal(sk_X509_REVOKED_num(X509_CRL_get_REVOKED(crl)), 1);
    X509_REVOKED *entry = NULL;
    assert_int_equal(X509_CRL_get0_by_cert(crl, &entry, bad), 1);
    assert_int_equal(ASN1_TIME_cmp_time_t(X509_REVOKED_get0_revocationDate(entry), revoked_at), 0);
    ASN1_ENUMERATED *reason = X509_REVOKED_get_ext_d2i(entry, NID_crl_reason, NULL, NULL);
    assert_non_null(reason);
    assert_int_equal(ASN1_ENUMERATED_get(reason), CRL_REASON_CESSATION_OF_OPERATION);
    ASN1_ENUMERATED_free(reason);
    assert_int_equal(X509_CRL_get0_by_cert(crl, &entry, good), 0);

    X509_CRL_free(crl);
    free(path);
    X509_free(good);
    X509_free(bad);
}

static void test_crl_empty_and_foreign(void **state)
{
    struct fixture *f = *state;
    struct hc_error err = {0};
    char serial[33];
    X509 *x = agent_cert(f, "node-1", serial);

    /* An empty list checks and passes: nothing breaks before the first removal. */
    X509_CRL *empty = hc_pki_crl_new(f->ca, f->ca_key, NULL, 0, &err);
    assert_non_null(empty);
    assert_true(sk_X509_REVOKED_num(X509_CRL_get_REVOKED(empty)) <= 0); /* -1: no list at all */
    assert_int_equal(verify_with_crl(f->ca, empty, x), X509_V_OK);
    /* With CRL checking on, a list is required: no list is no answer. */
    assert_int_equal(verify_with_crl(f->ca, NULL, x), X509_V_ERR_UNABLE_TO_GET_CRL);

    /* Another CA's list (listing this very serial) is not this CA's list. */
    EVP_PKEY *other_key = hc_pki_key_new(&err);
    X509 *other = hc_pki_ca_new(other_key, "other ca", 30, &err);
    assert_non_null(other);
    struct hc_pki_revoked list[] = {{serial, (int64_t)time(NULL)}};
    X509_CRL *foreign = hc_pki_crl_new(other, other_key, list, 1, &err);
    assert_non_null(foreign);
    assert_int_equal(verify_with_crl(f->ca, foreign, x), X509_V_ERR_UNABLE_TO_GET_CRL);

    /* A key that is not the CA's, and serials that are not serials, are refused. */
    assert_null(hc_pki_crl_new(f->ca, other_key, list, 1, &err));
    assert_string_equal(err.code, HC_ERR_INTERNAL);
    const char *bad[] = {"", "n1", "0x12", "12 34", "00112233445566778899aabbccddeeff001122334"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hc_pki_revoked one = {bad[i], 0};
        assert_false(hc_pki_serial_valid(bad[i]));
        assert_null(hc_pki_crl_new(f->ca, f->ca_key, &one, 1, &err));
        assert_string_equal(err.code, HC_ERR_INVALID_ARGUMENT);
    }
    assert_true(hc_pki_serial_valid("01"));
    assert_true(hc_pki_serial_valid(serial));

    char *missing = hc_path_join(f->dir, "missing.pem");
    assert_null(hc_pki_crl_load(missing, &err));
    free(missing);
    X509_CRL_free(foreign);
    X509_CRL_free(empty);
    X509_free(other);
    EVP_PKEY_free(other_key);
    X509_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ca_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_issue_server_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_other_ca_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_cert_eku, setup, teardown),
        cmocka_unit_test_setup_teardown(test_csr_roundtrip_and_issue, setup, teardown),
        cmocka_unit_test(test_csr_tampered_refused),
        cmocka_unit_test_setup_teardown(test_fingerprint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crl_revokes_one_of_two, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crl_empty_and_foreign, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
