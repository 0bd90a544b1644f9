"""Running raw Cypher against the test Neo4j, for tests that inspect or damage what the store wrote."""

from __future__ import annotations


async def run_cypher(uri: str, statement: str) -> None:
    import neo4j

    async with neo4j.AsyncGraphDatabase.driver(uri, auth=None) as driver:
        await driver.execute_query(statement, database_="neo4j")
