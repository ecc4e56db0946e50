#!/usr/bin/env bash
# Denial of service against the real hcctld (issue 12, items 2 and 3): anonymous 60 MiB bodies
# are refused before they are read (VmHWM measured), the connection cap holds, a silent
# connection is closed at --request-deadline, and bad limit options are usage errors. The
# admin bundle upload itself is covered by t30_software.
. "$(dirname "$0")/lib.sh"
exec 3>&1 # the figures go to the test's output, not to test.out

# Without AddressSanitizer's quarantine, VmHWM is what hcctld holds, not what it has freed.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$(pid_of hcctld)/status"; }
fds() { ls "/proc/$(pid_of hcctld)/fd" | wc -l; }
# post PATH [CURL ARGS...]: 60 MiB of zeros as the body; prints the status (000: no answer).
post60() {
    local path=$1
    shift
    head -c 62914560 /dev/zero | curl -sS --max-time 60 --cacert "$CTL_DIR/ca.pem" -o /dev/null \
        -w '%{http_code}' -X POST -H 'Expect:' -H 'Content-Type: application/gzip' \
        --data-binary @- "$@" "$CTL_URL$path"
}

test_expect_success 'anonymous 60 MiB bodies are refused without being buffered' '
    controller_init &&
    controller_start --max-connections 8 &&
    hwm0=$(hwm_kb) &&
    s1=$(post60 /v1/software) && s2=$(post60 /v1/cluster) && s3=$(post60 /v1/enroll) &&
    hwm=$(hwm_kb) &&
    echo "# VmHWM $hwm0 kB -> $hwm kB after three anonymous 60 MiB POSTs ($s1 $s2 $s3)" >&3 &&
    [ "$s1" = 413 ] && [ "$s2" = 413 ] && [ "$s3" = 413 ] &&
    [ $((hwm - hwm0)) -lt 16384 ]
'

test_expect_success 'a read-only token does not get the upload limit either' '
    ro=$(hcctld token create --data-dir "$CTL_DIR" --name dos-ro --role readonly) &&
    hwm0=$(hwm_kb) &&
    s=$(post60 /v1/software -H "Authorization: Bearer $ro") &&
    hwm=$(hwm_kb) &&
    echo "# read-only upload: $s, VmHWM $hwm0 -> $hwm kB" >&3 &&
    [ "$s" = 413 ] && [ $((hwm - hwm0)) -lt 16384 ]
'

test_expect_success 'beyond --max-connections connections wait; the server still answers after' '
    base=$(fds) &&
    for i in $(seq 1 20); do eval "exec {fd$i}<>/dev/tcp/127.0.0.1/$CTL_PORT"; done &&
    sleep 1 &&
    held=$(( $(fds) - base )) &&
    echo "# 20 connections opened, hcctld holds $held more descriptors" >&3 &&
    grep -q "connections open, the limit" "$T/hcctld.log" &&
    for i in $(seq 1 20); do eval "exec {fd$i}>&-"; done &&
    [ "$held" -le 8 ] &&
    wait_for 10 "hcctl version -o json | jq -e .controller.version"
'

test_expect_success 'a connection that never starts TLS is closed at --request-deadline' '
    controller_stop &&
    controller_start --request-deadline 1s &&
    exec {silent}<>/dev/tcp/127.0.0.1/$CTL_PORT &&
    t0=$(date +%s%N) &&
    timeout 5 cat <&$silent >/dev/null &&
    ms=$(( ($(date +%s%N) - t0) / 1000000 )) &&
    exec {silent}>&- &&
    echo "# closed after $ms ms" >&3 &&
    [ "$ms" -ge 700 ] && [ "$ms" -lt 3000 ] &&
    grep -q "no complete tls handshake within 1000 ms" "$T/hcctld.log"
'

test_expect_success 'the agent closes a silent connection at its deadline and stays reachable' '
    agent_join n1 127.0.0.2 &&
    agent_kill n1 TERM &&
    { hcagent run --data-dir "$T/n1" --request-deadline 1s --max-connections 4 \
        >"$T/n1run.log" 2>&1 & echo $! >"$T/pids/n1"; } &&
    wait_for 10 "grep -q serving \"$T/n1run.log\"" &&
    for i in 1 2 3 4 5 6; do eval "exec {a$i}<>/dev/tcp/127.0.0.2/$AGENT_PORT"; done &&
    t0=$(date +%s%N) &&
    timeout 5 cat <&$a1 >/dev/null &&
    ms=$(( ($(date +%s%N) - t0) / 1000000 )) &&
    for i in 1 2 3 4 5 6; do eval "exec {a$i}>&-"; done &&
    echo "# agent: silent connection closed after $ms ms" >&3 &&
    [ "$ms" -ge 700 ] && [ "$ms" -lt 3000 ] &&
    grep -q "no complete tls handshake within 1000 ms" "$T/n1run.log" &&
    grep -q "4 connections open, the limit" "$T/n1run.log" &&
    wait_for 15 "[ \"\$(node_health n1)\" = reachable ]"
'

test_expect_success 'bad --max-connections and --request-deadline are usage errors' '
    hcctld run --data-dir "$CTL_DIR" --max-connections 0 2>err; [ $? = 2 ] &&
    grep -q "max-connections" err &&
    hcctld run --data-dir "$CTL_DIR" --request-deadline 5ms 2>err; [ $? = 2 ] &&
    grep -q "request-deadline" err &&
    hcagent run --data-dir "$T/none" --max-connections 0 2>err; [ $? = 2 ] &&
    grep -q "max-connections must be" err &&
    hcagent run --data-dir "$T/none" --request-deadline 11m 2>err; [ $? = 2 ] &&
    grep -q "request-deadline must be" err &&
    hcagent run --help | grep -q -- --request-deadline
'

test_done
