#!/usr/bin/env bash
# The Kubernetes manifests against the Kubernetes API's own types, offline
# (no cluster, no API server, no schema download): tests/tools/k8s_schema.py
# decodes every document strictly into the typed models of Debian 12's
# Kubernetes Python client (python3-kubernetes 22.6.0, generated from
# Kubernetes 1.22's OpenAPI schema): YAML syntax and duplicate keys, a
# known apiVersion/kind, no unknown field, every value of its field's
# type (IntOrString and Quantity included), every required field there.
# - the checker is first shown copies of the manifests broken in each of
#   those ways, and must refuse every one, naming what is wrong;
# - deploy/kubernetes/daemonset.yaml (Namespace, ResourceQuota,
#   ServiceAccount, ConfigMap, DaemonSet) and networkpolicy.yaml pass;
# - deploy/prometheus/podmonitor.yaml and prometheusrule.yaml are custom
#   resources of the Prometheus operator, whose schema is in no Debian 12
#   package: the client must not know them, and only their apiVersion,
#   kind, metadata (as an ObjectMeta) and top-level keys are checked.
# What no validator here checks (value rules, admission, Pod Security,
# scheduling, the pod running at all): docs/deploy.md.
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin kubernetes-schema "$@"
V=$SRC/tests/tools/k8s_schema.py
K8S=$SRC/deploy/kubernetes
PROM=$SRC/deploy/prometheus
CRDS=(--schemaless monitoring.coreos.com/v1/PodMonitor
  --schemaless monitoring.coreos.com/v1/PrometheusRule)
for f in "$V" "$K8S/daemonset.yaml" "$K8S/networkpolicy.yaml" \
  "$PROM/podmonitor.yaml" "$PROM/prometheusrule.yaml"; do
  [ -f "$f" ] || fail "missing $f"
done
# Debian's python3 (not another one first in PATH): the client is a
# Debian package.
PY=/usr/bin/python3
"$PY" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("kubernetes") and u.find_spec("yaml")))' ||
  fail "the Kubernetes Python client is not installed for $PY (Debian: python3-kubernetes, in scripts/deps)"

# --- the checker refuses broken copies -------------------------------------
# broken NAME FILE SED_SCRIPT EXPECTED: a copy of FILE edited by SED_SCRIPT
# (which must change it), whose check must say EXPECTED.
cases=()
broken() {
  local name=$1 file=$2 script=$3
  sed -e "$script" "$file" >"$T/$name.yaml"
  ! cmp -s "$file" "$T/$name.yaml" ||
    fail "broken copy $name: '$script' changes nothing in $file (the manifest changed?)"
  cases+=("$name" "$4")
}
DS=$K8S/daemonset.yaml
NP=$K8S/networkpolicy.yaml
broken misspelled "$DS" 's/imagePullPolicy:/imagePulPolicy:/' \
  'spec.template.spec.containers[0].imagePulPolicy: unknown field (not in V1Container)'
broken port-string "$DS" 's/containerPort: 9323/containerPort: "9323"/' \
  "containers[0].ports[0].containerPort: a string ('9323'), want an integer"
broken bool-string "$DS" 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: "true"/' \
  "securityContext.readOnlyRootFilesystem: a string ('true'), want a boolean"
broken args-string "$DS" 's|args: \[.*\]|args: -c /etc/reapd/reapd.json|' \
  'containers[0].args: a string'
broken annotation-bool "$DS" 's|prometheus.io/scrape: "true"|prometheus.io/scrape: true|' \
  'annotations.prometheus.io/scrape: a boolean (true), want a string'
broken no-container-name "$DS" 's/^        - name: reapd$/        - stdin: false/' \
  'spec.template.spec.containers[0].name: required field missing (in V1Container)'
broken no-selector "$DS" '/^  selector:$/,/^      app.kubernetes.io\/name: reapd$/d' \
  'spec.selector: required field missing (in V1DaemonSetSpec)'
broken no-name "$DS" 's/^  name: reapd-config$/  nam: reapd-config/' \
  'ConfigMap (no name): metadata.name: required field missing'
broken quantity "$DS" 's/memory: 32Mi/memory: 32MB/' \
  "resources.requests.memory: '32MB' is not a quantity"
broken int-or-string "$DS" 's/maxUnavailable: 1/maxUnavailable: [1]/' \
  'rollingUpdate.maxUnavailable: a list, want an integer or a string'
broken duplicate "$DS" 's|^\(          image: .*\)|\1\n          image: other|' \
  "the key 'image' is given twice"
broken removed-api "$DS" 's|^apiVersion: apps/v1$|apiVersion: apps/v1beta2|' \
  'apps/v1beta2 DaemonSet: no such API'
broken yaml-syntax "$DS" 's/^      serviceAccountName: reapd/    serviceAccountName: reapd/' \
  'mapping values are not allowed here'
broken np-misspelled "$NP" 's/podSelector:/podSelecter:/' \
  'spec.podSelector: required field missing (in V1NetworkPolicySpec)'
broken np-list "$NP" 's/policyTypes: \[Ingress\]/policyTypes: Ingress/' \
  "spec.policyTypes: a string ('Ingress'), want a list"
broken pm-metadata "$PROM/podmonitor.yaml" 's/^  labels:$/  label:/' \
  'metadata.label: unknown field (not in V1ObjectMeta)'
broken pr-top "$PROM/prometheusrule.yaml" 's/^spec:$/specs:/' \
  'specs: unknown field'
files=()
for ((i = 0; i < ${#cases[@]}; i += 2)); do files+=("$T/${cases[i]}.yaml"); done
set +e
"$PY" "$V" "${CRDS[@]}" "${files[@]}" >"$T/out" 2>"$T/err"
rc=$?
set -e
[ "$rc" = 1 ] || fail "the checker on the broken copies: exit $rc, want 1: $(cat "$T/err")"
for ((i = 0; i < ${#cases[@]}; i += 2)); do
  name=${cases[i]} says=${cases[i + 1]}
  grep -qF "$T/$name.yaml:" "$T/err" ||
    fail "the checker accepts the copy broken by $name: $(grep -F "$T/$name.yaml" "$T/out")"
  grep -F "$T/$name.yaml:" "$T/err" | grep -qF -- "$says" ||
    fail "broken by $name, want \"$says\"; the checker says: $(grep -F "$T/$name.yaml:" "$T/err")"
done
ok "the checker refuses $((${#cases[@]} / 2)) broken copies: a misspelled field; a string for an integer, a boolean, a list; a boolean annotation; no container name, no selector, no metadata.name; a bad quantity; a list for an IntOrString; a duplicate key; a removed API version; broken YAML; a NetworkPolicy without podSelector or with policyTypes a string; an unknown field in a custom resource's metadata or top level"

# The operator's custom resources are unknown to the client: only their
# metadata can be checked.
set +e
"$PY" "$V" "$PROM/podmonitor.yaml" >/dev/null 2>"$T/err"
rc=$?
set -e
if [ "$rc" != 1 ] || ! grep -qF 'monitoring.coreos.com/v1 PodMonitor: no such API' "$T/err"; then
  fail "a PodMonitor without --schemaless: exit $rc: $(cat "$T/err")"
fi
ok "the client has no schema for monitoring.coreos.com (PodMonitor refused unless named schemaless)"

# --- the manifests -------------------------------------------------------------
"$PY" "$V" "${CRDS[@]}" "$K8S/daemonset.yaml" "$K8S/networkpolicy.yaml" \
  "$PROM/podmonitor.yaml" "$PROM/prometheusrule.yaml" >"$T/out" 2>"$T/err" ||
  fail "the manifests: $(cat "$T/err")"
cat "$T/out"
want="Namespace reapd-system: ok (V1Namespace)
ResourceQuota reapd-critical-pods: ok (V1ResourceQuota)
ServiceAccount reapd: ok (V1ServiceAccount)
ConfigMap reapd-config: ok (V1ConfigMap)
DaemonSet reapd: ok (V1DaemonSet)
NetworkPolicy reapd: ok (V1NetworkPolicy)
PodMonitor reapd: ok (no schema: apiVersion, kind, metadata checked)
PrometheusRule reapd: ok (no schema: apiVersion, kind, metadata checked)"
got=$(sed 's/^[^:]*: //' "$T/out")
[ "$got" = "$want" ] || fail "objects checked: $got; want: $want"
ok "daemonset.yaml (Namespace, ResourceQuota, ServiceAccount, ConfigMap, DaemonSet) and networkpolicy.yaml decode strictly into Kubernetes 1.22's types; the PodMonitor's and PrometheusRule's metadata into ObjectMeta"

echo "$n passed, 0 failed"
