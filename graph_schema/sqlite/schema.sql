-- The SQLite mirror of the graph docs/architecture.md describes, applied idempotently by
-- SqliteStore.initialize().
--
-- Node labels become tables, SUMMARIZES becomes the `summarizes` edge table, and NEXT
-- is not stored at all: in SQLite it is implied by consecutive `seq` within a thread
-- (message seq n+1 is the NEXT of message seq n), which UNIQUE(thread_id, seq) and the
-- gap-free seq allocation of append_messages guarantee.
--
-- Timestamps are ISO 8601 text in UTC with microseconds ("2024-05-01T12:00:00.000000+00:00"),
-- always the same width, so text order is time order.

-- A thread is identified by its partition and its id (invariant 7): two partitions may
-- each have a thread `x`, and neither can see or block the other's. Files written when
-- the id alone was the key are rebuilt by migrations.py before this script runs.
CREATE TABLE IF NOT EXISTS threads (
    id            TEXT NOT NULL,
    partition     TEXT NOT NULL,
    project       TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    -- Messages in the thread; also the seq the next message gets (seq runs 0..n-1).
    message_count INTEGER NOT NULL DEFAULT 0,
    -- Messages some level-1 summary covers; message_count - covered_count is the backlog.
    covered_count INTEGER NOT NULL DEFAULT 0,
    -- Sum of the messages' token estimates, so stats never scans messages.
    tokens        INTEGER NOT NULL DEFAULT 0,
    -- Credentials replaced before storage (graph_schema/redact.py), for stats.
    secrets_redacted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition, id)
);

CREATE INDEX IF NOT EXISTS threads_by_partition ON threads (partition, updated_at);
-- A thread by its id alone: reads that may name no partition (`--all-partitions`, doctor).
CREATE INDEX IF NOT EXISTS threads_by_id ON threads (id);

-- (partition, thread_id, seq) is the range index of a thread's messages.
CREATE TABLE IF NOT EXISTS messages (
    pk           INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    source_id    TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    partition    TEXT NOT NULL,
    project      TEXT,
    seq          INTEGER NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    tokens       INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    tool_call_id TEXT,
    metadata     TEXT NOT NULL DEFAULT '{}',
    -- What a tool call or result is about, in words (scheduler/search_text.py), indexed for
    -- text search beside the content, which never changes: NULL until derived ('' when
    -- there is nothing to say), written once, by the embedder or the search_text step.
    search_text  TEXT,
    FOREIGN KEY (partition, thread_id) REFERENCES threads (partition, id),
    UNIQUE (partition, thread_id, seq),
    UNIQUE (partition, thread_id, source_id)
);

-- The tool messages whose derived text is still to be written (the search_text step walks
-- these by id, so a store where every one has it costs that step nothing to look at).
CREATE INDEX IF NOT EXISTS messages_search_text_missing ON messages (id)
WHERE search_text IS NULL AND (role = 'tool' OR (role = 'assistant' AND tool_call_id IS NOT NULL));

CREATE TABLE IF NOT EXISTS summaries (
    pk            INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    thread_id     TEXT NOT NULL,
    partition     TEXT NOT NULL,
    level         INTEGER NOT NULL CHECK (level >= 1),
    text          TEXT NOT NULL,
    tokens        INTEGER NOT NULL,
    source_tokens INTEGER NOT NULL,
    first_seq     INTEGER NOT NULL,
    last_seq      INTEGER NOT NULL,
    earliest_at   TEXT NOT NULL,
    latest_at     TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    digest        TEXT NOT NULL,
    summarizer    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    FOREIGN KEY (partition, thread_id) REFERENCES threads (partition, id)
);

CREATE INDEX IF NOT EXISTS summaries_by_thread ON summaries (partition, thread_id, level, first_seq);

-- Per thread and level, the seq below which every node of that level has a parent (for
-- level 0, every message is under a level-1 summary): docs/architecture.md, "Covered floors". The
-- frontier and the per-turn reads scan each level from its floor up, so a long thread
-- costs what its uncovered tail and top summaries do. No row means 0 (always true,
-- merely slower); floors are kept when summaries are written.
CREATE TABLE IF NOT EXISTS covered_floors (
    partition TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    level     INTEGER NOT NULL,
    floor     INTEGER NOT NULL,
    PRIMARY KEY (partition, thread_id, level)
) WITHOUT ROWID;

-- (:Summary)-[:SUMMARIZES {position}]->(:Message | :Summary). UNIQUE(child_id) is
-- invariant 2 held by the database itself: a node has at most one parent summary.
CREATE TABLE IF NOT EXISTS summarizes (
    parent_id TEXT NOT NULL REFERENCES summaries (id),
    child_id  TEXT NOT NULL UNIQUE,
    position  INTEGER NOT NULL,
    PRIMARY KEY (parent_id, position)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS facts (
    pk          INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    partition   TEXT NOT NULL,
    project     TEXT,
    text        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    valid_until TEXT,
    -- The fact layer: the topic supersession compares, and the thread it came from.
    subject     TEXT NOT NULL DEFAULT '',
    thread_id   TEXT
);

CREATE INDEX IF NOT EXISTS facts_by_partition ON facts (partition, created_at);
CREATE INDEX IF NOT EXISTS facts_by_subject ON facts (partition, subject, created_at);
CREATE INDEX IF NOT EXISTS facts_by_thread ON facts (thread_id);

-- (:Fact)-[:EXTRACTED_FROM]->(:Message)
CREATE TABLE IF NOT EXISTS fact_sources (
    fact_id    TEXT NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    message_id TEXT NOT NULL,
    PRIMARY KEY (fact_id, message_id)
) WITHOUT ROWID;

-- (:Fact)-[:SUPERSEDES]->(:Fact)
CREATE TABLE IF NOT EXISTS fact_supersedes (
    fact_id       TEXT NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    superseded_id TEXT NOT NULL,
    PRIMARY KEY (fact_id, superseded_id)
) WITHOUT ROWID;

-- A fact is superseded at most once (its valid_until says when).
CREATE UNIQUE INDEX IF NOT EXISTS fact_superseded_once ON fact_supersedes (superseded_id);

-- The fact layer of a thread (Thread.facts_enabled / facts_seq in Neo4j): on unless a
-- row says off (`kg off`); extracted_seq is the last message seq extraction has read.
CREATE TABLE IF NOT EXISTS fact_layer (
    partition     TEXT NOT NULL,
    thread_id     TEXT NOT NULL,
    enabled       INTEGER NOT NULL DEFAULT 1,
    extracted_seq INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (partition, thread_id),
    FOREIGN KEY (partition, thread_id) REFERENCES threads (partition, id)
) WITHOUT ROWID;

-- Full text: external-content FTS5 tables (the text is stored once, in the tables above)
-- kept in sync by triggers. Messages and summaries are immutable, so inserts are the
-- only change to follow, bar a message's search_text written once later (a second
-- column of its row); facts may be cleared (`kg clear`), so deletes are followed too.
-- Words are stemmed (porter: "researching" finds "research"; measured in
-- server/retrieval/hybrid.py); a store made with another tokenizer is re-indexed when
-- opened (fts.py).
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5 (
    content, search_text, content = 'messages', content_rowid = 'pk',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, search_text) VALUES (new.pk, new.content, new.search_text);
END;

CREATE TRIGGER IF NOT EXISTS messages_fts_search_text AFTER UPDATE OF search_text ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, search_text)
    VALUES ('delete', old.pk, old.content, old.search_text);
    INSERT INTO messages_fts (rowid, content, search_text) VALUES (new.pk, new.content, new.search_text);
END;

CREATE VIRTUAL TABLE IF NOT EXISTS summaries_fts USING fts5 (
    text, content = 'summaries', content_rowid = 'pk',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER IF NOT EXISTS summaries_fts_insert AFTER INSERT ON summaries BEGIN
    INSERT INTO summaries_fts (rowid, text) VALUES (new.pk, new.text);
END;

CREATE VIRTUAL TABLE IF NOT EXISTS facts_fts USING fts5 (
    text, content = 'facts', content_rowid = 'pk',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER IF NOT EXISTS facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, text) VALUES (new.pk, new.text);
END;

CREATE TRIGGER IF NOT EXISTS facts_fts_delete AFTER DELETE ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.pk, old.text);
END;

-- Maintenance: one row per lease a background job holds (a job, or one thread being
-- compacted), taken and renewed by one upsert, and one row per cycle a job ran.
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS maintenance_cycles (
    pk          INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    job         TEXT NOT NULL,
    holder      TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    threads     INTEGER NOT NULL,
    summaries   INTEGER NOT NULL,
    facts       INTEGER NOT NULL,
    -- JSON: {step name: count} and [error sentence, ...].
    steps       TEXT NOT NULL DEFAULT '{}',
    errors      TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX IF NOT EXISTS maintenance_cycles_by_start ON maintenance_cycles (started_at);

-- Semantic search: a node's vectors (message, summary or fact) in `embeddings`, one per
-- piece (window) of a long text, else one; derived data kept apart from the node, so a
-- message row never changes. `vector_index`
-- holds the size every vector has and a version every write bumps, which tells the
-- vector files beside the database (sqlite/vector_file.py) when to catch up.
-- AUTOINCREMENT: a pk is never reused, so "new rows past the last pk seen" is exactly
-- what was appended since.
CREATE TABLE IF NOT EXISTS vector_index (
    name       TEXT PRIMARY KEY,
    dimensions INTEGER NOT NULL,
    version    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS embeddings (
    pk         INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id    TEXT NOT NULL,
    kind       TEXT NOT NULL,
    partition  TEXT NOT NULL,
    thread_id  TEXT,
    -- The node's created_at in microseconds since the epoch, for since/until in memory.
    created_us INTEGER NOT NULL,
    model      TEXT NOT NULL,
    -- float32 little-endian, unit length.
    vector     BLOB NOT NULL,
    -- Which window of the node's text this vector is of (0: its start), and how many the
    -- node has; pieces is NULL on a vector written before texts were cut in windows
    -- (its text's head only: the backfill embeds such a node again when it is long).
    piece      INTEGER NOT NULL DEFAULT 0,
    pieces     INTEGER,
    UNIQUE (node_id, piece)
);

CREATE INDEX IF NOT EXISTS embeddings_by_model ON embeddings (model, pk);

-- Every deleted vector's pk, in order: the vector files beside the database mark those
-- rows dead without counting a million rows (sqlite/vector_file.py). A replaced vector is
-- deleted first (set_embeddings), so it is logged too.
CREATE TABLE IF NOT EXISTS embedding_deletions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    pk  INTEGER NOT NULL
);

CREATE TRIGGER IF NOT EXISTS embeddings_log_delete AFTER DELETE ON embeddings BEGIN
    INSERT INTO embedding_deletions (pk) VALUES (old.pk);
END;

-- A cleared fact takes its vector with it.
CREATE TRIGGER IF NOT EXISTS embeddings_fact_delete AFTER DELETE ON facts BEGIN
    DELETE FROM embeddings WHERE node_id = old.id;
    UPDATE vector_index SET version = version + 1;
END;

-- Archiving: runs of a thread's messages moved out to archive files beside the store
-- (the export format). The summaries over them, their SUMMARIZES rows and the thread's
-- counters stay; this row says which file holds the originals and its thread digest.
CREATE TABLE IF NOT EXISTS archived_ranges (
    thread_id   TEXT NOT NULL,
    partition   TEXT NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    path        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    archived_at TEXT NOT NULL,
    PRIMARY KEY (partition, thread_id, first_seq),
    FOREIGN KEY (partition, thread_id) REFERENCES threads (partition, id)
) WITHOUT ROWID;

-- Hooks: where reading each transcript file of a thread stopped (a byte offset at a line
-- start, its line number, and what the file looked like then). Bookkeeping of this
-- machine, apart from the messages: never exported. No foreign key: a transcript may
-- be read before its thread holds a message.
CREATE TABLE IF NOT EXISTS read_positions (
    partition   TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    path        TEXT NOT NULL,
    offset      INTEGER NOT NULL,
    line        INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (partition, thread_id, path)
) WITHOUT ROWID;

-- Session readings: what a model made of a thread (its sections as JSON, or why its
-- answer was unusable), as of the thread's message last_seq, one row a thread. Derived
-- from the messages by maintenance, never exported. No foreign key, as read_positions.
CREATE TABLE IF NOT EXISTS session_readings (
    partition TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    last_seq  INTEGER NOT NULL,
    reader    TEXT NOT NULL,
    sections  TEXT,
    note      TEXT NOT NULL,
    read_at   TEXT NOT NULL,
    PRIMARY KEY (partition, thread_id)
) WITHOUT ROWID;
