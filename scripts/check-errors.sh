#!/bin/sh
# check-errors.sh - an exported function in src/ fails with a negative SK_E*
# code (core/error.h), never a bare -1: SK_EINVAL is -1, so a bare -1 reads
# as "invalid argument" to sk_strerror whatever went wrong. A function whose
# -1 is a value, not a failure (a port, an index "not found"), says so on
# the line: `return -1; /* value: ... */`. Static functions are the file's
# own business. Exits 1 and names each bare -1.
cd "${SK_CHECK_ROOT:-$(dirname "$0")/..}" || exit 2 # SK_CHECK_ROOT: another tree (its test)
bad=0
for f in $(find src -name '*.c' | sort); do
    out=$(awk -v file="$f" '
        # a definition starts at column 0 (clang-format: the name and its
        # parameters, then "{" on a line of its own)
        /^[A-Za-z_].*\(/ && !/;[[:space:]]*$/ { fn = $0; exported = ($0 !~ /^static /) }
        /^}/ { fn = "" }
        /return -1;/ && fn != "" && exported && !/\/\* value:/ {
            sub(/\(.*/, "", fn); n = split(fn, w, /[ *]+/)
            printf "check-errors: %s:%d: %s returns a bare -1 (an SK_E* code, or /* value: why */)\n", file, NR, w[n]
        }' "$f")
    if [ -n "$out" ]; then echo "$out"; bad=1; fi
done
[ $bad = 0 ] && echo "check-errors: ok"
exit $bad
