#!/usr/bin/env bash
# The report contract: docs/report.schema.json is a valid JSON Schema
# 2020-12; it accepts a report as reapd writes it (every field, each
# nullable one both ways) and rejects each breakage of one (so the check
# the end-to-end tests make of every real report, tests/e2e/check_reports.py,
# cannot pass by accepting anything); and a running reapd serves exactly
# that file at /v1/schema/report.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin schema "$@"
SCHEMA=$SRC/docs/report.schema.json
CHECK=$SRC/tests/e2e/check_reports.py
[ -f "$SCHEMA" ] || fail "no $SCHEMA"

# A report as reapd writes it (from a real engine's run), and one with
# every nullable field null and every anomaly.
cat >"$T/good.jsonl" <<'JSON'
{"report_id":"2d87bccba60b6382de7e0835ebfc2fa3","schema_version":1,"node":"e2e","container_id":"942af0bfbb5e756d4c82635f7b97d304cc8a2acfa6226d803dfce4e5888387fb","name":"determined_wing","image":"reapd-test:1","labels":{"reapd.managed":"true"},"policy":"managed","action":"remove","exit_code":24,"exit_code_source":"containerd","engine_exit_code":24,"oom_killed":false,"started_at":"2026-12-04T14:17:43.819934422Z","finished_at":"2026-12-04T14:17:44.125998503Z","removed":true,"task_deleted":true,"cleanup_ms":269,"delete_attempts":1,"anomalies":[],"removed_by":"reapd","reported_at":"2026-12-04T14:17:44.394Z"}
{"report_id":"0123456789abcdef0123456789abcdef","schema_version":1,"node":"n","container_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","name":null,"image":null,"labels":{},"policy":"default","action":"keep","exit_code":null,"exit_code_source":null,"engine_exit_code":null,"oom_killed":true,"started_at":null,"finished_at":null,"removed":false,"task_deleted":null,"cleanup_ms":0,"delete_attempts":0,"anomalies":["engine_exit_code_mismatch","cleanup_slow","cleanup_gave_up","delete_retried","exit_code_unknown","task_delete_timeout","task_reaped","labels_truncated","metadata_truncated","exited_while_engine_down"],"removed_by":null,"reported_at":"2026-12-04T14:17:44.394Z"}
JSON
python3 "$CHECK" "$SCHEMA" "$T/good.jsonl" >"$T/out" 2>&1 || fail "good reports refused: $(cat "$T/out")"
grep -q '^2 report(s) checked' "$T/out" || fail "not 2 reports checked: $(cat "$T/out")"
ok "the schema is valid JSON Schema 2020-12 and takes reapd's reports"

# Each breakage of the first report must be refused.
breakages=(
  'del(.report_id)' '.report_id = "XYZ"' '.schema_version = 2'
  'del(.schema_version)' '.container_id = "abc"' '.exit_code = "24"'
  '.exit_code = 1.5' '.exit_code_source = "docker"' '.removed = "yes"'
  '.task_deleted = 1' '.cleanup_ms = -1' '.delete_attempts = null'
  '.anomalies = ["bogus"]' '.anomalies = ["task_reaped","task_reaped"]'
  '.labels = {"k": 1}' '.removed_by = "someone"' '.action = "ignore"'
  '.reported_at = "yesterday"' '.started_at = "2026-12-04 14:17:43"'
  'del(.anomalies)' '.oom_killed = null' '.node = ""'
)
# One breakage per line; each line must have a problem of its own.
for b in "${breakages[@]}"; do
  head -1 "$T/good.jsonl" | jq -c "$b"
done >"$T/bad.jsonl"
if python3 "$CHECK" "$SCHEMA" "$T/bad.jsonl" >"$T/out" 2>&1; then
  fail "the schema accepts every breakage: $(cat "$T/out")"
fi
for i in "${!breakages[@]}"; do
  grep -q "bad.jsonl:$((i + 1)):" "$T/out" ||
    fail "the schema accepts a report with ${breakages[$i]}"
done
ok "the schema refuses each of ${#breakages[@]} breakages"
printf '{"report_id":' >"$T/torn.jsonl"
python3 "$CHECK" "$SCHEMA" "$T/torn.jsonl" >"$T/out" 2>&1 || fail "a torn last line was taken for a report"
printf '{"report_id":\n' >"$T/notjson.jsonl"
if python3 "$CHECK" "$SCHEMA" "$T/notjson.jsonl" >"$T/out" 2>&1; then fail "a line that is not JSON passed"; fi
ok "a torn last line is skipped; a whole line that is not JSON is refused"

# Served by reapd, byte for byte.
start_reapd_no_engine
# On the admin socket: no token is configured, so the status listener
# keeps the read API to itself.
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/schema/report")" = 401 ] ||
  fail "GET /v1/schema/report on the status listener without a token: not 401"
curl -sf -D "$T/headers" --unix-socket "$T/admin.sock" http://localhost/v1/schema/report -o "$T/served" ||
  fail "GET /v1/schema/report"
cmp -s "$T/served" "$SCHEMA" || fail "/v1/schema/report differs from docs/report.schema.json"
grep -qi '^content-type: application/schema+json' "$T/headers" ||
  fail "Content-Type: $(grep -i content-type "$T/headers")"
curl -s -I --unix-socket "$T/admin.sock" http://localhost/v1/schema/report -o "$T/head" || fail "HEAD"
grep -qi "^content-length: $(wc -c <"$SCHEMA")" "$T/head" || fail "HEAD: $(cat "$T/head")"
ok "GET /v1/schema/report serves docs/report.schema.json ($(wc -c <"$SCHEMA") bytes, application/schema+json)"
kill -TERM "$pid"
wait "$pid" || fail "reapd exited with $? on SIGTERM"
pid=""
echo "$n passed, 0 failed"
