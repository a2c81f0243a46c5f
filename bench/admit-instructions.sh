#!/bin/sh
# admit-instructions.sh - what one admission call costs Redis, counted in
# instructions (callgrind), not timed: the same figure on a quiet or a busy
# machine, so two builds of the admission script can be compared exactly
# (BENCHMARKS.md, "Redis's instructions per admission").
#
#   sh bench/admit-instructions.sh [SECKILL] [N ...]
#
# SECKILL: the seckill binary whose scripts are measured (default
# build/seckill); N: purchases per purchase_batch call (default 1 8 32).
# Starts a private redis-server under valgrind's callgrind in a temporary
# directory, loads the scripts the way serve does (an activity preheated
# and opened by the CLI), then per N: the activity's hashes reset to 1,000
# buyers and ledger entries, 20 warm-up calls, then 60 calls of N fresh
# buyers (redis-benchmark, one connection), and prints Redis's
# instructions per call and per purchase over those 60. Needs valgrind and
# redis-tools (redis-benchmark, redis-cli); stops everything it started.
set -eu
SECKILL=${1:-build/seckill}
[ $# -gt 0 ] && shift
SIZES=${*:-1 8 32}
for t in valgrind callgrind_control redis-server redis-cli redis-benchmark; do
    command -v $t >/dev/null || { echo "admit-instructions: $t not installed" >&2; exit 2; }
done
[ -x "$SECKILL" ] || { echo "admit-instructions: $SECKILL is not a program" >&2; exit 2; }
DIR=$(mktemp -d /tmp/seckill-instr-XXXXXX)
SOCK=$DIR/r.sock
cleanup() {
    redis-cli -s "$SOCK" shutdown nosave >/dev/null 2>&1 || true
    sleep 1
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.%p.out" \
    redis-server --port 0 --unixsocket "$SOCK" --save '' --dir "$DIR" >"$DIR/redis.log" 2>&1 &
VPID=$!
i=0
until redis-cli -s "$SOCK" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 200 ] || { echo "admit-instructions: redis did not start" >&2; exit 1; }
    sleep 0.1
done
A=9
URL="redis+unix://$SOCK"
DB="sqlite:$DIR/x.db"
"$SECKILL" activity create --id $A --name instr --stock 1000000000 --limit 1 --end +30d \
    --redis "$URL" --db "$DB" >/dev/null
"$SECKILL" activity preheat --id $A --redis "$URL" --db "$DB" >/dev/null
"$SECKILL" activity open --id $A --redis "$URL" --db "$DB" >/dev/null
FN=$(redis-cli -s "$SOCK" function list | grep -o 'sk_purchase_batch_[0-9a-f]*' | head -1)
[ -n "$FN" ] || { echo "admit-instructions: no purchase_batch function loaded" >&2; exit 1; }
echo "redis: $(redis-server --version | cut -d' ' -f3) under callgrind; seckill: $SECKILL ($FN)"
for n in $SIZES; do
    # FCALL as serve sends it: the key set's 9 keys, a limiter key per
    # purchase, the 9 call arguments, then user, quantity, key, IP, pass
    set -- FCALL "$FN" $((9 + n))
    for k in meta stock buyers orders idem ledger xin wr:spent reg; do set -- "$@" "sk:{a$A}:$k"; done
    j=0; while [ $j -lt "$n" ]; do set -- "$@" "sk:{a$A}:rl:u:x"; j=$((j + 1)); done
    set -- "$@" $A 0 0 0 0 '' 0 '' ''
    j=0; while [ $j -lt "$n" ]; do set -- "$@" __rand_int__ 1 '' '' ''; j=$((j + 1)); done
    redis-cli -s "$SOCK" del "sk:{a$A}:buyers" "sk:{a$A}:ledger" "sk:{a$A}:orders" >/dev/null
    redis-cli -s "$SOCK" eval "for i = 1, 1000 do redis.call('HSET', KEYS[1], 'x' .. i, 1);
        redis.call('HSET', KEYS[2], 'y' .. i, '1:1') end" 2 "sk:{a$A}:buyers" "sk:{a$A}:ledger" >/dev/null
    S0=$(redis-cli -s "$SOCK" get "sk:{a$A}:stock")
    redis-benchmark -s "$SOCK" -n 20 -c 1 -r 100000000000 "$@" >/dev/null 2>&1
    callgrind_control -z $VPID >/dev/null 2>&1
    redis-benchmark -s "$SOCK" -n 60 -c 1 -r 100000000000 "$@" >/dev/null 2>&1
    callgrind_control -d $VPID >/dev/null 2>&1
    OUT=$(ls -t "$DIR"/cg.*.out* | head -1)
    IR=$(grep -E '^(summary|totals):' "$OUT" | head -1 | awk '{print $2}')
    SOLD=$((S0 - $(redis-cli -s "$SOCK" get "sk:{a$A}:stock")))
    # random users may repeat (refused: over the limit); nearly all are admitted
    echo "batch $n: $((IR / 60)) instructions per call, $((IR / 60 / n)) per purchase" \
        "($SOLD of $((80 * n)) purchases admitted)"
done
