#!/bin/sh
# package-test.sh DIR VERSION - checks the Debian package `make deb` built
# in DIR, without installing it on this machine: lintian shows no error;
# the control data depends on runtime libraries only (no Redis, no
# database server), keeps /etc/seckill/seckill.conf as a conffile, creates
# the seckill system user and neither enables nor starts the unit; the
# package extracted into a throwaway root (dpkg-deb -x, never /usr) holds
# every file, its binary says the version, and its unit passes
# `systemd-analyze verify`; the benchmarks are a package of their own
# (seckill-bench) and the product's holds none. Prints "N passed, N failed".
set -u
dir=$1
version=$2
deb=$(ls "$dir"/seckill_"$version"_*.deb 2>/dev/null | head -1)
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

check "the package seckill_${version}_<arch>.deb was built" '[ -n "$deb" ] && [ -f "$deb" ]'
[ -n "$deb" ] || { echo "0 passed, 1 failed"; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

lintian_out=$(lintian --fail-on error "$deb" 2>&1)
check "lintian shows no error" '[ $? -eq 0 ] && ! printf "%s\n" "$lintian_out" | grep -q "^E:"'
printf '%s\n' "$lintian_out" | sed 's/^/    # lintian: /'

depends=$(dpkg-deb -f "$deb" Depends)
echo "    # Depends: $depends"
check "depends on the runtime libraries" 'echo "$depends" | grep -q libhiredis && echo "$depends" | grep -q libh2o-evloop && echo "$depends" | grep -q libpq && echo "$depends" | grep -q libssl'
check "depends on no server (Redis, PostgreSQL, MariaDB)" '! echo "$depends" | grep -Eq "redis-server|postgresql([^-]|$)|mariadb-server"'

ctrl="$root/ctrl"
dpkg-deb -e "$deb" "$ctrl"
check "/etc/seckill/seckill.conf is a conffile" 'grep -qx /etc/seckill/seckill.conf "$ctrl/conffiles"'
check "postinst creates the seckill system user" 'grep -q "adduser --system" "$ctrl/postinst" && grep -q "seckill" "$ctrl/postinst"'
check "postinst makes the config 0640 root:seckill" 'grep -q "/etc/seckill/seckill.conf:0640" "$ctrl/postinst" && grep -q "chown root:seckill" "$ctrl/postinst"'
# dh_installsystemd --no-enable --no-start: enabled again only where the
# operator had enabled it before an upgrade, never started
check "the unit is not started" '! grep -q "deb-systemd-invoke" "$ctrl/postinst"'
check "the unit is enabled only where it was before" 'grep -q "was-enabled" "$ctrl/postinst" && [ "$(grep -c "deb-systemd-helper enable" "$ctrl/postinst")" = "$(grep -A2 "was-enabled" "$ctrl/postinst" | grep -c "deb-systemd-helper enable")" ]'

files="$root/files"
dpkg-deb -x "$deb" "$files"
for f in /usr/bin/seckill /usr/share/man/man1/seckill.1.gz /usr/share/man/man5/seckill.conf.5.gz \
         /etc/seckill/seckill.conf /lib/systemd/system/seckill.service \
         /usr/share/seckill/prometheus/seckill-rules.yml /usr/share/seckill/openapi.yaml; do
    check "installs $f" '[ -e "$files$f" ]'
done
check "the installed binary says seckill $version" '[ "$("$files/usr/bin/seckill" --version)" = "seckill $version" ]'
sed "s|/usr/bin/seckill|$files/usr/bin/seckill|" "$files/lib/systemd/system/seckill.service" \
    > "$root/seckill.service"
verify=$(systemd-analyze verify --man=no "$root/seckill.service" 2>&1)
check "the installed unit passes systemd-analyze verify" '[ $? -eq 0 ] && [ -z "$verify" ]'
[ -n "$verify" ] && printf '%s\n' "$verify" | sed 's/^/    # /'
check "the man page renders" 'MANWIDTH=100 man -l -P cat "$files/usr/share/man/man1/seckill.1.gz" 2>/dev/null | grep -q "SECKILL(1)"'
check "the product's package holds no benchmarks" '[ ! -e "$files/usr/bin/seckill-bench" ] && ! grep -q sk_cli_bench "$files/usr/bin/seckill"'

# the benchmarks: a package of their own, that runs the product's binary
bdeb=$(ls "$dir"/seckill-bench_"$version"_*.deb 2>/dev/null | head -1)
check "the package seckill-bench_${version}_<arch>.deb was built" '[ -n "$bdeb" ] && [ -f "$bdeb" ]'
if [ -n "$bdeb" ]; then
    blint=$(lintian --fail-on error "$bdeb" 2>&1)
    check "lintian shows no error in seckill-bench" '[ $? -eq 0 ] && ! printf "%s\n" "$blint" | grep -q "^E:"'
    printf '%s\n' "$blint" | sed 's/^/    # lintian: /'
    check "seckill-bench depends on seckill of its version" 'dpkg-deb -f "$bdeb" Depends | grep -q "seckill (= $version)"'
    dpkg-deb -x "$bdeb" "$files"
    check "installs /usr/bin/seckill-bench" '[ -x "$files/usr/bin/seckill-bench" ]'
    check "installs /usr/share/man/man1/seckill-bench.1.gz" '[ -e "$files/usr/share/man/man1/seckill-bench.1.gz" ]'
    check "the installed seckill-bench says seckill-bench $version" '[ "$("$files/usr/bin/seckill-bench" --version)" = "seckill-bench $version" ]'
    check "seckill bench points at seckill-bench" '"$files/usr/bin/seckill" bench http 2>&1 | grep -q "seckill-bench http" && [ "$("$files/usr/bin/seckill" bench http >/dev/null 2>&1; echo $?)" = 2 ]'
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
