"""The built-in workspace tools: search, read and list notes (on by default), write them (off).

Every tool registers through the same ``register_tools`` hook a third-party plugin
uses. Handlers do their blocking work in one worker thread each and honour the
notebook scope: whatever lies outside it does not exist for a tool, with the very
same message as a missing thing. Dates travel as ISO 8601 strings (UTC out), since
models read and write those far better than epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from anyio import to_thread
from sqlalchemy.engine import Connection

from noteloom.errors import NotFound
from noteloom.outline import outline_text, resolve_section, section_text
from noteloom.plugins import hookimpl
from noteloom.semantic import hybrid_search
from noteloom.tools import (
    Handler,
    ToolContext,
    ToolDef,
    ToolError,
    ToolResult,
    note_missing,
    notebook_missing,
)
from noteloom.workspace import Note, Notebook

#: Characters of body (or outline) one read returns unless the caller asks otherwise.
READ_BUDGET = 8000
#: Most ids one read_notes call takes: a tiny share per note is worse than choosing.
READ_NOTES_MAX = 20
SEARCH_MAX = 100


# -- helpers ------------------------------------------------------------------------------


def threaded(fn: Callable[[ToolContext, dict[str, Any]], Any]) -> Handler:
    """An async handler running ``fn(ctx, args)`` in one worker thread (the database is sync)."""

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        return await to_thread.run_sync(fn, ctx, args)

    handler.__name__ = fn.__name__
    return handler


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (``None`` stays ``None``)."""
    if ms is None:
        return None
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{ms % 1000:03d}Z" if ms % 1000 else f"{text}Z"


def parse_time(value: Any, arg: str) -> int | None:
    """An ISO 8601 date or date-time from a tool argument as epoch ms; UTC unless an offset is given."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if " " in text else text)
    except ValueError:
        raise ToolError(
            f"argument {arg!r}: {value!r} is not an ISO 8601 date; write it like "
            "2026-12-01 or 2026-12-01T09:30:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    ms = int(parsed.timestamp() * 1000)
    if ms <= 0:
        raise ToolError(f"argument {arg!r}: {value!r} is before 1970; give a later date")
    return ms


class Books:
    """The notebooks a tool call may see, loaded once per call, with their title paths."""

    def __init__(self, ctx: ToolContext, conn: Connection, *, include_deleted: bool = False) -> None:
        self.all = ctx.workspace.list_notebooks(with_counts=False, include_deleted=include_deleted, conn=conn)
        self.by_id = {b.id: b for b in self.all}
        allowed = ctx.scope.allowed_ids(self.all)
        self.visible = [b for b in self.all if allowed is None or b.id in allowed]
        self.visible_ids = {b.id for b in self.visible}
        self.scope = ctx.scope

    def chain(self, notebook_id: str) -> list[Notebook]:
        """The notebooks from the root down to ``notebook_id`` (cycles and gaps cut short)."""
        out: list[Notebook] = []
        cur = self.by_id.get(notebook_id)
        while cur is not None and len(out) < 64 and cur not in out:
            out.append(cur)
            cur = self.by_id.get(cur.parent_id) if cur.parent_id else None
        return list(reversed(out))

    def path(self, notebook_id: str) -> str:
        return "/".join(b.title for b in self.chain(notebook_id))

    def in_scope(self, notebook_id: str) -> bool:
        return notebook_id in self.visible_ids

    def in_scope_chain(self, notebook_id: str) -> bool:
        """Scope test that also works for trashed notebooks (they are not in ``visible``)."""
        chain = self.chain(notebook_id)
        return bool(chain) and self.scope.allows_chain(chain)

    def title(self, notebook_id: str) -> str:
        b = self.by_id.get(notebook_id)
        return b.title if b else ""

    def resolve(self, ref: str) -> Notebook:
        """A visible notebook by id, ``Parent/Child`` path or title (case-insensitive)."""
        wanted = ref.strip()
        if wanted in self.visible_ids:
            return self.by_id[wanted]
        key = wanted.strip("/").lower()
        matches = [b for b in self.visible if self.path(b.id).lower() == key]
        if not matches:
            matches = [b for b in self.visible if b.title.lower() == key]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise ToolError(notebook_missing(ref))
        paths = ", ".join(f"{self.path(b.id)!r} ({b.id})" for b in matches)
        raise ToolError(f"several notebooks are named {ref!r}: {paths}; give the path or the id")


def visible_note(ctx: ToolContext, conn: Connection, note_id: str) -> Note:
    """A live note the scope lets tools see; missing, trashed-out-of-scope and
    out-of-scope notes all read as missing."""
    try:
        note = ctx.workspace.get_note(note_id, include_deleted=True, conn=conn)
    except NotFound:
        raise ToolError(note_missing(note_id)) from None
    trashed = note.deleted_time is not None
    if not ctx.scope.unrestricted:
        books = Books(ctx, conn, include_deleted=trashed)
        if not (books.in_scope_chain(note.notebook_id) if trashed else books.in_scope(note.notebook_id)):
            raise ToolError(note_missing(note_id))
    if trashed:
        raise ToolError(
            f"note {note_id!r} is in the trash; restore_note brings it back (list_trash lists the trash)"
        )
    return note


def notebook_titles(ctx: ToolContext, conn: Connection, notebook_ids: Collection[str]) -> dict[str, str]:
    """Titles of a few notebooks, in one query (listing every notebook costs more)."""
    return {b.id: b.title for b in ctx.workspace.notebooks_by_id(set(notebook_ids), conn=conn).values()}


def note_meta(note: Note, notebook_title: str) -> dict[str, Any]:
    """What every note-shaped answer carries besides the body."""
    out: dict[str, Any] = {
        "id": note.id,
        "title": note.title,
        "notebook_id": note.notebook_id,
        "notebook": notebook_title,
        "tags": list(note.tags),
        "created_time": iso(note.created_time),
        "updated_time": iso(note.updated_time),
        "is_todo": note.is_todo,
        "todo_due": iso(note.todo_due),
        "todo_completed": iso(note.todo_completed),
    }
    if note.source_url:
        out["source_url"] = note.source_url
    return out


def share_budget(lengths: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` characters over texts of ``lengths``: short ones take what they
    need, the rest is split evenly over the longer ones. ``budget == 0`` = no limit."""
    if budget == 0:
        return list(lengths)
    alloc = [0] * len(lengths)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    remaining = budget
    for k, i in enumerate(order):
        left = len(order) - k
        if lengths[i] <= remaining // left:
            alloc[i] = lengths[i]
            remaining -= lengths[i]
            continue
        base, extra = divmod(remaining, left)
        for j, idx in enumerate(order[k:]):
            alloc[idx] = base + (1 if j < extra else 0)
        break
    return alloc


def untrusted_if(payload: dict[str, Any], notes: Sequence[Note]) -> ToolResult | dict[str, Any]:
    """Text from outside the user's own writing (clipped from a URL) is flagged for the agent."""
    if any(n.source_url for n in notes):
        return ToolResult(payload, untrusted=True)
    return payload


def text_page(text: str, offset: int, max_chars: int, *, whole_lines: bool = False) -> tuple[str, int]:
    """The page of ``text`` from ``offset`` (at most ``max_chars``, 0 = all) and where it ends.

    ``whole_lines`` ends a cut page after its last full line when there is one.
    """
    if offset > len(text):
        raise ToolError(f"offset {offset} is past the end: the text is {len(text)} characters long")
    end = len(text) if max_chars == 0 else min(len(text), offset + max_chars)
    if whole_lines and end < len(text):
        cut = text.rfind("\n", offset, end)
        if cut > offset:
            end = cut + 1
    return text[offset:end], end


# -- schemas --------------------------------------------------------------------------------

_ID = {"type": "string", "description": "The note's id (32 hex characters), as search_notes returns it."}


def _nullable(*types: str, **extra: Any) -> dict[str, Any]:
    """``anyOf`` single types rather than a type array: clients that map schemas onto a
    one-type dialect (function declarations of some model providers) understand it."""
    return {"anyOf": [{"type": t} for t in (*types, "null")], **extra}


TIME_SCHEMA = {"type": "string", "description": "ISO 8601 UTC date-time."}
_MAYBE_TIME = _nullable("string", description="ISO 8601 UTC date-time, or null.")
_NOTE_META_PROPS: dict[str, Any] = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "notebook_id": {"type": "string"},
    "notebook": {"type": "string", "description": "The notebook's title."},
    "tags": {"type": "array", "items": {"type": "string"}},
    "created_time": TIME_SCHEMA,
    "updated_time": TIME_SCHEMA,
    "is_todo": {"type": "boolean"},
    "todo_due": _MAYBE_TIME,
    "todo_completed": _MAYBE_TIME,
    "source_url": {"type": "string", "description": "Where the note was clipped from, if it was."},
}
_NOTE_META_REQUIRED = ["id", "title", "notebook_id", "notebook", "tags", "created_time", "updated_time", "is_todo"]
_PAGE_PROPS: dict[str, Any] = {
    "body": {"type": "string"},
    "body_length": {"type": "integer", "description": "Characters in the whole text being paged."},
    "body_offset": {"type": "integer"},
    "body_returned_chars": {"type": "integer"},
    "has_more": {"type": "boolean"},
    "is_outline": {"type": "boolean"},
    "message": {"type": "string"},
}


def input_schema_of(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An input schema: closed, so a misspelt argument is an error rather than ignored."""
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def output_schema_of(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An output schema: open to fields added later."""
    return {"type": "object", "properties": props, "required": list(required)}


_NOTE_OUT = output_schema_of({**_NOTE_META_PROPS, "body_length": {"type": "integer"}}, [*_NOTE_META_REQUIRED, "body_length"])
_NOTEBOOK_OUT = output_schema_of(
    {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "parent_id": _nullable("string"),
        "path": {"type": "string", "description": "Titles from the top, joined by '/'."},
        "note_count": {"type": "integer"},
    },
    ["id", "title", "parent_id", "path"],
)


# -- read tools -----------------------------------------------------------------------------


def _search(ctx: ToolContext, args: dict[str, Any]) -> Any:
    limit = int(args.get("limit", 20))
    offset = int(args.get("offset", 0))
    ws = ctx.workspace
    # One read transaction for the scope, the hits and their notebooks: one snapshot,
    # and one BEGIN instead of three on the busiest tool.
    with ws.read() as c:
        scoped = None if ctx.scope.unrestricted else Books(ctx, c).visible_ids
        # One extra hit tells whether there is a next page without counting every match.
        hits = hybrid_search(
            ws, ctx.services.get("semantic"), args["query"], mode=args.get("mode"),
            limit=limit + 1, offset=offset, notebook_ids=scoped, conn=c,
        ).hits
        page = hits[:limit]
        titles = notebook_titles(ctx, c, {h.notebook_id for h in page})
        clipped = ws.clipped_ids([h.id for h in page], conn=c)
    results = []
    for h in page:
        row: dict[str, Any] = {
            "id": h.id,
            "title": h.title,
            "notebook_id": h.notebook_id,
            "notebook": titles.get(h.notebook_id, ""),
            "updated_time": iso(h.updated_time),
            "snippet": h.snippet,
        }
        if h.section is not None:
            row["section"] = h.section
            row["section_heading"] = h.section_heading or ""
        results.append(row)
    payload: dict[str, Any] = {"results": results, "has_more": len(hits) > limit}
    if len(hits) > limit:
        payload["next_offset"] = offset + limit
    return ToolResult(payload, untrusted=True) if clipped else payload


SEARCH_NOTES = ToolDef(
    name="search_notes",
    title="Search notes",
    description=(
        "Search the user's notes, one result per note, best matches first. mode: keyword "
        "(exact words), semantic (by meaning, other words welcome) or hybrid (both fused; the "
        "default when the semantic index is on, keyword otherwise). In keyword syntax words "
        'must all match (AND); "quoted phrases", prefix*, -exclusion, and filters title:, body:, tag:, '
        "notebook:, created:, updated:, type:todo|note, iscompleted:1|0, due: work. Each result "
        "has id, title, notebook, updated_time, a snippet around the match and, when a body "
        "word matched, the section (path and heading) it sits in: pass that section to "
        "read_note to read just that part of a long note."
    ),
    input_schema=input_schema_of(
        {
            "query": {"type": "string", "minLength": 1, "description": "What to look for."},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX, "default": 20},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Skip this many results (paging)."},
            "mode": {"type": "string", "enum": ["keyword", "semantic", "hybrid"], "description": "How to match (default: hybrid when the semantic index is on, else keyword)."},
        },
        ["query"],
    ),
    output_schema=output_schema_of(
        {
            "results": {
                "type": "array",
                "items": output_schema_of(
                    {
                        "id": {"type": "string"},
                        "title": {"type": "string"},
                        "notebook_id": {"type": "string"},
                        "notebook": {"type": "string"},
                        "updated_time": TIME_SCHEMA,
                        "snippet": {"type": "string"},
                        "section": {"type": "string"},
                        "section_heading": {"type": "string"},
                    },
                    ["id", "title", "notebook_id", "updated_time", "snippet"],
                ),
            },
            "has_more": {"type": "boolean"},
            "next_offset": {"type": "integer"},
        },
        ["results", "has_more"],
    ),
    handler=threaded(_search),
)


def _read_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    if args.get("outline") and args.get("section") is not None:
        raise ToolError("outline and section cannot be combined: ask for the outline, then read one section")
    offset = int(args.get("offset", 0))
    max_chars = int(args.get("max_chars", READ_BUDGET))
    ws = ctx.workspace
    with ws.read() as c:
        note = visible_note(ctx, c, args["id"])
        title = notebook_titles(ctx, c, [note.notebook_id]).get(note.notebook_id, "")
    payload = note_meta(note, title)
    section = None
    if args.get("outline"):
        text, what = outline_text(note.body), "outline"
    elif args.get("section") is not None:
        section = resolve_section(note.body, str(args["section"]))
        text, what = section_text(note.body, section), f"section {section.path}"
        payload["section"] = {"path": section.path, "heading": section.heading}
    else:
        text, what = note.body, "body"
    page, end = text_page(text, offset, max_chars, whole_lines=what == "outline")
    payload.update(
        body=page,
        body_length=len(text),
        body_offset=offset,
        body_returned_chars=len(page),
        has_more=end < len(text),
        is_outline=what == "outline",
    )
    if end < len(text):
        payload["message"] = _more_message(what, offset, end, len(text), section is not None)
    return untrusted_if(payload, [note])


def _more_message(what: str, offset: int, end: int, length: int, in_section: bool) -> str:
    shown = f"Showing characters {offset}-{end} of {length} of the {what}."
    if what == "outline":
        return f"{shown} Call read_note with outline=true and offset={end} for the rest, or max_chars=0 for all of it."
    again = f"call read_note again with offset={end}" + (" and the same section" if in_section else "")
    return (
        f"{shown} To read on, {again}. To find the part you need instead, call read_note with "
        "outline=true (it lists the sections with their sizes), then section=\"<path>\" to read one; "
        "max_chars=0 returns everything."
    )


READ_NOTE = ToolDef(
    name="read_note",
    title="Read a note",
    description=(
        "Read one note: title, notebook, tags, times, to-do fields and the Markdown body. "
        f"The body is capped at {READ_BUDGET} characters by default (max_chars; 0 = no limit); "
        "has_more and message tell you when it was cut and how to go on (offset). For long notes "
        "ask for outline=true first: one tab-separated line per heading, 'path<TAB>chars<TAB>heading' "
        "(section 0 is the text before the first heading), then read one part with section=\"1.2\" "
        "or section=\"<heading text>\". outline and section cannot be combined; offset pages "
        "through whichever text you asked for."
    ),
    input_schema=input_schema_of(
        {
            "id": _ID,
            "outline": {"type": "boolean", "default": False, "description": "Return the heading outline instead of the body."},
            "section": {"type": "string", "description": "A section path from the outline or search ('1.2'), or an exact heading."},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Start at this character."},
            "max_chars": {"type": "integer", "minimum": 0, "default": READ_BUDGET, "description": "Most characters to return; 0 = no limit."},
        },
        ["id"],
    ),
    output_schema=output_schema_of(
        {
            **_NOTE_META_PROPS,
            **_PAGE_PROPS,
            "section": output_schema_of({"path": {"type": "string"}, "heading": {"type": "string"}}, ["path", "heading"]),
        },
        [*_NOTE_META_REQUIRED, "body", "body_length", "body_offset", "body_returned_chars", "has_more", "is_outline"],
    ),
    handler=threaded(_read_note),
)


def _read_notes(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ids = list(dict.fromkeys(str(i) for i in args["ids"]))
    if len(ids) > READ_NOTES_MAX:
        raise ToolError(
            f"read_notes takes at most {READ_NOTES_MAX} ids, and got {len(ids)}; "
            f"pick the {READ_NOTES_MAX} most promising (read_note reads one)"
        )
    budget = int(args.get("max_chars", READ_BUDGET))
    ws = ctx.workspace
    with ws.read() as c:
        found = ws.get_notes(ids, conn=c)
        allowed = ctx.allowed_notebooks(conn=c)
        titles = notebook_titles(ctx, c, {n.notebook_id for n in found.values()})
    notes = [found[i] for i in ids if i in found and (allowed is None or found[i].notebook_id in allowed)]
    shares = share_budget([len(n.body) for n in notes], budget)
    out = []
    for note, share in zip(notes, shares, strict=True):
        item = note_meta(note, titles.get(note.notebook_id, ""))
        item.update(
            body=note.body[:share],
            body_length=len(note.body),
            body_returned_chars=min(share, len(note.body)),
            has_more=share < len(note.body),
        )
        out.append(item)
    shown = {n.id for n in notes}
    payload: dict[str, Any] = {"notes": out, "not_found": [i for i in ids if i not in shown]}
    if any(item["has_more"] for item in out):
        payload["message"] = (
            f"The notes share one budget of {budget} characters, so some were cut (has_more). "
            "Read the rest of one with read_note(id, offset=body_returned_chars), or its outline "
            "with read_note(id, outline=true)."
        )
    return untrusted_if(payload, notes)


READ_NOTES = ToolDef(
    name="read_notes",
    title="Read several notes",
    description=(
        f"Read up to {READ_NOTES_MAX} notes in one call (e.g. the best search results). The bodies share "
        f"one budget of {READ_BUDGET} characters (max_chars; 0 = no limit): short notes come whole, "
        "the rest is split over the longer ones, which then have has_more=true — follow up with "
        "read_note. Ids that do not resolve are listed in not_found instead of failing the call."
    ),
    input_schema=input_schema_of(
        {
            "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": f"Note ids, at most {READ_NOTES_MAX}."},
            "max_chars": {"type": "integer", "minimum": 0, "default": READ_BUDGET, "description": "Characters shared by all bodies; 0 = no limit."},
        },
        ["ids"],
    ),
    output_schema=output_schema_of(
        {
            "notes": {
                "type": "array",
                "items": output_schema_of(
                    {
                        **_NOTE_META_PROPS,
                        "body": {"type": "string"},
                        "body_length": {"type": "integer"},
                        "body_returned_chars": {"type": "integer"},
                        "has_more": {"type": "boolean"},
                    },
                    [*_NOTE_META_REQUIRED, "body", "body_length", "body_returned_chars", "has_more"],
                ),
            },
            "not_found": {"type": "array", "items": {"type": "string"}},
            "message": {"type": "string"},
        },
        ["notes", "not_found"],
    ),
    handler=threaded(_read_notes),
)


def _list_notebooks(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.read() as c:
        books = Books(ctx, c)
        counted = ws.list_notebooks(conn=c)
    return {
        "notebooks": [
            {
                "id": b.id,
                "title": b.title,
                # A parent outside the scope does not exist for tools either.
                "parent_id": b.parent_id if b.parent_id in books.visible_ids else None,
                "path": books.path(b.id),
                "note_count": b.note_count,
            }
            for b in counted
            if b.id in books.visible_ids
        ]
    }


LIST_NOTEBOOKS = ToolDef(
    name="list_notebooks",
    title="List notebooks",
    description=(
        "All notebooks, as a flat list with id, title, parent_id, path ('Parent/Child') and "
        "note_count. Notebook arguments of other tools take the id, the path or a unique title."
    ),
    input_schema=input_schema_of({}),
    output_schema=output_schema_of({"notebooks": {"type": "array", "items": _NOTEBOOK_OUT}}, ["notebooks"]),
    handler=threaded(_list_notebooks),
)


def _list_tags(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.read() as c:
        scoped = None if ctx.scope.unrestricted else Books(ctx, c).visible_ids
        tags = ws.list_tags(used_only=True, notebook_ids=scoped, conn=c)
    return {"tags": [{"title": t.title, "note_count": t.note_count} for t in tags]}


LIST_TAGS = ToolDef(
    name="list_tags",
    title="List tags",
    description="The tags that are on at least one note, with how many notes carry each.",
    input_schema=input_schema_of({}),
    output_schema=output_schema_of(
        {"tags": {"type": "array", "items": output_schema_of({"title": {"type": "string"}, "note_count": {"type": "integer"}}, ["title", "note_count"])}},
        ["tags"],
    ),
    handler=threaded(_list_tags),
)


def _list_trash(ctx: ToolContext, args: dict[str, Any]) -> Any:
    limit = int(args.get("limit", 100))
    ws = ctx.workspace
    with ws.read() as c:
        books = Books(ctx, c, include_deleted=True)
        items = ws.list_trash(conn=c)
    shown = []
    for item in items:
        place = item.id if item.kind == "notebook" else item.parent_id
        if place is None or not books.in_scope_chain(place):
            continue
        row: dict[str, Any] = {"kind": item.kind, "id": item.id, "title": item.title, "deleted_time": iso(item.deleted_time)}
        if item.kind == "note":
            row["notebook"] = books.path(item.parent_id or "")
        shown.append(row)
    return {"items": shown[:limit], "has_more": len(shown) > limit}


LIST_TRASH = ToolDef(
    name="list_trash",
    title="List the trash",
    description=(
        "What is in the trash, newest first: deleted notes and notebooks (a notebook brings its "
        "notes along). restore_note brings an item back."
    ),
    input_schema=input_schema_of({"limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}),
    output_schema=output_schema_of(
        {
            "items": {
                "type": "array",
                "items": output_schema_of(
                    {
                        "kind": {"enum": ["note", "notebook"]},
                        "id": {"type": "string"},
                        "title": {"type": "string"},
                        "deleted_time": TIME_SCHEMA,
                        "notebook": {"type": "string"},
                    },
                    ["kind", "id", "title", "deleted_time"],
                ),
            },
            "has_more": {"type": "boolean"},
        },
        ["items", "has_more"],
    ),
    handler=threaded(_list_trash),
)


# -- write tools (off by default) -----------------------------------------------------------


def _target_book(ctx: ToolContext, c: Connection, books: Books, ref: str | None) -> Notebook:
    if ref is not None:
        return books.resolve(ref)
    book = ctx.workspace.default_notebook(conn=c)
    if not books.in_scope(book.id) and not (ctx.scope.unrestricted):
        raise ToolError("no notebook was named and the default one is not available; name one (list_notebooks)")
    return book


def _create_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    due = parse_time(args.get("todo_due"), "todo_due")
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c)
        book = _target_book(ctx, c, books, args.get("notebook"))
        books.by_id.setdefault(book.id, book)
        note = ws.create_note(
            args["title"],
            args.get("body", ""),
            book.id,
            is_todo=bool(args.get("is_todo", False) or due is not None),
            todo_due=due,
            tags=args.get("tags", []),
            conn=c,
        )
    return {**note_meta(note, books.title(note.notebook_id)), "body_length": len(note.body)}


CREATE_NOTE = ToolDef(
    name="create_note",
    title="Create a note",
    description=(
        "Create a note with a title and a Markdown body in a notebook (id, path or title; the "
        "default notebook if omitted). is_todo makes it a to-do; todo_due (ISO 8601, e.g. "
        "2026-12-01T09:00:00Z) sets its due date; tags are attached by name, created if new."
    ),
    input_schema=input_schema_of(
        {
            "title": {"type": "string", "minLength": 1},
            "body": {"type": "string", "default": "", "description": "Markdown."},
            "notebook": {"type": "string", "description": "Notebook id, 'Parent/Child' path or title."},
            "is_todo": {"type": "boolean", "default": False},
            "todo_due": _nullable("string", description="ISO 8601 date or date-time (UTC unless an offset is given)."),
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
        ["title"],
    ),
    output_schema=_NOTE_OUT,
    handler=threaded(_create_note),
    effect="write",
)


def _edit_body(body: str, args: dict[str, Any]) -> str | None:
    """The new body from ``body``/``replace_text``/``prepend``/``append``, or None if untouched."""
    if "body" in args:
        if any(k in args for k in ("append", "prepend", "replace_text")):
            raise ToolError("body replaces the whole text; do not combine it with append, prepend or replace_text")
        return str(args["body"])
    new = body
    if "replace_text" in args:
        find, replace = args["replace_text"]["find"], args["replace_text"]["replace"]
        count = new.count(find)
        if count != 1:
            hint = (
                "read the note to copy the exact text"
                if count == 0
                else "include more of the surrounding text so that it matches exactly once"
            )
            raise ToolError(f"replace_text: the find text matches {count} times, it must match exactly once; {hint}")
        new = new.replace(find, replace, 1)
    if "prepend" in args:
        text = str(args["prepend"])
        new = text + ("" if not new or text.endswith("\n") else "\n") + new
    if "append" in args:
        text = str(args["append"])
        new = new + ("" if not new or new.endswith("\n") or text.startswith("\n") else "\n") + text
    return new if any(k in args for k in ("replace_text", "prepend", "append")) else None


def _update_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    changes = {"title", "body", "append", "prepend", "replace_text", "notebook", "is_todo", "todo_completed", "todo_due"}
    if not changes & args.keys():
        raise ToolError(f"nothing to change: give at least one of {', '.join(sorted(changes))}")
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c)
        note = visible_note(ctx, c, args["id"])
        fields: dict[str, Any] = {}
        if "title" in args:
            fields["title"] = args["title"]
        body = _edit_body(note.body, args)
        if body is not None:
            fields["body"] = body
        if "notebook" in args:
            fields["notebook_id"] = books.resolve(args["notebook"]).id
        if "todo_due" in args:
            fields["todo_due"] = parse_time(args["todo_due"], "todo_due")
        if "todo_completed" in args:
            done = args["todo_completed"]
            if done is True:
                fields["todo_completed"] = note.todo_completed or _now_ms()
            elif done is False or done is None:
                fields["todo_completed"] = None
            else:
                fields["todo_completed"] = parse_time(done, "todo_completed")
        if "is_todo" in args:
            fields["is_todo"] = bool(args["is_todo"])
        elif fields.get("todo_due") or fields.get("todo_completed"):
            fields["is_todo"] = True
        updated = ws.update_note(note.id, conn=c, **fields)
    changed = sorted(k for k in ("title", "body", "notebook_id", "is_todo", "todo_due", "todo_completed")
                     if getattr(updated, k) != getattr(note, k))
    return {**note_meta(updated, books.title(updated.notebook_id)), "body_length": len(updated.body), "changed": changed}


def _now_ms() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)


UPDATE_NOTE = ToolDef(
    name="update_note",
    title="Change a note",
    description=(
        "Change a note; only the fields you give change, and the previous version is kept as a "
        "revision. Body edits: body (replace everything), or any of append / prepend (added on "
        "their own line) and replace_text {find, replace} (find must match exactly once; the "
        "error says how many times it matched). Also title, notebook (move: id, path or title), "
        "is_todo, todo_due (ISO 8601 or null) and todo_completed (true/false or an ISO 8601 time)."
    ),
    input_schema=input_schema_of(
        {
            "id": _ID,
            "title": {"type": "string", "minLength": 1},
            "body": {"type": "string"},
            "append": {"type": "string"},
            "prepend": {"type": "string"},
            "replace_text": input_schema_of({"find": {"type": "string", "minLength": 1}, "replace": {"type": "string"}}, ["find", "replace"]),
            "notebook": {"type": "string", "description": "Move to this notebook (id, path or title)."},
            "is_todo": {"type": "boolean"},
            "todo_due": _nullable("string", description="ISO 8601 date or date-time; null clears it."),
            "todo_completed": _nullable(
                "boolean", "string", description="true = done now, false/null = not done, or an ISO 8601 time."
            ),
        },
        ["id"],
    ),
    output_schema=output_schema_of(
        {**_NOTE_OUT["properties"], "changed": {"type": "array", "items": {"type": "string"}}},
        [*_NOTE_OUT["required"], "changed"],
    ),
    handler=threaded(_update_note),
    effect="write",
)


def _delete_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.write() as c:
        note = visible_note(ctx, c, args["id"])
        ws.delete_note(note.id, conn=c)
    return {
        "id": note.id,
        "title": note.title,
        "in_trash": True,
        "message": "Moved to the trash; restore_note brings it back.",
    }


DELETE_NOTE = ToolDef(
    name="delete_note",
    title="Delete a note",
    description="Move a note to the trash. The user can restore it (and so can restore_note).",
    input_schema=input_schema_of({"id": _ID}, ["id"]),
    output_schema=output_schema_of(
        {"id": {"type": "string"}, "title": {"type": "string"}, "in_trash": {"type": "boolean"}, "message": {"type": "string"}},
        ["id", "title", "in_trash"],
    ),
    handler=threaded(_delete_note),
    effect="destructive",
    idempotent=True,
)


def _manage_tags(ctx: ToolContext, args: dict[str, Any]) -> Any:
    add = [str(t) for t in args.get("add", [])]
    remove = [str(t) for t in args.get("remove", [])]
    if not add and not remove:
        raise ToolError("give tags to add or to remove (or both)")
    both = {t.strip().lower() for t in add} & {t.strip().lower() for t in remove}
    if both:
        raise ToolError(f"tags {sorted(both)!r} are both in add and in remove; keep each in one list")
    ws = ctx.workspace
    with ws.write() as c:
        note = visible_note(ctx, c, args["id"])
        added = ws.add_tags(note.id, add, create_missing=True, conn=c) if add else []
        removed = ws.remove_tags(note.id, remove, conn=c) if remove else []
        tags = ws.tags_of([note.id], conn=c).get(note.id, [])
    return {"id": note.id, "tags": tags, "added": added, "removed": removed}


MANAGE_TAGS = ToolDef(
    name="manage_tags",
    title="Tag a note",
    description=(
        "Add tags to a note and/or remove tags from it, by name (case does not matter). Tags in "
        "add that do not exist yet are created. Returns the note's tags afterwards."
    ),
    input_schema=input_schema_of(
        {
            "id": _ID,
            "add": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "remove": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
        ["id"],
    ),
    output_schema=output_schema_of(
        {
            "id": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "added": {"type": "array", "items": {"type": "string"}},
            "removed": {"type": "array", "items": {"type": "string"}},
        },
        ["id", "tags", "added", "removed"],
    ),
    handler=threaded(_manage_tags),
    effect="write",
    idempotent=True,
)


def _create_notebook(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c)
        parent = books.resolve(args["parent"]) if args.get("parent") is not None else None
        book = ws.create_notebook(args["title"], parent.id if parent else None, conn=c)
        books.by_id[book.id] = book
        if not books.scope.allows_chain(books.chain(book.id)):
            # Raising rolls the insert back: tools may not create what they could not see.
            raise ToolError(
                f"a notebook {book.title!r} there would be outside the notebooks tools may use; "
                "give a parent from list_notebooks"
            )
    return {"id": book.id, "title": book.title, "parent_id": book.parent_id, "path": books.path(book.id), "note_count": 0}


CREATE_NOTEBOOK = ToolDef(
    name="create_notebook",
    title="Create a notebook",
    description="Create a notebook, at the top level or inside a parent notebook (id, path or title).",
    input_schema=input_schema_of(
        {
            "title": {"type": "string", "minLength": 1},
            "parent": {"type": "string", "description": "Parent notebook: id, 'Parent/Child' path or title."},
        },
        ["title"],
    ),
    output_schema=_NOTEBOOK_OUT,
    handler=threaded(_create_notebook),
    effect="write",
)


def _restore_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    item_id = str(args["id"])
    gone = f"nothing with id {item_id!r} is in the trash; list_trash shows what is"
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c, include_deleted=True)
        trashed = {t.id: t for t in ws.list_trash(conn=c)}
        item = trashed.get(item_id)
        place = None if item is None else item.id if item.kind == "notebook" else item.parent_id
        if item is None or place is None or not books.in_scope_chain(place):
            raise ToolError(gone)
        restored = ws.restore(item_id, conn=c)
        after = Books(ctx, c)
        where = restored.id if restored.kind == "notebook" else restored.parent_id or ""
        if not after.in_scope(where):
            raise ToolError(
                f"{restored.kind} {item_id!r} would come back outside the notebooks tools may use "
                "(its notebook is gone); restore it in noteloom itself"
            )
    return {"kind": restored.kind, "id": restored.id, "title": restored.title, "notebook": after.path(where)}


RESTORE_NOTE = ToolDef(
    name="restore_note",
    title="Restore from the trash",
    description=(
        "Bring a note (or a notebook, with the notes trashed along with it) back from the trash "
        "to where it was; an id from list_trash."
    ),
    input_schema=input_schema_of({"id": {"type": "string", "description": "An id from list_trash."}}, ["id"]),
    output_schema=output_schema_of(
        {"kind": {"enum": ["note", "notebook"]}, "id": {"type": "string"}, "title": {"type": "string"}, "notebook": {"type": "string"}},
        ["kind", "id", "title", "notebook"],
    ),
    handler=threaded(_restore_note),
    effect="write",
)

READ_TOOLS = [SEARCH_NOTES, READ_NOTE, READ_NOTES, LIST_NOTEBOOKS, LIST_TAGS, LIST_TRASH]
WRITE_TOOLS = [CREATE_NOTE, UPDATE_NOTE, DELETE_NOTE, MANAGE_TAGS, CREATE_NOTEBOOK, RESTORE_NOTE]


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register every built-in workspace tool."""
    for tool in (*READ_TOOLS, *WRITE_TOOLS):
        register(tool)
