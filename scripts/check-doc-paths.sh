#!/bin/sh
# check-doc-paths.sh - every file a map of the code names must exist.
# Reads the given Markdown files (default: docs/architecture.md) and fails
# on a path (src/..., lua/..., tests/..., bench/..., tools/..., scripts/...,
# docs/...) that is not in the tree, and on a bare file name (name.c, .h,
# .lua, .def, .sh) that no file of src/, lua/, bench/, tests/, tools/ or
# scripts/ has. Exits 1 and names each one.
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || set -- docs/architecture.md
bad=0
for doc in "$@"; do
    # paths: rooted in a top folder, possibly with a glob star or a
    # trailing slash (a folder)
    for p in $(grep -oE '(^|[^A-Za-z0-9_./-])(src|lua|tests|bench|tools|scripts|docs|web|etc|man)/[A-Za-z0-9_./*-]+' "$doc" |
        sed -E 's/^[^a-z]//; s/[.]+$//' | sort -u); do
        case "$p" in
        *'*'*) ls -d $p >/dev/null 2>&1 || { echo "check-doc-paths: $doc: no file matches $p"; bad=1; } ;;
        *) [ -e "$p" ] || { echo "check-doc-paths: $doc: $p does not exist"; bad=1; } ;;
        esac
    done
    # bare names in backticks: `order_guard.c`
    for n in $(grep -oE '`[A-Za-z0-9_-]+\.(c|h|lua|def|sh)`' "$doc" | tr -d '`' | sort -u); do
        [ -n "$(find src lua bench tests tools scripts -name "$n" -print -quit)" ] ||
            { echo "check-doc-paths: $doc: no file is named $n"; bad=1; }
    done
done
[ $bad = 0 ] && echo "check-doc-paths: ok"
exit $bad
