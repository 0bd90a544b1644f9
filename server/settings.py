"""Configuration: one pydantic-settings class read from the environment variables the README lists.

Settings are read when a command or server starts (never at import time), and CLI flags
override them by passing values to the constructor.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import (
    CompactionSettings,
    LlmSettings,
    MaintenanceSettings,
    StoreBudget,
    default_archive_dir,
)


def default_store_uri() -> str:
    """``sqlite:///$XDG_DATA_HOME/palimpsest/memory.db``, XDG's default when unset."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(data_home) / 'palimpsest' / 'memory.db'}"


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """Everything configurable, from the README's variables; flags override by constructor args."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", populate_by_name=True, extra="ignore")

    store: str = Field(default_factory=default_store_uri, description="Store URI (PALIMPSEST_STORE).")
    partition: str | None = Field(
        None, description="The IDE partition this process writes to; else from the MCP client's name."
    )
    neo4j_user: str = Field("neo4j", validation_alias=_env("NEO4J_USER", "neo4j_user"), description="Neo4j user.")
    neo4j_password: SecretStr | None = Field(
        None, validation_alias=_env("NEO4J_PASSWORD", "neo4j_password"), description="Neo4j password."
    )
    neo4j_database: str = Field(
        "neo4j", validation_alias=_env("NEO4J_DATABASE", "neo4j_database"), description="Neo4j database."
    )
    compaction_threshold: int = Field(30, ge=2, description="Uncompacted messages before a thread is compacted.")
    keep_recent: int = Field(10, ge=0, description="Fresh-tail messages never compacted.")
    escalation_fanin: int = Field(4, ge=2, description="Summaries of one level escalated into one.")
    leaf_chunk_tokens: int = Field(20000, ge=100, description="Token cap of one L1 chunk.")
    compaction_interval: int = Field(1800, ge=1, description="Seconds between compaction ticks.")
    evolution_interval: int = Field(
        3600,
        ge=1,
        validation_alias=_env("KG_EVOLUTION_INTERVAL", "evolution_interval"),
        description="Seconds between evolution ticks (KG_EVOLUTION_INTERVAL).",
    )
    scheduler: bool = Field(True, description="`off` runs no background maintenance in this process.")
    threads_per_cycle: int = Field(3, ge=1, le=1000, description="Most threads one compaction tick compacts.")
    openai_api_key: SecretStr | None = Field(
        None, validation_alias=_env("OPENAI_API_KEY", "openai_api_key"), description="Key for the LLM summarizer."
    )
    openai_base_url: str | None = Field(
        None, validation_alias=_env("OPENAI_BASE_URL", "openai_base_url"), description="OpenAI-compatible endpoint."
    )
    summary_model: str | None = Field(None, description="Model for LLM summaries; unset means deterministic.")
    summary_timeout: float = Field(60.0, gt=0, description="Seconds before an LLM summary call is abandoned.")
    startup_budget: int = Field(
        1500, ge=100, le=100_000, description="Tokens of memory a hook hands an agent when its session starts."
    )
    embedder: str = Field("none", description="`none`, `sentence-transformers:MODEL_OR_PATH` or `openai:MODEL`.")
    max_store_mb: int | None = Field(
        None,
        ge=1,
        description="Archive the oldest compacted threads when the store takes more than this on disk "
        "(PALIMPSEST_MAX_STORE_MB; a SQLite store, whose archives go beside its file).",
    )
    tokens_file: Path | None = Field(
        None,
        description="JSON or TOML file mapping bearer token -> partitions it may touch; "
        "when set, the HTTP transport requires a token (PALIMPSEST_TOKENS_FILE).",
    )

    @property
    def compaction(self) -> CompactionSettings:
        """The compaction knobs as one group, for the scheduler."""
        return CompactionSettings(
            threshold=self.compaction_threshold,
            keep_recent=self.keep_recent,
            escalation_fanin=self.escalation_fanin,
            leaf_chunk_tokens=self.leaf_chunk_tokens,
        )

    @property
    def maintenance(self) -> MaintenanceSettings:
        """The background loop's knobs as one group."""
        return MaintenanceSettings(
            compaction=self.compaction,
            threads_per_cycle=self.threads_per_cycle,
            compaction_interval=self.compaction_interval,
            evolution_interval=self.evolution_interval,
        )

    @property
    def llm(self) -> LlmSettings:
        """The LLM summarizer's endpoint as one group."""
        return LlmSettings(
            api_key=self.openai_api_key,
            base_url=self.openai_base_url,
            model=self.summary_model,
            timeout=self.summary_timeout,
        )

    @property
    def store_budget(self) -> StoreBudget | None:
        """``PALIMPSEST_MAX_STORE_MB`` and where archives go, for the evolution tick; None when unset."""
        folder = default_archive_dir(self.store)
        if self.max_store_mb is None or folder is None:
            return None
        return StoreBudget(max_bytes=self.max_store_mb * 1_000_000, folder=folder)

    def open_store(self) -> MemoryStore:
        """The configured store, not yet initialized."""
        return open_store(
            self.store,
            Neo4jCredentials(
                user=self.neo4j_user,
                password=self.neo4j_password.get_secret_value() if self.neo4j_password else None,
                database=self.neo4j_database,
            ),
        )
