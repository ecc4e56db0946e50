/*
 * hcload: the workload client of the tests and the demo (issue 6). Worker threads write and read
 * self-checking blocks on hcstor nodes over plain HTTP, fail over between nodes the way a
 * hypervisor redirects I/O while a node's storage controller is in maintenance, and at the end
 * read back every acknowledged write. docs/hcload.md describes the options, the failover rule,
 * the block format and every report field.
 *
 *   hcload --nodes HOST:PORT[,HOST:PORT...] [--duration SEC] [--workers N] [--keys N] ...
 *
 * This file is the program: options, the run, the shared counters, the timeline and the report;
 * the workers are in hcload_worker.c. Counters, latency histograms and the stall clock are
 * shared under one mutex, taken once per operation (operations take milliseconds; the lock does
 * not show). The main thread owns the signals (blocked in every thread, taken with
 * sigtimedwait), the clock of the run, the timeline and the report.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cmdline.h"
#include "common/util.h"
#include "tools/hcload/hcload.h"

#define SHOWN_MAX 20 /* error lines on stderr; the report counts all of them */

int64_t hcload_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void hcload_say(const struct hcload *L, const char *fmt, ...)
{
    va_list ap;
    if (L->o.quiet)
        return;
    va_start(ap, fmt);
    fputs("hcload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- histogram ---- */

static int hist_index(int64_t us)
{
    uint64_t v = us < 0 ? 0 : (uint64_t)us;
    if (v < HCLOAD_HIST_SUB)
        return (int)v;
    int shift = 63 - __builtin_clzll(v) - 6; /* v >> shift is in [64, 128) */
    int idx = shift * HCLOAD_HIST_SUB + (int)(v >> shift);
    return idx < HCLOAD_HIST_BUCKETS ? idx : HCLOAD_HIST_BUCKETS - 1;
}

/* The largest value a bucket holds: percentiles err on the slow side. */
static int64_t hist_upper(int idx)
{
    if (idx < 2 * HCLOAD_HIST_SUB)
        return idx;
    int shift = idx / HCLOAD_HIST_SUB - 1;
    return ((int64_t)(idx - shift * HCLOAD_HIST_SUB + 1) << shift) - 1;
}

static void hist_add(struct hcload_hist *h, int64_t us)
{
    h->n[hist_index(us)]++;
    h->count++;
    if (us > h->max_us)
        h->max_us = us;
}

static int64_t hist_pct(const struct hcload_hist *h, double p)
{
    uint64_t rank = (uint64_t)(p * (double)h->count + 0.999999), seen = 0;
    if (h->count == 0)
        return 0;
    for (int i = 0; i < HCLOAD_HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= rank && seen > 0)
            return hist_upper(i) < h->max_us ? hist_upper(i) : h->max_us;
    }
    return h->max_us;
}

/* ---- shared counters ---- */

void hcload_stats_ok(struct hcload *L, int write, int64_t lat_us)
{
    struct hcload_stats *s = &L->st;
    pthread_mutex_lock(&s->mu);
    int64_t now = hcload_mono_us(); /* read under the lock, so last_ok_us never goes back */
    if (write)
        s->writes++;
    else
        s->reads++;
    hist_add(&s->all, lat_us);
    hist_add(&s->tick, lat_us);
    if (now - s->last_ok_us > s->stall_us)
        s->stall_us = now - s->last_ok_us;
    s->last_ok_us = now;
    pthread_mutex_unlock(&s->mu);
}

/* Counts a failed operation or a data error in *counter and shows the first few. */
void hcload_stats_bad(struct hcload *L, uint64_t *counter, const char *what)
{
    struct hcload_stats *s = &L->st;
    pthread_mutex_lock(&s->mu);
    (*counter)++;
    /* Verification runs after this worker's load, while others may still load: a lost key is
     * not an error of the current timeline second. */
    if (counter != &s->v_lost)
        s->tick_errors++;
    if (s->shown++ < SHOWN_MAX)
        hcload_say(L, "%s", what);
    if (s->shown == SHOWN_MAX)
        hcload_say(L, "further errors are counted but not shown");
    pthread_mutex_unlock(&s->mu);
}

void hcload_stats_add(struct hcload *L, uint64_t *counter, uint64_t n)
{
    pthread_mutex_lock(&L->st.mu);
    *counter += n;
    pthread_mutex_unlock(&L->st.mu);
}

void hcload_stats_load_done(struct hcload *L)
{
    pthread_mutex_lock(&L->st.mu);
    int64_t now = hcload_mono_us();
    if (now > L->st.load_end_us)
        L->st.load_end_us = now;
    pthread_mutex_unlock(&L->st.mu);
    atomic_fetch_sub(&L->loading, 1);
}

/* ---- the run: signals, timeline, progress ---- */

/* Waits up to us for SIGINT or SIGTERM: the first stops the load, the next one abandons the
 * operations in flight and the verification. */
static void wait_signal(struct hcload *L, int64_t us)
{
    sigset_t set;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = sigtimedwait(&set, NULL, &ts);
    const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (sig <= 0)
        return;
    if (hc_stop_request(&L->stop))
        hcload_say(L, "%s: stopping, the operations in flight finish first", name);
    else if (hc_stop_request(&L->abort_run))
        hcload_say(L, "%s again: abandoning the operations in flight", name);
}

static double ms(int64_t us)
{
    return (double)us / 1000.0;
}

/* One timeline line: the operations completed since the previous line. */
static void timeline_line(struct hcload *L)
{
    struct hcload_stats *s = &L->st;
    pthread_mutex_lock(&s->mu);
    uint64_t ops = s->tick.count, errors = s->tick_errors;
    int64_t p99 = hist_pct(&s->tick, 0.99), max = s->tick.max_us;
    memset(&s->tick, 0, sizeof(s->tick));
    s->tick_errors = 0;
    pthread_mutex_unlock(&s->mu);
    if (!L->timeline)
        return;
    fprintf(L->timeline,
            "{\"t\":%.3f,\"ops\":%llu,\"errors\":%llu,\"p99_ms\":%.3f,"
            "\"max_ms\":%.3f}\n",
            (double)hc_now_ms() / 1000.0, (unsigned long long)ops, (unsigned long long)errors,
            ms(p99), ms(max));
    fflush(L->timeline);
}

static void progress_line(struct hcload *L, int64_t now)
{
    struct hcload_stats *s = &L->st;
    pthread_mutex_lock(&s->mu);
    uint64_t ops = s->writes + s->reads, errors = s->errors + s->stale + s->corrupt;
    uint64_t failovers = s->failovers;
    pthread_mutex_unlock(&s->mu);
    hcload_say(L, "%.0f s: %llu ops, %llu errors, %llu failovers",
               (double)(now - s->start_us) / 1e6, (unsigned long long)ops,
               (unsigned long long)errors, (unsigned long long)failovers);
}

/* The main thread during the load: ends it after --duration (or on a signal), writes the
 * timeline every second and a progress line every 5 s, until every worker stopped loading. */
static void run_load(struct hcload *L)
{
    int64_t start = L->st.start_us, tick = start + 1000000, progress = start + 5000000;
    int64_t end = L->o.duration_s > 0 ? start + (int64_t)(L->o.duration_s * 1e6) : INT64_MAX;
    int64_t limit;
    while (atomic_load(&L->loading) > 0) {
        int64_t now = hcload_mono_us(), wake = tick;
        if (now >= end && hc_stop_request(&L->stop))
            hcload_say(L, "%g s elapsed: stopping", L->o.duration_s);
        if (now >= tick) {
            timeline_line(L);
            tick += 1000000;
        }
        if (now >= progress) {
            progress_line(L, now);
            progress += 5000000;
        }
        if (!hc_stop_requested(&L->stop) && end < wake)
            wake = end;
        /* Once stopping, look often: the load ends when the last worker's operation does. */
        wake -= now;
        limit = hc_stop_requested(&L->stop) ? 10000 : 100000;
        wait_signal(L, wake < 1000 ? 1000 : wake > limit ? limit : wake);
    }
    timeline_line(L); /* the last, partial second */
}

static int start_workers(struct hcload *L, pthread_t *threads)
{
    int n = (int)L->o.workers;
    atomic_store(&L->loading, n);
    atomic_store(&L->verifying, n);
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&threads[i], NULL, hcload_worker_main, &L->workers[i]);
        if (rc != 0) {
            fprintf(stderr, "hcload: cannot start worker %d: %s\n", i, strerror(rc));
            hc_stop_request(&L->stop);
            hc_stop_request(&L->abort_run);
            atomic_fetch_sub(&L->loading, n - i);
            atomic_fetch_sub(&L->verifying, n - i);
            return i;
        }
    }
    return n;
}

/* ---- report ---- */

static json_t *report_json(struct hcload *L)
{
    struct hcload_stats *s = &L->st;
    int64_t dur = s->load_end_us - s->start_us, stall = s->load_end_us - s->last_ok_us;
    uint64_t ops = s->writes + s->reads, keys = 0;
    for (long i = 0; i < L->o.workers; i++)
        keys += L->workers[i].n_acked;
    int v_ok = s->v_lost == 0 && s->v_checked == keys;
    int ok = s->errors == 0 && s->stale == 0 && s->corrupt == 0 && v_ok;
    double rate = dur > 0 ? (double)ops * 1e6 / (double)dur : 0;
    if (s->stall_us > stall)
        stall = s->stall_us;
    json_t *latency = json_pack("{s:f, s:f, s:f}", "p50", ms(hist_pct(&s->all, 0.5)), "p99",
                                ms(hist_pct(&s->all, 0.99)), "max", ms(s->all.max_us));
    json_t *verify = json_pack("{s:I, s:I, s:I, s:I, s:b}", "keys", (json_int_t)keys, "checked",
                               (json_int_t)s->v_checked, "lost", (json_int_t)s->v_lost,
                               "unreachable", (json_int_t)s->v_unreachable, "ok", v_ok);
    /* "o" takes over latency and verify, also when json_pack fails. */
    return json_pack("{s:s, s:f, s:I, s:f, s:I, s:I, s:I, s:I, s:o, s:f, s:I, s:I, s:o, s:b}",
                     "prefix", L->o.prefix, "duration_s", (double)(dur / 1000) / 1000.0, "ops",
                     (json_int_t)ops, "ops_per_sec", (double)(int64_t)(rate * 10 + 0.5) / 10,
                     "writes", (json_int_t)s->writes, "reads", (json_int_t)s->reads, "errors",
                     (json_int_t)s->errors, "failovers", (json_int_t)s->failovers, "latency_ms",
                     latency, "longest_stall_ms", ms(stall), "stale_reads", (json_int_t)s->stale,
                     "corrupt_reads", (json_int_t)s->corrupt, "verify", verify, "ok", ok);
}

/* Text and JSON come from the same object, so the two cannot drift: nested objects print as
 * dotted names ("latency_ms.p99"). */
static void print_text(json_t *obj, const char *prefix)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        char name[128];
        snprintf(name, sizeof(name), "%s%s", prefix, k);
        if (json_is_object(v)) {
            char sub[130];
            snprintf(sub, sizeof(sub), "%s.", name);
            print_text(v, sub);
            continue;
        }
        char *text =
            json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
        printf("%-20s %s\n", name, json_is_string(v) ? json_string_value(v) : text ? text : "?");
        free(text);
    }
}

static int print_report(struct hcload *L)
{
    json_t *r = report_json(L);
    if (!r) {
        fprintf(stderr, "hcload: cannot build the report: out of memory\n");
        return 0;
    }
    int ok = json_is_true(json_object_get(r, "ok"));
    if (L->o.json) {
        char *text = json_dumps(r, JSON_COMPACT | JSON_REAL_PRECISION(15));
        printf("%s\n", text ? text : "{}");
        free(text);
    } else {
        print_text(r, "");
    }
    fflush(stdout);
    json_decref(r);
    return ok;
}

/* ---- options ---- */

__attribute__((format(printf, 1, 2))) static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hcload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see hcload --help)\n", stderr);
    va_end(ap);
    return -1;
}

static int parse_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end || errno || v < min || v > max)
        return bad("invalid --%s '%s': expected an integer from %ld to %ld", opt, s, min, max);
    *out = v;
    return 0;
}

static int parse_double(const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* Written this way round so that NaN fails too. */
    if (s[0] == '\0' || s[0] == ' ' || *end || errno || !(v >= min && v <= max))
        return bad("invalid --%s '%s': expected a number from %g to %g", opt, s, min, max);
    *out = v;
    return 0;
}

static int parse_nodes(struct hcload *L, const char *text)
{
    size_t n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    L->nodes = calloc(n, sizeof(*L->nodes));
    if (!L->nodes)
        return bad("out of memory");
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        char item[300], host[256];
        int port = 0;
        snprintf(item, sizeof(item), "%.*s", (int)len, p);
        if (len >= sizeof(item) || hc_split_host_port(item, host, sizeof(host), &port, NULL) < 0 ||
            port == 0)
            return bad("invalid --nodes entry '%.*s': expected HOST:PORT", (int)len, p);
        snprintf(L->nodes[L->n_nodes++], sizeof(*L->nodes),
                 strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, port);
        p += len;
        if (!*p)
            return 0;
    }
}

static int prefix_valid(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= HCLOAD_PREFIX_MAX && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* The values, checked in the order they were checked by hand. Returns 0 or -1 after a
 * one-line error on stderr. */
static int read_options(struct hcload *L, const struct hc_cmdline *cl)
{
    static const struct {
        const char *name;
        long min, max;
        size_t at; /* offset of the long in struct hcload_opts */
    } longs[] = {
        {"workers", 1, 1024, offsetof(struct hcload_opts, workers)},
        {"keys", 1, 1000000, offsetof(struct hcload_opts, keys)},
        {"block-size", HCLOAD_BLOCK_MIN, HCLOAD_BLOCK_MAX,
         offsetof(struct hcload_opts, block_size)},
        {"request-timeout", 1, 3600000, offsetof(struct hcload_opts, request_timeout_ms)},
        {"op-timeout", 1, 86400000, offsetof(struct hcload_opts, op_timeout_ms)},
    };
    struct hcload_opts *o = &L->o;
    const char *v, *prefix = hc_cmdline_opt_str(cl, "prefix");
    size_t nnodes;
    const char *const *nodes = hc_cmdline_opt_list(cl, "nodes", &nnodes);
    *o = (struct hcload_opts){.duration_s = 10,
                              .workers = 4,
                              .keys = 200,
                              .block_size = 4096,
                              .read_ratio = 0.5,
                              .request_timeout_ms = 2000,
                              .op_timeout_ms = 20000};
    snprintf(o->prefix, sizeof(o->prefix), "hcload-%lx-%d", (long)time(NULL), (int)getpid());
    if (nnodes > 1)
        return bad("--nodes given twice");
    if (parse_nodes(L, nodes[0]) < 0)
        return -1;
    if ((v = hc_cmdline_opt_str(cl, "duration")) &&
        parse_double("duration", v, 0, 1e7, &o->duration_s) < 0)
        return -1;
    for (size_t i = 0; i < HC_ARRAY_LEN(longs); i++)
        if ((v = hc_cmdline_opt_str(cl, longs[i].name)) &&
            parse_long(longs[i].name, v, longs[i].min, longs[i].max,
                       (long *)((char *)o + longs[i].at)) < 0)
            return -1;
    if ((v = hc_cmdline_opt_str(cl, "read-ratio")) &&
        parse_double("read-ratio", v, 0, 1, &o->read_ratio) < 0)
        return -1;
    if (prefix && !prefix_valid(prefix))
        return bad("invalid --prefix '%s': 1 to %d of [A-Za-z0-9._-], not starting with '.'",
                   prefix, HCLOAD_PREFIX_MAX);
    if (prefix)
        snprintf(o->prefix, sizeof(o->prefix), "%s", prefix);
    o->timeline = hc_cmdline_opt_str(cl, "timeline");
    o->json = hc_cmdline_opt_set(cl, "json");
    o->quiet = hc_cmdline_opt_set(cl, "quiet");
    return 0;
}

/* ---- main ---- */

static int run(struct hcload *L)
{
    int n = (int)L->o.workers, started = 0, ok = 0;
    pthread_t *threads = calloc((size_t)n, sizeof(*threads));
    L->workers = calloc((size_t)n, sizeof(*L->workers));
    if (!threads || !L->workers) {
        fprintf(stderr, "hcload: out of memory\n");
        goto cleanup;
    }
    for (int i = 0; i < n; i++)
        if (hcload_worker_init(L, &L->workers[i], i) < 0) {
            fprintf(stderr, "hcload: cannot set up worker %d: out of memory\n", i);
            goto cleanup;
        }
    hcload_say(L, "%d workers x %ld keys of %ld bytes, read ratio %g, %d node(s), prefix %s, %s", n,
               L->o.keys, L->o.block_size, L->o.read_ratio, L->n_nodes, L->o.prefix,
               L->o.duration_s > 0 ? "timed" : "until SIGINT/SIGTERM");
    L->st.start_us = L->st.last_ok_us = L->st.load_end_us = hcload_mono_us();
    started = start_workers(L, threads);
    run_load(L);
    hcload_say(L, "load stopped; reading back every acknowledged write");
    while (atomic_load(&L->verifying) > 0)
        wait_signal(L, 100000);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (started == n)
        ok = print_report(L);
cleanup:
    for (int i = 0; L->workers && i < n; i++)
        hcload_worker_free(&L->workers[i]);
    free(L->workers);
    free(threads);
    return ok ? 0 : 1;
}

/* What the handler reads: the parsed command line (common/cmdline.h). */
struct hc_cmd_ctx {
    struct hc_cmdline cl;
};

static int cmd_hcload(struct hc_cmd_ctx *ctx)
{
    static struct hcload L; /* holds the histograms: too big for the stack */
    sigset_t set;
    int rc;
    if (read_options(&L, &ctx->cl) < 0) {
        free(L.nodes);
        return 2;
    }
    if (L.o.timeline && !(L.timeline = fopen(L.o.timeline, "w"))) {
        fprintf(stderr, "hcload: cannot open --timeline '%s': %s\n", L.o.timeline, strerror(errno));
        free(L.nodes);
        return 2;
    }
    /* Blocked before any thread starts, so only the main thread's sigtimedwait takes them. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&L.st.mu, NULL);
    rc = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        fprintf(stderr, "hcload: cannot initialise libcurl\n");
    else
        rc = run(&L);
    curl_global_cleanup();
    pthread_mutex_destroy(&L.st.mu);
    if (L.timeline)
        fclose(L.timeline);
    free(L.nodes);
    return rc;
}

/* ---- the command line ---- */

#define STR_(x) #x
#define STR(x) STR_(x)

static const struct hc_cmd_opt hcload_opts[] = {
    HC_OPT(.name = "nodes", .type = HC_OPT_LIST, .required = 1,
           .value_name = "HOST:PORT[,HOST:PORT...]", .help = "the hcstor members to load"),
    HC_OPT(.name = "duration", .type = HC_OPT_STRING, .value_name = "SEC",
           .help = "how long to load, 0 = until SIGINT/SIGTERM (default 10)"),
    HC_OPT(.name = "workers", .type = HC_OPT_STRING, .value_name = "N",
           .help = "worker threads; worker i starts on node i mod n (default 4)"),
    HC_OPT(.name = "keys", .type = HC_OPT_STRING, .value_name = "N",
           .help = "keys per worker (default 200)"),
    HC_OPT(.name = "block-size", .type = HC_OPT_STRING, .value_name = "BYTES",
           .help = STR(HCLOAD_BLOCK_MIN) " to 1048576 (default 4096)"),
    HC_OPT(.name = "read-ratio", .type = HC_OPT_STRING, .value_name = "R",
           .help = "share of reads, 0 to 1 (default 0.5)"),
    HC_OPT(.name = "request-timeout", .type = HC_OPT_STRING, .value_name = "MS",
           .help = "one request to one node (default 2000)"),
    HC_OPT(.name = "op-timeout", .type = HC_OPT_STRING, .value_name = "MS",
           .help = "an operation fails after retrying this long (default 20000)"),
    HC_OPT(.name = "prefix", .type = HC_OPT_STRING, .value_name = "STR",
           .help = "key prefix (default hcload-TIME-PID)"),
    HC_OPT(.name = "timeline", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "one JSON line per second: t, ops, errors, p99_ms, max_ms",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "json", .type = HC_OPT_BOOL, .help = "the report as one JSON object"),
    HC_OPT(.name = "quiet", .type = HC_OPT_BOOL, .help = "no progress on stderr"),
    {.name = NULL},
};

static const struct hc_cmd_verb hcload_command = {
    .name = "hcload",
    .handler = cmd_hcload,
    .opts = hcload_opts,
    .summary = "a workload client of hcstor: writes, reads back, and reports what it saw"};

static const struct hc_cmdline_prog hcload_prog = {
    .name = "hcload",
    .summary = "a workload client of hcstor",
    .command = &hcload_command,
    .globals = hc_cmdline_help_only,
    .epilog = "Exit status: 0 no failed operation, no stale or corrupt read and every\n"
              "acknowledged write read back; 1 otherwise; 2 bad usage.\n",
    .usage_exit = 2,
};

int main(int argc, char **argv)
{
    struct hc_cmd_ctx ctx;
    return hc_cmdline_main(&hcload_prog, &ctx.cl, &ctx, argc, argv);
}
