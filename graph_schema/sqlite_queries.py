"""The SQL of the SQLite backend: every statement as a module constant, parameters only.

Kept apart from ``sqlite.py`` (as the Cypher of the Neo4j backend is kept in
``neo4j_queries.py``) so the backend reads as domain steps and the statements can be
read, and reviewed, in one place. No statement is ever built from caller input: the
only text that varies, a full-text query, is built by ``fts_query`` from quoted words.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
#: Words of a search query beyond this many are ignored (a pasted log is not a query).
_MAX_QUERY_WORDS = 64

MESSAGE_COLUMNS = (
    "id, source_id, thread_id, partition, project, seq, role, content, sha256, tokens, "
    "created_at, tool_call_id, metadata"
)
SUMMARY_COLUMNS = (
    "id, thread_id, partition, level, text, tokens, source_tokens, first_seq, last_seq, "
    "earliest_at, latest_at, message_count, digest, summarizer, created_at"
)
IN_IDS = "(SELECT value FROM json_each(:ids))"

THREAD = """
SELECT id, partition, project, created_at, updated_at, message_count, covered_count
FROM threads WHERE id = :thread_id AND (:partition IS NULL OR partition = :partition)
"""
INSERT_THREAD = """
INSERT INTO threads (id, partition, project, created_at, updated_at)
VALUES (:thread_id, :partition, :project, :now, :now)
"""
INSERT_MESSAGE = f"""
INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
GROW_THREAD = """
UPDATE threads SET message_count = message_count + :added, tokens = tokens + :tokens,
    updated_at = :now, project = COALESCE(project, :project)
WHERE id = :thread_id
"""
EXISTING_MESSAGE_IDS = f"SELECT id FROM messages WHERE id IN {IN_IDS}"
MESSAGES_IN_RANGE = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE thread_id = :thread_id AND seq BETWEEN :first_seq AND :last_seq
ORDER BY seq LIMIT :limit
"""
MESSAGE_BY_ID = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE id = :id AND (:partition IS NULL OR partition = :partition)
"""
UNCOVERED_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages AS m
WHERE thread_id = :thread_id AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = m.id)
ORDER BY seq LIMIT :limit
"""
CHILD_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE id IN {IN_IDS} AND thread_id = :thread_id AND partition = :partition
"""
CHILD_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries
WHERE id IN {IN_IDS} AND thread_id = :thread_id AND partition = :partition
"""
ALREADY_COVERED = f"SELECT child_id, parent_id FROM summarizes WHERE child_id IN {IN_IDS}"
INSERT_SUMMARY = f"""
INSERT INTO summaries ({SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_EDGE = "INSERT INTO summarizes (parent_id, child_id, position) VALUES (?, ?, ?)"
COVER_MESSAGES = "UPDATE threads SET covered_count = covered_count + :covered WHERE id = :thread_id"
SUMMARY_BY_ID = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries
WHERE id = :id AND (:partition IS NULL OR partition = :partition)
"""
SUMMARIES_BY_IDS = f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id IN {IN_IDS}"
THREAD_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries WHERE thread_id = :thread_id ORDER BY level, first_seq
"""
UNCOVERED_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries AS s
WHERE thread_id = :thread_id AND partition = :partition AND level = :level
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = s.id)
ORDER BY first_seq
"""
CHILDREN = f"""
SELECT parent_id, child_id FROM summarizes WHERE parent_id IN {IN_IDS} ORDER BY parent_id, position
"""
PARENTS = f"SELECT child_id, parent_id FROM summarizes WHERE child_id IN {IN_IDS}"
# Descendants of a summary `depth` SUMMARIZES edges down, in thread order.
DESCENDANTS = """
WITH RECURSIVE walk (id, depth) AS (
    SELECT child_id, 1 FROM summarizes WHERE parent_id = :id
    UNION ALL
    SELECT e.child_id, w.depth + 1 FROM walk AS w JOIN summarizes AS e ON e.parent_id = w.id
    WHERE w.depth < :depth
)
SELECT s.id FROM walk AS w JOIN summaries AS s ON s.id = w.id
WHERE w.depth = :depth ORDER BY s.first_seq
"""
# The chain of summaries above each node, lowest level first.
ANCESTORS = f"""
WITH RECURSIVE up (origin, id, depth) AS (
    SELECT child_id, parent_id, 1 FROM summarizes WHERE child_id IN {IN_IDS}
    UNION ALL
    SELECT up.origin, e.parent_id, up.depth + 1 FROM up JOIN summarizes AS e ON e.child_id = up.id
)
SELECT origin, id FROM up ORDER BY origin, depth
"""
TOP_SUMMARIES = """
SELECT id, level, first_seq, last_seq, tokens FROM summaries AS s
WHERE thread_id = :thread_id AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = s.id)
"""
UNCOVERED_SPANS = """
SELECT id, seq, tokens FROM messages AS m
WHERE thread_id = :thread_id AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = m.id)
"""
SUMMARY_EDGES = """
SELECT e.parent_id, e.child_id, e.position FROM summarizes AS e
JOIN summaries AS p ON p.id = e.parent_id
WHERE p.thread_id = :thread_id AND p.level > 1 ORDER BY p.level, p.first_seq, e.position
"""
CANDIDATES = """
SELECT id, partition, message_count - covered_count AS uncovered FROM threads
WHERE (:partition IS NULL OR partition = :partition) AND message_count - covered_count >= :minimum
ORDER BY uncovered DESC, updated_at LIMIT :limit
"""
LIST_THREADS = """
SELECT id, partition, project, created_at, updated_at, message_count FROM threads
WHERE :partition IS NULL OR partition = :partition ORDER BY updated_at DESC, id LIMIT :limit
"""
THREAD_TOTALS = """
SELECT count(*), coalesce(sum(message_count), 0), coalesce(sum(tokens), 0) FROM threads
WHERE :partition IS NULL OR partition = :partition
"""
SUMMARY_LEVELS = """
SELECT level, count(*) FROM summaries WHERE :partition IS NULL OR partition = :partition
GROUP BY level ORDER BY level
"""
FACT_COUNT = "SELECT count(*) FROM facts WHERE :partition IS NULL OR partition = :partition"

# Full-text search, one query per kind, filtered on each node's created_at as the
# Neo4j backend does. Snippets are plain text windows around the matched words.
SEARCH_FILTERS = """
  AND (:partition IS NULL OR n.partition = :partition)
  AND (:thread_id IS NULL OR n.thread_id = :thread_id)
"""
SEARCH_MESSAGES = f"""
SELECT n.id, n.source_id, n.thread_id, n.partition, n.role, NULL AS level, n.created_at,
       snippet(messages_fts, 0, '', '', '…', 40) AS snippet, -bm25(messages_fts) AS score
FROM messages_fts JOIN messages AS n ON n.pk = messages_fts.rowid
WHERE messages_fts MATCH :query {SEARCH_FILTERS}
  AND (:since IS NULL OR n.created_at >= :since) AND (:until IS NULL OR n.created_at <= :until)
ORDER BY bm25(messages_fts) LIMIT :limit
"""
SEARCH_SUMMARIES = f"""
SELECT n.id, NULL AS source_id, n.thread_id, n.partition, NULL AS role, n.level, n.created_at,
       snippet(summaries_fts, 0, '', '', '…', 40) AS snippet, -bm25(summaries_fts) AS score
FROM summaries_fts JOIN summaries AS n ON n.pk = summaries_fts.rowid
WHERE summaries_fts MATCH :query {SEARCH_FILTERS}
  AND (:since IS NULL OR n.created_at >= :since) AND (:until IS NULL OR n.created_at <= :until)
ORDER BY bm25(summaries_fts) LIMIT :limit
"""
SEARCH_FACTS = """
SELECT n.id, NULL AS source_id, NULL AS thread_id, n.partition, NULL AS role, NULL AS level,
       n.created_at, snippet(facts_fts, 0, '', '', '…', 40) AS snippet, -bm25(facts_fts) AS score
FROM facts_fts JOIN facts AS n ON n.pk = facts_fts.rowid
WHERE facts_fts MATCH :query
  AND (:partition IS NULL OR n.partition = :partition)
  AND (:thread_id IS NULL OR EXISTS (
      SELECT 1 FROM fact_sources AS fs JOIN messages AS m ON m.id = fs.message_id
      WHERE fs.fact_id = n.id AND m.thread_id = :thread_id))
  AND (:since IS NULL OR n.created_at >= :since) AND (:until IS NULL OR n.created_at <= :until)
ORDER BY bm25(facts_fts) LIMIT :limit
"""
SEARCHES: dict[str, str] = {
    "message": SEARCH_MESSAGES,
    "summary": SEARCH_SUMMARIES,
    "fact": SEARCH_FACTS,
}


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for any user string: its words, each quoted, OR-ed together.

    Quoting every ``\\w+`` word turns FTS5 syntax (``AND``, ``*``, ``:``, ``"``,
    brackets) into plain words, so no user string can raise a syntax error.

    Returns:
        The query, or ``None`` when the text has no word characters (no hits).
    """
    words = list(dict.fromkeys(_WORD.findall(text)))[:_MAX_QUERY_WORDS]
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)
