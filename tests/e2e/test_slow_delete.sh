#!/usr/bin/env bash
# A container whose removal is slow must not hold up the cleanup of
# another that exits meanwhile. The slowness is inside reapd's own path:
# the fault proxy holds the answer to A's DELETE for 10 s (the engine
# removes A at once; reapd's removal slot stays taken until the answer),
# while B exits and must be removed and reported on its own slot.
# A reapd that removed one container at a time fails this test:
# SLOW_DELETE_MAX_IN_FLIGHT=1 runs it with `delete.max_in_flight: 1`, and
# it must then fail (docs/testing.md).
# Usage: bash tests/e2e/test_slow_delete.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

HOLD_MS=10000
engine_start
image_build
proxy_start
reapd_start "$REAPD_BIN" "$(jq -n --arg s "$PROXY_SOCK" \
  --argjson m "${SLOW_DELETE_MAX_IN_FLIGHT:-8}" \
  '{docker: {socket: $s}, delete: {max_in_flight: $m}}')"

# A exits after 1 s; its DELETE's answer is held. B exits 1 s after A,
# while A's DELETE is held.
a=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 1; exit 7')
proxy_ctl "delay_delete=$HOLD_MS&delay_only=$a"
t0=$(now_ms)
b=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 1; exit 5')
log "A ${a:0:12} (its DELETE's answer held $HOLD_MS ms), B ${b:0:12}"

# A's DELETE is in reapd's hands and held: the proxy says so.
wait_until 10 "A's DELETE to be held by the proxy" proxy_counter_is .counters.delayed 1

line_b=$(wait_report "$b" 20)
tb=$(now_ms)
log "B reported $((tb - t0)) ms after A's DELETE was held: $line_b"
# B's report is there while A's DELETE is still held: A has none.
assert_no_report "$a"
[ $((tb - t0)) -lt $((HOLD_MS - 2000)) ] ||
  fail "B was reported only $((tb - t0)) ms after A's held DELETE began: it waited for A"
assert_report_basic "$line_b" "$b"
assert_json "$line_b" '.exit_code == 5' "B exit_code"
assert_json "$line_b" '.removed_by == "reapd" and .delete_attempts == 1' "B removed by reapd"
# reapd's DELETEs of A (held) and B went through the proxy: B's removal
# is reapd's, not the engine's.
assert_eq 2 "$(proxy_get .counters.requests.delete)" "DELETEs through the proxy when B is reported"
assert_gone "$b"
assert_no_task "$b" 5

# A is reported once its DELETE's answer arrives.
line_a=$(wait_report "$a" 30)
ta=$(now_ms)
log "A reported $((ta - t0)) ms after its DELETE was held: $line_a"
[ $((ta - t0)) -ge $((HOLD_MS - 2000)) ] ||
  fail "A was reported $((ta - t0)) ms in: its DELETE's answer was held $HOLD_MS ms"
assert_report_basic "$line_a" "$a"
assert_json "$line_a" '.exit_code == 7' "A exit_code"
assert_json "$line_a" '.removed_by == "reapd" and .delete_attempts == 1' "A removed by reapd"
assert_json "$line_a" ".cleanup_ms >= $((HOLD_MS - 2000))" "A cleanup_ms covers the held DELETE"
assert_gone "$a"
assert_no_task "$a" 5
assert_eq 1 "$(report_count "$a")" "number of reports for A"
assert_eq 1 "$(report_count "$b")" "number of reports for B"
assert_eq 2 "$(proxy_get .counters.requests.delete)" "DELETEs through the proxy"
proxy_stop

e2e_pass
