"""The settings that reach the store, readable without pydantic-settings.

A hook runs after every turn of every agent, and needs only these few: where the store
is, the partition, the Neo4j credentials and the start-up budget. Importing
pydantic-settings (with the sources it loads: dotenv files, cloud secret stores, a
command-line parser) and building the full settings class is a tenth of a hook's
start-up. So these fields live here, on a plain pydantic model, and ``Settings``
(``palimpsest.server.settings``) inherits them: one definition of each variable, its
default and its bounds. `StoreSettings.from_environment` reads them as pydantic-settings
does (the field's own aliases first, then ``PALIMPSEST_<FIELD>``, in any case), and
``tests/server/cli/test_hook_entry.py`` keeps the two readers equal.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.feeds.spool import default_store_uri

T = TypeVar("T")

#: Prefix of every variable named after its field.
ENV_PREFIX = "PALIMPSEST_"


def env_names(*names: str) -> AliasChoices:
    """The variables a field is read from before ``PALIMPSEST_<FIELD>`` (and its name, by constructor)."""
    return AliasChoices(*names)


class StoreSettings(BaseModel):
    """What opening the store takes, and what a hook hands back at session start."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    store: str = Field(default_factory=default_store_uri, description="Store URI (PALIMPSEST_STORE).")
    partition: str | None = Field(
        None, description="The IDE partition this process writes to; else from the MCP client's name."
    )
    neo4j_user: str = Field("neo4j", validation_alias=env_names("NEO4J_USER", "neo4j_user"), description="Neo4j user.")
    neo4j_password: SecretStr | None = Field(
        None, validation_alias=env_names("NEO4J_PASSWORD", "neo4j_password"), description="Neo4j password."
    )
    neo4j_database: str = Field(
        "neo4j", validation_alias=env_names("NEO4J_DATABASE", "neo4j_database"), description="Neo4j database."
    )
    startup_budget: int = Field(
        1500,
        ge=0,
        le=100_000,
        description="Tokens of memory a hook hands an agent when its session starts; 0 turns it off.",
    )

    @classmethod
    def from_environment(cls, **overrides: Any) -> Self:
        """These settings from the environment, ``overrides`` (flags given) on top.

        Raises:
            ValidationError: a variable holds a value its field refuses.
        """
        environment = {name.lower(): value for name, value in os.environ.items()}
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            names = [*(alias.choices if isinstance(alias, AliasChoices) else []), ENV_PREFIX + name]
            found = [environment[key] for key in (str(choice).lower() for choice in names) if key in environment]
            if found:
                values[name] = found[0]
        return cls(**{**values, **overrides})

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


def invalid_configuration(error: ValidationError) -> str:
    """One sentence naming the first invalid setting, for ``error: ...``."""
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"invalid configuration: {where}: {first['msg']}"


async def on_store(settings: StoreSettings, use: Callable[[MemoryStore], Awaitable[T]]) -> T:
    """Open and initialize the configured store, use it, close it whatever happens.

    Each command is one short process, so it owns its store for the length of ``use``
    and leaves no connection behind, on success or failure.
    """
    store = settings.open_store()
    try:
        await store.initialize()
        return await use(store)
    finally:
        await store.close()
