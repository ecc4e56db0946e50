#!/usr/bin/env bash
# Node identity (docs/security.md "Node identity"): a join token no longer buys a certificate
# for any name or address, hcctl pins the controller's key, and a node's address and name are
# the controller's to give. Real hcctld, hcagent and hcctl on 127.0.0.0/8; the fake controller
# is openssl s_server with a certificate the cluster CA really signed.
. "$(dirname "$0")/lib.sh"

controller_init && controller_start || { echo "not ok - controller did not start"; exit 1; }

# join NAME LISTEN [TOKEN-OPTIONS...]: a hand join; 0 once the agent is enrolled (it keeps
# running, as "hcagent NAME"), 1 when it exited refused (its stderr on ours).
join() {
    local name=$1 listen=$2 token pid
    shift 2
    token=$(hcctl cluster join-token --ttl 5m "$@") || return 1
    HCAGENT_TOKEN=$token hcagent join --controller "$CTL_URL" --data-dir "$T/$name" \
        --listen "$listen" --name "$name" 2>"$T/$name.join" &
    pid=$!
    echo $pid >"$T/pids/$name"
    wait_for 15 "[ -f '$T/$name/agent.json' ] || ! alive $pid"
    cat "$T/$name.join" >&2
    [ -f "$T/$name/agent.json" ]
}

test_expect_success 'the CLI config pins the controller key, and hcctl uses it' '
    pin=$(jq -r .controller_pin "$XDG_CONFIG_HOME/hcctl/config.json") &&
    case $pin in sha256//*) ;; *) exit 1 ;; esac &&
    want=$(openssl x509 -in "$CTL_DIR/server.pem" -pubkey -noout | openssl pkey -pubin -outform der |
        openssl dgst -sha256 -binary | base64) &&
    [ "$pin" = "sha256//$want" ] &&
    hcctl node list
'

test_expect_success 'a CA-signed impostor at the controller URL never receives the admin token' '
    fake_port=$(free_port) &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=hcctld \
        -keyout fake.key -out fake.csr 2>/dev/null &&
    printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" >fake.ext &&
    openssl x509 -req -in fake.csr -CA "$CTL_DIR/ca.pem" -CAkey "$CTL_DIR/ca.key" \
        -CAcreateserial -days 1 -extfile fake.ext -out fake.pem 2>/dev/null &&
    # s_server prints what clients send; it needs an open stdin to keep serving. It writes its
    # own pid, under a name no join uses (the join named "fake" below overwrote "fake", so the
    # cleanup missed it and the orphan held the lab lock); timeout bounds it in any case
    { sleep 60 | sh -c "echo \$\$ >\"\$1\"; exec timeout 60 openssl s_server \
        -accept 127.0.0.1:$fake_port -cert fake.pem -key fake.key" sh "$T/pids/impostor" \
        >fake.out 2>fake.err & } &&
    # 15 s: openssl starts slowly on a loaded 2-core machine (CI once timed out at 5)
    { wait_for 15 "ss -ltnH \"( sport = :$fake_port )\" | grep -q ." || { cat fake.err; false; }; } &&
    jq --arg u "https://127.0.0.1:$fake_port" ".controller = \$u" \
        "$XDG_CONFIG_HOME/hcctl/config.json" >fake-config.json &&
    mkdir -p fakexdg/hcctl && cp fake-config.json fakexdg/hcctl/config.json &&
    chmod 600 fakexdg/hcctl/config.json &&
    { XDG_CONFIG_HOME=$T/fakexdg hcctl node list 2>err; [ $? = 3 ]; } &&
    grep -q "not the controller this config pins" err &&
    sleep 0.3 && ! grep -q "Bearer" fake.out &&
    # without the pin, only the CA and the name are checked: the impostor gets the token
    jq "del(.controller_pin)" fake-config.json >fakexdg/hcctl/config.json &&
    ! XDG_CONFIG_HOME=$T/fakexdg hcctl --timeout 1s node list 2>/dev/null &&
    wait_for 5 "grep -q Bearer fake.out"
'

test_expect_success 'a join for the controller own address is refused' '
    ! join fake 127.0.0.1:$AGENT_PORT 2>err && cat err &&
    grep -q "address .127.0.0.1. is the controller" err &&
    [ ! -f "$T/fake/agent.pem" ]
'

test_expect_success 'reserved names are refused: a node may not be called hcctld-client or admin' '
    for n in hcctld-client admin controller; do
        ! join "$n" 127.0.0.31:$AGENT_PORT 2>err || exit 1
        grep -q "reserved" err || { cat err; exit 1; }
    done
'

test_expect_success 'a real node joins; a phantom with its address is refused' '
    join real 127.0.0.30:$AGENT_PORT &&
    wait_for 10 "[ \"\$(node_health real)\" = reachable ]" &&
    ! join phantom 127.0.0.30:$((AGENT_PORT + 1)) 2>err && cat err &&
    grep -q "belongs to node .real." err &&
    [ "$(hcctl node list -o json | jq ".nodes | length")" = 1 ]
'

test_expect_success 'a token for one address and name enrolls only that node' '
    ! join n40 127.0.0.41:$AGENT_PORT --address 127.0.0.40 --name n40 2>err && cat err &&
    grep -q "this join token is for address .127.0.0.40." err &&
    ! join other 127.0.0.40:$AGENT_PORT --address 127.0.0.40 --name n40 2>err &&
    grep -q "this join token is for node .n40." err &&
    join n40 127.0.0.40:$AGENT_PORT --address 127.0.0.40 --name n40
'

test_expect_success 'bad join-token options are usage errors or clear refusals' '
    ! hcctl cluster join-token --name controller 2>err && grep -q reserved err &&
    ! hcctl cluster join-token --address "a b" 2>err && grep -q "invalid address" err
'

test_expect_success 'the agent pins the controller key it enrolled with' '
    jq -e ".controller_pin | startswith(\"sha256//\")" "$T/real/agent.json" &&
    [ "$(jq -r .controller_pin "$T/real/agent.json")" = "$(jq -r .controller_pin "$XDG_CONFIG_HOME/hcctl/config.json")" ]
'

test_done
