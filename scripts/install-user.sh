#!/bin/sh
# install-user.sh DESTDIR SYSCONFDIR STATEDIR MODE - what `make install`
# makes beside the files: the seckill system user and group the unit runs
# as, its state directory STATEDIR (0750 seckill:seckill: the SQLite
# database goes there), SYSCONFDIR/seckill (0750 root:seckill) and its
# seckill.conf (0640 root:seckill: it may hold the admin token, the HMAC
# secret, database passwords).
#   - root, DESTDIR empty: done on this system;
#   - root, DESTDIR holding etc/passwd (a system image's root): done in it
#     (useradd --prefix: the host's own users are not touched);
#   - otherwise (not root, or a staging DESTDIR): the modes are set where
#     the files are, and the commands to run as root on the target system
#     are printed, exactly.
# MODE "no": nothing (the Debian package's postinst does it instead).
set -eu
dest=$1
etc=$2/seckill
state=$3
mode=${4:-auto}
[ "$mode" = no ] && exit 0
conf=$etc/seckill.conf

commands() {
    cat <<EOF
  getent group seckill >/dev/null || groupadd --system seckill
  getent passwd seckill >/dev/null || useradd --system --gid seckill --home-dir $state --no-create-home --shell /usr/sbin/nologin --comment "seckill flash-sale engine" seckill
  install -d -o seckill -g seckill -m 0750 $state
  chown root:seckill $etc $conf
  chmod 0750 $etc
  chmod 0640 $conf
EOF
}

if [ "$(id -u)" = 0 ] && { [ -z "$dest" ] || [ -f "$dest/etc/passwd" ]; }; then
    prefix=""
    [ -n "$dest" ] && prefix="--prefix $dest"
    if [ -n "$dest" ]; then
        grep -q '^seckill:' "$dest/etc/group" || groupadd $prefix --system seckill
        grep -q '^seckill:' "$dest/etc/passwd" ||
            useradd $prefix --system --gid seckill --home-dir "$state" --no-create-home \
                --shell /usr/sbin/nologin --comment "seckill flash-sale engine" seckill
        uid=$(grep '^seckill:' "$dest/etc/passwd" | cut -d: -f3)
        gid=$(grep '^seckill:' "$dest/etc/group" | cut -d: -f3)
    else
        getent group seckill >/dev/null || groupadd --system seckill
        getent passwd seckill >/dev/null ||
            useradd --system --gid seckill --home-dir "$state" --no-create-home \
                --shell /usr/sbin/nologin --comment "seckill flash-sale engine" seckill
        uid=$(id -u seckill)
        gid=$(getent group seckill | cut -d: -f3)
    fi
    install -d -o "$uid" -g "$gid" -m 0750 "$dest$state"
    chown "0:$gid" "$dest$etc" "$dest$conf"
    chmod 0750 "$dest$etc"
    chmod 0640 "$dest$conf"
    echo "install: user seckill ($uid:$gid), $state (0750 seckill:seckill), $conf (0640 root:seckill)"
    exit 0
fi

# Not here: the modes where the files are, the owners by the commands.
[ -n "$dest" ] && install -d -m 0750 "$dest$state"
chmod 0750 "$dest$etc"
chmod 0640 "$dest$conf"
if [ -n "$dest" ]; then
    echo "install: staged in $dest; on the system it is installed to, run as root:"
else
    echo "install: not root; run as root:"
fi
commands
