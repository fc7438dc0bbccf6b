#!/usr/bin/env bash
# Nothing lost across kill -9: reapd is SIGKILLed at random moments while
# managed containers exit (some with slow task deletion) and restarted on
# the same state. Afterwards every container is removed and reported with
# its true exit code, and any report that appears twice carries the same
# report_id. CRASH_CONTAINERS and CRASH_KILLS scale it (the soak command
# in docs/state.md runs it bigger); the counts are printed.
# Usage: bash tests/e2e/test_crash.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

N=${CRASH_CONTAINERS:-16}
KILLS=${CRASH_KILLS:-6}

engine_start
image_build
slowrunc_delay 3
# A third of the containers wait 1.5 s after their exit before reapd
# removes them (a policy delay): cleanups long enough for kills to land
# on.
config=$(jq -cn --arg s "$(ctr_sock)" '{containerd: {socket: $s},
  policies: [
    {name: "delayed", match: {labels: {"reapd.managed": "true", "crash.delay": "true"}},
     action: "remove", delay_ms: 1500},
    {name: "managed", match: {labels: {"reapd.managed": "true"}}, action: "remove"}]}')
reapd_start "$REAPD_BIN" "$config"

# The containers start in the background while reapd is being killed:
# their exits and cleanups spread over the kills.
start_all() {
  local i code extra id
  for i in $(seq 1 "$N"); do
    code=$((RANDOM % 60))
    extra=()
    [ $((i % 3)) -eq 0 ] && extra=(--runtime slowrunc)
    [ $((i % 3)) -eq 1 ] && extra=(--label crash.delay=true)
    id=$(run_ctr "${extra[@]}" --label reapd.managed=true "$IMAGE" \
      sh -c "sleep $((RANDOM % 4)).$((RANDOM % 10)); exit $code")
    printf '%s %s\n' "$id" "$code" >>"$D/crash.started"
  done
}
# V, unmanaged, exits amid the churn: the engine keeps it, so what is
# gone of the others, reapd removed.
v=$(run_ctr "$IMAGE" sh -c 'sleep 2; exit 5')
: >"$D/crash.started"
start_all &
starter=$!

# in_cleanup: how many tracked containers are between their exit and
# their report (what a kill must land on to test anything).
in_cleanup() {
  api /v1/containers -m 2 2>/dev/null |
    jq '[.containers[] | select(.state != "running" and .state != "kept")] | length' \
      2>/dev/null || echo 0
}
kills=0 kills_in_cleanup=0
for _ in $(seq 1 "$KILLS"); do
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
  # A kill at a random moment, but one when a cleanup is in progress if
  # there is one within 8 s of the last container started: on a loaded
  # host the containers start slowly (8 e2e tests side by side; 16 took
  # 29 s once), and a fixed 8 s window per kill saw only 2 of 6 kills land
  # on a cleanup, the kills done before most containers had exited.
  deadline=$(($(now_ms) + 8000))
  cap=$(($(now_ms) + 90000))
  while [ "$(in_cleanup)" = 0 ]; do
    now=$(now_ms)
    kill -0 "$starter" 2>/dev/null && deadline=$((now + 8000))
    [ "$now" -lt "$deadline" ] && [ "$now" -lt "$cap" ] || break
    sleep 0.05
  done
  busy=$(in_cleanup)
  reapd_kill9
  kills=$((kills + 1))
  [ "$busy" = 0 ] || kills_in_cleanup=$((kills_in_cleanup + 1))
  reapd_start "$REAPD_BIN" "$config"
done
log "reapd killed -9 $kills times, $kills_in_cleanup of them during a cleanup"
wait "$starter" || fail "starting the containers failed"
declare -A want
ids=()
while read -r id code; do
  want[$id]=$code
  ids+=("$id")
done <"$D/crash.started"
[ "${#ids[@]}" -eq "$N" ] || fail "${#ids[@]} of $N containers started"
log "$N containers started, $(( N / 3 )) with a 3 s runc delete, $(( (N + 2) / 3 )) with a 1.5 s policy delay"
# Not vacuous: kills landed on cleanups in progress.
[ "$kills_in_cleanup" -ge $((KILLS / 2)) ] ||
  fail "only $kills_in_cleanup of $kills kills landed during a cleanup"

for id in "${ids[@]}"; do
  wait_report "$id" 120 >/dev/null
done

dups=0
for id in "${ids[@]}"; do
  lines=$(report_lines "$id")
  n=$(wc -l <<<"$lines")
  nid=$(jq -r .report_id <<<"$lines" | sort -u | wc -l)
  [ "$nid" -eq 1 ] || fail "${id:0:12}: $n reports with $nid different report_ids"
  dups=$((dups + n - 1))
  code=$(jq -r .exit_code <<<"$lines" | sort -u)
  [ "$code" = "${want[$id]}" ] || fail "${id:0:12}: exit_code $code, want ${want[$id]}"
  jq -e '.removed == true' <<<"${lines%%$'\n'*}" >/dev/null ||
    fail "${id:0:12}: not removed: $lines"
  # The die event's code survives the crashes too: kept in the record, or
  # replayed from the checkpoint. Without either it would be null.
  ecode=$(jq -r .engine_exit_code <<<"$lines" | sort -u)
  [ "$ecode" = "${want[$id]}" ] ||
    fail "${id:0:12}: engine_exit_code $ecode, want ${want[$id]}"
  assert_gone "$id"
  assert_no_task "$id" 30
done
assert_eq "exited 5" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$v")" \
  "V, unmanaged, after the churn"
assert_no_report "$v"
# A kill may repeat the report being made (its line written, the record
# not yet forgotten): at most one line per kill.
[ "$dups" -le "$kills" ] || fail "$dups duplicate report lines for $kills kills"
# Every line of the journal is a whole report (a torn line is cut at the
# next start): none is skipped as unreadable.
jq -eR 'fromjson | .report_id | test("^[0-9a-f]{32}$")' "$(REPORTS)" >/dev/null ||
  fail "reports.jsonl holds a line that is not a report"
# The store agrees with the file: the same report ids, each once.
reapd_stop
command -v sqlite3 >/dev/null || fail "sqlite3 not found (scripts/deps installs it)"
stored=$(sqlite3 "$D/state/reapd.db" 'select report_id from reports order by 1') ||
  fail "sqlite3 could not read the store"
journal=$(jq -r .report_id "$(REPORTS)" | sort -u)
[ "$stored" = "$journal" ] ||
  fail "store and reports.jsonl differ: $(diff <(echo "$stored") <(echo "$journal") | head -5)"
[ "$(wc -l <<<"$stored")" -eq "$N" ] ||
  fail "$(wc -l <<<"$stored") reports stored for $N containers"
log "crash: containers=$N kills=$kills in_cleanup=$kills_in_cleanup duplicate_lines=$dups stored_reports=$(wc -l <<<"$stored")"
echo "crash: containers=$N kills=$kills kills_in_cleanup=$kills_in_cleanup duplicate_lines=$dups"

e2e_pass
