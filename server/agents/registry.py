"""The one list of agents Palimpsest knows, and the lookups every command goes through.

An agent is a folder, ``palimpsest/server/agents/<name>/``, and one line here. Its
modules are loaded only when asked for: ``palimpsest hook NAME`` runs on every turn of
every agent and must load its own agent's hook alone, not every agent's wiring. What a
folder holds (each part found by name, so this list stays one line an agent):

- ``__init__.py``: ``HOOK_HELP``, what ``palimpsest hook NAME --help`` says (constants only);
- ``hook.py``: ``request(payload)``, the `HookRequest` the shared hook runner
  (`palimpsest.server.feeds.hooks`) stores and answers;
- ``wiring.py``: ``AGENT``, the `Agent` that ``install``, ``uninstall`` and ``status`` use;
- ``transcript.py`` (when ``ingest`` is set): ``TRANSCRIPT_FORMAT``, a format
  ``palimpsest ingest`` reads.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from palimpsest.graph_schema.errors import InvalidInput

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (a sixth of a queued hook's
#: start): type checkers read any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from palimpsest.server.agents.spec import Agent, Places
    from palimpsest.server.feeds.hooks import HookRequest
    from palimpsest.server.feeds.transcripts import TranscriptFormat


class AgentEntry:
    """One agent: its folder's name, which is also its command-line name and default partition.

    A plain class, not a dataclass: ``dataclasses`` (with the ``inspect`` it imports) would
    be a third of a queued hook's start, which reads this module.
    """

    __slots__ = ("ingest", "name")

    def __init__(self, name: str, ingest: int | None = None) -> None:
        self.name = name
        #: Where ``palimpsest ingest``'s format detection asks this agent's ``TRANSCRIPT_FORMAT``
        #: (lower first, as a line two formats could claim goes to the first); ``None``: ingest
        #: reads no file of this agent.
        self.ingest = ingest

    def part(self, module: str) -> ModuleType:
        """The agent's module ``module`` (``hook``, ``wiring``, ``transcript``), imported now."""
        return importlib.import_module(f"{__package__}.{self.name}.{module}")

    @property
    def hook_help(self) -> str:
        """What ``palimpsest hook NAME --help`` says, read without loading the hook."""
        from typing import cast

        return cast(str, importlib.import_module(f"{__package__}.{self.name}").HOOK_HELP)

    def request(self, payload: dict[str, Any]) -> HookRequest:
        """The hook's request for one payload the agent sent on stdin."""
        from typing import cast

        build = cast("Callable[[dict[str, Any]], HookRequest]", self.part("hook").request)
        return build(payload)

    def wiring(self) -> Agent:
        """How the agent is wired into its own config files."""
        from typing import cast

        return cast("Agent", self.part("wiring").AGENT)

    def transcript_format(self) -> TranscriptFormat:
        """The transcript format ``palimpsest ingest`` reads for this agent."""
        from typing import cast

        return cast("TranscriptFormat", self.part("transcript").TRANSCRIPT_FORMAT)


#: Every agent, in the order commands list them.
ENTRIES: tuple[AgentEntry, ...] = (
    AgentEntry("claude", ingest=2),
    AgentEntry("codex", ingest=1),
    AgentEntry("windsurf"),
    AgentEntry("antigravity"),
    AgentEntry("cursor"),
    AgentEntry("gemini"),
)
#: Every agent's name, in the same order.
NAMES: tuple[str, ...] = tuple(entry.name for entry in ENTRIES)
_BY_NAME = {entry.name: entry for entry in ENTRIES}


def entry_named(name: str) -> AgentEntry:
    """The entry of the agent called ``name``.

    Raises:
        InvalidInput: no agent has that name.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InvalidInput(f"unknown agent {name!r}: use one of {', '.join(NAMES)}") from None


@cache
def agents() -> dict[str, Agent]:
    """Every agent's wiring by name, in ``ENTRIES`` order (each wiring module loaded once)."""
    return {entry.name: entry.wiring() for entry in ENTRIES}


def agent_named(name: str) -> Agent:
    """The wiring of the agent called ``name``.

    Raises:
        InvalidInput: no agent has that name.
    """
    return entry_named(name).wiring()


def detect(places: Places) -> list[Agent]:
    """The agents whose config directory exists on this machine."""
    return [agent for agent in agents().values() if agent.found(places) is not None]


def transcript_formats() -> list[TranscriptFormat]:
    """The agents' formats ``palimpsest ingest`` reads, in ``ENTRIES`` order."""
    return [entry.transcript_format() for entry in ENTRIES if entry.ingest is not None]


def detection_order() -> list[TranscriptFormat]:
    """The same formats, in the order format detection asks them."""
    ranked = sorted((entry.ingest, entry.name) for entry in ENTRIES if entry.ingest is not None)
    return [_BY_NAME[name].transcript_format() for _, name in ranked]
