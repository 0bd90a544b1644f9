"""The test stores: which backends a test runs on, where the test Neo4j is, and emptying it.

Shared by ``tests/conftest.py`` (the ``store`` fixture) and by the tests that open a
store of their own (a server process, a browser session, a property test's examples).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BACKENDS = ["sqlite", "neo4j"]


def neo4j_test_uri() -> str:
    """The URI of this test process's Neo4j, or a failure that says how to get one.

    Under pytest-xdist each worker has a server of its own (``make test`` starts one per
    worker and names it in ``NEO4J_TEST_URI_<worker>``, e.g. ``NEO4J_TEST_URI_gw1``),
    since every Neo4j test empties the one database; a run without workers, or a worker
    whose variable is not set, uses ``NEO4J_TEST_URI``.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    uri = (os.environ.get(f"NEO4J_TEST_URI_{worker}") if worker else None) or os.environ.get("NEO4J_TEST_URI")
    if not uri:
        pytest.fail(
            "NEO4J_TEST_URI is not set: run the suite with `make test`, or start a server "
            "with `make neo4j-start` and export the URI it prints",
            pytrace=False,
        )
    return uri


async def wipe_neo4j(uri: str) -> None:
    """Empty the test database so each test starts from nothing.

    Test scaffolding, not product code: Neo4j Community has one database, so tests
    share it and clean it between them.
    """
    import neo4j

    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=None)
    try:
        # CALL ... IN TRANSACTIONS needs an implicit (auto-commit) transaction, which
        # execute_query does not give: run it in a session.
        async with driver.session(database="neo4j") as session:
            result = await session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")
            await result.consume()
    finally:
        await driver.close()


def store_uri(backend: str, tmp_path: Path) -> str:
    """A fresh store URI of one backend for one test."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return neo4j_test_uri()
