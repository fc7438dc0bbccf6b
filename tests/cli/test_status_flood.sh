#!/usr/bin/env bash
# The status endpoint under a flood of clients (no engine needed: liveness
# does not depend on it): 200 idle keep-alive connections and 200 that
# drip a request a byte at a time, each opened again when closed, while
# a kubelet-like probe asks /livez every 100 ms on a fresh connection for
# 25 s. Every probe must be answered 200 within 1 s; the endpoint closes
# idle connections to make room and dripping ones at the deadline, counts
# both, and logs a bounded number of lines about it. Prints the figures.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin flood "$@"
[ -f "$SRC/tests/cli/status_flood.py" ] || fail "no flood client in $SRC"

start_reapd_no_engine
grep -q "open files: limit" "$T/log" || fail "the open-file limit is not logged"
ok "reapd serves /livez with no engine"

cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
before=$(cpu)
status_lines() { grep -c ' status: ' "$T/log" || true; }
lines_before=$(status_lines)
set +e
python3 "$SRC/tests/cli/status_flood.py" --port "$port" --seconds 25 \
  --idle 200 --drip 200 >"$T/figures" 2>"$T/failures"
rc=$?
set -e
after=$(cpu)
sed 's/^/  /' "$T/figures"
echo "  reapd_cpu_seconds $(awk -v a="$after" -v b="$before" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (a - b) / hz }')"
kill -0 "$pid" 2>/dev/null || fail "reapd died under the flood"
[ "$rc" -eq 0 ] || fail "probes failed: $(cat "$T/failures")"
fig() { awk -v k="$1" '$1 == k { print $2 }' "$T/figures"; }
[ "$(fig probes)" -ge 100 ] || fail "only $(fig probes) probes in 25 s"
ok "$(fig probes) probes, all 200 within 1 s (worst $(fig worst_probe_ms) ms)"
# More than the endpoint serves (64) on average: it is under pressure.
[ "$(fig connections_held_avg)" -ge 64 ] || fail "the flood held only $(fig connections_held_avg) connections on average"
ok "while the flood held $(fig connections_held_avg) connections on average ($(fig connections_held_min) at least)"

curl -sf "http://127.0.0.1:$port/metrics" -o "$T/metrics" || fail "GET /metrics"
val() { awk -v k="$1" '$1 == k { print $2 }' "$T/metrics"; }
for name in reapd_status_connections_evicted_total \
  reapd_status_requests_timed_out_total reapd_status_accept_errors_total; do
  grep -q "^# TYPE $name counter$" "$T/metrics" || fail "no $name"
done
evicted=$(val 'reapd_status_connections_evicted_total{state="idle"}')
timed_out=$(val reapd_status_requests_timed_out_total)
[ "${evicted:-0}" -gt 0 ] || fail "no idle connection evicted: $(grep evicted "$T/metrics")"
[ "${timed_out:-0}" -gt 0 ] || fail "no dripping request timed out"
[ "$(fig closed_by_server_drip)" -gt 0 ] || fail "no dripping connection was closed"
ok "idle connections evicted ($evicted), dripping ones closed at the deadline ($timed_out)"
for k in 'reapd_status_connections_evicted_total{state="refused"}' \
  'reapd_status_rejected_total{reason="too_many_connections"}' \
  reapd_status_accept_errors_total; do
  echo "  $k $(val "$k")"
done

# Rate-limited: each kind of line (idle and refused connections closed,
# deadlines, refusals, bad requests, accept errors) once per 10 s at most,
# over 27 s of flood: 4 each.
lines=$(( $(status_lines) - lines_before ))
echo "  status_log_lines_during_flood $lines"
[ "$lines" -le 24 ] || fail "$lines status log lines during the flood"
for kind in 'closed the idle connection' 'closed the refused connection' \
  'closed the connection from' 'refused a request' 'bad request' \
  'cannot accept'; do
  k=$(grep -c "status: $kind" "$T/log" || true)
  [ "$k" -le 4 ] || fail "$k lines of \"$kind\""
done
ok "$lines status log lines for the whole flood"

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc"
ok "stopped cleanly"
echo "$n passed, 0 failed"
