"""The write tools, off by default: create, change, tag, trash and restore notes; create notebooks.

Each acts as the person asking: it changes only notebooks that are theirs or shared with
them to write (a move needs both ends); one shared to read only is refused (``Forbidden``),
one they cannot see reads exactly like a missing one. A note with no notebook named goes
to the person's own default notebook; a top-level notebook belongs to whoever makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from noteloom.default_plugins.workspace_tools.common import note_meta, parse_time, threaded
from noteloom.default_plugins.workspace_tools.schemas import (
    NOTE_ID,
    NOTE_OUT,
    NOTEBOOK_OUT,
    input_schema_of,
    nullable,
    output_schema_of,
)
from noteloom.default_plugins.workspace_tools.scope import Books, target_notebook, writable_note
from noteloom.errors import Forbidden
from noteloom.tools import NoteNamer, ToolContext, ToolDef, ToolError, never

# What asks the user first, and how the card reads, live with each tool (noteloom.policy
# resolves the rest): replacing or removing content asks; adding text, notes or tags does not.


def _quoted(text: Any, limit: int = 60) -> str:
    s = " ".join(str(text).split())
    return "“" + (s if len(s) <= limit else s[: limit - 1] + "…") + "”"


def _update_asks(args: Mapping[str, Any]) -> bool:
    return "body" in args or "replace_text" in args


def _describe_update(args: Mapping[str, Any], name: NoteNamer) -> str:
    note = name(str(args.get("id", "")))
    if "body" in args:
        return f"Replace the body of {note} with {len(str(args['body']))} characters."
    if "replace_text" in args:
        rt = args.get("replace_text") or {}
        return f"In {note}, replace {_quoted(rt.get('find', ''))} with {_quoted(rt.get('replace', ''))}."
    changes = [k for k in ("title", "append", "prepend", "notebook", "is_todo", "todo_due", "todo_completed") if k in args]
    return f"Change {note}: {', '.join(changes) or 'nothing'}."


def _describe_tags(args: Mapping[str, Any], name: NoteNamer) -> str:
    parts = []
    if args.get("remove"):
        parts.append("remove the tags " + ", ".join(map(str, args["remove"])))
    if args.get("add"):
        parts.append("add the tags " + ", ".join(map(str, args["add"])))
    return f"On {name(str(args.get('id', '')))}: " + " and ".join(parts or ["change no tags"]) + "."


def _create_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    due = parse_time(args.get("todo_due"), "todo_due")
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c)
        book = target_notebook(ctx, c, books, args.get("notebook"))
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
            "todo_due": nullable("string", description="ISO 8601 date or date-time (UTC unless an offset is given)."),
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
        ["title"],
    ),
    output_schema=NOTE_OUT,
    handler=threaded(_create_note),
    effect="write",
    approval=never,
    describe=lambda args, name: f"Create the note {_quoted(args.get('title', ''))}.",
    within_notebooks=True,
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
        note = writable_note(ctx, c, args["id"], books)
        fields: dict[str, Any] = {}
        if "title" in args:
            fields["title"] = args["title"]
        body = _edit_body(note.body, args)
        if body is not None:
            fields["body"] = body
        if "notebook" in args:
            # A move changes both notebooks: the person must be able to write to each.
            fields["notebook_id"] = books.resolve(args["notebook"]).id
            books.check_writable(fields["notebook_id"])
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
            "id": NOTE_ID,
            "title": {"type": "string", "minLength": 1},
            "body": {"type": "string"},
            "append": {"type": "string"},
            "prepend": {"type": "string"},
            "replace_text": input_schema_of({"find": {"type": "string", "minLength": 1}, "replace": {"type": "string"}}, ["find", "replace"]),
            "notebook": {"type": "string", "description": "Move to this notebook (id, path or title)."},
            "is_todo": {"type": "boolean"},
            "todo_due": nullable("string", description="ISO 8601 date or date-time; null clears it."),
            "todo_completed": nullable(
                "boolean", "string", description="true = done now, false/null = not done, or an ISO 8601 time."
            ),
        },
        ["id"],
    ),
    output_schema=output_schema_of(
        {**NOTE_OUT["properties"], "changed": {"type": "array", "items": {"type": "string"}}},
        [*NOTE_OUT["required"], "changed"],
    ),
    handler=threaded(_update_note),
    effect="write",
    approval=_update_asks,
    describe=_describe_update,
    within_notebooks=True,
)


def _delete_note(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.write() as c:
        note = writable_note(ctx, c, args["id"])
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
    input_schema=input_schema_of({"id": NOTE_ID}, ["id"]),
    output_schema=output_schema_of(
        {"id": {"type": "string"}, "title": {"type": "string"}, "in_trash": {"type": "boolean"}, "message": {"type": "string"}},
        ["id", "title", "in_trash"],
    ),
    handler=threaded(_delete_note),
    effect="destructive",
    describe=lambda args, name: f"Move {name(str(args['id']))} to the trash.",
    idempotent=True,
    within_notebooks=True,
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
        note = writable_note(ctx, c, args["id"])
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
            "id": NOTE_ID,
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
    approval=lambda args: bool(args.get("remove")),
    describe=_describe_tags,
    idempotent=True,
    within_notebooks=True,
)


def _create_notebook(ctx: ToolContext, args: dict[str, Any]) -> Any:
    ws = ctx.workspace
    with ws.write() as c:
        books = Books(ctx, c)
        parent = books.resolve(args["parent"]) if args.get("parent") is not None else None
        if parent is not None:
            books.check_writable(parent.id)  # a sub-notebook is its parent's owner's
        user = ctx.user
        # A top-level notebook is whoever makes it's (the owner's stay without an owner_id).
        owner = None if parent is not None or user is None or user.role == "owner" else user.id
        book = ws.create_notebook(args["title"], parent.id if parent else None, owner_id=owner, conn=c)
        books.add(book)
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
    output_schema=NOTEBOOK_OUT,
    handler=threaded(_create_notebook),
    effect="write",
    approval=never,
    describe=lambda args, name: f"Create the notebook {_quoted(args.get('title', ''))}.",
    within_notebooks=True,
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
        books.check_writable(place, note_id=item_id if item.kind == "note" else None, trashed=True)
        restored = ws.restore(item_id, conn=c)
        after = Books(ctx, c)
        where = restored.id if restored.kind == "notebook" else restored.parent_id or ""
        if not after.in_scope(where):
            raise ToolError(
                f"{restored.kind} {item_id!r} would come back outside the notebooks tools may use "
                "(its notebook is gone); restore it in noteloom itself"
            )
        if not after.writable(where):
            # Its notebook is gone and the fallback is someone else's: raising rolls it back.
            raise Forbidden(
                f"{restored.kind} {item_id!r} would come back in notebook {after.title(where)!r}, which you may "
                "only read (its own notebook is gone); restore that notebook first, or ask its owner"
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
    approval=never,
    describe=lambda args, name: f"Restore {name(str(args['id']))} from the trash.",
    within_notebooks=True,
)


WRITE_TOOLS = [CREATE_NOTE, UPDATE_NOTE, DELETE_NOTE, MANAGE_TAGS, CREATE_NOTEBOOK, RESTORE_NOTE]
