#!/usr/bin/env bash
# The shared command-line engine (common/cmdline.h) in every program: help generated from the
# tables, usage errors with "did you mean" and exit 2, and a failed write to stdout is an error
# (as git's run_builtin: `hcctl --help >/dev/full` must not exit 0).
. "$(dirname "$0")/lib.sh"

# exits CODE CMD...: true when CMD exits with CODE.
exits() { local want=$1; shift; "$@"; [ $? = "$want" ]; }

test_expect_success 'hcctl: a failed write to stdout fails the command' '
    exits 1 hcctl --help >/dev/full 2>err &&
    grep -q "^hcctl: write failure on standard output" err &&
    exits 1 hcctl node --help >/dev/full 2>err &&
    exits 1 hcctl version --help >/dev/full 2>err &&
    hcctl --help >/dev/null
'

test_expect_success 'hcctld: a failed write to stdout fails the command' '
    exits 1 hcctld --help >/dev/full 2>err &&
    grep -q "^hcctld: write failure on standard output" err &&
    exits 1 hcctld run --help >/dev/full 2>err &&
    exits 1 hcctld version >/dev/full 2>err &&
    hcctld --help >/dev/null && hcctld version >/dev/null
'

test_expect_success 'hcctld: generated help, per command too' '
    hcctld --help >out && grep -q "^usage: hcctld COMMAND" out &&
    grep -q "hcctld token create --data-dir DIR --name NAME" out &&
    hcctld run --help >out && grep -q -- "--request-deadline DUR" out &&
    grep -q -- "--data-dir DIR .*(required)" out &&
    hcctld token --help >out && grep -q "^usage: hcctld token VERB" out
'

test_expect_success 'hcctld: usage errors say what was meant, exit 2' '
    exits 2 hcctld rnu 2>err && grep -q "did you mean .run.?" err &&
    exits 2 hcctld run --data-dri x 2>err && grep -q "did you mean .--data-dir.?" err &&
    exits 2 hcctld token crate 2>err && grep -q "did you mean .create.?" err &&
    exits 2 hcctld run 2>err && grep -q "option --data-dir is required" err &&
    exits 2 hcctld init --data-dir "$T/x" --san 2>err && grep -q "needs a value" err &&
    exits 2 hcctld 2>err && grep -q "missing command" err &&
    [ ! -e "$T/x" ]
'

test_expect_success 'hcagent, hcstor, hcload: generated help, and it must reach stdout' '
    for prog in hcagent hcstor hcload; do
        $prog --help >out && grep -q "^usage: $prog" out &&
        exits 1 $prog --help >/dev/full 2>err &&
        grep -q "^$prog: write failure on standard output" err || exit 1
    done &&
    hcagent join --help >out && grep -q "HCAGENT_TOKEN" out
'

test_expect_success 'hcagent, hcstor, hcload: usage errors say what was meant, exit 2' '
    exits 2 hcagent jion 2>err && grep -q "did you mean .join.?" err &&
    exits 2 hcagent run --data-dri x 2>err && grep -q "did you mean .--data-dir.?" err &&
    exits 2 hcstor --listn 127.0.0.1:1 --data x --version 1 2>err &&
    grep -q "did you mean .--listen.?" err &&
    exits 2 hcload --nodes 127.0.0.1:1 --wrokers 2 2>err && grep -q "did you mean .--workers.?" err
'

test_expect_success 'hcctld(8) and hcagent(8) are generated with the prose of the old pages' '
    hcctld __man >hcctld.8 && mandoc -T lint -W warning hcctld.8 &&
    for s in NAME SYNOPSIS DESCRIPTION COMMANDS API FILES SYSTEMD "EXIT STATUS" "SEE ALSO"; do
        grep -q "^\.SH $s\$" hcctld.8 || { echo "hcctld.8 lacks $s"; exit 1; }
    done &&
    grep -q "admin\\-token\\-ttl" hcctld.8 && grep -q "DIR/hcctld.db" hcctld.8 &&
    hcagent __man >hcagent.8 && mandoc -T lint -W warning hcagent.8 &&
    for s in DESCRIPTION COMMANDS FILES PRIVILEGE ENVIRONMENT SYSTEMD "EXIT STATUS"; do
        grep -q "^\.SH $s\$" hcagent.8 || { echo "hcagent.8 lacks $s"; exit 1; }
    done &&
    grep -q "HCAGENT_SERVICE_USER" hcagent.8 && ! grep -q "^\\.B hcagent probe\|bench" hcagent.8
'

test_done
