#!/usr/bin/env bash
# Software bundles end to end: a real hcctld trusting BUILD/bundles/dev.pub, a real hcagent on
# 127.0.0.31 supervising the reference service hcstor from the signed bundles of the `bundles`
# target. Upload and refusals through hcctl; stage, activate, rollback and the service hooks
# through the agent API, with curl and the controller's client certificate.
. "$(dirname "$0")/lib.sh"

need_bundles
IP=127.0.0.31
AGENT=https://$IP:$AGENT_PORT
SVC=http://$IP:7480

svc_version() { curl -sS --max-time 5 "$SVC/health" | jq -r .version; }
stage_token() { hcctld token create --data-dir "$CTL_DIR" --name "stage-$1" --role readonly --ttl 10m | grep -o 'hct1\.[0-9a-f.]*'; }

test_expect_success 'hcctld init --trust-key installs the bundle signing key' '
    controller_init --trust-key "$BUNDLES/dev.pub" &&
    cmp "$BUNDLES/dev.pub" "$CTL_DIR/trusted-keys/dev.pem" &&
    ! hcctld init --data-dir "$T/c2" --trust-key "$CTL_DIR/ca.pem" 2>err &&
    grep -q "not a PEM public key\|not an Ed25519" err && [ ! -e "$T/c2/hcctld.db" ]
'

test_expect_success 'a joining agent receives the trusted keys' '
    controller_start &&
    agent_join n1 $IP &&
    wait_for 10 "[ \$(reachable_count) = 1 ]" &&
    cmp "$BUNDLES/dev.pub" "$T/n1/trusted-keys/dev.pem" &&
    agent_api GET /v1/status | jq -e ".service.state == \"not_installed\" and .software_version == null"
'

test_expect_success 'upload 1.0 and 1.1, then list them' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" -o json >up.json &&
    jq -e ".bundle.version == \"1.0\" and .bundle.signed_by == \"dev\" and (.bundle.sha256 | length) == 64" up.json &&
    hcctl software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
    hcctl software list -o json | jq -e "[.bundles[].version] == [\"1.0\",\"1.1\"]" &&
    hcctl software list | grep -q "^1.1 .*hcstor" &&
    hcctl events --type software.uploaded -o json | jq -e ".events | length == 2"
'

test_expect_success 'uploading the same bundle again is accepted as already there' '
    hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" -o json >again.json &&
    jq -e ".already_uploaded == true" again.json
'

test_expect_success 'a bad signature is refused and nothing is stored' '
    cp "$BUNDLES/hcstor-1.1.tar.gz" bad.tar.gz &&
    awk "{ c = substr(\$4, 1, 1); \$4 = (c == \"A\" ? \"B\" : \"A\") substr(\$4, 2); print }" \
        "$BUNDLES/hcstor-1.1.tar.gz.sig" >bad.tar.gz.sig &&
    ! cmp -s bad.tar.gz.sig "$BUNDLES/hcstor-1.1.tar.gz.sig" &&
    expect_exit 1 hcctl software upload bad.tar.gz 2>err &&
    grep -q "signature does not verify" err &&
    hcctl software keygen --out "$T/other" >/dev/null &&
    hcctl software build --manifest "$HC_SRC/agents/hcstor/bundle/1.2-broken.json" \
        --dir "$BUNDLES/stage-1.2-broken" --key "$T/other.key" -o other.tar.gz >/dev/null &&
    expect_exit 1 hcctl software upload other.tar.gz 2>err &&
    grep -q "not trusted" err &&
    [ "$(ls "$CTL_DIR/bundles" | grep -c "tar.gz$")" = 2 ] &&
    hcctl software list -o json | jq -e ".bundles | length == 2"
'

test_expect_success 'a corrupt or truncated bundle is refused and nothing is stored' '
    head -c 20000 "$BUNDLES/hcstor-1.2-broken.tar.gz" >cut.tar.gz &&
    cp "$BUNDLES/hcstor-1.2-broken.tar.gz.sig" cut.tar.gz.sig &&
    expect_exit 1 hcctl software upload cut.tar.gz -o json >err.json &&
    jq -e ".error.code == \"bundle_checksum_mismatch\"" err.json &&
    printf "not a bundle" >junk.tar.gz &&
    expect_exit 1 hcctl software upload junk.tar.gz --signature cut.tar.gz.sig 2>err &&
    grep -q "checksum mismatch" err &&
    ! hcctl software upload "$BUNDLES/hcstor-1.0.tar.gz" --signature /nonexistent 2>/dev/null &&
    [ "$(ls "$CTL_DIR/bundles" | grep -c "tar.gz$")" = 2 ]
'

test_expect_success 'stage 1.0 on the agent: fetched with a read-only token, verified, idempotent' '
    tok=$(stage_token a) &&
    agent_api POST /v1/software/stage "{\"version\":\"1.0\",\"token\":\"$tok\"}" >st.json &&
    jq -e ".staged == true and .already_staged == false" st.json &&
    [ -x "$T/n1/software/1.0/bin/hcstor" ] &&
    agent_api POST /v1/software/stage "{\"version\":\"1.0\",\"token\":\"$tok\"}" | jq -e ".already_staged == true"
'

test_expect_success 'stage 1.1 with the url, sha256 and signature an operation passes' '
    tok=$(stage_token b) &&
    sha=$(sha256sum "$BUNDLES/hcstor-1.1.tar.gz" | cut -d" " -f1) &&
    sig=$(cat "$BUNDLES/hcstor-1.1.tar.gz.sig") &&
    agent_api POST /v1/software/stage "{\"version\":\"1.1\",\"token\":\"$tok\",\"url\":\"$CTL_URL/v1/software/1.1/bundle\",\"sha256\":\"$sha\",\"signature\":\"$sig\"}" | jq -e ".staged == true" &&
    agent_api GET /v1/software | jq -e "[.installed[].version] | sort == [\"1.0\",\"1.1\"]"
'

test_expect_success 'a stage with the wrong sha256 or without a token is refused' '
    hcctl software upload "$BUNDLES/hcstor-1.2-broken.tar.gz" >/dev/null &&
    tok=$(stage_token c) &&
    agent_api POST /v1/software/stage "{\"version\":\"1.2-broken\",\"token\":\"$tok\",\"sha256\":\"$(printf %064d 0)\"}" >st.json &&
    jq -e ".error.code == \"bundle_checksum_mismatch\"" st.json &&
    agent_api POST /v1/software/stage "{\"version\":\"1.2-broken\"}" | jq -e ".error.message | test(\"401|token\")" &&
    [ ! -e "$T/n1/software/1.2-broken" ]
'

test_expect_success 'activate 1.0: the service runs and answers its health check' '
    agent_api POST /v1/software/activate "{\"version\":\"1.0\"}" | jq -e ".current == \"1.0\"" &&
    wait_for 15 healthy &&
    [ "$(svc_version)" = 1.0 ] && svc_pid >/dev/null &&
    agent_api GET /v1/status | jq -e ".software_version == \"1.0\" and .service.state == \"running\"" &&
    wait_for 5 "hcctl node show n1 -o json | jq -e \".node.software_version == \\\"1.0\\\" and .node.service_state == \\\"running\\\"\""
'

test_expect_success 'the service writes blocks durably through its own API' '
    curl -sS -X PUT --data-binary "block one" "$SVC/blocks/b1" | jq -e ".bytes == 9" &&
    [ "$(curl -sS "$SVC/blocks/b1")" = "block one" ]
'

test_expect_success 'software remove is refused while a node runs the version' '
    expect_exit 5 hcctl software remove 1.0 2>err && grep -q "running on nodes" err &&
    [ -f "$CTL_DIR/bundles/1.0.tar.gz" ]
'

test_expect_success 'activate 1.1: 1.1 runs, 1.0 becomes the rollback target' '
    agent_api POST /v1/software/activate "{\"version\":\"1.1\"}" >act.json &&
    jq -e ".current == \"1.1\" and .previous == \"1.0\"" act.json &&
    wait_for 15 healthy && [ "$(svc_version)" = 1.1 ] && svc_pid >/dev/null &&
    [ "$(curl -sS "$SVC/blocks/b1")" = "block one" ] &&
    wait_for 5 "hcctl software list -o json | jq -e \".bundles[0].nodes_rollback == [\\\"n1\\\"]\"" &&
    expect_exit 5 hcctl software remove 1.0 2>err && grep -q "rollback target" err
'

test_expect_success 'rollback: 1.0 runs again and no rollback target is left' '
    agent_api POST /v1/software/rollback >rb.json &&
    jq -e ".current == \"1.0\" and .previous == null" rb.json &&
    wait_for 15 healthy && [ "$(svc_version)" = 1.0 ] && svc_pid >/dev/null &&
    agent_api POST /v1/software/rollback | jq -e ".error.code == \"no_rollback_target\""
'

test_expect_success 'kill -9 of the service: the supervisor restarts it' '
    pid=$(svc_pid) && kill -9 "$pid" &&
    wait_for 10 "[ \"\$(agent_api GET /v1/software | jq -r .service.pid)\" != \"$pid\" ]" &&
    wait_for 15 healthy && svc_pid >/dev/null &&
    agent_api GET /v1/software | jq -e ".service.restarts >= 1 and (.service.last_exit | test(\"signal 9\"))"
'

test_expect_success 'hooks: ok-to-stop (refused: a lone node holds the only copy; pinned), drain, resync' '
    agent_api GET /v1/service/ok-to-stop >ok.json && cat ok.json &&
    jq -e ".ok_to_stop == false and (.reason | test(\"block .b1. has no other in-sync serving replica .replication factor 1\"))" ok.json &&
    echo "only copy of b1" >"$T/n1/service-data/pinned" &&
    agent_api GET /v1/service/ok-to-stop | jq -e ".ok_to_stop == false and (.reason | test(\"only copy\"))" &&
    rm "$T/n1/service-data/pinned" &&
    agent_api GET /v1/service/resync | jq -e ".pending == 0 and .done == true" &&
    agent_api POST /v1/service/drain | jq -e ".drained == true" &&
    [ "$(curl -s -o /dev/null -w "%{http_code}" -X PUT --data-binary x "$SVC/blocks/b2")" = 503 ]
'

test_expect_success 'storage peers: written for the service; bad bodies refused, file untouched' '
    agent_api PUT /v1/service/peers "{\"epoch\":7,\"nodes\":[{\"name\":\"n1\",\"host\":\"$IP\"}]}" |
        jq -e ".written == true and .epoch == 7 and .nodes == 1" &&
    jq -e ".epoch == 7 and .nodes[0].host == \"$IP\"" "$T/n1/service-data/peers.json" &&
    agent_api PUT /v1/service/peers "not json" | jq -e ".error.code == \"invalid_json\"" &&
    agent_api PUT /v1/service/peers "{\"epoch\":8,\"nodes\":[{\"name\":1}]}" | jq -e ".error.code == \"invalid_argument\"" &&
    agent_api PUT /v1/service/peers "{\"nodes\":[]}" | jq -e ".error.code == \"invalid_argument\"" &&
    jq -e ".epoch == 7" "$T/n1/service-data/peers.json"
'

test_expect_success 'stop and start: stopped stays stopped, start brings it back' '
    agent_api POST /v1/service/stop | jq -e ".service.state == \"stopped\" and .desired == \"stopped\"" &&
    ! curl -s --max-time 2 "$SVC/health" >/dev/null &&
    agent_api GET /v1/service/health | jq -e ".healthy == false" &&
    agent_api GET /v1/service/ok-to-stop | jq -e ".ok_to_stop == true" &&
    agent_api GET /v1/service/resync | jq -e ".error.code == \"service_not_running\"" &&
    agent_api POST /v1/service/start | jq -e ".desired == \"running\"" &&
    wait_for 15 healthy && svc_pid >/dev/null
'

test_expect_success 'the service outlives an agent restart and is adopted' '
    pid=$(svc_pid) && echo "service pid $pid" &&
    agent_kill n1 TERM && { alive "$pid" || { echo "service died with the agent"; exit 1; }; } &&
    v=$(svc_version) && echo "service version $v" && [ "$v" = 1.0 ] &&
    agent_start n1 &&
    wait_for 30 "agent_api GET /v1/software | jq -e \".service.pid == $pid\"" &&
    wait_for 30 healthy && grep -q "adopted" "$T/n1.log"
'

test_expect_success 'the broken bundle runs but its health check fails' '
    tok=$(stage_token d) &&
    agent_api POST /v1/software/stage "{\"version\":\"1.2-broken\",\"token\":\"$tok\"}" | jq -e ".staged == true" &&
    agent_api POST /v1/software/activate "{\"version\":\"1.2-broken\"}" | jq -e ".previous == \"1.0\"" &&
    wait_for 10 "curl -s \"$SVC/health\" | jq -e \".version == \\\"1.2-broken\\\"\"" && svc_pid >/dev/null &&
    sleep 1.5 &&
    agent_api GET /v1/service/health >h.json &&
    jq -e ".healthy == false and (.detail | test(\"fail-health|503\"))" h.json &&
    agent_api GET /v1/software | jq -e ".service.state == \"starting\""
'

test_expect_success 'rollback from the broken version, which can then be removed' '
    agent_api POST /v1/software/rollback | jq -e ".current == \"1.0\"" &&
    wait_for 15 healthy && svc_pid >/dev/null &&
    wait_for 5 "hcctl node show n1 -o json | jq -e \".node.software_version == \\\"1.0\\\"\"" &&
    hcctl software remove 1.2-broken &&
    [ ! -e "$CTL_DIR/bundles/1.2-broken.tar.gz" ] &&
    hcctl software list -o json | jq -e "[.bundles[].version] == [\"1.0\",\"1.1\"]" &&
    hcctl events --type software.removed -o json | jq -e ".events | length == 1"
'

test_expect_success 'limits are applied or plainly reported as not applied' '
    agent_api GET /v1/software >sw.json &&
    jq -e ".service.limits.applied == true or (.service.limits.detail | test(\"^limits not applied: \"))" sw.json &&
    jq -r .service.limits.detail sw.json
'

test_expect_success 'a read-only token cannot upload or remove bundles' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name ro --role readonly | grep -o "hct1\.[0-9a-f.]*") &&
    expect_exit 3 hcctl --token "$ro" software upload "$BUNDLES/hcstor-1.1.tar.gz" 2>/dev/null &&
    expect_exit 3 hcctl --token "$ro" software remove 1.1 2>/dev/null &&
    hcctl --token "$ro" software list >/dev/null
'

test_expect_success 'an activation deletes staged versions beyond current, previous and the two newest' '
    for v in 2.0 2.1 2.2; do
        jq ".version = \"$v\"" "$HC_SRC/agents/hcstor/bundle/1.0.json" >m-$v.json &&
        hcctl software build --manifest m-$v.json --dir "$BUNDLES/stage-1.0" \
            --key "$BUNDLES/dev.key" -o hcstor-$v.tar.gz >/dev/null &&
        hcctl software upload hcstor-$v.tar.gz >/dev/null &&
        tok=$(stage_token "p$v") &&
        agent_api POST /v1/software/stage "{\"version\":\"$v\",\"token\":\"$tok\"}" |
            jq -e ".staged == true" || exit 1
    done &&
    agent_api GET /v1/software | jq -e "[.installed[].version] | sort == [\"1.0\",\"1.1\",\"1.2-broken\",\"2.0\",\"2.1\",\"2.2\"]" &&
    mkdir "$T/n1/software/.old-1.1-deadbeef" &&
    agent_api POST /v1/software/activate "{\"version\":\"2.2\"}" | jq -e ".current == \"2.2\" and .previous == \"1.0\"" &&
    agent_api GET /v1/software | jq -e "[.installed[].version] | sort == [\"1.0\",\"2.0\",\"2.1\",\"2.2\"]" &&
    [ ! -e "$T/n1/software/1.1" ] && [ ! -e "$T/n1/software/.meta/1.1.json" ] &&
    [ ! -e "$T/n1/software/.old-1.1-deadbeef" ] &&
    grep -q "deleted old version 1.2-broken" "$T/n1.log" &&
    wait_for 15 healthy
'

test_expect_success 'a service log past 16 MiB moves to service.log.1 while the service runs' '
    head -c 17M /dev/zero | tr "\0" x >>"$T/n1/software/service.log" &&
    wait_for 15 "[ -f \"$T/n1/software/service.log.1\" ]" &&
    [ "$(stat -c %s "$T/n1/software/service.log")" -lt 1048576 ] &&
    [ "$(stat -c %s "$T/n1/software/service.log.1")" -gt 16777216 ] &&
    grep -q "service log over 16 MiB" "$T/n1.log" && healthy
'

# A bundle whose manifest declares settings (agents/hcstor/bundle/1.3.json): the agent writes
# the effective values (defaults until the controller hands others) beside the service's data
# directory, readable by the service and not writable by it, and renders {settings_file} in the
# arguments; hcstor runs on that file.
test_expect_success 'a bundle with settings: the agent writes their file and hcstor runs on it' '
    hcctl software upload "$BUNDLES/hcstor-1.3.tar.gz" >/dev/null &&
    tok=$(stage_token s) &&
    agent_api POST /v1/software/stage "{\"version\":\"1.3\",\"token\":\"$tok\"}" | jq -e ".staged == true" &&
    agent_api POST /v1/software/activate "{\"version\":\"1.3\"}" | jq -e ".current == \"1.3\"" &&
    wait_for 15 healthy && [ "$(svc_version)" = 1.3 ] &&
    f="$T/n1/service-settings.json" &&
    jq -e ". == {\"fsync\": \"always\", \"fsync_interval_ms\": 100, \"limits.cpu_percent\": 0, \"limits.memory_mb\": 0, \"limits.net_mbit\": 0, \"log_level\": \"info\", \"min_free_mb\": 0, \"resync_parallelism\": 8}" "$f" &&
    [ "$(stat -c %a "$f")" = 644 ] && [ "$(stat -c %u "$f")" = "$(id -u)" ] &&
    curl -sS --max-time 5 "$SVC/settings" | jq -e ".file == \"$f\" and .settings.resync_parallelism == 8 and .settings.log_level == \"info\"" &&
    tr "\0" " " <"/proc/$(svc_pid)/cmdline" | grep -q -- "--settings $f "
'

test_expect_success 'cleanup: the service stops through the agent' '
    agent_api POST /v1/service/stop | jq -e ".service.state == \"stopped\""
'

test_expect_success 'agent and controller stop cleanly, without sanitizer reports' '
    agent_kill n1 TERM && controller_stop TERM &&
    ! grep -n "Sanitizer\|runtime error" "$T"/*.log
'

test_done
