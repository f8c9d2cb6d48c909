"""noteloom's own MCP prompts, registered through the same ``register_mcp_prompts`` hook a
plugin uses: a weekly review of a notebook, summarise a note or a search, find related
notes, turn a note into to-dos, and draft a reply from notes.

Each reads the workspace as the asker (``ctx`` carries their notebook scope) and names the
read tools it stands for in ``uses_tools``: while one is off or outside the asker's token,
the prompt is neither listed nor served, so a prompt never shows what its tools would not.
The notes go into the messages whole, as ``note://`` resources (``gather``, ``build``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from anyio import to_thread

from noteloom.default_plugins.mcp_prompts import gather, weekly
from noteloom.default_plugins.mcp_prompts.build import (
    any_clipped,
    attachments,
    fenced,
    line,
    title_of,
    with_rule,
)
from noteloom.default_plugins.mcp_prompts.gather import Found
from noteloom.hooks import hookimpl
from noteloom.promptdefs import Completer, McpPrompt, PromptArgument
from noteloom.tools import ToolContext, ToolError
from noteloom.workspace import Note

T = TypeVar("T")
#: How a search matches (``noteloom.semantic.hybrid.Mode``; not imported: it costs start-up).
Mode = Literal["keyword", "semantic", "hybrid"]
#: How many notes a search-backed prompt takes.
SEARCH_TAKE = 8
#: How many related notes are attached whole (more are listed).
RELATED_ATTACHED = 5


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await to_thread.run_sync(fn, *args)


def _completer(fn: Callable[[ToolContext, str, Mapping[str, str]], list[str]]) -> Completer:
    """An argument's completion, running the blocking ``fn`` in a worker thread."""

    async def complete(ctx: ToolContext, value: str, context: Mapping[str, str]) -> Sequence[str]:
        return await _run(fn, ctx, value, context)

    complete.__name__ = fn.__name__
    return complete


complete_note = _completer(gather.note_titles)
complete_notebook = _completer(gather.notebook_paths)
complete_query = _completer(gather.query_terms)


def _one_note(ctx: ToolContext, ref: str) -> Found:
    with ctx.workspace.read() as c:
        note = gather.find_note(ctx, c, ref)
        b = gather.books(ctx, c)
        return Found([note], {note.notebook_id: b.path(note.notebook_id)})


def _search(ctx: ToolContext, query: str, notebook: str | None, limit: int, mode: Mode | None = None) -> Found:
    """Notes for ``query`` (the search tool's language and default mode), within
    ``notebook``'s subtree when given."""
    from noteloom.errors import NoteloomError
    from noteloom.semantic.hybrid import hybrid_search

    ws = ctx.workspace
    with ws.read() as c:
        b, scoped = gather.notebook_ids_for(ctx, c, notebook)
        try:
            hits = hybrid_search(ws, ctx.services.semantic, query, mode=mode,
                                 limit=limit, notebook_ids=scoped, conn=c).hits
        except NoteloomError as exc:
            raise ToolError(f"the search {query!r} failed: {exc}") from None
        notes = gather.notes_by_id(ctx, c, [h.id for h in hits])
        return Found(notes, {x.notebook_id: b.path(x.notebook_id) for x in notes})


def _semantic_built(ctx: ToolContext) -> bool:
    index = ctx.services.semantic
    return index is not None and bool(index.is_built())


async def weekly_review(ctx: ToolContext, arguments: dict[str, str]) -> list[dict[str, Any]]:
    week = await _run(weekly.gather, ctx, arguments["notebook"])
    return weekly.messages(ctx, week)


async def summarize(ctx: ToolContext, arguments: dict[str, str]) -> list[dict[str, Any]]:
    note, query = arguments.get("note", "").strip(), arguments.get("query", "").strip()
    if bool(note) == bool(query):
        raise ToolError("give either note (a note's title or id) or query (a search), not both or neither")
    if note:
        found = await _run(_one_note, ctx, note)
        text = (f"Summarise my note {title_of(ctx, found.notes[0])} (attached): its main points, decisions "
                "and open questions, in a few short paragraphs or bullets.")
    else:
        found = await _run(_search, ctx, query, None, SEARCH_TAKE)
        if not found.notes:
            raise ToolError(f"no note matches the search {query!r}")
        listed = "\n".join(line(ctx, x, found) for x in found.notes)
        text = (f"Summarise what my notes say about the search {query!r}: the {len(found.notes)} best matches "
                f"are attached. Bring together what they agree on, where they differ, and what is missing; "
                f"name the notes you draw on by title.\n\n{listed}")
    return [with_rule(ctx, text, any_clipped(found.notes)), *attachments(ctx, found)]


def _related(ctx: ToolContext, ref: str) -> tuple[Found, Found, str]:
    source = _one_note(ctx, ref)
    note = source.notes[0]
    mode: Mode
    if _semantic_built(ctx):
        words = gather.WORD.findall(f"{note.title} {note.body[:1500]}")[:60]
        how, query, mode = "by meaning (semantic search)", " ".join(words), "semantic"
    else:
        words = [w for w in gather.WORD.findall(note.title) if len(w) > 2][:8]
        tags = [f'tag:"{t}"' for t in note.tags[:5]]
        how, query, mode = "by shared title words and tags (keyword search)", " ".join(["any:1", *words, *tags]), "keyword"
    if query.strip() in ("", "any:1"):
        return source, Found([], {}), how
    found = _search(ctx, query, None, SEARCH_TAKE + 1, mode)
    others = [x for x in found.notes if x.id != note.id][:SEARCH_TAKE]
    return source, Found(others, found.paths), how


async def related_notes(ctx: ToolContext, arguments: dict[str, str]) -> list[dict[str, Any]]:
    source, related, how = await _run(_related, ctx, arguments["note"])
    note = source.notes[0]
    if related.notes:
        listed = "\n".join(line(ctx, x, related) for x in related.notes)
        text = (f"Which of my notes relate to {title_of(ctx, note)}, and how? It is attached first; these "
                f"candidates were found {how}, and the closest {min(len(related.notes), RELATED_ATTACHED)} are "
                f"attached after it:\n\n{listed}\n\nFor each note that truly relates, say in one line how "
                "(same project, a follow-up, a contradiction …); leave out those that only share words.")
    else:
        text = (f"I looked for notes related to {title_of(ctx, note)} (attached) {how} and found none. "
                "Suggest what to search for, or which tags or links would connect it to the rest of my notes.")
    fenced = any_clipped([note, *related.notes])
    return [with_rule(ctx, text, fenced), *attachments(ctx, source),
            *attachments(ctx, related, related.notes[:RELATED_ATTACHED])]


async def note_to_todos(ctx: ToolContext, arguments: dict[str, str]) -> list[dict[str, Any]]:
    found = await _run(_one_note, ctx, arguments["note"])
    note: Note = found.notes[0]
    text = (f"Turn my note {title_of(ctx, note)} (attached) into to-dos: every concrete action it implies, "
            "each one line starting with a verb, as a Markdown task list (- [ ] …). Give a due date where the "
            "note states or implies one, group them under headings if the note has parts, and list separately "
            "any question that must be answered before the work can start.")
    return [with_rule(ctx, text, any_clipped([note])), *attachments(ctx, found)]


async def draft_reply(ctx: ToolContext, arguments: dict[str, str]) -> list[dict[str, Any]]:
    message = arguments["message"]
    notebook = arguments.get("notebook", "").strip() or None
    query = arguments.get("query", "").strip()
    if not query:
        words = [w for w in gather.WORD.findall(message) if len(w) > 3][:12]
        query = " ".join(["any:1", *words]) if words else ""
    found = await _run(_search, ctx, query, notebook, SEARCH_TAKE) if query else Found([], {})
    where = f" in my notebook “{notebook}”" if notebook else ""
    listed = "\n".join(line(ctx, x, found) for x in found.notes) or "(no note matched)"
    text = (f"Draft a reply to the message below, drawing on my notes{where}. The notes that matched are "
            f"attached; use only what they support, and mark anything the reply needs that they do not say "
            f"as [to check]. Keep the tone of the message.\n\nThe message:\n{fenced(ctx, message)}\n\n"
            f"Notes found:\n{listed}")
    return [with_rule(ctx, text, True), *attachments(ctx, found)]


NOTE_ARG = PromptArgument("note", "The note: its exact title or its id", required=True, complete=complete_note)

PROMPTS = (
    McpPrompt(
        "weekly_review", "What changed in a notebook in the last 7 days — notes created and updated, "
        "to-dos done, open and overdue — with those notes attached, for a weekly review.",
        weekly_review, title="Weekly review of a notebook",
        arguments=[PromptArgument("notebook", "The notebook (its path, title or id); notebooks below it count too",
                                  required=True, complete=complete_notebook)],
        uses_tools=("list_notebooks", "read_note"),
    ),
    McpPrompt(
        "summarize", "Summarise one note, or what the notes a search finds say together.",
        summarize, title="Summarise a note or a search",
        arguments=[
            PromptArgument("note", "The note to summarise (its title or id); or give query", complete=complete_note),
            PromptArgument("query", "A search (the search_notes language) whose notes to summarise",
                           complete=complete_query),
        ],
        uses_tools=("read_note", "search_notes"),
    ),
    McpPrompt(
        "related_notes", "Find the notes related to a note (by meaning when the semantic index is on, "
        "else by shared words and tags) and say how they relate.",
        related_notes, title="Find related notes", arguments=[NOTE_ARG],
        uses_tools=("read_note", "search_notes"),
    ),
    McpPrompt(
        "note_to_todos", "Turn a note into a list of concrete to-dos.",
        note_to_todos, title="Turn a note into to-dos", arguments=[NOTE_ARG],
        uses_tools=("read_note",),
    ),
    McpPrompt(
        "draft_reply", "Draft a reply to a message from what your notes say.",
        draft_reply, title="Draft a reply from notes",
        arguments=[
            PromptArgument("message", "The message to answer", required=True),
            PromptArgument("notebook", "Search only this notebook (path, title or id)", complete=complete_notebook),
            PromptArgument("query", "What to search the notes for (default: the message's words)",
                           complete=complete_query),
        ],
        uses_tools=("search_notes", "read_note"),
    ),
)


@hookimpl
def register_mcp_prompts(register: Callable[[McpPrompt], None]) -> None:
    """Register noteloom's own prompts."""
    for prompt in PROMPTS:
        register(prompt)
