"""Snippets of full-text hits, built by FTS5 for only the hits a search returns.

FTS5's ``snippet()`` can only run on a row the same statement matched, so building it in
the store's ranked query meant matching every returned row a second time in an index of
a million messages: most of a text search's time (33 ms against 9 ms for 200 rows), and
spent on rows the search then dropped (each of its two queries per kind returns up to
``limit`` rows; the merge keeps ``limit`` in all). Here the texts of the hits a search
keeps are indexed in a private in-memory FTS5 table with the stores' tokenizer and
``snippet()`` runs there: the same window of about 40 tokens around the matched words,
'…' at cut ends, as the store's index would give, for a millisecond or two.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Sequence

from palimpsest.graph_schema.sqlite import queries as q


def snippets(matched: Sequence[tuple[str, str, str | None]]) -> list[str]:
    """The FTS5 snippet of each text for the query it matched, in the order given.

    A tool message is indexed by its content and its derived search text (schema.sql):
    its snippet comes from the content, the words the agent and the tool wrote, and
    from the derived text only when the query matched none of the content's words.

    Args:
        matched: ``(text, fts_query, derived)`` triples, each text one that
            ``fts_query`` matched in the store, in its stored text (messages,
            summaries and facts never change their text, so it matches here too) or
            in ``derived``, a message's search_text (None for other nodes).

    Returns:
        One snippet per triple.
    """
    if not matched:
        return []
    found = _snippets([(index, text, fts_query) for index, (text, fts_query, _) in enumerate(matched)])
    derived_only = [
        (index, derived, fts_query)
        for index, (_, fts_query, derived) in enumerate(matched)
        if index not in found and derived
    ]
    found.update(_snippets(derived_only))
    # A row matched by neither (its text changed since the search read it) shows its opening.
    return [found.get(index, text[: q.SNIPPET_FALLBACK_CHARS]) for index, (text, _, _) in enumerate(matched)]


def _snippets(rows: Sequence[tuple[int, str, str]]) -> dict[int, str]:
    """``{index: snippet}`` for the ``(index, text, fts_query)`` rows whose text the query matches."""
    if not rows:
        return {}
    by_query: dict[str, list[int]] = defaultdict(list)
    for index, _, fts_query in rows:
        by_query[fts_query].append(index)
    conn = _scratch()
    conn.execute("BEGIN")
    try:
        conn.executemany(q.SNIPPET_INSERT, [(index, text) for index, text, _ in rows])
        found: dict[int, str] = {}
        for fts_query, rowids in by_query.items():
            found.update(conn.execute(q.SNIPPETS, {"query": fts_query, "rowids": json.dumps(rowids)}))
    finally:
        conn.rollback()
    return found


_per_thread = threading.local()


def _scratch() -> sqlite3.Connection:
    """This thread's private in-memory database with the empty snippet table.

    Made once per thread and emptied by rolling back each use: opening a database and
    creating an FTS5 table in it cost a third of what the snippets themselves did, on
    every search. A thread builds one search's snippets at a time, so none is shared.
    """
    conn: sqlite3.Connection | None = getattr(_per_thread, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(q.SNIPPET_TABLE)
        _per_thread.conn = conn
    return conn
