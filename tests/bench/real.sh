#!/usr/bin/env bash
# reapd's figures on a real engine: an isolated dockerd + containerd, as the
# end-to-end tests start them (tests/e2e/lib.sh). Churn is engine-bound
# here, so the engine's own rate is reported beside reapd's added latency.
# Prints one line per figure on stdout:
#   figure KEY VALUE UNIT WHAT...
# Usage: bash tests/bench/real.sh /path/to/reapd   (as root)
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../e2e/lib.sh
source "$here/../e2e/lib.sh"
e2e_begin "$@"

RUNNING=${BENCH_REAL_RUNNING:-50}
CREATED=${BENCH_REAL_CREATED:-300}
EXITS=${BENCH_REAL_EXITS:-100}
IDLE_SECS=${BENCH_REAL_IDLE_SECS:-10}
# The running containers' health check interval (a duration such as 1s;
# empty: none): each check is an exec the engine makes events of.
HEALTH=${BENCH_REAL_HEALTH_INTERVAL:-}
# Quiet time before the idle window (the starts' events and lookups
# drain, and one-time checks pass).
SETTLE_SECS=${BENCH_REAL_SETTLE_SECS:-5}
# idle: only the idle figures (what bench.real_idle checks); reapd: all
# but the peer's.
ONLY=${BENCH_REAL_ONLY:-}
# A command run with "start" and "end" around reapd's churn, its output
# discarded (tests/bench/instructions.sh dumps callgrind's counters).
HOOK=${BENCH_REAL_HOOK:-}
hook() {
  if [ -n "$HOOK" ]; then "$HOOK" "$1" >/dev/null; fi
}

figure() {
  echo "figure $*"
}

# CPU ns of every thread of PID (schedstat), and its context switches.
cpu_ns() {
  local t s=0 v
  for t in /proc/"$1"/task/*; do
    read -r v _ <"$t/schedstat"
    s=$((s + v))
  done
  echo "$s"
}

switches() {
  awk '/^(non)?voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' \
    /proc/"$1"/task/*/status
}

# Voluntary ones only: each a sleep (epoll_wait) that something ended;
# the others are preemptions, which other processes' load causes.
wakeups() {
  awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }' \
    /proc/"$1"/task/*/status
}

rss_kib() {
  awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status
}

# Private memory (USS): pages no other process shares.
uss_kib() {
  awk '/^Private_(Clean|Dirty|Hugetlb):/ { s += $2 } END { print s + 0 }' \
    /proc/"$1"/smaps_rollup
}

# Private dirty memory: what the process itself wrote (heap, stacks,
# relocations). USS also counts the clean pages of libraries no other
# process maps at the moment (libcrypto, SQLite...), so it reads 2-3 MiB
# on a node where another process maps them and 11 MiB where none does;
# this one does not depend on the neighbours.
private_dirty_kib() {
  awk '/^Private_Dirty:/ { s += $2 } END { print s + 0 }' /proc/"$1"/smaps_rollup
}

metrics() {
  curl -sf -m 10 "$REAPD_URL/metrics"
}

metric() { # metric FILE NAME: a sample's value (0 when absent)
  awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }' "$1"
}

# quantile BEFORE AFTER PREFIX Q: Prometheus' histogram_quantile over the
# difference of two /metrics snapshots, in milliseconds. PREFIX is the
# bucket series up to "le", e.g. 'name_bucket{' or 'name_bucket{a="b",'.
quantile() {
  awk -v prefix="$3" -v q="$4" '
    function le_of(s) { sub(/.*le="/, "", s); sub(/".*/, "", s); return s }
    index($1, prefix) == 1 {
      le = le_of($1)
      if (FNR == NR) { before[le] = $2; next }
      n++; les[n] = le; cum[n] = $2 - before[le]
    }
    END {
      total = cum[n]
      if (total <= 0) { print "nan"; exit }
      rank = q * total; lo = 0; prev = 0
      for (i = 1; i <= n; i++) {
        if (cum[i] >= rank) {
          if (les[i] == "+Inf") { v = lo }
          else if (cum[i] == prev) { v = les[i] }
          else { v = lo + (les[i] - lo) * (rank - prev) / (cum[i] - prev) }
          printf "%.3f\n", v * 1000; exit
        }
        if (les[i] != "+Inf") lo = les[i]
        prev = cum[i]
      }
    }' "$1" "$2"
}

engine_start
image_build
reapd_start "$REAPD_BIN" "{\"containerd\": {\"socket\": \"$(ctr_sock)\"},
  \"delete\": {\"max_in_flight\": 64},
  \"log\": {\"level\": \"info\", \"format\": \"text\"}}"

# ---- idle: running containers, nothing exiting
log "starting $RUNNING running containers"
health=()
[ -z "$HEALTH" ] || health=(--health-cmd true --health-interval "$HEALTH")
seq 1 "$RUNNING" | xargs -P 4 -I{} \
  "$DOCKER_CLI" -H "unix://$D/docker.sock" run -d --network none \
  --label reapd.managed=true "${health[@]}" "$IMAGE" sleep 100000 >/dev/null
sleep "$SETTLE_SECS"
w0=$(switches "$REAPD_PID")
c0=$(cpu_ns "$REAPD_PID")
sleep "$IDLE_SECS"
w1=$(switches "$REAPD_PID")
c1=$(cpu_ns "$REAPD_PID")
figure real_idle_wakeups_per_sec \
  "$(awk -v a="$w0" -v b="$w1" -v s="$IDLE_SECS" 'BEGIN { printf "%.2f", (b - a) / s }')" \
  1/s "context switches while nothing happens ($RUNNING running containers${HEALTH:+, health-checked every $HEALTH}, containerd on)"
figure real_idle_cpu_us_per_sec $(((c1 - c0) / 1000 / IDLE_SECS)) us/s \
  "CPU while nothing happens"
figure real_idle_rss_kib "$(rss_kib "$REAPD_PID")" KiB \
  "resident set at idle ($RUNNING running containers, containerd on)"
figure real_idle_uss_kib "$(uss_kib "$REAPD_PID")" KiB \
  "private memory (USS) at idle, the same"
figure real_idle_private_dirty_kib "$(private_dirty_kib "$REAPD_PID")" KiB \
  "private dirty memory at idle, the same (USS less the clean library pages no other process happens to map)"

if [ "$ONLY" = idle ]; then
  e2e_pass >&2
  exit 0
fi

# ---- memory: created containers are tracked like running ones
r0=$(rss_kib "$REAPD_PID")
log "creating $CREATED containers"
seq 1 "$CREATED" | xargs -P 4 -I{} \
  "$DOCKER_CLI" -H "unix://$D/docker.sock" create --network none \
  --label reapd.managed=true --label team=bench "$IMAGE" true >/dev/null
want=$((RUNNING + CREATED))
tracked() {
  metrics | awk '/^reapd_containers_tracked\{/ { s += $2 } END { print s + 0 }'
}
wait_until 60 "$want containers tracked" eval '[ "$(tracked)" -ge "$want" ]'
sleep 1
r1=$(rss_kib "$REAPD_PID")
figure real_rss_kib "$r1" KiB "resident set with $want tracked containers (containerd on)"
figure real_bytes_per_container $(((r1 - r0) * 1024 / CREATED)) bytes \
  "resident set growth per created container"

# ---- churn: containers that exit at once, as fast as the engine runs them
# exits LABEL: EXITS containers with LABEL that exit 3 at once, 8 at a time.
exits() {
  log "running $EXITS containers that exit at once ($1)"
  seq 1 "$EXITS" | xargs -P 8 -I{} \
    "$DOCKER_CLI" -H "unix://$D/docker.sock" run -d --network none \
    --label "$1" "$IMAGE" sh -c 'exit 3' >/dev/null
}
count_reports() {
  if [ -f "$(REPORTS)" ]; then wc -l <"$(REPORTS)"; else echo 0; fi
}
lines0=$(($(count_reports)))
metrics >"$D/m0"
hook start
w0=$(wakeups "$REAPD_PID")
c0=$(cpu_ns "$REAPD_PID")
t0=$(now_ms)
exits reapd.managed=true
t1=$(now_ms)
# Counted in reports.jsonl, not /metrics: polling the endpoint would add
# its own cost to the CPU measured.
settled() {
  [ "$(($(count_reports)))" -ge $((lines0 + EXITS)) ]
}
wait_until 300 "$EXITS reports" settled
t2=$(now_ms)
c1=$(cpu_ns "$REAPD_PID")
w1=$(wakeups "$REAPD_PID")
hook end
metrics >"$D/m1"
ev=$(($(metric "$D/m1" reapd_events_received_total) - $(metric "$D/m0" reapd_events_received_total)))
figure real_engine_exits_per_sec \
  "$(awk -v n="$EXITS" -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", n * 1000 / ms }')" \
  exits/s "the engine's own rate: docker run of containers that exit at once, 8 at a time"
figure real_churn_settle_secs \
  "$(awk -v ms=$((t2 - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')" s \
  "from the first docker run to the last of $EXITS reports"
figure real_added_latency_p50_ms "$(quantile "$D/m0" "$D/m1" 'reapd_report_latency_seconds_bucket{' 0.5)" \
  ms "engine confirmation -> report durable, median"
figure real_added_latency_p99_ms "$(quantile "$D/m0" "$D/m1" 'reapd_report_latency_seconds_bucket{' 0.99)" \
  ms "the same, 99th percentile"
figure real_cleanup_p50_ms "$(quantile "$D/m0" "$D/m1" 'reapd_cleanup_duration_seconds_bucket{result="removed",' 0.5)" \
  ms "exit -> confirmed cleanup (engine and containerd), median"
figure real_cpu_ns_per_event $(((c1 - c0) / (ev > 0 ? ev : 1))) ns \
  "reapd CPU per engine event during churn ($ev events; inspect, delete, containerd calls and reports included)"
commits=$(($(metric "$D/m1" reapd_state_commits_total) - $(metric "$D/m0" reapd_state_commits_total)))
figure real_state_commits_per_exit \
  "$(awk -v n="$commits" -v e="$EXITS" 'BEGIN { printf "%.1f", n / e }')" tx \
  "state database transactions per exit (records, checkpoints, the report)"
writes=$(($(metric "$D/m1" reapd_state_record_writes_total) - $(metric "$D/m0" reapd_state_record_writes_total)))
figure real_record_writes_per_exit \
  "$(awk -v n="$writes" -v e="$EXITS" 'BEGIN { printf "%.1f", n / e }')" rows \
  "container records written per exit (put or deleted, counted at commit)"
# Engine calls per exit, by call (the count of each call's histogram).
calls() {
  awk '/^reapd_engine_request_duration_seconds_count\{/ {
    match($1, /call="[a-z_]+"/); c = substr($1, RSTART + 6, RLENGTH - 7)
    match($1, /api="[a-z]+"/); a = substr($1, RSTART + 5, RLENGTH - 6)
    n[a "." c] += $2 } END { for (k in n) print k, n[k] }' "$1" | sort
}
join -a 2 -e 0 -o 0,1.2,2.2 <(calls "$D/m0") <(calls "$D/m1") |
  while read -r call n0 n1; do
    figure "real_calls_per_exit_${call/./_}" \
      "$(awk -v n=$((n1 - n0)) -v e="$EXITS" 'BEGIN { printf "%.2f", n / e }')" \
      calls "engine calls per exit: $call"
  done
real_us=$(((c1 - c0) / 1000 / EXITS))
figure real_cpu_us_per_exit "$real_us" us "reapd CPU per settled exit"
figure real_wakeups_per_exit \
  "$(awk -v n=$((w1 - w0)) -v e="$EXITS" 'BEGIN { printf "%.1f", n / e }')" 1 \
  "reapd's wakeups per exit (voluntary context switches: each a sleep in epoll_wait ended by an event, an answer or a timer)"
# What one wakeup costs here (tests/tools/wakecost): on a virtual machine
# it is most of a daemon's CPU per exit, whatever the daemon does.
wakecost=$(dirname "$REAPD_BIN")/tests/tools/wakecost
if [ -x "$wakecost" ]; then
  wk=$("$wakecost" 2000 1000 | awk '$1 == "wakeup_cpu_us" { print $2 }')
  figure machine_wakeup_cpu_us "$wk" us \
    "CPU of one epoll wakeup on this machine (a unix-socket ping-pong, 1 ms apart)"
  figure real_wakeup_share_pct \
    "$(awk -v w="$wk" -v n=$((w1 - w0)) -v e="$EXITS" -v c="$real_us" \
      'BEGIN { printf "%.0f", 100 * w * n / e / (c > 0 ? c : 1) }')" % \
    "of reapd's CPU per exit that its wakeups cost at the machine's price"
fi
figure real_uss_kib "$(uss_kib "$REAPD_PID")" KiB "reapd's private memory (USS) after the churn"

# ---- the peer: the same steps by a python3-docker script, alone on the
# engine (reapd stopped), on as many exits of the same kind
reapd_stop
if [ "$ONLY" = reapd ]; then
  e2e_pass >&2
  exit 0
fi
peer_out=$D/peer.out
/usr/bin/python3 "$here/peer_watcher.py" "$D/docker.sock" bench.peer=true "$EXITS" \
  >"$peer_out" 2>"$D/peer.err" &
peer=$!
peer_ready() { grep -qx ready "$peer_out"; }
wait_until 30 "the peer subscribed" peer_ready
c0=$(cpu_ns "$peer")
w0=$(wakeups "$peer")
t0=$(now_ms)
exits bench.peer=true
peer_done() {
  pid_alive "$peer" || fail "the peer exited: $(tail -n 5 "$D/peer.err")"
  grep -qx 'done' "$peer_out"
}
wait_until 600 "$EXITS exits handled by the peer" peer_done
c1=$(cpu_ns "$peer")
w1=$(wakeups "$peer")
peer_uss=$(uss_kib "$peer")
kill "$peer"
wait "$peer" 2>/dev/null || true
grep -c '"exit_code": 3' "$peer_out" | grep -qx "$EXITS" ||
  fail "the peer did not see exit code 3 $EXITS times"
peer_us=$(((c1 - c0) / 1000 / EXITS))
figure peer_cpu_us_per_exit "$peer_us" us \
  "a python3-docker watcher's CPU per exit: die event, inspect, remove, poll until gone ($(($(now_ms) - t0)) ms for $EXITS)"
figure peer_uss_kib "$peer_uss" KiB "the watcher's private memory (USS)"
figure peer_wakeups_per_exit \
  "$(awk -v n=$((w1 - w0)) -v e="$EXITS" 'BEGIN { printf "%.1f", n / e }')" 1 \
  "the watcher's wakeups per exit (voluntary context switches)"
figure real_cpu_ratio_vs_peer \
  "$(awk -v a="$peer_us" -v b="$real_us" 'BEGIN { printf "%.1f", a / (b > 0 ? b : 1) }')" x \
  "the watcher's CPU per exit over reapd's (reapd with containerd on, the watcher Docker only)"

e2e_pass >&2
