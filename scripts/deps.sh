#!/bin/sh
# deps.sh - install the Debian packages seckill needs to build, test and demo,
# only when something is missing (a second run never calls apt). clang and
# its runtime (libclang-rt-dev: libFuzzer and the sanitizers) build the
# fuzz targets that `make test` runs for a few seconds each.
set -e
PKGS="build-essential pkg-config redis-server redis-tools libhiredis-dev libsqlite3-dev
      libpq-dev postgresql libjansson-dev libssl-dev libh2o-evloop-dev clang-format
      chromium fonts-dejavu-core clang libclang-rt-dev"
# chromium: the suite loads the dashboard in a real (headless) browser.
# `deps.sh bench`: also the reference servers and tools the benchmarks use
# (not needed by make test or make demo; linux-perf: `bench http` counts
# system calls per request with perf stat).
[ "${1:-}" = bench ] && PKGS="$PKGS nginx-light wrk gnuplot-nox linux-perf"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages and not root; install them with: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
# The Debian package starts a system redis on 6379; seckill never uses it.
