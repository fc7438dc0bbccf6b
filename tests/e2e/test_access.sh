#!/usr/bin/env bash
# Who may read what, tried as the attacker: an unprivileged local user
# (nobody) against a real reapd that has reported a managed container.
# Without a token the status listener answers the probes and /metrics
# (which names no container) and 401 on every /v1/ route, naming the
# admin socket and status.token_file; the admin socket (0600) and the
# state files refuse nobody. With a token: a wrong one or none is 401
# (/metrics too), the right one reads. A token file group or others may
# read is refused at start (exit 2) and on SIGHUP (the old token kept),
# and taken once it is private again.
# Usage: bash tests/e2e/test_access.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

REAPCTL="$(dirname "$REAPD_BIN")/reapctl"
[ -x "$REAPCTL" ] || fail "no reapctl next to $REAPD_BIN (build the project)"

# as_nobody CMD...: CMD as uid/gid 65534 with no other group.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
as_nobody true || fail "cannot run as nobody (setpriv)"

engine_start
image_build
# The test's own directory is 0700; opened up so that what refuses
# nobody below is reapd's modes, not ours.
chmod 755 "$D"
cp "$REAPCTL" "$D/reapctl"
chmod 755 "$D/reapctl"
reapd_start "$REAPD_BIN"

secret="label-secret-$RANDOM$RANDOM"
name="e2e-access-$$"
done_id=$(run_ctr --name "$name" --label reapd.managed=true --label "team=$secret" "$IMAGE" sh -c 'exit 7')
line=$(wait_report "$done_id" 30)
assert_json "$line" --arg s "$secret" '.exit_code == 7 and .labels.team == $s' "the report to steal"
# One still running, so that /v1/containers/ID has something to show.
run_id=$(run_ctr --label reapd.managed=true --label "team=$secret" "$IMAGE" sleep 600)
# shellcheck disable=SC2317  # called through wait_until
tracks_running() { api "/v1/containers/$run_id" | grep -q '"running"'; }
wait_until 10 "reapd to track the running container" tracks_running

# Every route of the read API, and what the right token gets from it.
routes=(
  "/v1/status 200" "/v1/containers 200" "/v1/containers/$run_id 200"
  "/v1/containers/$done_id/report 200" "/v1/containers/$done_id/report?wait=1 200"
  "/v1/reports 200" "/v1/reports?after=0&limit=5 200" "/v1/reports/stream 200"
  "/v1/reports/stream?after=0 200" "/v1/leaks 200" "/v1/config 200"
  "/v1/schema/report 200"
)

# get_as_nobody PATH [CURL_ARGS...]: "CODE" of GET PATH on the status
# listener, as nobody; its body in $D/body (held answers cut after 2 s).
get_as_nobody() {
  local path=$1
  shift
  as_nobody curl -s -m 2 -o "$D/body" -w '%{http_code}' "$@" "$REAPD_URL$path" 2>/dev/null || true
}

# no_secrets: $D/body names neither container nor the label's value.
no_secrets() {
  ! grep -q -e "$secret" -e "$done_id" -e "$run_id" -e "$name" "$D/body" ||
    fail "$1: the answer leaks a container: $(head -c 300 "$D/body")"
}

# ---- no token configured (the default) -----------------------------------

: >"$D/body"
chmod 666 "$D/body"
for r in "${routes[@]}"; do
  path=${r% *}
  for sent in none wrong; do
    args=()
    [ "$sent" = none ] || args=(-H "Authorization: Bearer not-a-token")
    code=$(get_as_nobody "$path" "${args[@]}")
    assert_eq 401 "$code" "GET $path as nobody without a configured token ($sent)"
    jq -e --arg sock "$D/admin.sock" '.error | test("status.token_file") and test("admin socket") and contains($sock)' \
      "$D/body" >/dev/null || fail "GET $path: the 401 does not name the admin socket and status.token_file: $(cat "$D/body")"
    no_secrets "GET $path"
  done
done
for p in /livez /readyz /metrics; do
  assert_eq 200 "$(get_as_nobody "$p")" "GET $p as nobody without a token"
  no_secrets "GET $p"
done
assert_eq 404 "$(get_as_nobody /nope)" "an unknown path"
# reapctl over TCP says where to go, in one line, exit 125.
rc=0
as_nobody "$D/reapctl" --url "$REAPD_URL" containers >"$D/ctl.out" 2>"$D/ctl.err" || rc=$?
assert_eq 125 "$rc" "reapctl --url containers without a token"
if ! grep -q "status.token_file" "$D/ctl.err" || ! grep -q "admin socket" "$D/ctl.err"; then
  fail "reapctl's message: $(cat "$D/ctl.err")"
fi
assert_eq 1 "$(wc -l <"$D/ctl.err")" "reapctl's message is one line"
[ ! -s "$D/ctl.out" ] || fail "reapctl printed: $(cat "$D/ctl.out")"
log "no token: every /v1/ route 401 to nobody; probes and /metrics open, naming no container"

# The admin socket: 0600 root, refused to nobody; root reads through it.
assert_eq 600 "$(stat -c %a "$D/admin.sock")" "admin socket mode"
assert_eq 0 "$(stat -c %u "$D/admin.sock")" "admin socket owner"
if as_nobody curl -s -m 2 --unix-socket "$D/admin.sock" http://localhost/v1/reports >"$D/body" 2>/dev/null; then
  fail "nobody read the admin socket: $(head -c 300 "$D/body")"
fi
rc=0
as_nobody "$D/reapctl" --socket "$D/admin.sock" reports >"$D/ctl.out" 2>"$D/ctl.err" || rc=$?
assert_eq 125 "$rc" "reapctl --socket as nobody"
grep -q "Permission denied" "$D/ctl.err" || fail "reapctl --socket as nobody: $(cat "$D/ctl.err")"
api /v1/reports | jq -e --arg id "$done_id" '.reports | any(.report.container_id == $id)' >/dev/null ||
  fail "root cannot read the report on the admin socket"
log "admin socket: refused to nobody, served to root"

# The state: nothing in it readable by nobody, not reports.jsonl.
[ -s "$(REPORTS)" ] || fail "no reports.jsonl"
while IFS= read -r f; do
  if as_nobody cat "$f" >/dev/null 2>&1; then fail "nobody can read $f"; fi
  mode=$(stat -c %a "$f")
  [ $((8#$mode & 8#007)) -eq 0 ] || [ -d "$f" ] || fail "$f is mode $mode: others may use it"
done < <(find "$D/state" -type f)
if as_nobody ls "$D/state" >/dev/null 2>&1; then
  mode=$(stat -c %a "$D/state")
  log "state_dir is $mode: listable, its files not readable"
fi
log "state: $(find "$D/state" -type f | wc -l) files, none readable by nobody"

# ---- a token ---------------------------------------------------------------

reapd_stop
status_token
old_token=$STATUS_TOKEN
reapd_start "$REAPD_BIN" "$(jq -n --arg tf "$D/status.token" '{status: {token_file: $tf}}')"
for r in "${routes[@]}"; do
  path=${r% *}
  want=${r##* }
  assert_eq 401 "$(get_as_nobody "$path")" "GET $path with a token configured, none sent"
  no_secrets "GET $path (no token)"
  assert_eq 401 "$(get_as_nobody "$path" -H "Authorization: Bearer ${STATUS_TOKEN}x")" "GET $path with a wrong token"
  assert_eq 401 "$(get_as_nobody "$path" -H "Authorization: Bearer ${STATUS_TOKEN%?}")" "GET $path with a token a byte short"
  assert_eq "$want" "$(get_as_nobody "$path" "${AUTH[@]}")" "GET $path with the token"
done
get_as_nobody /v1/reports "${AUTH[@]}" >/dev/null
grep -q "$secret" "$D/body" || fail "the token does not read the reports: $(head -c 300 "$D/body")"
assert_eq 401 "$(get_as_nobody /metrics)" "/metrics with a token configured, none sent"
assert_eq 200 "$(get_as_nobody /metrics "${AUTH[@]}")" "/metrics with the token"
assert_eq 200 "$(get_as_nobody /livez)" "/livez needs no token"
assert_eq 200 "$(get_as_nobody /readyz)" "/readyz needs no token"
rc=0
REAPD_TOKEN_FILE="$D/status.token" "$REAPCTL" --url "$REAPD_URL" show "$run_id" >"$D/ctl.out" 2>"$D/ctl.err" || rc=$?
assert_eq 0 "$rc" "reapctl --url show with the token ($(cat "$D/ctl.err"))"
log "token: none or a wrong one 401 (/metrics too), the right one reads"

# A token file group or others may read: refused at start, exit 2, before
# anything is made (a second reapd on this config would find the lock).
cp "$D/status.token" "$D/loose.token"
chmod 644 "$D/loose.token"
jq --arg tf "$D/loose.token" '.status.token_file = $tf' "$D/reapd.json" >"$D/loose.json"
for mode in 644 640 604 620 602; do
  chmod "$mode" "$D/loose.token"
  rc=0
  "$REAPD_BIN" -c "$D/loose.json" >"$D/loose.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "reapd with a token file of mode $mode"
  grep -q "status.token_file: $D/loose.token: group or others may read or write it" "$D/loose.out" ||
    fail "no clear message for mode $mode: $(cat "$D/loose.out")"
done
chmod 600 "$D/loose.token"
mkfifo "$D/token.fifo"
jq --arg tf "$D/token.fifo" '.status.token_file = $tf' "$D/reapd.json" >"$D/fifo.json"
rc=0
timeout 10 "$REAPD_BIN" -c "$D/fifo.json" >"$D/loose.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "reapd with a FIFO for a token file"
grep -q "not a regular file" "$D/loose.out" || fail "FIFO: $(cat "$D/loose.out")"
pid_alive "$REAPD_PID" || fail "the running reapd died"
log "a loose token file and a FIFO: refused at start, exit 2"

# On SIGHUP: a new token in a loose file is refused, the old one stays in
# force; once private, the new one is taken.
new_token="e2e-new-$RANDOM$RANDOM"
printf '%s\n' "$new_token" >"$D/status.token"
chmod 644 "$D/status.token"
lines=$(wc -l <"$D/reapd.log")
kill -HUP "$REAPD_PID"
wait_until 10 "the reload to be rejected" bash -c "tail -n +$((lines + 1)) '$D/reapd.log' | grep -q 'reload rejected: status.token_file: .*group or others'"
tail -n +$((lines + 1)) "$D/reapd.log" | grep -q "the old config stays in force" ||
  fail "no 'old config stays' after the rejected reload"
assert_eq 200 "$(get_as_nobody /v1/status -H "Authorization: Bearer $old_token")" "the old token after a rejected reload"
assert_eq 401 "$(get_as_nobody /v1/status -H "Authorization: Bearer $new_token")" "the new token after a rejected reload"
chmod 600 "$D/status.token"
lines=$(wc -l <"$D/reapd.log")
kill -HUP "$REAPD_PID"
wait_until 10 "the reload to be taken" bash -c "tail -n +$((lines + 1)) '$D/reapd.log' | grep -q 'SIGHUP: reloaded'"
assert_eq 200 "$(get_as_nobody /v1/status -H "Authorization: Bearer $new_token")" "the new token once private"
assert_eq 401 "$(get_as_nobody /v1/status -H "Authorization: Bearer $old_token")" "the old token once replaced"
grep -q -e "$old_token" -e "$new_token" "$D/reapd.log" && fail "a token appears in reapd's log"
log "SIGHUP: a loose token file rejected (old token kept), a private one taken"

dk rm -f "$run_id" >/dev/null
e2e_pass
