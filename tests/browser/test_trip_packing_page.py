"""The example plugin in the chat page, in a real Chromium against a live ``noteloom serve``
that found it through its entry point: the packing list is drawn as a list whose every
thumbnail is one of the plugin's pictures, loaded from its static route."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import pytest
from page_support import Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
    pytest.mark.skipif(not any(ep.name == "trip_packing" for ep in entry_points(group="noteloom")),
                       reason="examples/trip_packing is not installed: `make install-test` installs it"),
]

LIST = "Cornwall, 4 days\n\n## Clothes\n- 4 socks\n- rain jacket\n\n## For the dog\n- lead\n\n## Other\n- board game\n"
ARGS = {"destination": "Lake District", "days": 5, "companions": ["my dog"]}



@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("trip-packing-page")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        app.workspace.create_note("Packing list: Cornwall", LIST)
        app.workspace.create_note("Lake District walks", "Bring midge spray.")
        token = access_token(app)
    finally:
        app.close()
    script = {"steps": [
        {"text": "Let me plan it.", "tool_calls": [{"name": "plan_trip_packing", "arguments": ARGS}]},
        {"text": "Here is your list for the Lake District."},
    ], "loop": True}
    (home / "trip.json").write_text(json.dumps(script), encoding="utf-8")
    (home / "noteloom.toml").write_text(
        f'[providers]\ndefault = "trip"\n\n[providers.trip]\ntype = "scripted"\nscript = "{home / "trip.json"}"\n'
        "loop = true\n",
        encoding="utf-8",
    )
    with served(home) as url:
        yield Live(url, token, home, {})


def test_the_packing_list_is_drawn_with_a_picture_for_every_item(page: Any) -> None:
    page.fill("#message", "What do I need for 5 days in the Lake District with my dog?")
    page.press("#message", "Enter")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".bubble")).to_contain_text("Here is your list for the Lake District.")
    expect(page.locator("#live-status")).to_have_text("Answer complete.")

    items = answer.locator('.tool[data-tool="plan_trip_packing"] .tool-render.render-list .render-item')
    expect(items).to_have_count(5)  # socks, rain jacket, lead, board game, midge spray
    titles = [items.nth(n).locator(".render-title").text_content() for n in range(5)]
    assert titles == ["5 × socks", "rain jacket", "lead", "board game", "midge spray"]
    expect(items.nth(0).locator(".render-subtitle")).to_have_text("Clothes")
    expected = ["socks.svg", "jacket.svg", "dog.svg", "item.svg", "spray.svg"]
    for n, picture in enumerate(expected):
        thumb = items.nth(n).locator("img.render-thumb")
        expect(thumb).to_be_visible()
        assert thumb.get_attribute("src", timeout=30_000).endswith(f"/plugins/trip_packing/static/{picture}")
        # Decoded: the static route served it and the page's policy let it in.
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumb.element_handle())
