#!/usr/bin/env bash
# A backup taken during a rolling upgrade (issue 18): hcctld killed after it, its data
# directory wiped and restored from the archive, and the restored controller resumes the
# upgrade, which finishes on every node (the agents still trust it; its first run rose above
# their term). Over hchollow's 8 identities (tools/hollow, as in t50_hollow), each activation
# holding the service down 400 ms so that the backup lands in the middle.
. "$(dirname "$0")/lib.sh"

need_bundles
N=8
FIRST=127.1.$((RANDOM % 200 + 20)).1
SOCK=$T/hollow.sock
hollow_start() {
    HCHOLLOW_TOKEN=$(cat "$T/admin.token") hchollow --controller "$CTL_URL" \
        --ca "$CTL_DIR/ca.pem" --count $N --first-address "$FIRST" --port "$AGENT_PORT" \
        --data-dir "$T/hollow" --control "$SOCK" --trust-key "$BUNDLES/dev.pub" \
        --activate-ms 400 >>"$T/hollow.log" 2>&1 &
    echo $! >"$T/pids/hollow"
}
on_version() { hcctl node list -o json | jq "[.nodes[] | select(.software_version == \"$1\")] | length"; }
# Both upgrades (to 1.0, to 1.1) have succeeded.
upgrades_done() {
    hcctl operation list -o json |
        jq -e '[.operations[] | select(.kind == "upgrade.rolling") | .state] == ["succeeded", "succeeded"]'
}

test_expect_success 'the nodes join and run 1.0' '
    controller_init --trust-key "$BUNDLES/dev.pub" && cp "$CTL_DIR/admin.token" "$T/" &&
    controller_start &&
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" >/dev/null &&
    hcctl -q software upload "$BUNDLES/hcstor-1.1.tar.gz" >/dev/null &&
    hollow_start && wait_for 30 "[ \$(reachable_count) = $N ]" &&
    hcctl -q upgrade --rolling --to 1.0 --yes && wait_for 10 "[ \$(on_version 1.0) = $N ]"
'

test_expect_success 'a backup in the middle of the upgrade to 1.1, then hcctld dies' '
    (hcctl -q upgrade --rolling --to 1.1 --yes >up.out 2>&1 &) &&
    wait_for 30 "[ \$(on_version 1.1) -ge 2 ]" &&
    hcctld backup --data-dir "$CTL_DIR" --output "$T/mid.tgz" >out &&
    done_then=$(on_version 1.1) && echo "$done_then" >"$T/done_then" &&
    [ "$done_then" -lt $N ] &&
    controller_stop KILL
'
echo "# $(cat "$T/done_then" 2>/dev/null) of $N nodes were on 1.1 at the backup"

test_expect_success 'wiped, restored, run: the upgrade resumes and finishes on every node' '
    rm -rf "$CTL_DIR" &&
    hcctld restore --input "$T/mid.tgz" --data-dir "$CTL_DIR" >out 2>err &&
    [ "$(sqlite3 "$CTL_DIR/hcctld.db" "SELECT count(*) FROM operations WHERE state = '"'running'"'")" = 1 ] &&
    controller_start &&
    wait_for 10 "hcctl events --type op.resumed -o json | jq -e \".events | length >= 1\"" &&
    grep -q "after the restore: the highest controller_term of $N nodes is 1" "$T/hcctld.log" &&
    wait_for 60 upgrades_done &&
    [ "$(on_version 1.1)" = $N ] && [ "$(reachable_count)" = $N ] &&
    ! grep -q stale_term "$T/hcctld.log"
'

test_done
