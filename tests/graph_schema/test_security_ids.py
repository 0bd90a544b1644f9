"""Ids without ambiguity, and duplicates that are the same message (issue 12, defect 1).

Ids used to hash their fields joined by ``\\x1f``, a character a name may hold, so two
different messages could meet on one id: the second was silently dropped as a
"duplicate", or refused by a uniqueness constraint. Ids now hash JSON-encoded fields,
and an append recognises a repeat by (partition, thread, caller id), which keeps
messages stored under the old ids found when they are appended again.
"""

from __future__ import annotations

import pytest

from palimpsest.graph_schema import identity, prepare
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from tests.support.ids import old_message_id


def _message(source_id: str, content: str = "hello") -> NewMessage:
    return NewMessage(role=Role.user, content=content, message_id=source_id)


def test_no_two_inputs_meet() -> None:
    assert identity.message_id("p", "coll", "a\x1fb") != identity.message_id("p", "coll\x1fa", "b")
    assert identity.message_id("p\x1fx", "t", "m") != identity.message_id("p", "x\x1ft", "m")
    assert identity.fact_id("p", "a\x1fb", "m") != identity.fact_id("p", "a", "b\x1fm")
    assert identity.summary_id("p", "t", 1, ["a\x1fb"]) != identity.summary_id("p", "t", 1, ["a", "b"])


async def test_a_separator_in_names_loses_nothing(store: MemoryStore) -> None:
    first = await store.append_messages("p", "coll", [_message("a\x1fb", "first")])
    second = await store.append_messages("p", "coll\x1fa", [_message("b", "second")])
    assert (first.appended, second.appended, second.duplicates) == (1, 1, 0)
    assert first.message_ids != second.message_ids
    fresh = await store.append_messages("p", "coll2", [_message("a\x1fb", "third")])
    other = await store.append_messages("p", "coll2\x1fa", [_message("b", "fourth")])
    assert (fresh.appended, other.appended) == (1, 1)
    [stored] = await store.get_messages("p", "coll\x1fa")
    assert stored.content == "second"


async def test_a_duplicate_is_the_same_message(store: MemoryStore) -> None:
    first = await store.append_messages("p", "t", [_message("m1"), _message("m2")])
    again = await store.append_messages("p", "t", [_message("m2"), _message("m3"), _message("m3")])
    assert (again.appended, again.duplicates) == (1, 2)
    assert again.message_ids[0] == first.message_ids[1]
    assert again.message_ids[1] == again.message_ids[2]
    assert [m.source_id for m in await store.get_messages("p", "t")] == ["m1", "m2", "m3"]


async def test_messages_stored_under_old_ids_are_still_duplicates(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old_code:
        old_code.setattr(prepare, "message_id", old_message_id)
        written = await store.append_messages("p", "t", [_message("m1"), _message("m2")])
    assert written.message_ids == [old_message_id("p", "t", "m1"), old_message_id("p", "t", "m2")]
    again = await store.append_messages("p", "t", [_message("m1"), _message("m2"), _message("m3")])
    assert (again.appended, again.duplicates) == (1, 2)
    assert again.message_ids[:2] == written.message_ids
    assert again.message_ids[2] == identity.message_id("p", "t", "m3")
    assert [m.seq for m in await store.get_messages("p", "t")] == [0, 1, 2]
    assert await check_store(store) == []
