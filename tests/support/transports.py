"""Starting ``palimpsest serve`` as a real process on a free loopback port, shared by the transport tests."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")


#: Seconds a server subprocess may take to start listening.
START_SECONDS = 30


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server subprocess: no background maintenance, no stray config."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env.update({"PALIMPSEST_SCHEDULER": "off", **extra})
    return env


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
