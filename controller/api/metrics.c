/*
 * Prometheus metrics of the controller (see metrics.h): process-wide counters fed by the API
 * and the poller, database gauges read at scrape time, rendered in the text format 0.0.4.
 */
#include "controller/api/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/op_state.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/state/certs.h"
#include "controller/state/nodes.h"

#define CODE_MIN 100
#define CODE_MAX 599

static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "other"};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))

/* API requests by method and status code. */
static atomic_uint_fast64_t requests[NMETHODS][CODE_MAX - CODE_MIN + 1];

/* Poll latency buckets in seconds: agents answer in milliseconds on a healthy network, and
 * the agent timeout (at most 5 s) bounds the top. */
static const double bucket_s[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                  0.1,   0.25,   0.5,   1,    2.5,   5};
#define NBUCKETS (sizeof(bucket_s) / sizeof(bucket_s[0]))

static struct {
    pthread_mutex_t mu;
    uint64_t bucket[NBUCKETS]; /* non-cumulative; rendered cumulative */
    uint64_t count;
    double sum_s;
} latency = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0};

static atomic_uint_fast64_t polls_ok, polls_failed;

static size_t method_index(const char *method)
{
    for (size_t i = 0; i + 1 < NMETHODS; i++)
        if (method && strcmp(method, methods[i]) == 0)
            return i;
    return NMETHODS - 1;
}

void hc_metrics_api_request(const char *method, int status)
{
    if (status < CODE_MIN || status > CODE_MAX)
        return;
    atomic_fetch_add_explicit(&requests[method_index(method)][status - CODE_MIN], 1,
                              memory_order_relaxed);
}

void hc_metrics_agent_poll(int ok, int64_t latency_ms)
{
    if (!ok) {
        atomic_fetch_add_explicit(&polls_failed, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&polls_ok, 1, memory_order_relaxed);
    double s = (double)(latency_ms < 0 ? 0 : latency_ms) / 1000.0;
    pthread_mutex_lock(&latency.mu);
    for (size_t i = 0; i < NBUCKETS; i++)
        if (s <= bucket_s[i]) {
            latency.bucket[i]++;
            break;
        }
    latency.count++; /* above the last bucket: only +Inf (the count) holds it */
    latency.sum_s += s;
    pthread_mutex_unlock(&latency.mu);
}

void hc_metrics_reset(void)
{
    for (size_t m = 0; m < NMETHODS; m++)
        for (size_t c = 0; c <= CODE_MAX - CODE_MIN; c++)
            atomic_store(&requests[m][c], 0);
    atomic_store(&polls_ok, 0);
    atomic_store(&polls_failed, 0);
    pthread_mutex_lock(&latency.mu);
    memset(latency.bucket, 0, sizeof(latency.bucket));
    latency.count = 0;
    latency.sum_s = 0;
    pthread_mutex_unlock(&latency.mu);
}

/* ---------------------------------------------------------------- rendering */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format wants (backslash, double quote, newline). */
static void label_value(FILE *f, const char *v)
{
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f);
        if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
    fputc('"', f);
}

static void sample(FILE *f, const char *name, const char *label, const char *value, double v)
{
    fputs(name, f);
    if (label) {
        fprintf(f, "{%s=", label);
        label_value(f, value);
        fputc('}', f);
    }
    fprintf(f, " %.17g\n", v);
}

static int in_list(const char *word, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(word, list[i]) == 0)
            return 1;
    return 0;
}

/* A gauge family from rows [{"v": value, "n": count}] (taken: rows may be NULL after a failed
 * query, with err): every value of always[] is present (0 when no row has it), so that series
 * do not appear and vanish. */
static int gauge_by(FILE *f, const char *name, const char *help, const char *label, json_t *rows,
                    const char *const *always)
{
    const json_t *row;
    size_t i;
    if (!rows)
        return -1;
    family(f, name, "gauge", help);
    for (size_t k = 0; always[k]; k++) {
        int64_t n = 0;
        json_array_foreach(rows, i, row)
        {
            if (strcmp(hc_json_str(row, "v", ""), always[k]) == 0)
                n = hc_json_int(row, "n", 0);
        }
        sample(f, name, label, always[k], (double)n);
    }
    json_array_foreach(rows, i, row)
    {
        const char *v = hc_json_str(row, "v", NULL);
        if (v && !in_list(v, always))
            sample(f, name, label, v, (double)hc_json_int(row, "n", 0));
    }
    json_decref(rows);
    return 0;
}

static int render_db(FILE *f, struct hc_db *db, struct hc_error *err)
{
    static const char *const health[] = {"reachable", "unreachable", "stalled", "unknown", NULL};
    static const char *const states[] = {"joined", "removing", NULL};
    static const char *const maint[] = {"none", NULL};
    const char *const *ops = hc_op_state_names;
    return gauge_by(f, "hcctld_nodes", "Nodes by health as last polled.", "health",
                    hc_nodes_count_by(db, "health", err), health) < 0 ||
                   gauge_by(f, "hcctld_nodes_by_state", "Nodes by membership state.", "state",
                            hc_nodes_count_by(db, "state", err), states) < 0 ||
                   gauge_by(f, "hcctld_nodes_by_maintenance", "Nodes by storage maintenance state.",
                            "maintenance", hc_nodes_count_by(db, "maintenance", err), maint) < 0 ||
                   gauge_by(f, "hcctld_operations", "Operations by state.", "state",
                            hc_db_query_json(db, err,
                                             "SELECT state AS v, COUNT(*) AS n FROM "
                                             "operations GROUP BY state",
                                             ""),
                            ops) < 0
               ? -1
               : 0;
}

static void render_latency(FILE *f)
{
    uint64_t bucket[NBUCKETS], count;
    double sum;
    pthread_mutex_lock(&latency.mu);
    memcpy(bucket, latency.bucket, sizeof(bucket));
    count = latency.count;
    sum = latency.sum_s;
    pthread_mutex_unlock(&latency.mu);
    family(f, "hcctld_agent_poll_latency_seconds", "histogram",
           "Time an agent took to answer GET /v1/status, for answered polls.");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < NBUCKETS; i++) {
        cumulative += bucket[i];
        fprintf(f, "hcctld_agent_poll_latency_seconds_bucket{le=\"%g\"} %llu\n", bucket_s[i],
                (unsigned long long)cumulative);
    }
    fprintf(f, "hcctld_agent_poll_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
            (unsigned long long)count);
    fprintf(f, "hcctld_agent_poll_latency_seconds_sum %.17g\n", sum);
    fprintf(f, "hcctld_agent_poll_latency_seconds_count %llu\n", (unsigned long long)count);
    family(f, "hcctld_agent_polls_total", "counter", "Agent polls by result.");
    sample(f, "hcctld_agent_polls_total", "result", "ok", (double)atomic_load(&polls_ok));
    sample(f, "hcctld_agent_polls_total", "result", "failed", (double)atomic_load(&polls_failed));
}

static void render_requests(FILE *f)
{
    family(f, "hcctld_api_requests_total", "counter",
           "API requests answered, by method and HTTP status code.");
    for (size_t m = 0; m < NMETHODS; m++)
        for (int c = CODE_MIN; c <= CODE_MAX; c++) {
            uint64_t n = atomic_load_explicit(&requests[m][c - CODE_MIN], memory_order_relaxed);
            if (n)
                fprintf(f, "hcctld_api_requests_total{method=\"%s\",code=\"%d\"} %llu\n",
                        methods[m], c, (unsigned long long)n);
        }
}

_Static_assert(HC_POLLER_CYCLE_WINDOW == 256, "the poll cycle help text names the window");

static void render_process(FILE *f, const struct hc_controller *ctl)
{
    family(f, "hcctld_build_info", "gauge", "The controller's version (the value is always 1).");
    sample(f, "hcctld_build_info", "version", HC_VERSION, 1);
    if (!ctl)
        return;
    family(f, "hcctld_uptime_seconds", "gauge", "Seconds since the controller started.");
    sample(f, "hcctld_uptime_seconds", NULL, NULL,
           (double)(hc_mono_ms() - ctl->started_mono_ms) / 1000.0);
    if (ctl->poller) {
        family(f, "hcctld_poll_cycles_total", "counter", "Completed agent poll cycles.");
        sample(f, "hcctld_poll_cycles_total", NULL, NULL, (double)hc_poller_cycles(ctl->poller));
        struct hc_poller_cycle_stats st;
        int n = hc_poller_cycle_stats(ctl->poller, &st);
        if (n > 0) {
            family(f, "hcctld_poll_cycle_seconds", "summary",
                   "Duration of the poll cycles, over the last 256 cycles.");
            sample(f, "hcctld_poll_cycle_seconds", "quantile", "0.5", (double)st.p50_ms / 1000.0);
            sample(f, "hcctld_poll_cycle_seconds", "quantile", "0.99", (double)st.p99_ms / 1000.0);
            sample(f, "hcctld_poll_cycle_seconds_sum", NULL, NULL, (double)st.sum_ms / 1000.0);
            sample(f, "hcctld_poll_cycle_seconds_count", NULL, NULL, (double)n);
            family(f, "hcctld_poll_cycle_last_seconds", "gauge",
                   "Duration of the last completed poll cycle.");
            sample(f, "hcctld_poll_cycle_last_seconds", NULL, NULL, (double)st.last_ms / 1000.0);
        }
    }
}

/* When each certificate ends (docs/certificates.md), for alerts such as
 * "hcctld_certificate_expiry_timestamp_seconds - time() < 30 * 86400", and the agents'
 * certificates by state. ctl may be NULL (tests): then only the agents'. */
static int render_certs(FILE *f, struct hc_db *db, const struct hc_controller *ctl,
                        struct hc_error *err)
{
    static const char *const kinds[] = {"ca", "server", "client", "agents"};
    static const char *const states[] = {"valid",   "expiring", "renewing",
                                         "expired", "unknown",  NULL};
    int64_t ends[4] = {0};
    if (ctl && hc_certs_not_after(ctl, db, ends, err) < 0)
        return -1;
    family(f, "hcctld_certificate_expiry_timestamp_seconds", "gauge",
           "When the certificate ends (Unix time): the CA, the controller's server and client "
           "certificates, and the agents' earliest; 0 when unknown.");
    for (int i = 0; i < 4; i++)
        sample(f, "hcctld_certificate_expiry_timestamp_seconds", "certificate", kinds[i],
               (double)(ends[i] / 1000));
    return gauge_by(f, "hcctld_agent_certificates", "Agents' certificates by state.", "state",
                    hc_nodes_count_by(db, "cert_state", err), states);
}

char *hc_metrics_render(struct hc_db *db, const struct hc_controller *ctl, struct hc_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    int rc = render_db(f, db, err);
    if (rc == 0)
        rc = render_certs(f, db, ctl, err);
    render_latency(f);
    render_requests(f);
    render_process(f, ctl);
    fclose(f);
    if (rc < 0) {
        free(text);
        return NULL;
    }
    return text;
}

void hc_res_metrics(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    char *text = hc_metrics_render(api->db, api->ctl, &err);
    if (!text) {
        hc_reply_error(req, &err);
        return;
    }
    hc_reply_data(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    free(text);
}
