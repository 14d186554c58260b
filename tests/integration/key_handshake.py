#!/usr/bin/env python3
"""A side-channel client that speaks the key handshake (lib/net/key_handshake.hpp) well or
badly, for the integration cases: key_handshake.py HOST PORT SERVICE MODE [ARG] [SEND].
SEND goes as one frame (lib/net/sealed_frames.hpp), tagged when the handshake was keyed.

SERVICE: agent or smoke. MODE:
  good KEYFILE [SEND]   the handshake with the key, then SEND (a line) and what comes back
  open [SEND]           the handshake without a key (a server without --key-file), then SEND
  record KEYFILE FILE   a good handshake; its 72-byte answer saved to FILE; closes at once
  replay FILE [SEND]    the saved answer sent on this new connection, then SEND
  half                  half an answer, then nothing
  silent                nothing at all
Prints one line: 'verdict STATUS' (or 'verdict none'), then 'served N' (the bytes that came
back after SEND, or after the verdict) and 'closed_after S' (seconds from connect to the
server's close, or to the 30 s this waits).
"""

import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC = 0x52444B48
VERSION = 2
SERVICES = {"agent": 1, "smoke": 2}


def hkdf_sha256(key, salt, info):
    """RFC 5869, one 32-byte block."""
    prk = hmac.new(salt, key, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def frame(payload, key=None, sequence=0):
    """One frame; `key` tags it as message `sequence` of its direction."""
    head = struct.pack(">I", len(payload))
    if key is None:
        return head + payload
    tag = hmac.new(key, struct.pack(">QI", sequence, len(payload)) + payload, hashlib.sha256).digest()
    return head + payload + tag


def key_of(path):
    with open(path, "rb") as f:
        key = f.read()
    if key.endswith(b"\n"):
        key = key[:-1]
    if key.endswith(b"\r"):
        key = key[:-1]
    return key


def read_exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def answer(service, key, server_nonce, nonce):
    head = struct.pack(">IBBBB", MAGIC, VERSION, service, 1 if key is not None else 0, 0)
    proof = bytes(32)
    if key is not None:
        label = b"rdmakit client" + bytes([service])
        proof = hmac.new(key, label + server_nonce + nonce, hashlib.sha256).digest()
    return head + nonce + proof


def drain(sock, started, deadline=30.0):
    """The bytes the server sends until it closes (or the deadline), and when it closed."""
    got = 0
    sock.settimeout(1.0)
    while time.monotonic() - started < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not chunk:
            break
        got += len(chunk)
    return got, time.monotonic() - started


def main():
    host, port, service_name, mode = sys.argv[1:5]
    rest = sys.argv[5:]
    service = SERVICES[service_name]
    started = time.monotonic()
    sock = socket.create_connection((host, int(port)), timeout=30)
    status = "none"
    send = None
    sealing = None
    if mode in ("good", "open", "record", "replay"):
        hello = read_exactly(sock, 40)
        if len(hello) != 40:
            print(f"verdict none served 0 closed_after {time.monotonic() - started:.2f} hello {len(hello)} bytes")
            return
        key = key_of(rest[0]) if mode in ("good", "record") else None
        nonce = os.urandom(32)
        if mode == "replay":
            with open(rest[0], "rb") as f:
                message = f.read()
        else:
            message = answer(service, key, hello[8:], nonce)
        if mode == "record":
            with open(rest[1], "wb") as f:
                f.write(message)
        sock.sendall(message)
        verdict = read_exactly(sock, 40)
        status = str(verdict[6]) if len(verdict) == 40 else "none"
        if mode == "record":
            # Only the answer was wanted: close at once instead of waiting on the session.
            print(f"verdict {status} served 0 closed_after {time.monotonic() - started:.2f}")
            return
        if mode == "good" and len(rest) > 1:
            send = rest[1]
        if mode in ("open", "replay") and len(rest) > (1 if mode == "replay" else 0):
            send = rest[-1]
        if key is not None and status == "0":
            info = b"rdmakit seal" + bytes([service]) + b"c>s"
            sealing = hkdf_sha256(key, hello[8:] + nonce, info)
    elif mode == "half":
        read_exactly(sock, 40)
        sock.sendall(struct.pack(">IBBBB", MAGIC, VERSION, service, 1, 0) + os.urandom(28))
    elif mode != "silent":
        sys.exit(f"unknown mode {mode}")
    if send is not None:
        try:
            sock.sendall(frame(send.encode(), sealing))
        except OSError:
            pass
    served, closed = drain(sock, started)
    print(f"verdict {status} served {served} closed_after {closed:.2f}")


if __name__ == "__main__":
    main()
