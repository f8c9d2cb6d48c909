#!/usr/bin/env bash
# Debian packages the test suite uses: a PostgreSQL server and Chromium. Idempotent.
set -euo pipefail
need=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || [ -n "$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)" ] || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]} (install them with apt-get as root)" >&2
    exit 1
  fi
  echo "installing system packages: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# pgvector for the PostgreSQL above (semantic search tests); it has no bookworm package.
bash "$(dirname "$0")/install-pgvector.sh"
