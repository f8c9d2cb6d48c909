"""``semantic_search_notes``: search by meaning, one ranked chunk per hit.

Registered only when the semantic index is on (``ToolDef.requires``); otherwise the
tool does not exist anywhere and keyword search carries on alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from noteloom.default_plugins.workspace_tools import (
    HIT_PROPS,
    Books,
    input_schema_of,
    iso,
    output_schema_of,
    threaded,
    untrusted_if,
)
from noteloom.hooks import hookimpl
from noteloom.query import parse_query
from noteloom.search import notes_allowed
from noteloom.tools import ToolContext, ToolDef, ToolError

SEMANTIC_MAX = 50


def _descendants(books: Books, root: str) -> set[str]:
    """``root`` and every notebook below it that the call may see."""
    children: dict[str, list[str]] = {}
    for b in books.visible:
        if b.parent_id:
            children.setdefault(b.parent_id, []).append(b.id)
    out, stack = set(), [root]
    while stack:
        cur = stack.pop()
        if cur not in out:
            out.add(cur)
            stack.extend(children.get(cur, []))
    return out & books.visible_ids


def _semantic_search(ctx: ToolContext, args: dict[str, Any]) -> Any:
    index = ctx.services.semantic
    if index is None:
        raise ToolError("semantic search is off in this workspace; use search_notes instead")
    ws = ctx.workspace
    with ws.read() as c:
        books = Books(ctx, c)
    notebook_ids: set[str] | None = None if ctx.scope.unrestricted else set(books.visible_ids)
    if args.get("notebook_id"):
        root = books.resolve(str(args["notebook_id"]))
        notebook_ids = _descendants(books, root.id)
    # The query language of search_notes: filters and exclusions keep the search within
    # the notes they allow, and only the positive words are compared by meaning.
    q = parse_query(args["query"])
    if not q.positive_terms:
        raise ToolError(
            f"the query {args['query']!r} has only filters or exclusions, nothing to compare by meaning; "
            "add words that say what to look for, or list the notes with search_notes"
        )
    with ws.read() as c:
        allowed = notes_allowed(c, q, notebook_ids)
    from noteloom.semantic.hybrid import semantic_text  # at the first call: start-up

    result = index.search(
        semantic_text(q),
        limit=int(args.get("limit", 10)),
        notebook_ids=notebook_ids,
        tag=args.get("tag") or None,
        relevance=args.get("relevance", "normal"),
        notes=allowed,
    )
    results = [
        {
            "id": h.note_id,
            "title": h.title,
            "notebook_id": h.notebook_id,
            "notebook": books.title(h.notebook_id),
            "updated_time": iso(h.updated_time),
            "section": h.section,
            "section_heading": h.section_heading,
            "heading_path": list(h.heading_path),
            "snippet": h.snippet,
            "score": h.score,
        }
        for h in result.hits
    ]
    payload: dict[str, Any] = {"results": results, "pending_notes": result.pending_notes}
    if result.pending_notes:
        payload["notice"] = (
            f"{result.pending_notes} changed notes are not indexed yet; results may miss them "
            "(search_notes with mode=keyword sees every note now)"
        )
    notes = ws.get_notes(sorted({h.note_id for h in result.hits})) if result.hits else {}
    return untrusted_if(payload, list(notes.values()))


SEMANTIC_SEARCH_NOTES = ToolDef(
    name="semantic_search_notes",
    title="Search notes by meaning",
    description=(
        "Search the user's notes by meaning rather than exact words: finds passages that say "
        "the same thing in other words. Returns ranked chunks (a note can appear once per "
        "matching section), each with the note id, title, the section (path and heading, which "
        "read_note accepts), a snippet and a similarity score from 0 to 1. relevance: strict "
        "(only close matches), normal, loose (anything remotely related). Filter by notebook_id "
        "(sub-notebooks included) or tag; the query also takes search_notes' filters and "
        "exclusions (notebook:, tag:, type:, created:, -word …), which keep the search within the "
        "notes they allow. When notes were changed moments ago, pending_notes "
        "says how many are not indexed yet."
    ),
    input_schema=input_schema_of(
        {
            "query": {"type": "string", "minLength": 1, "description": "What to look for, in plain words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEMANTIC_MAX, "default": 10},
            "notebook_id": {"type": "string", "description": "Only notes in this notebook (id, title or path) and below."},
            "tag": {"type": "string", "description": "Only notes with this tag."},
            "relevance": {"type": "string", "enum": ["strict", "normal", "loose"], "default": "normal"},
        },
        ["query"],
    ),
    output_schema=output_schema_of(
        {
            "results": {
                "type": "array",
                "items": output_schema_of(
                    {
                        **HIT_PROPS,
                        "heading_path": {"type": "array", "items": {"type": "string"}},
                        "score": {"type": "number"},
                    },
                    ["id", "title", "notebook_id", "section", "snippet", "score"],
                ),
            },
            "pending_notes": {"type": "integer"},
            "notice": {"type": "string"},
        },
        ["results", "pending_notes"],
    ),
    handler=threaded(_semantic_search),
    untrusted_output=True,  # clipped notes
    effect="read",
    requires=("semantic",),
    within_notebooks=True,
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``semantic_search_notes`` (kept out when semantic search is off)."""
    register(SEMANTIC_SEARCH_NOTES)
