"""Mermaid diagrams, drawn in the page only (the server keeps the fence as code), in Chromium
against a live ``noteloom serve``: a flowchart becomes an SVG in the note preview and in a chat
answer (streamed: drawn once its fence is closed, not while it is open), payloads in a diagram
run no script, a diagram that does not parse keeps its source with an error, the read-only
note page draws the server's fence, the diagram follows the theme, and the 5 MB vendored
script is not fetched by a page that shows no diagram."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from page_support import ARTIFACTS, DESK, PHONE, Live, served, signed_in_app
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

MERMAID_JS = "/static/vendor/mermaid/mermaid.min.js"
FLOW = "```mermaid\ngraph TD\n  Start[Pack the bag] --> Go[Catch the train]\n```\n"
PAYLOADS = (
    "# Payloads\n\n"
    '```mermaid\n%%{init: {"securityLevel": "loose"}}%%\ngraph TD\n'
    '  A["<img src=x onerror=window.__pwned=1>"] --> B["<script>window.__pwned=2</script>"]\n'
    '  click A "javascript:window.__pwned=3"\n'
    "  click B pwn\n"
    "```\n\n"
    "```mermaid\nsequenceDiagram\n  Alice->>Bob: <script>window.__pwned=4</script>\n"
    "  link Alice: Evil @ javascript:window.__pwned=5\n```\n"
)
BROKEN = "Before the diagram.\n\n```mermaid\ngraph TD\n  A -->\n  this is not mermaid ((\n```\n\nAfter the diagram.\n"
STREAMED = ["Here is the plan:\n\n", "```mermaid\n", "graph LR\n", "  Home --> Station\n",
            "  Station --> Sea\n", "```\n", "\nSafe travels.\n"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("mermaid")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        notes = {
            "flow": ws.create_note("Flow", "# Flow\n\n" + FLOW).id,
            "payloads": ws.create_note("Payloads", PAYLOADS).id,
            "broken": ws.create_note("Broken", BROKEN).id,
            "plain": ws.create_note("Plain", "# Plain\n\nNo diagram here.\n\n```python\nprint(1)\n```\n").id,
        }
        token = access_token(app)
    finally:
        app.close()
    scripts = {
        "plain": [{"chunks": ["Just ", "words."], "chunk_delay": 0.02}],
        "diagram": [{"chunks": STREAMED, "chunk_delay": 0.05}],
        # Stops writing inside the fence and holds the turn open there.
        "open": [{"chunks": STREAMED[:5], "chunk_delay": 0.02, "hang": True}],
    }
    tables = []
    for name, steps in scripts.items():
        path = home / f"{name}.json"
        path.write_text(json.dumps({"steps": steps, "loop": True}), encoding="utf-8")
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n')
    (home / "noteloom.toml").write_text('[providers]\ndefault = "plain"\n\n' + "\n".join(tables), encoding="utf-8")
    with served(home) as url:
        yield Live(url, token, home, notes)


@pytest.fixture
def desk(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"mermaid-{request.node.name}", DESK)


@pytest.fixture
def phone(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from signed_in_app(browser, live, f"mermaid-{request.node.name}", PHONE)


def watch_mermaid(pg: Any) -> list[str]:
    """The requests for the vendored mermaid script the page makes from now on."""
    seen: list[str] = []
    pg.on("request", lambda r: seen.append(r.url) if MERMAID_JS in r.url else None)
    return seen


def preview(pg: Any, note_id: str) -> Any:
    """Open the note in the app (a navigation inside the page) and switch to its preview."""
    pg.evaluate("id => { history.pushState({}, '', '/notes/' + id); dispatchEvent(new PopStateEvent('popstate')); }", note_id)
    pane = pg.locator("#note-pane")
    expect(pane.locator(f".ne[data-note='{note_id}'] .cm-content")).to_be_visible()
    pane.get_by_role("button", name="Preview").click()
    shown = pane.locator(".ne-preview")
    expect(shown).to_be_visible()
    return shown


def pick_model(pg: Any, name: str) -> None:
    pg.click("#settings-open")
    pg.select_option("#set-model", f"{name}:script")
    pg.click("#settings-form button[type=submit]")
    expect(pg.locator("#settings")).to_be_hidden()


def send(pg: Any, text: str) -> None:
    pg.fill("#message", text)
    pg.press("#message", "Enter")


@pytest.mark.parametrize("size", ["desk", "phone"])
def test_a_flowchart_in_the_note_preview_is_drawn_as_an_svg(size: str, request: pytest.FixtureRequest,
                                                             live: Live) -> None:
    pg = request.getfixturevalue(size)
    shown = preview(pg, live.notes["flow"])
    figure = shown.locator("figure.nl-mermaid")
    expect(figure).to_have_attribute("data-mermaid", "drawn")
    svg = figure.locator("svg")
    expect(svg).to_have_count(1)
    expect(svg).to_be_visible()
    expect(svg).to_contain_text("Pack the bag")
    expect(svg).to_contain_text("Catch the train")
    expect(figure.locator("pre")).to_be_hidden()  # the source stays in the page, out of view
    box = svg.bounding_box()
    width = pg.viewport_size["width"]
    assert box is not None and box["width"] > 0 and box["x"] + box["width"] <= width, (box, width)
    # The server keeps the fence as code (exports keep the source).
    rendered = live.api("GET", f"/api/v1/notes/{live.notes['flow']}/rendered")
    assert 'class="language-mermaid"' in rendered["html"] and "<svg" not in rendered["html"]


def test_the_read_only_note_page_draws_the_servers_fence(browser: Any, live: Live,
                                                          request: pytest.FixtureRequest) -> None:
    context = browser.new_context(viewport=PHONE)
    # The editor's script answers empty: the app shows the server's rendered note, enhanced.
    context.route("**/static/note_editor.js", lambda route: route.fulfill(
        status=200, content_type="application/javascript", body="/* no editor here */"))
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    try:
        pg.goto(live.page_url(f"/notes/{live.notes['flow']}"))
        expect(pg.locator("#note-title")).to_have_text("Flow")
        svg = pg.locator("#note-body figure.nl-mermaid[data-mermaid='drawn'] svg")
        expect(svg).to_have_count(1)
        expect(svg).to_contain_text("Catch the train")
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"mermaid-{request.node.name}.png"))
        context.close()
    assert not problems, problems


def test_the_diagram_follows_the_theme(desk: Any, live: Live) -> None:
    desk.evaluate("document.documentElement.dataset.theme = 'light'")
    figure = preview(desk, live.notes["flow"]).locator("figure.nl-mermaid")
    expect(figure).to_have_attribute("data-drawn-theme", "default")
    desk.evaluate("document.documentElement.dataset.theme = 'dark'")
    expect(figure).to_have_attribute("data-drawn-theme", "dark")
    expect(figure.locator("svg")).to_have_count(1)


def test_payloads_in_a_diagram_run_no_script(desk: Any, live: Live) -> None:
    # A callback a non-strict mermaid would bind to `click B pwn`.
    desk.evaluate("() => { window.__pwned = 0; window.pwn = () => { window.__pwned = 6; }; }")
    figures = preview(desk, live.notes["payloads"]).locator("figure.nl-mermaid")
    expect(figures).to_have_count(2)
    for i in range(2):
        expect(figures.nth(i)).to_have_attribute("data-mermaid", "drawn")
    for node in desk.locator("figure.nl-mermaid svg g.node").all():
        node.click(force=True)
    for actor in desk.locator("figure.nl-mermaid svg text.actor").all():
        actor.click(force=True)
    found = desk.evaluate("""() => {
        const figs = [...document.querySelectorAll('figure.nl-mermaid')];
        const all = figs.flatMap((f) => [...f.querySelectorAll('svg, svg *')]);
        return {
            scripts: all.filter((e) => e.localName === 'script').length,
            foreign: all.filter((e) => e.localName === 'foreignObject').length,
            handlers: all.flatMap((e) => [...e.attributes]).filter((a) => /^on/i.test(a.name)).map((a) => a.name),
            js: all.flatMap((e) => [...e.attributes])
                   .filter((a) => /javascript:/i.test(a.value) && /href$/i.test(a.name)).map((a) => a.value),
            pwned: window.__pwned,
        };
    }""")
    assert found == {"scripts": 0, "foreign": 0, "handlers": [], "js": [], "pwned": 0}, found


def test_a_diagram_that_does_not_parse_shows_its_source_and_an_error(desk: Any, live: Live) -> None:
    shown = preview(desk, live.notes["broken"])
    figure = shown.locator("figure.nl-mermaid")
    expect(figure).to_have_attribute("data-mermaid", "error")
    expect(figure.locator("pre")).to_be_visible()
    expect(figure.locator("pre")).to_contain_text("this is not mermaid ((")
    expect(figure.locator(".nl-mermaid-error")).to_contain_text("Diagram not drawn")
    expect(figure.locator("svg")).to_have_count(0)
    expect(shown.locator("p").last).to_have_text("After the diagram.")  # the rest of the preview stands
    assert desk.evaluate("document.querySelectorAll('body > svg, body > div[id^=dnl-mermaid]').length") == 0


def test_a_streamed_diagram_is_drawn_once_its_fence_is_closed(browser: Any, live: Live,
                                                              request: pytest.FixtureRequest) -> None:
    context = browser.new_context(viewport=DESK)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    try:
        pg.goto(live.page_url("/chat"))
        pick_model(pg, "open")
        send(pg, "Plan the trip (still writing)")
        bubble = pg.locator(".msg.assistant .bubble.streaming")
        expect(bubble.locator("pre code.language-mermaid")).to_contain_text("Station --> Sea")
        expect(bubble.locator("figure.nl-mermaid")).to_have_count(0)  # the fence is still open
        pg.click("#send")  # Cancel
        expect(pg.locator("#send")).to_have_text("Send")

        pick_model(pg, "diagram")
        send(pg, "Plan the trip")
        answer = pg.locator(".msg.assistant").last
        svg = answer.locator(".bubble figure.nl-mermaid svg")
        expect(svg).to_have_count(1)
        expect(svg).to_contain_text("Station")
        expect(answer.locator(".bubble")).to_contain_text("Safe travels.")
        expect(pg.locator("#send")).to_have_text("Send")
        expect(answer.locator(".bubble figure.nl-mermaid[data-mermaid='drawn'] svg")).to_have_count(1)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"mermaid-{request.node.name}.png"))
        context.close()
    assert not problems, problems


def test_a_streamed_fence_is_taken_for_a_diagram_only_once_its_closing_line_has_ended(desk: Any) -> None:
    """renderStreaming's promise resolves after the frame that drew the text, and a fence taken
    for drawing becomes its figure within that frame: what is not there then was not taken."""
    taken = desk.evaluate("""async (parts) => {
        const el = document.createElement('div');
        document.body.append(el);
        const seen = [];
        let text = '';
        for (const part of parts) {
            text += part;
            await NoteloomRender.renderStreaming(el, text);
            seen.push(el.querySelectorAll('figure.nl-mermaid').length);
        }
        return seen;
    }""", ["Plan:\n\n```mermaid\ngraph LR\n", "  A --> B\n", "```", "\n", "\nMore text.\n"])
    # Open, open, closing line not ended yet, closed, closed.
    assert taken == [0, 0, 0, 1, 1], taken
    expect(desk.locator("body > div figure.nl-mermaid[data-mermaid='drawn'] svg")).to_have_count(1)


def test_the_script_is_fetched_only_for_a_page_with_a_diagram(desk: Any, live: Live) -> None:
    seen = watch_mermaid(desk)
    shown = preview(desk, live.notes["plain"])
    expect(shown.locator("pre code.hljs")).to_have_count(1)  # rendered and highlighted
    assert desk.evaluate("() => typeof window.mermaid") == "undefined" and seen == [], seen
    shown = preview(desk, live.notes["flow"])  # the watch does see a fetch when one is made
    expect(shown.locator("figure.nl-mermaid svg")).to_have_count(1)
    assert len(seen) == 1, seen
