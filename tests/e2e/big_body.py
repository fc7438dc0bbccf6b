#!/usr/bin/env python3
# Writes the JSON body of a POST /containers/create whose command,
# environment or labels are as large as asked, for the tests and the
# measurements of containers of any size (test_big_containers.sh,
# big_engine_limits.sh). The docker CLI cannot pass values over 64 KiB;
# the Engine API takes the body as it is.
#
# Usage: big_body.py [options] > body.json
#   --image IMAGE          (default reapd-test:1)
#   --exit CODE            the command exits with CODE (default 0)
#   --cmd-bytes N          the "sh -c" script is N bytes long (a comment
#                          line pads it; the script still runs "exit CODE")
#   --cmd-args N:BYTES     N extra arguments of BYTES each after the script
#                          (sh -c SCRIPT NAME ARGS...: ignored by the script)
#   --managed              label reapd.managed=true
#   --label K=V            one more label (repeatable)
#   --labels N             N labels big.00000=v ... (besides the others)
#   --label-bytes N        with --labels: each value N bytes (default 1)
#   --env-var N            one variable BIG=<N bytes>
#   --env-total N          variables E00000=... of 64 KiB each until the
#                          environment holds N bytes (names and '=' counted)
#   --env-each N           with --env-total: the size of each variable
#
# Values are filler letters so that JSON escaping adds nothing: the body's
# size is the sum of the sizes asked for plus a few hundred bytes.
import argparse
import json
import sys


def filler(n, seed="x"):
    # Repeated letters: no escaping, compresses nothing away, easy to
    # recognise in a truncated value.
    unit = (seed + "abcdefghijklmnopqrstuvwxyz")[:26]
    return (unit * (n // len(unit) + 1))[:n]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", default="reapd-test:1")
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--cmd-bytes", type=int, default=0)
    p.add_argument("--cmd-args", default="")
    p.add_argument("--managed", action="store_true")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--labels", type=int, default=0)
    p.add_argument("--label-bytes", type=int, default=1)
    p.add_argument("--env-var", type=int, default=0)
    p.add_argument("--env-total", type=int, default=0)
    p.add_argument("--env-each", type=int, default=64 * 1024)
    a = p.parse_args()

    script = "exit %d" % a.exit
    if a.cmd_bytes > len(script) + 3:
        # "#<pad>\nexit N": a comment line the shell reads and skips.
        pad = a.cmd_bytes - len(script) - 2
        script = "#" + filler(pad, "c") + "\n" + script
    cmd = ["sh", "-c", script]
    if a.cmd_args:
        n, size = (int(x) for x in a.cmd_args.split(":"))
        cmd.append("big")
        cmd.extend(filler(size, "a") for _ in range(n))

    labels = {}
    if a.managed:
        labels["reapd.managed"] = "true"
    for kv in a.label:
        k, _, v = kv.partition("=")
        labels[k] = v
    for i in range(a.labels):
        labels["big.%05d" % i] = filler(a.label_bytes, chr(ord("a") + i % 26))

    env = []
    if a.env_var:
        env.append("BIG=" + filler(a.env_var, "e"))
    if a.env_total:
        total, i = 0, 0
        while total < a.env_total:
            name = "E%05d=" % i
            size = min(a.env_each, a.env_total - total)
            size = max(size - len(name), 1)
            env.append(name + filler(size, "v"))
            total += len(name) + size
            i += 1

    body = {
        "Image": a.image,
        "Cmd": cmd,
        "Labels": labels,
        "HostConfig": {"NetworkMode": "none"},
    }
    if env:
        body["Env"] = env
    json.dump(body, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
