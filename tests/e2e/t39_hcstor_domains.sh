#!/usr/bin/env bash
# hcstor with failure domains (issue 19): six real hcstor processes on 127.0.0.101-106 in three
# domains, peers files written as the agent writes them. Checked: every block's two replicas are
# in distinct domains (read from the block files on disk, not from what hcstor says); ok-to-stop
# for a set is yes for a whole domain and no, naming the block, for a set holding both replicas
# of a block (which really is on those two nodes only); a malformed or unknown set is 400; a
# domain changed moves the copies (resync, then drops) so that the replicas are in distinct
# domains again, and nothing is lost; with fewer domains than replicas the rest is filled.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hcstor_lib.sh"


# DOMAIN[i]: node i's failure domain ("" none)
declare -A DOMAIN=([1]=ra [2]=ra [3]=rb [4]=rb [5]=rc [6]=rc)
EPOCH=1
peers_file() { # the members list of n1..n6 with their DOMAIN, a new epoch each time
    local i sep=""
    EPOCH=$((EPOCH + 1))
    printf '{"epoch": %d, "nodes": [' "$EPOCH"
    for i in 1 2 3 4 5 6; do
        printf '%s{"name": "n%s", "host": "127.0.0.10%s"' "$sep" "$i" "$i"
        [ -n "${DOMAIN[$i]}" ] && printf ', "domain": "%s"' "${DOMAIN[$i]}"
        printf '}'
        sep=", "
    done
    printf ']}\n'
}
push() { # push FILE: FILE becomes every node's peers file, one after the other
    local i
    for i in 1 2 3 4 5 6; do
        mkdir -p "$T/n$i" && cp "$1" "$T/n$i/.peers.tmp" && mv "$T/n$i/.peers.tmp" "$T/n$i/peers.json" ||
            return 1
        sleep 0.05
    done
}
holders() { local i; for i in 1 2 3 4 5 6; do [ -f "$T/n$i/blocks/$1" ] && printf '%s ' "$i"; done; }
# every block k1..k60 is on exactly 2 nodes, in 2 distinct domains (or, with fewer domains than
# 2, on 2 nodes anyway)
spread() {
    local k h a b
    for k in $(seq 1 60); do
        h=$(holders "k$k")
        set -- $h
        [ $# = 2 ] || { echo "k$k on nodes: $h"; return 1; }
        a=${DOMAIN[$1]:-n$1} b=${DOMAIN[$2]:-n$2}
        [ "$a" != "$b" ] || [ "$(printf '%s\n' "${DOMAIN[@]}" | sort -u | wc -l)" -lt 2 ] ||
            { echo "k$k on n$1 and n$2, both in $a"; return 1; }
    done
}
all_read() {
    local i k got
    for i in 1 2 3 4 5 6; do for k in $(seq 1 60); do
        got=$(get "$i" "k$k")
        [ "$got" = "$1-k$k" ] || { echo "n$i k$k: $got"; return 1; }
    done; done
}
sum() { local i t=0; for i in 1 2 3 4 5 6; do t=$((t + $(resync "$i" | jq ".$1"))); done; echo $t; }
settled() { # every node serving, nothing pending, no stale copy left
    local i
    for i in 1 2 3 4 5 6; do
        [ "$(state $i)" = serving ] && resync $i | jq -e ".pending == 0 and .settled and .stale == 0" >/dev/null || return 1
    done
}
oks() { curl -s --max-time 5 "$(url "$1")/ok-to-stop${2:+?nodes=$2}"; }

# made here, not in a test body (a subshell): the epochs grow from one list to the next
peers_file >p1.json
DOMAIN[2]=rb DOMAIN[6]="" && peers_file >p2.json
for i in 1 2 3 4 5 6; do DOMAIN[$i]=one; done && peers_file >p3.json
map1() { DOMAIN=([1]=ra [2]=ra [3]=rb [4]=rb [5]=rc [6]=rc); }
map2() { DOMAIN=([1]=ra [2]=rb [3]=rb [4]=rb [5]=rc [6]=""); }
map3() { DOMAIN=([1]=one [2]=one [3]=one [4]=one [5]=one [6]=one); }
map1

test_expect_success 'six members in three domains: every block on two nodes of distinct domains' '
    push p1.json && for i in 1 2 3 4 5 6; do start $i || exit 1; done &&
    wait_for 15 settled &&
    curl -s $(url 3)/health | jq -e ".domain == \"rb\" and .domains == 3" &&
    grep -q "in 3 failure domain(s)" n1.log &&
    for k in $(seq 1 60); do put $(( k % 6 + 1 )) "k$k" "a-k$k" >/dev/null || exit 1; done &&
    spread && all_read a
'

test_expect_success 'ok-to-stop for a whole domain: yes, from each of its nodes' '
    oks 1 n1,n2 >ra1.json && oks 2 n1,n2 >ra2.json && cat ra1.json &&
    jq -e ".ok_to_stop and .set_blocks == 0 and (.nodes | sort) == [\"n1\",\"n2\"]" ra1.json &&
    jq -e ".ok_to_stop and .set_blocks == 0" ra2.json &&
    jq -e ".reason | test(\"outside the set\")" ra1.json
'

test_expect_success 'ok-to-stop for a set holding both replicas of a block: no, naming the block' '
    k=$(for k in $(seq 1 60); do [ "$(holders k$k)" = "1 3 " ] && echo k$k && break; done) &&
    echo "block on n1 and n3 only: $k" && [ -n "$k" ] &&
    oks 1 n3 >bad.json && cat bad.json &&
    jq -e ".ok_to_stop == false and .set_blocks > 0 and .unprotected_blocks >= .set_blocks" bad.json &&
    first=$(jq -r ".reason" bad.json | sed -n "s/^block .\([^ ]*\). has every replica in the set.*/\1/p") &&
    echo "named: $first" && [ "$(holders "$first")" = "1 3 " ] &&
    # this node alone is fine: every block has another serving replica
    oks 1 | jq -e ".ok_to_stop and (has(\"nodes\") | not)"
'

test_expect_success 'a malformed or unknown set is refused with 400' '
    for q in n9 "n1,,n2" ""; do
        code=$(curl -s -o e.json -w "%{http_code}" "$(url 1)/ok-to-stop?nodes=$q") &&
        echo "nodes=$q: $code $(cat e.json)" && [ "$code" = 400 ] &&
        jq -e ".error.code == \"invalid_argument\"" e.json || exit 1
    done
'

test_expect_success 'a domain changed: copies move (resync, drops), distinct domains again, nothing lost' '
    map2 && push p2.json &&
    wait_for 30 settled && sleep 1 && wait_for 30 settled &&
    curl -s $(url 2)/health | jq -e ".domain == \"rb\" and .domains == 4" &&
    curl -s $(url 6)/health | jq -e ".domain == null" &&
    spread && all_read a && echo "dropped $(sum dropped)" && [ "$(sum dropped)" -gt 0 ]
'

test_expect_success 'one domain for all: two copies anyway (fewer domains than replicas)' '
    map2 && spread && map3 && push p3.json &&
    wait_for 30 settled && sleep 1 && wait_for 30 settled &&
    spread && all_read a &&
    oks 1 n1,n2,n3,n4,n5,n6 | jq -e ".ok_to_stop == false and .set_blocks > 0"
'

test_done
