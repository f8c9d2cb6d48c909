"""The chat grown up, in Chromium against a live ``noteloom serve`` with scripted models: a
URL per conversation (reload, Back, bookmarks), an answer that goes on streaming after a
reload, Markdown drawn while it streams, regenerate and edit-and-resend with the branch
switcher, Retry without a second question, Copy, and the chat driven by keyboard alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx2 as httpx
import pytest
from page_support import Live, page_opener, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

LONG_TEXT = ("The plan is **simple**: leave on Friday, drive north, camp by the lake and come back on Sunday "
             "with everything we took and nothing we did not.")
LONG = LONG_TEXT.split(" ")


def _scripts(notes: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {
        "confirm": {"steps": [
            {"text": "I will move it to the trash.",
             "tool_calls": [{"name": "delete_note", "arguments": {"id": notes["old"]}}]},
            {"text": "Done."},
        ]},
        "stream": {"steps": [{"chunks": ["Sure: ", "pack the ", "tent."], "chunk_delay": 0.02}]},
        # Slow enough to reload the page in the middle of it on a loaded machine.
        "long": {"steps": [{"chunks": [w + " " for w in LONG], "chunk_delay": 0.25}]},
        # Markup a model might write, streamed slowly enough to be seen mid-way: drawn as text or dropped.
        "unsafe": {"steps": [{"chunks": ["Look: ", "<img src=x onerror=\"window.__owned=1\">", " and ",
                                         "<script>window.__owned=2</script>", " **bold** ", "end", "."],
                              "chunk_delay": 0.3}]},
        "count": {"steps": [{"text": "Answer one."}, {"text": "Answer two."}, {"text": "Answer three."}]},
        "flaky": {"steps": [{"chunks": ["Hm"], "error": "api_overloaded"}, {"text": "Recovered."}]},
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("chat-grows-up")
    scripts_dir = home / "scripts"
    scripts_dir.mkdir()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        travel = ws.create_notebook("Travel")
        notes = {"old": ws.create_note("Old packing list", "- socks", notebook_id=travel.id).id}
        app.registry.set_enabled(ws, "delete_note", True)
        token = access_token(app)
    finally:
        app.close()
    tables = []
    for name, script in _scripts(notes).items():
        path = scripts_dir / f"{name}.json"
        path.write_text(json.dumps({**script, "loop": True}), encoding="utf-8")
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n')
    # A provider that cannot be used (its key variable is unset): listed in the picker, disabled.
    tables.append('[providers.claude]\ntype = "anthropic"\napi_key_env = "NOTELOOM_TEST_UNSET_KEY"\n')
    (home / "noteloom.toml").write_text('[providers]\ndefault = "stream"\n\n' + "\n".join(tables), encoding="utf-8")
    with served(home) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def open_page(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``open_page(size, path, color_scheme)``: a chat page signed in at a size of SIZES, with
    the clipboard allowed (page_opener: a dialog or a script error fails the test, and each page
    is screenshotted at the end, named after the test)."""
    pages = page_opener(browser, f"chat-grows-up-{request.node.name}")
    opened = next(pages)

    def make(size: str = "desktop", path: str = "/chat", color_scheme: str = "light") -> Any:
        pg = opened(size, color_scheme=color_scheme)
        pg.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
        pg.goto(live.page_url(path))
        expect(pg.locator("#chat-app")).to_be_visible()
        return pg

    yield make
    next(pages, None)  # screenshots, contexts closed; a dialog or a script error fails the test here


def pick_model(page: Any, name: str) -> None:
    page.click("#settings-open")
    page.select_option("#set-model", f"{name}:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()


def send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def settled(page: Any) -> None:
    """The turn has ended and its answer is drawn as settled (with its actions), so what a
    test clicks next is not replaced under it."""
    expect(page.locator("#send")).to_have_text("Send")
    expect(page.locator(".msg.assistant .bubble.streaming")).to_have_count(0)
    expect(page.locator(".msg.assistant").last.locator(".msg-actions")).to_be_visible()


CHAT_URL = re.compile(r"/chat/[0-9a-f]{32}$")


def test_every_conversation_has_a_url_that_reload_back_and_bookmarks_restore(open_page: Any, live: Live) -> None:
    page = open_page("desktop")
    send(page, "First conversation")
    expect(page).to_have_url(CHAT_URL)
    settled(page)
    first = page.url
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"/chat$"))
    send(page, "Second conversation")
    expect(page).to_have_url(CHAT_URL)
    settled(page)
    second = page.url
    assert second != first
    page.go_back()
    expect(page).to_have_url(re.compile(r"/chat$"))
    expect(page.locator("#transcript .msg")).to_have_count(0)
    page.go_back()
    expect(page).to_have_url(first)
    expect(page.locator(".msg.user .bubble")).to_have_text("First conversation")
    page.go_forward()
    page.go_forward()
    expect(page).to_have_url(second)
    expect(page.locator(".msg.user .bubble")).to_have_text("Second conversation")
    page.reload()
    expect(page.locator(".msg.user .bubble")).to_have_text("Second conversation")
    expect(page.locator("#conv-title")).to_have_text("Second conversation")
    # Opening one from the list pushes its address.
    page.locator("#thread-list .thread", has_text="First conversation").click()
    expect(page).to_have_url(first)
    # A bookmark, in a fresh tab.
    other = open_page("phone", "/chat/" + first.rsplit("/", 1)[1])
    expect(other.locator(".msg.user .bubble")).to_have_text("First conversation")
    # A conversation that is not there reads as such, and the page is a new chat.
    gone = open_page("desktop", "/chat/" + "0" * 32)
    expect(gone.locator("#transcript")).to_contain_text("That conversation does not exist")
    expect(gone).to_have_url(re.compile(r"/chat$"))


@pytest.mark.parametrize("viewport", ["desktop", "phone"], ids=["1280x800", "390x844"])
def test_a_reload_mid_stream_goes_on_with_the_answer(open_page: Any, viewport: str) -> None:
    page = open_page(viewport)
    pick_model(page, "long")
    send(page, "What is the plan?")
    streaming = page.locator(".msg.assistant .bubble.streaming")
    expect(streaming).to_contain_text("leave on Friday")
    expect(page).to_have_url(CHAT_URL)
    # Markdown is drawn as it streams (render.js), not shown raw.
    expect(streaming.locator("strong")).to_have_text("simple")
    expect(streaming).not_to_contain_text("**")
    page.reload()
    expect(page.locator(".msg.user .bubble")).to_have_text("What is the plan?")
    # The answer goes on after the reload, and ends whole: no piece lost, none twice.
    expect(page.locator("#send")).to_have_text("Cancel")
    settled(page)
    answer = page.locator(".msg.assistant .bubble")
    expect(answer).to_have_count(1)
    expected = " ".join(LONG).replace("**", "")
    assert " ".join(answer.inner_text().split()) == expected
    expect(answer.locator("strong")).to_have_text("simple")


@pytest.mark.parametrize("viewport", ["desktop", "phone"], ids=["1280x800", "390x844"])
def test_regenerate_keeps_the_old_answer_behind_a_switcher_and_copy_copies_the_markdown(
        open_page: Any, viewport: str) -> None:
    page = open_page(viewport)
    pick_model(page, "count")
    send(page, "Count for me")
    settled(page)
    answer = page.locator(".msg.assistant")
    first = answer.locator(".bubble").inner_text().strip()
    answer.get_by_role("button", name="Regenerate").click()
    settled(page)
    expect(answer.locator(".branch-count")).to_have_text("2/2")
    second = answer.locator(".bubble").inner_text().strip()
    assert second != first and second.startswith("Answer")
    expect(page.locator(".msg.user")).to_have_count(1)
    answer.get_by_role("button", name="Previous version of this answer").click()
    expect(answer.locator(".branch-count")).to_have_text("1/2")
    expect(answer.locator(".bubble")).to_have_text(first)
    page.reload()  # the chosen branch is the conversation's, not the page's
    expect(answer.locator(".branch-count")).to_have_text("1/2")
    expect(answer.locator(".bubble")).to_have_text(first)
    answer.get_by_role("button", name="Next version of this answer").click()
    expect(answer.locator(".bubble")).to_have_text(second)
    answer.get_by_role("button", name="Copy").click()
    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == second


@pytest.mark.parametrize("viewport", ["desktop", "phone"], ids=["1280x800", "390x844"])
def test_edit_and_resend_branches_the_question(open_page: Any, viewport: str) -> None:
    page = open_page(viewport)
    send(page, "Pack what?")
    settled(page)
    question = page.locator(".msg.user")
    question.get_by_role("button", name="Edit").click()
    box = page.get_by_role("textbox", name="Edit your question")
    expect(box).to_be_focused()
    expect(box).to_have_value("Pack what?")
    box.fill("Pack what for the lake?")
    box.press("Enter")
    expect(question.locator(".bubble")).to_have_text("Pack what for the lake?")
    settled(page)
    expect(question.locator(".branch-count")).to_have_text("2/2")
    expect(page.locator(".msg.assistant")).to_have_count(1)
    question.get_by_role("button", name="Previous version of this question").click()
    expect(question.locator(".bubble")).to_have_text("Pack what?")
    expect(question.locator(".branch-count")).to_have_text("1/2")
    expect(page.locator(".msg.assistant")).to_have_count(1)


def test_retry_runs_the_turn_again_without_a_second_question(open_page: Any) -> None:
    page = open_page("desktop")
    pick_model(page, "flaky")
    send(page, "Try this")
    card = page.locator(".card.error")
    expect(card).to_contain_text("overloaded")
    card.get_by_role("button", name="Retry").click()
    expect(page.locator(".msg.assistant .bubble")).to_have_text("Recovered.")
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".card.error")).to_have_count(0)
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".msg.assistant")).to_have_count(1)


def _focused(page: Any) -> str:
    return str(page.evaluate("(() => { const e = document.activeElement; return e ? "
                             "(e.id || e.getAttribute('aria-label') || e.textContent || '').trim() : ''; })()"))


def _tab_to(page: Any, name: str, key: str = "Tab", limit: int = 60) -> None:
    for _ in range(limit):
        if _focused(page) == name:
            return
        page.keyboard.press(key)
    raise AssertionError(f"{name!r} was not reached with {key}; focus is on {_focused(page)!r}")


def test_the_chat_works_by_keyboard_alone(open_page: Any) -> None:
    page = open_page("desktop")
    _tab_to(page, "message")
    page.keyboard.type("Hello by keyboard")
    page.keyboard.press("Enter")
    settled(page)
    expect(page.locator(".msg.user .bubble")).to_have_text("Hello by keyboard")
    answer = page.locator(".msg.assistant")
    text = answer.locator(".bubble").inner_text().strip()
    _tab_to(page, "Copy", "Shift+Tab")
    page.keyboard.press("Enter")
    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == text
    page.focus("#message")
    _tab_to(page, "Regenerate", "Shift+Tab")
    page.keyboard.press("Enter")
    settled(page)
    expect(answer.locator(".branch-count")).to_have_text("2/2")
    expect(page.locator(".msg.user")).to_have_count(1)


def _chat_via_api(live: Live, text: str) -> str:
    """A conversation made over the API, its answer settled: its event stream ends then."""
    sent = live.api("POST", "/api/v1/chat/send", json={"message": text})
    events = httpx.get(f"{live.url}/api/v1/chat/messages/{sent['message_id']}/events",
                       headers={"Authorization": f"Bearer {live.token}"}, timeout=120)
    assert events.status_code == 200 and "event: done" in events.text, events.text[-500:]
    return str(sent["conversation_id"])


def test_the_trash_restores_and_empties_after_a_dry_run(open_page: Any, live: Live) -> None:
    keep = _chat_via_api(live, "Restore me later")
    purge = _chat_via_api(live, "Purge me for good")
    for cid in (keep, purge):
        live.api("DELETE", f"/api/v1/chat/conversations/{cid}")
    page = open_page("desktop")
    page.click("#trash-open")
    expect(page.locator("#threads-title")).to_have_text("Trash")
    trash = page.locator("#thread-list")
    expect(trash).to_contain_text("Restore me later")
    expect(trash).to_contain_text("Purge me for good")
    page.get_by_role("button", name="Restore Restore me later").click()
    expect(trash).not_to_contain_text("Restore me later")
    page.get_by_role("button", name="Empty trash…").click()
    preview = page.locator(".purge-preview")
    expect(preview).to_contain_text("Purge me for good — 2 messages")
    deleted = live.api("GET", "/api/v1/chat/conversations?deleted=true")["conversations"]
    assert [c["id"] for c in deleted] == [purge]  # the dry run removed nothing
    preview.get_by_role("button", name="Empty trash").click()
    expect(trash).to_contain_text("The trash is empty.")
    assert live.api("GET", "/api/v1/chat/conversations?deleted=true")["conversations"] == []
    page.click("#trash-open")
    expect(page.locator("#thread-list")).to_contain_text("Restore me later")


def test_the_model_picker_lists_every_provider_with_private_marked(open_page: Any) -> None:
    page = open_page("phone")
    page.click("#settings-open")
    picker = page.locator("#set-model")
    expect(picker.locator('optgroup[label="long · private"] option')).to_have_text("long:script (private)")
    unusable = picker.locator('optgroup[label^="claude · not available"]')
    expect(unusable).to_have_attribute("label", re.compile(r"NOTELOOM_TEST_UNSET_KEY"))
    expect(unusable.locator("option")).to_be_disabled()
    page.select_option("#set-model", "count:script")
    expect(picker).to_have_value("count:script")


def test_a_confirmation_card_names_the_note_by_title_and_notebook(open_page: Any, live: Live) -> None:
    page = open_page("phone")
    pick_model(page, "confirm")
    send(page, "Bin the old list")
    card = page.locator(".card.confirm")
    expect(card.locator(".named li")).to_have_text("“Old packing list” in Travel")
    expect(card.locator("p")).to_contain_text("Old packing list")
    for part in ("h3", "p", ".named"):  # the raw arguments stay folded under "Arguments"
        expect(card.locator(part)).not_to_contain_text(live.notes["old"])
    card.get_by_role("button", name="Decline").click()
    expect(page.locator(".card.confirm")).to_have_count(0)
    settled(page)


def test_one_turn_is_deleted_and_the_rest_of_the_chat_stays(open_page: Any) -> None:
    page = open_page("phone")
    send(page, "First question")
    settled(page)
    send(page, "Second question")
    expect(page.locator(".msg.user")).to_have_count(2)
    settled(page)
    first = page.locator(".msg.user").first
    first.get_by_role("button", name="Delete this question and its answer").click()
    first.get_by_role("button", name="Keep").click()  # changing one's mind keeps it
    expect(page.locator(".msg.user")).to_have_count(2)
    page.locator(".msg.user").first.get_by_role("button", name="Delete this question and its answer").click()
    page.locator(".msg.user").first.locator(".msg-actions").get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.locator(".msg.user .bubble")).to_have_text("Second question")
    expect(page.locator(".msg.assistant")).to_have_count(1)
    page.reload()
    expect(page.locator(".msg.user .bubble")).to_have_text("Second question")
    expect(page.locator(".msg.assistant")).to_have_count(1)


def test_streamed_markup_is_sanitised_while_it_streams_and_after(open_page: Any) -> None:
    page = open_page("desktop")
    pick_model(page, "unsafe")
    send(page, "Show me markup")
    streaming = page.locator(".msg.assistant .bubble.streaming")
    expect(streaming.locator("strong")).to_have_text("bold")  # drawn mid-stream, the markup with it
    for bubble in (streaming, page.locator(".msg.assistant .bubble")):
        assert bubble.locator("script, [onerror]").count() == 0
    settled(page)
    answer = page.locator(".msg.assistant .bubble")
    expect(answer).to_contain_text("end.")
    assert answer.locator("script, [onerror]").count() == 0
    assert page.evaluate("window.__owned") is None


@pytest.mark.parametrize("viewport", ["desktop", "phone"], ids=["1280x800", "390x844"])
def test_the_chat_follows_the_dark_theme(open_page: Any, viewport: str) -> None:
    page = open_page(viewport, color_scheme="dark")
    send(page, "Dark question")
    settled(page)
    colours = page.evaluate("""() => {
        const css = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
        const probe = document.createElement("div");
        document.body.append(probe);
        const v = (name) => { probe.style.color = `var(${name})`; return getComputedStyle(probe).color; };
        return { bubble: css(".msg.user .bubble", "backgroundColor"), surface2: v("--surface-2"),
                 box: css("#message", "backgroundColor"), bg: v("--bg"),
                 button: css(".msg-actions button", "color"), muted: v("--muted"),
                 border: css("#message", "borderTopColor"), inputBorder: v("--input-border") };
    }""")
    assert colours["bubble"] == colours["surface2"] and colours["box"] == colours["bg"], colours
    assert colours["button"] == colours["muted"] and colours["border"] == colours["inputBorder"], colours
    assert colours["bg"] != "rgb(255, 255, 255)", colours  # the dark theme is on
