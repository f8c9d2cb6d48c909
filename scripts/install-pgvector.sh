#!/usr/bin/env bash
# The pgvector extension for the system's PostgreSQL (bookworm has no package for it):
# built from Debian trixie's source package against postgresql-server-dev. Idempotent:
# does nothing when the extension is installed already. Needs root (apt-get, make install).
set -euo pipefail
PG_BIN="${NOTELOOM_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/postgres" ]; then
  echo "install-pgvector: no PostgreSQL server found; run scripts/install-system-deps.sh first" >&2
  exit 1
fi
PG_MAJOR="$(basename "$(dirname "$PG_BIN")")"
if [ -f "/usr/share/postgresql/$PG_MAJOR/extension/vector.control" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-pgvector: pgvector is missing for PostgreSQL $PG_MAJOR; run this script as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
need=()
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
# pg_config alone comes with the client; the server headers come with the -dev package.
if [ ! -x "$PG_CONFIG" ] || [ ! -f "$("$PG_CONFIG" --includedir-server)/postgres.h" ]; then
  need+=("postgresql-server-dev-$PG_MAJOR")
fi
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v make >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# A private apt state that knows trixie's sources only, so the system's apt setup is untouched.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/src"
cat >"$work/sources.list" <<LIST
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
LIST
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$work/lists" -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -qq
(cd "$work/src" && apt-get "${apt_opts[@]}" source -qq pgvector >/dev/null)
srcdir="$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -1)"
# OPTFLAGS="" : no -march=native, so the build runs on any x86-64 machine.
make -C "$srcdir" -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null
make -C "$srcdir" -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" install >/dev/null
echo "install-pgvector: pgvector installed for PostgreSQL $PG_MAJOR" >&2
