#!/usr/bin/env bash
# A task-delete timeout with the containerd channel off: the true exit code
# still comes from inspect (exited 7) and the die event's 255 (before
# Docker 24) is flagged;
# task_deleted is null because nothing can confirm it without containerd.
# Usage: bash tests/e2e/test_delete_timeout_docker_only.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
slowrunc_delay 40
reapd_start "$REAPD_BIN" '{"containerd": {"socket": "off"}}'
grep -q "mode: docker-only" "$D/reapd.log" ||
  fail "reapd did not say it runs Docker-only"

a=$(run_ctr --runtime slowrunc --label reapd.managed=true "$IMAGE" sh -c 'exit 7')
line=$(wait_report "$a" 120)
log "A: $line"
assert_json "$line" '.exit_code == 7' "true exit code"
assert_json "$line" '.exit_code_source == "inspect"' "exit code from inspect"
if engine_before 24; then
  assert_json "$line" '.engine_exit_code == 255' "the engine's bogus 255 kept"
  assert_json "$line" '.anomalies | index("engine_exit_code_mismatch") != null' "mismatch flagged"
else
  assert_json "$line" '.engine_exit_code == 7' "the engine's die event (true from 24 on)"
  assert_json "$line" '.anomalies == []' "nothing reapd could see without containerd"
fi
assert_json "$line" '.task_deleted == null' "task_deleted null without containerd"
assert_json "$line" '.removed == true' "removed"
assert_gone "$a"
# Why task_deleted is null, not true: the engine gave up on the task,
# which Docker-only mode cannot see. It is still there.
"$CTR" -a "$(ctr_sock)" -n moby task ls -q | grep -qx "$a" ||
  fail "the engine did not leak A's task (docs/engines.md says every engine does)"

e2e_pass
