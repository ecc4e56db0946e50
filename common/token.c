/*
 * API and join tokens: generation, rendering and strict parsing (see common/token.h for the
 * formats). Parsing accepts exactly one spelling of each token so that a token has a single
 * textual form and a single hash; error messages never repeat the token, which holds a secret.
 */
#include "common/token.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

#define HC_TOKEN_ID_HEX 16
#define HC_TOKEN_SECRET_HEX 64
#define HC_TOKEN_FPR_HEX 64

static int is_join(const char *prefix)
{
    return strcmp(prefix, HC_TOKEN_JOIN_PREFIX) == 0;
}

static int known_prefix(const char *prefix)
{
    return prefix && (is_join(prefix) || strcmp(prefix, HC_TOKEN_API_PREFIX) == 0);
}

/* Exactly n lowercase hex digits at s (uppercase is refused: one token, one spelling). */
static int is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int hc_token_generate(struct hc_token *t, const char *prefix, const char *ca_fingerprint)
{
    if (!known_prefix(prefix))
        return -1;
    memset(t, 0, sizeof(*t));
    if (is_join(prefix)) {
        if (!ca_fingerprint || strlen(ca_fingerprint) != HC_TOKEN_FPR_HEX ||
            !is_lower_hex(ca_fingerprint, HC_TOKEN_FPR_HEX))
            return -1;
        memcpy(t->ca_fingerprint, ca_fingerprint, HC_TOKEN_FPR_HEX + 1);
    }
    snprintf(t->prefix, sizeof(t->prefix), "%s", prefix);
    if (hc_random_hex(t->id, HC_TOKEN_ID_HEX / 2) < 0 ||
        hc_random_hex(t->secret, HC_TOKEN_SECRET_HEX / 2) < 0) {
        memset(t, 0, sizeof(*t));
        return -1;
    }
    return 0;
}

void hc_token_format(const struct hc_token *t, char *buf, size_t len)
{
    if (t->ca_fingerprint[0])
        snprintf(buf, len, "%s.%s.%s.%s", t->prefix, t->id, t->secret, t->ca_fingerprint);
    else
        snprintf(buf, len, "%s.%s.%s", t->prefix, t->id, t->secret);
}

/* Copies the n-hex-digit field at *p into out and steps over the following separator
 * ('.' or, for the last field, the end of the string). */
static int take_field(const char **p, size_t n, int last, char *out)
{
    if (!is_lower_hex(*p, n) || (*p)[n] != (last ? '\0' : '.'))
        return -1;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n + 1;
    return 0;
}

int hc_token_parse(const char *text, const char *expected_prefix, struct hc_token *t,
                   struct hc_error *err)
{
    struct hc_token tok;
    memset(&tok, 0, sizeof(tok));
    size_t plen = expected_prefix ? strlen(expected_prefix) : 0;
    int join = known_prefix(expected_prefix) && is_join(expected_prefix);
    const char *p = text;
    /* is_lower_hex stops at the first non-hex byte, so no read passes the terminating NUL. */
    if (!known_prefix(expected_prefix) || !text || strncmp(text, expected_prefix, plen) != 0 ||
        text[plen] != '.')
        goto bad;
    memcpy(tok.prefix, expected_prefix, plen + 1);
    p = text + plen + 1;
    if (take_field(&p, HC_TOKEN_ID_HEX, 0, tok.id) < 0 ||
        take_field(&p, HC_TOKEN_SECRET_HEX, !join, tok.secret) < 0 ||
        (join && take_field(&p, HC_TOKEN_FPR_HEX, 1, tok.ca_fingerprint) < 0))
        goto bad;
    *t = tok;
    memset(&tok, 0, sizeof(tok));
    return 0;
bad:
    memset(&tok, 0, sizeof(tok));
    hc_error_set(err, HC_E(TOKEN_INVALID), "malformed token");
    if (join)
        return hc_error_hint(err, "a join token looks like %s.<16 hex>.<64 hex>.<64 hex>",
                             HC_TOKEN_JOIN_PREFIX);
    return hc_error_hint(err, "an api token looks like %s.<16 hex>.<64 hex>", HC_TOKEN_API_PREFIX);
}

void hc_token_hash(const struct hc_token *t, char out[65])
{
    hc_sha256_hex(t->secret, strlen(t->secret), out);
}
