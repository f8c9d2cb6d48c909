"""Rendering notes (issue 17): GFM, task items with their line, math kept as source, Joplin
``:/ID`` and ``[[Title]]`` links resolved as the reader sees them, backlinks, the task toggle,
and the sanitiser's lists shared with the page's twin (assets/src/markdown.js)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from noteloom.accounts import TokenScopes
from noteloom.app import App
from noteloom.web.app import create_web_app
from noteloom.web.render import _ALLOWED_TAGS, _ATTRIBUTES, render_markdown, toggle_task

ROOT = Path(__file__).resolve().parents[1]


def test_gfm_tables_strikethrough_and_code_blocks() -> None:
    html = render_markdown("| a | b |\n|---|---|\n| 1 | ~~two~~ |\n\n```python\nprint('<x>')\n```\n\n~~~\nplain\n~~~\n")
    assert "<table>" in html and "<th>a</th>" in html and "<td><s>two</s></td>" in html
    assert '<pre><code class="language-python">print(\'&lt;x&gt;\')\n</code></pre>' in html
    assert "<pre><code>plain\n</code></pre>" in html


def test_task_items_carry_their_source_line() -> None:
    body = "# List\n\n- [ ] buy milk\n- [x] post letter\n  - [ ] nested\n- plain item\n\n> - [X] quoted\n"
    html = render_markdown(body)
    items = re.findall(r'<li class="task-list-item" data-line="(\d+)"><input ([^>]*)>', html)
    assert [(int(n), "checked" in attrs) for n, attrs in items] == [(2, False), (3, True), (4, False), (7, True)]
    assert all('disabled' in attrs and 'type="checkbox"' in attrs for _, attrs in items)
    assert "<li>plain item</li>" in html
    assert toggle_task(body, 2, True) == body.replace("- [ ] buy milk", "- [x] buy milk")
    assert toggle_task(body, 3, False) == body.replace("- [x] post", "- [ ] post")
    assert toggle_task(body, 7, False) == body.replace("> - [X] quoted", "> - [ ] quoted")
    assert toggle_task(body, 5, True) is None and toggle_task(body, 0, True) is None
    assert toggle_task(body, 99, True) is None
    fenced = "```\n- [ ] not a task\n```\n"
    assert toggle_task(fenced, 1, True) is None


def test_math_is_kept_as_source_in_marked_elements() -> None:
    html = render_markdown("Euler: $e^{i\\pi} + 1 = 0$ costs $5 and $10.\n\n$$\n\\int_0^1 x<y\\,dx\n$$\n\n"
                           "$$a+b$$\n")
    assert '<span class="math-inline">e^{i\\pi} + 1 = 0</span>' in html
    assert "costs $5 and $10." in html
    assert '<div class="math-display">\\int_0^1 x&lt;y\\,dx</div>' in html
    assert '<div class="math-display">a+b</div>' in html
    assert "<code" not in render_markdown("`$x$`").replace("<code>$x$</code>", "")


def test_links_stay_pending_without_a_resolver() -> None:
    note, att = "a" * 32, "b" * 32
    html = render_markdown(f"[n](:/{note}) ![pic](:/{att}) [[Some Title]] [[Some Title|shown]]")
    assert re.search(rf'<a data-joplin-id="{note}" rel="[^"]+">n</a>', html)
    assert f'src="/attachments/{att}"' in html and f'data-joplin-id="{att}"' in html
    assert html.count('data-wikilink="Some Title"') == 2 and ">shown</a>" in html
    assert "href" not in html


def test_the_sanitiser_still_removes_scripts_handlers_and_unsafe_urls() -> None:
    html = render_markdown(
        '<script>alert(1)</script><style>p{}</style>\n\n<img src="x" onerror="alert(2)" data-joplin-id="y">\n\n'
        '[x](javascript:alert(3)) <a href="JaVa\tscript:alert(4)" onclick="z()" data-wikilink="t">y</a> '
        '<li data-line="3" style="color:red">i</li> <input type="checkbox" onchange="q()"> ![d](data:image/png;base64,AA)'
    )
    for bad in ("<script", "alert(1)", "<style", "onerror", "onclick", "onchange", 'href="java', "alert(4)",
                "style=", "data:image"):
        assert bad not in html.lower(), (bad, html)


def test_the_pages_sanitiser_is_given_the_same_lists() -> None:
    source = (ROOT / "assets/src/markdown.js").read_text(encoding="utf-8")
    tags = json.loads(re.search(r"const TAGS = (\[.*?\]);", source, re.S).group(1))  # type: ignore[union-attr]
    assert set(tags) == _ALLOWED_TAGS
    block = re.search(r"const ATTRIBUTES = \{(.*?)\};", source, re.S).group(1)  # type: ignore[union-attr]
    attrs = {m[0].strip('"'): set(json.loads(m[1])) for m in re.findall(r'("?[\w*]+"?): (\[[^\]]*\])', block)}
    assert attrs.pop("*") == {"lang", "title"}
    assert attrs == _ATTRIBUTES


# -- as a reader: members, foreign notes, the routes ---------------------------------------------


@dataclass
class Two:
    app: App
    web: object
    ann: str
    bob: str
    ann_ro: str
    ann_book: str
    bob_book: str
    read_book: str


@pytest.fixture
def two(any_app: App) -> Two:
    """Ann and Bob with a notebook each, and the owner's shared with Ann to read (SQLite and PostgreSQL)."""
    app = any_app
    ws = app.workspace
    owner = ws.ensure_owner("olga")
    ann = ws.add_person("ann", password="ann's long password")
    bob = ws.add_person("bob", password="bob's long password")
    ann_book = ws.create_notebook("Ann's", owner_id=ann.id).id
    bob_book = ws.create_notebook("Bob's", owner_id=bob.id).id
    read_book = ws.create_notebook("Olga's", owner_id=None).id
    ws.share_notebook(read_book, "ann", "read", actor=owner)
    return Two(app, create_web_app(app), ws.create_token(ann.id, name="t"), ws.create_token(bob.id, name="t"),
               ws.create_token(ann.id, name="ro", scopes=TokenScopes(read_only=True)), ann_book, bob_book, read_book)


@pytest.fixture
async def ann(two: Two) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=two.web), base_url="http://t",  # type: ignore[arg-type]
                                 headers={"Authorization": f"Bearer {two.ann}"}) as c:
        yield c


@pytest.mark.anyio
async def test_links_resolve_to_what_the_reader_may_see(two: Two, ann: httpx.AsyncClient) -> None:
    ws = two.app.workspace
    mine = ws.create_note("Garden plan", "roses", two.ann_book)
    shared = ws.create_note("Olga's list", "x", two.read_book)
    secret = ws.create_note("Bob secret", "x", two.bob_book)
    att = ws.add_attachment(mine.id, b"png", "p.png", mime="image/png")
    bob_att = ws.add_attachment(secret.id, b"png", "s.png", mime="image/png")
    missing = "f" * 32
    body = (f"[mine](:/{mine.id}) [shared](:/{shared.id}) [secret](:/{secret.id}) [gone](:/{missing}) "
            f"[file](:/{att.id}) ![img](:/{att.id}) ![theirs](:/{bob_att.id})\n\n"
            "[[Garden plan]] [[Olga's list|the list]] [[Bob secret]] [[No such note]]\n")
    page = ws.create_note("Links", body, two.ann_book)
    r = await ann.get(f"/api/v1/notes/{page.id}/rendered")
    assert r.status_code == 200, r.text
    html = r.json()["html"]
    assert re.search(rf'<a [^>]*href="/notes/{mine.id}"[^>]*>mine</a>', html)
    assert re.search(rf'<a [^>]*href="/notes/{shared.id}"[^>]*>shared</a>', html)
    assert re.search(rf'<a [^>]*href="/attachments/{att.id}"[^>]*>file</a>', html)
    assert re.search(rf'<img src="/attachments/{att.id}"', html)
    for label in ("secret", "gone"):
        tag = re.search(rf"<a [^>]*>{label}</a>", html).group(0)  # type: ignore[union-attr]
        assert "link-unresolved" in tag and "href" not in tag, tag
    theirs = re.search(r'<img [^>]*alt="theirs"[^>]*>', html).group(0)  # type: ignore[union-attr]
    assert "link-unresolved" in theirs and "src" not in theirs
    # A foreign id reads exactly like a missing one.
    assert re.sub(r"[0-9a-f]{32}", "ID", re.search(r"<a [^>]*>secret</a>", html).group(0)).replace(  # type: ignore[union-attr]
        "secret", "X") == re.sub(r"[0-9a-f]{32}", "ID", re.search(r"<a [^>]*>gone</a>", html).group(0)).replace(  # type: ignore[union-attr]
        "gone", "X")
    assert re.search(rf'<a class="wikilink"[^>]*href="/notes/{mine.id}"[^>]*>Garden plan</a>', html)
    assert re.search(rf'href="/notes/{shared.id}"[^>]*>the list</a>', html)
    for title in ("Bob secret", "No such note"):
        tag = re.search(rf'<a [^>]*>{title}</a>', html).group(0)  # type: ignore[union-attr]
        assert "link-unresolved" in tag and "href" not in tag
    assert "Bob secret" not in html.replace(">Bob secret</a>", "").replace('data-wikilink="Bob secret"', "")

    r = await ann.post("/api/v1/links/resolve", json={"ids": [mine.id, secret.id, missing, att.id, bob_att.id],
                                                       "titles": ["Garden plan", "Bob secret", "Olga's list"]})
    assert r.status_code == 200, r.text
    assert r.json() == {"notes": [mine.id], "attachments": [att.id],
                        "titles": {"Garden plan": mine.id, "Olga's list": shared.id}}
    assert (await ann.post("/api/v1/links/resolve", json={"ids": ["not-an-id"]})).status_code == 422


@pytest.mark.anyio
async def test_backlinks_list_the_notes_the_reader_may_see(two: Two, ann: httpx.AsyncClient) -> None:
    ws = two.app.workspace
    target = ws.create_note("Roses", "the target", two.ann_book)
    by_id = ws.create_note("By id", f"see [it](:/{target.id})", two.ann_book)
    by_title = ws.create_note("By title", "see [[Roses|my roses]]", two.ann_book)
    ws.create_note("In code", f"```\n:/{target.id} [[Roses]]\n```\n", two.ann_book)
    ws.create_note("Prose", "roses are red, Roses too", two.ann_book)
    ws.create_note("Bob's link", f"[[Roses]] :/{target.id} [x](:/{target.id})", two.bob_book)
    r = await ann.get(f"/api/v1/notes/{target.id}/backlinks")
    assert r.status_code == 200, r.text
    # (Newest first; notes made in the same millisecond come in either order.)
    assert sorted(b["title"] for b in r.json()) == ["By id", "By title"]
    rendered = (await ann.get(f"/api/v1/notes/{target.id}/rendered")).json()
    assert {b["id"] for b in rendered["backlinks"]} == {by_title.id, by_id.id}
    # A [[Title]] that leads to another note of that title for this reader is not a backlink.
    newer = ws.create_note("Roses", "a second note titled so", two.ann_book)
    assert [b["title"] for b in (await ann.get(f"/api/v1/notes/{target.id}/backlinks")).json()] == ["By id"]
    assert [b["title"] for b in (await ann.get(f"/api/v1/notes/{newer.id}/backlinks")).json()] == ["By title"]
    foreign = ws.create_note("Bob's own", "x", two.bob_book)
    nothing = await ann.get(f"/api/v1/notes/{'f' * 32}/backlinks")
    got = await ann.get(f"/api/v1/notes/{foreign.id}/backlinks")
    assert got.status_code == nothing.status_code == 404
    assert got.text.replace(foreign.id, "ID") == nothing.text.replace("f" * 32, "ID")


@pytest.mark.anyio
async def test_a_task_is_toggled_on_its_line(two: Two, ann: httpx.AsyncClient) -> None:
    ws = two.app.workspace
    note = ws.create_note("Chores", "# Chores\n\n- [ ] dishes\n- [x] laundry\n\ntext\n", two.ann_book)
    r = await ann.post(f"/api/v1/notes/{note.id}/tasks", json={"line": 2, "done": True,
                                                               "base_updated_time": note.updated_time})
    assert r.status_code == 200, r.text
    assert r.json()["body"] == "# Chores\n\n- [x] dishes\n- [x] laundry\n\ntext\n"
    assert ws.get_note(note.id).body == r.json()["body"]
    stale = await ann.post(f"/api/v1/notes/{note.id}/tasks", json={"line": 3, "done": False,
                                                                   "base_updated_time": note.updated_time})
    assert stale.status_code == 409 and ws.get_note(note.id).body == r.json()["body"]
    again = await ann.post(f"/api/v1/notes/{note.id}/tasks", json={"line": 3, "done": False,
                                                                   "base_updated_time": r.json()["updated_time"]})
    assert again.status_code == 200 and "- [ ] laundry" in again.json()["body"]
    for line in (0, 5, 40):
        bad = await ann.post(f"/api/v1/notes/{note.id}/tasks", json={"line": line, "done": True})
        assert bad.status_code == 422 and bad.json()["field"] == "line", bad.text
    foreign = ws.create_note("Bob's", "- [ ] his", two.bob_book)
    nothing = await ann.post(f"/api/v1/notes/{'f' * 32}/tasks", json={"line": 0, "done": True})
    got = await ann.post(f"/api/v1/notes/{foreign.id}/tasks", json={"line": 0, "done": True})
    assert got.status_code == nothing.status_code == 404 and ws.get_note(foreign.id).body == "- [ ] his"
    assert got.text.replace(foreign.id, "ID") == nothing.text.replace("f" * 32, "ID")
    shared = ws.create_note("Olga's", "- [ ] hers", two.read_book)
    assert (await ann.post(f"/api/v1/notes/{shared.id}/tasks", json={"line": 0, "done": True})).status_code == 403
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=two.web), base_url="http://t",  # type: ignore[arg-type]
                                 headers={"Authorization": f"Bearer {two.ann_ro}"}) as ro:
        assert (await ro.post(f"/api/v1/notes/{note.id}/tasks", json={"line": 2, "done": False})).status_code == 403
        assert (await ro.post("/api/v1/links/resolve", json={"ids": [note.id]})).json()["notes"] == [note.id]
    assert ws.get_note(shared.id).body == "- [ ] hers"


@pytest.mark.anyio
async def test_titles_with_quotes_operators_or_no_words_resolve_and_link_back(two: Two,
                                                                              ann: httpx.AsyncClient) -> None:
    ws = two.app.workspace
    odd = ['we"ird " title', "C++ & AND OR NEAR(x)", "!!!", "a\\b*", "中文标题"]
    made = {t: ws.create_note(t, "x", two.ann_book).id for t in odd}
    r = await ann.post("/api/v1/links/resolve", json={"titles": [*odd, "a\x00b", '"', "*"]})
    assert r.status_code == 200, r.text
    assert r.json()["titles"] == made
    linker = ws.create_note("Linker", " ".join(f"[[{t}]]" for t in odd), two.ann_book)
    for title, note_id in made.items():
        got = await ann.get(f"/api/v1/notes/{note_id}/backlinks")
        assert got.status_code == 200 and [b["id"] for b in got.json()] == [linker.id], (title, got.text)
    bad = await ann.post(f"/api/v1/notes/{linker.id}/tasks", json={"line": 0, "done": "yes"})
    assert bad.status_code == 422 and bad.json()["field"] == "done"
