#!/usr/bin/env bash
# containerd killed in the middle of the engine's cleanup of an exit, on a
# real engine, with reapd's containerd channel on (found by the chaos soak).
# slowrunc makes `runc delete` take 5 s; while the engine waits on it,
# containerd is killed and kept from starting again until that delete is
# over. dockerd's Tasks.Delete fails, it says the container died, and its
# cleanup's Containers.Delete is refused ("cleanup: failed to delete
# container from containerd"). 26.1 and 28.5: the containerd that starts
# again drops the task by itself, and the containerd container is left
# with nobody to delete it once the engine's container is removed. 20.10:
# the stopped task is left as well (the leak reapd reaps anyway).
# The policy's delay holds reapd's removal until containerd is back, so
# its task phase goes the ordinary way (the /tasks/delete, a Tasks.Get
# 404): only the outage it saw during the cleanup says that the engine's
# Containers.Delete may have failed. reapd must make sure the task AND the
# containerd container are gone before it reports.
# The leak is seen before reapd may act (inside the policy's delay), and
# an unmanaged twin B, removed by hand, shows that the engine's own
# removal leaves it: what is gone of A after the report, reapd removed.
# Usage: bash tests/e2e/test_containerd_outage.sh /path/to/reapd
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
containerd_holdable
slowrunc_delay 5
# The policy's delay keeps reapd's own removal until containerd is back:
# the task phase then goes the ordinary way (the /tasks/delete seen, a
# Tasks.Get 404), and only the outage during the cleanup says that the
# engine's Containers.Delete may have failed.
reapd_start "$REAPD_BIN" "$(jq -n --arg s "$(ctr_sock)" '{
  containerd: {socket: $s},
  policies: [{name: "managed", match: {labels: {"reapd.managed": "true"}},
              action: "remove", delay_ms: 25000}]}')"

a=$(run_ctr --runtime slowrunc --label reapd.managed=true "$IMAGE" sh -c 'exit 3')
b=$(run_ctr --runtime slowrunc "$IMAGE" sh -c 'exit 4')
log "A ${a:0:12}, unmanaged B ${b:0:12} (runc delete takes 5 s)"
# deleting [N]: at least N `runc delete`s of slowrunc under way (one grep
# over /proc: a process per pid, as pids_matching does, takes seconds on
# a busy machine and missed the overlap of the two).
# shellcheck disable=SC2317  # called through wait_until
deleting() {
  local n
  n=$(grep -las -- "$D/[s]lowrunc" /proc/[0-9]*/cmdline |
    xargs -r grep -lasw delete | wc -l) || true
  [ "${n:-0}" -ge "${1:-1}" ]
}
wait_until 20 "runc delete of A and B under way" deleting 2
sleep 1
containerd_kill_held
# shellcheck disable=SC2317  # called through wait_until
refused() {
  [ "$(grep -c "failed to delete container from containerd" "$D/dockerd.log")" -ge 2 ]
}
wait_until 30 "dockerd's cleanups of A and B refused by the missing containerd" refused
# Held until the shims' runc deletes are over: the containerd that starts
# then finds the tasks gone from their shims and drops them by itself.
# shellcheck disable=SC2317  # called through wait_until
notdeleting() { ! deleting 1; }
wait_until 30 "runc delete of A and B over" notdeleting
sleep 1
# The containerd that starts cleans up the shims it lost with a `runc
# delete` of its own: no longer slow (each took 10 s on 28.5, and the
# policy's delay must outlast the restart).
slowrunc_delay 0
containerd_release

# What the engine left, seen while the policy's delay still holds reapd
# back: A exited and unreported, its containerd container there; 20.10
# keeps the stopped task too, 26.1 and 28.5 none (docs/testing.md).
# shellcheck disable=SC2317  # called through wait_until
engine_done() {
  [ "$(dk inspect -f '{{.State.Status}}' "$1")" = exited ]
}
wait_until 30 "the engine to say A exited" engine_done "$a"
wait_until 30 "the engine to say B exited" engine_done "$b"
tasks=$(ctr_tasks 2>&1) || fail "ctr task ls failed: $tasks"
ctrs=$(ctr_containers 2>&1) || fail "ctr containers ls failed: $ctrs"
for x in "$a" "$b"; do
  grep -qx "$x" <<<"$ctrs" ||
    fail "the engine left no containerd container for ${x:0:12}: the leak did not happen"
  if engine_before 24; then
    grep -q "^$x .*STOPPED" <<<"$tasks" ||
      fail "20.10 left no stopped task for ${x:0:12}: $tasks"
  else
    ! grep -q "^$x" <<<"$tasks" ||
      fail "$ENGINE_VERSION left a task for ${x:0:12}: $(grep "^$x" <<<"$tasks")"
  fi
done
# Seen before reapd acted: A still there, unreported.
assert_present "$a"
assert_no_report "$a"
log "leak seen before reapd's removal: containerd containers of A and B$(engine_before 24 && echo ', their stopped tasks')"

# The engine's own removal does not delete the containerd container: B,
# which reapd leaves alone, removed by hand, keeps it.
dk rm "$b" >/dev/null
assert_gone "$b"
ctrs=$(ctr_containers 2>&1) || fail "ctr containers ls failed: $ctrs"
grep -qx "$b" <<<"$ctrs" ||
  fail "docker rm deleted B's containerd container: the engine cleans it up itself"

line=$(wait_report "$a" 120)
log "A reported: $line"
assert_report_basic "$line" "$a"
assert_json "$line" '.exit_code == 3 and .exit_code_source == "containerd"' \
  "A's true exit code, from containerd"
assert_json "$line" '.removed == true and .task_deleted == true' "removed and task deleted"
assert_json "$line" '.removed_by == "reapd" and .delete_attempts == 1' "removed by reapd"
# Nothing of A is left: no task, no containerd container, no shim; reapd
# said it deleted the containerd container (B shows the engine would not).
assert_gone "$a"
assert_no_task "$a" 5
# reapd's Containers.Delete answered: its lifecycle left task_reaping.
jq -e -R -s --arg id "$a" '[split("\n")[] | fromjson? | objects
  | select(.container == $id and .msg == "transition" and .from == "task_reaping")]
  | length == 1' "$D/reapd.log" >/dev/null ||
  fail "reapd did not delete A's containerd container (no step out of task_reaping)"
assert_eq 1 "$(report_count "$a")" "number of reports for A"
assert_no_report "$b"

e2e_pass
