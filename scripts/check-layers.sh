#!/bin/sh
# check-layers.sh - the include graph must point down the layers:
#   core < redis < engine < store < orders < http             (libseckill.a)
#   < load, spawn (`seckill load`, the demo's private redis-server)
#   < cmd (the sub-commands)                                   (the seckill binary)
# and on top, beside each other:
#   tests/support/spawn (the test spawners: Cluster, Sentinel, PostgreSQL,
#   MariaDB), shared by the tests and bench/ (the seckill-bench binary).
# bench/ uses the library, load, spawn and the test spawners, never cmd
# nor the rest of tests/; the test spawners never use bench/. Nothing in
# src/ reaches bench/, tests/ or tools/ (the build's generators, which use
# nothing but each other and the tables they read).
# An internal header (*_int.h) is for the files of its own folder only.
# Also: no blocking hiredis call where an event loop runs, and no Redis key
# built inside a Lua script (every key comes in KEYS).
# Exits 1 and names each include that goes the wrong way.
cd "$(dirname "$0")/.." || exit 2
rank() {
    case "$1" in
    core) echo 0 ;; redis) echo 1 ;; engine) echo 2 ;; store) echo 3 ;;
    orders) echo 4 ;; http) echo 5 ;; load | spawn) echo 6 ;; cmd) echo 7 ;;
    testspawn | bench) echo 8 ;; *) echo 99 ;;
    esac
}
bad=0
for f in $(find src tools bench tests/support/spawn -name '*.[ch]' | sort); do
    case "$f" in
    src/*) layer=$(echo "$f" | cut -d/ -f2) ;;
    tools/*) layer=tools ;;
    bench/*) layer=bench ;;
    tests/support/spawn/*) layer=testspawn ;;
    esac
    mine=$(rank "$layer")
    dir=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case "$inc" in
        scripts_gen.h|web_gen.h|*.def|../src/core/codes.def|lib/*) continue ;;  # generated, or tables/Lua for the generator
        tools/*) target=tools ;;
        bench/*) target=bench ;;
        tests/support/spawn/*) target=testspawn ;;
        tests/*) target=tests ;;
        */*) target=$(echo "$inc" | cut -d/ -f1) ;;
        *) echo "check-layers: $f: include \"$inc\" has no layer folder"; bad=1; continue ;;
        esac
        theirs=$(rank "$target")
        ok=1
        if [ "$layer" = tools ]; then
            [ "$target" = tools ] || ok=0
        elif [ "$theirs" = 99 ]; then ok=0
        elif [ "$layer" = bench ] || [ "$layer" = testspawn ]; then
            # on top, beside each other: not cmd; the spawners never use bench
            [ "$target" = cmd ] && ok=0
            [ "$layer" = testspawn ] && [ "$target" = bench ] && ok=0
        elif [ "$theirs" -gt "$mine" ]; then
            ok=0
        fi
        case "$inc" in
        tools/*_int.h | bench/*_int.h | tests/*_int.h) [ "$(dirname "$inc")" = "$dir" ] || ok=0 ;;
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
# One Redis transport: the async client (src/redis/redis_async*.c), which
# the blocking callers run through redis_conn.c. Nowhere in src/ a blocking
# hiredis call (hiredis is the reply reader and the command formatter only),
# in src/redis/ no socket opened but by redis_async.c, and each protocol
# walk (handshake, the Sentinels' decision, the Cluster map and its
# redirections) driven from one file.
hiredis_io=$(grep -nE '\bredisv?(Connect[A-Za-z]*|Command[A-Za-z]*|GetReply|Append[A-Za-z]*|Buffer(Read|Write)|SetTimeout|Free)[[:space:]]*\(' \
    $(find src -name '*.[ch]' | sort))
if [ -n "$hiredis_io" ]; then
    echo "$hiredis_io" | sed 's/^/check-layers: a blocking hiredis call (one transport: redis_async.c): /'
    bad=1
fi
sockets=$(grep -nE '\b(socket|connect)[[:space:]]*\(' $(ls src/redis/*.c | grep -v '^src/redis/redis_async.c$'))
if [ -n "$sockets" ]; then
    echo "$sockets" | sed 's/^/check-layers: a socket of its own in src\/redis (one transport: redis_async.c): /'
    bad=1
fi
for walk in sk_handshake_init:src/redis/redis_async.c:src/redis/handshake.c \
    sk_sentinels_decide:src/redis/redis_async_sentinel.c:src/redis/sentinels.c \
    sk_cluster_parse_redirect:src/redis/redis_async_cluster.c:src/redis/redis_cluster.c \
    sk_cluster_map_apply:src/redis/redis_async_cluster.c:src/redis/redis_cluster.c; do
    fn=${walk%%:*}
    rest=${walk#*:}
    driver=${rest%%:*}
    home=${rest#*:}
    second=$(grep -lE "\\b$fn[[:space:]]*\\(" $(find src -name '*.c' ! -path "$driver" ! -path "$home" | sort))
    if [ -n "$second" ]; then
        echo "$second" | sed "s|^|check-layers: $fn drives a protocol outside $driver: |"
        bad=1
    fi
done
# Nor a name lookup: getaddrinfo and its kin wait for DNS. Names are
# resolved in core/resolve.c (on a thread of its own for a loop's client);
# http_server.c resolves the listening address once at startup, before
# the loop runs (sk_server_listen_fd). Nowhere else in src/.
resolving=$(grep -nE '\b(getaddrinfo|getaddrinfo_a|gethostbyname[0-9a-z_]*|gethostbyaddr[a-z_]*|getnameinfo|res_n?(query|search))[[:space:]]*\(' \
    $(find src -name '*.[ch]' ! -path src/core/resolve.c ! -path src/http/http_server.c | sort))
if [ -n "$resolving" ]; then
    echo "$resolving" | sed 's/^/check-layers: a blocking name lookup outside core\/resolve.c: /'
    bad=1
fi
# The map of the code names only files that exist.
doc_paths=$(sh scripts/check-doc-paths.sh) || { echo "$doc_paths"; bad=1; }
# Every key a script touches is in its KEYS (Redis requires it; Cluster
# routes by it): no script builds a key name (docs/design.md, "The
# scripts"). Outside comments, in lua/ and lua/lib/: no KEYS[i] taken apart
# or joined (`..`, string.*), no key name written out ('sk:...'), and every
# redis.call / redis.pcall names its key as KEYS[i] or a plain name (a
# library function's key parameter, given KEYS[i] by its caller).
lua_code=$(for f in lua/*.lua lua/lib/*.lua; do
    sed -e 's/--.*$//' "$f" | awk -v f="$f" '{ print f ":" NR ": " $0 }'
done)
built=$( (echo "$lua_code" | grep -E 'KEYS\[[^]]*\][[:space:]]*\.\.|\.\.[[:space:]]*KEYS\[|string\.[a-z]+\([[:space:]]*KEYS\['
    echo "$lua_code" | grep -E "[\"']sk:"
    echo "$lua_code" | grep -E "redis\.p?call\('[A-Z]+'," |
        grep -vE "redis\.p?call\('(TIME|INFO)'" |
        grep -vE "redis\.p?call\('(XINFO|XGROUP)', *'[A-Z]+', *(KEYS\[[^]]+\]|[A-Za-z_][A-Za-z_0-9.]*) *[,)]" |
        grep -vE "redis\.p?call\('[A-Z]+', *(KEYS\[[^]]+\]|[A-Za-z_][A-Za-z_0-9.]*) *[,)]") | sort -u)
if [ -n "$built" ]; then
    echo "$built" | sed 's/^/check-layers: a key not passed in KEYS: /'
    bad=1
fi
# Positions the scripts and C share are written once, in
# src/engine/script_pos.def (tools/gen_scripts.c gives the scripts
# LIST.name and C SK_<LIST>_<NAME>, SK_<LIST>_FIELDS, SK_<LIST>_EACH):
# in lua/, no meta hash read with a field list of its own (HMGET of
# KEYS[...] names a LIST.FIELDS), no reply of such a read indexed by a
# number, no KEYS[<number>] nor ARGV[<number>] (nor an offset
# <name> + <number>), and no count of KEYS or ARGV compared with a number
# (but 0); in C (src/), no script called with a number of keys or
# arguments (but 0), no script's KEYS written out (an initializer of
# keys is SK_K_<SCRIPT>_EACH or names its SK_K_ positions), no literal
# index in the argument builders of the big scripts, no meta field named
# in an HMGET (SK_M_<LIST>_FIELDS), no reply element read by number in a
# function that reads such an HMGET's reply, and the counts
# (SK_PURCHASE_NKEYS, SK_PREHEAT_ARGC, SK_FAIR_ARGC, SK_BATCH_ARGC,
# SK_QUEUE_ARGC) defined from the generated names.
pos_lua=$(for f in lua/*.lua lua/lib/*.lua; do
    code=$(sed -e 's/--.*$//' "$f")
    echo "$code" | grep -nE "'HMGET', *KEYS\[[^]]*\], *'" | sed "s|^|$f:|"
    for v in $(echo "$code" | sed -n "s/.*local \([a-z_]*\) = redis\.call('HMGET', *KEYS\[[^]]*\], *[A-Z_]*\.FIELDS).*/\1/p"); do
        echo "$code" | grep -nE "(^|[^a-zA-Z_.])$v\[[0-9]" | sed "s|^|$f:|"
    done
    echo "$code" | grep -nE '(ARGV|KEYS)\[ *[0-9]|(ARGV|KEYS|\ba|c\.a)\[[a-z_.]+ *[-+] *[0-9]+ *\]' | sed "s|^|$f:|"
    echo "$code" | grep -nE '#(ARGV|KEYS) *([=~<>]=?|[-+*/%]) *([1-9]|0[0-9])|[0-9] *([=~<>]=?|[-+*/%]) *#(ARGV|KEYS)' |
        sed "s|^|$f:|"
done)
pos_c=$(for fn in sk_stock_batch_args_head sk_stock_preheat_args sk_stock_fair_args sk_recovery_rebuild \
    write_cmd sk_stock_release_call replay_chunk sk_recovery_resume sk_queue_args_ch sk_reg_call_make \
    sk_draw_put sk_seg_lend_cmd sk_seg_xfer_in_cmd sk_queue_spent_call; do
    for f in $(grep -lE "^[a-z].*[ *]$fn\(" src/*/*.c); do
        awk -v fn="$fn" -v f="$f" '$0 ~ "^[a-z].*[ *]" fn "\\(" { on = 1 } on { print f ":" NR ": " $0 } on && /^}/ { on = 0 }' "$f"
    done
done | grep -vE ':[0-9]+: *(static +)?(const +)?(char|int|int64_t|size_t|struct [a-z_]+) ' |
    grep -E '\b(args|lens|buf|num|a|l|argv|keys|fa)\[([a-z_]+ *\+ *)?[0-9]+\]'
# a script's call, its keys and its arguments (joined across lines)
for f in $(find src -name '*.c' | sort); do
    tr '\n' ' ' <"$f" | tr -s ' ' |
        grep -oE '\bsk_(script_eval|script_append|stock_eval_ints|aredis_eval|aredis_eval_wait)\( *[^,]+, *SK_SCRIPT_[A-Z_]+, *([^,]+, *){0,2}[0-9]+ *,' |
        grep -vE 'SK_SCRIPT_[A-Z_]+, *([^,]+, *){2}0 *,$' | sed "s|^|$f: |"
    tr '\n' ' ' <"$f" | tr -s ' ' |
        grep -oE 'const char \*[a-z_]*keys\[[^]]*\] *= *\{ *[^ S[][^}]*\}|const char \*[a-z_]*keys\[[^]]*\] *= *\{ *(S[^K]|\[[^S])[^}]*\}' |
        sed "s|^|$f: |"
    grep -nE '"HMGET", *[]a-z_.>[-]*meta, *"|"HMGET %s [a-z]' "$f" | sed "s|^|$f:|"
    awk -v f="$f" '/^[a-z].*\(/ { fn = NR; n = 0; hm = 0 } { line[n++] = NR ": " $0 }
        /SK_M_[A-Z_]+_(N|FIELDS)([^A-Z_]|$)/ { hm = 1 }
        /^}/ { if (hm) for (i = 0; i < n; i++) if (line[i] ~ /element\[[0-9]+\]/) print f ":" line[i]; n = 0; hm = 0 }' "$f"
done
grep -nE '^#define (SK_PURCHASE_NKEYS|SK_PREHEAT_ARGC|SK_FAIR_ARGC|SK_BATCH_ARGC|SK_QUEUE_ARGC)\b.*[^A-Z_0-9][0-9]' \
    src/*/*.h | grep -vE 'SK_A_[A-Z_]+_N \* \(n\)')
if [ -n "$pos_lua$pos_c" ]; then
    { echo "$pos_lua" | sed '/^$/d; s/^/check-layers: a script position written by hand (name it in src\/engine\/script_pos.def): /'
      echo "$pos_c" | sed '/^$/d; s/^/check-layers: a script argument, key or meta field placed by number or by hand (use its SK_<LIST>_...): /'; }
    bad=1
fi
# The consumer group's name is written once, in src/engine/script_names.def
# (a script says NAME.WORKER_GROUP, C SK_WORKER_GROUP): no group named by
# a literal in an XGROUP, XREADGROUP or backlog read of lua/.
grp=$(grep -nE "'(XGROUP|XREADGROUP|XAUTOCLAIM|XPENDING|XINFO)'.*'[a-z][a-z0-9_-]*' *[,)]|backlog_of\([^)]*'" lua/*.lua lua/lib/*.lua |
    grep -vE "'(XINFO)', *'(GROUPS|STREAM)', *KEYS\[[^]]+\] *\)")
if [ -n "$grp" ]; then
    echo "$grp" | sed 's/^/check-layers: a consumer group named by a literal (NAME.WORKER_GROUP): /'
    bad=1
fi
# The store is one engine over drivers (docs/architecture.md, "The store"):
# its SQL is written once, in store_sql.c and store_schema.c's migration
# list, never in another src/store file (a driver that prepared SQL of its
# own would be a second implementation); the client libraries are called
# from their driver only, and a driver runs no statement of the engine's
# (sk_q_*, sk_tx*: the algorithms stay in the engine).
store_drivers="src/store/store_sqlite.c src/store/store_pg.c src/store/store_mysql.c"
store_sql=$(for f in src/store/*.[ch]; do
    case "$f" in src/store/store_sql.c | src/store/store_schema.c) continue ;; esac
    grep -nHE '"[^"]*\b(INSERT INTO|UPDATE [a-z_]+ SET|DELETE FROM|SELECT [^"]* FROM|CREATE (TABLE|INDEX)|ALTER TABLE)\b' "$f"
done)
store_lib=$(for f in src/store/*.[ch]; do
    case " $store_drivers " in *" $f "*) continue ;; esac
    grep -nHE '\b(sqlite3_[a-z_0-9]+|PQ[a-zA-Z]+|mysql_[a-z_]+)[[:space:]]*\(' "$f"
done)
store_algo=$(grep -nHE '\b(sk_q_[a-z]+|sk_tx(_end)?)[[:space:]]*\(' $store_drivers)
if [ -n "$store_sql$store_lib$store_algo" ]; then
    { echo "$store_sql" | sed '/^$/d; s/^/check-layers: SQL outside store_sql.c and store_schema.c: /'
      echo "$store_lib" | sed '/^$/d; s/^/check-layers: a database client call outside its driver: /'
      echo "$store_algo" | sed '/^$/d; s/^/check-layers: a store driver runs the engine'"'"'s statements: /'; }
    bad=1
fi
# One purchase engine (docs/architecture.md, "One purchase engine"): every
# admission is a purchase_batch.lua call built by sk_stock_batch_args_head
# and read by sk_stock_batch_parse; sk_stock_buy is its one blocking call.
# No second purchase script, no second argument builder, no blocking
# purchase variant, anywhere (src, tests, bench).
purchase_lua=$(ls lua/*.lua | grep -E '/(purchase|admit|buy)[a-z_]*\.lua$' | grep -v '^lua/purchase_batch\.lua$')
purchase_c=$(grep -rnE '\b(sk_stock_purchase[a-z_]*|sk_stock_batch_args(_rl)?|SK_SCRIPT_PURCHASE)\b' src tests bench \
    --include='*.[ch]')
if [ -n "$purchase_lua$purchase_c" ]; then
    { echo "$purchase_lua" | sed '/^$/d; s/^/check-layers: a second purchase script: /'
      echo "$purchase_c" | sed '/^$/d; s/^/check-layers: a second purchase path (use sk_stock_buy or sk_stock_batch_args_head): /'; }
    bad=1
fi
# One borrow driver: the segment borrow walk (engine/seg_borrow.h) is
# driven by serve's purchase_borrow.c alone (and fed bytes by its unit
# test); tests buy a segmented activity over HTTP (tests/support/serve_buy.c).
borrow=$(grep -rnE '\bsk_borrow_(init|scanned|lent|open|readmitted|lend_cmd)\b' src tests bench \
    --include='*.[ch]' | grep -vE '^(src/engine/seg_borrow\.[ch]|src/http/purchase_borrow\.c|tests/unit/test_seg_borrow\.c):')
if [ -n "$borrow" ]; then
    echo "$borrow" | sed 's/^/check-layers: a second driver of the borrow (serve'"'"'s is purchase_borrow.c): /'
    bad=1
fi
# Test fault hooks live in test builds only (-DSK_TEST, build/seckill-hooks):
# a SECKILL_TEST_ variable named in src/ code outside an #ifdef SK_TEST
# block is a hook the release binary would carry.
hooks=$(for f in $(grep -rlF '"SECKILL_TEST_' src --include='*.[ch]'); do
    awk -v f="$f" '/^#ifdef SK_TEST$/ { t = 1 } /^#endif/ { t = 0 }
        /"SECKILL_TEST_/ && !t { print f ":" NR ": " $0 }' "$f"
done)
if [ -n "$hooks" ]; then
    echo "$hooks" | sed 's/^/check-layers: a test hook outside #ifdef SK_TEST: /'
    bad=1
fi
[ $bad = 0 ] && echo "check-layers: ok"
exit $bad
