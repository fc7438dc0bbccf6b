#!/usr/bin/env bash
# The chaos soak's books (tests/soak/books.sh, `tests/soak/run
# --check-books DIR`) on crafted directories: each case one way a soak
# could pass on nothing, or fail on nothing, and the verdict it must get.
# No engine, no root; a few seconds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUN=$HERE/run
T=$(mktemp -d /tmp/soak-books.XXXXXX)
trap '[ -n "${SOAK_BOOKS_KEEP:-}" ] || rm -rf "$T"' EXIT
export LC_ALL=C

# The churn lasts 120 s from CS: a floor of 10 exits (5 a minute).
CS=1700000000000
FAILS=0
CASES=0
DIR=""

id_of() { printf '%064x\n' "$1"; }
at() { echo $((CS + $1)); }

# fresh NAME: a new directory with the churn's span and clean probes.
fresh() {
  DIR=$T/$1
  mkdir -p "$DIR/probe"
  : >"$DIR/account.tsv"
  : >"$DIR/faults.tsv"
  : >"$DIR/upstream.jsonl"
  : >"$DIR/probe/tasks"
  : >"$DIR/probe/ctrs"
  : >"$DIR/probe/docker"
  printf 'churn_start_ms=%s\nchurn_end_ms=%s\nengine=crafted\n' "$CS" "$(at 120000)" >"$DIR/meta"
}
# started N KIND WANT [failed]: container N, docker run issued at N*10 s,
# returned 500 ms later.
started() {
  local st=${4:-ok} id
  printf -v id '%064x' "$1"
  [ "$st" = ok ] || id=-
  printf 'soak-1-%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$id" "$2" "$3" \
    $((CS + $1 * 10000)) $((CS + $1 * 10000 + 500)) "$st" >>"$DIR/account.tsv"
}
# report N CODE [ANOMALIES] [ID] [NAME] [REPORT_ID]: one delivered report.
report() {
  local anomalies=${3:-} id=${4:-} name=${5:-soak-1-$1}
  [ -n "$id" ] || printf -v id '%064x' "$1"
  local rid=${6:-r$1} an=""
  # As the receiver records it: the body a JSON string (jq is too slow to
  # call for each).
  [ -z "$anomalies" ] || an="\\\"${anomalies//,/\\\",\\\"}\\\""
  printf '{"answer":"200","path":"/reports","idempotency_key":"%s","body":"{\\"container_id\\":\\"%s\\",\\"name\\":\\"%s\\",\\"report_id\\":\\"%s\\",\\"exit_code\\":%s,\\"anomalies\\":[%s],\\"started_at\\":\\"2023-11-14T22:13:20Z\\",\\"finished_at\\":\\"2023-11-14T22:13:21Z\\"}"}\n' \
    "$rid" "$id" "$name" "$rid" "$2" "$an" >>"$DIR/upstream.jsonl"
}
# fault KIND START END [VICTIM]: ms from CS.
fault() {
  printf '%s\t%s\t%s\t%s\n' "$1" $((CS + $2)) $((CS + $3)) "${4:--}" >>"$DIR/faults.tsv"
}
# base N: N quick containers, each reported with its code.
base() {
  local i
  for ((i = 1; i <= $1; i++)); do
    started "$i" quick "$i"
    report "$i" "$i"
  done
}

# verdict WHAT RC PATTERN...: the books of $DIR exit RC and print every
# PATTERN (grep -E, stdout and stderr together).
verdict() {
  local what=$1 want=$2 rc=0 p
  shift 2
  CASES=$((CASES + 1))
  bash "$RUN" --check-books "$DIR" >"$DIR.out" 2>&1 || rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, want $want" >&2
    sed 's/^/    /' "$DIR.out" >&2
    FAILS=$((FAILS + 1))
    return 0
  fi
  for p in "$@"; do
    if ! grep -Eq -- "$p" "$DIR.out"; then
      echo "FAIL: $what: no line matches '$p'" >&2
      sed 's/^/    /' "$DIR.out" >&2
      FAILS=$((FAILS + 1))
      return 0
    fi
  done
  # The soak_ line is the last, with every field (when there are books).
  if [ -f "$DIR/account.tsv" ] && ! tail -n 1 "$DIR.out" | grep -Eq '^soak_exits=[0-9]+ soak_reports_lost=[0-9]+ soak_wrong_codes=[0-9]+ soak_leaked_tasks=[0-9]+ soak_leaked_containers=[0-9]+ soak_duplicate_deliveries=[0-9]+ reapd_kills=[0-9]+ dockerd_restarts=[0-9]+ soak_unknown=[0-9]+ soak_unexplained=[0-9]+$'; then
    echo "FAIL: $what: last line: $(tail -n 1 "$DIR.out")" >&2
    FAILS=$((FAILS + 1))
    return 0
  fi
  echo "ok: $what"
}

# ---- the floor of exits

fresh floor
base 10
verdict "exits at the floor (10 in 120 s)" 0 'exits 10, floor 10' \
  'soak_exits=10 soak_reports_lost=0 soak_wrong_codes=0 .* soak_unknown=0 soak_unexplained=0$'

fresh floor_minus_1
base 9
verdict "exits at the floor - 1" 1 'too few exits \(9 < 10\)' 'soak_exit_floor=10'

# 24 s of dockerd down: 96 s up, a floor of 8; a containerd kill inside
# that outage does not count twice.
fresh floor_outage
base 8
fault dockerd_restarts 30000 54000
fault containerd_kills 40000 50000
verdict "floor less an outage, at the floor" 0 'floor 8 .*over 96 s'
fresh floor_outage_minus_1
base 7
fault dockerd_restarts 30000 54000
fault containerd_kills 40000 50000
verdict "floor less an outage, at the floor - 1" 1 'too few exits \(7 < 8\)'

# ---- failed starts

fresh all_failed
for i in $(seq 1 10); do started "$i" quick "?" failed; done
verdict "every start failed" 1 'too few exits \(0 < 10\)' \
  '10 starts failed outside the fault windows \(at most 2\)' '^soak_exits=0 '

fresh failed_2_outside
base 10
started 11 quick "?" failed
started 12 quick "?" failed
verdict "2 starts failed outside the fault windows (the bound)" 0 \
  'soak_failed_starts=2 soak_failed_starts_unexpected=2'

fresh failed_3_outside
base 10
started 11 quick "?" failed
started 12 quick "?" failed
started 13 quick "?" failed
verdict "3 starts failed outside the fault windows" 1 \
  '3 starts failed outside the fault windows \(at most 2\)' \
  'start failed outside the fault windows: name=soak-1-13'

# Issued at 110..130 s, dockerd down 109..135 s (after the churn's end:
# no floor less).
fresh failed_in_outage
base 10
started 11 quick "?" failed
started 12 quick "?" failed
started 13 quick "?" failed
fault dockerd_restarts 109000 135000
verdict "3 starts failed while dockerd was down" 0 \
  'soak_failed_starts=3 soak_failed_starts_unexpected=0'

# A failed start the engine created and reapd reported: matched by its
# name, whatever its id and code.
fresh failed_reported
base 10
started 11 quick "?" failed
report 11 128 "" "$(id_of 99)" soak-1-11
verdict "a failed start reported under its name" 0 'soak_unaccounted_reports=0' \
  'soak_unexplained=0$'

# ---- probes

fresh probe_failed
base 10
rm "$DIR/probe/tasks"
echo "probe tasks failed 5 times (ctr task ls -q): connection refused" >"$DIR/probe/tasks.failed"
verdict "a leak probe failed" 1 'probe tasks failed 5 times' '1 probes failed'

fresh probe_never_ran
base 10
rm "$DIR/probe/docker"
verdict "a leak probe never ran" 1 'probe docker never ran'

fresh probe_running_failed
base 10
echo "probe running failed 5 times (docker ps): Cannot connect" >"$DIR/probe/running.failed"
verdict "the drain's probe failed" 1 'probe running failed'

# soak_probe itself: tried again while it fails, then it fails.
(
  # shellcheck source=books.sh
  source "$HERE/books.sh"
  export PROBE_PAUSE=0
  # shellcheck disable=SC2317  # called through soak_probe
  flaky() { # fails until its third call
    local n
    n=$(($(cat "$T/flaky.n" 2>/dev/null || echo 0) + 1))
    echo "$n" >"$T/flaky.n"
    if [ "$n" -lt 3 ]; then echo "busy" >&2; return 1; fi
    id_of 2
  }
  # shellcheck disable=SC2317
  broken() {
    echo "x" >>"$T/broken.n"
    echo "Cannot connect to the Docker daemon" >&2
    return 1
  }
  fresh probe_flaky
  base 10
  soak_probe "$DIR/probe" tasks flaky || { echo "FAIL: soak_probe gave up on a probe that worked at its third try" >&2; exit 1; }
  [ "$(cat "$T/flaky.n")" = 3 ] || { echo "FAIL: soak_probe: $(cat "$T/flaky.n") tries, want 3" >&2; exit 1; }
  [ ! -e "$DIR/probe/tasks.failed" ] || { echo "FAIL: soak_probe left a .failed" >&2; exit 1; }
  echo "ok: soak_probe succeeds at the third try"
  if soak_probe "$DIR/probe" docker broken; then
    echo "FAIL: soak_probe passed a tool that always fails" >&2
    exit 1
  fi
  [ "$(wc -l <"$T/broken.n")" = 5 ] || { echo "FAIL: soak_probe: $(wc -l <"$T/broken.n") tries, want 5" >&2; exit 1; }
  [ ! -e "$DIR/probe/docker" ] || { echo "FAIL: a failed probe left its output" >&2; exit 1; }
  echo "ok: soak_probe fails after 5 tries"
) || FAILS=$((FAILS + 1))
DIR=$T/probe_flaky
verdict "the books of soak_probe's two probes" 1 'probe docker failed 5 times .*Cannot connect' \
  'leaked \(tasks\): '"$(id_of 2)"' soak-1-2 quick 2' 'soak_leaked_tasks=1 '

# ---- leaks

fresh leak_failed_start
base 10
started 11 quick "?" failed
printf 'soak-1-11\t%s\n' "$(id_of 11)" >>"$DIR/ids.tsv"
id_of 11 >"$DIR/probe/docker"
id_of 77 >>"$DIR/probe/docker"
verdict "a failed start still in the engine" 1 'leaked \(docker\): '"$(id_of 11)" \
  'soak_leaked_containers=1 '

# ---- codes

fresh unknown_no_fault
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 4 5 6 7 8 9 10; do report "$i" "$i"; done
report 3 null exit_code_unknown,task_reaped
fault reapd_kills 30500 31000
verdict "an unknown under a reapd kill only" 1 \
  "unexplained: id=$(id_of 3) name=soak-1-3 kind=quick want=3 got=null anomalies=\[exit_code_unknown,task_reaped\].*window: issued \+30.0s returned \+30.5s latest exit \+34.5s.*faults near: reapd_kills@\+30.5s" \
  'soak_codes_unknown=1 ' 'soak_unknown=1 soak_unexplained=1$'

# Container 3's window starts at 30 s; a containerd window explains it up
# to 5 s after its end.
fresh unknown_containerd
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 4 5 6 7 8 9 10; do report "$i" "$i"; done
report 3 null exit_code_unknown
fault containerd_kills 20000 25000
verdict "an unknown under a containerd kill" 0 'soak_codes_lost_in_restarts=1 ' \
  'soak_unknown=1 soak_unexplained=0$'
fresh unknown_containerd_before
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 4 5 6 7 8 9 10; do report "$i" "$i"; done
report 3 null exit_code_unknown
fault containerd_kills 20000 24999
verdict "an unknown after a containerd kill's window" 1 'soak_unknown=1 soak_unexplained=1$'

fresh wrong_flagged_no_outage
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 255 exited_while_engine_down,engine_exit_code_mismatch
fault reapd_kills 40000 41000
verdict "a wrong 255 flagged by reapd, no soak outage" 1 \
  "unexplained: id=$(id_of 4) .*want=4 got=255" \
  'soak_wrong_codes=1 .*soak_unexplained=1$'

fresh wrong_flagged_outage
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 255 exited_while_engine_down
fault dockerd_restarts 42000 46000
verdict "a wrong 255 flagged, in a dockerd outage" 0 \
  'soak_codes_lost_by_engine=1 soak_codes_lost_unflagged=0 ' 'soak_wrong_codes=0 '

fresh wrong_unflagged_outage
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 255
fault dockerd_restarts 42000 46000
verdict "a wrong 255 unflagged, in a dockerd outage" 0 \
  'soak_codes_lost_by_engine=1 soak_codes_lost_unflagged=1 '

# The task containerd lost (docs/engines.md, task_lost): a wrong 0 with
# no flag is counted, an unknown with task_lost is not.
fresh wrong_unflagged_containerd
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 0
fault containerd_kills 42000 46000
verdict "a wrong 0 unflagged, under a containerd kill" 0 \
  'soak_codes_lost_unflagged=1 soak_codes_lost_in_restarts=1 '
fresh lost_task_flagged
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 null exit_code_unknown,task_lost
fault dockerd_restarts 42000 46000
verdict "a lost task's unknown, in a dockerd outage" 0 \
  'soak_codes_lost_by_engine=1 soak_codes_lost_unflagged=0 '

# A slow delete's window runs 40 s past its exit (returned at 40.5 s,
# latest exit 44.5 s, cleanup until 89.5 s; a fault window is widened by
# 1 s before it).
fresh slow_outage_in
base 10
started 4 slow 4
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
sed -i '/^soak-1-4\t[0-9a-f]*\tquick/d' "$DIR/account.tsv"
report 4 255
fault dockerd_restarts 90500 95000
verdict "a slow delete's wrong code, an outage at the end of its cleanup" 0 \
  'soak_codes_lost_by_engine=1 '
fresh slow_outage_out
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 5 6 7 8 9 10; do report "$i" "$i"; done
report 4 255
fault dockerd_restarts 90500 95000
verdict "a quick exit's wrong code, the same outage after its cleanup" 1 \
  'soak_wrong_codes=1 '

# A SIGKILL's window ends when the soak's kill succeeded.
fresh sigkill_killed
base 10
sed -i '/^soak-1-6\t/d' "$DIR/account.tsv"
started 6 sigkill 137
: >"$DIR/upstream.jsonl"
for i in 1 2 3 4 5 7 8 9 10; do report "$i" "$i"; done
report 6 null exit_code_unknown
printf 'soak-1-6\t%s\n' "$(at 61000)" >"$DIR/after.tsv"
fault containerd_kills 80000 82000
verdict "a SIGKILL's unknown, a containerd kill after its kill" 1 \
  'kind=sigkill want=137 got=null.*latest exit \+63.0s' 'soak_unexplained=1$'
rm "$DIR/after.tsv"
verdict "a SIGKILL's unknown, its kill never landed, a containerd kill" 0 \
  'soak_codes_lost_in_restarts=1 '
id_of 6 >"$DIR/drained"
: >"$DIR/upstream.jsonl"
for i in 1 2 3 4 5 7 8 9 10; do report "$i" "$i"; done
report 6 137
: >"$DIR/faults.tsv"
verdict "a container the drain killed: 137" 0 'soak_unexplained=0$'
: >"$DIR/upstream.jsonl"
for i in 1 2 3 4 5 7 8 9 10; do report "$i" "$i"; done
report 6 0
verdict "a container the drain killed, reported 0" 1 'soak_wrong_codes=1 '

fresh shim_victim
base 10
started 11 shimkill 137
report 11 null exit_code_unknown
fault shim_kills 111000 111000 soak-1-11
verdict "an unknown of a container whose shim was killed" 0 \
  'soak_codes_unknowable=1 ' 'soak_unknown=1 soak_unexplained=0$'
fresh shim_other
base 10
started 11 shimkill 137
report 11 null exit_code_unknown
fault shim_kills 111000 111000 soak-1-12
verdict "an unknown; another container's shim was killed" 1 'soak_unexplained=1$'

# ---- reports the account does not hold, lost, split, duplicated

fresh unaccounted
base 10
report 12 0 "" "$(id_of 12)" someone-else
verdict "a report of a container the soak never started" 1 \
  "unaccounted report: id=$(id_of 12) name=someone-else" \
  'soak_unaccounted_reports=1 ' 'soak_unexplained=1$'

fresh lost
base 10
: >"$DIR/upstream.jsonl"
for i in 1 2 3 4 6 7 8 9 10; do report "$i" "$i"; done
verdict "a container never reported" 1 "lost: id=$(id_of 5) name=soak-1-5" \
  '^soak_exits=10 soak_reports_lost=1 '

# The one loss the fault log explains (docs/state.md, "Disk full"): a
# --rm container whose exit came while the disk was full, a dockerd
# restart after it, reapd killed before the disk freed. Each of the three
# missing, or the kill too late, or a kind the engine keeps: lost.
lost_disk() { # NAME KIND DISK_END KILL_AT RESTART_AT
  fresh "$1"
  base 10
  : >"$DIR/upstream.jsonl"
  for i in 1 2 3 4 6 7 8 9 10; do report "$i" "$i"; done
  started 11 "$2" 11
  fault disk_full 105000 "$3"
  [ "$4" = - ] || fault reapd_kills "$4" $(($4 + 300))
  [ "$5" = - ] || fault dockerd_restarts "$5" $(($5 + 20000))
}
lost_disk lost_disk rm 140000 141000 112000
verdict "a --rm exit lost to disk full, dockerd restart and a kill" 1 \
  'soak_reports_lost_to_disk_full=1 ' "lost, explained .*name=soak-1-11" \
  "lost: id=$(id_of 5) name=soak-1-5" '^soak_exits=11 soak_reports_lost=1 '
lost_disk lost_disk_kill_2s_after rm 140000 142000 112000
verdict "the kill 2 s after the disk freed" 1 'soak_reports_lost_to_disk_full=1 ' \
  '^soak_exits=11 soak_reports_lost=1 '
lost_disk lost_disk_kill_late rm 140000 142001 112000
verdict "the kill 2,001 ms after the disk freed: the store had its chance" 1 \
  'soak_reports_lost_to_disk_full=0 ' '^soak_exits=11 soak_reports_lost=2 '
lost_disk lost_disk_no_restart rm 140000 141000 -
verdict "no dockerd restart: the engine replays the die" 1 \
  'soak_reports_lost_to_disk_full=0 ' '^soak_exits=11 soak_reports_lost=2 '
lost_disk lost_disk_no_kill rm 140000 - 112000
verdict "no kill: reapd stores it when the disk frees" 1 \
  'soak_reports_lost_to_disk_full=0 ' '^soak_exits=11 soak_reports_lost=2 '
lost_disk lost_disk_restart_after_kill rm 140000 141000 141500
verdict "the dockerd restart after the kill" 1 \
  'soak_reports_lost_to_disk_full=0 ' '^soak_exits=11 soak_reports_lost=2 '
lost_disk lost_disk_kept_kind quick 140000 141000 112000
verdict "a container the engine keeps: the relist finds it" 1 \
  'soak_reports_lost_to_disk_full=0 ' '^soak_exits=11 soak_reports_lost=2 '

# A container the engine lost track of (running for dockerd after the
# drain, its process gone): neither lost nor leaked by reapd, counted on
# its own; only the ids the drain saw so; one reported is not counted.
engine_lost() { # NAME
  fresh "$1"
  base 10
  started 11 restart 3
  id_of 11 >>"$DIR/probe/docker"
  id_of 11 >>"$DIR/probe/ctrs"
}
engine_lost engine_lost
id_of 11 >"$DIR/engine_lost"
verdict "a container the engine lost track of" 0 \
  "lost by the engine .*id=$(id_of 11) name=soak-1-11" \
  'soak_lost_by_engine=1 soak_leaked_engine_containers=0 ' \
  '^soak_exits=11 soak_reports_lost=0 soak_wrong_codes=0 soak_leaked_tasks=0 soak_leaked_containers=0 '
engine_lost engine_lost_not_seen
verdict "the same container, the drain did not see it lost" 1 \
  "lost: id=$(id_of 11) name=soak-1-11" 'soak_lost_by_engine=0 soak_leaked_engine_containers=1 ' \
  '^soak_exits=11 soak_reports_lost=1 soak_wrong_codes=0 soak_leaked_tasks=0 soak_leaked_containers=2 '
engine_lost engine_lost_other
id_of 12 >"$DIR/engine_lost"
verdict "another container lost by the engine explains nothing" 1 \
  'soak_lost_by_engine=0 ' '^soak_exits=11 soak_reports_lost=1 '
engine_lost engine_lost_reported
id_of 11 >"$DIR/engine_lost"
report 11 3
verdict "lost by the engine but reported: judged as any report" 0 \
  'soak_lost_by_engine=0 ' '^soak_exits=11 soak_reports_lost=0 .* soak_unexplained=0$'

fresh split
base 10
report 7 7 "" "" "" r7bis
verdict "one exit under two report ids" 1 'one exit under 2 report ids' \
  'soak_split_reports=1 '

fresh duplicate
base 10
report 7 7
verdict "one report delivered twice" 0 'soak_duplicate_deliveries=1 '

fresh other_failure
base 10
echo "SIGHUPs: 1 invalid, 0 refused; 1 valid, 1 taken" >"$DIR/failures"
verdict "a failure the run found" 1 'soak: SIGHUPs: 1 invalid, 0 refused' '1 other failures'

fresh no_account
base 10
rm "$DIR/account.tsv"
verdict "no account" 1 'no .*account.tsv'

echo "$CASES cases, $((FAILS)) failed"
[ "$FAILS" = 0 ]
