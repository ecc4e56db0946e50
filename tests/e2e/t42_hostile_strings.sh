#!/usr/bin/env bash
# Terminal escape sequences in what nodes report (issue 12): `hcctl node show` and `node list`
# text output show them as escapes, never as bytes a terminal obeys, and -o json keeps the data.
# The strings are planted in the controller's database (as an older controller, which stored
# agents' words as they came, may have left them) on a node whose agent is stopped, so that the
# poller does not overwrite them; what the controller itself stores from agents is cleaned
# (tests/unit/test_agent_limits.c).
. "$(dirname "$0")/lib.sh"

ESC=$(printf '\033') BEL=$(printf '\007')

test_expect_success 'a cluster with one node whose agent is down' '
    controller_init && controller_start &&
    agent_join n1 127.0.0.2 &&
    wait_for 10 "[ \$(reachable_count) = 1 ]" &&
    agent_kill n1 &&
    wait_for 15 "[ \$(node_health n1) = unreachable ]"
'

test_expect_success 'escape sequences planted in the node row' '
    sqlite3 -cmd ".timeout 5000" "$CTL_DIR/hcctld.db" \
        "UPDATE nodes SET hostname = char(27) || \"]0;pwned\" || char(7) || char(27) || \"[2J\",
                agent_version = \"1.0\" || char(27) || \"[31m\" || char(13) || char(8)
         WHERE name = \"n1\"" &&
    hcctl node show n1 -o json | jq -e ".node.hostname == \"\u001b]0;pwned\u0007\u001b[2J\""
'

test_expect_success 'node show text output shows them escaped' '
    hcctl node show n1 >out.txt &&
    ! grep -q "[$ESC$BEL]" out.txt &&
    ! tr -d "\n" <out.txt | grep -q "[[:cntrl:]]" &&
    grep -qF "Hostname:" out.txt &&
    grep -F "Hostname:" out.txt | grep -qF "\\x1b]0;pwned\\x07\\x1b[2J" &&
    grep -F "Agent version:" out.txt | grep -qF "1.0\\x1b[31m\\x0d\\x08"
'

test_expect_success 'node list text output too' '
    hcctl node list >out.txt &&
    ! tr -d "\n" <out.txt | grep -q "[[:cntrl:]]"
'

test_expect_success 'the JSON document reads back as the stored data' '
    hcctl node list -o json | jq -e ".nodes[0].hostname | test(\"pwned\")"
'

test_done
