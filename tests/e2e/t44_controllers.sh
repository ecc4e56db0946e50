#!/usr/bin/env bash
# hcctl given several controllers (docs/hcctl.md "Several controllers") against the real hcctld:
# a dead URL before the live one in --controller, HCCTL_CONTROLLER and the config file's array
# (GET and POST both reach the live one, which is remembered in the leader cache; the CA
# verifies it, the file's pin is left out), the list's usage errors, and cluster status's "ha"
# from a single controller (its /v1/ha). The standbys' 421 and the elections' 503 are
# unit-tested against stand-ins (tests/unit/test_leader.c).
. "$(dirname "$0")/lib.sh"

DEAD=https://127.0.0.1:$(free_port)

test_expect_success 'a controller' '
    controller_init && controller_start
'

test_expect_success 'a dead controller first: GET and POST reach the live one' '
    hcctl --controller "$DEAD,$CTL_URL" node list -o json | jq -e ".nodes == []" &&
    [ "$(cat "$XDG_CACHE_HOME/hcctl/leader")" = "$CTL_URL" ] &&
    hcctl --controller "$DEAD,$CTL_URL" cluster join-token --ttl 1m >token &&
    grep -q "^hcj1\." token &&
    HCCTL_CONTROLLER=" $DEAD , $CTL_URL/" hcctl cluster show -o json >show.json &&
    jq -e --arg u "$CTL_URL" ".controller.url == \$u" show.json &&
    hcctl --controller "$DEAD,$CTL_URL" version -o json >version.json &&
    jq -e --arg u "$CTL_URL" ".controller.url == \$u and .controller.version != null" version.json
'

test_expect_success 'the config file lists the controllers as an array' '
    cfg=$XDG_CONFIG_HOME/hcctl/config.json &&
    cp "$cfg" config.orig &&
    jq --arg d "$DEAD" --arg u "$CTL_URL" ".controller = [\$d, \$u]" config.orig >"$cfg" &&
    jq -e ".controller_pin | startswith(\"sha256//\")" "$cfg" &&
    hcctl node list -o json | jq -e ".nodes == []" &&
    jq ".controller = []" config.orig >"$cfg" &&
    expect_exit 1 hcctl node list 2>err && grep -q "\"controller\" is an empty list" err &&
    cp config.orig "$cfg"
'

test_expect_success 'every controller dead: exit 3 naming how many' '
    expect_exit 3 hcctl --controller "$DEAD,https://127.0.0.1:1" node list 2>err &&
    grep -q "none of the 2 controllers answered" err
'

test_expect_success 'hostile lists are usage errors, exit 2' '
    expect_exit 2 hcctl --controller "$CTL_URL,$CTL_URL" node list 2>err &&
    grep -q "is given twice (from --controller)" err &&
    expect_exit 2 hcctl --controller "$CTL_URL,,$DEAD" node list 2>err &&
    grep -q "has an empty item (2 of 3)" err &&
    expect_exit 2 hcctl --controller "$CTL_URL/v1" node list 2>err &&
    grep -q "must not have a path" err &&
    expect_exit 2 hcctl --controller "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8" node list 2>err &&
    grep -q "at most 7 controller URLs" err &&
    HCCTL_CONTROLLER="http://127.0.0.1:1,$CTL_URL" expect_exit 2 hcctl -o json node list >out &&
    jq -e ".error.code == \"usage\"" out
'

test_expect_success 'cluster status: "ha" from GET /v1/ha, a single controller leading itself' '
    hcctl cluster status -o json >status.json &&
    jq -e --arg u "$CTL_URL" ".cluster.name == \"e2e\" and .ha.role == \"single\" and
        .ha.leader.url == \$u and .ha.members == [] and .ha.etcd == []" status.json &&
    hcctl cluster status >status.txt &&
    grep -q "^HA role: *single$" status.txt &&
    grep -q "^Leader: .* $CTL_URL (term [0-9]*)$" status.txt &&
    ! grep -q "^Controllers:" status.txt && ! grep -q "^etcd:" status.txt
'

test_done
