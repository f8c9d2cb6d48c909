"""The chat page in a real Chromium against a live ``noteloom serve`` with scripted models:
streaming, cancel, confirmations, an edit accepted and undone, export, the error card."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from page_support import TRIP, Live
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def pick_model(page: Any, name: str) -> None:
    """Choose the model in the settings drawer, as a user does."""
    page.click("#settings-open")
    page.select_option("#set-model", f"{name}:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()


def send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def record_statuses(page: Any) -> None:
    """Keep every text the live status region is given, in order: a status shown for less
    than a poll of the page (a short answer on a busy machine) is still seen."""
    page.evaluate("""() => {
        window.__statuses = [];
        new MutationObserver((records) => {
            for (const r of records) for (const n of r.addedNodes) window.__statuses.push(n.textContent);
        }).observe(document.getElementById("live-status"), { childList: true, subtree: true });
    }""")


def test_an_answer_streams_in_with_its_activity_then_shows_tokens_and_cost(page: Any) -> None:
    record_statuses(page)
    send(page, "What do my notes say about the trip?")
    expect(page.locator("#send")).to_have_text("Cancel")
    live_bubble = page.locator(".msg.assistant .bubble.streaming")
    expect(live_bubble).to_contain_text("Here is what")  # text arrives before the turn ends
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".bubble")).to_contain_text("leave Friday, bring the tent.")
    expect(page.locator("#send")).to_have_text("Send")
    expect(page.locator("#live-status")).to_have_text("Answer complete.")
    statuses: list[str] = page.evaluate("window.__statuses")
    writing = [i for i, s in enumerate(statuses) if s.startswith("Writing")]
    assert writing, f"the activity was never announced while the answer streamed: {statuses}"
    assert writing[0] < statuses.index("Answer complete."), statuses
    expect(answer.locator(".meta")).to_contain_text("120 in · 16 out · $0")
    expect(page.locator("#thread-list")).to_contain_text("What do my notes say about the trip?")
    expect(page.locator("#conv-title")).to_have_text("What do my notes say about the trip?")


def test_cancel_stops_the_answer_and_keeps_what_was_written(page: Any) -> None:
    pick_model(page, "slow")
    send(page, "Think hard about packing")
    expect(page.locator(".msg.assistant .bubble.streaming")).to_contain_text("about that")
    expect(page.locator("#send")).to_have_text("Cancel")
    page.click("#send")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".marker")).to_have_text("Cancelled")  # the slow model never ends by itself
    expect(answer.locator(".bubble")).to_contain_text("Let me think about that")
    expect(page.locator("#send")).to_have_text("Send")


def test_the_status_region_speaks_when_the_activity_changes_not_every_second(page: Any) -> None:
    record_statuses(page)
    pick_model(page, "slow")
    send(page, "Think hard about packing")
    expect(page.locator(".msg.assistant .bubble.streaming")).to_contain_text("about that")
    # The clock beside it ticks on (hidden from screen readers) …
    expect(page.locator("#run-clock")).to_have_text(re.compile(r"^[3-9]s|^\d{2,}s"))
    assert page.locator("#run-clock").get_attribute("aria-hidden") == "true"
    statuses: list[str] = page.evaluate("window.__statuses")
    # … while the polite region was given each activity once, never a count of seconds.
    assert statuses and not any(re.search(r"\d+s\b", s) for s in statuses), statuses
    assert len(statuses) == len(set(statuses)), statuses
    page.click("#send")
    expect(page.locator("#run-clock")).to_have_text("")


def test_a_held_call_is_approved_or_declined_from_its_card(page: Any, live: Live) -> None:
    pick_model(page, "confirm")
    send(page, "Delete my old packing list")
    card = page.locator(".card.confirm")
    expect(card).to_contain_text("Move 'Old packing list' (Notes) to the trash.")
    card.get_by_role("button", name="Approve").click()
    answer = page.locator(".msg.assistant").last
    expect(answer).to_contain_text("Done: the note is in the trash.")
    expect(answer.locator(".bubble")).to_have_count(1)  # the same message went on, then settled
    expect(card).to_have_count(0)
    expect(page.locator("#note-list")).not_to_contain_text("Old packing list")
    with pytest.raises(httpx.HTTPStatusError):
        live.api("GET", f"/api/v1/notes/{live.notes['old']}")

    page.click("#new-chat")
    pick_model(page, "decline")
    send(page, "Delete the note I keep")
    page.locator(".card.confirm").get_by_role("button", name="Decline").click()
    expect(page.locator(".msg.assistant").last).to_contain_text("I left the note alone")
    assert live.api("GET", f"/api/v1/notes/{live.notes['keep']}")["body"] == "important"


def test_select_text_ask_for_an_edit_accept_it_then_undo_it(page: Any, live: Live) -> None:
    page.fill("#note-search", "Trip")
    page.locator("#note-list button", has_text="Trip").click()
    body = page.locator("#note-body")
    expect(body).to_have_value(TRIP)
    body.evaluate(
        """ta => { const i = ta.value.indexOf("Friday"); ta.focus(); ta.setSelectionRange(i, i + 6);
                  ta.dispatchEvent(new Event("select")); }"""
    )
    expect(page.locator("#context-text")).to_contain_text("selection of 6 characters")
    pick_model(page, "edit")
    send(page, "Make it Saturday")
    card = page.locator(".card.edit")
    expect(card.locator("del")).to_have_text("Friday")
    expect(card.locator("ins")).to_have_text("Saturday")
    card.get_by_role("button", name="Accept").click()
    expect(body).to_have_value(TRIP.replace("Friday", "Saturday"))
    assert live.api("GET", f"/api/v1/notes/{live.notes['trip']}")["body"] == TRIP.replace("Friday", "Saturday")
    page.locator(".card.edit").get_by_role("button", name="Undo").click()
    expect(body).to_have_value(TRIP)
    assert live.api("GET", f"/api/v1/notes/{live.notes['trip']}")["body"] == TRIP


def test_a_conversation_exports_as_markdown_and_plain_text(page: Any) -> None:
    send(page, "Summarise the trip")
    expect(page.locator("#send")).to_have_text("Send", timeout=5000)
    expect(page.locator(".msg.assistant .meta")).to_be_visible()
    page.click("#export-open")
    text = page.locator("#export-text")
    expect(text).to_have_value(re.compile(r"^# Summarise the trip[\s\S]*## You[\s\S]*## Assistant"))
    page.check("input[name=export-format][value=txt]")
    expect(text).to_have_value(re.compile(r"You \([\s\S]*Assistant \("))
    with page.expect_download() as download:
        page.click("#export-download")
    saved = download.value
    assert saved.suggested_filename == "Summarise-the-trip.txt"
    assert "Summarise the trip" in Path(saved.path()).read_text(encoding="utf-8")


def test_a_failed_answer_shows_an_inline_card_with_retry_and_no_popup(page: Any) -> None:
    pick_model(page, "broken")
    send(page, "Hello?")
    card = page.locator(".card.error")
    expect(card).to_contain_text("overloaded")
    failed_id = page.locator(".msg.assistant").last.get_attribute("data-id")
    card.get_by_role("button", name="Retry").click()
    # Retried in place: the question is not sent twice, the failed answer is replaced.
    expect(page.locator(".msg.assistant").last).not_to_have_attribute("data-id", failed_id or "")
    expect(page.locator(".card.error")).to_have_count(1)
    expect(page.locator(".msg.user")).to_have_count(1)
