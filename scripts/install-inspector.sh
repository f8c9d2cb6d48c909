#!/usr/bin/env bash
# The MCP Inspector CLI, a real MCP client our tests talk to, in .peers/inspector.
exec bash "$(dirname "$0")/install-npm-peer.sh" inspector @modelcontextprotocol/inspector 2.12.0 mcp-inspector "MCP Inspector"
