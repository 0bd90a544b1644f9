"""Palimpsest: a lossless memory server for coding agents.

The one import name of the distribution. Its three layers are subpackages, kept at the
repository's top level as `graph_schema/`, `scheduler/` and `server/` and linked here:

- `palimpsest.graph_schema`: what is stored and how (models, the store protocol, backends);
- `palimpsest.scheduler`: how raw messages are digested (compaction, summarizers, maintenance);
- `palimpsest.server`: how the world talks to it (MCP, CLI, feeds, retrieval, settings).

Dependencies point one way: server -> scheduler -> graph_schema (see docs/architecture.md).
"""
