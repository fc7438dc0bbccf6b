#!/usr/bin/python3
"""Strict offline check of Kubernetes manifests against the API's types.

    k8s_schema.py [--schemaless APIVERSION/KIND]... FILE...

Every YAML document of every FILE is decoded the way the API server's
strict decoding does it (kubectl apply --validate=strict), but against
the typed models of the Kubernetes Python client (Debian 12:
python3-kubernetes 22.6.0, generated from Kubernetes 1.22's OpenAPI
schema) instead of a live server:

- YAML that does not parse, and a key given twice in one mapping;
- an apiVersion/kind the client has no API for (a removed or mistyped
  group or version, an unknown kind);
- a field the type does not have (a misspelled or misplaced key);
- a value of the wrong type: a string where an integer or a boolean is
  expected and the other way round, a map where a list is expected, a
  label or annotation value that YAML reads as a number or a boolean;
  IntOrString fields take an integer or a string; Quantity fields
  (resources, quota, sizeLimit) a number or a string in Kubernetes'
  quantity syntax;
- a field the schema marks required missing (a container's name, a
  DaemonSet's selector and template, a port's containerPort, ...), and
  metadata.name.

Not checked (no API server here): value rules such as enums, name
formats, ranges, defaulting, admission and anything cluster-specific.

A kind named with --schemaless (a custom resource: no schema here) is
checked for its apiVersion, kind and metadata (an ObjectMeta, strictly);
only spec and status may follow, and they are not looked into.

Prints one line per object checked on stdout ("FILE: Kind name: ok") and
one per problem on stderr ("FILE:LINE: Kind name: PATH: problem"); exit
status 1 when any problem was found, 2 on bad usage.
"""
import inspect
import re
import sys

import yaml
from kubernetes import client
from kubernetes.client import models

# Fields whose Go type is intstr.IntOrString (the client types them
# "object"): an integer or a string.
INT_OR_STRING = {
    ("V1HTTPGetAction", "port"),
    ("V1TCPSocketAction", "port"),
    ("V1NetworkPolicyPort", "port"),
    ("V1ServicePort", "target_port"),
    ("V1RollingUpdateDaemonSet", "max_surge"),
    ("V1RollingUpdateDaemonSet", "max_unavailable"),
    ("V1RollingUpdateDeployment", "max_surge"),
    ("V1RollingUpdateDeployment", "max_unavailable"),
    ("V1PodDisruptionBudgetSpec", "max_unavailable"),
    ("V1PodDisruptionBudgetSpec", "min_available"),
    ("V1beta1PodDisruptionBudgetSpec", "max_unavailable"),
    ("V1beta1PodDisruptionBudgetSpec", "min_available"),
}

# Fields whose Go type is resource.Quantity or a map of them (the client
# types them "str" / "dict(str, str)"): a JSON number or a string in the
# syntax of apimachinery's resource/quantity.go.
QUANTITY = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1ResourceQuotaSpec", "hard"),
    ("V1ResourceQuotaStatus", "hard"),
    ("V1ResourceQuotaStatus", "used"),
    ("V1EmptyDirVolumeSource", "size_limit"),
    ("V1PodSpec", "overhead"),
    ("V1LimitRangeItem", "default"),
    ("V1LimitRangeItem", "default_request"),
    ("V1LimitRangeItem", "max"),
    ("V1LimitRangeItem", "min"),
    ("V1LimitRangeItem", "max_limit_request_ratio"),
    ("V1ResourceFieldSelector", "divisor"),
    ("V1PersistentVolumeSpec", "capacity"),
}
_NUM = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
QUANTITY_RE = re.compile(r"%s(?:Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE]%s)?\Z" % (_NUM, _NUM))

TOP = ("apiVersion", "kind", "metadata")


class Map(dict):
    """A YAML mapping with the line of each key."""
    line = 0
    lines = None


class Seq(list):
    """A YAML sequence with the line of each item."""
    line = 0
    lines = None


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, keeps lines, and leaves
    dates as strings (as kubectl's YAML-to-JSON conversion does)."""


StrictLoader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in rs if tag != "tag:yaml.org,2002:timestamp"]
    for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _map(loader, node):
    m = Map()
    m.line = node.start_mark.line + 1
    m.lines = {}
    yield m
    loader.flatten_mapping(node)
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        try:
            dup = key in m
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a key that is not a scalar", knode.start_mark)
        if dup:
            raise yaml.constructor.ConstructorError(
                None, None,
                "the key %r is given twice (first on line %d)" % (key, m.lines[key]),
                knode.start_mark)
        m[key] = loader.construct_object(vnode, deep=True)
        m.lines[key] = knode.start_mark.line + 1


def _seq(loader, node):
    s = Seq()
    s.line = node.start_mark.line + 1
    s.lines = [n.start_mark.line + 1 for n in node.value]
    yield s
    s.extend(loader.construct_object(n, deep=True) for n in node.value)


StrictLoader.add_constructor("tag:yaml.org,2002:map", _map)
StrictLoader.add_constructor("tag:yaml.org,2002:seq", _seq)


def model_for(api_version, kind):
    """The client's model class for apiVersion/kind, from the body type of
    the API's create method (as kubernetes.utils.create_from_yaml finds
    the API), or None."""
    group, _, version = api_version.rpartition("/")
    group = "".join(w.capitalize() for w in (group or "core").split(".k8s.io")[0].split("."))
    api = getattr(client, "%s%sApi" % (group, version.capitalize()), None)
    if api is None or not re.fullmatch(r"[A-Z][A-Za-z0-9]*", kind):
        return None
    snake = re.sub("([a-z0-9])([A-Z])", r"\1_\2", re.sub("(.)([A-Z][a-z]+)", r"\1_\2", kind)).lower()
    for name in ("create_namespaced_" + snake, "create_" + snake):
        fn = getattr(api, name, None)
        if fn is None:
            continue
        m = re.search(r":param (\w+) body:", fn.__doc__ or "")
        cls = getattr(models, m.group(1), None) if m else None
        if inspect.isclass(cls) and "kind" in cls.openapi_types:
            return cls
    return None


_required = {}


def required(cls):
    """The attributes the generated setters refuse to set to None."""
    if cls not in _required:
        conf = client.Configuration()
        conf.client_side_validation = True
        req = set()
        for attr in cls.openapi_types:
            obj = cls.__new__(cls)
            obj.local_vars_configuration = conf
            try:
                setattr(obj, attr, None)
            except ValueError:
                req.add(attr)
        _required[cls] = req
    return _required[cls]


class Checker:
    def __init__(self, path):
        self.path = path
        self.problems = []
        self.where = ""

    def bad(self, line, field, msg):
        self.problems.append("%s:%d: %s: %s: %s" % (self.path, line, self.where, field, msg))

    def typename(self, v):
        if isinstance(v, bool):
            return "a boolean (%s)" % str(v).lower()
        if isinstance(v, int):
            return "an integer (%d)" % v
        if isinstance(v, float):
            return "a number (%s)" % v
        if isinstance(v, str):
            return "a string (%r)" % (v if len(v) < 40 else v[:37] + "...")
        if isinstance(v, dict):
            return "a map"
        if isinstance(v, list):
            return "a list"
        if v is None:
            return "null"
        return type(v).__name__

    def value(self, v, t, path, line, owner=None):
        """Checks v against the client's type string t."""
        if v is None:
            return  # null: as if absent, as the API's decoding takes it
        m = re.fullmatch(r"list\[(.*)\]", t)
        if m:
            if not isinstance(v, list):
                return self.bad(line, path, "%s, want a list" % self.typename(v))
            for i, item in enumerate(v):
                ln = v.lines[i] if getattr(v, "lines", None) else line
                self.value(item, m.group(1), "%s[%d]" % (path, i), ln, owner)
            return
        m = re.fullmatch(r"dict\(str, (.*)\)", t)
        if m:
            if not isinstance(v, dict):
                return self.bad(line, path, "%s, want a map" % self.typename(v))
            for k, item in v.items():
                ln = v.lines.get(k, line) if getattr(v, "lines", None) else line
                if not isinstance(k, str):
                    self.bad(ln, path, "key %s, want a string" % self.typename(k))
                    continue
                self.value(item, m.group(1), "%s.%s" % (path, k), ln, owner)
            return
        if owner in QUANTITY:
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                return self.bad(line, path, "%s, want a quantity" % self.typename(v))
            if isinstance(v, str) and not QUANTITY_RE.match(v):
                self.bad(line, path, "%r is not a quantity (e.g. 100m, 64Mi, 2)" % v)
            return
        if owner in INT_OR_STRING:
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                self.bad(line, path, "%s, want an integer or a string" % self.typename(v))
            return
        if t == "str":
            ok = isinstance(v, str)
        elif t == "int":
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif t == "float":
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        elif t == "bool":
            ok = isinstance(v, bool)
        elif t in ("datetime", "date"):
            ok = isinstance(v, str)
        elif t == "object":
            ok = True
        else:
            cls = getattr(models, t, None)
            if cls is None:
                return self.bad(line, path, "the client has no type %s" % t)
            return self.obj(v, cls, path, line)
        if not ok:
            self.bad(line, path, "%s, want %s" % (self.typename(v), {
                "str": "a string", "int": "an integer", "float": "a number",
                "bool": "a boolean", "datetime": "a timestamp string",
                "date": "a date string"}[t]))

    def obj(self, v, cls, path, line, only=None):
        if not isinstance(v, dict):
            return self.bad(line, path, "%s, want a map (%s)" % (self.typename(v), cls.__name__))
        by_json = {j: a for a, j in cls.attribute_map.items()}
        lines = getattr(v, "lines", None) or {}
        for k, item in v.items():
            ln = lines.get(k, line)
            sub = "%s.%s" % (path, k) if path else str(k)
            attr = by_json.get(k)
            if attr is None or (only is not None and k not in only):
                self.bad(ln, sub, "unknown field (not in %s)" % cls.__name__)
                continue
            if only is not None and k not in TOP:
                continue  # a custom resource's spec: no schema here
            self.value(item, cls.openapi_types[attr], sub, ln, (cls.__name__, attr))
        for attr in sorted(required(cls)):
            j = cls.attribute_map[attr]
            if v.get(j) is None:
                self.bad(line, "%s.%s" % (path, j) if path else j,
                         "required field missing (in %s)" % cls.__name__)

    def document(self, doc, schemaless):
        if not isinstance(doc, dict):
            self.where = "document"
            return self.bad(1, "(top)", "%s, want a map" % self.typename(doc))
        av, kind = doc.get("apiVersion"), doc.get("kind")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = meta.get("name")
        self.where = "%s %s" % (kind, name or "(no name)")
        line = getattr(doc, "line", 1)
        if not isinstance(av, str) or not isinstance(kind, str):
            return self.bad(line, "apiVersion/kind", "missing or not strings")
        if not name and not meta.get("generateName"):
            self.bad(line, "metadata.name", "required field missing")
        if "%s/%s" % (av, kind) in schemaless:
            # The generic object: its metadata is an ObjectMeta.
            self.obj(doc, CustomResource, "", line, only=TOP + ("spec", "status"))
            return "no schema: apiVersion, kind, metadata checked"
        cls = model_for(av, kind)
        if cls is None:
            return self.bad(line, "apiVersion/kind",
                            "%s %s: no such API in the Kubernetes client %s (Kubernetes 1.22)"
                            % (av, kind, client.__version__))
        self.obj(doc, cls, "", line)
        return cls.__name__


class CustomResource:
    """apiVersion, kind, metadata, spec, status of any object."""
    attribute_map = {"api_version": "apiVersion", "kind": "kind", "metadata": "metadata",
                     "spec": "spec", "status": "status"}
    openapi_types = {"api_version": "str", "kind": "str", "metadata": "V1ObjectMeta",
                     "spec": "object", "status": "object"}


def main(argv):
    schemaless, files = set(), []
    it = iter(argv)
    for a in it:
        if a == "--schemaless":
            schemaless.add(next(it, ""))
        elif a.startswith("-"):
            print(__doc__, file=sys.stderr)
            return 2
        else:
            files.append(a)
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for path in files:
        ck = Checker(path)
        try:
            with open(path) as f:
                docs = list(yaml.load_all(f, Loader=StrictLoader))
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            print("%s:%d:%d: %s%s" % (path, mark.line + 1, mark.column + 1, e.problem,
                                      " (%s)" % e.context if e.context else ""),
                  file=sys.stderr)
            failed = True
            continue
        except (OSError, yaml.YAMLError) as e:
            print("%s: %s" % (path, str(e).replace("\n", " ")), file=sys.stderr)
            failed = True
            continue
        for doc in docs:
            if doc is None:
                continue
            before = len(ck.problems)
            what = ck.document(doc, schemaless)
            if len(ck.problems) == before:
                print("%s: %s: ok (%s)" % (path, ck.where, what))
        for p in ck.problems:
            print(p, file=sys.stderr)
        failed = failed or bool(ck.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
