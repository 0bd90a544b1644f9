"""Running ``palimpsest hook AGENT`` as a real subprocess and reading what it stored, shared by every hook test."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from typer.testing import CliRunner, Result

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import Message
from palimpsest.server.cli.main import app

CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


def hook(agent: str, stdin: dict[str, Any] | str, store_url: str, **env: str) -> Result:
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    return CliRunner().invoke(app, ["hook", agent, "--store", store_url], input=text, env={**CLEAN_ENV, **env})


def stored(store_url: str, partition: str, thread: str) -> list[Message]:
    async def read() -> list[Message]:
        store = open_store(store_url)
        await store.initialize()
        try:
            return await store.get_messages(partition, thread)
        finally:
            await store.close()

    return asyncio.run(read())


def thread_ids(store_url: str) -> list[str]:
    async def read() -> list[str]:
        store = open_store(store_url)
        await store.initialize()
        try:
            return [thread.id for thread in await store.list_threads(None)]
        finally:
            await store.close()

    return asyncio.run(read())


def silent(result: Result) -> None:
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", ""), result.output
