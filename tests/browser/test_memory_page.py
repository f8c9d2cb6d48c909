"""The memory page in a real Chromium against a live ``noteloom serve``: the list of one's own
and the shared memories with the assistant's badged "AI" and linked to the chat they came
from; add, edit and delete through the form, each checked against the API; search; a text
that looks like markup shown as text; a blank fact refused beside the form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_support import Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from noteloom.memory import store

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"
CHAT = "c" * 32
MARKUP = '<img src=x onerror="document.body.dataset.pwned=1">'


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("memory-browser")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        owner = app.workspace.ensure_owner()
        with app.workspace.write() as c:
            ids = {
                "ai": store.add(c, owner.id, "Prefers short answers with a summary first", title="Answer style",
                                source="ai", conversation_id=CHAT, message_id="m" * 32).id,
                "shared": store.add(c, owner.id, "The office closes at six", title="Office hours",
                                    scope="shared").id,
                "markup": store.add(c, owner.id, MARKUP, title=MARKUP).id,
            }
        token = access_token(app)
    finally:
        app.close()
    with served(home) as url:
        yield Live(url, token, home, ids)


@pytest.fixture
def page(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page on /memory, ready once its list is drawn; a dialog or a script error fails the test."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = context.new_page()
    problems: list[str] = []

    def on_dialog(dialog: Any) -> None:
        problems.append(f"browser dialog: {dialog.message}")
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    pg.goto(live.page_url("/memory"))
    expect(pg.locator("body")).to_have_attribute("data-ready", "1")
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"memory-{request.node.name}.png"), full_page=True)
        context.close()
    assert not problems, problems


def row(page: Any, memory_id: str) -> Any:
    return page.locator(f'.memory-item[data-id="{memory_id}"]')


def memories(live: Live) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in live.api("GET", "/api/v1/memory")}


def test_the_list_badges_what_the_assistant_wrote_and_links_where_it_came_from(page: Any, live: Live) -> None:
    ai = row(page, live.notes["ai"])
    expect(ai.locator(".ai-badge")).to_have_text("AI")
    expect(ai.locator(".memory-origin")).to_have_attribute("href", f"/chat?c={CHAT}")
    expect(ai.locator(".scope-badge")).to_have_text("Yours")
    shared = row(page, live.notes["shared"])
    expect(shared.locator(".scope-badge")).to_have_text("Shared")
    expect(shared.locator(".ai-badge")).to_have_count(0)
    markup = row(page, live.notes["markup"])
    expect(markup.locator(".memory-title")).to_have_text(MARKUP)  # text, never markup
    expect(markup.locator("img")).to_have_count(0)
    assert page.evaluate("document.body.dataset.pwned") is None
    expect(page.locator("nav.main-nav a[aria-current=page]")).to_have_text("Memory")


def test_add_edit_and_delete_through_the_form(page: Any, live: Live) -> None:
    page.fill("#m-title", "Bike")
    page.fill("#m-content", "Rides a blue bike to work")
    page.fill("#m-tags", "commute, bike")
    page.click("#m-save")
    added = page.locator(".memory-item", has_text="Rides a blue bike to work")
    expect(added).to_have_count(1)
    expect(added.locator(".ai-badge")).to_have_count(0)
    [made] = [m for m in memories(live).values() if m["title"] == "Bike"]
    assert (made["scope"], made["source"], made["tags"]) == ("personal", "user", ["commute", "bike"])

    # The assistant's memory, corrected: its badge and provenance stay.
    row(page, live.notes["ai"]).locator("button.edit").click()
    expect(page.locator("#form-title")).to_have_text("Edit the memory")
    page.fill("#m-content", "Prefers answers in bullet points")
    page.click("#m-save")
    expect(row(page, live.notes["ai"]).locator(".memory-content")).to_have_text("Prefers answers in bullet points")
    expect(row(page, live.notes["ai"]).locator(".ai-badge")).to_have_text("AI")
    corrected = memories(live)[live.notes["ai"]]
    assert corrected["content"] == "Prefers answers in bullet points" and corrected["conversation_id"] == CHAT
    expect(page.locator("#form-title")).to_have_text("Add a memory")

    added.locator("button.delete").click()
    expect(page.locator(".memory-item", has_text="Rides a blue bike to work")).to_have_count(0)
    assert made["id"] not in memories(live)


def test_a_shared_memory_added_from_the_page_is_the_workspaces(page: Any, live: Live) -> None:
    page.fill("#m-content", "Invoices go out on the first")
    page.check("#m-shared")
    page.click("#m-save")
    made = page.locator(".memory-item", has_text="Invoices go out on the first")
    expect(made.locator(".scope-badge")).to_have_text("Shared")
    [shared] = [m for m in memories(live).values() if m["content"] == "Invoices go out on the first"]
    assert shared["scope"] == "shared" and shared["title"] == "Invoices go out on the first"


def test_search_and_the_scope_filter_narrow_the_list(page: Any, live: Live) -> None:
    page.fill("#m-search", "OFFICE")
    page.click("#search-form button[type=submit]")
    expect(page.locator(".memory-item")).to_have_count(1)
    expect(row(page, live.notes["shared"])).to_have_count(1)
    page.fill("#m-search", "")
    page.select_option("#m-filter", "shared")
    expect(page.locator('.memory-item[data-scope="personal"]')).to_have_count(0)
    expect(row(page, live.notes["shared"])).to_have_count(1)
    page.fill("#m-search", "no-such-word-anywhere")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#memory-list .empty")).to_contain_text("No memory matches")


def test_a_blank_fact_is_refused_beside_the_form(page: Any, live: Live) -> None:
    before = len(memories(live))
    page.fill("#m-content", "   ")
    page.click("#m-save")
    expect(page.locator("#form-error")).to_be_visible()
    expect(page.locator("#form-error")).to_contain_text("content")
    assert len(memories(live)) == before
