#!/usr/bin/env bash
# dockerd crashes in the middle of its own slow task deletion, and reapd
# is killed meanwhile too (a node in trouble). Found by the chaos soak.
#
# A container exits 7; its `runc delete` takes 40 s, so the engine has not
# yet said it exited (its die comes after the deletion) when reapd is
# killed -9 and restarted, and then dockerd is killed -9 and restarted.
# The restarted containerd cleans up after the shim it lost and publishes
# a second TaskExit with 255; the die event and inspect say 255 as well.
# The only true code the node ever had was containerd's first TaskExit,
# seen by the reapd that was killed. reapd must keep it across its own
# crash (it is written to the state before the engine says anything) and
# must not let the cleanup's 255 replace it.
# Usage: bash tests/e2e/test_engine_crash_in_delete.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
slowrunc_delay 40
config="{\"containerd\": {\"socket\": \"$(ctr_sock)\"}}"
reapd_start "$REAPD_BIN" "$config"

a=$(run_ctr --runtime slowrunc --label reapd.managed=true "$IMAGE" sh -c 'exit 7')
log "A ${a:0:12}"
wait_until 10 "reapd to see A's TaskExit" \
  grep -q "\"container\":\"$a\".*containerd: TaskExit, status 7" "$D/reapd.log"
# (Not asked of the engine: its inspect blocks during the deletion.)
! grep -q "\"container\":\"$a\".*\"to\":\"settling\"" "$D/reapd.log" ||
  fail "reapd already settles A: the test needs the engine's deletion under way"

reapd_kill9
reapd_start "$REAPD_BIN" "$config"
engine_kill9
# The load passes: runc delete is quick again. (While it stays slow,
# containerd 1.7 and 2.x cannot start: they clean up the lost shim, which
# runs runc delete, before serving, and dockerd gives up on them after
# ~15 s and kills them, again and again. Docker 20.10 waits.)
slowrunc_delay 0
engine_restart_until_up 120
wait_ready 60

line=$(wait_report "$a" 120)
log "A: $line"
assert_report_basic "$line" "$a"
assert_json "$line" '.exit_code == 7' "A's true exit code, kept across both crashes"
assert_json "$line" '.exit_code_source == "containerd"' "from containerd's first TaskExit"
assert_json "$line" '.removed == true and .task_deleted == true' "removed, task gone"
assert_gone "$a"
assert_no_task "$a" 30
assert_eq 1 "$(report_count "$a")" "reports of A"

e2e_pass
