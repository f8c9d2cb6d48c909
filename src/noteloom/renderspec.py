"""How a tool's result is shown to a person: a few declarative blocks the web chat draws.

A tool may declare ``render(input, output) -> RenderSpec | None``; after a successful call
its value is checked here and kept beside the result (the chat stores it, its JSON API
returns it, the page draws it). No plugin code runs in the page: a spec is data, drawn
with the page's own DOM code, its text set as text and its Markdown through the same
sanitiser as the chat's answers::

    from noteloom.renderspec import Image, Item, ItemList, asset

    def render(args, out):
        return ItemList([
            Item(i["name"], f"× {i['count']}", Image(asset("trip_packing", i["picture"]), i["name"]))
            for i in out["items"]
        ])

The blocks: :class:`Markdown`, :class:`ItemList` of :class:`Item`, :class:`Table`,
:class:`KeyValues`, :class:`Gallery` and :class:`Image`. An image's source is one of two
kinds only: a plugin's static file (:func:`asset`, ``/plugins/NAME/static/PATH``) or an
attachment of the workspace (:func:`attachment`, ``/attachments/ID``, which the page
fetches with its credential) — never a URL of another site, a ``data:`` or
``javascript:`` one, or a path that climbs out of the plugin's folder.

Every block checks itself when made and :func:`from_json` checks what it reads, with
bounds on items, rows and text (``InvalidRenderSpec`` says what is wrong). A renderer
that raises or returns anything else is logged and ignored (:func:`render_result`): the
result then shows as JSON, as a tool without a renderer's does.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from noteloom.jsonvalues import surrogate_in

log = logging.getLogger("noteloom.renderspec")

#: Items of a list, rows of a table, pairs, images of a gallery.
MAX_ITEMS = 200
MAX_ROWS = 500
MAX_COLUMNS = 20
MAX_PAIRS = 200
MAX_IMAGES = 100
#: Characters of a Markdown block.
MAX_MARKDOWN = 20_000
#: Characters of a title, subtitle, cell, key, value or alt text.
MAX_TEXT = 1_000
#: UTF-8 bytes of a whole spec in its JSON form.
MAX_JSON_BYTES = 256 * 1024

#: A plugin's name as it appears in its static route.
PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: One folder or file name under a plugin's static folder: no ``.``/``..``, no hidden files,
#: nothing that needs escaping in a URL.
_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")
_ASSET = re.compile(r"/plugins/([^/]+)/static/(.+)")
_ATTACHMENT = re.compile(r"/attachments/([0-9a-f]{32})")
_MAX_PATH = 512

Cell: TypeAlias = str | int | float | bool | None
SourceKind = Literal["asset", "attachment"]


class InvalidRenderSpec(ValueError):
    """A render spec that breaks a rule: the message names the rule (a plugin author's error)."""


def asset(plugin: str, path: str) -> str:
    """The source of an image among ``plugin``'s static files (``register_static``)."""
    if not isinstance(plugin, str) or not PLUGIN_NAME.fullmatch(plugin):
        raise InvalidRenderSpec(f"asset: {plugin!r} is not a plugin name (letters, digits, _ and -)")
    _check_asset_path(path)
    return f"/plugins/{plugin}/static/{path}"


def attachment(attachment_id: str) -> str:
    """The source of an image that is an attachment of the workspace (its 32-hex id)."""
    if not isinstance(attachment_id, str) or not re.fullmatch(r"[0-9a-f]{32}", attachment_id):
        raise InvalidRenderSpec(f"attachment: {attachment_id!r} is not an attachment id (32 hex digits)")
    return f"/attachments/{attachment_id}"


def source_kind(src: str) -> SourceKind:
    """Which of the two kinds ``src`` is; ``InvalidRenderSpec`` for anything else."""
    if not isinstance(src, str):
        raise InvalidRenderSpec(f"an image source must be a string, not {type(src).__name__}")
    if _ATTACHMENT.fullmatch(src):
        return "attachment"
    m = _ASSET.fullmatch(src)
    if m and PLUGIN_NAME.fullmatch(m.group(1)):
        _check_asset_path(m.group(2))
        return "asset"
    raise InvalidRenderSpec(
        f"image source {src[:80]!r} is neither asset(plugin, path) nor attachment(id); "
        "images come from a plugin's static files or the workspace's attachments"
    )


def _check_asset_path(path: Any) -> None:
    if not isinstance(path, str) or not path or len(path) > _MAX_PATH:
        raise InvalidRenderSpec(f"asset path {path!r} must be a relative path of 1 to {_MAX_PATH} characters")
    for segment in path.split("/"):
        if not _SEGMENT.fullmatch(segment):
            raise InvalidRenderSpec(
                f"asset path {path[:80]!r}: {segment[:40]!r} is not a plain file or folder name "
                "(letters, digits, _ - and ., not starting with a dot)"
            )


def _text(value: Any, what: str, limit: int = MAX_TEXT, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidRenderSpec(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise InvalidRenderSpec(f"{what} is {len(value)} characters long; the most is {limit}")
    if "\x00" in value:
        raise InvalidRenderSpec(f"{what} holds a NUL character")
    bad = surrogate_in(value)
    if bad is not None:
        raise InvalidRenderSpec(f"{what} holds a lone surrogate ({bad}), which is not text")
    return value


def _cell(value: Any, what: str) -> Cell:
    if value is None or isinstance(value, bool | int):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
            raise InvalidRenderSpec(f"{what}: {value} is too large a number to show exactly")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRenderSpec(f"{what}: {value} is not a finite number")
        return value
    return _text(value, what)


def _seq(value: Any, what: str, limit: int) -> tuple[Any, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidRenderSpec(f"{what} must be a list, not {type(value).__name__}")
    if len(value) > limit:
        raise InvalidRenderSpec(f"{what} has {len(value)} entries; the most is {limit}")
    return tuple(value)


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True, slots=True)
class Image:
    """A picture: ``src`` from :func:`asset` or :func:`attachment`, ``alt`` read aloud in its place."""

    src: str
    alt: str = ""

    def __post_init__(self) -> None:
        source_kind(self.src)
        _text(self.alt, "image alt text")

    def to_json(self) -> dict[str, Any]:
        return {"type": "image", "src": self.src, "alt": self.alt}


@dataclass(frozen=True, slots=True)
class Markdown:
    """Markdown text, shown as the chat shows its answers (sanitised; links to http(s) only)."""

    text: str

    def __post_init__(self) -> None:
        _text(self.text, "markdown text", MAX_MARKDOWN)

    def to_json(self) -> dict[str, Any]:
        return {"type": "markdown", "text": self.text}


@dataclass(frozen=True, slots=True)
class Item:
    """One entry of an :class:`ItemList`."""

    title: str
    subtitle: str | None = None
    thumbnail: Image | None = None

    def __post_init__(self) -> None:
        _text(self.title, "item title")
        _text(self.subtitle, "item subtitle", optional=True)
        if self.thumbnail is not None and not isinstance(self.thumbnail, Image):
            raise InvalidRenderSpec(f"an item's thumbnail must be an Image, not {type(self.thumbnail).__name__}")

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "subtitle": self.subtitle,
            "thumbnail": None if self.thumbnail is None else self.thumbnail.to_json(),
        }


@dataclass(frozen=True, slots=True)
class ItemList:
    """A list of items, each a title with an optional subtitle and thumbnail."""

    items: Sequence[Item]

    def __post_init__(self) -> None:
        items = _seq(self.items, "list items", MAX_ITEMS)
        for item in items:
            if not isinstance(item, Item):
                raise InvalidRenderSpec(f"list items must be Item, not {type(item).__name__}")
        _set(self, "items", items)

    def to_json(self) -> dict[str, Any]:
        return {"type": "list", "items": [i.to_json() for i in self.items]}


@dataclass(frozen=True, slots=True)
class Table:
    """Rows under named columns; each cell a string, a number, true/false or empty."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]

    def __post_init__(self) -> None:
        columns = _seq(self.columns, "table columns", MAX_COLUMNS)
        if not columns:
            raise InvalidRenderSpec("a table needs at least one column")
        for c in columns:
            _text(c, "a column name")
        rows = _seq(self.rows, "table rows", MAX_ROWS)
        checked = []
        for n, row in enumerate(rows):
            cells = _seq(row, f"row {n}", MAX_COLUMNS)
            if len(cells) != len(columns):
                raise InvalidRenderSpec(f"row {n} has {len(cells)} cells for {len(columns)} columns")
            checked.append(tuple(_cell(v, f"row {n}") for v in cells))
        _set(self, "columns", columns)
        _set(self, "rows", tuple(checked))

    def to_json(self) -> dict[str, Any]:
        return {"type": "table", "columns": list(self.columns), "rows": [list(r) for r in self.rows]}


@dataclass(frozen=True, slots=True)
class KeyValues:
    """Named values, in order: ``KeyValues({"Days": 3, "Weather": "rain"})`` or a list of pairs."""

    pairs: Sequence[tuple[str, Cell]] | Mapping[str, Cell]

    def __post_init__(self) -> None:
        raw = list(self.pairs.items()) if isinstance(self.pairs, Mapping) else self.pairs
        pairs = _seq(raw, "key-value pairs", MAX_PAIRS)
        checked = []
        for pair in pairs:
            kv = _seq(pair, "a key-value pair", 2)
            if len(kv) != 2:
                raise InvalidRenderSpec("a key-value pair must be [key, value]")
            checked.append((_text(kv[0], "a key"), _cell(kv[1], f"the value of {str(kv[0])[:40]!r}")))
        _set(self, "pairs", tuple(checked))

    def to_json(self) -> dict[str, Any]:
        return {"type": "key_values", "pairs": [list(p) for p in self.pairs]}


@dataclass(frozen=True, slots=True)
class Gallery:
    """Pictures side by side."""

    images: Sequence[Image]

    def __post_init__(self) -> None:
        images = _seq(self.images, "gallery images", MAX_IMAGES)
        for image in images:
            if not isinstance(image, Image):
                raise InvalidRenderSpec(f"gallery images must be Image, not {type(image).__name__}")
        _set(self, "images", images)

    def to_json(self) -> dict[str, Any]:
        return {"type": "gallery", "images": [i.to_json() for i in self.images]}


RenderSpec: TypeAlias = Markdown | ItemList | Table | KeyValues | Gallery | Image
#: What a tool declares: ``(validated input, output payload) -> RenderSpec | None``.
Renderer: TypeAlias = Callable[[Mapping[str, Any], Any], "RenderSpec | None"]
SPEC_TYPES: tuple[type, ...] = (Markdown, ItemList, Table, KeyValues, Gallery, Image)


def _keys(data: Mapping[str, Any], what: str, allowed: set[str], required: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidRenderSpec(f"{what} has no field {unknown[0]!r}; its fields: {', '.join(sorted(allowed))}")
    missing = sorted(required - set(data))
    if missing:
        raise InvalidRenderSpec(f"{what} needs the field {missing[0]!r}")


def _image(data: Any) -> Image:
    if not isinstance(data, Mapping):
        raise InvalidRenderSpec(f"an image must be an object, not {type(data).__name__}")
    _keys(data, "an image", {"type", "src", "alt"}, {"src"})
    if data.get("type", "image") != "image":
        raise InvalidRenderSpec(f"an image's type must be 'image', not {data.get('type')!r}")
    return Image(data["src"], data.get("alt", ""))


def from_json(data: Any) -> RenderSpec:
    """The spec that :meth:`to_json` made, checked again (``InvalidRenderSpec`` if it breaks a rule)."""
    if not isinstance(data, Mapping):
        raise InvalidRenderSpec(f"a render spec must be an object, not {type(data).__name__}")
    kind = data.get("type")
    if kind == "markdown":
        _keys(data, "markdown", {"type", "text"}, {"text"})
        return Markdown(data["text"])
    if kind == "list":
        _keys(data, "a list", {"type", "items"}, {"items"})
        items = []
        for raw in _seq(data["items"], "list items", MAX_ITEMS):
            if not isinstance(raw, Mapping):
                raise InvalidRenderSpec(f"a list item must be an object, not {type(raw).__name__}")
            _keys(raw, "a list item", {"title", "subtitle", "thumbnail"}, {"title"})
            thumb = raw.get("thumbnail")
            items.append(Item(raw["title"], raw.get("subtitle"), None if thumb is None else _image(thumb)))
        return ItemList(items)
    if kind == "table":
        _keys(data, "a table", {"type", "columns", "rows"}, {"columns", "rows"})
        return Table(data["columns"], data["rows"])
    if kind == "key_values":
        _keys(data, "key_values", {"type", "pairs"}, {"pairs"})
        return KeyValues(data["pairs"])
    if kind == "gallery":
        _keys(data, "a gallery", {"type", "images"}, {"images"})
        return Gallery([_image(i) for i in _seq(data["images"], "gallery images", MAX_IMAGES)])
    if kind == "image":
        return _image(data)
    raise InvalidRenderSpec(
        f"unknown render spec type {kind!r}; use markdown, list, table, key_values, gallery or image"
    )


def to_json(spec: RenderSpec | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON form of ``spec`` (a block, or its JSON form, checked), within :data:`MAX_JSON_BYTES`."""
    if isinstance(spec, Mapping):
        spec = from_json(spec)
    if not isinstance(spec, SPEC_TYPES):
        raise InvalidRenderSpec(
            f"a renderer must return a RenderSpec (Markdown, ItemList, Table, KeyValues, Gallery, Image) "
            f"or None, not {type(spec).__name__}"
        )
    out = spec.to_json()
    size = len(json.dumps(out, ensure_ascii=False).encode("utf-8"))
    if size > MAX_JSON_BYTES:
        raise InvalidRenderSpec(f"the render spec is {size} bytes as JSON; the most is {MAX_JSON_BYTES}")
    return out


def checked_json(data: Any) -> dict[str, Any] | None:
    """A stored spec's JSON form if it still passes the rules, else ``None`` (shown as JSON)."""
    if data is None:
        return None
    try:
        return to_json(from_json(data))
    except InvalidRenderSpec as exc:
        log.warning("a stored render spec is not valid (%s); its result shows as JSON", exc)
        return None


def render_result(render: Renderer | None, tool: str, args: Mapping[str, Any], payload: Any) -> dict[str, Any] | None:
    """What ``render`` makes of one successful call, in its JSON form, or ``None``: no
    renderer, it declined, or it failed — raised, or returned what breaks a rule, which is
    logged (the call itself stands; its result shows as JSON). The renderer gets a copy of
    the arguments; it must not change the payload, which the model reads next."""
    if render is None:
        return None
    try:
        spec = render(copy.deepcopy(dict(args)), payload)
    except Exception:
        log.exception("the renderer of tool %s failed; its result shows as JSON", tool)
        return None
    if spec is None:
        return None
    try:
        return to_json(spec)
    except InvalidRenderSpec as exc:
        log.warning("tool %s rendered an invalid spec (%s); its result shows as JSON", tool, exc)
        return None
