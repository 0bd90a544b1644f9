"""How conversations get in: transcript formats behind one parser, file ingest and agent hooks."""
