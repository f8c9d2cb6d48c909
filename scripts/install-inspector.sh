#!/usr/bin/env bash
# The MCP Inspector CLI, a real MCP client our tests talk to, installed from npm into
# .peers/inspector (git-ignored). Idempotent: does nothing when that version is there.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=2.12.0
DEST=.peers/inspector
PKG="$DEST/node_modules/@modelcontextprotocol/inspector/package.json"
if [ -f "$PKG" ] && grep -q "\"version\": \"$VERSION\"" "$PKG" && [ -x "$DEST/node_modules/.bin/mcp-inspector" ]; then
  echo "MCP Inspector $VERSION is installed in $DEST"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: apt-get install -y nodejs npm" >&2; exit 1; }
mkdir -p "$DEST"
[ -f "$DEST/package.json" ] || echo '{"name": "noteloom-test-peer-inspector", "private": true}' > "$DEST/package.json"
npm install --prefix "$DEST" --no-audit --no-fund --save-exact --loglevel=error "@modelcontextprotocol/inspector@$VERSION"
echo "MCP Inspector $VERSION installed in $DEST"
