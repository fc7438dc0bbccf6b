#!/usr/bin/env python3
"""Validates report lines against docs/report.schema.json.

    check_reports.py SCHEMA FILE...

Each FILE holds one JSON report per line (reports.jsonl); a last line
without its newline (a write cut by a crash, repaired at the next start)
is not a report yet and is skipped. Prints how many reports were checked;
exits 1 with one line per problem if any report does not follow the
schema, 2 if the schema itself is not a valid JSON Schema 2020-12 or
python3-jsonschema is missing.
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("check_reports: python3-jsonschema is missing (scripts/deps installs it)",
          file=sys.stderr)
    sys.exit(2)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().split("\n")[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        print("check_reports: %s is not a valid schema: %s" % (argv[1], e.message),
              file=sys.stderr)
        return 2
    v = jsonschema.Draft202012Validator(schema)
    checked, problems = 0, []
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        # The text after the last newline: "" or a torn line.
        for no, line in enumerate(lines[:-1], 1):
            where = "%s:%d" % (path, no)
            try:
                report = json.loads(line)
            except ValueError as e:
                problems.append("%s: not JSON: %s" % (where, e))
                continue
            checked += 1
            for e in sorted(v.iter_errors(report), key=lambda e: list(e.path)):
                at = "/".join(str(p) for p in e.path) or "(the report)"
                problems.append("%s: %s: %s" % (where, at, e.message))
    for p in problems:
        print(p, file=sys.stderr)
    print("%d report(s) checked against %s, %d problem(s)"
          % (checked, argv[1], len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
