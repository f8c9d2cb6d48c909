#!/usr/bin/env bash
# `make assets`: install the pinned browser libraries of assets/package.json (exact versions,
# locked by assets/package-lock.json), bundle noteloom's own entry points (assets/src/*.js)
# with esbuild, and copy only the files the pages load, with their licences, into
# src/noteloom/web/static/vendor/ (and the accessibility checker the browser tests inject into
# tests/browser/vendor/). The copies are committed, so serving noteloom never needs Node or a
# CDN; run this again only to change a version or an entry point.
#
#   ASSETS_NO_INSTALL=1 bash scripts/build-assets.sh   # rebuild from the installed node_modules
#   bash scripts/build-assets.sh editor markdown        # only those bundles, from node_modules
#   bash scripts/build-assets.sh mermaid                # only the mermaid copy, from node_modules
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
assets="$root/assets"
vendor="$root/src/noteloom/web/static/vendor"
testvendor="$root/tests/browser/vendor"

cd "$assets"

bundle() {  # bundle NAME: assets/src/NAME.js -> vendor/NAME/NAME.js
    local name="$1"
    rm -rf "${vendor:?}/$name"
    mkdir -p "$vendor/$name"
    node_modules/.bin/esbuild "src/$name.js" --bundle --minify --format=iife --target=es2020 \
        --legal-comments=eof --log-level=warning --outfile="$vendor/$name/$name.js"
}

copy() {  # copy PACKAGE DEST FILE...
    local pkg="$1" dest="$vendor/$2"
    shift 2
    rm -rf "$dest"
    mkdir -p "$dest"
    for f in "$@"; do
        cp -r "node_modules/$pkg/$f" "$dest/"
    done
}

# Diagrams in the page (the server keeps the fence as code): mermaid's own self-contained IIFE
# build (it sets the global `mermaid`), copied as published; render.js loads it only for a page
# that shows a ```mermaid block. Not an assets/src entry, so `build-assets.sh mermaid` copies it.
vendor_mermaid() {
    copy mermaid mermaid dist/mermaid.min.js LICENSE
}

if [[ $# -gt 0 ]]; then
    for name in "$@"; do
        if [[ "$name" == mermaid ]]; then vendor_mermaid; else bundle "$name"; fi
    done
    exit 0
fi

if [[ "${ASSETS_NO_INSTALL:-}" != "1" ]]; then
    # ci installs exactly what the lock file says and fails if package.json disagrees with it;
    # --ignore-scripts: no package gets to run code on this machine at install time.
    npm ci --ignore-scripts --no-audit --no-fund
fi

copy swagger-ui-dist swagger-ui swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css LICENSE NOTICE
# The stylesheet names its source map; the map is not shipped, so drop the reference
# (the browser would otherwise ask for a file that is not there).
sed -i '/^\/\*# sourceMappingURL=/d' "$vendor/swagger-ui/swagger-ui.css"

# Math in the page (the server keeps the source): KaTeX's script, stylesheet and fonts.
copy katex katex dist/katex.min.js dist/katex.min.css dist/fonts LICENSE
# Every browser the app supports takes WOFF2, the first format the stylesheet offers.
find "$vendor/katex/fonts" -type f ! -name "*.woff2" -delete
# Code highlighting themes for both colour schemes (the highlighter itself is bundled below).
copy highlight.js highlight styles/github.min.css styles/github-dark.min.css LICENSE
vendor_mermaid

# noteloom's bundles: each assets/src/NAME.js becomes vendor/NAME/NAME.js, one IIFE script
# that sets a global (see the entry's header), minified, with the licences of what it holds.
shopt -s nullglob
for entry in src/*.js; do
    bundle "$(basename "$entry" .js)"
done

# The accessibility checker is for the browser tests only; it is not shipped in the package.
mkdir -p "$testvendor"
cp node_modules/axe-core/axe.min.js node_modules/axe-core/LICENSE "$testvendor/"

echo "vendored into $vendor:"
(cd "$vendor" && find . -type f | sort | xargs ls -l | awk '{print $5, $9}' | grep -v '/fonts/')
