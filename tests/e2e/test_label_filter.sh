#!/usr/bin/env bash
# The operator's label filter on a real engine. reapd keeps the labels
# whose keys match labels.allow and no labels.deny glob, and always those
# a policy names (reapd.managed, though "reapd.*" is denied). A container
# carries a secret under a denied key (com.example.db-password), a label
# no allow glob matches (other) and an allowed one (team): one created
# while reapd was down (taken in by the relist), one started after (by
# its events). The secret and the unallowed label are in none of: the
# reports, the read API on the admin socket (/v1/containers/{id}/report,
# /v1/reports, /v1/containers), reports.jsonl, the state database's
# files, the upstream's request bodies, reapd's log (at debug). The
# allowed label is in each. Nothing filtered is flagged labels_truncated.
# Usage: bash tests/e2e/test_label_filter.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"


engine_start
image_build

upstream_start
port=$UPSTREAM_PORT

# admin GET PATH: the read API over the admin socket.
admin() {
  curl -sf --unix-socket "$D/admin.sock" "http://reapd$1"
}

secret="hunter2-$$-$RANDOM"
labels=(--label reapd.managed=true --label team=e2e
  --label "com.example.db-password=$secret" --label other=not-allowed)
config=$(jq -n --arg url "http://127.0.0.1:$port/reports" '
  {upstream: {url: $url, timeout_ms: 2000, retry_base_ms: 100},
   labels: {allow: ["team", "com.example.*", "reapd.*"],
            deny: ["*password*", "reapd.*"]}}')

# Created while reapd is not running: the relist takes it in.
early=$(run_ctr --name "e2e-lf-early-$$" "${labels[@]}" "$IMAGE" sh -c 'sleep 4; exit 3')
# The engine has the secret: whatever lacks it below, reapd left out.
assert_eq "$secret" "$(dk inspect -f '{{index .Config.Labels "com.example.db-password"}}' "$early")" \
  "the engine's label"
reapd_start "$REAPD_BIN" "$config"
late=$(run_ctr --name "e2e-lf-late-$$" "${labels[@]}" "$IMAGE" sh -c 'exit 5')
log "early ${early:0:12}, late ${late:0:12}"

for id in "$early" "$late"; do
  line=$(wait_report "$id" 30)
  assert_report_basic "$line" "$id"
  assert_json "$line" '.labels["reapd.managed"] == "true"' \
    "the label a policy names, kept though denied"
  assert_json "$line" '.labels.team == "e2e"' "the allowed label"
  assert_json "$line" '.labels | has("com.example.db-password") | not' \
    "no denied label"
  assert_json "$line" '.labels | has("other") | not' "no label outside allow"
  assert_json "$line" '.anomalies | index("labels_truncated") | not' \
    "nothing filtered called truncated"
  # The read API on the admin socket: the report, the reports list.
  rep=$(admin "/v1/containers/$id/report") || fail "no report for ${id:0:12} on the admin socket"
  assert_json "$rep" '.labels.team == "e2e" and (.labels | has("com.example.db-password") | not)' \
    "the report on /v1/containers/{id}/report"
done
assert_json "$(report_lines "$early")" '.exit_code == 3' "early exit code"
assert_json "$(report_lines "$late")" '.exit_code == 5' "late exit code"

list=$(admin "/v1/reports?limit=10") || fail "no /v1/reports on the admin socket"
assert_json "$list" '[.reports[] | .. | objects | select(has("labels")) | .labels.team] | length >= 2' \
  "the reports on /v1/reports carry the allowed label"
ctrs=$(admin "/v1/containers") || fail "no /v1/containers on the admin socket"

# Delivered upstream, both.
wait_until 30 "both reports delivered upstream" bash -c \
  "[ \"\$(jq -s '[.[] | select(.answer == \"200\")] | length' '$D/upstream.jsonl')\" -ge 2 ]"
jq -e -s 'all(.[]; (.body | fromjson | .labels.team) == "e2e")' "$D/upstream.jsonl" >/dev/null ||
  fail "an upstream body lacks the allowed label: $(head -c 600 "$D/upstream.jsonl")"

reapd_stop
# The secret and the label no glob allows, anywhere reapd wrote or
# served: the reports, the API's answers, the upstream's bodies, the
# state directory (the database and its WAL, reports.jsonl) and the log.
for where in "$list" "$ctrs"; do
  ! grep -qF -e "$secret" -e db-password -e not-allowed <<<"$where" ||
    fail "the read API shows a filtered label: $(head -c 600 <<<"$where")"
done
if grep -rqaF -e "$secret" -e db-password -e not-allowed "$D/state" "$D/upstream.jsonl" "$D/reapd.log"; then
  fail "a filtered label was written: $(grep -rlaF -e "$secret" -e db-password -e not-allowed "$D/state" "$D/upstream.jsonl" "$D/reapd.log")"
fi
# ... where the allowed one is (the search finds what is there).
grep -qaF '"team"' "$(REPORTS)" || fail "reports.jsonl lacks the allowed label"
grep -rqaF 'e2e-lf-late' "$D/state" || fail "the state directory holds no report"
grep -qaF "e2e-lf-late-$$" "$D/reapd.log" || fail "the log names no container"
assert_gone "$early"
assert_gone "$late"
kill "$RECV_PID"
e2e_pass
