# tests/lab/lab_test.sh — what every lab test script (tests/lab/tNN_*.sh) starts with: the skip
# without root, the e2e library (tests/e2e/lib.sh) and the lab (lab.sh) sourced, the lab torn down
# with the test's daemons, and the lab's address plan. Source it first: `. "$(dirname "$0")/lab_test.sh"`.
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (network namespaces, sshd)"; exit 0; fi
. "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
. "$HC_SRC/tests/lab/lab.sh"
lab_trap_teardown 'e2e_cleanup'
# test_done prints these too when a test failed: each lab node's agent log (its /var/lib/hcctl is
# LAB_STATE/nI/var-lib-hcctl), read before the trap tears the lab down.
extra_logs() { ls "$LAB_STATE"/n*/var-lib-hcctl/agent.log 2>/dev/null; }

CTL_URL=https://198.18.0.1:$CTL_PORT
node_ip() { echo "198.18.0.$((10 + $1))"; }
last_op() { hcctl operation list -o json | jq -r '.operations[0].id'; }
# Other helpers' labs use the same address plan: wait for theirs to go rather than fail.
lab_up_when_free() {
    local i
    for i in $(seq 1 40); do
        ip -4 -o addr show to 198.18.0.0/15 | grep -q . || break
        echo "# another lab is up; waiting" >&2
        sleep 10
    done
    lab_up "$@"
}
