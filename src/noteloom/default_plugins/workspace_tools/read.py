"""The read tools, on by default: search_notes, read_note, read_notes and the listings."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from noteloom.default_plugins.workspace_tools.common import (
    iso,
    note_meta,
    progress_reporter,
    threaded,
    untrusted_if,
)
from noteloom.default_plugins.workspace_tools.schemas import (
    HIT_PROPS,
    NOTE_ID,
    NOTE_META_PROPS,
    NOTE_META_REQUIRED,
    NOTEBOOK_OUT,
    PAGE_PROPS,
    TIME_SCHEMA,
    input_schema_of,
    output_schema_of,
)
from noteloom.default_plugins.workspace_tools.scope import Books, notebook_titles, visible_note
from noteloom.outline import outline_text, resolve_section, section_text
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolResult
from noteloom.workspace.annotations import Annotations, annotations_of

#: Characters of body (or outline) one read returns unless the caller asks otherwise.
READ_BUDGET = 8000
#: Most ids one read_notes call takes: a tiny share per note is worse than choosing.
READ_NOTES_MAX = 20
SEARCH_MAX = 100


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


#: Update times as ISO text, kept: the same notes come back search after search, and
#: formatting a time costs ten microseconds (a twentieth of a repeated search's own work).
_iso = functools.lru_cache(maxsize=4096)(iso)


def _search(ctx: ToolContext, args: dict[str, Any]) -> Any:
    limit = int(args.get("limit", 20))
    offset = int(args.get("offset", 0))
    ws = ctx.workspace
    # Imported at the first search, not when the tools register (start-up of the command line).
    from noteloom.semantic.hybrid import hybrid_search

    # One read transaction for the scope, the hits and their notebooks: one snapshot,
    # and one BEGIN instead of three on the busiest tool.
    with ws.read() as c:
        scoped = None if ctx.scope.unrestricted else Books(ctx, c).visible_ids
        # One extra hit tells whether there is a next page without counting every match.
        hits = hybrid_search(
            ws, ctx.services.semantic, args["query"], mode=args.get("mode"),
            limit=limit + 1, offset=offset, notebook_ids=scoped, conn=c,
        ).hits
        page = hits[:limit]
        # Keyword hits know their notebook and source already; semantic ones are looked up.
        places = ws.places([h.id for h in page if h.notebook is None or h.clipped is None], conn=c)
        places.update({h.id: (h.notebook, h.clipped) for h in page if h.notebook is not None and h.clipped is not None})
    results = []
    for h in page:
        row: dict[str, Any] = {
            "id": h.id,
            "title": h.title,
            "notebook_id": h.notebook_id,
            "notebook": places.get(h.id, ("", False))[0],
            "updated_time": _iso(h.updated_time),
            "snippet": h.snippet,
        }
        if h.section is not None:
            row["section"] = h.section
            row["section_heading"] = h.section_heading or ""
        results.append(row)
    payload: dict[str, Any] = {"results": results, "has_more": len(hits) > limit}
    if len(hits) > limit:
        payload["next_offset"] = offset + limit
    clipped = any(place[1] for place in places.values())
    return ToolResult(payload, untrusted=clipped)


SEARCH_NOTES = ToolDef(
    name="search_notes",
    title="Search notes",
    description=(
        "Search the user's notes, one result per note, best matches first. mode: keyword "
        "(exact words), semantic (by meaning, other words welcome) or hybrid (both fused; the "
        "default when the semantic index is on, keyword otherwise). In keyword syntax words "
        'must all match (AND); "quoted phrases", prefix*, -exclusion, and filters title:, body:, tag:, '
        "notebook:, created:, updated:, type:todo|note, iscompleted:1|0, due: work, and hold in "
        "every mode (a query of filters alone lists the matching notes, newest first). Each result "
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
                "items": output_schema_of(HIT_PROPS, ["id", "title", "notebook_id", "updated_time", "snippet"]),
            },
            "has_more": {"type": "boolean"},
            "next_offset": {"type": "integer"},
        },
        ["results", "has_more"],
    ),
    handler=threaded(_search),
    untrusted_output=True,  # clipped notes
    within_notebooks=True,
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
        found = annotations_of(c, note.id)
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
    payload.update(_annotation_fields(found))
    return untrusted_if(payload, [note])


def _annotation_fields(found: Annotations | None) -> dict[str, Any]:
    """What pipeline jobs wrote about a note, as fields of read_note's answer: only those
    there are, after every other field, so a note without any reads exactly as before."""
    out: dict[str, Any] = {}
    if found is None:
        return out
    if found.summary is not None:
        s = found.summary
        out["summary"] = {"text": s.text, "model": s.model, "time": iso(s.time)}
    if found.scan is not None:
        k = found.scan
        out["clip_scan"] = {"score": k.score, "verdict": k.verdict, "red_flags": list(k.red_flags),
                            "model": k.model, "time": iso(k.time)}
    return out


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


#: A note's summary and clip scan, written by pipeline jobs (recipes); present only when written.
ANNOTATION_PROPS: dict[str, Any] = {
    "summary": output_schema_of(
        {"text": {"type": "string"}, "model": {"type": "string"}, "time": TIME_SCHEMA}, ["text", "model", "time"]
    ),
    "clip_scan": output_schema_of(
        {
            "score": {"type": "integer", "minimum": 0, "maximum": 10},
            "verdict": {"enum": ["safe", "suspicious", "dangerous"]},
            "red_flags": {"type": "array", "items": {"type": "string"}},
            "model": {"type": "string"},
            "time": TIME_SCHEMA,
        },
        ["score", "verdict", "red_flags", "model", "time"],
    ),
}


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
            "id": NOTE_ID,
            "outline": {"type": "boolean", "default": False, "description": "Return the heading outline instead of the body."},
            "section": {"type": "string", "description": "A section path from the outline or search ('1.2'), or an exact heading."},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Start at this character."},
            "max_chars": {"type": "integer", "minimum": 0, "default": READ_BUDGET, "description": "Most characters to return; 0 = no limit."},
        },
        ["id"],
    ),
    output_schema=output_schema_of(
        {
            **NOTE_META_PROPS,
            **PAGE_PROPS,
            "section": output_schema_of({"path": {"type": "string"}, "heading": {"type": "string"}}, ["path", "heading"]),
            **ANNOTATION_PROPS,
        },
        [*NOTE_META_REQUIRED, "body", "body_length", "body_offset", "body_returned_chars", "has_more", "is_outline"],
    ),
    handler=threaded(_read_note),
    untrusted_output=True,  # clipped notes
    within_notebooks=True,
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
    report = progress_reporter(ctx)  # an MCP client that asked hears of each note
    out = []
    for done, (note, share) in enumerate(zip(notes, shares, strict=True), 1):
        if report is not None:
            report(done, len(notes), f"read {note.title!r}")
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
                        **NOTE_META_PROPS,
                        "body": {"type": "string"},
                        "body_length": {"type": "integer"},
                        "body_returned_chars": {"type": "integer"},
                        "has_more": {"type": "boolean"},
                    },
                    [*NOTE_META_REQUIRED, "body", "body_length", "body_returned_chars", "has_more"],
                ),
            },
            "not_found": {"type": "array", "items": {"type": "string"}},
            "message": {"type": "string"},
        },
        ["notes", "not_found"],
    ),
    handler=threaded(_read_notes),
    untrusted_output=True,  # clipped notes
    within_notebooks=True,
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
    output_schema=output_schema_of({"notebooks": {"type": "array", "items": NOTEBOOK_OUT}}, ["notebooks"]),
    handler=threaded(_list_notebooks),
    within_notebooks=True,
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
    within_notebooks=True,
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
    within_notebooks=True,
)


READ_TOOLS = [SEARCH_NOTES, READ_NOTE, READ_NOTES, LIST_NOTEBOOKS, LIST_TAGS, LIST_TRASH]
