#!/usr/bin/env bash
# /metrics of a running reapd (no engine) in the Prometheus text format
# 0.0.4, checked strictly: by promtool (Debian
# package "prometheus"), and always by the parser below, so the check
# never passes merely because a tool is missing. The parser is tried on
# broken input first: a checker that accepts anything would prove nothing.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin metrics "$@"
[ -f "$SRC/CMakeLists.txt" ] || fail "no source dir at $SRC"

# Exit 0 if stdin is a valid exposition of reapd metrics; else one line
# per problem on stderr and exit 1.
check() {
  python3 -c '
import re, sys
NAME = re.compile(r"^(reapd|process)_[a-z0-9_]+$")
SAMPLE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*=\"(?:[^\"\\\n]|\\.)*\",?)*)\})?"
    r" (\S+)$")
LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\n]|\\.)*)\"")
HEX64 = re.compile(r"[0-9a-f]{64}")
problems = []
def bad(msg):
    problems.append(msg)
text = sys.stdin.read()
if not text.endswith("\n"):
    bad("does not end with a newline")
help_, type_, done, current = {}, {}, set(), None
series = {}  # family -> {labels-without-le: {"buckets": [(le, v)], ...}}
seen = set()
for no, line in enumerate(text.split("\n")[:-1], 1):
    if line.startswith("#"):
        m = re.match(r"^# (HELP|TYPE) (\S+) (.+)$", line)
        if not m:
            bad("%d: bad comment: %s" % (no, line)); continue
        kind, fam, rest = m.groups()
        if not NAME.match(fam):
            bad("%d: bad family name %s" % (no, fam))
        if fam != current:
            if fam in done:
                bad("%d: family %s interleaved or repeated" % (no, fam))
            if current is not None:
                done.add(current)
            current = fam
        d = help_ if kind == "HELP" else type_
        if fam in d:
            bad("%d: second # %s for %s" % (no, kind, fam))
        d[fam] = rest
        if kind == "TYPE" and rest not in ("counter", "gauge", "histogram"):
            bad("%d: unexpected type %s" % (no, rest))
        if kind == "TYPE" and fam not in help_:
            bad("%d: # TYPE before # HELP for %s" % (no, fam))
        continue
    m = SAMPLE.match(line)
    if not m:
        bad("%d: not name{labels} value: %s" % (no, line)); continue
    name, labels, value = m.groups()
    try:
        v = float(value)
    except ValueError:
        bad("%d: bad value %s" % (no, value)); continue
    fam = current
    t = type_.get(fam)
    if fam is None or t is None or fam not in help_:
        bad("%d: sample %s without # HELP and # TYPE before it" % (no, name))
        continue
    suffix = name[len(fam):] if name.startswith(fam) else None
    allowed = ("_bucket", "_sum", "_count") if t == "histogram" else ("",)
    if suffix not in allowed:
        bad("%d: sample %s outside its family %s" % (no, name, fam)); continue
    if not NAME.match(name):
        bad("%d: bad metric name %s" % (no, name))
    if t == "counter" and not fam.endswith("_total"):
        bad("%d: counter %s does not end in _total" % (no, fam))
    if t != "counter" and fam.endswith("_total"):
        bad("%d: %s ends in _total but is a %s" % (no, fam, t))
    lab = LABEL.findall(labels or "")
    keys = [k for k, _ in lab]
    if len(keys) != len(set(keys)):
        bad("%d: repeated label in %s" % (no, line))
    if any(HEX64.search(val) for _, val in lab):
        bad("%d: a container id as a label value: %s" % (no, line))
    if v < 0 or v != v:
        bad("%d: negative or NaN value: %s" % (no, line))
    key = (name, tuple(sorted(lab)))
    if key in seen:
        bad("%d: duplicate series %s" % (no, line))
    seen.add(key)
    if t == "histogram":
        rest = tuple(sorted((k, x) for k, x in lab if k != "le"))
        s = series.setdefault(fam, {}).setdefault(
            rest, {"buckets": [], "sum": None, "count": None})
        if suffix == "_bucket":
            le = dict(lab).get("le")
            if le is None:
                bad("%d: bucket without le: %s" % (no, line)); continue
            s["buckets"].append((float(le), v))
        elif suffix == "_sum":
            s["sum"] = v
        else:
            s["count"] = v
for fam, t in type_.items():
    if fam not in help_:
        bad("family %s has # TYPE but no # HELP" % fam)
for fam, all_ in series.items():
    for rest, s in all_.items():
        b = s["buckets"]
        what = "%s%s" % (fam, dict(rest))
        if not b or b[-1][0] != float("inf"):
            bad("%s: no +Inf bucket (last)" % what); continue
        les = [le for le, _ in b]
        if les != sorted(les) or len(set(les)) != len(les):
            bad("%s: buckets not in increasing le order" % what)
        vals = [x for _, x in b]
        if vals != sorted(vals):
            bad("%s: buckets not cumulative" % what)
        if s["count"] is None or s["sum"] is None:
            bad("%s: _sum or _count missing" % what); continue
        if s["count"] != b[-1][1]:
            bad("%s: +Inf bucket %g != _count %g" % (what, b[-1][1], s["count"]))
        if s["count"] == 0 and s["sum"] != 0:
            bad("%s: _sum %g with no observations" % (what, s["sum"]))
for fam, t in type_.items():
    if t == "histogram" and fam not in series:
        bad("histogram %s has no series" % fam)
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
'
}

expect_bad() {
  local what=$1
  if printf '%b' "$2" | check 2>/dev/null; then
    fail "the checker accepted $what"
  fi
}

# The checker itself: good input passes, each kind of breakage fails.
good='# HELP reapd_x_total X.\n# TYPE reapd_x_total counter\nreapd_x_total 1\n# HELP reapd_h_seconds H.\n# TYPE reapd_h_seconds histogram\nreapd_h_seconds_bucket{le="1"} 1\nreapd_h_seconds_bucket{le="+Inf"} 2\nreapd_h_seconds_sum 3.5\nreapd_h_seconds_count 2\n'
printf '%b' "$good" | check || fail "the checker rejects a valid exposition"
expect_bad "a sample without HELP/TYPE" 'reapd_x_total 1\n'
expect_bad "a counter without _total" '# HELP reapd_x X.\n# TYPE reapd_x counter\nreapd_x 1\n'
expect_bad "a name outside reapd_" '# HELP foo_total X.\n# TYPE foo_total counter\nfoo_total 1\n'
expect_bad "a bad value" '# HELP reapd_x_total X.\n# TYPE reapd_x_total counter\nreapd_x_total one\n'
expect_bad "two HELPs" '# HELP reapd_x_total X.\n# HELP reapd_x_total X.\n# TYPE reapd_x_total counter\nreapd_x_total 1\n'
expect_bad "interleaved families" '# HELP reapd_a_total A.\n# TYPE reapd_a_total counter\nreapd_a_total 1\n# HELP reapd_b_total B.\n# TYPE reapd_b_total counter\nreapd_b_total 1\n# HELP reapd_a_total A.\n'
expect_bad "a histogram without +Inf" '# HELP reapd_h_seconds H.\n# TYPE reapd_h_seconds histogram\nreapd_h_seconds_bucket{le="1"} 1\nreapd_h_seconds_sum 1\nreapd_h_seconds_count 1\n'
expect_bad "+Inf != _count" '# HELP reapd_h_seconds H.\n# TYPE reapd_h_seconds histogram\nreapd_h_seconds_bucket{le="+Inf"} 2\nreapd_h_seconds_sum 1\nreapd_h_seconds_count 1\n'
expect_bad "non-cumulative buckets" '# HELP reapd_h_seconds H.\n# TYPE reapd_h_seconds histogram\nreapd_h_seconds_bucket{le="1"} 2\nreapd_h_seconds_bucket{le="+Inf"} 1\nreapd_h_seconds_sum 1\nreapd_h_seconds_count 1\n'
expect_bad "a container id label" '# HELP reapd_x_total X.\n# TYPE reapd_x_total counter\nreapd_x_total{id="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} 1\n'
expect_bad "a missing newline" '# HELP reapd_x_total X.\n# TYPE reapd_x_total counter\nreapd_x_total 1'
ok "the format checker accepts valid input and rejects each breakage"

# A daemon with no engine, containerd off, status on a free port.
start_reapd_no_engine
curl -sf -D "$T/headers" "http://127.0.0.1:$port/metrics" -o "$T/metrics" ||
  fail "GET /metrics failed"
grep -qi '^content-type: text/plain; version=0.0.4' "$T/headers" ||
  fail "wrong content type: $(cat "$T/headers")"
ok "GET /metrics answers text/plain; version=0.0.4"

check <"$T/metrics" 2>"$T/problems" || fail "exposition: $(cat "$T/problems")"
ok "the exposition passes the strict checker"

for name in reapd_build_info reapd_events_received_total \
  reapd_relists_total reapd_reports_total reapd_report_writes_total \
  reapd_containers_tracked \
  reapd_deletes_held_total \
  reapd_removals_total reapd_exit_code_corrections_total \
  reapd_leaked_tasks reapd_tasks_reaped_total reapd_containerd_connected \
  reapd_outbox_pending reapd_outbox_reports reapd_state_db_bytes \
  reapd_state_write_errors_total reapd_state_commits_total reapd_state_record_writes_total reapd_reports_unstored \
  reapd_reports_pruned_total reapd_config_reloads_total \
  reapd_cleanup_duration_seconds reapd_engine_request_duration_seconds \
  reapd_report_latency_seconds reapd_status_connections reapd_status_rejected_total \
  reapd_status_connections_evicted_total reapd_status_requests_timed_out_total \
  reapd_status_accept_errors_total reapd_events_rejected_total \
  reapd_events_replays_cut_total \
  reapd_containers_truncated_total reapd_containers_undecidable_total \
  reapd_docker_connected reapd_last_event_timestamp_seconds \
  reapd_outbox_oldest_pending_timestamp_seconds \
  process_cpu_seconds_total process_resident_memory_bytes \
  process_virtual_memory_bytes process_open_fds process_max_fds \
  process_start_time_seconds; do
  grep -q "^# TYPE $name " "$T/metrics" || fail "metric $name missing"
done
grep -Eq '^reapd_build_info\{version="[0-9]+\.[0-9]+\.[0-9]+[^"]*",revision="([0-9a-f]{12}(-dirty)?|unknown)"\} 1$' \
  "$T/metrics" || fail "reapd_build_info: $(grep build_info "$T/metrics")"
ok "every documented metric family is there"

# The process_* values are this process's: against /proc and the clock.
val() { awk -v m="$1" '$1 == m { print $2 }' "$T/metrics"; }
rss_kib=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
python3 - "$(val process_resident_memory_bytes)" "$rss_kib" \
  "$(val process_start_time_seconds)" "$(date +%s)" \
  "$(val process_open_fds)" "$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)" \
  "$(val process_max_fds)" "$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")" \
  "$(val process_cpu_seconds_total)" "$(val reapd_docker_connected)" <<'PY' ||
import sys
rss, rss_kib, start, now, fds, fds_now, maxfds, limit, cpu, docker = sys.argv[1:]
problems = []
if abs(float(rss) / 1024 - int(rss_kib)) > 4096:
    problems.append("resident %s bytes, /proc says %s KiB" % (rss, rss_kib))
if not 0 <= int(now) - float(start) < 120:
    problems.append("started at %s, now %s" % (start, now))
if abs(int(fds) - int(fds_now)) > 4:
    problems.append("%s open fds, /proc/PID/fd has %s" % (fds, fds_now))
if int(maxfds) != int(limit):
    problems.append("max fds %s, limit %s" % (maxfds, limit))
if not 0 < float(cpu) < 60:
    problems.append("cpu %s s" % cpu)
if docker != "0":
    problems.append("docker connected %s with no engine" % docker)
if problems:
    print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
  fail "process metrics disagree with /proc"
ok "process_* agree with /proc (resident memory, start time, open fds, fd limit, CPU); reapd_docker_connected 0 with no engine"

# scripts/deps installs promtool (Debian: prometheus); without it this
# test fails rather than pass on half the checks.
command -v promtool >/dev/null 2>&1 ||
  fail "promtool not installed (scripts/deps installs Debian's prometheus)"
promtool check metrics <"$T/metrics" >"$T/promtool" 2>&1 ||
  fail "promtool check metrics: $(cat "$T/promtool")"
ok "promtool check metrics: clean"

# The reload counter moves on SIGHUP, each way.
echo '{ "delete": { "max_in_flight": 0 } }' >"$T/bad.json"
cp "$T/reapd.json" "$T/good.json"
cp "$T/bad.json" "$T/reapd.json"
kill -HUP "$pid"
for _ in $(seq 1 50); do
  grep -q "reload rejected" "$T/log" && break
  sleep 0.1
done
cp "$T/good.json" "$T/reapd.json"
kill -HUP "$pid"
for _ in $(seq 1 50); do
  grep -q "SIGHUP: reloaded" "$T/log" && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/metrics" -o "$T/metrics2" || fail "GET /metrics"
grep -q '^reapd_config_reloads_total{result="ok"} 1$' "$T/metrics2" ||
  fail "reload ok not counted: $(grep reloads "$T/metrics2")"
grep -q '^reapd_config_reloads_total{result="rejected"} 1$' "$T/metrics2" ||
  fail "reload rejected not counted: $(grep reloads "$T/metrics2")"
check <"$T/metrics2" 2>"$T/problems" || fail "exposition: $(cat "$T/problems")"
ok "reapd_config_reloads_total counts ok and rejected reloads"

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc"
ok "stopped cleanly"
