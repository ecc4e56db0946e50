/*
 * The cluster PKI on OpenSSL 3 (EVP and X509 APIs only): P-256 keys, the self-signed cluster
 * CA, CSRs, issuing leaf certificates, revocation lists, PEM files and fingerprints.
 *
 * Every failure drains OpenSSL's thread-local error queue into the message, so a stale error
 * never leaks into an unrelated later call.
 */
#include "common/pki.h"

#include <ctype.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* The first queued OpenSSL error as text (or "unknown error"); empties the queue. */
static const char *ossl_err(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, buf, len);
    else
        snprintf(buf, len, "unknown error");
    ERR_clear_error();
    return buf;
}

static int ossl_fail(struct hc_error *err, const struct hc_code *code, const char *what)
{
    char buf[256];
    return hc_error_set(err, code, "%s: %s", what, ossl_err(buf, sizeof(buf)));
}

/* Contents of a memory BIO as a malloc'd NUL-terminated string. */
static char *bio_strdup(BIO *bio)
{
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (out) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    return out;
}

EVP_PKEY *hc_pki_key_new(struct hc_error *err)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key)
        ossl_fail(err, HC_E(INTERNAL), "cannot generate ec p-256 key");
    return key;
}

int hc_pki_key_save(EVP_PKEY *key, const char *path, struct hc_error *err)
{
    /* Secure memory BIO: the PEM of the private key is wiped when the BIO is freed. */
    BIO *bio = BIO_new(BIO_s_secmem());
    int rc = -1;
    if (!bio || PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) != 1) {
        ossl_fail(err, HC_E(INTERNAL), "cannot encode private key");
        hc_error_prefix(err, "cannot save key '%s'", path);
        goto cleanup;
    }
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    rc = hc_file_write_atomic(path, data, (size_t)n, 0600, err);
cleanup:
    BIO_free(bio);
    return rc;
}

EVP_PKEY *hc_pki_key_load(const char *path, struct hc_error *err)
{
    char *pem = NULL;
    size_t len = 0;
    EVP_PKEY *key = NULL;
    if (hc_file_read(path, &pem, &len, err) < 0)
        return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (bio)
        key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    if (!key) {
        ossl_fail(err, HC_E(IO), "cannot parse private key");
        hc_error_prefix(err, "cannot load key '%s'", path);
    }
    BIO_free(bio);
    OPENSSL_cleanse(pem, len);
    free(pem);
    return key;
}

/* 128 random bits, never zero (RFC 5280 wants a positive serial). hex gets 32 lowercase chars. */
static int set_random_serial(X509 *x, char hex[33])
{
    unsigned char raw[16];
    int nonzero = 0, ok = 0;
    while (!nonzero) {
        if (RAND_bytes(raw, sizeof(raw)) != 1)
            return -1;
        for (size_t i = 0; i < sizeof(raw); i++)
            nonzero |= raw[i];
    }
    BIGNUM *bn = BN_bin2bn(raw, sizeof(raw), NULL);
    ASN1_INTEGER *serial = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    ok = serial && X509_set_serialNumber(x, serial) == 1;
    for (size_t i = 0; ok && hex && i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    return ok ? 0 : -1;
}

static int set_cn(X509_NAME *name, const char *cn)
{
    return X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                      0) == 1
               ? 0
               : -1;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* The fields every certificate here shares: v3, random serial, validity, key, issuer. */
static X509 *cert_skeleton(X509 *issuer, EVP_PKEY *pubkey, const char *cn, int days,
                           int64_t lifetime_s, char serial_hex[33])
{
    X509 *x = X509_new();
    if (!x || X509_set_version(x, X509_VERSION_3) != 1 || set_random_serial(x, serial_hex) < 0 ||
        set_cn(X509_get_subject_name(x), cn) < 0 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -HC_PKI_BACKDATE_S) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), lifetime_s > 0 ? (int)(lifetime_s / 86400) : days,
                          lifetime_s > 0 ? (long)(lifetime_s % 86400) : 0, NULL) ||
        X509_set_pubkey(x, pubkey) != 1)
        goto fail;
    X509_NAME *iname = issuer ? X509_get_subject_name(issuer) : X509_get_subject_name(x);
    if (X509_set_issuer_name(x, iname) != 1)
        goto fail;
    return x;
fail:
    X509_free(x);
    return NULL;
}

static int check_cn_days(const char *cn, int days, struct hc_error *err)
{
    if (!cn || !*cn)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "certificate needs a common name");
    if (days <= 0 || days > 36500)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "certificate validity of %d days is out of range (1..36500)", days);
    return 0;
}

X509 *hc_pki_ca_new(EVP_PKEY *ca_key, const char *cn, int days, struct hc_error *err)
{
    if (check_cn_days(cn, days, err) < 0)
        return NULL;
    X509 *x = cert_skeleton(NULL, ca_key, cn, days, 0, NULL);
    if (!x || add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
        add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(x, x, NID_authority_key_identifier, "keyid:always") < 0 ||
        X509_sign(x, ca_key, EVP_sha256()) <= 0) {
        ossl_fail(err, HC_E(INTERNAL), "cannot create ca certificate");
        hc_error_prefix(err, "ca '%s'", cn);
        X509_free(x);
        return NULL;
    }
    return x;
}

/* subjectAltName from the spec: IP literals (v4 or v6) as iPAddress, the rest as dNSName. */
static int add_sans(X509 *x, const struct hc_cert_spec *spec, struct hc_error *err)
{
    GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
    int rc = -1;
    for (size_t i = 0; names && i < spec->nsans; i++) {
        const char *san = spec->sans[i];
        if (!san || !*san || strpbrk(san, " ,\t\n")) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid subject alt name '%s'",
                         san ? san : "");
            goto cleanup;
        }
        GENERAL_NAME *gn = GENERAL_NAME_new();
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(san);
        ASN1_IA5STRING *dns = ip ? NULL : ASN1_IA5STRING_new();
        if (!gn || (!ip && (!dns || ASN1_STRING_set(dns, san, -1) != 1)) ||
            sk_GENERAL_NAME_push(names, gn) <= 0) {
            GENERAL_NAME_free(gn);
            ASN1_OCTET_STRING_free(ip);
            ASN1_IA5STRING_free(dns);
            goto fail;
        }
        GENERAL_NAME_set0_value(gn, ip ? GEN_IPADD : GEN_DNS, ip ? (void *)ip : (void *)dns);
    }
    if (!names || (spec->nsans &&
                   X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) != 1))
        goto fail;
    rc = 0;
    goto cleanup;
fail:
    ossl_fail(err, HC_E(INTERNAL), "cannot add subject alt names");
cleanup:
    GENERAL_NAMES_free(names);
    return rc;
}

static int add_leaf_exts(X509 *x, X509 *ca, const struct hc_cert_spec *spec)
{
    char eku[64] = "";
    if (spec->server_auth)
        strcat(eku, "serverAuth");
    if (spec->client_auth)
        strcat(eku, spec->server_auth ? ",clientAuth" : "clientAuth");
    if (add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(x, ca, NID_key_usage, "critical,digitalSignature") < 0 ||
        add_ext(x, ca, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(x, ca, NID_authority_key_identifier, "keyid:always") < 0)
        return -1;
    return eku[0] ? add_ext(x, ca, NID_ext_key_usage, eku) : 0;
}

X509 *hc_pki_issue(X509 *ca, EVP_PKEY *ca_key, EVP_PKEY *pubkey, const struct hc_cert_spec *spec,
                   char serial_hex[33], struct hc_error *err)
{
    if (spec->lifetime_s > 0 ? check_cn_days(spec->cn, 1, err) < 0 ||
                                   (spec->lifetime_s > 36500LL * 86400 &&
                                    hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                                 "certificate validity is out of range") < 0)
                             : check_cn_days(spec->cn, spec->days, err) < 0)
        return NULL;
    if (X509_check_private_key(ca, ca_key) != 1) {
        ossl_fail(err, HC_E(INTERNAL), "ca key does not match the ca certificate");
        return NULL;
    }
    X509 *x = cert_skeleton(ca, pubkey, spec->cn, spec->days, spec->lifetime_s, serial_hex);
    if (!x || add_leaf_exts(x, ca, spec) < 0) {
        ossl_fail(err, HC_E(INTERNAL), "cannot build certificate");
        goto fail;
    }
    if (add_sans(x, spec, err) < 0)
        goto fail;
    if (X509_sign(x, ca_key, EVP_sha256()) <= 0) {
        ossl_fail(err, HC_E(INTERNAL), "cannot sign certificate");
        goto fail;
    }
    return x;
fail:
    hc_error_prefix(err, "cannot issue certificate for '%s'", spec->cn);
    X509_free(x);
    return NULL;
}

X509 *hc_pki_reissue(X509 *old, X509 *ca, EVP_PKEY *ca_key, int64_t lifetime_s, char serial_hex[33],
                     struct hc_error *err)
{
    char cn[256];
    if (hc_pki_cert_cn(old, cn, sizeof(cn)) < 0 || lifetime_s <= 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "the certificate to reissue has no common name");
        return NULL;
    }
    if (X509_check_private_key(ca, ca_key) != 1) {
        ossl_fail(err, HC_E(INTERNAL), "ca key does not match the ca certificate");
        return NULL;
    }
    X509 *x = cert_skeleton(ca, X509_get0_pubkey(old), cn, 0, lifetime_s, serial_hex);
    if (!x)
        goto fail;
    /* What the certificate says of its holder (names, usages) is kept; what ties it to its
     * issuer is made anew. */
    for (int i = 0; i < X509_get_ext_count(old); i++) {
        X509_EXTENSION *ext = X509_get_ext(old, i);
        int nid = OBJ_obj2nid(X509_EXTENSION_get_object(ext));
        if (nid == NID_authority_key_identifier || nid == NID_subject_key_identifier)
            continue;
        if (X509_add_ext(x, ext, -1) != 1)
            goto fail;
    }
    if (add_ext(x, ca, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(x, ca, NID_authority_key_identifier, "keyid:always") < 0 ||
        X509_sign(x, ca_key, EVP_sha256()) <= 0)
        goto fail;
    return x;
fail:
    ossl_fail(err, HC_E(INTERNAL), "cannot reissue certificate");
    hc_error_prefix(err, "'%s'", cn);
    X509_free(x);
    return NULL;
}

int hc_pki_bundle_from_pem(const char *pem, X509 **out, size_t max, size_t *n, struct hc_error *err)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    *n = 0;
    if (!bio)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
        if (*n == max) {
            X509_free(x);
            goto fail_count;
        }
        out[(*n)++] = x;
    }
    ERR_clear_error(); /* the end of the input */
    BIO_free(bio);
    if (*n == 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "no certificate in the PEM text");
    return 0;
fail_count:
    BIO_free(bio);
    for (size_t i = 0; i < *n; i++)
        X509_free(out[i]);
    *n = 0;
    return hc_error_set(err, HC_E(INVALID_ARGUMENT), "more than %zu certificates in the PEM text",
                        max);
}

int64_t hc_pki_lifetime_s(X509 *cert)
{
    int64_t nb = 0, na = 0; /* -O3 cannot see hc_pki_cert_validity set both on success */
    struct hc_error ignored = {0};
    if (hc_pki_cert_validity(cert, &nb, &na, &ignored) < 0)
        return 0;
    int64_t ms = na - (nb + HC_PKI_BACKDATE_S * 1000LL);
    return (ms > 0 ? ms : na - nb) / 1000;
}

X509_REQ *hc_pki_csr_new(EVP_PKEY *key, const char *cn, struct hc_error *err)
{
    if (!cn || !*cn) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "certificate request needs a common name");
        return NULL;
    }
    X509_REQ *req = X509_REQ_new();
    if (!req || X509_REQ_set_version(req, X509_REQ_VERSION_1) != 1 ||
        set_cn(X509_REQ_get_subject_name(req), cn) < 0 || X509_REQ_set_pubkey(req, key) != 1 ||
        X509_REQ_sign(req, key, EVP_sha256()) <= 0) {
        ossl_fail(err, HC_E(INTERNAL), "cannot create certificate request");
        X509_REQ_free(req);
        return NULL;
    }
    return req;
}

char *hc_pki_csr_to_pem(X509_REQ *req)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (bio && PEM_write_bio_X509_REQ(bio, req) == 1)
        out = bio_strdup(bio);
    BIO_free(bio);
    ERR_clear_error();
    return out;
}

/* Only the key types this project issues for: EC P-256 and Ed25519. */
static int key_type_ok(EVP_PKEY *pk)
{
    char group[64] = "";
    if (EVP_PKEY_is_a(pk, "ED25519"))
        return 1;
    if (!EVP_PKEY_is_a(pk, "EC"))
        return 0;
    if (EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                       NULL) != 1)
        return 0;
    return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0;
}

X509_REQ *hc_pki_csr_from_pem(const char *pem, struct hc_error *err)
{
    BIO *bio = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    X509_REQ *req = bio ? PEM_read_bio_X509_REQ(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!req) {
        ossl_fail(err, HC_E(INVALID_ARGUMENT), "cannot parse certificate request");
        return NULL;
    }
    EVP_PKEY *pk = X509_REQ_get0_pubkey(req);
    if (!pk || X509_REQ_verify(req, pk) != 1) {
        ossl_fail(err, HC_E(INVALID_ARGUMENT), "certificate request signature does not verify");
        goto fail;
    }
    if (!key_type_ok(pk)) {
        ERR_clear_error();
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "certificate request key must be ec p-256 or ed25519");
        goto fail;
    }
    return req;
fail:
    X509_REQ_free(req);
    return NULL;
}

EVP_PKEY *hc_pki_csr_pubkey(X509_REQ *req)
{
    return X509_REQ_get_pubkey(req);
}

char *hc_pki_cert_to_pem(X509 *cert)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (bio && PEM_write_bio_X509(bio, cert) == 1)
        out = bio_strdup(bio);
    BIO_free(bio);
    ERR_clear_error();
    return out;
}

X509 *hc_pki_cert_from_pem(const char *pem, struct hc_error *err)
{
    BIO *bio = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!x)
        ossl_fail(err, HC_E(INVALID_ARGUMENT), "cannot parse certificate");
    return x;
}

int hc_pki_cert_save(X509 *cert, const char *path, struct hc_error *err)
{
    char *pem = hc_pki_cert_to_pem(cert);
    if (!pem)
        return hc_error_set(err, HC_E(INTERNAL), "cannot encode certificate for '%s'", path);
    int rc = hc_file_write_atomic(path, pem, strlen(pem), 0644, err);
    free(pem);
    return rc;
}

X509 *hc_pki_cert_load(const char *path, struct hc_error *err)
{
    char *pem = NULL;
    if (hc_file_read(path, &pem, NULL, err) < 0)
        return NULL;
    X509 *x = hc_pki_cert_from_pem(pem, err);
    if (!x)
        hc_error_prefix(err, "cannot load certificate '%s'", path);
    free(pem);
    return x;
}

void hc_pki_fingerprint(X509 *cert, char out[65])
{
    unsigned char *der = NULL;
    int len = i2d_X509(cert, &der);
    if (len <= 0) {
        out[0] = '\0';
        ERR_clear_error();
        return;
    }
    hc_sha256_hex(der, (size_t)len, out);
    OPENSSL_free(der);
}

int hc_pki_key_pin(EVP_PKEY *key, char out[HC_PKI_PIN_LEN])
{
    unsigned char *der = NULL, md[32];
    int len = key ? i2d_PUBKEY(key, &der) : -1;
    out[0] = '\0';
    if (len <= 0) {
        ERR_clear_error();
        return -1;
    }
    SHA256(der, (size_t)len, md);
    OPENSSL_free(der);
    memcpy(out, "sha256//", 8);
    EVP_EncodeBlock((unsigned char *)out + 8, md, sizeof(md)); /* 44 characters + NUL */
    return 0;
}

int hc_pki_cert_pin(X509 *cert, char out[HC_PKI_PIN_LEN])
{
    return hc_pki_key_pin(cert ? X509_get0_pubkey(cert) : NULL, out);
}

int hc_pki_pem_pin(const char *pem, char out[HC_PKI_PIN_LEN], struct hc_error *err)
{
    X509 *cert = hc_pki_cert_from_pem(pem, err);
    int rc = cert ? hc_pki_cert_pin(cert, out) : -1;
    X509_free(cert);
    if (cert && rc < 0)
        hc_error_set(err, HC_E(TLS), "cannot encode the certificate's public key");
    return rc;
}

int hc_pki_file_pin(const char *path, char out[HC_PKI_PIN_LEN], struct hc_error *err)
{
    X509 *cert = hc_pki_cert_load(path, err);
    int rc = cert ? hc_pki_cert_pin(cert, out) : -1;
    X509_free(cert);
    if (cert && rc < 0)
        hc_error_set(err, HC_E(TLS), "cannot encode the public key of '%s'", path);
    return rc;
}

int hc_pki_cert_cn(X509 *cert, char *buf, size_t len)
{
    X509_NAME *name = X509_get_subject_name(cert);
    int idx = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
    X509_NAME_ENTRY *entry = idx >= 0 ? X509_NAME_get_entry(name, idx) : NULL;
    unsigned char *utf8 = NULL;
    int n = entry ? ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry)) : -1;
    int rc = -1;
    /* A CN with an embedded NUL or one that does not fit is refused, never truncated. */
    if (n >= 0 && (size_t)n < len && memchr(utf8, '\0', (size_t)n) == NULL) {
        memcpy(buf, utf8, (size_t)n);
        buf[n] = '\0';
        rc = 0;
    }
    OPENSSL_free(utf8);
    ERR_clear_error();
    return rc;
}

/* X509_verify_cert against the CA alone, and against crl when there is one. */
/* The trust anchors: ca, or every certificate in ca_file (a bundle during a CA rotation). */
static int verify_cert(X509 *ca, const char *ca_file, X509_CRL *crl, X509 *cert,
                       struct hc_error *err)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int rc = -1;
    if (store && ca_file && X509_STORE_load_file(store, ca_file) != 1) {
        ossl_fail(err, HC_E(IO), "cannot load the CA file");
        hc_error_prefix(err, "'%s'", ca_file);
        goto cleanup;
    }
    if (!store || !ctx || (ca && X509_STORE_add_cert(store, ca) != 1) ||
        (crl && X509_STORE_add_crl(store, crl) != 1) ||
        X509_STORE_CTX_init(ctx, store, cert, NULL) != 1) {
        ossl_fail(err, HC_E(INTERNAL), "cannot set up certificate verification");
        goto cleanup;
    }
    /* CRL_CHECK covers the leaf only, as libcurl's CURLOPT_CRLFILE does: the CA is the trust
     * anchor. */
    X509_STORE_CTX_set_flags(ctx, X509_V_FLAG_X509_STRICT | (crl ? X509_V_FLAG_CRL_CHECK : 0));
    if (X509_verify_cert(ctx) == 1) {
        rc = 0;
        goto cleanup;
    }
    char cn[256] = "?";
    hc_pki_cert_cn(cert, cn, sizeof(cn));
    hc_error_set(err, HC_E(TLS), "certificate '%s' does not verify against the ca: %s", cn,
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
cleanup:
    ERR_clear_error();
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return rc;
}

int hc_pki_verify(X509 *ca, X509 *cert, struct hc_error *err)
{
    return verify_cert(ca, NULL, NULL, cert, err);
}

int hc_pki_verify_file(const char *ca_file, X509 *cert, struct hc_error *err)
{
    return verify_cert(NULL, ca_file, NULL, cert, err);
}

int hc_pki_verify_crl(X509 *ca, X509_CRL *crl, X509 *cert, struct hc_error *err)
{
    return verify_cert(ca, NULL, crl, cert, err);
}

/* ---------------------------------------------------------------- revocation lists */

int hc_pki_serial_valid(const char *serial_hex)
{
    size_t n = serial_hex ? strlen(serial_hex) : 0;
    return n >= 1 && n <= 40 && strspn(serial_hex, "0123456789abcdefABCDEF") == n;
}

/* One entry: serial, revocation date and reason cessationOfOperation (the node left the
 * cluster; its key was not necessarily compromised). */
static X509_REVOKED *crl_entry(const struct hc_pki_revoked *r)
{
    BIGNUM *bn = NULL;
    X509_REVOKED *rev = X509_REVOKED_new();
    ASN1_INTEGER *serial = NULL;
    ASN1_TIME *when = ASN1_TIME_set(NULL, (time_t)r->revoked_at);
    ASN1_ENUMERATED *reason = ASN1_ENUMERATED_new();
    int ok = rev && when && reason && BN_hex2bn(&bn, r->serial_hex) > 0 &&
             (serial = BN_to_ASN1_INTEGER(bn, NULL)) &&
             X509_REVOKED_set_serialNumber(rev, serial) == 1 &&
             X509_REVOKED_set_revocationDate(rev, when) == 1 &&
             ASN1_ENUMERATED_set(reason, CRL_REASON_CESSATION_OF_OPERATION) == 1 &&
             X509_REVOKED_add1_ext_i2d(rev, NID_crl_reason, reason, 0, 0) == 1;
    ASN1_ENUMERATED_free(reason);
    ASN1_TIME_free(when);
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    if (!ok) {
        X509_REVOKED_free(rev);
        return NULL;
    }
    return rev;
}

/* Version, issuer, dates and the two extensions RFC 5280 asks of a CRL issuer. */
static int crl_header(X509_CRL *crl, X509 *ca)
{
    X509V3_CTX v3;
    ASN1_TIME *now = X509_gmtime_adj(NULL, 0);
    ASN1_INTEGER *number = ASN1_INTEGER_new();
    X509_EXTENSION *akid = NULL;
    X509V3_set_ctx(&v3, ca, NULL, NULL, crl, 0);
    int ok =
        now && number && X509_CRL_set_version(crl, X509_CRL_VERSION_2) == 1 &&
        X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca)) == 1 &&
        X509_CRL_set1_lastUpdate(crl, now) == 1 &&
        X509_CRL_set1_nextUpdate(crl, X509_get0_notAfter(ca)) == 1 &&
        ASN1_INTEGER_set_int64(number, hc_now_ms()) == 1 &&
        X509_CRL_add1_ext_i2d(crl, NID_crl_number, number, 0, 0) == 1 &&
        (akid = X509V3_EXT_nconf_nid(NULL, &v3, NID_authority_key_identifier, "keyid:always")) &&
        X509_CRL_add_ext(crl, akid, -1) == 1;
    X509_EXTENSION_free(akid);
    ASN1_INTEGER_free(number);
    ASN1_TIME_free(now);
    return ok ? 0 : -1;
}

X509_CRL *hc_pki_crl_new(X509 *ca, EVP_PKEY *ca_key, const struct hc_pki_revoked *revoked, size_t n,
                         struct hc_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!hc_pki_serial_valid(revoked[i].serial_hex)) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid certificate serial '%s'",
                         revoked[i].serial_hex ? revoked[i].serial_hex : "");
            return NULL;
        }
    if (X509_check_private_key(ca, ca_key) != 1) {
        ossl_fail(err, HC_E(INTERNAL), "ca key does not match the ca certificate");
        return NULL;
    }
    X509_CRL *crl = X509_CRL_new();
    if (!crl || crl_header(crl, ca) < 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        X509_REVOKED *rev = crl_entry(&revoked[i]);
        if (!rev)
            goto fail;
        if (X509_CRL_add0_revoked(crl, rev) != 1) {
            X509_REVOKED_free(rev);
            goto fail;
        }
    }
    if (X509_CRL_sort(crl) != 1 || X509_CRL_sign(crl, ca_key, EVP_sha256()) <= 0)
        goto fail;
    return crl;
fail:
    ossl_fail(err, HC_E(INTERNAL), "cannot build the certificate revocation list");
    X509_CRL_free(crl);
    return NULL;
}

char *hc_pki_crl_to_pem(X509_CRL *crl)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (bio && PEM_write_bio_X509_CRL(bio, crl) == 1)
        out = bio_strdup(bio);
    BIO_free(bio);
    ERR_clear_error();
    return out;
}

int hc_pki_crl_save(X509_CRL *crl, const char *path, struct hc_error *err)
{
    char *pem = hc_pki_crl_to_pem(crl);
    if (!pem)
        return hc_error_set(err, HC_E(INTERNAL), "cannot encode revocation list for '%s'", path);
    int rc = hc_file_write_atomic(path, pem, strlen(pem), 0644, err);
    free(pem);
    return rc;
}

X509_CRL *hc_pki_crl_load(const char *path, struct hc_error *err)
{
    char *pem = NULL;
    if (hc_file_read(path, &pem, NULL, err) < 0)
        return NULL;
    BIO *bio = BIO_new_mem_buf(pem, -1);
    X509_CRL *crl = bio ? PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    free(pem);
    if (!crl) {
        ossl_fail(err, HC_E(IO), "cannot parse revocation list");
        hc_error_prefix(err, "cannot load '%s'", path);
    }
    return crl;
}

STACK_OF(X509_CRL) * hc_pki_crl_list_load(const char *path)
{
    FILE *f = fopen(path, "re");
    STACK_OF(X509_CRL) *lists = f ? sk_X509_CRL_new_null() : NULL;
    X509_CRL *crl;
    ERR_clear_error();
    while (lists && (crl = PEM_read_X509_CRL(f, NULL, NULL, NULL)))
        if (!sk_X509_CRL_push(lists, crl)) {
            X509_CRL_free(crl);
            break;
        }
    /* The end of the file reads as "no start line"; anything else is a broken list. */
    unsigned long e = ERR_peek_last_error();
    int whole = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
    ERR_clear_error();
    if (f)
        fclose(f);
    if (lists && (!whole || sk_X509_CRL_num(lists) == 0)) {
        sk_X509_CRL_pop_free(lists, X509_CRL_free);
        lists = NULL;
    }
    return lists;
}

int hc_pki_crl_list_revoked(const STACK_OF(X509_CRL) * lists, X509 *cert, char serial[41])
{
    for (int i = 0; i < sk_X509_CRL_num(lists); i++) {
        X509_CRL *crl = sk_X509_CRL_value(lists, i);
        X509_REVOKED *entry = NULL;
        if (X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_issuer_name(cert)) == 0 &&
            X509_CRL_get0_by_serial(crl, &entry, X509_get0_serialNumber(cert)) == 1) {
            if (hc_pki_cert_serial(cert, serial) < 0)
                snprintf(serial, 41, "?");
            return 1;
        }
    }
    return 0;
}

static int asn1_time_ms(const ASN1_TIME *t, int64_t *out)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return -1;
    *out = (int64_t)timegm(&tm) * 1000;
    return 0;
}

int hc_pki_cert_validity(X509 *cert, int64_t *not_before_ms, int64_t *not_after_ms,
                         struct hc_error *err)
{
    if (asn1_time_ms(X509_get0_notBefore(cert), not_before_ms) < 0 ||
        asn1_time_ms(X509_get0_notAfter(cert), not_after_ms) < 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "the certificate's validity dates are unreadable");
    return 0;
}

int hc_pki_pem_not_after(const char *pem, int64_t *out, struct hc_error *err)
{
    int64_t not_before;
    X509 *cert = hc_pki_cert_from_pem(pem, err);
    if (!cert)
        return -1;
    int rc = hc_pki_cert_validity(cert, &not_before, out, err);
    X509_free(cert);
    return rc;
}

int hc_pki_cert_serial(X509 *cert, char out[41])
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    size_t len = hex ? strlen(hex) : 0;
    int ok = hex && len <= 40;
    if (ok) {
        /* hc_pki_issue writes all 16 bytes of its serials, leading zeros too */
        size_t pad = len < 32 ? 32 - len : 0;
        memset(out, '0', pad);
        for (size_t i = 0; i < len; i++)
            out[pad + i] = (char)tolower((unsigned char)hex[i]);
        out[pad + len] = '\0';
    }
    OPENSSL_free(hex);
    BN_free(bn);
    return ok ? 0 : -1;
}

/* The lifetime meant by the issuer: notBefore's backdating left out. */
static int64_t lifetime_ms(int64_t not_before_ms, int64_t not_after_ms)
{
    int64_t lifetime = not_after_ms - (not_before_ms + HC_PKI_BACKDATE_S * 1000LL);
    return lifetime > 0 ? lifetime : not_after_ms - not_before_ms;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t hc_pki_renew_at_ms(int64_t not_before_ms, int64_t not_after_ms)
{
    return not_after_ms - lifetime_ms(not_before_ms, not_after_ms) / 3;
}

int64_t hc_pki_warn_at_ms(int64_t not_before_ms, int64_t not_after_ms)
{
    return not_after_ms -
           min64(HC_PKI_WARN_BEFORE_MS, lifetime_ms(not_before_ms, not_after_ms) / 4);
}

int64_t hc_pki_error_at_ms(int64_t not_before_ms, int64_t not_after_ms)
{
    return not_after_ms -
           min64(HC_PKI_ERROR_BEFORE_MS, lifetime_ms(not_before_ms, not_after_ms) / 12);
}

int hc_pki_cert_matches_key(X509 *cert, EVP_PKEY *key)
{
    return X509_check_private_key(cert, key) == 1;
}
