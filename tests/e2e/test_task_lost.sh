#!/usr/bin/env bash
# containerd killed while a container runs, and held down till the
# container has exited (found by the chaos soak, which then had the
# engine say "exited 0" once it was killed). 26.1 and 28.5: the
# containerd that starts again finds the shim it lost, kills it and drops
# the task ("cleaning leaked shim process"); the engine never hears and
# says the container runs, with no task, till someone kills it. The code
# is gone from the node. reapd finds the task missing from containerd's
# list, asks Tasks.Get and inspect a second later, and reports the
# exit as unknown with task_lost, removes the container by force and
# deletes the containerd container the engine left. 20.10: containerd
# 1.6 keeps the task and publishes its TaskExit, which dockerd hears: the
# true code, nothing lost.
# The policy asks for no force: a lost task's DELETE is forced anyway (a
# plain one is refused, 409, while the engine says it runs).
# A twin B, unmanaged, shows what the engine does without reapd: it still
# says running when A's report is in. A reapd started then, with a policy
# for B, finds B's task lost as well.
# Usage: bash tests/e2e/test_task_lost.sh /path/to/reapd
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
containerd_holdable
reapd_start "$REAPD_BIN" "$(jq -n --arg s "$(ctr_sock)" '{
  containerd: {socket: $s},
  policies: [{name: "managed", match: {labels: {"reapd.managed": "true"}},
              action: "remove", force: false}]}')"

a=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 3; exit 40')
b=$(run_ctr "$IMAGE" sh -c 'sleep 3; exit 41')
log "A ${a:0:12}, unmanaged B ${b:0:12}: both exit in 3 s"
containerd_kill_held
# Both exit while containerd is down; their shims keep the codes.
# shellcheck disable=SC2317  # called through wait_until
exited() { [ -z "$(pids_matching "sleep 3")" ]; }
wait_until 20 "A and B to exit" exited
sleep 1
containerd_release

if engine_before 24; then
  line=$(wait_report "$a" 60)
  log "A reported: $line"
  assert_report_basic "$line" "$a"
  # From containerd's TaskExit, or from the engine when that went out
  # before reapd's channel was back.
  assert_json "$line" '.exit_code == 40' "20.10 keeps the task: the true code"
  assert_json "$line" '.anomalies | index("task_lost") == null' "no task_lost"
  e2e_pass
fi

line=$(wait_report "$a" 90)
log "A reported: $line"
assert_report_basic "$line" "$a"
assert_json "$line" '.exit_code == null and .exit_code_source == null' \
  "the code is unknown"
assert_json "$line" '(.anomalies | index("task_lost")) != null and
  (.anomalies | index("exit_code_unknown")) != null' "task_lost, exit_code_unknown"
assert_json "$line" '.removed == true and .removed_by == "reapd"' "removed by reapd"
assert_json "$line" '.task_deleted == true' "task deleted"
# The engine says 0 as reapd's forced DELETE kills it, or nothing.
assert_json "$line" '.engine_exit_code == null or .engine_exit_code == 0' \
  "the engine's made-up code, if any"
assert_json "$line" '(.anomalies | index("engine_exit_code_mismatch")) == null' \
  "no mismatch against an unknown code"
assert_gone "$a"
assert_no_task "$a" 10
assert_eq 1 "$(report_count "$a")" "number of reports for A"

# Without reapd the engine still says B runs: its task is gone.
assert_eq running "$(dk inspect -f '{{.State.Status}}' "$b")" "B's state"
tasks=$(ctr_tasks 2>&1) || fail "ctr task ls failed: $tasks"
! grep -q "^$b" <<<"$tasks" || fail "B still has a task: the loss did not happen"
assert_no_report "$b"
jq -e -R -s --arg id "$a" '[split("\n")[] | fromjson? | objects
  | select(.container == $id and .msg == "transition"
           and (.reason // "" | startswith("its task is lost")))]
  | length == 1' "$D/reapd.log" >/dev/null ||
  fail "no transition of A for its lost task in reapd's log"
grep -q '"msg":"containerd has no task for it, yet the engine says it runs' \
  "$D/reapd.log" || fail "no warning of A's lost task in reapd's log"

# A reapd started after the loss (B now under a policy: a node that was
# not watched) finds it too. Its first relist is held 3 s (the fault
# proxy) so that containerd's first task list, at its subscription, comes
# before any record of B: one more list follows the relist.
bname=$(dk inspect -f '{{.Name}}' "$b")
reapd_stop
proxy_start
proxy_ctl "delay_list=3000"
reapd_start "$REAPD_BIN" "$(jq -n --arg s "$(ctr_sock)" --arg n "${bname#/}" \
  --arg p "$PROXY_SOCK" '{
  docker: {socket: $p}, containerd: {socket: $s},
  policies: [{name: "twin", match: {name: $n}, action: "remove"}]}')"
proxy_ctl "reset=1"
jq -e -R -s '[split("\n")[] | fromjson? | objects | .msg // ""] as $m
  | ($m | map(test("^reapd .* starting")) | rindex(true)) as $start
  | ($m[$start:] | map(startswith("containerd events: subscribed")) | index(true)) as $c
  | ($m[$start:] | map(startswith("reconciled with the engine")) | index(true)) as $r
  | $c != null and $r != null and $c < $r' "$D/reapd.log" >/dev/null ||
  fail "containerd's first list did not come before the relist"
line=$(wait_report "$b" 90)
log "B reported: $line"
assert_json "$line" '.exit_code == null and .policy == "twin"' "B's code unknown"
assert_json "$line" '(.anomalies | index("task_lost")) != null' "B's task_lost"
assert_json "$line" '.removed == true and .task_deleted == true' "B removed"
assert_gone "$b"
assert_no_task "$b" 10
e2e_pass
