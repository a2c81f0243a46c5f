#!/bin/sh
# check-format.sh FILE... - fails when a file is not formatted as
# .clang-format says (`make format` fixes it). Skipped, with a note, when
# clang-format is not installed (scripts/deps.sh installs it for make test).
command -v clang-format >/dev/null 2>&1 || { echo "check-format: clang-format not installed, skipped"; exit 0; }
bad=""
for f in "$@"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
[ -z "$bad" ] && exit 0
echo "check-format: not formatted (run make format):$bad" >&2
exit 1
