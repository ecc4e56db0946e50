/* Drift seen and repaired by the poller (see config_repair.h). */
#include "controller/remote/config_repair.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/op_config.h"
#include "controller/ops/ops.h"
#include "controller/remote/service_client.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

void hc_config_cycle_begin(struct hc_config_cycle *c, struct hc_db *db)
{
    struct hc_error err = {0};
    memset(c, 0, sizeof(*c));
    c->ready = hc_config_judge_init(&c->judge, db, &err) == 0;
    if (!c->ready)
        HC_WARN("poller cannot read the desired configuration: %s", err.message);
}

void hc_config_cycle_end(struct hc_config_cycle *c)
{
    hc_config_judge_clear(&c->judge);
    c->ready = 0;
}

int hc_config_cycle_node(struct hc_config_cycle *c, struct hc_db *db, const char *name,
                         const char *agent_url, const json_t *status, struct hc_error *err)
{
    char detail[400];
    if (!c->ready)
        return 0;
    const json_t *reported = json_object_get(status, "settings");
    const char *state = hc_config_judge_node(&c->judge, reported, detail, sizeof(detail));
    if (!strcmp(state, "drift") && c->n_drift < HC_CONFIG_REPAIRS_PER_CYCLE) {
        snprintf(c->drift[c->n_drift].name, sizeof(c->drift[0].name), "%s", name);
        snprintf(c->drift[c->n_drift].agent_url, sizeof(c->drift[0].agent_url), "%s", agent_url);
        c->n_drift++;
    }
    return hc_config_node_store(db, name, reported, state, detail, err);
}

/* One node: live-only difference -> the desired revision again; else say what waits. */
static void repair(struct hc_config_cycle *c, struct hc_db *db, struct hc_svc_node *n)
{
    struct hc_error err = {0};
    json_t *have = NULL, *want = NULL, *answer = NULL, *diff = NULL;
    struct hc_settings_schema *s = NULL;
    char digest[65], names[300] = "";
    int restart = 0;
    const char *version;
    if (hc_cfg_get(n, &have, &err) < 0)
        goto done;
    version = hc_json_str(have, "version", "");
    if (!(s = hc_config_schema(db, version, &err)) ||
        !(want = hc_config_effective(db, version, c->judge.overrides, digest, &err)) ||
        !(diff = hc_settings_diff(s, json_object_get(have, "values"), want, &restart)))
        goto done;
    if (!strcmp(hc_json_str(have, "digest", ""), digest))
        goto done; /* repaired meanwhile */
    size_t i, used = 0;
    json_t *d;
    json_array_foreach(diff, i, d) if (used < sizeof(names)) used += (size_t)snprintf(
        names + used, sizeof(names) - used, "%s%s", i ? ", " : "", hc_json_str(d, "name", "?"));
    if (restart) {
        char detail[400];
        snprintf(detail, sizeof(detail),
                 "differs from revision %lld in a restart setting (%s): run 'hcctl config apply'",
                 (long long)c->judge.revision, names);
        hc_node_set_config_state(db, n->name, NULL, detail, &err);
        goto done;
    }
    if (hc_cfg_push(n, c->judge.revision, c->judge.overrides, &answer, &err) < 0)
        goto done;
    char detail[400];
    const char *state = hc_config_judge_node(&c->judge, answer, detail, sizeof(detail));
    if (hc_db_begin(db, &err) == 0) {
        if (hc_config_node_store(db, n->name, answer, state, detail, &err) < 0 ||
            hc_event_add(db, "config.repaired", n->name, NULL, "controller",
                         json_pack("{s:I, s:s}", "revision", (json_int_t)c->judge.revision,
                                   "settings", names),
                         &err, "node %s: %s handed revision %lld again (it was in drift)", n->name,
                         names, (long long)c->judge.revision) < 0 ||
            hc_db_commit(db, &err) < 0)
            hc_db_rollback(db);
    }
    HC_INFO("node %s: configuration drift (%s) repaired with revision %lld", n->name, names,
            (long long)c->judge.revision);
done:
    if (err.code[0])
        HC_WARN("node %s: configuration drift not repaired: %s", n->name, err.message);
    hc_settings_schema_free(s);
    json_decref(have);
    json_decref(want);
    json_decref(answer);
    json_decref(diff);
}

void hc_config_cycle_repair(struct hc_config_cycle *c, struct hc_db *db,
                            struct hc_http_client *client, long timeout_ms)
{
    if (!c->ready || c->n_drift == 0 || hc_config_blocked(db, &(struct hc_error){0}) < 0)
        return;
    for (size_t i = 0; i < c->n_drift; i++) {
        struct hc_svc_node n = {client, c->drift[i].name, c->drift[i].agent_url, timeout_ms};
        repair(c, db, &n);
    }
}
