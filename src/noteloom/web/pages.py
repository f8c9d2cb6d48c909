"""Server-rendered pages: notebooks, notes, one note rendered from Markdown."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.templating import Jinja2Templates

from noteloom.app import App
from noteloom.errors import NotFound
from noteloom.semantic import IndexStatus, SemanticIndex
from noteloom.web.render import render_markdown

templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))


def _when(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


templates.env.filters["when"] = _when


def router(app: App) -> APIRouter:
    r = APIRouter(include_in_schema=False)
    ws = app.workspace

    def tree() -> list[dict[str, Any]]:
        books = ws.list_notebooks()
        children: dict[str | None, list[Any]] = {}
        ids = {b.id for b in books}
        for b in books:
            children.setdefault(b.parent_id if b.parent_id in ids else None, []).append(b)
        out: list[dict[str, Any]] = []

        def walk(parent: str | None, depth: int) -> None:
            for b in children.get(parent, []):
                out.append({"book": b, "depth": depth})
                walk(b.id, depth + 1)

        walk(None, 0)
        return out

    def index_status() -> IndexStatus | None:
        index = app.services.get("semantic")
        return index.status() if isinstance(index, SemanticIndex) else None

    @r.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> HTMLResponse:
        books, notes, index = await to_thread.run_sync(lambda: (tree(), ws.list_notes(limit=50), index_status()))
        return templates.TemplateResponse(
            request, "index.html",
            {"tree": books, "notes": notes, "current": None, "title": "Recent notes", "index": index},
        )

    @r.get("/notebooks/{notebook_id}", response_class=HTMLResponse)
    async def notebook(request: Request, notebook_id: str) -> HTMLResponse:
        def load() -> tuple[Any, Any, Any]:
            return tree(), ws.get_notebook(notebook_id), ws.list_notes(notebook_id, limit=500)

        try:
            books, book, notes = await to_thread.run_sync(load)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        return templates.TemplateResponse(
            request, "index.html", {"tree": books, "notes": notes, "current": book.id, "title": book.title}
        )

    @r.get("/notes/{note_id}", response_class=HTMLResponse)
    async def note(request: Request, note_id: str) -> HTMLResponse:
        try:
            n = await to_thread.run_sync(lambda: ws.get_note(note_id))
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        books = await to_thread.run_sync(tree)
        html = await to_thread.run_sync(render_markdown, n.body)
        return templates.TemplateResponse(
            request, "note.html", {"tree": books, "note": n, "html": html, "current": n.notebook_id}
        )

    @r.get("/attachments/{attachment_id}")
    async def attachment(attachment_id: str) -> FileResponse:
        try:
            a = await to_thread.run_sync(lambda: ws.get_attachment(attachment_id))
            path = ws.attachment_path(a.id, a.filename)
        except Exception as exc:
            raise HTTPException(404, f"no attachment {attachment_id!r}") from exc
        if not path.exists():
            raise HTTPException(404, f"the file of attachment {attachment_id!r} is missing")
        return FileResponse(
            path, media_type=a.mime, filename=a.filename, headers={"Content-Security-Policy": "sandbox"}
        )

    return r
