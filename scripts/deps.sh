#!/bin/sh
# deps.sh - install the Debian packages seckill needs to build, test and demo,
# only when something is missing (a second run never calls apt). clang and
# its runtime (libclang-rt-dev: libFuzzer and the sanitizers) build the
# fuzz targets that `make test` runs for a few seconds each.
set -e
BUILD_PKGS="build-essential pkg-config libhiredis-dev libsqlite3-dev libpq-dev libjansson-dev
            libssl-dev libh2o-evloop-dev"
# `deps.sh package`: Debian's packaging tools (make deb, make package-test).
PACKAGE_PKGS="dpkg-dev debhelper fakeroot lintian man-db"
PKGS="$BUILD_PKGS redis-server redis-tools postgresql clang-format
      chromium fonts-dejavu-core clang libclang-rt-dev prometheus nodejs python3 openssl
      systemd man-db $PACKAGE_PKGS"
# chromium: the suite loads the dashboard in a real (headless) browser.
# prometheus: its promtool checks the alert rules, a real server scrapes a
# node. nodejs/npm: the OpenAPI linter and schema validator (npm packages
# installed at test time into build/npm, never at build time). python3 and
# openssl: tokens made independently of the code under test.
# `deps.sh build`: what a plain `make` needs, nothing more.
# `deps.sh bench`: also the reference servers and tools the benchmarks use
# (not needed by make test or make demo).
# npm: Debian's package, unless the installed nodejs brought its own
[ -z "${1:-}" ] && ! command -v npm >/dev/null 2>&1 && PKGS="$PKGS npm"
[ "${1:-}" = build ] && PKGS="$BUILD_PKGS"
[ "${1:-}" = package ] && PKGS="$BUILD_PKGS $PACKAGE_PKGS"
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
# Packages' own services (redis-server, prometheus, postgresql) are not
# started: the tests start private servers on free ports. A policy-rc.d
# that exits 101 says so to invoke-rc.d, for this install only.
own_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing || { [ -n "$own_policy" ] && rm -f /usr/sbin/policy-rc.d; exit 1; }
[ -n "$own_policy" ] && rm -f /usr/sbin/policy-rc.d
exit 0
