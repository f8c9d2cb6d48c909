"""Memory on the chat page, in a real Chromium against a live ``noteloom serve``: an answer
shows what was remembered into its prompt, each memory a link that opens it on the memory page; the settings drawer
turns memory off for the chat and shows web as not configured."""

from __future__ import annotations

from typing import Any

import pytest
from page_support import Live
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def test_an_answer_shows_what_was_remembered_and_memory_is_switched_off_in_settings(page: Any, live: Live) -> None:
    tent = live.api("POST", "/api/v1/memory", json={"title": "Where the tent is",
                                                    "content": "The tent is in the garage loft, behind the skis."})
    other = live.api("POST", "/api/v1/memory", json={"title": "Dentist", "content": "Check-up in March."})
    page.fill("#message", "Where is the tent?")
    page.press("#message", "Enter")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".bubble")).to_contain_text("bring the tent.")
    remembered = answer.locator(".remembered")
    expect(remembered).to_contain_text("Remembered: Where the tent is")
    expect(remembered.get_by_role("link", name="Where the tent is")).to_have_attribute("href", f"/memory?m={tent['id']}")
    remembered.locator("summary").click()
    expect(remembered.get_by_role("link", name="Dentist")).to_have_attribute("href", f"/memory?m={other['id']}")

    page.click("#settings-open")
    expect(page.locator("#set-memory")).to_be_checked()
    expect(page.locator("#set-history")).not_to_be_checked()
    expect(page.locator("#set-web")).to_be_disabled()
    expect(page.locator("#set-web-note")).to_have_text("(turn on fetch_url or web_search under tools first)")
    page.uncheck("#set-memory")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    conversations = live.api("GET", "/api/v1/chat/conversations")["conversations"]
    controls = next(c for c in conversations if c["title"] == "Where is the tent?")["controls"]
    assert (controls["memory_access"], controls["history_access"], controls["web_access"]) == (False, None, None)

    page.fill("#message", "And the tent again?")
    page.press("#message", "Enter")
    expect(page.locator(".msg.assistant")).to_have_count(2)
    last = page.locator(".msg.assistant").last
    expect(last.locator(".meta")).to_be_visible()
    expect(last.locator(".remembered")).to_have_count(0)

    # The link opens the memory on the memory page.
    page.locator(".msg.assistant").first.get_by_role("link", name="Where the tent is").click()
    expect(page.locator(f"#memory-{tent['id']}")).to_have_attribute("aria-current", "true")
