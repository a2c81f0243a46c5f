#!/bin/sh
# check-doc-paths.sh - the documents name files that exist, and speak of the
# product, not of how it was built.
# Reads the given Markdown files (default: every user document: README.md,
# CONTRIBUTING.md, BENCHMARKS.md, docs/**/*.md and the man pages) and fails
#  - on a path (src/..., lua/..., tests/..., bench/..., tools/..., scripts/...,
#    docs/...) that is not in the tree, and on a bare file name (name.c, .h,
#    .lua, .def, .sh) that no file of src/, lua/, bench/, tests/, tools/ or
#    scripts/ has;
#  - on words about the project's process: "session N", "issue N" (an issue
#    number as a heading or a reference), a contributor's name ("helper a1",
#    "other helpers"), "this round", "the lead". How we got there goes in
#    commit messages; a document says what the product does now.
# Exits 1 and names each one. SK_CHECK_ROOT=DIR checks another tree (its test).
cd "${SK_CHECK_ROOT:-$(dirname "$0")/..}" || exit 2
if [ $# = 0 ]; then
    set -- $(ls README.md CONTRIBUTING.md BENCHMARKS.md 2>/dev/null) \
        $(find docs -name '*.md' 2>/dev/null | sort) $(ls man/*.in 2>/dev/null)
fi
# Pages that another branch of the project is writing, named by links
# before they exist here. Empty this list once they are in the tree.
pending=""
bad=0
for doc in "$@"; do
    # paths: rooted in a top folder, possibly with a glob star or a
    # trailing slash (a folder)
    for p in $(grep -oE '(^|[^A-Za-z0-9_./-])(src|lua|tests|bench|tools|scripts|docs|web|etc|man)/[A-Za-z0-9_./*-]+' "$doc" |
        sed -E 's/^[^a-z]//; s/[.]+$//' | sort -u); do
        case " $pending " in *" $p "*) continue ;; esac
        case "$p" in
        *'*'*) ls -d $p >/dev/null 2>&1 || { echo "check-doc-paths: $doc: no file matches $p"; bad=1; } ;;
        *) [ -e "$p" ] || { echo "check-doc-paths: $doc: $p does not exist"; bad=1; } ;;
        esac
    done
    # bare names in backticks: `order_guard.c`
    for n in $(grep -oE '`[A-Za-z0-9_-]+\.(c|h|lua|def|sh)`' "$doc" | tr -d '`' | sort -u); do
        [ -n "$(find src lua bench tests tools scripts -name "$n" -print -quit 2>/dev/null)" ] ||
            { echo "check-doc-paths: $doc: no file is named $n"; bad=1; }
    done
    # process words, also across a line break ("session\n11")
    words=$(perl -0777 -ne '
        while (/\b(sessions?\s+\d+|issues?\s+\#?\d+|helpers?\s+[a-z]\d*\b(?![\x27\w-])|(?:other|another|several|two|three|six)\s+helpers\b|helper\x27s\s+(?:report|branch|suite|work)|from\s+the\s+[\w-]+\s+helper\b|[\w-]+\s+helper\)|(?:this|next|previous|last)\s+round\b(?!\s*trip)|the\s+lead\b(?!\s+time))/gi) {
            my ($w, $at) = ($1, $-[1]);
            my $line = 1 + (() = substr($_, 0, $at) =~ /\n/g);
            $w =~ s/\s+/ /g;
            print "$line: \"$w\"\n";
        }' "$doc")
    if [ -n "$words" ]; then
        echo "$words" | sed "s|^|check-doc-paths: $doc:|; s|\$| (a word about the process, not the product)|"
        bad=1
    fi
done
[ $bad = 0 ] && echo "check-doc-paths: ok"
exit $bad
