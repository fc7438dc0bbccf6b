#!/usr/bin/env bash
# reapd against a real engine whose answers go wrong: tests/tools/faultproxy
# sits between reapd and dockerd and, scenario by scenario, rewrites the die
# event's exitCode, answers DELETE with 500 or 409, cuts the events stream
# in the middle of an event, holds answers back, and plays an engine that
# is down. Each scenario checks the report in reports.jsonl and what the
# engine still holds; the proxy's counters prove the fault really happened.
# Usage: bash tests/e2e/test_faults.sh /path/to/reapd
#   (the proxy is <dir of reapd>/tests/tools/faultproxy, built with it)
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
faultproxy_find

engine_start
image_build
proxy_start
# Short backoffs so that retries and reconnects fit the time budget.
reapd_start "$REAPD_BIN" "$(jq -n --arg s "$PROXY_SOCK" '{
  docker: {socket: $s, request_timeout_ms: 5000, reconnect_max_ms: 1000},
  delete: {retry_base_ms: 100, retry_max_ms: 400}
}')"
[ "$(proxy_get .counters.requests.events)" -ge 1 ] ||
  fail "reapd did not subscribe to events through the proxy"

# managed [DOCKER_RUN_OPTS...] IMAGE CMD...: a container reapd removes.
managed() {
  run_ctr --label reapd.managed=true "$@"
}

# subscriptions: how often reapd has (re)subscribed to the events stream.
subscriptions() {
  grep -c 'docker events: subscribed' "$D/reapd.log" || true
}

# resubscribed_since N: reapd subscribed more than N times by now.
# shellcheck disable=SC2317  # called through wait_until
resubscribed_since() {
  [ "$(subscriptions)" -gt "$1" ]
}

# ---- a) die exitCode rewritten: inspect's true code wins ---------------
log "a) die event says 255, the container exits 7"
proxy_ctl "die_exit_code=255"
a=$(managed "$IMAGE" sh -c 'exit 7')
line=$(wait_report "$a" 30)
proxy_ctl "die_exit_code=off"
log "a) report: $line"
assert_report_basic "$line" "$a"
[ "$(proxy_get .counters.die_rewritten)" -ge 1 ] || fail "a) the proxy rewrote no die event"
assert_json "$line" '.exit_code == 7' "a) exit_code"
assert_json "$line" '.exit_code_source == "inspect"' "a) exit_code_source"
assert_json "$line" '.engine_exit_code == 255' "a) engine_exit_code"
assert_json "$line" '.anomalies | index("engine_exit_code_mismatch") != null' \
  "a) anomaly engine_exit_code_mismatch"
assert_gone "$a"

# ---- b) DELETE answered 500 twice: retried, removed on the third -------
log "b) DELETE answered 500 twice"
proxy_ctl "del500=2"
b=$(managed "$IMAGE" sh -c 'exit 3')
line=$(wait_report "$b" 30)
log "b) report: $line"
assert_report_basic "$line" "$b"
assert_eq 2 "$(proxy_get .counters.injected_500)" "b) 500 answers injected"
assert_json "$line" '.exit_code == 3' "b) exit_code"
assert_json "$line" '.delete_attempts == 3' "b) delete_attempts (two 500s, then 204)"
assert_json "$line" '.anomalies | index("delete_retried") != null' "b) anomaly delete_retried"
assert_json "$line" '.removed_by == "reapd"' "b) removed_by"
assert_gone "$b"

# ---- c) DELETE answered 409 once: polled, DELETEd again, removed -------
log "c) DELETE answered 409 (removal already in progress) once"
proxy_ctl "del409=1"
c=$(managed "$IMAGE" sh -c 'exit 4')
line=$(wait_report "$c" 30)
log "c) report: $line"
assert_report_basic "$line" "$c"
assert_eq 1 "$(proxy_get .counters.injected_409)" "c) 409 answers injected"
assert_json "$line" '.exit_code == 4' "c) exit_code"
# The 409 was a lie: the container stays "exited", so the removal did not
# take and reapd has to DELETE again.
assert_json "$line" '.delete_attempts == 2' "c) delete_attempts (409, then 204)"
assert_json "$line" '.anomalies | index("delete_retried") != null' "c) anomaly delete_retried"
assert_gone "$c"

# ---- d) events stream cut in the middle of the die event ---------------
log "d) events stream cut mid-object at the die event"
subs0=$(subscriptions)
proxy_ctl "cut=1&cut_on=die"
d=$(managed "$IMAGE" sh -c 'exit 6')
wait_until 15 "the proxy to cut the stream" proxy_counter_is .counters.cuts 1
wait_until 15 "reapd to resubscribe after the cut" resubscribed_since "$subs0"
grep -q 'reconnecting' "$D/reapd.log" || fail "d) reapd logged no reconnect"
log "d) reapd: $(grep 'reconnecting' "$D/reapd.log" | tail -n 1)"
wait_ready 10
line=$(wait_report "$d" 30)
log "d) report: $line"
assert_report_basic "$line" "$d"
assert_json "$line" '.exit_code == 6' "d) exit_code"
assert_json "$line" '.exit_code_source == "inspect"' "d) exit_code_source"
# The die event was cut, but the resubscription (since= the last whole
# event) replays it.
assert_json "$line" '.engine_exit_code == 6' "d) engine_exit_code (die replayed)"
assert_gone "$d"

# ---- e) engine down for 3 s while a container exits --------------------
# The container exits when the test opens its gate, so the exit surely
# falls inside the window.
log "e) engine down (connections refused) for 3 s during an exit"
mkdir -p "$D/gate"
e=$(managed -v "$D/gate:/gate" "$IMAGE" sh -c 'until [ -e /gate/go ]; do sleep 0.05; done; exit 5')
proxy_ctl "down=3000"
t_down=$(now_ms)
wait_until 3 "reapd /readyz to leave 200 while the engine is down" reapd_not_ready
touch "$D/gate/go"
assert_eq 5 "$(dk wait "$e")" "e) exit code (docker wait, engine direct)"
# Still inside the window: nothing can have been reported.
[ "$(proxy_get .down)" = true ] || fail "e) the exit came after the proxy's down window"
assert_no_report "$e"
line=$(wait_report "$e" 30)
t_rep=$(now_ms)
log "e) reported $((t_rep - t_down)) ms after the engine went down: $line"
[ $((t_rep - t_down)) -ge 3000 ] || fail "e) reported before the engine came back"
wait_ready 10
assert_report_basic "$line" "$e"
assert_json "$line" '.exit_code == 5' "e) exit_code"
assert_gone "$e"

# ---- f) slow answers: inspect held 1 s, DELETE's answer held 1.5 s -----
# The engine removes the container at once; its destroy event comes long
# before the DELETE answer. The join (destroy AND inspect 404) must hold
# either way, with a single DELETE.
log "f) inspect answers held 1000 ms, DELETE answers held 1500 ms"
proxy_ctl "delay_inspect=1000&delay_delete=1500"
f=$(managed "$IMAGE" sh -c 'exit 8')
line=$(wait_report "$f" 30)
proxy_ctl "reset=1"
log "f) report: $line"
assert_report_basic "$line" "$f"
[ "$(proxy_get .counters.delayed)" -ge 2 ] || fail "f) the proxy delayed nothing"
assert_json "$line" '.exit_code == 8' "f) exit_code"
assert_json "$line" '.delete_attempts == 1' "f) delete_attempts"
assert_json "$line" '.removed_by == "reapd"' "f) removed_by"
assert_gone "$f"

# ---- exactly once, and the end -----------------------------------------
for id in "$a" "$b" "$c" "$d" "$e" "$f"; do
  assert_eq 1 "$(report_count "$id")" "report lines for ${id:0:12}"
done
# Every DELETE the reports count went through the proxy, and no other:
# the removals are reapd's.
assert_eq "$(jq -s 'map(.delete_attempts) | add' "$(REPORTS)")" \
  "$(proxy_get .counters.requests.delete)" "DELETEs through the proxy (the reports' delete_attempts)"
log "proxy counters: $(proxy_get .counters | jq -c .)"
reapd_stop
proxy_stop
e2e_pass
