#!/usr/bin/env bash
# systemd's notify protocol, with a notify socket the test owns in place
# of systemd: READY=1 once, after the first reconcile with the engine;
# STATUS= lines when the engine goes away and comes back (no second
# READY=1); WATCHDOG=1 every half of WATCHDOG_USEC from the loop;
# RELOADING=1 then READY=1 around a SIGHUP; STOPPING=1 at SIGTERM.
# Usage: bash tests/e2e/test_sdnotify.sh /path/to/reapd
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

RX_PID=""
# shellcheck disable=SC2317  # run by the EXIT trap
_rx_on_exit() {
  local rc=$?
  # _proxy_status hands rc on as a failing status: under errexit it
  # would end this trap before the engine is stopped.
  trap - ERR
  set +e
  [ -z "$RX_PID" ] || kill "$RX_PID" 2>/dev/null || true
  _proxy_status "$rc"
  _e2e_on_exit
}

engine_start
image_build

# The receiver: one line per datagram, "MONOTONIC_MS<TAB>message" with
# the message's newlines written as "|".
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "a", buffering=1)
print("listening", flush=True)
while True:
    m = s.recv(4096).decode("utf-8", "replace")
    out.write("%d\t%s\n" % (time.monotonic() * 1000, m.replace("\n", "|")))
' "$D/notify.sock" "$D/notify.log" >"$D/rx.out" 2>&1 &
RX_PID=$!
trap _rx_on_exit EXIT
wait_until 5 "the notify receiver" grep -qx listening "$D/rx.out"

# count PATTERN: messages so far matching the extended regex PATTERN.
count() { grep -cE "$1" "$D/notify.log" 2>/dev/null || true; }

export NOTIFY_SOCKET=$D/notify.sock WATCHDOG_USEC=1000000
reapd_start "$REAPD_BIN"
unset NOTIFY_SOCKET WATCHDOG_USEC
wait_until 5 "READY=1" grep -q 'READY=1' "$D/notify.log"
ready=$(grep -m1 'READY=1' "$D/notify.log" | cut -f2)
log "ready: $ready"
assert_eq "READY=1|STATUS=ready: watching $D/docker.sock" "$ready" "READY=1 with its status"
grep -q '"reconciled with the engine' "$D/reapd.log" ||
  fail "READY=1 before reapd logged its first reconcile"

# The watchdog: every 500 ms from the loop.
n0=$(count '^[0-9]+.WATCHDOG=1$')
sleep 3
n1=$(count '^[0-9]+.WATCHDOG=1$')
log "watchdog pings in 3 s: $((n1 - n0))"
if [ $((n1 - n0)) -lt 5 ] || [ $((n1 - n0)) -gt 7 ]; then
  fail "$((n1 - n0)) WATCHDOG=1 in 3 s at WATCHDOG_USEC=1000000 (want about 6)"
fi

# The engine goes away: not ready, said in STATUS=; back: ready again,
# without a second READY=1 (systemd took the first).
engine_term
wait_until 20 "STATUS=not ready" grep -q 'STATUS=not ready: docker event stream not connected' "$D/notify.log"
engine_restart
wait_ready 60
wait_until 10 "STATUS=ready after the engine's restart" \
  bash -c "grep 'STATUS=not ready' '$D/notify.log' -A100 | grep -q '	STATUS=ready: watching'"
assert_eq 1 "$(count 'READY=1')" "READY=1 sent once"

# SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1.
kill -HUP "$REAPD_PID"
wait_until 5 "READY=1 after the reload" grep -q 'READY=1|STATUS=ready: config reloaded' "$D/notify.log"
reloading=$(grep -n 'RELOADING=1' "$D/notify.log" | head -1 | cut -d: -f1)
reloaded=$(grep -n 'STATUS=ready: config reloaded' "$D/notify.log" | head -1 | cut -d: -f1)
if [ -z "$reloading" ] || [ "$reloading" -ge "$reloaded" ]; then
  fail "no RELOADING=1 before the reload's READY=1"
fi
grep 'RELOADING=1' "$D/notify.log" | grep -qE 'MONOTONIC_USEC=[0-9]+' ||
  fail "RELOADING=1 without MONOTONIC_USEC"

# A container's lifecycle goes on as ever beside it.
a=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 4')
line=$(wait_report "$a" 30)
assert_json "$line" '.exit_code == 4' "exit_code"

reapd_stop
wait_until 5 "STOPPING=1" grep -q 'STOPPING=1' "$D/notify.log"

e2e_pass
