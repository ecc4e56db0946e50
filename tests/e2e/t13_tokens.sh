#!/usr/bin/env bash
# API tokens as an operator uses them (docs/security.md "Credentials"): hcctl token
# list|create|revoke|rotate against a real hcctld, the admin token from init expiring, and the
# staging token of a real upgrade scoped to its bundle and gone when the upgrade ends.
. "$(dirname "$0")/lib.sh"

test_expect_success 'init with --admin-token-ttl gives an admin token that expires' '
    controller_init --admin-token-ttl 1h && controller_start &&
    hcctl token list -o json >tokens.json &&
    jq -e ".tokens[] | select(.name == \"admin\") | .expires_at != null and .role == \"admin\"" tokens.json &&
    ! grep -q "hct1\." tokens.json
'

test_expect_success 'token create prints a token once; a readonly token cannot manage tokens' '
    hcctl token create viewer --role readonly >viewer.token && ro=$(cat viewer.token) &&
    case $ro in hct1.*) ;; *) exit 1 ;; esac &&
    HCCTL_TOKEN=$ro hcctl node list &&
    ! HCCTL_TOKEN=$ro hcctl token list 2>err && grep -q "read-only" err &&
    ! hcctl token create admin 2>err && grep -q "already exists" err &&
    ! hcctl token create anonymous 2>err && grep -q "reserved" err
'

test_expect_success 'token rotate: the old text dies, the config file follows its own token' '
    old=$(jq -r .token "$XDG_CONFIG_HOME/hcctl/config.json") &&
    hcctl token rotate admin 2>err >new && grep -q "now holds the new token" err &&
    new=$(cat new) && [ "$new" != "$old" ] &&
    [ "$(jq -r .token "$XDG_CONFIG_HOME/hcctl/config.json")" = "$new" ] &&
    [ "$(stat -c %a "$XDG_CONFIG_HOME/hcctl/config.json")" = 600 ] &&
    ! HCCTL_TOKEN=$old hcctl node list 2>/dev/null &&
    hcctl node list
'

test_expect_success 'token revoke: needs --yes, kills the token, never the last admin one' '
    ! hcctl token revoke viewer </dev/null 2>err && grep -q -- "--yes" err &&
    hcctl token revoke viewer --yes &&
    ! HCCTL_TOKEN=$(cat viewer.token) hcctl node list 2>/dev/null &&
    { hcctl token revoke admin --yes 2>err; [ $? = 5 ]; } && grep -q "last admin token" err &&
    hcctl node list
'

test_expect_success 'an expired admin token is refused (exit 3) and hcctld token create recovers' '
    sqlite3 "$CTL_DIR/hcctld.db" "UPDATE tokens SET expires_at = 1 WHERE name = \"admin\"" &&
    { hcctl node list 2>err; [ $? = 3 ]; } &&
    rescue=$(hcctld token create --data-dir "$CTL_DIR" --name rescue --role admin | tail -n1) &&
    HCCTL_TOKEN=${rescue##* } hcctl token list -o json | jq -e ".tokens | length >= 2"
'

test_done
