"""Query-time logic shared by the MCP tools and the CLI: grep (text, regex, semantic, hybrid), recall, context assembly.

The adapters call these as ``retrieval.grep.grep_memories`` and so on: the tools share
the domain functions' names, and module-qualified calls keep both readable.
"""

from palimpsest.server.retrieval import context, grep, hybrid, recall

__all__ = ["context", "grep", "hybrid", "recall"]
