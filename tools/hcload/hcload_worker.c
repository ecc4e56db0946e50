/*
 * hcload's workers: the self-checking block format, one request to one node, an operation with
 * failover between nodes, and the load and verification loops. Each worker owns its keys
 * (PREFIX-wI-K) and one kept-alive curl easy handle per node, so nothing here takes a lock but
 * the shared counters (hcload.c).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/hcload/hcload.h"

#define MAGIC "HCLOAD1 "
#define SUM_LEN 17 /* 16 hex digits of the checksum and the newline */
/* A worker that left its home node goes back after this long without a failure; a hung home
 * then costs one request timeout per period instead of one per operation. */
#define FAILBACK_US (5 * 1000000LL)
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 50
#define FNV_BASIS 0xcbf29ce484222325ULL
#define GOLDEN 0x9e3779b97f4a7c15ULL

enum op_result { OP_OK, OP_NOT_FOUND, OP_FAILED };
enum verdict { V_OK, V_STALE, V_CORRUPT };

/* ---- block content ---- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n--) {
        h ^= *p++;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += GOLDEN);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Bytes taken little-endian from the generator, so a block is the same on every machine. */
static void payload_fill(unsigned char *p, size_t n, const char *key, uint64_t seq)
{
    uint64_t s = fnv1a(FNV_BASIS, key, strlen(key)) ^ (seq * GOLDEN), r = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0)
            r = splitmix(&s);
        p[i] = (unsigned char)(r >> (8 * (i % 8)));
    }
}

/* "HCLOAD1 KEY SEQ LEN SUM\n" then the payload; SUM is FNV-1a 64 of the header up to SUM
 * followed by the payload. len >= HCLOAD_BLOCK_MIN leaves room for the longest header. */
static void block_build(unsigned char *buf, size_t len, const char *key, uint64_t seq)
{
    int h = snprintf((char *)buf, len, MAGIC "%s %llu %zu ", key, (unsigned long long)seq, len);
    unsigned char *payload = buf + h + SUM_LEN;
    size_t n = len - (size_t)h - SUM_LEN;
    char sum[SUM_LEN + 1];
    payload_fill(payload, n, key, seq);
    snprintf(sum, sizeof(sum), "%016llx\n",
             (unsigned long long)fnv1a(fnv1a(FNV_BASIS, buf, (size_t)h), payload, n));
    memcpy(buf + h, sum, SUM_LEN);
}

/* Reads the sequence number from the header of the response body, then rebuilds the block that
 * (key, seq) must give and compares every byte: header, checksum and payload. 0 if intact. */
static int block_check(struct hcload_worker *w, const char *key, uint64_t *seq)
{
    size_t klen = strlen(key), len = (size_t)w->L->o.block_size, i = 8 + klen + 1;
    const char *p = (const char *)w->in;
    char digits[21];
    size_t n = 0;
    /* len >= HCLOAD_BLOCK_MIN: the header fields read below are inside the body. */
    if (w->in_overflow || w->in_len != len || memcmp(p, MAGIC, 8) != 0 ||
        memcmp(p + 8, key, klen) != 0 || p[8 + klen] != ' ')
        return -1;
    while (n < 20 && p[i + n] >= '0' && p[i + n] <= '9') {
        digits[n] = p[i + n];
        n++;
    }
    if (n == 0 || p[i + n] != ' ')
        return -1;
    digits[n] = '\0';
    *seq = strtoull(digits, NULL, 10);
    block_build(w->block, len, key, *seq);
    return memcmp(w->in, w->block, len) == 0 ? 0 : -1;
}

/* ---- HTTP with failover ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct hcload_worker *w = arg;
    size_t len = size * nmemb;
    if (len > w->in_cap - w->in_len) {
        w->in_overflow = 1; /* longer than any block: stop reading, it is corrupt */
        return 0;
    }
    memcpy(w->in + w->in_len, data, len);
    w->in_len += len;
    return len;
}

static CURL *easy_new(struct hcload_worker *w)
{
    CURL *e = curl_easy_init();
    int rc = 0;
    if (!e)
        return NULL;
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never through an http_proxy from env */
    rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
    rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    rc |= curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, "hcload/" HC_VERSION);
    rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->headers);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, w->errbuf);
    if (rc != 0) {
        curl_easy_cleanup(e);
        return NULL;
    }
    return e;
}

/* One request to one node: a PUT of w->block or a GET into w->in. Returns the HTTP status, or 0
 * when no answer came; why then says what happened. */
static long http_call(struct hcload_worker *w, int node, const char *key, int put, long timeout_ms,
                      char *why, size_t why_len)
{
    CURL *e = w->easy[node];
    char url[512];
    long status = 0;
    snprintf(url, sizeof(url), "%s/blocks/%s", w->L->nodes[node], key);
    w->in_len = 0;
    w->in_overflow = 0;
    w->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    if (put) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, w->block);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)w->L->o.block_size);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && w->in_overflow))
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (status == 0)
        snprintf(why, why_len, "%s %s: %s", put ? "PUT" : "GET", url,
                 w->errbuf[0] ? w->errbuf : curl_easy_strerror(rc));
    else
        snprintf(why, why_len, "%s %s: HTTP %ld", put ? "PUT" : "GET", url, status);
    return status;
}

static void fail_over(struct hcload_worker *w)
{
    if (w->L->n_nodes < 2)
        return;
    w->cur = (w->cur + 1) % w->L->n_nodes;
    w->moved_us = hcload_mono_us();
    hcload_stats_add(w->L, &w->L->st.failovers, 1);
}

static void backoff(struct hcload_worker *w, int64_t deadline_us)
{
    int64_t us =
        (BACKOFF_MIN_MS + (int64_t)(splitmix(&w->rng) % (BACKOFF_MAX_MS - BACKOFF_MIN_MS + 1))) *
        1000;
    int64_t left = deadline_us - hcload_mono_us();
    if (us > left)
        us = left;
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* One operation: the current node first, then the next ones round-robin with a short pause after
 * each full round, until --op-timeout. No answer, a timeout or a 5xx fails over; any other
 * answer ends the operation. lat_us: from the start, failovers included. */
static enum op_result op_run(struct hcload_worker *w, const char *key, int put, int64_t *lat_us,
                             char *why, size_t why_len)
{
    struct hcload *L = w->L;
    int64_t start = hcload_mono_us(), deadline = start + L->o.op_timeout_ms * 1000;
    int tries = 0;
    if (w->cur != w->home && start - w->moved_us >= FAILBACK_US)
        w->cur = w->home;
    snprintf(why, why_len, "aborted");
    for (;;) {
        int64_t left_ms = (deadline - hcload_mono_us()) / 1000;
        if (left_ms <= 0 || hc_stop_requested(&L->abort_run))
            return OP_FAILED;
        long timeout = left_ms < L->o.request_timeout_ms ? left_ms : L->o.request_timeout_ms;
        long status = http_call(w, w->cur, key, put, timeout, why, why_len);
        if (status >= 200 && status < 300) {
            *lat_us = hcload_mono_us() - start;
            return OP_OK;
        }
        if (!put && status == 404)
            return OP_NOT_FOUND;
        if (status > 0 && status < 500)
            return OP_FAILED; /* the request itself is wrong: another node would say the same */
        fail_over(w);
        if (++tries % L->n_nodes == 0)
            backoff(w, deadline);
    }
}

/* ---- workers ---- */

static void key_name(const struct hcload_worker *w, uint32_t k, char key[HCLOAD_KEY_MAX + 1])
{
    snprintf(key, HCLOAD_KEY_MAX + 1, "%s-w%d-%u", w->L->o.prefix, w->id, k);
}

/* Whether a read returned what the key may hold: an intact block with a sequence number between
 * the last acknowledged write and the last attempted one. */
static enum verdict judge(struct hcload_worker *w, const char *key, const struct hcload_key *ks,
                          enum op_result r, char *why, size_t why_len)
{
    uint64_t seq = 0;
    if (r == OP_NOT_FOUND) {
        snprintf(why, why_len, "'%s' not found, last acknowledged write was seq %llu", key,
                 (unsigned long long)ks->acked);
        return V_STALE;
    }
    if (block_check(w, key, &seq) < 0 || seq > ks->attempted) {
        snprintf(why, why_len, "'%s' corrupt: %zu bytes do not match their header (seq %llu)", key,
                 w->in_len, (unsigned long long)seq);
        return V_CORRUPT;
    }
    if (seq < ks->acked) {
        snprintf(why, why_len, "'%s' stale: read seq %llu, last acknowledged write was seq %llu",
                 key, (unsigned long long)seq, (unsigned long long)ks->acked);
        return V_STALE;
    }
    return V_OK;
}

static void worker_write(struct hcload_worker *w)
{
    struct hcload *L = w->L;
    uint32_t k = (uint32_t)(splitmix(&w->rng) % (uint64_t)L->o.keys);
    struct hcload_key *ks = &w->keys[k];
    char key[HCLOAD_KEY_MAX + 1], why[700], line[900];
    int64_t lat = 0;
    key_name(w, k, key);
    uint64_t seq = ++ks->attempted;
    block_build(w->block, (size_t)L->o.block_size, key, seq);
    if (op_run(w, key, 1, &lat, why, sizeof(why)) != OP_OK) {
        snprintf(line, sizeof(line), "write '%s' seq %llu failed: %s", key, (unsigned long long)seq,
                 why);
        hcload_stats_bad(L, &L->st.errors, line);
        return;
    }
    if (ks->acked == 0)
        w->acked[w->n_acked++] = k;
    ks->acked = seq;
    hcload_stats_ok(L, 1, lat);
}

static void worker_read(struct hcload_worker *w)
{
    struct hcload *L = w->L;
    uint32_t k = w->acked[splitmix(&w->rng) % w->n_acked];
    char key[HCLOAD_KEY_MAX + 1], why[700], line[900];
    int64_t lat = 0;
    key_name(w, k, key);
    enum op_result r = op_run(w, key, 0, &lat, why, sizeof(why));
    if (r == OP_FAILED) {
        snprintf(line, sizeof(line), "read '%s' failed: %s", key, why);
        hcload_stats_bad(L, &L->st.errors, line);
        return;
    }
    enum verdict v = judge(w, key, &w->keys[k], r, why, sizeof(why));
    if (v == V_OK) {
        hcload_stats_ok(L, 0, lat);
        return;
    }
    snprintf(line, sizeof(line), "read %s", why);
    hcload_stats_bad(L, v == V_STALE ? &L->st.stale : &L->st.corrupt, line);
}

/* Reads back every key with an acknowledged write. A key that cannot be read counts as lost.
 * Once one stayed unreachable for a whole --op-timeout (or on a second signal) the keys left are
 * counted unreachable without being read: otherwise a dead cluster would take keys x op-timeout
 * to verify, for the same verdict. */
static void worker_verify(struct hcload_worker *w)
{
    struct hcload *L = w->L;
    char key[HCLOAD_KEY_MAX + 1], why[700] = "", line[900];
    int64_t lat;
    size_t i = 0;
    for (; i < w->n_acked && !hc_stop_requested(&L->abort_run); i++) {
        uint32_t k = w->acked[i];
        key_name(w, k, key);
        enum op_result r = op_run(w, key, 0, &lat, why, sizeof(why));
        if (r == OP_FAILED)
            break;
        hcload_stats_add(L, &L->st.v_checked, 1);
        if (judge(w, key, &w->keys[k], r, why, sizeof(why)) != V_OK) {
            snprintf(line, sizeof(line), "verify: lost write: %s", why);
            hcload_stats_bad(L, &L->st.v_lost, line);
        }
    }
    if (i == w->n_acked)
        return;
    snprintf(line, sizeof(line), "verify: worker %d: %zu keys not read back, counted lost (%s)",
             w->id, w->n_acked - i, hc_stop_requested(&L->abort_run) ? "aborted" : why);
    hcload_stats_bad(L, &L->st.v_lost, line);
    hcload_stats_add(L, &L->st.v_lost, w->n_acked - i - 1);
    hcload_stats_add(L, &L->st.v_unreachable, w->n_acked - i);
}

void *hcload_worker_main(void *arg)
{
    struct hcload_worker *w = arg;
    struct hcload *L = w->L;
    while (!hc_stop_requested(&L->stop)) {
        /* Reads need a key already acknowledged; until then every operation writes. */
        double u = (double)(splitmix(&w->rng) >> 11) * 0x1p-53;
        if (w->n_acked > 0 && u < L->o.read_ratio)
            worker_read(w);
        else
            worker_write(w);
    }
    hcload_stats_load_done(L);
    worker_verify(w);
    atomic_fetch_sub(&L->verifying, 1);
    return NULL;
}

int hcload_worker_init(struct hcload *L, struct hcload_worker *w, int id)
{
    size_t keys = (size_t)L->o.keys, block = (size_t)L->o.block_size;
    w->L = L;
    w->id = id;
    w->home = w->cur = id % L->n_nodes;
    w->rng = fnv1a(FNV_BASIS, L->o.prefix, strlen(L->o.prefix)) ^ ((uint64_t)(id + 1) * GOLDEN);
    w->keys = calloc(keys, sizeof(*w->keys));
    w->acked = calloc(keys, sizeof(*w->acked));
    w->block = malloc(block);
    w->in_cap = block + 4096;
    w->in = malloc(w->in_cap);
    w->easy = calloc((size_t)L->n_nodes, sizeof(*w->easy));
    /* No "Expect: 100-continue": it would add a round trip (or a 1 s wait) to every PUT. */
    w->headers = curl_slist_append(NULL, "Expect:");
    if (w->headers && !curl_slist_append(w->headers, "Content-Type: application/octet-stream"))
        return -1;
    if (!w->keys || !w->acked || !w->block || !w->in || !w->easy || !w->headers)
        return -1;
    for (int i = 0; i < L->n_nodes; i++)
        if (!(w->easy[i] = easy_new(w)))
            return -1;
    return 0;
}

void hcload_worker_free(struct hcload_worker *w)
{
    for (int i = 0; w->easy && i < w->L->n_nodes; i++)
        if (w->easy[i])
            curl_easy_cleanup(w->easy[i]);
    curl_slist_free_all(w->headers);
    free(w->easy);
    free(w->keys);
    free(w->acked);
    free(w->block);
    free(w->in);
}
