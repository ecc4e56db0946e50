#!/usr/bin/env bash
# hcctld backup and restore (docs/hcctld.md "backup", "restore"): a backup taken while hcctld
# runs, the data directory wiped, restored and run again: the node is still there and reachable
# (same CA and keys), and a mutating operation works, because the first run after the restore
# raised its fencing generation above the agent's term. Corrupt, truncated and newer-schema
# archives are refused, a non-empty target needs --force, a running hcctld is never replaced.
# Real hcctld, hcagent and hcctl on 127.0.0.2.
. "$(dirname "$0")/lib.sh"

IP=127.0.0.2
AGENT=https://$IP:$AGENT_PORT
generation() { sqlite3 "$CTL_DIR/hcctld.db" "SELECT generation FROM fence_generation"; }
term() { agent_term "$AGENT"; }
# repack IN OUT PYTHON: OUT is IN with its manifest changed by PYTHON (on the dict m).
repack() {
    python3 - "$1" "$2" "$3" <<'PY'
import io, json, sys, tarfile
src, dst, code = sys.argv[1:]
with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
    for info in tin.getmembers():
        data = tin.extractfile(info).read() if info.isfile() else None
        if info.name == "manifest.json":
            m = json.loads(data)
            exec(code)
            data = json.dumps(m).encode()
            info.size = len(data)
        tout.addfile(info, io.BytesIO(data) if data is not None else None)
PY
}

test_expect_success 'a backup while hcctld runs: one 0600 tar.gz, manifest first, no admin.token' '
    controller_init && controller_start &&
    agent_join n1 $IP && wait_for 10 "[ \$(reachable_count) = 1 ]" &&
    hcctld backup --data-dir "$CTL_DIR" --output "$T/b.tgz" >out &&
    grep -q "^backup: $T/b.tgz$" out && grep -q "^files: " out &&
    [ "$(stat -c %a "$T/b.tgz")" = 600 ] &&
    [ "$(tar tzf "$T/b.tgz" | head -1)" = manifest.json ] &&
    tar tzf "$T/b.tgz" | grep -qx hcctld.db && tar tzf "$T/b.tgz" | grep -qx ca.key &&
    tar tzf "$T/b.tgz" | grep -q "^ssh/id_ed25519$" &&
    ! tar tzf "$T/b.tgz" | grep -q admin.token &&
    tar xzOf "$T/b.tgz" manifest.json | jq -e ".format == 1 and .schema_version > 0 and
        (.entries | map(select(.path == \"hcctld.db\"))[0].sha256 | length) == 64" &&
    ls "$T" | grep -v "\.tmp\." >/dev/null && ! ls "$T" | grep -q "b.tgz.*tmp"
'

test_expect_success 'the agent sees later terms than the backup holds' '
    controller_stop && controller_start && controller_stop && controller_start &&
    [ "$(generation)" = 3 ] && wait_for 10 "[ \"\$(term)\" = 3 ]"
'

test_expect_success 'restore refuses a running hcctld even with --force, and a non-empty dir without it' '
    expect_exit 1 hcctld restore --input "$T/b.tgz" --data-dir "$CTL_DIR" --force 2>err &&
    grep -q "an hcctld (pid [0-9]*) runs on" err &&
    controller_stop &&
    expect_exit 1 hcctld restore --input "$T/b.tgz" --data-dir "$CTL_DIR" 2>err &&
    grep -q "is not empty" err && grep -q -- "--force" err &&
    [ "$(generation)" = 3 ]
'

test_expect_success 'corrupt, truncated and newer-schema archives are refused, DIR untouched' '
    size=$(stat -c %s "$T/b.tgz") &&
    head -c $((size / 2)) "$T/b.tgz" >trunc.tgz &&
    expect_exit 1 hcctld restore --input trunc.tgz --data-dir "$T/r1" 2>err &&
    grep -q "truncated" err && [ ! -e "$T/r1" ] &&
    cp "$T/b.tgz" flip.tgz &&
    printf "\\x55" | dd of=flip.tgz bs=1 seek=$((size / 3)) conv=notrunc 2>/dev/null &&
    ! cmp -s flip.tgz "$T/b.tgz" &&
    expect_exit 1 hcctld restore --input flip.tgz --data-dir "$T/r1" 2>err &&
    grep -qE "truncated or corrupt|not the file the manifest describes" err && [ ! -e "$T/r1" ] &&
    repack "$T/b.tgz" newer.tgz "m[\"schema_version\"] += 1" &&
    expect_exit 1 hcctld restore --input newer.tgz --data-dir "$T/r1" 2>err &&
    grep -q "newer than this hcctld" err && [ ! -e "$T/r1" ] &&
    expect_exit 1 hcctld restore --input newer.tgz --data-dir "$CTL_DIR" --force 2>err &&
    [ "$(generation)" = 3 ] && ! ls "$T" | grep -q "restore-"
'

test_expect_success 'wiped and restored: the marker is there, the generation is the backup'"'"'s' '
    rm -rf "$CTL_DIR" &&
    hcctld restore --input "$T/b.tgz" --data-dir "$CTL_DIR" >out 2>err &&
    grep -q "^data dir: $CTL_DIR$" out &&
    [ -f "$CTL_DIR/restored" ] && [ "$(stat -c %a "$CTL_DIR")" = 700 ] &&
    [ "$(stat -c %a "$CTL_DIR/ca.key")" = 600 ] && [ "$(stat -c %a "$CTL_DIR/hcctld.db")" = 600 ] &&
    [ "$(generation)" = 1 ]
'

test_expect_success 'the first run after it rises above the agent'"'"'s term; the node is reachable' '
    controller_start &&
    grep -q "after the restore: the highest controller_term of 1 nodes is 3" "$T/hcctld.log" &&
    [ "$(generation)" = 4 ] && [ ! -e "$CTL_DIR/restored" ] &&
    wait_for 10 "[ \$(reachable_count) = 1 ]" && wait_for 10 "[ \"\$(term)\" = 4 ]"
'

test_expect_success 'a mutating operation works on the restored controller' '
    hcctl maintenance enter n1 --yes -o json >enter.json &&
    hcctl maintenance status -o json | jq -e ".nodes[] | select(.name == \"n1\") | .maintenance == \"active\"" &&
    hcctl maintenance exit n1 --yes -o json >exit.json &&
    jq -e ".operation.state == \"succeeded\"" exit.json &&
    ! grep -q "stale_term" "$T/hcctld.log"
'

test_expect_success 'without the marker a later run asks nobody' '
    controller_stop && controller_start && [ "$(generation)" = 5 ] &&
    [ "$(grep -c "after the restore" "$T/hcctld.log")" = 1 ]
'

test_expect_success 'restore --force over a stopped controller replaces it' '
    controller_stop && echo junk >"$CTL_DIR/junk" &&
    hcctld restore --input "$T/b.tgz" --data-dir "$CTL_DIR" --force >out 2>err &&
    [ ! -e "$CTL_DIR/junk" ] && [ -f "$CTL_DIR/restored" ] && ! ls "$T" | grep -q "restore-" &&
    controller_start && [ "$(generation)" = 6 ] &&
    grep -q "after the restore: the highest controller_term of 1 nodes is 5" "$T/hcctld.log"
'

test_expect_success 'a node that does not answer keeps the marker; the next run asks it again' '
    controller_stop && agent_kill n1 TERM &&
    hcctld restore --input "$T/b.tgz" --data-dir "$CTL_DIR" --force >out 2>err &&
    controller_start &&
    grep -q "after the restore: node n1 did not tell its controller_term" "$T/hcctld.log" &&
    grep -q "1 nodes did not answer: $CTL_DIR/restored stays" "$T/hcctld.log" &&
    [ -f "$CTL_DIR/restored" ] && [ "$(generation)" = 2 ] &&
    controller_stop && agent_start n1 &&
    wait_for 10 "[ \"\$(term)\" = 6 ]" &&
    controller_start && [ "$(generation)" = 7 ] && [ ! -e "$CTL_DIR/restored" ] &&
    grep -q "after the restore: the highest controller_term of 1 nodes is 6" "$T/hcctld.log" &&
    wait_for 10 "[ \"\$(term)\" = 7 ]"
'

test_expect_success 'the scheduled backup script keeps the KEEP newest archives, nothing else' '
    mkdir bk && for d in 20200101 20200102 20200103; do : >"bk/hcctld-${d}T000000Z.tgz"; done &&
    : >bk/mine.tgz &&
    HCCTLD=hcctld "$HC_SRC/packaging/scripts/hcctld-backup" "$CTL_DIR" bk 2 >out &&
    [ "$(ls bk | grep -c "^hcctld-")" = 2 ] && [ -f bk/mine.tgz ] &&
    [ -f bk/hcctld-20200103T000000Z.tgz ] && [ ! -e bk/hcctld-20200102T000000Z.tgz ] &&
    grep -q "removed bk/hcctld-20200101T000000Z.tgz (keeping 2)" out &&
    new=$(ls bk | grep "^hcctld-2[0-9]*T" | sort | tail -1) &&
    [ "$(stat -c %a "bk/$new")" = 600 ] && [ "$(tar tzf "bk/$new" | head -1)" = manifest.json ] &&
    expect_exit 2 "$HC_SRC/packaging/scripts/hcctld-backup" "$CTL_DIR" bk 0 2>err &&
    grep -q "KEEP must be a whole number" err
'

test_done
