#!/usr/bin/env bash
# The Debian package: runs cpack (DEB) in the build directory into a
# temporary directory and checks the .deb with dpkg-deb: the binary, the
# systemd unit, the config (a conffile) and the docs at their paths;
# Depends computed by dpkg-shlibdeps names the five libraries; the
# packaged config passes `reapd --check-config`; the packaged unit passes
# `systemd-analyze verify` (systemd, installed by scripts/deps: without
# it the test fails) and holds the hardening directives docs/deploy.md promises.
#
#   bash tests/cli/test_package.sh <build>/reapd <source-dir>
set -euo pipefail
BIN=$1
SRC=$2
BUILD=$(cd "$(dirname "$BIN")" && pwd)
T=$(mktemp -d /tmp/reapd-pkg.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }

for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found (cmake and dpkg-dev, installed by scripts/deps)"
done
[ -f "$BUILD/CPackConfig.cmake" ] || fail "no $BUILD/CPackConfig.cmake"

# --- build the package -------------------------------------------------
t0=$(date +%s)
(cd "$BUILD" && cpack -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 ||
  { cat "$T/cpack.log" >&2; fail "cpack -G DEB failed"; }
shopt -s nullglob
debs=("$T"/out/*.deb)
shopt -u nullglob
[ "${#debs[@]}" -eq 1 ] || { cat "$T/cpack.log" >&2; fail "want one .deb, got ${#debs[@]}"; }
DEB=${debs[0]}
ok "cpack built $(basename "$DEB") in $(($(date +%s) - t0)) s"

# --- control fields ----------------------------------------------------
dpkg-deb --info "$DEB" >"$T/info" || fail "dpkg-deb --info"
field() { dpkg-deb --field "$DEB" "$1"; }
[ "$(field Package)" = reapd ] || fail "Package: $(field Package)"
version=$("$BIN" --version | awk '{print $2}')
[ "$(field Version)" = "$version" ] ||
  fail "Version: $(field Version), the binary says $version"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] ||
  fail "Architecture: $(field Architecture)"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
desc=$(field Description)
[ -n "${desc%%$'\n'*}" ] || fail "no Description"
[ "$(printf '%s\n' "$desc" | wc -l)" -ge 2 ] || fail "no long Description"
ok "control: reapd $version, $(field Architecture), maintainer and description set"

depends=$(field Depends)
for lib in libevent libcurl libsqlite3 libyajl libprotobuf-c; do
  # A package in the comma-separated list, e.g. "libevent-2.1-7 (>= ...)".
  echo "$depends" | grep -Eq "(^|, *)${lib}[-0-9a-z.+]*( |,|\$)" ||
    fail "Depends lacks $lib: $depends"
done
echo "$depends" | grep -q 'libc6' || fail "Depends lacks libc6 (shlibdeps not run?): $depends"
echo "$depends" | grep -Eq '(^|, *)procps( |,|$)' || fail "Depends lacks procps (/bin/kill): $depends"
ok "Depends (dpkg-shlibdeps): $depends"
[ "$(field Recommends)" = docker.io ] || fail "Recommends: $(field Recommends)"
ok "Recommends: docker.io"

# --- files at their paths ----------------------------------------------
dpkg-deb --contents "$DEB" >"$T/contents" || fail "dpkg-deb --contents"
has() { # MODE-PREFIX PATH
  grep -Eq "^$1 root/root +[0-9]+ [0-9-]+ [0-9:]+ \./${2#/}\$" "$T/contents" ||
    { cat "$T/contents" >&2; fail "package lacks $2 (mode $1, root/root)"; }
}
has -rwxr-xr-x /usr/sbin/reapd
has -rw-r--r-- /lib/systemd/system/reapd.service
has -rw-r--r-- /etc/reapd/reapd.json
has -rw-r--r-- /usr/share/doc/reapd/README.md
has -rw-r--r-- /usr/share/doc/reapd/report.schema.json
has -rw-r--r-- /usr/share/doc/reapd/copyright
ndocs=0
for d in "$SRC"/docs/*.md; do
  has -rw-r--r-- "/usr/share/doc/reapd/$(basename "$d")"
  ndocs=$((ndocs + 1))
done
[ "$ndocs" -gt 0 ] || fail "no docs/*.md in $SRC"
ok "files: /usr/sbin/reapd, /lib/systemd/system/reapd.service, /etc/reapd/reapd.json, /usr/share/doc/reapd/ (README.md + $ndocs docs + report.schema.json + copyright; LICENSE Apache-2.0)"

# --- control archive: conffiles, maintainer scripts ----------------------
dpkg-deb --control "$DEB" "$T/control" || fail "dpkg-deb --control"
[ -f "$T/control/conffiles" ] || fail "no conffiles"
grep -qx /etc/reapd/reapd.json "$T/control/conffiles" ||
  fail "conffiles lacks /etc/reapd/reapd.json: $(cat "$T/control/conffiles")"
ok "conffiles: /etc/reapd/reapd.json"
for s in postinst prerm postrm; do
  [ -x "$T/control/$s" ] || fail "$s missing or not executable"
  sh -n "$T/control/$s" || fail "$s: syntax error"
done
# Installing must not start the service (the operator reviews the config).
if grep -Eq 'systemctl +(start|enable|restart) ' "$T/control/postinst"; then
  fail "postinst starts or enables reapd"
fi
ok "maintainer scripts: postinst, prerm, postrm (sh -n); postinst does not start reapd"

# --- the packaged files themselves --------------------------------------
dpkg-deb -x "$DEB" "$T/root" || fail "dpkg-deb -x"
grep -qx 'License: Apache-2.0' "$T/root/usr/share/doc/reapd/copyright" ||
  fail "the copyright file does not name Apache-2.0"
cmp -s "$T/root/usr/share/doc/reapd/copyright" "$SRC/deploy/debian/copyright" ||
  fail "packaged copyright differs from deploy/debian/copyright"
if ! grep -q 'Apache License' "$SRC/LICENSE" ||
  ! grep -q 'Version 2.0, January 2004' "$SRC/LICENSE"; then
  fail "LICENSE is not the Apache License 2.0"
fi
ok "licence: LICENSE is Apache-2.0; /usr/share/doc/reapd/copyright (machine-readable) says so"
cmp -s "$T/root/etc/reapd/reapd.json" "$SRC/config/reapd.json" ||
  fail "packaged config differs from config/reapd.json"
cmp -s "$T/root/lib/systemd/system/reapd.service" "$SRC/deploy/systemd/reapd.service" ||
  fail "packaged unit differs from deploy/systemd/reapd.service"
"$BIN" --check-config -c "$T/root/etc/reapd/reapd.json" >"$T/check" 2>&1 ||
  fail "packaged config rejected: $(cat "$T/check")"
"$T/root/usr/sbin/reapd" --check-config -c "$T/root/etc/reapd/reapd.json" >"$T/check" 2>&1 ||
  fail "the packaged binary rejects the packaged config: $(cat "$T/check")"
[ "$("$T/root/usr/sbin/reapd" --version)" = "$("$BIN" --version)" ] ||
  fail "packaged binary: $("$T/root/usr/sbin/reapd" --version)"
ok "packaged config passes reapd --check-config (built and packaged binary)"

# --- the unit file ------------------------------------------------------
UNIT=$T/root/lib/systemd/system/reapd.service
# What docs/deploy.md promises, checked always (systemd-analyze verify
# only checks that the file is valid, not what it says).
want() {
  grep -qx -- "$1" "$UNIT" || fail "unit lacks the line '$1'"
}
want 'ExecStart=/usr/sbin/reapd -c /etc/reapd/reapd.json'
want 'ProtectSystem=strict'
want 'StateDirectory=reapd'
want 'NoNewPrivileges=true'
want 'CapabilityBoundingSet='
want 'PrivateTmp=true'
want 'ProtectHome=true'
want 'RestartPreventExitStatus=2'
grep -Eq '^RestrictAddressFamilies=.*AF_UNIX' "$UNIT" || fail "unit: AF_UNIX not allowed"
grep -Eq '^ExecReload=.*--check-config' "$UNIT" || fail "unit: reload does not validate first"
# shellcheck disable=SC2016  # $MAINPID is systemd's, not the shell's
grep -Eq '^ExecReload=.*kill -HUP \$MAINPID' "$UNIT" || fail "unit: reload does not send SIGHUP"
grep -Eq '^WantedBy=multi-user.target' "$UNIT" || fail "unit: no WantedBy"
# reapd speaks the notify protocol (tests/e2e/test_sdnotify.sh).
want 'Type=notify'
grep -Eq '^WatchdogSec=[1-9][0-9]*$' "$UNIT" || fail "unit: no WatchdogSec="
# Only the state dir is writable: no other write grants.
if grep -Eq '^(ReadWritePaths|BindPaths)=' "$UNIT"; then
  fail "unit grants more writable paths: $(grep -E '^(ReadWritePaths|BindPaths)=' "$UNIT")"
fi
ok "unit: ExecStart, ProtectSystem=strict, only StateDirectory writable, NoNewPrivileges, no capabilities, reload validates, Type=notify with a watchdog"

command -v systemd-analyze >/dev/null ||
  fail "systemd-analyze not found: install systemd (scripts/deps does); the unit file cannot be verified"
# Verify against the extracted package as the root: ExecStart's
# /usr/sbin/reapd is the packaged binary; the targets every service
# depends on (sysinit.target, ...) and /bin/kill are copied in.
R=$T/root
mkdir -p "$R/usr/bin"
[ -e "$R/bin" ] || ln -s usr/bin "$R/bin"
# ExecReload's /bin/kill comes from procps (a Depends of the package).
kp=$(type -P kill) || fail "kill (procps) not found: scripts/deps installs it"
cp "$kp" "$R/usr/bin/kill"
for dir in /lib/systemd/system /usr/lib/systemd/system; do
  if [ -d "$dir" ]; then cp -n "$dir"/*.target "$R/lib/systemd/system/" 2>/dev/null || true; fi
done
[ -f "$R/lib/systemd/system/sysinit.target" ] ||
  fail "systemd-analyze exists but no sysinit.target was found to copy"
set +e
SYSTEMD_LOG_COLOR=0 systemd-analyze verify --root="$R" \
  /lib/systemd/system/reapd.service >"$T/verify" 2>&1
rc=$?
set -e
# verify exits 0 on unknown keys and bad values (it only warns): any
# output at all is a failure.
if [ "$rc" -ne 0 ] || [ -s "$T/verify" ]; then
  cat "$T/verify" >&2
  fail "systemd-analyze verify: exit $rc, or warnings (above)"
fi
ok "systemd-analyze verify: clean ($(systemd-analyze --version | head -1))"
if systemd-analyze security --offline=true --root="$R" \
     /lib/systemd/system/reapd.service >"$T/security" 2>&1; then
  echo "# $(grep -a 'Overall exposure level' "$T/security" || echo 'security: no summary')"
fi

echo "$n passed, 0 failed"
