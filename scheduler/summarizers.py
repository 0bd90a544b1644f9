"""Choosing a summarizer: the configured model, with the deterministic one behind it.

docs/architecture.md promises that compaction never stalls on a model: when it fails, is slow,
answers nothing or answers something no shorter than its sources (which would break
invariant 6), the extractive summarizer writes the checkpoint instead, and the summary
records who wrote it and why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Message, Summary
from palimpsest.scheduler.config import LlmSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.llm import LlmSummarizer
from palimpsest.scheduler.summarizer import Background, Summarizer, SummaryDraft

logger = logging.getLogger(__name__)

_REASON_CHARS = 80


class FallbackSummarizer:
    """Asks ``primary`` first and ``fallback`` whenever the primary's draft is unusable."""

    def __init__(self, primary: Summarizer, fallback: Summarizer, *, timeout: float | None = None) -> None:
        """Pair two summarizers.

        Args:
            primary: Tried first (usually the LLM).
            fallback: Used when the primary raises, times out, answers empty text or
                text not shorter than its sources; it is trusted to always answer.
            timeout: Seconds the primary may take per summary; None leaves the limit
                to the primary itself.
        """
        self.primary = primary
        self.fallback = fallback
        self.timeout = timeout
        #: Named after the primary; each draft's ``summarizer`` says who really wrote it.
        self.name = primary.name

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        """The primary's L1 checkpoint when usable, else the fallback's (recording why)."""
        source_tokens = sum(message.tokens for message in messages)
        return await self._first_usable(
            lambda summarizer: summarizer.summarize_messages(messages, background=background), source_tokens, "messages"
        )

    async def summarize_summaries(
        self, summaries: Sequence[Summary], level: int, *, background: Background | None = None
    ) -> SummaryDraft:
        """The primary's level-``level`` checkpoint when usable, else the fallback's."""
        source_tokens = sum(summary.tokens for summary in summaries)
        return await self._first_usable(
            lambda summarizer: summarizer.summarize_summaries(summaries, level, background=background),
            source_tokens,
            f"level {level}",
        )

    async def _first_usable(
        self, call: Callable[[Summarizer], Awaitable[SummaryDraft]], source_tokens: int, what: str
    ) -> SummaryDraft:
        outcome = await self._primary_draft(call, source_tokens)
        if isinstance(outcome, SummaryDraft):
            return outcome
        reason = outcome
        logger.warning("summarizer %s failed on %s (%s); using %s", self.primary.name, what, reason, self.fallback.name)
        draft = await call(self.fallback)
        return SummaryDraft(
            text=draft.text, summarizer=f"{draft.summarizer} (fallback from {self.primary.name}: {reason})"
        )

    async def _primary_draft(
        self, call: Callable[[Summarizer], Awaitable[SummaryDraft]], source_tokens: int
    ) -> SummaryDraft | str:
        """The primary's draft, or a short reason why it cannot be used."""
        try:
            async with asyncio.timeout(self.timeout):
                draft = await call(self.primary)
        except TimeoutError:
            return f"timed out after {self.timeout:g} s"
        except PalimpsestError as exc:
            return _brief(str(exc))
        except Exception as exc:  # any failure of the primary means: use the fallback
            return _brief(f"{type(exc).__name__}: {exc}")
        if not draft.text.strip():
            return "empty answer"
        tokens = estimate_tokens(draft.text)
        if tokens >= source_tokens:
            return f"answer not shorter than its sources ({tokens} >= {source_tokens} tokens)"
        return draft


def make_summarizer(llm: LlmSettings) -> Summarizer:
    """The summarizer the settings ask for.

    Why a factory: the server, the CLI and the scheduler must all make the same
    choice — extractive alone when no model is configured, else the model with the
    extractive summarizer behind it.
    """
    if not llm.configured:
        return ExtractiveSummarizer()
    return FallbackSummarizer(LlmSummarizer(llm), ExtractiveSummarizer())


def _brief(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
