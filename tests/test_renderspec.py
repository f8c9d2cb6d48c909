"""Render specs: the blocks check themselves, round-trip through JSON, keep to their bounds,
take images only from a plugin's static files or the workspace's attachments, and a
renderer that fails or returns junk leaves the call standing with no render."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from noteloom import renderspec as rs
from noteloom.renderspec import (
    Gallery,
    Image,
    InvalidRenderSpec,
    Item,
    ItemList,
    KeyValues,
    Markdown,
    Table,
    asset,
    attachment,
    from_json,
    render_result,
    to_json,
)
from noteloom.tools import ToolContext, ToolDef, call_tool
from noteloom.workspace import Workspace

ATT = "0123456789abcdef0123456789abcdef"

SPECS = [
    Markdown("**Pack** light"),
    ItemList([Item("Socks", "× 6", Image(asset("trip_packing", "img/socks.png"), "Socks")), Item("Tent")]),
    Table(["Item", "Count", "Packed"], [["Socks", 6, True], ["Tent", 1.5, None]]),
    KeyValues({"Destination": "Oslo", "Days": 3}),
    KeyValues([("Rain", False)]),
    Gallery([Image(attachment(ATT), "Map"), Image(asset("trip_packing", "tent.png"))]),
    Image(attachment(ATT), "Photo"),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: type(s).__name__)
def test_every_block_round_trips_through_json(spec: rs.RenderSpec) -> None:
    data = to_json(spec)
    assert json.loads(json.dumps(data)) == data
    assert from_json(data) == spec
    assert to_json(data) == data  # a JSON form is accepted where a block is


def test_the_json_forms_are_the_documented_ones() -> None:
    assert to_json(SPECS[1]) == {"type": "list", "items": [
        {"title": "Socks", "subtitle": "× 6",
         "thumbnail": {"type": "image", "src": "/plugins/trip_packing/static/img/socks.png", "alt": "Socks"}},
        {"title": "Tent", "subtitle": None, "thumbnail": None},
    ]}
    assert to_json(SPECS[3]) == {"type": "key_values", "pairs": [["Destination", "Oslo"], ["Days", 3]]}
    assert asset("p", "a/b.png") == "/plugins/p/static/a/b.png"
    assert attachment(ATT) == f"/attachments/{ATT}"


@pytest.mark.parametrize("src", [
    "https://example.com/a.png",
    "//example.com/a.png",
    "javascript:alert(1)",
    "data:image/png;base64,AAAA",
    "/plugins/p/static/../../etc/passwd",
    "/plugins/p/static/a/../b.png",
    "/plugins/p/static/.hidden",
    "/plugins/p/static/",
    "/plugins/p/static//a.png",
    "/plugins/p/static/a%2f..%2fb.png",
    "/plugins/p/static/a\\b.png",
    "/plugins/../static/a.png",
    "/plugins/p q/static/a.png",
    "/attachments/1234",
    "/attachments/" + "A" * 32,
    "/attachments/" + ATT + "/x",
    "/static/chat.js",
    "socks.png",
    "",
])
def test_image_sources_are_only_assets_and_attachments(src: str) -> None:
    with pytest.raises(InvalidRenderSpec, match=r"image source|asset path"):
        Image(src, "x")
    with pytest.raises(InvalidRenderSpec):
        from_json({"type": "image", "src": src, "alt": "x"})


@pytest.mark.parametrize(("plugin", "path"), [("../x", "a.png"), ("p", "../a.png"), ("p", "/a.png"), ("", "a.png"),
                                              ("p", ""), ("p", "a" * 600)])
def test_asset_refuses_names_that_escape(plugin: str, path: str) -> None:
    with pytest.raises(InvalidRenderSpec):
        asset(plugin, path)


def test_attachment_needs_an_id() -> None:
    with pytest.raises(InvalidRenderSpec, match="32 hex"):
        attachment("../../notes")


def test_bounds_on_items_rows_and_text() -> None:
    with pytest.raises(InvalidRenderSpec, match="the most is 200"):
        ItemList([Item("x")] * (rs.MAX_ITEMS + 1))
    ItemList([Item("x")] * rs.MAX_ITEMS)
    with pytest.raises(InvalidRenderSpec, match="the most is 500"):
        Table(["a"], [["x"]] * (rs.MAX_ROWS + 1))
    with pytest.raises(InvalidRenderSpec, match="columns"):
        Table(["c"] * (rs.MAX_COLUMNS + 1), [])
    with pytest.raises(InvalidRenderSpec, match="characters long"):
        Markdown("x" * (rs.MAX_MARKDOWN + 1))
    with pytest.raises(InvalidRenderSpec, match="item title"):
        Item("x" * (rs.MAX_TEXT + 1))
    with pytest.raises(InvalidRenderSpec, match="gallery"):
        Gallery([Image(attachment(ATT))] * (rs.MAX_IMAGES + 1))
    with pytest.raises(InvalidRenderSpec, match="pairs"):
        KeyValues({str(i): i for i in range(rs.MAX_PAIRS + 1)})
    big = Table(["a", "b"], [["x" * rs.MAX_TEXT, "y" * rs.MAX_TEXT]] * 200)  # each part within bounds
    with pytest.raises(InvalidRenderSpec, match="bytes as JSON"):
        to_json(big)


@pytest.mark.parametrize("make", [
    lambda: Table([], []),
    lambda: Table(["a", "b"], [["only one"]]),
    lambda: Table(["a"], [[{"nested": 1}]]),
    lambda: Table(["a"], [[float("nan")]]),
    lambda: Table(["a"], [[2**60]]),
    lambda: Table("ab", []),
    lambda: KeyValues([("k", "v", "extra")]),
    lambda: KeyValues([(1, "v")]),
    lambda: Item(None),
    lambda: Item("t", thumbnail="/attachments/" + ATT),
    lambda: ItemList(["plain text"]),
    lambda: ItemList(Item("one")),
    lambda: Gallery(["/attachments/" + ATT]),
    lambda: Markdown("nul\x00"),
    lambda: Markdown("lone \ud800 surrogate"),
], ids=range(15))
def test_malformed_blocks_are_refused_with_a_reason(make: Any) -> None:
    with pytest.raises(InvalidRenderSpec) as err:
        make()
    assert str(err.value)


@pytest.mark.parametrize("data", [
    None,
    [],
    "markdown",
    {"type": "html", "html": "<script>alert(1)</script>"},
    {"type": "markdown"},
    {"type": "markdown", "text": "x", "html": "<b>x</b>"},
    {"type": "list", "items": [{"title": "x", "onclick": "alert(1)"}]},
    {"type": "list", "items": [{"title": "x", "thumbnail": {"src": "https://evil.example/x.png"}}]},
    {"type": "list", "items": "abc"},
    {"type": "table", "columns": ["a"]},
    {"type": "gallery", "images": [{"type": "markdown", "src": "/attachments/" + ATT}]},
])
def test_from_json_refuses_what_breaks_a_rule(data: Any) -> None:
    with pytest.raises(InvalidRenderSpec):
        from_json(data)


def test_a_failing_or_junk_renderer_is_logged_and_gives_no_render(caplog: pytest.LogCaptureFixture) -> None:
    def boom(args: Any, out: Any) -> rs.RenderSpec:
        raise RuntimeError("renderer bug")

    caplog.set_level(logging.WARNING, "noteloom.renderspec")
    assert render_result(boom, "t", {}, {}) is None
    assert "renderer of tool t failed" in caplog.text and "renderer bug" in caplog.text
    caplog.clear()
    assert render_result(lambda a, o: "just a string", "t", {}, {}) is None  # type: ignore[arg-type,return-value]
    assert "must return a RenderSpec" in caplog.text
    caplog.clear()
    assert render_result(lambda a, o: {"type": "image", "src": "javascript:x"}, "t", {}, {}) is None  # type: ignore[arg-type,return-value]
    assert "invalid spec" in caplog.text
    assert render_result(lambda a, o: None, "t", {}, {}) is None
    assert render_result(None, "t", {}, {}) is None
    assert render_result(lambda a, o: Markdown(o["text"]), "t", {}, {"text": "hi"}) == {"type": "markdown", "text": "hi"}


def test_a_renderer_gets_a_copy_of_the_arguments() -> None:
    args: dict[str, Any] = {"tags": ["a"]}

    def meddle(a: Any, out: Any) -> rs.RenderSpec:
        a["tags"].append("b")
        return Markdown("ok")

    render_result(meddle, "t", args, None)
    assert args == {"tags": ["a"]}


def test_stored_specs_are_checked_again_when_read() -> None:
    assert rs.checked_json({"type": "markdown", "text": "x"}) == {"type": "markdown", "text": "x"}
    assert rs.checked_json({"type": "image", "src": "https://evil.example/"}) is None
    assert rs.checked_json(None) is None


async def _handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
    return {"items": [{"name": n} for n in args["names"]]}


def _tool(render: Any) -> ToolDef:
    return ToolDef(
        name="pack", description="Pack.", handler=_handler, render=render,
        input_schema={"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                      "required": ["names"]},
    )


@pytest.mark.anyio
async def test_call_tool_returns_the_render_beside_the_payload(ws: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    ctx = ToolContext(ws)
    seen: list[Any] = []

    def render(args: Any, out: Any) -> rs.RenderSpec:
        seen.append((args, out))
        return ItemList([Item(i["name"]) for i in out["items"]])

    result = await call_tool(ctx, _tool(render), {"names": ["socks", "tent"]})
    assert result.payload == {"items": [{"name": "socks"}, {"name": "tent"}]}
    assert result.render == {"type": "list", "items": [{"title": "socks", "subtitle": None, "thumbnail": None},
                                                       {"title": "tent", "subtitle": None, "thumbnail": None}]}
    assert seen == [({"names": ["socks", "tent"]}, result.payload)]

    plain = await call_tool(ctx, _tool(None), {"names": ["socks"]})
    assert plain.render is None and plain.payload == {"items": [{"name": "socks"}]}

    def broken(args: Any, out: Any) -> rs.RenderSpec:
        return ItemList([Item(i["nope"]) for i in out["items"]])

    caplog.set_level(logging.WARNING, "noteloom.renderspec")
    survived = await call_tool(ctx, _tool(broken), {"names": ["socks"]})
    assert survived.render is None and survived.payload == {"items": [{"name": "socks"}]}
    assert "renderer of tool pack failed" in caplog.text
