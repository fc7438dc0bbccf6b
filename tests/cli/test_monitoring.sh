#!/usr/bin/env bash
# The monitoring that ships in deploy/prometheus/ is right about reapd:
# - the alerting rules pass `promtool check rules` and their unit tests
#   (`promtool test rules`), every alert has a case where it fires and
#   one where it does not, and each has for:, a severity, a summary, a
#   description and a runbook_url naming a heading of docs/runbook.md;
# - prometheusrule.yaml carries exactly the groups of reapd.rules.yml;
# - every metric named in a rule or a dashboard query (targets and
#   variables) is documented in docs/metrics.md and exposed by a real
#   reapd's /metrics (engine-less here; histograms as _bucket/_sum/_count),
#   with the labels and label values the selectors ask for; the dashboard's
#   queries parse (promtool) and use its ${datasource} and $instance;
# - the PodMonitor selects the DaemonSet's pods, on a port the DaemonSet
#   names, with the job name the rules expect.
# Each checker is first shown a broken copy and must refuse it, naming
# what is wrong: a check that accepts anything would prove nothing.
# Needs promtool (Debian: prometheus) and PyYAML (Debian: python3-yaml).
# PromQL and Grafana's $variables in single quotes are meant literally:
# shellcheck disable=SC2016
# shellcheck source-path=SCRIPTDIR source=common.bash
source "$(dirname "$0")/common.bash"
cli_begin monitoring "$@"
D=$SRC/deploy/prometheus
RULES=$D/reapd.rules.yml
RULETESTS=$D/reapd.rules.test.yml
PROMRULE=$D/prometheusrule.yaml
PODMON=$D/podmonitor.yaml
DASH=$D/grafana-dashboard.json
DS=$SRC/deploy/kubernetes/daemonset.yaml
DOCS=$SRC/docs/metrics.md
RUNBOOK=$SRC/docs/runbook.md
for f in "$RULES" "$RULETESTS" "$PROMRULE" "$PODMON" "$DASH" "$DS" "$DOCS" "$RUNBOOK"; do
  [ -f "$f" ] || fail "missing $f"
done
command -v promtool >/dev/null 2>&1 ||
  fail "promtool not installed (scripts/deps installs Debian's prometheus)"
python3 -c 'import yaml' 2>/dev/null ||
  fail "PyYAML not installed for python3 (Debian: python3-yaml)"

cat >"$T/check.py" <<'PY'
"""Checks of deploy/prometheus/ against reapd; one command per check,
exit 1 with one line per problem on stderr."""
import json, re, sys
import yaml

problems = []
def bad(msg):
    problems.append(msg)

def done():
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)

def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)

# ---- PromQL, just enough of it --------------------------------------------
TOKEN = re.compile(r"""\s*(?:
    (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?[a-zA-Z0-9]*)
  | (?P<id>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],:@])
  )""", re.X)
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan",
            "Inf", "NaN"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}

def tokens(expr):
    out, pos = [], 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError("cannot read %r at %r" % (expr, expr[pos:pos + 20]))
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out

def unquote(s):
    return s[1:-1].encode().decode("unicode_escape") if s[0] != "`" else s[1:-1]

def parse(expr):
    """-> (metric names, [(metric, label, op, value)], grouping labels)"""
    expr = re.sub(r"\$__\w+", "5m", expr)       # Grafana's range variables
    expr = re.sub(r"\$\{?\w+\}?", "__var__", expr)  # the others (in strings)
    t = tokens(expr)
    names, matchers, grouping = set(), [], set()
    i, depth_sq = 0, 0
    while i < len(t):
        kind, v = t[i]
        nxt = t[i + 1][1] if i + 1 < len(t) else None
        if v == "[":
            depth_sq += 1
        elif v == "]":
            depth_sq -= 1
        elif depth_sq:
            pass
        elif kind == "id" and v in GROUPING and nxt == "(":
            i += 2
            while i < len(t) and t[i][1] != ")":
                if t[i][0] == "id":
                    grouping.add(t[i][1])
                i += 1
        elif kind == "id" and (nxt == "(" or nxt in ("by", "without")):
            pass                                # a function or aggregation
        elif kind == "id" and v not in KEYWORDS:
            names.add(v)
            if nxt == "{":
                i += 2
                while i < len(t) and t[i][1] != "}":
                    if t[i][0] == "id":
                        label, op, val = t[i][1], t[i + 1][1], t[i + 2][1]
                        matchers.append((v, label, op, unquote(val)))
                        i += 3
                    else:
                        i += 1
        elif v == "{":
            raise ValueError("a selector without a metric name in %r" % expr)
        i += 1
    return names, matchers, grouping

# ---- where the expressions are ---------------------------------------------
def rule_exprs(path, groups=None):
    if groups is None:
        groups = load_yaml(path)["groups"]
    for g in groups:
        for r in g.get("rules", []):
            yield "%s: %s" % (path, r.get("alert") or r.get("record")), str(r["expr"]), None

def dashboard_panels(panels):
    for p in panels:
        yield p
        yield from dashboard_panels(p.get("panels", []))

def dashboard_exprs(path):
    d = json.load(open(path))
    for p in dashboard_panels(d.get("panels", [])):
        for tg in p.get("targets", []):
            where = "%s: panel %r query %s" % (path, p.get("title"), tg.get("refId"))
            yield where, tg.get("expr", ""), tg.get("legendFormat")
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q or "")
        where = "%s: variable %s" % (path, v.get("name"))
        if m:
            yield where, m.group(1), "{{%s}}" % m.group(2)
        else:
            m = re.fullmatch(r"\s*query_result\((.*)\)\s*", q or "")
            if not m:
                bad("%s: cannot read the query %r" % (where, q))
                continue
            yield where, m.group(1), None

# ---- the exposition ------------------------------------------------------
def exposition(path):
    series, types = {}, {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            _, _, fam, typ = line.split(" ", 3)
            types[fam] = typ
        elif line and not line.startswith("#"):
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
            labels = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            series.setdefault(m.group(1), []).append(labels)
    return series, types

# Labels Prometheus and the PodMonitor put on every series.
TARGET_LABELS = {"job", "instance", "node", "namespace", "pod", "container", "endpoint"}
# Prometheus' own series, not reapd's.
PROMETHEUS_OWN = {"up"}
# Documented families a reapd exposes only with an engine (this one is
# engine-less): each must still be documented and written by agent/metrics.c.
NEEDS_ENGINE = {"reapd_engine_info": "only once the engine has answered GET /version"}

def doc_table(doc):
    """docs/metrics.md's table: {family: its documented label names}. A
    labels cell is clauses split by ";": `l` = `v1`, `v2` and `l` (`v1`,
    ...) name one label and its values; else every backticked word is a
    label (`version`, `revision`)."""
    out = {}
    for line in doc.split("\n"):
        cols = [c.strip() for c in line.split("|")]
        if len(cols) < 6 or not cols[1].startswith("`"):
            continue
        labels = set()
        for clause in cols[3].split(";"):
            head = re.split(r"=|\(", clause, maxsplit=1)
            words = re.findall(r"`(\w+)`", head[0])
            labels |= set(words[:1] if len(head) > 1 else words)
        for fam in re.findall(r"`((?:reapd|process)_[a-z0-9_]+)`", cols[1]):
            out[fam] = labels
    return out

def cmd_metrics(metrics, docs, metrics_c, files):
    series, types = exposition(metrics)
    doc = open(docs).read()
    src = open(metrics_c).read()
    table = doc_table(doc)
    documented = set(table)
    records = set()
    exprs = []
    for f in files:
        if f.endswith(".json"):
            exprs += list(dashboard_exprs(f))
        else:
            y = load_yaml(f)
            groups = y["spec"]["groups"] if y.get("kind") == "PrometheusRule" else y["groups"]
            records |= {r["record"] for g in groups for r in g["rules"] if "record" in r}
            exprs += list(rule_exprs(f, groups))
            # Metrics the annotations send the reader to.
            for g in groups:
                for r in g["rules"]:
                    for text in (r.get("annotations") or {}).values():
                        for n in re.findall(r"\b(?:reapd|process)_[a-z0-9_]+", text):
                            if n not in documented or n not in types:
                                bad("%s: %s: the annotations name %s, not a documented metric reapd exposes"
                                    % (f, r.get("alert"), n))
    used = set()
    for where, expr, legend in exprs:
        try:
            names, matchers, grouping = parse(expr)
        except ValueError as e:
            bad("%s: %s" % (where, e))
            continue
        if not names:
            bad("%s: no metric in %r" % (where, expr))
        known_labels = set(TARGET_LABELS)
        for n in sorted(names):
            used.add(n)
            if n in PROMETHEUS_OWN or n in records:
                continue
            fam = n
            for suf in ("_bucket", "_sum", "_count"):
                if n.endswith(suf) and types.get(n[:-len(suf)]) == "histogram":
                    fam = n[:-len(suf)]
            if fam not in documented:
                bad("%s: metric %s is not documented in %s" % (where, n, docs))
            known_labels |= table.get(fam, set())
            if n in series:
                pass
            elif fam in NEEDS_ENGINE:
                if '"%s' % fam not in src:
                    bad("%s: metric %s is not written by %s" % (where, n, metrics_c))
            else:
                bad("%s: metric %s is not exposed by reapd's /metrics" % (where, n))
        for metric, label, op, value in matchers:
            if label in TARGET_LABELS or label == "__name__" or metric in PROMETHEUS_OWN:
                continue
            have = series.get(metric)
            if have is None:
                continue                        # reported above, or needs an engine
            values = {l[label] for l in have if label in l}
            fam = metric
            for suf in ("_bucket", "_sum", "_count"):
                if metric.endswith(suf) and types.get(metric[:-len(suf)]) == "histogram":
                    fam = metric[:-len(suf)]
            if not values:
                bad("%s: %s has no label %r" % (where, metric, label))
                continue
            if label != "le" and label not in table.get(fam, set()):
                bad("%s: %s: label %r is not documented in %s" % (where, metric, label, docs))
            if "__var__" in value:
                continue
            wanted = [value] if op in ("=", "!=") else (
                value.split("|") if re.fullmatch(r"[\w|]+", value) else [])
            for w in wanted:
                if w not in values:
                    bad("%s: %s{%s%s%r}: reapd has no such %s (it has %s)" % (
                        where, metric, label, op, w, label, ", ".join(sorted(values))))
        for label in sorted(grouping):
            if label not in known_labels and label != "le":
                bad("%s: grouping by %r, a label none of %s has" % (where, label, ", ".join(sorted(names))))
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""):
            if label not in known_labels | grouping and label != "le":
                bad("%s: legend {{%s}}: no such label on %s" % (where, label, ", ".join(sorted(names))))
    if not used:
        bad("no metric found at all in %s" % ", ".join(files))
    print(len(used))
    done()

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def cmd_rules(rules, tests, runbook):
    anchors = {slug(m) for m in re.findall(r"^#{1,6} (.+)$", open(runbook).read(), re.M)}
    y = load_yaml(rules)
    groups = y.get("groups") or []
    if [g.get("name") for g in groups] != ["reapd"]:
        bad("%s: one group, named reapd, expected: %s" % (rules, [g.get("name") for g in groups]))
    alerts = []
    for g in groups:
        for r in g.get("rules", []):
            a = r.get("alert")
            if not a:
                bad("%s: a rule that is not an alert: %s" % (rules, r))
                continue
            alerts.append(a)
            if "for" not in r:
                bad("%s: %s: no for:" % (rules, a))
            sev = (r.get("labels") or {}).get("severity")
            if sev not in ("critical", "warning", "info"):
                bad("%s: %s: severity %r" % (rules, a, sev))
            ann = r.get("annotations") or {}
            for k in ("summary", "description", "runbook_url"):
                if not ann.get(k):
                    bad("%s: %s: no %s annotation" % (rules, a, k))
            url = ann.get("runbook_url", "")
            m = re.fullmatch(r"docs/runbook\.md#([\w-]+)", url)
            if not m or m.group(1) not in anchors:
                bad("%s: %s: runbook_url %r is not docs/runbook.md#<a heading of %s>" % (rules, a, url, runbook))
    if len(set(alerts)) != len(alerts):
        bad("%s: an alert name repeated" % rules)
    t = load_yaml(tests)
    fires, quiet = set(), set()
    for g in t.get("tests", []):
        for c in g.get("alert_rule_test", []):
            (fires if c.get("exp_alerts") else quiet).add(c.get("alertname"))
    for a in alerts:
        if a not in fires:
            bad("%s: no test where %s fires" % (tests, a))
        if a not in quiet:
            bad("%s: no test where %s does not fire" % (tests, a))
    for a in sorted((fires | quiet) - set(alerts)):
        bad("%s: tests %s, which %s does not have" % (tests, a, rules))
    done()

def cmd_same(rules, promrule):
    a = load_yaml(rules)["groups"]
    p = load_yaml(promrule)
    if p.get("apiVersion") != "monitoring.coreos.com/v1" or p.get("kind") != "PrometheusRule":
        bad("%s: not a monitoring.coreos.com/v1 PrometheusRule" % promrule)
    b = (p.get("spec") or {}).get("groups")
    if a != b:
        ra = {r.get("alert") or r.get("record"): r for g in a for r in g["rules"]}
        rb = {r.get("alert") or r.get("record"): r for g in b or [] for r in g.get("rules", [])}
        diff = sorted(n for n in set(ra) | set(rb) if ra.get(n) != rb.get(n))
        bad("%s does not carry the rules of %s (differ: %s); regenerate it (deploy/prometheus/README.md)"
            % (promrule, rules, ", ".join(map(str, diff)) or "group names or order"))
    done()

def cmd_podmonitor(podmon, daemonset, rules):
    pm = load_yaml(podmon)
    if pm.get("apiVersion") != "monitoring.coreos.com/v1" or pm.get("kind") != "PodMonitor":
        bad("%s: not a monitoring.coreos.com/v1 PodMonitor" % podmon)
    dss = [d for d in yaml.safe_load_all(open(daemonset)) if d and d.get("kind") == "DaemonSet"]
    if len(dss) != 1:
        bad("%s: %d DaemonSets" % (daemonset, len(dss)))
        done()
    ds = dss[0]
    tmpl = ds["spec"]["template"]
    labels = tmpl["metadata"].get("labels", {})
    spec = pm.get("spec", {})
    sel = spec.get("selector", {})
    if sel.get("matchExpressions"):
        bad("%s: selector.matchExpressions: not checked here, use matchLabels" % podmon)
    ml = sel.get("matchLabels") or {}
    if not ml:
        bad("%s: selector.matchLabels empty: it would select every pod" % podmon)
    for k, v in ml.items():
        if labels.get(k) != v:
            bad("%s: selector %s=%s does not match the DaemonSet's pod labels %s" % (podmon, k, v, labels))
    ns = ds["metadata"].get("namespace", "default")
    nsel = spec.get("namespaceSelector", {})
    if not nsel.get("any") and ns not in (nsel.get("matchNames") or [pm["metadata"].get("namespace")]):
        bad("%s: namespaceSelector does not include the DaemonSet's namespace %s" % (podmon, ns))
    ports = {}
    for c in tmpl["spec"]["containers"]:
        for p in c.get("ports", []):
            ports[p.get("name")] = p.get("containerPort")
    named = sorted(n for n in ports if n)
    eps = spec.get("podMetricsEndpoints") or []
    if not eps:
        bad("%s: no podMetricsEndpoints" % podmon)
    for ep in eps:
        port = ep.get("port")
        if port not in named:
            bad("%s: endpoint port %r is not a named container port of the DaemonSet (named: %s%s)"
                % (podmon, port, ", ".join(named) or "none",
                   "; it has unnamed ports" if None in ports else ""))
        if ep.get("path", "/metrics") != "/metrics":
            bad("%s: endpoint path %r, reapd serves /metrics" % (podmon, ep.get("path")))
    # The rules select job="reapd": the job name the PodMonitor gives.
    jl = spec.get("jobLabel")
    job = labels.get(jl) if jl else "%s/%s" % (pm["metadata"].get("namespace"), pm["metadata"].get("name"))
    wanted = set(re.findall(r'job="([^"]+)"', open(rules).read()))
    for w in wanted:
        if job != w:
            bad("%s: its targets get job=%r, the rules select job=%r" % (podmon, job, w))
    done()

def cmd_dashboard(dash, out_rules):
    d = json.load(open(dash))
    if not 36 <= d.get("schemaVersion", 0) <= 41:
        bad("%s: schemaVersion %r" % (dash, d.get("schemaVersion")))
    var = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    dsv = var.get("datasource")
    if not dsv or dsv.get("type") != "datasource" or dsv.get("query") != "prometheus":
        bad("%s: no Prometheus datasource variable named datasource" % dash)
    if "instance" not in var and "node" not in var:
        bad("%s: no instance/node variable" % dash)
    want_ds = {"type": "prometheus", "uid": "${datasource}"}
    ids, records = set(), []
    for v in var.values():
        if v.get("type") == "query" and v.get("datasource") != want_ds:
            bad("%s: variable %s: datasource %r, not ${datasource}" % (dash, v.get("name"), v.get("datasource")))
    for p in dashboard_panels(d.get("panels", [])):
        if p.get("id") in ids:
            bad("%s: panel id %r repeated" % (dash, p.get("id")))
        ids.add(p.get("id"))
        if "gridPos" not in p:
            bad("%s: panel %r: no gridPos" % (dash, p.get("title")))
        if p.get("type") == "row":
            continue
        if p.get("datasource") != want_ds:
            bad("%s: panel %r: datasource %r, not ${datasource}" % (dash, p.get("title"), p.get("datasource")))
        if not p.get("targets"):
            bad("%s: panel %r: no query" % (dash, p.get("title")))
        for tg in p.get("targets", []):
            e = tg.get("expr", "")
            if tg.get("datasource", want_ds) != want_ds:
                bad("%s: panel %r query %s: datasource not ${datasource}" % (dash, p.get("title"), tg.get("refId")))
            if "$instance" not in e:
                bad("%s: panel %r query %s: does not select $instance" % (dash, p.get("title"), tg.get("refId")))
            e = re.sub(r"\$__\w+", "5m", e)
            e = re.sub(r"\$\{?(\w+)\}?", r"\1", e)
            records.append({"record": "dashboard:panel%s_%s" % (p.get("id"), tg.get("refId")), "expr": e})
    yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}, open(out_rules, "w"))
    done()

cmd = sys.argv[1]
args = sys.argv[2:]
{"metrics": lambda a: cmd_metrics(a[0], a[1], a[2], a[3:]),
 "rules": lambda a: cmd_rules(*a), "same": lambda a: cmd_same(*a),
 "podmonitor": lambda a: cmd_podmonitor(*a),
 "dashboard": lambda a: cmd_dashboard(*a)}[cmd](args)
PY
check() { python3 "$T/check.py" "$@"; }

# refuses WHAT EXPECTED-TEXT COMMAND...: the check must fail, naming it.
refuses() {
  local what=$1 expect=$2
  shift 2
  if "$@" >"$T/out" 2>&1; then
    fail "the check accepted $what"
  fi
  grep -qF -- "$expect" "$T/out" ||
    fail "the check refused $what without naming $expect: $(cat "$T/out")"
}

# ---- the rules ---------------------------------------------------------
promtool check rules "$RULES" >"$T/out" 2>&1 ||
  fail "promtool check rules $RULES: $(cat "$T/out")"
ok "promtool check rules: $(grep -o '[0-9]* rules found' "$T/out")"

# promtool reads rule_files relative to the test file: run a copy beside
# a copy of the rules, so nothing is written into the source tree.
mkdir "$T/rt"
cp "$RULES" "$RULETESTS" "$T/rt/"
(cd "$T/rt" && promtool test rules reapd.rules.test.yml) >"$T/out" 2>&1 ||
  fail "promtool test rules $RULETESTS: $(cat "$T/out")"
ok "promtool test rules: every case passes"

# The unit tests must be able to fail: a rule with a changed threshold.
sed 's/reapd_leaked_tasks > 0/reapd_leaked_tasks > 5/' "$RULES" >"$T/rt/reapd.rules.yml"
cmp -s "$RULES" "$T/rt/reapd.rules.yml" && fail "could not break ReapdLeakedTasks for the self-test"
if (cd "$T/rt" && promtool test rules reapd.rules.test.yml) >"$T/out" 2>&1; then
  fail "promtool test rules passed a changed ReapdLeakedTasks"
fi
grep -q 'alertname: ReapdLeakedTasks' "$T/out" || fail "promtool: $(cat "$T/out")"
ok "the unit tests catch a changed threshold"

sed '/^      - alert: ReapdDeadLetters$/,$ s/^\(          runbook_url: \).*/\1"docs\/runbook.md#no-such-heading"/' \
  "$RULES" >"$T/bad-runbook.yml"
cmp -s "$RULES" "$T/bad-runbook.yml" && fail "could not break a runbook_url for the self-test"
refuses "a runbook_url to no heading" "no-such-heading" check rules "$T/bad-runbook.yml" "$RULETESTS" "$RUNBOOK"
check rules "$RULES" "$RULETESTS" "$RUNBOOK" 2>"$T/out" || fail "$(cat "$T/out")"
ok "each alert: for:, severity, summary, description, runbook_url to a heading of docs/runbook.md; tested firing and not"

# ---- PrometheusRule == rules -------------------------------------------
sed 's/reapd_reports_unstored > 0/reapd_reports_unstored > 1/' "$PROMRULE" >"$T/bad-promrule.yaml"
cmp -s "$PROMRULE" "$T/bad-promrule.yaml" && fail "could not break the PrometheusRule for the self-test"
refuses "a PrometheusRule with a changed rule" "ReapdReportsUnstored" check same "$RULES" "$T/bad-promrule.yaml"
check same "$RULES" "$PROMRULE" 2>"$T/out" || fail "$(cat "$T/out")"
ok "prometheusrule.yaml carries exactly the groups of reapd.rules.yml"

# ---- the dashboard -----------------------------------------------------
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$DASH" 2>"$T/out" ||
  fail "$DASH is not JSON: $(cat "$T/out")"
check dashboard "$DASH" "$T/dash.rules.yml" 2>"$T/out" || fail "$(cat "$T/out")"
promtool check rules "$T/dash.rules.yml" >"$T/out" 2>&1 ||
  fail "a dashboard query does not parse: $(cat "$T/out")"
ok 'the dashboard: ${datasource} and $instance everywhere'", unique ids, $(grep -o '[0-9]* rules found' "$T/out" | cut -d' ' -f1) queries that parse"

# ---- every metric, against a real reapd ----------------------------------
start_reapd_no_engine
curl -sf "http://127.0.0.1:$port/metrics" -o "$T/metrics" || fail "GET /metrics failed"
grep -q '^reapd_build_info' "$T/metrics" || fail "no reapd_build_info in /metrics"
METRICS_C=$SRC/agent/metrics.c
metrics() { check metrics "$T/metrics" "$DOCS" "$METRICS_C" "$@"; }

# The checker first, on broken input: a rules file of one alert, and a
# dashboard of one panel, each with one mistake. A good one passes first.
one_rule() {
  printf 'groups:\n  - name: reapd\n    rules:\n      - alert: X\n        expr: %s\n' "$1" >"$2"
}
one_panel() {
  python3 -c '
import json, sys
ds = {"type": "prometheus", "uid": "${datasource}"}
json.dump({"schemaVersion": 38, "panels": [{"id": 1, "type": "timeseries", "title": "x",
  "datasource": ds, "gridPos": {}, "targets": [{"refId": "A", "datasource": ds,
  "expr": sys.argv[1], "legendFormat": sys.argv[2]}]}]}, open(sys.argv[3], "w"))
' "$1" "$2" "$3"
}
one_rule 'sum without (state) (reapd_outbox_reports{state="dead"}) > 0' "$T/good.yml"
one_panel 'sum by (result) (rate(reapd_removals_total{instance=~"$instance"}[$__rate_interval]))' '{{result}}' "$T/good.json"
metrics "$T/good.yml" "$T/good.json" >/dev/null 2>"$T/out" || fail "good input refused: $(cat "$T/out")"
one_rule 'rate(reapd_bogus_total[5m]) > 0' "$T/bad.yml"
refuses "a rule on an unknown metric" "metric reapd_bogus_total is not exposed" metrics "$T/bad.yml"
one_panel 'rate(reapd_events_recieved_total{instance=~"$instance"}[5m])' '' "$T/bad.json"
refuses "a dashboard query on an unknown metric" "reapd_events_recieved_total is not exposed" metrics "$T/bad.json"
one_rule 'reapd_outbox_reports{state="deadletter"} > 0' "$T/bad.yml"
refuses "a selector on a label value reapd never uses" "no such state" metrics "$T/bad.yml"
one_rule 'reapd_outbox_reports{status="dead"} > 0' "$T/bad.yml"
refuses "a selector on a label the metric does not have" "has no label 'status'" metrics "$T/bad.yml"
one_panel 'sum by (reslt) (rate(reapd_removals_total{instance=~"$instance"}[5m]))' '' "$T/bad.json"
refuses "grouping by a label no metric has" "grouping by 'reslt'" metrics "$T/bad.json"
one_panel 'sum by (result) (rate(reapd_removals_total{instance=~"$instance"}[5m]))' '{{state}}' "$T/bad.json"
refuses "a legend naming a label the query does not have" "legend {{state}}" metrics "$T/bad.json"
one_rule 'reapd_no_such_duration_seconds_bucket > 0' "$T/bad.yml"
refuses "a metric neither documented nor exposed" "is not documented" metrics "$T/bad.yml"
one_rule 'reapd_leaked_tasks > 0' "$T/bad.yml"
printf '        annotations:\n          description: see reapd_leaked_task\n' >>"$T/bad.yml"
refuses "annotations naming an unknown metric" "name reapd_leaked_task," metrics "$T/bad.yml"
ok "the metric checker refuses unknown or undocumented metrics, labels, label values, grouping and legend labels"

n_used=$(metrics "$RULES" "$PROMRULE" "$DASH" 2>"$T/out") || fail "$(cat "$T/out")"
ok "all $n_used metric names of the rules and the dashboard are documented and exposed by reapd (reapd_engine_info: needs an engine; up: Prometheus')"

# ---- PodMonitor vs DaemonSet -------------------------------------------
sed 's/^    - port: status$/    - port: metrics/' "$PODMON" >"$T/bad-pm.yaml"
cmp -s "$PODMON" "$T/bad-pm.yaml" && fail "could not break the PodMonitor's port for the self-test"
refuses "a PodMonitor on a port the DaemonSet does not name" "'metrics'" check podmonitor "$T/bad-pm.yaml" "$DS" "$RULES"
sed 's/^      app.kubernetes.io\/name: reapd$/      app.kubernetes.io\/name: reaper/' "$PODMON" >"$T/bad-sel.yaml"
cmp -s "$PODMON" "$T/bad-sel.yaml" && fail "could not break the PodMonitor's selector for the self-test"
refuses "a PodMonitor selecting other pods" "does not match" check podmonitor "$T/bad-sel.yaml" "$DS" "$RULES"
check podmonitor "$PODMON" "$DS" "$RULES" 2>"$T/out" || fail "$(cat "$T/out")"
ok "the PodMonitor selects the DaemonSet's pods on its named port, job=reapd as the rules expect"

kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc"
ok "stopped cleanly"
