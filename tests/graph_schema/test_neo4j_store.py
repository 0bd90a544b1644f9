"""What only the Neo4j backend has to prove: outages, recovery and Lucene query safety.

The contract suites run every verb on both backends; this module covers the parts
that exist because Neo4j is a server: an unreachable or vanished server must become
`StoreUnavailable` naming the URI (never a driver exception), and the same store must
work again once the server is back. The outage is real: a loopback TCP relay in
front of the test server is cut and restored.
"""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials
from palimpsest.graph_schema.errors import InvalidInput, StoreUnavailable
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.neo4j.queries import lucene_query
from palimpsest.graph_schema.neo4j.store import Neo4jStore, snippet
from tests.support.cypher import run_cypher
from tests.support.stores import neo4j_test_uri, wipe_neo4j
from tests.support.tcp_relay import TcpRelay


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.neo4j
async def test_an_outage_is_store_unavailable_and_the_store_recovers() -> None:
    target = urlsplit(neo4j_test_uri())
    await wipe_neo4j(neo4j_test_uri())
    relay = TcpRelay(target.hostname or "127.0.0.1", target.port or 7687)
    await relay.start()
    uri = f"bolt://127.0.0.1:{relay.port}"
    store = Neo4jStore(uri, Neo4jCredentials(), retry_seconds=0.5, connect_seconds=2.0)
    await store.initialize()
    try:
        await store.append_messages("ide", "t", [NewMessage(role=Role.user, content="before the outage")])
        await relay.cut()

        with pytest.raises(StoreUnavailable, match=f"Neo4j at {uri}"):
            await store.get_thread("ide", "t")
        with pytest.raises(StoreUnavailable, match=f"Neo4j at {uri}"):
            await store.append_messages("ide", "t", [NewMessage(role=Role.user, content="lost")])

        await relay.start()
        assert (await store.get_thread("ide", "t")).message_count == 1
        result = await store.append_messages("ide", "t", [NewMessage(role=Role.user, content="after")])
        assert (result.appended, result.uncompacted) == (1, 2)
        assert [m.content for m in await store.get_messages("ide", "t")] == ["before the outage", "after"]
    finally:
        await store.close()
        await relay.cut()


async def test_no_server_is_store_unavailable_naming_the_uri() -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    store = Neo4jStore(uri, Neo4jCredentials(), retry_seconds=0.5, connect_seconds=1.0)
    with pytest.raises(StoreUnavailable, match=f"Neo4j at {uri} cannot be reached"):
        await store.initialize()
    await store.close()
    await store.close()


async def test_a_store_that_is_not_open_says_so() -> None:
    store = Neo4jStore("bolt://127.0.0.1:1", Neo4jCredentials())
    with pytest.raises(StoreUnavailable, match="initialize"):
        await store.get_thread("ide", "t")


@pytest.mark.parametrize("uri", ["bolt://[bad", "bolt://127.0.0.1:notaport"])
async def test_a_malformed_uri_is_invalid_input(uri: str) -> None:
    store = Neo4jStore(uri, Neo4jCredentials(), retry_seconds=0.5, connect_seconds=1.0)
    with pytest.raises(InvalidInput, match=f"cannot use Neo4j URI '{re.escape(uri)}'"):
        await store.initialize()
    await store.close()


@pytest.mark.neo4j
async def test_initialize_twice_keeps_the_schema_and_the_data() -> None:
    uri = neo4j_test_uri()
    await wipe_neo4j(uri)
    store = Neo4jStore(uri, Neo4jCredentials())
    await store.initialize()
    await store.append_messages("ide", "t", [NewMessage(role=Role.user, content="kept across initialize")])
    await store.initialize()
    again = Neo4jStore(uri, Neo4jCredentials())
    await again.initialize()
    try:
        hits = await again.search_text("initialize", partition="ide")
        assert [hit.snippet for hit in hits] == ["kept across initialize"]
    finally:
        await again.close()
        await store.close()


async def index_names(uri: str) -> set[str]:
    """The database's index names, asked of the server itself (test scaffolding)."""
    import neo4j

    async with neo4j.AsyncGraphDatabase.driver(uri, auth=None) as driver:
        rows, _, _ = await driver.execute_query("SHOW INDEXES YIELD name RETURN name", database_="neo4j")
        return {row["name"] for row in rows}


@pytest.mark.neo4j
async def test_the_schema_is_applied_once_per_version() -> None:
    """An open reads the schema's version and re-applies the schema only when it differs."""
    uri = neo4j_test_uri()
    await wipe_neo4j(uri)
    store = Neo4jStore(uri, Neo4jCredentials())
    await store.initialize()
    await store.close()
    assert "thread_partition" in await index_names(uri)
    # An index gone behind the schema's back stays gone: the version says the schema is there.
    await run_cypher(uri, "DROP INDEX thread_partition")
    again = Neo4jStore(uri, Neo4jCredentials())
    await again.initialize()
    await again.close()
    assert "thread_partition" not in await index_names(uri), "the schema was applied again"
    # Another version (an older Palimpsest wrote it): the schema is applied, and the version recorded.
    await run_cypher(uri, "MATCH (s:PalimpsestSchema) SET s.version = 'older'")
    upgraded = Neo4jStore(uri, Neo4jCredentials())
    await upgraded.initialize()
    try:
        assert "thread_partition" in await index_names(uri)
        await upgraded.append_messages("ide", "t", [NewMessage(role=Role.user, content="after the upgrade")])
        assert [hit.snippet for hit in await upgraded.search_text("upgrade", partition="ide")] == ["after the upgrade"]
    finally:
        await upgraded.close()
    await run_cypher(uri, "DROP INDEX thread_partition")
    current = Neo4jStore(uri, Neo4jCredentials())
    await current.initialize()
    await current.close()
    assert "thread_partition" not in await index_names(uri), "the new version was not recorded"
    await wipe_neo4j(uri)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("refresh token", '"refresh" OR "token"'),
        ("AND OR NOT", '"and" OR "or" OR "not"'),
        ("title:x* (a", '"title:x*" OR "(a" OR "title" OR "x" OR "a"'),
        ('say "hi\\', '"\\"hi\\\\" OR "say" OR "hi"'),
        ("os.path", '"os.path" OR "os" OR "path"'),
        ("*** ??? _", None),
        ("", None),
    ],
)
def test_lucene_query_quotes_every_term(text: str, expected: str | None) -> None:
    assert lucene_query(text) == expected


def test_snippet_centres_on_the_first_matching_word() -> None:
    text = "a" * 500 + " the Refresh token rotates " + "b" * 500
    window = snippet(text, "refresh", width=60)
    assert "Refresh token" in window
    assert window.startswith("…") and window.endswith("…")
    assert snippet("short text", "absent") == "short text"
