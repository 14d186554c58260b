#!/usr/bin/env python3
"""tamper_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT [options]: a host on the
path of a side channel (tests/integration/key_cases.sh). It takes one connection, opens one to
the target, and passes every byte both ways, the key handshake included, so both ends
authenticate each other; then it flips one bit of one byte after it:

  --flip s2c:N   byte N of what the server sends (the hello and the verdict are its first 80)
  --flip c2s:N   byte N of what the client sends (its handshake answer is its first 72)
  (none)         a faithful relay, the case's control

--ready FILE is created once it listens. When both ends have closed (or after --hold
seconds) it prints one JSON line: the bytes passed each way and the offset it flipped
(null when the stream never reached it)."""

import argparse
import json
import os
import select
import socket
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("listen_host")
    parser.add_argument("listen_port", type=int)
    parser.add_argument("target_host")
    parser.add_argument("target_port", type=int)
    parser.add_argument("--flip", default="")
    parser.add_argument("--ready", default="")
    parser.add_argument("--hold", type=float, default=120.0)
    args = parser.parse_args()
    flip_direction, flip_at = None, -1
    if args.flip:
        flip_direction, offset = args.flip.split(":")
        flip_at = int(offset)

    family = socket.AF_INET6 if ":" in args.listen_host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.listen_host, args.listen_port))
    listener.listen(1)
    if args.ready:
        open(args.ready, "w").close()
    listener.settimeout(args.hold)
    client, _ = listener.accept()
    server = socket.create_connection((args.target_host, args.target_port), timeout=10)
    passed = {"c2s": 0, "s2c": 0}
    flipped = None
    ends = {client: (server, "c2s"), server: (client, "s2c")}
    open_ends = {client, server}
    deadline = time.monotonic() + args.hold
    while open_ends and time.monotonic() < deadline:
        readable, _, _ = select.select(list(open_ends), [], [], 0.5)
        for sock in readable:
            other, direction = ends[sock]
            try:
                data = bytearray(sock.recv(65536))
            except OSError:
                data = bytearray()
            if not data:
                open_ends.discard(sock)
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            start = passed[direction]
            if direction == flip_direction and start <= flip_at < start + len(data):
                data[flip_at - start] ^= 0x01
                flipped = flip_at
            passed[direction] += len(data)
            try:
                other.sendall(data)
            except OSError:
                open_ends.discard(other)
    print(json.dumps({"c2s": passed["c2s"], "s2c": passed["s2c"], "flipped": flipped}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
