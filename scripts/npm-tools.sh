#!/bin/sh
# npm-tools.sh - the npm packages the document tests use (@redocly/cli to
# lint docs/openapi.yaml, ajv to validate answers against it, yaml to read
# it), installed at test time into build-npm/ (gitignored), never at build
# time. A second run installs nothing; concurrent runs wait for each other.
# Prints the folder.
set -e
cd "$(dirname "$0")/.."
dir="$PWD/build-npm"
mkdir -p "$dir"
(
    flock 9
    if [ ! -x "$dir/node_modules/.bin/redocly" ] || [ ! -d "$dir/node_modules/ajv" ] ||
        [ ! -d "$dir/node_modules/yaml" ] || [ ! -d "$dir/node_modules/ajv-formats" ]; then
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            @redocly/cli@2.77.0 ajv@8.20.0 ajv-formats@3.0.1 yaml@2.9.1 >&2
    fi
) 9>"$dir/.lock"
echo "$dir"
