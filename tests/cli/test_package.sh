#!/usr/bin/env bash
# The Debian package: runs cpack (DEB) in the build directory into a
# temporary directory and checks the .deb with dpkg-deb: the binaries
# (reapd, reapctl), the systemd unit, the config (a conffile), the docs
# and the man pages at their paths; Depends computed by dpkg-shlibdeps
# names the five libraries; the packaged config passes `reapd
# --check-config` and has its "admin" socket where the unit's
# RuntimeDirectory= is; the packaged unit passes `systemd-analyze verify`
# (systemd, installed by scripts/deps: without it the test fails) and
# holds the hardening directives docs/deploy.md promises.
#
# The man pages (docs/man/*.scd, scdoc: installed by scripts/deps) are
# gzip -9n'd roff with a NAME section, built from the current sources,
# and cannot fall behind the program: every key agent/config*.c accept
# has an entry in reapd.json(5), every option and command of `reapd
# --help` and `reapctl --help` one in reapd(8) and reapctl(8). That check
# is first shown broken copies (a page without one key, config sources
# with one key more) and must refuse them: a check that accepts anything
# would prove nothing.
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
has -rwxr-xr-x /usr/sbin/reapctl
has -rw-r--r-- /lib/systemd/system/reapd.service
has -rw-r--r-- /etc/reapd/reapd.json
has -rw-r--r-- /usr/share/doc/reapd/README.md
has -rw-r--r-- /usr/share/doc/reapd/report.schema.json
has -rw-r--r-- /usr/share/doc/reapd/openapi.yaml
has -rw-r--r-- /usr/share/doc/reapd/copyright
ndocs=0
for d in "$SRC"/docs/*.md; do
  has -rw-r--r-- "/usr/share/doc/reapd/$(basename "$d")"
  ndocs=$((ndocs + 1))
done
[ "$ndocs" -gt 0 ] || fail "no docs/*.md in $SRC"
MANPAGES=(man8/reapd.8 man8/reapctl.8 man5/reapd.json.5)
for page in "${MANPAGES[@]}"; do
  has -rw-r--r-- "/usr/share/man/$page.gz"
done
ok "files: /usr/sbin/reapd, /usr/sbin/reapctl, /lib/systemd/system/reapd.service, /etc/reapd/reapd.json, /usr/share/doc/reapd/ (README.md + $ndocs docs + report.schema.json + openapi.yaml + copyright; LICENSE Apache-2.0), /usr/share/man/ (${MANPAGES[*]})"

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
ctl=$("$T/root/usr/sbin/reapctl" --version) || fail "the packaged reapctl does not run"
[ "$ctl" = "reapctl $version" ] || fail "packaged reapctl --version: $ctl, want reapctl $version"
[ "$ctl" = "$("$BUILD/reapctl" --version)" ] || fail "packaged reapctl differs from $BUILD/reapctl"
ok "packaged reapctl runs: $ctl"

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
# The admin socket's directory, writable under ProtectSystem=strict.
want 'RuntimeDirectory=reapd'
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
ok "unit: ExecStart, ProtectSystem=strict, only StateDirectory (and RuntimeDirectory=reapd) writable, NoNewPrivileges, no capabilities, reload validates, Type=notify with a watchdog"

# The packaged config names the admin socket, in the directory systemd
# makes for it (RuntimeDirectory=reapd: /run/reapd).
"$T/root/usr/sbin/reapd" --print-config -c "$T/root/etc/reapd/reapd.json" 2>&1 |
  jq -r '.admin.socket' >"$T/admin" ||
  fail "packaged config: $(cat "$T/admin")"
[ "$(cat "$T/admin")" = /run/reapd/admin.sock ] ||
  fail "packaged config: admin.socket is $(cat "$T/admin"), not /run/reapd/admin.sock (RuntimeDirectory=reapd)"
ok "config: \"admin\": {\"socket\": \"/run/reapd/admin.sock\"}, under the unit's RuntimeDirectory=reapd"

# --- the man pages ------------------------------------------------------
command -v scdoc >/dev/null || fail "scdoc not found: scripts/deps installs it"
for page in "${MANPAGES[@]}"; do
  gz=$T/root/usr/share/man/$page.gz
  name=$(basename "$page")     # reapd.json.5
  sect=${name##*.}             # 5
  name=${name%.*}              # reapd.json
  gzip -t "$gz" 2>"$T/gz" || fail "$page.gz: not gzip: $(cat "$T/gz")"
  # gzip -9n: no file name or time stamp in the header (FLG 0, MTIME 0),
  # the best compression (XFL 2).
  read -r -a hdr < <(head -c 10 "$gz" | od -An -tu1)
  if [ "${hdr[3]}" != 0 ] || [ "${hdr[4]}${hdr[5]}${hdr[6]}${hdr[7]}" != 0000 ] ||
    [ "${hdr[8]}" != 2 ]; then
    fail "$page.gz: not compressed with gzip -9n (header ${hdr[*]})"
  fi
  zcat "$gz" >"$T/roff"
  grep -q "^\.TH \"$name\" \"$sect\" " "$T/roff" || fail "$page: no .TH $name $sect"
  # NAME: the section header, then the line "name - what it is" (the
  # form whatis and apropos read; "\-" would do too), roff's zero-width
  # "\&" taken out.
  awk '/^\.SH /{s=$2; next} s=="NAME" && !/^\./{print; exit}' "$T/roff" |
    sed 's/\\&//g' >"$T/nameline"
  grep -Eq "^${name//./\\.} \\\\?- [a-z]" "$T/nameline" ||
    fail "$page: no NAME section with \"$name - ...\" (got: $(cat "$T/nameline"))"
  grep -q '^\.SH SEE ALSO' "$T/roff" || fail "$page: no SEE ALSO section"
  # Built from the current source (the date line aside, which follows
  # SOURCE_DATE_EPOCH).
  scdoc <"$SRC/docs/man/$name.$sect.scd" | grep -v '^\.TH ' >"$T/fresh" ||
    fail "scdoc rejects docs/man/$name.$sect.scd"
  grep -v '^\.TH ' "$T/roff" | cmp -s - "$T/fresh" ||
    fail "$page.gz is not docs/man/$name.$sect.scd as it is now (a stale build?)"
  if command -v man >/dev/null; then
    # Rendered, when man-db is there (it is not in scripts/deps): no
    # groff warning, and the NAME section shows.
    MANWIDTH=80 man --warnings -l "$gz" >"$T/rendered" 2>"$T/warn" ||
      fail "man -l $page.gz: $(cat "$T/warn")"
    [ ! -s "$T/warn" ] || fail "man -l $page.gz warns: $(cat "$T/warn")"
    grep -A1 '^NAME' "$T/rendered" | grep -q "^ *$name - " ||
      fail "man -l $page.gz shows no NAME \"$name - ...\""
  fi
done
if command -v man >/dev/null; then how="rendered by man -l without warnings"; else how="man-db not installed: not rendered"; fi
ok "man pages: ${MANPAGES[*]} gzip -9n'd, .TH and NAME right, SEE ALSO, built from the current docs/man/*.scd; $how"

# Every config key, option and command has its entry in the pages: a
# line that starts with it in bold (*docker.socket*, *--check-config*,
# *status*). The keys come from the config's sources themselves
# (agent/config*.c, read as one text): their field tables ({"key", F_...}
# under <section>_fields[]) and the keys their parse_* functions compare
# by hand (strcmp(k, "key")).
cat >"$T/mancheck.py" <<'PY'
import re, subprocess, sys

# parse_* functions that compare keys by hand, and the path of their keys.
FUNCS = {"parse_root": "", "parse_upstream": "upstream.", "parse_log": "log.",
         "parse_policy": "policies[].", "parse_match": "policies[].match.",
         "config_parse_label_filter": "labels."}
SECTIONS = ["docker", "containerd", "status", "admin", "upstream", "delete",
            "retention", "log", "policies"]

def config_keys(path):
    keys, problems = [], []
    table = func = None
    for line in open(path):
        m = re.match(r"static const struct config_field (\w+)_fields\[\] = \{",
                     line)
        if m:
            table = "" if m.group(1) == "top" else m.group(1) + "."
            continue
        if table is not None:
            if line.startswith("};"):
                table = None
                continue
            for k in re.findall(r'\{"([a-z_]+)", F_', line):
                keys.append(table + k)
            continue
        m = re.match(r"(\w+)\(", line)
        if m:
            func = m.group(1)
        for k in re.findall(r'strcmp\((?:m->key|k), "([a-z_]+)"\)', line):
            if func not in FUNCS:
                problems.append("agent/config*.c: %s compares key \"%s\": "
                                "tell this test its path (FUNCS)" % (func, k))
            else:
                keys.append(FUNCS[func] + k)
    # Enough found that the extraction still works.
    for s in SECTIONS:
        if not any(k.startswith(s + ".") or k.startswith(s + "[]") for k in keys):
            problems.append("agent/config*.c: no key of section %s found" % s)
    if len(keys) < 40:
        problems.append("agent/config*.c: only %d keys found" % len(keys))
    return sorted(set(keys)), problems

def term_lines(page):
    # An entry: a line that starts with its term in bold, its text
    # indented (a tab) on the lines that follow.
    lines = open(page).read().split("\n")
    return [l for l, nxt in zip(lines, lines[1:] + [""])
            if l.startswith("*") and nxt.startswith("\t")]

def entries(page):
    # The bold word that starts each entry: its term.
    return set(m.group(1) for m in (re.match(r"\*([^*\s]+)\*", l)
                                    for l in term_lines(page)) if m)

def check_keys(config_c, page):
    keys, problems = config_keys(config_c)
    have = entries(page)
    for k in keys:
        # A key whose value is an object (docker, policies[].match) is
        # covered by the entries of the keys inside it.
        if k not in have and not any(e.startswith(k + ".") or e.startswith(k + "[]")
                                     for e in have):
            problems.append("%s: no entry for the config key %s" % (page, k))
    # ... and no entry for a key reapd does not take (any more).
    for e in sorted(have - set(keys)):
        problems.append("%s: an entry for %s, which agent/config*.c do not take"
                        % (page, e))
    return keys, problems

def check_help(binary, page):
    text = subprocess.run([binary, "--help"], capture_output=True, text=True,
                          check=True).stdout
    # Long options anywhere; short ones from the usage lines (the prose
    # after them quotes other programs' options: `docker run -d`).
    want = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text))
    want |= set(re.findall(r"(?<![\w-])(-[a-z])\b", text.split("\n\n")[0]))
    m = re.search(r"^Commands:\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    if m:
        want |= set(re.findall(r"^  ([a-z][a-z-]*)\b", m.group(1), re.M))
    have = entries(page)
    # Options count when they are in bold anywhere in an entry line, as
    # several can share one (*-c* _FILE_, *--config* _FILE_).
    bold = set(w for l in term_lines(page) for w in re.findall(r"\*([^*\s]+)\*", l))
    return sorted(want), ["%s: no entry for %s (from %s --help)" % (page, w, binary)
                          for w in sorted(want) if w not in have and w not in bold]

what = sys.argv[1]
if what == "keys":
    found, problems = check_keys(sys.argv[2], sys.argv[3])
else:
    found, problems = check_help(sys.argv[2], sys.argv[3])
for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
print(" ".join(found))
PY
MAN=$SRC/docs/man
cat "$SRC"/agent/config*.c >"$T/config-src.c"
python3 "$T/mancheck.py" keys "$T/config-src.c" "$MAN/reapd.json.5.scd" >"$T/keys" 2>"$T/err" ||
  fail "reapd.json(5) is behind agent/config*.c: $(cat "$T/err")"
nkeys=$(wc -w <"$T/keys")
python3 "$T/mancheck.py" help "$BIN" "$MAN/reapd.8.scd" >"$T/opts" 2>"$T/err" ||
  fail "reapd(8) is behind reapd --help: $(cat "$T/err")"
python3 "$T/mancheck.py" help "$BUILD/reapctl" "$MAN/reapctl.8.scd" >"$T/cmds" 2>"$T/err" ||
  fail "reapctl(8) is behind reapctl --help: $(cat "$T/err")"
ok "man pages are complete: $nkeys config keys in reapd.json(5), $(wc -w <"$T/opts") options in reapd(8), $(wc -w <"$T/cmds") options and commands in reapctl(8)"

# ... and that check refuses a page without one key (one of each kind:
# a field table's, a hand-compared one, a policy's), config sources with
# one key more, pages without an option or a command.
for key in retention.max_db_bytes log.format 'policies[].reap_leaked_tasks'; do
  tr ' ' '\n' <"$T/keys" | grep -qxF -- "$key" || fail "the key list lacks $key: $(cat "$T/keys")"
  grep -vF -- "*$key*" "$MAN/reapd.json.5.scd" >"$T/broken.scd"
  if python3 "$T/mancheck.py" keys "$T/config-src.c" "$T/broken.scd" >/dev/null 2>"$T/err"; then
    fail "the key check accepts reapd.json(5) without $key"
  fi
  grep -qF "no entry for the config key $key" "$T/err" ||
    fail "the key check, $key missing, says: $(cat "$T/err")"
done
sed 's/^\(static const struct config_field delete_fields\[\] = {\)$/\1\n    {"new_key", F_INT, 0, 0, 1, NULL},/' \
  "$T/config-src.c" >"$T/config.c"
grep -q '"new_key", F_INT' "$T/config.c" || fail "could not add a key to a copy of agent/config*.c"
if python3 "$T/mancheck.py" keys "$T/config.c" "$MAN/reapd.json.5.scd" >/dev/null 2>"$T/err"; then
  fail "the key check misses a key added to agent/config*.c"
fi
grep -qF "no entry for the config key delete.new_key" "$T/err" ||
  fail "the key check, delete.new_key added, says: $(cat "$T/err")"
grep -v '^\*--check-config\*' "$MAN/reapd.8.scd" >"$T/broken.scd"
if python3 "$T/mancheck.py" help "$BIN" "$T/broken.scd" >/dev/null 2>&1; then
  fail "the option check accepts reapd(8) without --check-config"
fi
grep -v '^\*drain\*' "$MAN/reapctl.8.scd" >"$T/broken.scd"
if python3 "$T/mancheck.py" help "$BUILD/reapctl" "$T/broken.scd" >/dev/null 2>"$T/err"; then
  fail "the command check accepts reapctl(8) without drain"
fi
grep -qF "no entry for drain" "$T/err" || fail "the command check, drain missing, says: $(cat "$T/err")"
ok "the completeness check refuses reapd.json(5) without retention.max_db_bytes, log.format or policies[].reap_leaked_tasks, config sources with delete.new_key, reapd(8) without --check-config, reapctl(8) without drain"

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
