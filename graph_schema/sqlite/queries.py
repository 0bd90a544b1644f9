"""The SQL of the SQLite backend: every statement as a module constant, parameters only.

Kept apart from the feature modules (as the Cypher of the Neo4j backend is kept in
``neo4j/queries.py``) so the backend reads as domain steps and the statements can be
read, and reviewed, in one place. No statement is ever built from caller input: the
only text that varies, a full-text query, is built by ``fts_query`` from quoted words.
"""

from __future__ import annotations

from palimpsest.graph_schema import identity
from palimpsest.graph_schema.models import EMBED_PIECE_CHARS

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
ORDER BY partition LIMIT 2
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
    secrets_redacted = secrets_redacted + :secrets, updated_at = :now, project = COALESCE(project, :project)
WHERE partition = :partition AND id = :thread_id
"""
#: The stored ids of a batch's caller ids already in the thread: a repeat is found by
#: (thread, caller id), whatever id scheme stored it (see ``identity``).
EXISTING_MESSAGE_IDS = f"""
SELECT source_id, id FROM messages
WHERE thread_id = :thread_id AND partition = :partition AND source_id IN {IN_IDS}
"""
MESSAGES_IN_RANGE = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE partition = :partition AND thread_id = :thread_id AND seq BETWEEN :first_seq AND :last_seq
ORDER BY seq LIMIT :limit
"""
MESSAGE_BY_ID = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE id = :id AND (:partition IS NULL OR partition = :partition)
"""
UNCOVERED_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages AS m
WHERE partition = :partition AND thread_id = :thread_id AND seq >= :floor
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = m.id)
ORDER BY seq LIMIT :limit
"""
# Children by id: the unary ``+`` keeps the planner off the (thread_id, ...) indexes,
# which would read the whole thread on every summary write (quadratic on long threads).
CHILD_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM messages
WHERE id IN {IN_IDS} AND +thread_id = :thread_id AND +partition = :partition
"""
CHILD_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries
WHERE id IN {IN_IDS} AND +thread_id = :thread_id AND +partition = :partition
"""
ALREADY_COVERED = f"SELECT child_id, parent_id FROM summarizes WHERE child_id IN {IN_IDS}"
INSERT_SUMMARY = f"""
INSERT INTO summaries ({SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_EDGE = "INSERT INTO summarizes (parent_id, child_id, position) VALUES (?, ?, ?)"
COVER_MESSAGES = """
UPDATE threads SET covered_count = covered_count + :covered WHERE partition = :partition AND id = :thread_id
"""
SUMMARY_BY_ID = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries
WHERE id = :id AND (:partition IS NULL OR partition = :partition)
"""
SUMMARIES_BY_IDS = f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id IN {IN_IDS}"
SUMMARIES_IN_PARTITION = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id IN {IN_IDS} AND (:partition IS NULL OR partition = :partition)
"""
THREAD_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries WHERE partition = :partition AND thread_id = :thread_id
ORDER BY level, first_seq
"""
UNCOVERED_SUMMARIES = f"""
SELECT {SUMMARY_COLUMNS} FROM summaries AS s
WHERE partition = :partition AND thread_id = :thread_id AND level = :level AND first_seq >= :floor
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
COVERED_FLOORS = "SELECT level, floor FROM covered_floors WHERE partition = :partition AND thread_id = :thread_id"
SET_COVERED_FLOOR = """
INSERT INTO covered_floors (partition, thread_id, level, floor) VALUES (:partition, :thread_id, :level, :floor)
ON CONFLICT (partition, thread_id, level) DO UPDATE SET floor = excluded.floor
"""
#: The first message no summary covers from a floor up (messages' (thread, seq) key serves it).
FIRST_UNCOVERED_MESSAGE = """
SELECT seq FROM messages AS m
WHERE partition = :partition AND thread_id = :thread_id AND seq >= :floor
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = m.id)
ORDER BY seq LIMIT 1
"""
#: The first summary of a level with no parent from a floor up (``summaries_by_thread``).
FIRST_PARENTLESS_SUMMARY = """
SELECT first_seq FROM summaries AS s
WHERE partition = :partition AND thread_id = :thread_id AND level = :level AND first_seq >= :floor
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = s.id)
ORDER BY first_seq LIMIT 1
"""
#: Just past the last summary of a level.
LEVEL_END = """
SELECT last_seq + 1 FROM summaries WHERE partition = :partition AND thread_id = :thread_id AND level = :level
ORDER BY first_seq DESC LIMIT 1
"""
NEXT_SEQ = "SELECT message_count FROM threads WHERE partition = :partition AND id = :thread_id"
TOP_LEVEL = "SELECT coalesce(max(level), 0) FROM summaries WHERE partition = :partition AND thread_id = :thread_id"
#: Summaries of one level no summary covers, from the level's covered floor up.
TOP_SUMMARIES = """
SELECT id, level, first_seq, last_seq, tokens FROM summaries AS s
WHERE partition = :partition AND thread_id = :thread_id AND level = :level AND first_seq >= :floor
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = s.id)
"""
#: Messages no summary covers, from the thread's covered floor up (`COVERED_FLOOR`).
UNCOVERED_SPANS = """
SELECT id, seq, tokens FROM messages AS m
WHERE partition = :partition AND thread_id = :thread_id AND seq >= :floor
  AND NOT EXISTS (SELECT 1 FROM summarizes WHERE child_id = m.id)
"""
SUMMARY_EDGES = """
SELECT e.parent_id, e.child_id, e.position FROM summarizes AS e
JOIN summaries AS p ON p.id = e.parent_id
WHERE p.partition = :partition AND p.thread_id = :thread_id AND p.level > 1 ORDER BY p.level, p.first_seq, e.position
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
SELECT count(*), coalesce(sum(message_count), 0), coalesce(sum(tokens), 0), coalesce(sum(secrets_redacted), 0)
FROM threads
WHERE :partition IS NULL OR partition = :partition
"""
PARTITIONS = "SELECT partition, count(*) FROM threads GROUP BY partition ORDER BY partition"
SUMMARY_LEVELS = """
SELECT level, count(*) FROM summaries WHERE :partition IS NULL OR partition = :partition
GROUP BY level ORDER BY level
"""
FACT_COUNT = "SELECT count(*) FROM facts WHERE :partition IS NULL OR partition = :partition"

# Full-text search, one query per kind, filtered on each node's created_at as the
# Neo4j backend does. FTS5 can only rank by bm25 by scoring every matching row, which
# at a million messages and a common word is most of a second; walking the index newest
# first and stopping is cheap. So each query scores at most the newest ``:candidates``
# rows that match and pass the filters, ranks those and returns the ``:limit`` best with
# their text. Snippets are not built here: FTS5's ``snippet()`` needs the row matched
# again (a second MATCH per returned row: 33 ms against 9 ms for 200 rows at a million
# messages), so the store builds them for the hits it finally keeps (``SNIPPET_TABLE``).
_SEARCH_FILTERS = """
  AND (:partition IS NULL OR n.partition = :partition)
  AND (:thread_id IS NULL OR n.thread_id = :thread_id)
"""
_TIME_FILTERS = """
  AND (:since IS NULL OR n.created_at >= :since) AND (:until IS NULL OR n.created_at <= :until)
"""
_FACT_FILTERS = """
  AND (:partition IS NULL OR n.partition = :partition)
  AND (:thread_id IS NULL OR EXISTS (
      SELECT 1 FROM fact_sources AS fs JOIN messages AS m ON m.id = fs.message_id
      WHERE fs.fact_id = n.id AND m.thread_id = :thread_id))
"""


def _ranked_search(fts: str, table: str, columns: str, filters: str, derived: str = "NULL") -> str:
    """Search ``fts``: the newest ``:candidates`` matches ranked by bm25, ``:limit`` returned.

    ``columns`` ends with the indexed text, from which the caller builds snippets; after
    the score comes ``derived``, a message's search_text, the snippet's source when the
    query matched only there; last, how many matches were ranked (``:candidates`` when
    the cap cut some off), from a window over rows the ranking holds anyway.
    """
    return f"""
WITH ranked AS (
    SELECT pk, score, count(*) OVER () AS ranked_rows FROM (
        SELECT n.pk, -bm25({fts}) AS score
        FROM {fts} JOIN {table} AS n ON n.pk = {fts}.rowid
        WHERE {fts} MATCH :query {filters}
        ORDER BY {fts}.rowid DESC LIMIT :candidates
    ) ORDER BY score DESC, pk DESC LIMIT :limit
)
SELECT {columns}, ranked.score, {derived}, ranked.ranked_rows
FROM ranked JOIN {table} AS n ON n.pk = ranked.pk
ORDER BY ranked.score DESC, ranked.pk DESC
"""


SEARCH_MESSAGES = _ranked_search(
    "messages_fts", "messages", "n.id, n.source_id, n.thread_id, n.partition, n.role, NULL, n.created_at, n.content",
    _SEARCH_FILTERS + _TIME_FILTERS, "n.search_text",
)  # fmt: skip
SEARCH_SUMMARIES = _ranked_search(
    "summaries_fts", "summaries", "n.id, NULL, n.thread_id, n.partition, NULL, n.level, n.created_at, n.text",
    _SEARCH_FILTERS + _TIME_FILTERS,
)  # fmt: skip
SEARCH_FACTS = _ranked_search(
    "facts_fts", "facts", "n.id, NULL, n.thread_id, n.partition, NULL, NULL, n.created_at, n.text",
    _FACT_FILTERS + _TIME_FILTERS,
)  # fmt: skip
#: Rows each full-text query ranks at most (or the hits asked for, if more): the newest
#: that match. Every match is ranked while a query has fewer; past it, bm25 orders the
#: newest this many. A search past the cap runs two such queries (any word, all words), so
#: 1000 rather than 2000 keeps text p95 where one query at 2000 was (bench/search_speed.py
#: at 100k: 26 ms against 46 ms at 2000); LoCoMo conversations (under 700 messages) are
#: ranked exactly either way.
MATCH_CANDIDATES = 1000
SEARCHES: dict[str, str] = {
    "message": SEARCH_MESSAGES,
    "summary": SEARCH_SUMMARIES,
    "fact": SEARCH_FACTS,
}

#: The texts a deferred snippet is built from (``text_snippets``), by kind: the indexed
#: text, then a message's derived search text.
SNIPPET_SOURCES: dict[str, str] = {
    "message": f"SELECT id, content, search_text FROM messages WHERE id IN {IN_IDS}",
    "summary": f"SELECT id, text, NULL FROM summaries WHERE id IN {IN_IDS}",
    "fact": f"SELECT id, text, NULL FROM facts WHERE id IN {IN_IDS}",
}

# Snippets for the hits a search keeps, built by FTS5 itself in a private in-memory
# database (``snippets``): the kept hits' texts are indexed there with the stores'
# tokenizer (schema.sql; a test holds the two equal) and ``snippet()`` reads the same
# matched words as it would in the store, for a millisecond or two rather than a second
# MATCH per hit in the store's large index.
SNIPPET_TABLE = """
CREATE VIRTUAL TABLE kept USING fts5 (text, tokenize = 'porter unicode61 remove_diacritics 2')
"""
SNIPPET_INSERT = "INSERT INTO kept (rowid, text) VALUES (?, ?)"
#: Characters of a text shown when no snippet could be built for it.
SNIPPET_FALLBACK_CHARS = 240
#: About 40 tokens around the best cluster of matched words, '…' where the text is cut.
SNIPPETS = """
SELECT rowid, snippet(kept, 0, '', '', '…', 40) FROM kept
WHERE kept MATCH :query AND rowid IN (SELECT value FROM json_each(:rowids))
"""


def fts_query(text: str, *, require_all: bool = False) -> str | None:
    """A safe FTS5 query for any user string: its words, each quoted, OR-ed or AND-ed.

    Quoting every ``\\w+`` word turns FTS5 syntax (``AND``, ``*``, ``:``, ``"``,
    brackets) into plain words, so no user string can raise a syntax error.

    Args:
        text: The user's query.
        require_all: Match only rows holding every word (FTS5's implicit AND of the
            quoted words) instead of rows holding any of them.

    Returns:
        The query, or ``None`` when the text has no word characters (no hits).
    """
    words = query_words(text)
    if not words:
        return None
    return (" " if require_all else " OR ").join(f'"{word}"' for word in words)


# -- maintenance: leases and cycle records ----------------------------------------------

#: Take a lease that is free, expired or already ours, in one statement: the upsert's
#: WHERE leaves another holder's live lease untouched, and ``changes()`` says who won.
ACQUIRE_LEASE = """
INSERT INTO leases (name, holder, expires_at) VALUES (:name, :holder, :expires_at)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE leases.holder = excluded.holder OR leases.expires_at <= :now
"""
RELEASE_LEASE = "DELETE FROM leases WHERE name = :name AND holder = :holder"
INSERT_CYCLE = """
INSERT INTO maintenance_cycles
    (id, job, holder, started_at, finished_at, threads, summaries, facts, steps, errors)
VALUES (:id, :job, :holder, :started_at, :finished_at, :threads, :summaries, :facts, :steps, :errors)
ON CONFLICT (id) DO NOTHING
"""
RECENT_CYCLES = """
SELECT id, job, holder, started_at, finished_at, threads, summaries, facts, steps, errors
FROM maintenance_cycles ORDER BY started_at DESC, pk DESC LIMIT :limit
"""


# -- the fact layer: facts, their sources and supersession, per-thread layer state -------

FACT_COLUMNS = "f.id, f.partition, f.project, f.text, f.kind, f.subject, f.thread_id, f.created_at, f.valid_until"
#: Facts' columns, plus the newer fact that superseded each one.
_FACT_SELECT = f"""
SELECT {FACT_COLUMNS},
       (SELECT s.fact_id FROM fact_supersedes AS s WHERE s.superseded_id = f.id) AS superseded_by
FROM facts AS f
"""
FACT_SOURCE_MESSAGES = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN {IN_IDS}"
INSERT_FACT = """
INSERT INTO facts (id, partition, project, text, kind, subject, thread_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING
"""
INSERT_FACT_SOURCE = "INSERT INTO fact_sources (fact_id, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
FACTS_BY_IDS = (
    _FACT_SELECT
    + f"""
WHERE f.id IN {IN_IDS} AND (:partition IS NULL OR f.partition = :partition)
"""
)
#: Each fact's sources in thread order (EXTRACTED_FROM edges).
FACT_SOURCES = f"""
SELECT fs.fact_id, fs.message_id FROM fact_sources AS fs JOIN messages AS m ON m.id = fs.message_id
WHERE fs.fact_id IN {IN_IDS} ORDER BY fs.fact_id, m.seq
"""
LIST_FACTS = (
    _FACT_SELECT
    + """
WHERE (:partition IS NULL OR f.partition = :partition)
  AND (:project IS NULL OR f.project = :project)
  AND (:subject IS NULL OR f.subject = :subject)
  AND (:thread_id IS NULL OR f.thread_id = :thread_id)
  AND (:current_only = 0 OR f.valid_until IS NULL)
ORDER BY f.created_at DESC, f.id LIMIT :limit
"""
)
SUPERSEDE_FACT = "UPDATE facts SET valid_until = :at WHERE id = :old_id"
INSERT_SUPERSEDES = "INSERT INTO fact_supersedes (fact_id, superseded_id) VALUES (:new_id, :old_id)"
FACT_STATS = """
SELECT subject, kind, valid_until IS NULL AS current, count(*) FROM facts
WHERE (:partition IS NULL OR partition = :partition) AND (:thread_id IS NULL OR thread_id = :thread_id)
GROUP BY subject, kind, current
"""
#: The facts ``clear_facts`` deletes: a partition's, or one thread's of it.
_CLEARED = "SELECT id FROM facts WHERE partition = :partition AND (:thread_id IS NULL OR thread_id = :thread_id)"
#: Facts that outlive the clear but were superseded by a cleared one become current again.
RESTORE_SUPERSEDED = f"""
UPDATE facts SET valid_until = NULL
WHERE id IN (SELECT superseded_id FROM fact_supersedes WHERE fact_id IN ({_CLEARED}))
  AND id NOT IN ({_CLEARED})
"""
DELETE_SUPERSEDES = f"""
DELETE FROM fact_supersedes WHERE fact_id IN ({_CLEARED}) OR superseded_id IN ({_CLEARED})
"""
DELETE_FACTS = "DELETE FROM facts WHERE partition = :partition AND (:thread_id IS NULL OR thread_id = :thread_id)"
RESET_FACT_CURSORS = """
UPDATE fact_layer SET extracted_seq = -1
WHERE partition = :partition AND (:thread_id IS NULL OR thread_id = :thread_id)
"""
FACT_LAYER = """
SELECT t.id AS thread_id, t.partition, coalesce(l.enabled, 1) AS enabled,
       coalesce(l.extracted_seq, -1) AS extracted_seq, t.message_count
FROM threads AS t LEFT JOIN fact_layer AS l ON l.partition = t.partition AND l.thread_id = t.id
WHERE t.id = :thread_id AND (:partition IS NULL OR t.partition = :partition)
ORDER BY t.partition LIMIT 2
"""
SET_FACT_LAYER = """
INSERT INTO fact_layer (partition, thread_id, enabled) VALUES (:partition, :thread_id, :enabled)
ON CONFLICT (partition, thread_id) DO UPDATE SET enabled = excluded.enabled
"""
ADVANCE_FACT_CURSOR = """
INSERT INTO fact_layer (partition, thread_id, enabled, extracted_seq) VALUES (:partition, :thread_id, 1, :seq)
ON CONFLICT (partition, thread_id) DO UPDATE SET extracted_seq = max(extracted_seq, excluded.extracted_seq)
"""
FACT_LAYER_THREADS = """
SELECT t.id AS thread_id, t.partition, coalesce(l.enabled, 1) AS enabled, coalesce(l.extracted_seq, -1) AS extracted_seq
FROM threads AS t LEFT JOIN fact_layer AS l ON l.partition = t.partition AND l.thread_id = t.id
WHERE coalesce(l.enabled, 1) = 1 AND (:partition IS NULL OR t.partition = :partition)
ORDER BY t.updated_at DESC, t.id LIMIT :limit
"""

# -- semantic search: embeddings and the vector files beside the database -------------

VECTOR_INDEX_NAME = "memory"
VECTOR_INDEX = "SELECT dimensions, version FROM vector_index WHERE name = :name"
CREATE_VECTOR_INDEX = "INSERT INTO vector_index (name, dimensions) VALUES (:name, :dimensions)"
RESIZE_VECTOR_INDEX = "UPDATE vector_index SET dimensions = :dimensions, version = version + 1 WHERE name = :name"
ANY_EMBEDDING = "SELECT 1 FROM embeddings LIMIT 1"
BUMP_VECTOR_VERSION = "UPDATE vector_index SET version = version + 1 WHERE name = :name"
#: The nodes a batch of vectors describes, whatever their kind.
EMBEDDED_NODES = f"""
SELECT id, 'message' AS kind, partition, thread_id, created_at FROM messages WHERE id IN {IN_IDS}
UNION ALL
SELECT id, 'summary', partition, thread_id, created_at FROM summaries WHERE id IN {IN_IDS}
UNION ALL
SELECT id, 'fact', partition, thread_id, created_at FROM facts WHERE id IN {IN_IDS}
"""
#: A node's old vector goes first, by a DELETE that the deletion log's trigger sees (a
#: REPLACE would delete it without firing the trigger).
DELETE_EMBEDDINGS = f"DELETE FROM embeddings WHERE node_id IN {IN_IDS}"
SET_EMBEDDING = """
INSERT INTO embeddings (node_id, piece, pieces, kind, partition, thread_id, created_us, model, vector)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
# Nodes without a vector of the model, or whose only vector is of a long text's head
# (written before pieces: ``pieces`` NULL), in id order from a cursor (the id index gives
# the order), or among given ids. {table}/{text} are fixed per kind below, never input.
_EMBEDDED = """NOT EXISTS (
    SELECT 1 FROM embeddings AS e WHERE e.node_id = n.id AND e.piece = 0 AND e.model = :model
      AND (e.pieces IS NOT NULL OR length(n.{text}) <= :piece_chars)
  )"""
_MISSING = (
    """
SELECT id, substr({text}, 1, :chars) FROM {table} AS n
WHERE id > :after AND (:partition IS NULL OR partition = :partition)
  AND """
    + _EMBEDDED
    + """
ORDER BY id LIMIT :limit
"""
)
_MISSING_AMONG = (
    f"""
SELECT id, substr({{text}}, 1, :chars) FROM {{table}} AS n
WHERE id IN {IN_IDS} AND id > :after AND (:partition IS NULL OR partition = :partition)
  AND """
    + _EMBEDDED
    + """
ORDER BY id LIMIT :limit
"""
)
_TEXTS = {"message": ("messages", "content"), "summary": ("summaries", "text"), "fact": ("facts", "text")}
MISSING_EMBEDDINGS = {kind: _MISSING.format(table=t, text=c) for kind, (t, c) in _TEXTS.items()}
MISSING_EMBEDDINGS_AMONG = {kind: _MISSING_AMONG.format(table=t, text=c) for kind, (t, c) in _TEXTS.items()}
EMBEDDING_ROWS = """SELECT pk, kind, partition, thread_id, created_us, vector FROM embeddings
WHERE model = :model AND pk > :after ORDER BY pk"""
#: Vectors deleted since the files last looked (``:after``, a seq of the log), and its end.
DELETED_EMBEDDINGS = "SELECT seq, pk FROM embedding_deletions WHERE seq > :after ORDER BY seq"
LAST_DELETION = "SELECT coalesce(max(seq), 0) FROM embedding_deletions"
#: Whether a pk was deleted (the log is short-lived beside the table: scanned, not indexed).
DELETED_PK = "SELECT 1 FROM embedding_deletions WHERE pk = :pk LIMIT 1"
EMBEDDING_UP_TO = "SELECT 1 FROM embeddings WHERE model = :model AND pk <= :pk LIMIT 1"
#: One vector by pk: the cache's last row is compared with it on a process's first open.
EMBEDDING_VECTOR = "SELECT vector FROM embeddings WHERE pk = :pk AND model = :model"
#: The node of each pk the cache ranked first (``:ids`` holds the pks): a node's pieces share it.
EMBEDDING_NODES = f"SELECT pk, node_id FROM embeddings WHERE pk IN {IN_IDS}"
# What a semantic hit shows, per kind, for the ids the matrix ranked first; a message's
# seq and metadata too, so hybrid search's refs of those hits need no second read.
VECTOR_HITS = {
    "message": f"""
SELECT id, source_id, thread_id, partition, role, NULL AS level, created_at, substr(content, 1, :chars), seq, metadata
FROM messages WHERE id IN {IN_IDS}
""",
    "summary": f"""
SELECT id, NULL, thread_id, partition, NULL, level, created_at, substr(text, 1, :chars), NULL, NULL
FROM summaries WHERE id IN {IN_IDS}
""",
    "fact": f"""
SELECT id, NULL, thread_id, partition, NULL, NULL, created_at, substr(text, 1, :chars), NULL, NULL
FROM facts WHERE id IN {IN_IDS}
""",
}

# -- hybrid search: candidate positions and metadata, never content ----------------------
MESSAGE_REFS = f"""
SELECT id, thread_id, partition, seq, role, metadata, substr(content, 1, :opening) AS opening FROM messages
WHERE id IN {IN_IDS} AND (:partition IS NULL OR partition = :partition)
"""
#: An existing table's CREATE statement as SQLite stored it (``fts.upgrade_indexes``).
TABLE_DEFINITION = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :name"
#: Drop a full-text table whose definition changed; ``{table}`` is a name from schema.sql.
DROP_TABLE = "DROP TABLE {table}"
#: Re-index every row of an external-content FTS5 table from the table it indexes.
REBUILD_FTS = "INSERT INTO {table} ({table}) VALUES ('rebuild')"
#: Messages written so far: they are never deleted, so the largest pk is their count.
MESSAGE_ROWS = "SELECT coalesce(max(pk), 0) FROM messages"
#: How many of the messages after ``:after`` (a pk) match a full-text query: FTS5 seeks
#: to the rowid, so this costs the size of that window, not of the index.
RECENT_MATCHES = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH :query AND rowid > :after"
#: Whether any message matches a full-text query.
ANY_MESSAGE_MATCH = "SELECT 1 FROM messages_fts WHERE messages_fts MATCH :query LIMIT 1"
#: How many of the newest messages ``RECENT_MATCHES`` samples to tell a common word.
COMMON_TERM_SAMPLE = 2000
#: Below this many messages every term is searched (small stores stay exact to the bit).
COMMON_TERM_MIN_ROWS = 1000


def query_words(text: str) -> list[str]:
    """The words ``fts_query`` searches, in order, each once."""
    return list(dict.fromkeys(identity.words(text)))[:_MAX_QUERY_WORDS]


# -- migrations: files written by older versions (``migrations``) --------------------------

TABLE_COLUMNS = "SELECT name FROM pragma_table_info(:table)"
DROP_UNUSED_INDEXES = "DROP INDEX IF EXISTS embeddings_by_partition"
ADD_SECRETS_REDACTED = "ALTER TABLE threads ADD COLUMN secrets_redacted INTEGER NOT NULL DEFAULT 0"
#: Files from before tool messages had a derived text: the column, and the insert trigger
#: that indexed the content alone dropped (schema.sql makes it anew with both columns).
ADD_SEARCH_TEXT = "ALTER TABLE messages ADD COLUMN search_text TEXT"
DROP_CONTENT_ONLY_TRIGGER = "DROP TRIGGER IF EXISTS messages_fts_insert"

#: Files from before threads were keyed by (partition, id): the four tables that name a
#: thread are renamed aside (their triggers and indexes dropped, schema.sql makes them
#: anew), copied into the new tables row for row (pks kept, so full-text rowids still
#: match), dropped, and the full-text indexes rebuilt from their content tables.
MIGRATION_SET_ASIDE = """
ALTER TABLE threads RENAME TO old_threads;
ALTER TABLE messages RENAME TO old_messages;
ALTER TABLE summaries RENAME TO old_summaries;
ALTER TABLE fact_layer RENAME TO old_fact_layer;
DROP TRIGGER IF EXISTS messages_fts_insert;
DROP TRIGGER IF EXISTS summaries_fts_insert;
DROP INDEX IF EXISTS threads_by_partition;
DROP INDEX IF EXISTS summaries_by_thread;
"""
MIGRATION_COPY = f"""
INSERT INTO threads (id, partition, project, created_at, updated_at, message_count, covered_count, tokens,
    secrets_redacted)
SELECT id, partition, project, created_at, updated_at, message_count, covered_count, tokens, secrets_redacted
FROM old_threads;
INSERT INTO messages (pk, {MESSAGE_COLUMNS}) SELECT pk, {MESSAGE_COLUMNS} FROM old_messages;
INSERT INTO summaries (pk, {SUMMARY_COLUMNS}) SELECT pk, {SUMMARY_COLUMNS} FROM old_summaries;
INSERT INTO fact_layer (partition, thread_id, enabled, extracted_seq)
SELECT t.partition, l.thread_id, l.enabled, l.extracted_seq
FROM old_fact_layer AS l JOIN old_threads AS t ON t.id = l.thread_id;
DROP TABLE old_fact_layer;
DROP TABLE old_summaries;
DROP TABLE old_messages;
DROP TABLE old_threads;
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
INSERT INTO summaries_fts (summaries_fts) VALUES ('rebuild');
"""
THREAD_KEY = "SELECT name FROM pragma_table_info('threads') WHERE pk > 0"
#: Files from before a node had a vector per piece: ``embeddings`` renamed aside (its
#: triggers and index dropped; schema.sql, run between these two, makes them anew),
#: copied row for row as piece 0, its AUTOINCREMENT counter carried over. A node whose
#: text fits one piece has all its vectors (``pieces`` 1); a longer one's count is left
#: unknown (NULL), for the backfill to embed it again, so the backfill's walk never
#: measures a short text again.
MIGRATION_EMBEDDINGS_ASIDE = """
DROP TRIGGER IF EXISTS embeddings_log_delete;
DROP TRIGGER IF EXISTS embeddings_fact_delete;
DROP INDEX IF EXISTS embeddings_by_model;
ALTER TABLE embeddings RENAME TO old_embeddings;
"""
MIGRATION_EMBEDDINGS_COPY = f"""
INSERT INTO embeddings (pk, node_id, piece, pieces, kind, partition, thread_id, created_us, model, vector)
SELECT pk, node_id, 0,
    CASE WHEN length(coalesce(
        (SELECT content FROM messages WHERE id = o.node_id), (SELECT text FROM summaries WHERE id = o.node_id),
        (SELECT text FROM facts WHERE id = o.node_id), ''
    )) <= {EMBED_PIECE_CHARS} THEN 1 END,
    kind, partition, thread_id, created_us, model, vector
FROM old_embeddings AS o;
INSERT INTO sqlite_sequence (name, seq)
SELECT 'embeddings', seq FROM sqlite_sequence
WHERE name = 'old_embeddings' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'embeddings');
UPDATE sqlite_sequence SET seq = (SELECT max(seq) FROM sqlite_sequence WHERE name IN ('embeddings', 'old_embeddings'))
WHERE name = 'embeddings';
DROP TABLE old_embeddings;
"""

# -- transfer: records written exactly as another store held them -----------------------

RESTORE_THREAD = """
INSERT INTO threads (id, partition, project, created_at, updated_at)
VALUES (:thread_id, :partition, :project, :created_at, :updated_at)
"""
RESTORE_GROW_THREAD = """
UPDATE threads SET message_count = message_count + :added, tokens = tokens + :tokens,
    updated_at = max(updated_at, :updated_at), project = COALESCE(project, :project)
WHERE partition = :partition AND id = :thread_id
"""
#: Which of these message ids are stored (ids are unique across every thread).
STORED_MESSAGE_IDS = f"SELECT id FROM messages WHERE id IN {IN_IDS}"
RESTORE_FACT = """
INSERT INTO facts (id, partition, project, text, kind, subject, thread_id, created_at, valid_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
FACT_IDS = f"SELECT id FROM facts WHERE id IN {IN_IDS}"
RESTORE_SUPERSEDES = "INSERT INTO fact_supersedes (fact_id, superseded_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
READ_EMBEDDINGS = f"SELECT node_id, model, vector FROM embeddings WHERE node_id IN {IN_IDS} ORDER BY node_id, piece"

# -- archiving: runs of messages moved to archive files, and back --------------------------

_ARCHIVED_RUN = "partition = :partition AND thread_id = :thread_id AND seq BETWEEN :first_seq AND :last_seq"
#: Messages of the run in the live store, and how many of them a summary covers.
ARCHIVE_RUN_STATE = f"""
SELECT count(*), count(s.child_id) FROM messages AS m LEFT JOIN summarizes AS s ON s.child_id = m.id
WHERE m.{_ARCHIVED_RUN}
"""
ARCHIVE_FTS_DELETE = f"""
INSERT INTO messages_fts (messages_fts, rowid, content, search_text)
SELECT 'delete', pk, content, search_text FROM messages WHERE {_ARCHIVED_RUN}
"""
ARCHIVE_EMBEDDINGS_DELETE = f"DELETE FROM embeddings WHERE node_id IN (SELECT id FROM messages WHERE {_ARCHIVED_RUN})"
ARCHIVE_MESSAGES_DELETE = f"DELETE FROM messages WHERE {_ARCHIVED_RUN}"
BUMP_ANY_VECTOR_VERSION = "UPDATE vector_index SET version = version + 1"
ARCHIVED_COLUMNS = "thread_id, partition, first_seq, last_seq, path, digest, archived_at"
INSERT_ARCHIVED_RANGE = f"INSERT INTO archived_ranges ({ARCHIVED_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
ARCHIVED_RANGES = f"""
SELECT {ARCHIVED_COLUMNS} FROM archived_ranges
WHERE (:partition IS NULL OR partition = :partition) AND (:thread_id IS NULL OR thread_id = :thread_id)
ORDER BY partition, thread_id, first_seq
"""
ARCHIVED_RANGE = f"""
SELECT {ARCHIVED_COLUMNS} FROM archived_ranges
WHERE thread_id = :thread_id AND partition = :partition AND first_seq = :first_seq AND last_seq = :last_seq
"""
DELETE_ARCHIVED_RANGE = """
DELETE FROM archived_ranges WHERE partition = :partition AND thread_id = :thread_id AND first_seq = :first_seq
"""
#: The archived run a seq range reaches into, if any (expanding a summary over it).
ARCHIVED_OVERLAP = f"""
SELECT {ARCHIVED_COLUMNS} FROM archived_ranges
WHERE partition = :partition AND thread_id = :thread_id AND first_seq <= :last_seq AND last_seq >= :first_seq
ORDER BY first_seq LIMIT 1
"""
ARCHIVED_TOTALS = """
SELECT count(*), coalesce(sum(last_seq - first_seq + 1), 0) FROM archived_ranges
WHERE :partition IS NULL OR partition = :partition
"""
#: Pages in all and free pages, in bytes: freed pages (an archived run's) are reused
#: before the file grows, so they are reclaimable.
PAGE_BYTES = """
SELECT page_count * page_size, freelist_count * page_size
FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()
"""

# -- hooks: read positions --------------------------------------------------------------

READ_POSITIONS = """
SELECT path, offset, line, fingerprint FROM read_positions
WHERE partition = :partition AND thread_id = :thread_id ORDER BY path
"""
SAVE_READ_POSITION = """
INSERT INTO read_positions (partition, thread_id, path, offset, line, fingerprint)
VALUES (:partition, :thread_id, :path, :offset, :line, :fingerprint)
ON CONFLICT (partition, thread_id, path)
DO UPDATE SET offset = excluded.offset, line = excluded.line, fingerprint = excluded.fingerprint
"""
#: Files from before read positions had a table: the hook kept them in the metadata key
#: ``hook_cursor`` of a message (``{path: [offset, line]}``), newest last in seq order.
CURSOR_MESSAGES = """
SELECT id, partition, thread_id, metadata FROM messages
WHERE metadata LIKE '%"hook_cursor"%' AND json_extract(metadata, '$.hook_cursor') IS NOT NULL
ORDER BY partition, thread_id, seq
"""
SET_MESSAGE_METADATA = "UPDATE messages SET metadata = :metadata WHERE id = :id"

# -- session readings ------------------------------------------------------------------

SESSION_READING = """
SELECT partition, thread_id, last_seq, reader, sections, note, read_at FROM session_readings
WHERE partition = :partition AND thread_id = :thread_id
"""
SAVE_SESSION_READING = """
INSERT INTO session_readings (partition, thread_id, last_seq, reader, sections, note, read_at)
VALUES (:partition, :thread_id, :last_seq, :reader, :sections, :note, :read_at)
ON CONFLICT (partition, thread_id) DO UPDATE SET last_seq = excluded.last_seq, reader = excluded.reader,
    sections = excluded.sections, note = excluded.note, read_at = excluded.read_at
"""

# -- derived search text of tool messages (``derived``) -----------------------------------

#: The tool messages (results, and calls: an assistant message with a tool_call_id) whose
#: search_text is not written yet, by id from ``:after``: the partial index
#: ``messages_search_text_missing`` holds exactly these rows.
MISSING_SEARCH_TEXTS = f"""
SELECT {MESSAGE_COLUMNS} FROM messages INDEXED BY messages_search_text_missing
WHERE search_text IS NULL AND (role = 'tool' OR (role = 'assistant' AND tool_call_id IS NOT NULL))
  AND id > :after AND (:partition IS NULL OR partition = :partition)
ORDER BY id LIMIT :limit
"""
#: Write a message's search_text once (a trigger re-indexes its row); a second write,
#: or one racing it, changes nothing.
SET_SEARCH_TEXT = "UPDATE messages SET search_text = :text WHERE id = :id AND search_text IS NULL"
