#!/bin/sh
# deps.sh - install the Debian packages seckill needs to build, test and demo,
# only when something is missing (a second run never calls apt). clang and
# its runtime (libclang-rt-dev: libFuzzer and the sanitizers) build the
# fuzz targets that `make test` runs for a few seconds each.
set -e
PKGS="build-essential pkg-config redis-server redis-tools libhiredis-dev libsqlite3-dev
      libpq-dev postgresql libmariadb-dev mariadb-server libjansson-dev libssl-dev
      libh2o-evloop-dev clang-format chromium fonts-dejavu-core fonts-wqy-microhei clang
      libclang-rt-dev"
# chromium: the suite loads the dashboard and the buyer's page in a real
# (headless) browser; fonts-wqy-microhei draws the page's Chinese text in
# its screenshots.
# mariadb-server: the suite runs private mariadbd servers of its own; the
# package's service is kept from starting (policy-rc.d below).
# `deps.sh bench`: also the reference servers and tools the benchmarks use
# (not needed by make test or make demo).
[ "${1:-}" = bench ] && PKGS="$PKGS nginx-light wrk gnuplot-nox"
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
# Debian's packages start their service on install (mariadb on 3306 with
# /etc/mysql's settings); seckill never uses it. A policy-rc.d that exits
# 101 tells invoke-rc.d not to start anything during the install; one that
# was already there is kept and put back.
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then saved=$(mktemp); cp -p "$policy" "$saved"; fi
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod 755 "$policy"
restore() { if [ -n "$saved" ]; then mv "$saved" "$policy"; else rm -f "$policy"; fi; }
trap restore EXIT
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
# The Debian package starts a system redis on 6379; seckill never uses it.
