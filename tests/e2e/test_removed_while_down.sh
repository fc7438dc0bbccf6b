#!/usr/bin/env bash
# Exits of containers removed while reapd is down keep their true code:
# reapd is killed -9 with managed containers running; meanwhile, after
# 150 other events, some are removed by someone else (docker rm -f: 137)
# and `--rm` ones exit with their own code and are removed by the engine.
# Only the engine's replay of their die events still has those codes, and
# the relist that follows a subscription must not take them for gone
# unseen before the replay is read. Then the one case where the code is
# truly lost: a die pushed out of the engine's buffer (256 events) before
# reapd is back, reported unknown, the cut replay logged.
# Usage: bash tests/e2e/test_removed_while_down.sh /path/to/reapd
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

ROUNDS=${REMOVED_ROUNDS:-2}

engine_start
image_build
reapd_start "$REAPD_BIN"

# tracked ID...: reapd has seen each of them running (and, a second
# later, written its record: a running container's first record waits
# for the lazy commit).
# shellcheck disable=SC2317  # called through wait_until
tracked() {
  local id
  for id in "$@"; do
    api /v1/containers -m 2 |
      jq -e --arg id "$id" '.containers[] | select(.container_id == $id)' >/dev/null || return 1
  done
}

# gone ID...: the engine no longer has any of them.
# shellcheck disable=SC2317  # called through wait_until
gone() {
  local all id
  all=$(dk ps -aq --no-trunc)
  for id in "$@"; do
    ! grep -q "$id" <<<"$all" || return 1
  done
}

: >"$D/want"
other=$(run_ctr "$IMAGE" sleep 600) # not managed: its renames fill the replay
k=0
for round in $(seq 1 "$ROUNDS"); do
  rmf=() rmd=()
  for _ in 1 2 3; do
    rmf+=("$(run_ctr --label reapd.managed=true "$IMAGE" sleep 600)")
  done
  for code in 3 44; do
    rmd+=("$(run_ctr --rm --label reapd.managed=true "$IMAGE" \
      sh -c "trap 'exit $code' TERM; sleep 600 & wait")")
    printf '%s %s\n' "${rmd[-1]}" "$code" >>"$D/want"
  done
  for id in "${rmf[@]}"; do printf '%s 137\n' "$id" >>"$D/want"; done
  wait_until 20 "reapd tracks round $round" tracked "${rmf[@]}" "${rmd[@]}"
  sleep 1.5
  reapd_kill9
  # 150 events first, so that the dies come at the end of a replay the
  # engine takes a while to write: a relist answered meanwhile found
  # these containers gone before their dies were read.
  urls=()
  for _ in $(seq 1 150); do
    k=$((k + 1))
    urls+=("http://docker/v1.41/containers/$other/rename?name=other$k")
  done
  curl -sf --unix-socket "$D/docker.sock" -X POST "${urls[@]}" >/dev/null ||
    fail "renaming failed"
  # The --rm ones exit with their own code and the engine removes them.
  dk kill -s TERM "${rmd[@]}" >/dev/null
  dk rm -f "${rmf[@]}" >/dev/null
  wait_until 20 "the --rm containers gone" gone "${rmd[@]}"
  reapd_start "$REAPD_BIN"
done

n=0 bad=()
while read -r id code; do
  line=$(wait_report "$id" 30)
  n=$((n + 1))
  # Each one checked, then all that are wrong said together.
  jq -e --argjson c "$code" '.exit_code == $c and .engine_exit_code == $c
      and .removed == true
      and ((.anomalies // []) | index("exit_code_unknown") | not)' \
    >/dev/null <<<"$line" && [ "$(report_count "$id")" -eq 1 ] ||
    bad+=("${id:0:12} (want $code, $(report_count "$id") report(s)): $line")
done <"$D/want"
[ "${#bad[@]}" -eq 0 ] ||
  fail "${#bad[@]} of $n exits without their true code: $(printf '%s\n' "${bad[@]}")"
log "removed while down: $n exits over $ROUNDS kills, each with its true code"

# The die pushed out of the engine's buffer: 300 image tag events after
# it, while reapd is down. Nothing has its code now; the report says so.
lost=$(run_ctr --label reapd.managed=true "$IMAGE" sleep 600)
wait_until 20 "reapd tracks ${lost:0:12}" tracked "$lost"
sleep 1.5
reapd_kill9
dk rm -f "$lost" >/dev/null
urls=()
for i in $(seq 1 300); do
  urls+=("http://docker/v1.41/images/$IMAGE/tag?repo=ringfill&tag=t$i")
done
curl -sf --unix-socket "$D/docker.sock" -X POST "${urls[@]}" >/dev/null ||
  fail "tagging the image failed"
reapd_start "$REAPD_BIN"
line=$(wait_report "$lost" 30)
assert_json "$line" '.exit_code == null and (.anomalies | index("exit_code_unknown"))' "pushed-out die: $line"
grep -q "replay held its whole buffer" "$D/reapd.log" ||
  fail "the cut replay was not logged"
cut=$(curl -s "$REAPD_URL/metrics" | awk '$1 == "reapd_events_replays_cut_total" {print $2}')
assert_eq 1 "$cut" "reapd_events_replays_cut_total after the cut replay"
echo "removed_while_down: exits=$n kills=$((ROUNDS + 1)) pushed_out=1"

e2e_pass
