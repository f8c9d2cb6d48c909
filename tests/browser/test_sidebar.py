"""The AI sidebar of the notes app, in Chromium at 1280x800 and 390x844, on a live server whose
models are scripted: select a word in the editor, ask in the sidebar, the proposed edit drawn
inline in the editor, accepted there (the note changed once: one revision) and undone with
Ctrl+Z in the editor (saved); a rejected edit leaves the note alone and a refused one says why;
the context line follows the selection; the sidebar stays collapsed across a reload; it opens
and answers from the keyboard, and a reload continues its conversation. Its messages have the
chat page's actions (Copy the Markdown, Regenerate, Edit and send again, the branch switcher),
its tool calls open onto their results (a plugin's drawn from its render spec), and on a phone
the drawer keeps the focus until Escape.

A plugin tool with a renderer is installed the way a package is: a module and its
``*.dist-info`` with a ``noteloom`` entry point, on the server's ``PYTHONPATH``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_support import ARTIFACTS, DESK, PHONE, Live, served, signed_in_app
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from plugin_site import install_plugin

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
RUN_AXE = """async () => {
  const r = await axe.run(document, { resultTypes: ["violations"] });
  return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }));
}"""
STATUS = "#note-pane .ne-status"
BODY = "# Trip\n\nWe leave on Friday at nine.\n\nBring the tent.\n"
ANSWER = "Your note says you **leave on Friday**."


def _scripts(notes: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {
        "reply": [{"chunks": [w + " " for w in ANSWER.split()], "chunk_delay": 0.02,
                   "usage": {"input_tokens": 50, "output_tokens": 9}}],
        "edit": [
            {"tool_calls": [{"name": "edit_selection", "arguments": {"text": "Saturday"}}]},
            {"text": "I proposed Saturday instead."},
        ],
        "slow": [{"chunks": ["Let me think ", "about that "], "chunk_delay": 0.05, "hang": True}],
        "confirm": [
            {"text": "I will move it to the trash.", "tool_calls": [{"name": "delete_note", "arguments": {"id": notes["old"]}}]},
            {"text": "Done: the note is in the trash."},
        ],
        "count": [{"text": "Answer one."}, {"text": "Answer two."}, {"text": "Answer three."}],
        "tools": [
            {"text": "Let me look.", "tool_calls": [{"name": "list_notebooks", "arguments": {}},
                                                    {"name": "weather_probe", "arguments": {"place": "Oslo"}}]},
            {"text": "Pack for **rain** in Oslo."},
        ],
    }


PLUGIN = '''
from noteloom.plugins import hookimpl
from noteloom.renderspec import KeyValues
from noteloom.tools import ToolDef

SCHEMA = {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]}


async def weather(ctx, args):
    return {"place": args["place"], "sky": "rain", "high": 9}


def render(args, out):
    return KeyValues({"Place": out["place"], "Sky": out["sky"], "High": out["high"]})


@hookimpl
def register_tools(register):
    register(ToolDef("weather_probe", "The weather.", SCHEMA, weather, render=render))
'''


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("sidebar")
    scripts_dir = home / "scripts"
    scripts_dir.mkdir()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        ws.create_note("Welcome", "hello")
        ws.create_notebook("Travel")
        notes = {"old": ws.create_note("Old packing list", "- socks").id}
        app.registry.set_enabled(ws, "delete_note", True)
        token = access_token(app)
    finally:
        app.close()
    tables = []
    for name, steps in _scripts(notes).items():
        path = scripts_dir / f"{name}.json"
        path.write_text(json.dumps({"steps": steps, "loop": True}), encoding="utf-8")
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n')
    (home / "noteloom.toml").write_text('[providers]\ndefault = "reply"\n\n' + "\n".join(tables), encoding="utf-8")
    with served(home, pythonpath=install_plugin(home / "site", "sidebar_probe", PLUGIN)) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def desk(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"sidebar-{request.node.name}", DESK)


@pytest.fixture
def phone(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"sidebar-{request.node.name}", PHONE)


@pytest.fixture(params=["desk", "phone"])
def either(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def new_note(live: Live, title: str, body: str = BODY) -> str:
    note_id: str = live.api("POST", "/api/v1/notes", json={"title": title, "body": body})["id"]
    return note_id


def open_note(pg: Any, note_id: str) -> None:
    pg.evaluate("id => { history.pushState({}, '', '/notes/' + id); dispatchEvent(new PopStateEvent('popstate')); }", note_id)
    expect(pg.locator(f"#note-pane .ne[data-note='{note_id}'] .cm-content")).to_be_visible()
    expect(pg.locator(STATUS)).to_have_text("Saved")


def select_word(pg: Any, word: str) -> None:
    """Select the first `word` of the note in the editor, as a double click does."""
    pg.evaluate("""w => { const ed = NoteEditor.current.editor; const at = ed.getDoc().indexOf(w);
                          ed.view.dispatch({selection: {anchor: at, head: at + w.length}}); }""", word)


def is_phone(pg: Any) -> bool:
    return bool(pg.viewport_size["width"] < 700)


def show_sidebar(pg: Any) -> None:
    if is_phone(pg):
        pg.locator("#toggle-ai").click()
    expect(pg.locator("#ai-input")).to_be_visible()


def hide_sidebar_on_phone(pg: Any) -> None:
    if is_phone(pg):
        pg.keyboard.press("Escape")
        expect(pg.locator("#ai-sidebar")).not_to_be_in_viewport()


def ask(pg: Any, text: str, model: str | None = None) -> None:
    if model:
        pg.locator("#ai-model").select_option(model)
    pg.locator("#ai-input").fill(text)
    pg.locator("#ai-input").press("Enter")
    expect(pg.locator("#ai-input")).to_have_value("")


def revisions(live: Live, note_id: str) -> int:
    return len(live.api("GET", f"/api/v1/notes/{note_id}/revisions")["revisions"])


def body_of(live: Live, note_id: str) -> str:
    return str(live.api("GET", f"/api/v1/notes/{note_id}")["body"])


def editor_doc(pg: Any) -> str:
    return str(pg.evaluate("NoteEditor.current.editor.getDoc()"))


def test_select_ask_inline_diff_accept_then_undo_in_the_editor(either: Any, live: Live) -> None:
    pg = either
    note_id = new_note(live, "Trip plan")
    open_note(pg, note_id)
    select_word(pg, "Friday")
    show_sidebar(pg)
    expect(pg.locator("#ai-context")).to_have_text("Context: Trip plan · 6 characters selected")
    ask(pg, "Make it Saturday", model="edit:script")
    card = pg.locator(".ai-edit")
    expect(card).to_contain_text("Proposed edit")
    expect(pg.locator(".ai-msg.assistant .ai-bubble").last).to_have_text("I proposed Saturday instead.")
    hide_sidebar_on_phone(pg)
    # Drawn inline in the editor: the old word struck through, the new one beside it.
    expect(pg.locator("#note-pane .cm-nl-del")).to_have_text("Friday")
    expect(pg.locator("#note-pane .cm-nl-proposal")).to_have_text("Saturday")
    # Still proposed after a reload: drawn again where it was.
    pg.reload()
    expect(pg.locator("#note-pane .cm-nl-del")).to_have_text("Friday")
    expect(pg.locator("#note-pane .cm-nl-proposal")).to_have_text("Saturday")
    expect(pg.locator(".ai-edit")).to_have_count(1)
    before = revisions(live, note_id)
    assert body_of(live, note_id) == BODY
    pg.locator("#note-pane .cm-nl-proposal-actions button[data-action='accept']").click()
    expect(pg.locator("#note-pane .cm-nl-proposal")).to_have_count(0)
    expect(pg.locator(".ai-edit.accepted")).to_have_count(1)
    changed = BODY.replace("Friday", "Saturday")
    assert editor_doc(pg) == changed
    expect(pg.locator(STATUS)).to_have_text("Saved")
    assert body_of(live, note_id) == changed
    assert revisions(live, note_id) == before + 1
    conv = pg.evaluate("sessionStorage.getItem('noteloom.ai.conversation')")
    edits = [e for m in live.api("GET", f"/api/v1/chat/conversations/{conv}")["messages"] for e in m["edits"]]
    assert [e["status"] for e in edits] == ["accepted"]
    # One undo step in the editor reverts exactly the edit, and is saved like any change.
    pg.locator("#note-pane .cm-content").focus()
    pg.keyboard.press("Control+z")
    expect(pg.locator("#note-pane .cm-content")).to_contain_text("We leave on Friday at nine.")
    assert editor_doc(pg) == BODY
    expect(pg.locator(STATUS)).to_have_text("Saved")
    assert body_of(live, note_id) == BODY
    assert revisions(live, note_id) == before + 2


def test_reject_leaves_the_note_alone_and_a_moved_edit_is_refused_with_the_reason(either: Any, live: Live) -> None:
    pg = either
    note_id = new_note(live, "Reject me")
    open_note(pg, note_id)
    select_word(pg, "Friday")
    show_sidebar(pg)
    ask(pg, "Saturday?", model="edit:script")
    expect(pg.locator(".ai-edit")).to_have_count(1)
    hide_sidebar_on_phone(pg)
    before = revisions(live, note_id)
    pg.locator("#note-pane .cm-nl-proposal-actions button[data-action='reject']").click()
    expect(pg.locator(".ai-edit.rejected")).to_have_count(1)
    expect(pg.locator("#note-pane .cm-nl-proposal")).to_have_count(0)
    assert editor_doc(pg) == BODY
    assert body_of(live, note_id) == BODY and revisions(live, note_id) == before

    # Asked again; the word is changed in the editor before the edit is accepted: refused.
    select_word(pg, "Friday")
    show_sidebar(pg)
    ask(pg, "Saturday, really")
    expect(pg.locator(".ai-edit")).to_have_count(2)
    hide_sidebar_on_phone(pg)
    expect(pg.locator("#note-pane .cm-nl-proposal")).to_have_text("Saturday")
    pg.evaluate("""() => { const ed = NoteEditor.current.editor; const at = ed.getDoc().indexOf('Friday');
                           ed.view.dispatch({changes: {from: at + 1, to: at + 2, insert: 'R'}, userEvent: 'input'}); }""")
    pg.locator("#note-pane .cm-nl-proposal-actions button[data-action='accept']").click()
    show_sidebar(pg)
    refused = pg.locator(".ai-edit").nth(1)
    expect(refused).to_contain_text("Refused: the text this edit changes was edited after it was proposed")
    expect(refused).to_have_class(re.compile(r"\brejected\b"))
    assert "Saturday" not in editor_doc(pg)
    expect(pg.locator(STATUS)).to_have_text("Saved")
    assert body_of(live, note_id) == BODY.replace("Friday", "FRiday")


def test_the_context_line_follows_the_selection_and_the_open_note(desk: Any, live: Live) -> None:
    first = new_note(live, "First context")
    second = new_note(live, "Second context", "one\ntwo\nthree 😀 four\n")
    expect(desk.locator("#ai-context")).to_have_text("Context: no note open")
    open_note(desk, first)
    select_word(desk, "Bring the tent")
    expect(desk.locator("#ai-context")).to_have_text("Context: First context · 14 characters selected")
    desk.locator("#note-pane .cm-content").press("ArrowRight")
    expect(desk.locator("#ai-context")).to_have_text("Context: First context · cursor at line 5")
    open_note(desk, second)
    expect(desk.locator("#ai-context")).to_have_text(re.compile(r"^Context: Second context · cursor at line \d+$"))
    # Code points, as the chat API counts them: the emoji is one character (two UTF-16 units).
    select_word(desk, "three 😀 four")
    expect(desk.locator("#ai-context")).to_have_text("Context: Second context · 12 characters selected")
    desk.locator("#note-pane .ne-title").fill("Renamed context")
    expect(desk.locator("#ai-context")).to_contain_text("Context: Renamed context")


def test_the_sidebar_collapses_and_stays_collapsed_after_a_reload(desk: Any, live: Live) -> None:
    sidebar = desk.locator("#ai-sidebar")
    button = desk.locator("#toggle-ai")
    expect(sidebar).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    desk.locator("#ai-close").click()
    expect(sidebar).to_be_hidden()
    expect(button).to_have_attribute("aria-expanded", "false")
    desk.reload()
    expect(desk.locator("#sign-out")).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(sidebar).to_be_hidden()
    button.click()
    expect(sidebar).to_be_visible()
    expect(desk.locator("#ai-input")).to_be_focused()
    desk.reload()
    expect(desk.locator("#ai-input")).to_be_visible()


def test_on_a_phone_the_sidebar_is_a_drawer(phone: Any, live: Live) -> None:
    sidebar = phone.locator("#ai-sidebar")
    expect(sidebar).not_to_be_in_viewport()
    phone.locator("#toggle-ai").click()
    expect(sidebar).to_be_in_viewport()
    expect(phone.locator("#ai-input")).to_be_focused()
    expect(phone.locator("#drawer-scrim")).to_be_visible()
    phone.locator("#drawer-scrim").click(position={"x": 10, "y": 400})
    expect(sidebar).not_to_be_in_viewport()
    expect(phone.locator("#drawer-scrim")).to_be_hidden()
    # One drawer at a time: the notebooks drawer closes the sidebar.
    phone.locator("#toggle-ai").click()
    expect(sidebar).to_be_in_viewport()
    phone.evaluate("NoteloomSidebar.close({focus: false})")
    phone.locator("#toggle-tree").click()
    expect(phone.locator("#tree-pane")).to_be_in_viewport()
    expect(sidebar).not_to_be_in_viewport()


def test_keyboard_only_ask_and_a_reload_continues_the_conversation(desk: Any, live: Live) -> None:
    note_id = new_note(live, "Keys")
    open_note(desk, note_id)
    desk.locator("#ai-close").click()
    expect(desk.locator("#ai-sidebar")).to_be_hidden()
    desk.locator("#note-pane .cm-content").focus()
    desk.keyboard.press("Control+Home")
    desk.keyboard.press("Shift+ArrowRight")
    desk.keyboard.press("Shift+ArrowRight")
    desk.keyboard.press("Control+Shift+Period")
    expect(desk.locator("#ai-input")).to_be_focused()
    expect(desk.locator("#ai-context")).to_have_text("Context: Keys · 2 characters selected")
    desk.keyboard.type("What does it say?")
    desk.keyboard.press("Enter")
    answer = desk.locator(".ai-msg.assistant .ai-bubble").last
    expect(answer.locator("strong")).to_have_text("leave on Friday")
    expect(answer).to_have_text(ANSWER.replace("**", ""))
    expect(desk.locator("#ai-send")).to_be_visible()
    conv = desk.evaluate("sessionStorage.getItem('noteloom.ai.conversation')")
    expect(desk.locator("#ai-open-chat")).to_have_attribute("href", f"/chat/{conv}")
    sent = live.api("GET", f"/api/v1/chat/conversations/{conv}")["messages"][0]
    assert sent["role"] == "user" and sent["content"] == "What does it say?"
    assert sent["note_context"]["note_id"] == note_id
    assert sent["note_context"]["selection"] == {"start": 0, "end": 2}
    # The shortcut again closes it and gives the focus back to the editor.
    desk.keyboard.press("Control+Shift+Period")
    expect(desk.locator("#ai-sidebar")).to_be_hidden()
    expect(desk.locator("#note-pane .cm-content")).to_be_focused()
    desk.keyboard.press("Control+Shift+Period")
    desk.reload()
    expect(desk.locator(".ai-msg.user .ai-bubble")).to_have_text(["What does it say?"])
    expect(desk.locator(".ai-msg.assistant .ai-bubble strong")).to_have_text("leave on Friday")
    desk.locator("#ai-input").focus()
    desk.keyboard.type("And again?")
    desk.keyboard.press("Enter")
    expect(desk.locator(".ai-msg.assistant")).to_have_count(2)
    assert desk.evaluate("sessionStorage.getItem('noteloom.ai.conversation')") == conv
    # New chat starts another conversation.
    desk.locator("#ai-new").focus()
    desk.keyboard.press("Enter")
    expect(desk.locator(".ai-msg")).to_have_count(0)
    expect(desk.locator("#ai-open-chat")).to_have_attribute("href", "/chat")


def test_a_risky_call_asks_for_approval_naming_the_note_by_title(desk: Any, live: Live) -> None:
    ask(desk, "Trash my old packing list", model="confirm:script")
    card = desk.locator(".ai-confirm")
    expect(card).to_contain_text("Approve delete note?")
    expect(card).to_contain_text("“Old packing list”")
    assert live.notes["old"] not in card.inner_text()
    card.get_by_role("button", name="Approve").click()
    expect(desk.locator(".ai-msg.assistant .ai-bubble").last).to_contain_text("Done: the note is in the trash.")
    expect(desk.locator(".ai-confirm")).to_have_count(0)
    trashed = live.api("GET", f"/api/v1/notes/{live.notes['old']}?trashed=true")
    assert trashed["deleted_time"] is not None


def test_stop_and_a_reload_mid_answer_follows_it_on(either: Any, live: Live) -> None:
    pg = either
    show_sidebar(pg)
    ask(pg, "Think slowly", model="slow:script")
    bubble = pg.locator(".ai-msg.assistant .ai-bubble").last
    expect(bubble).to_have_text("Let me think about that")
    expect(pg.locator("#ai-stop")).to_be_visible()
    pg.reload()
    expect(pg.locator("#sign-out")).to_be_visible()
    show_sidebar(pg)
    expect(pg.locator(".ai-msg.assistant .ai-bubble").last).to_have_text("Let me think about that")
    stop = pg.locator("#ai-stop")
    expect(stop).to_be_visible()
    stop.click()
    expect(pg.locator(".ai-msg.assistant").last).to_contain_text("Stopped.")
    expect(pg.locator("#ai-send")).to_be_visible()
    expect(stop).to_be_hidden()
    conv = pg.evaluate("sessionStorage.getItem('noteloom.ai.conversation')")
    assert live.api("GET", f"/api/v1/chat/conversations/{conv}")["messages"][-1]["status"] == "cancelled"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_in_the_sidebar(browser: Any, live: Live, scheme: str,
                                                       request: pytest.FixtureRequest) -> None:
    for viewport in (DESK, PHONE):
        context = browser.new_context(viewport=viewport, color_scheme=scheme)
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        try:
            note_id = new_note(live, "Axe note")
            pg.goto(live.page_url(f"/notes/{note_id}"))
            expect(pg.locator(STATUS)).to_have_text("Saved")
            select_word(pg, "Friday")
            show_sidebar(pg)
            ask(pg, "Saturday", model="edit:script")
            expect(pg.locator(".ai-edit")).to_have_count(1)
            expect(pg.locator("#ai-send")).to_be_visible()
            pg.evaluate(AXE.read_text(encoding="utf-8"))
            found = pg.evaluate(RUN_AXE)
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / f"sidebar-{request.node.name}-{viewport['width']}.png"))
            context.close()
        blocking = [v for v in found if v["impact"] in ("serious", "critical")]
        assert not blocking, blocking


def test_keyboard_accepts_an_edit_from_the_sidebar_and_undoes_it_in_the_editor(desk: Any, live: Live) -> None:
    note_id = new_note(live, "Keyboard edit")
    open_note(desk, note_id)
    desk.locator("#note-pane .cm-content").focus()
    desk.keyboard.press("Control+Home")
    desk.keyboard.press("ArrowDown")
    desk.keyboard.press("ArrowDown")
    for _ in range(len("We leave on ")):
        desk.keyboard.press("ArrowRight")
    for _ in range(len("Friday")):
        desk.keyboard.press("Shift+ArrowRight")
    desk.keyboard.press("Control+Shift+Period")
    expect(desk.locator("#ai-context")).to_have_text("Context: Keyboard edit · 6 characters selected")
    desk.locator("#ai-model").focus()
    desk.locator("#ai-model").select_option("edit:script")
    desk.locator("#ai-input").focus()
    desk.keyboard.type("Saturday please")
    desk.keyboard.press("Enter")
    accept = desk.locator(".ai-edit .ai-accept")
    expect(accept).to_be_visible()
    expect(desk.locator("#note-pane .cm-nl-proposal")).to_have_text("Saturday")
    before = revisions(live, note_id)
    accept.focus()
    desk.keyboard.press("Enter")
    expect(desk.locator(".ai-edit.accepted")).to_contain_text("Ctrl+Z there undoes it")
    expect(desk.locator(STATUS)).to_have_text("Saved")
    assert body_of(live, note_id) == BODY.replace("Friday", "Saturday")
    assert revisions(live, note_id) == before + 1
    desk.keyboard.press("Control+Shift+Period")
    expect(desk.locator("#note-pane .cm-content")).to_be_focused()
    desk.keyboard.press("Control+z")
    expect(desk.locator(STATUS)).to_have_text("Saved")
    assert editor_doc(desk) == BODY
    assert body_of(live, note_id) == BODY


def focus_is_inside(pg: Any, selector: str) -> bool:
    return bool(pg.evaluate("s => document.querySelector(s).contains(document.activeElement)", selector))


def test_on_a_phone_the_drawer_keeps_the_focus_until_escape(phone: Any, live: Live) -> None:
    button = phone.locator("#toggle-ai")
    button.focus()
    phone.keyboard.press("Enter")
    expect(phone.locator("#ai-sidebar")).to_be_in_viewport()
    expect(phone.locator("#ai-input")).to_be_focused()
    # Tab runs through the drawer and wraps round to its first control, never behind it.
    for _ in range(12):
        phone.keyboard.press("Tab")
        assert focus_is_inside(phone, "#ai-sidebar"), phone.evaluate("document.activeElement.outerHTML.slice(0, 80)")
    phone.locator("#ai-send").focus()
    phone.keyboard.press("Tab")
    expect(phone.locator("#ai-new")).to_be_focused()
    phone.keyboard.press("Shift+Tab")
    expect(phone.locator("#ai-send")).to_be_focused()
    for _ in range(12):
        phone.keyboard.press("Shift+Tab")
        assert focus_is_inside(phone, "#ai-sidebar")
    # Escape closes it and gives the focus back to the button that opened it; Tab is free again.
    phone.keyboard.press("Escape")
    expect(phone.locator("#ai-sidebar")).not_to_be_in_viewport()
    expect(button).to_be_focused()
    expect(button).to_have_attribute("aria-expanded", "false")
    phone.keyboard.press("Tab")
    assert not focus_is_inside(phone, "#ai-sidebar")
    # Opened with a click, it traps and returns the same way.
    button.click()
    expect(phone.locator("#ai-input")).to_be_focused()
    phone.keyboard.press("Shift+Tab")
    phone.keyboard.press("Shift+Tab")
    assert focus_is_inside(phone, "#ai-sidebar")
    phone.keyboard.press("Escape")
    expect(button).to_be_focused()


def answered(pg: Any) -> None:
    """The turn has ended and its answer is drawn settled, with its actions."""
    expect(pg.locator("#ai-send")).to_be_visible()
    expect(pg.locator(".ai-msg.assistant").last.locator(".ai-msg-actions")).to_be_visible()


def grant_clipboard(pg: Any, live: Live) -> None:
    pg.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)


def test_copy_copies_the_markdown_and_regenerate_keeps_the_old_answer_behind_a_switcher(either: Any, live: Live) -> None:
    pg = either
    grant_clipboard(pg, live)
    show_sidebar(pg)
    ask(pg, "What does it say?")
    answered(pg)
    answer = pg.locator(".ai-msg.assistant")
    bubble = answer.locator(".ai-bubble")
    expect(bubble.locator("strong")).to_have_text("leave on Friday")
    # Copy puts the Markdown on the clipboard (not the drawn text), and says so politely.
    answer.get_by_role("button", name="Copy").click()
    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    expect(pg.locator("#ai-status")).to_have_text("Copied to the clipboard.")
    assert pg.evaluate("navigator.clipboard.readText()").strip() == ANSWER
    # Another model answers again: a second branch beside the first, the question once.
    pg.locator("#ai-model").select_option("count:script")
    expect(pg.locator("#ai-status")).to_have_text("Model: count:script.")
    answer.get_by_role("button", name="Regenerate").click()
    expect(answer.locator(".ai-branch-count")).to_have_text("2/2")
    answered(pg)
    expect(bubble).to_have_text(re.compile(r"^\s*Answer (one|two|three)\.\s*$"))
    second = bubble.inner_text().strip()
    expect(pg.locator(".ai-msg.user")).to_have_count(1)
    expect(answer).to_have_count(1)
    answer.get_by_role("button", name="Previous version of this answer").click()
    expect(answer.locator(".ai-branch-count")).to_have_text("1/2")
    expect(bubble).to_have_text(ANSWER.replace("**", ""))
    expect(answer.get_by_role("button", name="Next version of this answer")).to_be_focused()
    answer.get_by_role("button", name="Next version of this answer").click()
    expect(answer.locator(".ai-branch-count")).to_have_text("2/2")
    expect(bubble).to_have_text(second)
    # The chosen branch is the conversation's: a reload shows it, and the chat page too.
    pg.reload()
    show_sidebar(pg)
    expect(pg.locator(".ai-msg.assistant .ai-branch-count")).to_have_text("2/2")
    expect(pg.locator(".ai-msg.assistant .ai-bubble")).to_have_text(second)
    conv = pg.evaluate("sessionStorage.getItem('noteloom.ai.conversation')")
    shown = [m for m in live.api("GET", f"/api/v1/chat/conversations/{conv}")["messages"] if m["role"] == "assistant"]
    assert [m["content"].strip() for m in shown] == [second]


def test_edit_and_resend_branches_the_question(either: Any, live: Live) -> None:
    pg = either
    show_sidebar(pg)
    ask(pg, "Pack what?")
    answered(pg)
    question = pg.locator(".ai-msg.user")
    # Escape leaves the edit (and, on a phone, not the drawer).
    question.get_by_role("button", name="Edit").click()
    box = pg.get_by_role("textbox", name="Edit your question")
    expect(box).to_be_focused()
    expect(box).to_have_value("Pack what?")
    box.press("Escape")
    expect(box).to_have_count(0)
    expect(question.get_by_role("button", name="Edit")).to_be_focused()
    expect(pg.locator("#ai-sidebar")).to_be_in_viewport()
    question.get_by_role("button", name="Edit").click()
    box.fill("Pack what for the lake?")
    box.press("Enter")
    expect(question.locator(".ai-bubble")).to_have_text("Pack what for the lake?")
    expect(question.locator(".ai-branch-count")).to_have_text("2/2")
    answered(pg)
    expect(pg.locator(".ai-msg.assistant")).to_have_count(1)
    question.get_by_role("button", name="Previous version of this question").click()
    expect(question.locator(".ai-bubble")).to_have_text("Pack what?")
    expect(question.locator(".ai-branch-count")).to_have_text("1/2")
    expect(pg.locator(".ai-msg.assistant")).to_have_count(1)
    conv = pg.evaluate("sessionStorage.getItem('noteloom.ai.conversation')")
    asked = [m["content"] for m in live.api("GET", f"/api/v1/chat/conversations/{conv}")["messages"] if m["role"] == "user"]
    assert asked == ["Pack what?"]


def test_tool_calls_open_onto_their_results_and_a_plugin_result_is_drawn(either: Any, live: Live) -> None:
    pg = either
    show_sidebar(pg)
    ask(pg, "Weather for Oslo?", model="tools:script")
    answered(pg)
    answer = pg.locator(".ai-msg.assistant").last
    expect(answer.locator(".ai-bubble strong")).to_have_text("rain")
    tools = answer.locator("details.tools")
    expect(tools.locator("summary").first).to_have_text("2 tool calls")
    # A tool with a renderer: its result drawn from the render spec, not dumped as JSON.
    weather = tools.locator('.tool[data-tool="weather_probe"]')
    expect(weather).to_have_class(re.compile(r"\bdone\b"))
    drawn = weather.locator(".tool-render.render-key_values")
    expect(drawn.locator("dt")).to_have_text(["Place", "Sky", "High"])
    expect(drawn.locator("dd")).to_have_text(["Oslo", "rain", "9"])
    expect(weather.locator(".tool-result")).to_have_count(0)
    # A tool without one: its result folded, opened with a click (or the keyboard).
    plain = tools.locator('.tool[data-tool="list_notebooks"]')
    details = plain.locator("details.tool-result")
    pre = details.locator("pre.tool-json")
    expect(pre).to_be_hidden()
    details.locator("summary").click()
    expect(pre).to_be_visible()
    expect(pre).to_contain_text('"title": "Travel"')
    details.locator("summary").press("Enter")
    expect(pre).to_be_hidden()
    # The same lines after a reload, drawn from the conversation.
    pg.reload()
    show_sidebar(pg)
    expect(pg.locator('.ai-msg.assistant .tool[data-tool="weather_probe"] .render-key_values dd')).to_have_text(["Oslo", "rain", "9"])
    expect(pg.locator('.ai-msg.assistant .tool[data-tool="list_notebooks"] details.tool-result')).to_have_count(1)
