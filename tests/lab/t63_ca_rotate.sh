#!/usr/bin/env bash
# CA rotation on a 3-node namespace lab (issue 18, docs/certificates.md "CA rotation"): nodes
# brought up by cluster create over SSH, hcstor 1.0 serving on the storage network under hcload;
# `hcctld ca rotate` moves every certificate to a new CA with no poll finding a node
# unreachable, hcload sees 0 errors and loses nothing, no service restarts, and the controller
# is then reached by new connections with the new CA alone. Then `node renew-cert` on one node
# (a renewal asked by hand) under the same load.
. "$(dirname "$0")/lab_test.sh"
. "$HC_SRC/tests/lab/upgrade_lib.sh"

upgrade_lab_up carot hcr 3 3

pids() {
    local i
    for i in 1 2 3; do pgrep -f "hcstor --listen 198.18.1.$((10 + i)):7480" | head -1; done | tr '\n' ' '
}

test_expect_success 'hcstor 1.0 on every node, hcload running' '
    hcctl -q software upload "$BUNDLES/hcstor-1.0.tar.gz" &&
    hcctl upgrade --rolling --to 1.0 --yes >up.out 2>&1 &&
    cp "$CTL_DIR/ca.pem" old-ca.pem && before=$(pids) && echo "$before" >pids.before &&
    load_start rot
'

test_expect_success 'hcctld ca rotate under hcload: every certificate on the new CA, no node unreachable' '
    watch_health "$T/health.txt" &&
    hcctld ca rotate --data-dir "$CTL_DIR" --timeout 3m >rotate.out 2>rotate.err &&
    stop_daemon watch KILL && cat rotate.out && grep -q "^CA rotation done" rotate.out &&
    [ "$(wc -l <"$T/health.txt")" -ge 9 ] && ! grep -v " reachable $" "$T/health.txt" &&
    [ "$(grep -c "BEGIN CERTIFICATE" "$CTL_DIR/ca.pem")" = 1 ] && ! cmp -s old-ca.pem "$CTL_DIR/ca.pem" &&
    for i in 1 2 3; do
        lab_exec n$i cat "$AGENT_DATA/ca.pem" | cmp - "$CTL_DIR/ca.pem" &&
        lab_exec n$i cat "$AGENT_DATA/agent.pem" >agent$i.pem &&
        openssl verify -partial_chain -CAfile "$CTL_DIR/ca.pem" agent$i.pem || exit 1
    done &&
    openssl verify -partial_chain -CAfile "$CTL_DIR/ca.pem" "$CTL_DIR/server.pem" "$CTL_DIR/client.pem" &&
    [ "$(pids)" = "$(cat pids.before)" ]
'

test_expect_success 'node renew-cert under the same load' '
    s=$(hcctl node show hcr-n2 -o json | jq -r .node.cert_serial) &&
    hcctl node renew-cert hcr-n2 >renew.out && cat renew.out &&
    [ "$(hcctl node show hcr-n2 -o json | jq -r .node.cert_serial)" != "$s" ] &&
    wait_for 10 "[ \$(hcctl node show hcr-n2 -o json | jq -r .node.health) = reachable ]"
'

test_expect_success 'hcload: 0 errors, nothing lost, across both' '
    load_stop rot && [ "$(pids)" = "$(cat pids.before)" ]
'

test_done
