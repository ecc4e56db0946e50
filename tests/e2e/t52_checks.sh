#!/usr/bin/env bash
# Pre-flight checks (issue 18 part 4, docs/api.md "Checks"): hcctl cluster check over hchollow
# identities, each check brought to warning or error by a real fault through hchollow's control
# socket (a skewed clock, a full disk, a changed storage MTU, a failing service, an unreachable
# node), a certificate close to its end faked in the node's row (a short-lived certificate
# issued by openssl, put where the controller keeps the node's; issuing a real 3-day agent
# certificate would need the enrollment to take a lifetime), the JSON shape, exit 4; an upgrade
# and a config set refused with exit 5 (and 409 checks_failed to a raw API client) and allowed
# with --skip-checks.
. "$(dirname "$0")/lib.sh"

need_bundles
N=3
FIRST=127.1.$((RANDOM % 200 + 20)).1
SOCK=$T/hollow.sock
hollow_start() {
    HCHOLLOW_TOKEN=$(cat "$CTL_DIR/admin.token") hchollow --controller "$CTL_URL" \
        --ca "$CTL_DIR/ca.pem" --count $N --first-address "$FIRST" --port "$AGENT_PORT" \
        --data-dir "$T/hollow" --control "$SOCK" --trust-key "$BUNDLES/dev.pub" \
        --activate-ms 20 >>"$T/hollow.log" 2>&1 &
    echo $! >"$T/pids/hollow"
}
ctl() { hchollow ctl --control "$SOCK" "$@" >/dev/null; }
# severity ID NODE: the check's severity for that node ("null" for the cluster's)
severity() {
    hcctl cluster check -o json | jq -r --arg id "$1" --arg node "$2" \
        '.checks[] | select(.id == $id and ((.node // "null") == $node)) | .severity'
}
wait_severity() { wait_for 15 "[ \"\$(severity $1 $2)\" = $3 ]"; } # ID NODE SEVERITY
api() { # METHOD PATH JSON: the controller's API as a raw client, the status then the body
    curl -sS --max-time 30 --cacert "$CTL_DIR/ca.pem" -H "Authorization: Bearer $(cat "$CTL_DIR/admin.token")" \
        -X "$1" -d "$3" -w '\n%{http_code}\n' "$CTL_URL$2"
}

test_expect_success 'a healthy cluster: every check ok, exit 0' '
    controller_init --trust-key "$BUNDLES/dev.pub" && controller_start &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    hcctl -q software upload "$BUNDLES/hcstor-1.3.tar.gz" >/dev/null &&
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE clusters SET mtu = 9000" &&
    hollow_start &&
    wait_for 30 "[ \$(reachable_count) = $N ]" &&
    hcctl -q upgrade --rolling --to 1.0 --yes &&
    wait_for 15 "hcctl cluster check >check.out" &&
    grep -q "^[0-9]* ok, 0 warning, 0 error, 0 unknown$" check.out
'

test_expect_success 'the JSON shape: every id, a severity, node, message, remedy; the summary adds up' '
    hcctl cluster check -o json >c.json &&
    jq -e "[.checks[].id] | unique == [\"cert_expiring\",\"clock_skew\",\"config_drift\",\"disk_low\",\"mtu_mismatch\",\"node_unreachable\",\"service_unhealthy\",\"version_skew\"]" c.json &&
    jq -e "all(.checks[]; (keys == [\"id\",\"message\",\"node\",\"remedy\",\"severity\"]) and (.severity | IN(\"ok\",\"warning\",\"error\",\"unknown\")))" c.json &&
    jq -e "(.summary | .ok + .warning + .error + .unknown) == (.checks | length)" c.json &&
    jq -e "[.checks[] | select(.id == \"cert_expiring\" and .node == null)] | length == 3" c.json &&
    jq -e "[.checks[] | select(.id == \"clock_skew\")] | length == $N" c.json
'

test_expect_success 'a skewed clock: warning past 2 s, error past 30 s, exit 4 with the remedy' '
    ctl clock 1 5000 && wait_severity clock_skew hollow-0001 warning &&
    ctl clock 1 -60000 && wait_severity clock_skew hollow-0001 error &&
    expect_exit 4 hcctl cluster check >out &&
    grep -q "^error   clock_skew        hollow-0001: the node.s clock is [0-9]* ms behind the controller.s -- synchronise" out &&
    ! grep -q "^ok" out
'

test_expect_success 'a refused upgrade (exit 5, 409 checks_failed for a raw client), allowed with --skip-checks' '
    expect_exit 5 hcctl -q upgrade --rolling --to 1.3 --yes 2>err &&
    grep -q "pre-flight checks failed: clock_skew on hollow-0001" err &&
    hcctl node list -o json | jq -e "all(.nodes[]; .software_version == \"1.0\")" &&
    api POST /v1/upgrade "{\"to_version\":\"1.3\"}" >r1 && [ "$(tail -1 r1)" = 409 ] &&
    head -1 r1 | jq -e ".error.code == \"checks_failed\"" &&
    api POST /v1/upgrade "{\"to_version\":\"1.3\",\"skip_checks\":[\"nope\"]}" >r2 &&
    [ "$(tail -1 r2)" = 400 ] && head -1 r2 | jq -e ".error.message | test(\"nope\")" &&
    api POST /v1/upgrade "{\"to_version\":\"1.3\",\"skip_checks\":\"clock_skew\"}" >r3 &&
    [ "$(tail -1 r3)" = 400 ] &&
    expect_exit 2 hcctl upgrade --rolling --to 1.3 --yes --skip-checks=clock,disk_low 2>err2 &&
    grep -q "unknown check .clock." err2 &&
    hcctl upgrade --rolling --to 1.3 --dry-run -o json >dry.json &&
    jq -e ".plan and (.checks.summary.error >= 1)" dry.json &&
    hcctl upgrade --rolling --to 1.3 --dry-run >dry.txt && grep -q "^error   clock_skew" dry.txt &&
    hcctl -q upgrade --rolling --to 1.3 --yes --skip-checks=clock_skew &&
    hcctl node list -o json | jq -e "all(.nodes[]; .software_version == \"1.3\")"
'

test_expect_success 'config set refused the same way, allowed with --skip-checks' '
    { expect_exit 5 hcctl -q config set log_level=debug --yes 2>err || { cat err; false; }; } &&
    { grep -q "clock_skew on hollow-0001" err || { cat err; false; }; } &&
    { hcctl config history -o json | jq -e ".revisions | length == 0" || { hcctl config history; false; }; } &&
    hcctl -q config set log_level=debug --yes --skip-checks=clock_skew &&
    ctl clock 1 0 && wait_severity clock_skew hollow-0001 ok
'

test_expect_success 'a full disk: warning below 10 %, error below 5 %' '
    ctl disk 2 8 && wait_severity disk_low hollow-0002 warning &&
    ctl disk 2 3 && wait_severity disk_low hollow-0002 error &&
    hcctl cluster check -o json | jq -e ".checks[] | select(.id == \"disk_low\" and .node == \"hollow-0002\") | .message | test(\"3.0 %\")" &&
    ctl disk 2 50 && wait_severity disk_low hollow-0002 ok
'

test_expect_success 'a storage MTU unlike the cluster'"'"'s: error' '
    ctl mtu 0 1500 && wait_severity mtu_mismatch hollow-0000 error &&
    ctl mtu 0 9000 && wait_severity mtu_mismatch hollow-0000 ok
'

test_expect_success 'a failing service: error' '
    ctl fault 0 failing && wait_severity service_unhealthy hollow-0000 error &&
    ctl fault 0 none && wait_severity service_unhealthy hollow-0000 ok
'

# short_cert FILE: a certificate valid from a year ago until 3 days from now (openssl ca: the
# only form that sets a start in the past); the warnings scale with the lifetime (common/pki.h)
short_cert() {
    mkdir -p shortca && : >shortca/index.txt && echo 01 >shortca/serial &&
    printf "[ca]\ndefault_ca=c\n[c]\ndatabase=shortca/index.txt\nnew_certs_dir=shortca\nserial=shortca/serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n" >shortca/ca.cnf &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout shortca/ca.key \
        -out shortca/ca.pem -days 800 -subj /CN=shortca 2>/dev/null &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout shortca/k.pem \
        -out shortca/req.csr -subj /CN=short 2>/dev/null &&
    openssl ca -batch -config shortca/ca.cnf -cert shortca/ca.pem -keyfile shortca/ca.key \
        -in shortca/req.csr -startdate "$(date -u -d "-365 days" +%Y%m%d%H%M%SZ)" \
        -enddate "$(date -u -d "+3 days" +%Y%m%d%H%M%SZ)" -out "$1" 2>/dev/null
}

test_expect_success 'a node certificate 3 days from its end (faked in the row): error; the others ok' '
    saved=$(sqlite3 "$CTL_DIR/hcctld.db" "SELECT cert_pem FROM nodes WHERE name = '"'"'hollow-0001'"'"'") &&
    short_cert short.pem &&
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE nodes SET cert_pem = readfile('"'"'short.pem'"'"') WHERE name = '"'"'hollow-0001'"'"'" &&
    [ "$(severity cert_expiring hollow-0001)" = error ] &&
    [ "$(severity cert_expiring hollow-0002)" = ok ] &&
    hcctl cluster check -o json | jq -e ".checks[] | select(.id == \"cert_expiring\" and .node == \"hollow-0001\") | .message | test(\"in 2 days\")" &&
    printf "%s\n" "$saved" >saved.pem &&
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE nodes SET cert_pem = readfile('"'"'saved.pem'"'"') WHERE name = '"'"'hollow-0001'"'"'" &&
    [ "$(severity cert_expiring hollow-0001)" = ok ]
'

test_expect_success 'an unreachable node: error; what it last reported is unknown, never ok' '
    ctl fault 2 unreachable && wait_severity node_unreachable hollow-0002 error &&
    for id in clock_skew disk_low service_unhealthy mtu_mismatch config_drift; do
        [ "$(severity $id hollow-0002)" = unknown ] || exit 1
    done &&
    expect_exit 4 hcctl cluster check >out && grep -q "^unknown clock_skew        hollow-0002" out &&
    ctl fault 2 none && wait_for 15 "hcctl cluster check" || { hcctl cluster check; false; }
'

test_expect_success 'hostile control input for the fakes is refused' '
    ! hchollow ctl --control "$SOCK" clock 1 10x >o1 && jq -e ".ok == false" o1 &&
    ! hchollow ctl --control "$SOCK" disk 1 101 >o2 && jq -e ".error | test(\"0 to 100\")" o2 &&
    ! hchollow ctl --control "$SOCK" mtu 99 1500 >o3 && jq -e ".error | test(\"bad range\")" o3 &&
    ! hchollow ctl --control "$SOCK" clock 1 99999999999 >o4
'

test_done
