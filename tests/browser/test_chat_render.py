"""Tool results in the chat page, in a real Chromium against a live ``noteloom serve``: a
plugin tool's result drawn from its render spec (a list whose thumbnails load, from the
workspace's attachments and from the plugin's static files), and a tool
without a renderer whose result is folded, pretty-printed JSON that opens on a click.

The plugin is installed the way a package is: a module and its ``*.dist-info`` with a
``noteloom`` entry point, on the server's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import re
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from page_support import Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from plugin_site import install_plugin

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

FORECAST = {"place": "Oslo", "days": [{"day": 1, "sky": "rain", "high": 9}, {"day": 2, "sky": "sun", "high": 14}]}

PLUGIN = '''
import json
from pathlib import Path

from noteloom.plugins import hookimpl
from noteloom.renderspec import Image, Item, ItemList, asset, attachment
from noteloom.tools import ToolDef

PICTURES = json.loads(Path(__file__).with_name("render_probe.json").read_text())
SCHEMA = {"type": "object", "properties": {"destination": {"type": "string"}}, "required": ["destination"]}


async def pack(ctx, args):
    return {"destination": args["destination"],
            "items": [{"name": "Socks", "count": 6, "picture": PICTURES["socks"]},
                      {"name": "Tent", "count": 1, "picture": PICTURES["tent"]}]}


async def forecast(ctx, args):
    return PICTURES["forecast"]


def render(args, out):
    return ItemList([Item(i["name"], f"{i['count']} for {args['destination']}",
                          Image(attachment(i["picture"]), "Picture of " + i["name"]))
                     for i in out["items"]]
                    + [Item("Boots", "from the plugin", Image(asset("render_probe", "img/boots.png"), "Picture of Boots"))])


@hookimpl
def register_static(register):
    register("render_probe", Path(__file__).with_name("render_probe_static"))


@hookimpl
def register_tools(register):
    register(ToolDef("pack_probe", "What to pack.", SCHEMA, pack, render=render))
    register(ToolDef("forecast_probe", "The forecast.", SCHEMA, forecast))
'''


def png(rgb: tuple[int, int, int], size: int = 8) -> bytes:
    """A small valid PNG of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")



@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("chat-render")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        note = ws.create_note("Packing pictures", "")
        pictures = {
            "socks": ws.add_attachment(note.id, png((200, 40, 40)), "socks.png").id,
            "tent": ws.add_attachment(note.id, png((40, 160, 60)), "tent.png").id,
            "forecast": FORECAST,
        }
        token = access_token(app)
    finally:
        app.close()

    site = install_plugin(home / "site", "render_probe", PLUGIN)
    (site / "render_probe.json").write_text(json.dumps(pictures), encoding="utf-8")
    (site / "render_probe_static" / "img").mkdir(parents=True)
    (site / "render_probe_static" / "img" / "boots.png").write_bytes(png((90, 60, 30)))

    args = {"destination": "Oslo"}
    script = {"steps": [
        {"text": "Let me look.", "tool_calls": [{"name": "pack_probe", "arguments": args},
                                                 {"name": "forecast_probe", "arguments": args}]},
        {"text": "Pack socks and the tent; rain on day one."},
    ], "loop": True}
    (home / "render.json").write_text(json.dumps(script), encoding="utf-8")
    slow = {"steps": [{"tool_calls": [{"name": "forecast_probe", "arguments": args}]},
                      {"chunks": ["Reading the forecast "], "hang": True}], "loop": True}
    (home / "slow.json").write_text(json.dumps(slow), encoding="utf-8")
    (home / "noteloom.toml").write_text(
        f'[providers]\ndefault = "render"\n\n[providers.render]\ntype = "scripted"\nscript = "{home / "render.json"}"\n'
        f'loop = true\n\n[providers.slow]\ntype = "scripted"\nscript = "{home / "slow.json"}"\nloop = true\n',
        encoding="utf-8",
    )

    with served(home, pythonpath=site) as url:
        yield Live(url, token, home, {})


def loaded(page: Any, image: Any, source: str) -> None:
    """Wait until ``image`` has been decoded from a URL starting with ``source`` (an <img>
    whose source never loads never is)."""
    page.wait_for_function("([img, source]) => img.complete && img.naturalWidth > 0 && img.src.startsWith(source)",
                           arg=[image.element_handle(), source])


def test_a_plugin_result_is_drawn_from_its_render_spec_and_a_plain_one_is_folded_json(page: Any) -> None:
    page.fill("#message", "What should I pack for Oslo?")
    page.press("#message", "Enter")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".bubble")).to_contain_text("Pack socks and the tent")
    # Settled (a turn this quick may be over before the page opens its new conversation,
    # which then has no stream to announce its end).
    expect(answer).to_have_attribute("data-status", "complete")

    packed = answer.locator('.tool[data-tool="pack_probe"]')
    items = packed.locator(".tool-render.render-list .render-item")
    expect(items).to_have_count(3)
    expect(items.nth(0).locator(".render-title")).to_have_text("Socks")
    expect(items.nth(0).locator(".render-subtitle")).to_have_text("6 for Oslo")
    expect(items.nth(1).locator(".render-title")).to_have_text("Tent")
    for n, name in ((0, "Socks"), (1, "Tent")):
        thumb = items.nth(n).locator("img.render-thumb")
        expect(thumb).to_be_visible()
        expect(thumb).to_have_attribute("alt", f"Picture of {name}")
        loaded(page, thumb, "blob:")  # an attachment, fetched with the page's credential
    boots = items.nth(2).locator("img.render-thumb")
    expect(boots).to_be_visible()
    expect(boots).to_have_attribute("src", "/plugins/render_probe/static/img/boots.png")
    loaded(page, boots, page.url.split("/chat")[0] + "/plugins/render_probe/static/")  # the plugin's own file
    assert packed.locator(".tool-result").count() == 0  # drawn, not dumped

    plain = answer.locator('.tool[data-tool="forecast_probe"]')
    details = plain.locator("details.tool-result")
    expect(details).to_have_count(1)
    assert details.evaluate("d => d.open") is False
    pre = details.locator("pre.tool-json")
    expect(pre).to_be_hidden()
    assert plain.locator(".tool-render").count() == 0
    details.locator("summary").click()
    expect(pre).to_be_visible()
    assert details.evaluate("d => d.open") is True
    assert pre.text_content() == json.dumps(FORECAST, indent=2)


def test_the_result_view_survives_a_reload(page: Any, live: Live) -> None:
    # Its own conversation, sent through the JSON API and settled before the page draws it
    # afresh from the stored view (no other test's conversation is relied on).
    sent = live.api("POST", "/api/v1/chat/send", json={"message": "What should I pack for Oslo, again?"})
    deadline = time.monotonic() + 120  # a bound for a hung turn only
    while live.api("GET", f"/api/v1/chat/messages/{sent['message_id']}")["status"] != "complete":
        assert time.monotonic() < deadline, "the turn never settled"
        time.sleep(0.1)
    page.reload()
    page.click(f'#thread-list li[data-id="{sent["conversation_id"]}"] button.thread')
    answer = page.locator(".msg.assistant").last
    items = answer.locator('.tool[data-tool="pack_probe"] .render-item')
    expect(items).to_have_count(3)
    loaded(page, items.nth(1).locator("img.render-thumb"), "blob:")
    expect(answer.locator('.tool[data-tool="forecast_probe"] details.tool-result')).to_have_count(1)


def test_a_result_shows_under_its_call_while_the_turn_still_runs(page: Any) -> None:
    # A second turn of a conversation streams from its first event (a running turn opened
    # afresh shows its calls from its stored transcript, which is written as it settles).
    page.fill("#message", "Pack for Oslo")
    page.press("#message", "Enter")
    expect(page.locator(".msg.assistant").last).to_have_attribute("data-status", "complete")
    page.click("#settings-open")
    page.select_option("#set-model", "slow:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    page.fill("#message", "Will it rain in Oslo?")
    page.press("#message", "Enter")
    answer = page.locator(".msg.assistant").nth(1)
    expect(answer.locator(".bubble.streaming")).to_contain_text("Reading the forecast")  # the turn runs on
    details = answer.locator('.tool[data-tool="forecast_probe"] details.tool-result')
    expect(details).to_have_count(1)
    expect(answer.locator('.tool[data-tool="forecast_probe"] .tool-call')).to_contain_text('{"destination":"Oslo"}')
    expect(page.locator("#send")).to_have_text("Cancel")
    details.locator("summary").click()
    assert details.locator("pre.tool-json").text_content() == json.dumps(FORECAST, indent=2)
    page.click("#send")
    expect(page.locator("#send")).to_have_text("Send")


def test_a_running_turn_opened_afresh_shows_the_calls_it_made_before(page: Any) -> None:
    page.click("#settings-open")
    page.select_option("#set-model", "slow:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    page.fill("#message", "Is it raining yet?")  # the first message: the page opens the new conversation
    page.press("#message", "Enter")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".bubble.streaming")).to_contain_text("Reading the forecast")
    details = answer.locator('.tool[data-tool="forecast_probe"] details.tool-result')
    expect(details).to_have_count(1)
    assert answer.locator(".bubble.streaming").text_content().count("Reading the forecast") == 1  # no text twice
    page.reload()  # and once more from a page that knew nothing of it: its address opens the chat
    answer = page.locator(".msg.assistant").last
    expect(answer.locator('.tool[data-tool="forecast_probe"] details.tool-result')).to_have_count(1)
    expect(answer.locator(".bubble.streaming")).to_have_text("Reading the forecast ")
    expect(page.locator("#send")).to_have_text("Cancel")
    # Opened again from the list while that open is still loading (held here until the cancel
    # settled, as on a slow machine): Cancel meanwhile stops the turn the view shows.
    held: list[Any] = []
    opening = re.compile(r"/api/v1/chat/conversations/[^/?]+$")
    page.route(opening, lambda route: held.append(route) if route.request.method == "GET" else route.continue_())
    with page.expect_request(lambda r: r.method == "GET" and bool(opening.search(r.url))):
        page.click('#thread-list li button.thread:has-text("Is it raining yet?")')
    page.click("#send")
    expect(page.locator("#send")).to_have_text("Send")
    assert held, "the second open was not held"
    for route in held:
        route.continue_()
    page.unroute(opening)
    expect(answer.locator('.tool[data-tool="forecast_probe"] details.tool-result')).to_have_count(1)
    expect(answer).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#send")).to_have_text("Send")
