"""How the world talks to Palimpsest: the MCP server, the CLI, ingestion and configuration."""
