/*
 * The cluster PKI on OpenSSL 3: EC P-256 keys, the cluster CA, CSRs, certificate signing,
 * certificate revocation lists and fingerprints. Everything on disk is PEM; private keys are
 * written 0600.
 *
 * Ownership: functions returning EVP_PKEY / X509 / X509_REQ / X509_CRL give the caller a
 * reference to free with EVP_PKEY_free / X509_free / X509_REQ_free / X509_CRL_free; functions
 * returning char * give a malloc'd string.
 */
#ifndef HC_COMMON_PKI_H
#define HC_COMMON_PKI_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define HC_CONTROLLER_CLIENT_CN "hcctld-client"

EVP_PKEY *hc_pki_key_new(struct hc_error *err);
int hc_pki_key_save(EVP_PKEY *key, const char *path, struct hc_error *err); /* mode 0600 */
EVP_PKEY *hc_pki_key_load(const char *path, struct hc_error *err);

/* Self-signed CA certificate (CA:TRUE, keyCertSign) valid for days. */
X509 *hc_pki_ca_new(EVP_PKEY *ca_key, const char *cn, int days, struct hc_error *err);

struct hc_cert_spec {
    const char *cn;
    const char *const *sans; /* DNS names or IP literals; IPs become iPAddress SANs */
    size_t nsans;
    int server_auth; /* EKU serverAuth */
    int client_auth; /* EKU clientAuth */
    int days;
    int64_t lifetime_s; /* > 0: the validity in seconds, instead of days (short-lived
                           certificates: `hcctld run --agent-cert-lifetime`, renewal tests) */
};
/* notBefore is backdated by this much, for peers whose clocks are a little slow. */
#define HC_PKI_BACKDATE_S (5 * 60)
/* Issues a certificate for pubkey signed by the CA. serial_hex (33 bytes) receives the random
 * 128-bit serial as hex. */
X509 *hc_pki_issue(X509 *ca, EVP_PKEY *ca_key, EVP_PKEY *pubkey, const struct hc_cert_spec *spec,
                   char serial_hex[33], struct hc_error *err);

/* CSR with the given CN, signed by key. */
X509_REQ *hc_pki_csr_new(EVP_PKEY *key, const char *cn, struct hc_error *err);
char *hc_pki_csr_to_pem(X509_REQ *req);
/* Parses a CSR and verifies its self-signature; NULL with err (400) when invalid. */
X509_REQ *hc_pki_csr_from_pem(const char *pem, struct hc_error *err);
/* The public key inside a CSR (new reference). */
EVP_PKEY *hc_pki_csr_pubkey(X509_REQ *req);

int hc_pki_cert_save(X509 *cert, const char *path, struct hc_error *err); /* mode 0644 */
X509 *hc_pki_cert_load(const char *path, struct hc_error *err);
char *hc_pki_cert_to_pem(X509 *cert);
X509 *hc_pki_cert_from_pem(const char *pem, struct hc_error *err);
/* Lowercase hex SHA-256 of the DER encoding (64 chars + NUL). */
void hc_pki_fingerprint(X509 *cert, char out[65]);
/* The public-key pin of a certificate or key in libcurl's CURLOPT_PINNEDPUBLICKEY form:
 * "sha256//" + base64 of the SHA-256 of the DER SubjectPublicKeyInfo (the same value as
 * `openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary |
 * base64`). A pin survives a certificate renewed with the same key. 0, or -1 (out "") when the
 * key cannot be encoded. */
#define HC_PKI_PIN_LEN 64
int hc_pki_key_pin(EVP_PKEY *key, char out[HC_PKI_PIN_LEN]);
int hc_pki_cert_pin(X509 *cert, char out[HC_PKI_PIN_LEN]);
/* The pin of the first certificate in a PEM text or file. 0 or -1 with err. */
int hc_pki_pem_pin(const char *pem, char out[HC_PKI_PIN_LEN], struct hc_error *err);
int hc_pki_file_pin(const char *path, char out[HC_PKI_PIN_LEN], struct hc_error *err);
/* Subject CN into buf; returns 0 or -1. */
int hc_pki_cert_cn(X509 *cert, char *buf, size_t len);
/* The notAfter of the (first) certificate in pem, as epoch milliseconds: 0 with *out, or -1
 * with err (not a certificate, or a date OpenSSL cannot read). */
int hc_pki_pem_not_after(const char *pem, int64_t *out, struct hc_error *err);
/* A new certificate for old's key, subject and extensions (names, usages), signed by ca, valid
 * lifetime_s from now (renewal of the controller's own certificates; their reissue under a new
 * CA). NULL with err. */
X509 *hc_pki_reissue(X509 *old, X509 *ca, EVP_PKEY *ca_key, int64_t lifetime_s, char serial_hex[33],
                     struct hc_error *err);
/* The certificates of a PEM bundle (at most max) into out[*n]; the caller frees each. 0, or -1
 * with err (none, more than max, or not PEM). */
int hc_pki_bundle_from_pem(const char *pem, X509 **out, size_t max, size_t *n,
                           struct hc_error *err);
/* The lifetime its issuer meant (seconds, notBefore's backdating left out); 0 when unreadable. */
int64_t hc_pki_lifetime_s(X509 *cert);
/* The validity of cert as epoch milliseconds. 0, or -1 with err. */
int hc_pki_cert_validity(X509 *cert, int64_t *not_before_ms, int64_t *not_after_ms,
                         struct hc_error *err);
/* The certificate's serial as lowercase hex, as hc_pki_issue reports it (41 bytes: up to 40
 * digits, RFC 5280's 20 octets). 0 or -1. */
int hc_pki_cert_serial(X509 *cert, char out[41]);
/* When a certificate valid from not_before to not_after (ms) is due for renewal: once two
 * thirds of its lifetime (the backdating left out) are gone. */
int64_t hc_pki_renew_at_ms(int64_t not_before_ms, int64_t not_after_ms);
/* When it is "expiring" (a warning): 30 days before its end, or a quarter of its lifetime when
 * that is shorter (short-lived certificates), so always after the renewal time: a certificate
 * renewed on time never warns. And when it is an error: 7 days, or a twelfth of its lifetime. */
#define HC_PKI_WARN_BEFORE_MS (30LL * 86400 * 1000)
#define HC_PKI_ERROR_BEFORE_MS (7LL * 86400 * 1000)
int64_t hc_pki_warn_at_ms(int64_t not_before_ms, int64_t not_after_ms);
int64_t hc_pki_error_at_ms(int64_t not_before_ms, int64_t not_after_ms);
/* 1 when key is the private half of cert's public key, else 0. */
int hc_pki_cert_matches_key(X509 *cert, EVP_PKEY *key);
/* Verifies cert was signed by ca (and is within its validity). 0 or -1 with err. */
int hc_pki_verify(X509 *ca, X509 *cert, struct hc_error *err);
/* The same against every certificate in ca_file (one CA, or old and new during a rotation). */
int hc_pki_verify_file(const char *ca_file, X509 *cert, struct hc_error *err);

/* One entry of a CRL. */
struct hc_pki_revoked {
    const char *serial_hex; /* as hc_pki_issue reports it (see hc_pki_serial_valid) */
    int64_t revoked_at;     /* seconds since the epoch */
};
/* 1 when text can be a certificate serial: 1 to 40 hex digits (RFC 5280: at most 20 octets). */
int hc_pki_serial_valid(const char *serial_hex);
/* A v2 CRL issued by ca listing the n certificates (reason cessationOfOperation): thisUpdate
 * now, nextUpdate the CA's notAfter (the list is issued again at every change, not on a
 * schedule, so it never needs to expire before the CA does), the CA's key identifier, and as
 * cRLNumber the issue time in milliseconds (a later list has a larger number). Signed with
 * ca_key. NULL with err (400 for a serial hc_pki_serial_valid refuses). */
X509_CRL *hc_pki_crl_new(X509 *ca, EVP_PKEY *ca_key, const struct hc_pki_revoked *revoked, size_t n,
                         struct hc_error *err);
char *hc_pki_crl_to_pem(X509_CRL *crl);
int hc_pki_crl_save(X509_CRL *crl, const char *path, struct hc_error *err); /* mode 0644 */
X509_CRL *hc_pki_crl_load(const char *path, struct hc_error *err);
/* Every list in a PEM file (hcctld's crl.pem holds one per CA while a CA rotation runs); NULL
 * when there is none or any part of the file is not one (a list lost would let its revoked
 * certificates through). Free with sk_X509_CRL_pop_free(l, X509_CRL_free). */
STACK_OF(X509_CRL) * hc_pki_crl_list_load(const char *path);
/* 1 when a list of the certificate's issuer names its serial (then its serial in serial, as
 * hc_pki_cert_serial writes it), else 0. */
int hc_pki_crl_list_revoked(const STACK_OF(X509_CRL) * lists, X509 *cert, char serial[41]);
/* Like hc_pki_verify, and cert must not be listed in crl, which must be issued by ca, signed by
 * it and current. A listed certificate fails with "certificate revoked". 0 or -1 with err. */
int hc_pki_verify_crl(X509 *ca, X509_CRL *crl, X509 *cert, struct hc_error *err);

#endif
