"""The MCP adapter: the FastMCP app, its tools (thin wrappers over domain functions), partitions and tokens."""
