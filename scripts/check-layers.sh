#!/bin/sh
# check-layers.sh - the include graph must point down the layers:
#   core < redis < engine < store < orders < http < cmd        (src/)
# tools/ and bench/ sit beside cmd: they may use every layer below it,
# and cmd may use them; nothing in src/ below cmd may use them.
# An internal header (*_int.h) is for the files of its own folder only.
# Exits 1 and names each include that goes the wrong way.
cd "$(dirname "$0")/.." || exit 2
rank() {
    case "$1" in
    core) echo 0 ;; redis) echo 1 ;; engine) echo 2 ;; store) echo 3 ;;
    orders) echo 4 ;; http) echo 5 ;; cmd) echo 6 ;;
    tools | bench) echo 7 ;; *) echo 99 ;;
    esac
}
bad=0
for f in $(find src tools bench -name '*.[ch]' | sort); do
    case "$f" in
    src/*) layer=$(echo "$f" | cut -d/ -f2) ;;
    tools/*) layer=tools ;;
    bench/*) layer=bench ;;
    esac
    mine=$(rank "$layer")
    dir=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case "$inc" in
        scripts_gen.h|web_gen.h|*.def|../src/core/codes.def|lib/*) continue ;;  # generated, or tables/Lua for the generator
        tools/*) target=tools ;;
        bench/*) target=bench ;;
        */*) target=$(echo "$inc" | cut -d/ -f1) ;;
        *) echo "check-layers: $f: include \"$inc\" has no layer folder"; bad=1; continue ;;
        esac
        theirs=$(rank "$target")
        ok=1
        if [ "$theirs" = 99 ]; then ok=0
        elif [ "$layer" = tools ] || [ "$layer" = bench ]; then
            # beside cmd: not cmd itself; tools never use bench
            [ "$target" = cmd ] && ok=0
            [ "$layer" = tools ] && [ "$target" = bench ] && ok=0
        elif [ "$theirs" -gt "$mine" ]; then
            # below: only cmd may reach tools/ and bench/
            ok=0
            [ "$layer" = cmd ] && { [ "$target" = tools ] || [ "$target" = bench ]; } && ok=1
        fi
        case "$inc" in
        tools/*_int.h | bench/*_int.h) [ "$(dirname "$inc")" = "$dir" ] || ok=0 ;;
        *_int.h) [ "$(dirname "src/$inc")" = "$dir" ] || ok=0 ;;
        esac
        if [ $ok = 0 ]; then
            echo "check-layers: $f ($layer) includes \"$inc\" ($target): goes up a layer or into another folder's internals"
            bad=1
        fi
    done
done
# Nothing blocks an event loop but its own sockets: no blocking hiredis call
# (connect, command, reply read) in a file an event loop runs.
loop_files=$(ls src/http/*.[ch] src/redis/redis_async*.[ch] 2>/dev/null)
blocking=$(grep -nE '\bredis(Connect[A-Za-z]*|Command[A-Za-z]*|GetReply)[[:space:]]*\(' $loop_files)
if [ -n "$blocking" ]; then
    echo "$blocking" | sed 's/^/check-layers: a blocking hiredis call where an event loop runs: /'
    bad=1
fi
[ $bad = 0 ] && echo "check-layers: ok"
exit $bad
