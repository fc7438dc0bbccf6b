#!/usr/bin/env bash
# deploy/kubernetes/daemonset.yaml, short of a cluster (none is at hand):
# - it parses, as the five objects docs/deploy.md describes, all in the
#   DaemonSet's namespace;
# - the pod: no init container, the node's name in REAPD_NODE_NAME from
#   the downward API (spec.nodeName), priorityClassName
#   system-node-critical with a ResourceQuota in the same namespace whose
#   scopeSelector admits that class, the ConfigMap mounted read-only at
#   /etc/reapd, /run/reapd a memory-backed emptyDir, the selector
#   matching the pod's labels, every mount naming a volume, HTTP probes
#   (/livez, /readyz) on the port named "status", no exec probe or
#   command (nothing that needs a shell in the image), a read-only root
#   file system;
# - the ConfigMap's config has no "node" and no placeholder, passes
#   `reapd --check-config`, listens on the port the pod names, puts the
#   admin socket in /run/reapd; and a reapd started on it (paths moved
#   into a scratch directory, no engine) with REAPD_NODE_NAME set reports
#   that node name and answers reapctl on its admin socket.
# The checker is first shown broken copies of the file and must refuse
# each, naming what is wrong: a check that accepts anything would prove
# nothing. Needs PyYAML (Debian: python3-yaml, in scripts/deps).
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin kubernetes "$@"
DS=$SRC/deploy/kubernetes/daemonset.yaml
CTL=$(dirname "$BIN")/reapctl
[ -f "$DS" ] || fail "missing $DS"
[ -x "$CTL" ] || fail "no reapctl next to $BIN"
python3 -c 'import yaml' 2>/dev/null ||
  fail "PyYAML not installed for python3 (Debian: python3-yaml)"

cat >"$T/check.py" <<'PY'
"""Checks of the DaemonSet manifest.
check FILE [CONFIG_OUT]: exit 1 with one line per problem on stderr;
writes the ConfigMap's reapd.json to CONFIG_OUT (and its port to
CONFIG_OUT.port).
selftest FILE: breaks a copy of FILE in each way of BREAKS and exits 1
unless the check refuses every one, saying what BREAKS expects."""
import copy
import sys
import yaml

CLASS = "system-node-critical"
problems = []

def bad(msg):
    problems.append(msg)

def docs_of(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]

def check(docs, config_out=None):
    kinds = sorted(d.get("kind", "?") for d in docs)
    want = sorted(["Namespace", "ResourceQuota", "ServiceAccount", "ConfigMap", "DaemonSet"])
    if kinds != want:
        bad("objects: %s, want %s" % (", ".join(kinds), ", ".join(want)))
    by = {}
    for d in docs:
        by.setdefault(d.get("kind"), []).append(d)
    dss = by.get("DaemonSet", [])
    if len(dss) != 1:
        bad("%d DaemonSets" % len(dss))
        return
    ds = dss[0]
    ns = ds["metadata"].get("namespace")
    names = [n["metadata"]["name"] for n in by.get("Namespace", [])]
    if ns not in names:
        bad("the DaemonSet's namespace %s is not created here (%s)" % (ns, names))
    for d in docs:
        if d.get("kind") != "Namespace" and d["metadata"].get("namespace") != ns:
            bad("%s %s is not in the namespace %s" % (d["kind"], d["metadata"].get("name"), ns))
    pod = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"].get("labels") or {}
    sel = (ds["spec"].get("selector") or {}).get("matchLabels") or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        bad("the selector %s does not match the pod labels %s" % (sel, labels))

    # No init container: the config is mounted as is.
    if pod.get("initContainers"):
        bad("initContainers: %s (the config needs no rendering)"
            % [c.get("name") for c in pod["initContainers"]])

    # Priority, admitted in this namespace by a ResourceQuota.
    if pod.get("priorityClassName") != CLASS:
        bad("priorityClassName: %s, want %s" % (pod.get("priorityClassName"), CLASS))
    covered = False
    for q in by.get("ResourceQuota", []):
        if q["metadata"].get("namespace") != ns:
            continue
        for e in ((q.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []:
            if (e.get("scopeName") == "PriorityClass" and e.get("operator") == "In"
                    and pod.get("priorityClassName") in (e.get("values") or [])):
                covered = True
    if not covered:
        bad("no ResourceQuota in %s with a scopeSelector PriorityClass In [%s]"
            % (ns, pod.get("priorityClassName")))

    cs = [c for c in pod.get("containers", []) if c.get("name") == "reapd"]
    if len(cs) != 1:
        bad("containers: no one container named reapd")
        return
    c = cs[0]

    # The node's name from the downward API.
    env = {e.get("name"): e for e in c.get("env") or []}
    ref = (((env.get("REAPD_NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {})
    if ref.get("fieldPath") != "spec.nodeName":
        bad("env REAPD_NODE_NAME: not from fieldRef spec.nodeName: %s" % env.get("REAPD_NODE_NAME"))

    # Nothing that needs a shell; HTTP probes on the status port.
    for cc in pod.get("containers", []) + (pod.get("initContainers") or []):
        if cc.get("command"):
            bad("container %s has a command: %s" % (cc.get("name"), cc["command"]))
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if "exec" in (cc.get(probe) or {}):
                bad("container %s: %s runs a command" % (cc.get("name"), probe))
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    if "status" not in ports:
        bad("no container port named status: %s" % ports)
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        g = (c.get(probe) or {}).get("httpGet") or {}
        if g.get("path") != path or g.get("port") != "status":
            bad("%s: want httpGet %s on port status, got %s" % (probe, path, c.get(probe)))
    if not (c.get("securityContext") or {}).get("readOnlyRootFilesystem"):
        bad("the root file system is not read-only")

    # Volumes: every mount names one, every one is mounted.
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
    for m in mounts.values():
        if m["name"] not in vols:
            bad("mount %s names no volume (%s)" % (m["mountPath"], m["name"]))
    used = {m["name"] for m in mounts.values()}
    for v in vols:
        if v not in used:
            bad("volume %s is not mounted" % v)
    cm_names = [m["metadata"]["name"] for m in by.get("ConfigMap", [])]
    m = mounts.get("/etc/reapd")
    v = vols.get(m["name"]) if m else None
    if not m or not v or (v.get("configMap") or {}).get("name") not in cm_names:
        bad("/etc/reapd: not the ConfigMap %s: %s" % (cm_names, v))
    elif not m.get("readOnly"):
        bad("/etc/reapd: mounted writable")
    m = mounts.get("/run/reapd")
    v = vols.get(m["name"]) if m else None
    if not v or (v.get("emptyDir") or {}).get("medium") != "Memory":
        bad("/run/reapd: not a memory-backed emptyDir: %s" % v)

    # The ConfigMap's config, for reapd to judge.
    cms = by.get("ConfigMap", [])
    text = ((cms[0].get("data") or {}) if cms else {}).get("reapd.json")
    if not text:
        bad("the ConfigMap has no reapd.json")
        return
    if "@NODE_NAME@" in text:
        bad("the config still has the placeholder @NODE_NAME@")
    if config_out:
        with open(config_out, "w") as f:
            f.write(text)
        with open(config_out + ".port", "w") as f:
            f.write("%s\n" % ports.get("status"))

def broken(docs, what):
    docs = copy.deepcopy(docs)
    ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    if what == "init":
        pod["initContainers"] = [{"name": "render-config", "image": c["image"],
                                  "command": ["/bin/sh", "-c", "true"]}]
    elif what == "env":
        c["env"] = [e for e in c.get("env", []) if e["name"] != "REAPD_NODE_NAME"]
    elif what == "priority":
        pod.pop("priorityClassName", None)
    elif what == "quota":
        docs = [d for d in docs if d["kind"] != "ResourceQuota"]
    elif what == "quota-ns":
        for d in docs:
            if d["kind"] == "ResourceQuota":
                d["metadata"]["namespace"] = "default"
    elif what == "run-disk":
        run = [m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/run/reapd"]
        for v in pod["volumes"]:
            if v["name"] in run and "emptyDir" in v:
                v["emptyDir"].pop("medium", None)
    elif what == "exec-probe":
        c["livenessProbe"] = {"exec": {"command": ["/bin/sh", "-c", "reapctl status"]}}
    elif what == "config-rw":
        for m in c["volumeMounts"]:
            if m["mountPath"] == "/etc/reapd":
                m.pop("readOnly", None)
    elif what == "selector":
        ds["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "other"}
    elif what == "placeholder":
        cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
        cm["data"]["reapd.json"] = cm["data"]["reapd.json"].replace(
            "{", '{ "node": "@NODE_NAME@",', 1)
    else:
        sys.exit("unknown break " + what)
    return docs

# Each way to break the file, and what the check must then say.
BREAKS = [
    ("init", "initContainers"),
    ("env", "env REAPD_NODE_NAME"),
    ("priority", "priorityClassName: None"),
    ("quota", "no ResourceQuota in reapd-system"),
    ("quota-ns", "no ResourceQuota in reapd-system"),
    ("run-disk", "/run/reapd: not a memory-backed emptyDir"),
    ("exec-probe", "livenessProbe runs a command"),
    ("config-rw", "/etc/reapd: mounted writable"),
    ("placeholder", "placeholder @NODE_NAME@"),
    ("selector", "does not match the pod labels"),
]

docs = docs_of(sys.argv[2])
if sys.argv[1] == "check":
    check(docs, sys.argv[3] if len(sys.argv) > 3 else None)
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)
failures = []
for what, says in BREAKS:
    problems.clear()
    check(broken(docs, what))
    if not problems:
        failures.append("the check accepts a copy broken by %s" % what)
    elif not any(says in p for p in problems):
        failures.append("broken by %s, the check says: %s" % (what, "; ".join(problems)))
for f in failures:
    print(f, file=sys.stderr)
sys.exit(1 if failures else 0)
PY

# --- the checker refuses broken copies ---------------------------------
python3 "$T/check.py" selftest "$DS" 2>"$T/err" || fail "$(cat "$T/err")"
ok "the checker refuses copies with an init container, without REAPD_NODE_NAME, the priority class or its ResourceQuota (or one elsewhere), with /run/reapd on disk, an exec probe, a writable config, the @NODE_NAME@ placeholder, a selector that misses the pods"

# --- the manifest --------------------------------------------------------
python3 "$T/check.py" check "$DS" "$T/reapd.json" 2>"$T/err" ||
  fail "$DS: $(cat "$T/err")"
ok "daemonset.yaml: 5 objects in one namespace; no init container; REAPD_NODE_NAME from spec.nodeName; system-node-critical with its ResourceQuota; ConfigMap read-only at /etc/reapd; /run/reapd in memory; HTTP probes on port status; no shell needed"

# --- its config, judged by reapd -------------------------------------------
"$BIN" --check-config -c "$T/reapd.json" >"$T/out" 2>&1 ||
  fail "the ConfigMap's config is rejected: $(cat "$T/out")"
# The effective config: what reapd makes of it (defaults filled in), with
# a node name in the environment that only a "node" in the file overrides.
REAPD_NODE_NAME=env-probe "$BIN" --print-config -c "$T/reapd.json" >"$T/effective.json" 2>"$T/err" ||
  fail "reapd --print-config on the ConfigMap's config: $(cat "$T/err")"
python3 - "$T/effective.json" "$T/reapd.json.port" "$T" "$(free_port)" >"$T/local.json" 2>"$T/err" <<'PY' ||
import json, sys

cfg = json.load(open(sys.argv[1]))
port = open(sys.argv[2]).read().strip()
scratch = sys.argv[3]
problems = []
if cfg.get("node") != "env-probe":
    problems.append('the config sets "node" (%s): REAPD_NODE_NAME would not count' % cfg.get("node"))
del cfg["node"]
cfg.pop("source", None)
listen = (cfg.get("status") or {}).get("listen", "")
if listen != "0.0.0.0:" + port:
    problems.append("status.listen %s: want 0.0.0.0:%s (the pod's port status)" % (listen, port))
admin = (cfg.get("admin") or {}).get("socket", "/run/reapd/admin.sock")
if not admin.startswith("/run/reapd/"):
    problems.append("admin.socket %s is not in /run/reapd (the emptyDir)" % admin)
if problems:
    sys.exit("\n".join(problems))
# The same config, its paths moved into the scratch directory, no engine,
# the status endpoint on a free port (free_port, common.bash).
cfg["state_dir"] = scratch + "/state"
cfg["docker"] = dict(cfg.get("docker") or {}, socket=scratch + "/no-engine.sock")
cfg["containerd"] = dict(cfg.get("containerd") or {}, socket="off")
cfg["status"] = dict(cfg["status"], listen="127.0.0.1:" + sys.argv[4])
cfg["admin"] = dict(cfg.get("admin") or {}, socket=scratch + admin)
print(json.dumps(cfg))
PY
  fail "the ConfigMap's config: $(cat "$T/err")"
mkdir -p "$T/run/reapd"
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"]["listen"].split(":")[1])' "$T/local.json")
REAPD_NODE_NAME=k8s-node-7 "$BIN" -c "$T/local.json" 2>"$T/log" &
pid=$!
code=""
for _ in $(seq 1 100); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/livez" || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || fail "reapd died on the ConfigMap's config"
  sleep 0.1
done
[ "$code" = 200 ] || fail "/livez never answered 200"
set +e
REAPD_SOCKET=$T/run/reapd/admin.sock "$CTL" status >"$T/status" 2>"$T/err"
rc=$?
set -e
# No engine here: reapd answers, not ready (1).
[ "$rc" = 1 ] || fail "reapctl status on the admin socket: exit $rc, want 1: $(cat "$T/err")"
node=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["node"])' "$T/status") ||
  fail "reapctl status: no node in $(cat "$T/status")"
[ "$node" = k8s-node-7 ] || fail "node is $node, want k8s-node-7 (REAPD_NODE_NAME)"
kill "$pid"
wait "$pid" || fail "reapd did not stop cleanly on SIGTERM"
pid=""
ok "its config passes --check-config, listens on the pod's port status, has no node; reapd on it takes node k8s-node-7 from REAPD_NODE_NAME and answers reapctl status on its admin socket"

echo "$n passed, 0 failed"
