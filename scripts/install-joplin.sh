#!/usr/bin/env bash
# Install Joplin's terminal app, the real peer of the import/export tests, into .peers/joplin.
# Idempotent: returns at once when the pinned version is already there.
set -euo pipefail

version="3.5.1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.peers/joplin"
bin="$dest/node_modules/.bin/joplin"

if [ -x "$bin" ] && [ "$(cat "$dest/.installed" 2>/dev/null)" = "$version" ]; then
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install-joplin: npm is needed (Node.js 20); scripts/install-system-deps.sh installs it" >&2
    exit 1
fi

# The keychain module Joplin pulls in is compiled at install time against libsecret.
if ! dpkg -s libsecret-1-dev >/dev/null 2>&1; then
    apt-get install -y libsecret-1-dev || { apt-get update && apt-get install -y libsecret-1-dev; }
fi

mkdir -p "$dest"
cd "$dest"
[ -f package.json ] || printf '{"private": true}\n' > package.json
# Native modules build against the system's Node headers (no header download needed).
npm_config_nodedir=/usr npm install --no-audit --no-fund "joplin@$version"
"$bin" version >/dev/null
printf '%s\n' "$version" > .installed
echo "joplin $version installed in .peers/joplin"
