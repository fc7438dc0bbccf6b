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
# Usage: bash tests/e2e/test_containerd_outage.sh /path/to/reapd
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
# dockerd starts containerd through PATH: a wrapper first on it holds each
# start while $D/bin/containerd.hold exists (dockerd's own restart of the
# containerd it lost waits there), then execs the engine's containerd.
mkdir -p "$D/bin"
cat >"$D/bin/containerd" <<'EOF'
#!/bin/bash
self=$(dirname "$0")
while [ -e "$self/containerd.hold" ]; do sleep 0.1; done
IFS=:
for p in $PATH; do
  if [ "$p" != "$self" ] && [ -x "$p/containerd" ]; then
    exec "$p/containerd" "$@"
  fi
done
echo "containerd wrapper: no containerd on PATH" >&2
exit 127
EOF
chmod 755 "$D/bin/containerd"
engine_term
ENGINE_PATH="$D/bin:$ENGINE_PATH"
engine_restart
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
log "A ${a:0:12} (runc delete takes 5 s)"
deleting() {
  local p
  for p in $(pids_matching "$D/slowrunc"); do
    grep -qw delete "/proc/$p/cmdline" 2>/dev/null && return 0
  done
  return 1
}
wait_until 20 "runc delete of A under way" deleting
sleep 1
cpid=$(_containerd_pid)
[ -n "$cpid" ] || fail "no containerd pid"
touch "$D/bin/containerd.hold"
kill -KILL "$cpid"
log "containerd $cpid killed amid the engine's task deletion; held down"
wait_until 30 "dockerd's cleanup refused by the missing containerd" \
  grep -q "failed to delete container from containerd" "$D/dockerd.log"
# Held until the shim's runc delete is over: the containerd that starts
# then finds the task gone from its shim and drops it by itself.
notdeleting() { ! deleting; }
wait_until 30 "runc delete of A over" notdeleting
sleep 1
rm -f "$D/bin/containerd.hold"
ctrd_up() { "$CTR" -a "$(ctr_sock)" version >/dev/null 2>&1; }
wait_until 60 "containerd back" ctrd_up
log "containerd back"

line=$(wait_report "$a" 120)
log "A reported: $line"
assert_report_basic "$line" "$a"
assert_json "$line" '.removed == true and .task_deleted == true' "removed and task deleted"
# Nothing of A is left: no task, no containerd container, no shim.
assert_gone "$a"
assert_no_task "$a" 5
grep -q "containerd container" "$D/reapd.log" ||
  fail "reapd did not say it made sure of A's containerd container"
assert_eq 1 "$(report_count "$a")" "number of reports for A"

e2e_pass
