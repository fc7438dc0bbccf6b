#!/usr/bin/env bash
# A managed container's true exit code is reported, the container removed;
# an unmanaged one is left alone and not reported.
# Usage: bash tests/e2e/test_exit_code.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

engine_start
image_build
reapd_start "$REAPD_BIN"

# Unmanaged first: by the time the managed one is reported, reapd has seen
# this one's die event for sure (events arrive in order).
unmanaged=$(run_ctr --name "e2e-unmanaged-$$" "$IMAGE" sh -c 'exit 3')
assert_eq 3 "$(dk wait "$unmanaged")" "unmanaged container's exit code (docker wait)"

name="e2e-exit42-$$"
# Labels named name and image: the engine's events hide them behind its own
# name and image attributes; the report still has them as they are.
managed=$(run_ctr --name "$name" --label reapd.managed=true --label team=e2e \
  --label name=labelled --label image=label-image "$IMAGE" sh -c 'exit 42')
[[ $managed =~ ^[0-9a-f]{64}$ ]] || fail "docker run gave no full id: $managed"
log "managed ${managed:0:12}, unmanaged ${unmanaged:0:12}"

line=$(wait_report "$managed" 30)
log "report: $line"

assert_report_basic "$line" "$managed"
assert_json "$line" '.container_id | test("^[0-9a-f]{64}$")' "container_id is 64 hex"
assert_json "$line" '.exit_code == 42' "exit_code"
assert_json "$line" '.exit_code_source == "inspect"' "exit_code_source"
assert_json "$line" '.engine_exit_code == 42' "engine_exit_code"
assert_json "$line" --arg n "$name" '.name == $n' "name (without leading slash)"
assert_json "$line" '.image == "reapd-test:1"' "image"
assert_json "$line" '(.labels | type) == "object"' "labels is an object"
assert_json "$line" '.labels["reapd.managed"] == "true"' "labels contain reapd.managed"
assert_json "$line" '.labels.team == "e2e"' "labels contain team"
assert_json "$line" '.labels.name == "labelled" and .labels.image == "label-image"' \
  "labels named name and image, as they are"
assert_json "$line" '(.delete_attempts | type) == "number" and .delete_attempts >= 1' "delete_attempts >= 1"
assert_json "$line" '(.cleanup_ms | type) == "number" and .cleanup_ms >= 0' "cleanup_ms"
assert_json "$line" '.oom_killed == false' "oom_killed"
assert_json "$line" '.task_deleted == null' "task_deleted is null with containerd off"
assert_json "$line" '(.started_at | type) == "string" and (.finished_at | type) == "string"' \
  "started_at/finished_at"
assert_json "$line" '(.finished_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}"))' \
  "finished_at is RFC 3339"
# The rest of the contract's fields, each as the contract says.
assert_json "$line" '.report_id | test("^[0-9a-f]{32}$")' "report_id is 32 hex"
assert_json "$line" '.action == "remove"' "action"
assert_json "$line" '.removed_by == "reapd"' "removed_by"
assert_json "$line" '.delete_attempts == 1' "one DELETE"
assert_json "$line" '.anomalies == []' "no anomalies"
assert_json "$line" '.reported_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$")' \
  "reported_at is RFC 3339, UTC, milliseconds"
assert_json "$line" '(.reported_at | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) >= (.finished_at | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601)' \
  "reported after the exit"

assert_gone "$managed"
assert_no_task "$managed" 5

# The unmanaged container is untouched and unreported.
assert_present "$unmanaged"
assert_eq "exited 3" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$unmanaged")" \
  "unmanaged container state"
assert_no_report "$unmanaged"
assert_one_report_id "$managed"

# Which engine reapd runs on: said at the start and in the metrics, as
# the engine itself says (its client agrees).
server=$(dk version -f '{{.Server.Version}}')
api=$(curl -s --unix-socket "$D/docker.sock" http://d/version | jq -r .ApiVersion)
ctrd=$(curl -s --unix-socket "$D/docker.sock" http://d/version |
  jq -r '.Components[] | select(.Name == "containerd") | .Version')
assert_eq "$ENGINE_VERSION" "$server" "dockerd version"
grep -qF "docker: engine $server (API $api; reapd uses $api), containerd $ctrd," "$D/reapd.log" ||
  fail "reapd did not log the engine's versions: $(grep -F 'docker: engine' "$D/reapd.log")"
want="reapd_engine_info{docker_version=\"$server\",api_version=\"$api\",api_version_used=\"$api\",containerd_version=\"$ctrd\"} 1"
metrics=$(curl -s "$REAPD_URL/metrics")
grep -qxF "$want" <<<"$metrics" ||
  fail "metrics lack '$want': $(grep engine_info <<<"$metrics")"
# Both containers were decided on their create events: the only list
# call is the relist at the start.
lists=$(awk '$1 == "reapd_engine_request_duration_seconds_count{api=\"docker\",call=\"list\"}" {print $2}' <<<"$metrics")
assert_eq 1 "$lists" "docker list calls (the relist only)"
other=$(jq -cR --arg id "$managed" 'fromjson? | select(.container_id != $id)' "$(REPORTS)")
[ -z "$other" ] || fail "reports for other containers: $other"

# The engine sends reapd only the actions it acts on: a container's execs,
# three events each, never reach it. Counted up to a marker's create,
# which the engine sends after them.
events_received() {
  curl -s "$REAPD_URL/metrics" | awk '$1 == "reapd_events_received_total" {print $2}'
}
ev0=$(events_received)
busy=$(run_ctr --name "e2e-busy-$$" "$IMAGE" sleep 120)
for _ in 1 2 3 4 5; do dk exec "$busy" true; done
marker=$(dk create --network none --name "e2e-marker-$$" "$IMAGE" true)
wait_until 10 "the marker's create event" test "$(($(events_received) - ev0))" -ge 3
sleep 0.5
assert_eq 3 "$(($(events_received) - ev0))" \
  "events received for a create and start, five execs and a create"
dk rm -f "$busy" "$marker" >/dev/null

e2e_pass
