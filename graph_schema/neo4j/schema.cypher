// Palimpsest schema for Neo4j 5: applied by Neo4jStore.initialize(), one statement per
// semicolon, every statement idempotent (IF NOT EXISTS), so running it again is harmless.

// Uniqueness on every id (and an implicit index to find a node by id). A thread is
// identified by its partition and its id (invariant 7): two partitions may each have a
// thread `x`. A database from when the id alone was unique loses that constraint here;
// its threads already satisfy the new one, so nothing else has to change.
DROP CONSTRAINT thread_id IF EXISTS;
CREATE CONSTRAINT thread_key IF NOT EXISTS FOR (t:Thread) REQUIRE (t.partition, t.id) IS UNIQUE;
CREATE RANGE INDEX thread_by_id IF NOT EXISTS FOR (t:Thread) ON (t.id);
CREATE CONSTRAINT message_id IF NOT EXISTS FOR (m:Message) REQUIRE m.id IS UNIQUE;
CREATE CONSTRAINT summary_id IF NOT EXISTS FOR (s:Summary) REQUIRE s.id IS UNIQUE;
CREATE CONSTRAINT fact_id IF NOT EXISTS FOR (f:Fact) REQUIRE f.id IS UNIQUE;

// A thread's messages in seq order, within its partition (appends, expand, uncovered).
CREATE RANGE INDEX message_thread_seq IF NOT EXISTS FOR (m:Message) ON (m.partition, m.thread_id, m.seq);

// A thread's message by its caller id: how an append finds a repeat, whatever id
// scheme stored it (graph_schema/identity.py).
CREATE RANGE INDEX message_thread_source IF NOT EXISTS FOR (m:Message) ON (m.partition, m.thread_id, m.source_id);

// A thread's summaries level by level in thread order (uncovered_summaries, expand).
CREATE RANGE INDEX summary_thread_level IF NOT EXISTS FOR (s:Summary) ON (s.thread_id, s.level, s.first_seq);

// Threads of one partition (list_threads, compaction_candidates, stats).
CREATE RANGE INDEX thread_partition IF NOT EXISTS FOR (t:Thread) ON (t.partition);

// One Lucene index over every searchable text: message content, summary and fact text,
// and a tool message's derived search_text (scheduler/search_text.py: what a call or
// result is about, written once beside its content). Words are stemmed (Lucene's
// English analyzer: "researching" finds "research"); an index made with another
// analyzer or over other properties is dropped and rebuilt by initialize().
CREATE FULLTEXT INDEX memory_text IF NOT EXISTS FOR (n:Message|Summary|Fact) ON EACH [n.content, n.text, n.search_text]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}};

// Maintenance: a lease per background job or thread being compacted (MERGE on the
// unique name makes concurrent takers meet on one node), and the cycles jobs ran.
CREATE CONSTRAINT lease_name IF NOT EXISTS FOR (l:Lease) REQUIRE l.name IS UNIQUE;
CREATE CONSTRAINT maintenance_cycle_id IF NOT EXISTS FOR (c:MaintenanceCycle) REQUIRE c.id IS UNIQUE;
CREATE RANGE INDEX maintenance_cycle_started IF NOT EXISTS FOR (c:MaintenanceCycle) ON (c.started_at);

// The fact layer: a partition's facts by topic (supersession looks up current facts of
// one subject) and a thread's facts (kg stats and clear for one thread).
CREATE RANGE INDEX fact_partition_subject IF NOT EXISTS FOR (f:Fact) ON (f.partition, f.subject);
CREATE RANGE INDEX fact_thread IF NOT EXISTS FOR (f:Fact) ON (f.thread_id);

// Semantic search: one (:Embedding)-[:EMBEDS]->(node) per piece (window) of an embedded
// node's text, found by the node's id; a thread's or a partition's vectors ranked exactly
// without the index. The vector index itself (memory_embedding) is created by
// ensure_vector_index, which knows the embedder's vector size. A node had one Embedding
// before long texts were cut in pieces (unique node_id); those stay, as piece 0 of an
// unknown count (no piece, no pieces), until the backfill embeds a long one again.
DROP CONSTRAINT embedding_node IF EXISTS;
CREATE CONSTRAINT embedding_piece IF NOT EXISTS FOR (e:Embedding) REQUIRE (e.node_id, e.piece) IS UNIQUE;
CREATE RANGE INDEX embedding_node_id IF NOT EXISTS FOR (e:Embedding) ON (e.node_id);
CREATE RANGE INDEX embedding_thread IF NOT EXISTS FOR (e:Embedding) ON (e.thread_id);
CREATE RANGE INDEX embedding_partition IF NOT EXISTS FOR (e:Embedding) ON (e.partition);

// Archiving: a record per run of messages moved to an archive file, found by thread;
// an archived message keeps a stub node (id, partition, thread, seq) under another
// label, so SUMMARIZES and NEXT edges stay and restoring finds it by id.
CREATE RANGE INDEX archived_range_thread IF NOT EXISTS FOR (a:ArchivedRange) ON (a.thread_id);
CREATE RANGE INDEX archived_message_id IF NOT EXISTS FOR (m:ArchivedMessage) ON (m.id);

// Hooks: where reading each transcript file of a thread stopped, one node per file
// (bookkeeping of the agent's machine, apart from the messages, never exported); and a
// record of each one-time data migration, so opening a migrated store costs one lookup.
CREATE CONSTRAINT read_position_key IF NOT EXISTS FOR (p:ReadPosition) REQUIRE (p.partition, p.thread_id, p.path) IS UNIQUE;
CREATE CONSTRAINT store_migration_name IF NOT EXISTS FOR (g:StoreMigration) REQUIRE g.name IS UNIQUE;

// Session readings: what a model made of a thread, one node a thread, as of its message
// last_seq (derived from the messages by maintenance, never exported).
CREATE CONSTRAINT session_reading_key IF NOT EXISTS FOR (r:SessionReading) REQUIRE (r.partition, r.thread_id) IS UNIQUE;

// The schema's version, one node: initialize() reads it and applies this file only when
// it differs (a new database, or a Palimpsest with another schema), so an open is one
// query, not one per statement here.
CREATE CONSTRAINT palimpsest_schema_id IF NOT EXISTS FOR (s:PalimpsestSchema) REQUIRE s.id IS UNIQUE;
