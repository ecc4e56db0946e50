# What the tests of bare hcstor processes on 127.0.0.10N (t38, t39) share: node N serves on
# 127.0.0.10N:$PORT with its data in $T/nN. Sourced after lib.sh.
PORT=$(free_port)
url() { echo "http://127.0.0.10$1:$PORT"; }
start() { # start N: hcstor nN with whatever peers file its directory holds (none: alone)
    mkdir -p "$T/n$1"
    hcstor --listen "127.0.0.10$1:$PORT" --data "$T/n$1" --node "n$1" --version 1.3 \
        >>"$T/n$1.log" 2>&1 &
    echo $! >"$T/pids/n$1"
    wait_for 10 "curl -sf $(url "$1")/health >/dev/null"
}
state() { curl -s --max-time 3 "$(url "$1")/health" | jq -r .state; }
resync() { curl -s --max-time 3 "$(url "$1")/resync"; }
put() { curl -sSf --max-time 10 -X PUT --data-binary "$3" "$(url "$1")/blocks/$2"; }
get() { curl -sS --max-time 10 "$(url "$1")/blocks/$2"; }
