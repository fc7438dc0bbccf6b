#!/usr/bin/python3
"""The peer of tests/bench/real.sh: what reapd does for each exit, written
the plain way with Debian's python3-docker, so that reapd's cost per exit
is shown next to a script's on the same engine.

For each `die` of a container with LABEL: inspect it (the exit code),
remove it (force), poll inspect until it is gone; then print one JSON
line. Prints "ready" once subscribed and "done" after COUNT containers,
then waits for a signal (the bench reads its CPU and memory first).

Usage: peer_watcher.py DOCKER_SOCKET LABEL COUNT
"""
import json
import signal
import sys
import time

import docker


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: peer_watcher.py DOCKER_SOCKET LABEL COUNT")
    sock, label, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = docker.APIClient(base_url="unix://" + sock, version="1.41")
    events = client.events(
        decode=True,
        filters={"type": "container", "event": "die", "label": label},
    )
    print("ready", flush=True)
    done = 0
    for ev in events:
        cid = ev["Actor"]["ID"]
        try:
            code = client.inspect_container(cid)["State"]["ExitCode"]
        except docker.errors.NotFound:
            code = None
        try:
            client.remove_container(cid, force=True)
        except docker.errors.NotFound:
            pass
        while True:
            try:
                client.inspect_container(cid)
            except docker.errors.NotFound:
                break
            time.sleep(0.05)
        print(json.dumps({"container_id": cid, "exit_code": code}), flush=True)
        done += 1
        if done >= count:
            print("done", flush=True)
            signal.pause()
            return


if __name__ == "__main__":
    main()
