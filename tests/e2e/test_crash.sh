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
config="{\"containerd\": {\"socket\": \"$(ctr_sock)\"}}"
reapd_start "$REAPD_BIN" "$config"

declare -A want
ids=()
for i in $(seq 1 "$N"); do
  code=$((RANDOM % 60))
  runtime=()
  [ $((i % 3)) -eq 0 ] && runtime=(--runtime slowrunc)
  id=$(run_ctr "${runtime[@]}" --label reapd.managed=true "$IMAGE" \
    sh -c "sleep $((RANDOM % 4)).$((RANDOM % 10)); exit $code")
  want[$id]=$code
  ids+=("$id")
done
log "$N containers started, $(( N / 3 )) with a 3 s runc delete"

kills=0
for _ in $(seq 1 "$KILLS"); do
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
  sleep $((RANDOM % 2))
  reapd_kill9
  kills=$((kills + 1))
  reapd_start "$REAPD_BIN" "$config"
done
log "reapd killed -9 $kills times"

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
# The store agrees with the file: every report is in the outbox once.
stored=$(sqlite3 "$D/state/reapd.db" 'select count(*) from reports' 2>/dev/null || echo "?")
log "crash: containers=$N kills=$kills duplicate_lines=$dups stored_reports=$stored"
echo "crash: containers=$N kills=$kills duplicate_lines=$dups"

e2e_pass
