/*
 * The pre-flight checks (checks.h). One function per check id judges the facts the nodes table
 * holds (hc_nodes_check_facts) and appends its results; hc_checks_run counts them. The words of
 * each message and remedy say what an operator does next, in one line.
 */
#include "controller/state/checks.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/state/config.h"
#include "controller/state/nodes.h"

static const char *const check_ids[] = {
#define X(id) #id,
    HC_CHECK_IDS
#undef X
};

int hc_check_id_valid(const char *id)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(check_ids); i++)
        if (strcmp(check_ids[i], id) == 0)
            return 1;
    return 0;
}

/* Appends one result; node NULL is the cluster's. */
static void add(json_t *out, const char *id, const char *severity, const char *node,
                const char *remedy, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add(json_t *out, const char *id, const char *severity, const char *node,
                const char *remedy, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_array_append_new(out, json_pack("{s:s, s:s, s:o, s:s, s:s}", "id", id, "severity",
                                         severity, "node", node ? json_string(node) : json_null(),
                                         "message", msg, "remedy", remedy));
}

static const char *str(const json_t *fact, const char *key)
{
    return hc_json_str(fact, key, NULL);
}

static int reachable(const json_t *fact)
{
    const char *h = str(fact, "health");
    return h && strcmp(h, "reachable") == 0;
}

/* A check on data only a reachable node reports: the unknown result for one that is not. */
static int unknown_unless_reachable(json_t *out, const char *id, const json_t *fact,
                                    const char *what)
{
    if (reachable(fact))
        return 0;
    add(out, id, "unknown", str(fact, "name"), "see the node_unreachable check",
        "%s unknown: the node is %s", what, str(fact, "health") ? str(fact, "health") : "unknown");
    return 1;
}

static void check_unreachable(json_t *out, const json_t *fact)
{
    const char *name = str(fact, "name"), *health = str(fact, "health");
    const char *detail = str(fact, "health_detail") ? str(fact, "health_detail") : "no detail";
    int in_maintenance = strcmp(hc_json_str(fact, "maintenance", "none"), "none") != 0;
    if (reachable(fact))
        add(out, "node_unreachable", "ok", name, "", "the agent answers");
    else if (!health || strcmp(health, "unknown") == 0)
        add(out, "node_unreachable", "unknown", name,
            "wait for a poll cycle; check the agent runs: 'hcctl node show NAME'",
            "the controller has not polled the node yet");
    else
        add(out, "node_unreachable", in_maintenance ? "warning" : "error", name,
            "check the agent and the network to it ('hcctl node show NAME'), or remove the node",
            "the node is %s%s: %s", health, in_maintenance ? " (in maintenance)" : "", detail);
}

static void check_service(json_t *out, const json_t *fact)
{
    const char *name = str(fact, "name"), *state = str(fact, "service_state");
    const json_t *healthy = json_object_get(fact, "service_healthy");
    if (unknown_unless_reachable(out, "service_unhealthy", fact, "the service's state"))
        return;
    if (!state)
        add(out, "service_unhealthy", "unknown", name, "upgrade the agent",
            "the agent did not report the service's state");
    else if (strcmp(state, "not_installed") == 0)
        add(out, "service_unhealthy", "warning", name,
            "install the software: 'hcctl upgrade --to VERSION'", "no service is installed");
    else if (strcmp(state, "starting") == 0 || strcmp(state, "stopping") == 0)
        add(out, "service_unhealthy", "warning", name, "wait, then check again",
            "the service is %s", state);
    else if (strcmp(state, "stopped") == 0) /* by someone: an upgrade counts the node as down */
        add(out, "service_unhealthy", "warning", name,
            "start it if it should run: 'hcctl upgrade' counts the node as unavailable",
            "the service is stopped");
    else if (strcmp(state, "running") != 0)
        add(out, "service_unhealthy", "error", name,
            "look at the service's history: 'hcctl node show NAME'; start it or roll back",
            "the service is %s", state);
    else if (json_is_null(healthy) || !healthy)
        add(out, "service_unhealthy", "unknown", name, "upgrade the agent",
            "the service runs; the agent did not report its health");
    else if (json_integer_value(healthy) == 0)
        add(out, "service_unhealthy", "error", name,
            "look at the service's log and health hook on the node",
            "the service runs but fails its health check");
    else
        add(out, "service_unhealthy", "ok", name, "", "the service runs and is healthy");
}

static void check_mtu(json_t *out, const json_t *fact, const json_t *cluster_mtu)
{
    const char *name = str(fact, "name");
    const json_t *mtu = json_object_get(fact, "storage_mtu");
    if (unknown_unless_reachable(out, "mtu_mismatch", fact, "the storage MTU"))
        return;
    if (!json_is_integer(cluster_mtu))
        add(out, "mtu_mismatch", "unknown", name, "set it: 'hcctl net mtu set MTU'",
            "the cluster's storage MTU is not set");
    else if (!json_is_integer(mtu))
        add(out, "mtu_mismatch", "unknown", name,
            "give the node a storage interface (agent.json storage_interface)",
            "the node has no storage interface the controller knows");
    else if (json_integer_value(mtu) != json_integer_value(cluster_mtu))
        add(out, "mtu_mismatch", "error", name, "apply the cluster's MTU: 'hcctl net mtu set MTU'",
            "the storage interface's MTU is %" PRId64 ", the cluster's %" PRId64,
            (int64_t)json_integer_value(mtu), (int64_t)json_integer_value(cluster_mtu));
    else
        add(out, "mtu_mismatch", "ok", name, "", "the storage MTU is the cluster's (%" PRId64 ")",
            (int64_t)json_integer_value(mtu));
}

/* One certificate: node NULL for the controller's own, what names it in the message. */
static void check_cert(json_t *out, const char *node, const char *what, const char *pem,
                       int64_t now_ms)
{
    int64_t not_before, not_after;
    struct hc_error err = {0};
    char when[40], remedy[200];
    if (node)
        snprintf(remedy, sizeof(remedy), "renew it now: 'hcctl node renew-cert %s'", node);
    else
        snprintf(remedy, sizeof(remedy), "%s",
                 "renew the controller's certificates: restart hcctld, or rotate the CA "
                 "('hcctld ca rotate', docs/certificates.md)");
    X509 *cert = pem ? hc_pki_cert_from_pem(pem, &err) : NULL;
    int readable = cert && hc_pki_cert_validity(cert, &not_before, &not_after, &err) == 0;
    X509_free(cert);
    if (!readable) {
        add(out, "cert_expiring", "unknown", node, remedy, "the %s certificate is unreadable%s%s",
            what, err.message[0] ? ": " : "", err.message);
        return;
    }
    hc_time_format(not_after, when, sizeof(when));
    int64_t left = not_after - now_ms;
    if (left <= 0)
        add(out, "cert_expiring", "error", node, remedy, "the %s certificate expired at %s", what,
            when);
    else if (now_ms >= hc_pki_warn_at_ms(not_before, not_after))
        add(out, "cert_expiring",
            now_ms >= hc_pki_error_at_ms(not_before, not_after) ? "error" : "warning", node, remedy,
            "the %s certificate expires at %s (in %" PRId64 " %s)", what, when,
            left >= 86400000 ? left / 86400000 : left / 1000, left >= 86400000 ? "days" : "s");
    else
        add(out, "cert_expiring", "ok", node, "", "the %s certificate is valid until %s", what,
            when);
}

static void check_clock(json_t *out, const json_t *fact)
{
    const char *name = str(fact, "name");
    const json_t *off = json_object_get(fact, "clock_offset_ms");
    if (unknown_unless_reachable(out, "clock_skew", fact, "the node's clock"))
        return;
    if (!json_is_integer(off)) {
        add(out, "clock_skew", "unknown", name, "upgrade the agent",
            "the agent did not report its time");
        return;
    }
    int64_t ms = (int64_t)json_integer_value(off), mag = ms < 0 ? -ms : ms;
    const char *sev = mag > HC_CHECK_CLOCK_ERROR_MS  ? "error"
                      : mag > HC_CHECK_CLOCK_WARN_MS ? "warning"
                                                     : "ok";
    add(out, "clock_skew", sev, name, strcmp(sev, "ok") ? "synchronise the node's clock (NTP)" : "",
        "the node's clock is %" PRId64 " ms %s the controller's", mag,
        ms < 0 ? "behind" : "ahead of");
}

static void check_disk(json_t *out, const json_t *fact)
{
    const char *name = str(fact, "name");
    const json_t *free_b = json_object_get(fact, "data_dir_free_bytes");
    const json_t *total_b = json_object_get(fact, "data_dir_total_bytes");
    if (unknown_unless_reachable(out, "disk_low", fact, "the data directory's free space"))
        return;
    if (!json_is_integer(free_b) || !json_is_integer(total_b) || json_integer_value(total_b) <= 0) {
        add(out, "disk_low", "unknown", name, "upgrade the agent",
            "the agent did not report its data directory's free space");
        return;
    }
    double pct = 100.0 * (double)json_integer_value(free_b) / (double)json_integer_value(total_b);
    const char *sev = pct < HC_CHECK_DISK_ERROR_PERCENT  ? "error"
                      : pct < HC_CHECK_DISK_WARN_PERCENT ? "warning"
                                                         : "ok";
    add(out, "disk_low", sev, name,
        strcmp(sev, "ok") ? "free space in the agent's data directory" : "",
        "the data directory has %.1f %% free (%" PRId64 " of %" PRId64 " MiB)", pct,
        (int64_t)json_integer_value(free_b) >> 20, (int64_t)json_integer_value(total_b) >> 20);
}

static void check_config(json_t *out, const json_t *fact)
{
    const char *name = str(fact, "name"), *state = str(fact, "config_state");
    const char *detail = hc_json_str(fact, "config_detail", "");
    if (unknown_unless_reachable(out, "config_drift", fact, "the node's configuration"))
        return;
    if (!state || strcmp(state, "unreachable") == 0)
        add(out, "config_drift", "unknown", name, "wait for a poll cycle",
            "the node has not reported its configuration");
    else if (strcmp(state, "in_sync") == 0 ||
             (strcmp(state, "not_applied") == 0 && strcmp(detail, HC_CONFIG_NO_SETTINGS) == 0))
        add(out, "config_drift", "ok", name, "", "%s",
            strcmp(state, "in_sync") == 0 ? "the configuration is in sync" : detail);
    else
        add(out, "config_drift", "warning", name,
            strcmp(state, "pending_restart") == 0
                ? "restart: 'hcctl config apply --restart'"
                : "'hcctl config apply' (see 'hcctl config status')",
            "the configuration is %s%s%s", state, detail[0] ? ": " : "", detail);
}

/* Across the nodes: more than one software version. A warning, not an error: a rolling
 * upgrade that stopped half-way is finished by another upgrade, which must not be refused. */
static void check_versions(json_t *out, const json_t *facts)
{
    json_t *seen = json_object();
    const json_t *fact;
    size_t i;
    char list[512] = "";
    json_array_foreach(facts, i, fact)
    {
        const char *v = str(fact, "software_version");
        if (v && v[0])
            json_object_set_new(seen, v, json_true());
    }
    const char *v;
    json_t *unused;
    json_object_foreach(seen, v, unused)
    {
        size_t at = strlen(list);
        snprintf(list + at, sizeof(list) - at, "%s%s", at ? ", " : "", v);
    }
    if (json_object_size(seen) > 1)
        add(out, "version_skew", "warning", NULL,
            "finish the upgrade: 'hcctl upgrade --rolling --to VERSION'",
            "the nodes run %zu software versions: %s", json_object_size(seen), list);
    else
        add(out, "version_skew", "ok", NULL, "", "%s%s",
            json_object_size(seen) ? "every node runs " : "no node runs any software", list);
    json_decref(seen);
}

static json_t *cluster_mtu(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err, "SELECT mtu FROM clusters LIMIT 1", "");
    if (!rows)
        return NULL;
    json_t *mtu = json_incref(json_object_get(json_array_get(rows, 0), "mtu"));
    json_decref(rows);
    return mtu ? mtu : json_null();
}

static json_t *summary(const json_t *checks)
{
    json_t *s = json_pack("{s:i, s:i, s:i, s:i}", "ok", 0, "warning", 0, "error", 0, "unknown", 0);
    const json_t *c;
    size_t i;
    json_array_foreach(checks, i, c)
    {
        const char *sev = hc_json_str(c, "severity", "unknown");
        json_object_set_new(s, sev, json_integer(hc_json_int(s, sev, 0) + 1));
    }
    return s;
}

json_t *hc_checks_run(struct hc_db *db, const struct hc_check_cert *certs, size_t ncerts,
                      int64_t now_ms, struct hc_error *err)
{
    json_t *facts = hc_nodes_check_facts(db, err), *mtu = facts ? cluster_mtu(db, err) : NULL;
    json_t *out = NULL, *fact;
    size_t i;
    if (!mtu)
        goto cleanup;
    out = json_array();
    json_array_foreach(facts, i, fact) check_unreachable(out, fact);
    json_array_foreach(facts, i, fact) check_service(out, fact);
    json_array_foreach(facts, i, fact) check_mtu(out, fact, mtu);
    for (i = 0; i < ncerts; i++) {
        char *pem = NULL;
        size_t len;
        struct hc_error file_err = {0};
        hc_file_read(certs[i].path, &pem, &len, &file_err); /* unreadable: unknown */
        check_cert(out, NULL, certs[i].what, pem, now_ms);
        free(pem);
    }
    json_array_foreach(facts, i, fact)
        check_cert(out, str(fact, "name"), "node's", str(fact, "cert_pem"), now_ms);
    json_array_foreach(facts, i, fact) check_clock(out, fact);
    json_array_foreach(facts, i, fact) check_disk(out, fact);
    check_versions(out, facts);
    json_array_foreach(facts, i, fact) check_config(out, fact);
    out = json_pack("{s:o, s:o}", "checks", out, "summary", summary(out));
cleanup:
    json_decref(facts);
    json_decref(mtu);
    return out;
}

int hc_checks_errors(const json_t *report, const json_t *skip, char *buf, size_t len)
{
    const json_t *c, *s;
    size_t i, j;
    int n = 0;
    buf[0] = '\0';
    json_array_foreach(json_object_get(report, "checks"), i, c)
    {
        const char *id = hc_json_str(c, "id", ""), *node = hc_json_str(c, "node", NULL);
        int skipped = 0;
        if (strcmp(hc_json_str(c, "severity", ""), "error") != 0)
            continue;
        json_array_foreach(skip, j, s) skipped |= strcmp(json_string_value(s), id) == 0;
        if (skipped)
            continue;
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s%s%s", n ? ", " : "", id, node ? " on " : "",
                 node ? node : "");
        n++;
    }
    return n;
}

int hc_checks_skip_arg(const json_t *body, const json_t **skip, struct hc_error *err)
{
    const json_t *v = json_object_get(body, "skip_checks"), *id;
    size_t i;
    *skip = NULL;
    if (!v)
        return 0;
    if (!json_is_array(v))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "'skip_checks' must be an array of ids");
    json_array_foreach(v, i, id)
    {
        if (!json_is_string(id) || !hc_check_id_valid(json_string_value(id)))
            return hc_error_set(
                err, HC_E(INVALID_ARGUMENT), "'skip_checks' names an unknown check%s%.64s%s",
                json_is_string(id) ? " '" : "", json_is_string(id) ? json_string_value(id) : "",
                json_is_string(id) ? "'" : "");
    }
    *skip = v;
    return 0;
}

int hc_checks_gate(struct hc_db *db, const struct hc_check_cert *certs, size_t ncerts,
                   int64_t now_ms, const json_t *skip, json_t **report, struct hc_error *err)
{
    char failed[1024];
    json_t *r = hc_checks_run(db, certs, ncerts, now_ms, err);
    if (!r)
        return -1;
    if (hc_checks_errors(r, skip, failed, sizeof(failed)) > 0) {
        hc_error_set(err, HC_E(CHECKS_FAILED), "pre-flight checks failed: %s", failed);
        hc_error_hint(err, "see 'hcctl cluster check'; --skip-checks=ID,... (API: "
                           "\"skip_checks\") goes on despite them");
        json_decref(r);
        return -1;
    }
    if (report)
        *report = r;
    else
        json_decref(r);
    return 0;
}
