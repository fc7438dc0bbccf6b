#!/usr/bin/env bash
# What an exit on the real engine costs in instructions: runs
# tests/bench/real.sh (reapd's part) with reapd under callgrind, counts
# only the churn (callgrind's counters are dumped at its start and end),
# and prints the user-space instructions per exit and their share by
# library. Unlike CPU time, the count does not depend on what else the
# machine runs, so it shows a change too small for the time's spread
# (docs/performance.md, "Real engine"). The kernel's part is not
# counted.
# Prints one line per figure on stdout:
#   figure KEY VALUE UNIT WHAT...
# Usage: bash tests/bench/instructions.sh /path/to/reapd   (as root;
# valgrind, from scripts/deps; a RelWithDebInfo build names reapd's
# own files)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$bin" ] || { echo "instructions: $1: not an executable" >&2; exit 2; }
command -v callgrind_control >/dev/null ||
  { echo "instructions: valgrind is not installed" >&2; exit 2; }
exits=${BENCH_REAL_EXITS:-100}
work=$(mktemp -d /tmp/reapd-instr.XXXXXX)
trap 'rm -rf "$work"' EXIT

# real.sh starts "$BIN"; this one runs reapd under callgrind, names kept
# in full in each dump (so the churn's dump reads alone).
cat >"$work/reapd" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --compress-strings=no --compress-pos=no \\
  --callgrind-out-file=$work/cg.out "$bin" "\$@"
EOF
chmod +x "$work/reapd"

# Dumped at the churn's start and end: the second dump is the churn.
printf '#!/bin/sh\nexec callgrind_control -d\n' >"$work/hook"
chmod +x "$work/hook"

if ! BENCH_REAL_ONLY=reapd BENCH_REAL_EXITS=$exits BENCH_REAL_HOOK=$work/hook \
  bash "$here/real.sh" "$work/reapd" >"$work/figures" 2>"$work/log"; then
  tail -n 20 "$work/log" >&2
  echo "instructions: real.sh failed" >&2
  exit 1
fi
[ -s "$work/cg.out.2" ] || {
  echo "instructions: no dump of the churn" >&2
  exit 1
}
grep -E 'real_cpu_us_per_exit|real_wakeups_per_exit' "$work/figures" |
  sed 's/$/ (under callgrind)/'
# The second dump is the churn: self cost of each function, by object.
python3 - "$work/cg.out.2" "$exits" <<'EOF'
import collections, re, sys

path, exits = sys.argv[1], int(sys.argv[2])
by_obj = collections.Counter()
ob, after_call = "?", False
with open(path) as f:
    for line in f:
        if line.startswith("ob="):
            ob = line[3:].strip().split("/")[-1] or "?"
            continue
        if line.startswith("calls="):
            after_call = True  # the next line is a call's inclusive cost
            continue
        if not line[:1].isdigit() and line[:1] not in "+-*":
            continue
        if after_call:
            after_call = False
            continue
        parts = line.split()
        if len(parts) >= 2:
            by_obj[ob] += int(parts[1])
total = sum(by_obj.values())
if total == 0:
    sys.exit("instructions: no cost in the churn's dump")
print("figure real_instructions_per_exit %d instr "
      "user-space instructions per exit (callgrind, %d exits)"
      % (total // exits, exits))
for ob, n in by_obj.most_common(10):
    key = re.sub(r"[^a-z0-9]+", "_", re.sub(r"\.so.*", "", ob.lower()))
    print("figure real_instructions_share_%s %.1f %% %s" % (key, 100.0 * n / total, ob))
EOF
