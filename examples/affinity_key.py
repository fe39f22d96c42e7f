#!/usr/bin/env python3
"""Cache affinity by key (smg-steerd --affinity sockopt), from Python.

Each conversation's connections carry its key, set on the socket before
connect(): smg-steer sends them back to the worker holding the
conversation's KV cache while that worker's expected wait is within the
slack of the least. No privilege is needed; without smg-steer the call
fails with ENOPROTOOPT, which is ignored here.

    python3 affinity_key.py VIP:PORT CONVERSATION_ID

connects once with the conversation's key and says whether smg-steer took
it, and what the server sent first.
"""
import errno
import hashlib
import socket
import struct
import sys

SOL_SMG_STEER_AFFINITY = 0x534D47  # bpf/steer_common.h STEER_SOL_AFFINITY
SMG_STEER_AFFINITY_KEY = 1         # STEER_SO_AFFINITY_KEY: 8 bytes, host byte order


def affinity_key(conversation: str) -> int:
    """A 64-bit key from any conversation id (0 is reserved: no key)."""
    k = int.from_bytes(hashlib.blake2b(conversation.encode(), digest_size=8).digest(), "little")
    return k or 1


def set_affinity_key(sock: socket.socket, key: int) -> bool:
    """Give the socket its key; False when smg-steer does not steer it."""
    try:
        sock.setsockopt(SOL_SMG_STEER_AFFINITY, SMG_STEER_AFFINITY_KEY, struct.pack("=Q", key))
        return True
    except OSError as e:
        if e.errno == errno.ENOPROTOOPT:
            return False
        raise


def connect(vip: str, conversation: str):
    """(socket, whether smg-steer took the key)."""
    host, port = vip.rsplit(":", 1)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    taken = set_affinity_key(s, affinity_key(conversation))
    s.connect((host.strip("[]"), int(port)))
    return s, taken


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    s, taken = connect(sys.argv[1], sys.argv[2])
    with s:
        s.settimeout(3)
        first = s.recv(64).decode(errors="replace").strip()
        print(f"key {affinity_key(sys.argv[2]):#x} "
              f"{'set' if taken else 'not taken (no smg-steer here: ENOPROTOOPT)'}; "
              f"the server said: {first}")
