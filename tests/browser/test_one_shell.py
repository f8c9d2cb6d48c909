"""The app's one shell, in Chromium at 1280x800 and 390x844: every page (the notes app, the chat
with its attachments, memory, recipes, a recipe, a run, an error page) has the same header
(templates/_header.html) with the main navigation, its own page marked ``aria-current``, the
theme switch and Sign out, and the navigation moves between them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from page_support import SIZES, Live, page_opener
from playwright.sync_api import expect
from theme_support import themed_home

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

NAV = ["Notes", "Chat", "Recipes", "Memory"]
#: The navigation's markup without the current page's mark: the same on every page.
NAV_MARKUP = """() => { const nav = document.querySelector("header.top nav.main-nav").cloneNode(true);
  for (const a of nav.querySelectorAll("[aria-current]")) a.removeAttribute("aria-current");
  return nav.outerHTML.replace(/\\s+/g, " "); }"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with themed_home(tmp_path_factory.mktemp("one-shell")) as served_live:
        yield served_live


@pytest.fixture
def open_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """``open_page(size)``: a page in a fresh context; a script error or a dialog fails the
    test, and each page leaves a screenshot in tests/.artifacts."""
    yield from page_opener(browser, f"one-shell-{request.node.name}")


def in_view(page: Any, locator: Any) -> None:
    box = locator.bounding_box()
    width = page.viewport_size["width"]
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


def expect_shell(page: Any, current: str | None, *, session: bool = True) -> str:
    """The page's header is the shared one with ``current`` marked; returns its navigation's markup."""
    header = page.locator("header.top")
    expect(header).to_have_count(1)
    nav = header.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link")).to_have_text(NAV)
    marked = nav.locator("a[aria-current='page']")
    if current is None:
        expect(marked).to_have_count(0)
    else:
        expect(marked).to_have_text([current])
    for link in nav.get_by_role("link").all():
        expect(link).to_be_visible()
        in_view(page, link)
    toggle = header.locator(".theme-toggle")
    expect(toggle).to_be_visible()
    in_view(page, toggle)
    if session:
        expect(header.locator("#sign-out")).to_be_visible()
        in_view(page, header.locator("#sign-out"))
    else:
        expect(header.locator("#sign-out")).to_have_count(0)
    return str(page.evaluate(NAV_MARKUP))


@pytest.mark.parametrize("size", SIZES)
def test_every_page_has_the_same_header_with_its_page_marked(open_page: Any, live: Live, size: str) -> None:
    page = open_page(size)
    page.goto(live.page_url("/"))
    expect(page.locator("#sign-out")).to_be_visible()
    ids = live.notes
    pages = [("/", "Notes", "#notes li"), (f"/notes/{ids['note']}", "Notes", "#note-pane :text('socks')"),
             ("/chat", "Chat", "#composer"), ("/memory", "Memory", "#memory-form"),
             ("/recipes", "Recipes", "body[data-ready='1']"), (f"/recipes/{ids['recipe']}", "Recipes", "#recipe-name"),
             (f"/runs/{ids['run']}", "Recipes", "#run-status")]
    markups = set()
    for path, current, ready in pages:
        page.goto(live.url + path)
        expect(page.locator(ready).first).to_be_attached()
        markups.add(expect_shell(page, current))
    page.goto(live.url + "/api/docs")  # the vendored API docs under the same header
    expect(page.locator("#swagger-ui .info").first).to_be_visible()
    markups.add(expect_shell(page, None))
    page.goto(live.url + "/nope")
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    markups.add(expect_shell(page, None, session=False))
    assert len(markups) == 1, markups


@pytest.mark.parametrize("size", SIZES)
def test_the_main_navigation_moves_between_the_pages(open_page: Any, live: Live, size: str) -> None:
    page = open_page(size)
    page.goto(live.page_url("/"))
    expect(page.locator("#sign-out")).to_be_visible()
    nav = page.locator("header.top").get_by_role("navigation", name="Main")
    for name, path, ready in [("Chat", "/chat", "#composer"), ("Memory", "/memory", "#memory-form"),
                              ("Recipes", "/recipes", "body[data-ready='1']"), ("Notes", "/", "#notes li")]:
        nav.get_by_role("link", name=name).click()
        expect(page).to_have_url(re.compile(re.escape(live.url + path) + "$"))
        expect(page.locator(ready).first).to_be_attached()
        expect(nav.locator("a[aria-current='page']")).to_have_text([name])
        expect(page.locator("#sign-in")).to_be_hidden()  # the session goes with the tab
    page.locator("header.top #sign-out").click()
    expect(page.locator("#sign-in-name")).to_be_visible()
    expect(nav.get_by_role("link")).to_have_text(NAV)


#: Where the focus is: (inside the element of id ``arg``, a name for the focused element).
FOCUS = """(id) => { const el = document.activeElement;
  if (!el || el === document.body) return [false, "body"];
  if (!el.dataset.walk) el.dataset.walk = String(document.querySelectorAll("[data-walk]").length);
  return [document.getElementById(id).contains(el), el.tagName + "#" + el.dataset.walk + " " + (el.textContent || "").trim().slice(0, 30)]; }"""


def tab_walk(page: Any, drawer: str, presses: int, key: str = "Tab") -> list[str]:
    """The elements ``presses`` presses of ``key`` focus, each asserted inside ``drawer``."""
    seen = []
    for _ in range(presses):
        page.keyboard.press(key)
        inside, what = page.evaluate(FOCUS, drawer)
        assert inside, (drawer, key, seen, what)
        seen.append(what)
    return seen


@pytest.mark.parametrize(("button", "drawer"), [("#toggle-tree", "tree-pane"), ("#toggle-list", "list-pane")])
def test_a_phone_drawer_keeps_the_focus_until_escape(open_page: Any, live: Live, button: str, drawer: str) -> None:
    page = open_page("phone")
    page.goto(live.page_url(f"/notes/{live.notes['note']}"))
    expect(page.locator("#note-pane :text('socks')").first).to_be_attached()
    expect(page.locator("#tree[aria-busy='true'], #notes[aria-busy='true']")).to_have_count(0)
    opener = page.locator(button)
    opener.click()
    expect(opener).to_have_attribute("aria-expanded", "true")
    expect(page.locator(f"#{drawer}")).to_be_in_viewport()
    first = page.evaluate(FOCUS, drawer)
    assert first[0], first  # the drawer took the focus
    count = int(page.evaluate("""(id) => [...document.getElementById(id).querySelectorAll("a[href], button, input, select")]
      .filter((el) => el.checkVisibility({ visibilityProperty: true })).length""", drawer))
    assert count >= 2
    forward = tab_walk(page, drawer, 2 * count + 1)
    assert forward[count - 1] == first[1] and forward[2 * count - 1] == first[1], forward  # round and round
    backward = tab_walk(page, drawer, count, "Shift+Tab")
    assert list(reversed(backward)) == forward[count:2 * count], (forward, backward)
    page.keyboard.press("Escape")
    expect(opener).to_have_attribute("aria-expanded", "false")
    expect(page.locator(f"#{drawer}")).not_to_be_in_viewport()
    expect(opener).to_be_focused()
    page.keyboard.press("Tab")  # closed, the drawer no longer holds the keyboard
    assert not page.evaluate(FOCUS, drawer)[0]


def test_a_phone_drawer_opened_before_its_tree_is_drawn_takes_the_focus(open_page: Any, live: Live) -> None:
    """A slow tree (held here until the drawer is open): the drawer itself takes the focus,
    and once the tree is drawn Tab goes on to its first link."""
    page = open_page("phone")
    held: list[Any] = []
    page.route("**/api/v1/browse/tree", lambda route: held.append(route))
    with page.expect_request("**/api/v1/browse/tree"):
        page.goto(live.page_url(f"/notes/{live.notes['note']}"))
    expect(page.locator("#note-pane :text('socks')").first).to_be_attached()
    expect(page.locator("#tree")).to_have_attribute("aria-busy", "true")
    opener = page.locator("#toggle-tree")
    opener.click()
    expect(page.locator("#tree-pane")).to_be_in_viewport()
    assert page.evaluate("document.activeElement.id") == "tree-pane"
    assert held, "the tree was not held"
    for route in held:
        route.continue_()
    page.unroute("**/api/v1/browse/tree")
    expect(page.locator("#tree")).not_to_have_attribute("aria-busy", "true")
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUS, "tree-pane") == [True, "A#0 All notes"]
    page.keyboard.press("Escape")
    expect(opener).to_be_focused()


def sign_in_with_token(page: Any, live: Live) -> None:
    expect(page.locator("#sign-in-token")).to_be_visible()
    page.fill("#sign-in-token", live.token)
    page.press("#sign-in-token", "Enter")


@pytest.mark.parametrize("size", SIZES)
def test_the_401_pages_sign_in_returns_to_the_address_asked_for(open_page: Any, live: Live, size: str) -> None:
    files = {"file": ("list.txt", b"socks, tent, stove", "text/plain")}
    attachment = live.api("POST", f"/api/v1/notes/{live.notes['note']}/attachments", files=files)["id"]
    page = open_page(size)
    r = page.goto(f"{live.url}/attachments/{attachment}")
    assert r is not None and r.status == 401
    link = page.get_by_role("link", name="Sign in")
    expect(link).to_have_attribute("href", f"/?next=%2Fattachments%2F{attachment}")
    link.click()
    sign_in_with_token(page, live)
    expect(page).to_have_url(re.compile(r"^blob:"))  # the file, fetched with the sign-in
    expect(page.locator("body")).to_have_text("socks, tent, stove")

    # a page of the app, with its query, is opened as it was asked for
    page = open_page(size)
    page.goto(f"{live.url}/?next=%2Fsearch%3Fq%3Dtent")
    sign_in_with_token(page, live)
    expect(page).to_have_url(f"{live.url}/search?q=tent")
    expect(page.locator("#notes li").first).to_be_visible()

    # an API address is not one to go back to: a navigation would be refused again
    r = page.goto(f"{live.url}/api/v1/notes")
    assert r is not None and r.status == 401
    expect(page.get_by_role("link", name="Sign in")).to_have_attribute("href", "/")


BAD_NEXT = ["//evil.example/x", "https://evil.example/", "http:evil.example", "/\\evil.example", "\\\\evil.example",
            "javascript:alert(1)", "/\t/evil.example", " //evil.example", "evil.example"]


def test_sign_in_goes_nowhere_but_a_path_of_this_server(open_page: Any, live: Live) -> None:
    from urllib.parse import quote

    page = open_page()
    left: list[str] = []
    page.on("framenavigated", lambda f: left.append(f.url) if f == page.main_frame and not f.url.startswith(live.url) else None)
    for bad in BAD_NEXT:
        page.goto(f"{live.url}/?next={quote(bad, safe='')}")
        sign_in_with_token(page, live)
        expect(page.locator("#notes li").first).to_be_visible()
        expect(page).to_have_url(f"{live.url}/")  # the refused address is dropped from the bar
        page.evaluate("sessionStorage.clear()")
    assert not left, left


SAVED = "#note-pane .ne-status"


def backlinks(page: Any) -> Any:
    return page.locator("#note-pane nav.ne-backlinks")


def test_linked_from_follows_the_saves_of_the_notes_that_link(open_page: Any, live: Live) -> None:
    alpha = live.api("POST", "/api/v1/notes", json={"title": "Alpha", "body": "No links yet."})["id"]
    beta = live.api("POST", "/api/v1/notes", json={"title": "Beta", "body": "Linked to, soon."})["id"]
    gamma = live.api("POST", "/api/v1/notes", json={"title": "Gamma", "body": "Nothing."})["id"]
    page = open_page()
    page.goto(live.page_url(f"/notes/{alpha}"))
    expect(page.locator(f"#note-pane .ne[data-note='{alpha}'] .cm-content")).to_be_visible()
    page.locator("#note-pane .cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" See [[Beta]].")
    expect(page.locator(SAVED)).to_have_text("Saved")
    page.locator("#notes a.note-link", has_text="Beta").click()
    expect(page.locator(f"#note-pane .ne[data-note='{beta}'] .cm-content")).to_be_visible()
    expect(backlinks(page).get_by_role("link")).to_have_text(["Alpha"])  # the save of Alpha counts

    # Gamma is saved elsewhere (another tab, the API): Beta's list follows when the window
    # gets the focus back, and after Beta's own save
    live.api("PATCH", f"/api/v1/notes/{gamma}", json={"body": "Also [[Beta]]."})
    page.evaluate("window.dispatchEvent(new FocusEvent('focus'))")
    expect(backlinks(page).get_by_role("link")).to_have_text(["Gamma", "Alpha"])
    live.api("PATCH", f"/api/v1/notes/{gamma}", json={"body": "Not any more."})
    page.locator("#note-pane .cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" Edited.")
    expect(page.locator(SAVED)).to_have_text("Saved")
    expect(backlinks(page).get_by_role("link")).to_have_text(["Alpha"])
