#!/usr/bin/env bash
# Containers removed by someone else (docker run --rm, docker rm -f) are
# still reported, as removed, without errors; a label named exitCode
# (which the engine puts in its die event in place of the code) is never
# taken for the exit code.
# Usage: bash tests/e2e/test_rm_by_other.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
reapd_start "$REAPD_BIN"

# 1. --rm: the engine removes the container right after its die event.
a=$(run_ctr --rm --label reapd.managed=true "$IMAGE" sh -c 'exit 6')
log "A (--rm) ${a:0:12}"
line_a=$(wait_report "$a" 30)
log "A report: $line_a"
assert_report_basic "$line_a" "$a"
assert_json "$line_a" '.exit_code == 6' "A exit_code"
assert_json "$line_a" '.exit_code_source == "event" or .exit_code_source == "inspect"' \
  "A exit_code_source"
assert_json "$line_a" '.engine_exit_code == 6' "A engine_exit_code"
# The engine's own removal races reapd's DELETE (which then finds it
# gone or going): either may be first, but a DELETE that removed it is
# the only way to "reapd".
assert_json "$line_a" '.removed_by == "other" or (.removed_by == "reapd" and .delete_attempts >= 1)' \
  "A removed_by"
assert_gone "$a"

# 2. docker rm -f while running: the engine kills it (die event exitCode
# 137, measured) and destroys it.
b=$(run_ctr --label reapd.managed=true "$IMAGE" sleep 600)
assert_eq true "$(dk inspect -f '{{.State.Running}}' "$b")" "B running"
dk rm -f "$b" >/dev/null
log "B ${b:0:12} removed with docker rm -f"
line_b=$(wait_report "$b" 30)
log "B report: $line_b"
assert_report_basic "$line_b" "$b"
assert_json "$line_b" '.exit_code == 137' "B exit_code (killed by SIGKILL)"
assert_json "$line_b" '.engine_exit_code == 137' "B engine_exit_code"
# The engine removed it, not reapd: reapd sent no DELETE.
assert_json "$line_b" '.removed_by == "other"' "B removed_by"
assert_json "$line_b" '.delete_attempts == 0' "B: no DELETE from reapd"
assert_json "$line_b" '.anomalies == []' "B: no anomalies"
assert_gone "$b"

# C carries a label named exitCode: the engine copies labels over its own
# event attributes, so its die event says "0" for a SIGKILL. reapd must
# not take that for the exit code (at worst the code is unknown).
c=$(run_ctr --label reapd.managed=true --label exitCode=0 "$IMAGE" sleep 600)
dk rm -f "$c" >/dev/null
log "C ${c:0:12} (label exitCode=0) removed with docker rm -f"
line_c=$(wait_report "$c" 30)
log "C report: $line_c"
assert_report_basic "$line_c" "$c"
assert_json "$line_c" '.exit_code == 137 or .exit_code == null' \
  "C exit_code (137 or unknown, never the label's 0)"
assert_json "$line_c" '.engine_exit_code == null' \
  "C engine_exit_code (the die event's is the label's)"
assert_json "$line_c" '.labels.exitCode == "0"' "C's label in its report"
assert_gone "$c"

assert_no_task "$a" 5
assert_no_task "$b" 5
assert_no_task "$c" 5

assert_one_report_id "$a"
assert_one_report_id "$b"
assert_one_report_id "$c"
assert_log_clean

e2e_pass
