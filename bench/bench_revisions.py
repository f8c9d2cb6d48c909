"""Revision storage: 1,000 small appends to one note, and 300 small edits inside a long one.

Run from the repository root::

    .venv/bin/python -m bench.bench_revisions [--appends N] [--edits N] [--seed S]

For each scenario it prints the bytes the history stores (titles, full versions and edit
scripts, UTF-8) against the bytes changed, what one full copy per version would have
stored (as before migration 0007), the revisions table's size on disk (SQLite's dbstat:
rows, ids, times and indexes included), and the time to save, to list the history and to
rebuild the oldest and a middle version. Target: history ≤ 2× the appended text.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import closing, suppress
from pathlib import Path

import sqlalchemy as sa

from noteloom import db
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.workspace import Workspace

TARGET_RATIO = 2.0
_WORDS = ("river", "heron", "walked", "note", "morning", "rain", "bridge", "wrote", "field", "today")


def _line(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(7, 10))]
    return f"- {' '.join(words)}.\n"


def _stored(ws: Workspace, note_id: str) -> tuple[int, int]:
    """(text bytes the history stores, bytes of the revisions table and its indexes on disk)."""
    r = db.revisions

    def size(col: sa.ColumnElement[str]) -> sa.ColumnElement[int]:
        return sa.func.coalesce(sa.func.length(sa.cast(col, sa.LargeBinary)), 0)

    with ws.read() as c:
        text = c.execute(
            sa.select(sa.func.sum(size(r.c.title) + size(r.c.body) + size(r.c.delta))).where(r.c.note_id == note_id)
        ).scalar_one()
    # The standard sqlite3 module has the dbstat table (pysqlite3, which the engine may use,
    # does not); the workspace holds this one note's history only.
    disk = 0
    with closing(sqlite3.connect(str(ws.engine.url.database))) as raw, suppress(sqlite3.OperationalError):
        disk = raw.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name = 'revisions' OR name LIKE 'ix_revisions%'"
            " OR name LIKE 'sqlite_autoindex_revisions%'"
        ).fetchone()[0]
    return int(text or 0), int(disk or 0)


def _ms(f: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        f()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _scenario(name: str, first: str, edits: list[Callable[[str], str]]) -> None:
    with tempfile.TemporaryDirectory(prefix="noteloom-bench-rev-") as home:
        app = open_app(load_settings({"NOTELOOM_HOME": str(Path(home) / "home")}), load_entry_points=False)
        try:
            _measure(app.workspace, name, first, edits)
        finally:
            app.close()


def _measure(ws: Workspace, name: str, first: str, edits: list[Callable[[str], str]]) -> None:
    note = ws.create_note(name, first)
    body, changed, full_copies = first, 0, 0
    saves = []
    for edit in edits:
        new = edit(body)
        full_copies += len(body.encode())
        changed += abs(len(new.encode()) - len(body.encode())) or 1
        started = time.perf_counter()
        ws.update_note(note.id, body=new)
        saves.append((time.perf_counter() - started) * 1000)
        body = new
    text, disk = _stored(ws, note.id)
    listed = ws.list_revisions(note.id)
    oldest, second, middle = listed[-1].id, listed[-2].id, listed[len(listed) // 2].id
    print(f"{name}: {len(edits)} saves, note now {len(body.encode()):,} bytes")
    print(f"  bytes changed          {changed:>12,}")
    print(f"  history text stored    {text:>12,}  ({text / changed:.2f}x the change; target <= {TARGET_RATIO:.0f}x)")
    print(f"  one full copy each     {full_copies:>12,}  ({full_copies / max(text, 1):.0f}x what is stored now)")
    if disk:
        print(f"  table+indexes on disk  {disk:>12,}  ({disk / len(listed):.0f} bytes per revision)")
    print(f"  save                   {statistics.mean(saves):>9.2f} ms mean, "
          f"{sorted(saves)[int(len(saves) * 0.95)]:.2f} ms p95")
    print(f"  list history           {_ms(lambda: ws.list_revisions(note.id)):>9.2f} ms")
    print(f"  rebuild the oldest     {_ms(lambda: ws.revision_text(oldest)):>9.2f} ms")
    print(f"  rebuild the 2nd oldest {_ms(lambda: ws.revision_text(second)):>9.2f} ms")
    print(f"  rebuild a middle one   {_ms(lambda: ws.revision_text(middle)):>9.2f} ms")
    print(f"  restore the oldest     {_ms(lambda: ws.restore_revision(oldest), repeat=1):>9.2f} ms")
    if text > TARGET_RATIO * changed and name == "appends":
        print("  ABOVE TARGET")


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_revisions", description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args, _ = parser.parse_known_args()  # `python -m bench` hands every module the same arguments
    rng = random.Random(args.seed)

    def append(body: str) -> str:
        return body + _line(rng)

    def inside(body: str) -> str:
        at = body.find("\n", rng.randrange(len(body))) + 1
        return body[:at] + _line(rng) + body[at:]

    _scenario("appends", "# Journal\n", [append] * args.appends)
    _scenario("edits inside a long note", "".join(_line(rng) for _ in range(800)), [inside] * args.edits)


if __name__ == "__main__":
    main()
