"""The `Summarizer` seam: whatever turns a run of messages or summaries into a summary.

Two implementations: the deterministic extractive one (`scheduler/extractive.py`, the
default and the fallback, no network) and the LLM one (`scheduler/llm.py`, any
OpenAI-compatible endpoint). The compaction engine only knows this protocol.

A summarizer sees one chunk, so by itself it cannot tell a word the whole thread keeps
using from one that marks this chunk. The engine therefore hands it a `Background`:
in how many of the thread's messages (those said, not tool calls and results) each
word occurs, counted once per compaction call over the messages it has already read
(the uncovered backlog, the whole thread when a transcript is imported and compacted
at once), so it costs no query.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from palimpsest.graph_schema.identity import words
from palimpsest.graph_schema.models import Message, Role, Summary

#: Characters of each message counted: a long tool output says no more about which
#: words are common than its head does, and counting it all would make compaction slow.
BACKGROUND_SCAN_CHARS = 1000


class SummaryDraft(BaseModel):
    """A summary's text and who wrote it, before the store derives everything else."""

    text: str
    summarizer: str


@dataclass(frozen=True)
class Background:
    """How common each word is in the thread: the documents (messages) holding it, lowercased.

    A term of several words (a path, ``Oliver's``) is as common as its rarest word, so
    ``src/auth/jwt.py`` is rare when ``jwt`` is, however common ``src`` and ``py`` are.
    """

    documents: int = 0
    frequencies: Counter[str] = field(default_factory=Counter)
    #: Documents counted in ``frequencies`` but taken out again (see `elsewhere`).
    excluded: Counter[str] | None = None
    #: Each counted message's words, by message id, so `elsewhere` need not read it again.
    words_of: dict[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of_messages(cls, messages: Sequence[Message]) -> Background:
        """Count each lowercased word once per message said (of its first `BACKGROUND_SCAN_CHARS`).

        Tool calls and their results are not counted: the terms a checkpoint names are
        drawn from what people and the agent said, so that is what they are common or
        rare in, and leaving out tool output halves the cost on a coding session.
        """
        words_of = {
            m.id: frozenset(words(m.content[:BACKGROUND_SCAN_CHARS].lower()))
            for m in messages
            if m.tool_call_id is None and m.role != Role.tool
        }
        frequencies: Counter[str] = Counter()
        for found in words_of.values():
            frequencies.update(found)
        return cls(len(words_of), frequencies, None, words_of)

    def elsewhere(self, messages: Sequence[Message]) -> Background:
        """The rest of the thread once ``messages`` (those of them this background counted) are taken out.

        Why: what marks a chunk is what is rare *elsewhere*; a word the chunk says in
        every message is not common in the thread for that. Nothing is copied or read
        again: the chunk's words were kept when it was counted.
        """
        part: Counter[str] = Counter()
        taken = 0
        for message in messages:
            found = self.words_of.get(message.id)
            if found is not None:
                part.update(found)
                taken += 1
        return Background(self.documents - taken, self.frequencies, part)

    def frequency(self, term: str) -> int:
        """In how many documents the term's rarest word occurs (0 for a term without words)."""
        excluded = self.excluded
        counts = [
            self.frequencies.get(word, 0) - (excluded.get(word, 0) if excluded is not None else 0)
            for word in words(term.lower())
        ]
        return max(0, min(counts, default=0))

    def share(self, term: str) -> float:
        """The fraction of documents holding the term (0.0 for an empty background)."""
        return self.frequency(term) / self.documents if self.documents else 0.0

    def weight(self, term: str) -> float:
        """How much the term says about a document holding it: its inverse document frequency."""
        return math.log((self.documents + 1) / (self.frequency(term) + 1)) + 1.0


@runtime_checkable
class Summarizer(Protocol):
    """Writes the checkpoint text of one summary."""

    #: Recorded on every summary it writes, e.g. ``"extractive"`` or ``"llm:gpt-4o-mini"``.
    name: str

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        """An L1 checkpoint over a contiguous run of messages (oldest first).

        ``background`` is how common each word is in the thread, the run included
        (the engine passes it; None means only the run itself is known). Must never raise
        for any content; must return text shorter, in ``estimate_tokens``, than the
        messages together, or the caller falls back.
        """
        ...

    async def summarize_summaries(
        self, summaries: Sequence[Summary], level: int, *, background: Background | None = None
    ) -> SummaryDraft:
        """A level-``level`` checkpoint merging a contiguous run of level-1-lower summaries."""
        ...
