"""mcp_server layer of tianshu-mcp (see docs/architecture.md §2)."""
