"""Every Cypher query of the Neo4j backend, as constants with parameters only.

Kept apart from the backend's feature modules (which alone import it) so the store's
logic and its queries each stay readable. The schema DDL lives in ``schema.cypher``; the
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

import hashlib
import re
from importlib import resources
from typing import LiteralString

from palimpsest.graph_schema import identity

#: At most this many terms of a search reach Lucene (its clause limit is 1024).
MAX_QUERY_TERMS = 64
_ALNUM = re.compile(r"[^\W_]")
_ANALYZER = re.compile(r"`fulltext\.analyzer`: '([\w-]+)'")
_PROPERTIES = re.compile(r"ON EACH \[([^\]]*)\]")


def schema_statements() -> list[str]:
    """The DDL of ``schema.cypher``, one statement per ``;``, comments dropped."""
    text = resources.files(__package__).joinpath("schema.cypher").read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";") if stmt.strip()]


def schema_version() -> str:
    """A digest of ``schema.cypher``'s statements: it changes whenever the schema does."""
    return hashlib.sha256("\n;\n".join(schema_statements()).encode()).hexdigest()[:16]


def text_analyzer() -> str:
    """The Lucene analyzer ``schema.cypher`` gives the ``memory_text`` index."""
    for statement in schema_statements():
        found = _ANALYZER.search(statement)
        if "memory_text" in statement and found:
            return found.group(1)
    raise LookupError("schema.cypher names no analyzer for memory_text")


def text_properties() -> list[str]:
    """The properties ``schema.cypher`` gives the ``memory_text`` index, sorted."""
    for statement in schema_statements():
        found = _PROPERTIES.search(statement)
        if "memory_text" in statement and found:
            return sorted(name.strip().removeprefix("n.") for name in found.group(1).split(","))
    raise LookupError("schema.cypher names no properties for memory_text")


def lucene_query(text: str) -> str | None:
    """A Lucene query that matches any word of ``text``, whatever syntax ``text`` holds.

    Terms are the ``\\w+`` runs of ``text`` plus its whitespace-separated chunks that
    hold punctuation (Lucene's standard tokenizer keeps ``os.path`` or ``file.py`` as
    one token, so the chunk must be searched whole to find it). Each term is quoted,
    so ``AND``, ``*``, ``:`` or brackets are only ever words, and they are OR-ed.
    None when ``text`` holds no letter or digit at all.
    """
    chunks = [chunk for chunk in text.lower().split() if identity.words(chunk) != [chunk]]
    terms = [term for term in [*chunks, *identity.words(text.lower())] if _ALNUM.search(term)]
    unique = list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
    if not unique:
        return None
    return " OR ".join('"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"' for term in unique)


#: What a match in a tool message's derived ``search_text`` counts for against one in
#: stored text. Lucene scores each property apart and adds the scores up, a short
#: derived text scoring high, and a call's derived text repeats its purpose and command
#: from its content (``text`` recall@10 on bench/coding_recall.py's 62 tuning
#: questions: 72.6 without the derived text, 75.8 with it unweighted, 76.6 at 0.5
#: and 0.2, 74.2 at 0.1, 75.8 at 0.05).
DERIVED_BOOST = 0.2


def text_index_query(text: str) -> str | None:
    """The ``memory_text`` query for a user's text: `lucene_query` on the stored text, its derived text boosted down."""
    terms = lucene_query(text)
    if terms is None:
        return None
    return f"content:({terms}) OR text:({terms}) OR search_text:({terms})^{DERIVED_BOOST}"


#: A message's properties, ``created_at`` as exact epoch microseconds (``epochMillis``
#: floors where ``epochSeconds`` truncates): the driver hydrates a DateTime in pure
#: Python, most of a message read's time, and an int natively. Its derived search text
#: is for the index only: not sent.
_MESSAGE_PROPS: LiteralString = """m {.*,
    created_at: m.created_at.epochMillis * 1000 + m.created_at.microsecond % 1000,
    search_text: null
}"""

#: A summary as one map: its properties (timestamps as epoch microseconds, as in
#: ``_MESSAGE_PROPS``), ordered child ids and parent ids.
_SUMMARY_MAP: LiteralString = """{
    props: s {.*,
        created_at: s.created_at.epochMillis * 1000 + s.created_at.microsecond % 1000,
        earliest_at: s.earliest_at.epochMillis * 1000 + s.earliest_at.microsecond % 1000,
        latest_at: s.latest_at.epochMillis * 1000 + s.latest_at.microsecond % 1000
    },
    child_ids: COLLECT { MATCH (s)-[r:SUMMARIZES]->(c) RETURN c.id ORDER BY r.position },
    parent_ids: COLLECT { MATCH (p:Summary)-[:SUMMARIZES]->(s) RETURN p.id }
}"""

#: The thread of a read, hidden when it lives in another partition. A thread is
#: (partition, id): with no partition named, several may match, which the caller
#: refuses (``base.one_thread``).
_THREAD: LiteralString = """
MATCH (t:Thread {id: $thread_id})
WHERE $partition IS NULL OR t.partition = $partition
"""

AWAIT_INDEXES: LiteralString = "CALL db.awaitIndexes(300)"
#: The analyzer and properties the full-text index was made with (none when there is no index yet).
TEXT_INDEX_ANALYZER: LiteralString = """
SHOW FULLTEXT INDEXES YIELD name, options, properties WHERE name = 'memory_text'
RETURN options.indexConfig['fulltext.analyzer'] AS analyzer, properties
"""
#: Drop the full-text index so the schema makes it anew (its analyzer or properties
#: changed); Neo4j then indexes every node again in the background, and AWAIT_INDEXES
#: waits for it.
DROP_TEXT_INDEX: LiteralString = "DROP INDEX memory_text IF EXISTS"
#: The version of the schema last applied to this database (no row before the first).
SCHEMA_VERSION: LiteralString = "MATCH (s:PalimpsestSchema {id: 'schema'}) RETURN s.version AS version"
#: Record the version just applied, once its indexes are online.
MARK_SCHEMA_VERSION: LiteralString = """
MERGE (s:PalimpsestSchema {id: 'schema'})
SET s.version = $version, s.applied_at = $now
"""

# -- threads and messages ----------------------------------------------------------

#: A whole append in one statement: create or find the thread and take its write lock;
#: read which of the batch's caller ids the thread already holds (with their stored
#: ids, whatever id scheme stored them; an empty thread, a fresh ingest, skips the
#: lookups); then store the others with the seqs after the thread's last, chained by
#: NEXT from its previous last message, and update the thread's counters. One statement
#: so the lock is held only while the server works: with a second round trip it was
#: also held while a busy client process got round to sending it, and every append to
#: the thread queued behind that (``bench/load.py``). ``$rows`` are unique by caller
#: id, ``created_at`` in epoch microseconds as in ``APPEND_WRITE``; ``secrets`` is
#: summed, not stored.
APPEND: LiteralString = """
MERGE (t:Thread {partition: $partition, id: $thread_id})
ON CREATE SET t.project = $project, t.created_at = $now,
    t.updated_at = $now, t.last_seq = -1, t.message_count = 0, t.covered_count = 0, t.tokens = 0
SET t._lock = true
REMOVE t._lock
WITH t, COLLECT {
    UNWIND CASE WHEN t.message_count = 0 THEN [] ELSE $source_ids END AS source_id
    MATCH (m:Message {partition: $partition, thread_id: $thread_id, source_id: source_id})
    RETURN [m.source_id, m.id]
} AS existing
WITH t, existing, [pair IN existing | pair[0]] AS stored
WITH t, existing, [row IN $rows WHERE NOT row.source_id IN stored] AS fresh, t.last_seq AS prev_seq
CALL (t, fresh, prev_seq) {
    WITH t, fresh, prev_seq WHERE size(fresh) > 0
    SET t.last_seq = prev_seq + size(fresh), t.message_count = t.message_count + size(fresh),
        t.tokens = t.tokens + reduce(total = 0, row IN fresh | total + row.tokens),
        t.secrets_redacted = coalesce(t.secrets_redacted, 0) + reduce(total = 0, row IN fresh | total + row.secrets),
        t.updated_at = $now, t.project = coalesce(t.project, $project)
    WITH t, fresh, prev_seq
    OPTIONAL MATCH (prev:Message {partition: $partition, thread_id: $thread_id, seq: prev_seq})
    UNWIND range(0, size(fresh) - 1) AS i
    WITH t, prev, fresh[i] AS row, prev_seq + 1 + i AS seq
    WITH t, prev, row, seq, (row.created_at % 1000000 + 1000000) % 1000000 AS micros
    CREATE (m:Message)
    SET m = row, m.seq = seq, m.project = coalesce($project, t.project), m.created_at = datetime({
        epochSeconds: (row.created_at - micros) / 1000000, nanosecond: micros * 1000
    })
    REMOVE m.secrets
    WITH prev, collect(m) AS created
    WITH CASE WHEN prev IS NULL THEN created ELSE [prev] + created END AS chain
    UNWIND range(0, size(chain) - 2) AS i
    WITH chain[i] AS a, chain[i + 1] AS b
    CREATE (a)-[:NEXT]->(b)
}
RETURN existing, t.message_count - t.covered_count AS uncovered
"""

#: One batch of new messages, chained by NEXT from the thread's previous last message.
#: ``row.created_at`` arrives as epoch microseconds (an int packs natively, a Python
#: datetime in the driver's pure-Python code) and is stored as a UTC DateTime, split
#: with floor semantics so times before 1970 stay exact.
APPEND_WRITE: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
SET t.last_seq = $last_seq, t.message_count = t.message_count + size($rows),
    t.tokens = t.tokens + $tokens, t.secrets_redacted = coalesce(t.secrets_redacted, 0) + $secrets,
    t.updated_at = $now, t.project = coalesce(t.project, $project)
WITH t
OPTIONAL MATCH (prev:Message {partition: $partition, thread_id: $thread_id, seq: $prev_seq})
CALL (prev) {
    UNWIND $rows AS row
    WITH row, (row.created_at % 1000000 + 1000000) % 1000000 AS micros
    CREATE (m:Message)
    SET m = row, m.created_at = datetime({
        epochSeconds: (row.created_at - micros) / 1000000, nanosecond: micros * 1000
    })
    WITH collect(m) AS created
    WITH CASE WHEN prev IS NULL THEN created ELSE [prev] + created END AS chain
    UNWIND range(0, size(chain) - 2) AS i
    WITH chain[i] AS a, chain[i + 1] AS b
    CREATE (a)-[:NEXT]->(b)
}
RETURN t.message_count - t.covered_count AS uncovered
"""

GET_THREAD: LiteralString = (
    _THREAD
    + """
RETURN properties(t) AS props, t.message_count - t.covered_count AS uncovered
"""
)

LIST_THREADS: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
RETURN properties(t) AS props
ORDER BY t.updated_at DESC, t.id
LIMIT $limit
"""

GET_MESSAGES: LiteralString = (
    _THREAD
    + """
RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= $first_seq AND m.seq <= $last_seq
    RETURN """
    + _MESSAGE_PROPS
    + """ ORDER BY m.partition, m.thread_id, m.seq LIMIT $limit
} AS messages
"""
)

GET_MESSAGE: LiteralString = (
    """
MATCH (m:Message {id: $id})
WHERE $partition IS NULL OR m.partition = $partition
RETURN """
    + _MESSAGE_PROPS
    + """ AS props
"""
)

_TEXT_FILTERS: LiteralString = """
WITH node, score,
    CASE WHEN node:Message THEN 'message' WHEN node:Summary THEN 'summary' ELSE 'fact' END AS kind
WHERE kind IN $kinds
    AND ($partition IS NULL OR node.partition = $partition)
    AND ($thread_id IS NULL OR node.thread_id = $thread_id
        OR (node:Fact AND EXISTS { (node)-[:EXTRACTED_FROM]->(:Message {thread_id: $thread_id}) }))
    AND ($since IS NULL OR node.created_at >= $since)
    AND ($until IS NULL OR node.created_at <= $until)
"""
#: The first ``$limit`` that passed, one map a row, in Lucene's score order; ``created_at``
#: as epoch microseconds (as in ``_MESSAGE_PROPS``: an int hydrates natively).
_TEXT_HITS: LiteralString = """RETURN {id: node.id, kind: kind, thread_id: node.thread_id, partition: node.partition,
    score: score, text: coalesce(node.content, node.text), derived: node.search_text,
    created_at: node.created_at.epochMillis * 1000 + node.created_at.microsecond % 1000,
    source_id: node.source_id, level: node.level, role: node.role} AS hit
LIMIT $limit
"""

#: Lucene's top ``$k`` (it skips what cannot make them), filtered; ``candidates`` says
#: whether the index had more to give. Hits stay in Lucene's score order.
SEARCH_TEXT: LiteralString = (
    """
CALL db.index.fulltext.queryNodes('memory_text', $query, {limit: $k}) YIELD node, score
WITH collect([node, score]) AS found
RETURN size(found) AS candidates, COLLECT {
    UNWIND found AS pair
    WITH pair[0] AS node, pair[1] AS score
    """
    + _TEXT_FILTERS
    + _TEXT_HITS
    + """} AS hits
"""
)

#: Every Lucene match in score order, filtered (no ORDER BY, so the filter streams):
#: when the top candidates held too few that pass the filters.
SEARCH_TEXT_ALL: LiteralString = (
    """
CALL db.index.fulltext.queryNodes('memory_text', $query) YIELD node, score
"""
    + _TEXT_FILTERS
    + _TEXT_HITS
)

#: Every partition holding a thread, with its thread count, by name.
PARTITIONS: LiteralString = """
MATCH (t:Thread)
RETURN t.partition AS partition, count(t) AS threads
ORDER BY partition
"""
STATS: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
WITH count(t) AS threads, sum(t.message_count) AS messages, sum(t.tokens) AS tokens,
    sum(coalesce(t.secrets_redacted, 0)) AS secrets
RETURN threads, messages, tokens, secrets,
    COLLECT {
        MATCH (s:Summary) WHERE $partition IS NULL OR s.partition = $partition
        WITH s.level AS level, count(*) AS n
        RETURN [level, n]
    } AS levels,
    COUNT { MATCH (f:Fact) WHERE $partition IS NULL OR f.partition = $partition } AS facts
"""

# -- the summary DAG ---------------------------------------------------------------

UNCOVERED_MESSAGES: LiteralString = (
    _THREAD
    + """
RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= coalesce(t.covered_floors[0], 0) AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    RETURN """
    + _MESSAGE_PROPS
    + """ ORDER BY m.partition, m.thread_id, m.seq LIMIT $limit
} AS messages
"""
)

# -- covered floors (docs/architecture.md, "Covered floors"): ``t.covered_floors[level]``
# is the seq below which every node of the level has a parent (level 0: messages). A
# thread written before floors were kept has none: every level is read from 0, up to
# level 32 (2^32 messages at the least fan-out of two).

COVERED_FLOORS: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
RETURN t.covered_floors AS floors, t.last_seq + 1 AS next_seq
"""
#: A thread's highest summary level: its floors start at 0 on every level up to it.
TOP_LEVEL: LiteralString = """
MATCH (s:Summary {thread_id: $thread_id})
WHERE s.partition = $partition
RETURN coalesce(max(s.level), 0) AS top
"""
SET_COVERED_FLOORS: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
SET t.covered_floors = $floors
"""
FIRST_UNCOVERED_MESSAGE: LiteralString = """
MATCH (m:Message {partition: $partition, thread_id: $thread_id})
WHERE m.seq >= $floor AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
RETURN m.seq AS seq ORDER BY m.seq LIMIT 1
"""
FIRST_PARENTLESS_SUMMARY: LiteralString = """
MATCH (s:Summary {thread_id: $thread_id, level: $level})
WHERE s.first_seq >= $floor AND s.partition = $partition AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(s) }
RETURN s.first_seq AS seq ORDER BY s.first_seq LIMIT 1
"""
LEVEL_END: LiteralString = """
MATCH (s:Summary {thread_id: $thread_id, level: $level})
WHERE s.first_seq >= $floor AND s.partition = $partition
RETURN s.last_seq + 1 AS seq ORDER BY s.first_seq DESC LIMIT 1
"""
#: ``floors``: the thread's covered floors, one per level up to its highest summary.
_FLOORS: LiteralString = "WITH t, coalesce(t.covered_floors, [level IN range(0, 32) | 0]) AS floors\n"
#: The top summaries: of each level, those with no parent from the level's floor up.
_TOP_SUMMARIES: LiteralString = """
    UNWIND range(1, size(floors) - 1) AS level
    MATCH (s:Summary {thread_id: t.id, level: level})
    WHERE s.first_seq >= floors[level] AND s.partition = t.partition
        AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(s) }
"""

UNCOVERED_SUMMARIES: LiteralString = (
    """
OPTIONAL MATCH (t:Thread {partition: $partition, id: $thread_id})
WITH coalesce(t.covered_floors[$level], 0) AS floor
MATCH (s:Summary {thread_id: $thread_id, level: $level})
WHERE s.first_seq >= floor AND s.partition = $partition
    AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(s) }
RETURN """
    + _SUMMARY_MAP
    + """ AS summary
ORDER BY s.thread_id, s.level, s.first_seq
"""
)

#: Lock the thread, then read the proposed children (only those of this thread and
#: partition) with whether something already covers them, and whether the summary
#: itself exists: all after the lock, so a concurrent compaction is seen committed.
#: The hint keeps the planner on the (partition, id) constraint: left alone it may seek
#: the partition index and read every thread of the partition on each summary write.
_SUMMARY_THREAD: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
USING INDEX t:Thread(partition, id)
"""
_SUMMARY_CHILDREN: LiteralString = (
    """
RETURN EXISTS { MATCH (:Summary {id: $summary_id}) } AS exists,
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (m:Message {id: id})
        WHERE m.partition = $partition AND m.thread_id = $thread_id
        RETURN {props: """
    + _MESSAGE_PROPS
    + """, covered: EXISTS { (:Summary)-[:SUMMARIZES]->(m) }}
    } AS messages,
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (s:Summary {id: id})
        WHERE s.partition = $partition AND s.thread_id = $thread_id
        RETURN """
    + _SUMMARY_MAP
    + """
    } AS summaries
"""
)
SUMMARY_LOCK: LiteralString = _SUMMARY_THREAD + "SET t._lock = true\nREMOVE t._lock\n" + _SUMMARY_CHILDREN

SUMMARY_WRITE_OVER_MESSAGES: LiteralString = """
MATCH (t:Thread {partition: $props.partition, id: $thread_id})
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

#: A message without its content or metadata: all a summary derives from its children
#: (ids, seq, digest, tokens, time), so a compaction reads no content twice.
_MESSAGE_KEYS: LiteralString = """m {.id, .source_id, .thread_id, .partition, .project, .seq, .role, .sha256,
    .tokens, .tool_call_id, content: '',
    created_at: m.created_at.epochMillis * 1000 + m.created_at.microsecond % 1000
}"""

_BATCH_LOCK: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
USING INDEX t:Thread(partition, id)
SET t._lock = true
REMOVE t._lock
RETURN COLLECT { UNWIND $summary_ids AS id MATCH (s:Summary {id: id}) RETURN id } AS existing,"""

#: `SUMMARY_LOCK` for a batch of level-1 summaries of one thread (`persist_summaries`):
#: the lock, then which of the summaries exist and every child message, read once.
#: The children are looked up as messages only: seeking each id as a summary too would
#: double the index seeks of the largest read a compaction makes.
SUMMARY_BATCH_LOCK_MESSAGES: LiteralString = (
    _BATCH_LOCK
    + """
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (m:Message {id: id})
        WHERE m.partition = $partition AND m.thread_id = $thread_id
        RETURN {props: """
    + _MESSAGE_KEYS
    + """, covered: EXISTS { (:Summary)-[:SUMMARIZES]->(m) }}
    } AS messages, [] AS summaries
"""
)

#: The same for a batch one level up: the child summaries with their parents, not their
#: own children (a summary derives nothing from its grandchildren; walking every child's
#: edges was most of this read).
SUMMARY_BATCH_LOCK_SUMMARIES: LiteralString = (
    _BATCH_LOCK
    + """
    [] AS messages,
    COLLECT {
        UNWIND $child_ids AS id
        MATCH (s:Summary {id: id})
        WHERE s.partition = $partition AND s.thread_id = $thread_id
        RETURN {
            props: s {.*,
                created_at: s.created_at.epochMillis * 1000 + s.created_at.microsecond % 1000,
                earliest_at: s.earliest_at.epochMillis * 1000 + s.earliest_at.microsecond % 1000,
                latest_at: s.latest_at.epochMillis * 1000 + s.latest_at.microsecond % 1000
            },
            child_ids: [],
            parent_ids: COLLECT { MATCH (p:Summary)-[:SUMMARIZES]->(s) RETURN p.id }
        }
    } AS summaries
"""
)

#: Every level-1 summary of a batch with its edges, and the thread's covered count, in one statement.
SUMMARY_BATCH_WRITE_OVER_MESSAGES: LiteralString = """
MATCH (t:Thread {partition: $partition, id: $thread_id})
USING INDEX t:Thread(partition, id)
SET t.covered_count = t.covered_count + $covered
WITH t
UNWIND $summaries AS row
CREATE (s:Summary)
SET s = row.props
WITH s, row
UNWIND row.children AS child
MATCH (c:Message {id: child.id})
CREATE (s)-[:SUMMARIZES {position: child.position}]->(c)
"""

#: Every summary of a batch one level up with its edges, in one statement.
SUMMARY_BATCH_WRITE_OVER_SUMMARIES: LiteralString = """
UNWIND $summaries AS row
CREATE (s:Summary)
SET s = row.props
WITH s, row
UNWIND row.children AS child
MATCH (c:Summary {id: child.id})
CREATE (s)-[:SUMMARIZES {position: child.position}]->(c)
"""

GET_SUMMARY: LiteralString = (
    """
MATCH (s:Summary {id: $id})
WHERE $partition IS NULL OR s.partition = $partition
RETURN """
    + _SUMMARY_MAP
    + """ AS summary
"""
)

#: A page of the messages a summary covers, by its seq range, through the range index.
#: The caller starts ``$first_seq`` at the page's first seq (a summary's range is gap
#: free) rather than SKIP-ping, and one collected list beats a record per message.
MESSAGES_IN_RANGE: LiteralString = (
    """
RETURN COLLECT {
    MATCH (m:Message {partition: $partition, thread_id: $thread_id})
    WHERE m.seq >= $first_seq AND m.seq <= $last_seq
    RETURN """
    + _MESSAGE_PROPS
    + """ ORDER BY m.partition, m.thread_id, m.seq LIMIT $limit
} AS messages
"""
)

#: The descendants of a summary at one level, walking SUMMARIZES edges down (paths
#: pruned to summaries at or above that level), in thread order, and one page of them.
DESCENDANTS: LiteralString = (
    """
MATCH (top:Summary {id: $id})
MATCH path = (top)-[:SUMMARIZES*]->(s:Summary)
WHERE s.level = $level AND all(n IN nodes(path) WHERE n:Summary AND n.level >= $level)
WITH s ORDER BY s.first_seq
WITH collect(s) AS found
CALL (found) {
    UNWIND found[$offset..($offset + $limit)] AS s
    RETURN collect("""
    + _SUMMARY_MAP
    + """) AS page
}
RETURN size(found) AS total, page
"""
)

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

FRONTIER: LiteralString = (
    _THREAD
    + _FLOORS
    + """RETURN COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= floors[0] AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    RETURN {kind: 'message', id: m.id, level: 0, first_seq: m.seq, last_seq: m.seq, tokens: m.tokens}
} + COLLECT {"""
    + _TOP_SUMMARIES
    + """    RETURN {kind: 'summary', id: s.id, level: s.level, first_seq: s.first_seq,
        last_seq: s.last_seq, tokens: s.tokens}
} AS items
"""
)

#: The frontier as context assembly reads it, in one statement: the uncovered messages
#: (ids and tokens, newest first), the top summaries whole, and the content of the newest
#: run of messages that ``prepare.newest_page`` picks, computed here the same way:
#: ``running[k]`` is the tokens of the ``k`` newest messages, a message is taken while
#: those before it stay within ``$budget`` and its seq continues the run (seqs strictly
#: fall, so no gap means ``first - seq = k``), and none when the newest alone is over.
CONTEXT_FRONTIER: LiteralString = (
    _THREAD
    + _FLOORS
    + """WITH t, COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= floors[0] AND NOT EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    RETURN {kind: 'message', id: m.id, level: 0, first_seq: m.seq, last_seq: m.seq, tokens: m.tokens}
    ORDER BY m.seq DESC
} AS messages, COLLECT {"""
    + _TOP_SUMMARIES
    + """    RETURN """
    + _SUMMARY_MAP
    + """ AS summary
} AS summaries
WITH t, messages, summaries,
    reduce(sums = [0], item IN messages[0..$limit] | sums + (sums[-1] + item.tokens)) AS running
WITH t, messages, summaries, CASE
    WHEN size(messages) = 0 OR messages[0].tokens > $budget THEN 0
    ELSE size([k IN range(0, size(running) - 2)
        WHERE running[k] <= $budget AND messages[0].first_seq - messages[k].first_seq = k])
END AS taken
WITH t, messages, summaries,
    CASE WHEN taken = 0 THEN 1 ELSE messages[taken - 1].first_seq END AS low,
    CASE WHEN taken = 0 THEN 0 ELSE messages[0].first_seq END AS high
RETURN messages, summaries, COLLECT {
    MATCH (m:Message {partition: t.partition, thread_id: t.id})
    WHERE m.seq >= low AND m.seq <= high
    RETURN """
    + _MESSAGE_PROPS
    + """ ORDER BY m.partition, m.thread_id, m.seq
} AS newest
"""
)

THREAD_SUMMARIES: LiteralString = (
    _THREAD
    + """
RETURN properties(t) AS props, COLLECT {
    MATCH (s:Summary {thread_id: t.id})
    WHERE s.level >= 1 AND s.first_seq IS NOT NULL AND s.partition = t.partition
    RETURN """
    + _SUMMARY_MAP
    + """ ORDER BY s.level, s.first_seq
} AS summaries
"""
)

COMPACTION_CANDIDATES: LiteralString = """
MATCH (t:Thread)
WHERE $partition IS NULL OR t.partition = $partition
WITH t, t.message_count - t.covered_count AS uncovered
WHERE uncovered >= $min_uncovered
RETURN t.id AS thread_id, t.partition AS partition, uncovered
ORDER BY uncovered DESC, t.updated_at, t.id
LIMIT $limit
"""


# -- maintenance: leases and cycle records ----------------------------------------------

#: Find or create the lease (the unique constraint makes concurrent MERGEs meet on one
#: node) and take its write lock before reading it, so the holder read is the last one
#: committed and stays ours to change until commit.
LEASE_LOCK: LiteralString = """
MERGE (l:Lease {name: $name})
ON CREATE SET l.holder = $holder, l.expires_at = $expires_at
SET l._lock = true
REMOVE l._lock
RETURN l.holder AS holder, l.expires_at AS expires_at
"""

LEASE_TAKE: LiteralString = """
MATCH (l:Lease {name: $name})
SET l.holder = $holder, l.expires_at = $expires_at
"""

#: A released lease stays as a node, expired since the epoch: deleting it could race a
#: concurrent taker that has just matched it.
LEASE_RELEASE: LiteralString = """
MATCH (l:Lease {name: $name})
WHERE l.holder = $holder
SET l.holder = null, l.expires_at = datetime({epochSeconds: 0})
"""

RECORD_CYCLE: LiteralString = """
MERGE (c:MaintenanceCycle {id: $props.id})
ON CREATE SET c += $props
"""

RECENT_CYCLES: LiteralString = """
MATCH (c:MaintenanceCycle)
WHERE c.started_at IS NOT NULL
RETURN properties(c) AS props
ORDER BY c.started_at DESC, c.finished_at DESC
LIMIT $limit
"""


# -- the fact layer: facts, EXTRACTED_FROM and SUPERSEDES, per-thread layer state ---------
# ``f`` is a Fact. A thread's layer lives on its node: ``facts_enabled`` (absent = off)
# and ``facts_seq`` (absent = -1), the last message seq extraction has read.

#: A fact as one map: its properties, its sources in thread order, its superseder.
_FACT_MAP: LiteralString = """{
    props: properties(f),
    sources: COLLECT { MATCH (f)-[:EXTRACTED_FROM]->(m:Message) RETURN m.id ORDER BY m.seq },
    superseded_by: COLLECT { MATCH (n:Fact)-[:SUPERSEDES]->(f) RETURN n.id }
}"""

FACT_SOURCE_MESSAGES: LiteralString = """
UNWIND $ids AS id
MATCH (m:Message {id: id})
RETURN properties(m) AS props
"""

#: Facts not stored yet, each with an EXTRACTED_FROM edge to each of its sources.
WRITE_FACTS: LiteralString = """
UNWIND $facts AS fact
OPTIONAL MATCH (existing:Fact {id: fact.props.id})
WITH fact WHERE existing IS NULL
CREATE (f:Fact)
SET f = fact.props
WITH f, fact
UNWIND fact.sources AS source
MATCH (m:Message {id: source})
CREATE (f)-[:EXTRACTED_FROM]->(m)
"""

GET_FACTS: LiteralString = (
    """
UNWIND $ids AS id
MATCH (f:Fact {id: id})
WHERE $partition IS NULL OR f.partition = $partition
RETURN """
    + _FACT_MAP
    + """ AS fact
"""
)

#: Take the old fact's write lock, so of two supersessions of it one sees the other.
SUPERSEDE_LOCK: LiteralString = """
MATCH (f:Fact {id: $old_id})
WHERE f.partition = $partition
SET f._lock = true
REMOVE f._lock
"""

SUPERSEDE_WRITE: LiteralString = """
MATCH (old:Fact {id: $old_id}), (new:Fact {id: $new_id})
SET old.valid_until = $at
CREATE (new)-[:SUPERSEDES]->(old)
"""

LIST_FACTS: LiteralString = (
    """
MATCH (f:Fact)
WHERE ($partition IS NULL OR f.partition = $partition)
    AND ($project IS NULL OR f.project = $project)
    AND ($subject IS NULL OR f.subject = $subject)
    AND ($thread_id IS NULL OR f.thread_id = $thread_id)
    AND (NOT $current_only OR f.valid_until IS NULL)
RETURN """
    + _FACT_MAP
    + """ AS fact
ORDER BY f.created_at DESC, f.id
LIMIT $limit
"""
)

FACT_STATS: LiteralString = """
MATCH (f:Fact)
WHERE ($partition IS NULL OR f.partition = $partition) AND ($thread_id IS NULL OR f.thread_id = $thread_id)
RETURN f.subject AS subject, f.kind AS kind, f.valid_until IS NULL AS current, count(*) AS n
"""

#: Facts that outlive a clear but were superseded by a cleared one become current again.
RESTORE_SUPERSEDED: LiteralString = """
MATCH (n:Fact)-[:SUPERSEDES]->(old:Fact)
WHERE n.partition = $partition AND ($thread_id IS NULL OR n.thread_id = $thread_id)
    AND NOT (old.partition = $partition AND ($thread_id IS NULL OR old.thread_id = $thread_id))
SET old.valid_until = null
"""

CLEAR_FACTS: LiteralString = """
MATCH (f:Fact)
WHERE f.partition = $partition AND ($thread_id IS NULL OR f.thread_id = $thread_id)
OPTIONAL MATCH (f)<-[:EMBEDS]-(vector:Embedding)
DETACH DELETE f, vector
RETURN count(DISTINCT f) AS deleted
"""

RESET_FACT_CURSORS: LiteralString = """
MATCH (t:Thread)
WHERE t.partition = $partition AND ($thread_id IS NULL OR t.id = $thread_id) AND t.facts_seq IS NOT NULL
SET t.facts_seq = -1
"""

_FACT_LAYER_RETURN: LiteralString = """
RETURN t.id AS thread_id, t.partition AS partition, coalesce(t.facts_enabled, true) AS enabled,
    coalesce(t.facts_seq, -1) AS extracted_seq, t.message_count AS message_count
"""

FACT_LAYER: LiteralString = _THREAD + _FACT_LAYER_RETURN

SET_FACT_LAYER: LiteralString = (
    _THREAD
    + """
SET t.facts_enabled = $enabled
"""
    + _FACT_LAYER_RETURN
)

ADVANCE_FACT_CURSOR: LiteralString = (
    _THREAD
    + """
SET t.facts_seq = CASE WHEN coalesce(t.facts_seq, -1) < $seq THEN $seq ELSE t.facts_seq END
"""
    + _FACT_LAYER_RETURN
)

FACT_LAYER_THREADS: LiteralString = (
    """
MATCH (t:Thread)
WHERE coalesce(t.facts_enabled, true) AND ($partition IS NULL OR t.partition = $partition)
"""
    + _FACT_LAYER_RETURN
    + """
ORDER BY t.updated_at DESC, t.id
LIMIT $limit
"""
)

# -- semantic search: (:Embedding)-[:EMBEDS]->(node) and the vector index ----------------
#
# A vector lives on its own Embedding node, not on the node it describes: a Message
# keeps exactly the properties it was written with, reads of messages never carry 384
# floats along, and one vector index over one label ranks messages, summaries and facts
# together. The Embedding node copies what search filters on (kind, partition, thread,
# time, model) so candidates are filtered without a hop.

VECTOR_INDEX_NAME = "memory_embedding"

VECTOR_INDEX_SIZE: LiteralString = """
SHOW VECTOR INDEXES YIELD name, options
WHERE name = $name
RETURN options.indexConfig.`vector.dimensions` AS dimensions
"""

CREATE_VECTOR_INDEX: LiteralString = """
CREATE VECTOR INDEX memory_embedding IF NOT EXISTS FOR (e:Embedding) ON e.vector
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine'}}
"""

DROP_VECTOR_INDEX: LiteralString = "DROP INDEX memory_embedding IF EXISTS"

AWAIT_VECTOR_INDEX: LiteralString = "CALL db.awaitIndex('memory_embedding', 300)"

ANY_EMBEDDING: LiteralString = "RETURN EXISTS { MATCH (:Embedding) } AS any"

#: Each described node's Embeddings replaced by one per vector given (its pieces, in order).
SET_EMBEDDINGS: LiteralString = """
UNWIND $rows AS row
CALL (row) {
    OPTIONAL MATCH (m:Message {id: row.id})
    OPTIONAL MATCH (s:Summary {id: row.id})
    OPTIONAL MATCH (f:Fact {id: row.id})
    RETURN coalesce(m, s, f) AS n
}
WITH row, n WHERE n IS NOT NULL
CALL (n) {
    OPTIONAL MATCH (n)<-[:EMBEDS]-(old:Embedding)
    DETACH DELETE old
}
WITH row, n
UNWIND range(0, size(row.vectors) - 1) AS piece
CREATE (e:Embedding {node_id: row.id, piece: piece})
SET e.kind = CASE WHEN n:Message THEN 'message' WHEN n:Summary THEN 'summary' ELSE 'fact' END,
    e.partition = n.partition, e.thread_id = n.thread_id, e.created_at = n.created_at, e.model = $model,
    e.pieces = size(row.vectors)
CREATE (e)-[:EMBEDS]->(n)
WITH e, row, piece
CALL db.create.setNodeVectorProperty(e, 'vector', row.vectors[piece])
RETURN count(DISTINCT row.id) AS written
"""


def _no_vector(text: LiteralString) -> LiteralString:
    """The filter for a label whose text is the property ``text``: no vector of the model yet.

    A node counts as embedded by a vector of the model, unless that vector is of a long
    text's head only (written before pieces: no ``pieces``).
    """
    return (
        """
    AND ($partition IS NULL OR n.partition = $partition)
    AND NOT EXISTS {
        MATCH (n)<-[:EMBEDS]-(e:Embedding)
        WHERE e.model = $model AND (e.pieces IS NOT NULL OR size(n."""
        + text
        + """) <= $piece_chars)
    }
"""
    )


def _missing(label: LiteralString, text: LiteralString) -> LiteralString:
    """Nodes of one label without a vector of ``$model``: by id from ``$after`` (the id index)."""
    return (
        "MATCH (n:"
        + label
        + ")\nWHERE n.id > $after"
        + _no_vector(text)
        + "RETURN n.id AS id, left(n."
        + text
        + ", $chars) AS text\nORDER BY n.id\nLIMIT $limit"
    )


def _missing_among(label: LiteralString, text: LiteralString) -> LiteralString:
    """The same among the ids ``$ids``."""
    return (
        "UNWIND $ids AS id\nMATCH (n:"
        + label
        + " {id: id})\nWHERE n.id > $after"
        + _no_vector(text)
        + "RETURN n.id AS id, left(n."
        + text
        + ", $chars) AS text\nORDER BY n.id\nLIMIT $limit"
    )


MISSING_EMBEDDINGS: dict[str, LiteralString] = {
    "message": _missing("Message", "content"),
    "summary": _missing("Summary", "text"),
    "fact": _missing("Fact", "text"),
}
MISSING_EMBEDDINGS_AMONG: dict[str, LiteralString] = {
    "message": _missing_among("Message", "content"),
    "summary": _missing_among("Summary", "text"),
    "fact": _missing_among("Fact", "text"),
}

_VECTOR_FILTERS: LiteralString = """
    e.model = $model AND e.kind IN $kinds
    AND ($partition IS NULL OR e.partition = $partition)
    AND ($thread_id IS NULL OR e.thread_id = $thread_id)
    AND ($since IS NULL OR e.created_at >= $since)
    AND ($until IS NULL OR e.created_at <= $until)
"""

#: Exact cosine (Neo4j's functions give (1 + cos) / 2; the index's own scores are of
#: quantized vectors), best first, ties by node id; each node once, by its best piece
#: (the best ``$limit`` nodes are among the best ``$limit * $max_pieces`` vectors); only
#: the best few are then joined to the node they describe, for what a hit shows.
_RANKED: LiteralString = """
WITH e, 2 * vector.similarity.cosine(e.vector, $vector) - 1 AS score
ORDER BY score DESC, e.node_id
LIMIT $limit * $max_pieces
WITH e.node_id AS node_id, max(score) AS score, collect(e)[0] AS e
ORDER BY score DESC, node_id
LIMIT $limit
MATCH (e)-[:EMBEDS]->(n)
"""
_HIT: LiteralString = """{id: n.id, kind: e.kind, thread_id: n.thread_id, partition: n.partition, score: score,
    text: left(coalesce(n.content, n.text), $chars),
    created_at: n.created_at.epochMillis * 1000 + n.created_at.microsecond % 1000,
    source_id: n.source_id, level: n.level, role: n.role, seq: n.seq, metadata: n.metadata}"""
_RANKED_HITS: LiteralString = _RANKED + "RETURN " + _HIT + " AS hit\n"

#: Approximate candidates from the index ($k of them), filtered, then ranked exactly;
#: ``candidates`` says whether the index had more to give, ``passed`` how many of them
#: the filters kept (so the next search knows how many to ask for).
VECTOR_SEARCH: LiteralString = (
    """
CALL db.index.vector.queryNodes('memory_embedding', $k, $vector) YIELD node
WITH collect(node) AS found
WITH found, [e IN found WHERE """
    + _VECTOR_FILTERS
    + """] AS kept
RETURN size(found) AS candidates, size(kept) AS passed, COLLECT {
    UNWIND kept AS e
"""
    + _RANKED
    + "RETURN "
    + _HIT
    + """
} AS hits
"""
)

#: Every vector of one thread, ranked exactly (a thread is small; the index is not needed).
VECTOR_SEARCH_THREAD: LiteralString = (
    """
MATCH (e:Embedding {thread_id: $thread_id})
WHERE """
    + _VECTOR_FILTERS
    + _RANKED_HITS
)

#: Every vector of one partition ranked exactly: when the index's candidates were too few.
VECTOR_SEARCH_PARTITION: LiteralString = (
    """
MATCH (e:Embedding {partition: $partition})
WHERE """
    + _VECTOR_FILTERS
    + _RANKED_HITS
)

#: Every vector ranked exactly (partition None, and the index's candidates too few).
VECTOR_SEARCH_ALL: LiteralString = (
    """
MATCH (e:Embedding)
WHERE """
    + _VECTOR_FILTERS
    + _RANKED_HITS
)

# -- hybrid search: candidate positions and metadata, never content ----------------------

#: Thread, seq, role and metadata of each id, by the unique id index; content stays put.
#: One record of lists, not one record per id: hundreds of small records cost more to
#: stream than to find.
MESSAGE_REFS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Message {id: id})
WHERE $partition IS NULL OR m.partition = $partition
RETURN collect([m.id, m.thread_id, m.partition, m.seq, m.role, m.metadata, left(m.content, $opening)]) AS refs
"""

# -- transfer: records written exactly as another store held them -------------------------

#: Create the thread as given if missing, take its write lock, and read its counters and
#: which of the batch's message ids are already stored.
RESTORE_THREAD_LOCK: LiteralString = """
MERGE (t:Thread {partition: $partition, id: $thread_id})
ON CREATE SET t.project = $project, t.created_at = $created_at,
    t.updated_at = $updated_at, t.last_seq = -1, t.message_count = 0, t.covered_count = 0, t.tokens = 0
SET t._lock = true
REMOVE t._lock
RETURN t.message_count AS message_count, t.last_seq AS last_seq,
    t.updated_at AS updated_at,
    COLLECT { UNWIND $ids AS id MATCH (m:Message {id: id}) RETURN m.id } AS existing
"""

STORED_SUMMARY_IDS: LiteralString = """
UNWIND $ids AS id
MATCH (s:Summary {id: id})
RETURN collect(s.id) AS ids
"""

STORED_FACT_IDS: LiteralString = """
UNWIND $ids AS id
MATCH (f:Fact {id: id})
RETURN collect(f.id) AS ids
"""

#: Source messages of restored facts, with their partition, to check before writing.
SOURCE_PARTITIONS: LiteralString = """
UNWIND $ids AS id
MATCH (m:Message {id: id})
RETURN m.id AS id, m.partition AS partition
"""

#: SUPERSEDES edges of restored facts whose both ends are stored; one edge at most.
RESTORE_SUPERSEDES: LiteralString = """
UNWIND $pairs AS pair
MATCH (new:Fact {id: pair.new_id}), (old:Fact {id: pair.old_id})
WHERE NOT EXISTS { MATCH (:Fact)-[:SUPERSEDES]->(old) }
CREATE (new)-[:SUPERSEDES]->(old)
"""

#: A node's pieces in order (a vector written before pieces has none: it is piece 0).
READ_EMBEDDINGS: LiteralString = """
UNWIND $ids AS id
CALL (id) {
    MATCH (e:Embedding {node_id: id})
    RETURN e ORDER BY coalesce(e.piece, 0)
}
RETURN e.node_id AS node_id, e.model AS model, e.vector AS vector
"""

# -- archiving: runs of messages moved to archive files, and back -----------------------
#
# An archived message keeps a stub: its node, relabelled ArchivedMessage and stripped to
# id, partition, thread and seq, so the SUMMARIZES and NEXT edges around it stay (a
# summary's child ids still read back) and no read or index that asks for :Message
# sees it. Its Embedding goes.

#: Take the thread's lock; how many messages of the run are live, and how many covered.
ARCHIVE_RUN_STATE: LiteralString = """
MATCH (t:Thread {id: $thread_id})
WHERE t.partition = $partition
SET t._lock = true
REMOVE t._lock
RETURN COUNT {
        MATCH (m:Message {partition: $partition, thread_id: $thread_id}) WHERE $first_seq <= m.seq <= $last_seq
    } AS live,
    COUNT {
        MATCH (m:Message {partition: $partition, thread_id: $thread_id})
        WHERE $first_seq <= m.seq <= $last_seq AND EXISTS { (:Summary)-[:SUMMARIZES]->(m) }
    } AS covered
"""

ARCHIVE_WRITE: LiteralString = """
MATCH (m:Message {partition: $partition, thread_id: $thread_id})
WHERE $first_seq <= m.seq <= $last_seq
CALL (m) {
    OPTIONAL MATCH (m)<-[:EMBEDS]-(e:Embedding)
    DETACH DELETE e
}
REMOVE m:Message
SET m:ArchivedMessage
SET m = {id: m.id, partition: m.partition, thread_id: m.thread_id, seq: m.seq}
WITH count(m) AS archived
CREATE (a:ArchivedRange)
SET a = $record
RETURN archived
"""

ARCHIVED_RANGES: LiteralString = """
MATCH (a:ArchivedRange)
WHERE ($partition IS NULL OR a.partition = $partition) AND ($thread_id IS NULL OR a.thread_id = $thread_id)
RETURN properties(a) AS props
ORDER BY a.partition, a.thread_id, a.first_seq
"""

#: The archived run a seq range reaches into, if any (expanding a summary over it).
ARCHIVED_OVERLAP: LiteralString = """
MATCH (a:ArchivedRange {partition: $partition, thread_id: $thread_id})
WHERE a.first_seq <= $last_seq AND a.last_seq >= $first_seq
RETURN a.path AS path
ORDER BY a.first_seq
LIMIT 1
"""

#: The run's record, under the thread's lock, and its stubs brought back to messages.
UNARCHIVE_WRITE: LiteralString = """
MATCH (t:Thread {id: $thread_id})
WHERE t.partition = $partition
SET t._lock = true
REMOVE t._lock
WITH t
MATCH (a:ArchivedRange {partition: $partition, thread_id: $thread_id, first_seq: $first_seq, last_seq: $last_seq})
DELETE a
WITH DISTINCT t
UNWIND $rows AS row
MATCH (m:ArchivedMessage {id: row.id})
WHERE m.partition = $partition AND m.thread_id = $thread_id AND m.seq = row.seq
WITH m, row, (row.created_at % 1000000 + 1000000) % 1000000 AS micros
REMOVE m:ArchivedMessage
SET m:Message
SET m = row, m.created_at = datetime({epochSeconds: (row.created_at - micros) / 1000000, nanosecond: micros * 1000})
RETURN count(m) AS restored
"""

ARCHIVED_TOTALS: LiteralString = """
MATCH (a:ArchivedRange)
WHERE $partition IS NULL OR a.partition = $partition
RETURN count(a) AS runs, coalesce(sum(a.last_seq - a.first_seq + 1), 0) AS messages
"""

# -- hooks: read positions ----------------------------------------------------------------

READ_POSITIONS: LiteralString = """
MATCH (p:ReadPosition {partition: $partition, thread_id: $thread_id})
RETURN p.path AS path, p.offset AS offset, p.line AS line, p.fingerprint AS fingerprint
ORDER BY path
"""

SAVE_READ_POSITIONS: LiteralString = """
UNWIND $positions AS position
MERGE (p:ReadPosition {partition: $partition, thread_id: $thread_id, path: position.path})
SET p.offset = position.offset, p.line = position.line, p.fingerprint = position.fingerprint
"""

# -- session readings: what a model made of a thread, one node a thread ------------------

SESSION_READING: LiteralString = """
MATCH (r:SessionReading {partition: $partition, thread_id: $thread_id})
RETURN properties(r) AS props
"""

SAVE_SESSION_READING: LiteralString = """
MERGE (r:SessionReading {partition: $props.partition, thread_id: $props.thread_id})
SET r += $props
"""

#: Whether a one-time data migration has run on this store.
MIGRATION_DONE: LiteralString = """
OPTIONAL MATCH (g:StoreMigration {name: $name})
RETURN g.done_at IS NOT NULL AS done
"""

#: The migration's node, locked (so two processes opening the store at once migrate once).
MIGRATION_LOCK: LiteralString = """
MERGE (g:StoreMigration {name: $name})
SET g._lock = true
REMOVE g._lock
RETURN g.done_at IS NOT NULL AS done
"""

MIGRATION_RECORD: LiteralString = """
MATCH (g:StoreMigration {name: $name})
SET g.done_at = datetime()
"""

#: Messages whose metadata still holds the read positions older hooks kept there.
CURSOR_MESSAGES: LiteralString = """
MATCH (m:Message)
WHERE m.metadata CONTAINS '"hook_cursor"'
RETURN m.id AS id, m.partition AS partition, m.thread_id AS thread_id, m.metadata AS metadata
ORDER BY partition, thread_id, m.seq
"""

SET_MESSAGE_METADATA: LiteralString = """
UNWIND $rows AS row
MATCH (m:Message {id: row.id})
SET m.metadata = row.metadata
"""

# -- derived search text of tool messages (``derived``) -----------------------------------

#: Tool messages (results, and calls: an assistant message with a tool_call_id) whose
#: search_text is not written yet, by id from ``$after`` (the id index, in order).
MISSING_SEARCH_TEXTS: LiteralString = (
    """
MATCH (m:Message)
WHERE m.id > $after AND m.search_text IS NULL
  AND (m.role = 'tool' OR (m.role = 'assistant' AND m.tool_call_id IS NOT NULL))
  AND ($partition IS NULL OR m.partition = $partition)
WITH m ORDER BY m.id LIMIT $limit
RETURN """
    + _MESSAGE_PROPS
    + """ AS message
"""
)
#: Write each message's search_text where none is (the full-text index follows), and
#: delete the vector it had: made before the text existed, from the raw content.
SET_SEARCH_TEXTS: LiteralString = """
UNWIND $items AS item
MATCH (m:Message {id: item.id})
WHERE m.search_text IS NULL
SET m.search_text = item.text
WITH m
CALL (m) {
    OPTIONAL MATCH (m)<-[:EMBEDS]-(e:Embedding)
    DETACH DELETE e
}
RETURN count(m) AS written
"""
