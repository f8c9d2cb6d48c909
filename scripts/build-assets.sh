#!/usr/bin/env bash
# `make assets`: install the pinned browser libraries of assets/package.json (exact versions,
# locked by assets/package-lock.json) and copy only the files the pages load, with their
# licences, into src/noteloom/web/static/vendor/. The copies are committed, so serving
# noteloom never needs Node or a CDN; run this again only to change a version.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
assets="$root/assets"
vendor="$root/src/noteloom/web/static/vendor"

cd "$assets"
# ci installs exactly what the lock file says and fails if package.json disagrees with it;
# --ignore-scripts: no package gets to run code on this machine at install time.
npm ci --ignore-scripts --no-audit --no-fund

copy() {  # copy PACKAGE DEST FILE...
    local pkg="$1" dest="$vendor/$2"
    shift 2
    rm -rf "$dest"
    mkdir -p "$dest"
    for f in "$@"; do
        cp "node_modules/$pkg/$f" "$dest/"
    done
}

copy swagger-ui-dist swagger-ui swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE
# The stylesheet names its source map; the map is not shipped, so drop the reference
# (the browser would otherwise ask for a file that is not there).
sed -i '/^\/\*# sourceMappingURL=/d' "$vendor/swagger-ui/swagger-ui.css"

echo "vendored into $vendor:"
(cd "$vendor" && find . -type f | sort | xargs ls -l | awk '{print $5, $9}')
