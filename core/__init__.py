"""core layer of tianshu-mcp (see 00-design §2)."""
