#!/usr/bin/env python3
"""Floods a status endpoint and probes /livez while it lasts.

Used by test_status_flood.sh. Holds IDLE keep-alive connections (each made
one request) and DRIP connections (half a request, then one more header
byte every DRIP_EVERY seconds), opening a connection again a second after
the endpoint closed it, so the pressure stays. Meanwhile a fresh
connection asks GET /livez every PROBE_EVERY seconds, the way a kubelet
probes (no keep-alive); each must be answered 200 within PROBE_TIMEOUT.

Prints one "name value" line per figure; exits 1 if a probe failed.
"""
import argparse
import selectors
import socket
import sys
import threading
import time

REQUEST = b"GET /livez HTTP/1.1\r\nHost: flood\r\n\r\n"
HALF = b"GET /livez HTTP/1.1\r\nHost: flood\r\n"
PROBE = b"GET /livez HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"
DRIP_EVERY = 2.0
REOPEN_AFTER = 1.0
PROBE_EVERY = 0.1
PROBE_TIMEOUT = 1.0


class Conn:
    def __init__(self, kind):
        self.kind = kind  # "idle" or "drip"
        self.sock = None
        self.state = "closed"
        self.due = 0.0  # reopen (closed) or next drip byte (drip)
        self.buf = b""


class Flood:
    def __init__(self, port, n_idle, n_drip):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.conns = [Conn("idle") for _ in range(n_idle)]
        self.conns += [Conn("drip") for _ in range(n_drip)]
        self.closed_by_server = {"idle": 0, "drip": 0}
        self.opened = 0
        self.stop = threading.Event()

    def open(self, c, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        c.sock, c.state, c.buf = s, "connecting", b""
        self.opened += 1
        self.sel.register(s, selectors.EVENT_WRITE, c)

    def lost(self, c, now):
        self.sel.unregister(c.sock)
        c.sock.close()
        c.sock, c.state, c.due = None, "closed", now + REOPEN_AFTER
        self.closed_by_server[c.kind] += 1

    def writable(self, c, now):
        try:
            c.sock.send(REQUEST if c.kind == "idle" else HALF)
        except OSError:
            self.lost(c, now)
            return
        c.state = "asking" if c.kind == "idle" else "dripping"
        c.due = now + DRIP_EVERY
        self.sel.modify(c.sock, selectors.EVENT_READ, c)

    def readable(self, c, now):
        try:
            data = c.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.lost(c, now)
            return
        c.buf += data
        if c.state == "asking" and b'{"live":true}\n' in c.buf:
            c.state, c.buf = "held", b""

    def held(self):
        return sum(1 for c in self.conns if c.state in ("held", "dripping"))

    def run(self):
        for c in self.conns:
            self.open(c, time.monotonic())
        while not self.stop.is_set():
            now = time.monotonic()
            for key, _ in self.sel.select(timeout=0.05):
                c = key.data
                if c.state == "connecting":
                    self.writable(c, now)
                else:
                    self.readable(c, now)
            now = time.monotonic()
            for c in self.conns:
                if c.state == "closed" and now >= c.due:
                    self.open(c, now)
                elif c.state == "dripping" and now >= c.due:
                    c.due = now + DRIP_EVERY
                    try:
                        c.sock.send(b"x")
                    except OSError:
                        self.lost(c, now)
        for c in self.conns:
            if c.sock is not None:
                self.sel.unregister(c.sock)
                c.sock.close()


def probe(port):
    """Status code and seconds taken, or (None, seconds) on failure."""
    start = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port),
                                     timeout=PROBE_TIMEOUT)
    except OSError:
        return None, time.monotonic() - start
    answer = b""
    try:
        s.settimeout(max(0.01, PROBE_TIMEOUT - (time.monotonic() - start)))
        s.sendall(PROBE)
        while b'{"live":true}\n' not in answer:
            data = s.recv(4096)
            if not data:
                break
            answer += data
    except OSError:
        pass
    finally:
        s.close()
    took = time.monotonic() - start
    try:
        code = int(answer.split(b" ", 2)[1])
    except (IndexError, ValueError):
        code = None
    if code == 200 and b'{"live":true}\n' not in answer:
        code = None
    return code, took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--drip", type=int, default=200)
    a = ap.parse_args()

    flood = Flood(a.port, a.idle, a.drip)
    t = threading.Thread(target=flood.run)
    t.start()
    # Let the flood take the endpoint before the first probe.
    time.sleep(2)
    probes, failures, worst, held_min, held_sum = 0, [], 0.0, None, 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        code, took = probe(a.port)
        probes += 1
        worst = max(worst, took)
        if code != 200 or took > PROBE_TIMEOUT:
            failures.append("probe %d: %s after %.3f s" % (probes, code, took))
        held = flood.held()
        held_sum += held
        held_min = held if held_min is None else min(held_min, held)
        time.sleep(PROBE_EVERY)
    held_end = flood.held()
    flood.stop.set()
    t.join()
    print("probes %d" % probes)
    print("probes_failed %d" % len(failures))
    print("worst_probe_ms %.1f" % (worst * 1000))
    print("connections_opened %d" % flood.opened)
    print("connections_held_min %d" % (held_min or 0))
    print("connections_held_avg %d" % (held_sum // max(probes, 1)))
    print("connections_held_end %d" % held_end)
    print("closed_by_server_idle %d" % flood.closed_by_server["idle"])
    print("closed_by_server_drip %d" % flood.closed_by_server["drip"])
    for f in failures[:10]:
        print("FAILED " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
