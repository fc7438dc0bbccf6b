#!/usr/bin/env bash
# reapd run the way deploy/ runs it: as a container of its own image
# (deploy/container/Containerfile, built by scripts/image from Debian's
# packages), on the engine it watches. The engine's socket and
# containerd's socket directory are mounted in, the state directory is a
# host directory, the admin socket's directory is shared with the host,
# the node's name comes from REAPD_NODE_NAME, and the container runs
# read-only, without network and capabilities.
#
# Checks: the image's HEALTHCHECK turns healthy; a managed container's
# exit is reported with its true code (containerd's), the container
# removed and its task deleted; `docker stop` stops reapd cleanly within
# the grace period; an exit while reapd's container is stopped is
# reported once after `docker start`, nothing reported twice; and the
# engine's slow task deletion (runc delete past dockerd's 30 s timeout)
# is finished from inside the container as on the host.
#
# The image is built once per source tree and engine-independent: saved
# to $REAPD_IMAGE_CACHE (default /var/cache/reapd/images) under a hash of
# what the build copies, and loaded into each test's engine.
# Usage: bash tests/e2e/test_container.sh /path/to/reapd (the binary is
# not used: the image builds its own)
# shellcheck disable=SC2016  # jq programs: $names are jq variables
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

TOP=$(cd "$E2E_LIB_DIR/../.." && pwd)
CACHE=${REAPD_IMAGE_CACHE:-/var/cache/reapd/images}
RIMAGE=reapd:e2e
NODE=e2e-node-$$
RNAME=reapd-e2e-$$

engine_start
image_build

# The image, from the cache or built on this engine (one build at a time
# for all engines: the others wait and load it).
key=$(cd "$TOP" && find CMakeLists.txt README.md LICENSE agent config deploy \
  docs scripts/embed.cmake scripts/image .dockerignore -type f -print0 |
  sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
mkdir -p "$CACHE"
(
  flock 9
  tar=$CACHE/reapd-e2e-$key.tar
  if [ ! -s "$tar" ]; then
    log "building the image on this engine (scripts/image), key $key"
    DOCKER_HOST=unix://$D/docker.sock DOCKER_CONFIG=$D/docker-cli \
      "$TOP/scripts/image" --tag "$RIMAGE" >"$D/image.log" 2>&1 ||
      { tail -30 "$D/image.log" >&2; fail "scripts/image failed"; }
    rm -f "$CACHE"/reapd-e2e-*.tar
    dk save -o "$tar.new" "$RIMAGE"
    mv "$tar.new" "$tar"
  else
    dk load -i "$tar" >/dev/null
  fi
) 9>"$CACHE/.reapd-e2e.lock"
dk image inspect "$RIMAGE" >/dev/null || fail "no image $RIMAGE"
log "image $RIMAGE: $(dk image inspect -f '{{.Size}}' "$RIMAGE") bytes"

# The config the deploy files mount: no "node" (REAPD_NODE_NAME gives it),
# containerd found by "auto" in the mounted directory.
mkdir -p "$D/run" "$D/etc"
jq -n '{
  state_dir: "/var/lib/reapd",
  docker: {socket: "/var/run/docker.sock"},
  containerd: {socket: "auto"},
  admin: {socket: "/run/reapd/admin.sock"},
  delete: {poll_interval_ms: 200},
  policies: [
    {name: "managed", match: {labels: {"reapd.managed": "true"}}, action: "remove"}],
  default_action: "ignore",
  log: {format: "json", level: "debug"}
}' >"$D/etc/reapd.json"
# lib.sh's api() asks reapd's admin socket at $D/admin.sock.
ln -s "$D/run/admin.sock" "$D/admin.sock"

dk run -d --name "$RNAME" --network none --read-only --tmpfs /tmp \
  --cap-drop ALL --security-opt no-new-privileges \
  --health-interval 1s --health-start-period 1s \
  -e REAPD_NODE_NAME="$NODE" \
  -v "$D/docker.sock:/var/run/docker.sock" \
  -v "$D/exec/containerd:/run/containerd" \
  -v "$D/state:/var/lib/reapd" \
  -v "$D/run:/run/reapd" \
  -v "$D/etc/reapd.json:/etc/reapd/reapd.json:ro" \
  "$RIMAGE" >/dev/null
# reapd's output is the container's: copied to reapd.log, which the
# failure dump shows.
reapd_logs() { dk logs "$RNAME" >"$D/reapd.log" 2>&1 || true; }
eval "$(declare -f dump_logs | sed '1s/dump_logs/_lib_dump_logs/')"
dump_logs() {
  [ -z "$D" ] || reapd_logs
  _lib_dump_logs
}

health() { dk inspect -f '{{.State.Health.Status}}' "$RNAME"; }
healthy() { [ "$(health)" = healthy ]; }
wait_until 60 "reapd's container to turn healthy (its HEALTHCHECK)" healthy
log "reapd's container healthy"
reapd_logs
grep -q "mode: containerd channel on /run/containerd/containerd.sock" "$D/reapd.log" ||
  fail "reapd in its container did not find containerd's socket"

# A managed exit: the true code, removed, the task deleted.
a=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 42')
line=$(wait_report "$a" 30)
log "A: $line"
assert_json "$line" --arg id "$a" '.container_id == $id and .policy == "managed"' "A's report"
assert_json "$line" --arg n "$NODE" '.node == $n' "node from REAPD_NODE_NAME"
assert_json "$line" '.exit_code == 42 and .exit_code_source == "containerd"' "true exit code"
assert_json "$line" '.removed == true and .task_deleted == true' "removed, task deleted"
assert_gone "$a"
assert_no_task "$a" 5
# Its report through the admin socket the host shares.
assert_json "$(api "/v1/containers/$a/report" -m 5)" '.exit_code == 42' \
  "report on the shared admin socket"

# docker stop: SIGTERM (the image's STOPSIGNAL), a clean exit well within
# the 10 s grace period.
t0=$(now_ms)
dk stop -t 10 "$RNAME" >/dev/null
took=$(($(now_ms) - t0))
st=$(dk inspect -f '{{.State.ExitCode}}' "$RNAME")
reapd_logs
log "docker stop took $took ms; exit code $st"
assert_eq 0 "$st" "reapd's exit code after docker stop"
[ "$took" -lt 8000 ] || fail "docker stop took $took ms: not a clean SIGTERM stop"
grep -q '"msg":"stopped"' "$D/reapd.log" || fail "reapd did not log its clean stop"

# An exit while reapd's container is down: reported once after a start,
# from the state on the host's directory; A not reported again.
b=$(run_ctr --label reapd.managed=true "$IMAGE" sh -c 'exit 9')
assert_eq 9 "$(dk wait "$b")" "B's exit code (docker wait)"
dk start "$RNAME" >/dev/null
wait_until 60 "reapd's container healthy again" healthy
line=$(wait_report "$b" 30)
log "B: $line"
assert_json "$line" '.exit_code == 9 and .removed == true and .task_deleted == true' \
  "B, exited while reapd was stopped"
assert_gone "$b"
assert_eq 1 "$(report_count "$a")" "reports of A after the restart"
assert_eq 1 "$(report_count "$b")" "reports of B"

# The engine's slow task deletion (runc delete 40 s, past dockerd's 30 s):
# reapd in its container reports the true code and reaps the leak.
slowrunc_delay 40
c=$(run_ctr --runtime slowrunc --label reapd.managed=true "$IMAGE" sh -c 'exit 7')
line=$(wait_report "$c" 200)
log "C: $line"
assert_json "$line" '.exit_code == 7 and .exit_code_source == "containerd"' "C's true code"
assert_json "$line" '.anomalies | index("task_delete_timeout") != null' "C's leak flagged"
assert_json "$line" '.removed == true and .task_deleted == true' "C removed, its task deleted"
if engine_before 24; then
  assert_json "$line" '.engine_exit_code == 255' "the engine's bogus 255 kept"
fi
assert_gone "$c"
assert_no_task "$c" 5
assert_eq 1 "$(report_count "$c")" "reports of C"

healthy || fail "reapd's container not healthy at the end: $(health)"
dk stop -t 10 "$RNAME" >/dev/null
assert_eq 0 "$(dk inspect -f '{{.State.ExitCode}}' "$RNAME")" "exit code at the end"
reapd_logs
dk rm "$RNAME" >/dev/null
e2e_pass
