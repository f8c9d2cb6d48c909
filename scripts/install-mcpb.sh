#!/usr/bin/env bash
# The MCPB CLI (@anthropic-ai/mcpb), whose `mcpb validate` checks the bundles `noteloom mcp
# bundle` writes, in .peers/mcpb.
exec bash "$(dirname "$0")/install-npm-peer.sh" mcpb @anthropic-ai/mcpb 2.1.2 mcpb mcpb
