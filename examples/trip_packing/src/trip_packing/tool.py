"""The ``plan_trip_packing`` tool: finds the notes, plans the list, and shows it with pictures."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from noteloom.errors import QueryError
from noteloom.plugins import (
    Image,
    Item,
    ItemList,
    RenderSpec,
    ToolContext,
    ToolDef,
    ToolError,
    ToolResult,
    asset,
)

if TYPE_CHECKING:
    from noteloom.workspace import Note
    from trip_packing.packing import PackingList, PlaceNote

PLUGIN = "trip_packing"
#: Earlier lists read, newest first: older ones add little but time.
MAX_LISTS = 5
#: Notes about the destination read for what they say to bring.
MAX_PLACE_NOTES = 10
MAX_DAYS = 90
MAX_COMPANIONS = 20
#: Items the list holds at most (the longest lists people keep are well under this).
MAX_ITEMS = 150
#: Notes titled as packing lists, or tagged packing…: a title that merely says "pack" is as
#: often about code ("Pack the values") as about trips. Two searches, not one with any:1:
#: at 100,000 notes words ORed with a tag filter cost ~200 ms of CPU, the two apart ~10 ms.
LISTS_QUERIES = (
    'any:1 title:"packing list" title:"pack list" title:"packing checklist" title:"what to pack" '
    'title:"things to pack" title:"packing for"',
    "tag:packing*",
)


_STR = {"type": "string"}
_IDS = {"type": "array", "items": _STR}
#: What a call returns (MCP clients get it as structuredContent).
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "destination": _STR,
        "days": {"type": "integer"},
        "companions": {"type": "array", "items": _STR},
        "people": {"type": "integer", "description": "The user and every human companion."},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _STR,
                    "quantity": {"type": "integer", "minimum": 1},
                    "category": _STR,
                    "source_note_ids": {**_IDS, "description": "The notes the item comes from."},
                    "picture": {**_STR, "description": "The picture's file among the plugin's static files."},
                    "picture_url": {**_STR, "description": "Where the web server serves the picture."},
                    "why": _STR,
                },
                "required": ["name", "quantity", "category", "source_note_ids", "picture", "picture_url"],
            },
        },
        "based_on": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": _STR, "title": _STR, "days": {"type": ["integer", "null"]},
                               "items": {"type": "integer"}},
                "required": ["id", "title"],
            },
        },
        "destination_notes": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": _STR, "title": _STR}, "required": ["id", "title"]},
        },
        "message": _STR,
    },
    "required": ["destination", "days", "companions", "people", "items", "based_on", "destination_notes"],
}


# Descriptions in Annotated rather than a docstring's "Args:" section: reading that section
# costs every command's start a few milliseconds, since tools register at start-up.
def plan_trip_packing(
    ctx: ToolContext,
    destination: Annotated[str, 'Where the trip goes, as the user says it ("Lake District").'],
    days: Annotated[int, f"How many days the trip lasts, 1 to {MAX_DAYS}."],
    companions: Annotated[
        list[str] | None,
        'Who comes along besides the user ("my dog", "2 kids", "Sam"); leave out when travelling alone.',
    ] = None,
) -> ToolResult:
    """Plan what to pack for a trip from the user's own earlier packing lists and notes:
    merges the items of the latest packing lists in the workspace (notes titled or tagged as
    packing lists), scales their quantities to the days and the travellers, adds what the
    user's notes about the destination say to bring and what pets need, and returns one
    list, each item with a quantity, a category, the notes it came from and a picture.
    Nothing is looked up outside the workspace.

    The first paragraph is the description the model reads; the arguments' are in their
    annotations.
    """
    destination = " ".join(destination.split())
    if not destination:
        raise ToolError("destination is empty; say where the trip goes")
    if not 1 <= days <= MAX_DAYS:
        raise ToolError(f"days must be from 1 to {MAX_DAYS}, not {days}")
    companions = [c for c in (" ".join(c.split()) for c in companions or []) if c]
    if len(companions) > MAX_COMPANIONS:
        raise ToolError(f"companions names {len(companions)} people or pets; the most is {MAX_COMPANIONS}")
    # Read at the first call: every `noteloom` command registers the tool, few call it.
    from trip_packing.packing import party_of, plan

    party = party_of(companions)
    lists, places, used = _read_notes(ctx, destination)
    items = plan(destination, days, party, lists, places)[:MAX_ITEMS]
    payload: dict[str, Any] = {
        "destination": destination,
        "days": days,
        "companions": companions,
        "people": party.people,
        "items": [
            {
                "name": i.name,
                "quantity": i.quantity,
                "category": i.category,
                "source_note_ids": i.sources,
                "picture": i.picture,
                "picture_url": f"/plugins/{PLUGIN}/static/{i.picture}",
                "why": i.why,
            }
            for i in items
        ],
        "based_on": [
            {"id": x.note_id, "title": x.title, "days": x.days, "items": len(x.entries)} for x in lists
        ],
        "destination_notes": [{"id": p.note_id, "title": p.title} for p in places],
    }
    if not lists:
        payload["message"] = (
            "No earlier packing list was found: a note titled 'Packing list …' or tagged "
            "'packing' is read next time."
        )
    return ToolResult(payload, untrusted=any(n.source_url for n in used))


def _read_notes(ctx: ToolContext, destination: str) -> tuple[list[PackingList], list[PlaceNote], list[Note]]:
    """The earlier packing lists (those for this destination first, then the newest) and the
    other notes that mention the destination, within the tools' notebook scope."""
    from noteloom.search import search_notes
    from trip_packing.packing import PlaceNote, read_list, things_to_bring

    ws = ctx.workspace
    place = _ARTICLE.sub("", destination)
    with ws.read() as c:
        allowed = ctx.allowed_notebooks(conn=c)
        found = (h for q in LISTS_QUERIES for h in search_notes(ws, q, limit=100, notebook_ids=allowed, conn=c))
        list_hits = list({h.id: h for h in found}.values())
        lists_ids = {h.id for h in list_hits}
        place_hits: list[Any] = []
        # The place as a phrase, else its first part ("Lake District" of "Lake District, Cumbria").
        first = _PART.split(place, maxsplit=1)[0]
        for query in dict.fromkeys(_phrase(p) for p in (place, first) if _phrase(p).strip('" ')):
            try:
                place_hits = search_notes(ws, query, limit=MAX_PLACE_NOTES + len(lists_ids), notebook_ids=allowed,
                                          conn=c)
            except QueryError:  # nothing in it a search can match (punctuation only …)
                continue
            if place_hits:
                break
        where = first.lower()
        ranked = sorted(list_hits, key=lambda h: -h.updated_time)
        ranked.sort(key=lambda h: where not in h.title.lower())  # stable: this destination's lists first
        list_ids = [h.id for h in ranked[:MAX_LISTS]]
        place_ids = [h.id for h in place_hits if h.id not in lists_ids][:MAX_PLACE_NOTES]
        notes = ws.get_notes(list_ids + place_ids, conn=c)
    lists_notes = [notes[i] for i in list_ids if i in notes]
    place_notes = [notes[i] for i in place_ids if i in notes]
    lists = [read_list(n.id, n.title, n.body, n.updated_time) for n in lists_notes]
    places = [PlaceNote(n.id, n.title, tuple(things_to_bring(n.body))) for n in place_notes]
    return lists, places, [*lists_notes, *place_notes]


_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_PART = re.compile(r"\s*[,;(/]\s*|\s+(?:in|near|around)\s+", re.IGNORECASE)


def _phrase(text: str) -> str:
    """``text`` as one quoted phrase of the search language (its own quotes dropped)."""
    return '"' + text.replace('"', " ").strip() + '"'


def render(args: Mapping[str, Any], output: Any) -> RenderSpec:
    """The list as the chat shows it: one row per item with its picture."""
    return ItemList([
        Item(
            f"{i['quantity']} × {i['name']}" if i["quantity"] > 1 else i["name"],
            i["category"],
            Image(asset(PLUGIN, i["picture"]), i["name"]),
        )
        for i in output["items"]
    ])



PLAN_TRIP_PACKING = ToolDef.from_function(
    plan_trip_packing, title="Plan trip packing", output_schema=OUTPUT_SCHEMA, render=render
)
