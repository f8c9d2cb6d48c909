#!/usr/bin/env bash
# The real peers our integration tests talk to, installed from npm into .peers/. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
for script in scripts/install-inspector.sh scripts/install-joplin.sh scripts/install-conformance.sh scripts/install-mcpb.sh; do
  if [ -f "$script" ]; then bash "$script"; fi
done
