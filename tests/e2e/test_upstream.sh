#!/usr/bin/env bash
# At-least-once upstream delivery on a real engine. The upstream answers
# 503 for the whole churn (and reapd is killed -9 once meanwhile): every
# report waits in the durable outbox. Then the upstream comes back and
# every report is delivered, each with Idempotency-Key == report_id and
# the bearer token from the token file (never in reapd's log). A 400 turns
# one report into a dead letter, kept and visible on /v1/reports.
# Usage: bash tests/e2e/test_upstream.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"


engine_start
image_build

upstream_start 503
port=$UPSTREAM_PORT
ctl() { curl -sf "http://127.0.0.1:$port/_control?$1" >/dev/null; }

token="s3cr3t-$RANDOM$RANDOM"
printf '%s\n' "$token" >"$D/token"
chmod 600 "$D/token"
config=$(jq -n --arg url "http://127.0.0.1:$port/reports" --arg tf "$D/token" \
  '{upstream: {url: $url, token_file: $tf, timeout_ms: 2000,
               retry_base_ms: 100, retry_max_ms: 500,
               headers: {"X-Node-Pool": "e2e"}}}')
reapd_start "$REAPD_BIN" "$config"

ids=()
for code in 3 5 7 9; do
  ids+=("$(run_ctr --label reapd.managed=true "$IMAGE" sh -c "exit $code")")
done
for id in "${ids[@]}"; do wait_report "$id" 30 >/dev/null; done
# Upstream down the whole time: all four pending, durable across a crash.
pending() { curl -s "$REAPD_URL/metrics" | awk '$1 == "reapd_outbox_pending" {print $2}'; }
wait_until 10 "4 reports pending in the outbox" bash -c "[ \"\$(curl -s $REAPD_URL/metrics | awk '\$1 == \"reapd_outbox_pending\" {print \$2}')\" = 4 ]"
reapd_kill9
reapd_start "$REAPD_BIN" "$config"
assert_eq 4 "$(pending)" "pending after kill -9 and restart"

# The upstream rejects the next attempt with 400 (a dead letter), then
# accepts everything.
ctl "mode=400&times=1&then=200"
delivered() {
  local n=0 id rid
  for id in "${ids[@]}"; do
    rid=$(report_lines "$id" | jq -r -s '.[0].report_id')
    jq -e -s --arg k "$rid" 'any(.[]; .idempotency_key == $k and .answer == "200")' \
      "$D/upstream.jsonl" >/dev/null 2>&1 && n=$((n + 1))
  done
  [ "$n" -eq 3 ]
}
wait_until 30 "3 reports delivered and 1 dead letter" delivered

dead=$(api "/v1/reports?limit=10" | jq '[.reports[] | select(.delivery == "dead")] | length')
assert_eq 1 "$dead" "dead letters on /v1/reports"
okd=$(api "/v1/reports?limit=10" | jq '[.reports[] | select(.delivery == "delivered")] | length')
assert_eq 3 "$okd" "delivered reports on /v1/reports"
assert_eq 0 "$(pending)" "pending once the upstream is back"
metrics=$(curl -s "$REAPD_URL/metrics")
grep -q '^reapd_outbox_reports{state="dead"} 1$' <<<"$metrics" ||
  fail "the dead letter is not in the metrics"
# Attempts by answer, as the receiver saw them (since the restart: the
# counters are the process's).
code_count() { awk -v k="reapd_upstream_requests_total{code=\"$1\"}" '$1 == k {print $2}' <<<"$metrics"; }
assert_eq 1 "$(code_count 400)" "attempts answered 400"
assert_eq 3 "$(code_count 200)" "attempts answered 200"
attempts=$(awk '$1 == "reapd_upstream_request_duration_seconds_count" {print $2}' <<<"$metrics")
answered=$(grep -o '^reapd_upstream_requests_total{code="[0-9]*"} [0-9]*' <<<"$metrics" | awk '{n += $2} END {print n + 0}')
none=$(code_count none)
assert_eq "$attempts" "$((answered + none))" "attempts in the duration histogram and by answer"

# Every request: the contract's headers, the token, the body = a report.
jq -e -s --arg t "Bearer $token" 'all(.[];
    .method == "POST" and .path == "/reports"
    and ([.headers[] | select(.[0] | ascii_downcase == "authorization") | .[1]] == [$t])
    and ([.headers[] | select(.[0] | ascii_downcase == "content-type") | .[1]] == ["application/json"])
    and ([.headers[] | select(.[0] == "X-Node-Pool") | .[1]] == ["e2e"])
    and ((.body | fromjson | .report_id) == .idempotency_key))' \
  "$D/upstream.jsonl" >/dev/null || fail "a request broke the contract: $(head -c 600 "$D/upstream.jsonl")"
for id in "${ids[@]}"; do
  code=$(report_lines "$id" | jq -s '.[0].exit_code')
  jq -e -s --arg c "$id" --argjson code "$code" \
    'any(.[]; (.body | fromjson) as $r | $r.container_id == $c and $r.exit_code == $code)' \
    "$D/upstream.jsonl" >/dev/null || fail "no upstream request for ${id:0:12}"
done
grep -q "$token" "$D/reapd.log" && fail "the token appears in reapd's log"
log "upstream: $(wc -l <"$D/upstream.jsonl") requests for 4 reports"

kill "$RECV_PID"
e2e_pass
