# shellcheck shell=bash
# jq programs are single-quoted on purpose: their $names are jq variables.
# shellcheck disable=SC2016
# Library for reapd's end-to-end tests against a real, isolated dockerd.
#
# A test does:
#   source "$(dirname "$0")/lib.sh"
#   e2e_begin "$@"          # checks the reapd binary, makes $D, sets traps
#   engine_start; image_build; reapd_start "$REAPD_BIN"
#   ... dk run ...; line=$(wait_report "$cid" 30); assert_json "$line" '...'
#   e2e_pass                # stops reapd (asserting a clean stop), the engine
#
# Everything a test creates lives under one fresh directory $D
# (/tmp/e2e.XXXXXX): the engine's socket, data root, exec root (and so its
# containerd socket), pidfile, logs, reapd's config and state. Nothing uses
# the default /var/run/docker.sock paths, and cleanup only touches processes
# and mounts that belong to $D, so other engines on the machine are left
# alone.

# ---------------------------------------------------------------- globals

E2E_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_NAME=$(basename "$0" .sh)
E2E_T0=${EPOCHREALTIME/[.,]/}

export LC_ALL=C
# The engine under test: bookworm (Debian 12's dockerd 20.10 + containerd
# 1.6), trixie (26.1 + 1.7) or sid (28.5 + 2.1); see scripts/engine and
# docs/engines.md. e2e_begin fetches a newer one on first use.
E2E_ENGINE=${E2E_ENGINE:-bookworm}
ENGINE_ROOT=""
# Debian 12's client (20.10) on every engine, pinned to API 1.41, which
# all three serve; /usr/local/bin/docker is a newer client only.
DOCKER_CLI=/usr/bin/docker
DOCKERD=/usr/sbin/dockerd
CTR=/usr/bin/ctr
export DOCKER_API_VERSION=1.41
# dockerd finds containerd, runc, containerd-shim-runc-v2 through PATH:
# the engine's own first, then Debian 12's runc.
ENGINE_PATH=/usr/sbin:/usr/bin:/sbin:/bin

IMAGE=reapd-test:1

D=""              # the test's directory
DOCKERD_PID=""
ENGINE_VERSION="" # dockerd's own, from /version once started
REAPD_BIN=""
REAPD_PID=""
REAPD_PORT=""
REAPD_URL=""
E2E_DONE=0

# ---------------------------------------------------------------- output

now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  echo $((t / 1000))
}

log() {
  local t=${EPOCHREALTIME/[.,]/}
  local el=$(((t - E2E_T0) / 1000))
  printf 'e2e[%s] +%d.%03ds: %s\n' "$E2E_NAME" $((el / 1000)) $((el % 1000)) "$*" >&2
}

dump_logs() {
  local f
  for f in reapd.log dockerd.log; do
    if [ -z "$D" ] || [ ! -f "$D/$f" ]; then continue; fi
    echo "----- last 50 lines of $D/$f -----" >&2
    tail -n 50 "$D/$f" >&2 || true
  done
  if [ -n "$D" ] && [ -f "$D/state/reports.jsonl" ]; then
    echo "----- $D/state/reports.jsonl -----" >&2
    tail -n 20 "$D/state/reports.jsonl" >&2 || true
  fi
  echo "----- end of logs -----" >&2
}

# fail MESSAGE...: print the reason and exit 1 (the EXIT trap dumps the
# logs and cleans up).
fail() {
  echo "e2e: $E2E_NAME FAILED: $*" >&2
  exit 1
}

# ---------------------------------------------------------------- lifecycle

_e2e_on_err() {
  local rc=$?
  echo "e2e: $E2E_NAME: command failed (exit $rc) at ${BASH_SOURCE[1]:-?}:${BASH_LINENO[0]:-?}: $BASH_COMMAND" >&2
}

_e2e_on_exit() {
  local rc=$?
  trap - ERR
  set +e
  if [ "$rc" -eq 0 ] && [ "$E2E_DONE" -eq 0 ]; then
    echo "e2e: $E2E_NAME: test ended without e2e_pass" >&2
    rc=1
  fi
  if [ "$rc" -ne 0 ] && [ "$E2E_DONE" -eq 0 ]; then
    echo "e2e: $E2E_NAME FAILED (exit $rc)" >&2
    dump_logs
  fi
  _reapd_cleanup
  engine_stop || rc=1
  exit "$rc"
}

# e2e_begin BIN: must be called first by every test.
e2e_begin() {
  set -eEuo pipefail
  [ "$#" -ge 1 ] || fail "usage: bash $0 /path/to/reapd"
  REAPD_BIN=$1
  case $REAPD_BIN in /*) ;; *) REAPD_BIN=$PWD/$REAPD_BIN ;; esac
  [ -x "$REAPD_BIN" ] || fail "reapd binary '$REAPD_BIN' does not exist or is not executable"
  [ "$(id -u)" -eq 0 ] || fail "the e2e tests need root (they run their own dockerd)"
  _engine_select
  local t
  for t in "$DOCKERD" "$DOCKER_CLI" "$ENGINE_ROOT/usr/bin/containerd" \
    /usr/sbin/runc "$CTR" /bin/busybox jq curl; do
    command -v "$t" >/dev/null 2>&1 || fail "missing tool $t (run scripts/deps)"
  done
  trap _e2e_on_err ERR
  trap _e2e_on_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  log "start (reapd: $REAPD_BIN, engine: $E2E_ENGINE)"
}

# _engine_select: point DOCKERD, CTR and ENGINE_PATH at $E2E_ENGINE.
_engine_select() {
  local root
  root=$("$E2E_LIB_DIR/../../scripts/engine" "$E2E_ENGINE") ||
    fail "engine '$E2E_ENGINE' is not available (scripts/engine $E2E_ENGINE)"
  [ "$root" = / ] && return 0
  ENGINE_ROOT=$root
  DOCKERD=$root/usr/sbin/dockerd
  CTR=$root/usr/bin/ctr
  ENGINE_PATH=$root/usr/sbin:$root/usr/bin:$ENGINE_PATH
}

# e2e_pass: stop reapd (asserting a clean exit) and the engine, print the
# closing line, exit 0.
e2e_pass() {
  reapd_stop
  check_reports
  engine_stop
  E2E_DONE=1
  echo "e2e: $E2E_NAME passed"
  exit 0
}

# check_reports: every report this test's reapd wrote follows
# docs/report.schema.json (tests/e2e/check_reports.py).
check_reports() {
  local out
  [ -f "$(REPORTS)" ] || return 0
  out=$(python3 "$E2E_LIB_DIR/check_reports.py" "$E2E_LIB_DIR/../../docs/report.schema.json" \
    "$(REPORTS)" 2>&1) || fail "reports that do not follow the schema: $out"
  log "$out"
}

# ---------------------------------------------------------------- processes

# pid_alive PID: true if PID exists and is not a zombie.
pid_alive() {
  local pid=$1 st
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  st=$(sed -E 's/^.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

pid_gone() {
  ! pid_alive "$1"
}

# dockerd_ours: DOCKERD_PID is alive and is still this test's dockerd (its
# command line names $D/). A pid is only a number: once its process is
# gone it is another's soon (pid_max is 32768, and an hour's soak starts
# a hundred thousand processes), and a signal sent to it then lands on
# that other process: another test's dockerd, say.
dockerd_ours() {
  local cmd
  [ -n "$DOCKERD_PID" ] && [ -n "$D" ] && pid_alive "$DOCKERD_PID" || return 1
  cmd=$(tr '\0' ' ' <"/proc/$DOCKERD_PID/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$D/"* ]]
}

# wait_pid_gone PID SECONDS: true once PID is gone (or a zombie).
wait_pid_gone() {
  local pid=$1 deadline=$(($(now_ms) + $2 * 1000))
  while pid_alive "$pid"; do
    [ "$(now_ms)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# pids_matching STRING: pids whose command line (its arguments joined by
# spaces, one after the last) contains STRING (our own shell and its
# subshells excluded). Read with builtins: a process per pid took seconds
# on a busy machine, and a process seen that late can be gone.
pids_matching() {
  local needle=$1 p cmd args IFS=" "
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    if [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ]; then continue; fi
    { mapfile -d '' -t args <"/proc/$p/cmdline"; } 2>/dev/null || continue
    [ "${#args[@]}" -gt 0 ] || continue
    cmd="${args[*]} "
    case $cmd in *"$needle"*) echo "$p" ;; esac
  done
}

# children_of PID: the direct children of PID (from /proc, no procps).
children_of() {
  local f st p fields
  for f in /proc/[0-9]*/stat; do
    { st=$(<"$f"); } 2>/dev/null || continue
    # after "pid (comm) ": state ppid ...
    read -ra fields <<<"${st##*) }"
    if [ "${fields[1]:-}" = "$1" ]; then
      p=${f#/proc/}
      echo "${p%/stat}"
    fi
  done
}

# ---------------------------------------------------------------- engine

dk() {
  DOCKER_CONFIG="$D/docker-cli" "$DOCKER_CLI" -H "unix://$D/docker.sock" "$@"
}

ctr_sock() {
  echo "$D/exec/containerd/containerd.sock"
}

# ctr_tasks: containerd's tasks of this engine (namespace moby).
ctr_tasks() {
  "$CTR" -a "$(ctr_sock)" -n moby task ls
}

ctr_containers() {
  "$CTR" -a "$(ctr_sock)" -n moby containers ls -q
}

engine_ping() {
  [ "$(curl -s -m 2 --unix-socket "$D/docker.sock" http://localhost/_ping 2>/dev/null)" = OK ]
}

_engine_launch() {
  rm -f "$D/docker.pid"
  PATH=$ENGINE_PATH "$DOCKERD" \
    -H "unix://$D/docker.sock" \
    --data-root "$D/data" \
    --exec-root "$D/exec" \
    --pidfile "$D/docker.pid" \
    --bridge=none --iptables=false --ip6tables=false \
    --config-file "$D/daemon.json" \
    </dev/null >>"$D/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  local deadline=$(($(now_ms) + 60000))
  [ -z "${ENGINE_LAUNCH_SOFT:-}" ] || deadline=$((deadline + 30000))
  until engine_ping; do
    if ! pid_alive "$DOCKERD_PID"; then
      wait "$DOCKERD_PID" 2>/dev/null || true
      DOCKERD_PID=""
      [ -z "${ENGINE_LAUNCH_SOFT:-}" ] || return 1
      tail -n 50 "$D/dockerd.log" >&2
      fail "dockerd exited during start"
    fi
    if [ "$(now_ms)" -ge "$deadline" ]; then
      tail -n 50 "$D/dockerd.log" >&2
      fail "dockerd did not answer /_ping within 60 s"
    fi
    sleep 0.2
  done
  ENGINE_VERSION=$(curl -s -m 5 --unix-socket "$D/docker.sock" http://d/version |
    jq -r '.Version // empty')
  [[ $ENGINE_VERSION =~ ^[0-9]+\. ]] ||
    fail "dockerd answered /version without a version: '$ENGINE_VERSION'"
  log "dockerd $ENGINE_VERSION up (pid $DOCKERD_PID, $D)"
}

# engine_before MAJOR: true if the running dockerd is older than MAJOR.0
# (where engines differ: docs/engines.md).
engine_before() {
  [ -n "$ENGINE_VERSION" ] || fail "engine_before: no engine started"
  [ "${ENGINE_VERSION%%.*}" -lt "$1" ]
}

# engine_start: make $D and start an isolated dockerd in it.
engine_start() {
  [ -z "$D" ] || fail "engine_start called twice"
  D=$(mktemp -d /tmp/e2e.XXXXXX)
  chmod 755 "$D"
  mkdir -p "$D/state" "$D/docker-cli"
  # The runtime wrapper is linked into $D so that its delay file
  # ($D/slowrunc.delay) belongs to this engine only.
  ln -s "$E2E_LIB_DIR/slowrunc" "$D/slowrunc"
  echo 10 >"$D/slowrunc.delay"
  jq -n --arg p "$D/slowrunc" '{runtimes: {slowrunc: {path: $p}}}' >"$D/daemon.json"
  _engine_launch
}

# slowrunc_delay SECONDS: delay of the slowrunc runtime's "delete".
slowrunc_delay() {
  echo "$1" >"$D/slowrunc.delay"
}

_containerd_pid() {
  cat "$D/exec/containerd/containerd.pid" 2>/dev/null || true
}

# engine_kill9: SIGKILL dockerd (a crash). Its containerd dies with it
# (parent-death signal); the shims and the containers go on running.
engine_kill9() {
  [ -n "$DOCKERD_PID" ] || fail "engine_kill9: no dockerd running"
  local cpid
  cpid=$(_containerd_pid)
  dockerd_ours || fail "engine_kill9: dockerd $DOCKERD_PID is gone, or no longer this test's"
  kill -KILL "$DOCKERD_PID" 2>/dev/null || true
  wait "$DOCKERD_PID" 2>/dev/null || true
  wait_pid_gone "$DOCKERD_PID" 10 || fail "dockerd $DOCKERD_PID survived SIGKILL"
  if [ -n "$cpid" ]; then
    wait_pid_gone "$cpid" 10 || fail "containerd $cpid survived its dockerd"
  fi
  log "dockerd killed (pid $DOCKERD_PID, containerd ${cpid:-?} gone)"
  DOCKERD_PID=""
}

# engine_term: stop dockerd as an operator or a package upgrade does
# (SIGTERM; it stops its containers and its containerd) and wait for the
# process itself: dockerd 28 takes over a second to exit, and a new one
# started before that fails on the pidfile.
engine_term() {
  [ -n "$DOCKERD_PID" ] || fail "engine_term: no dockerd running"
  local cpid
  cpid=$(_containerd_pid)
  dockerd_ours || fail "engine_term: dockerd $DOCKERD_PID is gone, or no longer this test's"
  kill -TERM "$DOCKERD_PID" 2>/dev/null || true
  wait_pid_gone "$DOCKERD_PID" 60 || fail "dockerd $DOCKERD_PID did not stop on SIGTERM"
  wait "$DOCKERD_PID" 2>/dev/null || true
  if [ -n "$cpid" ]; then
    wait_pid_gone "$cpid" 30 || fail "containerd $cpid survived its dockerd"
  fi
  log "dockerd $ENGINE_VERSION stopped (pid $DOCKERD_PID)"
  DOCKERD_PID=""
}

# engine_switch SUITE: the next engine_restart starts SUITE's dockerd
# (scripts/engine) on the same directories: an upgrade in place.
engine_switch() {
  E2E_ENGINE=$1
  DOCKERD=/usr/sbin/dockerd
  CTR=/usr/bin/ctr
  ENGINE_ROOT=""
  ENGINE_PATH=/usr/sbin:/usr/bin:/sbin:/bin
  _engine_select
}

# engine_restart: start dockerd again on the same directories (after
# engine_kill9 or engine_term). Stale pidfiles are removed: dockerd's own, and
# containerd's when that process is dead or a zombie. (Here PID 1 reaps
# orphans only after a second or two; dockerd takes a zombie containerd
# for a live one, reuses it, and then fails with "timeout waiting for
# containerd to start".)
engine_restart() {
  [ -n "$D" ] || fail "engine_restart: no engine directory"
  if dockerd_ours; then
    fail "engine_restart: dockerd $DOCKERD_PID still running"
  fi
  local cpid
  cpid=$(_containerd_pid)
  if [ -n "$cpid" ] && ! pid_alive "$cpid"; then
    rm -f "$D/exec/containerd/containerd.pid"
  fi
  _engine_launch
}

# containerd_holdable: restart the engine so that dockerd starts its
# containerd through a wrapper first on its PATH, which holds each start
# while a hold is in force (dockerd's own restart of the containerd it
# lost waits there). containerd_kill_held kills containerd and holds it
# down; containerd_release lets it start and waits till it answers.
containerd_holdable() {
  mkdir -p "$D/bin"
  cat >"$D/bin/containerd" <<'EOF'
#!/bin/bash
self=$(dirname "$0")
while [ -e "$self/containerd.hold" ]; do sleep 0.1; done
IFS=:
for p in $PATH; do
  if [ "$p" != "$self" ] && [ -x "$p/containerd" ]; then
    exec "$p/containerd" "$@"
  fi
done
echo "containerd wrapper: no containerd on PATH" >&2
exit 127
EOF
  chmod 755 "$D/bin/containerd"
  engine_term
  ENGINE_PATH="$D/bin:$ENGINE_PATH"
  engine_restart
}

containerd_kill_held() {
  local cpid
  cpid=$(_containerd_pid)
  [ -n "$cpid" ] || fail "no containerd pid"
  touch "$D/bin/containerd.hold"
  kill -KILL "$cpid"
  log "containerd $cpid killed; held down"
}

_ctrd_up() { "$CTR" -a "$(ctr_sock)" version >/dev/null 2>&1; }

containerd_release() {
  rm -f "$D/bin/containerd.hold"
  wait_until 60 "containerd back" _ctrd_up
  log "containerd back"
}

# engine_restart_until_up SECONDS: engine_restart, again and again (as
# systemd's Restart= would) while dockerd exits during its start: it gives
# up when its containerd cannot start, which lasts as long as a shim is
# stuck in a slow task deletion.
engine_restart_until_up() {
  local deadline=$(($(now_ms) + $1 * 1000)) tries=1
  until ENGINE_LAUNCH_SOFT=1 engine_restart; do
    [ "$(now_ms)" -lt "$deadline" ] ||
      fail "dockerd did not come up within $1 s ($tries starts)"
    log "dockerd exited during its start; starting it again"
    tries=$((tries + 1))
    sleep 2
  done
}

_kill_list() {
  # _kill_list SIGNAL PID...
  local sig=$1 p
  shift
  for p in "$@"; do kill "-$sig" "$p" 2>/dev/null || true; done
}

# engine_stop: stop everything that belongs to $D and remove $D.
# Safe to call more than once and after a partial start.
engine_stop() {
  [ -n "$D" ] && [ -d "$D" ] || return 0
  local rc=0 p pids=()
  # Nothing may wait for a slow delete any more.
  echo 0 >"$D/slowrunc.delay" 2>/dev/null || true

  # 1. dockerd: SIGTERM (it stops its containers), then SIGKILL.
  if dockerd_ours; then
    if engine_ping; then
      # Remove containers first so no task or mount is left behind.
      local ids
      ids=$(timeout 20 "$DOCKER_CLI" -H "unix://$D/docker.sock" ps -aq 2>/dev/null || true)
      if [ -n "$ids" ]; then
        # shellcheck disable=SC2086
        DOCKER_CONFIG="$D/docker-cli" timeout 30 "$DOCKER_CLI" -H "unix://$D/docker.sock" \
          rm -f $ids >/dev/null 2>&1 || true
      fi
    fi
    kill -TERM "$DOCKERD_PID" 2>/dev/null || true
    if ! wait_pid_gone "$DOCKERD_PID" 30; then
      echo "e2e: dockerd $DOCKERD_PID did not stop on SIGTERM, killing" >&2
      kill -KILL "$DOCKERD_PID" 2>/dev/null || true
      wait_pid_gone "$DOCKERD_PID" 10 || rc=1
    fi
    wait "$DOCKERD_PID" 2>/dev/null || true
  fi
  DOCKERD_PID=""

  # 2. Any dockerd/containerd/shim whose command line names $D: dockerd
  # (--data-root $D/...), containerd (--config $D/exec/containerd/...),
  # containerd-shim-runc-v2 (-address $D/exec/containerd/containerd.sock).
  local shim_ids=() shim_pids=() cmd
  mapfile -t pids < <(pids_matching "$D/")
  for p in "${pids[@]}"; do
    { cmd=$(tr '\0' ' ' <"/proc/$p/cmdline"); } 2>/dev/null || continue
    case $cmd in
    *containerd-shim*)
      shim_pids+=("$p")
      # -id <container id>
      shim_ids+=("$(sed -E 's/.* -id ([^ ]+).*/\1/' <<<"$cmd")")
      ;;
    esac
  done
  if [ "${#pids[@]}" -gt 0 ]; then
    # Processes of the containers the shims hold: the shims' children.
    local kids=()
    for p in "${shim_pids[@]}"; do
      mapfile -t -O "${#kids[@]}" kids < <(children_of "$p")
    done
    _kill_list TERM "${pids[@]}"
    for p in "${pids[@]}"; do wait_pid_gone "$p" 5 || true; done
    _kill_list KILL "${pids[@]}" "${kids[@]}"
    for p in "${pids[@]}"; do wait_pid_gone "$p" 5 || rc=1; done
  fi

  # 3. Processes still in a cgroup of one of this engine's containers (the
  # engine's, containerd's, and leaked tasks' ids), and those cgroups.
  local id cg ids=("${shim_ids[@]}")
  for id in "$D"/data/containers/* \
    "$D"/exec/containerd/daemon/io.containerd.runtime.v2.task/moby/*; do
    if [ -e "$id" ]; then ids+=("${id##*/}"); fi
  done
  for id in "${ids[@]}"; do
    [[ $id =~ ^[0-9a-f]{64}$ ]] || continue
    for cg in /sys/fs/cgroup/*/docker/"$id" /sys/fs/cgroup/docker/"$id" \
      /sys/fs/cgroup/system.slice/docker-"$id".scope; do
      [ -d "$cg" ] || continue
      local procs=()
      mapfile -t procs <"$cg/cgroup.procs" 2>/dev/null || true
      _kill_list KILL "${procs[@]}"
      rmdir "$cg" 2>/dev/null || true
    done
  done

  # 4. Stale shim sockets (/run/containerd/s/<sha256(address/ns/id)>) of
  # the shims we killed.
  for id in "${shim_ids[@]}"; do
    local h
    h=$(printf '%s' "$(ctr_sock)/moby/$id" | sha256sum | cut -d' ' -f1)
    rm -f "/run/containerd/s/$h"
  done

  # 5. Mounts under $D, deepest first.
  local m mounts=()
  mapfile -t mounts < <(awk -v d="$D" 'index($5, d "/") == 1 || $5 == d {print $5}' \
    /proc/self/mountinfo | sort -r)
  for m in "${mounts[@]}"; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if awk -v d="$D" 'index($5, d "/") == 1 || $5 == d {f=1} END {exit !f}' /proc/self/mountinfo; then
    echo "e2e: mounts left under $D:" >&2
    awk -v d="$D" 'index($5, d "/") == 1 {print "  " $5}' /proc/self/mountinfo >&2
    rc=1
  fi

  # 6. Anything of ours still alive?
  mapfile -t pids < <(pids_matching "$D/")
  if [ "${#pids[@]}" -gt 0 ]; then
    echo "e2e: processes left for $D:" >&2
    for p in "${pids[@]}"; do
      echo "  $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-200)" >&2
    done
    rc=1
  fi

  if [ "$rc" -eq 0 ]; then
    if [ -n "${E2E_KEEP:-}" ]; then
      log "E2E_KEEP set: keeping $D"
    else
      rm -rf --one-file-system "$D"
    fi
  else
    echo "e2e: cleanup of $D incomplete; directory kept" >&2
  fi
  log "engine stopped"
  D=""
  return "$rc"
}

# ---------------------------------------------------------------- image

# image_build: the busybox image reapd-test:1 (docker import of a root with
# busybox-static and links for its applets).
image_build() {
  local root="$D/img" a
  mkdir -p "$root/bin" "$root/tmp" "$root/etc"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
  done
  echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  tar -C "$root" -c . | dk import -c 'ENV PATH=/bin' -c 'CMD ["sh"]' - "$IMAGE" >/dev/null
  rm -rf "$root"
  log "image $IMAGE built"
}

# run_ctr ARGS...: docker run -d --network none ARGS..., echo the full id.
run_ctr() {
  dk run -d --network none "$@"
}

# ---------------------------------------------------------------- reapd

# _port_free PORT: no TCP socket on 127.0.0.1:PORT, listening or not (ss
# when installed, else a connect attempt through bash's /dev/tcp).
_port_free() {
  if command -v ss >/dev/null 2>&1; then
    [ -z "$(ss -Htan "sport = :$1" 2>/dev/null)" ]
  else
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
  fi
}

# pick_port: echo a free port for reapd's status endpoint, below the
# kernel's ephemeral range: a port in it can be taken between the check
# and reapd's bind by any outgoing connection (a test's curl, the
# engine's), which failed a run with "Address already in use".
pick_port() {
  local lo=20000 hi=32767 eph _ p
  eph=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true)
  if [ -n "$eph" ] && [ "$eph" -gt $((lo + 1000)) ] && [ "$eph" -le 65535 ]; then
    hi=$((eph - 1))
  fi
  for _ in $(seq 1 50); do
    p=$((lo + RANDOM % (hi - lo + 1)))
    if _port_free "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# reapd_config [EXTRA_JSON]: write $D/reapd.json (EXTRA_JSON is merged in
# with jq's recursive '*'; arrays such as policies are replaced whole).
reapd_config() {
  local extra=${1:-"{}"}
  jq -n --arg d "$D" --argjson port "$REAPD_PORT" --argjson extra "$extra" '
    {
      node: "e2e",
      state_dir: ($d + "/state"),
      docker: {socket: ($d + "/docker.sock")},
      containerd: {socket: "off"},
      status: {listen: ("127.0.0.1:" + ($port | tostring))},
      admin: {socket: ($d + "/admin.sock")},
      delete: {poll_interval_ms: 200, max_in_flight: 8},
      policies: [
        {name: "managed", match: {labels: {"reapd.managed": "true"}}, action: "remove"}
      ],
      default_action: "ignore",
      log: {format: "json", level: "debug"}
    } * $extra' >"$D/reapd.json"
}

# api PATH [CURL_ARGS...]: curl -s PATH of the read API on reapd's admin
# socket ($D/admin.sock), which serves it without a token; the status
# listener serves /v1/ only with status.token_file's (see status_token).
api() {
  local path=$1
  shift
  curl -s --unix-socket "$D/admin.sock" "$@" "http://localhost$path"
}

# status_token: a fresh token in $D/status.token (mode 0600), for
# reapd_start's extra '{status: {token_file: ...}}'; sets STATUS_TOKEN
# and AUTH (curl's arguments that send it).
# shellcheck disable=SC2034 # the tests' own
STATUS_TOKEN=""
# shellcheck disable=SC2034
AUTH=()
status_token() {
  STATUS_TOKEN="e2e-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  (umask 077 && printf '%s\n' "$STATUS_TOKEN" >"$D/status.token")
  # shellcheck disable=SC2034 # the tests' own
  AUTH=(-H "Authorization: Bearer $STATUS_TOKEN")
}

readyz_code() {
  curl -s -m 2 -o /dev/null -w '%{http_code}' "$REAPD_URL/readyz" 2>/dev/null || true
}

reapd_not_ready() {
  [ "$(readyz_code)" != 200 ]
}

# wait_ready SECONDS: until GET /readyz answers 200.
wait_ready() {
  local deadline=$(($(now_ms) + ${1:-20} * 1000))
  until [ "$(readyz_code)" = 200 ]; do
    if [ -n "$REAPD_PID" ] && ! pid_alive "$REAPD_PID"; then
      local st=0
      wait "$REAPD_PID" 2>/dev/null || st=$?
      REAPD_PID=""
      fail "reapd exited with status $st while waiting for /readyz"
    fi
    [ "$(now_ms)" -lt "$deadline" ] || fail "reapd /readyz not 200 within ${1:-20} s (last: $(readyz_code))"
    sleep 0.1
  done
}

# reapd_start BIN [EXTRA_JSON]: configure and start reapd, wait for /readyz.
# A port another test took between the pick and the bind (two tests run
# at once) is picked again, up to five times; any other exit fails.
reapd_start() {
  local bin=$1 extra=${2:-"{}"} try lines deadline
  [ -z "$REAPD_PID" ] || fail "reapd_start: reapd already running"
  for try in 1 2 3 4 5; do
    if [ -z "$REAPD_PORT" ]; then
      REAPD_PORT=$(pick_port) || fail "no free port in 20000-32767"
    fi
    REAPD_URL="http://127.0.0.1:$REAPD_PORT"
    reapd_config "$extra"
    lines=0
    [ -f "$D/reapd.log" ] && lines=$(wc -l <"$D/reapd.log")
    "$bin" -c "$D/reapd.json" </dev/null >>"$D/reapd.log" 2>&1 &
    REAPD_PID=$!
    deadline=$(($(now_ms) + 20000))
    while pid_alive "$REAPD_PID" && [ "$(readyz_code)" != 200 ] &&
      [ "$(now_ms)" -lt "$deadline" ]; do
      sleep 0.1
    done
    if ! pid_alive "$REAPD_PID" &&
      tail -n +"$((lines + 1))" "$D/reapd.log" | grep -q 'Address already in use'; then
      wait "$REAPD_PID" 2>/dev/null || true
      log "status port $REAPD_PORT was taken meanwhile (try $try): another"
      REAPD_PID=""
      REAPD_PORT=""
      continue
    fi
    break
  done
  [ -n "$REAPD_PID" ] || fail "no status port could be bound in 5 tries"
  wait_ready 20
  log "reapd ready (pid $REAPD_PID, $REAPD_URL)"
}

# reapd_stop: SIGTERM; reapd must exit within 5 s with status 0.
reapd_stop() {
  [ -n "$REAPD_PID" ] || return 0
  local pid=$REAPD_PID st=0 t0
  t0=$(now_ms)
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_pid_gone "$pid" 5; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    REAPD_PID=""
    fail "reapd did not exit within 5 s of SIGTERM (killed)"
  fi
  wait "$pid" || st=$?
  REAPD_PID=""
  log "reapd stopped in $(($(now_ms) - t0)) ms, status $st"
  [ "$st" -eq 0 ] || fail "reapd exited with status $st after SIGTERM (want 0)"
}

# reapd_kill9: SIGKILL reapd (a crash).
reapd_kill9() {
  [ -n "$REAPD_PID" ] || return 0
  kill -KILL "$REAPD_PID" 2>/dev/null || true
  wait "$REAPD_PID" 2>/dev/null || true
  REAPD_PID=""
  log "reapd killed"
}

_reapd_cleanup() {
  [ -n "$REAPD_PID" ] || return 0
  kill -TERM "$REAPD_PID" 2>/dev/null || true
  wait_pid_gone "$REAPD_PID" 5 || kill -KILL "$REAPD_PID" 2>/dev/null || true
  wait "$REAPD_PID" 2>/dev/null || true
  REAPD_PID=""
}

# ---------------------------------------------------------------- reports

REPORTS() { echo "$D/state/reports.jsonl"; }

# report_lines CID: every report line for CID (a partial last line is
# skipped).
report_lines() {
  local f
  f=$(REPORTS)
  [ -f "$f" ] || return 0
  jq -cR --arg id "$1" 'fromjson? | select(type == "object" and .container_id == $id)' "$f"
}

report_count() {
  report_lines "$1" | wc -l
}

# wait_report CID TIMEOUT_SECONDS: echo the first report line for CID.
wait_report() {
  local id=$1 deadline=$(($(now_ms) + ${2:-30} * 1000)) line
  while :; do
    line=$(report_lines "$id")
    line=${line%%$'\n'*}
    if [ -n "$line" ]; then
      echo "$line"
      return 0
    fi
    [ -z "$REAPD_PID" ] || pid_alive "$REAPD_PID" || fail "reapd exited while waiting for the report of ${id:0:12}"
    [ "$(now_ms)" -lt "$deadline" ] || fail "no report for container ${id:0:12} within ${2:-30} s"
    sleep 0.2
  done
}

# ---------------------------------------------------------------- asserts

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
  [ "$1" = "$2" ] || fail "${3:-value}: expected '$1', got '$2'"
}

# assert_json JSON [--arg NAME VALUE]... JQ_EXPR [WHAT]: the jq expression
# must yield true.
assert_json() {
  local json=$1 args=()
  shift
  while [ "${1:-}" = --arg ] || [ "${1:-}" = --argjson ]; do
    args+=("$1" "$2" "$3")
    shift 3
  done
  local expr=$1 what=${2:-assertion}
  if ! jq -e "${args[@]}" "$expr" >/dev/null 2>&1 <<<"$json"; then
    fail "$what failed: jq '$expr' ${args[*]} is not true for: $json"
  fi
}

# assert_gone CID: the engine no longer knows the container.
assert_gone() {
  local out
  if out=$(dk inspect --type container "$1" 2>&1); then
    fail "container ${1:0:12} still exists: $(jq -c '.[0].State' <<<"$out" 2>/dev/null)"
  fi
  case $out in
  *"No such"*) ;;
  *) fail "docker inspect ${1:0:12} failed for another reason: $out" ;;
  esac
}

# assert_present CID: the engine still has the container.
assert_present() {
  dk inspect --type container "$1" >/dev/null 2>&1 ||
    fail "container ${1:0:12} is gone, expected it to stay"
}

# shim_pids CID: the pids of CID's containerd shim (from /proc; a failure
# to read /proc fails the test rather than finding none).
shim_pids() {
  local p cmd
  [ -r /proc/self/cmdline ] || fail "cannot read /proc: shims cannot be seen"
  for p in $(pids_matching "-id $1 "); do
    { cmd=$(tr '\0' ' ' <"/proc/$p/cmdline"); } 2>/dev/null || continue
    case $cmd in *containerd-shim*) echo "$p" ;; esac
  done
}

# assert_leaked CID: containerd holds CID's task and container and its
# shim runs (the engine leaked them); every tool must answer.
assert_leaked() {
  local id=$1 tasks ctrs
  tasks=$(ctr_tasks 2>&1) || fail "ctr task ls failed: $tasks"
  ctrs=$(ctr_containers 2>&1) || fail "ctr containers ls failed: $ctrs"
  grep -q "^$id" <<<"$tasks" || fail "no leaked task for ${id:0:12}: $tasks"
  grep -qx "$id" <<<"$ctrs" || fail "no leaked containerd container for ${id:0:12}"
  [ -n "$(shim_pids "$id")" ] || fail "no shim running for ${id:0:12}"
}

# assert_no_task CID [SECONDS]: within SECONDS, containerd holds no task
# and no container for CID, and no shim of CID runs. A tool that fails
# fails the test (it never counts as "gone").
assert_no_task() {
  local id=$1 deadline=$(($(now_ms) + ${2:-5} * 1000))
  local tasks ctrs shims
  while :; do
    tasks=$(ctr_tasks 2>&1) || fail "ctr task ls failed: $tasks"
    ctrs=$(ctr_containers 2>&1) || fail "ctr containers ls failed: $ctrs"
    shims=$(shim_pids "$id")
    if ! grep -q "^$id" <<<"$tasks" && ! grep -qx "$id" <<<"$ctrs" &&
      [ -z "$shims" ]; then
      return 0
    fi
    [ "$(now_ms)" -lt "$deadline" ] ||
      fail "still there for ${id:0:12}: task: $(grep "^$id" <<<"$tasks" || echo none); containerd container: $(grep -x "$id" <<<"$ctrs" || echo none); shim: ${shims:-none}"
    sleep 0.2
  done
}

# assert_no_report CID
assert_no_report() {
  local n
  n=$(report_count "$1")
  [ "$n" -eq 0 ] || fail "unexpected report for ${1:0:12}: $(report_lines "$1" | head -n 1)"
}

# assert_log_clean: reapd logged nothing at level error or above.
assert_log_clean() {
  local bad
  bad=$(jq -cR 'fromjson? | select(type == "object")
      | select(((.level // .lvl // .severity // "") | tostring | ascii_downcase)
               | test("^(err|fatal|crit|panic|emerg|alert)"))' "$D/reapd.log" 2>/dev/null | sed -n 1,5p)
  [ -z "$bad" ] || fail "reapd logged errors: $bad"
}

# wait_until SECONDS WHAT CMD...: poll CMD until it succeeds.
wait_until() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$(($(now_ms) + secs * 1000))
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "timed out after ${secs} s waiting for: $what"
    sleep 0.1
  done
}

# assert_report_basic JSON CID: the fields every "removed" report of these
# tests must have.
assert_report_basic() {
  local line=$1 id=$2
  assert_json "$line" --arg id "$id" '.container_id == $id' "report container_id"
  assert_json "$line" '.node == "e2e"' "report node"
  assert_json "$line" '(.report_id | type) == "string" and (.report_id | length) > 0' "report_id"
  assert_json "$line" '(.anomalies | type) == "array"' "anomalies is an array"
  assert_json "$line" '.removed == true' "report removed"
  assert_json "$line" '.policy == "managed"' "report policy"
}

# assert_one_report_id CID: all report lines for CID (repeats are allowed:
# delivery is at-least-once) carry the same report_id.
assert_one_report_id() {
  local n
  n=$(report_lines "$1" | jq -r '.report_id' | sort -u | wc -l)
  [ "$n" -le 1 ] || fail "reports for ${1:0:12} carry $n different report_ids"
}

# ================================================================ fault proxy
# Added for test_faults.sh: tests/tools/faultproxy sits between reapd and
# the engine ($D/proxy.sock -> $D/docker.sock) and injects faults on
# command (control socket $D/proxy.ctl; protocol in tests/tools/README.md).
# The functions above are unchanged; a test that uses the proxy calls
# proxy_start after engine_start and points reapd at $PROXY_SOCK.

FAULTPROXY_BIN=""
PROXY_PID=""
PROXY_SOCK=""
PROXY_CTL=""

# faultproxy_find: the faultproxy built with reapd: ctest passes
# <builddir>/reapd, the proxy is <builddir>/tests/tools/faultproxy.
faultproxy_find() {
  FAULTPROXY_BIN=$(dirname "$REAPD_BIN")/tests/tools/faultproxy
  [ -x "$FAULTPROXY_BIN" ] ||
    fail "fault proxy '$FAULTPROXY_BIN' is missing: build it with 'cmake --build BUILDDIR --target faultproxy'"
}

# proxy_start: start the proxy in front of $D/docker.sock, log in
# $D/faultproxy.log, wait (10 s at most) for its "ready" line. On a failing
# exit the proxy's log is printed too.
proxy_start() {
  [ -n "$D" ] || fail "proxy_start: no engine directory (engine_start first)"
  [ -z "$PROXY_PID" ] || fail "proxy_start: proxy already running"
  [ -n "$FAULTPROXY_BIN" ] || faultproxy_find
  PROXY_SOCK="$D/proxy.sock"
  PROXY_CTL="$D/proxy.ctl"
  "$FAULTPROXY_BIN" --listen "$PROXY_SOCK" --upstream "$D/docker.sock" \
    --control "$PROXY_CTL" </dev/null >>"$D/faultproxy.log" 2>&1 &
  PROXY_PID=$!
  trap _proxy_on_exit EXIT
  local deadline=$(($(now_ms) + 10000))
  until grep -qx ready "$D/faultproxy.log" 2>/dev/null; do
    pid_alive "$PROXY_PID" || fail "faultproxy exited during start: $(tail -n 5 "$D/faultproxy.log")"
    [ "$(now_ms)" -lt "$deadline" ] || fail "faultproxy not ready within 10 s"
    sleep 0.05
  done
  log "faultproxy up (pid $PROXY_PID, $PROXY_SOCK)"
}

# proxy_ctl QUERY: switch faults (GET /fault?QUERY, e.g. "del500=2",
# "reset=1"); fails unless the proxy answers 200. Prints nothing.
proxy_ctl() {
  local out code
  out=$(curl -s -m 5 -w '\n%{http_code}' --unix-socket "$PROXY_CTL" \
    "http://proxy/fault?$1" 2>&1) || fail "faultproxy control '$1': curl failed: $out"
  code=${out##*$'\n'}
  [ "$code" = 200 ] || fail "faultproxy control '$1': HTTP $code: ${out%$'\n'*}"
  log "proxy: $1"
}

# proxy_state: the proxy's faults and counters (GET /state), as JSON.
proxy_state() {
  curl -s -m 5 --fail --unix-socket "$PROXY_CTL" http://proxy/state ||
    fail "faultproxy /state failed"
}

# proxy_get JQ_PATH: one value of proxy_state, e.g. proxy_get .counters.cuts
proxy_get() {
  proxy_state | jq -r "$1"
}

# proxy_counter_is JQ_PATH VALUE: for wait_until.
proxy_counter_is() {
  [ "$(proxy_get "$1")" = "$2" ]
}

# proxy_stop: SIGTERM; the proxy must exit within 5 s with status 0.
proxy_stop() {
  [ -n "$PROXY_PID" ] || return 0
  local pid=$PROXY_PID st=0
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_pid_gone "$pid" 5; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    PROXY_PID=""
    fail "faultproxy did not exit within 5 s of SIGTERM (killed)"
  fi
  wait "$pid" || st=$?
  PROXY_PID=""
  log "faultproxy stopped, status $st"
  [ "$st" -eq 0 ] || fail "faultproxy exited with status $st after SIGTERM (want 0)"
}

_proxy_cleanup() {
  [ -n "$PROXY_PID" ] || return 0
  kill -TERM "$PROXY_PID" 2>/dev/null || true
  wait_pid_gone "$PROXY_PID" 5 || kill -KILL "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
  PROXY_PID=""
}

_proxy_status() { return "$1"; }

# ---------------------------------------------------------------- upstream

# upstream_start [MODE]: the upstream receiver (tests/tools, built next to
# the reapd binary) on a free port, recording what it is sent in
# $D/upstream.jsonl and answering MODE (default 200); sets RECV_PID and
# UPSTREAM_PORT. The EXIT trap stops it, and every pid in E2E_BG_PIDS,
# before the harness's own cleanup.
E2E_BG_PIDS=()
upstream_start() {
  local recv
  recv="$(dirname "$REAPD_BIN")/tests/tools/upstream_receiver"
  [ -x "$recv" ] || fail "no upstream receiver at $recv (build the project)"
  "$recv" --record "$D/upstream.jsonl" --port-file "$D/upstream.port" \
    --mode "${1:-200}" >"$D/receiver.out" 2>"$D/receiver.log" &
  RECV_PID=$!
  trap _upstream_on_exit EXIT
  wait_until 10 "the receiver to listen" test -s "$D/upstream.port"
  # shellcheck disable=SC2034  # read by the tests
  UPSTREAM_PORT=$(cat "$D/upstream.port")
}

# shellcheck disable=SC2317  # run by the EXIT trap
_upstream_on_exit() {
  local rc=$? p
  # _proxy_status hands rc on as a failing status: under errexit it
  # would end this trap before the engine is stopped.
  trap - ERR
  set +e
  for p in "$RECV_PID" "${E2E_BG_PIDS[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  _proxy_status "$rc"
  _e2e_on_exit
}

# The EXIT trap while a proxy runs: its log on failure, stop it, then the
# usual _e2e_on_exit (handed the same exit status).
_proxy_on_exit() {
  local rc=$?
  trap - ERR
  set +e
  if [ "$rc" -ne 0 ] && [ "$E2E_DONE" -eq 0 ] && [ -n "$D" ] &&
    [ -f "$D/faultproxy.log" ]; then
    echo "----- last 40 lines of $D/faultproxy.log -----" >&2
    tail -n 40 "$D/faultproxy.log" >&2
  fi
  _proxy_cleanup
  _proxy_status "$rc"
  _e2e_on_exit
}
