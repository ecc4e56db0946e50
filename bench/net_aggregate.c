/*
 * The controller's side of check-jumbo at 1,000 nodes (issue 14): how long the aggregation of a
 * simulated check of 999,000 directed pairs (bench/net_sim.c) takes — the findings, the result
 * document, its stored text and the failures-only filter of GET /v1/operations/ID/result — on a
 * healthy cluster and with a bad link between two halves of it, and the peak RSS. No network:
 * the probes' answers are simulated as the parser stores them, and then, once, every agent's
 * answer as its JSON text goes through the parser itself (hc_net_probe_answer: parse and apply,
 * one answer at a time as the fan-out does), in full and compact (what a check of more than
 * HC_NET_LIST_ALL_PAIRS pairs asks for). Prints "name value" lines, each
 * time the median of RUNS runs (argv[2], default 5). Run by bench/net-aggregate.sh from a
 * release build.
 * Usage: net_aggregate [NODES [RUNS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/net_sim.h"
#include "common/json_util.h"
#include "controller/remote/net_probe.h"
#include "controller/state/net.h"

#define MAX_RUNS 99

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* The figures of one scenario: findings alone, the result document (findings included), its
 * stored text, and the route's failures-only answer from that text (load, filter, dump). */
static int measure(const char *name, struct hc_net_check *c, int runs)
{
    double t_find[MAX_RUNS], t_doc[MAX_RUNS], t_dump[MAX_RUNS], t_fo[MAX_RUNS];
    size_t stored = 0, answer = 0, findings = 0;
    int passed = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        json_t *f = hc_net_findings(c);
        double t1 = now_s();
        json_t *doc = hc_net_result_json(c);
        double t2 = now_s();
        char *text = hc_json_dump(doc);
        double t3 = now_s();
        if (!f || !doc || !text) {
            fprintf(stderr, "net_aggregate: %s: out of memory\n", name);
            return -1;
        }
        findings = json_array_size(f);
        passed = json_is_true(json_object_get(doc, "passed"));
        stored = strlen(text);
        json_decref(f); /* stored: the operation is done with them, as hc_net_check_run is */
        json_decref(doc);
        double t4 = now_s();
        json_t *loaded = json_loads(text, 0, NULL);
        hc_net_result_failures_only(loaded);
        char *reply = hc_json_dump(loaded);
        double t5 = now_s();
        t_find[r] = t1 - t0;
        t_doc[r] = t2 - t1;
        t_dump[r] = t3 - t2;
        t_fo[r] = t5 - t4;
        answer = reply ? strlen(reply) : 0;
        free(reply);
        free(text);
        json_decref(loaded);
    }
    printf("%s_findings_seconds %.4f\n", name, median(t_find, runs));
    printf("%s_result_document_seconds %.4f\n", name, median(t_doc, runs));
    printf("%s_stored_text_seconds %.4f\n", name, median(t_dump, runs));
    printf("%s_failures_only_seconds %.4f\n", name, median(t_fo, runs));
    printf("%s_stored_bytes %zu\n", name, stored);
    printf("%s_failures_only_bytes %zu\n", name, answer);
    printf("%s_findings %zu\n", name, findings);
    printf("%s_passed %d\n", name, passed);
    return 0;
}

/* Node i's request targets and its agent's answer text for a healthy check, as hcagent writes
 * them (agents/hcagent/probe.c hc_probe_results_json). */
static char *answer_text(const struct hc_net_check *c, size_t i, int compact, json_t **targets)
{
    json_t *results = json_array(), *passed = json_array();
    *targets = json_array();
    for (size_t j = 0; j < c->nnodes; j++) {
        if (j == i)
            continue;
        json_array_append_new(*targets,
                              json_pack("{s:s, s:i}", "address", c->nodes[j].addr, "size", c->mtu));
        if (compact) {
            json_array_append_new(passed, json_integer((json_int_t)(j < i ? j : j - 1)));
            continue;
        }
        json_array_append_new(results, json_pack("{s:s, s:i, s:s, s:n, s:i, s:f, s:s}", "address",
                                                 c->nodes[j].addr, "size", c->mtu, "result", "ok",
                                                 "path_mtu", "largest_ok", c->mtu, "rtt_ms", 0.123,
                                                 "detail", "echo of 9000 bytes in 0.123 ms"));
    }
    json_t *doc = json_pack("{s:o, s:{s:i, s:i, s:i, s:i, s:i}}", "results", results, "neighbors",
                            "entries", 2100, "gc_thresh1", 2176, "gc_thresh2", 8704, "gc_thresh3",
                            17408, "table_fulls", 0);
    if (compact)
        json_object_set_new(doc, "passed", passed);
    else
        json_decref(passed);
    char *text = hc_json_dump(doc);
    json_decref(doc);
    return text;
}

/* Every agent's answer parsed and applied: the controller's CPU for the probes' answers of one
 * check (the network time is the agents'). */
static int measure_answers(struct hc_net_check *c, int compact)
{
    const char *name = compact ? "answers_compact" : "answers_full";
    double busy = 0;
    size_t bytes = 0, n = c->nnodes;
    uint32_t *pairs = calloc(n, sizeof(*pairs));
    if (!pairs)
        return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *targets = NULL;
        char *text = answer_text(c, i, compact, &targets);
        if (!text)
            return -1;
        for (size_t j = 0; j + 1 < n; j++)
            pairs[j] = (uint32_t)(i * (n - 1) + j); /* hc_net_all_pairs is from-major */
        double t0 = now_s();
        json_t *answer = json_loads(text, 0, NULL);
        hc_net_probe_answer(c, i, pairs, n - 1, targets, answer);
        json_decref(answer);
        busy += now_s() - t0;
        bytes += strlen(text);
        free(text);
        json_decref(targets);
    }
    free(pairs);
    size_t ok = 0;
    for (size_t k = 0; k < c->npairs; k++)
        ok += c->pairs[k].result == HC_NET_OK;
    printf("%s_parse_apply_seconds %.4f\n%s_bytes %zu\n%s_pairs_ok %zu\n", name, busy, name, bytes,
           name, ok);
    return ok == c->npairs ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    struct hc_net_check c;
    struct rusage ru;
    int rc = 1;
    if (n < 2 || n > HC_NET_MAX_NODES || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: net_aggregate [NODES (2-%d) [RUNS (1-%d)]]\n", HC_NET_MAX_NODES,
                MAX_RUNS);
        return 2;
    }
    double t0 = now_s();
    if (hc_net_sim_new(&c, n, 9000) < 0) {
        fprintf(stderr, "net_aggregate: cannot build %zu nodes: out of memory\n", n);
        goto cleanup;
    }
    printf("nodes %zu\npairs %zu\nsimulated_check_seconds %.4f\n", n, c.npairs, now_s() - t0);
    printf("pair_struct_bytes %zu\n", sizeof(struct hc_net_pair));
    getrusage(RUSAGE_SELF, &ru);
    printf("simulated_check_rss_kib %ld\n", ru.ru_maxrss);
    if (measure_answers(&c, 0) < 0 || measure_answers(&c, 1) < 0) {
        fprintf(stderr, "net_aggregate: the answers did not parse into every pair ok\n");
        goto cleanup;
    }
    if (measure("healthy", &c, runs) < 0)
        goto cleanup;
    getrusage(RUSAGE_SELF, &ru);
    printf("healthy_peak_rss_kib %ld\n", ru.ru_maxrss);
    hc_net_sim_segment(&c, n / 2, HC_NET_BLACKHOLE, 1504, 1504);
    if (measure("segment", &c, runs) < 0)
        goto cleanup;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak_rss_kib %ld\n", ru.ru_maxrss);
    rc = 0;
cleanup:
    hc_net_check_clear(&c);
    return rc;
}
