#!/usr/bin/env bash
# The .deb on a clean system: builds the package (cpack, as
# tests/cli/test_package.sh does), installs it into a bare Debian 12 root
# that has none of reapd's libraries, with apt resolving its Depends from
# the package's control data, checks what an operator gets, then removes
# and purges it and checks what stays and what goes.
#
# The root: `mmdebstrap --variant=minbase bookworm` (bookworm,
# bookworm-updates and bookworm-security from deb.debian.org, apt's lists
# kept in it), made once and cached as a tarball next to scripts/image's
# bases, in $REAPD_IMAGE_CACHE (default /var/cache/reapd/images):
# deb-test-root.tar. It is unpacked afresh into a scratch directory on
# every run. The .debs apt fetches for reapd's dependencies are kept in
# deb-test-apt/ there (bind-mounted as the root's /var/cache/apt/archives),
# for the install only, so once both are cached the test needs no
# network: apt installs from the cached lists and .debs. Should the mirror have dropped a version
# the cached lists name, apt's first attempt fails and the test runs
# `apt-get update` in the root and tries again. REAPD_DEB_REFRESH=1 makes
# the root anew.
#
# In the root (chroot(8), in a mount namespace of the test's own, /proc
# mounted; no systemd runs there, and a policy-rc.d refuses every
# service start, as in an image build):
#   before:  none of libevent, libcurl, libyajl, libsqlite3,
#            libprotobuf-c (packages and .so files) nor procps' /bin/kill;
#            the built reapd does not even start there;
#   install: `apt-get install --no-install-recommends ./reapd_*.deb`
#            (Recommends: docker.io is only resolved, by a simulation);
#            the maintainer scripts succeed without systemd; reapd and
#            reapctl on PATH, every library found (ldd), reapd --version,
#            reapctl --help/--version; files, owners and modes; the man
#            pages (and `man -w` finds them, when the host has man-db);
#            /etc/reapd/reapd.json a conffile that passes
#            `reapd --check-config`, with -c and without; the unit passes
#            the host's `systemd-analyze verify --root` (and fails it
#            with /usr/sbin/reapd taken away); `systemctl --root enable`
#            enables it; reapd runs on the packaged config (its own
#            network namespace, no engine) and `reapctl status` gets its
#            answer over the admin socket: state in /var/lib/reapd;
#   remove:  binaries, unit, docs and man pages gone, the enablement link
#            gone, the conffile (edited) stays, /var/lib/reapd stays
#            untouched;
#   purge:   /etc/reapd gone, /var/lib/reapd still there untouched (the
#            package's policy: docs/deploy.md); nothing `dpkg -L` listed
#            is left but directories the root had before. Then apt's
#            autoremove takes the dependencies away and the whole root is
#            compared with its state before the install: the only
#            difference allowed is /var/lib/reapd.
#
# Needs root, mmdebstrap, systemd (systemd-analyze, systemctl), iproute2
# (ip), cpack and dpkg-dev: scripts/deps installs them. The first run
# needs Debian's mirror.
#
#   bash tests/deploy/test_deb.sh <build>/reapd <source-dir>
set -euo pipefail
BIN=$1
SRC=$2

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
n=0
ok() {
  n=$((n + 1))
  echo "ok $n - $*"
}

[ "$(id -u)" = 0 ] || fail "needs root (chroot, mounts, dpkg in the root)"
for tool in cpack dpkg-deb dpkg-shlibdeps mmdebstrap unshare chroot mount \
  systemd-analyze systemctl ip flock jq; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found (scripts/deps installs what this test needs)"
done

# Mounts made here stay in a mount namespace of this test's own: none
# shows on the host, and all go when the test ends, whatever happens.
if [ "${REAPD_DEB_TEST_NS:-}" != 1 ]; then
  REAPD_DEB_TEST_NS=1 exec unshare --mount --propagation private \
    bash "$0" "$@"
fi

BUILD=$(cd "$(dirname "$BIN")" && pwd)
[ -f "$BUILD/CPackConfig.cmake" ] || fail "no $BUILD/CPackConfig.cmake"
version=$("$BIN" --version | awk '{print $2}')

# Not /tmp: it may be a small tmpfs, and the root takes some 250 MB.
T=$(mktemp -d /var/tmp/reapd-deb.XXXXXX)
R=$T/root
daemon=""
cleanup() {
  local rc=$?
  if [ -n "$daemon" ]; then kill -9 "$daemon" 2>/dev/null || true; fi
  # Unmount everything under $T, deepest first, before removing it.
  awk -v t="$T" '$5 == t || index($5, t "/") == 1 {print $5}' \
    /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if awk -v t="$T" '$5 == t || index($5, t "/") == 1 {f=1} END {exit !f}' \
    /proc/self/mountinfo; then
    echo "test_deb: still mounted under $T: not removed" >&2
  else
    rm -rf "$T"
  fi
  exit "$rc"
}
trap cleanup EXIT
t_start=$(date +%s)
phase() { echo "# $(($(date +%s) - t_start)) s: $*"; }

# --- the package ---------------------------------------------------------
(cd "$BUILD" && cpack -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 ||
  { cat "$T/cpack.log" >&2; fail "cpack -G DEB failed"; }
shopt -s nullglob
debs=("$T"/out/*.deb)
shopt -u nullglob
[ "${#debs[@]}" -eq 1 ] || fail "want one .deb, got ${#debs[@]}"
DEB=${debs[0]}
DEBNAME=$(basename "$DEB")
ok "cpack built $DEBNAME (Depends: $(dpkg-deb --field "$DEB" Depends))"

# --- the bare root, cached -------------------------------------------------
cache=${REAPD_IMAGE_CACHE:-/var/cache/reapd/images}
tarball=$cache/deb-test-root.tar
archives=$cache/deb-test-apt
mkdir -p "$cache" "$archives/partial"
MIRROR=http://deb.debian.org
(
  flock 9
  if [ "${REAPD_DEB_REFRESH:-0}" = 1 ] || [ ! -s "$tarball" ]; then
    echo "# making the bare root: mmdebstrap --variant=minbase bookworm" >&2
    rm -f "$cache/deb-test-root.new.tar"
    mmdebstrap --quiet --variant=minbase --skip=cleanup/apt/lists \
      --aptopt='Acquire::Retries "3"' bookworm "$cache/deb-test-root.new.tar" \
      "deb $MIRROR/debian bookworm main" \
      "deb $MIRROR/debian bookworm-updates main" \
      "deb $MIRROR/debian-security bookworm-security main" >&2 ||
      fail "mmdebstrap failed (Debian's mirror unreachable?)"
    mv "$cache/deb-test-root.new.tar" "$tarball"
  fi
) 9>"$cache/.deb-test-root.lock"
mkdir "$R"
tar -xpf "$tarball" -C "$R" --numeric-owner || fail "cannot unpack $tarball"
phase "root unpacked from $tarball"

mount -t proc proc "$R/proc"
mount --bind "$archives" "$R/var/cache/apt/archives"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
# As in an image build: no service is started by a maintainer script.
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 0755 "$R/usr/sbin/policy-rc.d"
install -m 0644 "$DEB" "$R/tmp/$DEBNAME"
PATHS=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# in_root CMD...: CMD in the root, with a clean environment.
in_root() {
  chroot "$R" env -i PATH=$PATHS HOME=/root LC_ALL=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}

# snapshot FILE: every path of the root (type and, under /etc, content),
# the package manager's own records, logs, caches and the volatile
# directories left out.
snapshot() {
  (
    cd "$R"
    find . -xdev \( -path ./proc -o -path ./dev -o -path ./run -o -path ./tmp \
      -o -path ./var/tmp -o -path ./var/lib/dpkg -o -path ./var/lib/apt \
      -o -path ./var/cache -o -path ./var/log \) -prune -o -printf '%y %p\n'
    find ./etc -xdev -type f ! -path ./etc/ld.so.cache -exec md5sum {} +
  ) | LC_ALL=C sort >"$1"
}
installed() { # PACKAGE: dpkg's status of it in the root ("" when none)
  # shellcheck disable=SC2016  # dpkg-query's ${Status}, not the shell's
  in_root dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true
}

# --- before: none of reapd's libraries -------------------------------------
[ ! -e "$R/run/systemd/system" ] || fail "the root says systemd runs in it"
for pkg in libevent-2.1-7 libcurl4 libyajl2 libsqlite3-0 libprotobuf-c1 procps \
  reapd; do
  [ -z "$(installed "$pkg")" ] || fail "the bare root has $pkg: $(installed "$pkg")"
done
for so in libevent-2.1.so.7 libcurl.so.4 libyajl.so.2 libsqlite3.so.0 \
  libprotobuf-c.so.1; do
  found=$(find "$R/usr" -name "$so*" | head -1)
  [ -z "$found" ] || fail "the bare root has $so: $found"
done
[ ! -e "$R/bin/kill" ] || fail "the bare root has /bin/kill"
# The built binary cannot even start there.
cp "$BIN" "$R/tmp/reapd.built"
if in_root /tmp/reapd.built --version >"$T/out.txt" 2>&1; then
  fail "the built reapd runs in the bare root: $(cat "$T/out.txt")"
fi
grep -q 'error while loading shared libraries' "$T/out.txt" ||
  fail "the built reapd fails in the bare root, but not for its libraries: $(cat "$T/out.txt")"
rm -f "$R/tmp/reapd.built"
ok "bare root: no libevent, libcurl, libyajl, libsqlite3, libprotobuf-c (packages or .so), no procps, no running systemd; the built reapd cannot load there"
snapshot "$T/before"

# --- install, dependencies from the control data ---------------------------
# Recommends: docker.io resolves in Debian 12 (a simulation: nothing is
# fetched; the install itself leaves it out, it is not what is tested).
in_root sh -c "cd /tmp && apt-get -s install ./$DEBNAME" >"$T/sim.log" 2>&1 ||
  { cat "$T/sim.log" >&2; fail "apt-get -s install (with Recommends) fails"; }
grep -q '^Inst docker.io ' "$T/sim.log" ||
  { cat "$T/sim.log" >&2; fail "apt would not install the recommended docker.io"; }
ok "with its Recommends, apt would also install docker.io ($(grep -c '^Inst ' "$T/sim.log") packages)"

apt_install() {
  (
    # One run at a time uses the shared cache of .debs.
    flock 9
    in_root sh -c "cd /tmp && apt-get install -y -q --no-install-recommends ./$DEBNAME"
  ) 9>"$cache/.deb-test-apt.lock" >"$T/install.log" 2>&1
}
phase "installing"
if ! apt_install; then
  if grep -Eq 'Failed to fetch|Unable to fetch|404 +Not Found' "$T/install.log"; then
    echo "# apt's cached lists are stale: apt-get update in the root, and again" >&2
    in_root apt-get update -q >"$T/update.log" 2>&1 ||
      { cat "$T/update.log" >&2; fail "apt-get update in the root failed"; }
    apt_install || { cat "$T/install.log" >&2; fail "apt-get install ./$DEBNAME failed"; }
  else
    cat "$T/install.log" >&2
    fail "apt-get install ./$DEBNAME failed"
  fi
fi
# The shared cache of .debs is the install's only: the rest uses the
# root's own /var/cache/apt/archives.
umount "$R/var/cache/apt/archives"
[ "$(installed reapd)" = "install ok installed" ] ||
  { cat "$T/install.log" >&2; fail "reapd is $(installed reapd) after the install"; }
for pkg in libevent-2.1-7 libcurl4 libyajl2 libsqlite3-0 libprotobuf-c1 procps; do
  [ "$(installed "$pkg")" = "install ok installed" ] ||
    fail "apt did not install $pkg: $(installed "$pkg")"
done
ndeps=$(grep -c '^Setting up ' "$T/install.log")
[ ! -e "$R/run/systemd/system" ] || fail "the install made /run/systemd/system"
ok "apt-get install ./$DEBNAME: Depends resolved ($((ndeps - 1)) packages besides reapd), maintainer scripts succeed without systemd"
phase "installed"

in_root dpkg -L reapd >"$T/dpkg-L" || fail "dpkg -L reapd"
[ "$(in_root sh -c 'command -v reapd')" = /usr/sbin/reapd ] || fail "reapd not on PATH"
[ "$(in_root sh -c 'command -v reapctl')" = /usr/sbin/reapctl ] || fail "reapctl not on PATH"
for b in reapd reapctl; do
  in_root ldd "/usr/sbin/$b" >"$T/ldd" 2>&1 || fail "ldd $b: $(cat "$T/ldd")"
  if grep -q 'not found' "$T/ldd"; then fail "$b lacks libraries: $(cat "$T/ldd")"; fi
done
[ "$(in_root reapd --version)" = "reapd $version" ] ||
  fail "reapd --version: $(in_root reapd --version 2>&1)"
in_root reapctl --help >"$T/help" 2>&1 || fail "reapctl --help: $(cat "$T/help")"
grep -q '^Usage: reapctl ' "$T/help" || fail "reapctl --help: $(head -3 "$T/help")"
[ "$(in_root reapctl --version)" = "reapctl $version" ] ||
  fail "reapctl --version: $(in_root reapctl --version 2>&1)"
ok "installed: reapd and reapctl on PATH, every library found (ldd); reapd --version, reapctl --help and --version ($version)"

# Files, owners and modes as installed.
mode() { # PATH WANT: "MODE OWNER:GROUP TYPE"
  local got
  got=$(stat -c '%a %U:%G %F' "$R$1" 2>/dev/null) || fail "$1 not installed"
  [ "$got" = "$2" ] || fail "$1: $got, want $2"
}
mode /usr/sbin/reapd '755 root:root regular file'
mode /usr/sbin/reapctl '755 root:root regular file'
mode /lib/systemd/system/reapd.service '644 root:root regular file'
mode /etc/reapd '755 root:root directory'
mode /etc/reapd/reapd.json '644 root:root regular file'
mode /usr/share/doc/reapd '755 root:root directory'
mode /usr/share/doc/reapd/copyright '644 root:root regular file'
mode /usr/bin/kill '755 root:root regular file'
for page in man8/reapd.8 man8/reapctl.8 man5/reapd.json.5; do
  mode "/usr/share/man/$page.gz" '644 root:root regular file'
  gzip -t "$R/usr/share/man/$page.gz" || fail "$page.gz is not gzip"
  grep -qx "/usr/share/man/$page.gz" "$T/dpkg-L" || fail "dpkg -L lacks $page.gz"
done
if command -v man >/dev/null; then
  for name in reapd:8 reapctl:8 reapd.json:5; do
    got=$(man -M "$R/usr/share/man" -w "${name#*:}" "${name%:*}" 2>&1) ||
      fail "man -w ${name%:*}: $got"
    [ "$got" = "$R/usr/share/man/man${name#*:}/${name%:*}.${name#*:}.gz" ] ||
      fail "man -w ${name%:*} finds $got"
  done
  how="; the host's man -w finds each in the root's /usr/share/man"
else
  how=" (man-db not on the host: man -w not tried)"
fi
ok "files: binaries 0755, unit, config, copyright, man pages (reapd.8, reapctl.8, reapd.json.5) 0644, all root:root; procps' /bin/kill for ExecReload$how"

# The default config: a conffile, valid as shipped, read by default.
# shellcheck disable=SC2016  # dpkg-query's field
in_root dpkg-query -W -f='${Conffiles}\n' reapd >"$T/conffiles"
grep -Eq '^ /etc/reapd/reapd\.json [0-9a-f]{32}$' "$T/conffiles" ||
  fail "dpkg records no conffile /etc/reapd/reapd.json: $(cat "$T/conffiles")"
cmp -s "$R/etc/reapd/reapd.json" "$SRC/config/reapd.json" ||
  fail "/etc/reapd/reapd.json is not config/reapd.json"
in_root reapd --check-config -c /etc/reapd/reapd.json >"$T/check" 2>&1 ||
  fail "reapd --check-config -c /etc/reapd/reapd.json: $(cat "$T/check")"
in_root reapd --check-config >"$T/check" 2>&1 ||
  fail "reapd --check-config (the default path): $(cat "$T/check")"
ok "config: /etc/reapd/reapd.json is a conffile, config/reapd.json as shipped, passes reapd --check-config (with -c and by default)"

# The unit, verified by the host's systemd against this root: ExecStart's
# binary is the installed one. The targets every service depends on
# (sysinit.target, ...) come from the host, in the root's /run (volatile,
# and removed right after: /run/systemd/system tells the maintainer
# scripts a systemd runs).
mkdir -p "$R/run/systemd/system"
cp /lib/systemd/system/*.target "$R/run/systemd/system/"
verify() {
  SYSTEMD_LOG_COLOR=0 systemd-analyze verify --root="$R" \
    /lib/systemd/system/reapd.service >"$T/verify" 2>&1
}
if ! verify || [ -s "$T/verify" ]; then
  cat "$T/verify" >&2
  fail "systemd-analyze verify --root: exit or warnings (above)"
fi
mv "$R/usr/sbin/reapd" "$T/reapd.aside"
if verify; then fail "systemd-analyze verify passes without /usr/sbin/reapd"; fi
grep -q '/usr/sbin/reapd is not executable' "$T/verify" ||
  fail "verify without /usr/sbin/reapd says: $(cat "$T/verify")"
mv "$T/reapd.aside" "$R/usr/sbin/reapd"
rm -rf "$R/run/systemd"
ok "unit: systemd-analyze verify --root clean ($(systemd-analyze --version | head -1)); it fails with /usr/sbin/reapd taken away"

# Enabled, as an image build or an operator would, with no systemd
# running: the [Install] section's link.
WANTS=/etc/systemd/system/multi-user.target.wants/reapd.service
systemctl --root="$R" enable reapd.service >"$T/enable" 2>&1 ||
  fail "systemctl --root enable reapd: $(cat "$T/enable")"
[ "$(readlink "$R$WANTS")" = /lib/systemd/system/reapd.service ] ||
  fail "no $WANTS after enable: $(cat "$T/enable")"
[ "$(systemctl --root="$R" is-enabled reapd.service)" = enabled ] ||
  fail "reapd.service not enabled"
ok "systemctl --root enable reapd: $WANTS"

# reapd runs on the packaged config, as the operator would start it by
# hand (no engine: live, not ready), in a network namespace of its own
# (its 127.0.0.1:9323 is not the host's); reapctl answers through the
# admin socket the config names.
# shellcheck disable=SC2016  # $1 and $2 are the inner shell's
unshare --net sh -c 'ip link set lo up && exec chroot "$1" env -i PATH="$2" reapd' \
  _ "$R" "$PATHS" >"$T/reapd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
  [ -S "$R/run/reapd/admin.sock" ] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$T/reapd.log" >&2; fail "reapd exited"; }
  sleep 0.1
done
[ -S "$R/run/reapd/admin.sock" ] || { cat "$T/reapd.log" >&2; fail "no admin socket in 10 s"; }
set +e
in_root reapctl status >"$T/status" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "reapctl status: exit $rc, want 1 (answers, not ready): $(cat "$T/status")"
jq -e --arg v "$version" '.ready == false and .version == $v' "$T/status" >/dev/null ||
  fail "reapctl status: $(cat "$T/status")"
kill -TERM "$daemon"
wait "$daemon" || { cat "$T/reapd.log" >&2; fail "reapd did not stop with 0 on SIGTERM"; }
daemon=""
grep -q 'config /etc/reapd/reapd.json' "$T/reapd.log" ||
  { cat "$T/reapd.log" >&2; fail "reapd did not read /etc/reapd/reapd.json"; }
mode /var/lib/reapd '750 root:root directory'
for f in reapd.db reports.jsonl reapd.lock; do
  [ -f "$R/var/lib/reapd/$f" ] || fail "no /var/lib/reapd/$f after a run"
done
# Something of the operator's in the state directory too: it must stay.
echo '{"kept":"by the operator"}' >>"$R/var/lib/reapd/reports.jsonl"
(cd "$R/var/lib/reapd" && find . -type f -exec md5sum {} + | sort) >"$T/state.md5"
ok "reapd ran on the packaged config without an engine; reapctl status answered (exit 1, not ready); /var/lib/reapd made 0750 with reapd.db, reports.jsonl, reapd.lock"

# --- remove: the conffile and the state stay -------------------------------
# A local change to the config, which a remove must keep.
sed -i '1i // edited here' "$R/etc/reapd/reapd.json"
cp "$R/etc/reapd/reapd.json" "$T/edited.json"
phase "removing"
in_root apt-get remove -y -q reapd >"$T/remove.log" 2>&1 ||
  { cat "$T/remove.log" >&2; fail "apt-get remove reapd failed"; }
[ "$(installed reapd)" = "deinstall ok config-files" ] ||
  fail "after remove, reapd is '$(installed reapd)', want 'deinstall ok config-files'"
for p in /usr/sbin/reapd /usr/sbin/reapctl /lib/systemd/system/reapd.service \
  /usr/share/doc/reapd /usr/share/man/man8/reapd.8.gz \
  /usr/share/man/man8/reapctl.8.gz /usr/share/man/man5/reapd.json.5.gz; do
  [ ! -e "$R$p" ] || fail "$p is still there after remove"
done
if in_root sh -c 'command -v reapd' >/dev/null; then fail "reapd still on PATH"; fi
if [ -L "$R$WANTS" ] || [ -e "$R$WANTS" ]; then
  fail "$WANTS is still there after remove (-> $(readlink "$R$WANTS"))"
fi
cmp -s "$R/etc/reapd/reapd.json" "$T/edited.json" ||
  fail "the edited /etc/reapd/reapd.json did not survive remove"
(cd "$R/var/lib/reapd" && find . -type f -exec md5sum {} + | sort) | cmp -s - "$T/state.md5" ||
  fail "/var/lib/reapd changed on remove"
ok "apt-get remove: binaries, unit, docs, man pages and the enablement link gone; the edited conffile and /var/lib/reapd stay as they were"

# --- purge: the conffile goes, the state stays (policy) --------------------
phase "purging"
in_root apt-get purge -y -q reapd >"$T/purge.log" 2>&1 ||
  { cat "$T/purge.log" >&2; fail "apt-get purge reapd failed"; }
[ -z "$(installed reapd)" ] || fail "after purge, dpkg still knows reapd: $(installed reapd)"
[ ! -e "$R/etc/reapd" ] || fail "/etc/reapd is still there after purge: $(ls -A "$R/etc/reapd")"
(cd "$R/var/lib/reapd" && find . -type f -exec md5sum {} + | sort) | cmp -s - "$T/state.md5" ||
  fail "/var/lib/reapd changed or went on purge (policy: it stays)"
mode /var/lib/reapd '750 root:root directory'
# Everything dpkg -L listed is gone but directories the root had before
# (/etc, /usr/share/man/man8, the /lib symlink, ...).
sed -n 's/^[a-z] \.//p' "$T/before" >"$T/before.paths"
left=()
while read -r p; do
  [ "$p" = /. ] && continue
  if [ -e "$R$p" ] || [ -L "$R$p" ]; then
    # As the bare root had it: /lib/systemd is its /usr/lib/systemd.
    real=$(in_root readlink -f -- "$p")
    grep -qxF -- "$real" "$T/before.paths" || left+=("$p")
  fi
done <"$T/dpkg-L"
[ "${#left[@]}" -eq 0 ] || fail "after purge, left of dpkg -L: ${left[*]}"
ok "apt-get purge: /etc/reapd gone; nothing of dpkg -L ($(wc -l <"$T/dpkg-L") paths) left but directories the bare root had; /var/lib/reapd kept, untouched"

# The dependencies go too, and the root is the bare one again, but for
# the state directory.
in_root apt-get autoremove --purge -y -q >"$T/autoremove.log" 2>&1 ||
  { cat "$T/autoremove.log" >&2; fail "apt-get autoremove --purge failed"; }
for pkg in libevent-2.1-7 libcurl4 libyajl2 libsqlite3-0 libprotobuf-c1 procps; do
  [ -z "$(installed "$pkg")" ] || fail "autoremove left $pkg: $(installed "$pkg")"
done
snapshot "$T/after"
diff "$T/before" "$T/after" | grep '^[<>]' >"$T/diff" || true
printf '%s\n' '> d ./var/lib/reapd' '> f ./var/lib/reapd/reapd.db' \
  '> f ./var/lib/reapd/reapd.lock' '> f ./var/lib/reapd/reports.jsonl' >"$T/want"
grep -v '^> f ./var/lib/reapd/reapd\.db-' "$T/diff" | diff "$T/want" - >"$T/ddiff" ||
  { cat "$T/ddiff" >&2; fail "after purge and autoremove the root differs from the bare one by more than /var/lib/reapd (< expected, > found; above)"; }
ok "after purge and autoremove of the dependencies, the root is the bare one (paths, /etc's contents) but for /var/lib/reapd"

phase "done"
echo "$n passed, 0 failed"
