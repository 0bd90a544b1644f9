"""The `palimpsest` command line: a thin adapter over the same domain functions as the MCP tools."""
