"""The web surface: pages, the JSON API under /api/v1 and MCP at /mcp, all behind the token."""
