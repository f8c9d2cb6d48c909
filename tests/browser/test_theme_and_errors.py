"""The dark theme, contrast and focus, the friendly error pages and the offline API docs, in a
real Chromium against a live ``noteloom serve``.

Dark follows the OS until the switch says otherwise, and the choice holds over a reload from
the first paint; input borders and focus rings keep 3:1 against the page, text 4.5:1 (read
from Chromium's computed colours, WCAG's formula); a browser that opens an API address
without a session, an unknown page, a missing attachment or a failing route gets a page that
says what to do, at both sizes; ``/api/docs`` draws the API's operations with every other
origin blocked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import pytest
from page_support import SIZES, Live, page_opener
from playwright.sync_api import expect
from theme_support import contrast, themed_home

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

DARK_BG, LIGHT_BG = "rgb(21, 24, 30)", "rgb(255, 255, 255)"
TEXT = ["--fg", "--muted", "--accent", "--danger", "--ok", "--warn"]
GROUNDS = ["--bg", "--surface", "--surface-2", "--code-bg"]
#: Records the theme when <body> first exists: before any paint of the page's content.
FIRST_PAINT = """
new MutationObserver((_, obs) => {
  if (!document.body) return;
  obs.disconnect();
  window.themeAtBody = { attr: document.documentElement.getAttribute("data-theme"),
                         bg: getComputedStyle(document.documentElement).backgroundColor };
}).observe(document, { childList: true, subtree: true });
"""
#: The computed colours of theme variables, as Chromium resolves them.
COLOURS = """(names) => {
  const probe = document.createElement("span");
  document.body.append(probe);
  const out = {};
  for (const n of names) { probe.style.color = `var(${n})`; out[n] = getComputedStyle(probe).color; }
  probe.remove();
  return out;
}"""
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  if (el.dataset.focusWalk) return { repeat: true };
  el.dataset.focusWalk = "1";
  const s = getComputedStyle(el);
  return { what: el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""),
           style: s.outlineStyle, width: parseFloat(s.outlineWidth), colour: s.outlineColor, visible: !!el.offsetParent,
           editor: el.isContentEditable };
}"""
BORDERS = """() => [...document.querySelectorAll(
    "input:not([type=checkbox]):not([type=radio]):not([type=hidden]):not([type=file]), select, textarea")]
  .filter((el) => el.offsetParent !== null && el.getClientRects().length)
  .map((el) => { const s = getComputedStyle(el);
    return { what: el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""), width: parseFloat(s.borderBottomWidth),
             colour: s.borderBottomColor }; })"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with themed_home(tmp_path_factory.mktemp("theme-browser")) as served_live:
        yield served_live


@pytest.fixture
def open_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Pages in fresh contexts (``open_page(size, color_scheme=…, **context options)``); a
    script error or a dialog fails the test; each page leaves a screenshot."""
    yield from page_opener(browser, f"theme-{request.node.name}")


def background(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def switch(page: Any, name: str) -> Any:
    """The choice ``name`` in the theme menu (hidden until the header's button opens it)."""
    return page.locator("header.top #theme-menu").get_by_role("button", name=name, include_hidden=True)


def assert_in_view(page: Any, selector: str, size: str) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= SIZES[size]["width"], (selector, box)


def choose(page: Any, name: str) -> None:
    toggle = page.locator("header.top .theme-toggle")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    size = "phone" if page.viewport_size["width"] < 500 else "desktop"
    assert_in_view(page, "#theme-menu", size)
    expect(page.locator('#theme-menu [aria-pressed="true"]')).to_be_focused()  # the current choice
    switch(page, name).click()
    expect(page.locator("#theme-menu")).to_be_hidden()
    expect(toggle).to_be_focused()
    expect(toggle).to_have_accessible_name(f"Colour theme: {name}")


@pytest.mark.parametrize("size", SIZES)
def test_dark_follows_the_os_and_the_switch_overrides_it_from_the_first_paint(open_page: Any, live: Live, size: str) -> None:
    page = open_page(size, color_scheme="dark")
    page.add_init_script(FIRST_PAINT)
    page.goto(live.page_url("/"))
    expect(switch(page, "System")).to_have_attribute("aria-pressed", "true")
    assert background(page) == DARK_BG
    assert_in_view(page, "header.top .theme-toggle", size)

    choose(page, "Light")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    expect(switch(page, "Light")).to_have_attribute("aria-pressed", "true")
    expect(switch(page, "System")).to_have_attribute("aria-pressed", "false")
    assert background(page) == LIGHT_BG

    page.reload()
    expect(switch(page, "Light")).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("window.themeAtBody") == {"attr": "light", "bg": LIGHT_BG}  # never a dark flash
    for path in ("/memory", "/recipes", "/chat"):  # the choice is the app's, not the page's
        page.goto(live.url + path)
        expect(page.locator("html")).to_have_attribute("data-theme", "light")
        assert_in_view(page, "header.top .theme-toggle", size)
        assert_in_view(page, "header.top #sign-out", size)

    choose(page, "System")
    expect(page.locator("html")).not_to_have_attribute("data-theme", "light")
    assert background(page) == DARK_BG
    page.reload()
    expect(switch(page, "System")).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("window.themeAtBody") == {"attr": None, "bg": DARK_BG}

    light_os = open_page(size, color_scheme="light")
    light_os.add_init_script(FIRST_PAINT)
    light_os.goto(live.page_url("/chat"))
    expect(light_os.locator("header.top .theme-toggle")).to_be_visible()
    assert background(light_os) == LIGHT_BG
    choose(light_os, "Dark")
    assert background(light_os) == DARK_BG
    light_os.reload()
    expect(switch(light_os, "Dark")).to_have_attribute("aria-pressed", "true")
    assert light_os.evaluate("window.themeAtBody") == {"attr": "dark", "bg": DARK_BG}


def test_every_page_has_the_switch(open_page: Any, live: Live) -> None:
    page = open_page()
    page.goto(live.page_url("/"))
    for path in ["/", f"/notes/{live.notes['note']}", "/chat", "/memory", "/recipes", "/api/docs", "/nope"]:
        page.goto(live.url + path)
        toggle = page.locator("header.top").get_by_role("button", name="Colour theme: System")
        expect(toggle).to_be_visible()
        toggle.click()
        group = page.get_by_role("group", name="Colour theme")
        expect(group.get_by_role("button")).to_have_count(3)
        page.keyboard.press("Escape")
        expect(group).to_be_hidden()
        expect(toggle).to_be_focused()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_borders_and_focus_rings_keep_their_contrast(open_page: Any, live: Live, scheme: str) -> None:
    page = open_page(color_scheme=scheme)
    page.goto(live.url + "/")
    expect(page.locator("#sign-in")).to_be_visible()
    colours = page.evaluate(COLOURS, TEXT + GROUNDS + ["--input-border", "--focus", "--accent-fg"])
    assert colours["--bg"] == (DARK_BG if scheme == "dark" else LIGHT_BG)
    low = [(t, g, round(contrast(colours[t], colours[g]), 2)) for t in TEXT for g in GROUNDS
           if contrast(colours[t], colours[g]) < 4.5]
    assert not low, low
    assert contrast(colours["--accent-fg"], colours["--accent"]) >= 4.5
    for name in ("--input-border", "--focus"):
        assert contrast(colours[name], colours["--bg"]) >= 3, (name, colours[name])

    failures: list[Any] = []
    views = [("sign-in", "/", "#sign-in-name"), ("error", "/nope", "h1"), ("notes", "/", "#notes li"),
             ("note", f"/notes/{live.notes['note']}", "#note-pane h1, #note-pane input"),
             ("chat", "/chat", "#composer"), ("memory", "/memory", "#memory-form"),
             ("recipes", "/recipes", "body[data-ready='1']"), ("run", f"/recipes/runs/{live.notes['run']}", "#run-status")]
    for name, path, ready in views:
        if name == "notes":
            page.goto(live.page_url("/"))  # signs in; the pages after it keep the session
        else:
            page.goto(live.url + path)
        expect(page.locator(ready).first).to_be_visible()
        page.wait_for_load_state("load")
        bg = background(page)
        for field in page.evaluate(BORDERS):
            if field["width"] < 1 or contrast(field["colour"], bg) < 3:
                failures.append((name, "border", field))
        page.locator("body").focus()
        page.evaluate("document.activeElement && document.activeElement.blur()")
        seen: set[str] = set()
        for _ in range(30):
            page.keyboard.press("Tab")
            focused = page.evaluate(FOCUSED)
            if focused is None or focused.get("repeat"):
                break
            seen.add(focused["what"])
            if not focused["visible"]:
                continue
            if focused["style"] == "none" or focused["width"] < 2 or contrast(focused["colour"], bg) < 3:
                failures.append((name, "focus", focused))
            if focused["editor"]:
                break  # the editor takes Tab to indent (Escape, then Tab, leaves it): the walk ends here
        assert seen, f"nothing took the focus on {name}"
    assert not failures, failures


@pytest.mark.parametrize("size", SIZES)
def test_error_pages_say_what_to_do(open_page: Any, live: Live, size: str) -> None:
    page = open_page(size)
    r = page.goto(live.url + "/api/v1/notes")
    assert r is not None and r.status == 401
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to open this")
    expect(page.locator("header.top .theme-toggle")).to_be_visible()
    assert_in_view(page, "header.top .theme-toggle", size)
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    page.get_by_role("link", name="Sign in").click()
    expect(page.locator("#sign-in-name")).to_be_visible()

    r = page.goto(live.url + "/nope")
    assert r is not None and r.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    expect(page.locator(".where")).to_contain_text("/nope")
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    page.get_by_role("link", name="Go to your notes").click()
    expect(page).to_have_url(live.url + "/")

    signed = open_page(size, extra_http_headers={"Authorization": f"Bearer {live.token}"})
    r = signed.goto(live.url + "/attachments/" + "0" * 32)
    assert r is not None and r.status == 404
    expect(signed.get_by_role("heading", level=1)).to_have_text("Page not found")
    r = signed.goto(live.url + "/plugins/boom_probe/fail")
    assert r is not None and r.status == 500
    expect(signed.get_by_role("heading", level=1)).to_have_text("Something went wrong on our side")
    expect(signed.locator("body")).not_to_contain_text("boom_probe failed")
    expect(signed.locator("body")).not_to_contain_text("Traceback")
    with signed.expect_navigation() as again:
        signed.get_by_role("link", name="Try again").click()
    assert again.value is not None and again.value.status == 500
    assert signed.evaluate("document.scrollingElement.scrollWidth <= innerWidth")


def test_the_api_docs_render_with_every_other_origin_blocked(open_page: Any, live: Live) -> None:
    """Swagger UI comes from /static/vendor; it draws itself for a light page, so it keeps
    the light palette in a dark theme (its dark text stays readable)."""
    page = open_page(color_scheme="dark")
    blocked: list[str] = []

    def only_ours(route: Any) -> None:
        if route.request.url.startswith(live.url + "/"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_ours)
    page.goto(live.page_url("/api/docs"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("noteloom")
    expect(page.locator('.opblock-summary-path[data-path="/api/v1/notes"]').first).to_be_visible()
    assert page.locator(".opblock").count() > 20
    assert background(page) == DARK_BG
    docs_bg = page.evaluate("getComputedStyle(document.getElementById('swagger-ui')).backgroundColor")
    title = page.evaluate("getComputedStyle(document.querySelector('.swagger-ui .info .title')).color")
    assert docs_bg == LIGHT_BG and contrast(title, docs_bg) >= 4.5, (docs_bg, title)
    assert not blocked, blocked


def listen_to_the_status_line(page: Any) -> Any:
    """The page's polite status line, with every text it takes from now on kept in ``window.said``."""
    line = page.locator("#status-line")
    expect(line).to_have_attribute("role", "status")
    expect(line).to_have_attribute("aria-live", "polite")
    page.evaluate("""() => {
      window.said = [];
      const line = document.getElementById("status-line");
      new MutationObserver(() => window.said.push(line.textContent)).observe(line, { childList: true, characterData: true, subtree: true });
    }""")
    return line


def run_and_hear(page: Any, line: Any) -> list[str]:
    page.click("#recipe-run")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    expect(line).to_have_text("Run succeeded.")
    said: list[str] = page.evaluate("window.said")
    assert said[0] == "Run started." and said[-1] == "Run succeeded.", said
    assert all(a != b for a, b in pairwise(said)) and len(said) <= 4, said
    return said


def test_a_runs_status_is_announced_politely_once_per_change(open_page: Any, live: Live) -> None:
    page = open_page()
    page.goto(live.page_url(f"/recipes/{live.notes['recipe']}"))
    run_and_hear(page, listen_to_the_status_line(page))

    # A run that ends before its start is answered (the server reads the run's view after the
    # run, as a busy one does): the answer says "succeeded", and the page still announces that.
    def ended_on_answer(route: Any) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        answer = route.fetch()
        view = answer.json()
        deadline = time.monotonic() + 60
        while view["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, "the run did not finish"
            view["status"] = live.api("GET", f"/api/v1/recipes/runs/{view['run_id']}")["status"]
        route.fulfill(response=answer, json=view)

    page.route(f"**/api/v1/recipes/{live.notes['recipe']}/runs", ended_on_answer)
    page.goto(live.page_url(f"/recipes/{live.notes['recipe']}"))
    assert run_and_hear(page, listen_to_the_status_line(page)) == ["Run started.", "Run succeeded."]


def test_a_choice_made_in_one_tab_applies_in_the_others(open_page: Any, live: Live) -> None:
    first = open_page(color_scheme="light")
    first.goto(live.url + "/nope")
    second = first.context.new_page()
    second.goto(live.url + "/")
    expect(second.locator("header.top .theme-toggle")).to_be_visible()
    choose(first, "Dark")
    expect(second.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(second) == DARK_BG
    expect(switch(second, "Dark")).to_have_attribute("aria-pressed", "true")
    expect(second.locator("header.top .theme-toggle")).to_have_accessible_name("Colour theme: Dark")
