"""Rendering in the page (issue 17), in Chromium against a live ``noteloom serve``.

The parity test renders every note of tests/fixtures/render/ with the server's
``render_markdown`` and with ``NoteloomRender.render`` in the page, and compares the two after
normalising both through the same DOM walk (elements, attributes, text; whitespace runs
collapsed, class lists and boolean attributes normalised). Then what only the page does:
code highlighted, math drawn by KaTeX, ``:/ID`` and ``[[Title]]`` resolved as the signed-in
person, a task checkbox that saves its line into the note, and a streaming reply (with an
unclosed fence and unsafe HTML) that stays well-formed and sanitised at every step.

The page is a blank document served at this origin under the app's own Content-Security-
Policy (so the scripts run as they would in the app), with the real ``/static`` files; it
does not depend on whichever shell the app has today. Chromium is conftest's ``browser``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from page_support import Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from noteloom.web.render import render_markdown

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "render").glob("*.md"))
BLANK = "/__render_probe"
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"

# The same walk for both outputs: [tag, {attr: value}, children] or text.
NORMALISE = """
(html) => {
  const BOOLEAN = new Set(["checked", "disabled"]);
  const tpl = document.createElement("template");
  tpl.innerHTML = html;
  const walk = (node) => {
    if (node.nodeType === 3) return node.data.replace(/\\s+/g, " ");
    if (node.nodeType !== 1) return null;
    const attrs = {};
    for (const a of node.attributes) {
      attrs[a.name] = BOOLEAN.has(a.name) ? "" : a.name === "class" ? a.value.split(/\\s+/).filter(Boolean).sort().join(" ") : a.value;
    }
    const kids = [];
    for (const c of node.childNodes) {
      const w = walk(c);
      if (w === null || w === "") continue;
      if (typeof w === "string" && typeof kids[kids.length - 1] === "string") kids[kids.length - 1] += w;
      else kids.push(w);
    }
    return [node.nodeName.toLowerCase(), Object.keys(attrs).sort().map((k) => [k, attrs[k]]), kids];
  };
  // Built in the template's inert document, so nothing it names is fetched.
  const root = tpl.content.ownerDocument.createElement("div");
  root.append(tpl.content);
  const tree = walk(root);
  // Whitespace around the whole (a parser drops it before the first element) is no difference.
  const kids = tree[2];
  if (typeof kids[0] === "string") kids[0] = kids[0].trimStart();
  if (typeof kids[kids.length - 1] === "string") kids[kids.length - 1] = kids[kids.length - 1].trimEnd();
  tree[2] = kids.filter((k) => k !== "");
  return tree;
}
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("render-browser")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        garden = ws.create_note("Garden plan", "Roses by the fence.")
        att = ws.add_attachment(garden.id, b"hello", "hello.txt", mime="text/plain")
        notes = {"garden": garden.id, "attachment": att.id,
                 "chores": ws.create_note("Chores", "# Chores\n\n- [ ] dishes\n- [x] laundry\n").id}
        token = access_token(app)
    finally:
        app.close()
    with served(home) as url:
        yield Live(url, token, home, notes)


def _open(browser: Any, live: Live, request: pytest.FixtureRequest, viewport: dict[str, int]) -> Iterator[Any]:
    session = httpx.post(live.url + "/api/v1/auth/sign-in", json={"token": live.token}, timeout=30).json()["session"]
    csp = httpx.get(live.url + "/", timeout=30).headers["content-security-policy"]
    context = browser.new_context(viewport=viewport)
    context.add_init_script(f"sessionStorage.setItem('noteloom.session', {json.dumps(session)});")
    pg = context.new_page()
    problems: list[str] = []
    pg.on("dialog", lambda d: (problems.append(f"browser dialog: {d.message}"), d.dismiss()))
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    # A script, stylesheet or font of ours that the CSP blocks is a defect. (An image a note
    # names elsewhere is blocked by design; an inline handler in a note is reported while
    # DOMPurify parses it, as Chromium's inert parse documents share the page's policy: it never
    # runs and DOMPurify removes it, which the sanitiser tests check.)
    pg.on("console", lambda m: problems.append(f"console: {m.text}")
          if "Content Security Policy" in m.text and "inline event handler" not in m.text
          and "img-src" not in m.text else None)
    pg.set_default_timeout(30_000)
    pg.route(live.url + BLANK, lambda route: route.fulfill(
        status=200, content_type="text/html; charset=utf-8", headers={"content-security-policy": csp},
        body='<!doctype html><html lang="en"><head><title>render</title>'
             '<link rel="stylesheet" href="/static/noteloom.css"></head><body><main id="out"></main></body></html>'))
    pg.goto(live.url + BLANK)
    pg.add_script_tag(url="/static/vendor/markdown/markdown.js")
    pg.add_script_tag(url="/static/render.js")
    pg.wait_for_function("window.NoteloomRender && window.NoteloomMarkdown")
    pg.evaluate("NoteloomRender.ready")
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"render-{request.node.name}.png"), full_page=True)
        context.close()
    assert not problems, problems


@pytest.fixture
def page(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(browser, live, request, {"width": 1280, "height": 800})


@pytest.fixture
def phone(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(browser, live, request, {"width": 390, "height": 844})


def test_the_page_renders_every_fixture_as_the_server_does(page: Any) -> None:
    assert len(FIXTURES) >= 15
    mismatched = []
    for path in FIXTURES:
        markdown = path.read_text(encoding="utf-8")
        server = page.evaluate(NORMALISE, render_markdown(markdown))
        client_html = page.evaluate("(md) => NoteloomRender.render(md)", markdown)
        client = page.evaluate(NORMALISE, client_html)
        if server != client:
            mismatched.append(f"{path.name}:\n  server {json.dumps(server)[:1500]}\n  page   {json.dumps(client)[:1500]}")
    assert not mismatched, "\n".join(mismatched)
    # The walk sees what matters: a changed attribute is a difference.
    a = page.evaluate(NORMALISE, '<li class="task-list-item" data-line="2">x</li>')
    b = page.evaluate(NORMALISE, '<li class="task-list-item" data-line="3">x</li>')
    assert a != b


# Pieces of Markdown (and raw HTML) the parity fuzz strings together. Not "<!--": an element
# holding both a comment and the literal text "<!" is removed whole by DOMPurify (its guard
# against mutation XSS) where nh3 keeps the text; both are safe, they differ by design.
PIECES = ["*", "_", "**", "~~", "~", "$", "$$", "\\$", "[[", "]]", "|", "`", "```", "\n", "\n\n", "- [ ] ", "- [x] ",
          "1. ", "> ", "# ", "a", "word ", " ", "    ", "2", "x^2", "\\", "  \n", "[", "]", "(", ")", "<b>", "</b>",
          "&amp;", "-->", "<https://e.com>", f"[l](:/{'a' * 32})", f"![i](:/{'b' * 32})", "| a | b |\n|---|---|\n"]


def test_random_markdown_renders_the_same_on_both_sides(page: Any) -> None:
    """600 strings of Markdown's sharp edges (seeded, so a failure replays) compare equal."""
    rnd = random.Random(17)
    cases = ["".join(rnd.choice(PIECES) for _ in range(rnd.randint(3, 40))) for _ in range(600)]
    client = page.evaluate("(cases) => cases.map((c) => NoteloomRender.render(c))", cases)
    server = [render_markdown(c) for c in cases]
    normalised = page.evaluate(f"([a, b]) => {{ const n = {NORMALISE}; return [a.map(n), b.map(n)]; }}", [server, client])
    differ = [(case, s, c) for case, s, c in zip(cases, *normalised, strict=True) if s != c]
    assert not differ, "\n".join(f"{case!r}\n  server {json.dumps(s)[:600]}\n  page   {json.dumps(c)[:600]}"
                                  for case, s, c in differ[:5])


def test_the_page_sanitises_what_the_server_removes(page: Any) -> None:
    html = page.evaluate("(md) => NoteloomRender.render(md)",
                         '<img src=x onerror="window.pwned=1"> <a href="javascript:window.pwned=2">a</a> '
                         '[b](javascript:window.pwned=3) <script>window.pwned=4</script> ![c](data:image/png;base64,AA)')
    for bad in ("onerror", 'href="javascript', "window.pwned=2", "<script", "window.pwned=4", "data:image"):
        assert bad not in html, (bad, html)
    page.evaluate("(html) => { document.getElementById('out').innerHTML = html; }", html)
    assert page.evaluate("window.pwned === undefined")


def test_render_into_highlights_draws_math_and_resolves_links(page: Any, live: Live) -> None:
    garden, att = live.notes["garden"], live.notes["attachment"]
    markdown = (f"[plan](:/{garden}) [file](:/{att}) [gone](:/{'f' * 32}) [[Garden plan]] [[No such note|nope]]\n\n"
                "Inline $a^2 + b^2$ and display:\n\n$$\n\\frac{1}{2}\n$$\n\n"
                "```python\ndef f(x):\n    return x\n```\n")
    page.evaluate("(md) => NoteloomRender.renderInto(document.getElementById('out'), md)", markdown)
    out = page.locator("#out")
    expect(out.locator("pre code.hljs .hljs-keyword").first).to_have_text("def")
    expect(out.locator(".math-inline .katex")).to_have_count(1)
    expect(out.locator(".math-display .katex-display")).to_have_count(1)
    expect(out.locator("a", has_text="plan").first).to_have_attribute("href", f"/notes/{garden}")
    expect(out.locator("a", has_text="file")).to_have_attribute("href", f"/attachments/{att}")
    expect(out.locator("a.wikilink", has_text="Garden plan")).to_have_attribute("href", f"/notes/{garden}")
    for label in ("gone", "nope"):
        link = out.locator("a", has_text=label)
        expect(link).to_have_class(re.compile(r"\blink-unresolved\b"))
        assert link.get_attribute("href") is None
    # The code follows the app's theme: keywords in its --danger, the vendored highlight.js
    # theme of that scheme switched on (its token colours are overridden by the variables).
    keyword = out.locator("pre code.hljs .hljs-keyword").first
    media = "[document.getElementById('nl-hljs-light').media, document.getElementById('nl-hljs-dark').media]"
    page.evaluate("document.documentElement.dataset.theme = 'light'")
    expect(keyword).to_have_css("color", "rgb(180, 35, 24)")
    assert page.evaluate(media) == ["all", "not all"]
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    expect(keyword).to_have_css("color", "rgb(255, 144, 137)")
    assert page.evaluate(media) == ["not all", "all"]
    page.evaluate("delete document.documentElement.dataset.theme")
    expect(keyword).to_have_css("color", "rgb(180, 35, 24)")


def test_clicking_a_task_saves_it_into_the_note(page: Any, live: Live) -> None:
    note_id = live.notes["chores"]
    note = live.api("GET", f"/api/v1/notes/{note_id}")
    page.evaluate("""([md, id, updated]) => NoteloomRender.renderInto(document.getElementById('out'), md, {
        noteId: id, updatedTime: updated,
        onNoteChanged: (n) => { document.getElementById('out').dataset.saved = n.body; },
        onError: (e) => { document.getElementById('out').dataset.error = String(e.status); } })""",
                  [note["body"], note_id, note["updated_time"]])
    box = page.get_by_role("checkbox", name=re.compile("dishes"))
    expect(box).to_be_enabled()
    expect(box).not_to_be_checked()
    box.click()
    expect(page.locator("#out")).to_have_attribute("data-saved", "# Chores\n\n- [x] dishes\n- [x] laundry\n")
    assert live.api("GET", f"/api/v1/notes/{note_id}")["body"] == "# Chores\n\n- [x] dishes\n- [x] laundry\n"
    # Changed elsewhere since: the save is refused (409) and the box goes back.
    live.api("PATCH", f"/api/v1/notes/{note_id}", json={"body": "# Chores\n\n- [x] dishes\n- [x] laundry\n\nmore\n"})
    laundry = page.get_by_role("checkbox", name=re.compile("laundry"))
    laundry.click()
    expect(page.locator("#out")).to_have_attribute("data-error", "409")
    expect(laundry).to_be_checked()
    # Without a note (the editor's preview), the click goes to onToggleTask.
    page.evaluate("""(md) => NoteloomRender.renderInto(document.getElementById('out'), md, {
        onToggleTask: (line, done) => { document.getElementById('out').dataset.toggled = line + ':' + done; } })""",
                  "intro\n\n- [ ] first\n- [ ] second\n")
    page.get_by_role("checkbox", name=re.compile("second")).click()
    expect(page.locator("#out")).to_have_attribute("data-toggled", "3:true")
    # Read-only rendering: the boxes stay disabled.
    page.evaluate("(md) => NoteloomRender.renderInto(document.getElementById('out'), md)", "- [ ] look only\n")
    expect(page.get_by_role("checkbox")).to_be_disabled()


def test_a_streaming_reply_stays_well_formed_and_safe(page: Any) -> None:
    reply = ("Here is the plan.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- one\n- two\n\n  still two\n\n1. first\n\n"
             "2. second\n\n> quoted\n\nquote over\n\n$$\na\n\nb\n$$\n\n```js\nlet a = 1;\n\nlet b = 2;\n```\n\n"
             + "Some prose line with *emphasis* and $x^2$.\n\n" * 300
             + "<img src=x onerror=\"window.pwned=1\">\n\n```python\nfor i in range(3):\n    print('<b>', i)\n"
             + "# still in the fence\n" * 100)
    assert len(reply) > 15_000
    result = page.evaluate("""async (reply) => {
        const el = document.getElementById('out');
        const problems = [];
        let first = null;
        let middle = null;
        for (let end = 20; end < reply.length + 137; end += 137) {
            await NoteloomRender.renderStreaming(el, reply.slice(0, end));
            if (first === null && el.firstElementChild) first = el.firstElementChild;
            if (middle === null && el.children.length > 40) middle = el.children[30];
            if (el.querySelector('script, [onerror], [onclick]')) problems.push('unsafe at ' + end);
            if (el.querySelectorAll('pre').length > 2) problems.push('pre split at ' + end);
        }
        // What the stream drew is what rendering the whole text at once gives (block by block).
        const whole = document.createElement('template');
        whole.innerHTML = NoteloomRender.render(reply);
        const source = (c) => {  // math as its TeX (KaTeX drew it in the stream)
            const copy = c.cloneNode(true);
            for (const m of [copy, ...copy.querySelectorAll('[data-tex]')]) if (m.dataset.tex) m.textContent = m.dataset.tex;
            return copy.textContent.replace(/\\s+/g, ' ');
        };
        const blocks = (root) => [...root.children].map((c) => c.nodeName + ':' + source(c));
        const drawn = blocks(el);
        const expected = blocks(whole.content);
        const at = drawn.findIndex((b, i) => b !== expected[i]);
        return { problems, same: JSON.stringify(drawn) === JSON.stringify(expected), drawn: drawn.slice(at, at + 3),
                 expected: expected.slice(at, at + 3), kept: first === el.firstElementChild && el.contains(middle),
                 pwned: window.pwned === undefined ? null : window.pwned,
                 pres: el.querySelectorAll('pre').length, last: el.lastElementChild.nodeName,
                 code: el.lastElementChild.textContent, highlighted: el.querySelectorAll('pre code.hljs').length,
                 table: el.querySelectorAll('table td').length };
    }""", reply)
    assert result["problems"] == [] and result["pwned"] is None
    assert result["same"], (result["drawn"], result["expected"])
    assert result["kept"], "finished blocks were rebuilt although their text never changed"
    assert result["pres"] == 2 and result["last"] == "PRE" and result["table"] == 2
    assert result["code"].startswith("for i in range(3):") and result["code"].count("# still in the fence") == 100
    assert result["highlighted"] == 2
    expect(page.locator("#out .math-inline .katex").first).to_be_visible()
    # The reply ends: the final render closes the fence and the text after it is prose again.
    page.evaluate("(md) => NoteloomRender.renderInto(document.getElementById('out'), md)", reply + "```\n\nDone.\n")
    expect(page.locator("#out > p").last).to_have_text("Done.")


def test_a_wide_table_scrolls_within_the_note_on_a_phone(phone: Any) -> None:
    row = "| " + " | ".join(f"column number {i}" for i in range(12)) + " |\n"
    markdown = row + "|" + "---|" * 12 + "\n" + row
    phone.evaluate("(md) => NoteloomRender.renderInto(document.getElementById('out'), md)", markdown)
    expect(phone.locator("#out table")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert phone.evaluate("(() => { const t = document.querySelector('#out table'); return t.scrollWidth > t.clientWidth; })()")


AXE = Path(__file__).with_name("vendor") / "axe.min.js"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_rendered_notes_have_no_serious_accessibility_violation(page: Any, live: Live, theme: str) -> None:
    """Every fixture, links resolved and unresolved, clickable and read-only tasks, code and
    math, scanned by axe-core in the light and the dark theme."""
    page.evaluate("(t) => { document.documentElement.dataset.theme = t; }", theme)
    garden = live.notes["garden"]
    extra = f"\n\n[plan](:/{garden}) [gone](:/{'f' * 32}) [[Garden plan]] [[No such note]]\n\n- [ ] open\n- [x] done\n"
    markdown = "\n\n".join(p.read_text(encoding="utf-8") for p in FIXTURES) + extra
    page.evaluate("""(md) => {
        const out = document.getElementById('out');
        const a = document.createElement('section'); const b = document.createElement('section');
        a.setAttribute('aria-label', 'read-only'); b.setAttribute('aria-label', 'clickable');
        out.replaceChildren(a, b);
        return Promise.all([NoteloomRender.renderInto(a, md),
                            NoteloomRender.renderInto(b, md, { onToggleTask: () => {} })]);
    }""", markdown)
    expect(page.locator("#out .math-display .katex-display").first).to_be_visible()
    page.evaluate(AXE.read_text(encoding="utf-8"))
    violations = page.evaluate("""async () => {
        const r = await axe.run(document.getElementById('out'), { resultTypes: ['violations'] });
        return r.violations.filter((v) => ['serious', 'critical'].includes(v.impact)).map((v) => ({ id: v.id,
            help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ': ' + (n.failureSummary || '').slice(0, 200)) }));
    }""")
    assert violations == [], json.dumps(violations, indent=1)


def test_the_servers_rendered_note_is_enhanced_in_place(page: Any, live: Live) -> None:
    """The read-only view shows the server's HTML (links resolved there) and enhances it."""
    note = live.api("POST", "/api/v1/notes", json={
        "title": "Served", "body": f"[[Garden plan]] [x](:/{'e' * 32})\n\n- [ ] water\n\n$a+b$\n\n```python\nimport os\n```\n"})
    rendered = live.api("GET", f"/api/v1/notes/{note['id']}/rendered")
    assert rendered["backlinks"] == []
    page.evaluate("""([html, id, updated]) => {
        const out = document.getElementById('out');
        out.innerHTML = html;
        return NoteloomRender.enhance(out, { noteId: id, updatedTime: updated,
            onNoteChanged: (n) => { out.dataset.saved = n.body; } });
    }""", [rendered["html"], note["id"], rendered["updated_time"]])
    out = page.locator("#out")
    expect(out.locator("a.wikilink")).to_have_attribute("href", f"/notes/{live.notes['garden']}")
    expect(out.locator("a", has_text="x")).to_have_class(re.compile(r"\blink-unresolved\b"))
    expect(out.locator("pre code.hljs .hljs-keyword")).to_have_text("import")
    expect(out.locator(".math-inline .katex")).to_have_count(1)
    page.get_by_role("checkbox", name=re.compile("water")).click()
    expect(out).to_have_attribute("data-saved", re.compile(r"- \[x\] water"))
    linker = live.api("POST", "/api/v1/notes", json={"title": "Points at it", "body": "see [[Served]]"})
    assert [b["id"] for b in live.api("GET", f"/api/v1/notes/{note['id']}/rendered")["backlinks"]] == [linker["id"]]
