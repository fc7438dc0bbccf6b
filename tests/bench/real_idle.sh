#!/usr/bin/env bash
# The idle floor on a real engine, with the containerd channel on (what
# the simulated engine cannot show): running managed containers, nothing
# happening, and reapd must not wake up at all in a window longer than a
# minute (a periodic timer of up to 60 s, such as a task audit while
# idle, shows as at least one wake-up). The window starts after 35 s of
# quiet, past libcurl's one check of each stream ~30 s after it connects.
# ctest `bench.real_idle` (label e2e: it runs with the end-to-end tests).
# Usage: bash tests/bench/real_idle.sh /path/to/reapd   (as root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(BENCH_REAL_ONLY=idle BENCH_REAL_RUNNING=20 BENCH_REAL_SETTLE_SECS=35 \
  BENCH_REAL_IDLE_SECS=65 bash "$here/real.sh" "$1")
echo "$out"
w=$(awk '$1 == "figure" && $2 == "real_idle_wakeups_per_sec" {print $3}' <<<"$out")
[ -n "$w" ] || { echo "real_idle: no wake-up figure measured" >&2; exit 1; }
if awk -v w="$w" 'BEGIN { exit !(w > 0) }'; then
  echo "real_idle: FLOOR BROKEN: real_idle_wakeups_per_sec = $w, floor 0 (no wake-up in 65 s)" >&2
  exit 1
fi
echo "real_idle: no wake-up in 65 s while idle (containerd on)"
