/* Agent-side fencing of controller terms (fence.h). */
#include "agents/hcagent/fence.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* Digits of INT64_MAX (9223372036854775807). */
#define TERM_MAX_DIGITS 19
/* The file holds one term and a newline; anything longer is not one. */
#define TERM_FILE_MAX 64

struct hc_agent_fence {
    pthread_mutex_t mu; /* held across compare and write: raises are monotonic */
    int64_t highest;    /* what the file says (or 0 without one); under mu */
    char *path;         /* DIR/controller-term */
    char *label;        /* "" or "NAME: ", the prefix of log lines */
};

int hc_agent_fence_parse(const char *text, int64_t *out)
{
    size_t n = strlen(text);
    if (n == 0 || n > TERM_MAX_DIGITS || strspn(text, "0123456789") != n)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = text[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static char *term_path(const char *dir, struct hc_error *err)
{
    char *path = hc_path_join(dir, HC_AGENT_FILE_TERM);
    if (!path)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    return path;
}

static int recovery_hint(const char *path, struct hc_error *err)
{
    return hc_error_hint(err,
                         "write the highest controller_term another node's agent reports "
                         "(GET /v1/status) into it (echo N > '%s'), or remove it to accept the "
                         "next controller's term",
                         path);
}

static int corrupt(const char *path, struct hc_error *err)
{
    hc_error_set(err, HC_E(INVALID_ARGUMENT),
                 "the controller term file '%s' is corrupt: it must hold one decimal integer "
                 ">= 0 (the highest fencing term seen from a controller)",
                 path);
    return recovery_hint(path, err);
}

/* Reads path into *out: 0 with 0 when there is no file, 0 with the term, or -1 with err. */
static int term_load(const char *path, int64_t *out, struct hc_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = 0;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (hc_file_read(path, &text, &len, err) < 0) {
        hc_error_prefix(err, "cannot read the controller term file");
        return recovery_hint(path, err);
    }
    if (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    int rc = len < TERM_FILE_MAX && strlen(text) == len && hc_agent_fence_parse(text, out) == 0
                 ? 0
                 : corrupt(path, err);
    free(text);
    return rc;
}

struct hc_agent_fence *hc_agent_fence_new(const char *dir, const char *label, struct hc_error *err)
{
    struct hc_agent_fence *f = calloc(1, sizeof(*f));
    if (!f) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    size_t llen = label && label[0] ? strlen(label) + 3 : 1;
    if (!(f->path = term_path(dir, err)) || !(f->label = malloc(llen)))
        goto fail;
    snprintf(f->label, llen, "%s%s", label && label[0] ? label : "", label && label[0] ? ": " : "");
    if (term_load(f->path, &f->highest, err) < 0)
        goto fail;
    return f;
fail:
    if (!f->label)
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
    hc_agent_fence_free(f);
    return NULL;
}

void hc_agent_fence_free(struct hc_agent_fence *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f->path);
    free(f->label);
    free(f);
}

int hc_agent_fence_forget(const char *dir, struct hc_error *err)
{
    char *path = term_path(dir, err);
    if (!path)
        return -1;
    int rc = 0;
    if (unlink(path) < 0 && errno != ENOENT)
        rc = hc_error_set(err, HC_E(IO), "cannot remove '%s': %s", path, strerror(errno));
    free(path);
    return rc;
}

int64_t hc_agent_fence_highest(struct hc_agent_fence *f)
{
    pthread_mutex_lock(&f->mu);
    int64_t v = f->highest;
    pthread_mutex_unlock(&f->mu);
    return v;
}

/* The one term the headers carry: -1 when there is none, or -2 with err. */
static int64_t header_term(const char *const *values, size_t n, struct hc_error *err)
{
    int64_t term = -1;
    if (n > HC_AGENT_FENCE_MAX_HEADERS) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "%s is repeated %zu times (at most %d)",
                     HC_AGENT_FENCE_HEADER, n, HC_AGENT_FENCE_MAX_HEADERS);
        return -2;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (hc_agent_fence_parse(values[i], &v) < 0) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "%s must be a decimal integer from 0 to %" PRId64 ", not '%.40s'",
                         HC_AGENT_FENCE_HEADER, INT64_MAX, values[i]);
            return -2;
        }
        if (i > 0 && v != term) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "%s is repeated with different values (%" PRId64 " and %" PRId64 ")",
                         HC_AGENT_FENCE_HEADER, term, v);
            return -2;
        }
        term = v;
    }
    return term;
}

/* Records term as the highest (f->mu held). */
static int raise_locked(struct hc_agent_fence *f, int64_t term, struct hc_error *err)
{
    char text[32];
    int len = snprintf(text, sizeof(text), "%" PRId64 "\n", term);
    if (hc_file_write_atomic(f->path, text, (size_t)len, 0600, err) < 0) {
        HC_ERROR("%scannot record controller term %" PRId64 ": %s", f->label, term, err->message);
        return hc_error_prefix(err, "cannot record controller term %" PRId64, term);
    }
    HC_INFO("%scontroller term %" PRId64 " is the highest seen (was %" PRId64 ")", f->label, term,
            f->highest);
    f->highest = term;
    return 0;
}

int hc_agent_fence_admit(struct hc_agent_fence *f, int mutating, const char *const *values,
                         size_t n, struct hc_error *err)
{
    int64_t term = header_term(values, n, err);
    if (term == -2)
        return -1;
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    if (term > f->highest) {
        rc = raise_locked(f, term, err);
    } else if (mutating && term < 0 && f->highest > 0) {
        hc_error_set(err, HC_E(STALE_TERM),
                     "a request without a controller term (%s) while term %" PRId64
                     " was seen from a controller",
                     HC_AGENT_FENCE_HEADER, f->highest);
        rc = hc_error_hint(err, "only the current controller may change this node");
    } else if (mutating && term >= 0 && term < f->highest) {
        hc_error_set(err, HC_E(STALE_TERM),
                     "controller term %" PRId64 " is older than term %" PRId64
                     " seen from another controller",
                     term, f->highest);
        rc = hc_error_hint(err, "this controller has been replaced: stop it");
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int hc_agent_fence_request(struct hc_agent_fence *f, struct hc_request *req)
{
    const char *values[HC_AGENT_FENCE_MAX_HEADERS];
    size_t n = hc_req_header_values(req, HC_AGENT_FENCE_HEADER, values, HC_ARRAY_LEN(values));
    const char *method = hc_req_method(req);
    int mutating = strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
    struct hc_error err = {0};
    if (hc_agent_fence_admit(f, mutating, values, n, &err) == 0)
        return 0;
    if (strcmp(err.code, HC_ERR_STALE_TERM) == 0)
        HC_WARN("%srefused %s %s from %s: %s", f->label, method, hc_req_path(req),
                hc_req_peer_addr(req), err.message);
    hc_reply_error(req, &err);
    return 1;
}
