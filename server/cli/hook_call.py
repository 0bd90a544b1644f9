"""One ``palimpsest hook AGENT`` call, and the detached follow-up a ``Stop`` may leave behind.

Kept apart from ``palimpsest.server.cli.hook_command`` so that the spool's drainer
(`palimpsest.server.cli.hook_drain`), which the hook command runs in-process before a
``SessionStart`` answers, can start a follow-up for a queued turn without importing the
hook command back. Imports only the standard library at the top.
"""

from __future__ import annotations

import sys

#: ``off`` starts no follow-up after a ``Stop`` whose transcript lacks the turn's end
#: (the next hook call of the conversation then stores it).
FOLLOW_UP_SETTING = "PALIMPSEST_HOOK_FOLLOW_UP"
#: The module a follow-up runs as: it catches up on a transcript finished after ``Stop``.
FOLLOW_UP_MODULE = "palimpsest.server.cli.hook_follow_up"


class HookCall:
    """One ``palimpsest hook AGENT`` call: the agent and its flags (``None``: not given).

    A plain class, not a dataclass: ``dataclasses`` (with the ``inspect`` it imports)
    would be a third of a queued hook's start.
    """

    __slots__ = ("agent", "json", "partition", "store")

    def __init__(self, agent: str, partition: str | None = None, store: str | None = None, json: bool = False) -> None:
        self.agent, self.partition, self.store, self.json = agent, partition, store, json

    def _fields(self) -> tuple[str, str | None, str | None, bool]:
        return (self.agent, self.partition, self.store, self.json)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookCall) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"HookCall(agent={self.agent!r}, partition={self.partition!r}, store={self.store!r}, json={self.json!r})"


def start_follow_up(call: HookCall, payload: str) -> bool:
    """Start the follow-up of ``call`` detached, the payload on its stdin, and return at once.

    Returns:
        Whether it started. A follow-up that cannot start (no process left, say) is no
        error of the hook: the conversation's next hook call reads what it would have.
    """
    import subprocess

    args = [sys.executable, "-m", FOLLOW_UP_MODULE, call.agent]
    for flag, value in (("--partition", call.partition), ("--store", call.store)):
        if value is not None:
            args += [flag, value]
    try:
        process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert process.stdin is not None
        with process.stdin:
            process.stdin.write(payload.encode("utf-8"))
    except OSError:
        return False
    return True
