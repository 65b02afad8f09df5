"""The intake doorbell: a client that accepted a task wakes the home's service at once
(docs/design-notes.md, note 72).

The service turns submission entries into flow runs (:mod:`tianshu_mcp.hosting.intake`) in its
maintain loop, which otherwise looks every half second. The stdio server that accepted a task
used to create the flow run itself in a thread of its own; that thread's CPU (the Prefect
client's request building and parsing) held the stdio process's GIL while the next call's
answer was being written. Now it rings: one datagram to ``<home>/prefect/intake.sock``, a
socket the service binds, and the service's loop wakes and submits. No ring is lost work: the
entry is on disk before the ring, the service still looks every half second, and the client's
own submitter still drains what is left (once a second), so a service that is starting, busy or
gone delays a flow run but never loses it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

SOCKET_NAME = "intake.sock"


def doorbell_path(home: Path) -> Path:
    """Where the home's service listens for rings: ``<home>/prefect/intake.sock``."""
    return home / "prefect" / SOCKET_NAME


def ring(home: Path) -> bool:
    """Wake the home's service (one datagram; never blocks). True when a listener took it; False
    when none listens (no service, one that is starting, an older one) or its queue is full
    (it is awake already)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(b"\x01", str(doorbell_path(home)))
        return True
    except OSError:
        return False


class Doorbell:
    """The service's end: a datagram socket bound at :func:`doorbell_path` (mode 0600).

    Args:
        home: the data home whose service this is.

    Raises:
        OSError: the socket could not be bound.
    """

    def __init__(self, home: Path) -> None:
        self.path = doorbell_path(home)
        self.path.unlink(missing_ok=True)  # a socket file a killed service left
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        old_umask = os.umask(0o177)
        try:
            self.sock.bind(str(self.path))
        except OSError:
            self.sock.close()
            raise
        finally:
            os.umask(old_umask)
        self._inode = os.stat(self.path).st_ino

    async def wait(self, timeout_s: float) -> bool:
        """Wait until a ring arrives or ``timeout_s`` s passed; True when rung. Every ring that
        arrived meanwhile is taken (one wake serves them all)."""
        import anyio

        rung = self._drain()
        if not rung:
            with anyio.move_on_after(timeout_s):
                await anyio.wait_readable(self.sock)
            rung = self._drain()
        return rung

    def _drain(self) -> bool:
        rung = False
        while True:
            try:
                self.sock.recv(64)
            except (BlockingIOError, InterruptedError):
                return rung
            except OSError:
                return rung
            rung = True

    def close(self) -> None:
        """Close the socket and remove its file, unless another service bound one there since."""
        self.sock.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                self.path.unlink()
