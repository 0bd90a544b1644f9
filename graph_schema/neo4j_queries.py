"""Every Cypher query of the Neo4j backend, as constants with parameters only.

Kept beside `graph_schema.neo4j` (which alone imports it) so the store's logic and its
queries each stay readable. The schema DDL lives in ``cypher/schema.cypher``; the
Lucene query made from a user's search string is built here too. Queries are
``LiteralString`` so no value is ever formatted into Cypher: fragments below are
joined only with other literals.

Conventions: ``t`` is a Thread, ``m`` a Message, ``s`` a Summary. ``$partition`` is
null when the caller may see every partition. Message lookups give the range index
``message_thread_seq`` equality on (partition, thread_id) and a range on seq, and
order by all three so the index order is used; summary lookups give
``summary_thread_level`` a predicate on each of its properties for the same reason.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

#: At most this many terms of a search reach Lucene (its clause limit is 1024).
MAX_QUERY_TERMS = 64
_WORD = re.compile(r"\w+")
_ALNUM = re.compile(r"[^\W_]")


def schema_statements() -> list[str]:
    """The DDL of ``cypher/schema.cypher``, one statement per ``;``, comments dropped."""
    text = resources.files("graph_schema").joinpath("cypher/schema.cypher").read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


def lucene_query(text: str) -> str | None:
    """A Lucene query that matches any word of ``text``, whatever syntax ``text`` holds.

    Terms are the ``\\w+`` runs of ``text`` plus its whitespace-separated chunks that
    hold punctuation (Lucene's standard tokenizer keeps ``os.path`` or ``file.py`` as
    one token, so the chunk must be searched whole to find it). Each term is quoted,
    so ``AND``, ``*``, ``:`` or brackets are only ever words, and they are OR-ed.
    None when ``text`` holds no letter or digit at all.
    """
    chunks = [chunk for chunk in text.lower().split() if _WORD.fullmatch(chunk) is None]
    terms = [term for term in [*chunks, *_WORD.findall(text.lower())] if _ALNUM.search(term)]
    unique = list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
    if not unique:
        return None
    return " OR ".join('"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"' for term in unique)


#: A summary as one map: its properties, ordered child ids and parent ids.
_SUMMARY_MAP: LiteralString = """{
    props: properties(s),
    child_ids: COLLECT { MATCH (s)-[r:SUMMARIZES]->(c) RETURN c.id ORDER BY r.position },
    parent_ids: COLLECT { MATCH (p:Summary)-[:SUMMARIZES]->(s) RETURN p.id }
}"""

#: The thread of a read, hidden when it lives in another partition.
_THREAD: LiteralString = """
MATCH (t:Thread {id: $thread_id})
WHERE $partition IS NULL OR t.partition = $partition
"""

AWAIT_INDEXES: LiteralString = "CALL db.awaitIndexes(300)"

# -- threads and messages ----------------------------------------------------------

#: Create or find the thread, take its write lock, then read its counters and which
#: of the batch's ids are already stored: everything after this sees committed state.
APPEND_LOCK: LiteralString = """
MERGE (t:Thread {id: $thread_id})
ON CREATE SET t.partition = $partition, t.project = $project, t.created_at = $now,
    t.updated_at = $now, t.last_seq = -1, t.message_count = 0, t.covered_count = 0, t.tokens = 0
SET t._lock = true
REMOVE t._lock
RETURN t.partition AS partition, t.project AS project, t.last_seq AS last_seq,
    t.message_count - t.covered_count AS uncovered,
    COLLECT { UNWIND $ids AS id MATCH (m:Message {id: id}) RETURN m.id } AS existing
"""

#: One batch of new messages, chained by NEXT from the thread's previous last message.
APPEND_WRITE: LiteralString = """
MATCH (t:Thread {id: $thread_id})
SET t.last_seq = $last_seq, t.message_count = t.message_count + size($rows),
    t.tokens = t.tokens + $tokens, t.updated_at = $now, t.project = coalesce(t.project, $project)
WITH t
OPTIONAL MATCH (prev:Message {partition: $partition, thread_id: $thread_id, seq: $prev_seq})
CALL (prev) {
    UNWIND $rows AS row
    CREATE (m:Message)
    SET m = row
    WITH collect(m) AS created
    WITH CASE WHEN prev IS NULL THEN created ELSE [prev] + created END AS chain
    UNWIND range(0, size(chain) - 2) AS i
    WITH chain[i] AS a, chain[i + 1] AS b
    CREATE (a)-[:NEXT]->(b)
}
RETURN t.message_count - t.covered_count AS uncovered
"""

GET_THREAD: LiteralString = _THREAD + """
RETURN properties(t) AS props, t.message_count - t.covered_count AS uncovered
"""

LIST_THREADS: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
RETURN properties(t) AS props
ORDER BY t.updated_at DESC, t.id
LIMIT $limit
"""

GET_MESSAGES: LiteralString = _THREAD + """
RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= $first_seq AND m.seq <= $last_seq
    RETURN properties(m) ORDER BY m.partition, m.thread_id, m.seq LIMIT $limit
} AS messages
"""

GET_MESSAGE: LiteralString = """
MATCH (m:Message {id: $id})
WHERE $partition IS NULL OR m.partition = $partition
RETURN properties(m) AS props
"""

#: Lucene hits in score order, filtered; no ORDER BY so the filter streams.
SEARCH_TEXT: LiteralString = """
CALL db.index.fulltext.queryNodes('memory_text', $query) YIELD node, score
WITH node, score,
    CASE WHEN node:Message THEN 'message' WHEN node:Summary THEN 'summary' ELSE 'fact' END AS kind
WHERE kind IN $kinds
    AND ($partition IS NULL OR node.partition = $partition)
    AND ($thread_id IS NULL OR node.thread_id = $thread_id
        OR (node:Fact AND EXISTS { (node)-[:EXTRACTED_FROM]->(:Message {thread_id: $thread_id}) }))
    AND ($since IS NULL OR node.created_at >= $since)
    AND ($until IS NULL OR node.created_at <= $until)
RETURN node.id AS id, kind, node.thread_id AS thread_id, node.partition AS partition, score,
    coalesce(node.content, node.text) AS text, node.created_at AS created_at,
    node.source_id AS source_id, node.level AS level, node.role AS role
LIMIT $limit
"""

STATS: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
WITH count(t) AS threads, sum(t.message_count) AS messages, sum(t.tokens) AS tokens
RETURN threads, messages, tokens,
    COLLECT {
        MATCH (s:Summary) WHERE $partition IS NULL OR s.partition = $partition
        WITH s.level AS level, count(*) AS n
        RETURN [level, n]
    } AS levels,
    COUNT { MATCH (f:Fact) WHERE $partition IS NULL OR f.partition = $partition } AS facts
"""

# -- the summary DAG ---------------------------------------------------------------

UNCOVERED_MESSAGES: LiteralString = _THREAD + """
RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= 0 AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    RETURN properties(m) ORDER BY m.partition, m.thread_id, m.seq LIMIT $limit
} AS messages
"""

UNCOVERED_SUMMARIES: LiteralString = """
MATCH (s:Summary {thread_id: $thread_id, level: $level})
WHERE s.first_seq >= 0 AND s.partition = $partition
    AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(s) }
RETURN """ + _SUMMARY_MAP + """ AS summary
ORDER BY s.thread_id, s.level, s.first_seq
"""

#: Lock the thread, then read the proposed children (only those of this thread and
#: partition) with whether something already covers them, and whether the summary
#: itself exists: all after the lock, so a concurrent compaction is seen committed.
SUMMARY_LOCK: LiteralString = """
MATCH (t:Thread {id: $thread_id})
WHERE t.partition = $partition
SET t._lock = true
REMOVE t._lock
RETURN EXISTS { MATCH (:Summary {id: $summary_id}) } AS exists,
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (m:Message {id: id})
        WHERE m.partition = $partition AND m.thread_id = $thread_id
        RETURN {props: properties(m), covered: EXISTS { (:Summary)-[:SUMMARIZES]->(m) }}
    } AS messages,
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (s:Summary {id: id})
        WHERE s.partition = $partition AND s.thread_id = $thread_id
        RETURN """ + _SUMMARY_MAP + """
    } AS summaries
"""

SUMMARY_WRITE_OVER_MESSAGES: LiteralString = """
MATCH (t:Thread {id: $thread_id})
SET t.covered_count = t.covered_count + size($children)
CREATE (s:Summary)
SET s = $props
WITH s
UNWIND $children AS child
MATCH (c:Message {id: child.id})
CREATE (s)-[:SUMMARIZES {position: child.position}]->(c)
"""

SUMMARY_WRITE_OVER_SUMMARIES: LiteralString = """
CREATE (s:Summary)
SET s = $props
WITH s
UNWIND $children AS child
MATCH (c:Summary {id: child.id})
CREATE (s)-[:SUMMARIZES {position: child.position}]->(c)
"""

GET_SUMMARY: LiteralString = """
MATCH (s:Summary {id: $id})
WHERE $partition IS NULL OR s.partition = $partition
RETURN """ + _SUMMARY_MAP + """ AS summary
"""

#: A page of the messages a summary covers, by its seq range, through the range index.
MESSAGES_IN_RANGE: LiteralString = """
MATCH (m:Message {partition: $partition, thread_id: $thread_id})
WHERE m.seq >= $first_seq AND m.seq <= $last_seq
RETURN properties(m) AS props
ORDER BY m.partition, m.thread_id, m.seq
SKIP $offset
LIMIT $limit
"""

#: The descendants of a summary at one level, walking SUMMARIZES edges down (paths
#: pruned to summaries at or above that level), in thread order, and one page of them.
DESCENDANTS: LiteralString = """
MATCH (top:Summary {id: $id})
MATCH path = (top)-[:SUMMARIZES*]->(s:Summary)
WHERE s.level = $level AND all(n IN nodes(path) WHERE n:Summary AND n.level >= $level)
WITH s ORDER BY s.first_seq
WITH collect(s) AS found
CALL (found) {
    UNWIND found[$offset..($offset + $limit)] AS s
    RETURN collect(""" + _SUMMARY_MAP + """) AS page
}
RETURN size(found) AS total, page
"""

#: For each id, the path up to its top summary: the chain, lowest level first.
COVERED_BY: LiteralString = """
UNWIND $ids AS id
CALL (id) {
    OPTIONAL MATCH (m:Message {id: id})
    OPTIONAL MATCH (x:Summary {id: id})
    RETURN coalesce(m, x) AS node
}
WITH id, node WHERE node IS NOT NULL
MATCH path = (node)<-[:SUMMARIZES*]-(top:Summary)
WHERE NOT EXISTS { (:Summary)-[:SUMMARIZES]->(top) }
RETURN id, [n IN nodes(path)[1..] | n.id] AS chain
"""

FRONTIER: LiteralString = _THREAD + """
RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= 0 AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    RETURN {kind: 'message', id: m.id, level: 0, first_seq: m.seq, last_seq: m.seq, tokens: m.tokens}
} + COLLECT {
    MATCH (s:Summary {thread_id: t.id})
    WHERE s.level >= 1 AND s.first_seq IS NOT NULL AND s.partition = t.partition
        AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(s) }
    RETURN {kind: 'summary', id: s.id, level: s.level, first_seq: s.first_seq,
        last_seq: s.last_seq, tokens: s.tokens}
} AS items
"""

THREAD_SUMMARIES: LiteralString = _THREAD + """
RETURN properties(t) AS props, COLLECT {
    MATCH (s:Summary {thread_id: t.id})
    WHERE s.level >= 1 AND s.first_seq IS NOT NULL AND s.partition = t.partition
    RETURN """ + _SUMMARY_MAP + """ ORDER BY s.level, s.first_seq
} AS summaries
"""

COMPACTION_CANDIDATES: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
WITH t, t.message_count - t.covered_count AS uncovered
WHERE uncovered >= $min_uncovered
RETURN t.id AS thread_id, t.partition AS partition, uncovered
ORDER BY uncovered DESC, t.updated_at, t.id
LIMIT $limit
"""
