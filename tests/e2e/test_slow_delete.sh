#!/usr/bin/env bash
# A container whose task deletion is slow (slowrunc: runc delete sleeps
# 10 s, the engine holds the container's lock ~15 s) must not hold up the
# cleanup of another container that exits meanwhile.
# Usage: bash tests/e2e/test_slow_delete.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
slowrunc_delay 10
reapd_start "$REAPD_BIN"

# A exits at once, then its task deletion takes ~15 s; B exits ~1 s later,
# while A's deletion is under way.
t0=$(now_ms)
a=$(run_ctr --runtime slowrunc --label reapd.managed=true "$IMAGE" sh -c 'exit 7')
b=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 1; exit 5')
log "A (slow delete) ${a:0:12}, B ${b:0:12}"

line_b=$(wait_report "$b" 20)
tb=$(now_ms)
log "B reported after $((tb - t0)) ms: $line_b"
# B's report is there while A still has none.
assert_no_report "$a"
# B's cleanup did not wait for A's ~15 s deletion.
[ $((tb - t0)) -lt 10000 ] ||
  fail "B was reported only $((tb - t0)) ms after start (A's slow delete held it up?)"

assert_report_basic "$line_b" "$b"
assert_json "$line_b" '.exit_code == 5' "B exit_code"
assert_gone "$b"

line_a=$(wait_report "$a" 90)
ta=$(now_ms)
log "A reported after $((ta - t0)) ms: $line_a"
[ $((ta - tb)) -ge 5000 ] ||
  fail "A was reported only $((ta - tb)) ms after B; its delete should take ~15 s"

assert_report_basic "$line_a" "$a"
assert_json "$line_a" '.exit_code == 7' "A exit_code"
# dockerd 20.10 with a 10 s runc delete: the die event (after the delete)
# still carries the real code.
assert_json "$line_a" '.engine_exit_code == 7' "A engine_exit_code"
# "exit -> confirmed cleanup": A exited ~15 s before the engine let go.
assert_json "$line_a" '.cleanup_ms >= 10000' "A cleanup_ms covers the slow delete"
assert_gone "$a"
assert_no_task "$a" 10
assert_no_task "$b" 5
assert_eq 1 "$(report_count "$a")" "number of reports for A"
assert_eq 1 "$(report_count "$b")" "number of reports for B"

e2e_pass
