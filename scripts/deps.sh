#!/bin/sh
# deps.sh [build|demo|package|bench] - install the Debian packages seckill
# needs to build, demo, test or package, only when something is missing (a second run never calls apt). clang and
# its runtime (libclang-rt-dev: libFuzzer and the sanitizers) build the
# fuzz targets that `make test` runs for a few seconds each.
set -e
BUILD_PKGS="build-essential pkg-config libhiredis-dev libsqlite3-dev libpq-dev libmariadb-dev
            libjansson-dev libssl-dev libh2o-evloop-dev libcurl4-openssl-dev"
# `deps.sh package`: Debian's packaging tools (make deb, make package-test).
PACKAGE_PKGS="dpkg-dev debhelper fakeroot lintian man-db"
PKGS="$BUILD_PKGS redis-server redis-tools postgresql mariadb-server clang-format
      chromium fonts-dejavu-core fonts-wqy-microhei clang libclang-rt-dev prometheus nodejs
      python3 openssl curl systemd man-db iproute2 nftables faketime libfaketime strace $PACKAGE_PKGS"
# chromium: the suite loads the dashboard and the buyer's page in a real
# (headless) browser; fonts-wqy-microhei draws the page's Chinese text in
# its screenshots.
# mariadb-server: the suite runs private mariadbd servers of its own.
# prometheus: its promtool checks the alert rules, a real server scrapes a
# node. nodejs/npm: the OpenAPI linter and schema validator (npm packages
# installed at test time into build/npm, never at build time). python3 and
# openssl: tokens made independently of the code under test. curl (with
# openssl and redis-tools): the README's quick start, which the suite runs.
# strace: the unit's SystemCallFilter is checked against every system call
# a sale makes (tests/test_systemd.c).
# iproute2, nftables: the partition tests (`make partitions`) build hosts in
# network namespaces of their own and cut links with nft rules.
# faketime, libfaketime: the nemesis's clock jumps (`make chaos`) move the
# wall clock of a serve host and of the order worker.
# `deps.sh build`: what a plain `make` needs, nothing more; only checked,
# never installed (the message names each missing -dev package).
# `deps.sh bench`: also the reference servers and tools the benchmarks use
# (not needed by make test or make demo; linux-perf: `bench http` counts
# system calls per request with perf stat).
# npm: Debian's package, unless the installed nodejs brought its own
[ -z "${1:-}" ] && ! command -v npm >/dev/null 2>&1 && PKGS="$PKGS npm"
[ "${1:-}" = build ] && PKGS="$BUILD_PKGS"
[ "${1:-}" = package ] && PKGS="$BUILD_PKGS $PACKAGE_PKGS"
# `deps.sh demo` (make demo): the build and the one server the demo starts
# (redis-server; its store is SQLite, its buyers are seckill load). The
# browser, MariaDB, PostgreSQL, Prometheus and lintian are the suite's.
[ "${1:-}" = demo ] && PKGS="$BUILD_PKGS redis-server"
[ "${1:-}" = bench ] && PKGS="$PKGS nginx-light wrk gnuplot-nox linux-perf"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
# `deps.sh build` (a plain `make`) installs nothing: it names what is
# missing, each -dev package with what it is for, and how to get it.
if [ "${1:-}" = build ]; then
    echo "make: cannot build, missing Debian packages:" >&2
    for p in $missing; do
        case "$p" in
        build-essential) what="the C compiler, make" ;;
        pkg-config) what="finds the libraries' flags" ;;
        libhiredis-dev) what="hiredis, the Redis client library" ;;
        libsqlite3-dev) what="SQLite" ;;
        libpq-dev) what="libpq, the PostgreSQL client library" ;;
        libmariadb-dev) what="libmariadb, the MariaDB/MySQL client library" ;;
        libjansson-dev) what="jansson, JSON" ;;
        libssl-dev) what="OpenSSL" ;;
        libh2o-evloop-dev) what="libh2o-evloop, the HTTP server library" ;;
        *) what="" ;;
        esac
        echo "  $p${what:+ ($what)}" >&2
    done
    echo "install them with: apt-get install$missing (or \`make deps\`, as root: everything the tests need too)" >&2
    exit 1
fi
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages and not root; install them with: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packages' own services (redis-server, postgresql, mariadb, prometheus)
# are not started: the tests start private servers on free ports. A
# policy-rc.d that exits 101 says so to invoke-rc.d, for this install only;
# one that was already there is kept and put back.
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then saved=$(mktemp); cp -p "$policy" "$saved"; fi
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod 755 "$policy"
restore() { if [ -n "$saved" ]; then mv "$saved" "$policy"; else rm -f "$policy"; fi; }
trap restore EXIT
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
