#!/usr/bin/env bash
# The executor and operator interface on a real engine (docs/integration.md).
# An executor runs `reapctl wait ID --exit-code` right after `docker run -d`
# and gets the container's true exit code exactly when the container and
# its containerd task are gone; the HTTP equivalent answers 200 with the
# report (202 while the container runs, 404 for a container reapd does not
# know). The report stream carries each report as it becomes durable, with
# growing seq, and a cursor (?after=SEQ) resumes it. An operator finds the
# dead letters an upstream refused, requeues them all through the admin
# socket (the TCP listener refuses writes) and drains the node.
# Usage: bash tests/e2e/test_executor.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

REAPCTL="$(dirname "$REAPD_BIN")/reapctl"
[ -x "$REAPCTL" ] || fail "no reapctl next to $REAPD_BIN (build the project)"
ctl() { "$REAPCTL" --socket "$D/admin.sock" "$@"; }

engine_start
image_build

# The upstream refuses every report (400): each becomes a dead letter.
upstream_start 400
port=$UPSTREAM_PORT

# The executor reads the status listener, with the token.
status_token
reapd_start "$REAPD_BIN" "$(jq -n --arg url "http://127.0.0.1:$port/reports" \
  --arg ctrd "$(ctr_sock)" --arg tf "$D/status.token" \
  '{containerd: {socket: $ctrd}, status: {token_file: $tf},
    upstream: {url: $url, timeout_ms: 2000, retry_base_ms: 100,
               retry_max_ms: 500}}')"
[ "$(stat -c %a "$D/admin.sock")" = 600 ] || fail "admin socket mode $(stat -c %a "$D/admin.sock"), want 600"

# The stream, from now on, read as a subscriber would.
curl -sN "${AUTH[@]}" "$REAPD_URL/v1/reports/stream" >"$D/stream.ndjson" 2>/dev/null &
STREAM_PID=$!
E2E_BG_PIDS+=("$STREAM_PID")

# The executor: docker run -d, then wait. The container runs for a while,
# so the wait is held, not answered from a report already there.
id=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'sleep 3; exit 42')
# wait=1 holds the answer a second, then says 202: at least 0.9 s, and
# well before the exit 3 s after the start.
out=$(curl -s -m 10 "${AUTH[@]}" -o "$D/running.json" -w '%{http_code} %{time_total}' \
  "$REAPD_URL/v1/containers/$id/report?wait=1")
assert_eq 202 "${out%% *}" "wait=1 on a running container"
held=$(awk -v t="${out#* }" 'BEGIN {printf "%d", t * 1000}')
if [ "$held" -lt 900 ] || [ "$held" -ge 2000 ]; then
  fail "wait=1 answered 202 after $held ms, want 900 to 2000"
fi
assert_json "$(cat "$D/running.json")" --arg id "$id" '.container_id == $id and .state == "running"' \
  "202 names the container and its state"
rc=0
ctl wait "$id" --timeout 60 --exit-code >"$D/wait.out" 2>"$D/wait.err" || rc=$?
# The moment wait returns, the container and its task are gone already.
assert_gone "$id"
assert_no_task "$id" 0
assert_eq 42 "$rc" "reapctl wait --exit-code: the container's exit code ($(cat "$D/wait.err"))"
# reapd's own DELETE removed it (the engine keeps an exited container).
assert_json "$(cat "$D/wait.out")" --arg id "$id" \
  '.container_id == $id and .exit_code == 42 and .exit_code_source == "containerd" and .task_deleted == true
   and .removed == true and .removed_by == "reapd" and .delete_attempts == 1' \
  "reapctl wait prints the report"
# The HTTP equivalent, answered at once now (not held the 5 s), with its
# place in the cursor.
out=$(curl -s -m 10 "${AUTH[@]}" -D "$D/headers" -o "$D/report.json" -w '%{http_code} %{time_total}' \
  "$REAPD_URL/v1/containers/$id/report?wait=5")
assert_eq 200 "${out%% *}" "GET .../report?wait=5 once reported"
held=$(awk -v t="${out#* }" 'BEGIN {printf "%d", t * 1000}')
[ "$held" -lt 1000 ] || fail "GET .../report?wait=5 of a reported container took $held ms"
grep -qi '^Reapd-Report-Seq: [0-9]' "$D/headers" || fail "no Reapd-Report-Seq header: $(cat "$D/headers")"
assert_json "$(cat "$D/report.json")" '.exit_code == 42 and .schema_version == 1' "GET .../report"
rc=0
ctl wait "$id" >/dev/null || rc=$?
assert_eq 0 "$rc" "reapctl wait without --exit-code"

# A container reapd does not know: 404, and reapctl's own error (125).
unknown=$(printf '%064d' 7)
assert_eq 404 "$(curl -s "${AUTH[@]}" -o /dev/null -w '%{http_code}' "$REAPD_URL/v1/containers/$unknown/report")" \
  "report of an unknown container"
t0=$(now_ms)
rc=0
ctl wait "$unknown" --timeout 3 --exit-code 2>"$D/unknown.err" || rc=$?
assert_eq 125 "$rc" "reapctl wait on an unknown container"
# An executor's wait may race its docker run: the 404s are asked again
# until the timeout (3 s, under the 5 s grace), then 125.
t=$(($(now_ms) - t0))
if [ "$t" -lt 2900 ] || [ "$t" -ge 5000 ]; then
  fail "reapctl wait --timeout 3 on an unknown container took $t ms, want 2900 to 5000"
fi
grep -q "unknown container $unknown" "$D/unknown.err" ||
  fail "reapctl wait on an unknown container: $(cat "$D/unknown.err")"

# Two more exits, waited for concurrently.
ids=()
for c in 3 5; do
  ids+=("$(run_ctr --label reapd.managed=true "$IMAGE" sh -c "sleep 1; exit $c")")
done
pids=()
for i in 0 1; do
  ctl wait "${ids[$i]}" --timeout 60 --exit-code >/dev/null 2>&1 &
  pids+=($!)
done
rc=0; wait "${pids[0]}" || rc=$?; assert_eq 3 "$rc" "concurrent wait 1"
rc=0; wait "${pids[1]}" || rc=$?; assert_eq 5 "$rc" "concurrent wait 2"

# The stream saw all three, in order, each once.
wait_until 10 "3 entries on the stream" bash -c "[ \$(grep -c . '$D/stream.ndjson') -ge 3 ]"
kill "$STREAM_PID" 2>/dev/null || true
jq -e -s --arg a "$id" --arg b "${ids[0]}" --arg c "${ids[1]}" '
  ([.[].report.container_id] | sort) == ([$a, $b, $c] | sort)
  and ([.[].seq] == ([.[].seq] | sort)) and ([.[].seq] | unique | length) == 3' \
  "$D/stream.ndjson" >/dev/null || fail "stream: $(cat "$D/stream.ndjson" | head -c 600)"
first=$(head -n 1 "$D/stream.ndjson" | jq .seq)
# A cursor resumes after the first: the other two, oldest first.
out=$(curl -s -m 10 "${AUTH[@]}" -o "$D/after.json" -w '%{http_code}' "$REAPD_URL/v1/reports?after=$first")
assert_eq 200 "$out" "GET /v1/reports?after=SEQ"
after=$(jq -c '[.reports[].seq]' "$D/after.json")
assert_eq "[$((first + 1)),$((first + 2))]" "$after" "cursor after the first seq"
curl -s -m 3 -N "${AUTH[@]}" "$REAPD_URL/v1/reports/stream?after=$first" >"$D/stream2.ndjson" 2>/dev/null || true
assert_eq 2 "$(grep -c . "$D/stream2.ndjson")" "stream?after=SEQ replays what followed"

# The operator: three dead letters (the upstream refused them all).
wait_until 20 "3 dead letters" bash -c "[ \"\$('$REAPCTL' --socket '$D/admin.sock' reports --dead | grep -c .)\" = 3 ]"
assert_eq 405 "$(curl -s "${AUTH[@]}" -o /dev/null -w '%{http_code}' -X POST "$REAPD_URL/v1/reports/requeue?state=dead")" \
  "requeue on the TCP listener"
curl -sf "http://127.0.0.1:$port/_control?mode=200" >/dev/null
out=$(ctl requeue --all-dead)
assert_json "$out" '.requeued == 3' "requeue --all-dead"
rc=0
ctl drain --timeout 30 >"$D/drain.out" || rc=$?
assert_eq 0 "$rc" "reapctl drain ($(cat "$D/drain.out"))"
rc=0
ctl reports --dead >"$D/dead.out" || rc=$?
assert_eq 0 "$rc" "reapctl reports --dead"
assert_eq 0 "$(grep -c . "$D/dead.out" || true)" "dead letters after the requeue"
for x in "$id" "${ids[@]}"; do
  jq -e -s --arg c "$x" 'any(.[]; .answer == "200" and (.body | fromjson | .container_id) == $c)' \
    "$D/upstream.jsonl" >/dev/null || fail "report of ${x:0:12} not delivered after the requeue"
done
out=$(ctl audit)
assert_json "$out" '.done == true and (.tasks | type) == "number" and .leaked_tasks == 0' "reapctl audit"
rc=0
ctl status >"$D/status.json" || rc=$?
assert_eq 0 "$rc" "reapctl status on a ready reapd"
assert_json "$(cat "$D/status.json")" '.ready == true and .outbox.dead == 0 and .outbox.pending == 0' "status"
grep -q '"admin: 3 dead letters requeued"\|admin: 3 dead letters requeued' "$D/reapd.log" ||
  fail "the requeue is not in reapd's log"
# JSON log records carry the stable keys: the refusals name their report,
# the upstream's answer and its URL; a report made names its state.
jq -R -e -s --arg u "http://127.0.0.1:$port/reports" '[split("\n")[] | fromjson? | objects]
  | any(.[]; .report_id != null and .http_status == 400 and .url == $u and .level == "error")
    and any(.[]; .report_id != null and .state != null and (.msg | startswith("report ")))' \
  "$D/reapd.log" >/dev/null || fail "no JSON log record with report_id, http_status, url and state"

kill "$RECV_PID"
e2e_pass
