#!/usr/bin/env bash
# The engine is upgraded under a running reapd: dockerd stopped, a newer
# dockerd (with its own containerd) started on the same data and exec
# roots. reapd reconnects, reads the engine's identity again (startup log
# line, reapd_engine_info) and goes on reporting true exit codes, on the
# newer API, with nothing reported twice.
#
# From the engine under test to the next newer one: bookworm (20.10) ->
# trixie (26.1), trixie -> sid (28.5), and sid's run comes from bookworm
# (20.10 -> 28.5, two major versions at once).
# Usage: bash tests/e2e/test_engine_upgrade.sh /path/to/reapd
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

case $E2E_ENGINE in
bookworm) from=bookworm to=trixie ;;
trixie) from=trixie to=sid ;;
sid) from=bookworm to=sid ;;
esac
engine_switch "$from"

# version_line: "VERSION API CONTAINERD" as the engine says of itself.
version_line() {
  curl -s --unix-socket "$D/docker.sock" http://d/version |
    jq -r '[.Version, .ApiVersion,
            (.Components[] | select(.Name == "containerd") | .Version)] | join(" ")'
}

# engine_info_is V API CTRD: reapd's metric says that engine.
# shellcheck disable=SC2317  # called through wait_until
engine_info_is() {
  local m
  m=$(curl -s "$REAPD_URL/metrics") || return 1
  grep -qxF "reapd_engine_info{docker_version=\"$1\",api_version=\"$2\",api_version_used=\"$2\",containerd_version=\"$3\"} 1" <<<"$m"
}

engine_start
image_build
reapd_start "$REAPD_BIN"
read -r v1 api1 ctrd1 <<<"$(version_line)"
log "before: dockerd $v1, API $api1, containerd $ctrd1"
wait_until 10 "reapd_engine_info of $v1" engine_info_is "$v1" "$api1" "$ctrd1"

a=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 3')
line=$(wait_report "$a" 30)
assert_json "$line" '.exit_code == 3 and .engine_exit_code == 3' "A on $from"

engine_term
wait_until 15 "reapd /readyz to leave 200 while the engine is down" reapd_not_ready
engine_switch "$to"
engine_restart
wait_ready 60
read -r v2 api2 ctrd2 <<<"$(version_line)"
log "after: dockerd $v2, API $api2, containerd $ctrd2"
[ "$v1" != "$v2" ] || fail "the engine was not upgraded ($v1)"

# The identity is read again at the reconnect.
wait_until 10 "reapd_engine_info of $v2" engine_info_is "$v2" "$api2" "$ctrd2"
grep -qF "docker: engine $v2 (API $api2; reapd uses $api2), containerd $ctrd2," "$D/reapd.log" ||
  fail "reapd did not log the new engine: $(grep -F 'docker: engine' "$D/reapd.log")"
grep -qF "docker: engine $v1 (API $api1; reapd uses $api1), containerd $ctrd1," "$D/reapd.log" ||
  fail "reapd did not log the first engine"

# And works on it: the image survived the upgrade; a new exit is reported
# truly, A is not reported again.
# U, unmanaged, exits first: the new engine keeps it, so B's removal is
# reapd's.
u=$(run_ctr "$IMAGE" sh -c 'exit 6')
assert_eq 6 "$(dk wait "$u")" "U's exit code (docker wait)"
b=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 5')
line=$(wait_report "$b" 30)
assert_json "$line" '.exit_code == 5 and .engine_exit_code == 5' "B on $to"
assert_json "$line" '.anomalies == []' "B: an ordinary exit"
assert_json "$line" '.removed_by == "reapd" and .delete_attempts == 1' "B removed by reapd"
assert_gone "$b"
assert_eq "exited 6" "$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$u")" \
  "U, unmanaged, after B's report"
assert_no_report "$u"
assert_no_task "$b" 5
assert_eq 1 "$(report_count "$a")" "reports of A"
assert_eq 1 "$(report_count "$b")" "reports of B"

e2e_pass
