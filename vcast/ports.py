"""A free TCP port on the loopback interface, for a server or launcher this process starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on at the moment of asking (the OS picks it; another process may
    take it before the caller binds it, which no caller here has to guard against)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
