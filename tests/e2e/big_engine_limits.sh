#!/usr/bin/env bash
# Measures what the engine itself accepts and answers for containers of any
# size (the figures in docs/limits.md): through the Engine API on an
# isolated dockerd started by lib.sh, for each case it creates a container,
# starts it, waits for it, and prints one row: the create body, the create
# and start answers, the exit code, and the sizes of inspect, of the
# container's list entry and of its create and die events.
# Not a test (it asserts nothing); it takes about two minutes and needs
# root and some 2 GB of memory for the engine (a 64 MiB label).
# Usage: bash tests/e2e/big_engine_limits.sh
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -eEuo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (it runs its own dockerd)"
trap 'engine_stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

KIB=1024
MIB=$((1024 * 1024))
API=http://localhost/v1.41

# uri_filter JSON: JSON as a URL query value.
uri_filter() {
  jq -rn --arg f "$1" '$f | @uri'
}

# events_of ID EVENT: the engine's EVENT events for ID since the start, one
# JSON object a line (until one second from now, so the answer ends).
events_of() {
  local f
  f=$(uri_filter "{\"container\":[\"$1\"],\"event\":[\"$2\"]}")
  curl -sS -m 30 --unix-socket "$D/docker.sock" \
    "$API/events?since=$T0&until=$(($(date +%s) + 1))&filters=$f"
}

# row CASE BIG_BODY_ARGS...: measure one container and print its row.
row() {
  local case=$1 body="$D/body.json" out code id start exit ins list
  local ev_create ev_die attrs
  shift
  python3 "$E2E_LIB_DIR/big_body.py" "$@" >"$body"
  out=$(curl -sS -m 120 --unix-socket "$D/docker.sock" \
    -H 'Content-Type: application/json' --data-binary @"$body" \
    -w '\n%{http_code} %{time_total}' "$API/containers/create")
  code=${out##*$'\n'}
  if [ "${code%% *}" != 201 ]; then
    printf '| %s | %d | %s | | | | | | |\n' "$case" "$(stat -c %s "$body")" "$code"
    return 0
  fi
  id=$(jq -r .Id <<<"${out%$'\n'*}")
  out=$(curl -sS -m 120 --unix-socket "$D/docker.sock" -X POST \
    -w '\n%{http_code}' "$API/containers/$id/start")
  start=${out##*$'\n'}
  [ "$start" = 204 ] || start="$start $(jq -r .message <<<"${out%$'\n'*}" | cut -c 1-90)"
  exit=""
  if [ "${start%% *}" = 204 ]; then
    exit=$(curl -sS -m 60 --unix-socket "$D/docker.sock" -X POST \
      "$API/containers/$id/wait" | jq -r .StatusCode)
  fi
  ins=$(curl -sS -m 60 --unix-socket "$D/docker.sock" -o "$D/ins.json" \
    -w '%{size_download}' "$API/containers/$id/json")
  [ -n "$exit" ] || exit="($(jq -r '"\(.State.Status) \(.State.ExitCode)"' "$D/ins.json"))"
  list=$(curl -sS -m 60 --unix-socket "$D/docker.sock" -o /dev/null \
    -w '%{size_download}' \
    "$API/containers/json?all=1&filters=$(uri_filter "{\"id\":[\"$id\"]}")")
  ev_create=$(events_of "$id" create | wc -c)
  events_of "$id" die >"$D/die.json"
  ev_die=$(wc -c <"$D/die.json")
  attrs=$(jq -s 'if length > 0 then .[0].Actor.Attributes | length else "-" end' "$D/die.json")
  printf '| %s | %d | %s | %s | %s | %d | %d | %d | %d / %s |\n' "$case" \
    "$(stat -c %s "$body")" "$code" "$start" "$exit" "$ins" "$list" \
    "$ev_create" "$ev_die" "$attrs"
  curl -sS -m 60 --unix-socket "$D/docker.sock" -X DELETE -o /dev/null \
    "$API/containers/$id?force=1"
}

# name_row BYTES: create a small container named with BYTES letters (the
# name goes in the query string; python, since a megabyte is over the
# kernel's limit for one argument of curl).
name_row() {
  local n=$1 r
  r=$(python3 - "$D/docker.sock" "$n" <<'EOF'
import http.client, socket, sys
class Conn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path_)
c = Conn(sys.argv[1])
body = b'{"Image":"reapd-test:1","Cmd":["true"],"HostConfig":{"NetworkMode":"none"}}'
c.request("POST", "/v1.41/containers/create?name=" + "n" * int(sys.argv[2]),
          body=body, headers={"Content-Type": "application/json"})
r = c.getresponse()
d = r.read()
c2 = Conn(sys.argv[1])
start = ""
if r.status == 201:
    import json
    cid = json.loads(d)["Id"]
    c2.request("POST", "/v1.41/containers/%s/start" % cid)
    r2 = c2.getresponse()
    r2.read()
    start = str(r2.status)
print(r.status, start, d[:60].decode(errors="replace").strip())
EOF
  )
  printf '| name of %d bytes | %s |\n' "$n" "$r"
}

engine_start
image_build
T0=$(date +%s)
echo "dockerd $("$DOCKERD" --version | cut -d' ' -f3- ), $(containerd --version | cut -d' ' -f3), runc $(runc --version | sed -n 's/^runc version //p'), kernel $(uname -r)"
echo "stack rlimit $(ulimit -s) KiB; getconf ARG_MAX $(getconf ARG_MAX)"
echo
echo '| case | body B | create | start | exit | inspect B | list entry B | create event B | die event B / attrs |'
echo '|---|---|---|---|---|---|---|---|---|'
row "control" --exit 7
row "1 label value of 64 KiB" --labels 1 --label-bytes $((64 * KIB))
row "1 label value of 1 MiB" --labels 1 --label-bytes $MIB
row "1 label value of 16 MiB" --labels 1 --label-bytes $((16 * MIB))
row "1 label value of 64 MiB" --labels 1 --label-bytes $((64 * MIB))
row "1,000 labels" --labels 1000
row "5,000 labels" --labels 5000 --exit 33
row "10,000 labels" --labels 10000
row "100,000 labels" --labels 100000
row "4 label values of 300 KiB" --labels 4 --label-bytes $((300 * KIB)) --exit 34
row "1 env var of 70 KiB" --env-var $((70 * KIB)) --exit 31
row "1 env var, 131,072 B with NUL" --env-var $((128 * KIB - 5)) --exit 11
row "1 env var, 131,073 B with NUL" --env-var $((128 * KIB - 4)) --exit 11
row "1 env var of 1 MiB" --env-var $MIB --exit 11
row "env 1.5 MiB in 4 KiB vars" --env-total $((3 * MIB / 2)) --env-each $((4 * KIB)) --exit 32
row "env 2,000,000 B in 64 KiB vars" --env-total 2000000 --exit 12
row "env 2 MiB in 64 KiB vars" --env-total $((2 * MIB)) --exit 12
row "env 4 MiB in 64 KiB vars" --env-total $((4 * MIB)) --exit 12
row "env 15 MiB in 64 KiB vars" --env-total $((15 * MIB)) --exit 12
row "env 16 MiB in 64 KiB vars" --env-total $((16 * MIB)) --exit 12
row "command (sh -c script) 100 KiB" --cmd-bytes $((100 * KIB)) --exit 35
row "command 131,071 B (+NUL = 128 KiB)" --cmd-bytes $((128 * KIB - 1)) --exit 21
row "command 131,072 B" --cmd-bytes $((128 * KIB)) --exit 21
row "command 1 MiB" --cmd-bytes $MIB --exit 21
row "16 args of 64 KiB (1 MiB)" --cmd-args 16:65536 --exit 22
row "32 args of 64 KiB (2 MiB)" --cmd-args 32:65536 --exit 22
row "128 args of 131,000 B (16 MiB)" --cmd-args 128:131000 --exit 22
echo
echo '| name | create start answer |'
echo '|---|---|'
for n in 255 65536 $MIB 1052000 1100000; do name_row "$n"; done
echo
echo "all containers: GET /containers/json?all=1 answers $(curl -sS -m 60 --unix-socket "$D/docker.sock" \
  -o /dev/null -w '%{size_download} B' "$API/containers/json?all=1")"
