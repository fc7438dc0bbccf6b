#!/usr/bin/env bash
# docs/openapi.yaml is right about reapd:
# - it is a valid OpenAPI 3.0 document (JSON::Validator, with the
#   specification the library ships: no network);
# - a real reapd, against the simulated engine (tests/tools/simengine) and
#   a stand-in upstream (tests/tools/upstream_receiver), and a second one
#   without an engine against a scripted containerd, answer every route
#   of their status listeners (with and without a token) and of their
#   admin sockets, errors included, as the document says: each answer's
#   status, headers and body are validated against the operation the
#   document gives for its method and path, and each request's parameters
#   against that operation (tests/tools/openapi_check.pl);
# - the check can fail: copies of the docs, each broken in one way (a
#   body, a header, the error body, the report schema the document refers
#   to, a parameter's bound, a status left out, a media type, the document
#   itself), are each refused.
# Needs Perl's JSON::Validator (Debian: libjson-validator-perl) and, for
# a scripted containerd, Python's h2 (Debian: python3-h2).
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin openapi "$@"
DOC=$SRC/docs/openapi.yaml
CHECK=$SRC/tests/tools/openapi_check.pl
TOOLS=$(dirname "$BIN")/tests/tools
for f in "$DOC" "$SRC/docs/report.schema.json" "$CHECK" "$TOOLS/simengine" "$TOOLS/upstream_receiver"; do
  [ -e "$f" ] || fail "missing $f"
done
perl -MJSON::Validator::Schema::OpenAPIv3 -e 1 2>/dev/null ||
  fail "JSON::Validator not installed for perl (scripts/deps installs Debian's libjson-validator-perl)"
# Debian's python3 (its h2 package), whatever python3 comes first in PATH.
/usr/bin/python3 -c 'import h2' 2>/dev/null ||
  fail "h2 not installed for /usr/bin/python3 (scripts/deps installs Debian's python3-h2)"
t0=$(date +%s)

# ---- the document itself ----------------------------------------------

perl "$CHECK" "$DOC" >"$T/doc.out" 2>&1 || fail "the document: $(cat "$T/doc.out")"
ok "docs/openapi.yaml is a valid OpenAPI document ($(grep -o '[0-9]* paths, [0-9]* responses declared' "$T/doc.out"))"

# ---- a reapd with an engine, an upstream and a token ------------------

# wait_line FILE LINE: until FILE has LINE (5 s).
wait_line() {
  local _
  for _ in $(seq 1 50); do
    grep -qx "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no '$2' in $1: $(cat "$1")"
}

pids=()
_test_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  _cli_cleanup
}
trap _test_cleanup EXIT

"$TOOLS/upstream_receiver" --record "$T/received.jsonl" --port-file "$T/up.port" \
  >"$T/up.out" 2>"$T/up.err" &
pids+=($!)
wait_line "$T/up.out" ready
up=$(cat "$T/up.port")
# The first delivery is refused (a dead letter), the next ones hang (pending).
curl -sf "http://127.0.0.1:$up/_control?mode=400&times=1&then=hang" >/dev/null ||
  fail "the upstream's control"

# Three managed containers; two of them exit (code 3) once told to go.
"$TOOLS/simengine" --socket "$T/engine.sock" --containers 3 --exit-rate 20 \
  --exit-count 2 --no-replace --exit-code 3 >"$T/engine.out" 2>"$T/engine.err" &
pids+=($!)
wait_line "$T/engine.out" ready

TOKEN=openapi-token-1
printf '%s\n' "$TOKEN" >"$T/token"
chmod 600 "$T/token"
port=$(free_port)
cat >"$T/reapd.json" <<JSON
{ "node": "openapi-node", "state_dir": "$T/state",
  "docker": { "socket": "$T/engine.sock" },
  "containerd": { "socket": "off" },
  "status": { "listen": "127.0.0.1:$port", "token_file": "$T/token" },
  "admin": { "socket": "$T/admin.sock" },
  "upstream": { "url": "http://127.0.0.1:$up/ingest", "timeout_ms": 500,
                "retry_base_ms": 100, "retry_max_ms": 500 },
  "policies": [ { "name": "managed",
                  "match": { "labels": { "reapd.managed": "true" } },
                  "action": "remove" } ] }
JSON
"$BIN" -c "$T/reapd.json" 2>"$T/log" &
pid=$!

# admin PATH: a GET on the admin socket, the body on stdout.
admin() { curl -sf --unix-socket "$T/admin.sock" "http://localhost$1"; }
# until_true SECONDS CMD...: polls CMD every 0.1 s.
until_true() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    kill -0 "$pid" 2>/dev/null || fail "reapd died"
    sleep 0.1
  done
}
ready() { admin /readyz >/dev/null 2>&1; }
until_true 10 ready || fail "reapd not ready: $(admin /readyz)"

# ---- recording ----------------------------------------------------------

# call NAME STATUS WHERE METHOD TARGET [CURL_ARGS...]: one request; its
# answer goes to $T/c/K.h (headers) and $T/c/K.b (body), and a line for
# the checker to $T/cases. WHERE: admin (the admin socket), tcp (the
# status listener without a token), tcp+token, tcp+badtoken, bare (the
# second reapd's status listener), bare-admin (its admin socket).
mkdir -p "$T/c"
k=0
call() {
  local name=$1 want=$2 where=$3 method=$4 target=$5 url
  shift 5
  k=$((k + 1))
  local h=$T/c/$k.h b=$T/c/$k.b
  local args=(-s -D "$h" --max-time "${MAXT:-30}")
  case $method in
  HEAD) args+=(-I -o /dev/null) && : >"$b" ;;
  GET) args+=(-o "$b") ;;
  *) args+=(-X "$method" -o "$b") ;;
  esac
  case $where in
  admin) args+=(--unix-socket "$T/admin.sock") && url=http://localhost ;;
  bare-admin) args+=(--unix-socket "$T/bare/admin.sock") && url=http://localhost ;;
  tcp) url=http://127.0.0.1:$port ;;
  tcp+token) args+=(-H "Authorization: Bearer $TOKEN") && url=http://127.0.0.1:$port ;;
  tcp+badtoken) args+=(-H "Authorization: Bearer not-$TOKEN") && url=http://127.0.0.1:$port ;;
  bare) url=http://127.0.0.1:$bport ;;
  *) fail "call: where is $where" ;;
  esac
  curl "${args[@]}" "$@" "$url$target" 2>"$T/c/$k.err" || true
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$where: $name" "$method" "$target" "$want" "$h" "$b" >>"$T/cases"
}

# A report stream opened before the exits: it gets them live.
curl -sN --unix-socket "$T/admin.sock" -D "$T/c/live.h" -o "$T/c/live.b" \
  http://localhost/v1/reports/stream 2>/dev/null &
live=$!
pids+=("$live")
streams() { admin /metrics | awk '$1 == "reapd_api_streams" { print $2 }'; }
streams_are() { [ "$(streams)" = "$1" ]; }
until_true 5 streams_are 1 || fail "the live stream did not open"

curl -sf --unix-socket "$T/engine.sock" -X POST http://localhost/sim/go >/dev/null ||
  fail "the engine's /sim/go"
outbox() { admin /v1/status | jq -ce '.outbox | .dead == 1 and .pending == 1' >/dev/null 2>&1; }
until_true 15 outbox || fail "not one dead and one pending report: $(admin /v1/status)"
lines() { [ "$(grep -c . "$T/c/live.b" 2>/dev/null)" = 2 ]; }
until_true 5 lines || fail "the live stream did not get both reports: $(cat "$T/c/live.b")"
kill "$live"
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "admin: the stream, live" GET /v1/reports/stream 200 \
  "$T/c/live.h" "$T/c/live.b" >>"$T/cases"

admin /v1/reports >"$T/reports.json"
DEAD_ID=$(jq -r '.reports[] | select(.delivery == "dead") | .report_id' "$T/reports.json")
DEAD_CID=$(jq -r '.reports[] | select(.delivery == "dead") | .report.container_id' "$T/reports.json")
PEND_CID=$(jq -r '.reports[] | select(.delivery == "pending") | .report.container_id' "$T/reports.json")
RUN_CID=$(admin /v1/containers | jq -r '.containers[] | select(.state == "running") | .container_id')
for v in DEAD_ID DEAD_CID PEND_CID RUN_CID; do
  if [ -z "${!v}" ] || [ "${!v}" = null ]; then fail "no $v: $(cat "$T/reports.json")"; fi
done
NONE=$(printf '0%.0s' {1..64})
ok "reapd reported two exits (one dead letter, one pending) and tracks a running container"

# ---- every route -------------------------------------------------------

for w in admin tcp tcp+token; do
  call "probe" 200 "$w" GET /livez
  call "probe" 200 "$w" HEAD /livez
  call "probe" 200 "$w" GET /readyz
  call "probe" 200 "$w" HEAD /readyz
done
call "probe, another method" 405 admin POST /livez
call "probe, another method" 405 tcp DELETE /readyz

call "metrics" 200 admin GET /metrics
call "metrics" 200 admin HEAD /metrics
call "metrics" 200 tcp+token GET /metrics
call "metrics without the token" 401 tcp GET /metrics
call "metrics with a wrong token" 401 tcp+badtoken GET /metrics
call "metrics, another method" 405 admin PUT /metrics

for route in /v1/status /v1/containers "/v1/containers/$RUN_CID" /v1/leaks /v1/config \
  /v1/schema/report /v1/reports; do
  call "read route" 200 admin GET "$route"
  call "read route" 200 admin HEAD "$route"
  call "read route" 200 tcp+token GET "$route"
  call "read route without the token" 401 tcp GET "$route"
done
call "read route with a wrong token" 401 tcp+badtoken GET /v1/containers
call "read route, HEAD without the token" 401 tcp HEAD /v1/status
call "read route, another method" 405 admin POST /v1/containers
call "read route, another method" 405 admin PATCH /v1/status
call "read route, another method" 405 tcp+token OPTIONS /v1/config
call "read route, another method" 405 admin DELETE "/v1/containers/$RUN_CID"
call "container not tracked" 404 admin GET "/v1/containers/$NONE"
call "container not tracked" 404 tcp+token HEAD "/v1/containers/$NONE"

R=/v1/containers/$DEAD_CID/report
call "report" 200 admin GET "$R"
call "report" 200 admin HEAD "$R"
call "report, waited for" 200 admin GET "$R?wait=1"
call "report" 200 tcp+token GET "/v1/containers/$PEND_CID/report"
call "report without the token" 401 tcp GET "$R"
call "report of a running container" 202 admin GET "/v1/containers/$RUN_CID/report"
call "report of a running container, waited for" 202 admin GET "/v1/containers/$RUN_CID/report?wait=1"
call "report of an unknown container" 404 admin GET "/v1/containers/$NONE/report"
call "report of an unknown container" 404 tcp+token GET "/v1/containers/$NONE/report?wait=1"
call "wait below its bound" 400 admin GET "$R?wait=0"
call "wait above its bound" 400 admin GET "$R?wait=301"
call "wait not a number" 400 admin GET "$R?wait=soon"
call "wait given twice" 400 admin GET "$R?wait=1&wait=2"
call "unknown query parameter" 400 admin GET "$R?timeout=1"
call "report, another method" 405 admin POST "$R"

call "cursor" 200 admin GET "/v1/reports?after=0"
call "cursor, a page" 200 admin GET "/v1/reports?after=0&limit=1"
call "cursor at the end" 200 admin GET "/v1/reports?after=9223372036854775807"
call "largest page" 200 admin GET "/v1/reports?limit=1000"
call "by state" 200 admin GET "/v1/reports?state=dead"
call "by container" 200 tcp+token GET "/v1/reports?container_id=$DEAD_CID&after=0"
call "limit below its bound" 400 admin GET "/v1/reports?limit=0"
call "limit above its bound" 400 admin GET "/v1/reports?limit=1001"
call "after below its bound" 400 admin GET "/v1/reports?after=-1"
call "after above its bound" 400 admin GET "/v1/reports?after=9223372036854775808"
call "limit not an integer" 400 admin GET "/v1/reports?limit=1.5"
call "unknown state" 400 admin GET "/v1/reports?state=lost"
call "container_id not a full id" 400 tcp+token GET "/v1/reports?container_id=abc"
call "after given twice" 400 admin GET "/v1/reports?after=1&after=2"
call "unknown query parameter" 400 admin HEAD "/v1/reports?order=asc"

MAXT=1 call "the stream, from a cursor" 200 admin GET "/v1/reports/stream?after=0"
MAXT=1 call "the stream, from a cursor" 200 tcp+token GET "/v1/reports/stream?after=1"
call "the stream, HEAD" 405 admin HEAD /v1/reports/stream
call "the stream, after below its bound" 400 admin GET "/v1/reports/stream?after=-1"
call "the stream, after not a number" 400 admin GET "/v1/reports/stream?after=last"
call "the stream without the token" 401 tcp GET /v1/reports/stream
call "the stream, HEAD without the token" 401 tcp HEAD /v1/reports/stream
call "the stream, HEAD, after below its bound" 400 admin HEAD "/v1/reports/stream?after=-1"

# The admin writes.
RQ=/v1/reports/$DEAD_ID/requeue
call "drain, a report pending" 202 admin POST /v1/drain
call "drain, wait below its bound" 400 admin POST "/v1/drain?wait=0"
big=$(printf 'x%.0s' {1..1100})
for route in /v1/drain /v1/audit /v1/reports/requeue "$RQ" /v1/status; do
  call "a body over 1 KiB" 413 admin POST "$route" --data-binary "$big"
done
call "requeue a query" 400 admin POST "$RQ?state=dead"
call "requeue a dead letter" 200 admin POST "$RQ"
call "requeue an unknown report" 404 admin POST /v1/reports/no-such-report/requeue
call "requeue, a report id of 64 characters" 404 admin POST "/v1/reports/$(printf 'r%.0s' {1..64})/requeue"
call "requeue, a report id of 65 characters: no route" 405 admin POST "/v1/reports/$(printf 'r%.0s' {1..65})/requeue"
call "requeue all dead, without state" 400 admin POST /v1/reports/requeue
call "requeue all, another state" 400 admin POST "/v1/reports/requeue?state=pending"
call "audit, containerd off" 409 admin POST /v1/audit
call "audit, wait above its bound" 400 admin POST "/v1/audit?wait=301"
for route in /v1/drain /v1/audit /v1/reports/requeue "$RQ"; do
  call "write route, not POST" 405 admin GET "$route"
  call "write route on the status listener" 405 tcp+token POST "$route"
  call "write route on the status listener without the token" 401 tcp POST "$route"
done
call "write route, not POST" 405 admin HEAD /v1/drain
call "write route, not POST" 405 admin DELETE "$RQ"

# Deliveries go through now: the hanging one is retried, the requeued one
# sent again. A drain held until both are delivered.
curl -sf "http://127.0.0.1:$up/_control?mode=200" >/dev/null || fail "the upstream's control"
call "drain, waited for" 200 admin POST "/v1/drain?wait=30"
call "requeue a delivered report" 409 admin POST "$RQ"
call "requeue all dead" 200 admin POST "/v1/reports/requeue?state=dead"
call "report, now delivered" 200 admin GET "$R"

# Paths that are no route.
call "no route" 404 admin GET /v1/nothing
call "no route" 404 admin HEAD /nothing
call "no route" 404 admin GET /v1
call "no route: a short container id" 404 admin GET /v1/containers/abc
call "no route: an upper-case container id" 404 tcp+token GET "/v1/containers/${RUN_CID^^}/report"
call "no route, another method" 405 admin POST /nothing
call "no route" 404 tcp+token GET /nothing
call "no route without the token" 401 tcp GET /nothing

# Streams: 16 at most per listener, the 17th refused.
until_true 5 streams_are 0 || fail "streams still open: $(streams)"
spids=()
for _ in $(seq 1 16); do
  curl -sN -H "Authorization: Bearer $TOKEN" -o /dev/null "http://127.0.0.1:$port/v1/reports/stream" 2>/dev/null &
  spids+=($!)
  pids+=($!)
done
until_true 5 streams_are 16 || fail "not 16 streams open: $(streams)"
call "the 17th stream" 503 tcp+token GET /v1/reports/stream
kill "${spids[@]}" 2>/dev/null || true
ok "recorded $k answers of the reapd with an engine"

# ---- a second reapd: no engine, no token, a scripted containerd, one connection

# containerd's task list over gRPC (HTTP/2 without TLS): an empty list;
# with $T/bare/slow, 3 s late; with $T/bare/fail, grpc-status 14. The
# events subscription is held open; other calls are grpc-status 12.
mkdir -p "$T/bare"
cat >"$T/bare/containerd.py" <<'PY'
import os, socket, sys, threading, time
import h2.config, h2.connection, h2.events

sock_path, flags = sys.argv[1], sys.argv[2]
GRPC = [(":status", "200"), ("content-type", "application/grpc")]


def serve(conn):
    h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(
        client_side=False, header_encoding="utf-8"))
    lock = threading.Lock()

    def flush():
        out = h2c.data_to_send()
        if out:
            conn.sendall(out)

    def answer(sid, path):
        listing = path.endswith(".Tasks/List")
        if listing and os.path.exists(flags + "/slow"):
            time.sleep(3)
        with lock:
            try:
                if listing and os.path.exists(flags + "/fail"):
                    h2c.send_headers(sid, GRPC + [("grpc-status", "14")], end_stream=True)
                elif listing:
                    h2c.send_headers(sid, GRPC)
                    h2c.send_data(sid, b"\0\0\0\0\0")
                    h2c.send_headers(sid, [("grpc-status", "0")], end_stream=True)
                elif path.endswith(".Events/Subscribe"):
                    h2c.send_headers(sid, GRPC)
                else:
                    h2c.send_headers(sid, GRPC + [("grpc-status", "12")], end_stream=True)
                flush()
            except Exception:
                pass

    with lock:
        h2c.initiate_connection()
        flush()
    paths = {}
    while True:
        try:
            data = conn.recv(65536)
        except OSError:
            break
        if not data:
            break
        with lock:
            events = h2c.receive_data(data)
            for ev in events:
                if isinstance(ev, h2.events.DataReceived):
                    h2c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            flush()
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                paths[ev.stream_id] = dict(ev.headers).get(":path", "")
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id in paths:
                threading.Thread(target=answer, args=(ev.stream_id, paths[ev.stream_id]),
                                 daemon=True).start()
    conn.close()


srv = socket.socket(socket.AF_UNIX)
srv.bind(sock_path)
srv.listen(16)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
/usr/bin/python3 "$T/bare/containerd.py" "$T/bare/containerd.sock" "$T/bare" \
  >"$T/bare/containerd.out" 2>"$T/bare/containerd.err" &
pids+=($!)
wait_line "$T/bare/containerd.out" ready

bport=$(free_port)
cat >"$T/bare/reapd.json" <<JSON
{ "state_dir": "$T/bare/state",
  "docker": { "socket": "$T/bare/no-engine.sock", "reconnect_max_ms": 1000 },
  "containerd": { "socket": "$T/bare/containerd.sock" },
  "status": { "listen": "127.0.0.1:$bport", "max_connections": 1 },
  "admin": { "socket": "$T/bare/admin.sock" } }
JSON
"$BIN" -c "$T/bare/reapd.json" 2>"$T/bare/log" &
bpid=$!
pids+=("$bpid")
bare_up() { [ -S "$T/bare/admin.sock" ] && curl -s -o /dev/null "http://127.0.0.1:$bport/livez"; }
until_true 10 bare_up || fail "the second reapd did not start: $(cat "$T/bare/log")"

call "not ready" 503 bare GET /readyz
call "not ready" 503 bare HEAD /readyz
call "metrics, no token configured" 200 bare GET /metrics
call "read route, no token configured" 401 bare GET /v1/status
call "read route, no token configured" 401 bare GET "/v1/containers/$NONE/report"
call "status" 200 bare-admin GET /v1/status
call "audit" 200 bare-admin POST "/v1/audit?wait=5"
touch "$T/bare/fail"
call "audit, containerd failing" 502 bare-admin POST "/v1/audit?wait=5"
rm "$T/bare/fail"
touch "$T/bare/slow"
call "audit, containerd slower than the wait" 202 bare-admin POST "/v1/audit?wait=1"
rm "$T/bare/slow"
call "leaks, containerd on" 200 bare-admin GET /v1/leaks
call "drain, nothing to do" 200 bare-admin POST /v1/drain
call "requeue all dead, none" 200 bare-admin POST "/v1/reports/requeue?state=dead"

# The connection cap: one connection held (silent), the next refused; the
# probes are answered all the same.
exec 7<>"/dev/tcp/127.0.0.1/$bport"
sleep 0.2
for route in /metrics /v1/status /v1/containers "/v1/containers/$NONE" \
  "/v1/containers/$NONE/report" /v1/reports /v1/reports/stream /v1/leaks /v1/config \
  /v1/schema/report; do
  call "busy" 503 bare GET "$route"
done
call "busy" 503 bare HEAD /v1/reports/stream
for route in /v1/drain /v1/audit "/v1/reports/requeue?state=dead" /v1/reports/r1/requeue; do
  call "busy" 503 bare POST "$route"
done
call "busy, a probe" 200 bare GET /livez
call "busy, a probe" 503 bare GET /readyz
exec 7>&-
ok "recorded $k answers in all"
kill -TERM "$pid"
wait "$pid" || fail "reapd exited with $? on SIGTERM"
pid=""
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done

# ---- every answer against the document ---------------------------------

perl "$CHECK" "$DOC" "$T/cases" >"$T/check.out" 2>&1 || {
  grep -A8 '^not ok' "$T/check.out" >&2
  fail "answers that do not match docs/openapi.yaml ($(tail -1 "$T/check.out"))"
}
reached=$(grep -o 'responses reached: .*' "$T/check.out")
ok "every answer ($k) matches docs/openapi.yaml; $reached"
grep '^# not reached' "$T/check.out" || true

# ---- the check can fail -------------------------------------------------

# broken NAME FILE SED_EXPR WANT: a copy of the docs with FILE changed by
# SED_EXPR, checked in the background; it must be refused, with WANT in
# the checker's output (looked at once all are done).
declare -A wants=()
mpids=()
broken() {
  local name=$1 file=$2 expr=$3 d=$T/broken/$1
  mkdir -p "$d"
  cp "$DOC" "$SRC/docs/report.schema.json" "$d/"
  sed -i -e "$expr" "$d/$file"
  cmp -s "$d/$file" "$SRC/docs/$file" && fail "broken $name: '$expr' changed nothing in $file"
  wants[$name]=$4
  {
    rc=0
    perl "$CHECK" "$d/openapi.yaml" "$T/cases" >"$d/out" 2>&1 || rc=$?
    echo "$rc" >"$d/rc"
  } &
  mpids+=($!)
}
broken body openapi.yaml '/^    Live:/,/enum/s/enum: \[true\]/enum: [false]/' \
  'GET /livez -> 200'
broken header openapi.yaml '/Reapd-Report-Seq:$/,/minimum/s/minimum: 1$/minimum: 1000/' \
  'Reapd-Report-Seq'
broken report report.schema.json 's/"const": 1/"const": 2/' \
  '/body/schema_version'
broken bound openapi.yaml '/^    Limit:/,/maximum/s/maximum: 1000/maximum: 2000/' \
  'the document takes the request and reapd answered 400'
broken error openapi.yaml '/^    Error:/,/required/s/required: \[error\]/required: [error, code]/' \
  '/body/code: Missing property'
broken undeclared openapi.yaml '/^  \/v1\/audit:/,/^components:/{/"409":/,/Error"$/d}' \
  'status 409 is not declared for POST /v1/audit'
broken spec openapi.yaml 's/^      in: query$/      in: querystring/' \
  'Not in enum list: query'
broken media openapi.yaml 's|application/x-ndjson:|application/json-seq:|' \
  'Expected application/json-seq'
wait "${mpids[@]}" || true
for name in "${!wants[@]}"; do
  d=$T/broken/$name
  [ "$(cat "$d/rc")" = 1 ] || fail "the check did not refuse the docs broken ($name): exit $(cat "$d/rc"): $(tail -3 "$d/out")"
  grep -q -- "${wants[$name]}" "$d/out" ||
    fail "broken $name: no '${wants[$name]}' in $(grep -A3 '^not ok' "$d/out")"
done
ok "the check refuses each of ${#wants[@]} broken copies of the docs"

echo "# took $(($(date +%s) - t0)) s"
echo "$n passed, 0 failed"
