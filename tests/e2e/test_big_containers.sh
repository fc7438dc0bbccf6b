#!/usr/bin/env bash
# Containers of any size, side by side on one real engine.
# At reapd's limits (agent/bounds.h, docs/limits.md), each at limit-1,
# limit and limit+1: labels per container besides the policy's (256),
# bytes of those labels (64 KiB), a label key (1,024 bytes), a label value
# (4,096 bytes) and a name (4,096 bytes as sent, its leading '/' included).
# Under and at a limit everything is kept and nothing flagged; past it,
# exactly what docs/limits.md says is dropped or cut, the report says
# labels_truncated or metadata_truncated, and the metrics count it.
# Far past them (the engine sets no limit: a 1 MiB command, a 4 MiB
# environment, 5,000 labels, a 16 MiB label value, a 64 KiB name, one the
# engine cannot start): reapd stays ready and reports every managed exit
# once with its true code, keeping no more than at the limits. Every report
# line is held to the bound the limits give.
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

# The limits (agent/bounds.h).
LABELS=256
LABEL_BYTES=$((64 * KIB))
LABEL_KEY=1024
LABEL_VALUE=4096
NAME_BYTES=4096
# The longest report line a container of these tests can have: the kept
# labels' keys and values with their quotes, colon and comma (6 bytes
# each), the policy's label, name and image at their limits, 2 KiB for
# the rest (no value here needs escaping).
LINE_MAX=$((LABEL_BYTES + 6 * LABELS + 64 + NAME_BYTES + 4096 + 2 * KIB))

# str N CHAR: N times CHAR.
str() {
  printf "%$1s" '' | tr ' ' "$2"
}

engine_start
image_build
mkdir -p "$D/big"
tag=$$
declare -A code=() want=()

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

# ---- at the limits: limit-1, limit, limit+1 ------------------------------
# want[ID] is a jq test of the report for what reapd kept of ID.
# (Cases under and at different limits share a container: each is told
# by what is kept, and none of them may be flagged.)
# name_of M TAG: a container name of M bytes as sent (with its '/').
name_of() {
  local nm="big-$2-$tag-"
  echo "$nm$(str $(($1 - 1 - ${#nm})) m)"
}
# Labels besides reapd.managed (the policy's, kept whatever their number),
# under and at the limit with names under and at theirs.
n=50
for k in $((LABELS - 1)) $LABELS $((LABELS + 1)); do
  case $k in
  "$LABELS") nm=$(name_of "$NAME_BYTES" "n$k") ;;
  $((LABELS - 1))) nm=$(name_of $((NAME_BYTES - 1)) "n$k") ;;
  *) nm="big-n$k-$tag" ;;
  esac
  id=$(api_create "$nm" --managed --exit $n --labels "$k")
  code[$id]=$n
  if [ "$k" -le "$LABELS" ]; then
    want[$id]="(.labels | length) == $((k + 1)) and .name == \"$nm\" and .anomalies == []"
  else
    # The first 256 in the engine's (sorted) order; the 257th dropped.
    want[$id]="(.labels | length) == $((LABELS + 1)) and .labels[\"big.00255\"] == \"v\"
      and .labels[\"big.00256\"] == null and .anomalies == [\"labels_truncated\"]"
  fi
  n=$((n + 1))
done
# Their bytes: 15 labels big.NNNNN of 9 + 4,087 bytes, and one z of 1 +
# 4,094..4,096: 65,535, 65,536, 65,537 in all. Past 64 KiB, z is dropped.
for b in $((LABEL_BYTES - 1)) $LABEL_BYTES $((LABEL_BYTES + 1)); do
  id=$(api_create "big-b$b-$tag" --managed --exit $n --labels 15 --label-bytes 4087 \
    --label "z=$(str $((b - 15 * 4096 - 1)) z)")
  code[$id]=$n
  if [ "$b" -le "$LABEL_BYTES" ]; then
    want[$id]="(.labels | length) == 17 and (.labels.z | length) == $((b - 15 * 4096 - 1))
      and .anomalies == []"
  else
    want[$id]="(.labels | length) == 16 and .labels.z == null
      and ([.labels[] | length] | add) == 4 + 15 * 4087 and .anomalies == [\"labels_truncated\"]"
  fi
  n=$((n + 1))
done
# A key and a value, under and at their limits together; past them apart:
# a key over 1,024 bytes drops its label, a value over 4,096 keeps its
# first 4,096.
for d in -1 0; do
  k=$((LABEL_KEY + d)) v=$((LABEL_VALUE + d))
  id=$(api_create "big-kv$k-$tag" --managed --exit $n --label "$(str "$k" k)=v" \
    --label "team=$(str "$v" t)")
  code[$id]=$n
  want[$id]="(.labels | length) == 3 and .labels[\"$(str "$k" k)\"] == \"v\"
    and .labels.team == \"$(str "$v" t)\" and .anomalies == []"
  n=$((n + 1))
done
id=$(api_create "big-k$((LABEL_KEY + 1))-$tag" --managed --exit $n \
  --label "$(str $((LABEL_KEY + 1)) k)=v")
code[$id]=$n
want[$id]='(.labels | keys) == ["reapd.managed"] and .anomalies == ["labels_truncated"]'
n=$((n + 1))
id=$(api_create "big-v$((LABEL_VALUE + 1))-$tag" --managed --exit $n \
  --label "team=$(str $((LABEL_VALUE + 1)) t)")
code[$id]=$n
want[$id]=".labels.team == \"$(str "$LABEL_VALUE" t)\" and .anomalies == [\"labels_truncated\"]"
n=$((n + 1))
# A name past its limit: its first 4,095 bytes kept (the report's name
# has no '/'), flagged. The create event, on which reapd decides, names
# it without the '/', 4,096 bytes, within the limit; the cut is found
# later, by the inspect at its exit.
nm=$(name_of $((NAME_BYTES + 1)) "m$((NAME_BYTES + 1))")
id=$(api_create "$nm" --managed --exit $n)
code[$id]=$n
want[$id]=".name == \"${nm:0:$((NAME_BYTES - 1))}\" and .anomalies == [\"metadata_truncated\"]"
edges=("${!want[@]}")

# ---- far past them ----------------------------------------------------------
# 4 MiB of environment: the engine takes it and starts the container, but
# the kernel's execve refuses it (E2BIG): the container exits 1 (measured).
env4m=$(api_create "big-env4m-$tag" --managed --exit 38 --env-total $((4 * MIB)))
code[$env4m]=1
want[$env4m]='.anomalies == []'
# 5,000 labels: the first 256 kept, each with its own value (big_body.py
# gives big.NNNNN the letter "a" + NNNNN mod 26).
labels5k=$(api_create "big-labels5k-$tag" --managed --exit 33 --labels 5000)
code[$labels5k]=33
want[$labels5k]='.anomalies == ["labels_truncated"] and (.labels | length) == 257
  and ([.labels | keys[] | select(startswith("big."))]
       == [range(256) | "big." + ("0000" + tostring)[-5:]])
  and ([.labels | to_entries[] | select(.key | startswith("big."))
        | .value == ([97 + (.key[4:] | tonumber) % 26] | implode)] | all)'
# A 64 KiB name: the engine puts it in every event, list entry and inspect.
longname="big-name-$tag-"
longname=$longname$(str $((64 * KIB - ${#longname})) n)
name64k=$(api_create "$longname" --managed --exit 40)
code[$name64k]=40
want[$name64k]=".anomalies == [\"metadata_truncated\"] and .name == \"${longname:0:$((NAME_BYTES - 1))}\""
# One label of 16 MiB: every event of this container is as large, and the
# engine starts it. reapd keeps its first 4,096 bytes.
label16m=$(api_create "big-label16m-$tag" --managed --exit 41 \
  --label team=e2e --labels 1 --label-bytes $((16 * MIB)))
code[$label16m]=41
# The first 4,096 bytes of big_body.py's filler for big.00000 (here and in
# big-pre's 300 KiB): "a", then the alphabet, repeated.
fill=$(python3 -c 'print((("a" + "abcdefghijklmnopqrstuvwxyz")[:26] * 158)[:4096])')
want[$label16m]=".anomalies == [\"labels_truncated\"] and .labels == {\"reapd.managed\": \"true\", \"team\": \"e2e\", \"big.00000\": \"$fill\"}"
want[$pre]=".anomalies == [\"labels_truncated\"] and .labels == {\"reapd.managed\": \"true\", \"team\": \"e2e\", \"big.00000\": \"$fill\"}"
control=$(api_create "big-control-$tag" --managed --exit 36 --label team=e2e)
code[$control]=36
want[$control]='.anomalies == [] and .labels == {"reapd.managed": "true", "team": "e2e"}'
# Unmanaged, exited: the engine keeps an exited container, so what is gone
# of the managed ones, reapd removed.
left=$(api_create "big-left-$tag" --exit 5)
# Started side by side: one at a time, they took a minute on a busy
# machine.
pids=()
for id in "${!code[@]}" "$left"; do
  if [ "$id" != "$pre" ]; then
    started "$id" &
    pids+=($!)
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || fail "a container did not start (above)"
done
log "${#code[@]} managed containers (${#edges[@]} at the limits) started"

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
# shellcheck disable=SC2317  # called through wait_until
all_reported() {
  local n
  n=$(jq -R -r 'fromjson? | .container_id' "$(REPORTS)" 2>/dev/null | sort -u |
    grep -cFx -f <(printf '%s\n' "${!code[@]}")) || true
  [ "${n:-0}" -eq "${#code[@]}" ]
}
wait_until 90 "a report for each of the ${#code[@]} managed containers" all_reported
declare -A line=() count=()
while IFS= read -r l; do
  [[ $l =~ \"container_id\":\"([0-9a-f]{64})\" ]] || fail "report without an id: ${l:0:200}"
  id=${BASH_REMATCH[1]}
  line[$id]=$l
  count[$id]=$((${count[$id]:-0} + 1))
done < <(jq -cR 'fromjson? | objects' "$(REPORTS)")
present=$(curl -sS -m 30 --unix-socket "$D/docker.sock" "$API/containers/json?all=1" |
  jq -r '.[].Id')
for id in "${!code[@]}"; do
  l=${line[$id]}
  assert_eq 1 "${count[$id]}" "report lines for ${id:0:12}"
  ! grep -qx "$id" <<<"$present" || fail "${id:0:12} is still there after its report"
  # big-pre died before reapd subscribed: no die event reached reapd.
  ecode=${code[$id]}
  [ "$id" != "$pre" ] || ecode=null
  # One jq for every check of the report: the names of those that fail.
  bad=$(jq -r --arg id "$id" --argjson c "${code[$id]}" --argjson e "$ecode" \
    --argjson bytes "${#l}" --argjson max "$LINE_MAX" "{
      id: (.container_id == \$id), node: (.node == \"e2e\"),
      removed: (.removed == true and .removed_by == \"reapd\" and .delete_attempts == 1),
      policy: (.policy == \"managed\" and .labels[\"reapd.managed\"] == \"true\"),
      exit_code: (.exit_code == \$c and .exit_code_source == \"inspect\"),
      engine_exit_code: (.engine_exit_code == \$e),
      line_bound: (\$bytes <= \$max),
      line_rest: (\$bytes - (.labels | tojson | length) - (.name | length) <= 1024),
      kept: (${want[$id]})
    } | to_entries[] | select(.value != true) | .key" <<<"$l") ||
    fail "${id:0:12}: jq failed on its report: ${l:0:300}"
  [ -z "$bad" ] || fail "$(jq -r '.name[:40]' <<<"$l"): ${bad//$'\n'/ } not as expected: ${l:0:600}"
done
log "${#code[@]} reports as expected; the longest line $(for id in "${!code[@]}"; do
  l=${line[$id]}; echo "${#l}"; done | sort -n | tail -n 1) bytes (bound $LINE_MAX)"

# The metrics count each container cut once: labels past a limit
# (n257, b65537, k1025, v4097, 5,000 labels, 16 MiB and pre's 300 KiB
# values), names past one (the 64 KiB name, and m4097, found cut by its
# inspect).
metrics=$(curl -s "$REAPD_URL/metrics")
grep -qx 'reapd_containers_truncated_total{what="labels"} 7' <<<"$metrics" ||
  fail "labels truncated: $(grep 'truncated_total{' <<<"$metrics")"
grep -qx 'reapd_containers_truncated_total{what="metadata"} 2' <<<"$metrics" ||
  fail "metadata truncated: $(grep 'truncated_total{' <<<"$metrics")"

# ---- what reapd must not touch -------------------------------------------
for id in "$u100k" "$u1m"; do
  assert_eq "created 0" "$(engine_state "$id")" "unmanaged ${id:0:12}: engine state"
  assert_no_report "$id"
done
assert_eq "exited 5" "$(engine_state "$left")" "unmanaged, exited: engine state"
assert_no_report "$left"
assert_eq "created 128" "$(engine_state "$env16m")" "16 MiB environment: still created"
assert_no_report "$env16m"
assert_eq "${#code[@]}" "$(jq -cR 'fromjson? | .container_id' "$(REPORTS)" | sort -u | wc -l)" \
  "containers reported"

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
