"""How raw messages are digested: planning, summarizing, compaction and maintenance."""
