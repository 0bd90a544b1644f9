"""The agents Palimpsest can wire, by name, and which of them are on this machine."""

from __future__ import annotations

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.server.agents import antigravity, claude, codex, cursor, gemini, windsurf
from palimpsest.server.agents.spec import Agent, Places

#: Every agent, in the order commands list them; each name is also the agent's partition.
AGENTS: dict[str, Agent] = {
    agent.name: agent
    for agent in (claude.AGENT, codex.AGENT, windsurf.AGENT, antigravity.AGENT, cursor.AGENT, gemini.AGENT)
}


def agent_named(name: str) -> Agent:
    """The agent called ``name``.

    Raises:
        InvalidInput: no agent has that name.
    """
    try:
        return AGENTS[name]
    except KeyError:
        raise InvalidInput(f"unknown agent {name!r}: use one of {', '.join(AGENTS)}") from None


def detect(places: Places) -> list[Agent]:
    """The agents whose config directory exists on this machine."""
    return [agent for agent in AGENTS.values() if agent.found(places) is not None]
