"""Configuration: one pydantic-settings class read from the environment variables docs/configuration.md lists.

Settings are read when a command or server starts (never at import time), and CLI flags
override them by passing values to the constructor.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from palimpsest.scheduler.config import (
    CompactionSettings,
    LlmSettings,
    MaintenanceSettings,
    StoreBudget,
    default_archive_dir,
)
from palimpsest.server.store_settings import ENV_PREFIX, StoreSettings, env_names

#: A DNS name or IPv4 address, optionally ``*.`` for every name under a domain.
_HOST_NAME = re.compile(r"(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")


def _host_name(value: str) -> str:
    """One entry of ``PALIMPSEST_ALLOWED_HOSTS``: a host name or address, lower-cased, no scheme or port."""
    host = value.strip().lower()
    if ":" in host:
        try:
            return str(ipaddress.IPv6Address(host.removeprefix("[").removesuffix("]")))
        except ValueError:
            pass
    elif _HOST_NAME.fullmatch(host):
        return host
    raise ValueError(f"{value!r} is not a host name: give a name or an address, no scheme or port (memory.example.com)")


class Settings(BaseSettings, StoreSettings):
    """Everything configurable, from the variables in docs/configuration.md; flags override by constructor args.

    The fields that open the store come from `StoreSettings`, which a hook reads alone.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, populate_by_name=True, extra="ignore")

    compaction_threshold: int = Field(30, ge=2, description="Uncompacted messages before a thread is compacted.")
    keep_recent: int = Field(10, ge=0, description="Fresh-tail messages never compacted.")
    escalation_fanin: int = Field(4, ge=2, description="Summaries of one level escalated into one.")
    leaf_chunk_tokens: int = Field(20000, ge=100, description="Token cap of one L1 chunk.")
    compaction_interval: int = Field(1800, ge=1, description="Seconds between compaction ticks.")
    evolution_interval: int = Field(
        3600,
        ge=1,
        validation_alias=env_names("KG_EVOLUTION_INTERVAL", "evolution_interval"),
        description="Seconds between evolution ticks (KG_EVOLUTION_INTERVAL).",
    )
    scheduler: bool = Field(True, description="`off` runs no background maintenance in this process.")
    hook_queue: bool = Field(
        True,
        description="`off`: a hook stores its turn in its own process instead of queueing it on the store's spool "
        "(read by the hook itself, without this class: `palimpsest.server.feeds.spool.queue_enabled`).",
    )
    facts: bool = Field(True, description="`off` extracts no facts (one thread: `palimpsest kg off --thread ID`).")
    threads_per_cycle: int = Field(3, ge=1, le=1000, description="Most threads one compaction tick compacts.")
    lease_seconds: float = Field(
        15.0,
        ge=1,
        le=3600,
        description="Seconds a maintenance lease lives unrenewed (renewed every third of it while its holder works).",
    )
    background_share: float = Field(
        0.25, gt=0, le=1, description="Share of a busy server's time background work is guaranteed."
    )
    openai_api_key: SecretStr | None = Field(
        None, validation_alias=env_names("OPENAI_API_KEY", "openai_api_key"), description="Key for the LLM summarizer."
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=env_names("OPENAI_BASE_URL", "openai_base_url"),
        description="OpenAI-compatible endpoint.",
    )
    summary_model: str | None = Field(None, description="Model for LLM summaries; unset means deterministic.")
    summary_timeout: float = Field(60.0, gt=0, description="Seconds before an LLM summary call is abandoned.")
    embedder: str = Field(
        "builtin:all-MiniLM-L6-v2",
        description="`builtin:all-MiniLM-L6-v2` (the packaged model, no PyTorch), `none`, "
        "`sentence-transformers:MODEL_OR_PATH` or `openai:MODEL`.",
    )
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
    allowed_hosts: Annotated[list[Annotated[str, AfterValidator(_host_name)]], NoDecode] = Field(
        default_factory=list,
        description="Host names the HTTP server answers besides loopback, the address a connection arrives on "
        "and --host: a request whose Host or Origin names any other host is refused, against DNS rebinding "
        "(PALIMPSEST_ALLOWED_HOSTS: comma-separated or a JSON list; `*.example.com` for a whole domain).",
    )

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        """``a.example, b.example`` or ``["a.example", "b.example"]`` from the environment, as a list."""
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list of host names ({exc.msg})") from None
        return [part for part in value.split(",") if part.strip()]

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
            lease_seconds=self.lease_seconds,
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
