/*
 * Bearer and join tokens. A token is "<kind>.<id>.<secret>[.<extra>]": the id finds the row,
 * the secret is never stored, only its SHA-256 (compared in constant time).
 *   API token:  hct1.<id:16 hex>.<secret:64 hex>
 *   join token: hcj1.<id:16 hex>.<secret:64 hex>.<ca sha256 fingerprint:64 hex>
 * The join token carries the CA fingerprint so that a joining agent can pin the controller
 * before it trusts anything the controller says.
 */
#ifndef HC_COMMON_TOKEN_H
#define HC_COMMON_TOKEN_H

#include "common/error.h"

#define HC_TOKEN_API_PREFIX "hct1"
#define HC_TOKEN_JOIN_PREFIX "hcj1"

struct hc_token {
    char prefix[8];
    char id[17];
    char secret[65];
    char ca_fingerprint[65]; /* join tokens only; "" otherwise */
};

/* Generates a fresh token of the given prefix (join tokens take ca_fingerprint). 0 or -1. */
int hc_token_generate(struct hc_token *t, const char *prefix, const char *ca_fingerprint);
/* Renders the token text into buf (at least 200 bytes). */
void hc_token_format(const struct hc_token *t, char *buf, size_t len);
/* Parses text; expected_prefix must match. 0 or -1 with err (401 token_invalid). */
int hc_token_parse(const char *text, const char *expected_prefix, struct hc_token *t,
                   struct hc_error *err);
/* SHA-256 hex of the secret: what the database stores. */
void hc_token_hash(const struct hc_token *t, char out[65]);

#endif
