"""Helpers for the import/export tests: a workspace full of awkward cases, and the whole
state of a workspace (every field of every item, attachment bytes included) to compare."""

from __future__ import annotations

import hashlib
from typing import Any

import sqlalchemy as sa

from noteloom import db
from noteloom.workspace import Workspace

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def state(ws: Workspace) -> dict[str, Any]:
    """Every live notebook, note, tag and attachment with all their fields; files by digest."""
    nb, n, t, nt, a = db.notebooks, db.notes, db.tags, db.note_tags, db.attachments
    with ws.read() as c:
        books = {
            r.id: (r.parent_id, r.title, r.created_time, r.updated_time)
            for r in c.execute(sa.select(nb).where(nb.c.deleted_time.is_(None)))
        }
        tag_title = {r.id: r.title for r in c.execute(sa.select(t))}
        tags_of: dict[str, list[str]] = {}
        for r in c.execute(sa.select(nt)):
            tags_of.setdefault(r.note_id, []).append(tag_title[r.tag_id])
        notes = {
            r.id: {
                "notebook_id": r.notebook_id, "title": r.title, "body": r.body, "is_todo": bool(r.is_todo),
                "todo_due": r.todo_due, "todo_completed": r.todo_completed, "source_url": r.source_url,
                "created_time": r.created_time, "updated_time": r.updated_time,
                "tags": sorted(tags_of.get(r.id, [])),
            }
            for r in c.execute(sa.select(n).where(n.c.deleted_time.is_(None)))
        }
        tags = {r.id: (r.title, r.title_key, r.created_time, r.updated_time) for r in c.execute(sa.select(t))}
        attachments = {}
        for r in c.execute(sa.select(a)):
            if r.note_id is not None and r.note_id not in notes:
                continue
            data = ws.attachment_path(r.id, r.filename).read_bytes()
            attachments[r.id] = {
                "note_id": r.note_id, "title": r.title, "filename": r.filename, "mime": r.mime,
                "size": r.size, "created_time": r.created_time, "updated_time": r.updated_time,
                "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
            }
    return {"notebooks": books, "notes": notes, "tags": tags, "attachments": attachments}


def files(ws: Workspace) -> dict[str, int]:
    """Every file under the data folder except the database, with its size."""
    root = ws.data_dir
    return {
        p.relative_to(root).as_posix(): p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith("noteloom.db")
    } | {p.relative_to(root).as_posix() + "/": 0 for p in root.rglob("*") if p.is_dir()}


def build_awkward_workspace(ws: Workspace) -> dict[str, str]:
    """Nested notebooks, to-dos, tags, attachments (linked, unlinked, orphan, same names),
    links between notes, CJK, titles no file system likes, bodies that look like front
    matter or end in odd whitespace, an unused tag, an empty notebook and a trashed note.
    Returns a few ids by name."""
    t0 = 1_700_000_000_123
    ids: dict[str, str] = {}
    work = ws.create_notebook("Work", created_time=t0, updated_time=t0 + 5)
    projects = ws.create_notebook("Projects", work.id, created_time=t0 + 1, updated_time=t0 + 1)
    alpha = ws.create_notebook("Alpha", projects.id, created_time=t0 + 2, updated_time=t0 + 9)
    diary = ws.create_notebook("日記", created_time=t0 + 3, updated_time=t0 + 3)
    odd = ws.create_notebook("a/b: c? <d>", created_time=t0 + 4, updated_time=t0 + 4)
    same1 = ws.create_notebook("Same", created_time=t0 + 5, updated_time=t0 + 5)
    same2 = ws.create_notebook("same", created_time=t0 + 6, updated_time=t0 + 6)
    under = ws.create_notebook("_drafts", created_time=t0 + 7, updated_time=t0 + 7)
    ws.create_notebook("Empty", work.id, created_time=t0 + 8, updated_time=t0 + 8)
    ws.create_notebook("CON", created_time=t0 + 9, updated_time=t0 + 9)

    plan = ws.create_note(
        "Project plan", "# Plan\n\n- [ ] ship\n- [x] test\n\n```sh\nrm -rf /tmp/x\n```\n", alpha.id,
        tags=["work", "planning"], created_time=t0 + 100, updated_time=t0 + 2000,
    )
    ids["plan"] = plan.id
    ids["milk"] = ws.create_note(
        "Buy milk", "", work.id, is_todo=True, todo_due=1_736_532_000_000, tags=["errands"],
        created_time=t0 + 101, updated_time=t0 + 101,
    ).id
    ids["taxes"] = ws.create_note(
        "File taxes", "Before April.", work.id, is_todo=True, todo_due=1_713_139_200_000,
        todo_completed=1_712_752_496_789, tags=["errands", "Money"], created_time=t0 + 102,
        updated_time=1_712_752_496_789,
    ).id
    ids["article"] = ws.create_note(
        "Interesting article", "Worth reading again.", projects.id,
        source_url="https://example.com/a?b=1&c=(2)", created_time=t0 + 103, updated_time=t0 + 104,
    ).id
    photo = ws.create_note("Whiteboard photo", "", projects.id, created_time=t0 + 105, updated_time=t0 + 105)
    png = ws.add_attachment(photo.id, PNG, "whiteboard.png", created_time=t0 + 106, updated_time=t0 + 107)
    txt = ws.add_attachment(photo.id, "議事録\n".encode(), "議事録 (draft).txt", title="Minutes",
                            created_time=t0 + 108, updated_time=t0 + 108)
    png2 = ws.add_attachment(photo.id, PNG + b"2", "whiteboard.png", created_time=t0 + 109, updated_time=t0 + 109)
    readme = ws.add_attachment(plan.id, b"no link to me", "README", mime="text/plain",
                               created_time=t0 + 110, updated_time=t0 + 110)
    orphan = ws.add_attachment(None, b"%PDF-1.4 orphan", "orphan.pdf", created_time=t0 + 111, updated_time=t0 + 111)
    ids.update(png=png.id, txt=txt.id, png2=png2.id, readme=readme.id, orphan=orphan.id, photo=photo.id)
    ws.update_note(
        photo.id,
        body=(
            f"From the meeting.\n\n![board](:/{png.id})\n[Minutes](:/{txt.id} \"the minutes\")\n"
            f"<img src=\":/{png2.id}\" width=\"200\">\n\nSee [the plan](:/{plan.id}).\n\n"
            f"[ref]: :/{png.id}\n"
        ),
    )
    ids["travel"] = ws.create_note(
        "東京の旅行メモ", "## 東京\n\n浅草寺に行く。\n\n## 北京\n\n参观故宫，吃烤鸭。🎉\n", diary.id,
        tags=["旅行"], created_time=t0 + 112, updated_time=t0 + 113,
    ).id
    ids["same_a"] = ws.create_note("Same", "first", same1.id, created_time=t0 + 114, updated_time=t0 + 114).id
    ids["same_b"] = ws.create_note("Same", "second", same1.id, created_time=t0 + 115, updated_time=t0 + 115).id
    ids["same_c"] = ws.create_note("SAME", "third", same1.id, created_time=t0 + 116, updated_time=t0 + 116).id
    ids["slashes"] = ws.create_note("a/b\\c:*?\"<>|", "x", odd.id, created_time=t0 + 117, updated_time=t0 + 117).id
    ids["con"] = ws.create_note("con", "device name", same2.id, created_time=t0 + 118, updated_time=t0 + 118).id
    ids["untitled"] = ws.create_note("", "no title at all", under.id, created_time=t0 + 119, updated_time=t0 + 119).id
    ids["fake_front"] = ws.create_note(
        "---", "---\ntitle: not front matter\n---\n\nreal body", under.id, created_time=t0 + 120, updated_time=t0 + 120
    ).id
    ids["whitespace"] = ws.create_note(
        "  spaced  title", "\n\nstarts with blank lines\r\nand CRLF\r\n  trailing spaces   \n\n\n", work.id,
        created_time=t0 + 121, updated_time=t0 + 121,
    ).id
    ids["yaml_ish"] = ws.create_note(
        "yes", "null: ~\n'quoted'", work.id, tags=["true", "2024"], created_time=t0 + 122, updated_time=t0 + 122
    ).id
    ws.ensure_tag("unused")
    trashed = ws.create_note("In the trash", "gone", work.id)
    ws.delete_note(trashed.id)
    return ids
