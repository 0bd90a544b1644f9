"""The knobs of the digestion layer, as plain models the server's settings fill in.

They live here, not in ``server/settings.py``, because dependencies point one way
(``server`` → ``scheduler`` → ``graph_schema``): the planner, the summarizers and the
maintenance loop take these groups, and only the server knows where they come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from palimpsest.graph_schema.backends import SQLITE_PREFIX


class CompactionSettings(BaseModel):
    """When and how threads are folded into summaries."""

    threshold: int = Field(30, ge=2, description="Uncompacted messages before a thread is compacted.")
    keep_recent: int = Field(10, ge=0, description="Fresh-tail messages never compacted.")
    escalation_fanin: int = Field(4, ge=2, description="Summaries of one level escalated into one.")
    leaf_chunk_tokens: int = Field(20000, ge=100, description="Token cap of one L1 chunk.")


class LlmSettings(BaseModel):
    """An OpenAI-compatible endpoint: summaries use its chat model, ``openai:`` embedders its key and URL."""

    api_key: SecretStr | None = Field(None, description="OPENAI_API_KEY.")
    base_url: str | None = Field(None, description="OPENAI_BASE_URL (Ollama, vLLM, LM Studio...).")
    model: str | None = Field(None, description="PALIMPSEST_SUMMARY_MODEL; required to use the LLM.")
    timeout: float = Field(60.0, gt=0, description="Seconds before a summary call is abandoned.")

    @property
    def configured(self) -> bool:
        """Whether summaries should go to the model at all."""
        return self.model is not None


class MaintenanceSettings(BaseModel):
    """What the background loop does and how often."""

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    threads_per_cycle: int = Field(3, ge=1, description="Threads compacted per compaction tick.")
    compaction_interval: float = Field(1800, gt=0, description="Seconds between compaction ticks.")
    evolution_interval: float = Field(3600, gt=0, description="Seconds between evolution ticks.")
    lease_seconds: float = Field(
        15.0, gt=0, description="How long a maintenance lease lives unrenewed: a dead holder's work waits this long."
    )


@dataclass(frozen=True)
class StoreBudget:
    """``PALIMPSEST_MAX_STORE_MB``: the most the store may take on disk, and where archives go."""

    max_bytes: int
    folder: Path


def default_archive_dir(store_uri: str) -> Path | None:
    """Beside a SQLite file, ``FILE.archive/``; None for a store with no file of its own."""
    if not store_uri.startswith(SQLITE_PREFIX) or store_uri.endswith(":memory:"):
        return None
    path = Path(store_uri[len(SQLITE_PREFIX) :]).expanduser()
    return path.with_name(path.name + ".archive")
