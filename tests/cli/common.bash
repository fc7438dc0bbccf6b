# Shared by the command-line tests (sourced; not a test itself: ctest
# runs tests/cli/*.sh). Usage, first thing in a test:
#
#   source "$(dirname "$0")/common.bash"
#   cli_begin NAME "$@"        # BIN, SRC, a scratch dir $T, traps
#
# then fail MESSAGE, ok MESSAGE, free_port and start_reapd_no_engine.

# cli_begin NAME BIN SRC: $T is /tmp/reapd-NAME.XXXXXX, removed at exit
# with the reapd started here ($pid) killed.
cli_begin() {
  set -euo pipefail
  BIN=$2
  SRC=$3
  T=$(mktemp -d "/tmp/reapd-$1.XXXXXX")
  pid=""
  n=0
  trap _cli_cleanup EXIT
}

_cli_cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$T"
}

# fail MESSAGE: says why (and the end of reapd's log) and exits 1.
fail() {
  echo "FAIL: $*" >&2
  [ -f "$T/log" ] && tail -20 "$T/log" >&2
  exit 1
}

# ok MESSAGE: one passed check, numbered.
ok() {
  n=$((n + 1))
  echo "ok $n - $*"
}

# free_port: a port on 127.0.0.1 free just now, below the ephemeral range:
# one in it can be taken by any outgoing connection (another test's curl)
# before reapd binds it.
free_port() {
  python3 - <<'PY'
import random, socket
lo = 20000
hi = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0]) - 1
for _ in range(100):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randint(lo, max(lo, hi))))
        print(s.getsockname()[1])
        break
    except OSError:
        pass
    finally:
        s.close()
else:
    raise SystemExit("no free port below the ephemeral range")
PY
}

# start_reapd_no_engine: reapd on $T/reapd.json with no engine, containerd
# off and the status endpoint on a free port ($port), with
# status.token_file $STATUS_TOKEN_FILE if set (else the read API is the
# admin socket's only), its stderr in $T/log, $pid set; returns once
# /livez answers 200.
start_reapd_no_engine() {
  local code="" _ tf=""
  [ -z "${STATUS_TOKEN_FILE:-}" ] || tf=", \"token_file\": \"$STATUS_TOKEN_FILE\""
  port=$(free_port)
  cat >"$T/reapd.json" <<JSON
{ "state_dir": "$T/state",
  "docker": { "socket": "$T/no-engine.sock", "reconnect_max_ms": 1000 },
  "containerd": { "socket": "off" },
  "status": { "listen": "127.0.0.1:$port"$tf },
  "admin": { "socket": "$T/admin.sock" } }
JSON
  "$BIN" -c "$T/reapd.json" 2>"$T/log" &
  pid=$!
  for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/livez" || true)
    [ "$code" = 200 ] && break
    kill -0 "$pid" 2>/dev/null || fail "reapd died"
    sleep 0.1
  done
  [ "$code" = 200 ] || fail "/livez never answered 200"
}
