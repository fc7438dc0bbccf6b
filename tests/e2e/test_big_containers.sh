#!/usr/bin/env bash
# Containers of any size, side by side on one real engine: commands,
# environments, labels and names far over anything reapd keeps (the engine
# sets no limit on them; docs/limits.md has the measured figures),
# one the kernel refuses to exec and one the engine cannot start.
# reapd must become ready, report every managed exit once with its true
# code, remove those containers, leave the unmanaged ones alone, and say
# in the report when it kept only part of the labels or the name.
# The containers are created through the Engine API (curl on the engine's
# socket): the docker CLI cannot pass values over 64 KiB.
# Usage: bash tests/e2e/test_big_containers.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

KIB=1024
MIB=$((1024 * 1024))
BODY=(python3 "$E2E_LIB_DIR/big_body.py")
API=http://localhost/v1.41

# api_create NAME BODY_ARGS...: POST /containers/create with the body
# big_body.py writes for BODY_ARGS; echo the id.
api_create() {
  local name=$1 body out code
  shift
  body="$D/big/body.json"
  "${BODY[@]}" "$@" >"$body" || fail "big_body.py $* failed"
  out=$(curl -sS -m 60 --unix-socket "$D/docker.sock" \
    -H 'Content-Type: application/json' --data-binary @"$body" \
    -w '\n%{http_code}' "$API/containers/create?name=$name") ||
    fail "create ${name:0:40}: curl failed"
  code=${out##*$'\n'}
  [ "$code" = 201 ] ||
    fail "create ${name:0:40} ($(stat -c %s "$body") bytes): HTTP $code: ${out%$'\n'*}"
  rm -f "$body"
  jq -r .Id <<<"${out%$'\n'*}"
}

# api_start ID: POST /containers/{id}/start; echo "CODE BODY".
api_start() {
  local out
  out=$(curl -sS -m 60 --unix-socket "$D/docker.sock" -X POST \
    -w '\n%{http_code}' "$API/containers/$1/start") ||
    fail "start ${1:0:12}: curl failed"
  echo "${out##*$'\n'} ${out%$'\n'*}"
}

# started ID: start ID; the engine must accept the start.
started() {
  local r
  r=$(api_start "$1")
  [ "${r%% *}" = 204 ] || fail "start ${1:0:12}: $r"
}

# engine_state ID: "Status ExitCode" from the engine's inspect (jq reads
# the whole answer, whatever its size).
engine_state() {
  curl -sS -m 30 --unix-socket "$D/docker.sock" "$API/containers/$1/json" |
    jq -r '"\(.State.Status) \(.State.ExitCode)"'
}

# state_is ID "STATUS CODE": for wait_until.
# shellcheck disable=SC2317  # called through wait_until
state_is() {
  [ "$(engine_state "$1")" = "$2" ]
}

# big_reapd_start: lib.sh's reapd_start, but on a /readyz that does not
# come the failure names what reapd logged instead (its relist errors).
big_reapd_start() {
  local deadline
  REAPD_PORT=$(pick_port) || fail "no free port in 20000-32767"
  REAPD_URL="http://127.0.0.1:$REAPD_PORT"
  reapd_config
  "$REAPD_BIN" -c "$D/reapd.json" </dev/null >>"$D/reapd.log" 2>&1 &
  REAPD_PID=$!
  deadline=$(($(now_ms) + 30000))
  until [ "$(readyz_code)" = 200 ]; do
    pid_alive "$REAPD_PID" || fail "reapd exited while waiting for /readyz"
    if [ "$(now_ms)" -ge "$deadline" ]; then
      fail "reapd /readyz not 200 within 30 s; its warnings: $(grep -m 3 -E \
        'relist failed|longer than|too (big|large|many)' "$D/reapd.log" || echo none)"
    fi
    sleep 0.2
  done
  log "reapd ready (pid $REAPD_PID, $REAPD_URL)"
}

# one_report CID: the only report line for CID (60 s at most). Without
# one, the failure shows what reapd logged about the container.
one_report() {
  local id=$1 deadline n
  deadline=$(($(now_ms) + 60000))
  until [ "$(report_count "$id")" -gt 0 ]; do
    pid_alive "$REAPD_PID" || fail "reapd exited while waiting for a report"
    if [ "$(now_ms)" -ge "$deadline" ]; then
      fail "no report for ${id:0:12} within 60 s; reapd's warnings about it: $(
        grep -F "\"container\":\"$id\"" "$D/reapd.log" |
          grep -m 3 -E '"level":"(warn|error)"' | cut -c 1-300 || echo none)"
    fi
    sleep 0.2
  done
  n=$(report_count "$id")
  [ "$n" -eq 1 ] || fail "${id:0:12}: $n report lines, expected exactly one"
  report_lines "$id"
}

# assert_exit LINE CID CODE ENGINE_CODE WHAT: a removed container's report
# with its true code, settled by inspect, and the die event's code (null
# when reapd saw no die event).
assert_exit() {
  local line=$1 id=$2 code=$3 ecode=$4 what=$5
  assert_report_basic "$line" "$id"
  assert_json "$line" --argjson c "$code" '.exit_code == $c' "$what: exit_code"
  assert_json "$line" '.exit_code_source == "inspect"' "$what: exit_code_source"
  assert_json "$line" --argjson c "$ecode" '.engine_exit_code == $c' \
    "$what: engine_exit_code"
  assert_json "$line" '.anomalies | index("engine_exit_code_mismatch") == null' \
    "$what: no engine_exit_code_mismatch"
  assert_json "$line" '.labels["reapd.managed"] == "true"' "$what: reapd.managed label kept"
  assert_gone "$id"
}

# report_bytes LINE: the report line's length in bytes, newline included.
report_bytes() {
  printf '%s\n' "$1" | wc -c
}

engine_start
image_build
mkdir -p "$D/big"
tag=$$
declare -A code=()

# ---- before reapd starts: what the first relist must get through -------
# Created, never started, not managed: the list answer carries each one's
# whole command (measured: 1,049,270 bytes for the 1 MiB one).
u100k=$(api_create "big-u100k-$tag" --cmd-bytes $((100 * KIB)) --exit 3)
u1m=$(api_create "big-u1m-$tag" --cmd-bytes $MIB --exit 3)
# Managed, exited before reapd starts: the relist lists it exited with its
# 300 KiB label, and reapd's inspect reads its 70 KiB variable.
pre=$(api_create "big-pre-$tag" --managed --exit 37 --env-var $((70 * KIB)) \
  --label team=e2e --labels 1 --label-bytes $((300 * KIB)))
started "$pre"
code[$pre]=37
wait_until 30 "big-pre exited" state_is "$pre" "exited 37"
log "unmanaged ${u100k:0:12} ${u1m:0:12}, exited before start ${pre:0:12}"

big_reapd_start

# ---- managed containers, each with its own exit code --------------------
env70k=$(api_create "big-env70k-$tag" --managed --exit 31 --env-var $((70 * KIB)))
code[$env70k]=31
# Many variables, 1.5 MiB in all: under the kernel's 2 MiB for argv and
# environment together, so the command runs.
envmany=$(api_create "big-envmany-$tag" --managed --exit 32 \
  --env-total $((3 * MIB / 2)) --env-each $((4 * KIB)))
code[$envmany]=32
# 4 MiB of environment: the engine takes it and starts the container, but
# the kernel's execve refuses it (E2BIG): the container exits 1 (measured).
env4m=$(api_create "big-env4m-$tag" --managed --exit 38 --env-total $((4 * MIB)))
code[$env4m]=1
labels5k=$(api_create "big-labels5k-$tag" --managed --exit 33 --labels 5000)
code[$labels5k]=33
labels300k=$(api_create "big-labels300k-$tag" --managed --exit 34 \
  --label team=e2e --labels 4 --label-bytes $((300 * KIB)))
code[$labels300k]=34
cmd100k=$(api_create "big-cmd100k-$tag" --managed --exit 35 --cmd-bytes $((100 * KIB)))
code[$cmd100k]=35
# A 64 KiB name: the engine puts it in every event, list entry and inspect.
longname="big-name-$tag-"
longname=$longname$(printf 'n%.0s' $(seq 1 $((64 * KIB - ${#longname}))))
name64k=$(api_create "$longname" --managed --exit 40)
code[$name64k]=40
control=$(api_create "big-control-$tag" --managed --exit 36 --label team=e2e)
code[$control]=36
# One label of 64 MiB: every event of this container is 67 MB (measured),
# and the engine starts it. reapd reads those events, keeps a prefix of
# the label, and reports the exit.
label64m=$(api_create "big-label64m-$tag" --managed --exit 41 \
  --label team=e2e --labels 1 --label-bytes $((64 * MIB)))
code[$label64m]=41
for id in "$env70k" "$envmany" "$env4m" "$labels5k" "$labels300k" \
  "$cmd100k" "$name64k" "$control" "$label64m"; do
  started "$id"
done
log "managed containers started"

# 16 MiB of environment: the engine accepts the container, but the start
# fails (the spec is over containerd's 16 MiB gRPC message limit, measured:
# HTTP 500, state "created", ExitCode 128, and no start or die event). It
# never ran, so it is not an exit: reapd tracks it and leaves it alone.
env16m=$(api_create "big-env16m-$tag" --managed --exit 39 --env-total $((16 * MIB)))
r=$(api_start "$env16m")
case $r in
"500 "*"larger than max"*) ;;
*) fail "start of the 16 MiB environment: expected the engine's 500 (gRPC limit), got: ${r:0:300}" ;;
esac
assert_eq "created 128" "$(engine_state "$env16m")" "16 MiB environment: engine state"

# ---- every managed exit reported once, with its true code ---------------
for id in "$pre" "$env70k" "$envmany" "$env4m" "$labels5k" "$labels300k" \
  "$cmd100k" "$name64k" "$control" "$label64m"; do
  line=$(one_report "$id") || exit 1
  c=${code[$id]}
  name=$(jq -r '.name[:40]' <<<"$line")
  # big-pre died before reapd subscribed: no die event reached reapd.
  ecode=$c
  [ "$id" != "$pre" ] || ecode=null
  assert_exit "$line" "$id" "$c" "$ecode" "$name"
  log "$name: exit $c reported, $(report_bytes "$line") bytes, anomalies $(jq -c .anomalies <<<"$line")"
  [ "$(report_bytes "$line")" -lt $((4 * MIB)) ] ||
    fail "$name: report line of $(report_bytes "$line") bytes, expected under 4 MiB"
done

# Nothing of the small ones is cut, so nothing is flagged.
for id in "$env70k" "$envmany" "$env4m" "$cmd100k" "$control"; do
  line=$(report_lines "$id")
  assert_json "$line" '.anomalies == []' "$(jq -r .name <<<"$line"): no anomalies"
done
line=$(report_lines "$control")
assert_json "$line" '.labels == {"reapd.managed": "true", "team": "e2e"}' "control: labels"

# 5,000 labels: reapd keeps the one its policy names and a bounded part of
# the others, each kept one whole, and says so.
line=$(report_lines "$labels5k")
assert_json "$line" '.anomalies | index("labels_truncated") != null' \
  "5,000 labels: anomaly labels_truncated"
assert_json "$line" '(.labels | length) < 5001' "5,000 labels: fewer kept"
# big_body.py gives label big.NNNNN the letter ("a" + NNNNN mod 26).
assert_json "$line" '[.labels | to_entries[] | select(.key | startswith("big."))
  | (.key[4:] | tonumber) as $i
  | .value == ([97 + ($i % 26)] | implode)] | all' \
  "5,000 labels: every kept label has its own value"

# Four values of 300 KiB (and big-pre's one): each kept as a prefix, the
# small label whole.
declare -A nbig=([$labels300k]=4 [$pre]=1 [$label64m]=1)
for id in "$labels300k" "$pre" "$label64m"; do
  line=$(report_lines "$id")
  what="$(jq -r .name <<<"$line")"
  assert_json "$line" --argjson n "${nbig[$id]}" \
    '[.labels | keys[] | select(startswith("big."))] | length == $n' \
    "$what: every 300 KiB label kept (cut)"
  assert_json "$line" '.anomalies | index("labels_truncated") != null' \
    "$what: anomaly labels_truncated"
  assert_json "$line" '.labels.team == "e2e"' "$what: small label kept whole"
  assert_json "$line" --argjson max $((300 * KIB)) '[.labels | to_entries[]
    | select(.key | startswith("big.")) | .value | length < $max] | all' \
    "$what: 300 KiB values cut"
  # A cut value is a prefix of the original (big_body.py's filler: the
  # seed letter, then the alphabet, repeated).
  assert_json "$line" '[.labels | to_entries[] | select(.key | startswith("big."))
    | (.key[4:] | tonumber) as $i | ([97 + ($i % 26)] | implode) as $s
    | (($s + "abcdefghijklmnopqrstuvwxyz")[:26]) as $u
    | .value as $v | ([range(0; ($v | length) / 26 + 1)] | map($u) | add)
    | startswith($v)] | all' "$what: cut values are prefixes"
done

# The 64 KiB name: a prefix of it, flagged.
line=$(report_lines "$name64k")
assert_json "$line" '.anomalies == ["metadata_truncated"]' "64 KiB name: anomaly metadata_truncated"
assert_json "$line" --arg n "$longname" '.name as $k | ($k | length) > 0
  and ($k | length) < ($n | length) and ($n | startswith($k))' \
  "64 KiB name: a prefix of the name is kept"

# ---- what reapd must not touch -------------------------------------------
for id in "$u100k" "$u1m"; do
  assert_present "$id"
  assert_eq "created 0" "$(engine_state "$id")" "unmanaged ${id:0:12}: engine state"
  assert_no_report "$id"
done
assert_present "$env16m"
assert_eq "created 128" "$(engine_state "$env16m")" "16 MiB environment: still created"
assert_no_report "$env16m"
other=$(jq -cR 'fromjson? | .container_id' "$(REPORTS)" | sort -u | wc -l)
assert_eq 10 "$other" "containers reported"

# ---- reapd stayed healthy --------------------------------------------------
assert_eq 200 "$(readyz_code)" "/readyz at the end"
# No event, however large, made reapd drop the stream and subscribe again.
assert_eq 1 "$(grep -c 'docker events: subscribed' "$D/reapd.log")" \
  "events subscriptions"
if grep -m 3 -E 'relist failed|longer than' "$D/reapd.log" >"$D/bad.log"; then
  fail "reapd could not read a container: $(cut -c 1-300 "$D/bad.log")"
fi
assert_log_clean

e2e_pass
