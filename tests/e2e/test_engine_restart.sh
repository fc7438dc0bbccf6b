#!/usr/bin/env bash
# dockerd crashes (SIGKILL) while a managed container runs; the container
# exits while the engine is down; the engine comes back. reapd, still
# running, must reconnect on its own and report the container once, and
# report containers that exit after the restart.
#
# Measured with dockerd 20.10.24 (no live-restore): the shim keeps the exit
# status while dockerd and its containerd are down, so after the restart
# inspect says "exited 9" (the true code), and the engine usually emits NO
# die event for it (now and then a die 255 as it restores it): reapd has to
# find it by reconciling after it reconnects. Docker
# 26 and 28 say 255 instead (their containerd kills the orphaned shim).
# Usage: bash tests/e2e/test_engine_restart.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

# Usually the engine makes no die event for such an exit; now and then
# Docker 20.10 makes one as it restores the container, saying 255 or the
# code its shim kept (both seen in CI). That die is dated after reapd first
# found the engine down, so it proves nothing: the exit stays flagged, and
# the die's code is told as the engine's (a mismatch when it says 255 and
# the true code survived).
assert_exited_while_down() { # line what restored-code
  assert_json "$1" --argjson r "$3" \
    '.engine_exit_code == null or .engine_exit_code == 255 or .engine_exit_code == $r' \
    "$2 engine_exit_code (no die event, or the restored engine's 255 or $3)"
  assert_json "$1" '(.anomalies | sort) == (["exited_while_engine_down"] +
      (if .engine_exit_code != null and .engine_exit_code != .exit_code
       then ["engine_exit_code_mismatch"] else [] end) | sort)' \
    "$2 exited while the engine was down"
}

engine_start
image_build
reapd_start "$REAPD_BIN"

# U, unmanaged, exits in the same outage: the restarted engine keeps it,
# so C's removal is reapd's. Started first, and slower, so that C's 3 s
# still cover the kill.
u=$(run_ctr "$IMAGE" sh -c 'sleep 5; exit 9')
upid=$(dk inspect -f '{{.State.Pid}}' "$u")
[ "$upid" -gt 0 ] || fail "container U is not running (pid '$upid')"
c=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 3; exit 9')
cpid=$(dk inspect -f '{{.State.Pid}}' "$c")
[ "$cpid" -gt 0 ] || fail "container C is not running (pid '$cpid')"
log "C ${c:0:12} runs as pid $cpid, U ${u:0:12} as $upid"

engine_kill9
# reapd notices the lost event stream.
wait_until 15 "reapd /readyz to leave 200 while the engine is down" reapd_not_ready
log "reapd /readyz: $(readyz_code) while the engine is down"
# C exits (its shim lives on) while the engine is down.
wait_until 15 "C's process to exit" pid_gone "$cpid"
wait_until 15 "U's process to exit" pid_gone "$upid"
log "C and U exited while the engine was down"
pid_alive "$REAPD_PID" || fail "reapd died while the engine was down"

engine_restart
wait_ready 60
log "reapd ready again"

line_c=$(wait_report "$c" 60)
log "C report: $line_c"
assert_report_basic "$line_c" "$c"
assert_json "$line_c" '(.exit_code | type) == "number"' "C exit_code is an integer"
# The exit happened while dockerd (and its containerd) was down: no die
# event, and the code is what the engine recovers at its restart. Docker
# 20.10's containerd 1.6 finds the shim and the true code; containerd 1.7
# and 2.x kill the orphaned shim and say 255 (docs/engines.md). Either way
# reapd says that the engine was down when it exited.
restored=255
engine_before 24 && restored=9
assert_json "$line_c" --argjson c "$restored" '.exit_code == $c' \
  "C exit_code (engine after restore: $restored)"
assert_json "$line_c" '.exit_code_source == "inspect"' "C exit code from inspect"
assert_json "$line_c" '.removed_by == "reapd" and .delete_attempts == 1' "C removed by reapd"
assert_exited_while_down "$line_c" C "$restored"
assert_gone "$c"
assert_eq "exited $restored" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$u")" \
  "U, unmanaged, after the restart"
assert_no_report "$u"

# Proof of reconnection: a container started after the restart.
d=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 4')
line_d=$(wait_report "$d" 30)
log "D report: $line_d"
assert_report_basic "$line_d" "$d"
assert_json "$line_d" '.exit_code == 4' "D exit_code"
assert_json "$line_d" '.engine_exit_code == 4' "D engine_exit_code"
assert_json "$line_d" '.anomalies == []' "D: an ordinary exit after the outage"
assert_json "$line_d" '.removed_by == "reapd" and .delete_attempts == 1' "D removed by reapd"
assert_gone "$d"
assert_no_task "$c" 5
assert_no_task "$d" 5

assert_eq 1 "$(report_count "$c")" "number of report lines for C"
assert_eq 1 "$(report_count "$d")" "number of report lines for D"

# Again, and this time reapd is killed too while the engine is down, and
# started again only once it is back: the new reapd never saw E run, yet
# knows from its state that the engine was down (found by the chaos soak).
e=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 3; exit 9')
epid=$(dk inspect -f '{{.State.Pid}}' "$e")
seen=$(grep -c 'version: .*Couldn.t connect' "$D/reapd.log" || true)
engine_kill9
wait_until 15 "reapd to find the engine unreachable" \
  bash -c "[ \$(grep -c 'version: .*Couldn.t connect' '$D/reapd.log') -gt $seen ]"
reapd_kill9
wait_until 15 "E's process to exit" pid_gone "$epid"
engine_restart
reapd_start "$REAPD_BIN"
line_e=$(wait_report "$e" 60)
log "E report: $line_e"
if engine_before 24; then
  assert_json "$line_e" '.exit_code == 9' "E exit_code"
else
  assert_json "$line_e" '.exit_code == 255' "E exit_code (the engine lost the 9)"
fi
assert_exited_while_down "$line_e" E "$restored"
assert_eq 1 "$(report_count "$e")" "number of report lines for E"

e2e_pass
