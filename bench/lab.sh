#!/bin/bash
# bench/lab.sh - a small bench for experiments on the admission path: one
# private redis-server on a unix socket (no persistence) and one
# `seckill serve`, driven by `seckill load`, with the CPU of each process
# per request, the machine's idle and steal over the run, and serve's batch
# sizes. What BENCHMARKS.md's session 8 and 9 sections measured with it.
#
#   bench/lab.sh up [BUILD_DIR]     start Redis and serve (build/ by default);
#                                   activities 7 (stock 10^7), 8 (sold out),
#                                   9 (stock 10^8), all open
#   bench/lab.sh load ACT N [ARGS]  N purchases on activity ACT, closed loop,
#                                   fresh users; ARGS go to `seckill load`
#   bench/lab.sh down               stop both
#
# Environment: LAB (default /tmp/seckill-lab: pids, logs, socket, SQLite
# file), PORT (18080), ROLE (api), PROCS (1), SERVE_ARGS (more serve
# options), C (connections, 200), B (the build whose `seckill load` drives,
# default the one given to up). Everything listens on 127.0.0.1 or a unix
# socket only. Nothing here is a test: figures are for alternating runs.
set -u
D=${LAB:-/tmp/seckill-lab}/run
P=${PORT:-18080}
TOKEN=lab-admin-token-1234

make_activity() {
    local auth="Authorization: Bearer $TOKEN" u="127.0.0.1:$P/api/v1/activities"
    curl -s -H "$auth" -d "{\"id\":$1,\"name\":\"lab\",\"stock\":$2,\"per_user_limit\":1,\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}" "$u" >/dev/null
    curl -s -XPOST -H "$auth" "$u/$1/preheat" >/dev/null
    curl -s -XPOST -H "$auth" "$u/$1/open" >/dev/null
}

up() {
    local b=${1:-build}
    b=$(cd "$b" && pwd)
    rm -rf "$D"
    mkdir -p "$D"
    echo "$b" >"$D/build"
    redis-server --port 0 --unixsocket "$D/r.sock" --unixsocketperm 700 --save '' --dir "$D" \
        --logfile "$D/redis.log" --daemonize yes --pidfile "$D/redis.pid"
    for _ in $(seq 50); do [ -S "$D/r.sock" ] && break; sleep 0.1; done
    # shellcheck disable=SC2086 # SERVE_ARGS is a list of options
    "$b/seckill" serve --listen "127.0.0.1:$P" --redis "redis+unix://$D/r.sock" \
        --db "sqlite:$D/orders.db" --admin-token "$TOKEN" --role "${ROLE:-api}" \
        --processes "${PROCS:-1}" --log-level warn ${SERVE_ARGS:-} >"$D/serve.log" 2>&1 &
    echo $! >"$D/serve.pid"
    for _ in $(seq 100); do curl -s "127.0.0.1:$P/healthz" >/dev/null && break; sleep 0.1; done
    make_activity 7 10000000
    make_activity 8 1
    make_activity 9 100000000
    # activity 8's one unit goes, so it answers sold out locally
    curl -s -XPOST -H 'X-User-Id: 1' -d '{"quantity":1}' "127.0.0.1:$P/api/v1/activities/8/purchase" >/dev/null
    curl -s -XPOST -H 'X-User-Id: 2' -d '{"quantity":1}' "127.0.0.1:$P/api/v1/activities/8/purchase" >/dev/null
}

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# serve's processes: the supervisor and its children
serve_ticks() {
    local t=0 sp
    sp=$(cat "$D/serve.pid")
    for p in $sp $(pgrep -P "$sp"); do t=$((t + $(cpu_ticks "$p"))); done
    echo $t
}
# CPU seconds of this shell's waited-for children in a `times` output
# (bash's builtin, run in this shell: a subshell's would count its own)
children_s() {
    awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}
stat_col() { awk -v c="$1" '/^cpu /{print $c}' /proc/stat; }
batches() {
    curl -s "127.0.0.1:$P/metrics" | awk '/^seckill_batch_size_count/{print $2}'
}

load() {
    local act=$1 n=$2
    shift 2
    local b=${B:-$(cat "$D/build")} rp hz
    rp=$(cat "$D/redis.pid")
    hz=$(getconf CLK_TCK)
    redis-cli -s "$D/r.sock" config resetstat >/dev/null
    local s0 r0 i0 st0 b0 t0
    s0=$(serve_ticks); r0=$(cpu_ticks "$rp"); i0=$(stat_col 5); st0=$(stat_col 9)
    b0=$(batches); t0=$(date +%s.%N)
    local c0 c1
    times >"$D/times0"
    "$b/seckill" load --url "http://127.0.0.1:$P" --activity "$act" --connections "${C:-200}" \
        --requests "$n" --users 100000000 --user-base "$RANDOM$RANDOM" --order-check no --quiet \
        "$@" >"$D/load.out" 2>&1
    times >"$D/times1"
    c0=$(children_s "$D/times0")
    c1=$(children_s "$D/times1")
    grep -E "verification|errors" "$D/load.out"
    local t1 s1 r1 i1 st1 b1
    t1=$(date +%s.%N); s1=$(serve_ticks); r1=$(cpu_ticks "$rp"); i1=$(stat_col 5)
    st1=$(stat_col 9); b1=$(batches)
    awk -v n="$n" -v t="$(echo "$t1 - $t0" | bc)" -v s=$((s1 - s0)) -v r=$((r1 - r0)) -v l="$(echo "$c1 - $c0" | bc)" \
        -v i=$((i1 - i0)) -v st=$((st1 - st0)) -v bt=$((${b1:-0} - ${b0:-0})) -v hz="$hz" 'BEGIN {
        printf "req/s %.0f  serve us/req %.2f  redis us/req %.2f  load us/req %.2f  idle cores %.2f  steal cores %.2f  mean batch %.1f\n",
            n / t, s / hz * 1e6 / n, r / hz * 1e6 / n, l * 1e6 / n, i / hz / t, st / hz / t, (bt > 0 ? n / bt : 0) }'
}

down() {
    [ -f "$D/serve.pid" ] && kill "$(cat "$D/serve.pid")" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$(cat "$D/serve.pid" 2>/dev/null)" 2>/dev/null || break; sleep 0.1; done
    [ -S "$D/r.sock" ] && redis-cli -s "$D/r.sock" shutdown nosave >/dev/null 2>&1
    return 0
}

case "${1:-}" in
up) shift; up "$@" ;;
load) shift; load "$@" ;;
down) down ;;
*)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
