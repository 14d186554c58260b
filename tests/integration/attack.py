#!/usr/bin/env python3
"""attack.py MODE HOST PORT [options]: one attack on a TCP listener, as the attack table's
cells run it (tests/integration/attack_cases.sh). Prints one JSON line of what happened.

modes:
  silent   open --count connections and send nothing; hold them --hold seconds
  header   send a request line and one header of --bytes bytes, as fast as taken
  garbage  send --bytes random bytes
  chunked  POST /metrics with a chunked body of --bytes bytes
  drip     send a request line, then one byte every 0.5 s for --hold seconds

Every connection is made from --source (an address of this host) when given; --ready FILE
is created once every connection is open (or refused). For each,
"closed" counts those the listener ended (EOF or reset) before the attack let go of them,
"answered" those that got any byte back; "sent" is what the listener took before it ended."""

import argparse
import json
import os
import select
import socket
import sys
import time


def connect(args):
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if args.source:
        sock.bind((args.source, 0))
    sock.settimeout(5)
    sock.connect((args.host, args.port))
    sock.setblocking(False)
    return sock


def ended(sock):
    """(ended, bytes) for what the listener did so far, without waiting."""
    got = 0
    while True:
        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return False, got
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True, got
        except BlockingIOError:
            return False, got
        if not data:
            return True, got
        got += len(data)


def send_all(sock, payload, deadline):
    """Sends until all is taken, the listener ends, or the deadline: the bytes taken."""
    sent = 0
    while sent < len(payload) and time.monotonic() < deadline:
        try:
            sent += sock.send(payload[sent:sent + 65536])
        except BlockingIOError:
            select.select([], [sock], [], 0.05)
        except (BrokenPipeError, ConnectionResetError):
            break
        if ended(sock)[0]:
            break
    return sent


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["silent", "header", "garbage", "chunked", "drip"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--source", default="")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--bytes", type=int, default=65536)
    parser.add_argument("--hold", type=float, default=3.0)
    parser.add_argument("--ready", default="")
    args = parser.parse_args()

    result = {"mode": args.mode, "opened": 0, "refused": 0, "closed": 0, "answered": 0, "sent": 0}
    socks = []
    started = time.monotonic()
    deadline = started + args.hold
    for _ in range(args.count):
        try:
            socks.append(connect(args))
            result["opened"] += 1
        except OSError:
            result["refused"] += 1
    if args.ready:
        with open(args.ready, "w", encoding="utf-8"):
            pass
    payloads = {
        "header": b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * args.bytes + b"\r\n\r\n",
        "garbage": os.urandom(args.bytes),
        "chunked": b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(b"a" * 4096), b"a" * 4096) for _ in range(max(1, args.bytes // 4096))),
    }
    if args.mode in payloads:
        for sock in socks:
            result["sent"] += send_all(sock, payloads[args.mode], deadline)
    if args.mode == "drip":
        for sock in socks:
            sock.send(b"GET /metrics HTTP/1.1\r\n")
    closed = set()
    answered = set()
    while time.monotonic() < deadline and len(closed) < len(socks):
        for index, sock in enumerate(socks):
            if index in closed:
                continue
            done, got = ended(sock)
            if got:
                answered.add(index)
            if done:
                closed.add(index)
            elif args.mode == "drip":
                try:
                    sock.send(b"X")
                except OSError:
                    closed.add(index)
        time.sleep(0.5 if args.mode == "drip" else 0.05)
    result["closed"] = len(closed)
    result["answered"] = len(answered)
    result["seconds"] = round(time.monotonic() - started, 3)
    for sock in socks:
        sock.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
