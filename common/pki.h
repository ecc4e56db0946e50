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
};
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
/* Verifies cert was signed by ca (and is within its validity). 0 or -1 with err. */
int hc_pki_verify(X509 *ca, X509 *cert, struct hc_error *err);

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
/* Like hc_pki_verify, and cert must not be listed in crl, which must be issued by ca, signed by
 * it and current. A listed certificate fails with "certificate revoked". 0 or -1 with err. */
int hc_pki_verify_crl(X509 *ca, X509_CRL *crl, X509 *cert, struct hc_error *err);

#endif
