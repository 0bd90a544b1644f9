"""A search on a young store logs nothing (issue 12, defect 5).

Neo4j warns when a query names a relationship type the database does not hold yet; a
grep with a ``thread_id`` names EXTRACTED_FROM, which exists only once a fact does, so
each such grep logged a multi-KB warning (1,279 in 45 s under load).
"""

from __future__ import annotations

import logging

import pytest

from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore


async def test_a_thread_search_on_a_store_without_facts_logs_no_warning(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.append_messages("p", "t", [NewMessage(role=Role.user, content="hello world")])
    with caplog.at_level(logging.INFO):
        hits = await store.search_text("hello", partition="p", thread_id="t", kinds=["message", "summary", "fact"])
        await store.search_text("hello", partition="p", thread_id="absent")
    assert [hit.snippet for hit in hits] == ["hello world"]
    noisy = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert not [text for text in noisy if "does not exist" in text or "EXTRACTED_FROM" in text], noisy
