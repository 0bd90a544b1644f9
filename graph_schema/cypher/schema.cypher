// Palimpsest schema for Neo4j 5: applied by Neo4jStore.initialize(), one statement per
// semicolon, every statement idempotent (IF NOT EXISTS), so running it again is harmless.

// Uniqueness on every id (and an implicit index to find a node by id).
CREATE CONSTRAINT thread_id IF NOT EXISTS FOR (t:Thread) REQUIRE t.id IS UNIQUE;
CREATE CONSTRAINT message_id IF NOT EXISTS FOR (m:Message) REQUIRE m.id IS UNIQUE;
CREATE CONSTRAINT summary_id IF NOT EXISTS FOR (s:Summary) REQUIRE s.id IS UNIQUE;
CREATE CONSTRAINT fact_id IF NOT EXISTS FOR (f:Fact) REQUIRE f.id IS UNIQUE;

// A thread's messages in seq order, within its partition (appends, expand, uncovered).
CREATE RANGE INDEX message_thread_seq IF NOT EXISTS FOR (m:Message) ON (m.partition, m.thread_id, m.seq);

// A thread's summaries level by level in thread order (uncovered_summaries, expand).
CREATE RANGE INDEX summary_thread_level IF NOT EXISTS FOR (s:Summary) ON (s.thread_id, s.level, s.first_seq);

// Threads of one partition (list_threads, compaction_candidates, stats).
CREATE RANGE INDEX thread_partition IF NOT EXISTS FOR (t:Thread) ON (t.partition);

// One Lucene index over every searchable text: message content, summary and fact text.
CREATE FULLTEXT INDEX memory_text IF NOT EXISTS FOR (n:Message|Summary|Fact) ON EACH [n.content, n.text]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words'}};
