#!/usr/bin/env bash
# The controller's thread rule (docs/architecture.md "Layout"): the API thread never waits on the
# network. Its code is controller/api/ and the state queries of controller/state/ it calls; none
# of those files may include, even through other headers, a header that talks to nodes: the
# clients of controller/remote/, the HTTP client (common/https_client.h), libcurl or libssh. The
# headers of controller/ops/ and controller/state/, which the API thread includes to submit
# operations and read state, must not drag one in either. Every node call needs a client made
# through those headers, or an operation context, which only the workers have.
#
# The compiler answers which headers a file includes (gcc/clang -H prints the include tree),
# with the flags of the build itself from compile_commands.json; a violation prints the chain.
. "$(dirname "$0")/lib.sh"

BUILD=$(cd "$HC_BIN/.." && pwd)
SRC=$(cd "${HC_SRC:?HC_SRC must point at the source tree}" && pwd)
DB=$BUILD/compile_commands.json
# Node-talking headers, as the compiler prints their paths.
NET='(^|/)controller/remote/[^/]+\.h$|(^|/)common/https_client\.h$|(^|/)curl/curl\.h$|(^|/)libssh/libssh\.h$'

# The build's command for source file $1 (relative to SRC), with its directory on the first
# line; fails when the build does not compile that file.
build_command() {
    jq -er --arg f "$SRC/$1" 'first(.[] | select(.file == $f)) | .directory, .command' "$DB" ||
        { echo "$1: not in $DB (missing from the source lists of CMakeLists.txt?)"; return 1; }
}

# Prints the include tree of $1 (a .c of the build, or a header compiled with the flags of
# $2) as the compiler reports it (-H: one line per header read, dots for the depth).
include_tree() {
    local file=$1 as=${2:-$1} cmd dir out
    cmd=$(build_command "$as") || return 1
    dir=$(head -n 1 <<<"$cmd")
    cmd=$(tail -n +2 <<<"$cmd" | sed -E 's# -o [^ ]+##; s# -c [^ ]+$##')
    # the command is shell-quoted by CMake (-DHC_VERSION=\"...\"): let the shell read it
    out=$(cd "$dir" && eval "$cmd -fsyntax-only -H -x c \"\$SRC/\$file\"" 2>&1 >/dev/null) ||
        { echo "$file does not compile:"; echo "$out"; return 1; }
    grep -E '^\.+ ' <<<"$out" || true # a header may include nothing (test 1 proves -H works)
}

# For each file given (headers: compiled with the flags of the build's file $1; "" for .c
# files): prints "file -> header -> ... -> node-talking header" for the first node-talking
# header each one reaches. Returns 0 when none does, 1 when one does, 2 when it cannot tell.
net_chains() {
    local as=$1 file tree rc=0
    shift
    for file in "$@"; do
        tree=$(include_tree "$file" "${as:-$file}") || { echo "$tree"; return 2; }
        awk -v net="$NET" -v src="$SRC/" -v file="$file" '
            {
                depth = index($0, " ") - 1
                path = substr($0, depth + 2)
                if (index(path, src) == 1) path = substr(path, length(src) + 1)
                sub(/^\.\//, "", path)
                stack[depth] = path
                if (path ~ net) {
                    chain = file
                    for (i = 1; i <= depth; i++) chain = chain " -> " stack[i]
                    print chain
                    exit 1
                }
            }' <<<"$tree" || rc=1
    done
    return $rc
}

files_of() { (cd "$SRC" && ls $1); }

test_expect_success 'the check sees a node-talking header where one is included' '
    { out=$(net_chains "" controller/remote/poller.c); rc=$?; } &&
    echo "$out" &&
    [ "$rc" = 1 ] &&
    grep -qx "controller/remote/poller.c -> controller/remote/poller.h" <<<"$out"
'

test_expect_success 'no API-thread file includes a node-talking header' '
    net_chains "" $(files_of "controller/api/*.c controller/state/*.c")
'

test_expect_success 'no header of api/, ops/ or state/ includes a node-talking header' '
    net_chains controller/api/api.c controller/controller.h \
        $(files_of "controller/api/*.h controller/ops/*.h controller/state/*.h")
'

test_done
