"""The note editor in the notes app, in Chromium at 1280x800 and 390x844: autosave with its
status, no text lost when leaving, conflicts shown both ways, preview, to-do fields and tags,
history with a diff and restore, the trash and back, a dropped attachment, and proposed edits
drawn inline (accept is one undo step; an edit whose text moved is refused with the reason)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from page_support import ARTIFACTS, DESK, PHONE, Live, served, signed_in_app
from playwright.sync_api import expect

from api_support import second_user
from noteloom.app import access_token, open_app
from noteloom.config import load_settings

STATUS = "#note-pane .ne-status"

# Records every text the status line shows, in order (transitions faster than a poll are kept).
WATCH_STATUS = """() => {
  const el = document.querySelector('#note-pane .ne-status');
  window.__statuses = [el.textContent];
  new MutationObserver(() => window.__statuses.push(el.textContent))
    .observe(el, {childList: true, characterData: true, subtree: true});
}"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("note-editor")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        ws.create_note("Welcome", "hello")
        token = access_token(app)
        _, guest_token = second_user(app, "guest")
        lent = ws.create_notebook("Lent")
        notes = {"lent": ws.create_note("Lent note", "look, do not touch", lent.id).id, "guest_token": guest_token}
        ws.share_notebook(lent.id, "guest", "read")
    finally:
        app.close()
    with served(home) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def desk(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"note-editor-{request.node.name}", DESK)


@pytest.fixture
def phone(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"note-editor-{request.node.name}", PHONE)


@pytest.fixture(params=["desk", "phone"])
def either(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The flows every user takes, at 1280x800 and at 390x844."""
    size = DESK if request.param == "desk" else PHONE
    yield from signed_in_app(browser, live, f"note-editor-{request.node.name}", size)


def new_note(live: Live, title: str, body: str) -> dict[str, Any]:
    note: dict[str, Any] = live.api("POST", "/api/v1/notes", json={"title": title, "body": body})
    return note


def open_note(pg: Any, note_id: str) -> None:
    """Open the note in the app (a navigation inside the page, as a click does)."""
    pg.evaluate("id => { history.pushState({}, '', '/notes/' + id); dispatchEvent(new PopStateEvent('popstate')); }", note_id)
    expect(pg.locator(f"#note-pane .ne[data-note='{note_id}'] .cm-content")).to_be_visible()
    expect(pg.locator(STATUS)).to_have_text("Saved")


def doc(pg: Any) -> str:
    return str(pg.evaluate("NoteEditor.current.editor.getDoc()"))


def type_at_end(pg: Any, text: str) -> None:
    pg.locator("#note-pane .cm-content").click()
    pg.keyboard.press("Control+End")
    pg.keyboard.type(text)


def test_typing_autosaves_with_a_polite_status_and_a_reload_shows_the_text(either: Any, live: Live) -> None:
    note = new_note(live, "Autosave", "# Plan\n\nfirst line")
    open_note(either, note["id"])
    status = either.locator(STATUS)
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_attribute("aria-live", "polite")
    either.evaluate(WATCH_STATUS)
    type_at_end(either, "\nsecond line")
    expect(status).to_have_text("Saved")
    seen = either.evaluate("window.__statuses")
    assert seen[-3:] == ["Unsaved changes", "Saving…", "Saved"], seen
    assert all(a != b for a, b in pairwise(seen)), f"the status repeated itself: {seen}"
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "# Plan\n\nfirst line\nsecond line"
    # Ctrl+S saves at once, without waiting for the pause.
    type_at_end(either, " now")
    either.keyboard.press("Control+s")
    expect(status).to_have_text("Saved")
    either.reload()
    expect(either.locator("#note-pane .cm-content")).to_contain_text("second line now")
    assert doc(either).endswith("second line now")


def test_fenced_code_in_the_editor_is_highlighted_in_its_language(desk: Any, live: Live) -> None:
    note = new_note(live, "Code", "Plain words here.\n\n```python\ndef plan():\n    return 'tent'\n```\n")
    open_note(desk, note["id"])
    colour = "(sel) => getComputedStyle(document.evaluate(sel, document, null, 9, null).singleNodeValue).color"
    plain = desk.evaluate(colour, "//div[contains(@class,'cm-line')][contains(., 'Plain words')]")
    keyword = desk.locator("#note-pane .cm-line span", has_text=re.compile("^def$"))
    string = desk.locator("#note-pane .cm-line span", has_text=re.compile("^'tent'$"))
    expect(keyword).to_have_count(1)
    expect(string).to_have_count(1)
    assert len({plain, keyword.evaluate("e => getComputedStyle(e).color"), string.evaluate("e => getComputedStyle(e).color")}) == 3


def test_leaving_the_note_right_after_typing_saves_the_text_first(phone: Any, live: Live) -> None:
    note = new_note(live, "Leave me", "start")
    open_note(phone, note["id"])
    type_at_end(phone, " and more typed just before leaving")
    assert phone.evaluate("NoteEditor.current.dirty()")
    phone.go_back()
    expect(phone.locator("#note-pane .ne")).to_have_count(0)
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "start and more typed just before leaving"


def test_a_note_changed_elsewhere_shows_both_versions_and_keep_mine_or_take_theirs(either: Any, live: Live) -> None:
    note = new_note(live, "Shared", "base text")
    open_note(either, note["id"])
    live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "their text"})
    type_at_end(either, " plus mine")
    conflict = either.locator("#note-pane .ne-conflict")
    expect(conflict).to_be_visible()
    expect(either.locator(STATUS)).to_have_text("Conflict")
    expect(conflict.locator(".ne-mine .ne-version-body")).to_have_text("base text plus mine")
    expect(conflict.locator(".ne-theirs .ne-version-body")).to_have_text("their text")
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "their text", "overwritten silently"
    conflict.get_by_role("button", name="Keep mine").click()
    expect(conflict).to_be_hidden()
    expect(either.locator(STATUS)).to_have_text("Saved")
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "base text plus mine"

    live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "their second text"})
    type_at_end(either, " again")
    expect(conflict).to_be_visible()
    expect(conflict.locator(".ne-theirs .ne-version-body")).to_have_text("their second text")
    conflict.get_by_role("button", name="Take theirs").click()
    expect(conflict).to_be_hidden()
    expect(either.locator(STATUS)).to_have_text("Saved")
    assert doc(either) == "their second text"
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "their second text"


def test_preview_to_do_fields_and_tags(either: Any, live: Live) -> None:
    note = new_note(live, "Chores", "# Chores\n\n- [ ] sweep\n- [ ] mop")
    open_note(either, note["id"])
    pane = either.locator("#note-pane")
    pane.get_by_role("button", name="Preview").click()
    preview = pane.locator(".ne-preview")
    expect(preview.locator("h1")).to_have_text("Chores")
    expect(pane.locator(".ne-editor")).to_be_hidden()
    preview.get_by_role("checkbox", name="Done: sweep").check()
    expect(either.locator(STATUS)).to_have_text("Saved")
    assert doc(either) == "# Chores\n\n- [x] sweep\n- [ ] mop"
    pane.get_by_role("button", name="Preview").click()
    expect(pane.locator(".cm-content")).to_be_visible()

    pane.get_by_label("To-do").check()
    expect(pane.get_by_label("Due")).to_be_visible()
    pane.get_by_label("Due").fill("2031-05-06")
    pane.get_by_label("Due").dispatch_event("change")
    pane.get_by_label("Done", exact=True).check()
    tag = pane.get_by_label("Add a tag")
    tag.fill("house")
    tag.press("Enter")
    expect(pane.locator(".ne-tag", has_text="house")).to_be_visible()
    tag.fill("weekly")
    tag.press("Enter")
    expect(pane.locator(".ne-tag", has_text="weekly")).to_be_visible()
    pane.get_by_role("button", name="Remove tag house").click()
    expect(pane.locator(".ne-tag", has_text="house")).to_have_count(0)
    expect(pane.locator(".ne-tag")).to_have_count(1)
    got = live.api("GET", f"/api/v1/notes/{note['id']}")
    assert got["is_todo"] is True and got["todo_completed"] is not None
    assert got["todo_due"] == 1_935_792_000_000  # 2031-05-06T00:00:00Z
    assert got["tags"] == ["weekly"]
    either.reload()
    expect(either.locator("#note-pane .ne-tag")).to_have_text(re.compile("weekly"))
    expect(either.locator("#note-pane").get_by_label("Done", exact=True)).to_be_checked()


def test_history_shows_a_diff_against_the_current_text_and_restores(either: Any, live: Live) -> None:
    note = new_note(live, "Draft", "line one\nold middle\nline three")
    live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "line one\nnew middle\nline three"})
    open_note(either, note["id"])
    pane = either.locator("#note-pane")
    pane.get_by_role("button", name="History").click()
    history = pane.locator(".ne-history")
    history.locator(".ne-revision").first.click()
    diff = history.locator(".ne-diff")
    expect(diff.locator("del")).to_have_text(re.compile("old middle"))
    expect(diff.locator("ins")).to_have_text(re.compile("new middle"))
    expect(diff.locator(".ne-same", has_text="line one")).to_have_count(1)
    assert diff.inner_text().index("old middle") < diff.inner_text().index("new middle"), "removed lines come first"
    history.get_by_role("button", name="Restore this version").click()
    expect(history).to_be_hidden()
    expect(pane.locator(".cm-content")).to_contain_text("old middle")
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "line one\nold middle\nline three"


@pytest.mark.parametrize("size", ["desk", "phone"])
def test_move_to_trash_then_restore_from_the_banner(size: str, request: pytest.FixtureRequest, live: Live) -> None:
    pg = request.getfixturevalue(size)
    note = new_note(live, f"Binned on {size}", "bye")
    open_note(pg, note["id"])
    pg.locator("#note-pane").get_by_role("button", name="Move to trash").click()
    expect(pg.locator(f"#note-pane .ne[data-note='{note['id']}']")).to_have_count(0)
    assert live.api("GET", f"/api/v1/notes/{note['id']}?trashed=true")["deleted_time"] is not None
    open_note(pg, note["id"])
    banner = pg.locator("#note-pane .ne-banner")
    expect(banner).to_contain_text("This note is in the trash.")
    expect(pg.locator("#note-pane .ne-title")).to_be_disabled()
    banner.get_by_role("button", name="Restore").click()
    expect(banner).to_be_hidden()
    expect(pg.locator("#note-pane .ne-title")).to_be_enabled()
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["deleted_time"] is None


def test_a_file_dropped_on_the_editor_is_uploaded_and_linked_where_it_fell(desk: Any, live: Live) -> None:
    note = new_note(live, "Photos", "Look:\n")
    open_note(desk, note["id"])
    desk.evaluate("""() => {
      const target = document.querySelector('#note-pane .cm-content');
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 0])], 'dot.png', {type: 'image/png'}));
      const box = target.getBoundingClientRect();
      target.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true,
        clientX: box.left + box.width - 4, clientY: box.top + box.height - 4}));
    }""")
    expect(desk.locator("#note-pane .cm-content")).to_contain_text("![dot.png](:/")
    expect(desk.locator(STATUS)).to_have_text("Saved")
    body = live.api("GET", f"/api/v1/notes/{note['id']}")["body"]
    m = re.search(r"!\[dot\.png\]\(:/([0-9a-f]{32})\)", body)
    assert m and body.startswith("Look:\n"), body
    stored = httpx.get(f"{live.url}/attachments/{m.group(1)}", headers={"Authorization": f"Bearer {live.token}"})
    assert stored.status_code == 200 and stored.content.startswith(b"\x89PNG")
    # Or picked with the button: a file that is not an image is a plain link at the cursor.
    desk.locator("#note-pane .cm-content").click()
    desk.keyboard.press("Control+End")
    with desk.expect_file_chooser() as chooser:
        desk.locator("#note-pane").get_by_role("button", name="Attach file").click()
    chooser.value.set_files(files=[{"name": "list.txt", "mimeType": "text/plain", "buffer": b"socks"}])
    expect(desk.locator("#note-pane .cm-content")).to_contain_text(re.compile(r"(?<!!)\[list\.txt\]\(:/[0-9a-f]{32}\)"))
    expect(desk.locator(STATUS)).to_have_text("Saved")
    assert "[list.txt](:/" in live.api("GET", f"/api/v1/notes/{note['id']}")["body"]
    desk.locator("#note-pane").get_by_role("button", name="Preview").click()
    expect(desk.locator("#note-pane .ne-preview img")).to_have_count(1)


def test_proposed_edits_show_inline_accept_is_one_undo_step_and_a_moved_anchor_is_refused(desk: Any, live: Live) -> None:
    body = "We leave on Friday at nine.\nBring the tent."
    note = new_note(live, "Trip plan", body)
    open_note(desk, note["id"])
    desk.evaluate("""(body) => {
      window.__decisions = [];
      const ed = NoteEditor.current.editor;
      const at = (s) => body.indexOf(s);
      ed.proposeEdits([
        {id: 'day', from: at('Friday'), to: at('Friday') + 6, insert: 'Saturday', label: 'the day'},
        {id: 'tent', from: at('tent'), to: at('tent') + 4, insert: 'big tent', label: 'the tent'},
      ], {onDecision: (id, ok, reason) => window.__decisions.push([id, ok, reason || null])});
    }""", body)
    pane = desk.locator("#note-pane")
    expect(pane.locator(".cm-nl-del", has_text="Friday")).to_be_visible()
    expect(pane.locator(".cm-nl-proposal", has_text="Saturday")).to_be_visible()
    expect(pane.get_by_role("button", name="Accept all proposed edits")).to_be_visible()
    assert doc(desk) == body, "a proposal must not change the text before it is accepted"
    pane.get_by_role("button", name="Accept edit: the day").click()
    expect(pane.locator(".cm-nl-proposal", has_text="Saturday")).to_have_count(0)
    assert doc(desk) == body.replace("Friday", "Saturday")
    # Edit inside the tent proposal's text: its anchor no longer holds what it replaced.
    desk.evaluate("""() => { const v = NoteEditor.current.editor.view; const p = v.state.doc.toString().indexOf('tent');
      v.dispatch({changes: {from: p + 1, to: p + 2, insert: 'E'}, userEvent: 'input.type'}); }""")
    pane.get_by_role("button", name="Accept edit: the tent").click()
    expect(pane.locator(".cm-nl-proposal")).to_have_count(0)
    decisions = desk.evaluate("window.__decisions")
    assert decisions[0] == ["day", True, None]
    assert decisions[1][:2] == ["tent", False] and "edited after it was proposed" in decisions[1][2], decisions
    assert doc(desk) == "We leave on Saturday at nine.\nBring the tEnt."
    # One undo takes back the typed letter, the next exactly the accepted edit.
    pane.locator(".cm-content").focus()
    desk.keyboard.press("Control+z")
    assert doc(desk) == body.replace("Friday", "Saturday")
    desk.keyboard.press("Control+z")
    assert doc(desk) == body
    expect(desk.locator(STATUS)).to_have_text("Saved")
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == body


AXE = Path(__file__).with_name("vendor") / "axe.min.js"
RUN_AXE = """async () => {
  const r = await axe.run('#note-pane', { resultTypes: ['violations'] });
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help}: ` + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; '));
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_pane_with_its_panels_open_has_no_serious_accessibility_violation(
    browser: Any, live: Live, scheme: str, request: pytest.FixtureRequest
) -> None:
    context = browser.new_context(viewport=DESK, color_scheme=scheme)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"script error: {e}"))
    found: dict[str, list[str]] = {}

    def scan(name: str) -> None:
        if not pg.evaluate("typeof axe !== 'undefined'"):
            pg.evaluate(AXE.read_text(encoding="utf-8"))  # through DevTools: the CSP refuses inline script
        found[name] = pg.evaluate(RUN_AXE)

    try:
        note = new_note(live, f"Checked in {scheme}", "# Check\n\nline one\nline two")
        live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "# Check\n\nline one\nline 2", "tags": ["a11y"]})
        pg.goto(live.page_url("/"))
        expect(pg.locator("#sign-out")).to_be_visible()
        open_note(pg, note["id"])
        pane = pg.locator("#note-pane")
        pg.evaluate("NoteEditor.current.editor.proposeEdits([{id: 'x', from: 2, to: 7, insert: 'Review', label: 'title'}])")
        expect(pane.locator(".cm-nl-proposal")).to_be_visible()
        pane.get_by_label("To-do").check()
        expect(pane.get_by_label("Due")).to_be_visible()
        pane.get_by_role("button", name="History").click()
        pane.locator(".ne-revision").first.click()
        expect(pane.locator(".ne-diff")).to_be_visible()
        scan("editor with a proposal, to-do and history")
        pg.evaluate("NoteEditor.current.editor.rejectAll()")
        live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "changed elsewhere"})
        type_at_end(pg, "!")
        expect(pane.locator(".ne-conflict")).to_be_visible()
        scan("conflict")
        pane.get_by_role("button", name="Take theirs").click()
        pane.get_by_role("button", name="Preview").click()
        expect(pane.locator(".ne-preview")).to_be_visible()
        scan("preview")
        live.api("DELETE", f"/api/v1/notes/{note['id']}")
        pg.reload()
        expect(pg.locator("#note-pane .ne-banner")).to_be_visible()
        scan("in the trash")
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"note-editor-{request.node.name}.png"))
        context.close()
    assert not errors, errors
    assert len(found) == 4
    assert not [v for vs in found.values() for v in vs], found


def test_opening_a_note_at_a_section_scrolls_the_editor_to_its_heading(phone: Any, live: Live) -> None:
    filler = "\n\n".join(f"Paragraph {i} says little." for i in range(120))
    note = new_note(live, "Long", f"# Long\n\n{filler}\n\n## Packing list\n\nThe tent.\n")
    phone.evaluate("id => { history.pushState({}, '', '/notes/' + id + '?section=Packing%20list');"
                   " dispatchEvent(new PopStateEvent('popstate')); }", note["id"])
    heading = phone.locator("#note-pane .cm-line", has_text="## Packing list")
    expect(heading).to_be_in_viewport()
    expect(phone.locator("#note-pane .cm-line", has_text="Paragraph 0 says")).not_to_be_in_viewport()
    # The note already open, asked for at another section: the app asks the editor to go there.
    phone.evaluate("id => { history.pushState({}, '', '/notes/' + id + '?section=long');"
                   " dispatchEvent(new PopStateEvent('popstate')); }", note["id"])
    expect(phone.locator("#note-pane .cm-line", has_text=re.compile("^# Long$"))).to_be_in_viewport()


def test_an_edit_proposed_through_the_pane_is_saved_as_its_own_revision(phone: Any, live: Live) -> None:
    note = new_note(live, "Revisions", "Pack the stove.")
    open_note(phone, note["id"])
    type_at_end(phone, " And fuel.")
    phone.evaluate("""() => NoteEditor.current.proposeEdits(
      [{id: 'p', from: 9, to: 14, insert: 'big stove', label: 'stove'}])""")
    expect(phone.locator(STATUS)).to_have_text("Saved")  # the typing was saved before the proposal showed
    typed = "Pack the stove. And fuel."
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == typed
    phone.locator("#note-pane").get_by_role("button", name="Accept edit: stove").click()
    expect(phone.locator("#note-pane .cm-nl-proposal")).to_have_count(0)
    expect(phone.locator(STATUS)).to_have_text("Saved")
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "Pack the big stove. And fuel."
    revisions = live.api("GET", f"/api/v1/notes/{note['id']}/revisions")["revisions"]
    newest = live.api("GET", f"/api/v1/notes/{note['id']}/revisions/{revisions[0]['id']}")
    assert newest["body"] == typed and len(revisions) == 2


def test_text_that_could_not_be_saved_is_guarded_on_leaving_and_offered_back_after_a_reload(
    browser: Any, live: Live, request: pytest.FixtureRequest
) -> None:
    context = browser.new_context(viewport=DESK)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    dialogs: list[str] = []
    errors: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.type), d.accept()))
    pg.on("pageerror", lambda e: errors.append(f"script error: {e}"))
    try:
        note = new_note(live, "Offline", "kept")
        pg.goto(live.page_url("/"))
        expect(pg.locator("#sign-out")).to_be_visible()
        open_note(pg, note["id"])
        refuse = lambda route: route.abort() if route.request.method == "PATCH" else route.continue_()  # noqa: E731
        pg.route(f"**/api/v1/notes/{note['id']}", refuse)
        type_at_end(pg, " and typed while the server was away")
        expect(pg.locator("#note-pane .ne-error")).to_contain_text("Not saved")
        expect(pg.locator(STATUS)).to_have_text("Unsaved changes")
        pg.unroute(f"**/api/v1/notes/{note['id']}")
        pg.reload()
        assert "beforeunload" in dialogs, dialogs
        expect(pg.locator("#note-pane .cm-content")).to_contain_text("kept and typed while the server was away")
        expect(pg.locator(STATUS)).to_have_text("Saved")
        assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "kept and typed while the server was away"
        # Left unsaved again, and changed elsewhere before the reload: both versions, no silent choice.
        pg.route(f"**/api/v1/notes/{note['id']}", refuse)
        type_at_end(pg, " twice")
        expect(pg.locator(STATUS)).to_have_text("Unsaved changes")
        pg.unroute(f"**/api/v1/notes/{note['id']}")
        live.api("PATCH", f"/api/v1/notes/{note['id']}", json={"body": "rewritten elsewhere"})
        pg.reload()
        conflict = pg.locator("#note-pane .ne-conflict")
        expect(conflict.locator(".ne-mine .ne-version-body")).to_have_text("kept and typed while the server was away twice")
        expect(conflict.locator(".ne-theirs .ne-version-body")).to_have_text("rewritten elsewhere")
        expect(pg.locator(STATUS)).to_have_text("Conflict")
        assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "rewritten elsewhere"
        conflict.get_by_role("button", name="Keep mine").click()
        expect(pg.locator(STATUS)).to_have_text("Saved")
        assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == "kept and typed while the server was away twice"
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"note-editor-{request.node.name}.png"))
        context.close()
    assert not errors, errors


def test_accept_all_applies_each_edit_as_its_own_undo_step_and_reject_all_leaves_the_text(phone: Any, live: Live) -> None:
    body = "alpha beta gamma"
    note = new_note(live, "All at once", body)
    open_note(phone, note["id"])
    propose = """(edits) => { window.__decisions = [];
      NoteEditor.current.editor.proposeEdits(edits, {onDecision: (id, ok, why) => window.__decisions.push([id, ok, why || null])}); }"""
    phone.evaluate(propose, [{"id": "a", "from": 0, "to": 5, "insert": "ALPHA"}, {"id": "g", "from": 11, "to": 16, "insert": "GAMMA"}])
    pane = phone.locator("#note-pane")
    expect(pane.locator(".cm-nl-proposal")).to_have_count(2)
    pane.get_by_role("button", name="Accept all proposed edits").click()
    expect(pane.locator(".cm-nl-proposal")).to_have_count(0)
    assert doc(phone) == "ALPHA beta GAMMA"
    assert sorted(phone.evaluate("window.__decisions")) == [["a", True, None], ["g", True, None]]
    phone.evaluate("NoteEditor.current.editor.undo()")
    assert doc(phone) == "alpha beta GAMMA"
    phone.evaluate("NoteEditor.current.editor.undo()")
    assert doc(phone) == body
    phone.evaluate(propose, [{"id": "b", "from": 6, "to": 10, "insert": "BETA"}, {"id": "x", "from": 0, "to": 0, "insert": "> "}])
    expect(pane.locator(".cm-nl-proposal")).to_have_count(2)
    pane.get_by_role("button", name="Reject all proposed edits").click()
    expect(pane.locator(".cm-nl-proposal")).to_have_count(0)
    assert doc(phone) == body
    assert sorted(phone.evaluate("window.__decisions")) == [["b", False, "rejected"], ["x", False, "rejected"]]


def test_a_note_shared_to_read_opens_read_only_and_says_why(browser: Any, live: Live, request: pytest.FixtureRequest) -> None:
    context = browser.new_context(viewport=PHONE)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"script error: {e}"))
    try:
        pg.goto(f"{live.url}/notes/{live.notes['lent']}?token={live.notes['guest_token']}")
        pane = pg.locator("#note-pane")
        expect(pane.locator(".cm-content")).to_contain_text("look, do not touch")
        expect(pane.locator(".ne-banner")).to_contain_text("shared with you to read only")
        expect(pane.locator(".cm-content")).to_have_attribute("contenteditable", "false")
        expect(pane.locator(".ne-title")).to_be_disabled()
        expect(pane.get_by_role("button", name="Move to trash")).to_be_disabled()
        expect(pane.get_by_role("button", name="History")).to_be_enabled()
        assert not pg.evaluate("NoteEditor.current.dirty()")
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"note-editor-{request.node.name}.png"))
        context.close()
    assert not errors, errors


def test_a_note_lists_the_notes_linking_to_it_and_the_list_is_read_again_when_it_opens(phone: Any, live: Live) -> None:
    target = new_note(live, "Packing list", "tent, stove")
    by_title = new_note(live, "Trip plan", "see [[Packing list]]")
    alone = new_note(live, "Nobody links here", "quiet")
    open_note(phone, target["id"])
    linked = phone.locator("#note-pane .ne-backlinks")
    expect(linked.get_by_role("heading", name="Linked from")).to_be_visible()
    expect(linked.get_by_role("link")).to_have_count(1)
    expect(linked.get_by_role("link", name="Trip plan")).to_have_attribute("href", f"/notes/{by_title['id']}")
    # Another note links to it meanwhile (by :/ID): listed once the note opens again.
    by_id = new_note(live, "Shopping", f"buy what [the list](:/{target['id']}) lacks")
    open_note(phone, alone["id"])
    expect(phone.locator("#note-pane .ne-backlinks")).to_be_hidden()
    expect(phone.locator("#note-pane .ne-backlinks a")).to_have_count(0)
    open_note(phone, target["id"])
    expect(linked.get_by_role("link")).to_have_count(2)
    expect(linked.get_by_role("link", name="Shopping")).to_have_attribute("href", f"/notes/{by_id['id']}")
    # A backlink opens that note in the editor.
    linked.get_by_role("link", name="Trip plan").click()
    expect(phone.locator(f"#note-pane .ne[data-note='{by_title['id']}'] .ne-title")).to_have_value("Trip plan")
    assert phone.evaluate("location.pathname") == f"/notes/{by_title['id']}"


def test_without_the_editor_the_read_only_note_is_enhanced_and_lists_its_backlinks(
    browser: Any, live: Live, request: pytest.FixtureRequest
) -> None:
    target = new_note(live, "Read here", "# Read here\n\n- [ ] water the plants\n\n```python\ndef water():\n    pass\n```\n")
    linker = new_note(live, "Reminders", f"[plants](:/{target['id']})")
    context = browser.new_context(viewport=DESK)
    # The editor's script answers empty: the app falls back to the server's rendered note.
    context.route("**/static/note_editor.js", lambda route: route.fulfill(
        status=200, content_type="application/javascript", body="/* no editor here */"))
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"script error: {e}"))
    try:
        pg.goto(live.page_url(f"/notes/{target['id']}"))
        expect(pg.locator("#note-title")).to_have_text("Read here")
        assert pg.evaluate("typeof window.NoteEditor") == "undefined"
        body = pg.locator("#note-body")
        expect(body.locator("pre code .hljs-keyword", has_text="def")).to_have_count(1)  # highlighted in place
        backlinks = pg.locator("#note-backlinks")
        expect(backlinks.get_by_role("heading", name="Linked from")).to_be_visible()
        expect(backlinks.get_by_role("link", name="Reminders")).to_have_attribute("href", f"/notes/{linker['id']}")
        box = body.get_by_role("checkbox", name="Done: water the plants")
        expect(box).to_be_enabled()  # the server's box is disabled until enhance wires it
        box.check()
        expect(box).to_be_enabled()
        expect(box).to_be_checked()
        assert "- [x] water the plants" in live.api("GET", f"/api/v1/notes/{target['id']}")["body"]
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"note-editor-{request.node.name}.png"))
        context.close()
    assert not errors, errors


def test_a_task_inside_a_quote_is_ticked_from_the_preview(either: Any, live: Live) -> None:
    note = new_note(live, "Quoted", "> - [ ] call the vet\n> > 1. [x] feed the cat\n\n- [ ] plain")
    open_note(either, note["id"])
    pane = either.locator("#note-pane")
    pane.get_by_role("button", name="Preview").click()
    preview = pane.locator(".ne-preview")
    preview.get_by_role("checkbox", name="Done: call the vet").check()
    expect(either.locator(STATUS)).to_have_text("Saved")
    assert doc(either) == "> - [x] call the vet\n> > 1. [x] feed the cat\n\n- [ ] plain"
    preview.get_by_role("checkbox", name="Done: feed the cat").uncheck()
    expect(preview.get_by_role("checkbox", name="Done: feed the cat")).not_to_be_checked()
    expect(either.locator(STATUS)).to_have_text("Saved")
    assert doc(either) == "> - [x] call the vet\n> > 1. [ ] feed the cat\n\n- [ ] plain"
    assert live.api("GET", f"/api/v1/notes/{note['id']}")["body"] == doc(either)


# Counts the preview's renders (note_editor.js calls NoteloomRender.renderInto at each).
COUNT_RENDERS = """() => {
  const render = NoteloomRender.renderInto;
  window.__renders = 0;
  NoteloomRender.renderInto = (...args) => { window.__renders += 1; return render(...args); };
}"""


def test_a_long_note_in_preview_renders_once_per_pause_not_per_keystroke(desk: Any, live: Live) -> None:
    body = "# Long\n\n" + "\n\n".join(f"Paragraph {i} " + "words " * 30 for i in range(1100))
    assert len(body) > 200_000
    note = new_note(live, "Long one", body)
    open_note(desk, note["id"])
    pane = desk.locator("#note-pane")
    pane.get_by_role("button", name="Preview").click()
    expect(pane.locator(".ne-preview p").last).to_contain_text("Paragraph 1099")
    desk.evaluate(COUNT_RENDERS)
    # Typing in the title changes no text the preview shows: no render at all.
    title = pane.locator(".ne-title")
    title.click()
    desk.keyboard.press("End")
    desk.keyboard.type(" notes")
    expect(title).to_have_value("Long one notes")
    # 40 changes to the text in a burst (as a stream of edits lands): one render, of the last.
    desk.evaluate("""() => { const ed = NoteEditor.current.editor;
      for (let i = 0; i < 40; i++) ed.insertAtCursor(i === 39 ? ' THE END' : '.', ed.view.state.doc.length); }""")
    expect(pane.locator(".ne-preview p").last).to_contain_text("THE END")
    expect(desk.locator(STATUS)).to_have_text("Saved")
    assert desk.evaluate("window.__renders") == 1


def test_the_index_status_is_a_polite_live_region_written_only_when_it_changes(desk: Any, live: Live) -> None:
    status = desk.locator("#index-status")
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_attribute("aria-live", "polite")
    expect(status).to_contain_text("Semantic index:")
    text = status.inner_text()
    desk.evaluate("""() => {
      const el = document.getElementById('index-status');
      window.__index = {node: el, texts: [], hidden: []};
      new MutationObserver(() => { window.__index.texts.push(el.textContent); window.__index.hidden.push(el.hidden); })
        .observe(el, {childList: true, characterData: true, subtree: true, attributes: true});
    }""")
    # A note opened from the list and the list again: the same status, not written again.
    desk.locator("#notes a.note-link", has_text="Welcome").click()
    expect(desk.locator("#note-pane .ne-title")).to_have_value("Welcome")
    desk.go_back()
    expect(desk.locator("#note-pane .ne")).to_have_count(0)
    expect(status).to_have_text(text)
    # Another list has none; back at all notes it is written once more.
    desk.locator("#tree-pane a", has_text="Lent").first.click()
    expect(desk.locator("#notes")).to_contain_text("Lent note")
    expect(status).to_have_text("")
    desk.go_back()
    expect(status).to_have_text(text)
    seen = desk.evaluate("window.__index")
    assert seen["texts"] == ["", text], seen
    assert not any(seen["hidden"]), seen
    assert desk.evaluate("window.__index.node === document.getElementById('index-status')")
