#!/usr/bin/env bash
# The command line per the contract: --check-config verdicts and exit
# codes, FILE:LINE:COL messages, --version/--help, bad usage, and the
# signals of a running daemon (SIGHUP with a bad config keeps the old one,
# SIGTERM stops within 5 s with exit 0). No engine needed: reapd must run
# and stay live while the Docker socket does not exist.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin cli "$@"

# Shipped configs are valid.
for f in "$SRC"/config/*.json; do
  "$BIN" --check-config -c "$f" >/dev/null || fail "shipped $f rejected"
  ok "shipped $(basename "$f") passes --check-config"
done

# A bad config: exit 2, one FILE:LINE:COL line per problem.
cat >"$T/bad.json" <<'JSON'
{
  "delete": { "max_in_flight": "eight" },
  "bogus": 1,
  "status": { "listen": "nowhere" }
}
JSON
set +e
"$BIN" --check-config -c "$T/bad.json" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad config: exit $rc, want 2"
grep -q "^$T/bad.json:2:[0-9]*: .*max_in_flight" "$T/err" || fail "no line:col for max_in_flight: $(cat "$T/err")"
grep -q "^$T/bad.json:3:[0-9]*: .*bogus" "$T/err" || fail "no line:col for unknown key: $(cat "$T/err")"
grep -q "^$T/bad.json:4:[0-9]*: .*listen" "$T/err" || fail "no line:col for listen: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -ge 3 ] || fail "expected one line per problem"
ok "bad config: exit 2 with FILE:LINE:COL per problem"

# --print-config: the effective config as JSON, defaults filled in, the
# node from the environment, secrets redacted; a bad config exits 2.
cat >"$T/print.json" <<'JSON'
{ // a comment, as reapd reads them
  "upstream": { "url": "http://user:pw-Zq9x@collector:8080/r?k=sekrit",
                "headers": { "X-Api-Key": "hdr-Zq9x" } },
  "delete": { "max_in_flight": 3 } }
JSON
REAPD_NODE_NAME=node-from-env "$BIN" --print-config -c "$T/print.json" >"$T/printed" 2>"$T/err" ||
  fail "--print-config: exit $? ($(cat "$T/err"))"
jq -e '.node == "node-from-env" and .delete.max_in_flight == 3
       and .delete.poll_interval_ms == 500 and .admin.socket == "/run/reapd/admin.sock"
       and .upstream.headers["X-Api-Key"] == "<redacted>"' "$T/printed" >/dev/null ||
  fail "--print-config: $(cat "$T/printed")"
if grep -q "Zq9x\|sekrit" "$T/printed"; then fail "--print-config shows a secret"; fi
rc=0
"$BIN" --print-config -c "$T/bad.json" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--print-config on a bad config: exit $rc, want 2"
ok "--print-config: the effective config, node from REAPD_NODE_NAME, secrets redacted; exit 2 on a bad one"

printf '{ "node": "x", ' >"$T/trunc.json"
set +e
"$BIN" --check-config -c "$T/trunc.json" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "malformed JSON: exit $rc"
grep -q "^$T/trunc.json:1:[0-9]*: " "$T/err" || fail "malformed JSON: $(cat "$T/err")"
ok "malformed JSON: exit 2 with position"

set +e
"$BIN" --check-config -c "$T/missing.json" 2>"$T/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "missing file: exit $rc"
ok "missing config file: exit 2"

"$BIN" --version | grep -Eq '^reapd [0-9]+\.[0-9]+\.[0-9]+' || fail "--version"
ok "--version"
"$BIN" --help | grep -q -- '--check-config' || fail "--help"
ok "--help"
set +e
"$BIN" --no-such-flag 2>/dev/null
rc=$?
"$BIN" --log-level loud --check-config 2>/dev/null
rc2=$?
set -e
[ "$rc" -eq 2 ] && [ "$rc2" -eq 2 ] || fail "usage errors: $rc $rc2"
ok "usage errors exit 2"

# A state_dir others could write to, or a symlink, is refused at start
# (exit 2, one clear line), before anything is created in it.
mkdir -p "$T/open" "$T/real"
chmod 0777 "$T/open"
ln -s "$T/real" "$T/link"
for bad in open link; do
  cat >"$T/bad-$bad.json" <<JSON
{ "state_dir": "$T/$bad", "docker": { "socket": "$T/no-engine.sock" },
  "status": { "listen": "off" } }
JSON
  set +e
  "$BIN" -c "$T/bad-$bad.json" 2>"$T/bad-$bad.err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "state_dir $bad: exit $rc, want 2 ($(cat "$T/bad-$bad.err"))"
  grep -q "$T/$bad" "$T/bad-$bad.err" || fail "state_dir $bad: message does not name it"
  [ ! -e "$T/$bad/reapd.lock" ] && [ ! -e "$T/real/reapd.lock" ] ||
    fail "state_dir $bad: a lock file was created in it"
done
ok "a group/world-writable or symlinked state_dir is refused (exit 2)"

# A running daemon with no engine: live, not ready, reloads, stops.
# A port nothing listens on (a random one could be taken: reapd would
# then fail to bind and the test would report it dead).
for _ in $(seq 1 50); do
  port=$(( (RANDOM % 20000) + 20000 ))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
cat >"$T/good.json" <<JSON
{ "state_dir": "$T/state", "docker": { "socket": "$T/no-engine.sock",
  "reconnect_max_ms": 1000 },
  "status": { "listen": "127.0.0.1:$port" },
  "admin": { "socket": "$T/admin.sock" } }
JSON
"$BIN" -c "$T/good.json" 2>"$T/log" &
pid=$!
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/livez" || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || fail "reapd died: $(tail -n 3 "$T/log")"
  sleep 0.1
done
[ "$code" = 200 ] || fail "/livez never answered 200"
ok "/livez 200 with the engine down"
body=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/readyz")
case "$body" in
  *'"ready":false'*'503') ;;
  *) fail "/readyz with the engine down: $body" ;;
esac
ok "/readyz 503 with a JSON reason while the engine is down"

# A second reapd on the same state_dir is refused (exit 1), the first
# keeps running.
set +e
"$BIN" -c "$T/good.json" 2>"$T/second.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "second reapd on the same state_dir: exit $rc, want 1"
grep -q "another reapd uses" "$T/second.err" || fail "no clear message: $(cat "$T/second.err")"
kill -0 "$pid" || fail "the first reapd died"
ok "a second reapd on the same state_dir is refused"

# The config in force, as reapd says it (GET /v1/config).
config_now() {
  curl -sf --unix-socket "$T/admin.sock" http://localhost/v1/config | jq -cS . ||
    fail "GET /v1/config failed"
}
before=$(config_now)
[ "$(jq '.delete.max_in_flight' <<<"$before")" = 8 ] ||
  fail "the default delete.max_in_flight is not in force: $before"
cp "$T/good.json" "$T/good.json.bak"
echo '{ "delete": { "max_in_flight": 0 } }' >"$T/good.json"
kill -HUP "$pid"
for _ in $(seq 1 50); do
  grep -q "reload rejected" "$T/log" && break
  sleep 0.1
done
grep -q "reload rejected" "$T/log" || fail "bad reload not logged"
kill -0 "$pid" || fail "reapd died on a bad reload"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/livez")" = 200 ] || fail "not live after bad reload"
[ "$(config_now)" = "$before" ] ||
  fail "the config in force changed on a rejected reload: $(config_now)"
ok "SIGHUP with an invalid config: rejected, old config kept"
# A valid one with a change: the change is in force.
jq '.delete = {max_in_flight: 3}' "$T/good.json.bak" >"$T/good.json"
kill -HUP "$pid"
for _ in $(seq 1 50); do
  grep -q "SIGHUP: reloaded" "$T/log" && break
  sleep 0.1
done
grep -q "SIGHUP: reloaded" "$T/log" || fail "good reload not logged"
[ "$(config_now | jq '.delete.max_in_flight')" = 3 ] ||
  fail "the reloaded config is not in force: $(config_now)"
ok "SIGHUP with a valid config: reloaded, its change in force"

start=$(date +%s%N)
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=""
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc"
[ "$ms" -lt 5000 ] || fail "SIGTERM took $ms ms"
ok "SIGTERM: exit 0 in $ms ms"

# The mutants' table in tests/mutate/README.md is the mutants file's, as
# the runner prints it: a mutant added, renamed or dropped changes both.
bash "$SRC/tests/mutate/run" --check-readme 2>"$T/readme.err" ||
  fail "tests/mutate/README.md's table is not the mutants file's: $(head -c 600 "$T/readme.err")"
ok "tests/mutate/README.md's table is the mutants file's"
echo "$n passed, 0 failed"
