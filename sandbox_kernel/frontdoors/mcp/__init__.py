"""The MCP server: sandboxes as tools for agents (``sandbox-kernel mcp``)."""
