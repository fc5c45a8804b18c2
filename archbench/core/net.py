"""Small network helpers shared by the launchers and the kernel cluster."""

from __future__ import annotations

import socket

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports on ``host`` that are free now (bound together, released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def reachable(address: str, timeout_s: float = 2.0) -> bool:
    """True when something accepts TCP connections at ``host:port``."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def hostname_of(address: str) -> str:
    """The host of ``host:port``; loopback addresses are this machine's host name."""
    host = address.rsplit(":", 1)[0]
    return socket.gethostname() if host in LOOPBACK else host
