#!/usr/bin/env bash
# One npm CLI our tests talk to, at a pinned version, installed into .peers/DIR (git-ignored):
#   install-npm-peer.sh DIR PACKAGE VERSION BIN "LABEL"
# Idempotent: does nothing when that version and its BIN are there.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1 PACKAGE=$2 VERSION=$3 BIN=$4 LABEL=$5
DEST=.peers/$DIR
PKG="$DEST/node_modules/$PACKAGE/package.json"
if [ -f "$PKG" ] && grep -q "\"version\": \"$VERSION\"" "$PKG" && [ -x "$DEST/node_modules/.bin/$BIN" ]; then
  echo "$LABEL $VERSION is installed in $DEST"
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: apt-get install -y nodejs npm" >&2; exit 1; }
mkdir -p "$DEST"
[ -f "$DEST/package.json" ] || echo "{\"name\": \"noteloom-test-peer-$DIR\", \"private\": true}" > "$DEST/package.json"
npm install --prefix "$DEST" --no-audit --no-fund --save-exact --loglevel=error "$PACKAGE@$VERSION"
echo "$LABEL $VERSION installed in $DEST"
