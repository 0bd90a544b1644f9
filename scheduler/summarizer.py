"""The `Summarizer` seam: whatever turns a run of messages or summaries into a summary.

Two implementations: the deterministic extractive one (`scheduler/extractive.py`, the
default and the fallback, no network) and the LLM one (`scheduler/llm.py`, any
OpenAI-compatible endpoint). The compaction engine only knows this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from palimpsest.graph_schema.models import Message, Summary


class SummaryDraft(BaseModel):
    """A summary's text and who wrote it, before the store derives everything else."""

    text: str
    summarizer: str


@runtime_checkable
class Summarizer(Protocol):
    """Writes the checkpoint text of one summary."""

    #: Recorded on every summary it writes, e.g. ``"extractive"`` or ``"llm:gpt-4o-mini"``.
    name: str

    async def summarize_messages(self, messages: Sequence[Message]) -> SummaryDraft:
        """An L1 checkpoint over a contiguous run of messages (oldest first).

        Must never raise for any content; must return text shorter, in
        ``estimate_tokens``, than the messages together, or the caller falls back.
        """
        ...

    async def summarize_summaries(self, summaries: Sequence[Summary], level: int) -> SummaryDraft:
        """A level-``level`` checkpoint merging a contiguous run of level-1-lower summaries."""
        ...
