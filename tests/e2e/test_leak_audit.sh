#!/usr/bin/env bash
# A task the engine leaked before reapd started (the leak after a task-delete timeout: runc
# delete slower than dockerd's 30 s timeout, then `docker rm`) is found by
# reapd's audit of containerd's task list, shown on /v1/leaks and in the
# metrics, and reaped: task, containerd container and shim all gone.
# Usage: bash tests/e2e/test_leak_audit.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
slowrunc_delay 40

# Leak a task with no reapd running.
x=$(run_ctr --runtime slowrunc "$IMAGE" sh -c 'exit 3')
log "X ${x:0:12}: waiting for dockerd to give up on its task (~30 s)"
wait_until 60 "X to be exited" \
  bash -c "[ \"\$(DOCKER_API_VERSION=1.41 /usr/bin/docker -H unix://$D/docker.sock inspect -f '{{.State.Status}}' $x)\" = exited ]"
dk rm "$x" >/dev/null
# The leak, seen before reapd runs: task, containerd container, shim.
assert_leaked "$x"
log "X's task leaked: $(ctr_tasks | grep "^$x")"

# From now on runc deletes quickly, so the reap itself is fast.
slowrunc_delay 0
# Stopped before reapd looks (its status is UNKNOWN while the engine's
# slow delete still runs): only a stopped task is reaped, so the first
# audit below could reap it, and must not.
task_stopped() { ctr_tasks | grep "^$x" | grep -q STOPPED; }
wait_until 90 "X's task to be STOPPED" task_stopped
# Audits 4 s apart: the first sighting and the reap are two audits, so
# at least that far apart ("two audits in a row"; a container the engine
# is still creating looks the same once).
reapd_start "$REAPD_BIN" "{\"containerd\": {\"socket\": \"$(ctr_sock)\", \"audit_interval_ms\": 4000}}"

leaks_has_x() {
  api /v1/leaks | jq -e --arg id "$x" '.leaks | any(.container_id == $id)' >/dev/null
}
x_listed_or_gone() { leaks_has_x || ! ctr_tasks | grep -q "^$x"; }
wait_until 30 "the audit to list X on /v1/leaks" x_listed_or_gone
leaks=$(api /v1/leaks)
assert_json "$leaks" --arg id "$x" \
  '.leaks | map(select(.container_id == $id)) | length == 1 and .[0].audits_seen == 1 and .[0].reaping == false' \
  "X after its first audit (reaped at once?)"
ctr_tasks | grep -q "^$x" || fail "X's task reaped after one audit"
# Task, containerd container and shim all gone, by a deadline.
assert_no_task "$x" 60
wait_until 10 "X to leave /v1/leaks" bash -c "! curl -s --unix-socket $D/admin.sock http://localhost/v1/leaks | jq -e --arg id $x '.leaks | any(.container_id == \$id)' >/dev/null"
metrics=$(curl -s "$REAPD_URL/metrics")
grep -q '^reapd_tasks_reaped_total{found="audit"} 1$' <<<"$metrics" ||
  fail "metrics do not count the audit's reap: $(grep tasks_reaped <<<"$metrics")"
grep -q '^reapd_leaked_tasks 0$' <<<"$metrics" || fail "leaked_tasks gauge not back to 0"
# The reap came one audit after the sighting, not with it.
log_ms() {
  jq -r --arg id "$x" --arg m "$1" 'select(.container == $id and (.msg | startswith($m))) | .ts' "$D/reapd.log" |
    head -1 | xargs -I{} date -d {} +%s%3N
}
seen_ms=$(log_ms "containerd task without an engine container")
reap_ms=$(log_ms "orphan containerd task (no engine container): reaping")
if [ -z "$seen_ms" ] || [ -z "$reap_ms" ]; then
  fail "no sighting or reap logged for X"
fi
[ $((reap_ms - seen_ms)) -ge 2000 ] ||
  fail "X reaped $((reap_ms - seen_ms)) ms after its first sighting: one audit, not two"
# X had no report: it was never a container reapd saw exit.
assert_eq 0 "$(report_count "$x")" "reports for X"

e2e_pass
