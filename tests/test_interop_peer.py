"""The real peer: Joplin's own terminal app imports what ``noteloom export --format jex`` writes.

Joplin gives every imported item a new id (and rewrites the ``:/id`` links to match), so
items are matched by what they are: notebooks by path, notes by notebook, title and
creation time, attachments by content. ``make test`` installs Joplin
(``scripts/install-joplin.sh``); without it this test is skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from interop_support import build_awkward_workspace, state
from noteloom.app import App
from noteloom.cli import cli
from noteloom.interop.bundle import Bundle, no_progress
from noteloom.interop.joplin import read_raw
from noteloom.interop.limits import Budget, ImportLimits

ROOT = Path(__file__).resolve().parents[1]
JOPLIN = Path(os.environ.get("JOPLIN_BIN", ROOT / ".peers" / "joplin" / "node_modules" / ".bin" / "joplin"))

pytestmark = pytest.mark.skipif(
    not JOPLIN.exists(), reason=f"Joplin's terminal app is not installed ({JOPLIN}); run scripts/install-joplin.sh"
)


def joplin(profile: Path, *args: str) -> str:
    done = subprocess.run(
        [str(JOPLIN), "--profile", str(profile), *args],
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "HOME": str(profile.parent)},
    )
    assert done.returncode == 0, f"joplin {' '.join(args)} failed: {done.stdout}\n{done.stderr}"
    return done.stdout


def paths_of(books: dict[str, tuple[str | None, str]]) -> dict[str, str]:
    """Notebook id -> ``Parent/Child`` title path."""
    def path(i: str) -> str:
        parent, title = books[i]
        return f"{path(parent)}/{title}" if parent else title
    return {i: path(i) for i in books}


def test_joplin_imports_a_noteloom_jex_with_everything_intact(app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = app.workspace
    build_awkward_workspace(ws)
    ours = state(ws)
    archive = tmp_path / "noteloom.jex"
    monkeypatch.setenv("NOTELOOM_HOME", str(ws.data_dir))
    result = CliRunner().invoke(cli, ["export", str(archive), "--format", "jex"])
    assert result.exit_code == 0, result.output

    # Joplin's own import has twice dropped one note-tag link on a machine loaded past its
    # cores (stops 20 and 23; never idle, never our archive: the links are all in it). The
    # round trip through Joplin is made again once, in a fresh profile, when that exact symptom
    # shows; every assertion below still holds of the round trip that is checked.
    links = sum(len(n["tags"]) for n in ours["notes"].values())
    for attempt in (1, 2):
        profile = tmp_path / f"joplin-profile-{attempt}"
        joplin(profile, "import", str(archive), "--format", "jex", "--force")
        raw = tmp_path / f"joplin-raw-{attempt}"
        joplin(profile, "export", "--format", "raw", str(raw))
        staging = tmp_path / f"staging-{attempt}"
        staging.mkdir()
        back: Bundle = read_raw(raw, staging, Budget(ImportLimits()), no_progress)
        kept = sum(len(n.tags) for n in back.notes)
        if kept == links or attempt == 2:
            break
        warnings.warn(f"Joplin kept {kept} of {links} note-tag links on import; trying the round trip again",
                      stacklevel=1)
    assert back.notices.messages() == []

    # Notebooks: the same tree, titles and times.
    our_paths = paths_of({i: (b[0], b[1]) for i, b in ours["notebooks"].items()})
    their_paths = paths_of({b.id: (b.parent_id, b.title) for b in back.books})
    assert sorted(their_paths.values()) == sorted(our_paths.values())
    their_books = {their_paths[b.id]: (b.created_time, b.updated_time) for b in back.books}
    assert their_books == {our_paths[i]: (b[2], b[3]) for i, b in ours["notebooks"].items()}

    # Attachments Joplin keeps are those a note links (it drops unlinked resources on export).
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    linked = {m for n in ours["notes"].values() for m in re.findall(r":/([0-9a-f]{32})", n["body"])}
    our_atts = {i: a for i, a in ours["attachments"].items() if i in linked}
    their_atts = {a.id: a for a in back.attachments}
    att_map = {}
    for old, a in our_atts.items():
        match = [t for t in their_atts.values() if digest(t.source) == a["sha256"]]
        assert len(match) == 1, f"attachment {a['filename']!r} did not come back from Joplin"
        t = match[0]
        assert (t.title, t.filename, t.mime, t.size, t.created_time, t.updated_time) == (
            a["title"], a["filename"], a["mime"], a["size"], a["created_time"], a["updated_time"]
        )
        att_map[old] = t.id
    assert len(their_atts) == len(our_atts)

    # Notes: every field; bodies equal once ids are translated to Joplin's new ones.
    def key(path: str, title: str, created: int) -> tuple[str, str, int]:
        return (path, title, created)

    theirs = {key(their_paths.get(n.notebook_id or "", ""), n.title, n.created_time): n for n in back.notes}
    assert len(theirs) == len(back.notes) == len(ours["notes"])
    note_map = {
        old: theirs[key(our_paths[n["notebook_id"]], n["title"], n["created_time"])].id
        for old, n in ours["notes"].items()
    }
    ids = {**note_map, **att_map}
    for n in ours["notes"].values():
        t = theirs[key(our_paths[n["notebook_id"]], n["title"], n["created_time"])]
        body = re.sub(r":/([0-9a-f]{32})", lambda m: f":/{ids.get(m.group(1), m.group(1))}", n["body"])
        got: dict[str, Any] = {
            "body": t.body, "is_todo": t.is_todo, "todo_due": t.todo_due, "todo_completed": t.todo_completed,
            "source_url": t.source_url, "updated_time": t.updated_time, "tags": sorted(t.tags),
        }
        assert got == {
            "body": body, "is_todo": n["is_todo"], "todo_due": n["todo_due"], "todo_completed": n["todo_completed"],
            "source_url": n["source_url"], "updated_time": n["updated_time"], "tags": n["tags"],
        }, n["title"]
    for old, a in our_atts.items():
        assert their_atts[att_map[old]].note_id == note_map[a["note_id"]]
    assert {t.title for t in back.tags} == {t[0] for t in ours["tags"].values() if t[0] != "unused"}
