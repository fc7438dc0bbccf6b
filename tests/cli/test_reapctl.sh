#!/usr/bin/env bash
# reapctl, the command-line client: usage and exit codes; a reapd that
# cannot be reached; the client's side of every endpoint against a fake
# reapd (long polls, exit codes passed through, malformed and oversized
# answers, the report stream, tokens); and the commands against an
# engine-less reapd on its admin socket and its read-only TCP listener.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin reapctl "$@"
CTL=$(dirname "$BIN")/reapctl
[ -x "$CTL" ] || fail "no reapctl next to $BIN"

# expect RC CMD...: runs CMD with its stdout in $T/out and stderr in
# $T/err, and fails unless it exits RC.
expect() {
  local want=$1 rc
  shift
  set +e
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
  set -e
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$T/err")"
}

# err_has TEXT: reapctl's message says TEXT, and says it is reapctl's.
err_has() {
  grep -q "^reapctl: " "$T/err" || fail "stderr without 'reapctl: ': $(cat "$T/err")"
  grep -q -- "$1" "$T/err" || fail "stderr lacks '$1': $(cat "$T/err")"
}

ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

A=$(printf 'a%.0s' {1..64})
B=$(printf 'b%.0s' {1..64})
C=$(printf 'c%.0s' {1..64})
D=$(printf 'd%.0s' {1..64})
E=$(printf 'e%.0s' {1..64})
F=$(printf 'f%.0s' {1..64})
N=$(printf '9%.0s' {1..64})
Z=$(printf '0%.0s' {1..64})

# ---- usage ------------------------------------------------------------

expect 0 "$CTL" --help
grep -q '^Usage: reapctl' "$T/out" || fail "--help: $(cat "$T/out")"
grep -q '125' "$T/out" || fail "--help does not document the exit codes"
expect 0 "$CTL" wait --help
grep -q -- '--exit-code' "$T/out" || fail "wait --help: $(cat "$T/out")"
expect 0 "$CTL" --version
grep -Eq '^reapctl [0-9]+\.[0-9]+\.[0-9]+$' "$T/out" || fail "--version: $(cat "$T/out")"
ok "--help, COMMAND --help and --version exit 0"

for args in "" "bogus" "--bogus status" "status extra" "show" "show ABC" \
  "wait" "wait xyz" "wait $A --timeout" "wait $A --timeout 1.5" \
  "wait $A $B" "reports --limit 0" "reports --limit 1001" \
  "reports --dead --pending" "reports --follow --dead" \
  "reports --follow --limit 5" "reports --after -1" "reports --container x" \
  "requeue" "requeue a/b" "requeue .." "requeue r1 --all-dead" \
  "drain --timeout x" "drain --timeout 1000000001" \
  "wait $A --timeout 1000000001" "--socket $T/s --url http://x status" \
  "--url ftp://x status" "--token-file $T/none status"; do
  # shellcheck disable=SC2086 # word splitting is the point
  expect 125 "$CTL" $args
  err_has "."
done
ok "bad usage exits 125 with a message"

# ---- no reapd ---------------------------------------------------------

t0=$(ms)
expect 125 "$CTL" --socket "$T/none.sock" status
err_has "cannot reach reapd at $T/none.sock"
[ $(($(ms) - t0)) -lt 2000 ] || fail "status took $(($(ms) - t0)) ms without reapd"
expect 125 env REAPD_SOCKET="$T/none.sock" "$CTL" containers
err_has "$T/none.sock"
ok "no reapd: status exits 125 at once (also with REAPD_SOCKET)"

t0=$(ms)
expect 125 "$CTL" --socket "$T/none.sock" wait "$A" --timeout 2
took=$(($(ms) - t0))
{ [ "$took" -ge 1500 ] && [ "$took" -lt 6000 ]; } || fail "wait without reapd took $took ms"
err_has "cannot reach reapd"
ok "no reapd: wait --timeout 2 retries, then exits 125 ($took ms)"

# ---- a fake reapd: the client's side of each answer --------------------

cat >"$T/fake.py" <<'PY'
import json, socketserver, sys, threading, time
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit, parse_qs

A, B, C, D, E, F, N, Z = (ch * 64 for ch in "abcdef90")
calls, lock = {}, threading.Lock()


def count(key):
    with lock:
        calls[key] = calls.get(key, 0) + 1
        return calls[key]


def report(cid, code):
    return {"report_id": "r-" + cid[:8], "container_id": cid,
            "exit_code": code, "schema_version": 1}


def entry(seq, cid, after):
    return {"seq": seq, "after": after, "report_id": "r-" + cid[:8],
            "delivery": "pending", "report": report(cid, 0)}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        if self.headers.get("Content-Length") != "0":
            return self.send(400, {"error": "want Content-Length: 0"})
        self.route("POST")

    def route(self, method):
        u = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        wait = int(q.get("wait", "0"))
        p = u.path
        if method == "GET" and p == "/v1/status":
            if self.headers.get("Authorization") != "Bearer tok-123":
                return self.send(401, {"error": "a valid bearer token is required"})
            return self.send(200, {"ready": True, "version": "fake"})
        if method == "GET" and p == "/v1/containers":
            body = b"not json"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if method == "GET" and p in ("/v1/leaks", "/v1/containers/" + F):
            # 17 MiB: with a Content-Length for leaks, without for F.
            self.send_response(200)
            if p == "/v1/leaks":
                self.send_header("Content-Length", str(17 << 20))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            try:
                for _ in range(17 * 16):
                    self.wfile.write(b" " * 65536)
            except OSError:
                pass
            return
        if method == "GET" and p.startswith("/v1/containers/") and p.endswith("/report"):
            cid = p.split("/")[3]
            n = count(cid)
            if cid == A and n == 1:
                if wait < 1:
                    return self.send(400, {"error": "no wait"})
                time.sleep(0.3)
                return self.send(202, {"container_id": A, "state": "removing"})
            if cid == A:
                return self.send(200, report(A, 42))
            if cid == B:
                return self.send(200, report(B, None))
            if cid == C:
                if n <= 2:
                    return self.send(404, {"error": "no such container"})
                return self.send(200, report(C, 7))
            if cid == D:
                time.sleep(min(wait, 5))
                return self.send(202, {"container_id": D, "state": "exited"})
            if cid == E:
                return self.send(200, report(A, 0))
            if cid == N:
                return self.send(200, report(N, 300))
            if cid == Z:
                if n <= 2:
                    return self.send(503, {"error": "too many connections"})
                return self.send(200, report(Z, 3))
            return self.send(404, {"error": "no such container"})
        if method == "GET" and p == "/v1/reports":
            return self.send(200, {"reports": [{"seq": 2, "query": u.query},
                                               {"seq": 1}]})
        if method == "GET" and p == "/v1/reports/stream":
            after = q.get("after")
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(json.dumps(entry(1, A, after)).encode() + b"\n\n \r\n")
            time.sleep(0.2)
            line = json.dumps(entry(2, B, after)).encode()
            self.chunk(line[:10])
            self.chunk(line[10:] + b"\n")
            if after == "666":
                self.chunk(b"{broken\n")
            if after == "999":
                time.sleep(30)
            return self.chunk(b"")
        if method == "POST" and p == "/v1/reports/requeue":
            if q.get("state") != "dead":
                return self.send(400, {"error": "state=dead only"})
            return self.send(200, {"requeued": 3})
        if method == "POST" and p == "/v1/reports/r1/requeue":
            return self.send(409, {"error": "already delivered"})
        if method == "POST" and p == "/v1/drain":
            n = count("drain")
            if n == 1:
                return self.send(202, {"drained": False, "cleaning": 1, "pending": 2})
            if n == 2:
                if wait != 300:
                    return self.send(400, {"error": "want wait=300"})
                time.sleep(0.2)
                return self.send(202, {"drained": False, "cleaning": 0, "pending": 1})
            return self.send(200, {"drained": True, "cleaning": 0, "pending": 0})
        if method == "POST" and p == "/v1/audit":
            return self.send(200, {"audited": True})
        return self.send(404, {"error": "no such endpoint"})


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


Server(sys.argv[1], Handler).serve_forever()
PY
python3 "$T/fake.py" "$T/fake.sock" 2>"$T/fake.log" &
pid=$!
for _ in $(seq 1 50); do
  [ -S "$T/fake.sock" ] && break
  sleep 0.1
done
[ -S "$T/fake.sock" ] || fail "the fake reapd did not start: $(cat "$T/fake.log")"
FAKE=(--socket "$T/fake.sock")

printf 'tok-123\n' >"$T/token"
printf 'tok 123\n' >"$T/badtoken"
expect 125 "$CTL" "${FAKE[@]}" status
err_has "token"
expect 125 "$CTL" "${FAKE[@]}" --token-file "$T/badtoken" status
err_has "badtoken"
expect 0 "$CTL" "${FAKE[@]}" --token-file "$T/token" status
grep -qx '{"ready":true,"version":"fake"}' "$T/out" || fail "status: $(cat "$T/out")"
ok "tokens: 401 explained, a bad token file refused, a good one sent"

expect 125 "$CTL" "${FAKE[@]}" containers
err_has "malformed"
expect 125 "$CTL" "${FAKE[@]}" leaks
err_has "16 MiB"
expect 125 "$CTL" "${FAKE[@]}" show "$F"
err_has "16 MiB"
[ ! -s "$T/out" ] || fail "something printed of a bad answer"
ok "malformed and oversized answers: 125, nothing printed"

expect 42 "$CTL" "${FAKE[@]}" wait "$A" --exit-code
[ "$(wc -l <"$T/out")" -eq 1 ] || fail "wait: not one line: $(cat "$T/out")"
grep -q "\"container_id\":\"$A\",\"exit_code\":42" "$T/out" || fail "wait: $(cat "$T/out")"
ok "wait --exit-code: a long poll (202), then the report and its exit code"

expect 125 "$CTL" "${FAKE[@]}" wait "$B" --exit-code
err_has "could not tell"
expect 0 "$CTL" "${FAKE[@]}" wait "$B"
grep -q '"exit_code":null' "$T/out" || fail "wait B: $(cat "$T/out")"
expect 125 "$CTL" "${FAKE[@]}" wait "$N" --exit-code
err_has "0..255"
expect 125 "$CTL" "${FAKE[@]}" wait "$E"
err_has "malformed"
ok "wait: a null or out-of-range exit code and another container's report are errors"

t0=$(ms)
expect 7 "$CTL" "${FAKE[@]}" wait "$C" --exit-code
took=$(($(ms) - t0))
[ "$took" -ge 1500 ] || fail "wait asked again too soon after a 404 ($took ms)"
ok "wait: a container not seen yet is asked again ($took ms)"

expect 3 "$CTL" "${FAKE[@]}" wait "$Z" --exit-code
ok "wait: a busy reapd (503) is asked again"

t0=$(ms)
expect 125 "$CTL" "${FAKE[@]}" wait "$D" --timeout 2
took=$(($(ms) - t0))
err_has "timed out after 2 s: container $D is exited"
{ [ "$took" -ge 1800 ] && [ "$took" -lt 4000 ]; } || fail "wait --timeout 2 took $took ms"
ok "wait --timeout: 125 with the container's state ($took ms)"

expect 0 "$CTL" "${FAKE[@]}" reports --after 5 --limit 2 --container "$A" --dead
[ "$(wc -l <"$T/out")" -eq 2 ] || fail "reports: $(cat "$T/out")"
head -1 "$T/out" | grep -q "\"query\":\"after=5&limit=2&container_id=$A&state=dead\"" ||
  fail "reports query: $(cat "$T/out")"
# The largest page is taken (--limit 1001 is a usage error, above).
expect 0 "$CTL" "${FAKE[@]}" reports --limit 1000
head -1 "$T/out" | grep -q '"query":"limit=1000"' ||
  fail "reports --limit 1000: $(cat "$T/out")"
ok "reports: the filters as a query, one entry per line in the server's order"

expect 125 "$CTL" "${FAKE[@]}" reports --follow --after 7
err_has "ended the report stream"
[ "$(wc -l <"$T/out")" -eq 2 ] || fail "follow: $(cat "$T/out")"
grep -c '"after":"7"' "$T/out" | grep -qx 2 || fail "follow: $(cat "$T/out")"
expect 125 "$CTL" "${FAKE[@]}" reports --follow --container "$B"
{ [ "$(wc -l <"$T/out")" -eq 1 ] && grep -q "\"container_id\":\"$B\"" "$T/out"; } ||
  fail "follow --container: $(cat "$T/out")"
expect 125 "$CTL" "${FAKE[@]}" reports --follow --after 666
err_has "malformed line"
ok "reports --follow: lines as they come, blank ones skipped, an end is 125"

expect 125 "$CTL" "${FAKE[@]}" requeue r1
err_has "already delivered"
expect 125 "$CTL" "${FAKE[@]}" requeue r2
err_has "no report r2"
expect 0 "$CTL" "${FAKE[@]}" requeue --all-dead
grep -qx '{"requeued":3}' "$T/out" || fail "requeue --all-dead: $(cat "$T/out")"
ok "requeue: 409 and 404 are 125, --all-dead prints the count"

expect 125 "$CTL" "${FAKE[@]}" drain --timeout 0
err_has "not drained after 0 s: 1 cleaning, 2 pending"
expect 0 "$CTL" "${FAKE[@]}" drain
grep -q '"drained":true' "$T/out" || fail "drain: $(cat "$T/out")"
expect 0 "$CTL" "${FAKE[@]}" audit
# The largest --timeout is taken (1000000001 is a usage error, above).
expect 0 "$CTL" "${FAKE[@]}" drain --timeout 1000000000
grep -q '"drained":true' "$T/out" || fail "drain --timeout 1000000000: $(cat "$T/out")"
ok "drain: the counts on a timeout, asked again until drained; audit"

# Not under a sanitizer build: ASan and valgrind do not mix.
if command -v valgrind >/dev/null && ! ldd "$CTL" | grep -q libasan; then
  VG=(valgrind -q --error-exitcode=99 --leak-check=full "--errors-for-leak-kinds=definite,indirect")
  expect 0 "${VG[@]}" "$CTL" "${FAKE[@]}" --token-file "$T/token" status
  expect 125 "${VG[@]}" "$CTL" "${FAKE[@]}" reports --follow --after 1
  expect 125 "${VG[@]}" "$CTL" "${FAKE[@]}" show "$F"
  expect 125 "${VG[@]}" "$CTL" "${FAKE[@]}" wait "$D" --timeout 1
  ok "valgrind: no errors or leaks on status, the stream, a bound, a timeout"
fi

# An interrupted follow ends as its signal says, at once.
"$CTL" "${FAKE[@]}" reports --follow --after 999 >"$T/follow.out" 2>"$T/follow.err" &
fpid=$!
sleep 1
kill -0 "$fpid" 2>/dev/null || fail "follow ended early: $(cat "$T/follow.err")"
kill -TERM "$fpid"
set +e
wait "$fpid"
rc=$?
set -e
[ "$rc" -eq 143 ] || fail "follow after SIGTERM: exit $rc"
ok "reports --follow: SIGTERM ends it"

kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""

# ---- an engine-less reapd ----------------------------------------------

# Its admin socket is $T/admin.sock (common.bash).
start_reapd_no_engine
for _ in $(seq 1 50); do
  [ -S "$T/admin.sock" ] && break
  sleep 0.1
done
[ -S "$T/admin.sock" ] || fail "no admin socket at $T/admin.sock"
ADMIN=(--socket "$T/admin.sock")
TCP=(--url "http://127.0.0.1:$port")

expect 1 "$CTL" "${ADMIN[@]}" status
grep -q '"ready":false' "$T/out" || fail "status: $(cat "$T/out")"
ok "status: exit 1 and ready:false without an engine"

# No token configured: the status listener serves no /v1/ route, and
# reapctl says where to go instead, in one line.
for cmd in status containers leaks "show $A" "wait $A --timeout 1" "reports --after 0"; do
  # shellcheck disable=SC2086 # cmd is a command and its arguments
  expect 125 "$CTL" "${TCP[@]}" $cmd
  err_has "token-file"
  err_has "admin socket"
  err_has "status.token_file"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$cmd over TCP without a token: not one line: $(cat "$T/err")"
done
expect 125 "$CTL" "${TCP[@]}" reports --follow
err_has "status.token_file"
ok "the read API over TCP without a token: 125, one line naming --token-file, status.token_file and the admin socket"

expect 0 "$CTL" "${ADMIN[@]}" containers
grep -qx '{"containers":\[\]}' "$T/out" || fail "containers: $(cat "$T/out")"
expect 0 "$CTL" "${ADMIN[@]}" leaks
expect 125 "$CTL" "${ADMIN[@]}" show "$A"
err_has "does not track"
ok "containers, leaks; show of an unknown id is 125"

t0=$(ms)
expect 125 "$CTL" "${ADMIN[@]}" wait "$A" --timeout 3
took=$(($(ms) - t0))
err_has "unknown container"
[ "$took" -lt 6000 ] || fail "wait took $took ms"
ok "wait of an unknown container: 125 ($took ms)"

expect 0 "$CTL" "${ADMIN[@]}" reports
[ ! -s "$T/out" ] || fail "reports: $(cat "$T/out")"
expect 0 "$CTL" "${ADMIN[@]}" reports --dead --limit 5 --after 0
[ ! -s "$T/out" ] || fail "reports --dead: $(cat "$T/out")"
ok "reports: none yet"

"$CTL" "${ADMIN[@]}" reports --follow >"$T/follow.out" 2>"$T/follow.err" &
fpid=$!
sleep 1
kill -0 "$fpid" 2>/dev/null || fail "follow ended: $(cat "$T/follow.err")"
kill -TERM "$fpid"
wait "$fpid" 2>/dev/null || true
[ ! -s "$T/follow.out" ] || fail "follow printed: $(cat "$T/follow.out")"
ok "reports --follow runs until killed"

expect 0 "$CTL" "${ADMIN[@]}" requeue --all-dead
grep -q '"requeued":0' "$T/out" || fail "requeue --all-dead: $(cat "$T/out")"
expect 125 "$CTL" "${ADMIN[@]}" requeue 0123456789abcdef0123456789abcdef
err_has "no report"
ok "requeue --all-dead: nothing; an unknown report is 125"

expect 0 "$CTL" "${ADMIN[@]}" drain --timeout 2
grep -q '"drained":true' "$T/out" || fail "drain: $(cat "$T/out")"
ok "drain: nothing cleaning or pending"

expect 125 "$CTL" "${TCP[@]}" requeue --all-dead
err_has "admin socket"
expect 125 "$CTL" "${TCP[@]}" drain --timeout 1
err_has "admin socket"
ok "write commands on the TCP listener without a token: 125, pointing at the admin socket"

if [ -n "${VG+x}" ]; then
  expect 1 "${VG[@]}" "$CTL" "${ADMIN[@]}" status
  expect 0 "${VG[@]}" "$CTL" "${ADMIN[@]}" requeue --all-dead
  ok "valgrind: clean against reapd"
fi

# ---- the same reapd with a token ----------------------------------------

kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
pid=""
printf 'status-tok-%s\n' "$RANDOM$RANDOM" >"$T/status.token"
chmod 600 "$T/status.token"
printf 'not-the-token\n' >"$T/wrong.token"
STATUS_TOKEN_FILE="$T/status.token" start_reapd_no_engine
TCP=(--url "http://127.0.0.1:$port")
expect 1 "$CTL" "${TCP[@]}" --token-file "$T/status.token" status
grep -q '"ready":false' "$T/out" || fail "status with the token: $(cat "$T/out")"
expect 0 "$CTL" "${TCP[@]}" --token-file "$T/status.token" containers
grep -qx '{"containers":\[\]}' "$T/out" || fail "containers with the token: $(cat "$T/out")"
expect 0 "$CTL" "${TCP[@]}" --token-file "$T/status.token" reports --container "$A"
REAPD_TOKEN_FILE="$T/status.token" expect 1 "$CTL" "${TCP[@]}" status
ok "the read API over TCP with the token (--token-file, \$REAPD_TOKEN_FILE)"

expect 125 "$CTL" "${TCP[@]}" --token-file "$T/wrong.token" status
err_has "refused the token of $T/wrong.token"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a wrong token: not one line: $(cat "$T/err")"
expect 125 "$CTL" "${TCP[@]}" status
err_has "status.token_file"
ok "a wrong token or none: 125, one line"

expect 125 "$CTL" "${TCP[@]}" --token-file "$T/status.token" requeue --all-dead
err_has "read-only"
expect 125 "$CTL" "${TCP[@]}" --token-file "$T/status.token" drain --timeout 1
err_has "admin socket"
ok "write commands on the TCP listener with the token: 125, read-only, pointing at the admin socket"

