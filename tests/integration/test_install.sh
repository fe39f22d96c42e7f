#!/bin/sh
# make install honours PREFIX and DESTDIR: the two programs and both man pages.
top=${STEER_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
dest=$(mktemp -d /tmp/smg-steer-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }

if make --no-print-directory -C "$top" install DESTDIR="$dest" PREFIX=/opt/steer >"$dest.log" 2>&1; then
	ok "make install DESTDIR=... PREFIX=/opt/steer"
else
	sed 's/^/# /' "$dest.log" | tail -20
	nok "make install DESTDIR=... PREFIX=/opt/steer"
fi
rm -f "$dest.log"
for f in sbin/smg-steerd sbin/smg-steerctl; do
	[ -x "$dest/opt/steer/$f" ] && ok "$f installed, executable" || nok "$f installed, executable"
done
"$dest/opt/steer/sbin/smg-steerd" --version | grep -q '^smg-steerd ' &&
	ok "the installed smg-steerd runs" || nok "the installed smg-steerd runs"
for m in smg-steerd.8 smg-steerctl.8; do
	page="$dest/opt/steer/share/man/man8/$m"
	[ -f "$page" ] && man -l "$page" 2>/dev/null | grep -q NAME &&
		ok "$m installed and renders" || nok "$m installed and renders"
done
echo "1..$n"
exit $fail
