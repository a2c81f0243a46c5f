#!/bin/sh
# fuzz.sh BUILD SECONDS TARGET... - runs each libFuzzer target
# BUILD/fuzz_<target> for SECONDS from its seeds (tests/fuzz/corpus/<target>,
# read only) and what earlier runs learned (BUILD/corpus/<target>), prints
# one line per target with its executions, and exits 1 when one crashed
# (the input is kept as BUILD/artifacts/<target>-crash-...).
build=$1
secs=$2
shift 2
cd "$(dirname "$0")/.." || exit 2
failed=""
for t in "$@"; do
    mkdir -p "$build/corpus/$t" "$build/artifacts"
    log="$build/fuzz_$t.log"
    "$build/fuzz_$t" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
        >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -ne 0 ]; then
        echo "fuzz $t: FAILED after ${runs:-?} executions (log $log):"
        grep -E "ERROR|property broken|runtime error|SUMMARY" "$log" | head -5
        failed="$failed $t"
    else
        echo "fuzz $t: ${runs:-?} executions in $secs s, no crash"
    fi
done
[ -z "$failed" ] || { echo "fuzz: crashed:$failed" >&2; exit 1; }
