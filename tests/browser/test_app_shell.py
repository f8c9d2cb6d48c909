"""The notes app's shell in Chromium at 1280x800 and 390x844: the notebook tree (collapsible,
remembered, counts with sub-notebooks), the note list paged as you scroll, moving a note by
dragging it onto a notebook or with "Move to…", search that opens a note at the hit's section,
addresses that survive reload and Back, the keyboard shortcuts and their help, and the phone's
drawers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from page_support import ARTIFACTS, DESK, PHONE, Live, served, signed_in_app
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

T0 = 1_750_000_000_000
FILLER = "\n\n".join(f"Paragraph {i} of the introduction, which says nothing much at all." for i in range(60))
TRIP = f"# Trip\n\n## Intro\n\n{FILLER}\n\n## Packing\n\nBring the tent and the camping stove.\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("app-shell")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        garden = ws.create_notebook("Garden")
        books = {"Garden": garden.id}
        for k, name in enumerate(("Roses", "Tulips")):
            books[name] = ws.create_notebook(name, garden.id).id
            for i in range(50):
                ws.create_note(f"{name} {i}", "", books[name], updated_time=T0 + k * 100 + i)
        books["Archive"] = ws.create_notebook("Archive").id
        for i in range(130):
            ws.create_note(f"Archived {i:03}", "", books["Archive"], updated_time=T0 + 1000 + i)
        books["Inbox"] = ws.create_notebook("Inbox").id
        books["Travel"] = ws.create_notebook("Travel").id
        notes = {
            "trip": ws.create_note("Trip", TRIP, books["Travel"], tags=["summer"], updated_time=T0 + 5000).id,
            "drag": ws.create_note("Drag me", "by the mouse", books["Inbox"], updated_time=T0 + 5001).id,
            "keys": ws.create_note("Move me by keys", "by the keyboard", books["Inbox"], updated_time=T0 + 5002).id,
        }
        notes.update({f"book:{k}": v for k, v in books.items()})
        token = access_token(app)
    finally:
        app.close()
    with served(home) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def desk(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"app-shell-{request.node.name}", DESK)


@pytest.fixture
def phone(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"app-shell-{request.node.name}", PHONE)


def tree_row(pg: Any, title: str) -> Any:
    return pg.locator("#tree .tree-row").filter(has=pg.locator("a.nb-link", has_text=re.compile(f"^{title}$")))


def note_heading(pg: Any, text: str) -> Any:
    """A heading of the open note, in the rendered view or the editor."""
    return pg.locator("#note-pane").get_by_text(re.compile(rf"^(#+ )?{text}$")).first


def expect_note_open(pg: Any, title: str) -> None:
    """The note titled ``title`` is open: its title in the rendered view or in the editor's field."""
    pg.wait_for_function(
        """(t) => { const pane = document.getElementById("note-pane");
                    const h = pane.querySelector("#note-title");
                    return (h && h.textContent === t) || [...pane.querySelectorAll("input")].some((i) => i.value === t); }""",
        arg=title)


def test_the_tree_collapses_remembers_it_and_counts_sub_notebooks(desk: Any, live: Live) -> None:
    pg = desk
    garden = tree_row(pg, "Garden")
    expect(garden.locator(".count")).to_have_text("100")  # 50 in each child, none of its own
    expect(tree_row(pg, "Roses").locator(".count")).to_have_text("50")
    total = live.api("GET", "/api/v1/browse/tree")["total"]
    assert total >= 233
    expect(tree_row(pg, "All notes").locator(".count")).to_have_text(str(total))
    twisty = garden.locator("button.twisty")
    expect(twisty).to_have_attribute("aria-expanded", "true")
    twisty.click()
    expect(twisty).to_have_attribute("aria-expanded", "false")
    expect(tree_row(pg, "Roses")).to_be_hidden()
    pg.reload()
    expect(tree_row(pg, "Garden").locator("button.twisty")).to_have_attribute("aria-expanded", "false")
    expect(tree_row(pg, "Roses")).to_be_hidden()
    tree_row(pg, "Garden").locator("button.twisty").press("Enter")
    expect(tree_row(pg, "Roses")).to_be_visible()
    tree_row(pg, "Garden").locator("button.twisty").press("Enter")
    expect(tree_row(pg, "Roses")).to_be_hidden()
    # a notebook inside a collapsed one, opened by its address, shows with its branch open
    pg.goto(f"{live.url}/notebooks/{live.notes['book:Roses']}")
    expect(tree_row(pg, "Roses").locator("a")).to_have_attribute("aria-current", "page")
    expect(tree_row(pg, "Roses")).to_be_visible()
    expect(tree_row(pg, "Garden").locator("button.twisty")).to_have_attribute("aria-expanded", "true")
    # the current notebook is marked, its list holds its sub-notebooks' notes
    tree_row(pg, "Garden").locator("a").click()
    expect(pg).to_have_url(f"{live.url}/notebooks/{live.notes['book:Garden']}")
    expect(tree_row(pg, "Garden").locator("a")).to_have_attribute("aria-current", "page")
    expect(pg.locator("#list-title")).to_have_text("Garden")
    expect(pg.locator("#notes li").first).to_contain_text("Tulips 49")


def test_the_list_loads_more_as_you_scroll_and_by_the_button(desk: Any, live: Live) -> None:
    pg = desk
    pg.goto(f"{live.url}/notebooks/{live.notes['book:Archive']}")
    rows = pg.locator("#notes li[data-id]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("Archived 129")
    expect(rows.first).to_contain_text("Archive")
    pg.locator("#notes-sentinel").scroll_into_view_if_needed()
    expect(rows).to_have_count(100)
    more = pg.locator("#load-more")
    expect(more).to_be_visible()
    more.focus()
    pg.keyboard.press("Enter")
    expect(rows).to_have_count(130)
    expect(rows.last).to_contain_text("Archived 000")
    expect(more).to_be_hidden()
    titles = rows.locator("a.note-link").all_inner_texts()
    assert titles == [f"Archived {i:03}" for i in range(129, -1, -1)]  # no repeats, no gaps


def test_dragging_a_note_onto_a_notebook_moves_it_and_move_to_does_it_by_keyboard(desk: Any, live: Live) -> None:
    pg = desk
    pg.goto(f"{live.url}/notebooks/{live.notes['book:Inbox']}")
    row = pg.locator("#notes li", has_text="Drag me")
    expect(row).to_be_visible()
    travel = tree_row(pg, "Travel")
    before = int(travel.locator(".count").inner_text())
    row.drag_to(travel)
    expect(row).to_have_count(0)  # it left this notebook's list
    expect(travel.locator(".count")).to_have_text(str(before + 1))
    expect(pg.locator("#list-status")).to_contain_text("Moved “Drag me” to Travel")
    assert live.api("GET", f"/api/v1/notes/{live.notes['drag']}")["notebook_id"] == live.notes["book:Travel"]
    # the keyboard way: the row's Move… button, a notebook picked in the dialog
    keys = pg.locator("#notes li", has_text="Move me by keys")
    keys.locator("a.note-link").focus()
    keys.locator("button.row-move").focus()
    pg.keyboard.press("Enter")
    dialog = pg.locator("#move-dialog")
    expect(dialog).to_be_visible()
    expect(pg.locator("#move-select")).to_be_focused()
    pg.select_option("#move-select", label="\u2003Roses")
    pg.click("#move-go")
    expect(dialog).to_be_hidden()
    expect(keys).to_have_count(0)
    expect(tree_row(pg, "Roses").locator(".count")).to_have_text("51")
    expect(tree_row(pg, "Garden").locator(".count")).to_have_text("101")
    assert live.api("GET", f"/api/v1/notes/{live.notes['keys']}")["notebook_id"] == live.notes["book:Roses"]


def test_search_opens_the_note_at_the_section_and_back_and_reload_restore_the_view(desk: Any, live: Live) -> None:
    pg = desk
    pg.fill("#search-input", "stove")
    pg.press("#search-input", "Enter")
    expect(pg).to_have_url(f"{live.url}/search?q=stove")
    hit = pg.locator("#notes li", has_text="Trip")
    expect(hit.locator(".section")).to_have_text("§ Packing")
    expect(hit.locator(".snippet")).to_contain_text("stove")
    expect(hit.locator(".nb")).to_have_text("Travel")
    hit.locator("a.note-link").click()
    expect(pg).to_have_url(f"{live.url}/notes/{live.notes['trip']}?section=Packing")
    expect(note_heading(pg, "Packing")).to_be_in_viewport()
    pg.reload()
    expect(note_heading(pg, "Packing")).to_be_in_viewport()
    expect(pg.locator("#notes li", has_text="Trip")).to_be_visible()  # the search list came back too
    pg.go_back()
    expect(pg).to_have_url(f"{live.url}/search?q=stove")
    expect(pg.locator("#list-title")).to_have_text("Search: stove")
    expect(pg.locator("#search-input")).to_have_value("stove")
    expect(pg.locator("#note-pane .empty-state")).to_be_visible()
    # a notebook, then a note, then Back and reload
    tree_row(pg, "Travel").locator("a").click()
    expect(pg).to_have_url(f"{live.url}/notebooks/{live.notes['book:Travel']}")
    pg.locator("#notes a.note-link", has_text="Trip").click()
    expect(pg).to_have_url(f"{live.url}/notes/{live.notes['trip']}")
    expect(pg.locator("#notes a.note-link", has_text="Trip")).to_have_attribute("aria-current", "page")
    pg.go_back()
    expect(pg).to_have_url(f"{live.url}/notebooks/{live.notes['book:Travel']}")
    expect(pg.locator("#note-pane .empty-state")).to_be_visible()
    pg.reload()
    expect(pg.locator("#list-title")).to_have_text("Travel")
    pg.go_forward()
    expect(pg).to_have_url(f"{live.url}/notes/{live.notes['trip']}")
    expect(note_heading(pg, "Intro")).to_be_visible()


def test_a_missing_note_says_so_with_a_way_back(desk: Any, live: Live) -> None:
    pg = desk
    pg.goto(f"{live.url}/notes/{'f' * 32}")
    expect(pg.locator("#note-pane")).to_contain_text("This note does not exist or you cannot see it")
    pg.locator("#note-pane a", has_text="Back to the notes").click()
    expect(pg).to_have_url(f"{live.url}/")
    expect(pg.locator("#list-title")).to_have_text("All notes")


def test_keyboard_help_quick_switcher_search_and_new_note(desk: Any, live: Live) -> None:
    pg = desk
    expect(pg.locator("#notes li[data-id]").first).to_be_visible()
    pg.locator("body").press("?")
    help_dialog = pg.locator("#help-dialog")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("quick switcher")
    assert pg.evaluate("document.getElementById('help-dialog').contains(document.activeElement)")
    pg.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    # "/" focuses the search box; typing "?" there types it
    pg.locator("body").press("/")
    expect(pg.locator("#search-input")).to_be_focused()
    pg.keyboard.type("a?")
    expect(pg.locator("#search-input")).to_have_value("a?")
    expect(help_dialog).to_be_hidden()
    pg.locator("#search-input").fill("")
    # Ctrl+P: titles as you type, arrows and Enter
    pg.keyboard.press("Control+p")
    switcher = pg.locator("#switcher")
    expect(switcher).to_be_visible()
    expect(pg.locator("#switcher-input")).to_be_focused()
    pg.keyboard.type("archived 12")
    options = pg.locator("#switcher-list [role=option]")
    expect(options).to_have_count(10)  # Archived 120 … 129
    expect(options.first).to_have_attribute("aria-selected", "true")
    pg.keyboard.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    chosen = options.nth(1).locator(".sw-title").inner_text()
    pg.keyboard.press("Enter")
    expect(switcher).to_be_hidden()
    expect(pg).to_have_url(re.compile(r"/notes/[0-9a-f]{32}$"))
    expect_note_open(pg, chosen)
    # Enter typed at once waits for the titles of what was typed
    pg.keyboard.press("Control+p")
    expect(pg.locator("#switcher-input")).to_be_focused()
    pg.keyboard.type("archived 005")
    pg.keyboard.press("Enter")
    expect(switcher).to_be_hidden()
    expect_note_open(pg, "Archived 005")
    # Alt+N: a new note in the current notebook, opened
    pg.goto(f"{live.url}/notebooks/{live.notes['book:Inbox']}")
    expect(pg.locator("#list-title")).to_have_text("Inbox")
    count = tree_row(pg, "Inbox").locator(".count")
    before = int(count.inner_text())
    pg.locator("body").press("Alt+n")
    expect(pg).to_have_url(re.compile(r"/notes/[0-9a-f]{32}$"))
    new_id = pg.url.rsplit("/", 1)[1]
    assert live.api("GET", f"/api/v1/notes/{new_id}")["notebook_id"] == live.notes["book:Inbox"]
    expect(count).to_have_text(str(before + 1))
    expect(pg.locator(f"#notes li[data-id='{new_id}']")).to_be_visible()
    # Ctrl+\ hides and shows the tree
    pg.locator("body").press("Control+Backslash")
    expect(pg.locator("#tree-pane")).to_be_hidden()
    expect(pg.locator("#toggle-tree")).to_have_attribute("aria-expanded", "false")
    pg.locator("body").press("Control+Backslash")
    expect(pg.locator("#tree-pane")).to_be_visible()


def test_on_a_phone_the_note_comes_first_and_tree_and_list_are_drawers(phone: Any, live: Live) -> None:
    pg = phone
    pg.goto(f"{live.url}/notes/{live.notes['trip']}")
    expect(note_heading(pg, "Intro")).to_be_in_viewport()
    tree, notes = pg.locator("#tree-pane"), pg.locator("#list-pane")
    expect(tree).not_to_be_in_viewport()
    expect(notes).not_to_be_in_viewport()
    button = pg.locator("#toggle-tree")
    expect(button).to_have_attribute("aria-controls", "tree-pane")
    button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(tree_row(pg, "Travel")).to_be_in_viewport()
    pg.keyboard.press("Escape")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(tree).not_to_be_in_viewport()
    expect(button).to_be_focused()
    lists = pg.locator("#toggle-list")
    lists.click()
    expect(lists).to_have_attribute("aria-expanded", "true")
    link = pg.locator("#notes a.note-link", has_text="Archived 129")
    expect(link).to_be_in_viewport()
    link.click()
    expect(pg).to_have_url(re.compile(r"/notes/[0-9a-f]{32}$"))
    expect(notes).not_to_be_in_viewport()
    expect(lists).to_have_attribute("aria-expanded", "false")
    expect_note_open(pg, "Archived 129")
    # a notebook chosen in the tree drawer shows its list in place of the note
    button.click()
    tree_row(pg, "Travel").locator("a").click()
    expect(pg).to_have_url(f"{live.url}/notebooks/{live.notes['book:Travel']}")
    expect(pg.locator("#notes a.note-link", has_text="Trip")).to_be_in_viewport()
    expect(tree).not_to_be_in_viewport()


# A stand-in for note_editor.js that records how the shell drives it: the contract is
# NoteEditor.open(pane, id, {section, onSaved, onTitle, onTrashed, onMissing}) -> handle,
# and handle.flush() settles before handle.close() and before the next note opens.
FAKE_EDITOR = """
window.__editor = { log: [], opts: null };
window.NoteEditor = {
  async open(pane, id, opts) {
    window.__editor.log.push(`open ${id.slice(0, 4)} ${opts.section || "-"} ${pane.isConnected ? pane.id : "off-page"}`);
    window.__editor.opts = opts;
    pane.textContent = `editing ${id}`;
    return {
      flush() {
        window.__editor.log.push(`flush ${id.slice(0, 4)}`);
        return new Promise((done) => requestAnimationFrame(() => { window.__editor.log.push(`saved ${id.slice(0, 4)}`); done(); }));
      },
      close() { window.__editor.log.push(`close ${id.slice(0, 4)}`); },
    };
  },
};
"""


def test_the_note_editor_is_opened_flushed_before_leaving_and_closed(browser: Any, live: Live,
                                                                     request: pytest.FixtureRequest) -> None:
    context = browser.new_context(viewport=DESK)
    context.add_init_script(FAKE_EDITOR)
    context.route("**/static/note_editor.js", lambda route: route.fulfill(
        status=200, content_type="text/javascript", body="/* replaced by the test's stand-in */"))
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    log = "window.__editor.log.join('|')"
    try:
        pg.goto(live.page_url(f"/notebooks/{live.notes['book:Archive']}"))
        first, second = (pg.locator("#notes li", has_text=t) for t in ("Archived 129", "Archived 128"))
        one, two = first.get_attribute("data-id"), second.get_attribute("data-id")
        assert one and two
        a, b = one[:4], two[:4]
        first.locator("a.note-link").click()
        expect(pg.locator("#note-pane")).to_have_text(f"editing {one}")
        assert pg.evaluate(log) == f"open {a} - off-page"
        pg.evaluate("window.__editor.opts.onTitle('Archived, renamed')")
        expect(pg.locator("#notes a.note-link[aria-current]")).to_have_text("Archived, renamed")
        expect(pg).to_have_title("Archived, renamed · noteloom")
        pg.locator("body").press("Control+s")
        expect(pg.locator("#list-status")).to_have_text("Saved.")
        # leaving: saved first, then closed, then the next note opens
        second.locator("a.note-link").click()
        expect(pg.locator("#note-pane")).to_have_text(f"editing {two}")
        assert pg.evaluate(log).endswith(f"flush {a}|saved {a}|close {a}|open {b} - off-page"), pg.evaluate(log)
        # Back leaves the same way
        pg.go_back()
        expect(pg.locator("#note-pane")).to_have_text(f"editing {one}")
        assert pg.evaluate(log).endswith(f"flush {b}|saved {b}|close {b}|open {a} - off-page")
        # a search result passes its section
        trip = live.notes["trip"][:4]
        pg.fill("#search-input", "stove")
        pg.press("#search-input", "Enter")
        expect(pg.locator("#note-pane .empty-state")).to_be_visible()
        assert pg.evaluate(log).endswith(f"flush {a}|saved {a}|close {a}")
        pg.locator("#notes a.note-link", has_text="Trip").click()
        expect(pg.locator("#note-pane")).to_have_text(f"editing {live.notes['trip']}")
        assert pg.evaluate(log).endswith(f"open {trip} Packing off-page")
        # the open note asked for at a section again: saved, closed and opened there
        # (an editor without showSection)
        count = len(pg.evaluate("window.__editor.log"))
        pg.locator("#notes a.note-link", has_text="Trip").click()
        pg.wait_for_function("(n) => window.__editor.log.length >= n + 4", arg=count)
        assert pg.evaluate(log).endswith(f"flush {trip}|saved {trip}|close {trip}|open {trip} Packing off-page")
        assert pg.url.endswith(f"/notes/{live.notes['trip']}?section=Packing")
        # the editor says the note went to the trash: out of the list, back to the list's view
        pg.evaluate("window.__editor.opts.onTrashed()")
        expect(pg).to_have_url(f"{live.url}/search?q=stove")
        expect(pg.locator("#notes a.note-link", has_text="Trip")).to_have_count(0)
        expect(pg.locator("#note-pane .empty-state")).to_be_visible()
        # or that it is gone: the friendly page, not JSON
        pg.goto(f"{live.url}/notes/{'e' * 32}")
        expect(pg.locator("#note-pane")).to_have_text("editing " + "e" * 32)
        pg.evaluate("window.__editor.opts.onMissing()")
        expect(pg.locator("#note-pane")).to_contain_text("This note does not exist or you cannot see it")
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"app-shell-{request.node.name}.png"))
        context.close()
    assert not problems, problems
